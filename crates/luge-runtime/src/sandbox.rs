//! One sandbox serving one request: a fresh `Store` from the pool, the module instantiated from
//! its `InstancePre`, `_start` run as an async task on fibers, and the result classified into a
//! typed [`Failure`] or the guest's stdout.
//!
//! The task suspends only at epoch ticks, when the epoch callback finds a preemption request for
//! it (a per-worker flag set by the dispatcher) — SledgeScale §3.4 preempts with signals; Luge
//! uses a user-level switch on Wasmtime fibers instead. The same callback enforces the execution
//! budget by reading clocks: the epoch is engine-wide, so ticks are not time.
//!
//! # The execution budget counts CPU time
//! `Limits::max_execution` bounds the CPU the request had: the CPU clock of the worker thread
//! that runs it ([`Clock::cpu`], `CLOCK_THREAD_CPUTIME_ID`), summed over its run segments, the
//! sandbox's build and teardown included. A guest runs on its worker's thread — fibers switch
//! stacks, not threads, and the epoch callback runs on that thread too — so the thread's CPU
//! clock is exactly the CPU spent for it, and time the thread waited for a core (other
//! processes, other threads of the node) does not count: a busy machine stretches a request in
//! wall time but does not kill it. A wall-time budget did; CPU is also what Fastly Compute and
//! Cloudflare Workers limit.
//!
//! [`arm`] sets the per-segment values the callback reads ([`TaskClock`]), at the start of each
//! run segment on the worker's thread:
//! - `cpu_end` = the thread's CPU clock now + the CPU budget left. At a tick the callback kills
//!   the guest (`Failure::Killed`) once the CPU clock reaches it, so a runaway guest ends within
//!   a tick of CPU past its budget.
//! - `cpu_from` = the wall clock now + the CPU budget left. A thread gets at most one second of
//!   CPU per second, so before then the budget cannot have run out and the callback does not
//!   read the CPU clock (a system call, where the wall clock is read in user space): a request
//!   well within its budget pays no more per tick than a wall-time budget would.
//! - A short segment (`Task::short`: in the uLL lane, or known to run at most the lane's slice,
//!   100 µs) does not read the CPU clock
//!   at its start: `cpu_end` is set at its first epoch callback, if it lives that long, taking
//!   the segment as having had the CPU the whole time since it began (never less than it had;
//!   at most the time the thread waited for a core before that callback too much). A segment
//!   that ends before any callback counts its wall time as its CPU (its thread did nothing else
//!   meanwhile). So a short request spends no system call on clocks, where each
//!   `CLOCK_THREAD_CPUTIME_ID` read is one (~15 % of an inline worker's CPU on a closed loop of
//!   no-ops, `perf -e cpu-clock`).
//! - `backstop_end`, the wall-time backstop = [`BACKSTOP`] × the budget, counted in the wall time
//!   the request has occupied workers. It ends a guest that cannot get its CPU at all — on a
//!   core shared with so much else that it gets under a tenth of it — so that no request holds
//!   a worker without bound; it too answers `Failure::Killed`, and logs a warning, since it
//!   means the machine, not the guest, is at fault. (Guests cannot block: the WASI layer has no
//!   blocking calls, so a guest is either running or waiting for a core.)
//!
//! The scheduler's notion of execution (`Task::executed`: policy events, the estimator,
//! turnaround) stays the wall time a request occupied its worker, since that is what delays the
//! requests behind it; `worker.rs` accounts both.
//!
//! In the inline layout (`Layout::Inline`) the dispatcher's work done from the epoch callback
//! runs on the worker's thread, so it counts to the running request's CPU.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use luge_proto::nanos;
use luge_sched::Nanos;
use wasmtime::{Extern, Instance, Memory, Store, Trap, UpdateDeadline};

use crate::config::Limits;
use crate::outcome::{Failure, Rejection, TrapKind};
use crate::registry::Function;
use crate::signals::{Clock, Signals, TaskClock, UNREAD};
use crate::store::{MemoryLimiter, SandboxState};
use crate::wasi::{self, GuestExit, OutputCapExceeded, Strings, WasiCtx};

/// Why the epoch callback ended the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Stopped {
    /// Its execution budget (CPU time) ran out.
    #[error("execution budget exceeded")]
    Budget,
    /// It ran [`BACKSTOP`] times its budget in wall time without using its CPU budget.
    #[error("starved of CPU past the wall-time backstop")]
    Starved,
    /// The runtime is shutting down.
    #[error("aborted by shutdown")]
    Aborted,
}

