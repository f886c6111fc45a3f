//! `luge bench edge-rt`, Fig. 6a on the real runtime: what deadline-limited batching (Edge-RT
//! §IV-A, Δbatch; `batch_window_us`) does to light requests and to the node's wake-ups. Fig. 11's
//! bimodal mix of 4-stage chains runs at one utilisation (0.9 by default) on Luge as shipped but
//! for the window, swept from 0 (off, the default) upwards, and for the layout: `threads`, since
//! batching saves the hand-off from a dispatcher thread to its worker, which the `inline` layout
//! `luge serve` runs with one worker does not have. Each point a fresh node, trials interleaved.
//! Beside the share of light chains met and failed it reports, per chain, the stages committed
//! behind a run, the wake-ups the node issued to its sleeping threads and the sleeps they took
//! (each a futex system call).

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::Layout;
use serde_json::json;

use super::edge_rt_fig11::{CONTENDERS, Knobs, MIX, STAGES, Trial, point};
use super::measure::median;
use super::node::Pinning;
use super::output::{Table, us};
use super::{ScenarioOptions, wait_name};
use crate::calibrate::Calibration;
use crate::error::BenchError;

/// Runs the Δbatch sweep at `load`: the summary's section and the report's part.
pub(super) fn run(
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    (load, windows): (f64, &[Duration]),
    (duration, trials): (Duration, usize),
    calibration: &mut Option<Calibration>,
) -> Result<(String, serde_json::Value), BenchError> {
    let warm = if opts.quick { Duration::from_millis(200) } else { Duration::from_secs(1) };
    // Luge as shipped (its admission, the uLL lane), the window and the layout aside.
    let luge = CONTENDERS[0];
    let mut results: Vec<Trial> = Vec::new();
    for trial in 0..trials {
        for &window in windows {
            let knobs =
                Knobs { batch_window: window, layout: Some(Layout::Threads), ..Knobs::default() };
            let t = point(opts, pin, (luge, load, trial), knobs, (warm, duration), calibration)?;
            opts.say(format!(
                "edge-rt fig 6a: trial {} Δbatch {} µs: light met {:.2} %, failed {:.2} %, \
                 p99 {} µs, {:.2} batched ({:.2} started so), {:.2} wake-ups and {:.2} sleeps \
                 per chain",
                trial + 1,
                window.as_micros(),
                100.0 * t.light_met,
                100.0 * t.light_failed,
                us(t.point.p99_us),
                t.batched_per_request,
                t.followed_per_request,
                t.wakeups_per_request,
                t.sleeps_per_request,
            ));
            results.push(t);
        }
    }
    let wait = opts.first_mode();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Edge-RT §IV-A, Fig. 6a on the runtime: deadline-limited batching (Δbatch, \
         `batch_window_us`) swept on Fig. 11's mix — chains of {STAGES} `spin_relay` stages over \
         UDP-RPC, light 40 µs per stage under 10 ms end to end, heavy 5 ms under 500 ms — at \
         {load:.2} utilisation of the worker; {:.1} s measured after {:.1} s of warm-up per \
         point, a fresh node per point. 1 worker, **`threads` layout** (a dispatcher thread \
         hands requests to the worker: what batching saves; `luge serve` runs one worker \
         `inline`, where there is no such hand-off), {} wait, `sledgescale` with Luge's \
         admission and the uLL lane, as shipped. Δbatch 0 = off (the default). {trials} \
         interleaved trials; medians. Per chain: stages committed behind a run (`batched`; a \
         stage handed back by a preemption and committed again counts again), those that \
         started so, without a hand-off (`followed`), wake-ups of the node's sleeping threads \
         and their sleeps (one futex call each).\n",
        duration.as_secs_f64(),
        warm.as_secs_f64(),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        ">Δbatch (ms)",
        ">light met",
        ">light failed",
        ">heavy met",
        ">p99 (µs)",
        ">batched / chain",
        ">followed / chain",
        ">wake-ups / chain",
        ">sleeps / chain",
    ]);
    let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2} %", 100.0 * v));
    let num = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
    let mut by = serde_json::Map::new();
    for &window in windows {
        let w = window.as_micros() as u64;
        let group: Vec<&Trial> = results.iter().filter(|t| t.batch_window_us == w).collect();
        let met = median(&group, |t| Some(t.light_met));
        let failed = median(&group, |t| Some(t.light_failed));
        let heavy = median(&group, |t| Some(t.heavy_met));
        let p99 = median(&group, |t| t.point.p99_us);
        let batched = median(&group, |t| Some(t.batched_per_request));
        let followed = median(&group, |t| Some(t.followed_per_request));
        let wakeups = median(&group, |t| Some(t.wakeups_per_request));
        let sleeps = median(&group, |t| Some(t.sleeps_per_request));
        table.row(vec![
            format!("{}", w as f64 / 1_000.0),
            pct(met),
            pct(failed),
            pct(heavy),
            us(p99),
            num(batched),
            num(followed),
            num(wakeups),
            num(sleeps),
        ]);
        by.insert(
            w.to_string(),
            json!({
                "light_met": met, "light_failed": failed, "heavy_met": heavy, "p99_us": p99,
                "batched_per_request": batched, "followed_per_request": followed,
                "wakeups_per_request": wakeups,
                "sleeps_per_request": sleeps,
            }),
        );
    }
    let _ = writeln!(md, "{}", table.render());
    let _ = writeln!(
        md,
        "Edge-RT (16 cores, 20 µs light stages, 5 ms deadline, 90 %): ~20 % of light packets \
         dropped without batching, misses falling until Δbatch = 8 ms and rising after it."
    );
    let part = json!({
        "mix": MIX,
        "stages": STAGES,
        "load": load,
        "layout": "threads",
        "windows_us": windows.iter().map(|d| d.as_micros() as u64).collect::<Vec<_>>(),
        "duration_s": duration.as_secs_f64(),
        "warm_up_s": warm.as_secs_f64(),
        "trials": results,
        "by_window_us": by,
    });
    Ok((md, part))
}
