/*
 * ekf — GPS position tracking with an extended Kalman filter (Luge edge function).
 *
 * The Sledge paper's GPS-EKF application (Sledge §5, Table 2: 27 µs native)
 * reads a GPS filter state and satellite observations on stdin, runs an EKF and writes the new
 * state and a predicted position; the state travels with the request because a sandbox keeps
 * nothing between requests. This is Luge's own filter written for that contract.
 *
 * Model (ECEF metres, seconds). State x = [px vx py vy pz vz b d]: receiver position and velocity
 * per axis, receiver clock bias b and drift d expressed in metres and metres/second.
 *   Process:     constant velocity / constant drift over a step dt,
 *                x' = F x with F = blockdiag(A, A, A, A), A = [[1, dt], [0, 1]];
 *                Q  = blockdiag(QA, QA, QA, QC): white-noise acceleration per axis,
 *                QA = qa [[dt^3/3, dt^2/2], [dt^2/2, dt]], and a two-state clock model,
 *                QC = [[sf dt + sg dt^3/3, sg dt^2/2], [sg dt^2/2, sg dt]].
 *   Measurement: one pseudorange per satellite i at position s_i,
 *                rho_i = |p - s_i| + b + noise (variance r);
 *                Jacobian row H_i = [ux 0 uy 0 uz 0 1 0], u = (p - s_i) / |p - s_i|.
 * Each epoch: predict (x = F x, P = F P F^T + Q), then update with the epoch's m pseudoranges:
 *   S = H P H^T + R (m x m, Cholesky), K = P H^T S^-1, x += K (z - h(x)), P = (I - K H) P,
 *   symmetrised. After the last epoch the response also gives the position predicted one step
 *   ahead (F x), which is what the client would use until its next fix.
 *
 * Request (text; '#' starts a comment; numbers are decimal, exponents allowed):
 *   ekf-gps 1
 *   dt <seconds>
 *   x <8 numbers>
 *   P <64 numbers, row major>
 *   epochs <E>                            1 <= E <= 10000
 *   then E times:  sats <m>               4 <= m <= 16
 *                  m lines: <sx> <sy> <sz> <rho>
 * Response (text): the first four lines in the same format (x and P with 17 significant
 * digits), so the client can feed them back with its next epochs, then
 *   pred <px> <py> <pz>                   position one dt ahead, metres (mm resolution)
 *   clock <b> <d>                         clock bias (m) and drift (m/s)
 *   residual_rms <metres>                 RMS of the last epoch's post-fit residuals
 */
#define LUGE_NAME "ekf"
#include "../common/luge.h"

#define N 8       /* state dimension */
#define MAX_SAT 16
#define MAX_EPOCHS 10000

/* Noise parameters of the model above (units: m^2/s^3 for qa; sf, sg for the clock in m^2/s
 * and m^2/s^3; r in m^2 for the pseudorange). */
static const double QA = 0.5;
static const double SF = 4.0;
static const double SG = 0.04;
static const double R_RHO = 25.0;

typedef struct {
    double dt;
    double x[N];
    double P[N][N];
} filter;

static void predict(filter *f) {
    const double dt = f->dt;
    /* x = F x */
    for (int a = 0; a < N; a += 2) {
        f->x[a] += dt * f->x[a + 1];
    }
    /* P = F P F^T: with F = I + dt * E (E shifts row a+1 into row a, for even a) */
    double T[N][N];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            T[i][j] = f->P[i][j] + ((i & 1) == 0 ? dt * f->P[i + 1][j] : 0.0);
        }
    }
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            f->P[i][j] = T[i][j] + ((j & 1) == 0 ? dt * T[i][j + 1] : 0.0);
        }
    }
    /* + Q */
    const double dt2 = dt * dt, dt3 = dt2 * dt;
    for (int a = 0; a < 6; a += 2) {
        f->P[a][a] += QA * dt3 / 3.0;
        f->P[a][a + 1] += QA * dt2 / 2.0;
        f->P[a + 1][a] += QA * dt2 / 2.0;
        f->P[a + 1][a + 1] += QA * dt;
    }
    f->P[6][6] += SF * dt + SG * dt3 / 3.0;
    f->P[6][7] += SG * dt2 / 2.0;
    f->P[7][6] += SG * dt2 / 2.0;
    f->P[7][7] += SG * dt;
}

