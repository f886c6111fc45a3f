/*
 * ocr — optical character recognition of a bitmap page by template matching (Luge edge
 * function).
 *
 * Stands for the Sledge paper's GOCR application (Sledge §5, Table 2: a PBM
 * image in, the recognised ASCII text out; 623 µs native there). Written from scratch for
 * machine-printed text in the built-in 5x7 font (common/font5x7.h: A-Z, 0-9, '.', ',', '-')
 * at any integer or fractional scale.
 *
 * Algorithm:
 *   1. Despeckle: drop black pixels with no black 8-neighbour (salt noise).
 *   2. Summed-area table of the ink, so any rectangle's ink count costs four lookups.
 *   3. Lines: maximal runs of rows holding more than 2 inked pixels (what survives
 *      despeckling is pairs of noise pixels; runs under 3 rows are noise too).
 *   4. Characters: within a line, maximal runs of columns that hold ink, without edge columns
 *      holding at most half a dot's height of ink (noise stuck to a glyph); runs with less ink
 *      than 3/4 of a font dot are noise. A gap of at least 5.5 font dots between runs is a word
 *      space (glyphs sit at a pitch of 6 dots, so gaps inside a word are at most 4 dots, after
 *      a '.', and a space leaves at least 7). The font dot size is the line height / 7.
 *   5. Each run is compared with every glyph: the run's columns are divided evenly among the
 *      glyph's inked columns and the line's rows among its 7 rows; the score is the sum over
 *      cells of (ink fraction - glyph dot)^2 plus a penalty for the width mismatch (in dots).
 *      The lowest score wins (first glyph on ties); a run no glyph explains well (score above
 *      40 % of its cells) is reported as '?'.
 *
 * Request:  a binary PBM (P4) image, at most 4096x4096.
 * Response: the recognised text, one line per text line, each ending in '\n' (nothing for a
 *           blank page).
 */
#define LUGE_NAME "ocr"
#include "../common/luge.h"
#include "../common/font5x7.h"

#define MAX_LINE_CHARS 4096
#define NOISE_ROW_INK 2 /* a row with at most this much ink is blank (surviving noise pairs) */

/* A glyph as matched: the inked column span [c0, c1] and its dots. */
typedef struct {
    char ch;
    int c0, c1;
    uint8_t dot[FONT_H][FONT_W];
} glyph;

static void load_glyphs(glyph *g) {
    for (int i = 0; i < FONT_GLYPHS; i++) {
        g[i].ch = FONT[i].ch;
        g[i].c0 = FONT_W;
        g[i].c1 = -1;
        for (int r = 0; r < FONT_H; r++) {
            for (int c = 0; c < FONT_W; c++) {
                g[i].dot[r][c] = FONT[i].rows[r][c] == '#';
                if (g[i].dot[r][c]) {
                    g[i].c0 = c < g[i].c0 ? c : g[i].c0;
                    g[i].c1 = c > g[i].c1 ? c : g[i].c1;
                }
            }
        }
    }
}

typedef struct {
    const int32_t *sat; /* (w + 1) x (h + 1) summed-area table */
    int32_t stride;     /* w + 1 */
} ink_table;

/* Ink in the rectangle [x0, x1) x [y0, y1). */
static inline int32_t ink(const ink_table *t, int32_t x0, int32_t y0, int32_t x1, int32_t y1) {
    const int32_t *a = t->sat + (size_t)y0 * t->stride, *b = t->sat + (size_t)y1 * t->stride;
    return b[x1] - b[x0] - a[x1] + a[x0];
}