/// The wall-time backstop, in execution budgets: a request that has occupied workers this many
/// times its budget in wall time is ended whatever CPU it had (module doc).
pub(crate) const BACKSTOP: u32 = 10;

/// What a finished sandbox produced.
#[derive(Debug)]
pub(crate) struct SandboxResult {
    pub result: Result<Vec<u8>, Failure>,
    pub stderr: Option<String>,
}

/// A sandbox in progress: created on first run, suspended at preemption, dropped when done
/// (returning its pool slot).
pub(crate) type SandboxFuture = Pin<Box<dyn Future<Output = SandboxResult> + Send>>;

/// The request's identity as the guest sees it (args and environment).
pub(crate) struct GuestContext {
    pub request_id: u64,
    /// Absolute deadline, µs since the Unix epoch.
    pub deadline_unix_us: u64,
    /// The trace it runs in: `TRACEPARENT` in its environment.
    pub trace: Option<luge_proto::TraceContext>,
}

/// What a sandbox is built for: one request of one function.
pub(crate) struct Spec {
    pub function: Arc<Function>,
    /// The request body (its stdin).
    pub payload: Vec<u8>,
    pub guest: GuestContext,
    /// The dispatcher's id of the request, which a preemption flag names.
    pub id: u64,
    pub signals: Arc<Signals>,
    pub clock: Arc<TaskClock>,
    /// A sandbox of `function` built ahead of the request (`ready.rs`), else it is built now.
    pub ready: Option<Ready>,
}

/// A sandbox built ahead of its request (ready sandboxes, HORSE's warm sandboxes §1–2,
/// `ready.rs`): a fresh store with the function instantiated and not a single instruction of
/// `_start` run. It serves exactly one request.
pub(crate) struct Ready {
    store: Store<SandboxState>,
    instance: Instance,
}

impl Ready {
    /// Bytes of linear memory it holds (its instance's memory size).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.store.data().wasi.memory.map_or(0, |m| m.data_size(&self.store))
    }
}

/// Builds the future that instantiates the function (unless `spec.ready` brings it built) and
/// runs `_start` with the payload on stdin.
pub(crate) fn start(spec: Spec) -> SandboxFuture {
    Box::pin(run(spec))
}

/// A fresh store for one sandbox of `function`, with its memory cap.
fn new_store(function: &Function) -> Store<SandboxState> {
    let cap = usize::try_from(function.config.limits.max_memory_bytes).unwrap_or(usize::MAX);
    let state =
        SandboxState { wasi: WasiCtx::default(), limiter: MemoryLimiter { cap, hit: false } };
    let mut store = Store::new(function.pre.module().engine(), state);
    store.limiter(|s| &mut s.limiter);
    // A preemption whose epoch bump was spent before this deadline was armed is re-bumped by
    // the dispatcher until it lands (`Dispatcher::step`); checking at deadline 0 instead would
    // cost every request a callback (~0.3 µs, measured by `benches/runtime.rs`).
    store.set_epoch_deadline(1);
    store
}

/// In the inline layout, makes `store`'s guest check in at its first epoch check when the
/// dispatcher of this thread has arrivals it has not read: their bumps may have come before the
/// store's deadline was armed (`new_store`, or `prepare` for a sandbox built ahead) and then do
/// not interrupt the run (`signals::InlineHooks::arrivals_waiting`). Otherwise the deadline
/// stays where it was armed: the next bump after `new_store`; for a sandbox built ahead, usually
/// already passed.
fn arm_deadline(store: &mut Store<SandboxState>, signals: &Signals) {
    let Some(hooks) = signals.inline else { return };
    // Pairs with the release fence of `Epoch::bump`: an arrival whose bump the deadline
    // counted is seen below.
    std::sync::atomic::fence(Ordering::Acquire);
    if (hooks.arrivals_waiting)() {
        store.set_epoch_deadline(0);
    }
}

/// The longest a sandbox built ahead may take (wall time, checked at epoch ticks): its build runs
/// on an idle worker that nothing can preempt meanwhile, so a module whose Wasm `start` runs
/// longer than this is not built ahead at all (`Unprepared::Slow`).
pub(crate) const PREPARE_LIMIT: Duration = Duration::from_millis(2);

/// Why a sandbox could not be built ahead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unprepared {
    /// Its Wasm `start` ran past [`PREPARE_LIMIT`] (or the function's budget, if shorter):
    /// building it ahead would stall the worker every time.
    Slow,
    /// Anything else (a pool slot short, a `start` that traps, a shutdown).
    Failed,
}

