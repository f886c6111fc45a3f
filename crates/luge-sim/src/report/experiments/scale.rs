//! Scale on paper: the node's no-op throughput at 16, 20, 32 and 64 cores, predicted from the
//! per-request costs measured on the 2-core development VM, and how many dispatcher cores the
//! SledgeScale split needs — beside SledgeScale's 1.37 M requests/s on 20 cores (5 dispatchers,
//! SledgeScale §4, Fig. 5).
//!
//! Two ways to use `C` cores:
//! - `inline`: `C` groups of one worker, each reading its own UDP socket (`SO_REUSEPORT`
//!   spreads the flows) and dispatching on its own thread, as `luge serve`'s inline layout does
//!   for each worker. Every core pays the whole request: the no-op's measured server CPU.
//! - `split`: `D` dispatcher cores that receive and place, `C − D` worker cores that run and
//!   reply, SledgeScale's architecture (`threads` layout with several dispatchers). A
//!   dispatcher pays the receive and Algorithm 2's decision; a worker the rest, and — without
//!   batching — it waits for its dispatcher's next `Run` after each completion (the hand-off);
//!   with Δbatch (Edge-RT §IV-A) a worker with queued requests behind its run does not.
//!
//! Offered load is Poisson at 1.3× the cores' nominal capacity, with Luge's admission: what
//! exceeds capacity is refused at once, so goodput is the capacity. The model is linear in cores
//! by construction except for the dispatcher scan (Algorithm 2 looks at every worker of its
//! group) and the balancing of Poisson arrivals across groups; what it leaves out is in
//! `docs/simulator.md`, "Scale on paper".

use std::fmt::Write as _;

use luge_sched::{Admission, FunctionId, Overrun, PolicyConfig, PolicyKind};

use super::{ExperimentError, ExperimentOutput, Run, Tables, Writer};
use crate::engine::{Job, simulate};
use crate::overheads::Overheads;
use crate::report::plot::{Chart, Series, svg};

/// Server CPU per UDP-RPC no-op on `luge serve`'s node, inline layout, sleep wait, 16 in
/// flight (`luge bench path`, `docs/benchmarks.md`, 2026-11-27): front end, dispatch, sandbox,
/// reply.
const NOOP_CPU: u64 = 20_000;
/// Half the UDP echo floor's server CPU per request in the same run (7.85 µs): the kernel's
/// receive path, which a `split` dispatcher core pays.
const RECEIVE: u64 = 3_925;
/// Algorithm 2's decision: `calibrate`'s `dispatch_base` and `dispatch_per_worker`
/// (`docs/benchmarks.md`, "Calibrated simulator overheads").
const DECIDE: u64 = 231;
const DECIDE_PER_WORKER: u64 = 19;
/// A fiber switch (`calibrate`'s `context_switch`).
const SWITCH: u64 = 80;
/// The bare one-way hand-off from a dispatcher to a worker (`calibrate`, 2.1–2.3 µs): what a
/// worker waits for its next `Run` after a completion when no batch is behind it.
const HANDOFF: u64 = 2_200;
/// The no-op's own execution (it is inside `NOOP_CPU`; the scheduler needs something to run).
const EXECUTION: u64 = 100;
/// Every request's deadline: far above a no-op's latency, so goodput measures capacity.
const DEADLINE: u64 = 10_000_000;
/// Simulated time per point, and the start of the window measured (after the queues filled).
const SPAN: u64 = 40_000_000;
const WARM: u64 = 10_000_000;

/// One way to use the cores.
#[derive(Debug, Clone, Copy)]
enum Layout {
    Inline,
    /// `D` dispatcher cores, batching on or off.
    Split {
        dispatchers: usize,
        batch: bool,
    },
}

impl Layout {
    fn label(self) -> String {
        match self {
            Layout::Inline => "inline".into(),
            Layout::Split { dispatchers, batch } => {
                format!("split {dispatchers}D{}", if batch { " + Δbatch" } else { "" })
            }
        }
    }

