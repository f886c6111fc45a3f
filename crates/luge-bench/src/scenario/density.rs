//! `luge bench density`: N byte-distinct copies of a no-op module registered through the
//! runtime API, driven at one fixed rate spread evenly over all of them (request *i* calls copy
//! *i* mod N): p99, the server's execution (at many copies, a first call's) and resident memory
//! per function, and p99 ÷ one copy's, as medians of interleaved trials (each trial runs every N
//! once, each on a fresh node) — with the copy-on-write memory image as shipped, or also with
//! the data copied in (`--memory-init cow,copy`).
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

use super::measure::median;
use super::measure::{Driver, Point};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, ratio_range, rps, spread, us};
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
    /// `cow` or `copy` (`memory_init`).
    memory_init: &'static str,
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

/// One number of copies over the trials: medians, and the p99 ÷ the same trial's first point.
#[derive(Debug, Clone, Serialize)]
struct DensityRow {
    copies: usize,
    memory_init: &'static str,
    register_s: Option<f64>,
    rss_per_function_kib: Option<f64>,
    p50_us: Option<f64>,
    /// The server's execution p50 (µs): at many copies, a first call's.
    execution_p50_us: Option<f64>,
    /// Median, minimum and maximum over the trials.
    p99_us: Option<(f64, f64, f64)>,
    p99_ratio: Option<(f64, f64, f64)>,
    errors: u64,
}

/// One point: `n` copies registered on a fresh node, then the load.
fn point(
    n: usize,
    opts: &ScenarioOptions,
    (pin, memory_init_cow): (Option<Pinning>, bool),
    (rate, duration): (f64, Duration),
) -> Result<DensityPoint, BenchError> {
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    // No AoT cache: every copy is compiled in memory.
    let spec = NodeSpec {
        cache_dir: None,
        pin,
        memory_init_cow,
        ..NodeSpec::new(wait, layout, &[Protocol::Udp])
    };
    let no_functions: [NodeFunction; 0] = [];
    LugeNode::with(&spec, &no_functions, |node| {
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
            memory_init: memory_init_name(memory_init_cow),
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
    })
}

/// `memory_init`'s manifest name.
fn memory_init_name(cow: bool) -> &'static str {
    if cow { "cow" } else { "copy" }
}

/// The rows of `trials` (each a point per number of copies, in the order of `copies`), all
/// with memory started as `memory_init` says.
fn rows(
    copies: &[usize],
    memory_init: &'static str,
    trials: &[Vec<DensityPoint>],
) -> Vec<DensityRow> {
    let all = |i: usize| trials.iter().filter_map(move |t| t.get(i));
    let finite = |v: Option<f64>| v.unwrap_or(f64::INFINITY);
    copies
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let points: Vec<&DensityPoint> = all(i).collect();
            let mut ratios: Vec<f64> = trials
                .iter()
                .filter_map(|t| {
                    let (p, first) = (t.get(i)?, t.first()?);
                    // A failed p99 is infinite: ∞ over the first point's; nothing when the
                    // first point failed (no base: not a 0× that would read as a goal met).
                    let base = finite(first.point.p99_us);
                    let r = finite(p.point.p99_us) / base;
                    (base.is_finite() && !r.is_nan()).then_some(r)
                })
                .collect();
            let mut p99: Vec<f64> = points.iter().map(|p| finite(p.point.p99_us)).collect();
            DensityRow {
                copies: n,
                memory_init,
                register_s: median(&points, |p| Some(p.register_s)),
                rss_per_function_kib: median(&points, |p| p.rss_per_function_kib),
                p50_us: median(&points, |p| p.point.p50_us),
                execution_p50_us: median(&points, |p| p.point.execution_p50_us),
                p99_us: spread(&mut p99),
                p99_ratio: spread(&mut ratios),
                errors: points.iter().map(|p| p.point.errors).sum(),
            }
        })
        .collect()
}

