//! `luge bench`: drive a running node with a workload (`run`), or run one of the named
//! scenarios of issue #6, which start Luge and the baselines in this process on loopback ports
//! and write `results/<scenario>-<UTC date-time>/` (`compare`, `noop`, `policies`, `density`,
//! `sim-vs-real`, `overload`, `slow-clients`, `tenants`, `backpressure`, `tracing`, `isolation`,
//! `soak`).
//! See
//! `docs/benchmarks.md`.
//!
//! One concern, at length: the command line of every scenario, each flag documented for
//! `--help`, and its mapping onto the scenario's options; the scenarios themselves live in
//! `luge-bench`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand, ValueEnum};
use luge_bench::scenario::{
    BackpressureOptions, ChainOptions, CompareOptions, DensityOptions, EdgeRtOptions, HorseOptions,
    IsolationOptions, OverloadOptions, PathOptions, PeersOptions, Pin, PoliciesOptions, Protocol,
    Scenario, ScenarioOptions, SimRealOptions, SlowClientsOptions, SoakOptions, TenantsOptions,
    TracingOptions, blobs_image, run_scenario,
};
use luge_bench::{
    Calibration, CalibrationMode, FunctionRef, Mapping, Mode, RunConfig, Target, run,
};
use luge_runtime::{Layout, PolicyKind, WaitMode};
use luge_workload::WorkloadSpec;

use crate::manifest::Manifest;

