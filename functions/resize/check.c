/*
 * resize/check.c — checker for `resize` (native only): the output must be the same Netpbm kind
 * with halved dimensions, and every sample must be within 1 of an independent floating-point
 * bilinear resampling of the input (corner-aligned, as resize/main.c documents).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    tool_image a, b;
    tool_read_pnm(in, in_len, &a);
    tool_read_pnm(out, out_len, &b);
    int ow = a.w / 2 > 0 ? a.w / 2 : 1, oh = a.h / 2 > 0 ? a.h / 2 : 1;
    if (b.kind != a.kind || b.w != ow || b.h != oh) {
        tool_fail("expected P%d %dx%d, got P%d %dx%d", a.kind, ow, oh, b.kind, b.w, b.h);
    }
    if (b.bytes != out_len) {
        tool_fail("trailing bytes after the output image");
    }
    int ch = a.channels, worst = 0;
    for (int y = 0; y < oh; y++) {
        double sy = oh == 1 ? (a.h - 1) / 2.0 : (double)y * (a.h - 1) / (oh - 1);
        int y0 = (int)sy, y1 = y0 + 1 < a.h ? y0 + 1 : y0;
        double fy = sy - y0;
        for (int x = 0; x < ow; x++) {
            double sx = ow == 1 ? (a.w - 1) / 2.0 : (double)x * (a.w - 1) / (ow - 1);
            int x0 = (int)sx, x1 = x0 + 1 < a.w ? x0 + 1 : x0;
            double fx = sx - x0;
            for (int k = 0; k < ch; k++) {
#define A(yy, xx) ((double)a.px[((size_t)(yy) * a.w + (xx)) * ch + k])
                double top = A(y0, x0) * (1 - fx) + A(y0, x1) * fx;
                double bot = A(y1, x0) * (1 - fx) + A(y1, x1) * fx;
                double want = top * (1 - fy) + bot * fy;
#undef A
                int got = b.px[((size_t)y * ow + x) * ch + k];
                int diff = (int)(luge_fabs(got - want) + 0.5);
                if (luge_fabs(got - want) > 1.0) {
                    tool_fail("pixel (%d,%d) channel %d: got %d, expected %.2f", x, y, k, got,
                              want);
                }
                if (diff > worst) {
                    worst = diff;
                }
            }
        }
    }
    printf("ok: P%d %dx%d -> %dx%d, max deviation from float bilinear %d\n", a.kind, a.w, a.h,
           ow, oh, worst);
    return 0;
}
