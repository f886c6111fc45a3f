//! The runtime against bare baselines measured in the same run (every number is a
//! ratio to a baseline on the same machine at the same time).
//!
//! - `sandbox/{noop,echo_1k}`: one sandbox's life (store, instantiate, run `_start`, drop)
//!   through the runtime's own sandbox future on the bench thread (`Runtime::run_here`: Luge's
//!   store data, memory limiter, epoch callback and WASI layer, `instantiate_async` +
//!   `call_async` polled with a no-op waker) against a plain sync `instantiate` + `call` on the
//!   same `Engine` with a minimal WASI `fd_read`/`fd_write`. Both pre-link with an
//!   `InstancePre`, as the registry does.
//! - `roundtrip/{spin,sleep}`: `submit` → outcome callback of `noop` through a 1-dispatcher,
//!   1-worker runtime, against a bare hand-off of a boxed job to one worker thread and back
//!   (`handoff`, empty job; `handoff_sync_noop`, the job runs the bare sync noop sandbox) with
//!   the same wait mode: spin-polling, or park/unpark with a "sleeping" flag like `notify.rs`.
//! - `preempt`: a custom loop (not criterion): an urgent `noop` submitted while a long `spin`
//!   runs on the only worker (SledgeScale preempts it), against the same urgent `noop` on the
//!   idle runtime; p50/p90/p99 and their ratios.
//!
//! Runtimes use `Layout::Threads` (a dispatcher thread and a worker thread), unpinned. Spin mode
//! spins the client, the dispatcher and the worker: on fewer than three free cores it measures
//! the OS scheduler (see `docs/benchmarks.md`); criterion's test mode skips it.
//!
//! The bench also runs the same functions through the runtime's workers and prints their own
//! `Timing::executed`, which adds the worker's bookkeeping and the cache misses of a worker
//! that parked between requests.
//!
//! Run: `cargo bench -p luge-runtime --bench runtime -- --warm-up-time 1 --measurement-time 2
//! --noplot`; the ratios are printed at the end (also `python3 scripts/bench-ratios.py`).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)] // bench: a panic is the report

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use crossbeam_queue::ArrayQueue;
use luge_runtime::{FunctionConfig, Outcome, Runtime, RuntimeConfig, SubmitOptions, WaitMode};
use wasmtime::{Engine, Module};

#[path = "common/bare.rs"]
mod bare;
mod common;

use common::{LongSpin, runtime};

const NOOP: &str = include_str!("../../../functions/builtin/noop.wat");
const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");
/// A function with a C program's memory (wasi-libc modules start with five pages) that writes
/// one word: what the pool's reset costs beside the work.
const FIVE_PAGES: &str = r#"(module
  (memory (export "memory") 5)
  (func (export "_start") (i32.store (i32.const 70000) (i32.const 1))))"#;

/// A C program's memory with its data: five pages, ~600 bytes of data segment at 1024 (as
/// wasi-libc lays out its statics), one word written in the data and one in the heap — what
/// the copy-on-write image against copying the data in is about (`luge_copy_init`).
const DATA_SEGMENT: &str = r#"(module
  (memory (export "memory") 5)
  (data (i32.const 1024) "static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes as wasi-libc lays them out; static data of a C program, about six hundred bytes.")
  (func (export "_start")
    (i32.store (i32.const 1024) (i32.add (i32.load (i32.const 1028)) (i32.const 1)))
    (i32.store (i32.const 70000) (i32.const 1))))"#;

fn module(engine: &Engine, wat: &str) -> Module {
    Module::new(engine, wat::parse_str(wat).unwrap()).unwrap()
}

// ------------------------------------------------------------------------------------------
// Waiting: the client's wait for an answer, and a copy of `src/notify.rs` for the hand-off.
// ------------------------------------------------------------------------------------------

/// One client waiting for one answer at a time; identical for Luge and the baselines.
struct Done {
    flag: AtomicBool,
    client: Thread,
    mode: WaitMode,
}

impl Done {
    fn new(mode: WaitMode) -> Arc<Self> {
        Arc::new(Self { flag: AtomicBool::new(false), client: std::thread::current(), mode })
    }

