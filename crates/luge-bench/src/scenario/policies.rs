//! `luge bench policies`: the papers' bimodal and log-normal mixes on the real runtime (1
//! worker) under each policy, at a load sweep, through the calibrated `spin` function.
//!
//! `spin` trusts the expected execution each request carries (the papers' oracle estimates), so
//! every policy sees the same estimates. One calibration (measured on the first node) serves
//! every policy, so every policy gets the same iteration counts. The log-normal is truncated for
//! the runtime (X | X ≤ 1 s × its `scale`) unless the spec gives its own truncation; its "short"
//! class is the half below the (truncated) median. Deadlines are the workload's (10 ×
//! execution); its seed is `--seed` unless the spec gives its own `seed=`. The headlines: the
//! short class's p99 under `sledgescale` ÷ under `fifo` (goal ≤ 1/10), and under each policy ÷
//! under `srpt`, when it runs (goal at loads 0.9 and 0.95: ≤ 2×), beside each one's share of
//! deadlines missed (refusals included), short class and all: a p99 is infinite once over a
//! hundredth of the class failed, so the shares are what can still be compared where the p99s
//! cannot.
//!
//! `--trials` trials (default 5) run one after the other, each running every policy in turn
//! on a node of its own, so a policy's repetitions are interleaved with the others'. Ratios are
//! taken within a trial and reported as the median of the trials with its range; the other
//! figures are medians of the trials.
//!
//! Left out by default on one worker: `shinjuku` (its 15 µs quantum is for the simulator: the
//! runtime preempts at epoch ticks), `darc` (reserves cores per duration group: none
//! to reserve with one worker), `rr`/`jsq` (identical to `lld` with one worker) and
//! `sledgescale-steal` (identical to `sledgescale` with one worker). `--policies` runs them.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::PolicyKind;
use luge_sim::{Chart, Series};
use luge_workload::{LOGNORMAL_RUNTIME_TRUNCATION, WorkloadSpec};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, calibrate_once, median, user_workload};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, pct, ratio_range, rps, slug, spread, us};
use super::{PoliciesOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::calibrate::Calibration;
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::summary::ClassSummary;

const DEFAULT_POLICIES: [PolicyKind; 7] = [
    PolicyKind::SledgeScale,
    PolicyKind::Fifo,
    PolicyKind::Sledge,
    PolicyKind::Sfs,
    PolicyKind::Srpt,
    PolicyKind::Lld,
    PolicyKind::Ps,
];

/// The `spin` function of a benchmark node: as given, but with room for the longest request
/// of the mixes `specs` before the kill budget — 10 s, or twice the log-normal's cap on the
/// runtime (1 s × the largest `scale`) if that is more, at most an hour (what a function may
/// be given).
pub(crate) fn spin_function(
    functions: &[NodeFunction],
    specs: &[WorkloadSpec],
) -> Result<NodeFunction, BenchError> {
    let mut spin = functions
        .iter()
        .find(|f| f.config.name == "spin")
        .cloned()
        .ok_or_else(|| BenchError::Scenario("the node functions have no `spin`".into()))?;
    let scale = specs.iter().map(|s| s.dist.scale()).fold(1.0, f64::max);
    let longest = 2e-9 * LOGNORMAL_RUNTIME_TRUNCATION as f64 * scale;
    let longest = Duration::from_secs_f64(longest.min(3600.0));
    spin.config.limits.max_execution =
        spin.config.limits.max_execution.max(Duration::from_secs(10)).max(longest);
    spin.config.trust_client_estimate = true;
    Ok(spin)
}

/// The class the headline is about: `short` or `light`, else class 0.
pub(crate) fn short_class(per_class: &[ClassSummary]) -> Option<&ClassSummary> {
    per_class
        .iter()
        .find(|c| matches!(c.name.as_deref(), Some("short" | "light")))
        .or_else(|| per_class.iter().find(|c| c.class == 0))
}

#[derive(Debug, Clone, Default, Serialize)]
struct PolicyPoint {
    /// The trial (from 1) this was measured in.
    trial: usize,
    workload: String,
    policy: String,
    load: f64,
    point: Point,
    short_p99_us: Option<f64>,
    short_p99_slowdown: Option<f64>,
    short_miss_rate: Option<f64>,
    /// Share of the short class the load generator sent too late for any server
    /// (`ClassSummary::sent_too_late`), among `short_miss_rate`.
    short_sent_too_late_rate: Option<f64>,
    long_p99_us: Option<f64>,
    p99_slowdown: Option<f64>,
    errors_by_kind: std::collections::BTreeMap<String, u64>,
}

fn point_of(
    trial: usize,
    workload: &str,
    policy: PolicyKind,
    load: f64,
    r: &Report,
) -> PolicyPoint {
    let short = short_class(&r.summary.per_class);
    let long = r.summary.per_class.iter().find(|c| Some(c.class) != short.map(|s| s.class));
    PolicyPoint {
        trial,
        workload: workload.to_owned(),
        policy: policy.name().to_owned(),
        load,
        point: Point::of(r),
        short_p99_us: short.and_then(|c| c.latency_us.p99),
        short_p99_slowdown: short.and_then(|c| c.slowdown.p99),
        short_miss_rate: short.map(|c| c.deadline_miss_rate),
        short_sent_too_late_rate: short
            .filter(|c| c.planned > 0)
            .map(|c| c.sent_too_late as f64 / c.planned as f64),
        long_p99_us: long.and_then(|c| c.latency_us.p99),
        p99_slowdown: r.summary.slowdown.p99,
        errors_by_kind: r.summary.errors_by_kind.clone(),
    }
}

/// How long each node runs the first workload before its points are measured (a tenth of it
/// with `--quick`).
const WARM_UP: Duration = Duration::from_millis(300);

/// Every trial's point of one (workload, policy, load).
fn trials_of<'a>(
    points: &'a [PolicyPoint],
    workload: &str,
    policy: PolicyKind,
    load: f64,
) -> Vec<&'a PolicyPoint> {
    points
        .iter()
        .filter(|p| p.workload == workload && p.policy == policy.name() && p.load == load)
        .collect()
}

