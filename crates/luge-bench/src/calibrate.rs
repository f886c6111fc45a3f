//! Calibration of the `spin` function: iterations ↔ nanoseconds on the target.
//!
//! SledgeScale's synthetic functions are a hash loop whose iteration count sets the execution
//! time (SledgeScale §4); Luge's is `functions/builtin/spin.wat`, which takes the
//! count on stdin and never reads a clock. The load generator therefore needs the
//! target's speed, measured at the start of every run and printed with the report.
//!
//! # Method
//!
//! The server reports each request's execution time, which is the loop *plus* a fixed cost
//! (sandbox start, stdin/stdout). Instead of subtracting a separately measured no-op (a different
//! function, whose fixed cost need not be the same), the calibration fits the line
//! `execution = overhead + ns_per_iteration × k` through two points of `spin` itself:
//!
//! 1. warm up with a few tiny calls, then probe with `probe_iterations` to learn the rough speed;
//! 2. call `k_hi` (≈ `target_ns` of work) and `k_lo = k_hi / 10` alternately, `calls` times each,
//!    and take the median server-reported execution of each (medians shrug off a preempted or
//!    descheduled call);
//! 3. the slope and intercept through the two medians give `ns_per_iteration` and `overhead_ns`
//!    (a negative intercept is clamped to 0);
//! 4. check: predict the execution of a third count (≈ `target_ns / 3`) and measure it; the
//!    relative error is printed so a non-linear or noisy target is visible.
//!
//! 5. the ladder: the line's intercept is not the fixed cost of a short call (on a VM it can sit
//!    a few µs to tens of µs off `spin(0)`'s, as caches and the host's scheduling differ between
//!    a 1 ms call and a 10 µs one), so `spin(0)` and counts of about 0.3 %, 1 % and 3 % of
//!    `k_hi` (3, 10 and 30 µs of work at a 1 ms target) are measured too, `calls` times each,
//!    interleaved, and their medians join the two points of the fit.
//!
//! [`Calibration::iterations_for`] inverts the measured curve: piecewise linearly between the
//! ladder's points (made non-decreasing), along the line's slope beyond the longest, 0 at or
//! below `spin(0)`'s execution. A calibration given by hand (no points) inverts the line:
//! `k = (execution − overhead) / slope`, 0 below the fixed cost. The nominal execution of a
//! planned request is therefore the *whole* server-reported execution, fixed cost included,
//! which is what the server's `execution` field measures.

use std::fmt;

use serde::Serialize;

use crate::error::BenchError;
use crate::sample::ErrorKind;
use crate::target::FunctionRef;

/// One measured point: the median execution of `calls` calls with `iterations`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CalibrationPoint {
    /// Iteration count sent.
    pub iterations: u64,
    /// Median server-reported execution (ns).
    pub execution_ns: u64,
    /// Calls the median is over.
    pub calls: u32,
}

/// The linear model of `spin` on the target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Marginal cost of one iteration (ns).
    pub ns_per_iteration: f64,
    /// Fixed cost of a call (ns): the intercept of the fit.
    pub overhead_ns: f64,
    /// The points the fit went through (empty for a given calibration).
    pub points: Vec<CalibrationPoint>,
    /// Every measured point, `spin(0)` first, by iterations (empty for a given calibration):
    /// the curve [`iterations_for`](Self::iterations_for) inverts.
    pub ladder: Vec<CalibrationPoint>,
    /// An independent point and the model's prediction of it.
    pub check: Option<CalibrationCheck>,
}

/// A point measured after the fit, to show how well the line predicts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CalibrationCheck {
    /// Iteration count sent.
    pub iterations: u64,
    /// What the model predicts (ns).
    pub predicted_ns: f64,
    /// Median server-reported execution (ns).
    pub measured_ns: u64,
}

impl CalibrationCheck {
    /// (measured − predicted) ÷ predicted.
    pub fn relative_error(&self) -> f64 {
        (self.measured_ns as f64 - self.predicted_ns) / self.predicted_ns.max(1.0)
    }
}

/// How to calibrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CalibrationOptions {
    /// Iterations of the first, speed-finding probe.
    pub probe_iterations: u64,
    /// Execution the long calibration point aims at (ns).
    pub target_ns: u64,
    /// Calls per point (the median is taken).
    pub calls: u32,
}

impl Default for CalibrationOptions {
    /// 10⁵ iterations to probe, a 1 ms long point, 7 calls per point.
    fn default() -> Self {
        Self { probe_iterations: 100_000, target_ns: 1_000_000, calls: 7 }
    }
}

