//! `luge bench tracing`: what exporting request spans costs. Closed-loop no-op calls over HTTP
//! against a node with no span export (`luge serve` as shipped), and against the same node
//! exporting over OTLP/HTTP to a collector on loopback (the bare hyper baseline stands in for
//! one: it reads each export and answers 200) with 1 % of requests sampled (the default) and
//! with every request sampled. Conditions interleave trial by trial (off, 1 %, all, off, …), a
//! fresh node each; medians and the ratios to "off" are reported.

use std::fmt::Write as _;
use std::time::Duration;

use luge_server::Tracing;
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median, median_ratio};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, ratio, rps, us};
use super::{Protocol, ScenarioOptions, TracingOptions, layout_name, wait_name};
use crate::baseline::{BareHttpConfig, BareHttpServer};
use crate::error::BenchError;

/// Requests in flight (as wrk's `-c 16`).
const OUTSTANDING: usize = 16;

/// The conditions: a label and the share of requests sampled (`None`: no export).
const CONDITIONS: [(&str, Option<f64>); 3] =
    [("off", None), ("sample_1pct", Some(0.01)), ("sample_all", Some(1.0))];

#[derive(Debug, Clone, Serialize)]
struct Trial {
    condition: &'static str,
    sample: Option<f64>,
    point: Point,
    /// Export requests the collector received during the trial (spans arrive in batches).
    exports: u64,
}

pub(crate) fn run(
    t: &TracingOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let duration = opts.duration_or(t.duration, Duration::from_millis(300), Duration::from_secs(3));
    let trials = t.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let collector = BareHttpServer::start(BareHttpConfig::default())
        .map_err(|e| BenchError::Scenario(format!("cannot start the collector: {e}")))?;
    let endpoint = format!("http://{}", collector.local_addr());
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let mut results = Vec::new();
    for trial in 0..trials {
        for (condition, sample) in CONDITIONS {
            let tracing = match sample {
                Some(s) => Some(Tracing::otlp(&endpoint, s).map_err(|e| {
                    BenchError::Scenario(format!("cannot build the exporter: {e}"))
                })?),
                None => None,
            };
            let spec = NodeSpec {
                tracing: tracing.clone(),
                ..NodeSpec::of(opts, wait, layout, Protocol::Http, pin)
            };
            let before = collector.stats().requests;
            let point = LugeNode::with(&spec, &opts.functions, |node| {
                let driver = Driver::fixed(node.target(Protocol::Http)?, node.noop()?, opts.seed);
                // Warm the node, the client's connections and the exporter.
                driver.closed(OUTSTANDING, duration.min(Duration::from_millis(500)))?;
                Ok(Point::of(&driver.closed(OUTSTANDING, duration)?))
            })?;
            // The node flushed its spans as it stopped; stop the exporter's thread too.
            if let Some(t) = tracing {
                t.shutdown();
            }
            let exports = collector.stats().requests - before;
            opts.say(format!(
                "tracing: trial {} {condition}: {} /s, p50 {} µs, p99 {} µs, errors {}, {exports} \
                 exports",
                trial + 1,
                rps(point.throughput_rps),
                us(point.p50_us),
                us(point.p99_us),
                point.errors,
            ));
            results.push(Trial { condition, sample, point, exports });
        }
    }
    collector.shutdown();

    let of = |c: &str| results.iter().filter(|t| t.condition == c).collect::<Vec<_>>();
    let off = of("off");
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{OUTSTANDING} closed-loop callers call the no-op over HTTP ({:.1} s per trial) on a node \
         configured as `luge serve` ships it (1 worker, {} layout, {} wait), without span export \
         and exporting over OTLP/HTTP to a loopback collector with 1 % and with every request \
         sampled. {trials} interleaved trials, a fresh node each; medians.\n",
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        "export",
        ">throughput /s",
        ">÷ off",
        ">p50 µs",
        ">p99 µs",
        ">p99 ÷ off",
        ">errors",
        ">exports",
    ]);
    let mut ratios = serde_json::Map::new();
    for (condition, _) in CONDITIONS {
        let group = of(condition);
        let tput = median_ratio(&group, &off, |t| Some(t.point.throughput_rps));
        let p99 = median_ratio(&group, &off, |t| t.point.p99_us);
        table.row(vec![
            condition.into(),
            rps(median(&group, |t| Some(t.point.throughput_rps)).unwrap_or(0.0)),
            ratio(tput),
            us(median(&group, |t| t.point.p50_us)),
            us(median(&group, |t| t.point.p99_us)),
            ratio(p99),
            median(&group, |t| Some(t.point.errors as f64)).map_or("-".into(), |v| v.to_string()),
            median(&group, |t| Some(t.exports as f64)).map_or("-".into(), |v| v.to_string()),
        ]);
        ratios.insert(condition.into(), json!({ "throughput": tput, "p99": p99 }));
    }
    let _ = writeln!(md, "{}", table.render());
    Ok((
        md,
        json!({
            "outstanding": OUTSTANDING,
            "duration_s": duration.as_secs_f64(),
            "trials": results,
            "ratios": ratios,
        }),
    ))
}