/// `luge bench` verbs.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Drive an already running node with a workload and report latency, slowdown, misses,
    /// RTE, throughput and goodput.
    Run(Box<RunArgs>),
    /// No-op on Luge vs UDP echo, bare hyper and process-per-request; prints Luge ÷ baseline
    /// ratios of p50, p99 and throughput at a fixed p99 target.
    Compare(CompareArgs),
    /// No-op latency and throughput vs offered load, both protocols, each layout.
    Noop(CommonArgs),
    /// Bimodal and log-normal mixes under each policy at a load sweep (short-request p99).
    Policies(PoliciesArgs),
    /// N distinct copies of a function at a fixed rate: p99 and memory per function.
    Density(DensityArgs),
    /// The same workload through `luge sim` (measured overheads) and the runtime.
    SimVsReal(SimRealArgs),
    /// Past capacity: goodput, refusals (and how fast they come), answers lost and memory at
    /// multiples of the measured capacity, both protocols; and a 0.5× → 2× load step.
    Overload(OverloadArgs),
    /// What Wasm sandboxing costs: each C function natively vs in a fresh Luge sandbox per
    /// request (median, p99, geometric mean), and the effect of two Wasmtime settings.
    Overhead(crate::overhead::OverheadArgs),
    /// HTTP no-op latency while thousands of slow ("slowloris") connections are open, ÷ the
    /// same node quiet.
    SlowClients(SlowClientsArgs),
    /// One tenant's no-op latency while another offers 10× its rate limit, ÷ at its limit.
    Tenants(TenantsArgs),
    /// Closed-loop callers that retry refusals at once, past capacity: a client window that
    /// ignores the node's load signal vs one that adapts to it (goodput, refusals).
    Backpressure(BackpressureArgs),
    /// What exporting request spans costs: HTTP no-op throughput and latency exporting over
    /// OTLP (1 % and every request sampled), ÷ without export.
    Tracing(TracingArgs),
    /// A well-behaved tenant's no-op beside 0, 1, 4 and 16 hostile tenants (infinite loops,
    /// clock spinning, memory growth, recursion, output floods): deadlines met and p99 ÷ alone.
    Isolation(IsolationArgs),
    /// Mixed good and hostile load for a long time (`--duration 1h`): RSS, open fds and threads
    /// sampled, and their slope after warm-up.
    Soak(SoakArgs),
    /// Edge-RT's Fig. 14 (well-behaved requests beside k infinite-loop tasks per worker, the
    /// loops demoted, killed at their deadline, or under plain EDF) and Fig. 11 (bimodal
    /// 4-stage chains at rising utilisation: Luge vs EDF, FIFO and fair share).
    EdgeRt(EdgeRtArgs),
    /// What a chain's hand-over costs: a manifest's chain end to end ÷ the sum of its stages
    /// called one by one (p99, one in flight, HTTP and UDP-RPC), after checking that it answers
    /// byte for byte what they give by hand.
    Chain(ChainArgs),
    /// HORSE: an ultra-short function (no-op, 5 µs, 20 µs) alone and beside a load
    /// of 2 ms requests, with no uLL lane, the lane, and the lane with ready sandboxes:
    /// latency, readiness and its share of the trigger, the long requests' throughput.
    Horse(HorseArgs),
    /// The request path over UDP-RPC: `luge serve` as shipped (its idle worker reads, runs and
    /// answers on one thread), the threads layout and the UDP echo floor, 1 and 16 in flight:
    /// latency, closed-loop throughput, server CPU and context switches per request.
    Path(PathArgs),
    /// HTTP no-op driven by wrk against `luge serve` as a user starts it, bare hyper, nginx and
    /// `wasmtime serve` (each a process on the same pinned core), 16 and 64 connections:
    /// req/s, p50, p99 and Luge ÷ each, interleaved trials.
    Peers(PeersArgs),
    /// Runs a baseline server until SIGINT or SIGTERM, for a load generator of your choice
    /// (`luge bench baseline hyper --addr 127.0.0.1:9000`, then e.g. `wrk`).
    Baseline(BaselineArgs),
    /// Holds slow connections to a node until stdin closes (run by `slow-clients`).
    #[command(hide = true)]
    HoldSlowConnections(HoldArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The node: `udp://IP[:PORT]` or `http://IP[:PORT][/BASE]` (IP literals or localhost; no
    /// DNS).
    #[arg(long, default_value = "udp://127.0.0.1:8081")]
    target: Target,
    /// Workload spec, e.g. `high-bimodal,load=0.8` or `fixed,rate=20000,deadline=10ms`
    /// (`luge sim --help` lists the names; `crates/luge-workload/src/spec.rs` the grammar).
    #[arg(long, default_value = "high-bimodal,load=0.5")]
    workload: String,
    /// `open[:WINDOW]` (arrivals at the workload's times, at most WINDOW in flight; default
    /// 1024) or `closed[:N]` (N always in flight; default 1).
    #[arg(long, default_value = "open")]
    mode: String,
    /// Sending time, e.g. `10s`, `500ms`, `2m`.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    format: Format,
    /// Also write every request's sample to this CSV file.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// The function called: `spin` maps each execution to calibrated iterations; any other is
    /// called with `--payload`.
    #[arg(long, default_value = "spin")]
    function: String,
    /// Its UDP-RPC id (default: looked up by name through the node's admin API at `--admin`).
    #[arg(long)]
    rpc_id: Option<u32>,
    /// The node's HTTP address, for the id lookup.
    #[arg(long, default_value = crate::invoke::ADMIN_URL)]
    admin: String,
    /// Fixed request body (makes even `spin` a fixed call).
    #[arg(long)]
    payload: Option<String>,
    /// `spin` calibration `NS_PER_ITERATION[,OVERHEAD_NS]` instead of measuring it.
    #[arg(long)]
    calibration: Option<String>,
    /// A request unanswered this long is a timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
    /// At most this many requests.
    #[arg(long)]
    max_requests: Option<u64>,
    /// Do not send the nominal execution as the request's expected execution.
    #[arg(long)]
    no_expected: bool,
    /// HTTP: receiver threads reading the answers.
    #[arg(long, default_value_t = 1)]
    http_threads: usize,
    /// No calibration and progress lines on stderr.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WaitArg {
    Sleep,
    Spin,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LayoutArg {
    /// `luge serve`'s default: inline with one worker, threads with more.
    Auto,
    /// Dispatcher on the worker's thread (the layout for 1–2 core boxes).
    Inline,
    /// A dispatcher thread of its own.
    Threads,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PinArg {
    None,
    Worker,
    Server,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProtocolArg {
    Udp,
    Http,
}

impl From<WaitArg> for WaitMode {
    fn from(a: WaitArg) -> Self {
        match a {
            WaitArg::Sleep => WaitMode::Sleep,
            WaitArg::Spin => WaitMode::Spin,
        }
    }
}

impl From<LayoutArg> for Layout {
    fn from(a: LayoutArg) -> Self {
        match a {
            LayoutArg::Auto => Layout::Auto,
            LayoutArg::Inline => Layout::Inline,
            LayoutArg::Threads => Layout::Threads,
        }
    }
}

impl From<PinArg> for Pin {
    fn from(a: PinArg) -> Self {
        match a {
            PinArg::None => Pin::None,
            PinArg::Worker => Pin::Worker,
            PinArg::Server => Pin::Server,
        }
    }
}

impl From<ProtocolArg> for Protocol {
    fn from(a: ProtocolArg) -> Self {
        match a {
            ProtocolArg::Udp => Protocol::Udp,
            ProtocolArg::Http => Protocol::Http,
        }
    }
}

/// The values given on the command line, converted, or `default()` when none was given.
fn given_or<A: Copy, T: From<A>>(given: &[A], default: impl FnOnce() -> Vec<T>) -> Vec<T> {
    if given.is_empty() { default() } else { given.iter().map(|&a| a.into()).collect() }
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// Tiny durations and sweeps (about a second or two): proves the pipeline, not the numbers.
    #[arg(long)]
    quick: bool,
    /// Directory in which the dated results directory is created.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Runtime idle wait modes, comma-separated [default: compare spin,sleep; others sleep].
    #[arg(long, value_enum, value_delimiter = ',')]
    modes: Vec<WaitArg>,
    /// Thread layouts, comma-separated [default: compare and noop inline,threads; others auto,
    /// as `luge serve` runs: inline, since a bench node runs one worker].
    #[arg(long, value_enum, value_delimiter = ',')]
    layouts: Vec<LayoutArg>,
    /// Protocols of compare, noop and overload, comma-separated [default: udp,http].
    #[arg(long, value_enum, value_delimiter = ',')]
    protocols: Vec<ProtocolArg>,
    /// Workload seed (a `--workloads` or `--mix-workload` spec's own `seed=` wins).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// AoT cache directory of the runtimes [default: `luge serve`'s, ~/.cache/luge].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// No per-measurement progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Thread placement on 2+ CPUs: `worker` = Luge's worker (and each baseline's server) alone
    /// on the last CPU, Luge's front ends with the load generator on the first; `server` = all
    /// of the server's threads on the last CPU, the load generator alone on the first; `none`.
    #[arg(long, value_enum, default_value_t = PinArg::Worker)]
    pin: PinArg,
    /// Print the report as JSON instead of the Markdown summary.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CompareArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The p99 target of the throughput search.
    #[arg(long, default_value = "1ms", value_parser = parse_duration)]
    p99_target: Duration,
    /// Program of the process-per-request baseline [default: functions/build/native/noop if
    /// built, else /bin/true].
    #[arg(long)]
    process_program: Option<PathBuf>,
    /// Requests in flight for the closed-loop throughput.
    #[arg(long, default_value_t = 16)]
    outstanding: usize,
    /// Trials, interleaved: each measures every server once; ratios are medians over them
    /// [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct PoliciesArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Policies, comma-separated [default: sledgescale,fifo,sledge,sfs,srpt,lld,ps; quick:
    /// sledgescale,fifo].
    #[arg(long, value_delimiter = ',')]
    policies: Vec<PolicyKind>,
    /// Loads, comma-separated [default: 0.5,0.7,0.8,0.9; quick: 0.8].
    #[arg(long, value_delimiter = ',')]
    loads: Vec<f64>,
    /// Workload specs without a rate, separated by `;` [default: high-bimodal;lognormal]; a
    /// spec's own `seed=` wins over `--seed`.
    #[arg(long, value_delimiter = ';')]
    workloads: Vec<String>,
    /// Time per point (log-normal points run twice as long) [default: 5s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Interleaved trials, each running every policy once [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct DensityArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Numbers of distinct copies, comma-separated [default: 1,100,1000,10000; quick: 1,100].
    #[arg(long, value_delimiter = ',')]
    copies: Vec<usize>,
    /// Requests per second spread over the copies [default: 2000; quick: 500].
    #[arg(long)]
    rate: Option<f64>,
    /// Time per point [default: 5s; quick 200ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Interleaved trials, each running every number of copies once [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
    /// How sandbox memory starts, comma-separated, each measured in every trial: `cow` (the
    /// copy-on-write image, as `luge serve` ships) or `copy` (manifest `memory_init = "copy"`)
    /// [default: cow].
    #[arg(long, value_delimiter = ',', value_parser = ["cow", "copy"])]
    memory_init: Vec<String>,
}

#[derive(Debug, Args)]
struct SimRealArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Policy of both.
    #[arg(long, default_value = "sledgescale")]
    policy: PolicyKind,
    /// Loads, comma-separated [default: 0.5,0.7,0.9; quick: 0.7].
    #[arg(long, value_delimiter = ',')]
    loads: Vec<f64>,
    /// Workload specs without a rate, separated by `;` [default: high-bimodal;exponential]; a
    /// spec's own `seed=` wins over `--seed`.
    #[arg(long, value_delimiter = ';')]
    workloads: Vec<String>,
    /// The simulator's node model: `measured` (default overheads without sandbox start, the
    /// path outside the node measured and added), or a `luge sim --overheads` value (`none`,
    /// `default`, `key=ns,…`, `@FILE` from `cargo run -p luge-runtime --example calibrate`).
    #[arg(long, default_value = "measured")]
    overheads: String,
    /// Time per point [default: 5s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials, each running every workload at every load once [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct OverloadArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Multiples of the closed-loop capacity to offer, comma-separated; 1 is always run
    /// [default: 1,1.5,2,5; quick: 1,5].
    #[arg(long, value_delimiter = ',')]
    multiples: Vec<f64>,
    /// Open-loop time per point [default: 3s; quick 250ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Run the node without deadline-aware admission (no refusal on the predicted wait, no
    /// shedding: Luge before it had them), for a before/after.
    #[arg(long)]
    no_deadline_admission: bool,
    /// Trials, each running every mix at every multiple and the step once [default: 5;
    /// quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct SlowClientsArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Slow connections held open [default: 10000; quick: 300].
    #[arg(long)]
    connections: Option<usize>,
    /// The well-behaved client's requests per second [default: 2000; quick: 500].
    #[arg(long)]
    rate: Option<f64>,
    /// Time per trial [default: 3s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Quiet/slow trial pairs [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct TenantsArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Tenant A's requests per second [default: 2000; quick: 500].
    #[arg(long)]
    rate: Option<f64>,
    /// Tenant B's rate limit; it offers this and ten times this [default: 100; quick: 50].
    #[arg(long)]
    b_limit: Option<f64>,
    /// Time per trial [default: 3s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trial pairs (B at its limit, B at 10×) [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
    /// Declare no tenant limits: B's 10× is not refused for its tenant (the node before
    /// `[[tenant]]`), for a before/after.
    #[arg(long)]
    no_limits: bool,
}

#[derive(Debug, Args)]
struct BackpressureArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Closed-loop callers, also the client's (maximum) window [default: 256].
    #[arg(long)]
    callers: Option<usize>,
    /// Time per trial [default: 3s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials per client [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct TracingArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Time per trial [default: 3s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials per condition [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct IsolationArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Numbers of hostile tenants, comma-separated [default: 0,1,4,16; quick: 0,4].
    #[arg(long, value_delimiter = ',')]
    hostile: Vec<usize>,
    /// The well-behaved tenant's requests per second [default: 1000; quick: 300].
    #[arg(long)]
    rate: Option<f64>,
    /// Each hostile tenant's requests per second [default: 20; quick: 10].
    #[arg(long)]
    hostile_rate: Option<f64>,
    /// Time per point [default: 5s; quick 500ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials of every point [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct EdgeRtArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Edge-RT figures to run, comma-separated, of 14, 11, 6b (or 6: the Δtimer sweep) and 6a
    /// (the Δbatch sweep) [default: 14,11,6b,6a].
    #[arg(long, value_delimiter = ',')]
    figures: Vec<String>,
    /// Fig. 14: infinite-loop tasks per worker, comma-separated [default: 0,1,2,4; quick: 0,2].
    #[arg(long, value_delimiter = ',')]
    hogs: Vec<usize>,
    /// Fig. 11: utilisations of the worker, comma-separated [default: 0.6,0.7,0.8,0.9,1.0;
    /// quick: 0.9]; Fig. 6b runs at the first [default: 0.9].
    #[arg(long, value_delimiter = ',')]
    loads: Vec<f64>,
    /// Fig. 6b: periodic notification intervals in µs, comma-separated (0 = off)
    /// [default: 0,50,250,500,1000; quick: 0,250].
    #[arg(long, value_delimiter = ',')]
    notify_intervals_us: Vec<u64>,
    /// Fig. 6a: deadline-limited batching windows in µs, comma-separated (0 = off)
    /// [default: 0,1000,4000,8000,16000; quick: 0,8000].
    #[arg(long, value_delimiter = ',')]
    batch_windows_us: Vec<u64>,
    /// Time measured per point [default: 10s; quick 1s].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials of every point [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct HorseArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The short function's offered rate, requests/s [default: 2000; quick: 500].
    #[arg(long)]
    rate: Option<f64>,
    /// The long load's utilisation of the worker [default: 0.9].
    #[arg(long)]
    load: Option<f64>,
    /// Time per point [default: 3s; quick 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials of every point [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct PathArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Requests in flight of the closed-loop throughput.
    #[arg(long, default_value_t = 16)]
    outstanding: usize,
    /// Time per run [default: 2s; quick 200ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials, interleaved [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct PeersArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// wrk's connection counts (one thread, keep-alive).
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    connections: Vec<usize>,
    /// Time per run, whole seconds [default: 5s; quick: 1s].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials, interleaved [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
    /// The wrk binary.
    #[arg(long, default_value = "wrk")]
    wrk: PathBuf,
    /// The nginx binary [default: `nginx` on the PATH or in /usr/sbin; left out if none].
    #[arg(long)]
    nginx: Option<PathBuf>,
    /// The wasmtime binary [default: target/peers/bin/wasmtime beside this binary's target
    /// directory (`scripts/peers.sh` builds the version Luge pins), else `wasmtime` on the PATH
    /// (its version is printed in the summary); left out if none].
    #[arg(long)]
    wasmtime: Option<PathBuf>,
    /// The wasi-http no-op component for `wasmtime serve` [default:
    /// target/peers/http-noop.wasm, built by `scripts/peers.sh`].
    #[arg(long)]
    component: Option<PathBuf>,
    /// The wasi-http spin component for the deadline mix [default:
    /// target/peers/http-spin.wasm].
    #[arg(long)]
    spin_component: Option<PathBuf>,
    /// The deadline mix, open loop against Luge's `spin` and the peer's (its own `seed=` wins
    /// over `--seed`).
    #[arg(long, default_value = "high-bimodal")]
    mix_workload: String,
    /// The mix's load, of one core.
    #[arg(long, default_value_t = 0.9)]
    mix_load: f64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum BaselineKind {
    /// Bare hyper: Luge's HTTP front end's hyper and tokio settings, answering `200 ok`.
    Hyper,
}

#[derive(Debug, Args)]
struct BaselineArgs {
    /// The baseline.
    #[arg(value_enum)]
    kind: BaselineKind,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9000")]
    addr: std::net::SocketAddr,
}

#[derive(Debug, Args)]
struct ChainArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The manifest declaring the chain and its functions.
    #[arg(long, default_value = "examples/edge.toml")]
    manifest: PathBuf,
    /// The chain measured.
    #[arg(long, default_value = "keypoints")]
    chain: String,
    /// Its input [default: a generated 256×192 grey image, for `keypoints`].
    #[arg(long)]
    input: Option<PathBuf>,
    /// Time per call per trial [default: 5s; quick: 300ms].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Trials [default: 5; quick: 1].
    #[arg(long)]
    trials: Option<usize>,
}

#[derive(Debug, Args)]
struct SoakArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Whole run [default: 10m; quick: 1m].
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Sampling window [default: 5s].
    #[arg(long, value_parser = parse_duration)]
    window: Option<Duration>,
    /// The well-behaved tenant's requests per second [default: 1000; quick: 300].
    #[arg(long)]
    rate: Option<f64>,
    /// Each hostile tenant's requests per second [default: 2].
    #[arg(long)]
    hostile_rate: Option<f64>,
}

#[derive(Debug, Args)]
struct HoldArgs {
    /// The node's HTTP address.
    #[arg(long)]
    to: std::net::SocketAddr,
    /// Connections to hold.
    #[arg(long)]
    connections: usize,
    /// Connections per source address.
    #[arg(long, default_value_t = 1000)]
    per_address: usize,
}

/// `10s`, `500ms`, `250us`, `2m`, `1.5s`.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration (e.g. 10s, 500ms)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => return Err(format!("unknown unit `{other}` in `{s}` (ns, us, ms, s, m, h)")),
    };
    let secs = v * scale;
    if !(0.0..=86_400.0).contains(&secs) {
        return Err(format!("`{s}` is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_mode(s: &str) -> Result<Mode> {
    let (kind, n) = match s.split_once(':') {
        Some((k, n)) => {
            (k, Some(n.parse::<usize>().with_context(|| format!("--mode {s}: bad number"))))
        }
        None => (s, None),
    };
    let n = n.transpose()?;
    match kind {
        "open" => Ok(Mode::Open { window: n.unwrap_or(1024) }),
        "closed" => Ok(Mode::Closed { outstanding: n.unwrap_or(1) }),
        _ => bail!("--mode must be open[:WINDOW] or closed[:N], not `{s}`"),
    }
}

/// Runs `luge bench`.
pub fn run_bench(args: BenchArgs) -> Result<()> {
    match args.command {
        BenchCommand::Run(a) => run_against(*a),
        BenchCommand::Compare(a) => {
            let c = CompareOptions {
                p99_target: a.p99_target,
                process_program: a.process_program,
                closed_outstanding: a.outstanding.max(1),
                trials: a.trials,
            };
            scenario(Scenario::Compare(c), &a.common)
        }
        BenchCommand::Noop(common) => scenario(Scenario::Noop, &common),
        BenchCommand::Overhead(a) => crate::overhead::run(a),
        BenchCommand::Policies(a) => {
            let p = PoliciesOptions {
                policies: a.policies,
                loads: a.loads,
                workloads: a.workloads,
                duration: a.duration,
                trials: a.trials,
            };
            scenario(Scenario::Policies(p), &a.common)
        }
        BenchCommand::Density(a) => {
            let d = DensityOptions {
                copies: a.copies,
                rate: a.rate,
                duration: a.duration,
                trials: a.trials,
                memory_init_cow: a.memory_init.iter().map(|m| m == "cow").collect(),
            };
            scenario(Scenario::Density(d), &a.common)
        }
        BenchCommand::SimVsReal(a) => {
            let overheads = match a.overheads.as_str() {
                "measured" => None,
                s => Some(crate::sim::parse_overheads(s)?),
            };
            let s = SimRealOptions {
                policy: Some(a.policy),
                loads: a.loads,
                workloads: a.workloads,
                overheads,
                duration: a.duration,
                trials: a.trials,
            };
            scenario(Scenario::SimVsReal(s), &a.common)
        }
        BenchCommand::Overload(a) => {
            let o = OverloadOptions {
                multiples: a.multiples,
                duration: a.duration,
                no_deadline_admission: a.no_deadline_admission,
                trials: a.trials,
            };
            scenario(Scenario::Overload(o), &a.common)
        }
        BenchCommand::SlowClients(a) => {
            let s = SlowClientsOptions {
                connections: a.connections,
                rate: a.rate,
                duration: a.duration,
                trials: a.trials,
                holder: Some(std::env::current_exe().context("cannot find the luge binary")?),
            };
            scenario(Scenario::SlowClients(s), &a.common)
        }
        BenchCommand::Tenants(a) => {
            let t = TenantsOptions {
                rate: a.rate,
                b_limit: a.b_limit,
                duration: a.duration,
                trials: a.trials,
                no_limits: a.no_limits,
            };
            scenario(Scenario::Tenants(t), &a.common)
        }
        BenchCommand::Backpressure(a) => {
            let b =
                BackpressureOptions { callers: a.callers, duration: a.duration, trials: a.trials };
            scenario(Scenario::Backpressure(b), &a.common)
        }
        BenchCommand::Tracing(a) => {
            let t = TracingOptions { duration: a.duration, trials: a.trials };
            scenario(Scenario::Tracing(t), &a.common)
        }
        BenchCommand::Isolation(a) => {
            let i = IsolationOptions {
                hostile: a.hostile,
                rate: a.rate,
                hostile_rate: a.hostile_rate,
                duration: a.duration,
                trials: a.trials,
            };
            scenario(Scenario::Isolation(i), &a.common)
        }
        BenchCommand::Soak(a) => {
            let s = SoakOptions {
                duration: a.duration,
                window: a.window,
                rate: a.rate,
                hostile_rate: a.hostile_rate,
            };
            scenario(Scenario::Soak(s), &a.common)
        }
        BenchCommand::EdgeRt(a) => {
            let e = EdgeRtOptions {
                figures: a.figures,
                hogs: a.hogs,
                loads: a.loads,
                notify_intervals: a
                    .notify_intervals_us
                    .into_iter()
                    .map(Duration::from_micros)
                    .collect(),
                batch_windows: a.batch_windows_us.into_iter().map(Duration::from_micros).collect(),
                duration: a.duration,
                trials: a.trials,
            };
            scenario(Scenario::EdgeRt(e), &a.common)
        }
        BenchCommand::Horse(a) => {
            let h =
                HorseOptions { rate: a.rate, load: a.load, duration: a.duration, trials: a.trials };
            scenario(Scenario::Horse(h), &a.common)
        }
        BenchCommand::Path(a) => {
            let p =
                PathOptions { outstanding: a.outstanding, duration: a.duration, trials: a.trials };
            scenario(Scenario::Path(p), &a.common)
        }
        BenchCommand::Peers(a) => {
            let luge = std::env::current_exe().context("where is the luge binary")?;
            // target/<profile>/luge → target/peers, where scripts/peers.sh builds the peer.
            let peers = luge.parent().and_then(Path::parent).map(|t| t.join("peers"));
            let built = |file: &str| peers.as_ref().map(|p| p.join(file)).filter(|p| p.is_file());
            let p = PeersOptions {
                wrk: a.wrk,
                nginx: a
                    .nginx
                    .or_else(|| find_program("nginx", &[PathBuf::from("/usr/sbin/nginx")])),
                // The copy scripts/peers.sh builds (the Wasmtime version Luge pins) before any
                // `wasmtime` on the PATH, which may be another version.
                wasmtime: a
                    .wasmtime
                    .or_else(|| built("bin/wasmtime"))
                    .or_else(|| find_program("wasmtime", &[])),
                component: a.component.or_else(|| built("http-noop.wasm")),
                spin_component: a.spin_component.or_else(|| built("http-spin.wasm")),
                mix_workload: a.mix_workload,
                mix_load: a.mix_load,
                connections: a.connections,
                duration: a.duration,
                trials: a.trials,
                luge,
            };
            scenario(Scenario::Peers(p), &a.common)
        }
        BenchCommand::Baseline(a) => baseline(&a),
        BenchCommand::Chain(a) => {
            let manifest = Manifest::load(&a.manifest)
                .with_context(|| format!("--manifest {}", a.manifest.display()))?;
            let Some(chain) = manifest.node_chains().into_iter().find(|c| c.config.name == a.chain)
            else {
                bail!("{} declares no chain `{}`", a.manifest.display(), a.chain);
            };
            let input = match &a.input {
                Some(path) => {
                    std::fs::read(path).with_context(|| format!("--input {}", path.display()))?
                }
                None => blobs_image(),
            };
            let c = ChainOptions {
                functions: manifest.node_functions(),
                chain,
                input,
                duration: a.duration,
                trials: a.trials,
            };
            scenario(Scenario::Chain(c), &a.common)
        }
        BenchCommand::HoldSlowConnections(a) => {
            Ok(luge_bench::hold_slow_connections(a.to, a.connections, a.per_address)?)
        }
    }
}

/// `name` on the PATH, else the first of `fallbacks` that is a file.
fn find_program(name: &str, fallbacks: &[PathBuf]) -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name));
    on_path.chain(fallbacks.iter().cloned()).find(|p| p.is_file())
}

