//! The few special functions the closed forms need: the standard normal CDF Φ and its inverse.
//!
//! - Φ comes from the complementary error function of Numerical Recipes (`erfcc`, a Chebyshev
//!   fit with fractional error < 1.2 × 10⁻⁷ everywhere), which is plenty for means and class
//!   shares reported to a few significant digits.
//! - Φ⁻¹ is P. J. Acklam's rational approximation (relative error < 1.15 × 10⁻⁹ over the whole
//!   open interval, tails included). It is the log-normal sampler's inverse CDF, so its accuracy
//!   bounds how far a sample's *quantile* can be off — far below what 10⁶ samples can resolve.

/// Complementary error function (Numerical Recipes `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let ans = t * (-z * z + poly).exp();
    if x >= 0.0 { ans } else { 2.0 - ans }
}

/// Standard normal CDF Φ(x).
pub(crate) fn norm_cdf(x: f64) -> f64 {
    if x == f64::INFINITY {
        return 1.0;
    }
    if x == f64::NEG_INFINITY {
        return 0.0;
    }
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Inverse standard normal CDF Φ⁻¹(p) for `p` in the open interval (0, 1) (Acklam).
/// Returns ∓∞ for `p ≤ 0` / `p ≥ 1`.
pub(crate) fn norm_inv(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    const P_LOW: f64 = 0.024_25;

    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < P_LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - P_LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (-p).ln_1p()).sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let cases = [
            (0.5, 0.0),
            (0.975, 1.959_963_984_540_054),
            (0.999, 3.090_232_306_167_814),
            (0.01, -2.326_347_874_040_841),
            (1e-6, -4.753_424_308_822_899),
        ];
        for (p, z) in cases {
            assert!((norm_inv(p) - z).abs() < 1e-8 * z.abs().max(1.0), "Φ⁻¹({p})");
            assert!((norm_cdf(z) - p).abs() < 2e-7 * p.max(1e-3), "Φ({z})");
        }
        assert_eq!(norm_inv(0.0), f64::NEG_INFINITY);
        assert_eq!(norm_inv(1.0), f64::INFINITY);
        assert_eq!(norm_cdf(f64::INFINITY), 1.0);
    }

    #[test]
    fn inverse_round_trips() {
        for i in 1..1000 {
            let p = f64::from(i) / 1000.0;
            assert!((norm_cdf(norm_inv(p)) - p).abs() < 1e-7, "p = {p}");
        }
    }
}
