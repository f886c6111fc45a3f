//! `luge bench path`: what the request path costs over UDP-RPC, as `luge serve` ships it, against
//! the UDP echo floor (Luge's front end with nothing behind it) — HORSE's point (§2) that for
//! ultra-short functions the path to the sandbox, not the sandbox, is the cost.
//!
//! Servers, each fresh per trial, trials interleaved (each trial runs every server once):
//! - `luge`: the node `luge serve` starts with its defaults (one worker, so the inline layout,
//!   where the idle worker reads its socket itself: run-to-completion);
//! - `luge threads`: the same with a dispatcher thread (`layout = "threads"`): the hand-off
//!   path, for reference;
//! - `udp-echo`: the floor.
//!
//! Per server and trial, against the no-op: one request in flight (p50, p99) and
//! `--outstanding` in flight (closed-loop throughput), each with the server threads' CPU time and
//! context switches per request (`usage`: the node's worker, dispatcher, UDP and ticker threads;
//! the echo's receive thread). The table gives medians and Luge ÷ echo ratios of the medians,
//! with the goals of issue #13: closed-loop throughput ≥ 0.8× the echo's, ≤ 8 µs of server CPU
//! per no-op, and p50 ≤ 1.5× the echo's in spin mode.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::{Layout, WaitMode};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median, median_ratio};
use super::node::{
    Baseline, BaselineKind, LugeNode, NodeSpec, Pinning, noop_only, process_program,
};
use super::order::in_trial_order;
use super::output::{Results, Table, ratio, rps, us};
use super::usage::Usage;
use super::{PathOptions, Protocol, ScenarioOptions, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::report::Report;
use crate::target::Target;

/// Thread-name prefixes of a Luge node's threads on the UDP path.
const LUGE_THREADS: [&str; 4] = ["luge-worker", "luge-dispatch", "luge-udp-recv", "luge-ticker"];
/// The echo baseline's thread.
const ECHO_THREADS: [&str; 1] = ["luge-echo-recv"];

/// The servers compared: label, and the Luge layout (`None`: the echo).
const SERVERS: [(&str, Option<Layout>); 3] =
    [("luge", Some(Layout::Auto)), ("luge threads", Some(Layout::Threads)), ("udp-echo", None)];

/// One closed-loop run with what the server's threads spent on it.
#[derive(Debug, Clone, Serialize)]
struct Run {
    #[serde(flatten)]
    point: Point,
    /// Server CPU per answered request, µs.
    cpu_us: Option<f64>,
    /// Server context switches per answered request.
    switches: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
struct Trial {
    server: &'static str,
    wait: String,
    trial: usize,
    /// One request in flight.
    single: Run,
    /// `outstanding` in flight.
    closed: Run,
}

/// A closed-loop run of `outstanding` for `duration`, with the usage of `threads`.
fn measured(
    driver: &Driver,
    outstanding: usize,
    duration: Duration,
    threads: &[&str],
) -> Result<Run, BenchError> {
    let before = Usage::of_threads(threads);
    let report: Report = driver.closed(outstanding, duration)?;
    let after = Usage::of_threads(threads);
    let point = Point::of(&report);
    let answered = report.summary.planned.saturating_sub(report.summary.errors);
    let per = match (before, after) {
        (Some(b), Some(a)) => a.per_request(&b, answered),
        _ => None,
    };
    Ok(Run { point, cpu_us: per.map(|p| p.0), switches: per.map(|p| p.1) })
}

/// Warm-up, then one and `outstanding` requests in flight against `target`.
fn measure(
    target: Target,
    mapping: Mapping,
    threads: &[&str],
    (outstanding, duration): (usize, Duration),
    opts: &ScenarioOptions,
) -> Result<(Run, Run), BenchError> {
    let driver = Driver::fixed(target, mapping, opts.seed);
    driver.closed(1, duration / 5)?;
    let single = measured(&driver, 1, duration, threads)?;
    let closed = measured(&driver, outstanding, duration, threads)?;
    Ok((single, closed))
}

pub(crate) fn run(
    p: &PathOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let duration = opts.duration_or(p.duration, Duration::from_millis(200), Duration::from_secs(2));
    let trials = p.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let outstanding = p.outstanding.max(1);
    let functions = noop_only(&opts.functions);
    let program = process_program(None);
    let mut results: Vec<Trial> = Vec::new();
    for trial in 0..trials {
        for &wait in &opts.modes {
            for &(server, layout) in in_trial_order(trial, &SERVERS) {
                let shape = (outstanding, duration);
                let (single, closed) = match layout {
                    Some(layout) => {
                        let spec = NodeSpec::of(opts, wait, layout, Protocol::Udp, pin);
                        LugeNode::with(&spec, &functions, |node| {
                            let target = node.target(Protocol::Udp)?;
                            measure(target, node.noop()?, &LUGE_THREADS, shape, opts)
                        })?
                    }
                    None => {
                        let spin = wait == WaitMode::Spin;
                        let kind = BaselineKind::UdpEcho;
                        Baseline::with(kind, Protocol::Udp, spin, &program, pin, |b| {
                            measure(b.target()?, Baseline::noop(), &ECHO_THREADS, shape, opts)
                        })?
                    }
                };
                opts.say(format!(
                    "path: trial {}/{trials} {server} ({} wait): 1 in flight p50 {} µs, {} µs \
                     CPU; {outstanding} in flight {} /s, {} µs CPU, {} switches per request",
                    trial + 1,
                    wait_name(wait),
                    us(single.point.p50_us),
                    us(single.cpu_us),
                    rps(closed.point.throughput_rps),
                    us(closed.cpu_us),
                    closed.switches.map_or("-".into(), |s| format!("{s:.2}")),
                ));
                results.push(Trial {
                    server,
                    wait: wait_name(wait).to_owned(),
                    trial,
                    single,
                    closed,
                });
            }
        }
    }
    let summary = render(&results, opts, outstanding);
    let report = json!({ "outstanding": outstanding, "trials": trials, "results": results });
    Ok((summary, report))
}

/// The table: medians per server and wait mode, and Luge ÷ echo.
fn render(results: &[Trial], opts: &ScenarioOptions, outstanding: usize) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "UDP-RPC no-op, 1 and {outstanding} requests in flight (closed loop); medians of the \
         trials. CPU and switches: the server's threads, per answered request.\n"
    );
    let mut table = Table::new(&[
        "wait",
        "server",
        "p50 (µs)",
        "p99 (µs)",
        "CPU/req, 1 (µs)",
        "closed loop (/s)",
        "CPU/req (µs)",
        "switches/req",
        "closed ÷ echo",
        "p50 ÷ echo",
    ]);
    for &wait in &opts.modes {
        let wait = wait_name(wait);
        let of = |server: &str| -> Vec<&Trial> {
            results.iter().filter(|t| t.server == server && t.wait == wait).collect()
        };
        let echo = of("udp-echo");
        for (server, _) in SERVERS {
            let trials = of(server);
            if trials.is_empty() {
                continue;
            }
            table.row(vec![
                wait.to_owned(),
                server.to_owned(),
                us(median(&trials, |t| t.single.point.p50_us)),
                us(median(&trials, |t| t.single.point.p99_us)),
                us(median(&trials, |t| t.single.cpu_us)),
                rps(median(&trials, |t| Some(t.closed.point.throughput_rps)).unwrap_or(0.0)),
                us(median(&trials, |t| t.closed.cpu_us)),
                median(&trials, |t| t.closed.switches).map_or("-".into(), |s| format!("{s:.2}")),
                ratio(median_ratio(&trials, &echo, |t| Some(t.closed.point.throughput_rps))),
                ratio(median_ratio(&trials, &echo, |t| t.single.point.p50_us)),
            ]);
        }
    }
    md.push_str(&table.render());
    let _ = writeln!(
        md,
        "\nGoals (issue #13, `luge` as shipped): closed loop ≥ 0.8× the echo's, ≤ 8 µs of \
         server CPU per no-op, p50 ≤ 1.5× the echo's in spin mode."
    );
    md
}
