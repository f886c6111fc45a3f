/*
 * jacobi-2d/check.c — checker for `jacobi-2d` (native only): re-runs the relaxation from the
 * same seeded data with explicit neighbour indexing into fresh copies and compares the summary
 * within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int d[2];
    uint64_t seed;
    kernel_read_request(in, "jacobi-2d", 2, d, &seed);
    int n = d[0], steps = d[1];
    double *A = malloc(sizeof(double) * n * n), *B = malloc(sizeof(double) * n * n);
    luge_rng g;
    kernel_rng(&g, "jacobi-2d", seed);
    kernel_fill(&g, A, (size_t)n * n);
    kernel_fill(&g, B, (size_t)n * n);
#define AT(M, i, j) M[(size_t)(i) * n + (j)]
    for (int t = 0; t < steps; t++) {
        for (int i = 1; i < n - 1; i++) {
            for (int j = 1; j < n - 1; j++) {
                AT(B, i, j) = (AT(A, i, j) + AT(A, i, j - 1) + AT(A, i, j + 1) +
                               AT(A, i + 1, j) + AT(A, i - 1, j)) / 5.0;
            }
        }
        for (int i = 1; i < n - 1; i++) {
            for (int j = 1; j < n - 1; j++) {
                AT(A, i, j) = (AT(B, i, j) + AT(B, i, j - 1) + AT(B, i, j + 1) +
                               AT(B, i + 1, j) + AT(B, i - 1, j)) / 5.0;
            }
        }
    }
    kernel_check_summary(out, "jacobi-2d", 2, d, seed, A, n, n, 1e-12);
    return 0;
}
