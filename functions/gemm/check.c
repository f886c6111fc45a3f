/*
 * gemm/check.c — checker for `gemm` (native only): recomputes C = alpha A B + beta C from the
 * same seeded data with plain dot products (loop order i-j-k, alpha applied after the sum) and
 * compares the summary within a relative 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int d[3];
    uint64_t seed;
    kernel_read_request(in, "gemm", 3, d, &seed);
    size_t ni = d[0], nj = d[1], nk = d[2];
    double *C = malloc(sizeof(double) * ni * nj), *A = malloc(sizeof(double) * ni * nk);
    double *B = malloc(sizeof(double) * nk * nj);
    luge_rng g;
    kernel_rng(&g, "gemm", seed);
    kernel_fill(&g, C, ni * nj);
    kernel_fill(&g, A, ni * nk);
    kernel_fill(&g, B, nk * nj);
    for (size_t i = 0; i < ni; i++) {
        for (size_t j = 0; j < nj; j++) {
            double s = 0;
            for (size_t k = 0; k < nk; k++) {
                s += A[i * nk + k] * B[k * nj + j];
            }
            C[i * nj + j] = 1.2 * C[i * nj + j] + 1.5 * s;
        }
    }
    kernel_check_summary(out, "gemm", 3, d, seed, C, ni, nj, 1e-12);
    return 0;
}
