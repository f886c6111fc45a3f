//! `luge bench edge-rt`, Fig. 6a and 6b on the real runtime: one of Edge-RT's two wake-up knobs
//! swept on Fig. 11's bimodal mix of 4-stage chains at one utilisation (0.9 by default), on Luge
//! as shipped but for that knob, each point a fresh node, trials interleaved. Beside the share of
//! light chains met and failed, each reports what its knob is for, per chain:
//! - Fig. 6a, deadline-limited batching (Edge-RT §IV-A, Δbatch; `batch_window_us`), on the
//!   `threads` layout, since batching saves the hand-off from a dispatcher thread to its worker,
//!   which the `inline` layout `luge serve` runs with one worker does not have: the stages
//!   committed behind a run, those that started so, and the wake-ups and sleeps of the node's
//!   threads (each a futex system call).
//! - Fig. 6b, periodic notification (Edge-RT §IV-B, Δtimer; `notify_interval_us`): the light
//!   chains answered late, the wake-ups and sleeps, and the arrivals left to the ticker. The
//!   paper's sweep uses 20 µs light stages under a 5 ms deadline; this one keeps Fig. 11's 40 µs
//!   under 10 ms, so that its points compare with Fig. 11's on the same node.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::Layout;
use serde_json::json;

use super::edge_rt_fig11::{CONTENDERS, Knobs, MIX, STAGES, Trial, point};
use super::measure::median;
use super::node::Pinning;
use super::output::{Table, us};
use super::{ScenarioOptions, layout_name, wait_name};
use crate::calibrate::Calibration;
use crate::error::BenchError;

/// The knob a sweep turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Knob {
    /// Fig. 6a: Δbatch, on the `threads` layout.
    Batch,
    /// Fig. 6b: Δtimer, on the scenario's layout.
    Timer,
}

/// How one column of a sweep's table reads a trial, and how it is shown.
struct Column {
    header: &'static str,
    /// Its key in the report's per-value medians (as the trial's field where it has one).
    key: &'static str,
    value: fn(&Trial) -> Option<f64>,
    show: fn(Option<f64>) -> String,
}

fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.2} %", 100.0 * v))
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}"))
}

/// A column: header, report key, reading, display.
const fn column(
    header: &'static str,
    key: &'static str,
    value: fn(&Trial) -> Option<f64>,
    show: fn(Option<f64>) -> String,
) -> Column {
    Column { header, key, value, show }
}

const LIGHT_MET: Column = column(">light met", "light_met", |t| Some(t.light_met), pct);
const LIGHT_FAILED: Column = column(">light failed", "light_failed", |t| Some(t.light_failed), pct);
const LIGHT_LATE: Column = column(
    ">light late",
    "light_late",
    |t| Some((1.0 - t.light_met - t.light_failed).max(0.0)),
    pct,
);
const HEAVY_MET: Column = column(">heavy met", "heavy_met", |t| Some(t.heavy_met), pct);
const P99: Column = column(">p99 (µs)", "p99_us", |t| t.point.p99_us, us);
const BATCHED: Column =
    column(">batched / chain", "batched_per_request", |t| Some(t.batched_per_request), num);
const FOLLOWED: Column =
    column(">followed / chain", "followed_per_request", |t| Some(t.followed_per_request), num);
const WAKEUPS: Column =
    column(">wake-ups / chain", "wakeups_per_request", |t| Some(t.wakeups_per_request), num);
const SLEEPS: Column =
    column(">sleeps / chain", "sleeps_per_request", |t| Some(t.sleeps_per_request), num);
const DEFERRED: Column =
    column(">deferred / chain", "deferred_per_request", |t| Some(t.deferred_per_request), num);

