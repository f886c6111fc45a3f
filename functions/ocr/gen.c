/*
 * ocr/gen.c — input generator for `ocr` (native only): lines of random upper-case words,
 * numbers and punctuation rendered in the built-in 5x7 font (common/font5x7.h) at an integer
 * scale, glyph pitch 6 dots, line pitch 10 dots, with salt-and-pepper noise (0.2 % of white
 * pixels turned black, 0.5 % of black pixels turned white). Each line's text goes in a
 * "# text <line>" comment for the checker.
 *   small: 1 line at scale 2; medium: 6 lines of up to 32 characters at scale 2 (a few hundred
 *   µs natively, like the paper's GOCR); large: 30 lines of up to 70 characters at scale 3.
 */
#include "../common/font5x7.h"
#include "../common/tools.h"

static const font_glyph *find_glyph(char ch) {
    for (int i = 0; i < FONT_GLYPHS; i++) {
        if (FONT[i].ch == ch) {
            return &FONT[i];
        }
    }
    return NULL;
}

/* A random line of words, at most `max` characters. */
static void make_line(luge_rng *g, char *line, int max) {
    static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    static const char digits[] = "0123456789";
    int n = 0;
    for (;;) {
        char word[16];
        int wl = 0, kind = (int)luge_rng_below(g, 10);
        int len = 1 + (int)luge_rng_below(g, 7);
        if (kind < 7) { /* a word, sometimes hyphenated */
            for (int i = 0; i < len; i++) {
                word[wl++] = letters[luge_rng_below(g, 26)];
            }
            if (kind == 6) {
                word[wl++] = '-';
                for (int i = 0; i < 2; i++) {
                    word[wl++] = letters[luge_rng_below(g, 26)];
                }
            }
        } else { /* a number, sometimes with a decimal point */
            for (int i = 0; i < (len > 4 ? 4 : len); i++) {
                word[wl++] = digits[luge_rng_below(g, 10)];
            }
            if (kind == 9) {
                word[wl++] = '.';
                word[wl++] = digits[luge_rng_below(g, 10)];
            }
        }
        int punct = (int)luge_rng_below(g, 8);
        if (punct == 0) {
            word[wl++] = '.';
        } else if (punct == 1) {
            word[wl++] = ',';
        }
        if (n + (n > 0) + wl > max) {
            break;
        }
        if (n > 0) {
            line[n++] = ' ';
        }
        memcpy(line + n, word, (size_t)wl);
        n += wl;
    }
    line[n] = 0;
}

int main(int argc, char **argv) {
    static const int lines_of[3] = {1, 6, 30}, chars_of[3] = {20, 32, 70}, scale_of[3] = {2, 2, 3};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0x0c500000u);
    int nl = lines_of[size], maxc = chars_of[size], s = scale_of[size];
    char text[64][128];
    int longest = 0;
    for (int l = 0; l < nl; l++) {
        if (size == 0) {
            strcpy(text[l], "HELLO, LUGE 2025.");
        } else {
            make_line(&g, text[l], maxc);
        }
        int len = (int)strlen(text[l]);
        longest = len > longest ? len : longest;
    }
    const int margin = 4 * s;
    int w = 2 * margin + (longest * 6 - 1) * s, h = 2 * margin + (nl * 10 - 3) * s;
    unsigned char *px = calloc((size_t)w * h, 1);
    for (int l = 0; l < nl; l++) {
        for (int i = 0; text[l][i]; i++) {
            const font_glyph *gl = find_glyph(text[l][i]);
            if (gl == NULL) {
                continue; /* space */
            }
            int x0 = margin + i * 6 * s, y0 = margin + l * 10 * s;
            for (int r = 0; r < FONT_H; r++) {
                for (int c = 0; c < FONT_W; c++) {
                    if (gl->rows[r][c] != '#') {
                        continue;
                    }
                    for (int dy = 0; dy < s; dy++) {
                        for (int dx = 0; dx < s; dx++) {
                            px[(size_t)(y0 + r * s + dy) * w + x0 + c * s + dx] = 1;
                        }
                    }
                }
            }
        }
    }
    for (size_t i = 0; i < (size_t)w * h; i++) {
        uint32_t u = luge_rng_below(&g, 1000);
        if (px[i] ? u < 5 : u < 2) {
            px[i] ^= 1;
        }
    }
    char lines[65][160];
    const char *comments[65];
    snprintf(lines[0], sizeof lines[0], " luge ocr test input: %d lines, scale %d", nl, s);
    comments[0] = lines[0];
    for (int l = 0; l < nl; l++) {
        snprintf(lines[l + 1], sizeof lines[l + 1], " text %s", text[l]);
        comments[l + 1] = lines[l + 1];
    }
    tool_write_pnm(stdout, 4, w, h, px, comments, nl + 1);
    free(px);
    return 0;
}