/// `a ÷ b` of two short-class p99s: infinite when `a` failed (`None`: over a hundredth of the
/// class failed), 0 when only `b` did, none when both did (no ratio to speak of).
fn p99_ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        (Some(_), None) => Some(0.0),
        (None, None) => None,
        _ => Some(f64::INFINITY),
    }
}

/// Median, minimum and maximum over the trials of `policy`'s short-class p99 ÷ `base`'s in the
/// same trial, at one workload and load, over the trials where either was finite; and how many
/// trials had both fail.
fn ratio_spread(
    points: &[PolicyPoint],
    workload: &str,
    load: f64,
    policy: PolicyKind,
    base: PolicyKind,
) -> (Option<(f64, f64, f64)>, usize) {
    let of = trials_of(points, workload, policy, load);
    let base = trials_of(points, workload, base, load);
    let pairs: Vec<Option<f64>> = of
        .iter()
        .filter_map(|p| {
            let b = base.iter().find(|b| b.trial == p.trial)?;
            Some(p99_ratio(p.short_p99_us, b.short_p99_us))
        })
        .collect();
    let both_failed = pairs.iter().filter(|r| r.is_none()).count();
    let mut v: Vec<f64> = pairs.into_iter().flatten().collect();
    (spread(&mut v), both_failed)
}

/// The ratio cell: `median [min–max]`, and how many trials it leaves out because both p99s
/// failed.
fn ratio_cell((r, both_failed): (Option<(f64, f64, f64)>, usize)) -> String {
    match (r, both_failed) {
        (None, n) if n > 0 => "both ∞".into(),
        (r, 0) => ratio_range(r),
        (r, n) => format!("{} ({n} both ∞)", ratio_range(r)),
    }
}

/// Whether the goal `ratio ≤ bound` is met: `n/a` when every trial had both p99s fail.
fn goal_cell((r, both_failed): (Option<(f64, f64, f64)>, usize), bound: f64) -> String {
    match r {
        Some((x, _, _)) if x <= bound => "met".into(),
        None if both_failed > 0 => "n/a (both failed)".into(),
        _ => "**missed**".into(),
    }
}