pub(crate) fn run(
    d: &DensityOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let mut copies = opts.given_or(&d.copies, vec![1, 100], vec![1, 100, 1_000, 10_000]);
    // Ascending: the ratio column divides by the fewest copies, whatever order was given.
    copies.sort_unstable();
    copies.dedup();
    if copies.iter().any(|&n| n == 0 || n > 60_000) {
        return Err(BenchError::Config("copies must be in 1..=60000".into()));
    }
    let rate = d.rate.unwrap_or(if opts.quick { 500.0 } else { 2_000.0 });
    let duration = opts.duration_or(d.duration, Duration::from_millis(200), Duration::from_secs(5));
    let trials = d.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
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

    // Interleaved: trial t runs every memory start and number of copies once, each on a fresh
    // node; runs[m][t] are trial t's points with memory start m.
    let modes: Vec<bool> =
        if d.memory_init_cow.is_empty() { vec![true] } else { d.memory_init_cow.clone() };
    let mut runs: Vec<Vec<Vec<DensityPoint>>> = vec![Vec::new(); modes.len()];
    for trial in 0..trials {
        if trials > 1 {
            opts.say(format!("density: trial {} of {trials}", trial + 1));
        }
        for (m, &cow) in modes.iter().enumerate() {
            let points = copies
                .iter()
                .map(|&n| point(n, opts, (pin, cow), (rate, duration)))
                .collect::<Result<Vec<_>, _>>()?;
            runs[m].push(points);
        }
    }
    let rows: Vec<DensityRow> = modes
        .iter()
        .zip(&runs)
        .flat_map(|(&cow, trials)| rows(&copies, memory_init_name(cow), trials))
        .collect();

    // Each row's median against log10(copies), a series per memory start.
    let series = |name: &str, y: &dyn Fn(&DensityRow) -> f64| -> Vec<Series> {
        modes
            .iter()
            .map(|&cow| {
                let memory = memory_init_name(cow);
                Series {
                    name: if modes.len() > 1 { format!("{name} ({memory})") } else { name.into() },
                    points: rows
                        .iter()
                        .filter(|r| r.memory_init == memory)
                        .map(|r| ((r.copies as f64).log10(), y(r)))
                        .collect(),
                }
            })
            .collect()
    };
    let x_label = "log10(distinct functions)";
    let title = format!("no-op latency vs distinct functions at {} /s", rps(rate));
    out.plot(
        "p99.svg",
        &Chart { log_y: true, ..Chart::new(title, x_label, "latency (µs)") },
        &[
            series("p50", &|r| r.p50_us.unwrap_or(f64::INFINITY)),
            series("p99", &|r| r.p99_us.map_or(f64::INFINITY, |s| s.0)),
        ]
        .concat(),
    )?;
    out.plot(
        "rss-per-function.svg",
        &Chart::new("resident memory per registered function", x_label, "KiB per function"),
        &series("RSS / function", &|r| r.rss_per_function_kib.unwrap_or(f64::NAN)),
    )?;

    let mut md = String::new();
    let _ = writeln!(
        md,
        "N byte-distinct no-op modules (own data segment each; distinctness asserted), \
         registered through the runtime API (compiled in memory, 2 threads), then Poisson \
         arrivals at {} /s for {:.1} s over UDP-RPC, request i → copy i mod N. 1 worker, {} \
         layout, {} wait. {trials} interleaved trials, each on fresh nodes: medians \
         [min–max]; p99 ÷ 1st is each trial's p99 ÷ that trial's first row of the same memory \
         start; execution is the server's (at many copies, a first call's: with `cow` a slot \
         takes the module's image, with `copy` the data is copied in). RSS is this \
         process's VmRSS (the load generator shares it: only differences count).\n",
        rps(rate),
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut t = Table::new(&[
        "memory",
        ">copies",
        ">ms / function",
        ">KiB / function",
        ">p50 µs",
        ">execution p50 µs",
        ">p99 µs",
        ">p99 ÷ first",
        ">errors",
    ]);
    let range_us = |s: Option<(f64, f64, f64)>| match s {
        Some((m, lo, hi)) if lo < hi => {
            format!("{} [{}–{}]", us(Some(m)), us(Some(lo)), us(Some(hi)))
        }
        Some((m, _, _)) => us(Some(m)),
        None => us(None),
    };
    for r in &rows {
        t.row(vec![
            r.memory_init.to_string(),
            r.copies.to_string(),
            r.register_s.map_or("?".into(), |s| format!("{:.2}", 1e3 * s / r.copies as f64)),
            r.rss_per_function_kib.map_or("?".into(), |k| format!("{k:.1}")),
            us(r.p50_us),
            us(r.execution_p50_us),
            range_us(r.p99_us),
            ratio_range(r.p99_ratio),
            r.errors.to_string(),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    let points: Vec<serde_json::Value> = runs
        .iter()
        .flat_map(|by_trial| by_trial.iter().enumerate())
        .flat_map(|(trial, points)| {
            points.iter().map(move |p| {
                let mut v = serde_json::to_value(p).unwrap_or_default();
                v["trial"] = json!(trial);
                v
            })
        })
        .collect();
    Ok((
        md,
        json!({
            "rate_rps": rate,
            "duration_s": duration.as_secs_f64(),
            "trials": trials,
            "points": points,
            "rows": rows,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(copies: usize, p99_us: Option<f64>) -> DensityPoint {
        DensityPoint {
            copies,
            memory_init: "cow",
            register_s: 0.001 * copies as f64,
            rss_before_kib: Some(1000),
            rss_registered_kib: Some(1000 + 24 * copies as u64),
            rss_after_load_kib: None,
            rss_per_function_kib: Some(24.0),
            point: Point {
                mode: "open".into(),
                window: 256,
                offered_rps: 2000.0,
                throughput_rps: 2000.0,
                goodput_rps: 2000.0,
                p50_us: Some(50.0),
                p99_us,
                p999_us: None,
                readiness_p50_us: None,
                readiness_share: None,
                execution_p50_us: Some(20.0),
                planned: 10,
                errors: u64::from(p99_us.is_none()),
                deadline_miss_rate: 0.0,
                send_lag_p99_us: None,
                notes: Vec::new(),
            },
        }
    }

    #[test]
    fn each_trials_ratio_is_to_its_own_first_point() {
        let trials = vec![
            vec![at(1, Some(100.0)), at(10, Some(150.0))],
            vec![at(1, Some(200.0)), at(10, Some(200.0))],
            vec![at(1, Some(100.0)), at(10, Some(400.0))],
        ];
        let summary = rows(&[1, 10], "cow", &trials);
        assert_eq!(summary[0].p99_ratio, Some((1.0, 1.0, 1.0)));
        assert_eq!(summary[0].p99_us, Some((100.0, 100.0, 200.0)));
        // 1.5×, 1.0×, 4.0×: the median of the trials' own ratios, not a ratio of medians (2.0×).
        assert_eq!(summary[1].p99_ratio, Some((1.5, 1.0, 4.0)));
        assert_eq!(summary[1].register_s, Some(0.01));
        // A trial whose p99 is infinite counts as an infinite ratio at its rank.
        let failed = vec![
            vec![at(1, Some(100.0)), at(10, None)],
            vec![at(1, Some(100.0)), at(10, None)],
            vec![at(1, Some(100.0)), at(10, Some(100.0))],
        ];
        let summary = rows(&[1, 10], "cow", &failed);
        assert_eq!(summary[1].p99_ratio, None, "median infinite");
        assert_eq!(summary[1].errors, 2);
        // A trial whose first point failed has no ratio on any row: no base to divide by.
        let first_failed = vec![
            vec![at(1, None), at(10, Some(100.0))],
            vec![at(1, Some(100.0)), at(10, Some(300.0))],
            vec![at(1, Some(100.0)), at(10, Some(200.0))],
        ];
        let summary = rows(&[1, 10], "cow", &first_failed);
        assert_eq!(summary[0].p99_ratio, Some((1.0, 1.0, 1.0)), "two trials of 1×");
        assert_eq!(summary[1].p99_ratio, Some((2.5, 2.0, 3.0)));
    }
}
