/*
 * seidel-2d/gen.c — input generator for `seidel-2d` (native only): the request header for each
 * size (N TSTEPS: small 40 20, medium 120 40, large 250 100).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"seidel-2d 40 20\n", "seidel-2d 120 40\n",
                                       "seidel-2d 250 100\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
