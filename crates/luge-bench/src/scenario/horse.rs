//! `luge bench horse`: HORSE (§2 Table 1, §3) on the real runtime — what the uLL lane and ready
//! sandboxes do for ultra-short functions, alone and beside long ones at 0.9 of the worker.
//!
//! An ultra-short function — the no-op, or `spin` at 5 µs or 20 µs of guest work, declared
//! `class = "ull"` — is called over UDP-RPC at a fixed Poisson rate, alone and then beside a
//! second load generator that keeps the worker busy with 2 ms `spin` requests (at 0.9 of its
//! capacity by default), each on a fresh node per condition:
//! - `off`: no uLL lane (`ull_lane = false`): every request is scheduled by deadline alone;
//! - `lane`: the lane without ready sandboxes (`ready_sandboxes = 0`);
//! - `lane+ready`: both, as `luge serve` ships.
//!
//! Per point: the short function's latency (client, p50/p99), its readiness as HORSE §2 defines
//! it — from the datagram's receipt to its first guest instruction, as the node reports it on
//! every answer (`docs/protocol.md` §1.6) — as a median and as a share of the whole trigger (the
//! node's receipt to answer), and, beside the long load, the long requests answered per second.
//! Each trial also drives the UDP echo baseline at the same rate, reading its socket as the node
//! does: its readiness (the kernel's receipt to its handler, with no guest to start) is the floor
//! of any server's on this socket path, so the summary can say how much of Luge's is Luge's.
//! Trials are interleaved (each trial runs every condition once); medians.

use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, calibrate_once, median, median_ratio};
use super::node::{
    Baseline, BaselineKind, LugeNode, NodeFunction, NodeSpec, Pinning, process_program,
};
use super::order::in_trial_order;
use super::output::{Results, Table, ratio, rps, us};
use super::{HorseOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::calibrate::Calibration;
use crate::error::BenchError;
use crate::plan::Mapping;

/// The short function: the no-op, or `spin` declared uLL at a guest work of so many ns.
const SHORT: [(&str, Option<u64>); 3] =
    [("no-op", None), ("5 µs", Some(5_000)), ("20 µs", Some(20_000))];
/// The declared-uLL copy of `spin`.
const ULL_SPIN: &str = "spin-ull";
/// The long requests' guest work.
const LONG: Duration = Duration::from_millis(2);
/// The floor's label, as function and condition.
const FLOOR: &str = "echo floor";

/// One node configuration compared: (label, uLL lane, ready sandboxes per function).
const CONDITIONS: [(&str, bool, usize); 3] =
    [("off", false, 0), ("lane", true, 0), ("lane+ready", true, 2)];

#[derive(Debug, Clone, Serialize)]
struct Trial {
    function: &'static str,
    condition: &'static str,
    /// `alone` or `beside`.
    background: &'static str,
    trial: usize,
    /// The short function's run (its readiness too: `readiness_p50_us`, `readiness_share`).
    short: Point,
    /// The long load's run (`beside` only).
    long: Option<Point>,
}

pub(crate) fn run(
    h: &HorseOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let rate = h.rate.unwrap_or(if opts.quick { 500.0 } else { 2_000.0 });
    let load = h.load.unwrap_or(0.9);
    let duration = opts.duration_or(h.duration, Duration::from_millis(300), Duration::from_secs(3));
    let trials = h.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    // Quick: the no-op and the 5 µs `spin-ull` (so CI runs the calibrated, declared path too).
    let shorts: &[(&str, Option<u64>)] = if opts.quick { &SHORT[..2] } else { &SHORT };
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let functions = node_functions(opts)?;
    let mut calibration = None;
    let mut results = Vec::new();
    for trial in 0..trials {
        let floor = measure_floor(opts, pin, rate, duration, trial)?;
        opts.say(format!(
            "horse: trial {} echo floor: readiness {} µs, p50 {} µs",
            trial + 1,
            us(floor.short.readiness_p50_us),
            us(floor.short.p50_us),
        ));
        results.push(floor);
        for &(function, work) in shorts {
            for &(condition, ull_lane, ready_sandboxes) in in_trial_order(trial, &CONDITIONS) {
                let spec = NodeSpec {
                    ull_lane,
                    ready_sandboxes,
                    ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin)
                };
                let point = Point3 { function, work, condition, trial };
                let got = LugeNode::with(&spec, &functions, |node| {
                    measure(node, opts, point, (rate, load, duration), &mut calibration)
                })?;
                for t in &got {
                    opts.say(format!(
                        "horse: trial {} {function} {condition} {}: p50 {} µs, p99 {} µs, \
                         readiness {} µs ({}), errors {}{}",
                        trial + 1,
                        t.background,
                        us(t.short.p50_us),
                        us(t.short.p99_us),
                        us(t.short.readiness_p50_us),
                        share(t.short.readiness_share),
                        t.short.errors,
                        t.long.as_ref().map_or(String::new(), |l| format!(
                            "; long answered {} /s",
                            rps(l.throughput_rps)
                        )),
                    ));
                }
                results.extend(got);
            }
        }
    }
    Ok(summarise(&results, shorts, (rate, load, duration, trials), (wait, layout)))
}

