//! Measures the runtime's scheduling and sandbox costs on this machine and prints them as a
//! simulator overhead file (`key=ns` lines with `#` comments; `luge_sim::Overheads` syntax):
//!
//! ```sh
//! cargo run --release -p luge-runtime --example calibrate > overheads.txt
//! cargo run --release -p luge -- sim --overheads @overheads.txt …
//! ```
//!
//! Options: `--wait sleep|spin` (the runtime's idle wait mode; default `sleep`) and
//! `--samples N` (per series; default 2000). Progress goes to stderr.
//!
//! Every value is a median, measured in one run, on a SledgeScale runtime with 1 dispatcher
//! thread and 1 worker thread (`Layout::Threads`), or on its exact parts: the comments printed
//! beside each value say how. The fiber measurements run on the engine of a default runtime, and
//! behind a copy of `src/sandbox.rs`'s epoch callback (crate-private); keep the copy in sync.
//! Comments in the output contain no commas: `Overheads::parse` splits at commas first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a calibration tool: a panic is the report

use std::collections::HashMap;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::Thread;
use std::time::{Duration, Instant};

use luge_runtime::{FunctionConfig, Outcome, Runtime, RuntimeConfig, SubmitOptions, WaitMode};
use luge_sched::{
    Estimator, EstimatorConfig, Event, FunctionId, Nanos, Policy, PolicyConfig, Request, RequestId,
    SledgeScale,
};
use wasmtime::{Engine, InstancePre, Linker, Module, Store, UpdateDeadline};

#[path = "../benches/common/mod.rs"]
mod common;
// The loaded policy of `luge-sched`'s dispatch benchmark: the same decisions, timed here.
#[path = "../../luge-sched/benches/common/mod.rs"]
mod sched_bench;

use common::{LongSpin, runtime};
use sched_bench::{DEPTH, loaded};

const NOOP: &str = include_str!("../../../functions/builtin/noop.wat");

fn median(mut v: Vec<Nanos>) -> Nanos {
    v.sort_unstable();
    v[v.len() / 2]
}

fn ns(d: Duration) -> Nanos {
    d.as_nanos() as Nanos
}

// ------------------------------------------------------------------------------------------
// Dispatcher decisions: the policy code the dispatcher runs, timed in isolation.
// ------------------------------------------------------------------------------------------

/// The dispatch benchmark's loaded `SledgeScale` group of `workers` workers.
fn loaded_group(workers: usize) -> SledgeScale {
    loaded(SledgeScale::new(&PolicyConfig::with_workers(workers)))
}

/// The cost of reading the clock twice (subtracted from every single-operation timing).
fn clock_pair() -> Nanos {
    median(
        (0..10_000)
            .map(|_| {
                let t = Instant::now();
                ns(black_box(t).elapsed())
            })
            .collect(),
    )
}

/// Median cost of one arrival as `Dispatcher::arrival` handles it (estimate, request, pending
/// map insert, policy decision) on a fresh copy of a loaded group, and the workers inspected.
fn arrival_cost(workers: usize, samples: usize, clock: Nanos) -> (Nanos, u64) {
    let base = loaded_group(workers);
    let mut estimator = Estimator::new(EstimatorConfig::default());
    estimator.seed(FunctionId(1), 10_000);
    let mut times = Vec::with_capacity(samples);
    let mut inspected = 0;
    for i in 0..samples {
        let mut p = base.clone();
        let mut pending: HashMap<RequestId, Box<[u64; 16]>> = HashMap::with_capacity(1);
        let mut out = Vec::with_capacity(4);
        let before = p.stats().workers_inspected;
        let id = RequestId(1 << 40 | i as u64);
        let t = Instant::now();
        // A late deadline: no preemption, Algorithm 2 scans every worker.
        let expected = estimator.estimate(FunctionId(1));
        let req = Request::new(id, FunctionId(1), 0, 5_000_000, expected).with_tenant(0);
        pending.insert(id, Box::new([0; 16]));
        p.on_event(0, Event::Arrival(req), &mut out);
        times.push(ns(t.elapsed()).saturating_sub(clock));
        black_box((&out, &pending));
        inspected = p.stats().workers_inspected - before;
    }
    (median(times), inspected)
}

