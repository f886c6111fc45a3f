/*
 * seidel-2d/check.c — checker for `seidel-2d` (native only): re-runs the in-place sweep from
 * the same seeded data (row sums accumulated row by row, a different association than the
 * function's) and compares the summary within 1e-12.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int d[2];
    uint64_t seed;
    kernel_read_request(in, "seidel-2d", 2, d, &seed);
    int n = d[0], steps = d[1];
    double *A = malloc(sizeof(double) * n * n);
    luge_rng g;
    kernel_rng(&g, "seidel-2d", seed);
    kernel_fill(&g, A, (size_t)n * n);
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
    kernel_check_summary(out, "seidel-2d", 2, d, seed, A, n, n, 1e-12);
    return 0;
}
