/*
 * sift/gen.c — input generator for `sift` (native only): a grey picture with a faint gradient,
 * mild noise and isolated Gaussian blobs (bright or dark, sigma 2.2 .. 4.5 px: inside the scales the detector searches, kept apart) — the
 * structures a DoG detector is built to find. Each blob's centre and sigma go in a
 * "# blob <cx> <cy> <sigma>" comment for the checker.
 *   small: 32x32, medium: 64x56 (about SledgeScale's 113 µs SIFT natively), large: 256x256.
 */
#include "../common/scene.h"

int main(int argc, char **argv) {
    static const int dims[3][3] = {{32, 32, 2}, {64, 56, 6}, {256, 256, 48}};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0x51f70000u);
    int w = dims[size][0], h = dims[size][1], want = dims[size][2];
    double *img = scene_gradient(w, h, 110.0, 30.0, 20.0);
    double bx[64], by[64], bs[64];
    int n = 0;
    for (int tries = 0; n < want && tries < 10000; tries++) {
        double s = 2.2 + 2.3 * luge_rng_unit(&g), margin = 3 * s + 6;
        if (2 * margin >= w || 2 * margin >= h) {
            continue;
        }
        double cx = margin + (w - 2 * margin) * luge_rng_unit(&g);
        double cy = margin + (h - 2 * margin) * luge_rng_unit(&g);
        int ok = 1;
        for (int i = 0; i < n; i++) {
            double d = luge_sqrt((cx - bx[i]) * (cx - bx[i]) + (cy - by[i]) * (cy - by[i]));
            if (d < 3 * (s + bs[i])) {
                ok = 0;
            }
        }
        if (!ok) {
            continue;
        }
        bx[n] = cx;
        by[n] = cy;
        bs[n] = s;
        n++;
    }
    for (int i = 0; i < n; i++) {
        double amp = (luge_rng_below(&g, 2) ? 1 : -1) * (70 + 50 * luge_rng_unit(&g));
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++) {
                double dx = x - bx[i], dy = y - by[i];
                double e = (dx * dx + dy * dy) / (2 * bs[i] * bs[i]);
                if (e < 30) {
                    img[y * w + x] += amp * luge_exp(-e);
                }
            }
        }
    }
    char lines[65][64];
    const char *comments[65];
    snprintf(lines[0], sizeof lines[0], " luge sift test input: %d blobs", n);
    comments[0] = lines[0];
    for (int i = 0; i < n; i++) {
        snprintf(lines[i + 1], sizeof lines[i + 1], " blob %.2f %.2f %.2f", bx[i], by[i], bs[i]);
        comments[i + 1] = lines[i + 1];
    }
    scene_write_noisy_pgm(&g, img, w, h, 1.5, comments, n + 1);
    return 0;
}
