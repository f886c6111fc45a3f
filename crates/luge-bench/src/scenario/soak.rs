//! `luge bench soak`: does the node leak under hours of mixed good and hostile load? A
//! well-behaved tenant calls the no-op open-loop while five hostile tenants call an infinite
//! loop, a clock-reading loop, memory growth to the cap, unbounded recursion and 64 MiB of output
//! (`luge bench isolation`'s functions), for `--duration`, in consecutive windows. After each
//! window the scenario samples this process's `VmRSS`, open file descriptors and threads (node
//! and load generator share the process; a window's samples are dropped before the next, so the
//! generator holds no more memory at the end than after the first window). The report fits a
//! line through the samples after the warm-up (the first fifth of the run, at least one window)
//! and states its slope: RSS in KiB per minute and % per hour of the post-warm-up level, fds and
//! threads as their growth.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::density::rss_kib;
use super::isolation::{beside, hostile_driver, hostile_functions};
use super::measure::{Driver, Point};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, rps, us};
use super::{Protocol, ScenarioOptions, SoakOptions, layout_name, wait_name};
use crate::error::BenchError;

#[derive(Debug, Clone, Serialize)]
struct Sample {
    /// Seconds since the load started, at the end of the window.
    t_s: f64,
    rss_kib: Option<u64>,
    fds: Option<usize>,
    threads: Option<usize>,
    /// The well-behaved tenant's window.
    good: Point,
    /// Hostile answers in the window, and how many were successes (should be none).
    hostile_answered: u64,
    hostile_ok: u64,
}

/// Entries of a `/proc/self` directory (`fd`, `task`).
fn count(dir: &str) -> Option<usize> {
    Some(std::fs::read_dir(format!("/proc/self/{dir}")).ok()?.count())
}

