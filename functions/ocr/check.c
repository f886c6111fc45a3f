/*
 * ocr/check.c — checker for `ocr` (native only): the recognised text must match the lines the
 * generator rendered ("# text <line>" comments) with at most 1 % of characters wrong (the
 * Levenshtein distance over the whole page, newlines included), and the same number of lines.
 */
#include "../common/tools.h"

static int levenshtein(const char *a, int n, const char *b, int m) {
    int *prev = malloc(sizeof(int) * (m + 1)), *cur = malloc(sizeof(int) * (m + 1));
    for (int j = 0; j <= m; j++) {
        prev[j] = j;
    }
    for (int i = 1; i <= n; i++) {
        cur[0] = i;
        for (int j = 1; j <= m; j++) {
            int best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best) {
                best = prev[j] + 1;
            }
            if (cur[j - 1] + 1 < best) {
                best = cur[j - 1] + 1;
            }
            cur[j] = best;
        }
        int *t = prev;
        prev = cur;
        cur = t;
    }
    int d = prev[m];
    free(prev);
    free(cur);
    return d;
}

int main(int argc, char **argv) {
    tool_image img;
    size_t out_len;
    const char *out = tool_check_image_args(argc, argv, &img, &out_len);
    char *truth = calloc(64 * 170, 1);
    int lines = 0;
    for (int c = 0; c < img.ncomments; c++) {
        if (strncmp(img.comments[c], " text ", 6) == 0) {
            strcat(truth, img.comments[c] + 6);
            strcat(truth, "\n");
            lines++;
        }
    }
    int out_lines = 0;
    for (size_t i = 0; i < out_len; i++) {
        out_lines += out[i] == '\n';
    }
    if (out_lines != lines) {
        tool_fail("recognised %d lines, the page has %d", out_lines, lines);
    }
    int n = (int)strlen(truth);
    int d = levenshtein(truth, n, out, (int)out_len);
    if (d * 100 > n) {
        tool_fail("%d of %d characters wrong (edit distance); got:\n%s", d, n, out);
    }
    printf("ok: %d lines, %d characters, edit distance %d\n", lines, n, d);
    return 0;
}