impl Knob {
    /// The figure's label in progress lines (`6a`, `6b`).
    fn figure(self) -> &'static str {
        match self {
            Self::Batch => "6a",
            Self::Timer => "6b",
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Self::Batch => "Δbatch",
            Self::Timer => "Δtimer",
        }
    }

    /// The node as shipped with this knob at `value`.
    fn knobs(self, value: Duration) -> Knobs {
        match self {
            Self::Batch => {
                Knobs { batch_window: value, layout: Some(Layout::Threads), ..Knobs::default() }
            }
            Self::Timer => Knobs { notify_interval: value, ..Knobs::default() },
        }
    }

    /// The knob's value a trial ran with (µs).
    fn of(self, t: &Trial) -> u64 {
        match self {
            Self::Batch => t.batch_window_us,
            Self::Timer => t.notify_interval_us,
        }
    }

    /// The table's columns after the knob's own.
    fn columns(self) -> &'static [Column] {
        match self {
            Self::Batch => {
                &[LIGHT_MET, LIGHT_FAILED, HEAVY_MET, P99, BATCHED, FOLLOWED, WAKEUPS, SLEEPS]
            }
            Self::Timer => {
                &[LIGHT_MET, LIGHT_FAILED, LIGHT_LATE, HEAVY_MET, P99, WAKEUPS, SLEEPS, DEFERRED]
            }
        }
    }

    /// The knob's column: its header and a value (µs) as shown.
    fn value_column(self) -> (&'static str, fn(u64) -> String) {
        match self {
            Self::Batch => (">Δbatch (ms)", |us| format!("{}", us as f64 / 1_000.0)),
            Self::Timer => (">Δtimer (µs)", |us| us.to_string()),
        }
    }

    /// The report's keys: the values swept, the medians by value.
    fn keys(self) -> (&'static str, &'static str) {
        match self {
            Self::Batch => ("windows_us", "by_window_us"),
            Self::Timer => ("intervals_us", "by_interval_us"),
        }
    }

    /// The section's first paragraph.
    fn intro(
        self,
        opts: &ScenarioOptions,
        load: f64,
        (duration, warm): (f64, f64),
        trials: usize,
    ) -> String {
        let wait = wait_name(opts.first_mode());
        let mix = format!(
            "Fig. 11's mix — chains of {STAGES} `spin_relay` stages over UDP-RPC, light 40 µs per \
             stage under 10 ms end to end, heavy 5 ms under 500 ms — at {load:.2} utilisation of \
             the worker; {duration:.1} s measured after {warm:.1} s of warm-up per point, a fresh \
             node per point."
        );
        match self {
            Self::Batch => format!(
                "Edge-RT §IV-A, Fig. 6a on the runtime: deadline-limited batching (Δbatch, \
                 `batch_window_us`) swept on {mix} 1 worker, **`threads` layout** (a dispatcher \
                 thread hands requests to the worker: what batching saves; `luge serve` runs one \
                 worker `inline`, where there is no such hand-off), {wait} wait, `sledgescale` \
                 with Luge's admission and the uLL lane, as shipped. Δbatch 0 = off (the \
                 default). {trials} interleaved trials; medians. Per chain: stages committed \
                 behind a run (`batched`; a stage handed back by a preemption and committed again \
                 counts again), those that started so, without a hand-off (`followed`), wake-ups \
                 of the node's sleeping threads and their sleeps (one futex call each).\n"
            ),
            Self::Timer => format!(
                "Edge-RT §IV-B, Fig. 6b on the runtime: periodic notification (Δtimer, \
                 `notify_interval_us`) swept on {mix} 1 worker, {} layout, {wait} wait, \
                 `sledgescale` with Luge's admission. Δtimer 0 = off (the default). {trials} \
                 interleaved trials; medians. Wake-ups: unparks of the node's sleeping threads; \
                 sleeps: their parks (one futex call each); deferred: stage arrivals left to the \
                 ticker; all per chain.\n",
                layout_name(opts.first_layout())
            ),
        }
    }

    /// What the paper measured, after the table.
    fn paper(self) -> &'static str {
        match self {
            Self::Batch => {
                "Edge-RT (16 cores, 20 µs light stages, 5 ms deadline, 90 %): ~20 % of light \
                 packets dropped without batching, misses falling until Δbatch = 8 ms and rising \
                 after it."
            }
            Self::Timer => {
                "Edge-RT (16 cores, 20 µs light stages, 5 ms deadline): > 98 % met at Δtimer = \
                 250 µs, misses from timer overhead at 50 µs, > 15 % missed at 500 µs, all at \
                 ≥ 750 µs. Luge notifies an arrival with less slack than Δtimer at once, which \
                 bounds the second effect."
            }
        }
    }
}

/// Runs `knob`'s sweep over `values` at `load`: the summary's section and the report's part.
pub(super) fn run(
    knob: Knob,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    (load, values): (f64, &[Duration]),
    (duration, trials): (Duration, usize),
    calibration: &mut Vec<Calibration>,
) -> Result<(String, serde_json::Value), BenchError> {
    let warm = if opts.quick { Duration::from_millis(200) } else { Duration::from_secs(1) };
    // Luge as shipped (its admission, the uLL lane), the knob (and Δbatch's layout) aside.
    let luge = CONTENDERS[0];
    let columns = knob.columns();
    let mut results: Vec<Trial> = Vec::new();
    for trial in 0..trials {
        for &value in values {
            let t = point(
                opts,
                pin,
                (luge, load, trial),
                knob.knobs(value),
                (warm, duration),
                calibration,
            )?;
            let shown: Vec<String> = columns
                .iter()
                .map(|c| {
                    format!("{} {}", c.header.trim_start_matches('>'), (c.show)((c.value)(&t)))
                })
                .collect();
            opts.say(format!(
                "edge-rt fig {}: trial {} {} {} µs: {}",
                knob.figure(),
                trial + 1,
                knob.symbol(),
                value.as_micros(),
                shown.join(", ")
            ));
            results.push(t);
        }
    }
    let mut md = knob.intro(opts, load, (duration.as_secs_f64(), warm.as_secs_f64()), trials);
    let (value_header, show_value) = knob.value_column();
    let headers: Vec<&str> =
        std::iter::once(value_header).chain(columns.iter().map(|c| c.header)).collect();
    let mut table = Table::new(&headers);
    let mut by = serde_json::Map::new();
    for &value in values {
        let v = value.as_micros() as u64;
        let group: Vec<&Trial> = results.iter().filter(|t| knob.of(t) == v).collect();
        let medians: Vec<Option<f64>> = columns.iter().map(|c| median(&group, c.value)).collect();
        table.row(
            std::iter::once(show_value(v))
                .chain(columns.iter().zip(&medians).map(|(c, m)| (c.show)(*m)))
                .collect(),
        );
        let entry: serde_json::Map<String, serde_json::Value> =
            columns.iter().zip(&medians).map(|(c, m)| (c.key.to_owned(), json!(m))).collect();
        by.insert(v.to_string(), serde_json::Value::Object(entry));
    }
    let _ = writeln!(md, "{}", table.render());
    let _ = writeln!(md, "{}", knob.paper());
    let (values_key, by_key) = knob.keys();
    let mut part = json!({
        "mix": MIX,
        "stages": STAGES,
        "load": load,
        "duration_s": duration.as_secs_f64(),
        "warm_up_s": warm.as_secs_f64(),
    });
    part[values_key] = json!(values.iter().map(|d| d.as_micros() as u64).collect::<Vec<_>>());
    if knob == Knob::Batch {
        part["layout"] = json!("threads");
    }
    part["trials"] = json!(results);
    part[by_key] = serde_json::Value::Object(by);
    Ok((md, part))
}