/* Expected pseudorange of satellite s and the line-of-sight unit vector u. */
static double expected_range(const double *x, const double *s, double *u) {
    double dx = x[0] - s[0], dy = x[2] - s[1], dz = x[4] - s[2];
    double r = luge_sqrt(dx * dx + dy * dy + dz * dz);
    if (!(r > 1.0)) {
        luge_fail("receiver position coincides with a satellite");
    }
    u[0] = dx / r;
    u[1] = dy / r;
    u[2] = dz / r;
    return r + x[6];
}

/* Measurement update with m satellites sat[i] = {sx, sy, sz, rho}; returns the RMS of the
 * post-fit residuals. */
static double update(filter *f, int m, const double (*sat)[4]) {
    double H[MAX_SAT][N] = {{0}}, y[MAX_SAT], u[3];
    for (int i = 0; i < m; i++) {
        y[i] = sat[i][3] - expected_range(f->x, sat[i], u);
        H[i][0] = u[0];
        H[i][2] = u[1];
        H[i][4] = u[2];
        H[i][6] = 1.0;
    }
    /* PHt = P H^T (N x m), S = H P H^T + R (m x m) */
    double PHt[N][MAX_SAT], S[MAX_SAT][MAX_SAT];
    for (int a = 0; a < N; a++) {
        for (int i = 0; i < m; i++) {
            double s = 0.0;
            for (int b = 0; b < N; b++) {
                s += f->P[a][b] * H[i][b];
            }
            PHt[a][i] = s;
        }
    }
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < m; j++) {
            double s = 0.0;
            for (int b = 0; b < N; b++) {
                s += H[i][b] * PHt[b][j];
            }
            S[i][j] = s + (i == j ? R_RHO : 0.0);
        }
    }
    /* Cholesky S = L L^T (S is symmetric positive definite for a sane P) */
    double L[MAX_SAT][MAX_SAT] = {{0}};
    for (int i = 0; i < m; i++) {
        for (int j = 0; j <= i; j++) {
            double s = S[i][j];
            for (int k = 0; k < j; k++) {
                s -= L[i][k] * L[j][k];
            }
            if (i == j) {
                if (!(s > 1e-9)) {
                    luge_fail("innovation covariance is not positive definite (bad P?)");
                }
                L[i][i] = luge_sqrt(s);
            } else {
                L[i][j] = s / L[j][j];
            }
        }
    }
    /* K^T = S^-1 (P H^T)^T: solve L L^T K^T = PHt^T column by column (one per state) */
    double K[N][MAX_SAT];
    for (int a = 0; a < N; a++) {
        double t[MAX_SAT];
        for (int i = 0; i < m; i++) { /* forward: L t = PHt[a] */
            double s = PHt[a][i];
            for (int k = 0; k < i; k++) {
                s -= L[i][k] * t[k];
            }
            t[i] = s / L[i][i];
        }
        for (int i = m - 1; i >= 0; i--) { /* backward: L^T k = t */
            double s = t[i];
            for (int k = i + 1; k < m; k++) {
                s -= L[k][i] * K[a][k];
            }
            K[a][i] = s / L[i][i];
        }
    }
    /* x += K y */
    for (int a = 0; a < N; a++) {
        double s = 0.0;
        for (int i = 0; i < m; i++) {
            s += K[a][i] * y[i];
        }
        f->x[a] += s;
    }
    /* P = (I - K H) P = P - K (H P) = P - K PHt^T, then symmetrise against round-off */
    double NP[N][N];
    for (int a = 0; a < N; a++) {
        for (int b = 0; b < N; b++) {
            double s = 0.0;
            for (int i = 0; i < m; i++) {
                s += K[a][i] * PHt[b][i];
            }
            NP[a][b] = f->P[a][b] - s;
        }
    }
    for (int a = 0; a < N; a++) {
        for (int b = 0; b < N; b++) {
            f->P[a][b] = 0.5 * (NP[a][b] + NP[b][a]);
        }
    }
    /* post-fit residuals */
    double ss = 0.0;
    for (int i = 0; i < m; i++) {
        double r = sat[i][3] - expected_range(f->x, sat[i], u);
        ss += r * r;
    }
    return luge_sqrt(ss / m);
}

