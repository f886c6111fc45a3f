//! `luge bench edge-rt`: Edge-RT's figures on the real runtime — Fig. 11 (bimodal chains at
//! rising utilisation) in `edge_rt_fig11`, Fig. 6a and 6b (the Δbatch and Δtimer sweeps) in
//! `edge_rt_sweep`, and here §VI-D, Fig. 14: well-behaved requests (5 ms
//! of `spin`, a 500 ms deadline, 80 % of the worker) beside k infinite-loop tasks per worker. In
//! the paper a malicious task is "simply [an] infinite loop": one task that never ends, so one
//! core's worth of demand. Here each is a function of its own whose every request loops until
//! the CPU budget ends it (1 s by default), activated once per budget on average (Poisson, 500 ms
//! deadline), so that each asks for one worker's worth too. Three ways to treat a request that
//! can no longer meet its deadline, each on a fresh node per point:
//! - `demote`: the loops' functions say `on_overrun = "demote"` (Edge-RT §IV-C): past its
//!   deadline a loop runs on in the best-effort lane, on spare worker time only, until its CPU
//!   budget ends it;
//! - `kill`: Luge's default: the loop yields and is answered late at its deadline, and its
//!   function's later requests are refused (probed in the lane now and then);
//! - `edf`: the papers' setting (admission off, nothing refused or shed): EDF without demotion,
//!   where a loop keeps its deadline's rank until its budget ends it.
//!
//! The well-behaved requests' share of deadlines met per k and treatment, in interleaved trials
//! (medians); the loops' own misses are not counted, as in the paper. Each point first runs both
//! loads for a warm-up that is not measured: a loop's first activation outranks later
//! well-behaved requests by EDF until its deadline, once per loop, as in Edge-RT, where a
//! malicious task is demoted at its first miss and stays demoted; the figure is the steady state.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::{FunctionConfig, Limits, Overrun};
use serde::Serialize;
use serde_json::json;

use super::edge_rt_sweep::Knob;
use super::isolation::{HostileRun, beside, hostile_driver};
use super::measure::{Driver, Point, calibrate_once, median};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, us};
use super::overload::parse_spec;
use super::policies::spin_function;
use super::{
    EdgeRtOptions, Protocol, ScenarioOptions, edge_rt_fig11, edge_rt_sweep, layout_name, wait_name,
};
use crate::calibrate::Calibration;
use crate::error::BenchError;
use crate::plan::Mapping;

/// The infinite loop every hog task calls.
const LOOP: &str = include_str!("../../../../functions/test/loop.wat");
/// The well-behaved requests: 5 ms (the `fixed` 10 µs × 500) with a 500 ms deadline.
const GOOD_SPEC: &str = "fixed,scale=500,deadline=500ms";
/// Their utilisation of the worker (Edge-RT §VI-D: 80 %), and their execution (s).
const GOOD_LOAD: f64 = 0.8;
const GOOD_EXECUTION_S: f64 = 0.005;
/// A hog task's deadline.
const HOG_DEADLINE: Duration = Duration::from_millis(500);

/// A hog task's activations per second: one per CPU budget, so that it asks for one worker's
/// worth, as an infinite loop does (Edge-RT §VI-D). (Before 2026-11-28: 10 per second — the
/// paper's well-behaved clients' period — i.e. ten workers' worth per loop.)
fn hog_rate() -> f64 {
    1.0 / Limits::default().max_execution.as_secs_f64()
}

/// How a request that can no longer meet its deadline is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Treatment {
    Demote,
    Kill,
    Edf,
}

impl Treatment {
    const ALL: [Treatment; 3] = [Treatment::Demote, Treatment::Kill, Treatment::Edf];

