/*
 * seidel-2d/check.c — checker for `seidel-2d` (native only): re-runs the in-place sweep from
 * the same seeded data (row sums accumulated row by row, a different association than the
 * function's) and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "seidel-2d", 2);
    int n = d[0], steps = d[1];
    double *A = kernel_data(&req, (size_t)n * n);
    for (int t = 0; t < steps; t++) {
        for (int i = 1; i < n - 1; i++) {
            for (int j = 1; j < n - 1; j++) {
                double s = 0;
                for (int di = -1; di <= 1; di++) {
                    double row = 0;
                    for (int dj = -1; dj <= 1; dj++) {
                        row += A[(size_t)(i + di) * n + j + dj];
                    }
                    s += row;
                }
                A[(size_t)i * n + j] = s / 9.0;
            }
        }
    }
    kernel_check_end(&req, A, n, n, 1e-12);
    return 0;
}
