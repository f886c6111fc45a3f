//! `luge bench isolation`: do runaway tenants delay a well-behaved one? A well-behaved tenant
//! calls the no-op open-loop at a fixed rate with a 10 ms deadline, beside N = 0, 1, 4 and 16
//! hostile tenants, each with its own copy of one hostile function — an infinite loop, a loop
//! reading the clock, memory growth to the cap, unbounded recursion, 64 MiB of output — called
//! open-loop at a fixed rate per tenant. The well-behaved tenant's share of deadlines met and its
//! p99 at each N ÷ at N = 0, in interleaved trials (medians); every hostile answer by kind.
//!
//! Every point starts a fresh node, so each hostile function is met cold, as a new tenant's
//! would be: its execution estimate has not yet learnt that it never finishes, and its first
//! requests are admitted and run. That is the worst case for the well-behaved tenant; a node that
//! has seen a runaway refuses its later calls as infeasible at once (the estimate exceeds the
//! deadline). The bar is Edge-RT §VI-D, Fig. 14 (Linux CFS meets 39 % of well-behaved deadlines
//! with four CPU hogs per core).

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::{FunctionConfig, TenantConfig};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median, median_ratio};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, ratio, rps, us};
use super::{IsolationOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::target::Target;

/// The hostile kinds, in the order tenants take them (tenant k runs kind k mod 5).
const HOSTILE: [(&str, &str); 5] = [
    ("loop", include_str!("../../../../functions/test/loop.wat")),
    ("clockspin", include_str!("../../../../functions/test/clockspin.wat")),
    ("membomb", include_str!("../../../../functions/test/membomb.wat")),
    ("stackoverflow", include_str!("../../../../functions/test/stackoverflow.wat")),
    ("bigout", include_str!("../../../../functions/test/bigout.wat")),
];

/// The well-behaved tenant's relative deadline.
const GOOD_DEADLINE: &str = "10ms";
/// Hostile tenants' ids start here (the well-behaved one is tenant 0, as every built-in).
const FIRST_HOSTILE_TENANT: u32 = 100;
/// How long a client waits for an answer: past the hostile functions' 1 s CPU budget.
const TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Serialize)]
struct Trial {
    /// Hostile tenants beside the well-behaved one.
    hostile: usize,
    /// The well-behaved tenant's run.
    good: Point,
    /// Its share of requests answered within their deadline.
    good_deadlines_met: f64,
    /// Its failures by kind.
    good_errors: std::collections::BTreeMap<String, u64>,
    /// The hostile tenants' run (`None` with N = 0).
    bad: Option<HostileRun>,
}

/// What a hostile load got back.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HostileRun {
    pub point: Point,
    /// Answers by outcome kind (`ok` for successes).
    pub outcomes: std::collections::BTreeMap<String, u64>,
    /// Requests sent that got no answer within the client's timeout.
    pub unanswered: u64,
}

impl HostileRun {
    pub(crate) fn of(r: &Report) -> Self {
        let s = &r.summary;
        let mut outcomes = s.errors_by_kind.clone();
        if s.completed > 0 {
            outcomes.insert("ok".into(), s.completed);
        }
        let unanswered = outcomes.get("timeout").copied().unwrap_or(0);
        Self { point: Point::of(r), outcomes, unanswered }
    }
}

/// The hostile functions of `n` tenants: tenant k gets its own copy of kind k mod 5.
pub(crate) fn hostile_functions(n: usize) -> (Vec<NodeFunction>, Vec<TenantConfig>) {
    let mut functions = Vec::new();
    let mut tenants = Vec::new();
    for k in 0..n {
        let (kind, wat) = HOSTILE[k % HOSTILE.len()];
        let tenant = FIRST_HOSTILE_TENANT + k as u32;
        let name = format!("hostile-{k}-{kind}");
        let mut config = FunctionConfig::new(&name);
        config.tenant = tenant;
        functions.push(NodeFunction {
            config,
            // A distinct module per tenant (a trailing custom-free comment keeps it WAT and
            // valid) so that no two tenants share a compiled module or its estimate.
            module: format!("{wat}\n;; tenant {tenant}\n").into_bytes(),
            route: format!("/{name}"),
        });
        tenants.push(TenantConfig::new(tenant, format!("hostile-{k}")));
    }
    (functions, tenants)
}

/// A driver calling `hostile` (served by `node`) in turn at `target`, waiting for answers past
/// their execution budget.
pub(crate) fn hostile_driver(
    node: &LugeNode,
    target: Target,
    hostile: &[NodeFunction],
    seed: u64,
) -> Result<Driver, BenchError> {
    let functions =
        hostile.iter().map(|f| node.function(&f.config.name)).collect::<Result<Vec<_>, _>>()?;
    let mut d = Driver::fixed(target, Mapping::Spread { functions, payload: Vec::new() }, seed);
    d.timeout = TIMEOUT;
    Ok(d)
}

/// Runs the well-behaved driver at its rate for `duration` and, at the same time on a thread of
/// its own, the hostile one at its rate, if any: both reports.
pub(crate) fn beside(
    (good, good_rate): (&Driver, f64),
    bad: Option<(&Driver, f64)>,
    duration: Duration,
) -> Result<(Report, Option<Report>), BenchError> {
    std::thread::scope(|s| {
        let bad_run = bad.map(|(d, rate)| s.spawn(move || d.open(rate, duration)));
        let good_run = good.open(good_rate, duration);
        let bad_run = match bad_run {
            None => None,
            Some(h) => Some(h.join().unwrap_or_else(|_| {
                Err(BenchError::Scenario("the hostile load generator panicked".into()))
            })?),
        };
        Ok((good_run?, bad_run))
    })
}

