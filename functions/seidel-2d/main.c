/*
 * seidel-2d — 2-D Gauss-Seidel relaxation, a 9-point stencil updated in place (Luge numeric
 * kernel, in the spirit of PolyBench/C's seidel-2d; see common/kernel.h for the
 * request/response format).
 *
 * Request: "seidel-2d <N> <TSTEPS> [seed <s>]", N >= 3. Data: A (N x N). Each time step
 * visits the interior points in row-major order and replaces each by the mean of its 3x3
 * neighbourhood — already-updated neighbours included, which is what makes it Gauss-Seidel and
 * strictly sequential. Result summarised: A.
 */
#define LUGE_NAME "seidel-2d"
#include "../common/luge.h"
#include "../common/kernel.h"

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    int32_t d[2];
    uint64_t seed;
    kernel_header(in, len, "seidel-2d", 2, d, &seed);
    if (d[0] < 3) {
        luge_fail("N must be at least 3");
    }
    const size_t n = (size_t)d[0];
    const int32_t steps = d[1];
    double *A = (double *)luge_alloc(n * n, sizeof(double));
    luge_rng g;
    kernel_rng(&g, "seidel-2d", seed);
    kernel_fill(&g, A, n * n);
    for (int32_t t = 0; t < steps; t++) {
        for (size_t i = 1; i + 1 < n; i++) {
            const double *up = A + (i - 1) * n, *dn = A + (i + 1) * n;
            double *mid = A + i * n;
            for (size_t j = 1; j + 1 < n; j++) {
                mid[j] = (up[j - 1] + up[j] + up[j + 1] + mid[j - 1] + mid[j] + mid[j + 1] +
                          dn[j - 1] + dn[j] + dn[j + 1]) /
                         9.0;
            }
        }
    }
    kernel_put_head(out, "seidel-2d", 2, d, seed);
    kernel_put_summary(out, A, n, n);
}
