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
//! [`Calibration::iterations_for`] inverts the line: `k = (execution − overhead) / slope`,
//! 0 when the requested execution is below the fixed cost. The nominal execution of a planned
//! request is therefore the *whole* server-reported execution, fixed cost included, which is
//! what the server's `execution` field measures.

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
        Ok(Self { ns_per_iteration, overhead_ns, points: Vec::new(), check: None })
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
            check: None,
        })
    }

    /// Iterations whose predicted execution is `execution_ns` (0 below the fixed cost).
    pub fn iterations_for(&self, execution_ns: u64) -> u64 {
        let k = (execution_ns as f64 - self.overhead_ns) / self.ns_per_iteration;
        if k > 0.0 { k.round() as u64 } else { 0 }
    }

    /// Predicted execution of `iterations` (ns).
    pub fn execution_for(&self, iterations: u64) -> f64 {
        self.overhead_ns + self.ns_per_iteration * iterations as f64
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
    let mut cal = Calibration::fit(point(k_lo, &mut lo), point(k_hi, &mut hi))?;
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