impl Calibration {
    /// A calibration given by the user (no measurement).
    pub fn given(ns_per_iteration: f64, overhead_ns: f64) -> Result<Self, BenchError> {
        if !(ns_per_iteration.is_finite() && ns_per_iteration > 0.0) {
            return Err(BenchError::Config(format!(
                "ns per iteration must be a positive number, not {ns_per_iteration}"
            )));
        }
        if !(overhead_ns.is_finite() && overhead_ns >= 0.0) {
            return Err(BenchError::Config(format!(
                "calibration overhead must be ≥ 0 ns, not {overhead_ns}"
            )));
        }
        Ok(Self {
            ns_per_iteration,
            overhead_ns,
            points: Vec::new(),
            ladder: Vec::new(),
            check: None,
        })
    }

    /// The line through two points with different iteration counts.
    pub fn fit(lo: CalibrationPoint, hi: CalibrationPoint) -> Result<Self, BenchError> {
        let dk = hi.iterations as f64 - lo.iterations as f64;
        let de = hi.execution_ns as f64 - lo.execution_ns as f64;
        if dk <= 0.0 || de <= 0.0 {
            return Err(BenchError::Calibration(format!(
                "execution does not grow with iterations: {} iterations → {} ns, {} → {} ns",
                lo.iterations, lo.execution_ns, hi.iterations, hi.execution_ns
            )));
        }
        let slope = de / dk;
        let overhead = (lo.execution_ns as f64 - slope * lo.iterations as f64).max(0.0);
        Ok(Self {
            ns_per_iteration: slope,
            overhead_ns: overhead,
            points: vec![lo, hi],
            ladder: Vec::new(),
            check: None,
        })
    }

    /// Adds measured points to the curve (with the fit's own, sorted by iterations).
    pub fn with_ladder(mut self, points: &[CalibrationPoint]) -> Self {
        let mut ladder: Vec<CalibrationPoint> =
            points.iter().chain(self.points.iter()).copied().collect();
        ladder.sort_by_key(|p| p.iterations);
        ladder.dedup_by_key(|p| p.iterations);
        self.ladder = ladder;
        self
    }

    /// The curve as (iterations, execution) pairs, execution made non-decreasing (a noisy
    /// median below a shorter count's is raised to it).
    fn curve(&self) -> Vec<(f64, f64)> {
        let mut floor = 0.0_f64;
        self.ladder
            .iter()
            .map(|p| {
                floor = floor.max(p.execution_ns as f64);
                (p.iterations as f64, floor)
            })
            .collect()
    }

    /// Iterations whose predicted execution is `execution_ns` (0 at or below the fixed cost).
    pub fn iterations_for(&self, execution_ns: u64) -> u64 {
        let e = execution_ns as f64;
        let k = match self.curve().as_slice() {
            [] => (e - self.overhead_ns) / self.ns_per_iteration,
            curve => {
                let (k0, e0) = curve[0];
                let last = curve[curve.len() - 1];
                if e <= e0 {
                    k0
                } else if e >= last.1 {
                    last.0 + (e - last.1) / self.ns_per_iteration
                } else {
                    let i = curve.iter().position(|&(_, ei)| ei >= e).unwrap_or(curve.len() - 1);
                    let ((ka, ea), (kb, eb)) = (curve[i - 1], curve[i]);
                    if eb > ea { ka + (kb - ka) * (e - ea) / (eb - ea) } else { kb }
                }
            }
        };
        if k > 0.0 { k.round() as u64 } else { 0 }
    }

    /// Predicted execution of `iterations` (ns): on the measured curve, else the line.
    pub fn execution_for(&self, iterations: u64) -> f64 {
        let k = iterations as f64;
        match self.curve().as_slice() {
            [] => self.overhead_ns + self.ns_per_iteration * k,
            curve => {
                let last = curve[curve.len() - 1];
                if k >= last.0 {
                    return last.1 + (k - last.0) * self.ns_per_iteration;
                }
                let i = curve.iter().position(|&(ki, _)| ki > k).unwrap_or(curve.len() - 1);
                match i.checked_sub(1).map(|j| (curve[j], curve[i])) {
                    Some(((ka, ea), (kb, eb))) => ea + (eb - ea) * (k - ka) / (kb - ka).max(1.0),
                    None => curve[0].1,
                }
            }
        }
    }

    /// What no request runs shorter than (ns): `spin(0)`'s measured execution, else the line's
    /// intercept.
    pub fn fixed_cost_ns(&self) -> f64 {
        match self.ladder.first() {
            Some(p) if p.iterations == 0 => p.execution_ns as f64,
            _ => self.overhead_ns,
        }
    }
}

