//! Measurements shared by the scenarios: one run as a compact [`Point`], a driver bound to one
//! target and mapping, the search for the highest rate whose p99 meets a target, and the
//! reading of a workload spec the user gave.

use std::time::Duration;

use luge_workload::{Rate, WorkloadSpec};
use serde::Serialize;

use super::ScenarioOptions;
use super::output::middle;
use crate::calibrate::{Calibration, CalibrationOptions};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::run::{CalibrationMode, Mode, RunConfig, calibrate, run};
use crate::target::{FunctionRef, Target};

/// One run, reduced to what the scenario tables and plots need (the honest accounting of
/// [`Summary`](crate::Summary) kept: `None` latency = infinite, i.e. failures at that rank).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Point {
    /// `open` or `closed`.
    pub mode: String,
    /// Open loop: window; closed loop: requests in flight.
    pub window: usize,
    /// Planned requests per second of schedule (open loop).
    pub offered_rps: f64,
    /// Successes per second.
    pub throughput_rps: f64,
    /// Successes within their deadline per second.
    pub goodput_rps: f64,
    /// Latency p50 (µs).
    pub p50_us: Option<f64>,
    /// Latency p99 (µs).
    pub p99_us: Option<f64>,
    /// Latency p99.9 (µs).
    pub p999_us: Option<f64>,
    /// The server's readiness of the successes, p50 (µs), where it reported one.
    pub readiness_p50_us: Option<f64>,
    /// Their readiness ÷ their receipt to answer at the server (HORSE §2).
    pub readiness_share: Option<f64>,
    /// The server's execution of the successes, p50 (µs), where it reported one.
    pub execution_p50_us: Option<f64>,
    /// Requests planned.
    pub planned: u64,
    /// Requests failed (any kind).
    pub errors: u64,
    /// Share of planned requests that missed their deadline.
    pub deadline_miss_rate: f64,
    /// How late the client itself sent (p99, µs): large values mean the client limited the run.
    pub send_lag_p99_us: Option<f64>,
    /// Server-reported execution is not in [`Point`]; the run's warnings are.
    pub notes: Vec<String>,
}

impl Point {
    /// The point of a report.
    pub fn of(r: &Report) -> Self {
        let s = &r.summary;
        Self {
            mode: r.mode.clone(),
            window: r.window,
            offered_rps: s.offered_rps,
            throughput_rps: s.throughput_rps,
            goodput_rps: s.goodput_rps,
            p50_us: s.latency_us.p50,
            p99_us: s.latency_us.p99,
            p999_us: s.latency_us.p999,
            readiness_p50_us: s.server_readiness_us.p50,
            readiness_share: s.readiness_share,
            execution_p50_us: s.server_execution_us.p50,
            planned: s.planned,
            errors: s.errors,
            deadline_miss_rate: s.deadline_miss_rate,
            send_lag_p99_us: s.send_lag_us.p99,
            notes: r.notes.clone(),
        }
    }

    /// At most 0.1 % failures and p99 within `p99_us`.
    pub(crate) fn meets(&self, p99_us: f64) -> bool {
        self.error_share() <= 0.001 && self.p99_us.is_some_and(|p| p <= p99_us)
    }

    /// Failures over planned.
    pub(crate) fn error_share(&self) -> f64 {
        if self.planned == 0 { 1.0 } else { self.errors as f64 / self.planned as f64 }
    }

    /// The server did not keep up: > 1 % failures, an infinite p99, or fewer than 90 % of
    /// the offered requests per second answered.
    pub(crate) fn saturated(&self) -> bool {
        self.error_share() > 0.01
            || self.p99_us.is_none()
            || (self.mode == "open" && self.throughput_rps < 0.9 * self.offered_rps)
    }
}

/// The median of `f` over `trials` (a `None` is infinite: a failure at that rank; `None` when
/// the median is infinite or there are no trials; with an even count, the mean of the two
/// middle values).
pub(crate) fn median<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    median_or_infinite(trials, f).filter(|m| m.is_finite())
}

/// [`median`], an infinite one kept (`None` only without trials).
fn median_or_infinite<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    let mut v: Vec<f64> = trials.iter().map(|t| f(t).unwrap_or(f64::INFINITY)).collect();
    v.sort_by(f64::total_cmp);
    middle(&v)
}

/// `median(over, f) ÷ median(base, f)`, where `over`'s failed median (an infinite p99) counts:
/// ∞ when only `over`'s failed or the base is 0. `None` when the base failed (nothing to compare
/// against: not a 0 that would read as a goal met), both are 0, or either has no trials.
pub(crate) fn median_ratio<T>(
    over: &[&T],
    base: &[&T],
    f: impl Fn(&T) -> Option<f64>,
) -> Option<f64> {
    let (a, b) = (median_or_infinite(over, &f)?, median_or_infinite(base, &f)?);
    let r = a / b;
    // 0/0 is NaN: nothing to compare.
    (b.is_finite() && !r.is_nan()).then_some(r)
}

