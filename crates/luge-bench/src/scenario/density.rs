//! `luge bench density`: N byte-distinct copies of a no-op module registered through the
//! runtime API, driven at one fixed rate spread evenly over all of them (request *i* calls copy
//! *i* mod N): p99 and resident memory per function.
//!
//! Each copy is the no-op with its own data segment (`luge-density-copy-<i>`), so every module
//! is distinct — its own hash, compilation, code and copy-on-write memory image, as real
//! functions are; the scenario asserts that all N are byte-distinct. Modules are compiled in
//! memory (no AoT cache), on two threads. Memory is `VmRSS` of this process
//! (`/proc/self/status`) right before and right after registration, and after the load; per
//! function = (after − before) ÷ N, after one warm-up copy has paid the one-time costs of a first
//! registration. The load generator runs in the same process, so only the differences mean
//! anything.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use luge_runtime::FunctionConfig;
use luge_sim::{Chart, Series};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, rps, us};
use super::{DensityOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::target::FunctionRef;

/// The no-op module of copy `i`: byte-distinct by its data segment.
pub(crate) fn copy_module(i: usize) -> Vec<u8> {
    format!(
        "(module (memory (export \"memory\") 1) \
         (data (i32.const 0) \"luge-density-copy-{i:08}\") \
         (func (export \"_start\")))"
    )
    .into_bytes()
}

/// `VmRSS` of this process in KiB.
pub(crate) fn rss_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Debug, Clone, Serialize)]
struct DensityPoint {
    copies: usize,
    register_s: f64,
    rss_before_kib: Option<u64>,
    rss_registered_kib: Option<u64>,
    rss_after_load_kib: Option<u64>,
    rss_per_function_kib: Option<f64>,
    point: Point,
}

fn register_all(node: &LugeNode, copies: usize) -> Result<Vec<FunctionRef>, BenchError> {
    let runtime = node.runtime().clone();
    let threads = 2.min(copies.max(1));
    let mut refs: Vec<Option<FunctionRef>> = vec![None; copies];
    let results: Vec<Result<Vec<(usize, FunctionRef)>, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let runtime = &runtime;
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in (t..copies).step_by(threads) {
                        let name = format!("density-{i:05}");
                        let mut config = FunctionConfig::new(&name);
                        config.expected_execution = Some(Duration::from_micros(10));
                        let f = runtime.register(config, &copy_module(i)).map_err(|e| {
                            BenchError::Scenario(format!("cannot register {name}: {e}"))
                        })?;
                        mine.push((i, FunctionRef::new(f.id.0, format!("/{name}"))));
                    }
                    Ok(mine)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Scenario("a registration thread panicked".into()))
                })
            })
            .collect()
    });
    for r in results {
        for (i, f) in r? {
            refs[i] = Some(f);
        }
    }
    refs.into_iter()
        .map(|r| r.ok_or_else(|| BenchError::Scenario("a copy was not registered".into())))
        .collect()
}

