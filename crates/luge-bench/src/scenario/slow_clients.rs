//! `luge bench slow-clients`: a well-behaved client's no-op latency and throughput over HTTP
//! while slow clients ("slowloris", [`crate::slow`]) hold thousands of connections open, against
//! the same node with none, in interleaved trials (quiet, attacked, quiet, attacked, …; medians
//! reported). The node is configured as `luge serve` ships its HTTP front end (connection caps,
//! header timeout, minimum body rate at their defaults).
//!
//! The slow clients run in a child process (`luge bench hold-slow-connections`), each source
//! address holding fewer connections than the per-client cap, so every one of them is admitted
//! and holds a slot until its head times out — then it reconnects. The child shares the client's
//! CPU with the load generator; the node's worker has the other.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median, median_ratio};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, ratio, rps, us};
use super::{Protocol, ScenarioOptions, SlowClientsOptions, layout_name, wait_name};
use crate::error::BenchError;
use crate::slow::Holder;

/// Connections each slow source address holds: below the node's per-client cap (1 024).
const PER_ADDRESS: usize = 1_000;
/// How long the slow clients may take to open all their connections.
const OPEN_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Serialize)]
struct Trial {
    /// `quiet` or `slow`.
    condition: &'static str,
    /// Slow connections held when the measurement started and when it ended.
    slow_open_start: usize,
    slow_open_end: usize,
    /// Connections open at the node when the measurement started.
    node_connections: usize,
    /// Connections the node refused (at once, 503) during the measurement.
    refused: u64,
    point: Point,
}

pub(crate) fn run(
    s: &SlowClientsOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let connections = s.connections.unwrap_or(if opts.quick { 300 } else { 10_000 });
    let rate = s.rate.unwrap_or(if opts.quick { 500.0 } else { 2_000.0 });
    let duration = opts.duration_or(s.duration, Duration::from_millis(300), Duration::from_secs(3));
    let trials = s.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let holder: PathBuf = s.holder.clone().ok_or_else(|| {
        BenchError::Config("slow-clients needs the program that runs the slow clients".into())
    })?;
    if connections == 0 || connections > 15_000 {
        return Err(BenchError::Config("slow connections must be in 1..=15000".into()));
    }
    // The node holds a descriptor per slow connection.
    let _ = luge_server::net::raise_fd_limit();
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spec = NodeSpec::of(opts, wait, layout, Protocol::Http, pin);
    let results = LugeNode::with(&spec, &opts.functions, |node| {
        let server =
            node.http().ok_or_else(|| BenchError::Scenario("the node serves no HTTP".into()))?;
        let target = node.target(Protocol::Http)?;
        let addr =
            node.http_addr().ok_or_else(|| BenchError::Scenario("no HTTP address".into()))?;
        let driver = Driver::fixed(target, node.noop()?, opts.seed);
        // Warm the node and the client's connections.
        driver.open(rate, duration.min(Duration::from_secs(1)))?;
        let mut results = Vec::new();
        for trial in 0..trials {
            for slow in [false, true] {
                let holder = if slow {
                    Some(Holder::start(&holder, addr, connections, PER_ADDRESS, OPEN_WAIT)?)
                } else {
                    // The previous attack's connections are gone before a quiet trial.
                    let started = Instant::now();
                    while server.connections() > 64 && started.elapsed() < OPEN_WAIT {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    None
                };
                let slow_open_start = holder.as_ref().map_or(0, Holder::open);
                let node_connections = server.connections();
                let refused = server.refused_connections();
                let point = Point::of(&driver.open(rate, duration)?);
                let t = Trial {
                    condition: if slow { "slow" } else { "quiet" },
                    slow_open_start,
                    slow_open_end: holder.as_ref().map_or(0, Holder::open),
                    node_connections,
                    refused: server.refused_connections() - refused,
                    point,
                };
                opts.say(format!(
                    "slow-clients: trial {} {}: {} slow connections, node holds {}, p50 {} µs, \
                     p99 {} µs, {} /s, errors {}",
                    trial + 1,
                    t.condition,
                    t.slow_open_start,
                    t.node_connections,
                    us(t.point.p50_us),
                    us(t.point.p99_us),
                    rps(t.point.throughput_rps),
                    t.point.errors
                ));
                results.push(t);
                drop(holder);
            }
        }
        Ok(results)
    })?;

    let of = |c: &str| results.iter().filter(|t| t.condition == c).collect::<Vec<_>>();
    let (quiet, slow) = (of("quiet"), of("slow"));
    let mut md = String::new();
    let _ = writeln!(
        md,
        "A client calls the no-op over HTTP (Poisson arrivals, {} /s, {:.1} s per trial) on a node \
         configured as `luge serve` ships it (1 worker, {} layout, {} wait), with no other \
         clients (quiet) and while {connections} slow connections — {PER_ADDRESS} per source \
         address, each sending half a request head and a header line every 5 s, reconnecting \
         when the node closes it — are open (slow). {trials} interleaved trials each; medians.\n",
        rps(rate),
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut t = Table::new(&[
        "condition",
        ">slow connections",
        ">node connections",
        ">p50 µs",
        ">p99 µs",
        ">throughput /s",
        ">errors",
        ">refused connections",
    ]);
    for (name, group) in [("quiet", &quiet), ("slow", &slow)] {
        t.row(vec![
            name.into(),
            median(group, |t| Some(t.slow_open_start as f64)).map_or("-".into(), |v| v.to_string()),
            median(group, |t| Some(t.node_connections as f64))
                .map_or("-".into(), |v| v.to_string()),
            us(median(group, |t| t.point.p50_us)),
            us(median(group, |t| t.point.p99_us)),
            rps(median(group, |t| Some(t.point.throughput_rps)).unwrap_or(0.0)),
            median(group, |t| Some(t.point.errors as f64)).map_or("-".into(), |v| v.to_string()),
            median(group, |t| Some(t.refused as f64)).map_or("-".into(), |v| v.to_string()),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let r = |f: &dyn Fn(&Trial) -> Option<f64>| median_ratio(&slow, &quiet, f);
    let (p50, p99, tput) =
        (r(&|t| t.point.p50_us), r(&|t| t.point.p99_us), r(&|t| Some(t.point.throughput_rps)));
    let _ = writeln!(
        md,
        "slow ÷ quiet: p50 {}, p99 {}, throughput {}",
        ratio(p50),
        ratio(p99),
        ratio(tput)
    );
    Ok((
        md,
        json!({
            "connections": connections,
            "per_address": PER_ADDRESS,
            "rate_rps": rate,
            "duration_s": duration.as_secs_f64(),
            "trials": results,
            "ratios": { "p50": p50, "p99": p99, "throughput": tput },
        }),
    ))
}