/* Best glyph for the run of columns [x0, x1] on the line of rows [y0, y1]. */
static char match(const ink_table *t, const glyph *glyphs, int32_t x0, int32_t x1, int32_t y0,
                  int32_t y1) {
    const int32_t bw = x1 - x0 + 1, lh = y1 - y0 + 1;
    const double dot = (double)lh / FONT_H;
    int32_t ry[FONT_H + 1]; /* row boundaries of the 7 font rows */
    for (int r = 0; r <= FONT_H; r++) {
        ry[r] = y0 + (r * lh) / FONT_H;
    }
    double best = 1e300;
    int best_i = 0, best_cells = 1;
    for (int i = 0; i < FONT_GLYPHS; i++) {
        const glyph *g = &glyphs[i];
        const int tw = g->c1 - g->c0 + 1;
        double score = luge_fabs((double)bw / dot - tw) * 1.5;
        for (int c = 0; c < tw; c++) {
            int32_t xa = x0 + (c * bw) / tw, xb = x0 + ((c + 1) * bw) / tw;
            if (xb <= xa) {
                xb = xa + 1;
            }
            for (int r = 0; r < FONT_H; r++) {
                int32_t ya = ry[r], yb = ry[r + 1] > ry[r] ? ry[r + 1] : ry[r] + 1;
                double f = (double)ink(t, xa, ya, xb, yb) / (double)((xb - xa) * (yb - ya));
                double d = f - (double)g->dot[r][g->c0 + c];
                score += d * d;
            }
            if (score >= best) {
                break; /* cannot win any more */
            }
        }
        if (score < best) {
            best = score;
            best_i = i;
            best_cells = tw * FONT_H;
        }
    }
    return best > 0.4 * best_cells ? '?' : glyphs[best_i].ch;
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    luge_image img;
    luge_read_request_pnm(in, len, 1u << 4, &img);
    const int32_t w = img.w, h = img.h;
    glyph glyphs[FONT_GLYPHS];
    load_glyphs(glyphs);

    /* 1-2. despeckle while building the summed-area table */
    int32_t *sat = (int32_t *)luge_alloc((size_t)(w + 1) * (size_t)(h + 1), sizeof(int32_t));
    const int32_t stride = w + 1;
    for (int32_t y = 0; y < h; y++) {
        int32_t row = 0;
        for (int32_t x = 0; x < w; x++) {
            int v = img.px[(size_t)y * w + x];
            if (v) {
                int neighbours = 0;
                for (int dy = -1; dy <= 1 && !neighbours; dy++) {
                    for (int dx = -1; dx <= 1; dx++) {
                        int32_t yy = y + dy, xx = x + dx;
                        if ((dx | dy) != 0 && yy >= 0 && yy < h && xx >= 0 && xx < w &&
                            img.px[(size_t)yy * w + xx]) {
                            neighbours = 1;
                            break;
                        }
                    }
                }
                v = neighbours;
            }
            row += v;
            sat[(size_t)(y + 1) * stride + x + 1] = sat[(size_t)y * stride + x + 1] + row;
        }
    }
    ink_table t = {sat, stride};

    /* 3. lines; 4-5. characters per line */
    char *text = (char *)luge_alloc(MAX_LINE_CHARS + 2, 1);
    int32_t y = 0;
    while (y < h) {
        if (ink(&t, 0, y, w, y + 1) <= NOISE_ROW_INK) {
            y++;
            continue;
        }
        int32_t y0 = y;
        while (y < h && ink(&t, 0, y, w, y + 1) > NOISE_ROW_INK) {
            y++;
        }
        int32_t y1 = y - 1;
        if (y1 - y0 + 1 < 3) {
            continue;
        }
        const double dot = (double)(y1 - y0 + 1) / FONT_H;
        const double min_ink = 0.75 * dot * dot;
        const double space_gap = 5.5 * dot;
        int n = 0;
        int32_t prev_end = -1, x = 0;
        while (x < w) {
            if (ink(&t, x, y0, x + 1, y1 + 1) == 0) {
                x++;
                continue;
            }
            int32_t x0 = x;
            while (x < w && ink(&t, x, y0, x + 1, y1 + 1) > 0) {
                x++;
            }
            int32_t x1 = x - 1;
            /* noise pixels stuck to a glyph's side: trim edge columns of at most half a dot */
            while (x0 < x1 && 2.0 * ink(&t, x0, y0, x0 + 1, y1 + 1) <= dot) {
                x0++;
            }
            while (x1 > x0 && 2.0 * ink(&t, x1, y0, x1 + 1, y1 + 1) <= dot) {
                x1--;
            }
            if ((double)ink(&t, x0, y0, x1 + 1, y1 + 1) < min_ink) {
                continue;
            }
            if (n >= MAX_LINE_CHARS) {
                luge_fail("text line longer than 4096 characters");
            }
            if (prev_end >= 0 && (double)(x0 - prev_end - 1) >= space_gap) {
                text[n++] = ' ';
            }
            text[n++] = match(&t, glyphs, x0, x1, y0, y1);
            prev_end = x1;
        }
        if (n > 0) {
            luge_put_bytes(out, text, (size_t)n);
            luge_put_char(out, '\n');
        }
    }
}
