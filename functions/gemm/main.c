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
    int32_t d[3];
    uint64_t seed;
    kernel_header(in, len, "gemm", 3, d, &seed);
    const size_t ni = (size_t)d[0], nj = (size_t)d[1], nk = (size_t)d[2];
    double *C = (double *)luge_alloc(ni * nj, sizeof(double));
    double *A = (double *)luge_alloc(ni * nk, sizeof(double));
    double *B = (double *)luge_alloc(nk * nj, sizeof(double));
    luge_rng g;
    kernel_rng(&g, "gemm", seed);
    kernel_fill(&g, C, ni * nj);
    kernel_fill(&g, A, ni * nk);
    kernel_fill(&g, B, nk * nj);
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
    kernel_put_head(out, "gemm", 3, d, seed);
    kernel_put_summary(out, C, ni, nj);
}
