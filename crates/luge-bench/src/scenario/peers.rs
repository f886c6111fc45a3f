//! `luge bench peers`: Luge's HTTP front end as `luge serve` ships it, against the HTTP floor
//! and against production servers, each a process of its own as a user starts it, all pinned
//! alike and all driven by one external load generator: wrk (one thread, keep-alive, a closed
//! loop of `--connections` connections, `POST` with an empty body).
//!
//! Servers, each started once; runs interleaved (every trial runs every server once at every
//! connection count, in turn), so a drift of the machine shows in every server's spread alike:
//! - `luge`: `luge serve` with its defaults and the built-in functions, `POST /noop` (a fresh
//!   sandbox per request, admission, scheduling, metrics);
//! - `bare hyper`: `luge bench baseline hyper`, hyper and tokio set up as Luge's HTTP front
//!   end sets them up, answering `ok` with nothing behind it: the floor of Luge's HTTP path;
//! - `nginx`: one worker process answering `return 200` from a generated configuration;
//! - `wasmtime serve`: wasmtime-cli's wasi-http server (the Wasmtime major version Luge pins),
//!   a fresh instance of a no-op handler component per request (`peers/http-noop.wat`, built
//!   with `scripts/peers.sh`).
//!
//! A server whose program is not installed is left out, and the summary says so and how to
//! install it. Ratios are taken trial by trial (Luge ÷ the other server in the same trial) and
//! reported as their median with the range over the trials.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, user_workload};
use super::node::Pinning;
use super::order::in_trial_order;
use super::output::{Results, Table, pct, ratio_range, rps, spread, us};
use super::policies::short_class;
use super::usage::Usage;
use super::{PeersOptions, ScenarioOptions};
use crate::calibrate::{Calibration, CalibrationOptions};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::run::calibrate;

mod wrk_report;

pub(crate) use self::wrk_report::{WrkRun, parse_wrk};
use crate::target::{FunctionRef, Target};

/// How long a server gets to answer its first request after it was started.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a stopped server gets to exit before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The wrk script: every request a `POST` with an empty body (Luge invokes only on `POST`).
const WRK_SCRIPT: &str = "wrk.method = \"POST\"\nwrk.body = \"\"\n";

/// One server compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Server {
    Luge,
    BareHyper,
    Nginx,
    WasmtimeServe,
    /// `wasmtime serve` with the spin handler (the mix).
    WasmtimeSpin,
}

impl Server {
    const ALL: [Server; 4] =
        [Server::Luge, Server::BareHyper, Server::Nginx, Server::WasmtimeServe];

    fn label(self) -> &'static str {
        match self {
            Server::Luge => "luge serve",
            Server::BareHyper => "bare hyper",
            Server::Nginx => "nginx",
            Server::WasmtimeServe => "wasmtime serve",
            Server::WasmtimeSpin => "wasmtime serve (spin)",
        }
    }

    /// The path wrk requests.
    fn path(self) -> &'static str {
        match self {
            Server::Luge => "/noop",
            _ => "/",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Trial {
    server: Server,
    connections: usize,
    trial: usize,
    #[serde(flatten)]
    run: WrkRun,
}

/// One run of the deadline mix against one server.
#[derive(Debug, Clone, Serialize)]
struct MixRun {
    server: Server,
    trial: usize,
    #[serde(flatten)]
    point: Point,
    /// The short class's p99, µs.
    short_p99_us: Option<f64>,
}

/// A server process; stopped (SIGTERM, then SIGKILL) when dropped.
struct Process {
    child: Child,
    what: &'static str,
}

impl Process {
    fn spawn(what: &'static str, mut command: Command) -> Result<Self, BenchError> {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: `prctl` is async-signal-safe and touches nothing of the parent's state; it
        // only asks the kernel to stop the child if the scenario dies without dropping it.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = command
            .spawn()
            .map_err(|e| BenchError::io(format!("cannot start {what} ({command:?})"), e))?;
        Ok(Self { child, what })
    }

    /// Errors if the process has exited.
    fn alive(&mut self) -> Result<(), BenchError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                Err(BenchError::Scenario(format!("{} exited at start: {status}", self.what)))
            }
            Err(e) => Err(BenchError::io(format!("cannot wait for {}", self.what), e)),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: `kill` with a pid of our own child and a valid signal number.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let until = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < until {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running server: its process and address.
struct Running {
    server: Server,
    addr: SocketAddr,
    process: Process,
}

/// Where the servers and wrk run, for the summary's header.
pub(crate) fn describe_pinning(pin: Option<Pinning>) -> String {
    match pin {
        Some(p) => format!(
            "pinned: each server one process with every thread on CPU {} (`taskset`, `--pin \
             worker` and `server` alike), wrk and the deadline mix's load generator on CPU {}",
            p.server, p.client
        ),
        None => "unpinned (`--pin none`)".to_owned(),
    }
}

/// A free loopback port (bound then released: another process could take it in between, which
/// then shows as a server that does not start).
fn free_addr() -> Result<SocketAddr, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::io("cannot find a free port", e))?;
    listener.local_addr().map_err(|e| BenchError::io("cannot find a free port", e))
}

