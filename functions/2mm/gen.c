/*
 * 2mm/gen.c — input generator for `2mm` (native only): the request header for each size
 * (PolyBench-like dimensions NI NJ NK NL: small 40 50 70 80, medium 180 190 210 220,
 * large 360 380 420 440).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"2mm 40 50 70 80\n", "2mm 180 190 210 220\n",
                                       "2mm 360 380 420 440\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
