//! `luge bench overload`: what one node does past its capacity, with deadline-aware admission
//! on as `luge serve` ships it (a request whose predicted wait plus execution overruns its
//! deadline is refused at once with 503 / `Overloaded`; a queued one whose deadline became
//! unreachable is answered 503 `shed` instead of run).
//!
//! One node per protocol (UDP-RPC, HTTP), 1 worker, serving the calibrated `spin` (its
//! expected execution trusted, as in `policies`). One calibration, measured on the first node,
//! serves both. Two mixes:
//!
//! - `fixed`: every request executes [`FIXED_US`] µs (`fixed,scale=17.5`) with a relative
//!   deadline of 100 ms, sent per request;
//! - `bimodal`: `high-bimodal` (26 µs / 2.07 ms, half each), deadlines 10 × execution — the
//!   mix of `policies`.
//!
//! Per protocol and mix:
//!
//! 1. **Capacity**: closed-loop throughput, [`CLOSED_OUTSTANDING`] requests in flight, with
//!    100 ms deadlines for both mixes so that nothing is refused: what the node serves per
//!    second when it is never idle.
//! 2. **Past capacity**: open-loop Poisson arrivals at each multiple of that capacity
//!    (default 1×, 1.5×, 2×, 5×). Per point: offered rate; goodput (answers that are 200 *and*
//!    whose client-measured latency — from the intended send time — is within the request's
//!    deadline, per second) ÷ capacity and ÷ goodput at 1×; the share of 200s within their
//!    deadline; the share refused (503 on HTTP — `deadline_unreachable`, `shed`, `overloaded`;
//!    `Overloaded` on UDP-RPC); the share never answered (timeouts: must be 0, every request
//!    gets exactly one answer); p50 and p99 latency of the refusals; and the peak `VmRSS` of
//!    this process during the point ÷ that at 1×. The node runs in this process, so RSS is the
//!    node's plus the load generator's; the generator keeps no per-request samples here (it
//!    streams them through a [`SampleObserver`]), so its share does not grow with the rate.
//!    Points run in ascending order on one node, so memory an allocator keeps after a busy
//!    point shows up in the next: RSS can only be overstated.
//! 3. **Step**: the fixed mix at 0.5× capacity for a while, then 2× (Poisson arrivals of a
//!    trace written to `step-<protocol>-arrivals.csv`); goodput in 10 ms bins of completion
//!    time, and from the step: when goodput first reaches 90 % of capacity (`back`), and when
//!    its 50 ms moving average reaches 90 % for good until the end of the 2× phase (`holds`).
//!
//! Everything is printed as ratios to the same run's capacity and 1× numbers. `--quick` runs
//! 1× and 5× for 250 ms each and a short step: it proves the pipeline, not the numbers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use luge_sim::{Chart, Series};
use luge_workload::{ArrivalProcess, Rate, Rng, Trace, WorkloadSpec};
use serde::Serialize;
use serde_json::json;

use super::density::rss_kib;
use super::measure::{Driver, Point};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, pct, ratio, rps, us};
use super::policies::spin_function;
use super::{OverloadOptions, Protocol, ScenarioOptions};
use crate::calibrate::{Calibration, CalibrationOptions};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::run::{self, Mode, calibrate};
use crate::sample::{ErrorKind, Sample, SampleObserver};
use crate::target::{FunctionRef, Target};

/// Execution of the fixed mix (µs): `fixed` (10 µs) × 17.5.
pub(crate) const FIXED_US: u64 = 175;
/// The fixed mix: [`FIXED_US`], 100 ms deadlines.
const FIXED_SPEC: &str = "fixed,scale=17.5,deadline=100ms";
/// The bimodal mix, deadlines 10 × execution (the workload's default).
const BIMODAL_SPEC: &str = "high-bimodal";
/// Deadline of every capacity run (and of the fixed mix).
const CAPACITY_DEADLINE: &str = "100ms";
/// Requests in flight in the closed-loop capacity runs.
const CLOSED_OUTSTANDING: usize = 16;
/// UDP-RPC open-loop window: far above the ~600 requests 100 ms of 175 µs requests queue.
const UDP_WINDOW: usize = 4096;
/// HTTP open-loop window (= connections): the same room, below `luge serve`'s 1 024
/// connections so that a connection being returned to the pool never waits in the backlog.
const HTTP_WINDOW: usize = 900;
/// A request unanswered this long is a timeout (50 × the longest deadline).
const TIMEOUT: Duration = Duration::from_secs(TIMEOUT_NS / 1_000_000_000);
/// [`TIMEOUT`] in ns: the top of the refusal-latency histogram.
const TIMEOUT_NS: u64 = 5_000_000_000;
/// Width of a time-series bin (ns).
const BIN_NS: u64 = 10_000_000;
/// The most bins a run keeps (10 000 s): a bound, not a limit a run reaches.
const MAX_BINS: usize = 1_000_000;
/// The step: from this multiple of capacity…
const STEP_LOW: f64 = 0.5;
/// …to this one.
const STEP_HIGH: f64 = 2.0;
/// Goodput share of capacity the step must get back to.
const RECOVERED: f64 = 0.9;
/// Bins of the moving average that must hold [`RECOVERED`] (50 ms).
const HOLD_BINS: usize = 5;

/// One of the two mixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    Fixed,
    Bimodal,
}

impl Mix {
    const ALL: [Mix; 2] = [Mix::Fixed, Mix::Bimodal];

    fn name(self) -> &'static str {
        match self {
            Mix::Fixed => "fixed",
            Mix::Bimodal => "bimodal",
        }
    }

    /// The open-loop workload (without a rate).
    fn spec(self) -> &'static str {
        match self {
            Mix::Fixed => FIXED_SPEC,
            Mix::Bimodal => BIMODAL_SPEC,
        }
    }

    /// The closed-loop capacity workload: the same executions, 100 ms deadlines.
    fn capacity_spec(self) -> String {
        match self {
            Mix::Fixed => FIXED_SPEC.to_owned(),
            Mix::Bimodal => format!("{BIMODAL_SPEC},deadline={CAPACITY_DEADLINE}"),
        }
    }
}

