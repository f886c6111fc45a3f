/*
 * atax/gen.c — input generator for `atax` (native only): the request header for each size
 * (M N: small 116 124, medium 390 410, large 800 900).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"atax 116 124\n", "atax 390 410\n", "atax 800 900\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
