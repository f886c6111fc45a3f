//! The metrics of a run, from HDR histograms, with honest accounting.
//!
//! # Accounting
//!
//! - Every *planned* request is accounted for: `completed` (the server answered `Ok`) plus
//!   `errors` (an error status, a timeout, a local send failure, or never sent because the client
//!   fell behind) equals `planned`; `sent` counts the requests that reached the socket.
//! - A failed request is a deadline miss and has **infinite latency and slowdown** in the
//!   percentiles (and RTE 0). Infinities are counted beside the histogram, not stored in it: the
//!   nearest-rank percentile over *all* requests is taken, and a rank that falls among the
//!   infinities is reported as `None` (JSON `null`). Means are over the finite values only, so
//!   read them next to `deadline_miss_rate` and `errors`.
//! - Deadlines are checked on the client: a request meets its deadline when it succeeded and its
//!   latency — from the *intended* send time — is at most its relative deadline. That is
//!   stricter than the server's view (it counts the network and any client-side wait).
//! - Throughput counts successes per second, goodput successes within their deadline per second,
//!   both over the run's elapsed time (start to the last send or response).
//! - A request that missed its deadline after the client sent it so late that even a server
//!   answering at once could not have met it — send lag + nominal execution ≥ relative
//!   deadline — is counted as *sent too late*, among the misses: the load generator failed it,
//!   not the server.
//!
//! # Resolution
//!
//! Histograms keep 3 significant digits (relative error ≤ 0.1 %) and report the highest value
//! equivalent to a bucket, as HdrHistogram does. Latencies are recorded in ns, slowdowns in
//! thousandths, RTE in millionths. Means are exact.

use std::collections::{BTreeMap, HashMap};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::sample::{ErrorKind, Sample};

/// Mean and tail of a distribution in which `None` (JSON `null`) stands for infinity (a failure
/// at that rank); the mean is over the finite values, 0 when there are none. The simulator's
/// [`luge_sim::Summary`], so that a measured run and its simulation compare field by field.
pub type Percentiles = luge_sim::Summary;

/// RTE (execution ÷ latency, SFS): higher is better, so its low tail is reported.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct RteSummary {
    /// Mean (failed requests count as 0).
    pub mean: f64,
    /// Median.
    pub p50: Option<f64>,
    /// 1st percentile (the worst 1 %).
    pub p1: Option<f64>,
    /// Requests the mean and percentiles are over (those with a server-reported execution time,
    /// and failed ones).
    pub count: u64,
}

/// Metrics of one class of requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassSummary {
    /// Class tag.
    pub class: u16,
    /// Class name from the workload (`short`, `long`, `sift`, …).
    pub name: Option<String>,
    /// Requests planned.
    pub planned: u64,
    /// Successes.
    pub completed: u64,
    /// Failures of any kind.
    pub errors: u64,
    /// Share of planned requests that missed their deadline (failures included).
    pub deadline_miss_rate: f64,
    /// Requests sent too late to meet their deadline at their nominal execution (module doc);
    /// among the misses.
    pub sent_too_late: u64,
    /// Latency in µs.
    pub latency_us: Percentiles,
    /// Latency ÷ execution.
    pub slowdown: Percentiles,
    /// The execution the node reported ÷ the nominal one, over the successes that reported
    /// one: how closely the requests ran as planned (a `spin` calibrated one call at a time
    /// need not describe a request at this load, say one that meets a worker just woken).
    pub execution_vs_nominal: Percentiles,
}

