//! `luge serve`: start the runtime, register the manifest's (or the built-in) functions, serve
//! them over HTTP/1.1 and UDP-RPC, and shut down gracefully on SIGINT/SIGTERM.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, Result};
use clap::Args;
use luge_runtime::{Layout, PolicyKind, Runtime, WaitMode};
use luge_server::{
    AdminConfig, AdminToken, HttpConfig, Node, NodeConfig, NodeError, RequestLog, UdpConfig,
};

use crate::manifest::{BUILTINS, Manifest};

/// `luge serve` options; flags override the manifest's `[server]` settings.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Manifest of functions and settings (default: the built-in example functions).
    #[arg(long, short)]
    manifest: Option<PathBuf>,
    /// HTTP listen address [default: 127.0.0.1:8080].
    #[arg(long)]
    http: Option<SocketAddr>,
    /// UDP-RPC listen address [default: 127.0.0.1:8081].
    #[arg(long)]
    rpc: Option<SocketAddr>,
    /// Admin API listen address, or `off` [default: 127.0.0.1:8082]. Beyond loopback it needs
    /// a token: `LUGE_ADMIN_TOKEN` or `--admin-token-file`.
    #[arg(long, value_parser = parse_admin)]
    admin: Option<AdminAddr>,
    /// Load-balancer agent listen address: answers each connection with HAProxy's agent-check
    /// line, `ready up <weight>%` from the node's queue or `drain` [default: the manifest's `agent`,
    /// else none].
    #[arg(long)]
    agent: Option<SocketAddr>,
    /// File holding the admin API's bearer token (at least 16 characters; the environment
    /// variable `LUGE_ADMIN_TOKEN` takes precedence).
    #[arg(long)]
    admin_token_file: Option<PathBuf>,
    /// Worker threads (one per core you give Luge).
    #[arg(long)]
    workers: Option<usize>,
    /// Dispatcher threads (each owns a group of workers).
    #[arg(long)]
    dispatchers: Option<usize>,
    /// Scheduling policy (`luge policies` lists them).
    #[arg(long)]
    policy: Option<PolicyKind>,
    /// Idle threads busy-poll instead of sleeping (lowest latency; burns the cores): `--wait
    /// spin`.
    #[arg(long, conflicts_with = "wait")]
    spin: bool,
    /// How idle threads wait: `sleep` (park; idle cores cost nothing) or `spin` (busy-poll)
    /// [default: the manifest's `wait`, else sleep].
    #[arg(long, value_parser = parse_wait)]
    wait: Option<WaitMode>,
    /// Thread layout: `inline` runs a dispatcher on each worker's thread (one hand-off less per
    /// request), `threads` gives dispatchers threads of their own, `auto` is `inline` with one
    /// worker and `threads` with more [default: the manifest's, else auto].
    #[arg(long, value_parser = Layout::from_str)]
    layout: Option<Layout>,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// Request log: one line per answered request on the `luge::request` target — `off`,
    /// `all`, or n for one request in n [default: the manifest's, else off].
    #[arg(long)]
    request_log: Option<RequestLog>,
    /// Export request spans (OpenTelemetry, OTLP protobuf over HTTP) to this collector:
    /// `http://host:4318` (spans go to `/v1/traces`) or a full traces URL [default: the
    /// manifest's `otlp_endpoint`, else no export].
    #[arg(long, value_parser = parse_otlp_endpoint)]
    otlp_endpoint: Option<String>,
    /// With export on, the share (0–1) of requests arriving without a `traceparent` that start
    /// a sampled trace; a caller's sampling decision is always kept [default: the manifest's
    /// `trace_sample`, else 0.01].
    #[arg(long, value_parser = parse_trace_sample)]
    trace_sample: Option<f64>,
}

