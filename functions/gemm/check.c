/*
 * gemm/check.c — checker for `gemm` (native only): recomputes C = alpha A B + beta C from the
 * same seeded data with plain dot products (loop order i-j-k, alpha applied after the sum) and
 * compares the summary within a relative 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "gemm", 3);
    size_t ni = d[0], nj = d[1], nk = d[2];
    double *C = kernel_data(&req, ni * nj), *A = kernel_data(&req, ni * nk);
    double *B = kernel_data(&req, nk * nj);
    for (size_t i = 0; i < ni; i++) {
        for (size_t j = 0; j < nj; j++) {
            double s = 0;
            for (size_t k = 0; k < nk; k++) {
                s += A[i * nk + k] * B[k * nj + j];
            }
            C[i * nj + j] = 1.2 * C[i * nj + j] + 1.5 * s;
        }
    }
    kernel_check_end(&req, C, ni, nj, 1e-12);
    return 0;
}