/// Everything measured in one run (see the module documentation for the accounting).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Requests in the plan (within the run's bounds).
    pub planned: u64,
    /// Requests sent.
    pub sent: u64,
    /// Requests answered `Ok`.
    pub completed: u64,
    /// Requests that failed in any way (`planned − completed`).
    pub errors: u64,
    /// Start of the run to the last send or response, seconds.
    pub elapsed_s: f64,
    /// Planned requests per second of schedule (start to the last intended send).
    pub offered_rps: f64,
    /// Successes per second.
    pub throughput_rps: f64,
    /// Successes within their deadline per second.
    pub goodput_rps: f64,
    /// Latency from the intended send time, µs.
    pub latency_us: Percentiles,
    /// Latency ÷ execution (server-reported, else nominal).
    pub slowdown: Percentiles,
    /// Server-reported execution ÷ latency.
    pub rte: RteSummary,
    /// Share of planned requests that missed their deadline (failures included).
    pub deadline_miss_rate: f64,
    /// Requests sent too late to meet their deadline at their nominal execution (module doc);
    /// among the misses.
    pub sent_too_late: u64,
    /// Failures by [`ErrorKind::label`].
    pub errors_by_kind: BTreeMap<String, u64>,
    /// Queueing time reported by the server for successes, µs.
    pub server_queueing_us: Percentiles,
    /// Readiness reported by the server for successes (receipt to the first guest instruction,
    /// HORSE §2), µs; empty where the server reports none.
    pub server_readiness_us: Percentiles,
    /// Execution reported by the server for successes (the runtime's `Timing::executed`: the
    /// sandbox's whole run, its instantiation included — readiness and execution overlap by
    /// that), µs; empty where the server reports none.
    pub server_execution_us: Percentiles,
    /// Readiness ÷ the server's whole trigger (queueing + execution), summed over the successes
    /// that reported all three: HORSE's readiness share (Table 1). `None` without any.
    pub readiness_share: Option<f64>,
    /// Actual − intended send time, µs: how far the client itself lagged (late wake-ups, a full
    /// window). Already included in the latency; large values mean the client, not the server,
    /// limited the run.
    pub send_lag_us: Percentiles,
    /// Per class, by tag.
    pub per_class: Vec<ClassSummary>,
}

impl Summary {
    /// Summarises samples; `class_name` names a class tag.
    pub fn from_samples<'a>(
        samples: impl IntoIterator<Item = &'a Sample>,
        class_name: impl Fn(u16) -> Option<String>,
    ) -> Summary {
        let mut r = Recorder::new(false);
        for s in samples {
            r.record(*s);
        }
        r.finish(class_name).0
    }
}

/// Non-negative values with +∞: finite ones in an HDR histogram at `resolution` recorded units
/// per value unit, infinities counted beside it.
#[derive(Debug, Clone)]
struct Dist {
    hist: Histogram<u64>,
    resolution: f64,
    infinite: u64,
    sum: f64,
}

impl Dist {
    fn new(resolution: f64) -> Self {
        // Auto-resizing with 3 significant digits; `new(3)` cannot fail.
        let hist = Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits"));
        Self { hist, resolution, infinite: 0, sum: 0.0 }
    }

    fn record(&mut self, v: f64) {
        if v.is_finite() {
            self.sum += v;
            let x = (v.max(0.0) * self.resolution).round() as u64;
            // `record` grows the histogram; only values beyond its reach (> 2⁶²) are clamped.
            if self.hist.record(x).is_err() {
                self.hist.saturating_record(x);
            }
        } else {
            self.infinite += 1;
        }
    }

    fn total(&self) -> u64 {
        self.hist.len() + self.infinite
    }

    fn mean(&self) -> f64 {
        if self.hist.is_empty() { 0.0 } else { self.sum / self.hist.len() as f64 }
    }

    /// Nearest-rank quantile over finite and infinite values; `None` = infinity (or no values).
    fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.total();
        if total == 0 {
            return None;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        if rank > self.hist.len() {
            return None;
        }
        let mut seen = 0;
        for v in self.hist.iter_recorded() {
            seen += v.count_since_last_iteration();
            if seen >= rank {
                return Some(v.value_iterated_to() as f64 / self.resolution);
            }
        }
        None
    }

    /// Percentiles scaled by `unit` (e.g. 1e-3 for ns → µs).
    fn percentiles(&self, unit: f64) -> Percentiles {
        let q = |p| self.quantile(p).map(|v| v * unit);
        Percentiles {
            mean: self.mean() * unit,
            p50: q(0.5),
            p99: q(0.99),
            p999: q(0.999),
            max: q(1.0),
        }
    }
}

