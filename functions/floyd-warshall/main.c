/*
 * floyd-warshall — all-pairs shortest paths in a weighted directed graph (Luge numeric
 * kernel, in the spirit of PolyBench/C's floyd-warshall; see common/kernel.h for the
 * request/response format).
 *
 * Request: "floyd-warshall <N> [seed <s>]". The graph is drawn from the kernel's xorshift
 * stream, one 64-bit draw r per ordered pair (i, j), i != j, in row-major order: an edge exists
 * when r mod 10 < 3 (30 %) and weighs 1 + (r >> 32) mod 100. Floyd-Warshall relaxes
 * d(i, j) = min(d(i, j), d(i, k) + d(k, j)) for every intermediate vertex k in turn, in 32-bit
 * integers with "no path" as 2^29 (sums stay below 2^31).
 * Response: the common summary of the distance matrix with unreachable pairs as -1 (integer
 * valued, so exact), followed by "unreachable <pairs without a path>".
 */
#define LUGE_NAME "floyd-warshall"
#include "../common/luge.h"
#include "../common/kernel.h"

#define NO_PATH (1 << 29)

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    kernel_req req;
    const int32_t *d = kernel_begin(&req, in, len, 1);
    const size_t n = (size_t)d[0];
    int32_t *dist = (int32_t *)luge_alloc(n * n, sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            if (i == j) {
                dist[i * n + j] = 0;
                continue;
            }
            uint64_t r = luge_rng_next(&req.rng);
            dist[i * n + j] = r % 10 < 3 ? (int32_t)(1 + (r >> 32) % 100) : NO_PATH;
        }
    }
    for (size_t k = 0; k < n; k++) {
        const int32_t *dk = dist + k * n;
        for (size_t i = 0; i < n; i++) {
            int32_t *di = dist + i * n;
            const int32_t dik = di[k];
            if (dik >= NO_PATH) {
                continue; /* nothing to relax through k */
            }
            for (size_t j = 0; j < n; j++) {
                const int32_t via = dik + dk[j];
                di[j] = via < di[j] ? via : di[j];
            }
        }
    }
    /* summary as doubles (exact: small integers), unreachable as -1 */
    double *res = (double *)luge_alloc(n * n, sizeof(double));
    int64_t unreachable = 0;
    for (size_t i = 0; i < n * n; i++) {
        if (dist[i] >= NO_PATH) {
            res[i] = -1.0;
            unreachable++;
        } else {
            res[i] = (double)dist[i];
        }
    }
    kernel_respond(out, &req, res, n, n);
    luge_put_str(out, "unreachable ");
    luge_put_i64(out, unreachable);
    luge_put_char(out, '\n');
}
