/*
 * gemm/gen.c — input generator for `gemm` (native only): the request header for each size
 * (PolyBench-like dimensions: small 60x70x80, medium 200x220x240, large 400x440x480).
 */
#include <stdio.h>

#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"gemm 60 70 80\n", "gemm 200 220 240\n",
                                       "gemm 400 440 480\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
