/*
 * sift — scale-invariant keypoint detection, the front half of SIFT (Luge edge function).
 *
 * SledgeScale's SD-VBS workload (SledgeScale §4, Table 3: SIFT, 113 µs, 90 % of
 * requests) runs the SD-VBS SIFT benchmark; this is the same detection stage as Lowe's SIFT
 * (and SD-VBS's): a difference-of-Gaussians scale space and its refined, filtered extrema.
 * Descriptors (the back half) are not computed. Written from the published algorithm.
 *
 * Algorithm (Lowe 2004, §3-4):
 *   1. The grey image, scaled to [0, 1], is assumed to carry a blur of 0.5 and is blurred to
 *      sigma0 = 1.6.
 *   2. Each octave holds S + 3 Gaussian images (S = 3 intervals): level i has blur
 *      sigma0 * 2^(i/S), reached from level i-1 by an incremental separable Gaussian (radius
 *      ceil(3 sigma), clamped borders). The next octave starts from level S subsampled by 2.
 *      Octaves continue while the shorter side is at least 16 pixels (at most 5 octaves).
 *   3. Adjacent levels are subtracted into S + 2 difference-of-Gaussian (DoG) images.
 *   4. A sample of DoG levels 1..S, at least 5 pixels from the border, with |D| above half the
 *      contrast threshold and strictly larger (or smaller) than its 26 neighbours in space and
 *      scale is a candidate.
 *   5. Each candidate is refined by fitting a 3-D quadratic (finite-difference gradient and
 *      Hessian), stepping one sample towards the fitted extremum along each axis where it lies
 *      more than 0.6 away (at most 5 steps; a final offset must stay below 1.5, as in the
 *      VLFeat-derived SIFT that SD-VBS uses), then rejected if its interpolated
 *      |D| is below the contrast threshold 0.04 / S or if it lies on an edge (principal
 *      curvature ratio above r = 10: tr(H)^2 / det(H) >= (r + 1)^2 / r).
 *
 * Request:  a binary PGM (P5) image, maxval 255, at least 16x16 and at most 150 000 pixels
 *           (e.g. 384x384: the scale space takes 12 float planes of the image size, and all of
 *           it must fit the 8 MiB working budget of luge.h).
 * Response: "keypoints <n>" then one line per keypoint, in scan order (octave, level, row,
 *           column): <x> <y> <sigma> <octave> <level> <response> — position in input pixels
 *           (2 decimals), scale in input pixels (3 decimals), the DoG level, and the interpolated
 *           DoG value (scientific, 6 digits).
 *
 * Arithmetic is single-precision float on both targets (IEEE, no contraction), with Gaussian
 * kernels from the shared exp.
 */
#define LUGE_NAME "sift"
#include "../common/luge.h"

#define S 3               /* intervals per octave */
#define LEVELS (S + 3)    /* Gaussian images per octave */
#define MAX_OCTAVES 5
#define BORDER 5
#define MAX_MOVES 5
#define MAX_KEYPOINTS 20000
#define MAX_PIXELS 150000

static const double SIGMA0 = 1.6;
static const double INPUT_BLUR = 0.5;
static const double CONTRAST = 0.04 / S;
static const double EDGE_R = 10.0;
static const double LN2 = 0.69314718055994530942;

typedef struct {
    float x, y, sigma, response;
    int octave, level;
} keypoint;