pub(crate) fn run(
    p: &PoliciesOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let policies = opts.given_or(
        &p.policies,
        vec![PolicyKind::SledgeScale, PolicyKind::Fifo],
        DEFAULT_POLICIES.to_vec(),
    );
    let loads = opts.given_or(&p.loads, vec![0.8], vec![0.5, 0.7, 0.8, 0.9]);
    let workloads = opts.given_or(
        &p.workloads,
        vec!["high-bimodal".into(), "lognormal,truncate=20ms".into()],
        vec!["high-bimodal".into(), "lognormal".into()],
    );
    let specs: Vec<WorkloadSpec> =
        workloads.iter().map(|w| user_workload(w, opts.seed)).collect::<Result<_, _>>()?;
    let base = opts.duration_or(p.duration, Duration::from_millis(300), Duration::from_secs(5));
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spin = spin_function(&opts.functions, &specs)?;
    let mut calibration: Option<Calibration> = None;
    let mut points: Vec<PolicyPoint> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    let trials = p.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    for trial in 1..=trials {
        for &policy in &policies {
            let spec = NodeSpec { policy, ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin) };
            LugeNode::with(&spec, std::slice::from_ref(&spin), |node| {
                let target = node.target(Protocol::Udp)?;
                let spin_ref = node.function("spin")?;
                let timeout = Duration::from_secs(5);
                let cal = calibrate_once(
                    &mut calibration,
                    &target,
                    &spin_ref,
                    timeout,
                    opts,
                    "policies",
                )?;
                let driver_of = |w: &WorkloadSpec| Driver {
                    target: target.clone(),
                    mapping: Mapping::Spin(spin_ref.clone()),
                    workload: w.clone(),
                    timeout: Duration::from_secs(30),
                    calibration: Some(cal.clone()),
                    window: 4096,
                    keep_samples: false,
                };
                // Every node starts warm, as the first one does after the calibration: its
                // code paged in, its pool slots touched. Not measured.
                if let (Some(w), Some(&load)) = (specs.first(), loads.first()) {
                    let warm_up = if opts.quick { WARM_UP / 10 } else { WARM_UP };
                    driver_of(w).at_load(load, warm_up)?;
                }
                for (name, w) in workloads.iter().zip(&specs) {
                    let driver = driver_of(w);
                    // Heavy tails need more requests for the same tail.
                    let duration = if name.starts_with("lognormal") { base * 2 } else { base };
                    for &load in &loads {
                        let r = driver.at_load(load, duration)?;
                        let pt = point_of(trial, name, policy, load, &r);
                        opts.say(format!(
                            "policies: trial {trial}/{trials}: {name} {policy} load {load}: \
                             short p99 {} µs, p99 slowdown {}, miss {} %, {} requests",
                            us(pt.short_p99_us),
                            us(pt.p99_slowdown),
                            pct(pt.point.deadline_miss_rate),
                            pt.point.planned
                        ));
                        labels.push(r.workload.clone());
                        points.push(pt);
                    }
                }
                Ok(())
            })?;
        }
    }

    for name in &workloads {
        let of: Vec<&PolicyPoint> = points.iter().filter(|p| &p.workload == name).collect();
        for (file, title, y, get) in [
            (
                "short-p99",
                "short-class p99 latency",
                "p99 latency (µs)",
                (|p: &PolicyPoint| p.short_p99_us) as fn(&PolicyPoint) -> Option<f64>,
            ),
            ("p99-slowdown", "p99 slowdown", "p99 slowdown", |p: &PolicyPoint| p.p99_slowdown),
        ] {
            let series: Vec<Series> = policies
                .iter()
                .map(|pol| Series {
                    name: pol.name().to_owned(),
                    points: loads
                        .iter()
                        .filter_map(|&load| {
                            let t: Vec<&PolicyPoint> = of
                                .iter()
                                .copied()
                                .filter(|p| p.policy == pol.name() && p.load == load)
                                .collect();
                            (!t.is_empty())
                                .then(|| (load, median(&t, get).unwrap_or(f64::INFINITY)))
                        })
                        .collect(),
                })
                .collect();
            let x_label = "offered load (utilisation of the worker)";
            let chart = Chart {
                log_y: true,
                ..Chart::new(format!("{title}, {name}, 1 worker, median of trials"), x_label, y)
            };
            out.plot(&format!("{}-{file}.svg", slug(name)), &chart, &series)?;
        }
    }

    let mut md = String::new();
    let _ = writeln!(
        md,
        "`spin` on 1 worker ({} layout, {} wait), UDP-RPC, Poisson arrivals at each load, \
         deadlines 10 × execution; the client's expected execution is trusted (oracle). \
         Calibration: {}.\n",
        layout_name(layout),
        wait_name(wait),
        calibration.as_ref().map_or("none".into(), ToString::to_string)
    );
    let _ = writeln!(
        md,
        "**{trials} trial(s)**, each running every policy in turn; figures are the medians of \
         the trials, ratios the median of each trial's ratio with `[min–max]` their range. \
         Missed = planned requests not answered 200 within their deadline, refusals included; \
         `… sent too late` = those of them the load generator sent after their deadline less \
         their execution had passed, which no server could have met.\n"
    );
    let mut headline = Table::new(&[
        "workload",
        ">load",
        ">sledgescale short p99 µs",
        ">fifo short p99 µs",
        ">ratio",
        "goal ≤ 0.1",
    ]);
    let short = |p: &PolicyPoint| p.short_p99_us;
    for name in &workloads {
        for &load in &loads {
            let (s, f) = (
                trials_of(&points, name, PolicyKind::SledgeScale, load),
                trials_of(&points, name, PolicyKind::Fifo, load),
            );
            if s.is_empty() || f.is_empty() {
                continue;
            }
            let r = ratio_spread(&points, name, load, PolicyKind::SledgeScale, PolicyKind::Fifo);
            headline.row(vec![
                name.clone(),
                format!("{load:.2}"),
                us(median(&s, short)),
                us(median(&f, short)),
                ratio_cell(r),
                goal_cell(r, 0.1),
            ]);
        }
    }
    md.push_str(&headline.section("sledgescale ÷ fifo, short class"));
    // A share missed (refusals included), the median of the trials.
    let missed = |t: &[&PolicyPoint], f: fn(&PolicyPoint) -> Option<f64>| {
        median(t, f).map_or("-".into(), pct)
    };
    if policies.contains(&PolicyKind::Srpt) {
        let mut vs = Table::new(&[
            "workload",
            ">load",
            "policy",
            ">short p99 µs",
            ">srpt's µs",
            ">÷ srpt",
            "goal ≤ 2× at 0.9, 0.95",
            ">short missed %",
            ">srpt's %",
            ">… sent too late %",
            ">srpt's %",
            ">all missed %",
            ">srpt's %",
        ]);
        for name in &workloads {
            for &load in &loads {
                let base = trials_of(&points, name, PolicyKind::Srpt, load);
                for &policy in policies.iter().filter(|&&p| p != PolicyKind::Srpt) {
                    let t = trials_of(&points, name, policy, load);
                    if t.is_empty() || base.is_empty() {
                        continue;
                    }
                    let r = ratio_spread(&points, name, load, policy, PolicyKind::Srpt);
                    let goal = [0.9, 0.95].iter().any(|g| (g - load).abs() < 1e-9);
                    vs.row(vec![
                        name.clone(),
                        format!("{load:.2}"),
                        policy.name().to_owned(),
                        us(median(&t, short)),
                        us(median(&base, short)),
                        ratio_cell(r),
                        if goal { goal_cell(r, 2.0) } else { "-".into() },
                        missed(&t, |p| p.short_miss_rate),
                        missed(&base, |p| p.short_miss_rate),
                        missed(&t, |p| p.short_sent_too_late_rate),
                        missed(&base, |p| p.short_sent_too_late_rate),
                        missed(&t, |p| Some(p.point.deadline_miss_rate)),
                        missed(&base, |p| Some(p.point.deadline_miss_rate)),
                    ]);
                }
            }
        }
        md.push_str(&vs.section("Each policy ÷ srpt, short class"));
    }
    let mut t = Table::new(&[
        "workload",
        "policy",
        ">load",
        ">offered /s",
        ">throughput /s",
        ">short p99 µs",
        ">short p99 slowdown",
        ">long p99 µs",
        ">p99 slowdown",
        ">miss %",
        ">errors",
    ]);
    for name in &workloads {
        for &policy in &policies {
            for &load in &loads {
                let p = trials_of(&points, name, policy, load);
                if p.is_empty() {
                    continue;
                }
                let m = |f: fn(&PolicyPoint) -> Option<f64>| median(&p, f);
                t.row(vec![
                    name.clone(),
                    policy.name().to_owned(),
                    format!("{load:.2}"),
                    rps(m(|p| Some(p.point.offered_rps)).unwrap_or(0.0)),
                    rps(m(|p| Some(p.point.throughput_rps)).unwrap_or(0.0)),
                    us(m(|p| p.short_p99_us)),
                    us(m(|p| p.short_p99_slowdown)),
                    us(m(|p| p.long_p99_us)),
                    us(m(|p| p.p99_slowdown)),
                    pct(m(|p| Some(p.point.deadline_miss_rate)).unwrap_or(1.0)),
                    p.iter().map(|p| p.point.errors).sum::<u64>().to_string(),
                ]);
            }
        }
    }
    md.push_str(&t.section("All points (medians of the trials; errors summed)"));
    labels.sort();
    labels.dedup();
    for l in &labels {
        let _ = writeln!(md, "- workload as run: `{l}`");
    }
    Ok((
        md,
        json!({
            "calibration": calibration,
            "policies": policies.iter().map(|p| p.name()).collect::<Vec<_>>(),
            "loads": loads,
            "trials": trials,
            "workloads_as_run": labels,
            "points": points,
        }),
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spin_has_room_for_the_longest_request_of_a_scaled_mix() {
        let spin = NodeFunction {
            config: luge_runtime::FunctionConfig::new("spin"),
            module: Vec::new(),
            route: "/spin".into(),
        };
        let budget = |specs: &[&str]| {
            let specs: Vec<WorkloadSpec> = specs.iter().map(|s| s.parse().unwrap()).collect();
            spin_function(std::slice::from_ref(&spin), &specs).unwrap().config.limits.max_execution
        };
        assert_eq!(budget(&[]), Duration::from_secs(10));
        assert_eq!(budget(&["lognormal", "high-bimodal"]), Duration::from_secs(10));
        // Cut at 1 s × 10 on the runtime: such a request must not be killed at 10 s.
        assert_eq!(budget(&["lognormal,scale=10"]), Duration::from_secs(20));
        assert_eq!(budget(&["lognormal,scale=1e4,rate=1"]), Duration::from_secs(3600));
    }

    fn point(trial: usize, policy: PolicyKind, short_p99_us: Option<f64>) -> PolicyPoint {
        PolicyPoint {
            trial,
            workload: "w".into(),
            policy: policy.name().into(),
            load: 0.9,
            short_p99_us,
            ..PolicyPoint::default()
        }
    }

    #[test]
    fn ratios_are_taken_within_a_trial_and_their_median_reported() {
        use PolicyKind::{SledgeScale as S, Srpt as R};
        let points = [
            point(1, S, Some(300.0)),
            point(1, R, Some(100.0)),
            point(2, S, Some(100.0)),
            point(2, R, Some(200.0)),
            point(3, S, None),
            point(3, R, Some(100.0)),
            // A trial without its base pairs with nothing.
            point(4, S, Some(1.0)),
        ];
        // Trials 1–3: 3, 0.5 and ∞ (a failed p99): median 3.
        let (got, both) = ratio_spread(&points, "w", 0.9, S, R);
        assert_eq!(got.map(|(m, lo, _)| (m, lo)), Some((3.0, 0.5)));
        assert!(got.is_some_and(|(_, _, hi)| hi.is_infinite()));
        assert_eq!(both, 0);
        assert_eq!(p99_ratio(Some(1.0), None), Some(0.0), "only the base failed");
        assert_eq!(ratio_spread(&points, "w", 0.5, S, R), (None, 0), "no such load");
        assert_eq!(goal_cell((got, both), 2.0), "**missed**");
    }

    /// A trial where both short p99s failed has no ratio: it is left out of the median and
    /// said, and a goal every trial of which is such reads "n/a", not "missed".
    #[test]
    fn trials_where_both_failed_have_no_ratio() {
        use PolicyKind::{SledgeScale as S, Srpt as R};
        let points = [
            point(1, S, None),
            point(1, R, None),
            point(2, S, Some(150.0)),
            point(2, R, Some(100.0)),
        ];
        let r = ratio_spread(&points, "w", 0.9, S, R);
        assert_eq!(r, (Some((1.5, 1.5, 1.5)), 1));
        assert_eq!(goal_cell(r, 2.0), "met");
        assert!(ratio_cell(r).ends_with("(1 both ∞)"), "{}", ratio_cell(r));
        let r = ratio_spread(&points[..2], "w", 0.9, S, R);
        assert_eq!(r, (None, 1));
        assert_eq!(
            (ratio_cell(r).as_str(), goal_cell(r, 2.0).as_str()),
            ("both ∞", "n/a (both failed)")
        );
    }
}
