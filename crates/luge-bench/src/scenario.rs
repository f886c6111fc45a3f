//! The benchmark scenarios of issue #6 (`luge bench
//! compare|noop|policies|density|sim-vs-real|overload|slow-clients|tenants|backpressure|tracing|
//! isolation|soak|edge-rt|chain|horse|path`).
//!
//! Each scenario starts the servers it needs itself, in this process, on ephemeral loopback
//! ports — Luge (a [`Runtime`](luge_runtime::Runtime) with its UDP-RPC and HTTP front ends,
//! configured as `luge serve` configures them, 1 worker) and the baselines of this crate
//! (UDP echo, bare hyper, process-per-request) — drives them in turn with [`run`](crate::run),
//! stops them, and writes `<out>/<scenario>-<UTC date-time>/` with `report.json` (every
//! measured point, the settings and the machine), `summary.md` (the tables, also returned to be
//! printed) and SVG plots where a sweep exists.
//!
//! Every output names the thread layout (`inline`: dispatcher on the worker's thread;
//! `threads`: a dispatcher thread of its own) and the idle wait mode (`sleep` / `spin`) of the
//! runtime it measured, the build profile, the commit and the machine.
//!
//! | scenario | what |
//! |---|---|
//! | [`compare`](Scenario::Compare) | no-op: Luge ÷ UDP echo, bare hyper and process-per-request — p50, p99 (closed loop, 1 in flight), throughput at a fixed p99 target (open-loop rate search) and closed-loop throughput |
//! | [`noop`](Scenario::Noop) | no-op latency and throughput vs offered load, both protocols, each layout, with the floor baselines |
//! | [`policies`](Scenario::Policies) | bimodal and log-normal `spin` mixes under each policy at a load sweep: short-request p99 |
//! | [`density`](Scenario::Density) | N byte-distinct no-op modules at a fixed rate: p99 and RSS per function, p99 ÷ one copy's, interleaved trials |
//! | [`sim-vs-real`](Scenario::SimVsReal) | the same arrivals through `luge-sim` (with measured overheads) and the runtime |
//! | [`overload`](Scenario::Overload) | past capacity: goodput, refusals, their latency and RSS at 1×–5× of the measured capacity, both protocols, a fixed and a bimodal `spin` mix; and a 0.5× → 2× step in 10 ms bins |
//! | [`tenants`](Scenario::Tenants) | one tenant's no-op latency while another, rate-limited, offers 10× its limit, ÷ while it offers its limit, interleaved trials |
//! | [`backpressure`](Scenario::Backpressure) | closed-loop callers that retry refusals at once, past capacity: a `luge-client` window that ignores the load signal vs one that adapts to it — goodput and refusals, interleaved trials |
//! | [`slow-clients`](Scenario::SlowClients) | HTTP no-op latency and throughput while thousands of slow ("slowloris") connections are open, ÷ the same node quiet, interleaved trials |
//! | [`isolation`](Scenario::Isolation) | a well-behaved tenant's no-op beside 0, 1, 4 and 16 hostile tenants (infinite loop, clock spinning, memory to the cap, recursion, output flooding): deadlines met and p99 ÷ alone, interleaved trials |
//! | [`edge-rt`](Scenario::EdgeRt) | Edge-RT Fig. 14: well-behaved requests beside k infinite-loop tasks per worker, loops demoted, killed, or under plain EDF; Fig. 11: bimodal 4-stage chains at rising utilisation, Luge vs EDF, FIFO and fair share: deadlines met, interleaved trials |
//! | [`horse`](Scenario::Horse) | HORSE §3: an ultra-short function (no-op, 5 µs, 20 µs) alone and beside a saturating load of 2 ms requests, with no uLL lane, the lane, and the lane with ready sandboxes: latency, readiness (mean and share of the trigger), the long requests' throughput, interleaved trials |
//! | [`path`](Scenario::Path) | The request path over UDP-RPC: `luge serve` as shipped (run-to-completion on its worker), the threads layout and the UDP echo floor, 1 and 16 in flight: latency, closed-loop throughput, server CPU and context switches per request, interleaved trials |
//! | [`peers`](Scenario::Peers) | HTTP no-op with wrk against `luge serve` as a user starts it, bare hyper, nginx and `wasmtime serve` (each a process on the same pinned core) at 16 and 64 connections: req/s, p50, p99 and Luge ÷ each, interleaved trials |
//! | [`chain`](Scenario::Chain) | a chain of real functions end to end ÷ the sum of its stages called one by one (p99, one in flight, HTTP and UDP-RPC), after checking it answers byte for byte what they give by hand |
//! | [`soak`](Scenario::Soak) | mixed good and hostile load for a long time: RSS, open fds and threads sampled, the slope after warm-up |
//! | [`tracing`](Scenario::Tracing) | HTTP no-op throughput and latency with request spans exported over OTLP (1 % and all sampled), ÷ without, interleaved trials |
//!
//! `quick` shrinks every duration and sweep so that a scenario takes a second or two: it proves
//! the pipeline (CI), not the numbers.