fn parse_wait(s: &str) -> Result<WaitMode, String> {
    match s {
        "sleep" => Ok(WaitMode::Sleep),
        "spin" => Ok(WaitMode::Spin),
        _ => Err(format!("`{s}`: expected `sleep` or `spin`")),
    }
}

fn parse_otlp_endpoint(s: &str) -> Result<String, String> {
    crate::manifest::check_otlp_endpoint(s).map(|()| s.to_owned())
}

fn parse_trace_sample(s: &str) -> Result<f64, String> {
    let share: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    crate::manifest::check_trace_sample(share).map(|()| share)
}

/// `--admin`: an address or `off`.
#[derive(Debug, Clone, Copy)]
enum AdminAddr {
    Off,
    At(SocketAddr),
}

fn parse_admin(s: &str) -> Result<AdminAddr, String> {
    match s {
        "off" => Ok(AdminAddr::Off),
        _ => s.parse().map(AdminAddr::At).map_err(|e| format!("`{s}`: {e} (or `off`)")),
    }
}

/// The admin token: `LUGE_ADMIN_TOKEN` if set, else the token file's contents.
fn admin_token(file: Option<&PathBuf>) -> Result<Option<AdminToken>> {
    let text = match (std::env::var("LUGE_ADMIN_TOKEN"), file) {
        (Ok(token), _) if !token.trim().is_empty() => token,
        (_, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the admin token file {}", path.display()))?,
        (_, None) => return Ok(None),
    };
    Ok(Some(AdminToken::new(&text)?))
}

/// How logs are written to stderr.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Log lines waiting for stderr at most; past it, lines are dropped and counted
/// (`luge_log_lines_suppressed_total{kind="backlog"}`).
const LOG_BACKLOG_LINES: usize = 8192;

/// Installs the tracing subscriber (`RUST_LOG` filters; `info` by default). Lines are written to
/// stderr by a thread of their own (`tracing-appender`), so that a worker or a front end never
/// blocks on a stderr that does not keep up (a full pipe, a stalled log agent): at most
/// [`LOG_BACKLOG_LINES`] wait, the rest are dropped and counted. Keep the guard until the end:
/// dropping it writes what is still queued.
pub fn init_logging(format: LogFormat) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_BACKLOG_LINES)
        .thread_name("luge-log")
        .finish(std::io::stderr());
    let dropped = writer.error_counter();
    luge_server::count_log_backlog_drops(move || dropped.dropped_lines() as u64);
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(writer);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    guard
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in every thread it spawns
/// later), so that [`wait_for_signal`] can take them synchronously.
pub(crate) fn block_signals() -> libc::sigset_t {
    // SAFETY: `set` is initialised by sigemptyset before use; the signal numbers are valid and
    // pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

pub(crate) fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: `set` holds the blocked signals and `signal` is a valid out-pointer.
    unsafe { libc::sigwait(set, &mut signal) };
    signal
}

/// How often `luge serve` looks at its threads while it waits for a signal.
const WATCH_PERIOD: std::time::Duration = std::time::Duration::from_millis(500);

/// Why `luge serve` stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGINT or SIGTERM.
    Signal(i32),
    /// A thread the node needs has stopped (a bug): it cannot serve until it restarts.
    ThreadStopped(&'static str),
}