/// The error that ends a build past its time.
#[derive(Debug, thiserror::Error)]
#[error("the module's start function ran past the time a sandbox may take to be built ahead")]
struct SlowStart;

/// Builds a sandbox of `function` ahead of any request, on the calling thread: a fresh store and
/// the instantiation (which runs the module's Wasm `start` function, if it has one — wasi-libc
/// programs have none; their code runs from `_start`). A `start` function that runs past
/// [`PREPARE_LIMIT`] (or the function's budget) in wall time, or a runtime shutting down, ends
/// the build. An error when it fails (the request that would have used it builds its own and
/// reports why).
pub(crate) fn prepare(function: &Function, signals: &Arc<Signals>) -> Result<Ready, Unprepared> {
    let mut store = new_store(function);
    let limit = function.config.limits.max_execution.min(PREPARE_LIMIT);
    let end = signals.clock.now().saturating_add(nanos(limit));
    let signals = Arc::clone(signals);
    store.epoch_deadline_callback(move |_| {
        if signals.abort.load(Ordering::Relaxed) {
            return Err(wasmtime::Error::new(Stopped::Aborted));
        }
        if signals.clock.now() >= end {
            return Err(wasmtime::Error::new(SlowStart));
        }
        Ok(UpdateDeadline::Continue(1))
    });
    let instance = poll_to_end(std::pin::pin!(function.pre.instantiate_async(&mut store)))
        .map_err(|e| {
            if e.downcast_ref::<SlowStart>().is_some() {
                Unprepared::Slow
            } else {
                Unprepared::Failed
            }
        })?;
    store.data_mut().wasi.memory = memory_of(function, &instance, &mut store);
    Ok(Ready { store, instance })
}

/// The instance's exported memory (registration made sure there is one).
fn memory_of(
    function: &Function,
    instance: &Instance,
    store: &mut Store<SandboxState>,
) -> Option<Memory> {
    instance.get_module_export(store, &function.exports.memory).and_then(Extern::into_memory)
}

/// Polls `future` on the calling thread until it is done, with a waker that does nothing: a
/// sandbox's future is pending only when it yielded to a preemption, which nothing asks for
/// outside a worker, so it runs to its end.
pub(crate) fn poll_to_end<F: Future + ?Sized>(mut future: Pin<&mut F>) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(done) = future.as_mut().poll(&mut cx) {
            return done;
        }
    }
}

