/*
 * 2mm/check.c — checker for `2mm` (native only): recomputes D = alpha (A B) C + beta D from the
 * same seeded data with plain dot products (i-j-k) and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "2mm", 4);
    size_t ni = d[0], nj = d[1], nk = d[2], nl = d[3];
    double *A = kernel_data(&req, ni * nk), *B = kernel_data(&req, nk * nj);
    double *C = kernel_data(&req, nj * nl), *D = kernel_data(&req, ni * nl);
    double *T = malloc(sizeof(double) * ni * nj);
    for (size_t i = 0; i < ni; i++) {
        for (size_t j = 0; j < nj; j++) {
            double s = 0;
            for (size_t k = 0; k < nk; k++) {
                s += A[i * nk + k] * B[k * nj + j];
            }
            T[i * nj + j] = 1.5 * s;
        }
    }
    for (size_t i = 0; i < ni; i++) {
        for (size_t l = 0; l < nl; l++) {
            double s = 0;
            for (size_t j = 0; j < nj; j++) {
                s += T[i * nj + j] * C[j * nl + l];
            }
            D[i * nl + l] = 1.2 * D[i * nl + l] + s;
        }
    }
    kernel_check_end(&req, D, ni, nl, 1e-12);
    return 0;
}