/// Runs against one target with one mapping.
#[derive(Debug, Clone)]
pub(crate) struct Driver {
    pub target: Target,
    pub mapping: Mapping,
    /// The workload without a rate (the rate is set per run).
    pub workload: WorkloadSpec,
    pub timeout: Duration,
    pub calibration: Option<Calibration>,
    /// Open-loop window.
    pub window: usize,
    pub keep_samples: bool,
}

/// A workload spec the user gave (`--workloads`, `--mix-workload`), seeded with the scenario's
/// `--seed` unless the spec gives its own `seed=`, which wins: a spec names its workload whole.
pub(crate) fn user_workload(text: &str, seed: u64) -> Result<WorkloadSpec, BenchError> {
    let bad =
        |e: luge_workload::WorkloadError| BenchError::Config(format!("workload `{text}`: {e}"));
    let spec: WorkloadSpec = text.parse().map_err(bad)?;
    let own_seed = WorkloadSpec::keys_given(text).map_err(bad)?.contains(&"seed");
    Ok(if own_seed { spec } else { spec.with_seed(seed) })
}

/// The workload `fixed` (10 µs) scaled to `execution`, with a 100 ms deadline.
fn fixed_at(execution: Duration) -> Result<WorkloadSpec, BenchError> {
    let spec = format!("fixed,scale={},deadline=100ms", execution.as_secs_f64() / 10e-6);
    spec.parse().map_err(|e| BenchError::Scenario(format!("workload `{spec}`: {e}")))
}

impl Driver {
    /// A driver for a fixed call (`noop`-like): the workload is `fixed` with a 100 ms deadline.
    pub(crate) fn fixed(target: Target, mapping: Mapping, seed: u64) -> Self {
        let workload: WorkloadSpec = match "fixed,deadline=100ms".parse() {
            Ok(w) => w,
            Err(_) => unreachable!("a constant spec parses"),
        };
        Self {
            target,
            mapping,
            workload: workload.with_seed(seed),
            timeout: Duration::from_secs(1),
            calibration: None,
            window: 256,
            keep_samples: false,
        }
    }

    /// [`fixed`](Self::fixed), its requests declaring `execution` as their expected execution
    /// (the workload `fixed` scaled to it): a function that trusts its clients' estimates
    /// (`spin`) is then scheduled for what it will run, not for `fixed`'s nominal 10 µs.
    pub(crate) fn fixed_for(
        target: Target,
        mapping: Mapping,
        seed: u64,
        execution: Duration,
    ) -> Result<Self, BenchError> {
        let workload = fixed_at(execution)?.with_seed(seed);
        Ok(Self { workload, ..Self::fixed(target, mapping, seed) })
    }

    /// The run configuration of `workload` in `mode` for `duration`.
    pub(crate) fn config(
        &self,
        workload: WorkloadSpec,
        mode: Mode,
        duration: Duration,
    ) -> RunConfig {
        let mut c = RunConfig::new(self.target.clone(), workload, self.mapping.clone());
        c.mode = mode;
        c.duration = duration;
        c.timeout = self.timeout;
        c.keep_samples = self.keep_samples;
        if let Some(cal) = &self.calibration {
            c.calibration = CalibrationMode::Given(cal.clone());
        }
        c
    }

    /// `outstanding` requests in flight for `duration`.
    pub(crate) fn closed(
        &self,
        outstanding: usize,
        duration: Duration,
    ) -> Result<Report, BenchError> {
        run(self.config(self.workload.clone(), Mode::Closed { outstanding }, duration))
    }

    /// Open loop at `rate` requests per second.
    pub(crate) fn open(&self, rate: f64, duration: Duration) -> Result<Report, BenchError> {
        let w = self.workload.clone().with_rate(Rate::PerSecond(rate))?;
        run(self.config(w, Mode::Open { window: self.window }, duration))
    }

    /// Open loop at utilisation `load` of one worker.
    pub(crate) fn at_load(&self, load: f64, duration: Duration) -> Result<Report, BenchError> {
        let w = self.workload.clone().with_rate(Rate::Load { load, workers: 1 })?;
        run(self.config(w, Mode::Open { window: self.window }, duration))
    }
}

/// The calibration of `spin` on `target`: the one in `kept` if an earlier node of the scenario
/// measured it (so that every node gets the same iteration counts), else measured now, said as
/// `<scenario>: calibration …` and kept.
pub(crate) fn calibrate_once(
    kept: &mut Option<Calibration>,
    target: &Target,
    spin: &FunctionRef,
    timeout: Duration,
    opts: &ScenarioOptions,
    scenario: &str,
) -> Result<Calibration, BenchError> {
    if let Some(c) = kept {
        return Ok(c.clone());
    }
    let c = calibrate(target, spin, CalibrationOptions::default(), timeout)?;
    opts.say(format!("{scenario}: calibration {c}"));
    *kept = Some(c.clone());
    Ok(c)
}

/// Lowest and highest rates the search tries.
const MIN_RATE: f64 = 50.0;
const MAX_RATE: f64 = 1_000_000.0;

/// The highest offered rate found whose p99 met a target.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Search {
    /// The target (µs).
    pub p99_target_us: f64,
    /// The best passing point (`None`: no rate tried met the target).
    pub best: Option<Point>,
    /// Every point tried, in order.
    pub steps: Vec<Point>,
}