fn tick_cost(samples: usize, clock: Nanos) -> Nanos {
    let mut p = loaded_group(1);
    let mut out = Vec::with_capacity(4);
    median(
        (0..samples)
            .map(|_| {
                out.clear();
                let t = Instant::now();
                p.on_event(0, Event::Tick, &mut out);
                ns(t.elapsed()).saturating_sub(clock)
            })
            .collect(),
    )
}

// ------------------------------------------------------------------------------------------
// Fiber switch: preempt and resume a sandbox, on the runtime's engine and a copy of its callback.
// ------------------------------------------------------------------------------------------

/// The engine of a runtime with `RuntimeConfig::default()`'s settings (`src/engine.rs::build`),
/// its runtime shut down again: no ticker bumps the epoch, only the measurements do.
fn engine() -> Engine {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    rt.engine().clone()
}

/// A compiled guest that spins in a loop forever.
fn spin_loop(engine: &Engine) -> InstancePre<()> {
    let wat = r#"(module (memory (export "memory") 1) (func (export "_start") (loop (br 0))))"#;
    let module = Module::new(engine, wat::parse_str(wat).unwrap()).unwrap();
    Linker::<()>::new(engine).instantiate_pre(&module).unwrap()
}

/// A running sandbox of `pre`, to be polled, behind a copy of `sandbox.rs`'s epoch callback: at
/// an epoch check that finds `flag` holding `id` it clears the flag and yields with
/// `Yield(resume)` (the poll returns `Pending`); at any other it runs on.
fn preemptible(
    engine: &Engine,
    pre: InstancePre<()>,
    flag: Arc<AtomicU64>,
    id: u64,
    resume: u64,
) -> Pin<Box<dyn Future<Output = wasmtime::Result<()>> + Send>> {
    let base = Instant::now();
    let abort = AtomicBool::new(false);
    let budget_end = AtomicU64::new(u64::MAX);
    let mut store = Store::new(engine, ());
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_ctx| {
        // The same checks, in the same order, as `sandbox.rs`.
        let now = base.elapsed().as_nanos() as u64;
        if abort.load(Ordering::Relaxed) || now >= budget_end.load(Ordering::Relaxed) {
            return Err(wasmtime::Error::msg("stop"));
        }
        if flag.load(Ordering::Acquire) == id
            && flag.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            return Ok(UpdateDeadline::Yield(resume));
        }
        Ok(UpdateDeadline::Continue(1))
    });
    Box::pin(async move {
        let instance = pre.instantiate_async(&mut store).await?;
        let entry = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
        entry.call_async(&mut store, ()).await
    })
}

/// Median time of one preempt + resume cycle of a running sandbox: the dispatcher's flag store
/// and epoch bump, the worker's poll switching into the suspended fiber, the guest reaching its
/// next epoch check, `sandbox.rs`'s callback finding the flag and yielding, and the switch back
/// out (`Poll::Pending`). Batches of 100 cycles, so the clock is read once per batch.
fn fiber_cycle(batches: usize) -> Nanos {
    let engine = engine();
    let preempt = Arc::new(AtomicU64::new(0));
    let id = 7;
    // The runtime yields with `Yield(1)`; Wasmtime sets the new deadline after the resume, so
    // with 1 the guest would run on until the ticker's next tick. `Yield(0)` makes it check
    // again at once, so one thread can drive the cycle; same switches.
    let mut future = preemptible(&engine, spin_loop(&engine), Arc::clone(&preempt), id, 0);
    let mut cx = Context::from_waker(Waker::noop());
    let mut cycle = || {
        preempt.store(id, Ordering::Release);
        engine.increment_epoch();
        assert!(matches!(future.as_mut().poll(&mut cx), Poll::Pending), "the guest stopped");
    };
    for _ in 0..1000 {
        cycle();
    }
    let per = 100;
    median(
        (0..batches)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..per {
                    cycle();
                }
                ns(t.elapsed()) / per
            })
            .collect(),
    )
}