mod backpressure;
mod chain;
mod compare;
mod density;
mod edge_rt;
mod edge_rt_fig11;
mod edge_rt_sweep;
mod horse;
mod isolation;
mod machine;
mod measure;
mod node;
mod noop;
mod order;
mod output;
mod overload;
mod path;
mod peers;
mod policies;
mod sim_real;
mod slow_clients;
mod soak;
mod tenants;
mod traces;
mod usage;

use std::path::PathBuf;
use std::time::Duration;

use luge_runtime::{Layout, PolicyKind, WaitMode};
use luge_sim::Overheads;

use crate::error::BenchError;

pub use self::chain::blobs_image;
pub use self::machine::{Machine, utc};
pub use self::measure::Point;
pub use self::node::{NodeChain, NodeFunction};

/// A front end protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// UDP-RPC.
    Udp,
    /// HTTP/1.1.
    Http,
}

impl Protocol {
    /// `udp` or `http`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Udp => "udp",
            Protocol::Http => "http",
        }
    }
}

/// How a scenario pins its threads (on a machine with 2+ CPUs; the first and the last one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pin {
    /// Let the kernel place every thread.
    None,
    /// Luge's worker alone on the last CPU (workers are pinned in production); its front ends, ticker
    /// and dispatcher threads with the load generator on the first. Baselines' servers on the
    /// last CPU.
    #[default]
    Worker,
    /// The whole server on the last CPU — every Luge thread, or the baseline's — and the load
    /// generator alone on the first: a 1-core node against a 1-core client.
    Server,
}

/// `sleep` or `spin`.
pub fn wait_name(w: WaitMode) -> &'static str {
    match w {
        WaitMode::Sleep => "sleep",
        WaitMode::Spin => "spin",
    }
}

/// `inline` or `threads`: the layout a bench node runs (one worker, so `auto` is `inline`).
pub fn layout_name(l: Layout) -> &'static str {
    l.resolve(1, 1).name()
}

/// Settings every scenario shares.
#[derive(Debug, Clone)]
pub struct ScenarioOptions {
    /// Tiny durations and sweeps (CI): proves the pipeline, not the numbers.
    pub quick: bool,
    /// Where the dated results directory is created (`results` by default).
    pub out_root: PathBuf,
    /// Runtime wait modes to measure (scenarios other than `compare` and `noop` use the first).
    pub modes: Vec<WaitMode>,
    /// Thread layouts to measure (scenarios other than `compare` and `noop` use the first).
    pub layouts: Vec<Layout>,
    /// Protocols (`compare`, `noop` and `overload`; the others use UDP-RPC).
    pub protocols: Vec<Protocol>,
    /// The functions a Luge node serves (`luge serve`'s built-ins: `noop` and `spin` at least).
    pub functions: Vec<NodeFunction>,
    /// AoT cache directory of the runtimes (`None`: compile in memory).
    pub cache_dir: Option<PathBuf>,
    /// Print a line per measurement to stderr.
    pub progress: bool,
    /// Thread placement.
    pub pin: Pin,
    /// Workload seed (a user's spec that gives its own `seed=` keeps it).
    pub seed: u64,
}

impl ScenarioOptions {
    /// Defaults: full mode, `results/`, sleep, `auto` layout (as `luge serve` ships), both
    /// protocols, pinned, seed 1, progress on.
    pub fn new(functions: Vec<NodeFunction>) -> Self {
        Self {
            quick: false,
            out_root: PathBuf::from("results"),
            modes: vec![WaitMode::Sleep],
            layouts: vec![Layout::Auto],
            protocols: vec![Protocol::Udp, Protocol::Http],
            functions,
            cache_dir: None,
            progress: true,
            pin: Pin::Worker,
            seed: 1,
        }
    }

