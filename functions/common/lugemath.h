/*
 * lugemath.h — deterministic math and pseudo-random numbers for Luge's C functions and their
 * input generators and checkers. Every routine is plain C on IEEE-754 doubles and fixed-width
 * integers, so the wasm32-wasi and x86-64 builds compute bit-identical results (see luge.h for
 * the full set of byte-equality rules). No libm: glibc's and wasi-libc's exp() differ in the
 * last bit for some arguments.
 */
#ifndef LUGEMATH_H
#define LUGEMATH_H

#include <stdint.h>

/* ------------------------------------------------------------------------------------------ */
/* Deterministic math shared by both builds                                                    */

static inline double luge_fabs(double x) { return x < 0.0 ? -x : x; }

/* IEEE-754 square root: correctly rounded by the standard, hence identical on both targets. */
static inline double luge_sqrt(double x) { return __builtin_sqrt(x); }

/* Largest integer-valued double <= x (x finite). */
static double luge_floor(double x) {
    if (!(x > -4503599627370496.0 && x < 4503599627370496.0)) {
        return x; /* |x| >= 2^52 (already an integer), or NaN */
    }
    double t = (double)(int64_t)x; /* truncates toward zero; in range by the test above */
    return t > x ? t - 1.0 : t;
}

/* Nearest integer, halves away from zero, clamped to the int64 range (NaN -> 0). */
static int64_t luge_round_i64(double x) {
    if (x != x) {
        return 0;
    }
    if (x >= 9.2e18) {
        return INT64_MAX;
    }
    if (x <= -9.2e18) {
        return INT64_MIN;
    }
    double a = luge_fabs(x);
    int64_t r = (int64_t)a;
    if (a - (double)r >= 0.5) {
        r++;
    }
    return x < 0 ? -r : r;
}

/* Clamps x into [lo, hi] and converts; NaN -> lo. */
static inline int32_t luge_clamp_i32(double x, int32_t lo, int32_t hi) {
    if (!(x > (double)lo)) {
        return lo;
    }
    if (x >= (double)hi) {
        return hi;
    }
    return (int32_t)x;
}

/* 2^k as a double for -1022 <= k <= 1023, built from its bit pattern. */
static inline double luge_pow2i(int k) {
    union {
        uint64_t u;
        double d;
    } v;
    v.u = (uint64_t)(k + 1023) << 52;
    return v.d;
}

/* e^x. Range reduction x = k ln2 + r with |r| <= ln2/2 (ln2 split in a high part with trailing
 * zero bits so k*LN2_HI is exact), a degree-13 Taylor polynomial for e^r (truncation error
 * < 1e-17 relative), and scaling by 2^k in two steps so that subnormal results stay graceful.
 * Accurate to a few ulp; what matters here is that it is the same code on both targets. */
static double luge_exp(double x) {
    if (x != x) {
        return x;
    }
    if (x > 709.78) {
        return __builtin_inf();
    }
    if (x < -745.2) {
        return 0.0;
    }
    const double LN2_HI = 6.93147180369123816490e-01;
    const double LN2_LO = 1.90821492927058770002e-10;
    const double INV_LN2 = 1.44269504088896338700e+00;
    double kf = x * INV_LN2;
    int k = (int)(kf < 0 ? kf - 0.5 : kf + 0.5); /* |kf| < 1076: in range */
    double r = (x - (double)k * LN2_HI) - (double)k * LN2_LO;
    /* Horner evaluation of sum r^i / i!, i = 0..13 */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* k in [-1075, 1024]: split into two factors that are both normal powers of two */
    int k1 = k / 2;
    int k2 = k - k1;
    return p * luge_pow2i(k1) * luge_pow2i(k2);
}

/* ------------------------------------------------------------------------------------------ */
/* Deterministic pseudo-random numbers: splitmix64 to seed, xorshift64* to draw.               */

typedef struct {
    uint64_t s;
} luge_rng;

static inline void luge_rng_seed(luge_rng *g, uint64_t seed) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    g->s = z ? z : 0x2545F4914F6CDD1Dull; /* xorshift state must not be zero */
}

static inline uint64_t luge_rng_next(luge_rng *g) {
    uint64_t x = g->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g->s = x;
    return x * 0x2545F4914F6CDD1Dull;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double luge_rng_unit(luge_rng *g) {
    return (double)(luge_rng_next(g) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform integer in [0, n) (n > 0; the modulo bias is irrelevant for test data). */
static inline uint32_t luge_rng_below(luge_rng *g, uint32_t n) {
    return (uint32_t)((luge_rng_next(g) >> 32) % n);
}

/* Approximately standard normal: the sum of 12 uniforms minus 6 (Irwin-Hall); for test data. */
static inline double luge_rng_gauss(luge_rng *g) {
    double s = 0.0;
    for (int i = 0; i < 12; i++) {
        s += luge_rng_unit(g);
    }
    return s - 6.0;
}

#endif /* LUGEMATH_H */
