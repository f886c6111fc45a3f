/*
 * gemm — general matrix multiply, C = alpha A B + beta C (Luge numeric kernel, in the spirit
 * of PolyBench/C's gemm; see common/kernel.h for the request/response format).
 *
 * Request: "gemm <NI> <NJ> <NK> [seed <s>]". Data, in fill order: C (NI x NJ), A (NI x NK),
 * B (NK x NJ); alpha = 1.5, beta = 1.2. Result summarised: C.
 * Loop order i-k-j: the innermost loop streams a row of B into a row of C.
 */
#define LUGE_NAME "gemm"
#include "../common/luge.h"
#include "../common/kernel.h"

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    kernel_req req;
    const int32_t *d = kernel_begin(&req, in, len, 3);
    const size_t ni = (size_t)d[0], nj = (size_t)d[1], nk = (size_t)d[2];
    double *C = kernel_data(&req, ni * nj);
    double *A = kernel_data(&req, ni * nk);
    double *B = kernel_data(&req, nk * nj);
    const double alpha = 1.5, beta = 1.2;

    for (size_t i = 0; i < ni; i++) {
        double *c = C + i * nj;
        for (size_t j = 0; j < nj; j++) {
            c[j] *= beta;
        }
        for (size_t k = 0; k < nk; k++) {
            const double a = alpha * A[i * nk + k];
            const double *b = B + k * nj;
            for (size_t j = 0; j < nj; j++) {
                c[j] += a * b[j];
            }
        }
    }
    kernel_respond(out, &req, C, ni, nj);
}