/// Median preemption delivery across threads: from the dispatcher's side (flag store + epoch
/// bump, on this thread) until the worker thread's poll of the running sandbox has returned
/// `Pending` (the guest noticed the epoch at a loop header, the callback found the flag, the
/// fiber switched out) and the worker says so; `sandbox.rs`'s callback with its `Yield(1)`.
/// Both threads spin here, whatever the runtime's wait mode: the request is running.
fn delivery(samples: usize) -> (Nanos, usize) {
    let engine = engine();
    let pre = spin_loop(&engine);
    let id = 7;
    let preempt = Arc::new(AtomicU64::new(0));
    let stopped = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let quit = Arc::new(AtomicBool::new(false));
    let worker = {
        let (engine, flag) = (engine.clone(), Arc::clone(&preempt));
        let (stopped, go, quit) = (Arc::clone(&stopped), Arc::clone(&go), Arc::clone(&quit));
        std::thread::spawn(move || {
            let mut future = preemptible(&engine, pre, flag, id, 1);
            let mut cx = Context::from_waker(Waker::noop());
            loop {
                assert!(matches!(future.as_mut().poll(&mut cx), Poll::Pending), "guest stopped");
                stopped.store(true, Ordering::Release);
                while !go.swap(false, Ordering::Acquire) {
                    if quit.load(Ordering::Acquire) {
                        return;
                    }
                    std::hint::spin_loop();
                }
            }
        })
    };
    let spin_for = |d: Duration| {
        let t = Instant::now();
        while t.elapsed() < d {
            std::hint::spin_loop();
        }
    };
    spin_for(Duration::from_millis(5));
    let mut times = Vec::with_capacity(samples);
    let mut lost = 0;
    for i in 0..samples + 100 {
        spin_for(Duration::from_micros(20)); // the guest is back in its loop
        let t = Instant::now();
        preempt.store(id, Ordering::Release);
        engine.increment_epoch();
        let mut late = false;
        while !stopped.swap(false, Ordering::Acquire) {
            if t.elapsed() > Duration::from_millis(1) {
                // The bump landed before the resumed guest reset its deadline (Wasmtime does
                // that after the yield returns), so it goes unnoticed until the next bump — the
                // runtime's ticker, ≤ 1 tick later. Tick again; the sample is not a delivery.
                late = true;
                engine.increment_epoch();
            }
            std::hint::spin_loop();
        }
        if i >= 100 && !late {
            times.push(ns(t.elapsed()));
        }
        lost += usize::from(late);
        go.store(true, Ordering::Release);
    }
    spin_for(Duration::from_micros(20));
    preempt.store(id, Ordering::Release);
    engine.increment_epoch();
    while !stopped.load(Ordering::Acquire) {
        engine.increment_epoch();
        std::hint::spin_loop();
    }
    quit.store(true, Ordering::Release);
    worker.join().unwrap();
    (median(times), lost)
}

// ------------------------------------------------------------------------------------------
// The runtime itself.
// ------------------------------------------------------------------------------------------

/// Waits for one answer in the runtime's wait mode (spin-poll or park).
struct Done {
    slot: Mutex<Option<Outcome>>,
    ready: AtomicBool,
    client: Thread,
    mode: WaitMode,
}

impl Done {
    fn call(
        self: &Arc<Self>,
        rt: &Runtime,
        name: &str,
        payload: &[u8],
        o: SubmitOptions,
    ) -> Outcome {
        let me = Arc::clone(self);
        rt.submit_with(name, payload.to_vec(), o, move |outcome| {
            *me.slot.lock().unwrap() = Some(outcome);
            me.ready.store(true, Ordering::Release);
            if me.mode == WaitMode::Sleep {
                me.client.unpark();
            }
        });
        while !self.ready.swap(false, Ordering::Acquire) {
            match self.mode {
                WaitMode::Spin => std::hint::spin_loop(),
                WaitMode::Sleep => std::thread::park(),
            }
        }
        self.slot.lock().unwrap().take().unwrap()
    }
}

struct Series {
    queued: Vec<Nanos>,
    executed: Vec<Nanos>,
    total: Vec<Nanos>,
}

fn series(done: &Arc<Done>, rt: &Runtime, n: usize, gap: Option<Duration>) -> Series {
    let urgent = SubmitOptions { deadline: Some(Duration::from_millis(10)), ..Default::default() };
    let mut s = Series { queued: Vec::new(), executed: Vec::new(), total: Vec::new() };
    for _ in 0..n {
        if let Some(gap) = gap {
            std::thread::sleep(gap);
        }
        let o = done.call(rt, "noop", b"", urgent);
        assert!(o.is_ok(), "noop failed: {:?}", o.result);
        s.queued.push(ns(o.timing.queued));
        s.executed.push(ns(o.timing.executed));
        s.total.push(ns(o.timing.total));
    }
    s
}

