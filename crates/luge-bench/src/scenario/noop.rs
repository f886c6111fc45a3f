//! `luge bench noop`: no-op latency and throughput vs offered load, 1 worker, both protocols,
//! each thread layout and wait mode asked for, beside the floor of each protocol (UDP echo, bare
//! hyper) measured the same way. A series stops after two consecutive saturated points (> 1 %
//! failures, an infinite p99, or < 90 % of the offered rate answered).

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::WaitMode;
use luge_sim::{Chart, Series};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point};
use super::node::{
    Baseline, BaselineKind, LugeNode, NodeSpec, Pinning, ServerId, noop_only, process_program,
};
use super::output::{Results, Table, rps, us};
use super::{Protocol, ScenarioOptions};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::target::Target;

const FULL_RATES: [f64; 13] = [
    1_000.0, 2_000.0, 5_000.0, 10_000.0, 20_000.0, 30_000.0, 40_000.0, 60_000.0, 80_000.0,
    100_000.0, 130_000.0, 160_000.0, 200_000.0,
];
const QUICK_RATES: [f64; 2] = [1_000.0, 4_000.0];

#[derive(Debug, Clone, Serialize)]
struct SeriesResult {
    #[serde(flatten)]
    id: ServerId,
    points: Vec<Point>,
}

impl SeriesResult {
    fn name(&self) -> String {
        let id = &self.id;
        if id.server == "luge" {
            format!("luge {} {}", id.layout, id.wait)
        } else if id.wait == "-" {
            id.server.clone()
        } else {
            format!("{} {}", id.server, id.wait)
        }
    }

    /// The series' points as (offered k requests/s, `y`).
    fn plotted(&self, y: impl Fn(&Point) -> f64) -> Series {
        Series {
            name: self.name(),
            points: self.points.iter().map(|p| (p.offered_rps / 1000.0, y(p))).collect(),
        }
    }

    /// The highest offered rate that was not saturated.
    fn max_unsaturated(&self) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| !p.saturated())
            .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }

    /// The highest offered rate whose p99 stayed within 1 ms (≤ 0.1 % failures).
    fn max_within_1ms(&self) -> Option<&Point> {
        self.points
            .iter()
            .filter(|p| p.meets(1_000.0))
            .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }
}

fn sweep(
    label: &str,
    target: Target,
    mapping: Mapping,
    opts: &ScenarioOptions,
) -> Result<Vec<Point>, BenchError> {
    let (rates, step): (&[f64], Duration) = if opts.quick {
        (&QUICK_RATES, Duration::from_millis(100))
    } else {
        (&FULL_RATES, Duration::from_secs(1))
    };
    let driver = Driver::fixed(target, mapping, opts.seed);
    driver.closed(
        1,
        if opts.quick { Duration::from_millis(20) } else { Duration::from_millis(300) },
    )?;
    let mut points = Vec::new();
    let mut saturated_in_a_row = 0;
    for &rate in rates {
        let p = Point::of(&driver.open(rate, step)?);
        opts.say(format!(
            "noop: {label}: offered {} /s → {} /s, p50 {} µs, p99 {} µs, errors {}",
            rps(p.offered_rps),
            rps(p.throughput_rps),
            us(p.p50_us),
            us(p.p99_us),
            p.errors
        ));
        saturated_in_a_row = if p.saturated() { saturated_in_a_row + 1 } else { 0 };
        points.push(p);
        if saturated_in_a_row >= 2 {
            break;
        }
    }
    Ok(points)
}