/// `program` on `cpu` (`taskset`) when pinned.
fn pinned(program: &Path, cpu: Option<usize>) -> Command {
    match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpu.to_string()).arg(program);
            c
        }
        None => Command::new(program),
    }
}

/// The status code of `GET path` on `addr`, if it answers within a second.
fn status_of(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 16];
    let n = s.read(&mut head).ok()?;
    let line = std::str::from_utf8(&head[..n]).ok()?;
    line.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}

/// Waits until the server at `addr` answers `GET path` with `200`.
fn wait_ready(process: &mut Process, addr: SocketAddr, path: &str) -> Result<(), BenchError> {
    let until = Instant::now() + START_TIMEOUT;
    loop {
        process.alive()?;
        if status_of(addr, path) == Some(200) {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(BenchError::Scenario(format!(
                "{} did not answer GET {path} on {addr} within {START_TIMEOUT:?}",
                process.what
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The nginx configuration: one worker, no logs, `200` for everything on `addr`, keep-alive
/// without a request limit (as hyper's), every path in `dir`.
fn nginx_config(addr: SocketAddr, dir: &Path) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log stderr error;\nevents {{ worker_connections 1024; }}\nhttp {{\n  \
         access_log off;\n  keepalive_requests 100000000;\n  client_body_temp_path {d}/body;\n  \
         proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fastcgi;\n  \
         uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  server {{\n    \
         listen {addr};\n    location / {{ return 200 \"ok\"; }}\n  }}\n}}\n"
    )
}

/// Why a server cannot run here (its program is missing), or `None`.
fn missing(server: Server, p: &PeersOptions) -> Option<String> {
    match server {
        Server::Luge | Server::BareHyper => None,
        Server::Nginx => match &p.nginx {
            Some(_) => None,
            None => Some("nginx not found (Debian: `apt-get install nginx-light`)".into()),
        },
        Server::WasmtimeSpin => match (&p.wasmtime, &p.spin_component) {
            (Some(_), Some(_)) => None,
            _ => {
                Some("wasmtime serve or its spin handler is not built (`scripts/peers.sh`)".into())
            }
        },
        Server::WasmtimeServe => match (&p.wasmtime, &p.component) {
            (Some(_), Some(_)) => None,
            (None, _) => Some(
                "wasmtime not found (`scripts/peers.sh` builds wasmtime-cli into target/peers)"
                    .into(),
            ),
            (_, None) => {
                Some("the wasi-http no-op component is not built (`scripts/peers.sh`)".into())
            }
        },
    }
}

/// Starts `server` pinned to `cpu` and waits until it answers; nginx keeps its configuration
/// and scratch files in `scratch`.
fn start(
    server: Server,
    p: &PeersOptions,
    cpu: Option<usize>,
    scratch: &Path,
) -> Result<Running, BenchError> {
    let addr = free_addr()?;
    let (command, probe) = match server {
        Server::Luge => {
            let rpc = free_addr()?;
            let mut c = pinned(&p.luge, cpu);
            c.arg("serve").arg("--http").arg(addr.to_string());
            c.arg("--rpc").arg(rpc.to_string()).arg("--admin").arg("off");
            (c, "/readyz")
        }
        Server::BareHyper => {
            let mut c = pinned(&p.luge, cpu);
            c.args(["bench", "baseline", "hyper", "--addr"]).arg(addr.to_string());
            (c, "/")
        }
        Server::Nginx => {
            let dir = scratch.join("nginx");
            std::fs::create_dir_all(&dir).map_err(|e| BenchError::io("nginx scratch dir", e))?;
            let conf = dir.join("nginx.conf");
            std::fs::write(&conf, nginx_config(addr, &dir))
                .map_err(|e| BenchError::io("nginx configuration", e))?;
            let program = p.nginx.as_deref().unwrap_or(Path::new("nginx"));
            let mut c = pinned(program, cpu);
            c.arg("-p").arg(&dir).arg("-c").arg(&conf);
            (c, "/")
        }
        Server::WasmtimeServe | Server::WasmtimeSpin => {
            let component =
                if server == Server::WasmtimeSpin { &p.spin_component } else { &p.component };
            let (Some(wasmtime), Some(component)) = (&p.wasmtime, component) else {
                return Err(BenchError::Config("wasmtime serve is not installed".into()));
            };
            let mut c = pinned(wasmtime, cpu);
            c.arg("serve").arg("--addr").arg(addr.to_string()).arg(component);
            (c, "/")
        }
    };
    let mut process = Process::spawn(server.label(), command)?;
    wait_ready(&mut process, addr, probe)?;
    Ok(Running { server, addr, process })
}

/// One wrk run against `server`.
fn wrk(
    p: &PeersOptions,
    script: &Path,
    server: &Running,
    connections: usize,
    duration: Duration,
    cpu: Option<usize>,
) -> Result<WrkRun, BenchError> {
    let mut c = pinned(&p.wrk, cpu);
    let secs = duration.as_secs().max(1);
    c.args(["-t1", "--latency", "-c"]).arg(connections.to_string());
    c.arg("-d").arg(format!("{secs}s")).arg("-s").arg(script);
    c.arg(format!("http://{}{}", server.addr, server.server.path()));
    let pid = server.process.child.id();
    let before = Usage::of_process(pid);
    let out = c.output().map_err(|e| BenchError::io(format!("cannot run wrk ({c:?})"), e))?;
    let after = Usage::of_process(pid);
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError::Scenario(format!(
            "wrk failed ({}): {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let mut run = parse_wrk(&text)
        .ok_or_else(|| BenchError::Scenario(format!("cannot read wrk's report:\n{text}")))?;
    if let (Some(b), Some(a)) = (before, after)
        && let Some((cpu, switches)) = a.per_request(&b, run.requests)
    {
        (run.cpu_us, run.switches) = (Some(cpu), Some(switches));
    }
    Ok(run)
}

pub(crate) fn run(
    p: &PeersOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let duration = opts.duration_or(p.duration, Duration::from_secs(1), Duration::from_secs(5));
    let trials = p.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    out.write("post.lua", WRK_SCRIPT)?;
    let script = out.dir().join("post.lua");
    let (server_cpu, client_cpu) = (pin.map(|p| p.server), pin.map(|p| p.client));
    let mut absent: Vec<(Server, String)> = Vec::new();
    let mut running = Vec::new();
    for server in Server::ALL {
        match missing(server, p) {
            Some(why) => {
                opts.say(format!("peers: {} left out: {why}", server.label()));
                absent.push((server, why));
            }
            None => {
                let r = start(server, p, server_cpu, out.dir())?;
                opts.say(format!("peers: {} listening on {}", server.label(), r.addr));
                running.push(r);
            }
        }
    }
    let mut results: Vec<Trial> = Vec::new();
    for trial in 0..trials {
        for &connections in &p.connections {
            for server in in_trial_order(trial, &running) {
                let run = wrk(p, &script, server, connections, duration, client_cpu)?;
                opts.say(format!(
                    "peers: trial {}/{trials} {} at {connections} connections: {} /s, p50 {} µs, \
                     p99 {} µs, {} µs CPU per request{}",
                    trial + 1,
                    server.server.label(),
                    rps(run.rps),
                    us(Some(run.p50_us)),
                    us(Some(run.p99_us)),
                    us(run.cpu_us),
                    if run.errors > 0 { format!(", {} errors", run.errors) } else { String::new() },
                ));
                results.push(Trial { server: server.server, connections, trial, run });
            }
        }
    }
    // The deadline mix: Luge's `spin` and the spin handler under `wasmtime serve`.
    // Luge stays up for it; the other servers stop now.
    running.retain(|r| r.server == Server::Luge);
    let mut mix_servers: Vec<(Server, SocketAddr)> =
        running.iter().map(|r| (r.server, r.addr)).collect();
    let spin_peer = match missing(Server::WasmtimeSpin, p) {
        Some(why) => {
            absent.push((Server::WasmtimeSpin, why));
            None
        }
        None => Some(start(Server::WasmtimeSpin, p, server_cpu, out.dir())?),
    };
    if let Some(peer) = &spin_peer {
        mix_servers.push((peer.server, peer.addr));
    }
    let mix_duration = duration * 2;
    let (calibration, mix_runs) = mix(p, opts, &mix_servers, trials, mix_duration)?;
    drop(spin_peer);
    drop(running);
    let mut summary = render(&results, &p.connections, &absent, duration, trials);
    // Which wasmtime ran (a `--wasmtime` or one on the PATH may not be the version Luge pins).
    let wasmtime = p.wasmtime.as_ref().map(|w| version_of(w));
    if let Some(v) = &wasmtime {
        let _ = writeln!(
            summary,
            "
`wasmtime serve`: {v}"
        );
    }
    summary.push_str(&render_mix(&mix_runs, p, &calibration, mix_duration));
    let report = json!({
        "wasmtime_version": wasmtime,
        "duration_s": duration.as_secs_f64(),
        "trials": trials,
        "left_out": absent.iter().map(|(s, why)| json!({"server": s, "why": why})).collect::<Vec<_>>(),
        "results": results,
        "mix": {
            "workload": p.mix_workload,
            "load": p.mix_load,
            "duration_s": mix_duration.as_secs_f64(),
            "calibration": calibration,
            "results": mix_runs,
        },
    });
    Ok((summary, report))
}

/// What `program --version` prints (its first line), or why it could not be asked.
fn version_of(program: &Path) -> String {
    match std::process::Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            text.lines().next().unwrap_or("").trim().to_owned()
        }
        Ok(out) => format!("{} --version failed ({})", program.display(), out.status),
        Err(e) => format!("{} --version failed: {e}", program.display()),
    }
}

/// `p.mix_workload` open-loop at `p.mix_load` of one core against each server, `trials` times
/// interleaved, `spin` calibrated once on Luge (the first server) so that every server gets the
/// same iteration counts. A request meets its deadline when its answer is a 2xx within it,
/// as the client measures it (the peer has no deadlines of its own).
fn mix(
    p: &PeersOptions,
    opts: &ScenarioOptions,
    servers: &[(Server, SocketAddr)],
    trials: usize,
    duration: Duration,
) -> Result<(Calibration, Vec<MixRun>), BenchError> {
    let spec = user_workload(&p.mix_workload, opts.seed)?;
    let spin = FunctionRef::new(0, "/spin");
    let Some(&(_, luge)) = servers.first() else {
        return Err(BenchError::Scenario("the mix needs Luge to calibrate on".into()));
    };
    let timeout = Duration::from_secs(5);
    let calibration =
        calibrate(&Target::http(luge), &spin, CalibrationOptions::default(), timeout)?;
    opts.say(format!("peers: calibration {calibration}"));
    let mut runs = Vec::new();
    for trial in 0..trials {
        for &(server, addr) in in_trial_order(trial, servers) {
            let driver = Driver {
                target: Target::http(addr),
                mapping: Mapping::Spin(spin.clone()),
                workload: spec.clone(),
                timeout,
                calibration: Some(calibration.clone()),
                window: 4096,
                keep_samples: false,
            };
            let report = driver.at_load(p.mix_load, duration)?;
            let short_p99_us =
                short_class(&report.summary.per_class).and_then(|c| c.latency_us.p99);
            let point = Point::of(&report);
            opts.say(format!(
                "peers: mix trial {}/{trials} {}: deadlines met {} %, short p99 {} µs, {} /s",
                trial + 1,
                server.label(),
                pct(1.0 - point.deadline_miss_rate),
                us(short_p99_us),
                rps(point.throughput_rps),
            ));
            runs.push(MixRun { server, trial, point, short_p99_us });
        }
    }
    Ok((calibration, runs))
}

/// The mix's table: deadlines met, short p99 and throughput per server, Luge ÷ the peer.
fn render_mix(
    runs: &[MixRun],
    p: &PeersOptions,
    calibration: &Calibration,
    duration: Duration,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "\n`{}` at {} of one core, open loop (Poisson), {:.0} s per trial, `spin` calibrated on \
         Luge ({calibration}); met = a 2xx within the request's deadline as the client sees it.\n",
        p.mix_workload,
        p.mix_load,
        duration.as_secs_f64()
    );
    let mut table = Table::new(&[
        "server",
        ">deadlines met (%)",
        ">short p99 (µs)",
        ">answered (/s)",
        "Luge ÷ it, met",
    ]);
    let met = |r: &MixRun| 1.0 - r.point.deadline_miss_rate;
    let luge: Vec<&MixRun> = runs.iter().filter(|r| r.server == Server::Luge).collect();
    for server in [Server::Luge, Server::WasmtimeSpin] {
        let of: Vec<&MixRun> = runs.iter().filter(|r| r.server == server).collect();
        if of.is_empty() {
            continue;
        }
        let mut shares: Vec<f64> = of.iter().map(|r| met(r)).collect();
        // An infinite p99 (over 1 % of the class failed) is a failed trial, not a missing one.
        let mut short: Vec<f64> =
            of.iter().map(|r| r.short_p99_us.unwrap_or(f64::INFINITY)).collect();
        let mut rates: Vec<f64> = of.iter().map(|r| r.point.throughput_rps).collect();
        let versus = if server == Server::Luge {
            "-".to_owned()
        } else {
            let mut v: Vec<f64> = luge
                .iter()
                .filter_map(|l| {
                    let o = of.iter().find(|o| o.trial == l.trial)?;
                    Some(if met(o) > 0.0 { met(l) / met(o) } else { f64::INFINITY })
                })
                .collect();
            ratio_spread(&mut v)
        };
        table.row(vec![
            server.label().to_owned(),
            spread(&mut shares).map_or("-".into(), |m| pct(m.0)),
            us(spread(&mut short).map(|m| m.0)),
            spread(&mut rates).map_or("-".into(), |m| rps(m.0)),
            versus,
        ]);
    }
    md.push_str(&table.render());
    let _ = writeln!(md, "\nGoal (issue #17): ≥ 10× `wasmtime serve`'s share of deadlines met.");
    md
}

/// `median [min–max]` of the ratios `v`.
fn ratio_spread(v: &mut [f64]) -> String {
    match spread(v) {
        None if v.is_empty() => "-".into(),
        s => ratio_range(s),
    }
}

/// Luge ÷ `other`, trial by trial, of `f`.
fn paired(results: &[Trial], c: usize, other: Server, f: impl Fn(&WrkRun) -> f64) -> Vec<f64> {
    let of = |server: Server, trial: usize| {
        results.iter().find(|t| t.server == server && t.connections == c && t.trial == trial)
    };
    results
        .iter()
        .filter(|t| t.server == Server::Luge && t.connections == c)
        .filter_map(|l| Some((l, of(other, l.trial)?)))
        .filter(|(_, o)| f(&o.run) > 0.0)
        .map(|(l, o)| f(&l.run) / f(&o.run))
        .collect()
}

/// The summary: per connection count, every server's medians and Luge ÷ it.
fn render(
    results: &[Trial],
    connections: &[usize],
    absent: &[(Server, String)],
    duration: Duration,
    trials: usize,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "HTTP no-op, wrk -t1 -c N -d {}s (keep-alive, closed loop), {trials} interleaved trials; \
         medians, [range over the trials]. CPU and switches: every thread of the server process, \
         per answered request. Ratios are Luge ÷ the server, trial by trial.\n",
        duration.as_secs().max(1)
    );
    let mut table = Table::new(&[
        ">connections",
        "server",
        ">req/s",
        ">p50 (µs)",
        ">p99 (µs)",
        ">CPU/req (µs)",
        ">switches/req",
        ">errors",
        "Luge ÷ it, req/s",
        "Luge ÷ it, p99",
    ]);
    for &c in connections {
        for server in Server::ALL {
            let runs: Vec<&Trial> =
                results.iter().filter(|t| t.server == server && t.connections == c).collect();
            if runs.is_empty() {
                continue;
            }
            let mut rates: Vec<f64> = runs.iter().map(|t| t.run.rps).collect();
            let mut p50: Vec<f64> = runs.iter().map(|t| t.run.p50_us).collect();
            let mut p99: Vec<f64> = runs.iter().map(|t| t.run.p99_us).collect();
            let mut cpu: Vec<f64> = runs.iter().filter_map(|t| t.run.cpu_us).collect();
            let mut switches: Vec<f64> = runs.iter().filter_map(|t| t.run.switches).collect();
            let rate = match spread(&mut rates) {
                Some((m, lo, hi)) if runs.len() > 1 => {
                    format!("{} [{}–{}]", rps(m), rps(lo), rps(hi))
                }
                Some((m, _, _)) => rps(m),
                None => "-".into(),
            };
            let (ratio_rate, ratio_p99) = if server == Server::Luge {
                ("-".to_owned(), "-".to_owned())
            } else {
                (
                    ratio_spread(&mut paired(results, c, server, |r| r.rps)),
                    ratio_spread(&mut paired(results, c, server, |r| r.p99_us)),
                )
            };
            table.row(vec![
                c.to_string(),
                server.label().to_owned(),
                rate,
                us(spread(&mut p50).map(|s| s.0)),
                us(spread(&mut p99).map(|s| s.0)),
                us(spread(&mut cpu).map(|s| s.0)),
                spread(&mut switches).map_or("-".into(), |s| format!("{:.2}", s.0)),
                runs.iter().map(|t| t.run.errors).sum::<u64>().to_string(),
                ratio_rate,
                ratio_p99,
            ]);
        }
    }
    md.push_str(&table.render());
    for (server, why) in absent {
        let _ = writeln!(md, "\n{} left out: {why}.", server.label());
    }
    let _ = writeln!(
        md,
        "\nGoals (issue #17): Luge ≥ 0.85× bare hyper's req/s at 16 and 64 connections with p99 \
         ≤ 1.3× hyper's; ≥ 2× wasmtime serve's req/s at ≤ 0.5× its p99."
    );
    md
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_programs_version_or_why_not() {
        let v = version_of(Path::new("/bin/true"));
        assert!(!v.is_empty() && !v.contains("failed"), "{v}");
        assert!(version_of(Path::new("/nonexistent/wasmtime")).contains("failed"));
    }

    #[test]
    fn ratios_pair_trials() {
        let t = |server, trial, rps| Trial {
            server,
            connections: 16,
            trial,
            run: WrkRun { rps, p50_us: 1.0, p99_us: 2.0, ..WrkRun::default() },
        };
        let results = vec![
            t(Server::Luge, 0, 50.0),
            t(Server::BareHyper, 0, 100.0),
            t(Server::Luge, 1, 90.0),
            t(Server::BareHyper, 1, 100.0),
        ];
        let mut r = paired(&results, 16, Server::BareHyper, |r| r.rps);
        assert_eq!(r, vec![0.5, 0.9]);
        assert_eq!(ratio_spread(&mut r), "0.70× [0.50×–0.90×]");
        assert!(paired(&results, 64, Server::BareHyper, |r| r.rps).is_empty());
    }
}