fn parse_spec(text: &str, seed: u64) -> Result<WorkloadSpec, BenchError> {
    text.parse::<WorkloadSpec>()
        .map(|s| s.with_seed(seed))
        .map_err(|e| BenchError::Config(format!("workload `{text}`: {e}")))
}

fn window(p: Protocol) -> usize {
    match p {
        Protocol::Udp => UDP_WINDOW,
        Protocol::Http => HTTP_WINDOW,
    }
}

/// Counts kept as a run's samples stream by: what [`Summary`](crate::Summary) does not split
/// out (refusals and their latency, answers vs no answers, the time series).
#[derive(Debug)]
struct Tally {
    planned: u64,
    ok: u64,
    met: u64,
    /// 200s whose server-reported time in the node (queueing + execution) is within the
    /// deadline: the node's part of the promise, without the network and the client.
    server_met: u64,
    refused: u64,
    /// Answers other than 200 and refusals (a kill, a trap, …).
    other_answers: u64,
    timeouts: u64,
    unsent: u64,
    /// Local failures: send, connect, transport.
    local: u64,
    /// Failures by label.
    kinds: BTreeMap<String, u64>,
    /// Latency of the refusals (ns), measured by the client from the intended send time.
    refusal_ns: Histogram<u64>,
    /// Time of the refusals in the node (ns), as the node reports it (queueing + execution).
    refusal_server_ns: Histogram<u64>,
    /// Sum and count of the server-reported executions of the 200s.
    execution_ns: (u128, u64),
    bins: Option<Bins>,
}

/// Per-[`BIN_NS`] counts: arrivals by intended time, 200s within their deadline and refusals by
/// answer time.
#[derive(Debug, Default, Clone)]
struct Bins {
    offered: Vec<u32>,
    met: Vec<u32>,
    refused: Vec<u32>,
}

fn bump(v: &mut Vec<u32>, at_ns: u64) {
    let i = usize::try_from(at_ns / BIN_NS).unwrap_or(usize::MAX);
    if i >= MAX_BINS {
        return;
    }
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] = v[i].saturating_add(1);
}

impl Tally {
    fn new(bins: bool) -> Result<Self, BenchError> {
        // Bounded, so that `saturating_record` clamps rather than drops (an auto-resizing
        // histogram starts with a top of 2 and does not grow on a saturating record).
        let histogram = || {
            Histogram::new_with_bounds(1, TIMEOUT_NS, 3)
                .map_err(|e| BenchError::Scenario(format!("cannot make a histogram: {e}")))
        };
        let (refusal_ns, refusal_server_ns) = (histogram()?, histogram()?);
        Ok(Self {
            planned: 0,
            ok: 0,
            met: 0,
            server_met: 0,
            refused: 0,
            other_answers: 0,
            timeouts: 0,
            unsent: 0,
            local: 0,
            kinds: BTreeMap::new(),
            refusal_ns,
            refusal_server_ns,
            execution_ns: (0, 0),
            bins: bins.then(Bins::default),
        })
    }

    fn record(&mut self, s: &Sample) {
        self.planned += 1;
        if let Some(b) = &mut self.bins {
            bump(&mut b.offered, s.intended_ns);
        }
        let answered_at = s.latency_ns.map(|l| s.intended_ns.saturating_add(l));
        let in_node = match (s.server_queueing_ns, s.server_execution_ns) {
            (None, None) => None,
            (q, e) => Some(q.unwrap_or(0).saturating_add(e.unwrap_or(0))),
        };
        match s.error {
            None if s.ok() => {
                self.ok += 1;
                if let Some(e) = s.server_execution_ns {
                    self.execution_ns.0 += u128::from(e);
                    self.execution_ns.1 += 1;
                }
                if in_node.is_some_and(|t| t <= s.deadline_ns) {
                    self.server_met += 1;
                }
                if s.met_deadline() {
                    self.met += 1;
                    if let (Some(b), Some(at)) = (&mut self.bins, answered_at) {
                        bump(&mut b.met, at);
                    }
                }
            }
            None => self.timeouts += 1,
            Some(e) => {
                *self.kinds.entry(e.label().into_owned()).or_default() += 1;
                if e.is_refusal() {
                    self.refused += 1;
                    if let Some(l) = s.latency_ns {
                        self.refusal_ns.saturating_record(l.max(1));
                    }
                    if let Some(t) = in_node {
                        self.refusal_server_ns.saturating_record(t.max(1));
                    }
                    if let (Some(b), Some(at)) = (&mut self.bins, answered_at) {
                        bump(&mut b.refused, at);
                    }
                } else if e.is_answer() {
                    self.other_answers += 1;
                } else {
                    match e {
                        ErrorKind::Timeout => self.timeouts += 1,
                        ErrorKind::Unsent => self.unsent += 1,
                        _ => self.local += 1,
                    }
                }
            }
        }
    }

    /// Requests the server answered (200, a refusal, or another status).
    fn answered(&self) -> u64 {
        self.ok + self.refused + self.other_answers
    }

    fn refusal_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.refusal_ns, q)
    }

    fn refusal_server_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.refusal_server_ns, q)
    }

    fn mean_execution_us(&self) -> Option<f64> {
        let (sum, n) = self.execution_ns;
        (n > 0).then(|| sum as f64 / n as f64 / 1e3)
    }

    fn share(&self, n: u64) -> f64 {
        if self.planned == 0 { 0.0 } else { n as f64 / self.planned as f64 }
    }
}

fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
}

