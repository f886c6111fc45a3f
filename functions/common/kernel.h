/*
 * kernel.h — what Luge's PolyBench-style numeric kernels (gemm, 2mm, atax, jacobi-2d,
 * seidel-2d, floyd-warshall, covariance) share: the request header, the deterministic input
 * data, and the result summary. Included by each kernel's main.c (wasm and native) and by its
 * checker (native), so both see the same data; the kernels themselves are Luge's own code.
 *
 * The Sledge paper measures its Wasm overhead on PolyBench/C (Sledge §5,
 * Table 1); these kernels play that role for Luge (see docs/functions.md).
 *
 * Request (text): "<kernel> <d1> .. <dk> [seed <s>]" — the kernel's name, its dimensions
 * (each 1..4000, kernel-specific meaning) and an optional seed (default 1). The function
 * builds its arrays from the seed: a xorshift stream seeded with seed ^ kernel_hash(name)
 * fills them, in the order the kernel documents, with uniform values in [0, 1).
 * Response (text):
 *   kernel <name>
 *   dims <d1> .. <dk>
 *   seed <s>
 *   sum <sum of the result's elements>
 *   wsum <sum of element(i, j) * ((7 i + 3 j) mod 11 + 1)>     (catches misplaced values)
 *   corners <(0,0)> <(0,c-1)> <(r-1,0)> <(r-1,c-1)>
 * with 17 significant digits (integers for floyd-warshall).
 */
#ifndef LUGE_KERNEL_H
#define LUGE_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "lugemath.h"

#define KERNEL_MAX_DIM 4000
#define KERNEL_MAX_DIMS 4

/* FNV-1a of the kernel name, so that kernels with the same seed get different data. */
static uint64_t kernel_hash(const char *name) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *name; name++) {
        h = (h ^ (uint8_t)*name) * 0x100000001b3ull;
    }
    return h;
}

static inline void kernel_rng(luge_rng *g, const char *name, uint64_t seed) {
    luge_rng_seed(g, seed ^ kernel_hash(name));
}

/* Fills n doubles with uniform values in [0, 1). */
static void kernel_fill(luge_rng *g, double *a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        a[i] = luge_rng_unit(g);
    }
}

/* The weight of element (i, j) in wsum. */
static inline int kernel_weight(size_t i, size_t j) { return (int)((7 * i + 3 * j) % 11) + 1; }

#ifdef LUGE_H /* the function side: parse the header, print the summary */

/* Parses "<name> d1 .. dk [seed s]" into dims and *seed. */
static void kernel_header(const uint8_t *in, size_t len, const char *name, int k, int32_t *dims,
                          uint64_t *seed) {
    luge_cursor c = luge_cursor_new(in, len);
    luge_expect(&c, name, "request must start with the kernel name");
    for (int i = 0; i < k; i++) {
        dims[i] = (int32_t)luge_int(&c, 1, KERNEL_MAX_DIM, "bad or missing dimension (1..4000)");
    }
    *seed = 1;
    luge_skip_space(&c, 1);
    if (c.p != c.end) {
        luge_expect(&c, "seed", "expected 'seed <n>' or the end of the request");
        *seed = (uint64_t)luge_int(&c, 0, INT64_MAX, "bad seed");
    }
    luge_expect_end(&c, "trailing data after the request");
}

static void kernel_put_head(luge_out *out, const char *name, int k, const int32_t *dims,
                            uint64_t seed) {
    luge_put_str(out, "kernel ");
    luge_put_str(out, name);
    luge_put_str(out, "\ndims");
    for (int i = 0; i < k; i++) {
        luge_put_char(out, ' ');
        luge_put_i64(out, dims[i]);
    }
    luge_put_str(out, "\nseed ");
    luge_put_u64(out, seed);
    luge_put_char(out, '\n');
}