    pub(crate) fn say(&self, line: impl AsRef<str>) {
        if self.progress {
            eprintln!("{}", line.as_ref());
        }
    }

    pub(crate) fn first_mode(&self) -> WaitMode {
        self.modes.first().copied().unwrap_or_default()
    }

    pub(crate) fn first_layout(&self) -> Layout {
        self.layouts.first().copied().unwrap_or_default()
    }

    /// `given` unless it is empty, else the default of this mode: `quick` or `full`.
    pub(crate) fn given_or<T: Clone>(&self, given: &[T], quick: Vec<T>, full: Vec<T>) -> Vec<T> {
        if !given.is_empty() {
            given.to_vec()
        } else if self.quick {
            quick
        } else {
            full
        }
    }

    /// `given`, else the default run time of this mode: `quick` or `full`.
    pub(crate) fn duration_or(
        &self,
        given: Option<Duration>,
        quick: Duration,
        full: Duration,
    ) -> Duration {
        given.unwrap_or(if self.quick { quick } else { full })
    }

    fn check(&self) -> Result<(), BenchError> {
        let bad = |m: &str| Err(BenchError::Config(m.to_owned()));
        if self.modes.is_empty() {
            return bad("give at least one wait mode");
        }
        if self.layouts.is_empty() {
            return bad("give at least one layout");
        }
        if self.protocols.is_empty() {
            return bad("give at least one protocol");
        }
        Ok(())
    }
}

/// `compare` settings.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// The p99 the throughput search must stay under (default 1 ms).
    pub p99_target: Duration,
    /// The process-per-request program (default: the native no-op build if there is one,
    /// else `/bin/true`).
    pub process_program: Option<PathBuf>,
    /// Requests in flight for the closed-loop throughput (default 16).
    pub closed_outstanding: usize,
    /// Interleaved trials: each measures every server once (default 5; quick 1).
    pub trials: Option<usize>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        Self {
            p99_target: Duration::from_millis(1),
            process_program: None,
            closed_outstanding: 16,
            trials: None,
        }
    }
}

/// `policies` settings (empty lists take the defaults of the mode).
#[derive(Debug, Clone, Default)]
pub struct PoliciesOptions {
    /// Policies to compare.
    pub policies: Vec<PolicyKind>,
    /// Offered loads (utilisation of the one worker).
    pub loads: Vec<f64>,
    /// Workload specs without a rate (`high-bimodal`, `lognormal`, …); a spec's own `seed=`
    /// wins over [`ScenarioOptions::seed`].
    pub workloads: Vec<String>,
    /// Run time per point (default 5 s, 0.3 s quick; log-normal points run twice as long).
    pub duration: Option<Duration>,
    /// Trials (default 5; quick 1), each running every policy in turn on a node of its own:
    /// every figure is the median of the trials.
    pub trials: Option<usize>,
}

/// `density` settings (empty lists take the defaults of the mode).
#[derive(Debug, Clone, Default)]
pub struct DensityOptions {
    /// Numbers of distinct copies (default 1, 100, 1 000, 10 000; quick 1, 100).
    pub copies: Vec<usize>,
    /// Offered rate spread over all copies (default 2 000/s; quick 500/s).
    pub rate: Option<f64>,
    /// Run time per point (default 5 s; quick 0.2 s).
    pub duration: Option<Duration>,
    /// Interleaved trials: each runs every number of copies once, on a fresh node (default 5;
    /// quick 1).
    pub trials: Option<usize>,
    /// How sandbox memory starts, each measured in every trial: `true` = the copy-on-write image
    /// (the default, as `luge serve` ships), `false` = the data segments copied in (`memory_init
    /// = "copy"`). Empty = the image only.
    pub memory_init_cow: Vec<bool>,
}

/// `sim-vs-real` settings (empty lists take the defaults of the mode).
#[derive(Debug, Clone, Default)]
pub struct SimRealOptions {
    /// Policy of both (default sledgescale).
    pub policy: Option<PolicyKind>,
    /// Offered loads (default 0.5, 0.7, 0.9; quick 0.7).
    pub loads: Vec<f64>,
    /// Workload specs without a rate (default high-bimodal, exponential; quick high-bimodal); a
    /// spec's own `seed=` wins over [`ScenarioOptions::seed`].
    pub workloads: Vec<String>,
    /// The simulator's node model; `None` = measured here (see the module documentation of
    /// `sim_real`).
    pub overheads: Option<Overheads>,
    /// Run time per point (default 5 s; quick 0.3 s).
    pub duration: Option<Duration>,
    /// Trials (default 5; quick 1), each running every workload at every load once on the same
    /// node and simulating the same arrivals: every Δ is the median of the trials'.
    pub trials: Option<usize>,
}