static void put_vector(luge_out *out, const char *key, const double *v, int n) {
    luge_put_str(out, key);
    for (int i = 0; i < n; i++) {
        luge_put_char(out, ' ');
        luge_put_sci(out, v[i], 17);
    }
    luge_put_char(out, '\n');
}

/* Bound on state magnitudes (metres, m/s): far beyond any orbit, small enough that no product
 * overflows. */
#define MAX_ABS 1e12

static void luge_run(const uint8_t *in, size_t len, luge_out *out) {
    luge_cursor c = luge_cursor_new(in, len);
    filter f;
    luge_expect(&c, "ekf-gps", "request must start with 'ekf-gps 1'");
    luge_int(&c, 1, 1, "unsupported ekf-gps format version");
    luge_expect(&c, "dt", "expected 'dt'");
    f.dt = luge_number(&c, "bad dt");
    if (!(f.dt > 0.0 && f.dt <= 3600.0)) {
        luge_fail("dt must be in (0, 3600] seconds");
    }
    luge_expect(&c, "x", "expected 'x' and 8 state values");
    for (int i = 0; i < N; i++) {
        f.x[i] = luge_number(&c, "bad state value");
        if (luge_fabs(f.x[i]) > MAX_ABS) {
            luge_fail("state value out of range");
        }
    }
    luge_expect(&c, "P", "expected 'P' and 64 covariance values");
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < N; j++) {
            f.P[i][j] = luge_number(&c, "bad covariance value");
            if (luge_fabs(f.P[i][j]) > MAX_ABS * MAX_ABS) {
                luge_fail("covariance value out of range");
            }
        }
    }
    for (int i = 0; i < N; i++) {
        if (!(f.P[i][i] >= 0.0)) {
            luge_fail("covariance diagonal must be non-negative");
        }
    }
    luge_expect(&c, "epochs", "expected 'epochs'");
    int epochs = (int)luge_int(&c, 1, MAX_EPOCHS, "epochs must be in 1..10000");
    double sat[MAX_SAT][4];
    double rms = 0.0;
    for (int e = 0; e < epochs; e++) {
        luge_expect(&c, "sats", "expected 'sats' (truncated request?)");
        int m = (int)luge_int(&c, 4, MAX_SAT, "sats must be in 4..16");
        for (int i = 0; i < m; i++) {
            for (int k = 0; k < 4; k++) {
                sat[i][k] = luge_number(&c, "bad satellite line (truncated request?)");
                if (luge_fabs(sat[i][k]) > MAX_ABS) {
                    luge_fail("satellite value out of range");
                }
            }
        }
        predict(&f);
        rms = update(&f, m, (const double(*)[4])sat);
        for (int i = 0; i < N; i++) {
            if (!(luge_fabs(f.x[i]) <= MAX_ABS)) {
                luge_fail("filter diverged");
            }
        }
    }
    luge_expect_end(&c, "trailing data after the last epoch");

    luge_put_str(out, "ekf-gps 1\ndt ");
    luge_put_sci(out, f.dt, 17);
    luge_put_char(out, '\n');
    put_vector(out, "x", f.x, N);
    put_vector(out, "P", &f.P[0][0], N * N);
    luge_put_str(out, "pred");
    for (int a = 0; a < 6; a += 2) {
        luge_put_char(out, ' ');
        luge_put_fixed(out, f.x[a] + f.dt * f.x[a + 1], 3);
    }
    luge_put_str(out, "\nclock ");
    luge_put_fixed(out, f.x[6], 3);
    luge_put_char(out, ' ');
    luge_put_fixed(out, f.x[7], 4);
    luge_put_str(out, "\nresidual_rms ");
    luge_put_fixed(out, rms, 4);
    luge_put_char(out, '\n');
}