    fn name(self) -> &'static str {
        match self {
            Treatment::Demote => "demote",
            Treatment::Kill => "kill",
            Treatment::Edf => "edf",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Trial {
    hogs_per_worker: usize,
    treatment: Treatment,
    /// The well-behaved requests' run.
    good: Point,
    /// Their share answered within their deadline.
    good_deadlines_met: f64,
    /// Their failures by kind.
    good_errors: std::collections::BTreeMap<String, u64>,
    /// The loops' run (`None` with k = 0).
    hogs: Option<HostileRun>,
    /// Requests the node demoted to its best-effort lane.
    demoted: u64,
}

/// `k` infinite-loop functions, each its own module, treated as `treatment` says.
fn hogs(k: usize, treatment: Treatment) -> Vec<NodeFunction> {
    (0..k)
        .map(|i| {
            let name = format!("hog-{i}");
            let mut config = FunctionConfig::new(&name);
            config.relative_deadline = HOG_DEADLINE;
            if treatment == Treatment::Demote {
                config.on_overrun = Overrun::Demote;
            }
            NodeFunction {
                config,
                module: format!("{LOOP}\n;; hog {i}\n").into_bytes(),
                route: format!("/{name}"),
            }
        })
        .collect()
}

/// One point: a fresh node, the warm-up, then both loads side by side for `duration`.
fn point(
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    (k, treatment): (usize, Treatment),
    (warm, duration): (Duration, Duration),
    calibration: &mut Option<Calibration>,
    seed: u64,
) -> Result<Trial, BenchError> {
    let spin = spin_function(&opts.functions, &[])?;
    let hogs = hogs(k, treatment);
    let mut functions = vec![spin];
    functions.extend(hogs.iter().cloned());
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spec = NodeSpec {
        papers_admission: treatment == Treatment::Edf,
        ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin)
    };
    LugeNode::with(&spec, &functions, |node| {
        let target = node.target(Protocol::Udp)?;
        let spin = node.function("spin")?;
        // Past the loops' budget and the lane's expiry; `edf` leaves requests unanswered for
        // longer than that (its backlog of loops), which only costs the wait.
        let timeout = Duration::from_secs(if opts.quick { 5 } else { 15 });
        let cal = calibrate_once(calibration, &target, &spin, timeout, opts, "edge-rt")?;
        let good = Driver {
            target: target.clone(),
            mapping: Mapping::Spin(spin),
            workload: parse_spec(GOOD_SPEC, seed)?,
            timeout,
            calibration: Some(cal),
            window: 4096,
            keep_samples: false,
        };
        let good_rate = GOOD_LOAD / GOOD_EXECUTION_S;
        let bad = if k == 0 {
            None
        } else {
            let mut d = hostile_driver(node, target, &hogs, seed + 1_000)?;
            let hog_spec = format!("fixed,deadline={}ms", HOG_DEADLINE.as_millis());
            d.workload = parse_spec(&hog_spec, seed + 1_000)?;
            d.timeout = timeout;
            d.window = 8192;
            Some(d)
        };
        let bad = bad.as_ref().map(|d| (d, hog_rate() * k as f64));
        let demoted = || node.runtime().group_stats().iter().map(|g| g.demoted).sum::<u64>();
        beside((&good, good_rate), bad, warm)?;
        // Demotions of the measured run only, not of the warm-up's.
        let before = demoted();
        let (good_run, bad_run) = beside((&good, good_rate), bad, duration)?;
        let point = Point::of(&good_run);
        let demoted = demoted().saturating_sub(before);
        Ok(Trial {
            hogs_per_worker: k,
            treatment,
            good_deadlines_met: 1.0 - point.deadline_miss_rate,
            good_errors: good_run.summary.errors_by_kind.clone(),
            good: point,
            hogs: bad_run.as_ref().map(HostileRun::of),
            demoted,
        })
    })
}

/// The figures of Edge-RT this scenario runs (6b: the Δtimer sweep, also named 6; 6a: the
/// Δbatch sweep).
const FIGURES: [&str; 4] = ["14", "11", "6b", "6a"];

pub(crate) fn run(
    o: &EdgeRtOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let figures: Vec<&str> = if o.figures.is_empty() {
        FIGURES.to_vec()
    } else {
        o.figures.iter().map(|f| if f == "6" { "6b" } else { f.as_str() }).collect()
    };
    if let Some(f) = figures.iter().find(|f| !FIGURES.contains(f)) {
        return Err(BenchError::Scenario(format!(
            "edge-rt runs Fig. 14, 11, 6b (or 6) and 6a, not Fig. {f}"
        )));
    }
    let duration =
        opts.duration_or(o.duration, Duration::from_millis(1_000), Duration::from_secs(10));
    let trials = o.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    // `spin`'s (Fig. 14) and `spin_relay`'s per class (the chains' stages of Fig. 11, 6a, 6b),
    // each calibrated on itself at the execution it is asked for.
    let (mut calibration, mut relay_calibration) = (None, Vec::new());
    let mut md = String::new();
    let mut results = serde_json::Map::new();
    for figure in figures {
        let load = o.loads.first().copied().unwrap_or(0.9);
        let (section, part) = match figure {
            "14" => fig14(o, opts, pin, (duration, trials), &mut calibration)?,
            "6a" => {
                let ms = Duration::from_millis;
                let windows = opts.given_or(
                    &o.batch_windows,
                    vec![ms(0), ms(8)],
                    vec![ms(0), ms(1), ms(4), ms(8), ms(16)],
                );
                let sweep = (load, &windows[..]);
                edge_rt_sweep::run(
                    Knob::Batch,
                    opts,
                    pin,
                    sweep,
                    (duration, trials),
                    &mut relay_calibration,
                )?
            }
            "11" => {
                let loads = opts.given_or(&o.loads, vec![0.9], vec![0.6, 0.7, 0.8, 0.9, 1.0]);
                edge_rt_fig11::run(opts, pin, &loads, (duration, trials), &mut relay_calibration)?
            }
            _ => {
                let us = Duration::from_micros;
                let intervals = opts.given_or(
                    &o.notify_intervals,
                    vec![us(0), us(250)],
                    vec![us(0), us(50), us(250), us(500), us(1000)],
                );
                let sweep = (load, &intervals[..]);
                edge_rt_sweep::run(
                    Knob::Timer,
                    opts,
                    pin,
                    sweep,
                    (duration, trials),
                    &mut relay_calibration,
                )?
            }
        };
        let _ = writeln!(md, "## Fig. {figure}\n\n{section}");
        results.insert(format!("fig{figure}"), part);
    }
    Ok((md, serde_json::Value::Object(results)))
}

/// Fig. 14: well-behaved requests beside k infinite loops per worker.
fn fig14(
    o: &EdgeRtOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    (duration, trials): (Duration, usize),
    calibration: &mut Option<Calibration>,
) -> Result<(String, serde_json::Value), BenchError> {
    let counts = opts.given_or(&o.hogs, vec![0, 2], vec![0, 1, 2, 4]);
    let warm = if opts.quick { Duration::from_millis(300) } else { Duration::from_secs(2) };
    let mut results: Vec<Trial> = Vec::new();
    for trial in 0..trials {
        for &k in &counts {
            for treatment in Treatment::ALL {
                let seed = opts.seed + trial as u64;
                let t = point(opts, pin, (k, treatment), (warm, duration), calibration, seed)?;
                opts.say(format!(
                    "edge-rt: trial {} k={k} {}: well-behaved deadlines met {:.2} %, p99 {} µs, \
                     errors {:?}; demoted {}; loops {}",
                    trial + 1,
                    treatment.name(),
                    100.0 * t.good_deadlines_met,
                    us(t.good.p99_us),
                    t.good_errors,
                    t.demoted,
                    t.hogs.as_ref().map_or("-".into(), |h| format!("{:?}", h.outcomes)),
                ));
                results.push(t);
            }
        }
    }

    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let budget = Limits::default().max_execution.as_secs_f64();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Edge-RT §VI-D, Fig. 14 on the runtime: well-behaved requests (5 ms of spin, 500 ms \
         deadline, {:.0} % of the worker, Poisson) over UDP-RPC beside k infinite-loop tasks per \
         worker (each its own function whose requests loop until their {budget:.1} s CPU budget \
         ends them, one per budget on average: one worker's worth each; 500 ms deadline); \
         {:.1} s measured after {:.1} s of warm-up per point, a fresh node per point. 1 worker, \
         {} layout, {} wait; `edf` = the papers' setting (admission off). {trials} interleaved \
         trials; medians of the well-behaved requests' share of deadlines met (the loops' own \
         misses are not counted, as in the paper).\n",
        100.0 * GOOD_LOAD,
        duration.as_secs_f64(),
        warm.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut columns = vec![">k per worker".to_owned()];
    for t in Treatment::ALL {
        columns.push(format!(">{} met", t.name()));
        columns.push(format!(">{} p99 µs", t.name()));
    }
    let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
    let mut table = Table::new(&columns);
    let mut met = serde_json::Map::new();
    for &k in &counts {
        let mut row = vec![k.to_string()];
        let mut by = serde_json::Map::new();
        for t in Treatment::ALL {
            let group: Vec<&Trial> =
                results.iter().filter(|r| r.hogs_per_worker == k && r.treatment == t).collect();
            let m = median(&group, |r| Some(r.good_deadlines_met));
            by.insert(t.name().into(), json!(m));
            row.push(m.map_or("-".into(), |v| format!("{:.2} %", 100.0 * v)));
            row.push(us(median(&group, |r| r.good.p99_us)));
        }
        met.insert(k.to_string(), serde_json::Value::Object(by));
        table.row(row);
    }
    let _ = writeln!(md, "{}", table.render());
    let top = counts.iter().copied().max().unwrap_or(0);
    let demote_top = met
        .get(&top.to_string())
        .and_then(|m| m.get("demote"))
        .and_then(serde_json::Value::as_f64)
        .map_or("-".into(), |v| format!("{:.2} %", 100.0 * v));
    let _ = writeln!(
        md,
        "At k = {top}: `demote` meets {demote_top} of the well-behaved deadlines (goal ≥ 99 % at \
         k = 4; Linux CFS 39 %, Edge-RT Fig. 14)."
    );
    Ok((
        md,
        json!({
            "good_workload": GOOD_SPEC,
            "good_load": GOOD_LOAD,
            "hog_rate_rps_per_task": hog_rate(),
            "hog_deadline_ms": HOG_DEADLINE.as_millis() as u64,
            "hogs_per_worker": counts,
            "duration_s": duration.as_secs_f64(),
            "warm_up_s": warm.as_secs_f64(),
            "trials": results,
            "good_deadlines_met": met,
        }),
    ))
}
