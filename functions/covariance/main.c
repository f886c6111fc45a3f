/*
 * covariance — sample covariance matrix of a data set (Luge numeric kernel, in the spirit of
 * PolyBench/C's covariance; see common/kernel.h for the request/response format).
 *
 * Request: "covariance <M> <N> [seed <s>]": N samples (N >= 2) of M variables. Data: the
 * samples, N x M, row-major. Each column is centred on its mean, then
 * cov(i, j) = sum_k x(k, i) x(k, j) / (N - 1) for j >= i, mirrored below the diagonal.
 * Result summarised: cov (M x M).
 */
#define LUGE_NAME "covariance"
#include "../common/luge.h"
#include "../common/kernel.h"

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    kernel_req req;
    const int32_t *d = kernel_begin(&req, in, len, 2);
    const size_t m = (size_t)d[0], n = (size_t)d[1];
    if (n < 2) {
        luge_fail("covariance needs at least 2 samples");
    }
    double *data = kernel_data(&req, n * m);
    double *mean = (double *)luge_alloc(m, sizeof(double));
    double *cov = (double *)luge_alloc(m * m, sizeof(double));
    /* column means, accumulated row by row */
    for (size_t k = 0; k < n; k++) {
        for (size_t j = 0; j < m; j++) {
            mean[j] += data[k * m + j];
        }
    }
    for (size_t j = 0; j < m; j++) {
        mean[j] /= (double)n;
    }
    for (size_t k = 0; k < n; k++) {
        for (size_t j = 0; j < m; j++) {
            data[k * m + j] -= mean[j];
        }
    }
    /* upper triangle, row k of the data at a time: cov(i, j>=i) += x(k, i) x(k, j) */
    for (size_t k = 0; k < n; k++) {
        const double *x = data + k * m;
        for (size_t i = 0; i < m; i++) {
            const double xi = x[i];
            double *c = cov + i * m;
            for (size_t j = i; j < m; j++) {
                c[j] += xi * x[j];
            }
        }
    }
    const double denom = (double)(n - 1);
    for (size_t i = 0; i < m; i++) {
        for (size_t j = i; j < m; j++) {
            cov[i * m + j] /= denom;
            cov[j * m + i] = cov[i * m + j];
        }
    }
    kernel_respond(out, &req, cov, m, m);
}
