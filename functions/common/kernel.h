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
 *
 * A kernel's luge_run (main.c) is kernel_begin, kernel_data for each array in fill order, the
 * kernel's own loops, kernel_respond; its checker (check.c) mirrors it with kernel_check_begin,
 * kernel_data, an independent reference computation and kernel_check_end.
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

/* Fills n doubles with uniform values in [0, 1). */
static void kernel_fill(luge_rng *g, double *a, size_t n) {
    for (size_t i = 0; i < n; i++) {
        a[i] = luge_rng_unit(g);
    }
}

/* The weight of element (i, j) in wsum. */
static inline int kernel_weight(size_t i, size_t j) { return (int)((7 * i + 3 * j) % 11) + 1; }

/* One request as a kernel and its checker both see it, filled by kernel_begin (function) or
 * kernel_check_begin (checker): the request's dimensions and seed, and the stream the kernel's
 * data is drawn from, seeded with seed ^ kernel_hash(name). Both sides take their arrays from
 * the stream with kernel_data, in the order the kernel documents, so they see the same data. */
typedef struct {
    const char *name;
    int k; /* number of dimensions */
    int32_t dims[KERNEL_MAX_DIMS];
    uint64_t seed;
    luge_rng rng;
    const char *response; /* checker only: the response under check */
} kernel_req;

/* Records the kernel's name and dimension count and seeds its data stream from req->seed. */
static void kernel_req_seed(kernel_req *req, const char *name, int k) {
    req->name = name;
    req->k = k;
    luge_rng_seed(&req->rng, req->seed ^ kernel_hash(name));
}

#ifdef LUGE_H /* the function side: parse the request, draw the data, print the summary */

/* Starts a kernel's luge_run: parses "<LUGE_NAME> d1 .. dk [seed s]" (each dimension 1..4000,
 * seed 1 by default) into req, seeds its data stream, and returns the dimensions. */
static const int32_t *kernel_begin(kernel_req *req, const uint8_t *in, size_t len, int k) {
    luge_cursor c = luge_cursor_new(in, len);
    luge_expect(&c, LUGE_NAME, "request must start with the kernel name");
    for (int i = 0; i < k; i++) {
        req->dims[i] =
            (int32_t)luge_int(&c, 1, KERNEL_MAX_DIM, "bad or missing dimension (1..4000)");
    }
    req->seed = 1;
    luge_skip_space(&c, 1);
    if (c.p != c.end) {
        luge_expect(&c, "seed", "expected 'seed <n>' or the end of the request");
        req->seed = (uint64_t)luge_int(&c, 0, INT64_MAX, "bad seed");
    }
    luge_expect_end(&c, "trailing data after the request");
    kernel_req_seed(req, LUGE_NAME, k);
    return req->dims;
}

/* kernel_begin for the stencil kernels (jacobi-2d, seidel-2d), whose request is
 * "<N> <TSTEPS>": returns N, which must be at least 3 (a grid with an interior), and sets
 * *steps. */
static size_t kernel_begin_grid(kernel_req *req, const uint8_t *in, size_t len, int32_t *steps) {
    const int32_t *d = kernel_begin(req, in, len, 2);
    if (d[0] < 3) {
        luge_fail("N must be at least 3");
    }
    *steps = d[1];
    return (size_t)d[0];
}

/* The next n values of the kernel's data stream, in a new luge_alloc array. */
static double *kernel_data(kernel_req *req, size_t n) {
    double *a = (double *)luge_alloc(n, sizeof(double));
    kernel_fill(&req->rng, a, n);
    return a;
}

/* Ends a kernel's luge_run: the kernel, dims and seed lines, then the summary of the r x c
 * row-major result a (a vector is 1 x c). */
static void kernel_respond(luge_out *out, const kernel_req *req, const double *a, size_t r,
                           size_t c) {
    luge_put_str(out, "kernel ");
    luge_put_str(out, req->name);
    luge_put_str(out, "\ndims");
    for (int i = 0; i < req->k; i++) {
        luge_put_char(out, ' ');
        luge_put_i64(out, req->dims[i]);
    }
    luge_put_str(out, "\nseed ");
    luge_put_u64(out, req->seed);
    luge_put_char(out, '\n');
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

#ifdef LUGE_TOOLS_H /* the checker side: the same data, an independent reference */

/* Starts a kernel's checker: reads the request and response files named on the command line
 * (tool_check_args), parses the request "<name> d1 .. dk [seed s]" into req (keeping the
 * response text in req->response), seeds the data stream, and returns the dimensions. */
static const int32_t *kernel_check_begin(kernel_req *req, int argc, char **argv,
                                         const char *name, int k) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    req->response = out;
    char word[64];
    int used;
    if (sscanf(in, "%63s%n", word, &used) != 1 || strcmp(word, name) != 0) {
        tool_fail("request is not for %s", name);
    }
    in += used;
    for (int i = 0; i < k; i++) {
        int v;
        if (sscanf(in, "%d%n", &v, &used) != 1) {
            tool_fail("request lacks dimension %d", i + 1);
        }
        req->dims[i] = v;
        in += used;
    }
    unsigned long long s = 1;
    if (sscanf(in, " seed %llu", &s) < 1) {
        s = 1;
    }
    req->seed = s;
    kernel_req_seed(req, name, k);
    return req->dims;
}

/* The next n values of the kernel's data stream, in a new malloc'd array. */
static double *kernel_data(kernel_req *req, size_t n) {
    double *a = malloc(sizeof(double) * n);
    kernel_fill(&req->rng, a, n);
    return a;
}

/* Ends a kernel's checker: compares the response's header and summary lines with the reference
 * result a (r x c, row-major) within relative tolerance tol, failing the check on a mismatch,
 * and prints the "ok" line. */
static void kernel_check_end(const kernel_req *req, const double *a, size_t r, size_t c,
                             double tol) {
    const char *out = req->response;
    char head[256];
    int n = snprintf(head, sizeof head, "kernel %s\ndims", req->name);
    for (int i = 0; i < req->k; i++) {
        n += snprintf(head + n, sizeof head - n, " %d", (int)req->dims[i]);
    }
    snprintf(head + n, sizeof head - n, "\nseed %llu\n", (unsigned long long)req->seed);
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