/* Normalised Gaussian kernel k[0..r] (one side) for sigma; returns r = ceil(3 sigma). */
static int gauss_kernel(double sigma, float *k, int max_r) {
    int r = (int)(3.0 * sigma);
    if ((double)r < 3.0 * sigma) {
        r++;
    }
    if (r > max_r) {
        r = max_r;
    }
    double w[64], sum = 0.0;
    for (int i = 0; i <= r; i++) {
        w[i] = luge_exp(-(double)(i * i) / (2.0 * sigma * sigma));
        sum += i == 0 ? w[i] : 2.0 * w[i];
    }
    for (int i = 0; i <= r; i++) {
        k[i] = (float)(w[i] / sum);
    }
    return r;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* dst = src blurred by sigma (separable, borders clamped). tmp is w*h scratch and pad holds
 * w + 2*63 floats: each row is copied there with its ends replicated, so that both passes are
 * branch-free loops over whole rows (which the compiler vectorises natively). */
static void blur(const float *src, float *dst, float *tmp, float *pad, int w, int h,
                 double sigma) {
    float k[64];
    const int r = gauss_kernel(sigma, k, 63);
    /* horizontal: src -> tmp */
    for (int y = 0; y < h; y++) {
        const float *s = src + (size_t)y * w;
        float *t = tmp + (size_t)y * w;
        for (int j = 0; j < r; j++) {
            pad[j] = s[0];
            pad[r + w + j] = s[w - 1];
        }
        memcpy(pad + r, s, (size_t)w * sizeof(float));
        const float *c = pad + r;
        for (int x = 0; x < w; x++) {
            t[x] = k[0] * c[x];
        }
        for (int j = 1; j <= r; j++) {
            const float kj = k[j];
            for (int x = 0; x < w; x++) {
                t[x] += kj * (c[x - j] + c[x + j]);
            }
        }
    }
    /* vertical: tmp -> dst */
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t)y * w;
        const float *c = tmp + (size_t)y * w;
        for (int x = 0; x < w; x++) {
            d[x] = k[0] * c[x];
        }
        for (int j = 1; j <= r; j++) {
            const float *up = tmp + (size_t)clampi(y - j, 0, h - 1) * w;
            const float *dn = tmp + (size_t)clampi(y + j, 0, h - 1) * w;
            const float kj = k[j];
            for (int x = 0; x < w; x++) {
                d[x] += kj * (up[x] + dn[x]);
            }
        }
    }
}

/* Solves the 3x3 system A x = b by Gaussian elimination with partial pivoting; returns 0 if A
 * is (numerically) singular. */
static int solve3(double A[3][3], double b[3], double x[3]) {
    int idx[3] = {0, 1, 2};
    for (int col = 0; col < 3; col++) {
        int piv = col;
        for (int r = col + 1; r < 3; r++) {
            if (luge_fabs(A[idx[r]][col]) > luge_fabs(A[idx[piv]][col])) {
                piv = r;
            }
        }
        int t = idx[col];
        idx[col] = idx[piv];
        idx[piv] = t;
        double p = A[idx[col]][col];
        if (!(luge_fabs(p) > 1e-12)) {
            return 0;
        }
        for (int r = col + 1; r < 3; r++) {
            double f = A[idx[r]][col] / p;
            for (int c = col; c < 3; c++) {
                A[idx[r]][c] -= f * A[idx[col]][c];
            }
            b[idx[r]] -= f * b[idx[col]];
        }
    }
    for (int col = 2; col >= 0; col--) {
        double s = b[idx[col]];
        for (int c = col + 1; c < 3; c++) {
            s -= A[idx[col]][c] * x[c];
        }
        x[col] = s / A[idx[col]][col];
    }
    return 1;
}

typedef struct {
    float *dog[LEVELS - 1];
    int w, h;
} octave_dog;

/* Is dog[l] at (x, y) strictly above (or below) all 26 neighbours? */
static int is_extremum(const octave_dog *o, int l, int x, int y) {
    const int w = o->w;
    const float v = o->dog[l][(size_t)y * w + x];
    if (v > 0) {
        for (int dl = -1; dl <= 1; dl++) {
            const float *d = o->dog[l + dl];
            for (int dy = -1; dy <= 1; dy++) {
                const float *row = d + (size_t)(y + dy) * w + x;
                for (int dx = -1; dx <= 1; dx++) {
                    if ((dl | dy | dx) != 0 && !(v > row[dx])) {
                        return 0;
                    }
                }
            }
        }
    } else {
        for (int dl = -1; dl <= 1; dl++) {
            const float *d = o->dog[l + dl];
            for (int dy = -1; dy <= 1; dy++) {
                const float *row = d + (size_t)(y + dy) * w + x;
                for (int dx = -1; dx <= 1; dx++) {
                    if ((dl | dy | dx) != 0 && !(v < row[dx])) {
                        return 0;
                    }
                }
            }
        }
    }
    return 1;
}