    /// Workers, dispatcher groups and the machine's costs on `cores` cores.
    fn machine(self, cores: usize) -> (usize, usize, Overheads) {
        match self {
            // The whole request on the worker's core; its dispatcher shares that core, so the
            // simulator's (separate) dispatcher is free.
            Layout::Inline => {
                let o = Overheads {
                    context_switch: SWITCH,
                    sandbox_start: NOOP_CPU - SWITCH - EXECUTION,
                    ..Overheads::NONE
                };
                (cores, cores, o)
            }
            Layout::Split { dispatchers, .. } => {
                let o = Overheads {
                    dispatch_base: RECEIVE + DECIDE,
                    dispatch_per_worker: DECIDE_PER_WORKER,
                    enqueue: HANDOFF,
                    context_switch: SWITCH,
                    sandbox_start: NOOP_CPU - RECEIVE - DECIDE - SWITCH - EXECUTION,
                    ..Overheads::NONE
                };
                (cores - dispatchers, dispatchers, o)
            }
        }
    }

    /// Nominal capacity on `cores` cores (requests/s): the slower of the dispatchers and the
    /// workers, each busy all the time.
    fn nominal(self, cores: usize) -> f64 {
        let (workers, groups, o) = self.machine(cores);
        let per_worker = (o.context_switch + o.sandbox_start + EXECUTION) as f64
            + if matches!(self, Layout::Split { batch: false, .. }) { HANDOFF as f64 } else { 0.0 };
        let workers_rps = workers as f64 * 1e9 / per_worker;
        match self {
            Layout::Inline => workers_rps,
            Layout::Split { .. } => {
                let scan = (workers / groups.max(1)) as u64 * o.dispatch_per_worker;
                let dispatch_rps = groups as f64 * 1e9 / (o.dispatch_base + scan) as f64;
                workers_rps.min(dispatch_rps)
            }
        }
    }
}

/// Poisson arrivals at `rps` for [`SPAN`], a no-op each (deterministic by `seed`).
fn noops(rps: f64, seed: u64) -> Vec<Job> {
    let mut x = seed | 1;
    let mut t = 0.0;
    let mean = 1e9 / rps;
    let mut jobs = Vec::with_capacity((rps * SPAN as f64 / 1e9) as usize + 16);
    loop {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let u = ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        t += -mean * u.ln();
        if t >= SPAN as f64 {
            return jobs;
        }
        jobs.push(Job {
            arrival: t as u64,
            function: FunctionId(0),
            class: 0,
            execution: EXECUTION,
            relative_deadline: DEADLINE,
            stages: 1,
            on_overrun: Overrun::Kill,
        });
    }
}

/// What one point measured.
#[derive(Debug, Clone, Copy)]
struct Measured {
    goodput_rps: f64,
    nominal_rps: f64,
    /// Share of worker time busy (start-up and execution).
    worker_busy: f64,
}

