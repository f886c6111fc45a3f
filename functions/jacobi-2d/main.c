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
    kernel_req req;
    int32_t steps;
    const size_t n = kernel_begin_grid(&req, in, len, &steps);
    double *A = kernel_data(&req, n * n);
    double *B = kernel_data(&req, n * n);
    for (int32_t t = 0; t < steps; t++) {
        sweep(B, A, n);
        sweep(A, B, n);
    }
    kernel_respond(out, &req, A, n, n);
}
