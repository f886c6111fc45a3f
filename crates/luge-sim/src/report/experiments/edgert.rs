//! Edge-RT Fig. 11: bimodal light/heavy chains of four stages on 48 workers, from 60 % to 100 %
//! utilisation — Luge against FIFO, fair share and EDF without admission or demotion — with the
//! share of each class's requests met, late, refused and dropped.
//!
//! As in Edge-RT §VI: light chains execute 40 µs per stage (deadline 10 ms end to end), heavy
//! ones 5 ms per stage (500 ms), light work is 80 % of the total, and every chain has four stages
//! of equal execution. Each stage runs as the runtime runs chains (a request of its own, in a
//! fresh sandbox, under the chain's deadline less the estimated work after it). Utilisation is
//! of stage execution alone, as in the paper; the machine's overheads (the options') come on top.

use std::fmt::Write as _;

use luge_sched::{Admission, PolicyConfig, PolicyKind, RejectReason};
use luge_workload::{Preset, ServiceDist};

use super::{ExperimentError, ExperimentOutput, Run, Tables, Writer, jobs_of, spec_at};
use crate::engine::{Job, SimError, simulate};
use crate::record::{Outcome, Record};
use crate::report::plot::{Chart, Series, svg};

/// Workers, as in Edge-RT's evaluation (48 cores).
const WORKERS: usize = 48;
/// Dispatcher groups of 12 workers each.
const DISPATCHERS: usize = 4;
/// Stages per chain.
const STAGES: u8 = 4;
/// The baselines' queues hold this many requests per worker; beyond, arrivals are dropped, as
/// Edge-RT's buffers drop packets.
const BOUND_PER_WORKER: usize = 256;

/// One configuration compared.
#[derive(Debug, Clone, Copy)]
struct Contender {
    label: &'static str,
    policy: PolicyKind,
    /// `None`: the baselines' setting, admission off behind a bounded queue.
    admission: Option<Admission>,
}

const CONTENDERS: [Contender; 4] = [
    Contender {
        label: "luge",
        policy: PolicyKind::SledgeScale,
        admission: Some(Admission::DEADLINE),
    },
    Contender { label: "edf", policy: PolicyKind::SledgeScale, admission: None },
    Contender { label: "fifo", policy: PolicyKind::Fifo, admission: None },
    Contender { label: "fair-share", policy: PolicyKind::Ps, admission: None },
];

/// How one class's requests ended, as shares of them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Shares {
    pub(super) met: f64,
    /// Completed past the deadline.
    pub(super) late: f64,
    /// Answered at once for a deadline it could not meet (admission, shedding, a stage left no
    /// time, a run preempted past it).
    pub(super) refused: f64,
    /// Refused because the queues were full.
    pub(super) dropped: f64,
}

impl Shares {
    pub(super) fn of(records: &[Record], class: u16) -> Self {
        let mut s = Shares::default();
        let mut n = 0usize;
        for r in records.iter().filter(|r| r.class == class) {
            n += 1;
            let bucket = match r.outcome {
                Outcome::Completed if r.met_deadline() => &mut s.met,
                Outcome::Completed | Outcome::Pending => &mut s.late,
                Outcome::Rejected(RejectReason::QueueFull) => &mut s.dropped,
                Outcome::Rejected(_) => &mut s.refused,
            };
            *bucket += 1.0;
        }
        let n = n.max(1) as f64;
        Shares { met: s.met / n, late: s.late / n, refused: s.refused / n, dropped: s.dropped / n }
    }
}

/// `requests` chains of `stages` stages, each stage drawn from `per_stage`, arriving at `load`
/// utilisation of `workers` workers by stage execution (Edge-RT's figures count utilisation so).
pub(super) fn chains_of(
    per_stage: &ServiceDist,
    (stages, load, workers): (u8, f64, usize),
    seed: u64,
    requests: usize,
) -> Result<Vec<Job>, SimError> {
    // A `stages`-th of the rate, `stages` times the work: the utilisation stays `load`.
    let spec = spec_at(per_stage, load / f64::from(stages), workers, seed)?;
    let mut jobs = jobs_of(&spec, requests);
    for j in &mut jobs {
        j.execution *= u64::from(stages);
        j.stages = stages;
    }
    Ok(jobs)
}