fn lock(t: &Mutex<Option<Tally>>) -> MutexGuard<'_, Option<Tally>> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// `VmRSS` of this process around a measurement (KiB).
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Rss {
    start_kib: Option<u64>,
    peak_kib: Option<u64>,
    end_kib: Option<u64>,
}

/// Runs `f` while a thread samples `VmRSS` every 10 ms.
fn with_rss<T>(f: impl FnOnce() -> T) -> (T, Rss) {
    let stop = AtomicBool::new(false);
    let start_kib = rss_kib();
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak: Option<u64> = None;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib());
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        });
        let out = f();
        stop.store(true, Ordering::Relaxed);
        let end_kib = rss_kib();
        let peak_kib = sampler.join().ok().flatten().max(end_kib).max(start_kib);
        (out, Rss { start_kib, peak_kib, end_kib })
    })
}

/// One protocol's node and what every run against it shares.
struct Bench<'a> {
    opts: &'a ScenarioOptions,
    protocol: Protocol,
    target: Target,
    spin: FunctionRef,
    calibration: Calibration,
}

/// A run's report, its tally and the memory around it.
struct Measured {
    report: Report,
    tally: Tally,
    rss: Rss,
}

impl Bench<'_> {
    fn driver(&self, workload: WorkloadSpec) -> Driver {
        Driver {
            target: self.target.clone(),
            mapping: Mapping::Spin(self.spin.clone()),
            workload,
            timeout: TIMEOUT,
            calibration: Some(self.calibration.clone()),
            window: window(self.protocol),
            keep_samples: false,
        }
    }

    fn measure(
        &self,
        workload: WorkloadSpec,
        mode: Mode,
        duration: Duration,
        bins: bool,
    ) -> Result<Measured, BenchError> {
        let tally = Arc::new(Mutex::new(Some(Tally::new(bins)?)));
        let mut config = self.driver(workload.clone()).config(workload, mode, duration);
        let sink = Arc::clone(&tally);
        config.observer = Some(SampleObserver::new(move |s| {
            if let Some(t) = lock(&sink).as_mut() {
                t.record(s);
            }
        }));
        let (report, rss) = with_rss(|| run::run(config));
        let report = report?;
        let tally = lock(&tally)
            .take()
            .ok_or_else(|| BenchError::Scenario("the run's tally was taken twice".into()))?;
        Ok(Measured { report, tally, rss })
    }
}

#[derive(Debug, Clone, Serialize)]
struct CapacityResult {
    protocol: &'static str,
    mix: &'static str,
    workload: String,
    outstanding: usize,
    /// 200s per second: the capacity every multiple is of.
    capacity_rps: f64,
    goodput_rps: f64,
    mean_execution_us: Option<f64>,
    planned: u64,
    refused: u64,
    timeouts: u64,
    point: Point,
}

