/*
 * 2mm/check.c — checker for `2mm` (native only): recomputes D = alpha (A B) C + beta D from the
 * same seeded data with plain dot products (i-j-k) and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int d[4];
    uint64_t seed;
    kernel_read_request(in, "2mm", 4, d, &seed);
    size_t ni = d[0], nj = d[1], nk = d[2], nl = d[3];
    double *A = malloc(sizeof(double) * ni * nk), *B = malloc(sizeof(double) * nk * nj);
    double *C = malloc(sizeof(double) * nj * nl), *D = malloc(sizeof(double) * ni * nl);
    double *T = malloc(sizeof(double) * ni * nj);
    luge_rng g;
    kernel_rng(&g, "2mm", seed);
    kernel_fill(&g, A, ni * nk);
    kernel_fill(&g, B, nk * nj);
    kernel_fill(&g, C, nj * nl);
    kernel_fill(&g, D, ni * nl);
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
    kernel_check_summary(out, "2mm", 4, d, seed, D, ni, nl, 1e-12);
    return 0;
}