/* Refines a candidate (step 5); on success fills kp (octave-relative position) and returns 1. */
static int refine(const octave_dog *o, int l, int x, int y, keypoint *kp) {
    const int w = o->w, h = o->h;
    double off[3] = {0, 0, 0}, g[3] = {0, 0, 0};
    double dxx = 0, dyy = 0, dxy = 0;
    int moves = 0;
    for (;;) {
        const float *c = o->dog[l], *lo = o->dog[l - 1], *hi = o->dog[l + 1];
#define D(img, yy, xx) ((double)(img)[(size_t)(yy) * w + (xx)])
        double v = D(c, y, x);
        g[0] = 0.5 * (D(c, y, x + 1) - D(c, y, x - 1));
        g[1] = 0.5 * (D(c, y + 1, x) - D(c, y - 1, x));
        g[2] = 0.5 * (D(hi, y, x) - D(lo, y, x));
        dxx = D(c, y, x + 1) + D(c, y, x - 1) - 2.0 * v;
        dyy = D(c, y + 1, x) + D(c, y - 1, x) - 2.0 * v;
        double dss = D(hi, y, x) + D(lo, y, x) - 2.0 * v;
        dxy = 0.25 * (D(c, y + 1, x + 1) - D(c, y + 1, x - 1) - D(c, y - 1, x + 1) +
                      D(c, y - 1, x - 1));
        double dxs = 0.25 * (D(hi, y, x + 1) - D(hi, y, x - 1) - D(lo, y, x + 1) +
                             D(lo, y, x - 1));
        double dys = 0.25 * (D(hi, y + 1, x) - D(hi, y - 1, x) - D(lo, y + 1, x) +
                             D(lo, y - 1, x));
#undef D
        double H[3][3] = {{dxx, dxy, dxs}, {dxy, dyy, dys}, {dxs, dys, dss}};
        double rhs[3] = {-g[0], -g[1], -g[2]};
        if (!solve3(H, rhs, off)) {
            return 0;
        }
        /* step one sample towards the fitted extremum along each axis where it lies more than
         * 0.6 away; stop when no step is needed (or after MAX_MOVES) */
        int sx = off[0] > 0.6 ? 1 : off[0] < -0.6 ? -1 : 0;
        int sy = off[1] > 0.6 ? 1 : off[1] < -0.6 ? -1 : 0;
        int sl = off[2] > 0.6 ? 1 : off[2] < -0.6 ? -1 : 0;
        if ((sx | sy | sl) == 0 || ++moves > MAX_MOVES) {
            break;
        }
        x += sx;
        y += sy;
        l += sl;
        if (l < 1 || l > S || x < BORDER || x >= w - BORDER || y < BORDER || y >= h - BORDER) {
            return 0;
        }
    }
    if (!(luge_fabs(off[0]) < 1.5 && luge_fabs(off[1]) < 1.5 && luge_fabs(off[2]) < 1.5)) {
        return 0;
    }
    double contrast =
        (double)o->dog[l][(size_t)y * w + x] + 0.5 * (g[0] * off[0] + g[1] * off[1] + g[2] * off[2]);
    if (luge_fabs(contrast) < CONTRAST) {
        return 0;
    }
    double tr = dxx + dyy, det = dxx * dyy - dxy * dxy;
    if (!(det > 0) || tr * tr * EDGE_R >= (EDGE_R + 1) * (EDGE_R + 1) * det) {
        return 0;
    }
    kp->x = (float)((double)x + off[0]);
    kp->y = (float)((double)y + off[1]);
    kp->sigma = (float)(SIGMA0 * luge_exp(((double)l + off[2]) / S * LN2));
    kp->response = (float)contrast;
    kp->level = l;
    return 1;
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    luge_image img;
    luge_read_request_pnm(in, len, 1u << 5, &img);
    const int W = img.w, H = img.h;
    if (W < 16 || H < 16) {
        luge_fail("image must be at least 16x16");
    }
    if ((size_t)W * (size_t)H > MAX_PIXELS) {
        luge_fail("image larger than 150000 pixels");
    }
    const size_t npx = (size_t)W * (size_t)H;
    float *gauss[LEVELS];
    octave_dog od;
    for (int i = 0; i < LEVELS; i++) {
        gauss[i] = (float *)luge_alloc(npx, sizeof(float));
    }
    for (int i = 0; i < LEVELS - 1; i++) {
        od.dog[i] = (float *)luge_alloc(npx, sizeof(float));
    }
    float *tmp = (float *)luge_alloc(npx, sizeof(float));
    float *pad = (float *)luge_alloc((size_t)W + 2 * 63, sizeof(float));
    keypoint *kps = (keypoint *)luge_alloc(MAX_KEYPOINTS, sizeof(keypoint));
    int nkp = 0;

    /* incremental blurs between levels: sigma_i^2 - sigma_{i-1}^2 */
    double inc[LEVELS];
    for (int i = 1; i < LEVELS; i++) {
        double prev = SIGMA0 * luge_exp((double)(i - 1) / S * LN2);
        double cur = SIGMA0 * luge_exp((double)i / S * LN2);
        inc[i] = luge_sqrt(cur * cur - prev * prev);
    }

    /* octave 0, level 0: the input blurred from 0.5 to sigma0 */
    for (size_t i = 0; i < npx; i++) {
        tmp[i] = (float)img.px[i] * (1.0f / 255.0f);
    }
    blur(tmp, gauss[0], od.dog[0], pad, W, H, luge_sqrt(SIGMA0 * SIGMA0 - INPUT_BLUR * INPUT_BLUR));

    int w = W, h = H;
    for (int oct = 0; oct < MAX_OCTAVES && (w < h ? w : h) >= 16; oct++) {
        if (oct > 0) {
            /* next octave: level S of the previous one (blur 2 sigma0), every second pixel */
            const int pw = w;
            w /= 2;
            h /= 2;
            for (int y = 0; y < h; y++) {
                for (int x = 0; x < w; x++) {
                    tmp[(size_t)y * w + x] = gauss[S][(size_t)(2 * y) * pw + 2 * x];
                }
            }
            memcpy(gauss[0], tmp, (size_t)w * h * sizeof(float));
        }
        for (int i = 1; i < LEVELS; i++) {
            blur(gauss[i - 1], gauss[i], tmp, pad, w, h, inc[i]);
        }
        const size_t n = (size_t)w * h;
        for (int i = 0; i < LEVELS - 1; i++) {
            for (size_t p = 0; p < n; p++) {
                od.dog[i][p] = gauss[i + 1][p] - gauss[i][p];
            }
        }
        od.w = w;
        od.h = h;
        const float pre = (float)(0.5 * CONTRAST);
        const double scale = (double)(1 << oct);
        for (int l = 1; l <= S; l++) {
            for (int y = BORDER; y < h - BORDER; y++) {
                const float *row = od.dog[l] + (size_t)y * w;
                for (int x = BORDER; x < w - BORDER; x++) {
                    float v = row[x];
                    if (!(v > pre || v < -pre) || !is_extremum(&od, l, x, y)) {
                        continue;
                    }
                    keypoint kp;
                    if (!refine(&od, l, x, y, &kp)) {
                        continue;
                    }
                    if (nkp == MAX_KEYPOINTS) {
                        luge_fail("too many keypoints");
                    }
                    kp.octave = oct;
                    kp.x = (float)((double)kp.x * scale);
                    kp.y = (float)((double)kp.y * scale);
                    kp.sigma = (float)((double)kp.sigma * scale);
                    kps[nkp++] = kp;
                }
            }
        }
    }

    luge_put_str(out, "keypoints ");
    luge_put_i64(out, nkp);
    luge_put_char(out, '\n');
    for (int i = 0; i < nkp; i++) {
        luge_put_fixed(out, kps[i].x, 2);
        luge_put_char(out, ' ');
        luge_put_fixed(out, kps[i].y, 2);
        luge_put_char(out, ' ');
        luge_put_fixed(out, kps[i].sigma, 3);
        luge_put_char(out, ' ');
        luge_put_i64(out, kps[i].octave);
        luge_put_char(out, ' ');
        luge_put_i64(out, kps[i].level);
        luge_put_char(out, ' ');
        luge_put_sci(out, kps[i].response, 6);
        luge_put_char(out, '\n');
    }
}
