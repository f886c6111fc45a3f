/*
 * classify — a small quantised CNN image classifier, CIFAR-10 shaped (Luge edge function).
 *
 * Stands for the Sledge paper's CIFAR10 application (Sledge §5, Table 2:
 * Arm CMSIS-NN's CIFAR-10 network, 5.54 ms native there) and SledgeScale's "Image
 * Classification" (SledgeScale §4, Table 3: 2070 µs). Same shape as that network
 * and the same integer arithmetic style (8-bit activations and weights, 32-bit accumulators),
 * written from scratch:
 *
 *   32x32x3 --conv 5x5, 32, pad 2--> ReLU --maxpool 2--> 16x16x32
 *           --conv 5x5, 16, pad 2--> ReLU --maxpool 2--> 8x8x16
 *           --conv 5x5, 32, pad 2--> ReLU --maxpool 2--> 4x4x32
 *           --fully connected 512 -> 10--> softmax
 *
 * The weights are not trained: they are drawn from a fixed xorshift stream (seeded per layer)
 * every time the function starts, so the module carries no tables and every build computes the
 * same network; each filter is centred (zero mean) so that it responds to structure rather than
 * brightness. Each convolution requantises its 32-bit accumulators to 0..127 with a per-image
 * power-of-two shift chosen from the layer's largest value (dynamic fixed point), so activations
 * neither saturate nor vanish whatever the input. Scores are a softmax over the logits scaled to
 * a maximum magnitude of 8, computed with the shared exp (lugemath.h).
 *
 * Request:  one or more binary PPM (P6) images of exactly 32x32, maxval 255, back to back
 *           (at most 64).
 * Response: per image i, two lines:
 *             image <i> class <k> <label>
 *             scores <s0> ... <s9>          (6 decimals, summing to 1 up to rounding)
 */
#define LUGE_NAME "classify"
#include "../common/luge.h"

#define SIDE 32
#define CLASSES 10
#define MAX_IMAGES 64

static const char *const LABELS[CLASSES] = {"airplane", "automobile", "bird", "cat", "deer",
                                            "dog",      "frog",       "horse", "ship", "truck"};

typedef struct {
    int in_ch, out_ch;  /* channels */
    int8_t *w;          /* [out][5][5][in] */
    int32_t *bias;      /* [out] */
} conv_layer;

typedef struct {
    conv_layer conv[3];
    int8_t *fc_w;       /* [10][512] */
    int32_t fc_bias[CLASSES];
} network;

/* Draws n int8 weights uniform in [-63, 63], then subtracts their (rounded) mean so that each
 * filter ignores a constant input, like a trained edge or texture detector would. */
static void draw_filter(luge_rng *g, int8_t *w, size_t n) {
    int32_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        w[i] = (int8_t)((int32_t)luge_rng_below(g, 127) - 63);
        sum += w[i];
    }
    int32_t mean = (sum >= 0 ? sum + (int32_t)n / 2 : sum - (int32_t)n / 2) / (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        int32_t v = w[i] - mean;
        w[i] = (int8_t)(v < -127 ? -127 : v > 127 ? 127 : v);
    }
}

/* One convolution layer: out_ch centred filters of 5x5xin_ch, biases uniform in
 * [-64, 63] << bias_shift. */
static void make_conv(conv_layer *l, int in_ch, int out_ch, uint64_t seed, int bias_shift) {
    luge_rng g;
    luge_rng_seed(&g, seed);
    l->in_ch = in_ch;
    l->out_ch = out_ch;
    size_t per = 25 * (size_t)in_ch;
    l->w = (int8_t *)luge_alloc((size_t)out_ch * per, 1);
    for (int o = 0; o < out_ch; o++) {
        draw_filter(&g, l->w + (size_t)o * per, per);
    }
    l->bias = (int32_t *)luge_alloc((size_t)out_ch, sizeof(int32_t));
    for (int o = 0; o < out_ch; o++) {
        l->bias[o] = ((int32_t)luge_rng_below(&g, 128) - 64) * (1 << bias_shift);
    }
}

static void make_network(network *net) {
    make_conv(&net->conv[0], 3, 32, 0xC1FA0001u, 6);
    make_conv(&net->conv[1], 32, 16, 0xC1FA0002u, 9);
    make_conv(&net->conv[2], 16, 32, 0xC1FA0003u, 8);
    luge_rng g;
    luge_rng_seed(&g, 0xC1FA0004u);
    net->fc_w = (int8_t *)luge_alloc(CLASSES * 512, 1);
    for (int k = 0; k < CLASSES; k++) {
        draw_filter(&g, net->fc_w + (size_t)k * 512, 512);
    }
    for (int k = 0; k < CLASSES; k++) {
        net->fc_bias[k] = ((int32_t)luge_rng_below(&g, 128) - 64) * (1 << 8);
    }
}

/* 5x5 convolution with zero padding 2 over a side x side x in_ch activation map (HWC), into
 * 32-bit accumulators acc (side x side x out_ch). For each output pixel the 5x5xin_ch input
 * patch is first gathered into one contiguous vector (zeros outside the map), so each filter is
 * a single dot product of 25*in_ch int8 pairs. Returns the largest accumulator (at least 0). */
