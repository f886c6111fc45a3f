/*
 * scene.h — synthetic test pictures for the image functions' input generators (native only):
 * a smooth two-colour gradient, random filled discs and rectangles with soft (anti-aliased)
 * edges, and mild per-pixel noise — enough structure for resampling, keypoints and
 * classification to have something to do (scene_paint) — and the grey gradient canvas and noisy
 * PGM output that the segment and sift generators draw their own shapes between.
 * Deterministic: every draw comes from luge_rng.
 */
#ifndef LUGE_SCENE_H
#define LUGE_SCENE_H

#include "tools.h"

/* Paints a w x h picture with `channels` (1 or 3) bytes per pixel into px. */
static void scene_paint(luge_rng *g, int w, int h, int channels, int nshapes, double noise,
                        unsigned char *px) {
    double c0[3], c1[3];
    for (int k = 0; k < 3; k++) {
        c0[k] = 40 + 60 * luge_rng_unit(g);
        c1[k] = 150 + 80 * luge_rng_unit(g);
    }
    double *img = calloc((size_t)w * h * 3, sizeof(double));
    /* diagonal gradient background */
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            double t = (double)(x + y) / (double)(w + h);
            for (int k = 0; k < 3; k++) {
                img[((size_t)y * w + x) * 3 + k] = c0[k] + (c1[k] - c0[k]) * t;
            }
        }
    }
    int minside = w < h ? w : h;
    for (int s = 0; s < nshapes; s++) {
        double col[3];
        for (int k = 0; k < 3; k++) {
            col[k] = 255 * luge_rng_unit(g);
        }
        double cx = w * luge_rng_unit(g), cy = h * luge_rng_unit(g);
        double r = minside * (0.04 + 0.16 * luge_rng_unit(g));
        int disc = luge_rng_below(g, 2) == 0;
        double rx = r, ry = r * (0.5 + luge_rng_unit(g));
        for (int y = 0; y < h; y++) {
            for (int x = 0; x < w; x++) {
                double dx = x + 0.5 - cx, dy = y + 0.5 - cy, d;
                if (disc) {
                    d = luge_sqrt(dx * dx + dy * dy) - r; /* signed distance to the edge */
                } else {
                    double ex = luge_fabs(dx) - rx, ey = luge_fabs(dy) - ry;
                    d = ex > ey ? ex : ey;
                }
                double a = 0.5 - d; /* coverage with a one-pixel soft edge */
                if (a <= 0) {
                    continue;
                }
                if (a > 1) {
                    a = 1;
                }
                double *p = img + ((size_t)y * w + x) * 3;
                for (int k = 0; k < 3; k++) {
                    p[k] = p[k] * (1 - a) + col[k] * a;
                }
            }
        }
    }
    for (size_t i = 0; i < (size_t)w * h; i++) {
        double n = noise * luge_rng_gauss(g);
        if (channels == 1) {
            double *p = img + i * 3;
            px[i] = tool_px(0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2] + n);
        } else {
            for (int k = 0; k < 3; k++) {
                px[i * 3 + k] = tool_px(img[i * 3 + k] + n);
            }
        }
    }
    free(img);
}

/* A w x h grey canvas of doubles (row-major, malloc'd) holding the linear gradient
 * base + gx * x / w + gy * y / h: the background the segment and sift generators draw on. */
static double *scene_gradient(int w, int h, double base, double gx, double gy) {
    double *img = malloc(sizeof(double) * w * h);
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            img[y * w + x] = base + gx * x / w + gy * y / h;
        }
    }
    return img;
}

/* Writes a grey canvas to stdout as a binary PGM with the given comment lines, after adding
 * Gaussian noise of the given sigma to every pixel (drawn from g in row-major order) and
 * rounding and clamping it to a byte. */
static void scene_write_noisy_pgm(luge_rng *g, const double *img, int w, int h, double sigma,
                                  const char *const *comments, int ncomments) {
    unsigned char *px = malloc((size_t)w * h);
    for (int i = 0; i < w * h; i++) {
        px[i] = tool_px(img[i] + sigma * luge_rng_gauss(g));
    }
    tool_write_pnm(stdout, 5, w, h, px, comments, ncomments);
    free(px);
}

#endif /* LUGE_SCENE_H */
