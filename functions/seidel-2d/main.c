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
    kernel_req req;
    int32_t steps;
    const size_t n = kernel_begin_grid(&req, in, len, &steps);
    double *A = kernel_data(&req, n * n);
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
    kernel_respond(out, &req, A, n, n);
}