async fn run(spec: Spec) -> SandboxResult {
    let Spec { function, payload, guest, id, signals, clock, ready } = spec;
    let limits = function.config.limits;
    let name = function.config.name.as_str();
    // The start-up, to the first guest instruction (`Timing::start_up`): on the worker's
    // thread, which does nothing else meanwhile, so wall time is its CPU but for time waiting
    // for a core.
    let starting = signals.clock.now();
    let (mut store, instance) = match ready {
        Some(Ready { mut store, instance }) => {
            // Armed when it was built: the bumps since (the ticker's, this request's own
            // arrival's) would make the guest call back at its first check for nothing — on a
            // short run that is a CPU clock read. Armed afresh, as a new store is; an arrival
            // still unread makes it check in at once (`arm_deadline`).
            store.set_epoch_deadline(1);
            (store, Some(instance))
        }
        None => (new_store(&function), None),
    };
    let wasi = &mut store.data_mut().wasi;
    wasi.stdin = payload;
    wasi.stdout_cap = usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX);
    let (named, request_id, deadline_us) =
        (Arc::clone(&function), guest.request_id, guest.deadline_unix_us);
    let trace = guest.trace;
    wasi.set_strings(move || {
        let name = named.config.name.as_str();
        let env = [
            Some(format!("LUGE_FUNCTION={name}")),
            Some(format!("LUGE_REQUEST_ID={request_id}")),
            Some(format!("LUGE_DEADLINE_US={deadline_us}")),
            trace.map(|t| format!("TRACEPARENT={t}")),
        ];
        let env = env.into_iter().flatten().map(String::into_bytes).collect();
        Strings { args: vec![name.as_bytes().to_vec()], env }
    });
    let (task_clock, timer) = (Arc::clone(&clock), Arc::clone(&signals));
    arm_deadline(&mut store, &signals);
    store.epoch_deadline_callback(move |_ctx| {
        let now = match signals.inline {
            Some(hooks) => {
                // The inline dispatcher's poll (arrivals, refusals and their answers) is the
                // node's work on this thread, for every tenant: not this guest's to pay for.
                let before = signals.clock.now();
                (hooks.on_epoch)();
                let now = signals.clock.now();
                credit(&clock, now.saturating_sub(before));
                now
            }
            None => signals.clock.now(),
        };
        if signals.abort.load(Ordering::Relaxed) {
            return Err(wasmtime::Error::new(Stopped::Aborted));
        }
        read_cpu_start(&clock, now, || signals.clock.cpu());
        if let Some(stopped) = over_budget(&clock, now, || signals.clock.cpu()) {
            return Err(wasmtime::Error::new(stopped));
        }
        let worker = clock.worker.load(Ordering::Relaxed);
        if let Some(w) = signals.workers.get(worker)
            && w.preempt.load(Ordering::Acquire) == id
            && w.preempt.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            // Inline, it checks in at once when resumed: the deadline is armed then, and an
            // arrival's bump spent while it was suspended would not interrupt it
            // (`signals::InlineHooks::arrivals_waiting`). One callback per resumption, which
            // also runs the budget and abort checks before the guest goes on.
            return Ok(UpdateDeadline::Yield(u64::from(!signals.inline())));
        }
        // An arrival submitted since the hook polled spent its bump on this callback: check in
        // again at once. What Wasmtime does between this return and re-arming the deadline
        // (a few instructions) stays a window in which a bump is spent unseen.
        if signals.inline.is_some_and(|hooks| (hooks.arrivals_waiting)()) {
            return Ok(UpdateDeadline::Continue(0));
        }
        Ok(UpdateDeadline::Continue(1))
    });
    let outcome = async {
        let instance = match instance {
            Some(ready) => ready,
            None => {
                // On the worker's thread, which does nothing else meanwhile: wall time (read in
                // user space) is its CPU, bar time the thread waited for a core.
                let building = timer.clock.now();
                let instance =
                    function.pre.instantiate_async(&mut store).await.map_err(Stage::Start)?;
                let built = timer.clock.now().saturating_sub(building);
                task_clock.instantiation.store(built, Ordering::Relaxed);
                store.data_mut().wasi.memory = memory_of(&function, &instance, &mut store);
                instance
            }
        };
        let entry = instance
            .get_module_export(&mut store, &function.exports.start)
            .and_then(Extern::into_func)
            .ok_or_else(|| wasmtime::format_err!("no `_start` function"))
            .and_then(|f| f.typed::<(), ()>(&store))
            .map_err(Stage::Start)?;
        let started = timer.clock.now().saturating_sub(starting);
        task_clock.start_up.store(started, Ordering::Relaxed);
        entry.call_async(&mut store, ()).await.map_err(Stage::Run)
    }
    .await;
    let state = store.into_data();
    if let Err(Stage::Run(e)) = &outcome
        && e.downcast_ref::<Stopped>() == Some(&Stopped::Starved)
    {
        tracing::warn!(
            request_id = guest.request_id,
            function = name,
            budget = ?limits.max_execution,
            "ended by the wall-time backstop: the worker got too little CPU to run it"
        );
    }
    let result = classify(outcome, &state, &limits);
    let stderr = wasi::stderr_text(&state.wasi);
    SandboxResult { result: result.map(|()| state.wasi.stdout), stderr }
}

enum Stage {
    Start(wasmtime::Error),
    Run(wasmtime::Error),
}

