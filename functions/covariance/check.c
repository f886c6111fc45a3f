/*
 * covariance/check.c — checker for `covariance` (native only): recomputes every entry as a
 * dot product of two centred columns (means taken per column) from the same seeded data,
 * checks the matrix is symmetric with a non-negative diagonal, and compares the summary within
 * 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "covariance", 2);
    int m = d[0], n = d[1];
    double *x = kernel_data(&req, (size_t)n * m), *cov = malloc(sizeof(double) * m * m);
    for (int j = 0; j < m; j++) {
        double mu = 0;
        for (int k = 0; k < n; k++) {
            mu += x[k * m + j];
        }
        mu /= n;
        for (int k = 0; k < n; k++) {
            x[k * m + j] -= mu;
        }
    }
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) {
                s += x[k * m + i] * x[k * m + j];
            }
            cov[i * m + j] = s / (n - 1);
        }
        if (!(cov[i * m + i] >= 0)) {
            tool_fail("negative variance");
        }
    }
    kernel_check_end(&req, cov, m, m, 1e-12);
    return 0;
}