#[derive(Debug, Clone)]
struct ClassRecord {
    planned: u64,
    completed: u64,
    met: u64,
    late: u64,
    latency: Dist,
    slowdown: Dist,
    /// Server-reported ÷ nominal execution, in thousandths.
    execution_ratio: Dist,
}

/// Accumulates samples as they arrive (memory independent of the run length unless the samples
/// are kept for CSV).
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    planned: u64,
    sent: u64,
    completed: u64,
    met: u64,
    /// Sent too late to meet their deadline (module doc).
    late: u64,
    errors: HashMap<ErrorKind, u64>,
    latency: Dist,
    slowdown: Dist,
    rte: Dist,
    queueing: Dist,
    readiness: Dist,
    execution: Dist,
    /// Σ readiness and Σ (queueing + execution) of the successes that reported all three, ns.
    readiness_sum: (f64, f64),
    send_lag: Dist,
    classes: BTreeMap<u16, ClassRecord>,
    last_event_ns: u64,
    last_intended_ns: u64,
    samples: Option<Vec<Sample>>,
}

/// Latencies in ns, slowdowns in thousandths, RTE in millionths.
const NS: f64 = 1.0;
const MILLI: f64 = 1_000.0;
const MICRO: f64 = 1_000_000.0;

impl Recorder {
    pub(crate) fn new(keep_samples: bool) -> Self {
        Self {
            planned: 0,
            sent: 0,
            completed: 0,
            met: 0,
            late: 0,
            errors: HashMap::new(),
            latency: Dist::new(NS),
            slowdown: Dist::new(MILLI),
            rte: Dist::new(MICRO),
            queueing: Dist::new(NS),
            readiness: Dist::new(NS),
            execution: Dist::new(NS),
            readiness_sum: (0.0, 0.0),
            send_lag: Dist::new(NS),
            classes: BTreeMap::new(),
            last_event_ns: 0,
            last_intended_ns: 0,
            samples: keep_samples.then(Vec::new),
        }
    }

    pub(crate) fn record(&mut self, s: Sample) {
        self.planned += 1;
        self.last_intended_ns = self.last_intended_ns.max(s.intended_ns);
        let mut last = s.intended_ns;
        if let Some(sent) = s.sent_ns {
            self.sent += 1;
            self.send_lag.record(sent.saturating_sub(s.intended_ns) as f64);
            last = last.max(sent);
        }
        if let Some(l) = s.latency_ns {
            last = last.max(s.intended_ns + l);
        }
        self.last_event_ns = self.last_event_ns.max(last);
        let latency = s.ok_latency_ns().map_or(f64::INFINITY, |l| l as f64);
        let slowdown = s.slowdown();
        let class = self.classes.entry(s.class).or_insert_with(|| ClassRecord {
            planned: 0,
            completed: 0,
            met: 0,
            late: 0,
            latency: Dist::new(NS),
            slowdown: Dist::new(MILLI),
            execution_ratio: Dist::new(MILLI),
        });
        class.planned += 1;
        if s.sent_too_late() {
            self.late += 1;
            class.late += 1;
        }
        class.latency.record(latency);
        self.latency.record(latency);
        if let Some(x) = slowdown {
            class.slowdown.record(x);
            self.slowdown.record(x);
        }
        if let Some(x) = s.rte() {
            self.rte.record(x);
        }
        if s.ok() {
            self.completed += 1;
            class.completed += 1;
            if let Some(q) = s.server_queueing_ns {
                self.queueing.record(q as f64);
            }
            if let Some(e) = s.server_execution_ns {
                self.execution.record(e as f64);
                if s.nominal_execution_ns > 0 {
                    class.execution_ratio.record(e as f64 / s.nominal_execution_ns as f64);
                }
            }
            if let Some(r) = s.server_readiness_ns {
                self.readiness.record(r as f64);
                if let (Some(q), Some(e)) = (s.server_queueing_ns, s.server_execution_ns) {
                    // The node's figures are input: added as floats, they cannot overflow.
                    self.readiness_sum.0 += r as f64;
                    self.readiness_sum.1 += q as f64 + e as f64;
                }
            }
        } else {
            *self.errors.entry(s.error.unwrap_or(ErrorKind::Timeout)).or_default() += 1;
        }
        if s.met_deadline() {
            self.met += 1;
            class.met += 1;
        }
        if let Some(v) = &mut self.samples {
            v.push(s);
        }
    }