/// Least-squares slope of `y` over `x` (per unit of `x`); `None` with fewer than two points.
pub(crate) fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) =
        (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

pub(crate) fn run(
    o: &SoakOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let duration = opts.duration_or(o.duration, Duration::from_secs(60), Duration::from_secs(600));
    let window =
        o.window.unwrap_or(Duration::from_secs(5)).min(duration).max(Duration::from_secs(1));
    let good_rate = o.rate.unwrap_or(if opts.quick { 300.0 } else { 1_000.0 });
    let hostile_rate = o.hostile_rate.unwrap_or(2.0);
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let (hostile, tenants) = hostile_functions(5);
    let mut functions = opts.functions.clone();
    functions.extend(hostile.iter().cloned());
    let spec = NodeSpec { tenants, ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin) };
    let samples = LugeNode::with(&spec, &functions, |node| {
        let target = node.target(Protocol::Udp)?;
        let good = Driver::fixed(target.clone(), node.noop()?, opts.seed);
        let bad = hostile_driver(node, target, &hostile, opts.seed + 1)?;
        let started = Instant::now();
        let mut samples = Vec::new();
        while started.elapsed() + window / 2 < duration {
            let (good_run, bad_run) =
                beside((&good, good_rate), Some((&bad, hostile_rate * 5.0)), window)?;
            let bad_run = bad_run.ok_or_else(|| {
                BenchError::Scenario("the hostile load generator reported nothing".into())
            })?;
            let sample = Sample {
                t_s: started.elapsed().as_secs_f64(),
                rss_kib: rss_kib(),
                fds: count("fd"),
                threads: count("task"),
                good: Point::of(&good_run),
                hostile_answered: bad_run.summary.completed + bad_run.summary.errors
                    - bad_run.summary.errors_by_kind.get("timeout").copied().unwrap_or(0),
                hostile_ok: bad_run.summary.completed,
            };
            opts.say(format!(
                "soak: {:.0} s: RSS {} KiB, {} fds, {} threads; good p99 {} µs, errors {}",
                sample.t_s,
                sample.rss_kib.map_or("-".into(), |v| v.to_string()),
                sample.fds.map_or("-".into(), |v| v.to_string()),
                sample.threads.map_or("-".into(), |v| v.to_string()),
                us(sample.good.p99_us),
                sample.good.errors
            ));
            samples.push(sample);
        }
        Ok(samples)
    })?;

    let warm = (samples.len() / 5).max(1).min(samples.len().saturating_sub(2));
    let steady = &samples[warm..];
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
        steady.iter().filter_map(|s| Some((s.t_s / 60.0, f(s)?))).collect()
    };
    let rss = series(&|s| s.rss_kib.map(|v| v as f64));
    let rss_per_min = slope(&rss);
    let rss_level = rss.first().map(|p| p.1);
    let rss_pct_per_hour = match (rss_per_min, rss_level) {
        (Some(k), Some(level)) if level > 0.0 => Some(100.0 * 60.0 * k / level),
        _ => None,
    };
    let growth = |f: &dyn Fn(&Sample) -> Option<usize>| -> Option<i64> {
        let first = steady.first().and_then(f)?;
        let last = steady.last().and_then(f)?;
        Some(last as i64 - first as i64)
    };
    let (fd_growth, thread_growth) = (growth(&|s| s.fds), growth(&|s| s.threads));
    let good_planned: u64 = samples.iter().map(|s| s.good.planned).sum();
    let good_errors: u64 = samples.iter().map(|s| s.good.errors).sum();
    let hostile_ok: u64 = samples.iter().map(|s| s.hostile_ok).sum();
    let hostile_answered: u64 = samples.iter().map(|s| s.hostile_answered).sum();

    let mut md = String::new();
    let _ = writeln!(
        md,
        "{:.0} s of mixed load over UDP-RPC in {:.0} s windows: a well-behaved tenant calls the \
         no-op at {} /s (100 ms deadline) beside five hostile tenants (loop, clockspin, \
         membomb, stackoverflow, bigout) at {} /s each. 1 worker, {} layout, {} wait. RSS, fds \
         and threads of this process (node and load generator) after each window; slopes fitted \
         after the first {warm} window(s) of warm-up.\n",
        duration.as_secs_f64(),
        window.as_secs_f64(),
        rps(good_rate),
        rps(hostile_rate),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table =
        Table::new(&[">t s", ">RSS KiB", ">fds", ">threads", ">good p99 µs", ">good errors"]);
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for s in &samples {
        table.row(vec![
            format!("{:.0}", s.t_s),
            opt(s.rss_kib.map(|v| v.to_string())),
            opt(s.fds.map(|v| v.to_string())),
            opt(s.threads.map(|v| v.to_string())),
            us(s.good.p99_us),
            s.good.errors.to_string(),
        ]);
    }
    let _ = writeln!(md, "{}", table.render());
    let _ = writeln!(
        md,
        "RSS slope after warm-up: {} KiB/min = {} per hour of {} KiB (goal < 1 %/h); fds {} and \
         threads {} from the first to the last steady sample (goal: no growth); well-behaved \
         errors {good_errors} of {good_planned}; hostile answered {hostile_answered}, of which \
         {hostile_ok} successes.",
        opt(rss_per_min.map(|v| format!("{v:+.1}"))),
        opt(rss_pct_per_hour.map(|v| format!("{v:+.2} %"))),
        opt(rss_level.map(|v| format!("{v:.0}"))),
        opt(fd_growth.map(|v| format!("{v:+}"))),
        opt(thread_growth.map(|v| format!("{v:+}"))),
    );
    Ok((
        md,
        json!({
            "duration_s": duration.as_secs_f64(),
            "window_s": window.as_secs_f64(),
            "good_rate_rps": good_rate,
            "hostile_rate_rps_per_tenant": hostile_rate,
            "warm_up_windows": warm,
            "samples": samples,
            "rss_kib_per_min": rss_per_min,
            "rss_percent_per_hour": rss_pct_per_hour,
            "fd_growth": fd_growth,
            "thread_growth": thread_growth,
            "good_planned": good_planned,
            "good_errors": good_errors,
            "hostile_answered": hostile_answered,
            "hostile_ok": hostile_ok,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn the_slope_is_the_least_squares_fit() {
        assert_eq!(slope(&[(0.0, 1.0)]), None);
        assert_eq!(slope(&[(1.0, 1.0), (1.0, 2.0)]), None, "no spread in x");
        let s = slope(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap_or(f64::NAN);
        assert!((s - 2.0).abs() < 1e-12, "{s}");
        let flat = slope(&[(0.0, 5.0), (1.0, 4.0), (2.0, 6.0), (3.0, 5.0)]).unwrap_or(f64::NAN);
        assert!(flat.abs() < 0.5, "{flat}");
    }
}
