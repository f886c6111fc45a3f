/*
 * floyd-warshall/gen.c — input generator for `floyd-warshall` (native only): the request header
 * for each size (N: small 60, medium 180, large 500).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"floyd-warshall 60\n", "floyd-warshall 180\n",
                                       "floyd-warshall 500\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
