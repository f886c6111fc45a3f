/*
 * resize — halves an image with bilinear interpolation (Luge edge function).
 *
 * The Sledge paper's RESIZE application (Sledge §5, Table 2: SOD's resize, a
 * JPEG "resized by half") and SledgeScale's "Image Resizing" (SledgeScale §4,
 * Table 3: 26 µs) are this kernel; Luge takes Netpbm instead of JPEG/PNG so that the function is
 * the resampling itself, not a codec.
 *
 * Request:  a binary PGM (P5) or PPM (P6) image, maxval 255, at most 4096 x 4096.
 * Response: the same kind of image, max(1, w/2) x max(1, h/2).
 *
 * Algorithm: separable bilinear resampling with corner-aligned sampling — output column x reads
 * the source at sx = x * (w - 1) / (w' - 1), so the first and last columns map onto the first
 * and last source columns and every other one lands between two source pixels with fractional
 * weights (rows likewise). A horizontal pass produces h x w' rows at 8 extra bits of precision,
 * a vertical pass blends two of those rows. Everything is integer arithmetic with 16-bit
 * fractions, so the result is exact and identical on every target; the final value is rounded
 * to nearest.
 */
#define LUGE_NAME "resize"
#include "../common/luge.h"

/* Source position of output index i, as 16.16 fixed point, for n_in -> n_out samples. */
static inline int64_t src_pos(int32_t i, int32_t n_in, int32_t n_out) {
    if (n_out == 1) {
        return ((int64_t)(n_in - 1) << 16) / 2; /* a single sample takes the middle */
    }
    return ((int64_t)i * (n_in - 1) << 16) / (n_out - 1);
}

/* Horizontal pass over all rows; `ch` is a constant at each call site so the channel loop
 * unrolls. tmp receives value * 256 (0..65280). */
static inline __attribute__((always_inline)) void horizontal(const uint8_t *px, int32_t w,
                                                             int32_t h, const int32_t ch,
                                                             const int32_t *x0, const int32_t *fx,
                                                             int32_t ow, uint16_t *tmp) {
    for (int32_t y = 0; y < h; y++) {
        const uint8_t *src = px + (size_t)y * (size_t)w * (size_t)ch;
        uint16_t *dst = tmp + (size_t)y * (size_t)ow * (size_t)ch;
        for (int32_t x = 0; x < ow; x++) {
            const int32_t a = x0[x], b = a + 1 < w ? a + 1 : a;
            const int32_t wr = fx[x], wl = 65536 - wr;
            for (int32_t k = 0; k < ch; k++) {
                int32_t v = (int32_t)src[a * ch + k] * wl + (int32_t)src[b * ch + k] * wr;
                dst[x * ch + k] = (uint16_t)((v + 128) >> 8);
            }
        }
    }
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    luge_image img;
    luge_read_request_pnm(in, len, (1u << 5) | (1u << 6), &img);

    const int32_t w = img.w, h = img.h, ch = img.channels;
    const int32_t ow = w / 2 > 0 ? w / 2 : 1;
    const int32_t oh = h / 2 > 0 ? h / 2 : 1;

    /* per output column: left source column and its 16-bit weight for the right neighbour */
    int32_t *x0 = (int32_t *)luge_alloc((size_t)ow, sizeof(int32_t));
    int32_t *fx = (int32_t *)luge_alloc((size_t)ow, sizeof(int32_t));
    for (int32_t x = 0; x < ow; x++) {
        int64_t p = src_pos(x, w, ow);
        x0[x] = (int32_t)(p >> 16);
        fx[x] = (int32_t)(p & 0xFFFF);
    }

    /* horizontal pass: tmp holds value * 256 (0..65280) for each (row, output column, channel) */
    const size_t trow = (size_t)ow * (size_t)ch;
    uint16_t *tmp = (uint16_t *)luge_alloc((size_t)h * trow, sizeof(uint16_t));
    if (ch == 1) {
        horizontal(img.px, w, h, 1, x0, fx, ow, tmp);
    } else {
        horizontal(img.px, w, h, 3, x0, fx, ow, tmp);
    }

    /* vertical pass: blend two tmp rows, round back to 8 bits */
    uint8_t *res = (uint8_t *)luge_alloc((size_t)oh * trow, 1);
    for (int32_t y = 0; y < oh; y++) {
        int64_t p = src_pos(y, h, oh);
        const int32_t a = (int32_t)(p >> 16), b = a + 1 < h ? a + 1 : a;
        const int64_t wb = p & 0xFFFF, wa = 65536 - wb;
        const uint16_t *ra = tmp + (size_t)a * trow, *rb = tmp + (size_t)b * trow;
        uint8_t *dst = res + (size_t)y * trow;
        for (size_t i = 0; i < trow; i++) {
            int64_t v = (int64_t)ra[i] * wa + (int64_t)rb[i] * wb; /* value * 2^24 */
            dst[i] = (uint8_t)((v + (1 << 23)) >> 24);
        }
    }
    luge_put_pnm(out, img.kind, ow, oh, res);
}
