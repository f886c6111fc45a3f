//! Per-request records of a simulation and the metrics computed from them: throughput and
//! goodput, latency and slowdown percentiles, deadline-miss rate overall and per class, RTE
//! (SFS §III), preemptions and utilisation.
//!
//! Honest accounting: a rejected request is a deadline miss and has infinite latency
//! and slowdown in the percentiles (reported as JSON `null`); means are over completed requests,
//! except RTE's, in which a rejected request counts as 0 (no useful turnaround).

use luge_sched::{Nanos, RejectReason};
use serde::Serialize;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Not ended (only while the simulation runs).
    Pending,
    /// Ran to completion.
    Completed,
    /// Did not complete: refused by admission control, shed from a queue, or ended at its
    /// deadline (the reason says which).
    Rejected(RejectReason),
}

/// What happened to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Arrival time.
    pub arrival: Nanos,
    /// Class tag.
    pub class: u16,
    /// Actual execution time.
    pub execution: Nanos,
    /// Relative deadline.
    pub relative_deadline: Nanos,
    /// First time it ran.
    pub first_start: Option<Nanos>,
    /// Completion time.
    pub completion: Option<Nanos>,
    /// Times it was preempted.
    pub preemptions: u32,
    /// Outcome.
    pub outcome: Outcome,
}

impl Record {
    /// Response time, if completed.
    pub fn latency(&self) -> Option<Nanos> {
        self.completion.map(|c| c.saturating_sub(self.arrival))
    }

    /// True when it completed by its absolute deadline.
    pub fn met_deadline(&self) -> bool {
        self.latency().is_some_and(|l| l <= self.relative_deadline)
    }
}

/// Mean and tail of a distribution. Percentiles use the nearest-rank method; `None` (JSON
/// `null`) stands for infinity (a rejected request).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Summary {
    /// Mean over finite values.
    pub mean: f64,
    /// Median.
    pub p50: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
}

impl Summary {
    /// Summarises `values`, where `f64::INFINITY` marks a rejected request.
    pub fn of(mut values: Vec<f64>) -> Self {
        if values.is_empty() {
            return Self::default();
        }
        values.sort_by(f64::total_cmp);
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let mean =
            if finite.is_empty() { 0.0 } else { finite.iter().sum::<f64>() / finite.len() as f64 };
        let pct = |p: f64| {
            let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
            Some(values[rank - 1]).filter(|v| v.is_finite())
        };
        Self { mean, p50: pct(0.5), p99: pct(0.99), p999: pct(0.999), max: pct(1.0) }
    }
}

/// Metrics of one class of requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassReport {
    /// Class tag.
    pub class: u16,
    /// Requests of the class.
    pub requests: u64,
    /// Share of them that missed their deadline (rejected included).
    pub deadline_miss_rate: f64,
    /// Latency in µs.
    pub latency_us: Summary,
    /// Slowdown (latency ÷ execution).
    pub slowdown: Summary,
}

/// Everything `luge sim` reports about one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Policy name.
    pub policy: String,
    /// Workers.
    pub workers: usize,
    /// Dispatcher groups.
    pub dispatchers: usize,
    /// Requests offered.
    pub requests: u64,
    /// Requests completed.
    pub completed: u64,
    /// Requests that did not complete (refused, shed, or ended at their deadline).
    pub rejected: u64,
    /// First arrival to the last completion or arrival, seconds.
    pub duration_s: f64,
    /// Completions per second.
    pub throughput_rps: f64,
    /// Completions within their deadline per second.
    pub goodput_rps: f64,
    /// Response time in µs.
    pub latency_us: Summary,
    /// Latency ÷ execution.
    pub slowdown: Summary,
    /// Run-time effectiveness, execution ÷ turnaround (SFS §III); rejected = 0.
    pub rte: Summary,
    /// Share of requests that missed their deadline (rejected included).
    pub deadline_miss_rate: f64,
    /// Per-class breakdown, by class tag.
    pub per_class: Vec<ClassReport>,
    /// Preemptions requested.
    pub preemptions: u64,
    /// Mean worker busy share over the run (execution and start/switch costs).
    pub utilization: f64,
    /// Share of the workers' time spent executing requests that met their deadline: goodput
    /// weighed by work, which a mix tilted towards short requests cannot inflate.
    pub useful_utilization: f64,
}