/// One-way latency of a bare hand-off to another thread and back (half the ping-pong), in the
/// same wait mode: the floor under `enqueue`.
fn handoff_one_way(mode: WaitMode, n: usize) -> Nanos {
    let ping = Arc::new(AtomicBool::new(false));
    let pong = Arc::new(AtomicBool::new(false));
    let main = std::thread::current();
    let (p, q) = (Arc::clone(&ping), Arc::clone(&pong));
    let peer = std::thread::spawn(move || {
        for _ in 0..n {
            while !p.swap(false, Ordering::Acquire) {
                match mode {
                    WaitMode::Spin => std::hint::spin_loop(),
                    WaitMode::Sleep => std::thread::park(),
                }
            }
            q.store(true, Ordering::Release);
            if mode == WaitMode::Sleep {
                main.unpark();
            }
        }
    });
    let peer_thread = peer.thread().clone();
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        ping.store(true, Ordering::Release);
        if mode == WaitMode::Sleep {
            peer_thread.unpark();
        }
        while !pong.swap(false, Ordering::Acquire) {
            match mode {
                WaitMode::Spin => std::hint::spin_loop(),
                WaitMode::Sleep => std::thread::park(),
            }
        }
        times.push(ns(t.elapsed()) / 2);
    }
    peer.join().unwrap();
    median(times)
}

