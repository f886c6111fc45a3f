//! Coalesced load updates (HORSE §4.2): when a load estimate is updated once per event with
//! `x ← a·x + b`, `n` such updates collapse into one affine map computed in O(1), so a batch of
//! `n` requests could update the estimate once instead of `n` times. Nothing uses it yet: Luge's
//! execution estimates are medians of recent runs (`Estimator`), not an affine update.
//!
//! Applying `f(x) = a·x + b` `n` times gives `aⁿ·x + b·Σ_{i=0}^{n−1} aⁱ`, and the geometric sum is
//! `(1 − aⁿ) / (1 − a)` for `a ≠ 1` (`n` for `a = 1`). HORSE's text writes the exponent of the
//! numerator as `n + 1` in §4.2.1 and as `n − 1` in §4.2.2; both are off by one (with `n = 1` the
//! sum must be `1`, which only `1 − a¹` gives). The sum is computed as `expm1(n·ln_1p(a − 1)) /
//! (a − 1)` for `a > 0`, which stays accurate for the `a` just below 1 of slow EWMAs where
//! `1 − aⁿ` would cancel.
//!
//! Different updates compose too ([`Affine::then`]): a batch of different samples is one map,
//! built as the samples arrive and applied once.

/// The update `x ← a·x + b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Affine {
    /// Weight of the old value.
    pub a: f64,
    /// What each update adds.
    pub b: f64,
}

impl Affine {
    /// The update that changes nothing.
    pub const IDENTITY: Self = Self { a: 1.0, b: 0.0 };

    /// `x ← a·x + b`.
    pub const fn new(a: f64, b: f64) -> Self {
        Self { a, b }
    }

    /// The exponentially weighted mean's update for one `sample` with weight `w`:
    /// `x ← (1 − w)·x + w·sample`.
    pub fn ewma(w: f64, sample: f64) -> Self {
        Self { a: 1.0 - w, b: w * sample }
    }

    /// The updated value.
    pub fn apply(self, x: f64) -> f64 {
        self.a.mul_add(x, self.b)
    }

    /// `self`, then `next`: `x ↦ next(self(x))`.
    pub fn then(self, next: Self) -> Self {
        Self { a: next.a * self.a, b: next.a.mul_add(self.b, next.b) }
    }

    /// `self` applied `n` times, in closed form (O(1)): `aⁿ·x + b·(1 − aⁿ)/(1 − a)`.
    pub fn repeat(self, n: u64) -> Self {
        if n == 0 {
            return Self::IDENTITY;
        }
        let n_f = n as f64;
        let a = self.a;
        let (a_n, sum) = if a == 1.0 {
            (1.0, n_f)
        } else if a > 0.0 {
            let log_a = (a - 1.0).ln_1p();
            let a_n_minus_1 = (n_f * log_a).exp_m1();
            (a_n_minus_1 + 1.0, a_n_minus_1 / (a - 1.0))
        } else {
            let a_n = a.powf(n_f);
            (a_n, (1.0 - a_n) / (1.0 - a))
        };
        Self { a: a_n, b: self.b * sum }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `f` applied `n` times, one at a time: the reference.
    fn iterate(f: Affine, x: f64, n: u64) -> f64 {
        (0..n).fold(x, |x, _| f.apply(x))
    }

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
    }

    #[test]
    fn one_update_is_itself_and_zero_is_identity() {
        let f = Affine::new(0.875, 3.0);
        assert!(close(f.repeat(1).apply(10.0), f.apply(10.0)));
        assert_eq!(f.repeat(0), Affine::IDENTITY);
        assert!(close(Affine::new(1.0, 2.0).repeat(5).apply(1.0), 11.0));
        assert!(close(Affine::new(0.0, 2.0).repeat(5).apply(1.0), 2.0));
    }

    #[test]
    fn an_ewma_of_one_repeated_sample_converges_to_it() {
        let f = Affine::ewma(1.0 / 8.0, 40.0);
        assert!(close(f.repeat(10_000).apply(0.0), 40.0));
        // Slow EWMAs keep their accuracy (no cancellation in 1 − aⁿ).
        let slow = Affine::ewma(1e-9, 1.0);
        assert!(close(slow.repeat(1000).apply(0.0), iterate(slow, 0.0, 1000)));
    }

    proptest::proptest! {
        #[test]
        fn the_closed_form_matches_iterating(
            a in -0.99f64..1.5,
            b in -1e6f64..1e6,
            x in -1e6f64..1e6,
            n in 0u64..300,
        ) {
            let f = Affine::new(a, b);
            let want = iterate(f, x, n);
            let got = f.repeat(n).apply(x);
            proptest::prop_assert!(
                (want - got).abs() <= 1e-7 * want.abs().max(1.0) * (n as f64 + 1.0),
                "a={a} b={b} x={x} n={n}: {got} vs {want}"
            );
        }

        #[test]
        fn composing_different_updates_matches_applying_them_in_turn(
            maps in proptest::collection::vec((0.0f64..1.0, -1e3f64..1e3), 0..50),
            x in -1e3f64..1e3,
        ) {
            let maps: Vec<Affine> = maps.into_iter().map(|(a, b)| Affine::new(a, b)).collect();
            let want = maps.iter().fold(x, |x, f| f.apply(x));
            let got = maps.iter().fold(Affine::IDENTITY, |acc, &f| acc.then(f)).apply(x);
            proptest::prop_assert!((want - got).abs() <= 1e-9 * want.abs().max(1.0));
        }
    }
}
