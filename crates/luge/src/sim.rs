//! `luge sim`: ad-hoc simulations, load sweeps, sustainable-load searches and the named
//! experiments of `luge-sim`, with table or JSON output.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use luge_sched::{Admission, CtEdfConfig, Overrun, PolicyKind, QueueKind, UllConfig};
use luge_sim::{
    EstimatorMode, Experiment, ExperimentOptions, JobShape, Overheads, Report, SimConfig, SimError,
    Spread, max_sustainable, run_experiment, run_point, sweep,
};
use luge_workload::{Rate, WorkloadSpec};

/// The workload seed of a run that names none (`--seed`, the spec's `seed=`).
const DEFAULT_SEED: u64 = 1;

/// Arguments of `luge sim`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SimArgs {
    #[command(subcommand)]
    experiment: Option<SimCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Run a named experiment (or `all`), writing CSV, SVG plots and summary.md.
    Experiment(ExperimentArgs),
}

#[derive(Debug, Args)]
struct ExperimentArgs {
    /// sledgescale-fig8 … sledgescale-fig13, edgert-fig11, edgert-fig6a, edgert-fig6b,
    /// sfs-azure, overload, horse-lane, scale, or all.
    name: String,
    /// Output directory (one sub-directory per experiment).
    #[arg(long, default_value = "results/sim")]
    out: PathBuf,
    /// Few requests and points: checks the pipeline, not the numbers.
    #[arg(long)]
    quick: bool,
    /// Parallel simulation threads.
    #[arg(long, default_value_t = default_threads())]
    threads: usize,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Overhead model: `none`, `default`, `key=ns,…` overrides, or `@FILE` (calibration file).
    #[arg(long, default_value = "default")]
    overheads: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

/// How requests are spread over dispatcher groups.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum SpreadArg {
    /// In turn, as the runtime's submitters hand them out.
    RoundRobin,
    /// By a hash of the request id: a NIC's RSS (SledgeScale §3.3).
    Hash,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Estimate {
    /// Actual execution times (the papers' assumption for synthetic loads).
    Oracle,
    /// Median of the last 256 completions of the function.
    Median256,
}

/// Admission control of `luge sim` runs (`docs/scheduling.md`, "Admission and shedding").
#[derive(Debug, Clone, Copy, ValueEnum)]
enum AdmissionArg {
    /// Luge's default: refuse the infeasible, admit on the wait, shed the doomed.
    Deadline,
    /// Refuse only what cannot meet its deadline even if started at once.
    Infeasible,
    /// Queue everything (the papers' setting).
    None,
}

impl AdmissionArg {
    fn admission(self) -> Admission {
        match self {
            AdmissionArg::Deadline => Admission::default(),
            AdmissionArg::Infeasible => Admission { reject_infeasible: true, ..Admission::NONE },
            AdmissionArg::None => Admission::NONE,
        }
    }
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Scheduling policy (see `luge policies`).
    #[arg(long, default_value = "sledgescale")]
    policy: PolicyKind,
    /// Workers.
    #[arg(long, default_value_t = 6)]
    workers: usize,
    /// Dispatcher groups (workers are split evenly among them).
    #[arg(long, default_value_t = 1)]
    dispatchers: usize,
    /// How requests are spread over the dispatcher groups.
    #[arg(long, value_enum, default_value_t = SpreadArg::RoundRobin)]
    spread: SpreadArg,
    /// Workload: a name (fixed, high-bimodal, extreme-bimodal, sdvbs, exponential, lognormal,
    /// edgert-bimodal, azure, file:PATH) or a full spec such as
    /// `lognormal,deadline=10x,arrivals=onoff`.
    #[arg(long, default_value = "lognormal")]
    workload: String,
    /// Target utilisation of the workers (overrides the spec's rate; not with a trace).
    #[arg(long, conflicts_with = "rate")]
    load: Option<f64>,
    /// Arrival rate in requests per second (overrides the spec's rate; not with a trace).
    #[arg(long)]
    rate: Option<f64>,
    /// Sweep these loads (comma-separated) instead of one run (not with a trace).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["load", "rate"])]
    loads: Vec<f64>,
    /// Find the largest load meeting a target instead: `p999_slowdown=200` or
    /// `p999_latency_us=500` (bisection between 0.05 and 1.0; not with a trace).
    #[arg(long, conflicts_with_all = ["load", "rate", "loads"])]
    max_load_at: Option<String>,
    /// Requests to simulate per run.
    #[arg(long, default_value_t = 100_000)]
    requests: usize,
    /// Make every request a chain of this many stages (1–16) sharing its execution and its
    /// deadline, each stage a request of its own, as the runtime runs a `[[chain]]`.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=16))]
    stages: u8,
    /// What becomes of a request that can no longer meet its deadline: answered at once
    /// (`kill`), or demoted to the best-effort lane to complete late (`demote`, Edge-RT §IV-C).
    #[arg(long, default_value = "kill")]
    on_overrun: Overrun,
    /// Periodic notification (Edge-RT §IV-B, Δtimer), as the runtime's `notify_interval_us`:
    /// an arrival with more slack than this is held to the period's end (0 = off). Pair it with
    /// a `wakeup=ns` overhead to count what it saves.
    #[arg(long, default_value_t = 0)]
    notify_interval_us: u64,
    /// With --notify-interval-us: hold every arrival to the period's end, also those with less
    /// slack than the interval (Edge-RT's timer-polled rule; Luge notifies those at once).
    #[arg(long, requires = "notify_interval_us")]
    notify_periodic: bool,
    /// The early-binding workers' run queue, as the runtime's `worker_queue`: the exact deadline
    /// tree or Edge-RT's constant-time timeline (§IV-C), which orders deadlines by quanta of
    /// --delta-window-us.
    #[arg(long, default_value = "tree")]
    worker_queue: QueueKind,
    /// With --worker-queue timeline: the quantum Δwindow in µs (Edge-RT: 500).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..))]
    delta_window_us: u64,
    /// Deadline-limited batching Δbatch (Edge-RT §IV-A), as the runtime's `batch_window_us`:
    /// an early-binding worker that takes its next request also commits the queued requests due
    /// within this window of it, to run back to back without a hand-off (0 = off).
    #[arg(long, default_value_t = 0)]
    batch_window_us: u64,
    /// The uLL lane (HORSE §4.1.3), as the runtime's `ull_lane`: requests whose estimate is at most
    /// --ull-threshold-us run ahead of every other request.
    #[arg(long)]
    ull_lane: bool,
    /// With --ull-lane: the estimate at or under which a request takes the lane.
    #[arg(long, default_value_t = 20, requires = "ull_lane")]
    ull_threshold_us: u64,
    /// With --ull-lane: the lane's share bound, uLL requests in a row on a worker where another
    /// request waits (0: none), as the runtime's `ull_burst`.
    #[arg(long, default_value_t = 16, requires = "ull_lane")]
    ull_burst: u32,
    /// Workload seed (default: the spec's `seed=`, else 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Overhead model: `none`, `default`, `key=ns,…` overrides, or `@FILE` (calibration file).
    #[arg(long, default_value = "default")]
    overheads: String,
    /// Where expected execution times come from.
    #[arg(long, value_enum, default_value_t = Estimate::Oracle)]
    estimator: Estimate,
    /// Admission control and shedding.
    #[arg(long, value_enum, default_value_t = AdmissionArg::Deadline)]
    admission: AdmissionArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Parallel simulation threads for sweeps.
    #[arg(long, default_value_t = default_threads())]
    threads: usize,
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// An `--overheads` value (`luge sim`, `luge bench`): `none`, `default`, `signals`,
/// `key=ns,…` or `@FILE`.
pub(crate) fn parse_overheads(s: &str) -> Result<Overheads> {
    if let Some(path) = s.strip_prefix('@') {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading overheads file {path}"))?;
        return text.parse().with_context(|| format!("overheads file {path}"));
    }
    s.parse().with_context(|| format!("--overheads {s}"))
}

fn progress(name: &str, done: usize, total: usize) {
    let mut err = std::io::stderr();
    if err.is_terminal() {
        let width = 30;
        let filled = done * width / total.max(1);
        let _ = write!(
            err,
            "\r{name} [{}{}] {done}/{total}",
            "#".repeat(filled),
            " ".repeat(width - filled)
        );
        if done == total {
            let _ = writeln!(err);
        }
    }
}

/// Runs `luge sim`.
pub fn run(args: SimArgs) -> Result<()> {
    match args.experiment {
        Some(SimCommand::Experiment(e)) => experiments(e),
        None => adhoc(args.run),
    }
}

fn experiments(e: ExperimentArgs) -> Result<()> {
    let list: Vec<Experiment> =
        if e.name == "all" { Experiment::ALL.to_vec() } else { vec![e.name.parse()?] };
    let overheads = parse_overheads(&e.overheads)?;
    for exp in list {
        let opts = ExperimentOptions {
            quick: e.quick,
            out_dir: e.out.join(exp.name()),
            threads: e.threads.max(1),
            seed: e.seed,
            overheads,
        };
        let out = run_experiment(exp, &opts, &progress)
            .with_context(|| format!("experiment {}", exp.name()))?;
        println!("{}", out.summary);
        println!("wrote {}", opts.out_dir.display());
    }
    Ok(())
}

fn adhoc(a: RunArgs) -> Result<()> {
    if a.workers == 0 || a.requests == 0 {
        bail!("--workers and --requests must be at least 1");
    }
    let mut spec: WorkloadSpec =
        a.workload.parse().with_context(|| format!("--workload {}", a.workload))?;
    // What the spec's text gives itself, as parsed (a `seed=` inside a `file:` path is not one).
    let given = WorkloadSpec::keys_given(&a.workload)
        .with_context(|| format!("--workload {}", a.workload))?;
    let gives = |key: &str| given.contains(&key);
    // A trace sets its own arrival times: a rate would be ignored, and a sweep would repeat one
    // run under different labels.
    let trace = spec.arrivals.rate().is_none();
    if trace
        && (a.load.is_some() || a.rate.is_some() || !a.loads.is_empty() || a.max_load_at.is_some())
    {
        bail!(
            "--workload {} replays a trace, which sets its own arrival times: --load, --rate, \
             --loads and --max-load-at do not apply to it",
            a.workload
        );
    }
    // `--seed` wins over the spec's `seed=`; without either, seed 1.
    match a.seed {
        Some(seed) => spec = spec.with_seed(seed),
        None if !gives("seed") => spec = spec.with_seed(DEFAULT_SEED),
        None => {}
    }
    let workers = a.workers;
    let simulated = u32::try_from(workers).unwrap_or(u32::MAX);
    match (a.load, a.rate) {
        _ if trace => {}
        (Some(l), _) => {
            spec = spec
                .with_rate(Rate::Load { load: l, workers: simulated })
                .with_context(|| format!("--load {l}"))?;
        }
        (_, Some(r)) => {
            spec = spec.with_rate(Rate::PerSecond(r)).with_context(|| format!("--rate {r}"))?;
        }
        _ if !gives("load") && !gives("rate") => {
            spec = spec
                .with_rate(Rate::Load { load: 0.8, workers: simulated })
                .with_context(|| format!("--workload {} at the default load, 0.8", a.workload))?;
        }
        _ => {
            // A `load=` in the spec is the utilisation of the simulated workers: without its
            // own `workers=` it means --workers (the spec's default, 1, would spread one
            // worker's load over all of them); with a different one it is refused.
            if let Some(Rate::Load { load, workers: w }) = spec.arrivals.rate()
                && w != simulated
            {
                if gives("workers") {
                    bail!(
                        "--workload says load={load} of workers={w}, but --workers is {workers}: \
                         drop one of them, or give the load with --load"
                    );
                }
                spec = spec
                    .with_rate(Rate::Load { load, workers: simulated })
                    .with_context(|| format!("--workload {}", a.workload))?;
            }
        }
    }
    let mut cfg = SimConfig::new(a.policy, workers);
    cfg.dispatchers = a.dispatchers;
    cfg.spread = match a.spread {
        SpreadArg::RoundRobin => Spread::RoundRobin,
        SpreadArg::Hash => Spread::Hash,
    };
    cfg.overheads = parse_overheads(&a.overheads)?;
    cfg.policy_config.admission = a.admission.admission();
    cfg.policy_config.batch_window = a.batch_window_us.saturating_mul(1_000);
    cfg.policy_config.worker_queue = match a.worker_queue {
        QueueKind::Tree => QueueKind::Tree,
        QueueKind::Timeline(_) => QueueKind::Timeline(CtEdfConfig {
            delta_window: a.delta_window_us.saturating_mul(1_000),
        }),
    };
    cfg.estimator = match a.estimator {
        Estimate::Oracle => EstimatorMode::Oracle,
        Estimate::Median256 => EstimatorMode::Median256,
    };
    cfg.notify_interval = a.notify_interval_us.saturating_mul(1_000);
    cfg.notify_urgent = !a.notify_periodic;
    cfg.ull_lane = a.ull_lane.then(|| UllConfig {
        threshold: a.ull_threshold_us.saturating_mul(1_000),
        burst: a.ull_burst,
        admission: cfg.policy_config.admission,
        ..UllConfig::default()
    });
    let shape = JobShape { stages: a.stages, on_overrun: a.on_overrun };
    // Every load of a sweep is checked before any runs (a bad one would else give a row of no
    // requests, or end the sweep half done).
    for &load in &a.loads {
        spec.clone()
            .with_rate(Rate::Load { load, workers: simulated })
            .with_context(|| format!("--loads: {load}"))?;
    }
    let at_load = |load: f64| {
        let s = spec
            .clone()
            .with_rate(Rate::Load { load, workers: simulated })
            .map_err(|e| SimError::Config(format!("load {load}: {e}")))?;
        run_point(&s, &cfg, a.requests, shape)
    };
    if let Some(target) = &a.max_load_at {
        let (metric, value) = target.split_once('=').context("--max-load-at wants metric=value")?;
        let value: f64 = value.parse().context("--max-load-at value")?;
        let meets: Box<dyn Fn(&Report) -> bool> = match metric {
            "p999_slowdown" => {
                Box::new(move |r: &Report| r.slowdown.p999.is_some_and(|v| v <= value))
            }
            "p999_latency_us" => {
                Box::new(move |r: &Report| r.latency_us.p999.is_some_and(|v| v <= value))
            }
            other => {
                bail!("--max-load-at: unknown metric `{other}` (p999_slowdown, p999_latency_us)")
            }
        };
        let load = max_sustainable(0.05, 1.0, 0.01, at_load, meets)?;
        let rps = load * workers as f64 * 1e9 / spec.dist.mean();
        match a.format {
            Format::Json => println!(
                "{}",
                serde_json::json!({"policy": a.policy.name(), "target": target, "max_load": load, "max_rps": rps})
            ),
            // The search stops at 1: a load found there is a lower bound.
            Format::Table => println!(
                "{}: max load at {target} = {}{load:.3} ({:.1} k rps)",
                a.policy,
                if load >= 1.0 { "≥ " } else { "" },
                rps / 1000.0
            ),
        }
        return Ok(());
    }
    let reports: Vec<Report> = if a.loads.is_empty() {
        vec![run_point(&spec, &cfg, a.requests, shape)?]
    } else {
        sweep(&a.loads, a.threads, |&l| at_load(l), |d, t| progress("sweep", d, t))
            .into_iter()
            .collect::<Result<_, _>>()?
    };
    match a.format {
        Format::Json => {
            let v: Vec<serde_json::Value> = reports
                .iter()
                .map(|r| {
                    let mut j = serde_json::to_value(r).unwrap_or_default();
                    j["workload"] = serde_json::Value::String(spec.to_string());
                    j
                })
                .collect();
            let out = if v.len() == 1 { v[0].clone() } else { serde_json::Value::Array(v) };
            println!("{}", serde_json::to_string_pretty(&out)?);
        }
        Format::Table => {
            println!("workload: {spec}");
            println!(
                "{:<12} {:>6} {:>10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>9}",
                "policy",
                "load",
                "requests",
                "thru rps",
                "p50 µs",
                "p99 µs",
                "p99.9 µs",
                "sd p99",
                "sd p99.9",
                "miss %",
                "rejected"
            );
            let loads: Vec<Option<f64>> = if a.loads.is_empty() {
                vec![a.load]
            } else {
                a.loads.iter().copied().map(Some).collect()
            };
            for (r, l) in reports.iter().zip(loads) {
                let f = |v: Option<f64>| v.map_or_else(|| "inf".into(), |v| format!("{v:.1}"));
                println!(
                    "{:<12} {:>6} {:>10} {:>12.0} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8.3} {:>9}",
                    r.policy,
                    l.map_or_else(|| "-".into(), |l| format!("{l:.2}")),
                    r.requests,
                    r.throughput_rps,
                    f(r.latency_us.p50),
                    f(r.latency_us.p99),
                    f(r.latency_us.p999),
                    f(r.slowdown.p99),
                    f(r.slowdown.p999),
                    r.deadline_miss_rate * 100.0,
                    r.rejected
                );
            }
        }
    }
    Ok(())
}
