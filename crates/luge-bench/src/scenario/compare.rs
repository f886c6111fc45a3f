//! `luge bench compare`: the no-op on Luge and on each baseline in turn, as ratios.
//!
//! Per server (Luge in each layout and wait mode, UDP echo in each wait mode, bare hyper,
//! process-per-request), on each protocol, one after the other on the same box:
//!
//! 1. warm-up (a short closed loop, discarded);
//! 2. **latency**: closed loop, 1 request in flight — p50 and p99 of an unloaded hot no-op;
//! 3. **closed-loop throughput** with `closed_outstanding` requests in flight;
//! 4. **throughput at a fixed p99 target**: open-loop Poisson arrivals, starting at half the
//!    closed-loop 1-in-flight rate, doubling until p99 exceeds the target (or > 0.1 % fail),
//!    then bisecting geometrically; the highest offered rate that met the target is reported.
//!    A rate passes when one of two 1 s runs meets the target (a neighbour's burst on a shared
//!    box spoils single runs; a rate the server cannot sustain fails both).
//!
//! Ratios are Luge ÷ baseline: p50 and p99 from (2) (lower is better), throughput from (4)
//! (higher is better). The whole sequence runs `trials` times (default 5), interleaved — every
//! server once per trial — and each ratio is taken within a trial, then reported as the median
//! over the trials with its range, so a reader can tell a change from the box's drift. When a baseline never meets the target at any rate (process-per-request
//! usually cannot keep p99 under 1 ms), its throughput ratio falls back to (3) and says so.
//! Baselines that have no wait mode (bare hyper, process) are measured once and compared with
//! Luge in every mode.
//!
//! Wait modes: Luge's `spin` is `luge serve --spin` — the runtime's dispatcher and worker
//! busy-poll their queues (one spinning thread in the inline layout, two with a dispatcher
//! thread), while the UDP front end reads its socket blocking, as `luge serve` does unless the
//! manifest sets `rpc_busy_poll`. The UDP echo's `spin` busy-polls its one thread.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use luge_runtime::{Layout, WaitMode};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, Search, search_rate};
use super::node::{
    Baseline, BaselineKind, LugeNode, NodeSpec, Pinning, ServerId, noop_only, process_program,
};
use super::order::in_trial_order;
use super::output::{Results, Table, ratio_range, rps, spread, us};
use super::{CompareOptions, Protocol, ScenarioOptions, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::target::Target;

/// Durations of one server's measurement.
struct Budget {
    warm: Duration,
    latency: Duration,
    closed: Duration,
    step: Duration,
    max_runs: usize,
    refine: usize,
    tries: usize,
}

impl Budget {
    fn of(quick: bool) -> Self {
        if quick {
            Budget {
                warm: Duration::from_millis(20),
                latency: Duration::from_millis(100),
                closed: Duration::from_millis(100),
                step: Duration::from_millis(60),
                max_runs: 2,
                refine: 0,
                tries: 1,
            }
        } else {
            Budget {
                warm: Duration::from_millis(300),
                latency: Duration::from_secs(2),
                closed: Duration::from_secs(2),
                step: Duration::from_secs(1),
                max_runs: 18,
                refine: 3,
                tries: 2,
            }
        }
    }
}

/// Everything measured on one server in one trial.
#[derive(Debug, Clone, Serialize)]
struct Measured {
    #[serde(flatten)]
    id: ServerId,
    trial: usize,
    latency: Point,
    closed: Point,
    search: Search,
}

impl Measured {
    fn at_target(&self) -> f64 {
        self.search.rate()
    }
}

fn measure(
    label: &str,
    target: Target,
    mapping: Mapping,
    c: &CompareOptions,
    opts: &ScenarioOptions,
) -> Result<(Point, Point, Search), BenchError> {
    let b = Budget::of(opts.quick);
    let driver = Driver::fixed(target, mapping, opts.seed);
    driver.closed(1, b.warm)?;
    let latency = Point::of(&driver.closed(1, b.latency)?);
    opts.say(format!(
        "compare: {label}: 1 in flight p50 {} µs p99 {} µs ({} /s)",
        us(latency.p50_us),
        us(latency.p99_us),
        rps(latency.throughput_rps)
    ));
    let closed = Point::of(&driver.closed(c.closed_outstanding, b.closed)?);
    opts.say(format!(
        "compare: {label}: {} in flight {} /s p99 {} µs",
        c.closed_outstanding,
        rps(closed.throughput_rps),
        us(closed.p99_us)
    ));
    let start = (latency.throughput_rps / 2.0).max(100.0);
    let search = search_rate(
        &driver,
        start,
        c.p99_target,
        b.step,
        b.max_runs,
        b.refine,
        b.tries,
        |p, ok| {
            opts.say(format!(
                "compare: {label}: offered {} /s → p99 {} µs (client send lag p99 {} µs), errors \
                 {} {}",
                rps(p.offered_rps),
                us(p.p99_us),
                us(p.send_lag_p99_us),
                p.errors,
                if ok { "meets" } else { "misses" }
            ));
        },
    )?;
    Ok((latency, closed, search))
}

fn measure_luge(
    protocol: Protocol,
    wait: WaitMode,
    layout: Layout,
    c: &CompareOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    trial: usize,
) -> Result<Measured, BenchError> {
    let spec = NodeSpec::of(opts, wait, layout, protocol, pin);
    let label = format!("{} {}", protocol.name(), spec.describe());
    let (latency, closed, search) = LugeNode::with(&spec, &noop_only(&opts.functions), |node| {
        let mapping = node.noop()?;
        measure(&label, node.target(protocol)?, mapping, c, opts)
    })?;
    Ok(Measured { id: ServerId::luge(protocol, wait, layout), trial, latency, closed, search })
}

#[allow(clippy::too_many_arguments)]
fn measure_baseline(
    kind: BaselineKind,
    protocol: Protocol,
    wait: Option<WaitMode>,
    program: &Path,
    c: &CompareOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    trial: usize,
) -> Result<Measured, BenchError> {
    let label = format!(
        "{} {}{}",
        protocol.name(),
        kind.name(),
        wait.map_or(String::new(), |w| format!(" ({} wait)", wait_name(w)))
    );
    let spin = wait == Some(WaitMode::Spin);
    let (latency, closed, search) = Baseline::with(kind, protocol, spin, program, pin, |server| {
        measure(&label, server.target()?, Baseline::noop(), c, opts)
    })?;
    Ok(Measured { id: ServerId::baseline(kind, protocol, wait), trial, latency, closed, search })
}

/// One line of the ratio table: one trial's ratios, or (in the summary) their medians.
#[derive(Debug, Clone, Serialize)]
struct RatioRow {
    trial: Option<usize>,
    protocol: &'static str,
    wait: String,
    layout: String,
    baseline: String,
    p50: Option<f64>,
    p99: Option<f64>,
    /// Luge ÷ baseline throughput at the p99 target (or closed loop, see `throughput_basis`).
    throughput: Option<f64>,
    throughput_basis: &'static str,
    closed_throughput: Option<f64>,
    goal: String,
    met: Option<bool>,
    /// The baseline failed in this trial (a p50 or p99 past its failures, or nothing answered):
    /// the trial gives no ratio and is left out of the medians — neither a Luge win (0×, ∞
    /// throughput) nor a loss.
    baseline_failed: bool,
}

/// Luge's `a` ÷ a baseline's `b` (a working baseline's: [`RatioRow::baseline_failed`]), where
/// `None` is an infinite (failed) figure: `None` (read as ∞) when Luge's failed.
fn div(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The goal against a baseline (issue #6), and whether the ratios meet it.
fn goal(baseline: &str, p50: Option<f64>, throughput: Option<f64>) -> (String, Option<bool>) {
    match baseline {
        "udp-echo" => (
            "p50 ≤ 2×, throughput ≥ 0.6×".to_owned(),
            Some(p50.is_some_and(|r| r <= 2.0) && throughput.is_some_and(|r| r >= 0.6)),
        ),
        "bare-hyper" => {
            ("throughput ≥ 0.7×".to_owned(), Some(throughput.is_some_and(|r| r >= 0.7)))
        }
        "process" => ("throughput ≥ 20×".to_owned(), Some(throughput.is_some_and(|r| r >= 20.0))),
        _ => ("-".to_owned(), None),
    }
}

/// A ratio's median over the trials and its range (`output::spread`; a missing ratio counts as
/// infinite).
fn spread_of(rows: &[&RatioRow], f: impl Fn(&RatioRow) -> Option<f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> =
        rows.iter().filter(|r| !r.baseline_failed).map(|r| f(r).unwrap_or(f64::INFINITY)).collect();
    spread(&mut v)
}

fn ratio_row(luge: &Measured, base: &Measured) -> RatioRow {
    let baseline_failed = base.latency.p50_us.is_none()
        || base.latency.p99_us.is_none()
        || base.closed.throughput_rps <= 0.0;
    let p50 = div(luge.latency.p50_us, base.latency.p50_us);
    let p99 = div(luge.latency.p99_us, base.latency.p99_us);
    let closed = div(Some(luge.closed.throughput_rps), Some(base.closed.throughput_rps));
    let (throughput, basis) = if base.at_target() > 0.0 {
        (div(Some(luge.at_target()), Some(base.at_target())), "p99 target")
    } else {
        (closed, "closed loop (baseline never met the p99 target)")
    };
    let (goal, met) = goal(&base.id.server, p50, throughput);
    let met = met.filter(|_| !baseline_failed);
    let trial = Some(luge.trial);
    let base = &base.id;
    RatioRow {
        trial,
        protocol: luge.id.protocol,
        wait: luge.id.wait.clone(),
        layout: luge.id.layout.clone(),
        baseline: format!(
            "{}{}",
            base.server,
            if base.wait == "-" { String::new() } else { format!(" ({})", base.wait) }
        ),
        p50,
        p99,
        throughput,
        throughput_basis: basis,
        closed_throughput: closed,
        goal,
        met,
        baseline_failed,
    }
}

/// The ratios of every (protocol, wait, layout, baseline), in the order first measured: a row
/// of medians (goal judged on them; `trial` = `None`) and the spread of p50, p99, throughput
/// and closed-loop ratios over the trials. The throughput basis is the p99 target only when
/// every trial had one.
type Summary = Vec<(RatioRow, [Option<(f64, f64, f64)>; 4])>;

fn summarise(rows: &[RatioRow]) -> Summary {
    let key = |r: &RatioRow| (r.protocol, r.wait.clone(), r.layout.clone(), r.baseline.clone());
    let mut keys = Vec::new();
    for r in rows {
        if !keys.contains(&key(r)) {
            keys.push(key(r));
        }
    }
    keys.into_iter()
        .filter_map(|k| {
            let of: Vec<&RatioRow> = rows.iter().filter(|r| key(r) == k).collect();
            let first = *of.first()?;
            // One basis for every trial's throughput ratio: the p99 target only when every
            // trial had one, else the closed loop for all (a median over a mix of the two
            // would be neither).
            let at_target = of.iter().all(|r| r.throughput_basis == "p99 target");
            let spreads = [
                spread_of(&of, |r| r.p50),
                spread_of(&of, |r| r.p99),
                if at_target {
                    spread_of(&of, |r| r.throughput)
                } else {
                    spread_of(&of, |r| r.closed_throughput)
                },
                spread_of(&of, |r| r.closed_throughput),
            ];
            let [p50, p99, throughput, closed] = spreads.map(|s| s.map(|s| s.0));
            let basis = if at_target {
                first.throughput_basis
            } else {
                "closed loop (baseline never met the p99 target)"
            };
            let base = first.baseline.split(' ').next().unwrap_or_default();
            let (goal, met) = goal(base, p50, throughput);
            // No trial with a working baseline: nothing to judge.
            let judged = of.iter().any(|r| !r.baseline_failed);
            let met = met.filter(|_| judged);
            let median = RatioRow {
                trial: None,
                p50,
                p99,
                throughput,
                throughput_basis: basis,
                closed_throughput: closed,
                goal,
                met,
                baseline_failed: !judged,
                ..first.clone()
            };
            Some((median, spreads))
        })
        .collect()
}

/// One server to measure in a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    /// A baseline without a wait mode (bare hyper, process-per-request): compared with Luge in
    /// every mode.
    Once(BaselineKind),
    /// The UDP echo in one wait mode: compared with Luge in that mode.
    Echo(WaitMode),
    /// Luge in one wait mode and layout.
    Luge(WaitMode, Layout),
}

/// The ratio rows of one trial and protocol: each Luge measurement against the echo of its wait
/// mode, then against the baselines without one.
fn pair(done: &[(Job, Measured)]) -> Vec<RatioRow> {
    let mut rows = Vec::new();
    for (job, luge) in done {
        let Job::Luge(wait, _) = *job else { continue };
        let echo = done.iter().filter(|(j, _)| *j == Job::Echo(wait));
        let once = done.iter().filter(|(j, _)| matches!(j, Job::Once(_)));
        rows.extend(echo.chain(once).map(|(_, base)| ratio_row(luge, base)));
    }
    rows
}

pub(crate) fn run(
    c: &CompareOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let program = process_program(c.process_program.as_deref());
    let trials = c.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let mut all: Vec<Measured> = Vec::new();
    let mut rows: Vec<RatioRow> = Vec::new();
    for trial in 0..trials {
        if trials > 1 {
            opts.say(format!("compare: trial {}/{trials}", trial + 1));
        }
        for &protocol in &opts.protocols {
            // Every server of this protocol, run in the trial's order (`in_trial_order`), then
            // paired and listed in one fixed order whatever the order they ran in.
            let mut jobs = Vec::new();
            if protocol == Protocol::Http {
                jobs.push(Job::Once(BaselineKind::BareHttp));
            }
            jobs.push(Job::Once(BaselineKind::Process));
            for &wait in &opts.modes {
                if protocol == Protocol::Udp {
                    jobs.push(Job::Echo(wait));
                }
                jobs.extend(opts.layouts.iter().map(|&layout| Job::Luge(wait, layout)));
            }
            let mut done: Vec<(Job, Measured)> = Vec::with_capacity(jobs.len());
            for &job in in_trial_order(trial, &jobs) {
                let m = match job {
                    Job::Once(kind) => {
                        measure_baseline(kind, protocol, None, &program, c, opts, pin, trial)?
                    }
                    Job::Echo(wait) => measure_baseline(
                        BaselineKind::UdpEcho,
                        protocol,
                        Some(wait),
                        &program,
                        c,
                        opts,
                        pin,
                        trial,
                    )?,
                    Job::Luge(wait, layout) => {
                        measure_luge(protocol, wait, layout, c, opts, pin, trial)?
                    }
                };
                done.push((job, m));
            }
            done.sort_by_key(|(job, _)| jobs.iter().position(|j| j == job));
            rows.extend(pair(&done));
            all.extend(done.into_iter().map(|(_, m)| m));
        }
    }
    let summary = summarise(&rows);

    let mut md = String::new();
    let _ = writeln!(
        md,
        "No-op request (`noop` built-in, empty body) over loopback, {trials} interleaved trials \
         (every server once per trial); each ratio is taken within a trial and shown as the \
         median over the trials [with their range]. Ratios are Luge ÷ baseline: \
         p50/p99 of one request in flight (closed loop; lower is better), throughput = the \
         highest Poisson rate whose p99 stayed ≤ {} µs with ≤ 0.1 % failures in one of {} runs \
         of {:.2} s (higher is better; `*` = the baseline never met the target, closed-loop \
         throughput with {} in flight instead), closed-loop = {} in flight. Latency counts from \
         the intended send time, so a late client counts too: the client lag column says how \
         much of the p99 was the client's own lateness. Process-per-request runs `{}`.\n",
        c.p99_target.as_micros(),
        Budget::of(opts.quick).tries,
        Budget::of(opts.quick).step.as_secs_f64(),
        c.closed_outstanding,
        c.closed_outstanding,
        program.display()
    );
    let mut t = Table::new(&[
        "protocol",
        "wait",
        "layout",
        "baseline",
        ">p50 ratio",
        ">p99 ratio",
        ">throughput ratio",
        ">closed-loop ratio",
        "goal",
        "met",
    ]);
    for (r, [p50, p99, throughput, closed]) in &summary {
        t.row(vec![
            r.protocol.into(),
            r.wait.clone(),
            r.layout.clone(),
            r.baseline.clone(),
            ratio_range(*p50),
            ratio_range(*p99),
            format!(
                "{}{}",
                ratio_range(*throughput),
                if r.throughput_basis == "p99 target" { "" } else { " *" }
            ),
            ratio_range(*closed),
            r.goal.clone(),
            match r.met {
                Some(true) => "yes".into(),
                Some(false) => "**no**".into(),
                None if r.baseline_failed => "- (the baseline failed)".into(),
                None => "-".into(),
            },
        ]);
    }
    md.push_str(&t.section("Ratios (Luge ÷ baseline)"));
    let mut t = Table::new(&ServerId::columns(&[
        ">trial",
        ">p50 µs",
        ">p99 µs",
        ">p99.9 µs",
        ">1-in-flight /s",
        ">closed-loop /s",
        ">rate at p99 target /s",
        ">its p99 µs",
        ">its client lag p99 µs",
        ">runs",
    ]));
    for m in &all {
        t.row(m.id.row(vec![
            (m.trial + 1).to_string(),
            us(m.latency.p50_us),
            us(m.latency.p99_us),
            us(m.latency.p999_us),
            rps(m.latency.throughput_rps),
            rps(m.closed.throughput_rps),
            if m.at_target() > 0.0 { rps(m.at_target()) } else { "never".into() },
            m.search.best.as_ref().map_or("-".into(), |b| us(b.p99_us)),
            m.search.best.as_ref().map_or("-".into(), |b| us(b.send_lag_p99_us)),
            m.search.steps.len().to_string(),
        ]));
    }
    md.push_str(&t.section("Measurements"));
    let notes: Vec<String> = all
        .iter()
        .flat_map(|m| {
            let who = m.id.cells().join(" ");
            m.latency.notes.iter().chain(&m.closed.notes).map(move |n| format!("{who}: {n}"))
        })
        .collect();
    for n in &notes {
        let _ = writeln!(md, "- note: {n}");
    }
    let json = json!({
        "p99_target_us": c.p99_target.as_secs_f64() * 1e6,
        "closed_outstanding": c.closed_outstanding,
        "process_program": program.display().to_string(),
        "trials": trials,
        "medians": summary.iter().map(|(r, _)| r).collect::<Vec<_>>(),
        "ratios": rows,
        "servers": all,
    });
    Ok((md, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(id: ServerId, p50_us: f64) -> Measured {
        let latency = Point {
            p50_us: Some(p50_us),
            p99_us: Some(p50_us),
            throughput_rps: 1.0,
            ..Point::default()
        };
        let closed = latency.clone();
        let search = Search { p99_target_us: 1000.0, best: None, steps: Vec::new() };
        Measured { id, trial: 0, latency, closed, search }
    }

    /// Whatever order a trial ran its servers in, each Luge measurement is paired with the echo
    /// of its own wait mode and with every baseline that has none.
    #[test]
    fn luge_is_paired_with_the_echo_of_its_wait_mode_and_the_modeless_baselines() {
        let (sleep, spin, udp) = (WaitMode::Sleep, WaitMode::Spin, Protocol::Udp);
        let echo = |w| Job::Echo(w);
        let luge = |w| Job::Luge(w, Layout::Inline);
        let done = vec![
            (
                Job::Once(BaselineKind::Process),
                measured(ServerId::baseline(BaselineKind::Process, udp, None), 100.0),
            ),
            (
                echo(sleep),
                measured(ServerId::baseline(BaselineKind::UdpEcho, udp, Some(sleep)), 10.0),
            ),
            (luge(sleep), measured(ServerId::luge(udp, sleep, Layout::Inline), 20.0)),
            (echo(spin), measured(ServerId::baseline(BaselineKind::UdpEcho, udp, Some(spin)), 5.0)),
            (luge(spin), measured(ServerId::luge(udp, spin, Layout::Inline), 20.0)),
        ];
        let rows = pair(&done);
        let got: Vec<_> =
            rows.iter().map(|r| (r.wait.as_str(), r.baseline.as_str(), r.p50)).collect();
        assert_eq!(
            got,
            [
                ("sleep", "udp-echo (sleep)", Some(2.0)),
                ("sleep", "process", Some(0.2)),
                ("spin", "udp-echo (spin)", Some(4.0)),
                ("spin", "process", Some(0.2)),
            ]
        );
    }

    fn trial(trial: usize, at_target: Option<f64>, closed: f64) -> RatioRow {
        RatioRow {
            trial: Some(trial),
            protocol: "udp",
            wait: "sleep".into(),
            layout: "inline".into(),
            baseline: "udp-echo (sleep)".into(),
            p50: Some(1.5),
            p99: Some(1.5),
            throughput: at_target.or(Some(closed)),
            throughput_basis: if at_target.is_some() {
                "p99 target"
            } else {
                "closed loop (baseline never met the p99 target)"
            },
            closed_throughput: Some(closed),
            goal: String::new(),
            met: None,
            baseline_failed: false,
        }
    }

    #[test]
    fn a_failed_luge_figure_is_no_finite_ratio() {
        assert_eq!(div(Some(30.0), Some(20.0)), Some(1.5));
        assert_eq!(div(None, Some(20.0)), None, "read as ∞");
    }

    /// A trial whose baseline failed gives no ratio: left out of the medians, never a goal met
    /// (it was: a 0× p50 and ∞ throughput passed every goal).
    #[test]
    fn a_failed_baseline_is_left_out_not_a_luge_win() {
        let failed = RatioRow {
            p50: None,
            p99: None,
            throughput: None,
            closed_throughput: None,
            baseline_failed: true,
            ..trial(1, None, 1.0)
        };
        let ok = |t| RatioRow { p50: Some(3.0), ..trial(t, Some(0.5), 0.5) };
        let summary = summarise(&[failed.clone(), ok(2), ok(3)]);
        let (median, spreads) = &summary[0];
        assert_eq!(spreads[0], Some((3.0, 3.0, 3.0)), "the failed trial is not an ∞ or a 0×");
        assert_eq!(median.met, Some(false), "judged on the working trials: p50 3× > 2×");
        let summary = summarise(&[failed]);
        assert_eq!((summary[0].0.met, summary[0].0.baseline_failed), (None, true));
    }

    /// The median throughput ratio is over one basis: the closed loop for every trial as soon
    /// as one trial had no p99 target, never a mix of the two.
    #[test]
    fn the_throughput_median_takes_one_basis() {
        let at_target =
            [trial(1, Some(0.4), 0.55), trial(2, Some(0.45), 0.57), trial(3, Some(0.5), 0.6)];
        let s = summarise(&at_target);
        assert_eq!(s[0].0.throughput, Some(0.45));
        assert_eq!(s[0].0.throughput_basis, "p99 target");
        let mixed = [
            trial(1, Some(0.4), 0.70),
            trial(2, Some(0.45), 0.72),
            trial(3, None, 0.6),
            trial(4, None, 0.62),
            trial(5, None, 0.64),
        ];
        let s = summarise(&mixed);
        // The closed-loop ratios' median (0.64), not the median of the mix 0.4, 0.45, 0.6,
        // 0.62, 0.64 (0.6).
        assert_eq!(s[0].0.throughput, Some(0.64));
        assert_eq!(s[0].1[2], Some((0.64, 0.6, 0.72)));
        assert!(s[0].0.throughput_basis.starts_with("closed loop"));
    }
}
