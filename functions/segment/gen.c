/*
 * segment/gen.c — input generator for `segment` (native only): a dark background with a gentle
 * gradient and, in a jittered grid, non-overlapping rectangles and ellipses at three grey levels
 * (110, 165, 220), plus Gaussian noise (sigma 6). Each shape's inclusive bounding box and level
 * go in a "# region <x0> <y0> <x1> <y1> <level>" comment for the checker.
 *   small: 48x48 (4 shapes), medium: 150x150 (about SledgeScale's 1.1 ms Segmentation
 *   natively), large: 640x480.
 */
#include "../common/scene.h"

int main(int argc, char **argv) {
    static const int dims[3][3] = {{48, 48, 2}, {150, 150, 4}, {640, 480, 8}};
    static const double levels[3] = {110, 165, 220};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0x5e600000u);
    int w = dims[size][0], h = dims[size][1], grid = dims[size][2];
    double *img = scene_gradient(w, h, 40.0, 20.0, 0.0); /* left to right, 40 .. 60 */
    char lines[80][64];
    const char *comments[80];
    int nc = 0;
    snprintf(lines[nc], 64, " luge segment test input: %dx%d grid of shapes", grid, grid);
    comments[nc] = lines[nc];
    nc++;
    int cw = w / grid, ch = h / grid;
    for (int gy = 0; gy < grid; gy++) {
        for (int gx = 0; gx < grid; gx++) {
            /* a shape inside its cell, at least 3 px from the cell's edges */
            int sw = cw / 3 + (int)luge_rng_below(&g, (uint32_t)(cw / 3));
            int sh = ch / 3 + (int)luge_rng_below(&g, (uint32_t)(ch / 3));
            int x0 = gx * cw + 3 + (int)luge_rng_below(&g, (uint32_t)(cw - sw - 5));
            int y0 = gy * ch + 3 + (int)luge_rng_below(&g, (uint32_t)(ch - sh - 5));
            int ellipse = luge_rng_below(&g, 2);
            double level = levels[luge_rng_below(&g, 3)];
            double cx = x0 + (sw - 1) / 2.0, cy = y0 + (sh - 1) / 2.0;
            double rx = sw / 2.0, ry = sh / 2.0;
            int bx0 = w, by0 = h, bx1 = -1, by1 = -1;
            for (int y = y0; y < y0 + sh; y++) {
                for (int x = x0; x < x0 + sw; x++) {
                    if (ellipse) {
                        double dx = (x - cx) / rx, dy = (y - cy) / ry;
                        if (dx * dx + dy * dy > 1.0) {
                            continue;
                        }
                    }
                    img[y * w + x] = level;
                    bx0 = x < bx0 ? x : bx0;
                    by0 = y < by0 ? y : by0;
                    bx1 = x > bx1 ? x : bx1;
                    by1 = y > by1 ? y : by1;
                }
            }
            snprintf(lines[nc], 64, " region %d %d %d %d %.0f", bx0, by0, bx1, by1, level);
            comments[nc] = lines[nc];
            nc++;
        }
    }
    scene_write_noisy_pgm(&g, img, w, h, 6.0, comments, nc);
    return 0;
}