/// `luge bench baseline`: one baseline server until SIGINT or SIGTERM.
fn baseline(a: &BaselineArgs) -> Result<()> {
    let signals = crate::serve::block_signals();
    let server = match a.kind {
        BaselineKind::Hyper => {
            let config = luge_bench::BareHttpConfig { addr: a.addr, ..Default::default() };
            luge_bench::BareHttpServer::start(config)
                .with_context(|| format!("cannot start bare hyper on {}", a.addr))?
        }
    };
    println!("bare hyper listening on http://{}", server.local_addr());
    crate::serve::wait_for_signal(&signals);
    server.shutdown();
    Ok(())
}

fn scenario(s: Scenario, c: &CommonArgs) -> Result<()> {
    let manifest = Manifest::builtin();
    let functions = manifest.node_functions();
    let mut opts = ScenarioOptions::new(functions);
    opts.quick = c.quick;
    opts.out_root = c.out.clone();
    opts.seed = c.seed;
    opts.progress = !c.quiet;
    opts.pin = c.pin.into();
    opts.cache_dir = c.cache_dir.clone().or(manifest.server.runtime.cache_dir);
    let wide = matches!(s, Scenario::Compare(_) | Scenario::Noop);
    opts.modes = given_or(&c.modes, || {
        if matches!(s, Scenario::Compare(_)) {
            vec![WaitMode::Spin, WaitMode::Sleep]
        } else {
            vec![WaitMode::Sleep]
        }
    });
    opts.layouts = given_or(&c.layouts, || {
        if wide {
            vec![Layout::Inline, Layout::Threads]
        } else {
            // As `luge serve` ships (a bench node runs one worker: inline).
            vec![Layout::Auto]
        }
    });
    opts.protocols = given_or(&c.protocols, || opts.protocols.clone());
    // `path` sweeps wait modes, not layouts.
    let modes_swept = wide || matches!(s, Scenario::Path(_));
    if (!modes_swept && opts.modes.len() > 1) || (!wide && opts.layouts.len() > 1) {
        eprintln!(
            "luge bench {}: uses the first wait mode and layout only ({} / {})",
            s.name(),
            luge_bench::scenario::wait_name(opts.modes[0]),
            luge_bench::scenario::layout_name(opts.layouts[0])
        );
    }
    let out = run_scenario(&s, &opts)?;
    if c.json {
        println!("{}", serde_json::to_string_pretty(&out.report)?);
    } else {
        println!("{}", out.summary);
    }
    eprintln!("wrote {}", out.dir.display());
    Ok(())
}

