//! `luge bench policies`: the papers' bimodal and log-normal mixes on the real runtime (1
//! worker) under each policy, at a load sweep, through the calibrated `spin` function.
//!
//! `spin` trusts the expected execution each request carries (the papers' oracle estimates), so
//! every policy sees the same estimates. One calibration (measured on the first node) serves
//! every policy, so every policy gets the same iteration counts. The log-normal is truncated for
//! the runtime (X | X ≤ 1 s) unless the spec gives its own truncation; its "short"
//! class is the half below the (truncated) median. Deadlines are the workload's (10 ×
//! execution). The headline: the short class's p99 under `sledgescale` ÷ under `fifo` at load
//! 0.8 (goal ≤ 1/10).
//!
//! Left out by default on one worker: `shinjuku` (its 15 µs quantum is for the simulator: the
//! runtime preempts at epoch ticks), `darc` (reserves cores per duration group: none
//! to reserve with one worker), `rr`/`jsq` (identical to `lld` with one worker) and
//! `sledgescale-steal` (identical to `sledgescale` with one worker). `--policies` runs them.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::PolicyKind;
use luge_sim::{Chart, Series};
use luge_workload::WorkloadSpec;
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, calibrate_once};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, pct, ratio, rps, slug, us};
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
/// of the mixes (the log-normal's 1 s cap plus the fixed cost) before the kill budget.
pub(crate) fn spin_function(functions: &[NodeFunction]) -> Result<NodeFunction, BenchError> {
    let mut spin = functions
        .iter()
        .find(|f| f.config.name == "spin")
        .cloned()
        .ok_or_else(|| BenchError::Scenario("the node functions have no `spin`".into()))?;
    spin.config.limits.max_execution =
        spin.config.limits.max_execution.max(Duration::from_secs(10));
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

#[derive(Debug, Clone, Serialize)]
struct PolicyPoint {
    workload: String,
    policy: String,
    load: f64,
    point: Point,
    short_p99_us: Option<f64>,
    short_p99_slowdown: Option<f64>,
    short_miss_rate: Option<f64>,
    long_p99_us: Option<f64>,
    p99_slowdown: Option<f64>,
    errors_by_kind: std::collections::BTreeMap<String, u64>,
}

fn point_of(workload: &str, policy: PolicyKind, load: f64, r: &Report) -> PolicyPoint {
    let short = short_class(&r.summary.per_class);
    let long = r.summary.per_class.iter().find(|c| Some(c.class) != short.map(|s| s.class));
    PolicyPoint {
        workload: workload.to_owned(),
        policy: policy.name().to_owned(),
        load,
        point: Point::of(r),
        short_p99_us: short.and_then(|c| c.latency_us.p99),
        short_p99_slowdown: short.and_then(|c| c.slowdown.p99),
        short_miss_rate: short.map(|c| c.deadline_miss_rate),
        long_p99_us: long.and_then(|c| c.latency_us.p99),
        p99_slowdown: r.summary.slowdown.p99,
        errors_by_kind: r.summary.errors_by_kind.clone(),
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
    let specs: Vec<WorkloadSpec> = workloads
        .iter()
        .map(|w| {
            w.parse::<WorkloadSpec>()
                .map(|s| s.with_seed(opts.seed))
                .map_err(|e| BenchError::Config(format!("workload `{w}`: {e}")))
        })
        .collect::<Result<_, _>>()?;
    let base = opts.duration_or(p.duration, Duration::from_millis(300), Duration::from_secs(5));
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spin = spin_function(&opts.functions)?;
    let mut calibration: Option<Calibration> = None;
    let mut points: Vec<PolicyPoint> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for &policy in &policies {
        let spec = NodeSpec { policy, ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin) };
        LugeNode::with(&spec, std::slice::from_ref(&spin), |node| {
            let target = node.target(Protocol::Udp)?;
            let spin_ref = node.function("spin")?;
            let timeout = Duration::from_secs(5);
            let cal =
                calibrate_once(&mut calibration, &target, &spin_ref, timeout, opts, "policies")?;
            for (name, w) in workloads.iter().zip(&specs) {
                let driver = Driver {
                    target: target.clone(),
                    mapping: Mapping::Spin(spin_ref.clone()),
                    workload: w.clone(),
                    timeout: Duration::from_secs(30),
                    calibration: Some(cal.clone()),
                    window: 4096,
                    keep_samples: false,
                };
                // Heavy tails need more requests for the same tail.
                let duration = if name.starts_with("lognormal") { base * 2 } else { base };
                for &load in &loads {
                    let r = driver.at_load(load, duration)?;
                    let pt = point_of(name, policy, load, &r);
                    opts.say(format!(
                        "policies: {name} {policy} load {load}: short p99 {} µs, p99 slowdown {}, \
                         miss {} %, {} requests",
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
                    points: of
                        .iter()
                        .filter(|p| p.policy == pol.name())
                        .map(|p| (p.load, get(p).unwrap_or(f64::INFINITY)))
                        .collect(),
                })
                .collect();
            let x_label = "offered load (utilisation of the worker)";
            let chart = Chart {
                log_y: true,
                ..Chart::new(format!("{title}, {name}, 1 worker"), x_label, y)
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
    let mut headline = Table::new(&[
        "workload",
        ">load",
        ">sledgescale short p99 µs",
        ">fifo short p99 µs",
        ">ratio",
        "goal ≤ 0.1",
    ]);
    for name in &workloads {
        for &load in &loads {
            let get = |pol: PolicyKind| {
                points
                    .iter()
                    .find(|p| &p.workload == name && p.policy == pol.name() && p.load == load)
            };
            if let (Some(s), Some(f)) = (get(PolicyKind::SledgeScale), get(PolicyKind::Fifo)) {
                let r = match (s.short_p99_us, f.short_p99_us) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    (Some(_), None) => Some(0.0),
                    _ => None,
                };
                headline.row(vec![
                    name.clone(),
                    format!("{load:.2}"),
                    us(s.short_p99_us),
                    us(f.short_p99_us),
                    ratio(r),
                    match r {
                        Some(x) if x <= 0.1 => "met".into(),
                        Some(_) => "**missed**".into(),
                        None => "-".into(),
                    },
                ]);
            }
        }
    }
    md.push_str(&headline.section("sledgescale ÷ fifo, short class"));
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
    for p in &points {
        t.row(vec![
            p.workload.clone(),
            p.policy.clone(),
            format!("{:.2}", p.load),
            rps(p.point.offered_rps),
            rps(p.point.throughput_rps),
            us(p.short_p99_us),
            us(p.short_p99_slowdown),
            us(p.long_p99_us),
            us(p.p99_slowdown),
            pct(p.point.deadline_miss_rate),
            p.point.errors.to_string(),
        ]);
    }
    md.push_str(&t.section("All points"));
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
            "workloads_as_run": labels,
            "points": points,
        }),
    ))
}
