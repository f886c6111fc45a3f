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
//!    `Overloaded` on UDP-RPC); the share sent and never answered (timeouts and local send or
//!    connect failures: must be 0, every request
//!    gets exactly one answer); p50 and p99 latency of the refusals; and the peak `VmRSS` of
//!    this process during the point ÷ that at the first trial's 1×. The node runs in this
//!    process, so RSS is the node's plus the load generator's; the generator keeps no
//!    per-request samples here (it streams them through a [`SampleObserver`]), so its share does
//!    not grow with the rate. Points run in ascending order on one node, and later trials after
//!    the busy points of earlier ones, so memory an allocator keeps after a busy point shows up
//!    in the next: RSS can only be overstated. And how busy the load generator's CPUs were
//!    (`/proc/stat`): the summary names the points where they were saturated, whose
//!    client-measured figures then include the generator's own wait for a CPU.
//! 3. **Step**: the fixed mix at 0.5× capacity for a while, then 2× (Poisson arrivals of a
//!    trace written to `step-<protocol>-arrivals-trial<n>.csv`); goodput in 10 ms bins of
//!    completion time, and from the step: when goodput first reaches 90 % of capacity
//!    (`back`), and when its 50 ms moving average reaches 90 % for good until the end of the 2×
//!    phase (`holds`).
//!
//! 4. **Prediction** ([`predict`]): each point's own arrivals through `luge-sim` under the
//!    node's policy and admission, the worker's executions and per-request cost taken from
//!    the trial's capacity run, once every point is measured; the simulated goodput is set
//!    beside the node's own (by its clock).
//!
//! Each protocol's node runs `--trials` trials (default 5) one after the other, each measuring
//! both mixes' capacity, every multiple and the step, so every point's repetitions are spread
//! over the run rather than back to back; a trial's points are ratios to that trial's capacity
//! and 1× point. Everything is printed as the median of the trials' ratios with its range.
//! `--quick` runs one trial of 1× and 5× for 250 ms each and a short step: it proves the
//! pipeline, not the numbers.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use luge_workload::{Rate, WorkloadSpec};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, calibrate_once};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, pct, ratio, rps, us};
use super::policies::spin_function;
use super::{OverloadOptions, Protocol, ScenarioOptions};
use crate::calibrate::Calibration;
use crate::cpu_busy::GeneratorCpu;
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::run::{self, Mode};
use crate::sample::SampleObserver;
use crate::target::{FunctionRef, Target};

mod predict;
mod step;
mod summary;
mod tally;

use self::step::{StepResult, step};
use self::summary::{plots, summary};
use self::tally::{Rss, Tally, lock, with_rss};

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
/// HTTP open-loop window (= connections): the same room, below the 1 024 connections
/// `luge serve` allows one client address (`max_connections_per_client`), so that no
/// connection of the load generator is refused for its address.
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

pub(crate) fn parse_spec(text: &str, seed: u64) -> Result<WorkloadSpec, BenchError> {
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

#[derive(Debug, Clone, Default, Serialize)]
struct CapacityResult {
    /// The trial (from 1) this was measured in.
    trial: usize,
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
    /// Sent and never answered (`Tally::unanswered`).
    no_answer: u64,
    point: Point,
}

#[derive(Debug, Clone, Serialize)]
struct ClassLine {
    name: Option<String>,
    planned: u64,
    deadline_miss_rate: f64,
    p99_us: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
struct OverloadPoint {
    /// The trial (from 1) this was measured in.
    trial: usize,
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
    /// Sent and never answered (timeouts, local send/connect/transport failures) ÷ planned.
    no_answer_share: f64,
    refusal_p50_us: Option<f64>,
    refusal_p99_us: Option<f64>,
    refusal_in_node_p50_us: Option<f64>,
    refusal_in_node_p99_us: Option<f64>,
    planned: u64,
    answered: u64,
    ok: u64,
    met: u64,
    /// 200s within their deadline by the node's clock.
    server_met: u64,
    /// The run's time (s), drain included: what every rate of the point is per.
    elapsed_s: f64,
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
    /// Goodput by the node's clock (200s whose queueing + execution it reports is within their
    /// deadline, per second) ÷ capacity: what the simulator's prediction is set beside.
    node_goodput_over_capacity: f64,
    /// The trial's closed-loop capacity of this mix (/s): what the ratios are of.
    capacity_rps: f64,
    /// The mean execution the node reported in that capacity run (µs).
    capacity_mean_execution_us: Option<f64>,
    /// The simulated worker's cost per request besides the execution (ns), from that run.
    simulated_overhead_ns: Option<u64>,
    /// Measured ÷ nominal mean execution in that run: the simulated executions' factor.
    simulated_execution_scale: Option<f64>,
    /// Requests that met their deadline in the simulated node, the same arrivals ([`predict`]).
    simulated_met: Option<u64>,
    /// Those per second (over the real run's time) ÷ capacity.
    simulated_goodput_over_capacity: Option<f64>,
    /// How busy the CPUs were while the load generator ran (`Report::generator_cpu`).
    cpu: GeneratorCpu,
    send_lag_p99_us: Option<f64>,
    max_in_flight: usize,
    max_connections: Option<usize>,
    window: usize,
    per_class: Vec<ClassLine>,
    notes: Vec<String>,
}

fn capacity_of(
    bench: &Bench<'_>,
    trial: usize,
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
        trial,
        protocol: bench.protocol.name(),
        mix: mix.name(),
        workload: m.report.workload.clone(),
        outstanding: CLOSED_OUTSTANDING,
        capacity_rps: s.throughput_rps,
        goodput_rps: s.goodput_rps,
        mean_execution_us: m.tally.mean_execution_us(),
        planned: m.tally.planned,
        refused: m.tally.refused,
        no_answer: m.tally.unanswered(),
        point: Point::of(&m.report),
    })
}