    fn signal(&self) {
        self.flag.store(true, Ordering::Release);
        if self.mode == WaitMode::Sleep {
            self.client.unpark();
        }
    }

    fn wait(&self) {
        while !self.flag.swap(false, Ordering::Acquire) {
            match self.mode {
                WaitMode::Spin => std::hint::spin_loop(),
                WaitMode::Sleep => std::thread::park(),
            }
        }
    }
}

/// `notify.rs`: unpark only when the consumer says it sleeps; or pure busy-polling.
#[derive(Default)]
struct Notify {
    thread: OnceLock<Thread>,
    sleeping: AtomicBool,
}

impl Notify {
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && self.sleeping.swap(false, Ordering::AcqRel)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }

    fn wait(&self, mode: WaitMode, has_work: impl Fn() -> bool) {
        match mode {
            WaitMode::Spin => {
                while !has_work() {
                    std::hint::spin_loop();
                }
            }
            WaitMode::Sleep => {
                self.sleeping.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if !has_work() {
                    std::thread::park();
                }
                self.sleeping.store(false, Ordering::Relaxed);
            }
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// One worker thread taking boxed jobs from a bounded lock-free queue (as a Luge worker takes
/// tasks from its inbox).
struct Handoff {
    shared: Arc<(ArrayQueue<Job>, Notify, AtomicBool)>,
    thread: Option<JoinHandle<()>>,
}

impl Handoff {
    fn start(mode: WaitMode) -> Self {
        let shared =
            Arc::new((ArrayQueue::<Job>::new(4), Notify::default(), AtomicBool::new(false)));
        let me = Arc::clone(&shared);
        let thread = std::thread::spawn(move || {
            let (queue, notify, stop) = &*me;
            let _ = notify.thread.set(std::thread::current());
            loop {
                if let Some(job) = queue.pop() {
                    job();
                    continue;
                }
                if stop.load(Ordering::Acquire) {
                    return;
                }
                notify.wait(mode, || !queue.is_empty() || stop.load(Ordering::Acquire));
            }
        });
        while shared.1.thread.get().is_none() {
            std::thread::yield_now();
        }
        Self { shared, thread: Some(thread) }
    }

    fn submit(&self, job: Job) {
        let mut job = job;
        while let Err(back) = self.shared.0.push(job) {
            job = back;
            std::thread::yield_now();
        }
        self.shared.1.notify();
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        self.shared.2.store(true, Ordering::Release);
        self.shared.1.notify();
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

// ------------------------------------------------------------------------------------------
// Runtime helpers.
// ------------------------------------------------------------------------------------------

fn register(rt: &Runtime, name: &str, wat: &str, tune: impl FnOnce(&mut FunctionConfig)) {
    let mut config = FunctionConfig::new(name);
    tune(&mut config);
    rt.register(config, wat.as_bytes()).unwrap();
}

/// Submits one request and waits for its outcome with `done` (the client's wait mode).
fn call(
    rt: &Runtime,
    name: &str,
    payload: Vec<u8>,
    options: SubmitOptions,
    done: &Arc<Done>,
) -> Outcome {
    let slot = Arc::new(Mutex::new(None));
    let (fill, signal) = (Arc::clone(&slot), Arc::clone(done));
    rt.submit_with(name, payload, options, move |o| {
        *fill.lock().unwrap() = Some(o);
        signal.signal();
    });
    done.wait();
    slot.lock().unwrap().take().unwrap()
}

fn kib() -> Vec<u8> {
    (0..1024u32).map(|i| (i * 7) as u8).collect()
}

// ------------------------------------------------------------------------------------------
// Results kept for the final ratio report: (group, param) → function → ran in this run.
// ------------------------------------------------------------------------------------------

static RAN: Mutex<BTreeMap<(String, String), Vec<String>>> = Mutex::new(BTreeMap::new());

fn ran(group: &str, param: &str, function: &str) {
    let mut ran = RAN.lock().unwrap();
    let list = ran.entry((group.into(), param.into())).or_default();
    if !list.iter().any(|f| f == function) {
        list.push(function.into());
    }
}

/// Notes printed after the ratios (the runtime's own measurement of the same sandboxes).
static NOTES: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1]
}

// ------------------------------------------------------------------------------------------
// Benches.
// ------------------------------------------------------------------------------------------

fn sandbox(c: &mut Criterion) {
    // Luge's path is the runtime's own sandbox future (`Runtime::run_here`: the future a worker
    // polls, on this thread); the baseline runs on the very same `Engine`.
    let rt = runtime(WaitMode::Sleep);
    // The same runtime resetting each pool slot by zeroing all of its low resident memory, as
    // Wasmtime does without `PAGEMAP_SCAN` (`RuntimeConfig::pagemap_scan`): `luge_memset`.
    let memset_rt =
        Runtime::start(RuntimeConfig { pagemap_scan: false, ..rt.config().clone() }).unwrap();
    // The same runtime starting each sandbox's memory by copying the data segments in, not by
    // mapping a copy-on-write image (`RuntimeConfig::memory_init_cow`): `luge_copy_init`.
    let copy_rt =
        Runtime::start(RuntimeConfig { memory_init_cow: false, ..rt.config().clone() }).unwrap();
    let bare_linker = bare::linker(rt.engine());
    let mut group = c.benchmark_group("sandbox");
    let cases = [
        ("noop", NOOP, Vec::new()),
        ("echo_1k", ECHO, kib()),
        ("5_pages", FIVE_PAGES, Vec::new()),
        ("data_seg", DATA_SEGMENT, Vec::new()),
    ];
    for (param, wat, payload) in &cases {
        register(&rt, param, wat, |_| {});
        register(&memset_rt, param, wat, |_| {});
        register(&copy_rt, param, wat, |_| {});
        let luge = rt.function(param).unwrap();
        let memset = memset_rt.function(param).unwrap();
        let copy = copy_rt.function(param).unwrap();
        let bare = bare_linker.instantiate_pre(&module(rt.engine(), wat)).unwrap();
        // Premise: both paths really run the function (echo answers its input).
        assert_eq!(&rt.run_here(&luge, payload.clone()).unwrap(), payload);
        assert_eq!(&bare::run(&bare, payload.clone()), payload);
        group.bench_function(BenchmarkId::new("luge_async", param), |b| {
            ran("sandbox", param, "luge_async");
            b.iter(|| black_box(rt.run_here(&luge, payload.clone()).unwrap()))
        });
        group.bench_function(BenchmarkId::new("luge_memset", param), |b| {
            ran("sandbox", param, "luge_memset");
            b.iter(|| black_box(memset_rt.run_here(&memset, payload.clone()).unwrap()))
        });
        group.bench_function(BenchmarkId::new("luge_copy_init", param), |b| {
            ran("sandbox", param, "luge_copy_init");
            b.iter(|| black_box(copy_rt.run_here(&copy, payload.clone()).unwrap()))
        });
        // A uLL request in a ready sandbox (after HORSE §1–2's warm sandboxes): the build happens
        // before the timed region, as a worker builds it while idle; the request and the sandbox's
        // drop are timed, as on the worker.
        group.bench_function(BenchmarkId::new("luge_ready", param), |b| {
            ran("sandbox", param, "luge_ready");
            b.iter_batched(
                || rt.prepare_here(&luge).unwrap(),
                |ready| black_box(rt.run_here_in(&luge, payload.clone(), Some(ready)).unwrap()),
                // At most 32 built at once: each holds a pool slot.
                criterion::BatchSize::NumIterations(32),
            )
        });
        group.bench_function(BenchmarkId::new("bare_sync", param), |b| {
            ran("sandbox", param, "bare_sync");
            b.iter(|| black_box(bare::run(&bare, payload.clone())))
        });
    }
    drop(rt);
    drop(memset_rt);
    drop(copy_rt);
    group.finish();
    if RAN.lock().unwrap().keys().any(|(g, _)| g == "sandbox") {
        // The runtime's own measurement of the same sandboxes (instantiate + run + drop, on its
        // worker), to check the copy above against the real thing.
        let rt = runtime(WaitMode::Sleep);
        let done = Done::new(WaitMode::Sleep);
        for (param, wat, payload) in &cases {
            register(&rt, param, wat, |_| {});
            let mut executed = Vec::new();
            let (warm, n) = if bench_mode() { (200, 2000) } else { (2, 10) };
            for i in 0..warm + n {
                let o = call(&rt, param, payload.clone(), SubmitOptions::default(), &done);
                assert_eq!(o.result.as_ref().unwrap(), payload);
                if i >= warm {
                    executed.push(o.timing.executed);
                }
            }
            NOTES.lock().unwrap().push(format!(
                "sandbox/{param}: the runtime's own Timing::executed (worker thread, {n} \
                 requests), median {:.0} ns",
                median(executed).as_nanos() as f64
            ));
        }
    }
}

fn roundtrip(c: &mut Criterion) {
    let engine_owner = runtime(WaitMode::Sleep);
    let engine = engine_owner.engine().clone();
    let bare_noop =
        Arc::new(bare::linker(&engine).instantiate_pre(&module(&engine, NOOP)).unwrap());
    let mut group = c.benchmark_group("roundtrip");
    for (param, mode) in [("sleep", WaitMode::Sleep), ("spin", WaitMode::Spin)] {
        if mode == WaitMode::Spin && !bench_mode() {
            // `cargo test --all-targets`: no spinning threads in parallel tests: a spinning server
            // would starve the other tests on a small box.
            continue;
        }
        let done = Done::new(mode);
        {
            // Luge: the runtime exists only while its own bench runs (in spin mode its
            // dispatcher and worker each burn a core).
            let rt = runtime(mode);
            register(&rt, "noop", NOOP, |_| {});
            assert!(call(&rt, "noop", Vec::new(), SubmitOptions::default(), &done).is_ok());
            let failures = Arc::new(AtomicUsize::new(0));
            group.bench_function(BenchmarkId::new("luge", param), |b| {
                ran("roundtrip", param, "luge");
                b.iter(|| {
                    let (signal, failures) = (Arc::clone(&done), Arc::clone(&failures));
                    rt.submit_with("noop", Vec::new(), SubmitOptions::default(), move |o| {
                        if !o.is_ok() {
                            failures.fetch_add(1, Ordering::Relaxed);
                        }
                        signal.signal();
                    });
                    done.wait();
                })
            });
            assert_eq!(failures.load(Ordering::Relaxed), 0, "some requests failed");
            drop(rt);
        }
        let handoff = Handoff::start(mode);
        group.bench_function(BenchmarkId::new("handoff", param), |b| {
            ran("roundtrip", param, "handoff");
            b.iter(|| {
                let signal = Arc::clone(&done);
                handoff.submit(Box::new(move || signal.signal()));
                done.wait();
            })
        });
        group.bench_function(BenchmarkId::new("handoff_sync_noop", param), |b| {
            ran("roundtrip", param, "handoff_sync_noop");
            b.iter(|| {
                let (signal, pre) = (Arc::clone(&done), Arc::clone(&bare_noop));
                handoff.submit(Box::new(move || {
                    black_box(bare::run(&pre, Vec::new()));
                    signal.signal();
                }));
                done.wait();
            })
        });
        drop(handoff);
    }
    group.finish();
}

/// Preemption latency: custom loop, p50/p99, ratio to the idle runtime.
fn preempt(samples: usize) {
    let rt = runtime(WaitMode::Sleep);
    LongSpin::register(&rt);
    register(&rt, "noop", NOOP, |c| c.expected_execution = Some(Duration::from_micros(50)));
    let done = Done::new(WaitMode::Sleep);
    let urgent = SubmitOptions { deadline: Some(Duration::from_millis(10)), ..Default::default() };
    // Same gap between samples in both runs: lets the long request resume before the next one.
    let gap = Duration::from_millis(2);
    let measure = |rt: &Runtime| {
        let (mut wall, mut total, mut queued) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            std::thread::sleep(gap);
            let t0 = Instant::now();
            let o = call(rt, "noop", Vec::new(), urgent, &done);
            wall.push(t0.elapsed());
            assert!(o.is_ok(), "urgent request failed: {:?}", o.result);
            total.push(o.timing.total);
            queued.push(o.timing.queued);
        }
        [wall, total, queued]
    };
    for _ in 0..50 {
        call(&rt, "noop", Vec::new(), urgent, &done);
    }
    let mut idle = measure(&rt);
    let long = LongSpin::start(&rt);
    let mut busy = measure(&rt);
    let long = long.end(rt);
    // Premise: every urgent request really preempted the long one.
    assert!(
        long.timing.preemptions as usize >= samples,
        "only {} preemptions for {samples} urgent requests",
        long.timing.preemptions
    );
    println!();
    println!(
        "preempt: urgent noop (deadline 10 ms) while spin(10^11) runs on the only worker vs on \
         the idle runtime; SledgeScale, 1 dispatcher + 1 worker thread (Layout::Threads), \
         sleep mode, {samples} samples each, {} preemptions of the long request",
        long.timing.preemptions
    );
    println!("{:<30} {:>4} {:>11} {:>11} {:>10}", "measure", "", "idle", "busy", "busy/idle");
    let names = ["client wall (submit→callback)", "Timing::total", "Timing::queued"];
    for (i, name) in names.iter().enumerate() {
        for (label, p) in [("p50", 0.50), ("p90", 0.90), ("p99", 0.99)] {
            let (a, b) = (pct(&mut idle[i], p), pct(&mut busy[i], p));
            println!(
                "{name:<30} {label:>4} {:>9.1}µs {:>9.1}µs {:>9.2}×",
                us(a),
                us(b),
                b.as_secs_f64() / a.as_secs_f64()
            );
        }
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

// ------------------------------------------------------------------------------------------
// Ratio report from criterion's estimates of this run.
// ------------------------------------------------------------------------------------------

fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("criterion");
    }
    // target/release/deps/runtime-<hash> → target/criterion
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|t| t.join("criterion")))
        .unwrap_or_else(|| PathBuf::from("target/criterion"))
}