pub(crate) fn run(
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let noop = noop_only(&opts.functions);
    let mut all: Vec<SeriesResult> = Vec::new();
    let program = process_program(None);
    for &protocol in &opts.protocols {
        for &wait in &opts.modes {
            for &layout in &opts.layouts {
                let spec = NodeSpec::of(opts, wait, layout, protocol, pin);
                let label = format!("{} {}", protocol.name(), spec.describe());
                let points = LugeNode::with(&spec, &noop, |node| {
                    let mapping = node.noop()?;
                    sweep(&label, node.target(protocol)?, mapping, opts)
                })?;
                all.push(SeriesResult { id: ServerId::luge(protocol, wait, layout), points });
            }
            // The floor: the echo per wait mode; bare hyper has no wait mode (once).
            let floor = match protocol {
                Protocol::Udp => Some((BaselineKind::UdpEcho, Some(wait))),
                Protocol::Http if wait == opts.first_mode() => Some((BaselineKind::BareHttp, None)),
                Protocol::Http => None,
            };
            if let Some((kind, w)) = floor {
                let label = format!("{} {}", protocol.name(), kind.name());
                let spin = w == Some(WaitMode::Spin);
                let points = Baseline::with(kind, protocol, spin, &program, pin, |server| {
                    sweep(&label, server.target()?, Baseline::noop(), opts)
                })?;
                all.push(SeriesResult { id: ServerId::baseline(kind, protocol, w), points });
            }
        }
    }

    for &protocol in &opts.protocols {
        let of: Vec<&SeriesResult> =
            all.iter().filter(|s| s.id.protocol == protocol.name()).collect();
        for (metric, get) in [
            ("p50", (|p: &Point| p.p50_us) as fn(&Point) -> Option<f64>),
            ("p99", |p: &Point| p.p99_us),
        ] {
            let series: Vec<Series> =
                of.iter().map(|s| s.plotted(|p| get(p).unwrap_or(f64::INFINITY))).collect();
            let chart = Chart {
                log_y: true,
                ..Chart::new(
                    format!("no-op {metric} latency vs load, {}", protocol.name()),
                    "offered load (k requests/s)",
                    format!("{metric} latency (µs)"),
                )
            };
            out.plot(&format!("{}-{metric}.svg", protocol.name()), &chart, &series)?;
        }
        let series: Vec<Series> =
            of.iter().map(|s| s.plotted(|p| p.throughput_rps / 1000.0)).collect();
        let chart = Chart::new(
            format!("no-op throughput vs load, {}", protocol.name()),
            "offered load (k requests/s)",
            "throughput (k requests/s)",
        );
        out.plot(&format!("{}-throughput.svg", protocol.name()), &chart, &series)?;
    }

    let mut md = String::new();
    let _ = writeln!(
        md,
        "No-op over loopback at fixed Poisson rates, 1 s each; a series stops after two \
         saturated points (> 1 % failures, infinite p99, or < 90 % of the offered rate \
         answered). The floors (UDP echo, bare hyper) are measured the same way. Latency runs \
         from the intended send time (a late client counts).\n"
    );
    let mut t = Table::new(&ServerId::columns(&[
        ">highest rate with p99 ≤ 1 ms /s",
        ">its p50 µs",
        ">its p99 µs",
        ">highest unsaturated rate /s",
        ">its p99 µs",
    ]));
    for s in &all {
        let best = s.max_unsaturated();
        let within = s.max_within_1ms();
        t.row(s.id.row(vec![
            within.map_or("none".into(), |p| rps(p.offered_rps)),
            within.map_or("-".into(), |p| us(p.p50_us)),
            within.map_or("-".into(), |p| us(p.p99_us)),
            best.map_or("none".into(), |p| rps(p.offered_rps)),
            best.map_or("-".into(), |p| us(p.p99_us)),
        ]));
    }
    md.push_str(&t.section("Capacity"));
    let mut t = Table::new(&ServerId::columns(&[
        ">offered /s",
        ">throughput /s",
        ">p50 µs",
        ">p99 µs",
        ">p99.9 µs",
        ">errors",
        "saturated",
    ]));
    for s in &all {
        for p in &s.points {
            t.row(s.id.row(vec![
                rps(p.offered_rps),
                rps(p.throughput_rps),
                us(p.p50_us),
                us(p.p99_us),
                us(p.p999_us),
                p.errors.to_string(),
                if p.saturated() { "yes".into() } else { "".into() },
            ]));
        }
    }
    md.push_str(&t.section("Sweep"));
    Ok((md, json!({ "series": all })))
}
