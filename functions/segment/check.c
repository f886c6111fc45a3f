/*
 * segment/check.c — checker for `segment` (native only): the summary must be consistent (image
 * size, K ascending centres in [0, 255], cluster counts and component areas both adding up to
 * the pixel count, listed components sorted by area with boxes inside the image that can hold
 * their area) and every shape the generator planted ("# region x0 y0 x1 y1 level") must appear
 * as a listed component whose bounding box matches within 2 pixels and whose mean intensity is
 * within 12 of the shape's level.
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    tool_image img;
    size_t out_len;
    const char *out = tool_check_image_args(argc, argv, &img, &out_len);
    double v[8];
    tool_get_numbers(out, "segment", v, 2);
    if (v[0] != img.w || v[1] != img.h) {
        tool_fail("size line does not match the image");
    }
    double k;
    tool_get_numbers(out, "clusters", &k, 1);
    if (k != 4) {
        tool_fail("expected 4 clusters");
    }
    double centers[4], counts[4], comps, listed[2], unlisted;
    tool_get_numbers(out, "centers", centers, 4);
    tool_get_numbers(out, "counts", counts, 4);
    tool_get_numbers(out, "components", &comps, 1);
    tool_get_numbers(out, "listed", listed, 1);
    tool_get_numbers(out, "unlisted_area", &unlisted, 1);
    const double npx = (double)img.w * img.h;
    double csum = 0;
    for (int i = 0; i < 4; i++) {
        if (!(centers[i] >= 0 && centers[i] <= 255) || (i > 0 && centers[i] < centers[i - 1])) {
            tool_fail("centres are not ascending in [0, 255]");
        }
        csum += counts[i];
    }
    if (csum != npx) {
        tool_fail("cluster counts add up to %.0f, not %.0f", csum, npx);
    }
    const char *p = strstr(out, "unlisted_area");
    p = strchr(p, '\n') + 1;
    int n = (int)listed[0];
    double (*c)[10] = malloc(sizeof(double[10]) * (n + 1));
    double area = unlisted;
    for (int i = 0; i < n; i++) {
        int used;
        if (sscanf(p, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf\n%n", &c[i][0], &c[i][1], &c[i][2],
                   &c[i][3], &c[i][4], &c[i][5], &c[i][6], &c[i][7], &c[i][8], &c[i][9],
                   &used) != 10) {
            tool_fail("component line %d malformed", i);
        }
        p += used;
        double bw = c[i][5] - c[i][3] + 1, bh = c[i][6] - c[i][4] + 1;
        if (c[i][0] != i || c[i][1] < 0 || c[i][1] > 3 || c[i][3] < 0 || c[i][4] < 0 ||
            c[i][5] >= img.w || c[i][6] >= img.h || bw < 1 || bh < 1 || c[i][2] > bw * bh) {
            tool_fail("component %d is inconsistent", i);
        }
        if (i > 0 && c[i][2] > c[i - 1][2]) {
            tool_fail("components are not sorted by area");
        }
        area += c[i][2];
    }
    if (*p != 0) {
        tool_fail("more component lines than listed");
    }
    if (area != npx) {
        tool_fail("component areas add up to %.0f, not %.0f", area, npx);
    }
    int regions = 0;
    for (int r = 0; r < img.ncomments; r++) {
        double x0, y0, x1, y1, level;
        if (sscanf(img.comments[r], " region %lf %lf %lf %lf %lf", &x0, &y0, &x1, &y1, &level) !=
            5) {
            continue;
        }
        regions++;
        int found = 0;
        for (int i = 0; i < n && !found; i++) {
            found = luge_fabs(c[i][3] - x0) <= 2 && luge_fabs(c[i][4] - y0) <= 2 &&
                    luge_fabs(c[i][5] - x1) <= 2 && luge_fabs(c[i][6] - y1) <= 2 &&
                    luge_fabs(c[i][9] - level) <= 12;
        }
        if (!found) {
            tool_fail("no component for the region %.0f %.0f %.0f %.0f (level %.0f)", x0, y0, x1,
                      y1, level);
        }
    }
    printf("ok: %.0f components, %d listed, all %d planted regions found\n", comps, n, regions);
    return 0;
}
