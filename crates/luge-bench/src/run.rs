//! The entry point: [`run`] a [`RunConfig`] and get a [`Report`].
//!
//! A run: validate the bounds → calibrate `spin` if the mapping needs it (and print the
//! calibration when progress is on) → build the [`Plan`] → start the receiver thread(s) → pace
//! the requests on a thread of its own → drain → summarise.
//!
//! Safety: a run talks only to `target`, is bounded in time (`duration`, plus at most two
//! `timeout`s of lateness and drain) and in count (`max_requests`), and refuses bounds beyond
//! [`MAX_DURATION`], [`MAX_REQUESTS`] and [`MAX_WINDOW`].

use luge_proto::nanos;
use std::hash::{BuildHasher, RandomState};
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use luge_workload::WorkloadSpec;

use crate::calibrate::{self, Calibration, CalibrationOptions};
use crate::cpu_busy::GeneratorCpu;
use crate::drive::{Schedule, Transport, drive};
use crate::error::BenchError;
use crate::http::HttpSetup;
use crate::ledger::Ledger;
use crate::plan::{Mapping, Plan};
use crate::report::Report;
use crate::sample::SampleObserver;
use crate::target::{FunctionRef, Target};
use crate::udp::{self, UdpCaller, UdpTransport};

/// The longest run accepted.
pub const MAX_DURATION: Duration = Duration::from_secs(3_600);
/// The most requests a run may plan.
pub const MAX_REQUESTS: u64 = 100_000_000;
/// The most requests a run may keep as raw samples (≈ 100 B each).
pub const MAX_KEPT_SAMPLES: u64 = 10_000_000;
/// The largest window (requests in flight).
pub const MAX_WINDOW: usize = 65_536;
/// The longest per-request timeout.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Open or closed loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Requests at the workload's arrival times; at most `window` in flight (when full, the
    /// sender waits and the wait counts in the latency).
    Open {
        /// Bound on requests in flight.
        window: usize,
    },
    /// `outstanding` requests always in flight; each completion sends the next at once.
    Closed {
        /// Requests kept in flight.
        outstanding: usize,
    },
}

impl Mode {
    fn window(self) -> usize {
        match self {
            Mode::Open { window } => window,
            Mode::Closed { outstanding } => outstanding,
        }
    }
}

/// Where the `spin` calibration comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum CalibrationMode {
    /// Measure it on the target at the start of the run.
    Measure(CalibrationOptions),
    /// Use this one.
    Given(Calibration),
}

/// Everything a run needs. [`RunConfig::new`] fills in the defaults.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The node and protocol.
    pub target: Target,
    /// The workload (arrivals, executions, classes, deadlines).
    pub workload: WorkloadSpec,
    /// How arrivals become function calls.
    pub mapping: Mapping,
    /// Open or closed loop (default: open, window 1024).
    pub mode: Mode,
    /// Time bound: open loop, arrivals before this; closed loop, sending until this
    /// (default 10 s).
    pub duration: Duration,
    /// Count bound (default 10⁷).
    pub max_requests: u64,
    /// A request unanswered this long after its send is a `timeout` (default 5 s).
    pub timeout: Duration,
    /// `spin` calibration, used by [`Mapping::Spin`] (default: measure).
    pub calibration: CalibrationMode,
    /// Send the nominal execution as the expected execution (default true; the server uses it
    /// only for functions that trust client estimates).
    pub send_expected: bool,
    /// Keep every sample for [`Report::write_csv`] (default false).
    pub keep_samples: bool,
    /// Print the calibration and a progress line to stderr (default false).
    pub progress: bool,
    /// Open loop: busy-wait this long before each intended send time (default 50 µs).
    pub pacing_spin: Duration,
    /// HTTP: receiver threads reading the answers (default 1).
    pub http_threads: usize,
    /// Called with every sample as it is recorded, once per planned request (default none):
    /// statistics the [`Summary`](crate::Summary) does not keep, without `keep_samples`.
    pub observer: Option<SampleObserver>,
}

impl RunConfig {
    /// A configuration with the defaults listed on the fields.
    pub fn new(target: Target, workload: WorkloadSpec, mapping: Mapping) -> Self {
        Self {
            target,
            workload,
            mapping,
            mode: Mode::Open { window: 1024 },
            duration: Duration::from_secs(10),
            max_requests: 10_000_000,
            timeout: Duration::from_secs(5),
            calibration: CalibrationMode::Measure(CalibrationOptions::default()),
            send_expected: true,
            keep_samples: false,
            progress: false,
            pacing_spin: Duration::from_micros(50),
            http_threads: 1,
            observer: None,
        }
    }

    fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            return bad(format!(
                "duration must be in (0, {MAX_DURATION:?}], not {:?}",
                self.duration
            ));
        }
        if self.max_requests == 0 || self.max_requests > MAX_REQUESTS {
            return bad(format!(
                "max requests must be in 1..={MAX_REQUESTS}, not {}",
                self.max_requests
            ));
        }
        if self.keep_samples && self.max_requests > MAX_KEPT_SAMPLES {
            return bad(format!(
                "keeping raw samples is limited to {MAX_KEPT_SAMPLES} requests; lower the count bound"
            ));
        }
        let w = self.mode.window();
        if w == 0 || w > MAX_WINDOW {
            return bad(format!("the window must be in 1..={MAX_WINDOW}, not {w}"));
        }
        if self.timeout.is_zero() || self.timeout > MAX_TIMEOUT {
            return bad(format!("timeout must be in (0, {MAX_TIMEOUT:?}], not {:?}", self.timeout));
        }
        if self.pacing_spin > Duration::from_millis(10) {
            return bad(format!("pacing spin must be ≤ 10 ms, not {:?}", self.pacing_spin));
        }
        Ok(())
    }
}

/// The protocol side of a run.
enum Wire {
    Udp(SocketAddr),
    Http(Box<HttpSetup>),
}

/// A random request-id base in [1, 2⁶²): unique per run, never wrapping to 0 within a run.
fn random_base() -> u64 {
    let x = RandomState::new().hash_one((std::process::id(), SystemTime::now()));
    (x >> 2) | 1
}

/// Measures the `spin` calibration on a target without running a workload.
pub fn calibrate(
    target: &Target,
    spin: &FunctionRef,
    options: CalibrationOptions,
    timeout: Duration,
) -> Result<Calibration, BenchError> {
    match target {
        Target::Rpc(addr) => {
            let mut caller = UdpCaller::new(*addr, random_base(), timeout)?;
            calibrate::measure(&mut caller, spin, options)
        }
        Target::Http { addr, base_path } => {
            let setup = HttpSetup::new(*addr, base_path, 1);
            calibrate::measure(&mut setup.caller(timeout), spin, options)
        }
    }
}

/// Runs a benchmark (see the module documentation).
pub fn run(config: RunConfig) -> Result<Report, BenchError> {
    config.validate()?;
    let window = config.mode.window();
    let closed = matches!(config.mode, Mode::Closed { .. });
    let wire = match &config.target {
        Target::Rpc(addr) => Wire::Udp(*addr),
        Target::Http { addr, base_path } => {
            Wire::Http(Box::new(HttpSetup::new(*addr, base_path, config.http_threads)))
        }
    };
    let calibration = match (&config.mapping, &config.calibration) {
        (Mapping::Spin(spin), CalibrationMode::Measure(opts)) => Some(match &wire {
            Wire::Http(setup) => {
                calibrate::measure(&mut setup.caller(config.timeout), spin, *opts)?
            }
            Wire::Udp(addr) => {
                let mut caller = UdpCaller::new(*addr, random_base(), config.timeout)?;
                calibrate::measure(&mut caller, spin, *opts)?
            }
        }),
        (Mapping::Spin(_), CalibrationMode::Given(c)) => Some(c.clone()),
        _ => None,
    };
    if config.progress
        && let Some(c) = &calibration
    {
        eprintln!("calibration  {c}");
    }
    let horizon = (!closed).then(|| nanos(config.duration));
    let plan = Plan::new(
        &config.workload,
        &config.mapping,
        calibration.as_ref(),
        horizon,
        config.max_requests,
    )?;
    let ledger =
        Arc::new(Ledger::new(window, config.timeout, config.keep_samples, config.observer.clone()));
    let schedule = Schedule {
        closed,
        duration_ns: nanos(config.duration),
        spin_ns: nanos(config.pacing_spin),
    };
    let done = AtomicBool::new(false);

    let mut max_connections = None;
    // The CPUs around the pacing: the sending and the drain (`pace`).
    let generator_cpu = match wire {
        Wire::Udp(addr) => {
            let sock = udp::connect(addr)?;
            let rx = sock.try_clone().map_err(|e| BenchError::io("cloning the UDP socket", e))?;
            let base = random_base();
            let mut transport = UdpTransport::new(sock, base, config.send_expected);
            let receiver = || udp::receive(&rx, base, &ledger, &done);
            let pacing = || {
                pace(&config, &plan, &ledger, &mut transport, schedule, &done, Some(receiver));
            };
            GeneratorCpu::around(pacing).1
        }
        Wire::Http(setup) => {
            let (mut transport, receivers) = setup.transport(
                plan.functions(),
                Arc::clone(&ledger),
                config.timeout,
                config.send_expected,
                window,
            )?;
            let most_open = std::sync::atomic::AtomicUsize::new(0);
            let receiver = || most_open.store(receivers.run(&ledger, &done), Ordering::Relaxed);
            let pacing = || {
                pace(&config, &plan, &ledger, &mut transport, schedule, &done, Some(receiver));
            };
            let cpu = GeneratorCpu::around(pacing).1;
            max_connections = Some(most_open.into_inner());
            cpu
        }
    };

    let (recorder, stray, max_in_flight) = ledger.finish();
    let workload = plan.workload();
    let (summary, samples) =
        recorder.finish(|tag| workload.dist.class_name(tag).map(str::to_owned));
    let mut notes = Vec::new();
    if plan.truncated() {
        notes.push("lognormal truncated at 1 s (X | X ≤ 1 s) for the real runtime".to_owned());
    }
    if let Some(c) = calibration.as_ref().and_then(|c| c.check)
        && c.relative_error().abs() > 0.1
    {
        notes.push(format!(
            "calibration check is off by {:+.1} %: executions are approximate",
            100.0 * c.relative_error()
        ));
    }
    for c in &summary.per_class {
        if let Some(ratio) = c.execution_vs_nominal.p50
            && !(0.8..=1.25).contains(&ratio)
        {
            notes.push(format!(
                "class {} ran {ratio:.2}× its nominal execution (median, as the node reported \
                 it): the calibration, one call at a time, does not describe this load's \
                 conditions, so its slowdowns and deadlines are relative to a nominal size it \
                 did not have",
                c.name.as_deref().map_or_else(|| c.class.to_string(), str::to_owned)
            ));
        }
    }
    if !closed && max_in_flight >= window {
        notes.push(format!(
            "the window of {window} was full at times: requests waited in the client (counted in \
             their latency; see send lag)"
        ));
    }
    if let Some(lag) = summary.send_lag_us.p99
        && !closed
        && lag > 1_000.0
        && max_in_flight < window
    {
        notes.push(format!(
            "the client sent late (send lag p99 {lag:.0} µs): it may have limited this run"
        ));
    }
    if generator_cpu.saturated() {
        notes.push(format!(
            "the load generator's CPUs {:?} were {:.0} % busy: requests may have waited for a CPU \
             in the client (counted in their latency); the client may have limited this run",
            generator_cpu.cpus,
            100.0 * generator_cpu.generator_busy.unwrap_or(0.0)
        ));
    }
    if summary.errors_by_kind.contains_key("unsent") {
        notes.push("the client fell behind its schedule beyond the time bound: unsent requests count as failures".to_owned());
    }
    Ok(Report {
        target: config.target.to_string(),
        protocol: config.target.protocol().to_owned(),
        mode: if closed { "closed" } else { "open" }.to_owned(),
        window,
        workload: workload.to_string(),
        mapping: config.mapping.describe(&config.target),
        calibration,
        duration_s: config.duration.as_secs_f64(),
        timeout_s: config.timeout.as_secs_f64(),
        summary,
        max_in_flight,
        max_connections,
        stray_responses: stray,
        generator_cpu,
        notes,
        samples,
    })
}