/// The median point estimate of criterion's `estimates.json` (no JSON parser needed).
fn median_ns(group: &str, function: &str, param: &str) -> Option<f64> {
    let path = criterion_dir().join(group).join(function).join(param).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let after = &text[text.find("\"median\"")?..];
    let after = &after[after.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    let end = after.find([',', '}'])?;
    after[..end].trim().parse().ok()
}

fn report() {
    let ran = RAN.lock().unwrap();
    if ran.is_empty() {
        return;
    }
    println!();
    println!(
        "{:<10} {:<8} {:<18} {:>11}  ratio to the baselines",
        "group", "case", "function", "median ns"
    );
    for ((group, param), functions) in ran.iter() {
        let medians: Vec<(String, f64)> = functions
            .iter()
            .filter_map(|f| median_ns(group, f, param).map(|m| (f.clone(), m)))
            .collect();
        let baselines: &[&str] = match group.as_str() {
            "sandbox" => &["bare_sync", "luge_async"],
            _ => &["handoff", "handoff_sync_noop"],
        };
        for (f, m) in &medians {
            let ratios: Vec<String> = medians
                .iter()
                .filter(|(b, _)| b != f && baselines.contains(&b.as_str()))
                .map(|(b, t)| format!("{:.2}× {b}", m / t))
                .collect();
            println!("{group:<10} {param:<8} {f:<18} {m:>11.0}  {}", ratios.join(", "));
        }
    }
    for note in NOTES.lock().unwrap().iter() {
        println!("{note}");
    }
}

/// Criterion's positional filters (a bench runs if any filter is a substring of its name, or
/// there is none).
fn wants(name: &str) -> bool {
    const WITH_VALUE: &[&str] = &[
        "--warm-up-time",
        "--measurement-time",
        "--sample-size",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--load-baseline",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--profile-time",
        "--plotting-backend",
        "--output-format",
        "--color",
        "--format",
        "-c",
        "-b",
        "-s",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filters = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if WITH_VALUE.contains(&a.as_str()) {
            i += 2;
            continue;
        }
        if !a.starts_with('-') {
            filters.push(a.clone());
        }
        i += 1;
    }
    filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
}

/// `cargo bench` passes `--bench`; without it (`cargo test --all-targets`) criterion runs every
/// bench once as a smoke test, and so do the custom parts here, briefly.
fn bench_mode() -> bool {
    std::env::args().any(|a| a == "--bench")
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    sandbox(&mut c);
    roundtrip(&mut c);
    c.final_summary();
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if wants("preempt") {
        preempt(if bench_mode() { 200 } else { 5 });
    }
    if bench_mode() {
        report();
    }
}