/// The chains of one point: the light/heavy mix at `load` of the workers, each request a chain
/// of [`STAGES`] stages of its class's execution.
fn chains(run: &Run<'_>, load: f64, requests: usize) -> Result<Vec<Job>, SimError> {
    let dist = ServiceDist::preset(Preset::EdgeRtBimodal);
    chains_of(&dist, (STAGES, load, WORKERS), run.opts.seed, requests)
}

/// Runs Edge-RT Fig. 11.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let opts = run.opts;
    let n = run.requests(300_000);
    let loads: Vec<f64> = if opts.quick { vec![0.6, 1.0] } else { vec![0.6, 0.7, 0.8, 0.9, 1.0] };
    let points: Vec<(Contender, f64)> =
        CONTENDERS.iter().flat_map(|&c| loads.iter().map(move |&l| (c, l))).collect();
    let group = WORKERS / DISPATCHERS;
    let bounded = Admission { max_queued: Some(BOUND_PER_WORKER * group), ..Admission::NONE };
    let results = run.points(&points, |&(c, load)| {
        let pc = PolicyConfig {
            admission: c.admission.unwrap_or(bounded),
            ..PolicyConfig::papers(group)
        };
        let mut cfg = run.config(c.policy, WORKERS, &pc);
        cfg.dispatchers = DISPATCHERS;
        // Luge's estimates include a stage's start-up on its worker, as the runtime's do.
        cfg.estimate_start_cost = c.admission.is_some();
        let out = simulate(&cfg, &chains(run, load, n)?)?;
        Ok([Shares::of(&out.records, 0), Shares::of(&out.records, 1)])
    })?;
    let mut t = Tables::new(
        run.exp.title(),
        &format!(
            "{WORKERS} workers in {DISPATCHERS} dispatcher groups; every request a chain of {STAGES} stages (light 40 µs each, deadline 10 ms end to end; heavy 5 ms each, 500 ms), light = 80 % of the work; {n} chains per point. `luge`: `sledgescale` with Luge's default admission (on the wait, shedding); `edf`: `sledgescale` without admission or demotion; `fifo`; `fair-share`: `ps`, 1 ms slices. The baselines drop arrivals beyond {BOUND_PER_WORKER} queued requests per worker. Shares of each class's requests: met, late (completed past the deadline), refused (answered at once for its deadline), dropped (queues full)."
        ),
        "policy,load,light_met,light_late,light_refused,light_dropped,heavy_met,heavy_late,heavy_refused,heavy_dropped",
        "policy | load | light met | light late | light refused | light dropped | heavy met",
    );
    let pct = |v: f64| format!("{:.2} %", v * 100.0);
    for (&(c, l), [light, heavy]) in points.iter().zip(&results) {
        let _ = writeln!(
            t.csv,
            "{},{l:.2},{:.5},{:.5},{:.5},{:.5},{:.5},{:.5},{:.5},{:.5}",
            c.label,
            light.met,
            light.late,
            light.refused,
            light.dropped,
            heavy.met,
            heavy.late,
            heavy.refused,
            heavy.dropped
        );
        let _ = writeln!(
            t.md,
            "| {} | {l:.1} | {} | {} | {} | {} | {} |",
            c.label,
            pct(light.met),
            pct(light.late),
            pct(light.refused),
            pct(light.dropped),
            pct(heavy.met)
        );
    }
    t.md.push_str("\nPaper (48 cores, 44 running stages): at 90 % utilisation Edge-RT meets > 95 % of light and heavy deadlines, at 100 % 92.13 % of light ones; Linux (CFS) falls from 95.9 % at 60 % to 15.9 % at 100 %.\n");
    let mut w = Writer::new(&opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    let series = |class: usize| -> Vec<Series> {
        CONTENDERS
            .iter()
            .enumerate()
            .map(|(i, c)| Series {
                name: c.label.into(),
                points: loads
                    .iter()
                    .enumerate()
                    .map(|(j, &l)| (l, results[i * loads.len() + j][class].met))
                    .collect(),
            })
            .collect()
    };
    let chart = Chart::new(run.exp.title(), "utilisation", "light deadlines met");
    w.write("light_met.svg", &svg(&chart, &series(0)))?;
    let chart = Chart::new(run.exp.title(), "utilisation", "heavy deadlines met");
    w.write("heavy_met.svg", &svg(&chart, &series(1)))?;
    w.finish(t.md)
}