/* Summary of an r x c row-major double array (a vector is 1 x c). */
static void kernel_put_summary(luge_out *out, const double *a, size_t r, size_t c) {
    double sum = 0.0, wsum = 0.0;
    for (size_t i = 0; i < r; i++) {
        for (size_t j = 0; j < c; j++) {
            sum += a[i * c + j];
            wsum += a[i * c + j] * (double)kernel_weight(i, j);
        }
    }
    luge_put_str(out, "sum ");
    luge_put_sci(out, sum, 17);
    luge_put_str(out, "\nwsum ");
    luge_put_sci(out, wsum, 17);
    luge_put_str(out, "\ncorners");
    const double corner[4] = {a[0], a[c - 1], a[(r - 1) * c], a[(r - 1) * c + c - 1]};
    for (int i = 0; i < 4; i++) {
        luge_put_char(out, ' ');
        luge_put_sci(out, corner[i], 17);
    }
    luge_put_char(out, '\n');
}

#endif /* LUGE_H */

#ifdef LUGE_TOOLS_H /* the checker side */

/* Reads "<name> d1 .. dk [seed s]" from a request file. */
static void kernel_read_request(const char *in, const char *name, int k, int *dims,
                                uint64_t *seed) {
    char word[64];
    int used;
    if (sscanf(in, "%63s%n", word, &used) != 1 || strcmp(word, name) != 0) {
        tool_fail("request is not for %s", name);
    }
    in += used;
    for (int i = 0; i < k; i++) {
        if (sscanf(in, "%d%n", &dims[i], &used) != 1) {
            tool_fail("request lacks dimension %d", i + 1);
        }
        in += used;
    }
    unsigned long long s = 1;
    if (sscanf(in, " seed %llu", &s) < 1) {
        s = 1;
    }
    *seed = s;
}

/* Compares the response's summary lines with a reference array (relative tolerance tol). */
static void kernel_check_summary(const char *out, const char *name, int k, const int *dims,
                                 uint64_t seed, const double *a, size_t r, size_t c, double tol) {
    char head[256];
    int n = snprintf(head, sizeof head, "kernel %s\ndims", name);
    for (int i = 0; i < k; i++) {
        n += snprintf(head + n, sizeof head - n, " %d", dims[i]);
    }
    snprintf(head + n, sizeof head - n, "\nseed %llu\n", (unsigned long long)seed);
    if (strncmp(out, head, strlen(head)) != 0) {
        tool_fail("response header differs from the request");
    }
    double sum = 0, wsum = 0, scale = 0;
    for (size_t i = 0; i < r; i++) {
        for (size_t j = 0; j < c; j++) {
            sum += a[i * c + j];
            wsum += a[i * c + j] * kernel_weight(i, j);
            scale += luge_fabs(a[i * c + j]) * kernel_weight(i, j);
        }
    }
    double got[4], corner[4] = {a[0], a[c - 1], a[(r - 1) * c], a[(r - 1) * c + c - 1]};
    tool_get_numbers(out, "sum", got, 1);
    /* a sum's rounding error scales with the sum of magnitudes, not with the sum itself */
    if (luge_fabs(got[0] - sum) > tol * (scale + 1)) {
        tool_fail("sum %.17g, reference %.17g", got[0], sum);
    }
    tool_get_numbers(out, "wsum", got, 1);
    if (luge_fabs(got[0] - wsum) > tol * (scale + 1)) {
        tool_fail("wsum %.17g, reference %.17g", got[0], wsum);
    }
    tool_get_numbers(out, "corners", got, 4);
    for (int i = 0; i < 4; i++) {
        if (!tool_close(got[i], corner[i], tol)) {
            tool_fail("corner %d: %.17g, reference %.17g", i, got[i], corner[i]);
        }
    }
    printf("ok: sum %.6g and wsum %.6g match an independent reference\n", sum, wsum);
}

#endif /* LUGE_TOOLS_H */

#endif /* LUGE_KERNEL_H */