/// Latency, slowdown and RTE of one record (∞/∞/0 when it did not complete).
fn sample(r: &Record) -> (f64, f64, f64) {
    match r.latency() {
        Some(l) => {
            let l = l as f64;
            let e = (r.execution as f64).max(1.0);
            (l / 1_000.0, l.max(1.0) / e, (r.execution as f64 / l.max(1.0)).min(1.0))
        }
        None => (f64::INFINITY, f64::INFINITY, 0.0),
    }
}

fn miss_rate(records: &[&Record]) -> f64 {
    if records.is_empty() {
        return 0.0;
    }
    records.iter().filter(|r| !r.met_deadline()).count() as f64 / records.len() as f64
}

impl Report {
    /// Computes the report of a finished run.
    pub fn from_run(
        policy: &str,
        workers: usize,
        dispatchers: usize,
        records: &[Record],
        worker_busy: Nanos,
        preemptions: u64,
    ) -> Self {
        let all: Vec<&Record> = records.iter().collect();
        let start = records.iter().map(|r| r.arrival).min().unwrap_or(0);
        let end = records.iter().map(|r| r.completion.unwrap_or(r.arrival)).max().unwrap_or(start);
        let duration_s = (end - start) as f64 / 1e9;
        let completed = records.iter().filter(|r| r.outcome == Outcome::Completed).count() as u64;
        let met = records.iter().filter(|r| r.met_deadline()).count() as f64;
        let useful: Nanos = records.iter().filter(|r| r.met_deadline()).map(|r| r.execution).sum();
        let share = |busy: Nanos| {
            if duration_s > 0.0 {
                busy as f64 / 1e9 / duration_s / workers.max(1) as f64
            } else {
                0.0
            }
        };
        let per_sec = |n: f64| if duration_s > 0.0 { n / duration_s } else { 0.0 };
        let (lat, slow, rte) = split(&all);
        let mut classes: Vec<u16> = records.iter().map(|r| r.class).collect();
        classes.sort_unstable();
        classes.dedup();
        let per_class = classes
            .into_iter()
            .map(|c| {
                let rs: Vec<&Record> = records.iter().filter(|r| r.class == c).collect();
                let (l, s, _) = split(&rs);
                ClassReport {
                    class: c,
                    requests: rs.len() as u64,
                    deadline_miss_rate: miss_rate(&rs),
                    latency_us: Summary::of(l),
                    slowdown: Summary::of(s),
                }
            })
            .collect();
        Report {
            policy: policy.to_owned(),
            workers,
            dispatchers,
            requests: records.len() as u64,
            completed,
            rejected: records.len() as u64 - completed,
            duration_s,
            throughput_rps: per_sec(completed as f64),
            goodput_rps: per_sec(met),
            latency_us: Summary::of(lat),
            slowdown: Summary::of(slow),
            rte: Summary::of(rte),
            deadline_miss_rate: miss_rate(&all),
            per_class,
            preemptions,
            utilization: share(worker_busy),
            useful_utilization: share(useful),
        }
    }
}

fn split(records: &[&Record]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut l = Vec::with_capacity(records.len());
    let mut s = Vec::with_capacity(records.len());
    let mut r = Vec::with_capacity(records.len());
    for rec in records {
        let (a, b, c) = sample(rec);
        l.push(a);
        s.push(b);
        r.push(c);
    }
    (l, s, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles_and_infinity() {
        let s = Summary::of((1..=1000).map(f64::from).collect());
        assert_eq!(
            (s.p50, s.p99, s.p999, s.max),
            (Some(500.0), Some(990.0), Some(999.0), Some(1000.0))
        );
        let mut v: Vec<f64> = (1..=999).map(f64::from).collect();
        v.push(f64::INFINITY);
        let s = Summary::of(v);
        assert_eq!(s.p999, Some(999.0));
        assert_eq!(s.max, None);
        assert!((s.mean - 500.0).abs() < 1e-9);
    }

    #[test]
    fn rejected_requests_are_misses_with_infinite_latency() {
        let done = Record {
            arrival: 0,
            class: 0,
            execution: 10,
            relative_deadline: 100,
            first_start: Some(0),
            completion: Some(50),
            preemptions: 0,
            outcome: Outcome::Completed,
        };
        let rejected = Record {
            completion: None,
            outcome: Outcome::Rejected(RejectReason::QueueFull),
            ..done
        };
        let r = Report::from_run("x", 1, 1, &[done, rejected], 10, 0);
        assert_eq!((r.completed, r.rejected), (1, 1));
        assert_eq!(r.deadline_miss_rate, 0.5);
        assert_eq!(r.latency_us.max, None);
        assert_eq!(r.goodput_rps, r.throughput_rps);
    }
}