    /// The summary and the kept samples (sorted by `seq`; empty unless kept).
    pub(crate) fn finish(
        self,
        class_name: impl Fn(u16) -> Option<String>,
    ) -> (Summary, Vec<Sample>) {
        let elapsed_s = self.last_event_ns as f64 / 1e9;
        let per_s = |n: u64| if elapsed_s > 0.0 { n as f64 / elapsed_s } else { 0.0 };
        let miss = |planned: u64, met: u64| {
            if planned == 0 { 0.0 } else { (planned - met) as f64 / planned as f64 }
        };
        let mut errors_by_kind = BTreeMap::new();
        for (kind, n) in &self.errors {
            *errors_by_kind.entry(kind.label().into_owned()).or_default() += n;
        }
        let per_class = self
            .classes
            .iter()
            .map(|(&class, c)| ClassSummary {
                class,
                name: class_name(class),
                planned: c.planned,
                completed: c.completed,
                errors: c.planned - c.completed,
                deadline_miss_rate: miss(c.planned, c.met),
                sent_too_late: c.late,
                latency_us: c.latency.percentiles(1e-3),
                slowdown: c.slowdown.percentiles(1.0),
                execution_vs_nominal: c.execution_ratio.percentiles(1.0),
            })
            .collect();
        let summary = Summary {
            planned: self.planned,
            sent: self.sent,
            completed: self.completed,
            errors: self.planned - self.completed,
            elapsed_s,
            offered_rps: if self.last_intended_ns > 0 {
                self.planned as f64 / (self.last_intended_ns as f64 / 1e9)
            } else {
                0.0
            },
            throughput_rps: per_s(self.completed),
            goodput_rps: per_s(self.met),
            latency_us: self.latency.percentiles(1e-3),
            slowdown: self.slowdown.percentiles(1.0),
            rte: RteSummary {
                mean: self.rte.mean(),
                p50: self.rte.quantile(0.5),
                p1: self.rte.quantile(0.01),
                count: self.rte.total(),
            },
            deadline_miss_rate: miss(self.planned, self.met),
            sent_too_late: self.late,
            errors_by_kind,
            server_queueing_us: self.queueing.percentiles(1e-3),
            server_readiness_us: self.readiness.percentiles(1e-3),
            server_execution_us: self.execution.percentiles(1e-3),
            readiness_share: (self.readiness_sum.1 > 0.0)
                .then(|| self.readiness_sum.0 / self.readiness_sum.1),
            send_lag_us: self.send_lag.percentiles(1e-3),
            per_class,
        };
        let mut samples = self.samples.unwrap_or_default();
        samples.sort_unstable_by_key(|s| s.seq);
        (summary, samples)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use luge_proto::Status;

    use super::*;

    fn ok(seq: u64, class: u16, latency_us: u64, exec_us: u64) -> Sample {
        Sample {
            seq,
            class,
            intended_ns: seq * 1_000,
            sent_ns: Some(seq * 1_000),
            latency_ns: Some(latency_us * 1_000),
            error: None,
            server_execution_ns: Some(exec_us * 1_000),
            server_queueing_ns: Some(1_000),
            server_readiness_ns: Some(500),
            nominal_execution_ns: exec_us * 1_000,
            deadline_ns: 10 * exec_us * 1_000,
        }
    }

    /// The node's figures are input: the largest it can send (it saturates its durations at
    /// `u64::MAX`) are summed without overflowing.
    #[test]
    fn the_largest_figures_a_node_reports_do_not_overflow() {
        let huge = Sample {
            server_execution_ns: Some(u64::MAX),
            server_queueing_ns: Some(u64::MAX),
            ..ok(1, 0, 10, 5)
        };
        let s = Summary::from_samples(&[huge, ok(2, 0, 10, 5)], |_| None);
        assert!(s.readiness_share.is_some_and(|share| share >= 0.0), "{s:?}");
    }

    fn close(got: Option<f64>, want: f64) -> bool {
        // 3 significant digits: highest equivalent value within 0.1 %.
        got.is_some_and(|g| g >= want && g <= want * 1.001 + 1e-9)
    }

    #[test]
    fn percentiles_slowdown_and_misses_on_a_known_set() {
        // 1000 successes with latency 1..=1000 µs, execution 10 µs (deadline 100 µs).
        let samples: Vec<Sample> = (1..=1000).map(|i| ok(i, 0, i, 10)).collect();
        let s = Summary::from_samples(&samples, |_| None);
        assert_eq!((s.planned, s.sent, s.completed, s.errors), (1000, 1000, 1000, 0));
        assert!(close(s.latency_us.p50, 500.0), "{:?}", s.latency_us);
        assert!(close(s.latency_us.p99, 990.0), "{:?}", s.latency_us);
        assert!(close(s.latency_us.p999, 999.0), "{:?}", s.latency_us);
        assert!(close(s.latency_us.max, 1000.0), "{:?}", s.latency_us);
        assert!((s.latency_us.mean - 500.5).abs() < 1e-9);
        assert!(close(s.slowdown.p50, 50.0) && close(s.slowdown.p99, 99.0), "{:?}", s.slowdown);
        // Latency ≤ 100 µs meets the deadline: 100 of 1000.
        assert!((s.deadline_miss_rate - 0.9).abs() < 1e-12);
        // Elapsed: the last response at 1000 µs + 1000 µs = 2 ms.
        assert!((s.elapsed_s - 0.002).abs() < 1e-12);
        assert!((s.throughput_rps - 500_000.0).abs() < 1e-6);
        assert!((s.goodput_rps - 50_000.0).abs() < 1e-6);
        // RTE ascends as latency descends: rank 500 is latency 501 µs.
        assert!(close(s.rte.p50, 10.0 / 501.0), "{:?}", s.rte);
        assert!(close(s.server_queueing_us.p99, 1.0));
        // Readiness 0.5 µs of a 1 µs + 10 µs trigger on every request.
        assert!(close(s.server_readiness_us.p50, 0.5), "{:?}", s.server_readiness_us);
        assert!(s.readiness_share.is_some_and(|r| (r - 0.5 / 11.0).abs() < 1e-12));
        assert!(close(s.server_execution_us.p50, 10.0), "{:?}", s.server_execution_us);
        assert_eq!(s.send_lag_us.max, Some(0.0));
    }

    /// A class that ran twice as long as planned says so (the report notes it).
    #[test]
    fn what_a_class_ran_is_set_beside_its_nominal_execution() {
        let samples: Vec<Sample> = (0..100)
            .map(|i| Sample { server_execution_ns: Some(20_000), ..ok(i, i as u16 % 2, 50, 10) })
            .collect();
        let s = Summary::from_samples(&samples, |_| None);
        let ratios: Vec<Option<f64>> =
            s.per_class.iter().map(|c| c.execution_vs_nominal.p50).collect();
        assert!(ratios.iter().all(|r| close(*r, 2.0)), "{ratios:?}");
    }

    #[test]
    fn failures_are_infinite_and_misses() {
        // 990 fast successes and 10 failures of different kinds: p99 is still finite (rank 990),
        // p99.9 and max are infinite.
        let mut samples: Vec<Sample> = (0..990).map(|i| ok(i, 0, 5, 10)).collect();
        for i in 990..1000 {
            let mut s = ok(i, 1, 5, 10);
            s.error = Some(if i < 995 {
                ErrorKind::Timeout
            } else {
                ErrorKind::Status(Status::Overloaded)
            });
            if i < 995 {
                s.latency_ns = None;
            }
            samples.push(s);
        }
        let s = Summary::from_samples(&samples, |c| Some(format!("c{c}")));
        assert_eq!((s.completed, s.errors), (990, 10));
        assert!(close(s.latency_us.p99, 5.0));
        assert_eq!((s.latency_us.p999, s.latency_us.max), (None, None));
        assert_eq!((s.slowdown.p999, s.slowdown.max), (None, None));
        assert!((s.latency_us.mean - 5.0).abs() < 1e-9, "mean over finite values");
        assert!((s.deadline_miss_rate - 0.01).abs() < 1e-12);
        assert_eq!(s.errors_by_kind.get("timeout"), Some(&5));
        assert_eq!(s.errors_by_kind.get("overloaded"), Some(&5));
        assert_eq!(s.rte.p1, Some(0.0), "failures have RTE 0");
        // Per class: class 1 is all failures.
        assert_eq!(s.per_class.len(), 2);
        let c1 = &s.per_class[1];
        assert_eq!((c1.class, c1.name.as_deref(), c1.planned, c1.errors), (1, Some("c1"), 10, 10));
        assert_eq!((c1.deadline_miss_rate, c1.latency_us.p50), (1.0, None));
        assert_eq!(s.per_class[0].deadline_miss_rate, 0.0);
        // They ran as planned; class 1 reported none that succeeded.
        assert!(close(s.per_class[0].execution_vs_nominal.p50, 1.0));
        assert_eq!(c1.execution_vs_nominal.p50, None);
        // p99 tips into infinity once more than 1 % fail.
        samples.push(Sample { error: Some(ErrorKind::Unsent), sent_ns: None, ..samples[995] });
        samples.push(Sample { error: Some(ErrorKind::Unsent), sent_ns: None, ..samples[995] });
        let s = Summary::from_samples(&samples, |_| None);
        assert_eq!(s.latency_us.p99, None);
        assert_eq!((s.planned, s.sent), (1002, 1000));
    }

    #[test]
    fn requests_sent_too_late_for_any_server_are_counted_among_the_misses() {
        // Execution 10 µs, deadline 100 µs: a send lag of 90 µs or more leaves no time.
        let lagged = |seq: u64, class: u16, lag_us: u64, error: Option<ErrorKind>| {
            let mut s = ok(seq, class, lag_us + 12, 10);
            s.sent_ns = Some(s.intended_ns + lag_us * 1_000);
            s.error = error;
            s
        };
        let refused = Some(ErrorKind::Status(Status::DeadlineInfeasible));
        let samples = [
            lagged(1, 0, 0, None),
            lagged(2, 0, 89, None),
            lagged(3, 0, 90, None),
            // Met its deadline all the same (it ran faster than nominal): not counted.
            Sample { latency_ns: Some(95_000), ..lagged(6, 0, 90, None) },
            lagged(4, 1, 300, refused),
            Sample { sent_ns: None, error: Some(ErrorKind::Unsent), ..ok(5, 1, 1, 10) },
        ];
        let s = Summary::from_samples(&samples, |_| None);
        assert_eq!(s.sent_too_late, 2, "lags of 90 and 300 µs; never sent is an error of its own");
        let late: Vec<u64> = s.per_class.iter().map(|c| c.sent_too_late).collect();
        assert_eq!(late, [1, 1]);
        // Only the first and the last meet their deadline: 89 µs of lag + 12 µs misses, without
        // the lag alone being to blame.
        assert!((s.deadline_miss_rate - 4.0 / 6.0).abs() < 1e-12, "{}", s.deadline_miss_rate);
    }

    #[test]
    fn unknown_execution_is_left_out_of_slowdown_only() {
        let mut a = ok(1, 0, 100, 0);
        a.server_execution_ns = None;
        let s = Summary::from_samples(&[a, ok(2, 0, 100, 50)], |_| None);
        assert_eq!(s.slowdown.p50, Some(2.0));
        assert!(close(s.latency_us.p50, 100.0));
        assert_eq!(s.rte.count, 1);
    }
}
