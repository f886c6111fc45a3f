/*
 * atax — matrix transpose times matrix-vector product, y = A^T (A x) (Luge numeric kernel, in
 * the spirit of PolyBench/C's atax; see common/kernel.h for the request/response format).
 *
 * Request: "atax <M> <N> [seed <s>]". Data, in fill order: A (M x N), x (N). One pass over
 * the rows of A: t = A[i] . x, then y += t A[i]. Result summarised: y (1 x N).
 */
#define LUGE_NAME "atax"
#include "../common/luge.h"
#include "../common/kernel.h"

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    kernel_req req;
    const int32_t *d = kernel_begin(&req, in, len, 2);
    const size_t m = (size_t)d[0], n = (size_t)d[1];
    double *A = kernel_data(&req, m * n);
    double *x = kernel_data(&req, n);
    double *y = (double *)luge_alloc(n, sizeof(double)); /* zeroed */
    for (size_t i = 0; i < m; i++) {
        const double *a = A + i * n;
        double t = 0.0;
        for (size_t j = 0; j < n; j++) {
            t += a[j] * x[j];
        }
        for (size_t j = 0; j < n; j++) {
            y[j] += a[j] * t;
        }
    }
    kernel_respond(out, &req, y, 1, n);
}