pub(crate) fn run(
    o: &IsolationOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let good_rate = o.rate.unwrap_or(if opts.quick { 300.0 } else { 1_000.0 });
    let hostile_rate = o.hostile_rate.unwrap_or(if opts.quick { 10.0 } else { 20.0 });
    let counts = opts.given_or(&o.hostile, vec![0, 4], vec![0, 1, 4, 16]);
    let duration = opts.duration_or(o.duration, Duration::from_millis(500), Duration::from_secs(5));
    let trials = o.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let good_workload: luge_workload::WorkloadSpec = format!("fixed,deadline={GOOD_DEADLINE}")
        .parse()
        .map_err(|e| BenchError::Scenario(format!("the well-behaved workload: {e}")))?;

    let mut results = Vec::new();
    for trial in 0..trials {
        for &n in &counts {
            let (hostile, tenants) = hostile_functions(n);
            let mut functions = opts.functions.clone();
            functions.extend(hostile.iter().cloned());
            let spec = NodeSpec { tenants, ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin) };
            let t = LugeNode::with(&spec, &functions, |node| {
                let target = node.target(Protocol::Udp)?;
                let seed = opts.seed + trial as u64;
                let mut good = Driver::fixed(target.clone(), node.noop()?, seed);
                good.workload = good_workload.clone().with_seed(seed);
                // Warm the no-op's sandbox path and estimate before measuring.
                good.open(good_rate, duration.min(Duration::from_millis(300)))?;
                let bad = if n == 0 {
                    None
                } else {
                    Some(hostile_driver(node, target, &hostile, opts.seed + 1_000 + trial as u64)?)
                };
                let bad = bad.as_ref().map(|d| (d, hostile_rate * n as f64));
                let (good_run, bad_run) = beside((&good, good_rate), bad, duration)?;
                let point = Point::of(&good_run);
                Ok(Trial {
                    hostile: n,
                    good_deadlines_met: 1.0 - point.deadline_miss_rate,
                    good_errors: good_run.summary.errors_by_kind.clone(),
                    good: point,
                    bad: bad_run.as_ref().map(HostileRun::of),
                })
            })?;
            opts.say(format!(
                "isolation: trial {} N={n}: good p50 {} µs, p99 {} µs, deadlines met {:.2} %, \
                 errors {:?}; hostile {}",
                trial + 1,
                us(t.good.p50_us),
                us(t.good.p99_us),
                100.0 * t.good_deadlines_met,
                t.good_errors,
                t.bad.as_ref().map_or("-".into(), |b| format!("{:?}", b.outcomes)),
            ));
            results.push(t);
        }
    }

    let of = |n: usize| results.iter().filter(|t| t.hostile == n).collect::<Vec<_>>();
    let base = of(0);
    let mut md = String::new();
    let _ = writeln!(
        md,
        "A well-behaved tenant calls the no-op over UDP-RPC at {} /s (Poisson, {GOOD_DEADLINE} \
         deadline, {:.1} s per point) beside N hostile tenants, each calling its own copy of \
         one of loop, clockspin, membomb, stackoverflow, bigout (in turn) at {} /s; a fresh \
         node per point (hostile functions met cold). 1 worker, {} layout, {} wait, default \
         limits (1 s CPU budget, 100 ms deadline); {trials} interleaved trials; medians.\n",
        rps(good_rate),
        duration.as_secs_f64(),
        rps(hostile_rate),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        ">N hostile",
        ">p50 µs",
        ">p99 µs",
        ">p99 ÷ N=0",
        ">deadlines met",
        ">errors",
        "hostile answers (last trial)",
    ]);
    let mut ratios = serde_json::Map::new();
    let mut met = serde_json::Map::new();
    let top = counts.iter().copied().max().unwrap_or(0);
    // The ratio at the most hostile tenants, as computed (in JSON ∞ and "none" are both null).
    let mut top_ratio = None;
    for &n in &counts {
        let group = of(n);
        let r = median_ratio(&group, &base, |t| t.good.p99_us);
        if n == top {
            top_ratio = r;
        }
        let m = median(&group, |t| Some(t.good_deadlines_met));
        ratios.insert(n.to_string(), json!(r));
        met.insert(n.to_string(), json!(m));
        table.row(vec![
            n.to_string(),
            us(median(&group, |t| t.good.p50_us)),
            us(median(&group, |t| t.good.p99_us)),
            ratio(r),
            m.map_or("-".into(), |v| format!("{:.2} %", 100.0 * v)),
            median(&group, |t| Some(t.good.errors as f64)).map_or("-".into(), |v| v.to_string()),
            group.last().and_then(|t| t.bad.as_ref()).map_or("-".into(), |b| {
                b.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
            }),
        ]);
    }
    let _ = writeln!(md, "{}", table.render());
    let _ = writeln!(
        md,
        "At N = {top}: p99 ÷ N = 0 {} (goal ≤ 2.00×), deadlines met {} (goal ≥ 99.9 %)",
        ratio(top_ratio),
        met.get(&top.to_string())
            .and_then(serde_json::Value::as_f64)
            .map_or("-".into(), |v| format!("{:.2} %", 100.0 * v)),
    );
    Ok((
        md,
        json!({
            "good_rate_rps": good_rate,
            "good_deadline": GOOD_DEADLINE,
            "hostile_rate_rps_per_tenant": hostile_rate,
            "hostile_counts": counts,
            "duration_s": duration.as_secs_f64(),
            "trials": results,
            "p99_ratio_to_none": ratios,
            "deadlines_met": met,
        }),
    ))
}