fn run_against(a: RunArgs) -> Result<()> {
    let workload: WorkloadSpec =
        a.workload.parse().with_context(|| format!("--workload {}", a.workload))?;
    let mode = parse_mode(&a.mode)?;
    let rpc_id = match (a.rpc_id, &a.target) {
        (Some(id), _) => id,
        (None, Target::Rpc(_)) => match a.function.parse::<u32>() {
            Ok(id) => id,
            Err(_) => crate::invoke::function_id(&a.admin, &a.function).with_context(|| {
                format!("cannot find the UDP-RPC id of `{}` (give --rpc-id)", a.function)
            })?,
        },
        (None, Target::Http { .. }) => 0,
    };
    let function = FunctionRef::new(rpc_id, format!("/{}", a.function.trim_start_matches('/')));
    let mapping = match &a.payload {
        None if a.function == "spin" => Mapping::Spin(function),
        payload => {
            Mapping::Fixed { function, payload: payload.clone().unwrap_or_default().into_bytes() }
        }
    };
    let mut config = RunConfig::new(a.target, workload, mapping);
    config.mode = mode;
    config.duration = a.duration;
    config.timeout = a.timeout;
    if let Some(n) = a.max_requests {
        config.max_requests = n;
    }
    config.send_expected = !a.no_expected;
    config.keep_samples = a.csv.is_some();
    config.progress = !a.quiet;
    config.http_threads = a.http_threads.max(1);
    if let Some(c) = &a.calibration {
        let (k, o) = c.split_once(',').unwrap_or((c, "0"));
        let k: f64 = k.trim().parse().context("--calibration: ns per iteration")?;
        let o: f64 = o.trim().parse().context("--calibration: overhead ns")?;
        config.calibration = CalibrationMode::Given(Calibration::given(k, o)?);
    }
    let report = run(config)?;
    if let Some(path) = &a.csv {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        );
        report.write_csv(&mut f).with_context(|| format!("writing {}", path.display()))?;
        f.flush()?;
    }
    match a.format {
        Format::Table => print!("{}", report.render_table()),
        Format::Json => println!("{}", report.to_json()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn durations_and_modes_parse() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("1.5ms").unwrap(), Duration::from_micros(1500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("ten").is_err() && parse_duration("5d").is_err());
        assert!(parse_duration("25h").is_err(), "a day at most");
        assert_eq!(parse_mode("closed:4").unwrap(), Mode::Closed { outstanding: 4 });
        assert_eq!(parse_mode("open").unwrap(), Mode::Open { window: 1024 });
        assert!(parse_mode("half").is_err());
    }
}