fn classify(
    outcome: Result<(), Stage>,
    state: &SandboxState,
    limits: &Limits,
) -> Result<(), Failure> {
    let memory_limit = Failure::MemoryLimit { cap: limits.max_memory_bytes };
    let err = match outcome {
        Ok(()) => return Ok(()),
        Err(Stage::Start(e)) => {
            if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() {
                return Err(Failure::Rejected(Rejection::PoolExhausted));
            }
            if state.limiter.hit {
                return Err(memory_limit);
            }
            // The module's Wasm `start` function runs here: what the guest does there (trap,
            // exit, overrun its budget or its output cap) is the guest's, as in `_start`; only
            // anything else is the node's.
            let guest = e.downcast_ref::<Trap>().is_some()
                || e.downcast_ref::<GuestExit>().is_some()
                || e.downcast_ref::<OutputCapExceeded>().is_some()
                || e.downcast_ref::<Stopped>().is_some();
            if !guest {
                return Err(Failure::Internal(format!("instantiation failed: {e:#}")));
            }
            e
        }
        Err(Stage::Run(e)) => e,
    };
    if let Some(GuestExit(code)) = err.downcast_ref::<GuestExit>() {
        return match *code {
            0 => Ok(()),
            _ if state.limiter.hit => Err(memory_limit),
            code => Err(Failure::Exit(code)),
        };
    }
    if err.downcast_ref::<OutputCapExceeded>().is_some() {
        return Err(Failure::OutputTooLarge { cap: limits.max_output_bytes });
    }
    match err.downcast_ref::<Stopped>() {
        Some(Stopped::Budget | Stopped::Starved) => {
            return Err(Failure::Killed { budget: limits.max_execution });
        }
        Some(Stopped::Aborted) => return Err(Failure::Rejected(Rejection::ShuttingDown)),
        None => {}
    }
    if state.limiter.hit {
        return Err(memory_limit);
    }
    match err.downcast_ref::<Trap>() {
        Some(trap) => Err(Failure::Trap(TrapKind::of(*trap))),
        None => Err(Failure::Internal(format!("{err:#}"))),
    }
}

/// Remaining budget as an absolute clock time, given the execution so far.
fn budget_end(now: Nanos, budget: Duration, executed: Nanos) -> Nanos {
    now.saturating_add(nanos(budget).saturating_sub(executed))
}

/// Whether `task`'s CPU budget or its wall-time backstop ends it at clock time `now` (module
/// doc). `cpu` reads the running thread's CPU clock; it is called only once the CPU budget may
/// have run out (from `cpu_from` on).
fn over_budget(task: &TaskClock, now: Nanos, cpu: impl FnOnce() -> Nanos) -> Option<Stopped> {
    if now >= task.cpu_from.load(Ordering::Relaxed) && cpu() >= task.cpu_end.load(Ordering::Relaxed)
    {
        return Some(Stopped::Budget);
    }
    (now >= task.backstop_end.load(Ordering::Relaxed)).then_some(Stopped::Starved)
}

/// Arms `task`'s budget for a run segment starting now on the calling thread (module doc): the
/// request has had `cpu` of CPU and occupied workers for `executed` of wall time so far. With
/// `lazy` (a short segment) the thread's CPU clock is not read now but at the segment's first
/// epoch callback, if it lives that long ([`read_cpu_start`]); [`segment_cpu`] then counts it.
pub(crate) fn arm(
    task: &TaskClock,
    clock: &Clock,
    budget: Duration,
    (executed, cpu): (Nanos, Nanos),
    lazy: bool,
) {
    // Wall first: the CPU the thread has from the CPU reading on is at most the wall time from
    // this one on, so the callback skipping the CPU clock before `cpu_from` is sound.
    let now = clock.now();
    let left = nanos(budget).saturating_sub(cpu);
    task.credited.store(0, Ordering::Relaxed);
    task.wall_start.store(now, Ordering::Relaxed);
    task.cpu_left.store(left, Ordering::Relaxed);
    task.cpu_from.store(now.saturating_add(left), Ordering::Relaxed);
    let backstop = budget.saturating_mul(BACKSTOP);
    task.backstop_end.store(budget_end(now, backstop, executed), Ordering::Relaxed);
    if lazy {
        task.cpu_start.store(UNREAD, Ordering::Relaxed);
        task.cpu_end.store(u64::MAX, Ordering::Relaxed);
    } else {
        let cpu_now = clock.cpu();
        task.cpu_start.store(cpu_now, Ordering::Relaxed);
        task.cpu_end.store(cpu_now.saturating_add(left), Ordering::Relaxed);
    }
}

/// Keeps `spent` (ns of the node's own work on the thread during this segment, measured in
/// wall time) out of the segment's CPU, its budget and its backstop: every mark of the segment
/// moves on by it, and [`TaskClock::credited`] records it for `Task::executed`.
pub(crate) fn credit(task: &TaskClock, spent: Nanos) {
    if spent == 0 {
        return;
    }
    task.credited.fetch_add(spent, Ordering::Relaxed);
    for mark in [&task.wall_start, &task.cpu_from, &task.backstop_end, &task.cpu_end] {
        let _ = mark.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            (t != u64::MAX).then(|| t.saturating_add(spent))
        });
    }
    let _ = task.cpu_start.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
        (t != UNREAD).then(|| t.saturating_add(spent))
    });
}

