/*
 * classify/check.c — checker for `classify` (native only): one "image <i> class <k> <label>"
 * and one "scores" line per input image, in order; k in 0..9 with the CIFAR-10 label; ten
 * scores in [0, 1] summing to 1 (within rounding) whose largest is the reported class.
 */
#include "../common/tools.h"

static const char *const LABELS[10] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                       "dog",      "frog",       "horse", "ship", "truck"};

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    int images = 0;
    for (size_t pos = 0; pos < in_len;) {
        tool_image img;
        tool_read_pnm(in + pos, in_len - pos, &img);
        if (img.kind != 6 || img.w != 32 || img.h != 32) {
            tool_fail("input image %d is not a 32x32 PPM", images);
        }
        pos += img.bytes;
        free(img.px);
        images++;
        while (pos < in_len && strchr(" \t\r\n", in[pos]) != NULL) {
            pos++;
        }
    }
    const char *p = out;
    int hist[10] = {0};
    for (int i = 0; i < images; i++) {
        int idx, k, used;
        char label[32];
        if (sscanf(p, "image %d class %d %31s\n%n", &idx, &k, label, &used) != 3 || idx != i) {
            tool_fail("expected 'image %d class <k> <label>'", i);
        }
        if (k < 0 || k > 9 || strcmp(label, LABELS[k]) != 0) {
            tool_fail("image %d: bad class %d '%s'", i, k, label);
        }
        p += used;
        if (strncmp(p, "scores", 6) != 0) {
            tool_fail("image %d: expected a scores line", i);
        }
        p += 6;
        double s[10], sum = 0;
        for (int j = 0; j < 10; j++) {
            char *end;
            s[j] = strtod(p, &end);
            if (end == p || !(s[j] >= 0 && s[j] <= 1)) {
                tool_fail("image %d: score %d missing or outside [0, 1]", i, j);
            }
            p = end;
            sum += s[j];
        }
        for (int j = 0; j < 10; j++) {
            if (s[j] > s[k]) {
                tool_fail("image %d: class %d but score %d is larger", i, k, j);
            }
        }
        if (luge_fabs(sum - 1.0) > 1e-5) {
            tool_fail("image %d: scores sum to %.7f", i, sum);
        }
        if (*p != '\n') {
            tool_fail("image %d: more than 10 scores", i);
        }
        p++;
        hist[k]++;
    }
    if (*p != 0) {
        tool_fail("output has more lines than images");
    }
    printf("ok: %d image(s); classes:", images);
    for (int k = 0; k < 10; k++) {
        if (hist[k]) {
            printf(" %s=%d", LABELS[k], hist[k]);
        }
    }
    printf("\n");
    return 0;
}
