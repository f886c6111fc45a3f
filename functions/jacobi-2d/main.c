/*
 * jacobi-2d — 2-D Jacobi relaxation, a 5-point stencil over two grids (Luge numeric kernel,
 * in the spirit of PolyBench/C's jacobi-2d; see common/kernel.h for the request/response
 * format).
 *
 * Request: "jacobi-2d <N> <TSTEPS> [seed <s>]", N >= 3. Data, in fill order: A (N x N),
 * B (N x N). Each time step sets every interior point of B to 0.2 x (the point + its four
 * neighbours) in A, then every interior point of A likewise from B; the borders never change.
 * Result summarised: A.
 */
#define LUGE_NAME "jacobi-2d"
#include "../common/luge.h"
#include "../common/kernel.h"

/* dst interior = 0.2 * 5-point sum of src */
static void sweep(double *dst, const double *src, size_t n) {
    for (size_t i = 1; i + 1 < n; i++) {
        const double *up = src + (i - 1) * n, *mid = src + i * n, *dn = src + (i + 1) * n;
        double *o = dst + i * n;
        for (size_t j = 1; j + 1 < n; j++) {
            o[j] = 0.2 * (mid[j] + mid[j - 1] + mid[j + 1] + dn[j] + up[j]);
        }
    }
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    int32_t d[2];
    uint64_t seed;
    kernel_header(in, len, "jacobi-2d", 2, d, &seed);
    if (d[0] < 3) {
        luge_fail("N must be at least 3");
    }
    const size_t n = (size_t)d[0];
    const int32_t steps = d[1];
    double *A = (double *)luge_alloc(n * n, sizeof(double));
    double *B = (double *)luge_alloc(n * n, sizeof(double));
    luge_rng g;
    kernel_rng(&g, "jacobi-2d", seed);
    kernel_fill(&g, A, n * n);
    kernel_fill(&g, B, n * n);
    for (int32_t t = 0; t < steps; t++) {
        sweep(B, A, n);
        sweep(A, B, n);
    }
    kernel_put_head(out, "jacobi-2d", 2, d, seed);
    kernel_put_summary(out, A, n, n);
}
