/*
 * tools.h — helpers for the native-only input generators (<fn>/gen.c) and output checkers
 * (<fn>/check.c) of Luge's C functions. These programs never run in wasm, so they may use stdio
 * freely; generators still draw every random number from lugemath.h's xorshift and compute with
 * its math, so an input file is the same on every machine.
 *
 *   gen:   <fn>-gen <small|medium|large>   writes the request body for that size to stdout
 *   check: <fn>-check <input> <output>     exits 0 if the output is plausible for the input,
 *                                          else prints "FAIL: <why>" and exits 1
 *
 * Generators may hide ground truth in '#' comment lines (Netpbm headers and the text formats
 * allow them; the functions skip comments), which the checkers read back.
 */
#ifndef LUGE_TOOLS_H
#define LUGE_TOOLS_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lugemath.h"

enum { SIZE_SMALL = 0, SIZE_MEDIUM = 1, SIZE_LARGE = 2 };

/* Parses the generator's size argument. */
static int tool_size_arg(int argc, char **argv) {
    if (argc == 2) {
        if (strcmp(argv[1], "small") == 0) {
            return SIZE_SMALL;
        }
        if (strcmp(argv[1], "medium") == 0) {
            return SIZE_MEDIUM;
        }
        if (strcmp(argv[1], "large") == 0) {
            return SIZE_LARGE;
        }
    }
    fprintf(stderr, "usage: %s small|medium|large > input\n", argv[0]);
    exit(2);
}

/* The start of a generator that draws random data: parses the size argument (tool_size_arg)
 * and seeds g with the generator's own seed_base + size, so that every size has its own
 * deterministic stream. Returns the size. */
static int tool_gen_begin(int argc, char **argv, luge_rng *g, uint64_t seed_base) {
    int size = tool_size_arg(argc, argv);
    luge_rng_seed(g, seed_base + (uint64_t)size);
    return size;
}

/* Checker failure: prints the reason and exits 1. */
static void __attribute__((noreturn, format(printf, 1, 2))) tool_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    exit(1);
}

/* Whole file, NUL-terminated (the terminator is not counted in *len). */
static char *tool_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        tool_fail("cannot open %s", path);
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) {
            break;
        }
        n += r;
    }
    fclose(f);
    buf[n] = 0;
    *len = n;
    return buf;
}

/* Checker argument handling: reads argv[1] (input) and argv[2] (output). */
static void tool_check_args(int argc, char **argv, char **in, size_t *in_len, char **out,
                            size_t *out_len) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s <input> <output>\n", argv[0]);
        exit(2);
    }
    *in = tool_read_file(argv[1], in_len);
    *out = tool_read_file(argv[2], out_len);
}

/* A Netpbm image as read by the checkers: P4 expanded to one byte per pixel (1 = black). The
 * '#' comment lines of the header are kept (without the '#') for ground truth. */
typedef struct {
    int kind, w, h, channels;
    unsigned char *px;
    char comments[64][160];
    int ncomments;
    size_t bytes; /* bytes consumed from the buffer */
} tool_image;

static int tool_pnm_int(const char *buf, size_t len, size_t *pos, tool_image *img) {
    for (;;) {
        while (*pos < len && strchr(" \t\r\n", buf[*pos]) != NULL) {
            (*pos)++;
        }
        if (*pos < len && buf[*pos] == '#') {
            size_t s = ++(*pos);
            while (*pos < len && buf[*pos] != '\n') {
                (*pos)++;
            }
            if (img->ncomments < 64) {
                size_t n = *pos - s < 159 ? *pos - s : 159;
                memcpy(img->comments[img->ncomments], buf + s, n);
                img->comments[img->ncomments][n] = 0;
                img->ncomments++;
            }
            continue;
        }
        break;
    }
    int v = 0, digits = 0;
    while (*pos < len && buf[*pos] >= '0' && buf[*pos] <= '9' && digits < 9) {
        v = v * 10 + (buf[(*pos)++] - '0');
        digits++;
    }
    if (digits == 0) {
        tool_fail("bad Netpbm header");
    }
    return v;
}