/// The floor: the UDP echo baseline (Luge's front end with nothing behind it) at the short
/// function's rate, reading its socket as the node's first reader does: spinning when the node
/// spins on its socket (an idle inline worker in spin mode reads its own), else asleep. It
/// reports, as readiness, the time from the kernel's receipt of the datagram to its handler.
fn measure_floor(
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    rate: f64,
    duration: Duration,
    trial: usize,
) -> Result<Trial, BenchError> {
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let inline = layout.resolve(1, 1) == luge_runtime::Layout::Inline;
    let spec = NodeSpec::of(opts, wait, layout, Protocol::Udp, pin);
    let spin = spec.udp_busy_poll || (wait == luge_runtime::WaitMode::Spin && inline);
    let program = process_program(None);
    let point = Baseline::with(BaselineKind::UdpEcho, Protocol::Udp, spin, &program, pin, |b| {
        let driver = Driver::fixed(b.target()?, Baseline::noop(), opts.seed.wrapping_add(7));
        driver.open(rate, duration.min(Duration::from_millis(500)))?;
        Ok(Point::of(&driver.open(rate, duration)?))
    })?;
    Ok(Trial {
        function: FLOOR,
        condition: FLOOR,
        background: "alone",
        trial,
        short: point,
        long: None,
    })
}

/// Which point of the sweep.
#[derive(Clone, Copy)]
struct Point3 {
    function: &'static str,
    work: Option<u64>,
    condition: &'static str,
    trial: usize,
}

/// The node's functions: the scenario's own (the no-op declared uLL) and a declared-uLL copy
/// of `spin`; the long load calls `spin` itself.
fn node_functions(opts: &ScenarioOptions) -> Result<Vec<NodeFunction>, BenchError> {
    let mut functions = opts.functions.clone();
    let missing =
        |name: &str| BenchError::Scenario(format!("the node's functions have no `{name}`"));
    let noop =
        functions.iter_mut().find(|f| f.config.name == "noop").ok_or_else(|| missing("noop"))?;
    noop.config.ull = true;
    let spin = functions.iter().find(|f| f.config.name == "spin").ok_or_else(|| missing("spin"))?;
    let mut ull = spin.clone();
    ull.config.name = ULL_SPIN.into();
    ull.config.ull = true;
    ull.route = format!("/{ULL_SPIN}");
    functions.push(ull);
    Ok(functions)
}