/// `overload` settings (empty lists take the defaults of the mode).
#[derive(Debug, Clone, Default)]
pub struct OverloadOptions {
    /// Multiples of the measured capacity to offer (default 1, 1.5, 2, 5; quick 1, 5); 1 is
    /// always run, since every point is also reported relative to it.
    pub multiples: Vec<f64>,
    /// Open-loop run time per point (default 3 s; quick 250 ms).
    pub duration: Option<Duration>,
    /// Run the node without deadline-aware admission (no admission on the wait, no shedding:
    /// the node as it was before), for a before/after; the default measures it as `luge serve`
    /// ships it.
    pub no_deadline_admission: bool,
    /// Trials, each running every mix at every multiple and the step once, in that order
    /// (default 5; quick 1): every figure is the median of the trials, with its range.
    pub trials: Option<usize>,
}

/// `slow-clients` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct SlowClientsOptions {
    /// Slow connections held open (default 10 000; quick 300).
    pub connections: Option<usize>,
    /// The well-behaved client's offered rate (default 2 000/s; quick 500/s).
    pub rate: Option<f64>,
    /// Time per trial (default 3 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Quiet/slow trial pairs (default 5; quick 1).
    pub trials: Option<usize>,
    /// The program run as `PROGRAM bench hold-slow-connections …` to hold the slow
    /// connections in a process of its own (the `luge` binary).
    pub holder: Option<PathBuf>,
}

/// `tenants` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct TenantsOptions {
    /// Tenant A's offered rate (default 2 000/s; quick 500/s).
    pub rate: Option<f64>,
    /// Tenant B's rate limit; it offers this and ten times this (default 100/s; quick 50/s).
    pub b_limit: Option<f64>,
    /// Time per trial (default 3 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Trial pairs (B at its limit, B at 10×) (default 5; quick 1).
    pub trials: Option<usize>,
    /// Declare no tenant limits (B offers the same 10× but nothing refuses it for its tenant:
    /// the node before `[[tenant]]`), for a before/after.
    pub no_limits: bool,
}

/// `tracing` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct TracingOptions {
    /// Time per trial (default 3 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Trials per condition (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `backpressure` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct BackpressureOptions {
    /// Closed-loop callers, also the client's (maximum) window (default 256).
    pub callers: Option<usize>,
    /// Time per trial (default 3 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Trials per client (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `isolation` settings (`None` / empty take the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct IsolationOptions {
    /// Numbers of hostile tenants (default 0, 1, 4, 16; quick 0, 4).
    pub hostile: Vec<usize>,
    /// The well-behaved tenant's offered rate (default 1 000/s; quick 300/s).
    pub rate: Option<f64>,
    /// Each hostile tenant's offered rate (default 20/s; quick 10/s).
    pub hostile_rate: Option<f64>,
    /// Time per point (default 5 s; quick 500 ms).
    pub duration: Option<Duration>,
    /// Trials of every point (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `edge-rt` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct EdgeRtOptions {
    /// The figures to run, of `14`, `11`, `6b` (or `6`) and `6a` (default all).
    pub figures: Vec<String>,
    /// Fig. 14: infinite-loop tasks per worker (default 0, 1, 2, 4; quick 0, 2).
    pub hogs: Vec<usize>,
    /// Fig. 11: utilisations of the worker (default 0.6 to 1.0 by 0.1; quick 0.9); Fig. 6b:
    /// the first one given (default 0.9).
    pub loads: Vec<f64>,
    /// Fig. 6b: the periodic notification intervals swept (default 0, 50, 250, 500, 1000 µs;
    /// quick 0, 250 µs).
    pub notify_intervals: Vec<Duration>,
    /// Fig. 6a: the batching windows swept (default 0, 1, 4, 8, 16 ms; quick 0, 8 ms).
    pub batch_windows: Vec<Duration>,
    /// Time measured per point (default 10 s; quick 1 s).
    pub duration: Option<Duration>,
    /// Trials of every point (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `horse` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct HorseOptions {
    /// The short function's offered rate (default 2 000/s; quick 500/s).
    pub rate: Option<f64>,
    /// The long load's utilisation of the worker (default 0.9).
    pub load: Option<f64>,
    /// Time per point (default 3 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Trials of every point (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `path` settings (`None` takes the default of the mode).