impl fmt::Display for Calibration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spin: {:.4} ns/iteration + {:.1} µs fixed (1 ms ≈ {} iterations)",
            self.ns_per_iteration,
            self.overhead_ns / 1e3,
            self.iterations_for(1_000_000)
        )?;
        if let [lo, hi] = self.points.as_slice() {
            write!(
                f,
                "; fit through {}×{} → {:.1} µs and {}×{} → {:.1} µs",
                lo.calls,
                lo.iterations,
                lo.execution_ns as f64 / 1e3,
                hi.calls,
                hi.iterations,
                hi.execution_ns as f64 / 1e3
            )?;
            let short: Vec<String> = (self.ladder.iter())
                .filter(|p| p.iterations < lo.iterations)
                .map(|p| format!("{} → {:.1} µs", p.iterations, p.execution_ns as f64 / 1e3))
                .collect();
            if !short.is_empty() {
                write!(f, "; short calls {}", short.join(", "))?;
            }
        } else {
            f.write_str(" (given)")?;
        }
        if let Some(c) = &self.check {
            write!(
                f,
                "; check {} → {:.1} µs measured, {:.1} µs predicted ({:+.1} %)",
                c.iterations,
                c.measured_ns as f64 / 1e3,
                c.predicted_ns / 1e3,
                100.0 * c.relative_error()
            )?;
        }
        Ok(())
    }
}

/// What one call returned, as far as the load generator cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reply {
    /// `None` on success.
    pub error: Option<ErrorKind>,
    /// Server-reported execution (ns).
    pub execution_ns: Option<u64>,
    /// Server-reported queueing (ns).
    pub queueing_ns: Option<u64>,
    /// Server-reported readiness (ns): receipt to the first guest instruction (HORSE §2).
    pub readiness_ns: Option<u64>,
}

/// Makes one call and waits for its reply (used before the load starts).
pub(crate) trait Caller {
    fn call(&mut self, function: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError>;
}

/// Relative deadline sent with calibration calls (µs): long enough never to be refused.
pub(crate) const CALIBRATION_DEADLINE_US: u32 = 10_000_000;

/// Runs the method of the module documentation against `spin`.
pub(crate) fn measure(
    caller: &mut dyn Caller,
    spin: &FunctionRef,
    opts: CalibrationOptions,
) -> Result<Calibration, BenchError> {
    let calls = opts.calls.max(1);
    let mut one = |k: u64| -> Result<u64, BenchError> {
        let reply = caller.call(spin, k.to_string().as_bytes())?;
        if let Some(e) = reply.error {
            return Err(BenchError::Calibration(format!("spin({k}) failed: {e}")));
        }
        match reply.execution_ns {
            Some(e) if e > 0 => Ok(e),
            _ => Err(BenchError::Calibration(
                "the server reported no execution time; give a calibration (ns per iteration) \
                 instead"
                    .into(),
            )),
        }
    };
    for _ in 0..3 {
        one(1_000)?;
    }
    let probe_k = opts.probe_iterations.max(1);
    let mut probe = (0..3).map(|_| one(probe_k)).collect::<Result<Vec<_>, _>>()?;
    let rough = median(&mut probe) as f64 / probe_k as f64;
    let k_hi = ((opts.target_ns as f64 / rough).round() as u64).clamp(1_000, 1_000_000_000_000);
    let k_lo = (k_hi / 10).max(1);
    let (mut lo, mut hi) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        lo.push(one(k_lo)?);
        hi.push(one(k_hi)?);
    }
    let point = |iterations, v: &mut Vec<u64>| CalibrationPoint {
        iterations,
        execution_ns: median(v),
        calls,
    };
    // The ladder of short counts, interleaved: 0 and ≈ 0.3 %, 1 % and 3 % of k_hi.
    let ks = [0, k_hi * 3 / 1000, k_hi / 100, k_hi * 3 / 100];
    let mut short: Vec<Vec<u64>> = vec![Vec::new(); ks.len()];
    for _ in 0..calls {
        for (k, v) in ks.iter().zip(short.iter_mut()) {
            v.push(one(*k)?);
        }
    }
    let ladder: Vec<CalibrationPoint> =
        ks.iter().zip(short.iter_mut()).map(|(&k, v)| point(k, v)).collect();
    let mut cal =
        Calibration::fit(point(k_lo, &mut lo), point(k_hi, &mut hi))?.with_ladder(&ladder);
    let k_check = cal.iterations_for(opts.target_ns / 3).max(1);
    let mut check = (0..calls).map(|_| one(k_check)).collect::<Result<Vec<_>, _>>()?;
    cal.check = Some(CalibrationCheck {
        iterations: k_check,
        predicted_ns: cal.execution_for(k_check),
        measured_ns: median(&mut check),
    });
    Ok(cal)
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A fake `spin`: 2.5 ns per iteration plus 20 µs, with an outlier every 5th call.
    struct FakeSpin {
        calls: u32,
    }