/// One condition on its fresh node: the short function alone, then beside the long load.
fn measure(
    node: &LugeNode,
    opts: &ScenarioOptions,
    p: Point3,
    (rate, load, duration): (f64, f64, Duration),
    calibration: &mut Option<Calibration>,
) -> Result<Vec<Trial>, BenchError> {
    let target = node.target(Protocol::Udp)?;
    let spin = node.function("spin")?;
    let timeout = Duration::from_secs(if opts.quick { 3 } else { 5 });
    let cal = calibrate_once(calibration, &target, &spin, timeout, opts, "horse")?;
    let seed = opts.seed.wrapping_add(p.trial as u64);
    let short = match p.work {
        None => Driver::fixed(target.clone(), node.noop()?, seed),
        Some(ns) => {
            // Guest work only: the sandbox's fixed cost is what the lane and ready sandboxes
            // are about, so it is not part of the function's size.
            let k = (ns as f64 / cal.ns_per_iteration).round().max(1.0) as u64;
            let function = node.function(ULL_SPIN)?;
            let mapping = Mapping::Fixed { function, payload: k.to_string().into_bytes() };
            // `spin`'s copy trusts the expected execution a request declares: the true one.
            Driver::fixed_for(target.clone(), mapping, seed, Duration::from_nanos(ns))?
        }
    };
    let k_long = (LONG.as_nanos() as f64 / cal.ns_per_iteration).round() as u64;
    // Declared as the 2 ms it runs: declared as `fixed`'s 10 µs, `spin` (which trusts it) would
    // be scheduled as a 10 µs request, and with the lane on be taken for a uLL one.
    let long = Driver::fixed_for(
        target,
        Mapping::Fixed { function: spin, payload: k_long.to_string().into_bytes() },
        seed.wrapping_add(1),
        LONG,
    )?;
    let long_rate = load / LONG.as_secs_f64();
    // Warm-up: the estimates settle and, with them, the lane's and the admission's view.
    short.open(rate, duration.min(Duration::from_millis(500)))?;
    let mut out = Vec::new();
    for background in ["alone", "beside"] {
        let (short_run, long_run) = if background == "alone" {
            (short.open(rate, duration)?, None)
        } else {
            std::thread::scope(|s| {
                let long_run = s.spawn(|| long.open(long_rate, duration));
                let short_run = short.open(rate, duration);
                let long_run = long_run.join().unwrap_or_else(|_| {
                    Err(BenchError::Scenario("the long load's generator panicked".into()))
                });
                Ok::<_, BenchError>((short_run?, Some(long_run?)))
            })?
        };
        out.push(Trial {
            function: p.function,
            condition: p.condition,
            background,
            trial: p.trial,
            short: Point::of(&short_run),
            long: long_run.as_ref().map(Point::of),
        });
    }
    Ok(out)
}

fn share(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", 100.0 * v))
}