#[derive(Debug, Clone)]
pub struct PathOptions {
    /// Requests in flight of the closed-loop throughput (default 16).
    pub outstanding: usize,
    /// Time per run (default 2 s; quick 200 ms).
    pub duration: Option<Duration>,
    /// Trials (default 5; quick 1).
    pub trials: Option<usize>,
}

impl Default for PathOptions {
    fn default() -> Self {
        Self { outstanding: 16, duration: None, trials: None }
    }
}

/// `peers` settings (`None` takes the default of the mode). Programs that are `None` are not
/// installed: their server is left out, and the summary says so.
#[derive(Debug, Clone)]
pub struct PeersOptions {
    /// The `luge` binary (started as `luge serve` and `luge bench baseline hyper`).
    pub luge: PathBuf,
    /// The `wrk` binary.
    pub wrk: PathBuf,
    /// The `nginx` binary.
    pub nginx: Option<PathBuf>,
    /// The `wasmtime` binary (wasmtime-cli, for `wasmtime serve`).
    pub wasmtime: Option<PathBuf>,
    /// The wasi-http no-op component `wasmtime serve` runs.
    pub component: Option<PathBuf>,
    /// The wasi-http spin component `wasmtime serve` runs for the deadline mix.
    pub spin_component: Option<PathBuf>,
    /// The deadline mix (a `WorkloadSpec`; default `high-bimodal`); its own `seed=` wins over
    /// [`ScenarioOptions::seed`].
    pub mix_workload: String,
    /// Its load, of one core (default 0.9).
    pub mix_load: f64,
    /// wrk's connection counts (default 16 and 64).
    pub connections: Vec<usize>,
    /// Time per run, whole seconds (default 5 s; quick 1 s).
    pub duration: Option<Duration>,
    /// Trials (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `chain` settings (`None` takes the default of the mode).
#[derive(Debug, Clone)]
pub struct ChainOptions {
    /// The functions the chain's stages name (e.g. the edge manifest's).
    pub functions: Vec<NodeFunction>,
    /// The chain measured.
    pub chain: NodeChain,
    /// Its input (e.g. [`blobs_image`] for the edge manifest's `keypoints`).
    pub input: Vec<u8>,
    /// Time per call per trial (default 5 s; quick 300 ms).
    pub duration: Option<Duration>,
    /// Trials (default 5; quick 1).
    pub trials: Option<usize>,
}

/// `soak` settings (`None` takes the default of the mode).
#[derive(Debug, Clone, Default)]
pub struct SoakOptions {
    /// Whole run (default 10 min; quick 1 min).
    pub duration: Option<Duration>,
    /// Sampling window (default 5 s).
    pub window: Option<Duration>,
    /// The well-behaved tenant's offered rate (default 1 000/s; quick 300/s).
    pub rate: Option<f64>,
    /// Each of the five hostile tenants' offered rate (default 2/s).
    pub hostile_rate: Option<f64>,
}

/// A scenario and its own settings.
#[derive(Debug, Clone)]
pub enum Scenario {
    /// Luge vs the baselines on a no-op, as ratios.
    Compare(CompareOptions),
    /// No-op latency and throughput vs load.
    Noop,
    /// Policies on the real runtime at a load sweep.
    Policies(PoliciesOptions),
    /// Many distinct functions at a fixed rate.
    Density(DensityOptions),
    /// Simulator vs runtime on the same arrivals.
    SimVsReal(SimRealOptions),
    /// Past capacity: goodput, refusals and memory, and a load step.
    Overload(OverloadOptions),
    /// Well-behaved clients while slow clients hold thousands of connections.
    SlowClients(SlowClientsOptions),
    /// One tenant's latency while another floods at 10× its limit.
    Tenants(TenantsOptions),
    /// Retrying clients past capacity, with and without the load signal.
    Backpressure(BackpressureOptions),
    /// Throughput and latency with request spans exported, ÷ without.
    Tracing(TracingOptions),
    /// A well-behaved tenant beside hostile ones.
    Isolation(IsolationOptions),
    /// Mixed good and hostile load for a long time: memory, fds and threads.
    Soak(SoakOptions),
    /// Edge-RT's Fig. 14 (well-behaved requests beside infinite loops) and Fig. 11 (bimodal
    /// chains at rising utilisation).
    EdgeRt(EdgeRtOptions),
    /// A chain end to end ÷ its stages one by one.
    Chain(ChainOptions),
    /// HORSE: ultra-short functions with and without the uLL lane and ready sandboxes, alone
    /// and beside long ones.
    Horse(HorseOptions),
    /// The request path over UDP-RPC: as shipped, the threads layout and the echo floor.
    Path(PathOptions),
    /// HTTP against bare hyper, nginx and `wasmtime serve`, driven by wrk.
    Peers(PeersOptions),
}

impl Scenario {
    /// The command-line name (also the results directory prefix).
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Compare(_) => "compare",
            Scenario::Noop => "noop",
            Scenario::Policies(_) => "policies",
            Scenario::Density(_) => "density",
            Scenario::SimVsReal(_) => "sim-vs-real",
            Scenario::Overload(_) => "overload",
            Scenario::SlowClients(_) => "slow-clients",
            Scenario::Tenants(_) => "tenants",
            Scenario::Backpressure(_) => "backpressure",
            Scenario::Tracing(_) => "tracing",
            Scenario::Isolation(_) => "isolation",
            Scenario::Soak(_) => "soak",
            Scenario::EdgeRt(_) => "edge-rt",
            Scenario::Chain(_) => "chain",
            Scenario::Horse(_) => "horse",
            Scenario::Path(_) => "path",
            Scenario::Peers(_) => "peers",
        }
    }
}

