/*
 * jacobi-2d/check.c — checker for `jacobi-2d` (native only): re-runs the relaxation from the
 * same seeded data with explicit neighbour indexing into fresh copies and compares the summary
 * within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "jacobi-2d", 2);
    int n = d[0], steps = d[1];
    double *A = kernel_data(&req, (size_t)n * n), *B = kernel_data(&req, (size_t)n * n);
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
    kernel_check_end(&req, A, n, n, 1e-12);
    return 0;
}