/// At an epoch callback at clock time `now` of a segment whose CPU clock was not read at its
/// start (a lazy [`arm`]): reads it now and takes the segment as having had the CPU the whole
/// time since it began — never less than it had, so the budget can only end it early, by the
/// time the thread waited for a core before this first callback (at most a tick unless the
/// machine is overloaded). One system call, only for short segments that outlive a callback.
fn read_cpu_start(task: &TaskClock, now: Nanos, cpu: impl FnOnce() -> Nanos) {
    if task.cpu_start.load(Ordering::Relaxed) != UNREAD {
        return;
    }
    let elapsed = now.saturating_sub(task.wall_start.load(Ordering::Relaxed));
    let start = cpu().saturating_sub(elapsed);
    task.cpu_start.store(start, Ordering::Relaxed);
    let left = task.cpu_left.load(Ordering::Relaxed);
    task.cpu_end.store(start.saturating_add(left), Ordering::Relaxed);
}

/// The CPU the segment that began at `task.wall_start` had, ending at clock time `now`: from the
/// CPU clock when its start was read, else its wall time (a short segment that never reached an
/// epoch callback: its thread did nothing else meanwhile, so its CPU is at most that, and no
/// system call is spent on it).
pub(crate) fn segment_cpu(task: &TaskClock, clock: &Clock, now: Nanos) -> Nanos {
    match task.cpu_start.load(Ordering::Relaxed) {
        UNREAD => now.saturating_sub(task.wall_start.load(Ordering::Relaxed)),
        start => clock.cpu().saturating_sub(start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// The node's own work on the thread during a segment (the inline dispatcher's polls) is
    /// kept out of its CPU, its budget and its backstop, whether or not its CPU clock was read.
    #[test]
    fn credited_work_is_not_the_guests() {
        let clock = Clock::manual();
        let budget = Duration::from_millis(10);
        // Read at the start: 5 ms of polls in 12 ms of CPU leave 7 ms, within 10.
        let task = TaskClock::default();
        arm(&task, &clock, budget, (0, 0), false);
        credit(&task, 5 * MS);
        assert_eq!(over_budget(&task, 12 * MS, || 12 * MS), None);
        assert_eq!(over_budget(&task, 15 * MS, || 15 * MS), Some(Stopped::Budget));
        clock.advance(12 * MS);
        assert_eq!(segment_cpu(&task, &clock, 12 * MS), 7 * MS);
        assert_eq!(task.credited.load(Ordering::Relaxed), 5 * MS);
        // Lazy (a short segment): 2 ms of polls before the first callback, at 5 ms.
        let (task, clock) = (TaskClock::default(), Clock::manual());
        arm(&task, &clock, budget, (0, 0), true);
        credit(&task, 2 * MS);
        read_cpu_start(&task, 5 * MS, || 5 * MS);
        clock.advance(5 * MS);
        assert_eq!(segment_cpu(&task, &clock, 5 * MS), 3 * MS);
        // Never read: its wall time less the polls.
        let (task, clock) = (TaskClock::default(), Clock::manual());
        arm(&task, &clock, budget, (0, 0), true);
        credit(&task, MS);
        assert_eq!(segment_cpu(&task, &clock, 4 * MS), 3 * MS);
        // Armed again, a segment starts with nothing credited.
        arm(&task, &clock, budget, (0, 0), true);
        assert_eq!(task.credited.load(Ordering::Relaxed), 0);
    }

    /// CPU and wall time part when the core is shared: the budget counts CPU, the backstop wall
    /// time on workers, each from where the previous segments left it.
    #[test]
    fn the_budget_counts_cpu_and_the_backstop_wall_time() {
        let (task, clock) = (TaskClock::default(), Clock::manual());
        let budget = Duration::from_millis(10);
        // First segment, at 0 on both clocks (a manual clock's CPU clock is its wall clock).
        arm(&task, &clock, budget, (0, 0), false);
        assert_eq!(task.cpu_start.load(Ordering::Relaxed), 0);
        let unread = || -> Nanos { panic!("the CPU clock was read before the budget could end") };
        assert_eq!(over_budget(&task, 9 * MS, unread), None);
        // Past the budget in wall time, within it in CPU: a contended core. It goes on.
        assert_eq!(over_budget(&task, 50 * MS, || 9 * MS), None);
        assert_eq!(over_budget(&task, 50 * MS, || 10 * MS), Some(Stopped::Budget));
        // Starved: 10× the budget in wall time, whatever CPU it had.
        assert_eq!(over_budget(&task, 100 * MS, || 2 * MS), Some(Stopped::Starved));
        // A later segment, after 30 ms on workers with 8 ms of CPU: 2 ms of CPU and 70 ms of
        // wall time left.
        clock.advance(200 * MS);
        arm(&task, &clock, budget, (30 * MS, 8 * MS), false);
        assert_eq!(task.cpu_start.load(Ordering::Relaxed), 200 * MS);
        assert_eq!(over_budget(&task, 201 * MS, unread), None);
        assert_eq!(over_budget(&task, 250 * MS, || 201 * MS), None);
        assert_eq!(over_budget(&task, 250 * MS, || 202 * MS), Some(Stopped::Budget));
        assert_eq!(over_budget(&task, 269 * MS, || 201 * MS), None);
        assert_eq!(over_budget(&task, 270 * MS, || 201 * MS), Some(Stopped::Starved));
    }

    /// A lazy (short) segment reads no CPU clock unless it reaches a callback; then it counts as
    /// having had the CPU since it began, so its budget still ends it in time.
    #[test]
    fn a_short_segment_reads_the_cpu_clock_only_if_it_reaches_a_callback() {
        let (task, clock) = (TaskClock::default(), Clock::manual());
        let budget = Duration::from_millis(10);
        clock.advance(100 * MS);
        arm(&task, &clock, budget, (0, 0), true);
        let unread = || -> Nanos { panic!("a short segment read the CPU clock") };
        // Ended before any callback: its wall time, no system call (a manual clock's `cpu()`
        // would not panic, so check the state instead).
        assert_eq!(task.cpu_start.load(Ordering::Relaxed), UNREAD);
        clock.advance(7_000);
        assert_eq!(segment_cpu(&task, &clock, clock.now()), 7_000);
        assert_eq!(over_budget(&task, 100 * MS + 7_000, unread), None);
        // A callback 1 ms in, the thread's CPU clock at 50 ms: the segment began at 49 ms of
        // CPU at the latest, and its budget ends at 59 ms.
        read_cpu_start(&task, 101 * MS, || 50 * MS);
        assert_eq!(task.cpu_start.load(Ordering::Relaxed), 49 * MS);
        assert_eq!(task.cpu_end.load(Ordering::Relaxed), 59 * MS);
        read_cpu_start(&task, 105 * MS, unread); // read once
        assert_eq!(over_budget(&task, 110 * MS, || 58 * MS), None);
        assert_eq!(over_budget(&task, 110 * MS, || 59 * MS), Some(Stopped::Budget));
        clock.advance(3 * MS);
        assert_eq!(segment_cpu(&task, &clock, clock.now()), clock.now() - 49 * MS);
    }

    #[allow(clippy::unwrap_used)] // tests: a panic is the failure report
    mod inline_arrivals {
        //! A sandbox armed after an arrival's epoch bump still lets the inline dispatcher see
        //! that arrival at its first check: fresh, resumed after a preemption, or re-armed by
        //! a callback during which the arrival came.

        use std::cell::Cell;
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, OnceLock};
        use std::task::{Context, Poll, Waker};

        use super::super::*;
        use crate::config::{FunctionConfig, RuntimeConfig};
        use crate::registry::Registry;
        use crate::signals::{Epoch, InlineHooks, WorkerSignals};

        const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");

        thread_local! {
            /// Epoch callbacks on this thread (the hook a dispatcher polls from).
            static CALLBACKS: Cell<usize> = const { Cell::new(0) };
            /// What the hook reports: an unread arrival waits.
            static WAITING: Cell<bool> = const { Cell::new(false) };
            /// An arrival lands during the first callback, after its poll.
            static LATE_ARRIVAL: Cell<bool> = const { Cell::new(false) };
        }

        /// The dispatcher's poll: it reads every arrival waiting (as `Dispatcher::poll` does).
        fn polled() {
            let n = CALLBACKS.get() + 1;
            CALLBACKS.set(n);
            WAITING.set(n == 1 && LATE_ARRIVAL.get());
        }

        fn waiting() -> bool {
            WAITING.get()
        }

        struct Rig {
            signals: Arc<Signals>,
            function: Arc<Function>,
            _registry: Registry,
        }

        impl Rig {
            fn new(arrivals_waiting: bool) -> Self {
                CALLBACKS.set(0);
                WAITING.set(arrivals_waiting);
                LATE_ARRIVAL.set(false);
                let engine = crate::engine::build(&RuntimeConfig::default()).unwrap();
                let registry = Registry::new(engine.clone(), None, 1 << 30).unwrap();
                let function =
                    registry.register(FunctionConfig::new("spin"), SPIN.as_bytes()).unwrap();
                let signals = Arc::new(Signals {
                    clock: Clock::new(),
                    epoch: Epoch::Engine(engine),
                    workers: vec![WorkerSignals::default()],
                    abort: AtomicBool::new(false),
                    inline: Some(InlineHooks { on_epoch: polled, arrivals_waiting: waiting }),
                    contract_violation: OnceLock::new(),
                });
                Self { signals, function, _registry: registry }
            }

            /// A sandbox of request 1 spinning `k` iterations, built now or ahead.
            fn start(&self, k: u64, ready: Option<Ready>) -> SandboxFuture {
                start(Spec {
                    function: Arc::clone(&self.function),
                    payload: k.to_string().into_bytes(),
                    guest: GuestContext { request_id: 1, deadline_unix_us: 0, trace: None },
                    id: 1,
                    signals: Arc::clone(&self.signals),
                    clock: {
                        let clock = Arc::new(TaskClock::default());
                        let budget = self.function.config.limits.max_execution;
                        arm(&clock, &self.signals.clock, budget, (0, 0), false);
                        clock
                    },
                    ready,
                })
            }
        }

        fn poll(future: &mut SandboxFuture) -> Poll<SandboxResult> {
            future.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        }

        /// With no bump at all, a fresh sandbox calls back at its first check only when an
        /// arrival waits unread: its bump came before the store existed.
        #[test]
        fn a_fresh_sandbox_checks_in_at_once_when_an_arrival_waits() {
            for (waiting, callbacks) in [(false, 0), (true, 1)] {
                let rig = Rig::new(waiting);
                let mut run = rig.start(100_000, None);
                let Poll::Ready(done) = poll(&mut run) else { panic!("it never yields") };
                assert!(done.result.is_ok(), "{:?}", done.result);
                assert_eq!(CALLBACKS.get(), callbacks, "arrival waiting: {waiting}");
            }
        }

        /// A preempted sandbox calls back at its first check once resumed, though no bump
        /// came since: one that came while it was suspended was spent before its deadline was
        /// armed again.
        #[test]
        fn a_resumed_sandbox_checks_in_at_once() {
            for ahead in [false, true] {
                // An arrival waits: it checks in at its first check, and is preempted there.
                let rig = Rig::new(true);
                let ready = ahead.then(|| prepare(&rig.function, &rig.signals).unwrap());
                rig.signals.workers[0].preempt.store(1, Ordering::SeqCst);
                let mut run = rig.start(100_000, ready);
                assert!(poll(&mut run).is_pending(), "it yields to the preemption");
                assert_eq!(CALLBACKS.get(), 1);
                let Poll::Ready(done) = poll(&mut run) else { panic!("it yields once") };
                assert!(done.result.is_ok(), "{:?}", done.result);
                assert_eq!(CALLBACKS.get(), 2, "it checked in once more when resumed");
            }
        }

        /// A sandbox built ahead is armed afresh when its request starts: the bumps since it
        /// was built do not make it call back at its first check when nothing waits.
        #[test]
        fn a_sandbox_built_ahead_is_armed_afresh() {
            let rig = Rig::new(false);
            let ready = prepare(&rig.function, &rig.signals).unwrap();
            for _ in 0..3 {
                rig.signals.epoch.bump();
            }
            let mut run = rig.start(100_000, Some(ready));
            let Poll::Ready(done) = poll(&mut run) else { panic!("it never yields") };
            assert!(done.result.is_ok(), "{:?}", done.result);
            assert_eq!(CALLBACKS.get(), 0);
        }

        /// An arrival that comes during a callback, after its poll, spent its bump on that
        /// callback: the guest checks in again at its next check, once.
        #[test]
        fn an_arrival_during_a_callback_is_polled_at_the_next_check() {
            for ahead in [false, true] {
                let rig = Rig::new(true);
                LATE_ARRIVAL.set(true);
                let ready = ahead.then(|| prepare(&rig.function, &rig.signals).unwrap());
                let mut run = rig.start(100_000, ready);
                let Poll::Ready(done) = poll(&mut run) else { panic!("it never yields") };
                assert!(done.result.is_ok(), "{:?}", done.result);
                assert_eq!(CALLBACKS.get(), 2);
            }
        }
    }
}