pub(crate) fn run(
    d: &DensityOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let copies = opts.given_or(&d.copies, vec![1, 100], vec![1, 100, 1_000, 10_000]);
    if copies.iter().any(|&n| n == 0 || n > 60_000) {
        return Err(BenchError::Config("copies must be in 1..=60000".into()));
    }
    let rate = d.rate.unwrap_or(if opts.quick { 500.0 } else { 2_000.0 });
    let duration = opts.duration_or(d.duration, Duration::from_millis(200), Duration::from_secs(5));
    let (wait, layout) = (opts.first_mode(), opts.first_layout());

    // The premise: every module is byte-distinct.
    let largest = copies.iter().copied().max().unwrap_or(1);
    let distinct: HashSet<Vec<u8>> = (0..largest).map(copy_module).collect();
    if distinct.len() != largest {
        return Err(BenchError::Scenario(format!(
            "only {} of {largest} density modules are distinct",
            distinct.len()
        )));
    }
    drop(distinct);

    let mut points = Vec::new();
    for &n in &copies {
        // No AoT cache: every copy is compiled in memory.
        let spec =
            NodeSpec { cache_dir: None, pin, ..NodeSpec::new(wait, layout, &[Protocol::Udp]) };
        let no_functions: [NodeFunction; 0] = [];
        let point = LugeNode::with(&spec, &no_functions, |node| {
            // One-time costs of the first registration (lazy engine state) are not per function.
            let warm = NodeFunction {
                config: FunctionConfig::new("density-warm-up"),
                route: "/density-warm-up".into(),
                module: copy_module(usize::MAX),
            };
            node.runtime()
                .register(warm.config.clone(), &warm.module)
                .map_err(|e| BenchError::Scenario(format!("cannot register the warm-up: {e}")))?;
            let before = rss_kib();
            let t0 = Instant::now();
            let refs = register_all(node, n)?;
            let register_s = t0.elapsed().as_secs_f64();
            let registered = rss_kib();
            let ids: HashSet<u32> = refs.iter().map(|f| f.rpc_id).collect();
            if ids.len() != n {
                return Err(BenchError::Scenario(format!("{n} copies got {} ids", ids.len())));
            }
            opts.say(format!(
                "density: {n} copies registered in {register_s:.2} s, RSS {} → {} KiB",
                before.map_or("?".into(), |v| v.to_string()),
                registered.map_or("?".into(), |v| v.to_string())
            ));
            let mut driver = Driver::fixed(
                node.target(Protocol::Udp)?,
                Mapping::Spread { functions: refs, payload: Vec::new() },
                opts.seed,
            );
            driver.timeout = Duration::from_secs(2);
            let point = Point::of(&driver.open(rate, duration)?);
            let after = rss_kib();
            opts.say(format!(
                "density: {n} copies at {} /s: p50 {} µs, p99 {} µs, errors {}",
                rps(point.offered_rps),
                us(point.p50_us),
                us(point.p99_us),
                point.errors
            ));
            Ok(DensityPoint {
                copies: n,
                register_s,
                rss_before_kib: before,
                rss_registered_kib: registered,
                rss_after_load_kib: after,
                rss_per_function_kib: match (before, registered) {
                    (Some(b), Some(a)) => Some((a as f64 - b as f64) / n as f64),
                    _ => None,
                },
                point,
            })
        })?;
        points.push(point);
    }

    // Each point's y against log10(copies).
    let series = |name: &str, y: &dyn Fn(&DensityPoint) -> f64| Series {
        name: name.into(),
        points: points.iter().map(|p| ((p.copies as f64).log10(), y(p))).collect(),
    };
    let x_label = "log10(distinct functions)";
    let title = format!("no-op latency vs distinct functions at {} /s", rps(rate));
    out.plot(
        "p99.svg",
        &Chart { log_y: true, ..Chart::new(title, x_label, "latency (µs)") },
        &[
            series("p50", &|p| p.point.p50_us.unwrap_or(f64::INFINITY)),
            series("p99", &|p| p.point.p99_us.unwrap_or(f64::INFINITY)),
        ],
    )?;
    out.plot(
        "rss-per-function.svg",
        &Chart::new("resident memory per registered function", x_label, "KiB per function"),
        &[series("RSS / function", &|p| p.rss_per_function_kib.unwrap_or(f64::NAN))],
    )?;

    let mut md = String::new();
    let _ = writeln!(
        md,
        "N byte-distinct no-op modules (own data segment each; distinctness asserted), \
         registered through the runtime API (compiled in memory, 2 threads), then Poisson \
         arrivals at {} /s for {:.1} s over UDP-RPC, request i → copy i mod N. 1 worker, {} \
         layout, {} wait. RSS is this process's VmRSS (the load generator shares it: only \
         differences count).\n",
        rps(rate),
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let base_p99 = points.first().and_then(|p| p.point.p99_us);
    let mut t = Table::new(&[
        ">copies",
        ">register s",
        ">ms / function",
        ">RSS before MiB",
        ">RSS registered MiB",
        ">KiB / function",
        ">RSS after load MiB",
        ">p50 µs",
        ">p99 µs",
        ">p99 ÷ first",
        ">errors",
    ]);
    let mib = |k: Option<u64>| k.map_or("?".into(), |k| format!("{:.1}", k as f64 / 1024.0));
    for p in &points {
        t.row(vec![
            p.copies.to_string(),
            format!("{:.2}", p.register_s),
            format!("{:.2}", 1e3 * p.register_s / p.copies as f64),
            mib(p.rss_before_kib),
            mib(p.rss_registered_kib),
            p.rss_per_function_kib.map_or("?".into(), |k| format!("{k:.1}")),
            mib(p.rss_after_load_kib),
            us(p.point.p50_us),
            us(p.point.p99_us),
            match (p.point.p99_us, base_p99) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
                _ => "-".into(),
            },
            p.point.errors.to_string(),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    Ok((md, json!({ "rate_rps": rate, "duration_s": duration.as_secs_f64(), "points": points })))
}