/* Parses a binary Netpbm image at buf; fails the check on malformed data. */
static void tool_read_pnm(const char *buf, size_t len, tool_image *img) {
    memset(img, 0, sizeof *img);
    size_t pos = 0;
    while (pos < len && strchr(" \t\r\n", buf[pos]) != NULL) {
        pos++;
    }
    if (len - pos < 3 || buf[pos] != 'P' || buf[pos + 1] < '4' || buf[pos + 1] > '6') {
        tool_fail("not a binary Netpbm image");
    }
    img->kind = buf[pos + 1] - '0';
    pos += 2;
    img->w = tool_pnm_int(buf, len, &pos, img);
    img->h = tool_pnm_int(buf, len, &pos, img);
    if (img->kind != 4 && tool_pnm_int(buf, len, &pos, img) != 255) {
        tool_fail("Netpbm maxval is not 255");
    }
    pos++;
    img->channels = img->kind == 6 ? 3 : 1;
    size_t n = (size_t)img->w * img->h * img->channels;
    img->px = malloc(n ? n : 1);
    if (img->kind == 4) {
        size_t row = ((size_t)img->w + 7) / 8;
        if (len - pos < row * img->h) {
            tool_fail("truncated P4 raster");
        }
        for (int y = 0; y < img->h; y++) {
            for (int x = 0; x < img->w; x++) {
                img->px[(size_t)y * img->w + x] =
                    ((unsigned char)buf[pos + y * row + x / 8] >> (7 - x % 8)) & 1;
            }
        }
        pos += row * img->h;
    } else {
        if (len - pos < n) {
            tool_fail("truncated Netpbm raster (%zu of %zu bytes)", len - pos, n);
        }
        memcpy(img->px, buf + pos, n);
        pos += n;
    }
    img->bytes = pos;
}

/* Checker argument handling for the functions whose request is one Netpbm image (ocr, segment,
 * sift): reads argv[1] (input) and argv[2] (output), parses the input image into img (its
 * comments carry the generator's ground truth) and returns the output text, setting *out_len. */
static char *tool_check_image_args(int argc, char **argv, tool_image *img, size_t *out_len) {
    char *in, *out;
    size_t in_len;
    tool_check_args(argc, argv, &in, &in_len, &out, out_len);
    tool_read_pnm(in, in_len, img);
    return out;
}

/* Writes a Netpbm image with optional comment lines (each without the leading '#'). P4 takes one
 * byte per pixel (nonzero = black) and packs it. */
static void tool_write_pnm(FILE *f, int kind, int w, int h, const unsigned char *px,
                           const char *const *comments, int ncomments) {
    fprintf(f, "P%d\n", kind);
    for (int i = 0; i < ncomments; i++) {
        fprintf(f, "#%s\n", comments[i]);
    }
    fprintf(f, "%d %d\n", w, h);
    if (kind == 4) {
        size_t row = ((size_t)w + 7) / 8;
        unsigned char *line = calloc(row, 1);
        for (int y = 0; y < h; y++) {
            memset(line, 0, row);
            for (int x = 0; x < w; x++) {
                if (px[(size_t)y * w + x]) {
                    line[x / 8] |= (unsigned char)(0x80 >> (x % 8));
                }
            }
            fwrite(line, 1, row, f);
        }
        free(line);
    } else {
        fprintf(f, "255\n");
        fwrite(px, 1, (size_t)w * h * (kind == 6 ? 3 : 1), f);
    }
}

/* Clamps and rounds a double to a pixel value. */
static inline unsigned char tool_px(double v) {
    return (unsigned char)luge_clamp_i32(luge_floor(v + 0.5), 0, 255);
}

/* Finds the line of `text` that starts with `key` followed by a space (or the end of the line)
 * and returns a pointer just past the key, or NULL. */
static const char *tool_find_line(const char *text, const char *key) {
    size_t k = strlen(key);
    const char *p = text;
    while (p != NULL && *p) {
        if (strncmp(p, key, k) == 0 && (p[k] == ' ' || p[k] == '\n' || p[k] == 0)) {
            return p + k;
        }
        p = strchr(p, '\n');
        if (p != NULL) {
            p++;
        }
    }
    return NULL;
}

/* Reads n doubles after `key` on its line (e.g. "sum 1.5e+00"); fails the check if missing. */
static void tool_get_numbers(const char *text, const char *key, double *v, int n) {
    const char *p = tool_find_line(text, key);
    if (p == NULL) {
        tool_fail("output has no '%s' line", key);
    }
    for (int i = 0; i < n; i++) {
        char *end;
        v[i] = strtod(p, &end);
        if (end == p) {
            tool_fail("'%s' line: expected %d numbers", key, n);
        }
        p = end;
    }
}

/* |a - b| <= tol * max(1, |a|, |b|) */
static int tool_close(double a, double b, double tol) {
    double m = 1.0;
    if (luge_fabs(a) > m) {
        m = luge_fabs(a);
    }
    if (luge_fabs(b) > m) {
        m = luge_fabs(b);
    }
    return luge_fabs(a - b) <= tol * m;
}

#endif /* LUGE_TOOLS_H */