/// What a scenario produced.
#[derive(Debug, Clone)]
pub struct ScenarioOutput {
    /// The results directory.
    pub dir: PathBuf,
    /// The Markdown summary (as written to `summary.md`).
    pub summary: String,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// The whole report (as written to `report.json`).
    pub report: serde_json::Value,
}

/// Runs a scenario end to end (servers up, load, servers down, files written).
pub fn run_scenario(
    scenario: &Scenario,
    opts: &ScenarioOptions,
) -> Result<ScenarioOutput, BenchError> {
    opts.check()?;
    let machine = Machine::detect();
    let mut out = output::Results::create(&opts.out_root, scenario.name(), &machine)?;
    let before = node::affinity();
    let pin = node::Pinning::detect(opts.pin);
    if let Some(p) = pin {
        node::set_affinity(&[p.client]);
    }
    let result = match scenario {
        Scenario::Compare(c) => compare::run(c, opts, pin, &mut out),
        Scenario::Noop => noop::run(opts, pin, &mut out),
        Scenario::Policies(p) => policies::run(p, opts, pin, &mut out),
        Scenario::Density(d) => density::run(d, opts, pin, &mut out),
        Scenario::SimVsReal(s) => sim_real::run(s, opts, pin, &mut out),
        Scenario::Overload(o) => overload::run(o, opts, pin, &mut out),
        Scenario::SlowClients(s) => slow_clients::run(s, opts, pin, &mut out),
        Scenario::Tenants(t) => tenants::run(t, opts, pin, &mut out),
        Scenario::Backpressure(b) => backpressure::run(b, opts, pin, &mut out),
        Scenario::Tracing(t) => traces::run(t, opts, pin, &mut out),
        Scenario::Isolation(i) => isolation::run(i, opts, pin, &mut out),
        Scenario::Soak(s) => soak::run(s, opts, pin, &mut out),
        Scenario::EdgeRt(e) => edge_rt::run(e, opts, pin, &mut out),
        Scenario::Horse(h) => horse::run(h, opts, pin, &mut out),
        Scenario::Path(p) => path::run(p, opts, pin, &mut out),
        Scenario::Peers(p) => peers::run(p, opts, pin, &mut out),
        Scenario::Chain(c) => chain::run(c, opts, pin, &mut out),
    };
    if pin.is_some() && !before.is_empty() {
        node::set_affinity(&before);
    }
    let (summary, results) = result?;
    let pinning = match scenario {
        // Servers there are processes of their own, pinned whole.
        Scenario::Peers(_) => peers::describe_pinning(pin),
        _ => node::Pinning::describe(pin),
    };
    out.finish(scenario.name(), opts, machine, &pinning, summary, results)
}
