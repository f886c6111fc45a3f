/*
 * atax/check.c — checker for `atax` (native only): recomputes t = A x, then y = A^T t column by
 * column, from the same seeded data and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "atax", 2);
    size_t m = d[0], n = d[1];
    double *A = kernel_data(&req, m * n), *x = kernel_data(&req, n);
    double *t = malloc(sizeof(double) * m), *y = malloc(sizeof(double) * n);
    for (size_t i = 0; i < m; i++) {
        t[i] = 0;
        for (size_t j = 0; j < n; j++) {
            t[i] += A[i * n + j] * x[j];
        }
    }
    for (size_t j = 0; j < n; j++) {
        y[j] = 0;
        for (size_t i = 0; i < m; i++) {
            y[j] += A[i * n + j] * t[i];
        }
    }
    kernel_check_end(&req, y, 1, n, 1e-12);
    return 0;
}