    impl Caller for FakeSpin {
        fn call(&mut self, _: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError> {
            self.calls += 1;
            let k: u64 = std::str::from_utf8(payload).unwrap().parse().unwrap();
            let mut e = 20_000 + k * 5 / 2;
            if self.calls.is_multiple_of(5) {
                e *= 3;
            }
            Ok(Reply {
                error: None,
                execution_ns: Some(e),
                queueing_ns: Some(0),
                readiness_ns: None,
            })
        }
    }

    #[test]
    fn fits_slope_and_overhead_through_noise() {
        let mut fake = FakeSpin { calls: 0 };
        let cal = measure(&mut fake, &FunctionRef::new(1, "/spin"), Default::default()).unwrap();
        // The fake rounds k × 2.5 down to whole ns, hence the small tolerances.
        assert!((cal.ns_per_iteration - 2.5).abs() < 1e-5, "{cal}");
        assert!((cal.overhead_ns - 20_000.0).abs() < 1.0, "{cal}");
        let c = cal.check.unwrap();
        assert!(c.relative_error().abs() < 1e-5, "{cal}");
        assert_eq!(cal.iterations_for(1_020_000), 400_000);
        assert_eq!(cal.iterations_for(10_000), 0, "below the fixed cost");
        assert!(cal.to_string().contains("2.5000 ns/iteration + 20.0 µs fixed"), "{cal}");
    }

    /// A `spin` whose short calls cost less than the long line says: 5 µs fixed, 2.5 ns per
    /// iteration, and 15 µs more that builds up over the first 30 000 iterations (so the line
    /// through 0.1 and 1 ms meets 0 at 20 µs).
    struct BentSpin;

    fn bent(k: u64) -> u64 {
        5_000 + k * 5 / 2 + 15_000 * k.min(30_000) / 30_000
    }

    impl Caller for BentSpin {
        fn call(&mut self, _: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError> {
            let k: u64 = std::str::from_utf8(payload).unwrap().parse().unwrap();
            Ok(Reply { execution_ns: Some(bent(k)), ..Reply::default() })
        }
    }

    #[test]
    fn short_requests_are_sized_on_the_measured_curve_not_the_line() {
        let cal =
            measure(&mut BentSpin, &FunctionRef::new(1, "/spin"), Default::default()).unwrap();
        assert!((cal.overhead_ns - 20_000.0).abs() < 50.0, "{cal}");
        assert_eq!(cal.fixed_cost_ns(), 5_000.0);
        // Within the ladder's interpolation error of the bend (points at 0.3, 1 and 3 % of k_hi).
        for target in [10_000, 26_000, 40_000, 100_000, 2_000_000] {
            let ran = bent(cal.iterations_for(target)) as f64;
            let error = (ran - target as f64).abs() / target as f64;
            assert!(error < 0.05, "{target} ns planned ran {ran} ns ({cal})");
        }
        // The line alone sizes a 26 µs request at 2 400 iterations, which run 12.2 µs.
        let line = Calibration::given(cal.ns_per_iteration, cal.overhead_ns).unwrap();
        assert!(bent(line.iterations_for(26_000)) < 14_000);
        assert_eq!(cal.iterations_for(5_000), 0, "at the fixed cost");
        let e = cal.execution_for(cal.iterations_for(40_000));
        assert!((e - 40_000.0).abs() < 100.0, "{e}");
        assert!(cal.to_string().contains("short calls 0 → 5.0 µs"), "{cal}");
    }

    #[test]
    fn refuses_a_server_without_execution_times() {
        struct Silent;
        impl Caller for Silent {
            fn call(&mut self, _: &FunctionRef, _: &[u8]) -> Result<Reply, BenchError> {
                Ok(Reply::default())
            }
        }
        let err = measure(&mut Silent, &FunctionRef::new(1, "/spin"), Default::default());
        assert!(err.unwrap_err().to_string().contains("no execution time"));
        assert!(Calibration::given(0.0, 0.0).is_err());
        assert_eq!(Calibration::given(2.0, 0.0).unwrap().iterations_for(1_000), 500);
    }
}