fn point_of(
    bench: &Bench<'_>,
    trial: usize,
    mix: Mix,
    multiple: f64,
    capacity: f64,
    m: &Measured,
) -> OverloadPoint {
    let (r, t) = (&m.report, &m.tally);
    let s = &r.summary;
    let per_capacity = |n: u64| {
        if s.elapsed_s > 0.0 && capacity > 0.0 { n as f64 / s.elapsed_s / capacity } else { 0.0 }
    };
    OverloadPoint {
        trial,
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
        no_answer_share: t.share(t.unanswered()),
        refusal_p50_us: t.refusal_us(0.5),
        refusal_p99_us: t.refusal_us(0.99),
        refusal_in_node_p50_us: t.refusal_server_us(0.5),
        refusal_in_node_p99_us: t.refusal_server_us(0.99),
        planned: t.planned,
        answered: t.answered(),
        ok: t.ok,
        met: t.met,
        server_met: t.server_met,
        elapsed_s: s.elapsed_s,
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
        node_goodput_over_capacity: per_capacity(t.server_met),
        capacity_rps: capacity,
        capacity_mean_execution_us: None,
        simulated_overhead_ns: None,
        simulated_execution_scale: None,
        simulated_met: None,
        simulated_goodput_over_capacity: None,
        cpu: r.generator_cpu.clone(),
        send_lag_p99_us: s.send_lag_us.p99,
        max_in_flight: r.max_in_flight,
        max_connections: r.max_connections,
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
fn multiples(o: &OverloadOptions, opts: &ScenarioOptions) -> Result<Vec<f64>, BenchError> {
    let mut m = opts.given_or(&o.multiples, vec![1.0, 5.0], vec![1.0, 1.5, 2.0, 5.0]);
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
    format!("{} {} {}× (trial {})", p.protocol, p.mix, p.multiple, p.trial)
}

/// Sets each point's ratios to the 1× point of its series: goodput to that trial's, RSS to the
/// first trial's. Later trials follow busier points of earlier ones, whose memory the allocator
/// may keep; against the first 1× their RSS can only be overstated.
fn relate_to_one(points: &mut [OverloadPoint]) {
    // Collected first: the points are updated in place.
    let bases: Vec<(Option<f64>, Option<u64>)> = points
        .iter()
        .map(|p| {
            let same = |q: &&OverloadPoint| {
                q.protocol == p.protocol && q.mix == p.mix && q.multiple == 1.0
            };
            let goodput = points.iter().filter(same).find(|q| q.trial == p.trial);
            let first = points.iter().filter(same).min_by_key(|q| q.trial);
            (goodput.map(|q| q.goodput_rps), first.and_then(|q| q.rss.peak_kib))
        })
        .collect();
    for (p, (g1, r1)) in points.iter_mut().zip(bases) {
        p.goodput_over_1x = g1.filter(|&g| g > 0.0).map(|g| p.goodput_rps / g);
        p.rss_over_1x = match (p.rss.peak_kib, r1) {
            (Some(r), Some(r1)) if r1 > 0 => Some(r as f64 / r1 as f64),
            _ => None,
        };
    }
}

pub(crate) fn run(
    o: &OverloadOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let multiples = multiples(o, opts)?;
    let trials = o.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let point_s = opts.duration_or(o.duration, Duration::from_millis(250), Duration::from_secs(3));
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
    let spin = spin_function(&opts.functions, &[])?;
    let dir = out.dir().to_path_buf();
    let mut calibration: Option<Calibration> = None;
    let mut capacities: Vec<CapacityResult> = Vec::new();
    let mut points: Vec<OverloadPoint> = Vec::new();
    let mut steps: Vec<StepResult> = Vec::new();
    let mut described = String::new();
    let mut simulated_spec: Option<NodeSpec> = None;
    for &protocol in &opts.protocols {
        let spec = NodeSpec {
            deadline_admission: !o.no_deadline_admission,
            ..NodeSpec::of(opts, wait, layout, protocol, pin)
        };
        described = spec.describe();
        simulated_spec = Some(spec.clone());
        LugeNode::with(&spec, std::slice::from_ref(&spin), |node| {
            let target = node.target(protocol)?;
            let spin_ref = node.function("spin")?;
            let cal =
                calibrate_once(&mut calibration, &target, &spin_ref, TIMEOUT, opts, "overload")?;
            let bench = Bench { opts, protocol, target, spin: spin_ref, calibration: cal };
            // Warm the node (sandbox pool, caches) before anything is measured.
            bench.measure(
                parse_spec(FIXED_SPEC, opts.seed)?,
                Mode::Closed { outstanding: CLOSED_OUTSTANDING },
                warm_s,
                false,
            )?;
            for trial in 1..=trials {
                for mix in Mix::ALL {
                    let c = capacity_of(&bench, trial, mix, capacity_s)?;
                    opts.say(format!(
                        "overload: trial {trial}/{trials}: {} {} capacity {} /s (closed loop, \
                         {} in flight, mean execution {} µs)",
                        protocol.name(),
                        mix.name(),
                        rps(c.capacity_rps),
                        CLOSED_OUTSTANDING,
                        us(c.mean_execution_us)
                    ));
                    let (capacity, capacity_mean) = (c.capacity_rps, c.mean_execution_us);
                    capacities.push(c);
                    let base = parse_spec(mix.spec(), opts.seed)?;
                    for &multiple in &multiples {
                        let w = base.clone().with_rate(Rate::PerSecond(multiple * capacity))?;
                        let m = bench.measure(
                            w,
                            Mode::Open { window: window(protocol) },
                            point_s,
                            false,
                        )?;
                        let mut p = point_of(&bench, trial, mix, multiple, capacity, &m);
                        p.capacity_mean_execution_us = capacity_mean;
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
                }
                let fixed_capacity = capacities
                    .iter()
                    .rev()
                    .find(|c| c.protocol == protocol.name() && c.mix == Mix::Fixed.name())
                    .map(|c| c.capacity_rps)
                    .ok_or_else(|| {
                        BenchError::Scenario("overload: no fixed-mix capacity".into())
                    })?;
                let s = step(&bench, trial, fixed_capacity, step_low, step_high, &dir, out)?;
                opts.say(format!(
                    "overload: trial {trial}/{trials}: {} step {STEP_LOW}× → {STEP_HIGH}×: \
                     goodput {} → {} of capacity, back ≥ 90 % after {} ms, holds after {} ms",
                    protocol.name(),
                    ratio(s.before_over_capacity),
                    ratio(s.after_over_capacity),
                    s.back_ms.map_or("-".into(), |x| format!("{x:.0}")),
                    s.holds_ms.map_or("-".into(), |x| format!("{x:.0}")),
                ));
                steps.push(s);
            }
            Ok(())
        })?;
    }

    if let (Some(spec), Some(cal)) = (&simulated_spec, &calibration) {
        predict::predict_points(&mut points, &predict::Model::new(spec, cal), opts.seed);
    }
    relate_to_one(&mut points);
    plots(&points, &steps, out)?;
    let md = summary(
        &described,
        calibration.as_ref(),
        &capacities,
        &points,
        &steps,
        &multiples,
        point_s,
        trials,
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
                "trials": trials,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn multiples_always_include_one() {
        let full = ScenarioOptions::new(Vec::new());
        let quick = ScenarioOptions { quick: true, ..full.clone() };
        let o = OverloadOptions { multiples: vec![5.0, 2.0, 2.0], ..Default::default() };
        assert_eq!(multiples(&o, &full).unwrap(), [1.0, 2.0, 5.0]);
        assert_eq!(multiples(&OverloadOptions::default(), &quick).unwrap(), [1.0, 5.0]);
        assert_eq!(multiples(&OverloadOptions::default(), &full).unwrap(), [1.0, 1.5, 2.0, 5.0]);
        let bad = OverloadOptions { multiples: vec![0.0], ..Default::default() };
        assert!(multiples(&bad, &full).is_err());
    }

    fn point(
        trial: usize,
        mix: &'static str,
        multiple: f64,
        goodput: f64,
        rss: u64,
    ) -> OverloadPoint {
        OverloadPoint {
            trial,
            protocol: "udp",
            mix,
            multiple,
            goodput_rps: goodput,
            goodput_over_capacity: goodput / 1_000.0,
            // One second: by the node's clock as at the client; the simulator 10 % above.
            elapsed_s: 1.0,
            server_met: goodput as u64,
            node_goodput_over_capacity: goodput / 1_000.0,
            simulated_met: Some((goodput * 1.1) as u64),
            simulated_goodput_over_capacity: Some(goodput * 1.1 / 1_000.0),
            rss: Rss { peak_kib: Some(rss), ..Rss::default() },
            ..OverloadPoint::default()
        }
    }

    #[test]
    fn goodput_is_related_to_its_trials_one_and_memory_to_the_first_trials() {
        let mut points = vec![
            point(1, "fixed", 1.0, 1_000.0, 100),
            point(1, "fixed", 5.0, 900.0, 150),
            point(1, "bimodal", 1.0, 500.0, 160),
            point(2, "fixed", 1.0, 800.0, 200),
            point(2, "fixed", 5.0, 400.0, 220),
        ];
        relate_to_one(&mut points);
        let got: Vec<(Option<f64>, Option<f64>)> =
            points.iter().map(|p| (p.goodput_over_1x, p.rss_over_1x)).collect();
        assert_eq!(
            got,
            [
                (Some(1.0), Some(1.0)),
                (Some(0.9), Some(1.5)),
                (Some(1.0), Some(1.0)),
                (Some(1.0), Some(2.0)),
                (Some(0.5), Some(2.2)),
            ]
        );
    }

    /// The summary of three trials at 1× and 5×, one second each.
    fn summary_of(capacities: &[CapacityResult], points: &[OverloadPoint]) -> String {
        summary::summary(
            "node",
            None,
            capacities,
            points,
            &[],
            &[1.0, 5.0],
            Duration::from_secs(1),
            3,
            &OverloadOptions::default(),
        )
    }

    #[test]
    fn the_summary_gives_the_median_of_the_trials_and_their_range() {
        let points: Vec<OverloadPoint> = [(1, 950.0), (2, 700.0), (3, 990.0)]
            .into_iter()
            .flat_map(|(t, g)| {
                [point(t, "fixed", 1.0, 1_000.0, 100), point(t, "fixed", 5.0, g, 110)]
            })
            .collect();
        let capacities: Vec<CapacityResult> = (1..=3)
            .map(|trial| CapacityResult {
                trial,
                protocol: "udp",
                mix: "fixed",
                capacity_rps: 1_000.0 + trial as f64,
                ..CapacityResult::default()
            })
            .collect();
        let md = summary_of(&capacities, &points);
        // 5×: goodput ÷ capacity 0.95, 0.70, 0.99 → median 0.95, range 0.70–0.99.
        assert!(md.contains("| 0.95× [0.70×–0.99×] |"), "{md}");
        assert!(md.contains("**3 trial(s)**"), "{md}");
        // The capacity row is one per series, with the trials' range.
        assert_eq!(
            md.matches("| udp      | fixed |").count(),
            6,
            "headline, capacity, 1× and 5× past capacity and predicted: {md}"
        );
        // The prediction: 5× simulated 1.045, 0.77, 1.089 of capacity; 1.10× the node's.
        let predicted = md.split("The simulator's prediction").nth(1).unwrap_or_default();
        let five = predicted.lines().find(|l| l.contains("|   5 |")).unwrap_or_default();
        assert!(five.contains("1.04× [0.77×–1.09×]") && five.ends_with(" 1.10× |"), "{predicted}");
        assert!(md.contains("1001–1003"), "{md}");
        // No generator CPU measured: nothing said about it.
        assert!(!md.contains("had no CPU left"), "{md}");
    }

    #[test]
    fn the_summary_names_the_points_whose_load_generator_had_no_cpu_left() {
        let busy = |p: OverloadPoint, share: f64| OverloadPoint {
            cpu: GeneratorCpu { generator_busy: Some(share), ..GeneratorCpu::default() },
            ..p
        };
        // 5×: saturated in two trials of three (the median); 1×: in one only.
        let points: Vec<OverloadPoint> = [(1, 0.99, 0.99), (2, 0.40, 0.97), (3, 0.50, 0.60)]
            .into_iter()
            .flat_map(|(t, one, five)| {
                [
                    busy(point(t, "fixed", 1.0, 1_000.0, 100), one),
                    busy(point(t, "fixed", 5.0, 500.0, 100), five),
                ]
            })
            .collect();
        let md = summary_of(&[], &points);
        assert!(md.contains("had no CPU left** at udp fixed 5× ("), "{md}");
        assert!(md.contains("97.00 [60.00–99.00]"), "{md}");
    }
}