/// Sends `plan` through `transport` on a pacing thread, beside `receiver` (the UDP receive
/// loop; HTTP transports receive on their own threads) and the progress line if asked for; when
/// the pacer is done, sets `done` and waits for the others to see it.
fn pace<T: Transport + Send>(
    config: &RunConfig,
    plan: &Plan,
    ledger: &Ledger,
    transport: &mut T,
    schedule: Schedule,
    done: &AtomicBool,
    receiver: Option<impl FnOnce() + Send>,
) {
    thread::scope(|s| {
        let receiver = receiver.map(|r| s.spawn(r));
        let progress =
            config.progress.then(|| s.spawn(|| progress_line(ledger, config.duration, done)));
        let pacer = s.spawn(|| drive(plan, ledger, transport, schedule));
        let _ = pacer.join();
        done.store(true, Ordering::Relaxed);
        if let Some(r) = receiver {
            let _ = r.join();
        }
        if let Some(p) = progress {
            let _ = p.join();
        }
    });
}

/// Prints a progress line to stderr every second until `done` (in place on a terminal).
fn progress_line(ledger: &Ledger, duration: Duration, done: &AtomicBool) {
    let tty = std::io::stderr().is_terminal();
    let start = Instant::now();
    let mut next = Duration::from_secs(1);
    while !done.load(Ordering::Relaxed) {
        thread::sleep(Duration::from_millis(100));
        if start.elapsed() < next {
            continue;
        }
        next += Duration::from_secs(1);
        let line = format!(
            "{:>6.1} / {:.0} s  sent {}  ok {}  failed {}  in flight {}",
            start.elapsed().as_secs_f64(),
            duration.as_secs_f64(),
            ledger.sent.load(Ordering::Relaxed),
            ledger.ok.load(Ordering::Relaxed),
            ledger.failed.load(Ordering::Relaxed),
            ledger.in_flight(),
        );
        if tty {
            eprint!("\r{line}   ");
        } else {
            eprintln!("{line}");
        }
    }
    if tty {
        eprintln!();
    }
}