/// A blocked signal of `set` taken within `timeout`, else `None`.
fn wait_for_signal_within(set: &libc::sigset_t, timeout: std::time::Duration) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` holds the blocked signals, a null info pointer is allowed and `timeout` is
    // a valid timespec that outlives the call.
    let signal = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    // -1: the timeout passed (EAGAIN) or another signal interrupted the wait (EINTR).
    (signal > 0).then_some(signal)
}

/// Waits for SIGINT or SIGTERM, or for `stopped` to name a thread the node needs that has
/// stopped (looked at every [`WATCH_PERIOD`]): such a node answers `/healthz` 503 but serves no
/// more, and under a supervisor without an HTTP check (systemd) only its exit gets it
/// restarted. SIGHUP — `ExecReload=kill -HUP`, a closed terminal — would end the process at
/// once by default, dropping every request in flight; `luge serve` does not reload its manifest
/// (the admin API adds and removes functions live), so it says so and goes on serving.
fn wait_for_stop(set: &libc::sigset_t, stopped: impl Fn() -> Option<&'static str>) -> Stop {
    loop {
        match wait_for_signal_within(set, WATCH_PERIOD) {
            Some(libc::SIGHUP) => tracing::warn!(
                "SIGHUP ignored: luge serve does not reload its manifest; restart it to apply a \
                 changed manifest, or add and remove functions through the admin API"
            ),
            Some(signal) => return Stop::Signal(signal),
            None => {
                if let Some(why) = stopped() {
                    return Stop::ThreadStopped(why);
                }
            }
        }
    }
}

/// Debug builds only, for the tests: `LUGE_TEST_STOP_THREAD_AFTER_MS=N` ends a thread the
/// runtime watches N ms after start-up, as a bug in it would (a panic), so that a test can see
/// `luge serve` exit. Release builds have no such hook.
#[cfg(debug_assertions)]
fn inject_a_stopped_thread(runtime: &Runtime) {
    let Some(ms) =
        std::env::var("LUGE_TEST_STOP_THREAD_AFTER_MS").ok().and_then(|v| v.parse().ok())
    else {
        return;
    };
    let watch = runtime.watch_thread("an injected fault (LUGE_TEST_STOP_THREAD_AFTER_MS)");
    std::thread::spawn(move || {
        let _watch = watch;
        std::thread::sleep(std::time::Duration::from_millis(ms));
        panic!("injected by LUGE_TEST_STOP_THREAD_AFTER_MS");
    });
}

/// Runs `luge serve` until a signal arrives.
pub fn run(args: ServeArgs) -> Result<()> {
    // First, so that every thread started after it — the log writer's too — leaves SIGINT, SIGTERM
    // and SIGHUP to `wait_for_signal`: a thread that took one would end the process at once.
    let signals = block_signals();
    // Held until `serve` returns: what is queued is written before the process exits.
    let _log = init_logging(args.log_format);
    let mut manifest = match &args.manifest {
        Some(path) => Manifest::load(path)?,
        None => Manifest::builtin(),
    };
    let functions = manifest.node_functions();
    let chains = manifest.node_chains();
    let server = &mut manifest.server;
    if let Some(a) = args.http {
        server.http = a;
    }
    if let Some(a) = args.rpc {
        server.rpc = a;
    }
    match args.admin {
        Some(AdminAddr::Off) => server.admin = None,
        Some(AdminAddr::At(a)) => server.admin = Some(a),
        None => {}
    }
    if let Some(a) = args.agent {
        server.agent = Some(a);
    }
    let token_file = args.admin_token_file.as_ref().or(server.admin_token_file.as_ref());
    let admin = match server.admin {
        Some(addr) => {
            Some(AdminConfig { addr, token: admin_token(token_file)?, ..AdminConfig::default() })
        }
        None => None,
    };
    if let Some(w) = args.workers {
        server.runtime.workers = w;
    }
    if let Some(d) = args.dispatchers {
        server.runtime.dispatchers = d;
    }
    if let Some(p) = args.policy {
        server.runtime.policy = p;
    }
    if let Some(wait) = args.wait.or(args.spin.then_some(WaitMode::Spin)) {
        server.runtime.wait = wait;
    }
    let request_log = args.request_log.unwrap_or(server.request_log);
    let sample = args.trace_sample.unwrap_or(server.trace_sample);
    let tracing = match args.otlp_endpoint.as_ref().or(server.otlp_endpoint.as_ref()) {
        Some(endpoint) => {
            let tracing = luge_server::Tracing::otlp(endpoint, sample)?;
            tracing::info!(endpoint, sample, "exporting request spans over OTLP/HTTP");
            Some(tracing)
        }
        None => None,
    };
    if let Some(layout) = args.layout {
        server.runtime.layout = layout;
    }
    if server.runtime.effective_layout() == Layout::Inline {
        // One dispatcher on each worker's thread, whatever `--workers` made of the count — but
        // a count asked for on the command line is not overridden silently (the manifest
        // refuses the same).
        if let Some(d) = args.dispatchers.filter(|&d| d != server.runtime.workers) {
            anyhow::bail!(
                "--dispatchers {d} with the inline layout, which runs one dispatcher on each of \
                 the {} worker(s): leave --dispatchers out, set it to the workers, or use \
                 --layout threads",
                server.runtime.workers
            );
        }
        server.runtime.dispatchers = server.runtime.workers;
    }
    let http = HttpConfig {
        addr: server.http,
        threads: server.http_threads,
        request_log,
        admin,
        expose_metrics: server.expose_metrics,
        max_connections_per_client: server.max_connections_per_client,
        max_buffered_body_bytes: server.max_buffered_body_bytes,
        max_buffered_body_bytes_per_client: server.max_buffered_body_bytes_per_client,
        min_send_rate: server.min_send_rate,
        // An upload the registry would refuse is refused before it is read.
        max_module_bytes: server.runtime.registration.max_module_bytes,
        tracing: tracing.clone(),
        agent: server.agent,
        ..HttpConfig::default()
    };
    // Refused now, not after every module has compiled.
    http.check()?;
    // Open connections, as many over-cap ones being answered 503 (`HttpConfig::max_connections`),
    // the admin listener's, and a margin for everything else (sockets, modules' images, logs).
    let wanted = (http.max_connections as u64).saturating_mul(2).saturating_add(64 + 256);
    match luge_server::net::raise_fd_limit() {
        Ok(files) if files < wanted => tracing::warn!(
            files,
            wanted,
            max_connections = http.max_connections,
            "the open-file limit is below what max_connections can take (open connections and \
             as many being refused): under a connection flood, accepts will fail"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!("cannot raise the open-file limit: {e}"),
    }
    let config = server.runtime.clone();
    let grace = config.shutdown_grace;
    let node = Node::start_with_chains(
        NodeConfig {
            runtime: config.clone(),
            http: Some(http),
            udp: Some(UdpConfig {
                addr: server.rpc,
                busy_poll: server.rpc_busy_poll,
                request_log,
                tracing: tracing.clone(),
                ..UdpConfig::default()
            }),
        },
        &functions,
        &chains,
    )
    .map_err(|e| match &e {
        // Name the manifest entry a module came from.
        NodeError::Register { name, .. } => {
            let source = manifest.functions.iter().find(|f| &f.config.name == name);
            anyhow::Error::new(e)
                .context(format!("in {}", source.map_or("the manifest", |f| f.source.as_str())))
        }
        _ => anyhow::Error::new(e),
    })?;
    let (Some(http), Some(rpc)) = (node.http_addr(), node.rpc_addr()) else {
        anyhow::bail!("the node started without its front ends");
    };
    let admin = node.http().and_then(|h| h.admin_addr());
    let agent = node.http().and_then(|h| h.agent_addr());
    let expose_metrics = manifest.server.expose_metrics;
    print_banner(&manifest, node.runtime(), (http, rpc, admin, agent), &config, expose_metrics);
    #[cfg(debug_assertions)]
    inject_a_stopped_thread(node.runtime());
    let runtime = std::sync::Arc::clone(node.runtime());
    let stop = wait_for_stop(&signals, || runtime.stopped_thread());
    match stop {
        Stop::Signal(signal) => {
            tracing::info!(signal, "shutting down: finishing requests in flight (grace {grace:?})")
        }
        Stop::ThreadStopped(why) => tracing::error!(
            "{why}: the node cannot serve until it restarts; finishing what it can (grace \
             {grace:?}) and exiting with status 1, for its supervisor to restart it"
        ),
    }
    let report = node.shutdown();
    if report.udp_unanswered > 0 {
        tracing::warn!(
            unanswered = report.udp_unanswered,
            "UDP-RPC requests still running after the grace period"
        );
    }
    tracing::info!("stopped");
    match stop {
        Stop::Signal(_) => Ok(()),
        Stop::ThreadStopped(why) => anyhow::bail!("{why}; restart the node"),
    }
}

/// What `luge serve` prints once it serves: its settings, addresses and functions. Written
/// whole, and a stdout that is gone (`luge serve | head -1`) is ignored: `println!` would panic
/// there and end the node without a drain.
fn print_banner(
    manifest: &Manifest,
    runtime: &Runtime,
    (http, rpc, admin, agent): (SocketAddr, SocketAddr, Option<SocketAddr>, Option<SocketAddr>),
    config: &luge_runtime::RuntimeConfig,
    expose_metrics: bool,
) {
    let mut b = String::new();
    let mode = match config.wait {
        WaitMode::Sleep => "sleep",
        WaitMode::Spin => "spin",
    };
    let _ = writeln!(
        b,
        "luge: serving {} functions — policy {}, {} worker(s), {} dispatcher(s), {} layout, {mode} \
         mode",
        manifest.functions.len(),
        config.policy,
        config.workers,
        config.dispatchers,
        config.effective_layout().name()
    );
    if config.ull_lane {
        let _ = writeln!(
            b,
            "  uLL lane on: class = \"ull\" functions and those estimated ≤ {} µs run first, {} \
             ready sandbox(es) each",
            config.ull_threshold.as_micros(),
            config.ready_sandboxes
        );
    }
    // `/metrics` is on the functions' listener unless the manifest keeps it to the admin one.
    let metrics = if expose_metrics { Some(http) } else { admin };
    let metrics = metrics.map_or(String::new(), |at| format!("   (metrics: http://{at}/metrics)"));
    let _ = writeln!(b, "  HTTP     http://{http}/<route>{metrics}");
    let _ = writeln!(b, "  UDP-RPC  {rpc}");
    match admin {
        Some(admin) => {
            let _ = writeln!(b, "  admin    http://{admin}/admin/functions");
            let _ = writeln!(b, "  status   http://{admin}/admin/status");
        }
        None => {
            let _ = writeln!(b, "  admin    off");
        }
    }
    if let Some(agent) = agent {
        let _ = writeln!(b, "  agent    {agent}   (HAProxy agent-check)");
    }
    for f in &manifest.functions {
        let id = runtime.function(&f.config.name).map_or(0, |g| g.id.0);
        let about = BUILTINS
            .iter()
            .find(|(n, _, _)| f.source == format!("builtin:{n}"))
            .map_or(String::new(), |(_, _, about)| format!(" — {about}"));
        let _ = writeln!(b, "  id {id:>3}  {:<24} {}{about}", f.route, f.config.name);
    }
    for c in &manifest.chains {
        let id = runtime.chain(&c.config.name).map_or(0, |g| g.id.0);
        let stages = c.config.stages.join(" → ");
        let _ = writeln!(b, "  id {id:>3}  {:<24} {} — chain: {stages}", c.route, c.config.name);
    }
    let example =
        manifest.functions.iter().find(|f| f.config.name == "hello").or(manifest.functions.first());
    if let Some(f) = example {
        let _ = writeln!(b, "try:");
        let _ = writeln!(b, "  curl -s --data 'edge' http://{http}{}", f.route);
        let _ = writeln!(
            b,
            "  cargo run --release -p luge -- invoke --rpc {} --data 'edge'",
            f.config.name
        );
    }
    let _ = writeln!(b, "Ctrl-C stops (requests in flight are answered first).");
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(b.as_bytes()).and_then(|()| out.flush());
}