impl Search {
    /// Offered rate of the best passing point (0 when none passed).
    pub(crate) fn rate(&self) -> f64 {
        self.best.as_ref().map_or(0.0, |p| p.offered_rps)
    }
}

/// Doubles (or halves) the rate from `start` until the target is bracketed, then bisects
/// geometrically `refine` times; at most `max_runs` runs of `step` each. A rate passes if any of
/// `tries` runs of it meets the target: on a shared box a neighbour's burst can spoil one run's
/// p99 (a descheduled client or server stalls every request behind it), while a rate the server
/// cannot sustain fails every try.
#[allow(clippy::too_many_arguments)]
pub(crate) fn search_rate(
    driver: &Driver,
    start: f64,
    p99_target: Duration,
    step: Duration,
    max_runs: usize,
    refine: usize,
    tries: usize,
    mut say: impl FnMut(&Point, bool),
) -> Result<Search, BenchError> {
    let target_us = p99_target.as_secs_f64() * 1e6;
    let mut steps = Vec::new();
    let mut best: Option<Point> = None;
    let (mut lo, mut hi): (Option<f64>, Option<f64>) = (None, None);
    let mut rate = start.clamp(MIN_RATE, MAX_RATE);
    let mut try_rate = |rate: f64, steps: &mut Vec<Point>| -> Result<(bool, Point), BenchError> {
        let mut last = None;
        for _ in 0..tries.max(1) {
            if steps.len() >= max_runs && last.is_some() {
                break;
            }
            let p = Point::of(&driver.open(rate, step)?);
            let ok = p.meets(target_us);
            say(&p, ok);
            steps.push(p.clone());
            if ok {
                return Ok((true, p));
            }
            last = Some(p);
        }
        match last {
            Some(p) => Ok((false, p)),
            None => unreachable!("at least one try runs"),
        }
    };
    while steps.len() < max_runs {
        let (ok, p) = try_rate(rate, &mut steps)?;
        if ok {
            lo = Some(rate);
            best = Some(p);
            if hi.is_some() || rate >= MAX_RATE {
                break;
            }
            rate = (rate * 2.0).min(MAX_RATE);
        } else {
            hi = Some(rate);
            if lo.is_some() || rate <= MIN_RATE {
                break;
            }
            rate = (rate / 2.0).max(MIN_RATE);
        }
    }
    for _ in 0..refine {
        let (Some(l), Some(h)) = (lo, hi) else { break };
        if steps.len() >= max_runs || h / l < 1.1 {
            break;
        }
        let mid = (l * h).sqrt();
        let (ok, p) = try_rate(mid, &mut steps)?;
        if ok {
            lo = Some(mid);
            best = Some(p);
        } else {
            hi = Some(mid);
        }
    }
    Ok(Search { p99_target_us: target_us, best, steps })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_failed_median_is_an_infinite_ratio_and_a_failed_base_none() {
        let r = |over: &[Option<f64>], base: &[Option<f64>]| {
            let (over, base): (Vec<_>, Vec<_>) = (over.iter().collect(), base.iter().collect());
            median_ratio(&over, &base, |v: &Option<f64>| *v)
        };
        assert_eq!(r(&[Some(4.0), Some(6.0), None], &[Some(2.0)]), Some(3.0));
        assert_eq!(r(&[None, None, Some(1.0)], &[Some(2.0)]), Some(f64::INFINITY));
        assert_eq!(r(&[Some(1.0)], &[None]), None, "a failed base: no figure, not 0×");
        assert_eq!(r(&[Some(1.0)], &[Some(0.0)]), Some(f64::INFINITY));
        assert_eq!(r(&[None], &[None]), None);
        assert_eq!(r(&[Some(0.0)], &[Some(0.0)]), None);
        assert_eq!(r(&[], &[Some(1.0)]), None);
    }

    /// A user's spec keeps its own seed; without one it takes the scenario's.
    #[test]
    fn a_user_workload_keeps_its_own_seed() {
        assert_eq!(user_workload("high-bimodal,seed=7", 1).unwrap().seed, 7);
        assert_eq!(user_workload("high-bimodal,seed=0", 1).unwrap().seed, 0);
        assert_eq!(user_workload("high-bimodal", 3).unwrap().seed, 3);
        let err = user_workload("high-bimodal,seed=x", 1).unwrap_err().to_string();
        assert!(err.contains("workload `high-bimodal,seed=x`"), "{err}");
    }

    #[test]
    fn a_fixed_load_declares_the_execution_it_is_given() {
        for execution in [Duration::from_millis(2), Duration::from_micros(5)] {
            let spec = fixed_at(execution).unwrap().with_rate(Rate::PerSecond(1000.0)).unwrap();
            for a in spec.generate(3) {
                let declared = Duration::from_nanos(a.execution);
                assert!(declared.abs_diff(execution) <= Duration::from_nanos(1), "{declared:?}");
                assert_eq!(a.relative_deadline, 100_000_000, "the deadline is not scaled");
            }
        }
    }
}