fn main() {
    let mut wait = WaitMode::Sleep;
    let mut samples = 2000usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--wait" => {
                wait = match args.next().as_deref() {
                    Some("spin") => WaitMode::Spin,
                    Some("sleep") => WaitMode::Sleep,
                    other => panic!("--wait takes spin or sleep, not {other:?}"),
                }
            }
            "--samples" => samples = args.next().and_then(|s| s.parse().ok()).expect("--samples N"),
            "-h" | "--help" => {
                eprintln!("usage: calibrate [--wait sleep|spin] [--samples N]");
                return;
            }
            other => panic!("unknown argument {other} (try --help)"),
        }
    }
    let mode = match wait {
        WaitMode::Spin => "spin",
        WaitMode::Sleep => "sleep",
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Spin mode: the dispatcher and the worker each hold a core, and the client needs a third.
    let oversubscribed = wait == WaitMode::Spin && cores < 3;
    if oversubscribed {
        eprintln!(
            "calibrate: warning: spin mode on {cores} cores: the client, dispatcher and worker \
             spin on fewer cores than threads, so hand-offs wait for the OS scheduler (ms)"
        );
    }

    eprintln!("calibrate: dispatcher decisions…");
    let clock = clock_pair();
    let (d1, i1) = arrival_cost(1, samples, clock);
    let (d16, i16) = arrival_cost(16, samples, clock);
    let per_worker = d16.saturating_sub(d1) / (i16 - i1).max(1);
    let dispatch_base = d1.saturating_sub(per_worker * i1);
    let tick = tick_cost(samples, clock);

    eprintln!("calibrate: fiber preempt/resume cycle…");
    let cycle = fiber_cycle(samples.max(10) / 10);
    let context_switch = cycle / 2;
    let preempt_resume = cycle - context_switch;
    eprintln!("calibrate: preemption delivery across threads…");
    let (preempt_delivery, lost) = delivery(samples);

    eprintln!("calibrate: runtime ({mode} mode), idle noop requests…");
    let rt = runtime(wait);
    let mut noop = FunctionConfig::new("noop");
    noop.expected_execution = Some(Duration::from_micros(50));
    rt.register(noop, NOOP.as_bytes()).unwrap();
    LongSpin::register(&rt);
    let done = Arc::new(Done {
        slot: Mutex::new(None),
        ready: AtomicBool::new(false),
        client: std::thread::current(),
        mode: wait,
    });
    series(&done, &rt, 200, None);
    let idle = series(&done, &rt, samples, None);
    let gap = Some(Duration::from_millis(2));
    let preempt_samples = (samples / 4).max(20);
    let idle_gap = series(&done, &rt, preempt_samples, gap);

    eprintln!("calibrate: urgent noop requests preempting a long spin…");
    let long = LongSpin::start(&rt);
    let busy = series(&done, &rt, preempt_samples, gap);
    let long = long.end(rt);
    assert!(
        long.timing.preemptions as usize >= preempt_samples,
        "premise: every urgent request preempts the long one ({} preemptions, {preempt_samples} \
         urgent requests)",
        long.timing.preemptions
    );

    eprintln!("calibrate: bare hand-off floor…");
    let floor = handoff_one_way(wait, samples);

    let queued_idle = median(idle.queued);
    let executed_idle = median(idle.executed);
    let total_idle = median(idle.total);
    let queued_idle_gap = median(idle_gap.queued);
    let queued_busy = median(busy.queued);
    let enqueue = queued_idle.saturating_sub(d1) / 2;
    let sandbox_start = executed_idle.saturating_sub(context_switch);

    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "?".into(), |s| s.trim().to_owned());
    let difference = queued_busy as i64 - queued_idle_gap as i64;
    let preemptions = long.timing.preemptions;
    let mut lines = vec![
        "# Luge runtime overheads for `luge sim --overheads @FILE` (luge_sim::Overheads)."
            .to_owned(),
        format!("# `cargo run --release -p luge-runtime --example calibrate -- --wait {mode}`"),
        format!(
            "# at commit {commit} on {cores} cores: SledgeScale; 1 dispatcher + 1 worker thread"
        ),
        format!("# (Layout::Threads); {mode} wait mode; unpinned. Medians of {samples} samples"),
        "# unless said; ns.".to_owned(),
    ];
    if oversubscribed {
        lines.push(format!("# WARNING: spin mode on {cores} cores (needs 3: client, dispatcher,"));
        lines.push("# worker): hand-offs below are OS scheduling delays, not Luge's.".to_owned());
    }
    lines.extend([
        "#".to_owned(),
        "# Arrival as the dispatcher handles it (estimate, request, pending-map insert,".to_owned(),
        format!("# SledgeScale Algorithm 2 with a late deadline, {DEPTH} queued per worker):"),
        format!("# {d1} ns at 1 worker ({i1} inspected), {d16} ns at 16 ({i16} inspected)."),
        format!("dispatch_base={dispatch_base}"),
        format!("dispatch_per_worker={per_worker}"),
        format!("# (idle noop Timing::queued {queued_idle} − arrival {d1}) / 2: queued spans two"),
        "# hops (submitter → dispatcher → worker), taken as equal.".to_owned(),
        format!("# Floor: a bare one-way thread hand-off in the same wait mode, {floor} ns."),
        format!("enqueue={enqueue}"),
        format!("# Half of one preempt + resume cycle of a running sandbox ({cycle} ns: flag"),
        "# and epoch bump, poll into the suspended fiber, epoch check, callback, yield)."
            .to_owned(),
        format!("context_switch={context_switch}"),
        "# From the dispatcher's flag store + epoch bump on one thread until the worker".to_owned(),
        "# thread's poll of the running sandbox returned Pending (callback, yield).".to_owned(),
        format!("# {lost} samples left out: the bump came before the worker thread had resumed"),
        "# the guest (descheduled), so it waited for the next bump (the ticker's, ≤ 1 tick)."
            .to_owned(),
        "# End to end, an urgent noop's Timing::queued with the worker running a long".to_owned(),
        format!("# spin is {queued_busy} vs {queued_idle_gap} on the idle runtime ({difference}:"),
        format!("# the busy worker is awake, no wake-up to pay); {preempt_samples} samples each,"),
        format!("# 2 ms apart, {preemptions} preemptions of the long request."),
        format!("preempt_delivery={preempt_delivery}"),
        "# The other half of the cycle (switching out of the preempted fiber).".to_owned(),
        format!("preempt_resume={preempt_resume}"),
        format!("# Idle noop Timing::executed ({executed_idle}: fresh store from the pool,"),
        "# instantiate, run, drop) − context_switch.".to_owned(),
        format!("sandbox_start={sandbox_start}"),
        "# SledgeScale's Event::Tick on a loaded 1-worker group (it ignores ticks).".to_owned(),
        format!("tick={tick}"),
        format!("# For reference: idle noop round trip Timing::total = {total_idle} ns."),
    ]);
    for line in lines {
        // `Overheads::parse` splits items at commas before it drops `#` comments, so a comment
        // must not contain one.
        println!("{}", if line.starts_with('#') { line.replace(',', ";") } else { line });
    }
}
