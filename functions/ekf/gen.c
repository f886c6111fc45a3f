/*
 * ekf/gen.c — input generator for `ekf` (native only). Simulates a receiver moving at constant
 * velocity near the Earth's surface (ECEF), satellites on 26 560 km orbits above its horizon
 * moving at ~3.9 km/s, and pseudoranges = true range + clock bias + 5 m Gaussian noise. The
 * request's prior state is the truth at t = 0 off by ~100 m, with zero velocity and clock, and a
 * wide covariance. The true position one step after the last epoch is left in a comment
 * ("# truth_pred x y z") for the checker.
 *   small: 1 epoch, 4 satellites (the Sledge GPS-EKF request); medium: 10 epochs of 8;
 *   large: 200 epochs of 10.
 */
#include "../common/tools.h"

static double dot3(const double *a, const double *b) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

int main(int argc, char **argv) {
    static const int epochs_of[3] = {1, 10, 200}, sats_of[3] = {4, 8, 10};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0xe4f00000u);
    int epochs = epochs_of[size], m = sats_of[size];

    const double dt = 1.0, R_ORBIT = 26560e3, SAT_SPEED = 3874.0, SIGMA = 5.0;
    const double p0[3] = {4474350.0, 552210.0, 4490420.0}; /* ~45 N, 7 E */
    const double v[3] = {12.5, -7.25, 3.0};
    const double bias0 = 3000.0, drift = 2.0;
    double up[3], rp = luge_sqrt(dot3(p0, p0));
    for (int k = 0; k < 3; k++) {
        up[k] = p0[k] / rp;
    }
    double sat0[16][3], satv[16][3];
    for (int i = 0; i < m; i++) {
        double d[3], n;
        do { /* random direction at least ~15 degrees above the horizon */
            for (int k = 0; k < 3; k++) {
                d[k] = luge_rng_gauss(&g);
            }
            n = luge_sqrt(dot3(d, d));
            for (int k = 0; k < 3; k++) {
                d[k] /= n;
            }
        } while (dot3(d, up) < 0.26);
        /* |p0 + t d| = R_ORBIT */
        double b = dot3(p0, d), t = -b + luge_sqrt(b * b - rp * rp + R_ORBIT * R_ORBIT);
        for (int k = 0; k < 3; k++) {
            sat0[i][k] = p0[k] + t * d[k];
        }
        /* velocity: a random direction made perpendicular to the satellite's radius */
        double w[3], s = 0;
        for (int k = 0; k < 3; k++) {
            w[k] = luge_rng_gauss(&g);
        }
        double proj = dot3(w, sat0[i]) / dot3(sat0[i], sat0[i]);
        for (int k = 0; k < 3; k++) {
            w[k] -= proj * sat0[i][k];
            s += w[k] * w[k];
        }
        s = luge_sqrt(s);
        for (int k = 0; k < 3; k++) {
            satv[i][k] = SAT_SPEED * w[k] / s;
        }
    }

    printf("ekf-gps 1\n# luge ekf test input: %d epochs of %d satellites\n", epochs, m);
    printf("dt %.17g\n", dt);
    double x0[8] = {p0[0] + 80.0, 0, p0[1] - 45.0, 0, p0[2] + 30.0, 0, 0, 0};
    printf("x");
    for (int i = 0; i < 8; i++) {
        printf(" %.17g", x0[i]);
    }
    printf("\nP");
    const double var[8] = {1e4, 400, 1e4, 400, 1e4, 400, 1e8, 100};
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            printf(" %.17g", i == j ? var[i] : 0.0);
        }
    }
    printf("\nepochs %d\n", epochs);
    for (int e = 1; e <= epochs; e++) {
        double t = e * dt, p[3];
        for (int k = 0; k < 3; k++) {
            p[k] = p0[k] + v[k] * t;
        }
        printf("sats %d\n", m);
        for (int i = 0; i < m; i++) {
            double s[3], d[3];
            for (int k = 0; k < 3; k++) {
                s[k] = sat0[i][k] + satv[i][k] * t;
                d[k] = p[k] - s[k];
            }
            double rho = luge_sqrt(dot3(d, d)) + bias0 + drift * t + SIGMA * luge_rng_gauss(&g);
            printf("%.17g %.17g %.17g %.17g\n", s[0], s[1], s[2], rho);
        }
    }
    double tp = (epochs + 1) * dt;
    printf("# truth_pred %.3f %.3f %.3f\n", p0[0] + v[0] * tp, p0[1] + v[1] * tp,
           p0[2] + v[2] * tp);
    return 0;
}
