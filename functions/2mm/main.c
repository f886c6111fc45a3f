/*
 * 2mm — two chained matrix multiplies, D = alpha A B C + beta D (Luge numeric kernel, in the
 * spirit of PolyBench/C's 2mm; see common/kernel.h for the request/response format).
 *
 * Request: "2mm <NI> <NJ> <NK> <NL> [seed <s>]". Data, in fill order: A (NI x NK),
 * B (NK x NJ), C (NJ x NL), D (NI x NL); alpha = 1.5, beta = 1.2. Computed as
 * T = alpha A B (NI x NJ), then D = beta D + T C, both in i-k-j loop order.
 * Result summarised: D.
 */
#define LUGE_NAME "2mm"
#include "../common/luge.h"
#include "../common/kernel.h"

/* out (n x m) = scale_out * out + scale_ab * a (n x p) b (p x m), i-k-j order. */
static void mul_acc(double *out, const double *a, const double *b, size_t n, size_t p, size_t m,
                    double scale_out, double scale_ab) {
    for (size_t i = 0; i < n; i++) {
        double *o = out + i * m;
        for (size_t j = 0; j < m; j++) {
            o[j] *= scale_out;
        }
        for (size_t k = 0; k < p; k++) {
            const double f = scale_ab * a[i * p + k];
            const double *br = b + k * m;
            for (size_t j = 0; j < m; j++) {
                o[j] += f * br[j];
            }
        }
    }
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    kernel_req req;
    const int32_t *d = kernel_begin(&req, in, len, 4);
    const size_t ni = (size_t)d[0], nj = (size_t)d[1], nk = (size_t)d[2], nl = (size_t)d[3];
    double *A = kernel_data(&req, ni * nk);
    double *B = kernel_data(&req, nk * nj);
    double *C = kernel_data(&req, nj * nl);
    double *D = kernel_data(&req, ni * nl);
    double *T = (double *)luge_alloc(ni * nj, sizeof(double)); /* zeroed */
    mul_acc(T, A, B, ni, nk, nj, 0.0, 1.5);
    mul_acc(D, T, C, ni, nj, nl, 1.2, 1.0);
    kernel_respond(out, &req, D, ni, nl);
}