#[derive(Debug, Clone, Serialize)]
struct ClassLine {
    name: Option<String>,
    planned: u64,
    deadline_miss_rate: f64,
    p99_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct OverloadPoint {
    protocol: &'static str,
    mix: &'static str,
    multiple: f64,
    workload: String,
    offered_rps: f64,
    goodput_rps: f64,
    goodput_over_capacity: f64,
    goodput_over_1x: Option<f64>,
    /// 200s within their deadline, client-measured ÷ 200s.
    ok_within_deadline_share: Option<f64>,
    /// 200s whose time in the node (queueing + execution, as it reports) is within their
    /// deadline ÷ 200s.
    ok_within_deadline_in_node_share: Option<f64>,
    refused_share: f64,
    /// Never answered (timeouts) ÷ planned.
    no_answer_share: f64,
    refusal_p50_us: Option<f64>,
    refusal_p99_us: Option<f64>,
    refusal_in_node_p50_us: Option<f64>,
    refusal_in_node_p99_us: Option<f64>,
    planned: u64,
    answered: u64,
    ok: u64,
    met: u64,
    refused: u64,
    other_answers: u64,
    timeouts: u64,
    unsent: u64,
    local_failures: u64,
    stray_responses: u64,
    failures_by_kind: BTreeMap<String, u64>,
    mean_execution_us: Option<f64>,
    rss: Rss,
    rss_over_1x: Option<f64>,
    send_lag_p99_us: Option<f64>,
    max_in_flight: usize,
    window: usize,
    per_class: Vec<ClassLine>,
    notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
struct StepBin {
    /// Start of the bin, ms from the step (negative before it).
    t_ms: f64,
    offered_rps: f64,
    goodput_rps: f64,
    refused_rps: f64,
    goodput_over_capacity: f64,
}

#[derive(Debug, Clone, Serialize)]
struct StepResult {
    protocol: &'static str,
    capacity_rps: f64,
    low_multiple: f64,
    high_multiple: f64,
    low_s: f64,
    high_s: f64,
    bin_ms: f64,
    arrivals_file: String,
    workload: String,
    planned: u64,
    answered: u64,
    refused: u64,
    timeouts: u64,
    unsent: u64,
    /// Mean goodput ÷ capacity over the 0.5× phase (its first 50 ms left out).
    before_over_capacity: Option<f64>,
    /// Mean goodput ÷ capacity over the 2× phase.
    after_over_capacity: Option<f64>,
    /// From the step to the end of the first bin with goodput ≥ 90 % of capacity.
    back_ms: Option<f64>,
    /// From the step to the end of the first bin from which the 50 ms moving average of goodput
    /// (bins after the step only) stays ≥ 90 % of capacity to the end of the 2× phase.
    holds_ms: Option<f64>,
    /// Share of the 2× phase's bins below 90 % of capacity.
    bins_below_share: Option<f64>,
    bins: Vec<StepBin>,
    notes: Vec<String>,
}

/// Bins from the step (index `from`) to the end of the first bin in `from..until` whose value is
/// at least `threshold`.
fn first_reach(values: &[f64], from: usize, until: usize, threshold: f64) -> Option<usize> {
    (from..until.min(values.len())).find(|&i| values[i] >= threshold).map(|i| i - from + 1)
}

/// Bins from the step (index `from`) to the end of the first bin of the suffix of
/// `from..until` over which the trailing moving average of goodput — over the last `hold` bins,
/// none before the step — stays at least `threshold`; `None` if it fails at the last bin.
fn holds_from(
    values: &[f64],
    from: usize,
    until: usize,
    threshold: f64,
    hold: usize,
) -> Option<usize> {
    let until = until.min(values.len());
    let hold = hold.max(1);
    let avg = |i: usize| {
        let lo = (i + 1).saturating_sub(hold).max(from);
        values[lo..=i].iter().sum::<f64>() / (i + 1 - lo) as f64
    };
    let mut start = None;
    for i in from..until {
        if avg(i) >= threshold {
            start.get_or_insert(i);
        } else {
            start = None;
        }
    }
    start.map(|i| i - from + 1)
}

/// Poisson arrivals at `low_rps` for `low_s`, then `high_rps` for `high_s`, as a trace
/// (`arrival_ns`, one per line).
fn step_trace(low_rps: f64, low_ns: u64, high_rps: f64, high_ns: u64, seed: u64) -> String {
    let mut rng = Rng::seed_from_u64(seed ^ 0x57e9);
    let mut text = String::from("# luge bench overload: the step's arrivals\narrival_ns\n");
    let mut t = 0.0f64;
    let end = (low_ns + high_ns) as f64;
    loop {
        let rate = if t < low_ns as f64 { low_rps } else { high_rps };
        t += rng.exponential(1e9 / rate.max(1e-3));
        if t >= end {
            break;
        }
        let _ = writeln!(text, "{}", t as u64);
    }
    text
}

fn per_second(n: u32) -> f64 {
    f64::from(n) * 1e9 / BIN_NS as f64
}

fn step(
    bench: &Bench<'_>,
    capacity: f64,
    low: Duration,
    high: Duration,
    dir: &Path,
    out: &mut Results,
) -> Result<StepResult, BenchError> {
    let protocol = bench.protocol;
    let low_ns = u64::try_from(low.as_nanos()).unwrap_or(u64::MAX);
    let high_ns = u64::try_from(high.as_nanos()).unwrap_or(u64::MAX);
    let text =
        step_trace(STEP_LOW * capacity, low_ns, STEP_HIGH * capacity, high_ns, bench.opts.seed);
    let file = format!("step-{}-arrivals.csv", protocol.name());
    out.write(&file, &text)?;
    let path = dir.join(&file);
    let mut workload = parse_spec(FIXED_SPEC, bench.opts.seed)?;
    workload.arrivals = ArrivalProcess::Trace(Trace::parse(&text, &path)?);
    let m = bench.measure(workload, Mode::Open { window: window(protocol) }, low + high, true)?;
    let t = &m.tally;
    let bins = t.bins.clone().unwrap_or_default();
    let step_bin = usize::try_from(low_ns / BIN_NS).unwrap_or(0);
    let end_bin = usize::try_from((low_ns + high_ns) / BIN_NS).unwrap_or(0);
    let n = end_bin.max(bins.met.len()).max(bins.offered.len()).max(bins.refused.len());
    let at = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(0);
    let goodput: Vec<f64> = (0..n).map(|i| per_second(at(&bins.met, i)) / capacity).collect();
    let mean = |from: usize, to: usize| {
        let to = to.min(goodput.len());
        (to > from).then(|| goodput[from..to].iter().sum::<f64>() / (to - from) as f64)
    };
    let below = (end_bin > step_bin).then(|| {
        (step_bin..end_bin).filter(|&i| goodput.get(i).is_none_or(|&g| g < RECOVERED)).count()
            as f64
            / (end_bin - step_bin) as f64
    });
    let bin_ms = BIN_NS as f64 / 1e6;
    let series: Vec<StepBin> = (0..n)
        .map(|i| StepBin {
            t_ms: (i as f64 - step_bin as f64) * bin_ms,
            offered_rps: per_second(at(&bins.offered, i)),
            goodput_rps: per_second(at(&bins.met, i)),
            refused_rps: per_second(at(&bins.refused, i)),
            goodput_over_capacity: goodput.get(i).copied().unwrap_or(0.0),
        })
        .collect();
    Ok(StepResult {
        protocol: protocol.name(),
        capacity_rps: capacity,
        low_multiple: STEP_LOW,
        high_multiple: STEP_HIGH,
        low_s: low.as_secs_f64(),
        high_s: high.as_secs_f64(),
        bin_ms,
        arrivals_file: file,
        workload: m.report.workload.clone(),
        planned: t.planned,
        answered: t.answered(),
        refused: t.refused,
        timeouts: t.timeouts,
        unsent: t.unsent,
        before_over_capacity: mean(HOLD_BINS.min(step_bin), step_bin),
        after_over_capacity: mean(step_bin, end_bin),
        back_ms: first_reach(&goodput, step_bin, end_bin, RECOVERED).map(|b| b as f64 * bin_ms),
        holds_ms: holds_from(&goodput, step_bin, end_bin, RECOVERED, HOLD_BINS)
            .map(|b| b as f64 * bin_ms),
        bins_below_share: below,
        bins: series,
        notes: m.report.notes.clone(),
    })
}

fn capacity_of(
    bench: &Bench<'_>,
    mix: Mix,
    duration: Duration,
) -> Result<CapacityResult, BenchError> {
    let workload = parse_spec(&mix.capacity_spec(), bench.opts.seed)?;
    let m = bench.measure(
        workload,
        Mode::Closed { outstanding: CLOSED_OUTSTANDING },
        duration,
        false,
    )?;
    let s = &m.report.summary;
    if s.throughput_rps <= 0.0 {
        return Err(BenchError::Scenario(format!(
            "overload: {} {}: the closed loop got no answer (errors: {:?})",
            bench.protocol.name(),
            mix.name(),
            s.errors_by_kind
        )));
    }
    Ok(CapacityResult {
        protocol: bench.protocol.name(),
        mix: mix.name(),
        workload: m.report.workload.clone(),
        outstanding: CLOSED_OUTSTANDING,
        capacity_rps: s.throughput_rps,
        goodput_rps: s.goodput_rps,
        mean_execution_us: m.tally.mean_execution_us(),
        planned: m.tally.planned,
        refused: m.tally.refused,
        timeouts: m.tally.timeouts,
        point: Point::of(&m.report),
    })
}

fn point_of(
    bench: &Bench<'_>,
    mix: Mix,
    multiple: f64,
    capacity: f64,
    m: &Measured,
) -> OverloadPoint {
    let (r, t) = (&m.report, &m.tally);
    let s = &r.summary;
    OverloadPoint {
        protocol: bench.protocol.name(),
        mix: mix.name(),
        multiple,
        workload: r.workload.clone(),
        offered_rps: s.offered_rps,
        goodput_rps: s.goodput_rps,
        goodput_over_capacity: s.goodput_rps / capacity,
        goodput_over_1x: None,
        ok_within_deadline_share: (t.ok > 0).then(|| t.met as f64 / t.ok as f64),
        ok_within_deadline_in_node_share: (t.ok > 0).then(|| t.server_met as f64 / t.ok as f64),
        refused_share: t.share(t.refused),
        no_answer_share: t.share(t.timeouts),
        refusal_p50_us: t.refusal_us(0.5),
        refusal_p99_us: t.refusal_us(0.99),
        refusal_in_node_p50_us: t.refusal_server_us(0.5),
        refusal_in_node_p99_us: t.refusal_server_us(0.99),
        planned: t.planned,
        answered: t.answered(),
        ok: t.ok,
        met: t.met,
        refused: t.refused,
        other_answers: t.other_answers,
        timeouts: t.timeouts,
        unsent: t.unsent,
        local_failures: t.local,
        stray_responses: r.stray_responses,
        failures_by_kind: t.kinds.clone(),
        mean_execution_us: t.mean_execution_us(),
        rss: m.rss,
        rss_over_1x: None,
        send_lag_p99_us: s.send_lag_us.p99,
        max_in_flight: r.max_in_flight,
        window: r.window,
        per_class: s
            .per_class
            .iter()
            .map(|c| ClassLine {
                name: c.name.clone(),
                planned: c.planned,
                deadline_miss_rate: c.deadline_miss_rate,
                p99_us: c.latency_us.p99,
            })
            .collect(),
        notes: r.notes.clone(),
    }
}

/// The multiples to run: given or the mode's default, 1 included, ascending, distinct.
fn multiples(o: &OverloadOptions, quick: bool) -> Result<Vec<f64>, BenchError> {
    let mut m: Vec<f64> = if !o.multiples.is_empty() {
        o.multiples.clone()
    } else if quick {
        vec![1.0, 5.0]
    } else {
        vec![1.0, 1.5, 2.0, 5.0]
    };
    if let Some(bad) = m.iter().find(|x| !(x.is_finite() && **x > 0.0 && **x <= 100.0)) {
        return Err(BenchError::Config(format!(
            "a multiple of capacity must be in (0, 100], not {bad}"
        )));
    }
    m.push(1.0);
    m.sort_by(f64::total_cmp);
    m.dedup();
    Ok(m)
}

fn label(p: &OverloadPoint) -> String {
    format!("{} {} {}×", p.protocol, p.mix, p.multiple)
}

pub(crate) fn run(
    o: &OverloadOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let multiples = multiples(o, opts.quick)?;
    let point_s = o.duration.unwrap_or(if opts.quick {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(3)
    });
    let (capacity_s, warm_s, step_low, step_high) = if opts.quick {
        (
            Duration::from_millis(200),
            Duration::from_millis(50),
            Duration::from_millis(150),
            Duration::from_millis(250),
        )
    } else {
        (
            Duration::from_secs(2),
            Duration::from_secs(10),
            Duration::from_secs(1),
            Duration::from_secs(2),
        )
    };
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spin = spin_function(&opts.functions)?;
    let dir = out.dir().to_path_buf();
    let mut calibration: Option<Calibration> = None;
    let mut capacities: Vec<CapacityResult> = Vec::new();
    let mut points: Vec<OverloadPoint> = Vec::new();
    let mut steps: Vec<StepResult> = Vec::new();
    let mut described = String::new();
    for &protocol in &opts.protocols {
        let mut spec = NodeSpec::new(wait, layout, &[protocol]);
        spec.cache_dir = opts.cache_dir.clone();
        spec.pin = pin;
        spec.deadline_admission = !o.no_deadline_admission;
        described = spec.describe();
        let node = LugeNode::start(&spec, std::slice::from_ref(&spin))?;
        let result = (|| -> Result<(), BenchError> {
            let target = node.target(protocol)?;
            let spin_ref = node.function("spin")?;
            let cal = match &calibration {
                Some(c) => c.clone(),
                None => {
                    let c = calibrate(&target, &spin_ref, CalibrationOptions::default(), TIMEOUT)?;
                    opts.say(format!("overload: calibration {c}"));
                    calibration = Some(c.clone());
                    c
                }
            };
            let bench = Bench { opts, protocol, target, spin: spin_ref, calibration: cal };
            // Warm the node (sandbox pool, caches) before anything is measured.
            bench.measure(
                parse_spec(FIXED_SPEC, opts.seed)?,
                Mode::Closed { outstanding: CLOSED_OUTSTANDING },
                warm_s,
                false,
            )?;
            for mix in Mix::ALL {
                let c = capacity_of(&bench, mix, capacity_s)?;
                opts.say(format!(
                    "overload: {} {} capacity {} /s (closed loop, {} in flight, mean execution {} µs)",
                    protocol.name(),
                    mix.name(),
                    rps(c.capacity_rps),
                    CLOSED_OUTSTANDING,
                    us(c.mean_execution_us)
                ));
                let capacity = c.capacity_rps;
                capacities.push(c);
                let base = parse_spec(mix.spec(), opts.seed)?;
                let first = points.len();
                for &multiple in &multiples {
                    let w = base.clone().with_rate(Rate::PerSecond(multiple * capacity));
                    let m = bench.measure(
                        w,
                        Mode::Open { window: window(protocol) },
                        point_s,
                        false,
                    )?;
                    let p = point_of(&bench, mix, multiple, capacity, &m);
                    opts.say(format!(
                        "overload: {}: offered {} /s, goodput {} of capacity, refused {} %, \
                         no answer {} %, refusal p99 {} µs, RSS peak {} KiB",
                        label(&p),
                        rps(p.offered_rps),
                        ratio(Some(p.goodput_over_capacity)),
                        pct(p.refused_share),
                        pct(p.no_answer_share),
                        us(p.refusal_p99_us),
                        p.rss.peak_kib.map_or("?".into(), |k| k.to_string())
                    ));
                    points.push(p);
                }
                let series = &mut points[first..];
                let one = series
                    .iter()
                    .find(|p| p.multiple == 1.0)
                    .map(|p| (p.goodput_rps, p.rss.peak_kib));
                if let Some((g1, r1)) = one {
                    for p in series.iter_mut() {
                        p.goodput_over_1x = (g1 > 0.0).then(|| p.goodput_rps / g1);
                        p.rss_over_1x = match (p.rss.peak_kib, r1) {
                            (Some(r), Some(r1)) if r1 > 0 => Some(r as f64 / r1 as f64),
                            _ => None,
                        };
                    }
                }
            }
            let fixed_capacity = capacities
                .iter()
                .find(|c| c.protocol == protocol.name() && c.mix == Mix::Fixed.name())
                .map(|c| c.capacity_rps)
                .ok_or_else(|| BenchError::Scenario("overload: no fixed-mix capacity".into()))?;
            let s = step(&bench, fixed_capacity, step_low, step_high, &dir, out)?;
            opts.say(format!(
                "overload: {} step {STEP_LOW}× → {STEP_HIGH}×: goodput {} → {} of capacity, \
                 back ≥ 90 % after {} ms, holds after {} ms",
                protocol.name(),
                ratio(s.before_over_capacity),
                ratio(s.after_over_capacity),
                s.back_ms.map_or("-".into(), |x| format!("{x:.0}")),
                s.holds_ms.map_or("-".into(), |x| format!("{x:.0}")),
            ));
            steps.push(s);
            Ok(())
        })();
        node.stop();
        result?;
    }

    plots(&points, &steps, out)?;
    let md = summary(
        &described,
        calibration.as_ref(),
        &capacities,
        &points,
        &steps,
        &multiples,
        point_s,
        o,
    );
    Ok((
        md,
        json!({
            "calibration": calibration,
            "deadline_admission": !o.no_deadline_admission,
            "node": described,
            "settings": {
                "fixed_execution_us": FIXED_US,
                "fixed_workload": FIXED_SPEC,
                "bimodal_workload": BIMODAL_SPEC,
                "capacity_deadline": CAPACITY_DEADLINE,
                "closed_outstanding": CLOSED_OUTSTANDING,
                "windows": { "udp": UDP_WINDOW, "http": HTTP_WINDOW },
                "timeout_s": TIMEOUT.as_secs_f64(),
                "capacity_s": capacity_s.as_secs_f64(),
                "point_s": point_s.as_secs_f64(),
                "multiples": multiples,
                "step": {
                    "low_multiple": STEP_LOW,
                    "high_multiple": STEP_HIGH,
                    "low_s": step_low.as_secs_f64(),
                    "high_s": step_high.as_secs_f64(),
                    "bin_ms": BIN_NS as f64 / 1e6,
                    "recovered_share": RECOVERED,
                    "hold_bins": HOLD_BINS,
                },
            },
            "capacity": capacities,
            "points": points,
            "steps": steps,
        }),
    ))
}

fn plots(
    points: &[OverloadPoint],
    steps: &[StepResult],
    out: &mut Results,
) -> Result<(), BenchError> {
    let mut names: Vec<(&str, &str)> = points.iter().map(|p| (p.protocol, p.mix)).collect();
    names.dedup();
    let sweep = |get: fn(&OverloadPoint) -> f64| -> Vec<Series> {
        names
            .iter()
            .map(|&(proto, mix)| Series {
                name: format!("{proto} {mix}"),
                points: points
                    .iter()
                    .filter(|p| p.protocol == proto && p.mix == mix)
                    .map(|p| (p.multiple, get(p)))
                    .collect(),
            })
            .collect()
    };
    let x_label = "offered load (multiple of the closed-loop capacity)".to_owned();
    out.plot(
        "goodput.svg",
        &Chart {
            title: "goodput ÷ capacity past capacity, 1 worker".into(),
            x_label: x_label.clone(),
            y_label: "goodput ÷ capacity".into(),
            log_y: false,
        },
        &sweep(|p| p.goodput_over_capacity),
    )?;
    out.plot(
        "refused.svg",
        &Chart {
            title: "share of requests refused (503 / Overloaded)".into(),
            x_label,
            y_label: "refused ÷ offered".into(),
            log_y: false,
        },
        &sweep(|p| p.refused_share),
    )?;
    for s in steps {
        let series = |name: &str, get: fn(&StepBin) -> f64| Series {
            name: name.to_owned(),
            points: s.bins.iter().map(|b| (b.t_ms, get(b) / s.capacity_rps)).collect(),
        };
        out.plot(
            &format!("step-{}.svg", s.protocol),
            &Chart {
                title: format!(
                    "{} fixed mix, {}× → {}× capacity: 10 ms bins",
                    s.protocol, s.low_multiple, s.high_multiple
                ),
                x_label: "time from the step (ms)".into(),
                y_label: "÷ capacity".into(),
                log_y: false,
            },
            &[
                series("goodput", |b| b.goodput_rps),
                series("offered", |b| b.offered_rps),
                series("refused", |b| b.refused_rps),
            ],
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn summary(
    node: &str,
    calibration: Option<&Calibration>,
    capacities: &[CapacityResult],
    points: &[OverloadPoint],
    steps: &[StepResult],
    multiples: &[f64],
    point_s: Duration,
    o: &OverloadOptions,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{node}, serving `spin` (its expected execution trusted); deadline-aware admission {}. \
         Calibration: {}.\n\n\
         Mixes: `fixed` = spin {FIXED_US} µs, deadline 100 ms (`{FIXED_SPEC}`); `bimodal` = \
         `{BIMODAL_SPEC}` (26 µs / 2.07 ms, half each), deadlines 10 × execution. Capacity = \
         closed-loop throughput ({CLOSED_OUTSTANDING} in flight, 100 ms deadlines) of that mix \
         on that protocol; each multiple is of it. Open-loop Poisson points of {:.2} s. Goodput = \
         200s whose client-measured latency is within their deadline, per second; `… in node` = \
         the same judged on the time the node reports (queueing + execution: on UDP-RPC from \
         the datagram's receipt, on HTTP from the submission to the runtime). Refused = 503 \
         (HTTP `Luge-Outcome` `deadline_unreachable`, `shed`, `overloaded`) / `Overloaded` \
         (UDP-RPC). No answer = timeouts ({} s). RSS = peak `VmRSS` of this process (node and \
         load generator, which keeps no samples) during the point.\n",
        if o.no_deadline_admission { "**off** (`--no-deadline-admission`)" } else { "on" },
        calibration.map_or("none".into(), ToString::to_string),
        point_s.as_secs_f64(),
        TIMEOUT.as_secs()
    );

    let mut head: Vec<String> = vec!["protocol".into(), "mix".into()];
    head.extend(multiples.iter().map(|m| format!(">{m}×")));
    let cols: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut headline = Table::new(&cols);
    let mut names: Vec<(&str, &str)> = points.iter().map(|p| (p.protocol, p.mix)).collect();
    names.dedup();
    for &(proto, mix) in &names {
        let mut row = vec![proto.to_owned(), mix.to_owned()];
        for &m in multiples {
            let p = points.iter().find(|p| p.protocol == proto && p.mix == mix && p.multiple == m);
            row.push(ratio(p.map(|p| p.goodput_over_capacity)));
        }
        headline.row(row);
    }
    let _ = writeln!(md, "## Goodput ÷ capacity\n\n{}", headline.render());

    let mut cap = Table::new(&[
        "protocol",
        "mix",
        ">capacity /s",
        ">mean execution µs",
        ">refused",
        ">no answer",
    ]);
    for c in capacities {
        cap.row(vec![
            c.protocol.into(),
            c.mix.into(),
            rps(c.capacity_rps),
            us(c.mean_execution_us),
            c.refused.to_string(),
            c.timeouts.to_string(),
        ]);
    }
    let _ = writeln!(md, "## Capacity (closed loop)\n\n{}", cap.render());

    let mut t = Table::new(&[
        "protocol",
        "mix",
        ">×",
        ">offered /s",
        ">goodput /s",
        ">÷ capacity",
        ">÷ 1×",
        ">200s in deadline %",
        ">… in node %",
        ">refused %",
        ">no answer %",
        ">refusal p50 µs",
        ">refusal p99 µs",
        ">… in node p50 µs",
        ">… in node p99 µs",
        ">RSS ÷ 1×",
        ">client lag p99 µs",
    ]);
    for p in points {
        t.row(vec![
            p.protocol.into(),
            p.mix.into(),
            format!("{}", p.multiple),
            rps(p.offered_rps),
            rps(p.goodput_rps),
            ratio(Some(p.goodput_over_capacity)),
            ratio(p.goodput_over_1x),
            p.ok_within_deadline_share.map_or("-".into(), pct),
            p.ok_within_deadline_in_node_share.map_or("-".into(), pct),
            pct(p.refused_share),
            pct(p.no_answer_share),
            p.refusal_p50_us.map_or("-".into(), |v| us(Some(v))),
            p.refusal_p99_us.map_or("-".into(), |v| us(Some(v))),
            p.refusal_in_node_p50_us.map_or("-".into(), |v| us(Some(v))),
            p.refusal_in_node_p99_us.map_or("-".into(), |v| us(Some(v))),
            ratio(p.rss_over_1x),
            us(p.send_lag_p99_us),
        ]);
    }
    let _ = writeln!(md, "## Past capacity\n\n{}", t.render());

    let mut st = Table::new(&[
        "protocol",
        ">capacity /s",
        ">before ÷ capacity",
        ">after ÷ capacity",
        ">back ≥ 90 % after ms",
        ">holds ≥ 90 % after ms",
        ">bins < 90 %",
        ">refused",
        ">no answer",
    ]);
    let ms = |v: Option<f64>| v.map_or("never".into(), |x| format!("{x:.0}"));
    for s in steps {
        st.row(vec![
            s.protocol.into(),
            rps(s.capacity_rps),
            ratio(s.before_over_capacity),
            ratio(s.after_over_capacity),
            ms(s.back_ms),
            ms(s.holds_ms),
            s.bins_below_share.map_or("-".into(), |x| format!("{} %", pct(x))),
            s.refused.to_string(),
            s.timeouts.to_string(),
        ]);
    }
    let _ = writeln!(
        md,
        "## Step {STEP_LOW}× → {STEP_HIGH}× (fixed mix, 10 ms bins)\n\n\
         Goodput binned by answer time. `back`: from the step to the end of the first bin at \
         ≥ {:.0} % of capacity; `holds`: from the step until the {} ms moving average stays \
         ≥ {:.0} % to the end of the {STEP_HIGH}× phase.\n\n{}",
        100.0 * RECOVERED,
        HOLD_BINS as u64 * BIN_NS / 1_000_000,
        100.0 * RECOVERED,
        st.render()
    );
    let notes: Vec<String> = points
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("{}: {n}", label(p))))
        .chain(
            steps
                .iter()
                .flat_map(|s| s.notes.iter().map(move |n| format!("{} step: {n}", s.protocol))),
        )
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use luge_proto::Status;

    use super::*;

    fn sample(seq: u64, latency_us: Option<u64>, error: Option<ErrorKind>) -> Sample {
        Sample {
            seq,
            class: 0,
            intended_ns: seq * 1_000_000,
            sent_ns: Some(seq * 1_000_000),
            latency_ns: latency_us.map(|l| l * 1_000),
            error,
            server_execution_ns: latency_us.map(|_| 175_000),
            server_queueing_ns: None,
            nominal_execution_ns: 175_000,
            deadline_ns: 100_000_000,
        }
    }

    #[test]
    fn the_tally_splits_answers_refusals_and_silence() {
        let mut t = Tally::new(true).unwrap();
        t.record(&sample(0, Some(500), None));
        t.record(&sample(1, Some(150_000), None)); // 200, but late
        t.record(&sample(2, Some(40), Some(ErrorKind::Status(Status::Overloaded))));
        t.record(&sample(3, Some(60), Some(ErrorKind::Shed)));
        t.record(&sample(4, Some(60), Some(ErrorKind::Status(Status::Killed))));
        t.record(&sample(5, None, Some(ErrorKind::Timeout)));
        t.record(&sample(6, None, Some(ErrorKind::Unsent)));
        assert_eq!((t.planned, t.ok, t.met, t.refused), (7, 2, 1, 2));
        assert_eq!(t.server_met, 2, "in the node, both 200s took 175 µs");
        assert_eq!((t.other_answers, t.timeouts, t.unsent, t.local), (1, 1, 1, 0));
        assert_eq!(t.answered(), 5);
        assert_eq!(t.kinds.get("shed"), Some(&1));
        let p50 = t.refusal_us(0.5).unwrap();
        assert!((40.0..=40.1).contains(&p50), "{p50}");
        let in_node = t.refusal_server_us(0.5).unwrap();
        assert!((175.0..=175.2).contains(&in_node), "{in_node}");
        assert!((t.mean_execution_us().unwrap() - 175.0).abs() < 1e-9);
        let b = t.bins.unwrap();
        // One arrival per ms: 7 in bin 0; the one met answer at 0.5 ms, in bin 0.
        assert_eq!((b.offered, b.met), (vec![7], vec![1]));
        assert_eq!(b.refused, vec![2]);
        assert_eq!(Tally::new(false).unwrap().refusal_us(0.5), None);
    }

    #[test]
    fn recovery_and_hold_are_counted_from_the_step() {
        // Step at bin 3; the 2× phase is bins 3..10.
        let g = [0.5, 0.5, 0.5, 0.6, 0.95, 0.5, 0.95, 1.0, 1.0, 1.0, 0.0];
        assert_eq!(first_reach(&g, 3, 10, 0.9), Some(2), "the end of bin 4");
        assert_eq!(first_reach(&g, 3, 4, 0.9), None);
        assert_eq!(holds_from(&g, 3, 10, 0.9, 1), Some(4), "bins 6.. hold on their own");
        // Averages over 2 bins (none before the step): .6 .775 .725 .725 .975 1 1.
        assert_eq!(holds_from(&g, 3, 10, 0.9, 2), Some(5), "from the end of bin 7");
        assert_eq!(holds_from(&g, 3, 11, 0.9, 1), None, "the last bin fails");
        assert_eq!(holds_from(&[0.5, 0.5, 1.0, 1.0, 1.0, 1.0], 2, 6, 0.9, 5), Some(1));
        assert_eq!(holds_from(&g, 5, 5, 0.9, 5), None, "no bins");
    }

    #[test]
    fn the_step_trace_switches_rate() {
        let text = step_trace(1_000.0, 1_000_000_000, 4_000.0, 1_000_000_000, 7);
        let t = Trace::parse(&text, Path::new("step.csv")).unwrap();
        let rows = t.rows();
        let low = rows.iter().filter(|r| r.at < 1_000_000_000).count() as f64;
        let high = rows.len() as f64 - low;
        assert!((900.0..1100.0).contains(&low), "{low}");
        assert!((3700.0..4300.0).contains(&high), "{high}");
        assert!(rows.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(
            step_trace(1_000.0, 1_000_000, 4_000.0, 1_000_000, 7),
            step_trace(1_000.0, 1_000_000, 4_000.0, 1_000_000, 7)
        );
    }

    #[test]
    fn multiples_always_include_one() {
        let o = OverloadOptions { multiples: vec![5.0, 2.0, 2.0], ..Default::default() };
        assert_eq!(multiples(&o, false).unwrap(), [1.0, 2.0, 5.0]);
        assert_eq!(multiples(&OverloadOptions::default(), true).unwrap(), [1.0, 5.0]);
        assert_eq!(multiples(&OverloadOptions::default(), false).unwrap(), [1.0, 1.5, 2.0, 5.0]);
        let bad = OverloadOptions { multiples: vec![0.0], ..Default::default() };
        assert!(multiples(&bad, false).is_err());
    }
}
