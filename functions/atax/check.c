/*
 * atax/check.c — checker for `atax` (native only): recomputes t = A x, then y = A^T t column by
 * column, from the same seeded data and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int d[2];
    uint64_t seed;
    kernel_read_request(in, "atax", 2, d, &seed);
    size_t m = d[0], n = d[1];
    double *A = malloc(sizeof(double) * m * n), *x = malloc(sizeof(double) * n);
    double *t = malloc(sizeof(double) * m), *y = malloc(sizeof(double) * n);
    luge_rng g;
    kernel_rng(&g, "atax", seed);
    kernel_fill(&g, A, m * n);
    kernel_fill(&g, x, n);
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
    kernel_check_summary(out, "atax", 2, d, seed, y, 1, n, 1e-12);
    return 0;
}
