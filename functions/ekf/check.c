/*
 * ekf/check.c — checker for `ekf` (native only): the response must carry the four state lines
 * in the request format (8 state values, a symmetric 8x8 covariance with a positive diagonal),
 * and the predicted position must be within a few tens of metres of the truth the generator
 * left in its "# truth_pred" comment (30 m after one epoch of 4 satellites, 15 m after more).
 */
#include "../common/tools.h"

int main(int argc, char **argv) {
    char *in, *out;
    size_t in_len, out_len;
    tool_check_args(argc, argv, &in, &in_len, &out, &out_len);
    if (strncmp(out, "ekf-gps 1\ndt ", 13) != 0) {
        tool_fail("response does not start with the state header");
    }
    double dt, x[8], P[64], pred[3], clock[2], rms, truth[3], epochs;
    tool_get_numbers(out, "dt", &dt, 1);
    tool_get_numbers(out, "x", x, 8);
    tool_get_numbers(out, "P", P, 64);
    tool_get_numbers(out, "pred", pred, 3);
    tool_get_numbers(out, "clock", clock, 2);
    tool_get_numbers(out, "residual_rms", &rms, 1);
    tool_get_numbers(in, "# truth_pred", truth, 3);
    tool_get_numbers(in, "epochs", &epochs, 1);
    for (int i = 0; i < 8; i++) {
        if (!(P[i * 8 + i] > 0)) {
            tool_fail("P[%d][%d] = %g is not positive", i, i, P[i * 8 + i]);
        }
        for (int j = 0; j < 8; j++) {
            if (!tool_close(P[i * 8 + j], P[j * 8 + i], 1e-12)) {
                tool_fail("P is not symmetric at (%d,%d)", i, j);
            }
        }
    }
    for (int k = 0; k < 3; k++) {
        if (luge_fabs(pred[k] - (x[2 * k] + dt * x[2 * k + 1])) > 1e-3) {
            tool_fail("pred[%d] is not x + dt * v", k);
        }
    }
    double e2 = 0;
    for (int k = 0; k < 3; k++) {
        e2 += (pred[k] - truth[k]) * (pred[k] - truth[k]);
    }
    double err = luge_sqrt(e2), tol = epochs > 1 ? 15.0 : 30.0;
    if (!(err < tol)) {
        tool_fail("predicted position is %.2f m from the truth (limit %.0f m)", err, tol);
    }
    printf("ok: %.0f epochs, prediction %.2f m from the truth, clock %.1f m, rms %.2f m\n",
           epochs, err, clock[0], rms);
    return 0;
}
