/*
 * sift/check.c — checker for `sift` (native only): the keypoint list must be well formed (count
 * line, positions inside the image, positive scales, octave/level in range, |response| above the
 * contrast threshold) and every blob the generator planted ("# blob cx cy sigma" comments) must
 * be found: some keypoint within max(2, sigma) pixels of its centre whose scale is within a
 * factor of 2 of the blob's sigma (a Gaussian blob's scale-normalised Laplacian peaks at its
 * own sigma).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    tool_image img;
    size_t out_len;
    const char *out = tool_check_image_args(argc, argv, &img, &out_len);
    int n, used;
    if (sscanf(out, "keypoints %d\n%n", &n, &used) != 1 || n < 0) {
        tool_fail("expected 'keypoints <n>'");
    }
    double *kx = malloc(sizeof(double) * (n + 1)), *ky = malloc(sizeof(double) * (n + 1));
    double *ks = malloc(sizeof(double) * (n + 1));
    const char *p = out + used;
    for (int i = 0; i < n; i++) {
        int oct, lvl;
        double resp;
        if (sscanf(p, "%lf %lf %lf %d %d %lf\n%n", &kx[i], &ky[i], &ks[i], &oct, &lvl, &resp,
                   &used) != 6) {
            tool_fail("keypoint line %d malformed", i);
        }
        p += used;
        if (!(kx[i] >= 0 && kx[i] < img.w && ky[i] >= 0 && ky[i] < img.h)) {
            tool_fail("keypoint %d at (%.2f, %.2f) is outside the image", i, kx[i], ky[i]);
        }
        if (!(ks[i] > 0) || oct < 0 || oct > 4 || lvl < 1 || lvl > 3) {
            tool_fail("keypoint %d: bad scale/octave/level", i);
        }
        if (!(luge_fabs(resp) >= 0.04 / 3 * 0.999)) {
            tool_fail("keypoint %d: response %g below the contrast threshold", i, resp);
        }
    }
    if (*p != 0) {
        tool_fail("more keypoint lines than announced");
    }
    int blobs = 0;
    for (int c = 0; c < img.ncomments; c++) {
        double bx, by, bs;
        if (sscanf(img.comments[c], " blob %lf %lf %lf", &bx, &by, &bs) != 3) {
            continue;
        }
        blobs++;
        double radius = bs > 2 ? bs : 2, target = bs;
        int found = 0;
        for (int i = 0; i < n && !found; i++) {
            double d = luge_sqrt((kx[i] - bx) * (kx[i] - bx) + (ky[i] - by) * (ky[i] - by));
            found = d <= radius && ks[i] > target / 2 && ks[i] < target * 2;
        }
        if (!found) {
            tool_fail("no keypoint for the blob at (%.2f, %.2f), sigma %.2f", bx, by, bs);
        }
    }
    printf("ok: %d keypoints, all %d planted blobs found\n", n, blobs);
    return 0;
}
