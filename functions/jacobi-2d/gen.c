/*
 * jacobi-2d/gen.c — input generator for `jacobi-2d` (native only): the request header for each
 * size (N TSTEPS: small 30 20, medium 120 40, large 250 100).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"jacobi-2d 30 20\n", "jacobi-2d 120 40\n",
                                       "jacobi-2d 250 100\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
