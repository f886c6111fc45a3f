/*
 * covariance/gen.c — input generator for `covariance` (native only): the request header for
 * each size (M N: small 28 32, medium 80 100, large 240 260).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    static const char *const req[3] = {"covariance 28 32\n", "covariance 80 100\n",
                                       "covariance 240 260\n"};
    fputs(req[tool_size_arg(argc, argv)], stdout);
    return 0;
}