/// The summary's section and the report's part.
fn summarise(
    results: &[Trial],
    shorts: &[(&'static str, Option<u64>)],
    (rate, load, duration, trials): (f64, f64, Duration, usize),
    (wait, layout): (luge_runtime::WaitMode, luge_runtime::Layout),
) -> (String, serde_json::Value) {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "HORSE (§2, §4.1.3) on the runtime: an ultra-short function declared `class = \"ull\"` — the \
         no-op, or `spin` at 5 µs or 20 µs of guest work — over UDP-RPC at {} /s (Poisson, \
         100 ms deadline, {:.1} s per point), alone and beside a second load generator keeping \
         the worker {:.0} % busy with {} ms `spin` requests (same deadline); a fresh node per \
         condition: `off` (no uLL lane), `lane` (lane, no ready sandboxes), `lane+ready` (as \
         `luge serve` ships). 1 worker, {} layout, {} wait. Readiness: the node's own \
         measurement from the datagram's receipt to the first guest instruction, on every \
         answer (p50, and share of the node's receipt to answer: HORSE §2, Table 1). {trials} \
         interleaved trials; medians.\n",
        rps(rate),
        duration.as_secs_f64(),
        100.0 * load,
        LONG.as_millis(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        "function",
        "condition",
        ">alone p50 µs",
        ">alone p99 µs",
        ">alone readiness p50 µs",
        ">share",
        ">beside p50 µs",
        ">beside p99 µs",
        ">beside readiness p50 µs",
        ">share",
        ">long answered /s",
    ]);
    let of = |f: &str, c: &str, b: &str| -> Vec<&Trial> {
        results
            .iter()
            .filter(|t| t.function == f && t.condition == c && t.background == b)
            .collect()
    };
    let floor = of(FLOOR, FLOOR, "alone");
    let floor_readiness = median(&floor, |t| t.short.readiness_p50_us);
    table.row(vec![
        FLOOR.into(),
        "-".into(),
        us(median(&floor, |t| t.short.p50_us)),
        us(median(&floor, |t| t.short.p99_us)),
        us(floor_readiness),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
    ]);
    let mut ratios = serde_json::Map::new();
    for &(function, _) in shorts {
        for (condition, _, _) in CONDITIONS {
            let (alone, beside) =
                (of(function, condition, "alone"), of(function, condition, "beside"));
            table.row(vec![
                function.into(),
                condition.into(),
                us(median(&alone, |t| t.short.p50_us)),
                us(median(&alone, |t| t.short.p99_us)),
                us(median(&alone, |t| t.short.readiness_p50_us)),
                share(median(&alone, |t| t.short.readiness_share)),
                us(median(&beside, |t| t.short.p50_us)),
                us(median(&beside, |t| t.short.p99_us)),
                us(median(&beside, |t| t.short.readiness_p50_us)),
                share(median(&beside, |t| t.short.readiness_share)),
                median(&beside, |t| t.long.as_ref().map(|l| l.throughput_rps))
                    .map_or("-".into(), rps),
            ]);
        }
        let shipped = "lane+ready";
        let r = |over: (&str, &str), base: (&str, &str), f: &dyn Fn(&Trial) -> Option<f64>| {
            median_ratio(&of(function, over.0, over.1), &of(function, base.0, base.1), f)
        };
        let readiness = |t: &Trial| t.short.readiness_p50_us;
        let p99 = |t: &Trial| t.short.p99_us;
        let long = |t: &Trial| t.long.as_ref().map(|l| l.throughput_rps);
        let figures = [
            (
                "readiness_off_over_shipped_alone",
                r(("off", "alone"), (shipped, "alone"), &readiness),
            ),
            (
                "readiness_off_over_shipped_beside",
                r(("off", "beside"), (shipped, "beside"), &readiness),
            ),
            (
                "readiness_lane_over_shipped_alone",
                r(("lane", "alone"), (shipped, "alone"), &readiness),
            ),
            ("p99_beside_over_alone_shipped", r((shipped, "beside"), (shipped, "alone"), &p99)),
            ("p99_beside_over_alone_off", r(("off", "beside"), ("off", "alone"), &p99)),
            ("long_throughput_shipped_over_off", r((shipped, "beside"), ("off", "beside"), &long)),
        ];
        // Read from the values, not from their JSON (where ∞ and "no figure" are both null).
        let get = |k: &str| figures.iter().find(|(key, _)| *key == k).and_then(|(_, v)| *v);
        let numbers: serde_json::Map<String, serde_json::Value> =
            figures.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
        let _ = writeln!(
            md,
            "- {function}: readiness `off` ÷ `lane+ready` {} alone, {} beside the long load \
             (`lane` ÷ `lane+ready` alone: {}, what ready sandboxes save); p99 beside ÷ alone {} \
             with `lane+ready` (goal ≤ 2×), {} with `off`; long requests answered with \
             `lane+ready` ÷ `off` {} (goal: a drop < 10 %).",
            ratio(get("readiness_off_over_shipped_alone")),
            ratio(get("readiness_off_over_shipped_beside")),
            ratio(get("readiness_lane_over_shipped_alone")),
            ratio(get("p99_beside_over_alone_shipped")),
            ratio(get("p99_beside_over_alone_off")),
            ratio(get("long_throughput_shipped_over_off")),
        );
        ratios.insert(function.into(), serde_json::Value::Object(numbers));
        let shipped_alone = median(&of(function, shipped, "alone"), readiness);
        if let (Some(luge), Some(floor)) = (shipped_alone, floor_readiness) {
            let _ = writeln!(
                md,
                "  Its readiness alone with `lane+ready`, {} µs, is {} µs above the echo \
                 floor's {} µs (the kernel's delivery, the read and the parse, which any server \
                 on this socket path pays): Luge's own part.",
                us(Some(luge)),
                us(Some(luge - floor)),
                us(Some(floor)),
            );
        }
    }
    let _ = writeln!(md, "\n{}", table.render());
    let part = json!({
        "floor_readiness_p50_us": floor_readiness,
        "rate_rps": rate,
        "long_load": load,
        "long_ms": LONG.as_secs_f64() * 1e3,
        "duration_s": duration.as_secs_f64(),
        "trials": results,
        "ratios": ratios,
    });
    (md, part)
}