static int32_t conv5x5(const conv_layer *l, const int8_t *in, int side, int8_t *patch,
                       int32_t *acc) {
    const int ic = l->in_ch, oc = l->out_ch, plen = 25 * ic;
    int32_t maxv = 0;
    for (int y = 0; y < side; y++) {
        for (int x = 0; x < side; x++) {
            int8_t *q = patch;
            for (int ky = 0; ky < 5; ky++) {
                int sy = y + ky - 2;
                for (int kx = 0; kx < 5; kx++) {
                    int sx = x + kx - 2;
                    if (sy < 0 || sy >= side || sx < 0 || sx >= side) {
                        memset(q, 0, (size_t)ic);
                    } else {
                        memcpy(q, in + ((size_t)sy * side + sx) * ic, (size_t)ic);
                    }
                    q += ic;
                }
            }
            int32_t *a = acc + ((size_t)y * side + x) * oc;
            for (int o = 0; o < oc; o++) {
                const int8_t *w = l->w + (size_t)o * plen;
                int32_t s = l->bias[o];
                for (int i = 0; i < plen; i++) {
                    s += (int32_t)patch[i] * (int32_t)w[i];
                }
                a[o] = s;
                if (s > maxv) {
                    maxv = s;
                }
            }
        }
    }
    return maxv;
}

/* ReLU, requantisation to 0..127 by the smallest shift that fits maxv, and 2x2 max pooling:
 * acc (side x side x ch) -> out (side/2 x side/2 x ch). Max pooling commutes with the monotone
 * ReLU and shift, so pool first and requantise the pooled value. */
static void relu_requant_pool(const int32_t *acc, int side, int ch, int32_t maxv, int8_t *out) {
    int shift = 0;
    while ((maxv >> shift) > 127) {
        shift++;
    }
    const int half = side / 2;
    for (int y = 0; y < half; y++) {
        for (int x = 0; x < half; x++) {
            const int32_t *p00 = acc + ((size_t)(2 * y) * side + 2 * x) * ch;
            const int32_t *p01 = p00 + ch;
            const int32_t *p10 = p00 + (size_t)side * ch;
            const int32_t *p11 = p10 + ch;
            int8_t *o = out + ((size_t)y * half + x) * ch;
            for (int c = 0; c < ch; c++) {
                int32_t m = p00[c];
                m = p01[c] > m ? p01[c] : m;
                m = p10[c] > m ? p10[c] : m;
                m = p11[c] > m ? p11[c] : m;
                o[c] = (int8_t)(m > 0 ? m >> shift : 0);
            }
        }
    }
}

/* Runs the network on one 32x32 RGB image; fills logits. */
static void infer(const network *net, const uint8_t *rgb, int8_t *act0, int8_t *act1,
                  int8_t *patch, int32_t *acc, int32_t *logits) {
    /* input: 0..255 -> -64..63 */
    for (int i = 0; i < SIDE * SIDE * 3; i++) {
        act0[i] = (int8_t)(rgb[i] / 2 - 64);
    }
    int32_t m = conv5x5(&net->conv[0], act0, 32, patch, acc);
    relu_requant_pool(acc, 32, 32, m, act1); /* 16x16x32 */
    m = conv5x5(&net->conv[1], act1, 16, patch, acc);
    relu_requant_pool(acc, 16, 16, m, act0); /* 8x8x16 */
    m = conv5x5(&net->conv[2], act0, 8, patch, acc);
    relu_requant_pool(acc, 8, 32, m, act1); /* 4x4x32 = 512 */
    for (int k = 0; k < CLASSES; k++) {
        const int8_t *w = net->fc_w + (size_t)k * 512;
        int32_t s = net->fc_bias[k];
        for (int i = 0; i < 512; i++) {
            s += (int32_t)act1[i] * (int32_t)w[i];
        }
        logits[k] = s;
    }
}

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    network net;
    make_network(&net);
    int8_t *act0 = (int8_t *)luge_alloc(SIDE * SIDE * 32, 1);
    int8_t *act1 = (int8_t *)luge_alloc(SIDE * SIDE * 32, 1);
    int32_t *acc = (int32_t *)luge_alloc(SIDE * SIDE * 32, sizeof(int32_t));
    int8_t *patch = (int8_t *)luge_alloc(25 * 32, 1);

    luge_cursor c = luge_cursor_new(in, len);
    int n = 0;
    for (;;) {
        luge_skip_space(&c, 1);
        if (c.p == c.end) {
            break;
        }
        if (n == MAX_IMAGES) {
            luge_fail("more than 64 images in one request");
        }
        luge_image img;
        luge_read_pnm(&c, 1u << 6, &img);
        if (img.w != SIDE || img.h != SIDE) {
            luge_fail("images must be 32x32 PPM (P6)");
        }
        int32_t logits[CLASSES];
        infer(&net, img.px, act0, act1, patch, acc, logits);

        /* class = argmax (first on ties); scores = softmax of logits scaled to |max| = 8 */
        int best = 0;
        int64_t amax = 1;
        for (int k = 0; k < CLASSES; k++) {
            if (logits[k] > logits[best]) {
                best = k;
            }
            int64_t a = logits[k] < 0 ? -(int64_t)logits[k] : logits[k];
            if (a > amax) {
                amax = a;
            }
        }
        double scale = 8.0 / (double)amax, e[CLASSES], sum = 0.0;
        for (int k = 0; k < CLASSES; k++) {
            e[k] = luge_exp((double)(logits[k] - logits[best]) * scale);
            sum += e[k];
        }
        luge_put_str(out, "image ");
        luge_put_i64(out, n);
        luge_put_str(out, " class ");
        luge_put_i64(out, best);
        luge_put_char(out, ' ');
        luge_put_str(out, LABELS[best]);
        luge_put_str(out, "\nscores");
        for (int k = 0; k < CLASSES; k++) {
            luge_put_char(out, ' ');
            luge_put_fixed(out, e[k] / sum, 6);
        }
        luge_put_char(out, '\n');
        n++;
    }
    if (n == 0) {
        luge_fail("no image in the request");
    }
}