/// Runs the scale experiment.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let opts = run.opts;
    let cores: Vec<usize> = if opts.quick { vec![16] } else { vec![16, 20, 32, 64] };
    let mut points: Vec<(usize, Layout)> = Vec::new();
    for &c in &cores {
        points.push((c, Layout::Inline));
        for d in [1usize, 2, 3, 4, 5, 6, 8, 12, 16] {
            if d * 3 <= c {
                for batch in [false, true] {
                    points.push((c, Layout::Split { dispatchers: d, batch }));
                }
            }
        }
    }
    if opts.quick {
        points.retain(|&(_, l)| !matches!(l, Layout::Split { dispatchers: d, .. } if d != 4));
    }
    let results = run.points(&points, |&(c, layout)| {
        let (workers, groups, overheads) = layout.machine(c);
        let nominal = layout.nominal(c);
        let jobs = noops(1.3 * nominal, opts.seed.wrapping_add(c as u64));
        let batch = matches!(layout, Layout::Split { batch: true, .. });
        let pc = PolicyConfig {
            admission: Admission::DEADLINE,
            batch_window: if batch { DEADLINE } else { 0 },
            ..PolicyConfig::with_workers(workers / groups)
        };
        let mut cfg = run.config(PolicyKind::SledgeScale, workers, &pc);
        cfg.dispatchers = groups;
        cfg.overheads = overheads;
        cfg.estimate_start_cost = true;
        let out = simulate(&cfg, &jobs)?;
        // Answered within their deadline inside the window: the backlog a 10 ms deadline
        // admits past the last arrival does not count.
        let window = WARM..=SPAN;
        let met = out
            .records
            .iter()
            .filter(|r| r.met_deadline() && r.completion.is_some_and(|c| window.contains(&c)))
            .count();
        Ok(Measured {
            goodput_rps: met as f64 * 1e9 / (SPAN - WARM) as f64,
            nominal_rps: nominal,
            worker_busy: out.worker_busy as f64 / (workers as f64 * out.end.max(1) as f64),
        })
    })?;
    let mut t = Tables::new(
        run.exp.title(),
        &format!(
            "UDP-RPC no-ops, Poisson at 1.3× each configuration's nominal capacity for {} ms, \
             `sledgescale` with Luge's admission (10 ms deadlines), requests answered in time \
             counted from {} ms on. Costs measured on the 2-core \
             VM: {} µs of server CPU per no-op inline (front end, dispatch, sandbox, reply); in \
             the split, a dispatcher pays the receive ({} µs, half the UDP echo floor's CPU) and \
             Algorithm 2 ({} ns + {} ns per worker of its group), a worker the rest and, without \
             batching, a {} µs hand-off per request. Goodput: requests answered within their \
             deadline per second.",
            SPAN / 1_000_000,
            WARM / 1_000_000,
            NOOP_CPU as f64 / 1e3,
            RECEIVE as f64 / 1e3,
            DECIDE,
            DECIDE_PER_WORKER,
            HANDOFF as f64 / 1e3
        ),
        "cores,layout,dispatchers,workers,nominal_rps,goodput_rps,worker_busy",
        "cores | layout | workers | nominal (k/s) | goodput (k/s) | worker busy",
    );
    for (&(c, layout), m) in points.iter().zip(&results) {
        let (workers, groups, _) = layout.machine(c);
        let dispatchers = if matches!(layout, Layout::Inline) { 0 } else { groups };
        let _ = writeln!(
            t.csv,
            "{c},{},{dispatchers},{workers},{:.0},{:.0},{:.4}",
            layout.label(),
            m.nominal_rps,
            m.goodput_rps,
            m.worker_busy
        );
        let _ = writeln!(
            t.md,
            "| {c} | {} | {workers} | {:.0} | {:.0} | {:.1} % |",
            layout.label(),
            m.nominal_rps / 1e3,
            m.goodput_rps / 1e3,
            100.0 * m.worker_busy
        );
    }
    // The best of each layout per core count, in the table and the plot.
    let mut series: Vec<Series> = ["inline", "split", "split + Δbatch"]
        .into_iter()
        .map(|name| Series { name: name.into(), points: Vec::new() })
        .collect();
    t.md.push_str("\nBest per core count:\n\n| cores | inline (M/s) | best split (M/s) | its dispatchers | with Δbatch (M/s) | its dispatchers |\n|---|---|---|---|---|---|\n");
    for &c in &cores {
        let of = |pick: &dyn Fn(Layout) -> bool| {
            points
                .iter()
                .zip(&results)
                .filter(|(p, _)| p.0 == c && pick(p.1))
                .max_by(|a, b| a.1.goodput_rps.total_cmp(&b.1.goodput_rps))
                .map(|(p, m)| (p.1, m.goodput_rps))
        };
        let inline = of(&|l| matches!(l, Layout::Inline));
        let split = of(&|l| matches!(l, Layout::Split { batch: false, .. }));
        let batched = of(&|l| matches!(l, Layout::Split { batch: true, .. }));
        let d = |x: Option<(Layout, f64)>| match x {
            Some((Layout::Split { dispatchers, .. }, _)) => dispatchers.to_string(),
            _ => "-".into(),
        };
        let m = |x: Option<(Layout, f64)>| x.map_or("-".into(), |(_, g)| format!("{:.2}", g / 1e6));
        for (s, best) in series.iter_mut().zip([inline, split, batched]) {
            if let Some((_, g)) = best {
                s.points.push((c as f64, g / 1e6));
            }
        }
        let _ = writeln!(
            t.md,
            "| {c} | {} | {} | {} | {} | {} |",
            m(inline),
            m(split),
            d(split),
            m(batched),
            d(batched)
        );
    }
    t.md.push_str("\nSledgeScale (§4, Fig. 5; bare metal, eRPC): 1.37 M requests/s on 20 cores with 5 dispatchers, 800 k on 12 with 3.\n");
    let mut w = Writer::new(&opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    let chart = Chart::new(run.exp.title(), "cores", "no-ops in time (M/s)");
    w.write("goodput.svg", &svg(&chart, &series))?;
    w.finish(t.md)
}
