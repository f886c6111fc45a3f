/*
 * floyd-warshall/check.c — checker for `floyd-warshall` (native only): rebuilds the same
 * graph and computes the distances by Dijkstra's algorithm from every source (a different
 * algorithm), then requires the summary and the unreachable count to match exactly.
 */
#include "../common/tools.h"
#include "../common/kernel.h"

int main(int argc, char **argv) {
    kernel_req req;
    const int32_t *d = kernel_check_begin(&req, argc, argv, "floyd-warshall", 1);
    int n = d[0];
    int *w = malloc(sizeof(int) * n * n); /* -1: no edge */
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) {
            if (i == j) {
                w[i * n + j] = -1;
                continue;
            }
            uint64_t r = luge_rng_next(&req.rng);
            w[i * n + j] = r % 10 < 3 ? (int)(1 + (r >> 32) % 100) : -1;
        }
    }
    double *res = malloc(sizeof(double) * n * n);
    long long *dist = malloc(sizeof(long long) * n);
    char *done = malloc(n);
    double unreachable = 0;
    for (int s = 0; s < n; s++) {
        for (int v = 0; v < n; v++) {
            dist[v] = -1;
            done[v] = 0;
        }
        dist[s] = 0;
        for (;;) {
            int u = -1;
            for (int v = 0; v < n; v++) {
                if (!done[v] && dist[v] >= 0 && (u < 0 || dist[v] < dist[u])) {
                    u = v;
                }
            }
            if (u < 0) {
                break;
            }
            done[u] = 1;
            for (int v = 0; v < n; v++) {
                int e = w[u * n + v];
                if (e >= 0 && (dist[v] < 0 || dist[u] + e < dist[v])) {
                    dist[v] = dist[u] + e;
                }
            }
        }
        for (int v = 0; v < n; v++) {
            res[s * n + v] = (double)dist[v];
            unreachable += dist[v] < 0;
        }
    }
    double got;
    tool_get_numbers(req.response, "unreachable", &got, 1);
    if (got != unreachable) {
        tool_fail("unreachable %.0f, reference %.0f", got, unreachable);
    }
    kernel_check_end(&req, res, n, n, 0.0);
    return 0;
}
