//! Worker threads: each runs the sandboxes its dispatcher tells it to, one at a time, as
//! user-level tasks on Wasmtime fibers polled by a tiny executor of its own (no OS thread per
//! request, no tokio).
//!
//! The worker never decides what to run: it obeys `Run` commands from its dispatcher's policy
//! and reports `Started` / `Completed` / `Preempted` back on its own single-producer event queue,
//! exactly the driver contract of `luge_sched::policy` that the simulator implements. A task is
//! polled until it finishes or yields; it yields only when the epoch callback finds a preemption
//! request for it, so `Pending` means "preempted" and the suspended future (store, instance and
//! fiber stack) goes back to the dispatcher, which may resume it on any worker of its group.
//!
//! Each segment is accounted twice: the wall time it occupied the worker (`Task::executed`, the
//! execution the scheduler sees) and the CPU the worker thread spent on it (`TaskClock::cpu`,
//! what the execution budget counts and `Timing::executed` reports; `sandbox.rs` has why).

use std::cell::{Cell, RefCell};
use std::os::fd::RawFd;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll, Waker};

use crate::config::WaitMode;
use crate::dispatcher::{Dispatcher, Step};
use crate::ingress::{Driver, Ingress};
use crate::notify::Notify;
use crate::outcome::Failure;
use luge_sched::Nanos;

use crate::ready::ReadyPool;
use crate::sandbox::{self, GuestContext, SandboxFuture};
use crate::signals::Signals;
use crate::task::{Task, TaskState, WorkerEvent, WorkerShared};

thread_local! {
    /// The dispatcher of an inline worker (dispatcher and worker on one thread).
    static INLINE: RefCell<Option<Dispatcher>> = const { RefCell::new(None) };
    /// The ready sandboxes of the worker on this thread (`ready.rs`); none until it starts.
    static READY: RefCell<ReadyPool> = RefCell::new(ReadyPool::new(0, 0));
    /// When the inline worker on this thread began the run segment it is in, if any.
    static RUN_START: Cell<Option<Nanos>> = const { Cell::new(None) };
}

/// Sets up this thread's ready sandboxes for worker `me`.
fn init_ready(me: &WorkerShared) {
    let (per_function, max) = me.ready_limits;
    READY.with(|pool| *pool.borrow_mut() = ReadyPool::new(per_function, max));
}

/// Builds one ready sandbox this worker lacks, if any (it has nothing to run); whether it did.
fn refill_ready(me: &WorkerShared, signals: &Arc<Signals>) -> bool {
    READY.with(|pool| {
        pool.try_borrow_mut().is_ok_and(|mut p| p.enabled() && p.refill_one(signals, me))
    })
}

/// How long this worker may sleep before its ready sandboxes need a look (`None`: it holds none).
fn ready_timeout(signals: &Signals) -> Option<std::time::Duration> {
    READY.with(|pool| pool.try_borrow().ok().and_then(|p| p.next_look(signals.clock.now())))
}

/// The earlier of two optional timeouts.
fn earliest(
    a: Option<std::time::Duration>,
    b: Option<std::time::Duration>,
) -> Option<std::time::Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Drops this worker's ready sandboxes (it stops).
fn clear_ready(me: &WorkerShared) {
    READY.with(|pool| pool.borrow_mut().clear(me));
}

/// How often an inline worker running short requests back to back takes a turn of a driven front
/// end's event loop (`ingress::Driver::turn`) and reads an attached socket (`Ingress::turn`), so
/// that what it answered meanwhile is written and arrivals are read within about this long plus
/// one short run (ns). A turn costs no wake-up,
/// but each reads what has arrived and so splits the next batch: at 100 µs a closed loop of 64
/// HTTP no-ops ran at 29k/s, at 500 µs at 35k/s (3 interleaved wrk runs each, `luge serve`
/// pinned to one core); at 16 connections both ran ~27k/s.
const DRIVE_TURN: u64 = 500_000;

/// Lets the inline dispatcher of this thread handle arrivals and events, and enforce a shutdown's
/// grace period, while a sandbox runs (called from the epoch callback); a no-op on other threads.
pub(crate) fn poll_inline() {
    INLINE.with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut()
            && let Some(d) = guard.as_mut()
        {
            d.poll_while_running();
            // A run still going after a short run's length may be long: the front end reads
            // meanwhile. Not at every callback: a submitter's epoch bump lands in short runs too.
            if let Some(start) = RUN_START.get()
                && d.signals.clock.now().saturating_sub(start) >= d.shared.short_run()
            {
                if let Some(ingress) = d.shared.ingress() {
                    ingress.busy();
                }
                if let Some(driver) = d.shared.driver() {
                    driver.busy();
                }
            }
        }
    });
}

/// Whether arrivals wait that the inline dispatcher of this thread has not read
/// (`signals::InlineHooks::arrivals_waiting`); false on other threads, and while the worker's
/// loop holds its dispatcher.
pub(crate) fn inline_arrivals_waiting() -> bool {
    INLINE.with(|cell| {
        cell.try_borrow().is_ok_and(|guard| guard.as_ref().is_some_and(|d| d.has_arrivals()))
    })
}

/// The body of a worker that is also its own dispatcher (`Layout::Inline`): one thread runs the
/// policy and the sandboxes; while a sandbox runs, the epoch callback polls for arrivals so an
/// urgent request can still preempt it.
pub(crate) fn run_inline(
    me: Arc<WorkerShared>,
    dispatcher: Dispatcher,
    signals: Arc<Signals>,
    mode: WaitMode,
    cpu: Option<usize>,
) {
    if let Some(cpu) = cpu {
        crate::engine::pin_current_thread(cpu);
    }
    let notify = Arc::clone(&dispatcher.shared.notify);
    notify.bind_current();
    me.notify.bind_current();
    init_ready(&me);
    let group = Arc::clone(&dispatcher.shared);
    // The ingress this worker last read and the driver whose loop it last ran (`ingress.rs`),
    // to tell them once more that the worker is idle after they are detached.
    let mut reader: Option<Arc<dyn Ingress>> = None;
    let mut driving: Option<Arc<dyn Driver>> = None;
    // The ingress attached as of a count of `ingress_changes` (for the turns between runs).
    let mut attached: (u64, Option<Arc<dyn Ingress>>) = (u64::MAX, None);
    // When the worker last ran a driver's loop or read its socket (waiting, or a turn between
    // runs).
    let mut turned_at = signals.clock.now();
    INLINE.with(|cell| *cell.borrow_mut() = Some(dispatcher));
    loop {
        let step = INLINE.with(|cell| cell.borrow_mut().as_mut().map_or(Step::Done, |d| d.step()));
        if let Some(task) = me.inbox.pop() {
            if !task.short
                && let Some(ingress) = group.ingress()
            {
                // Not known to be short: the front end reads while this runs.
                ingress.busy();
            }
            // Not known to be short: a driven front end's own thread runs its loop meanwhile.
            let driver = group.driver();
            if let Some(d) = &driver
                && !task.short
            {
                d.busy();
            }
            RUN_START.set(Some(signals.clock.now()));
            execute(&me, &notify, &signals, task);
            RUN_START.set(None);
            // Between short runs back to back, a turn of each attached front end every
            // `DRIVE_TURN` (answers held long enough go out after every run): what was answered
            // goes out and arrivals are read, on this thread — also for a socket whose requests
            // are not the ones keeping the worker busy.
            // The attached ingress, looked up again only when an attachment changed (no lock
            // per run).
            let changes = group.ingress_changes.load(Ordering::Acquire);
            if changes != attached.0 {
                attached = (changes, group.ingress());
            }
            if driver.is_some() || attached.1.is_some() {
                let now = signals.clock.now();
                let read = now.saturating_sub(turned_at) >= DRIVE_TURN;
                if let Some(i) = &attached.1 {
                    i.turn(read);
                }
                if read {
                    if let Some(d) = driver {
                        d.turn();
                    }
                    turned_at = now;
                }
            }
            continue;
        }
        let changes = group.ingress_changes.load(Ordering::Acquire);
        let has_work = || {
            !me.inbox.is_empty()
                || INLINE.with(|cell| cell.borrow().as_ref().is_some_and(|d| d.has_input()))
                || group.ingress_changes.load(Ordering::Acquire) != changes
        };
        match step {
            Step::Busy => {}
            Step::Done => break,
            Step::Idle(timeout) => {
                let ingress = group.ingress();
                let last = std::mem::replace(&mut reader, ingress.clone());
                // Run-to-completion (`ingress.rs`): what waits on the socket is read here, so
                // the next round runs it on this thread.
                if let Some(i) = &ingress
                    && i.poll() > 0
                {
                    continue;
                }
                // Nothing more to read: what this worker answered goes out, and the front end may
                // stop reading for it, before it builds ready sandboxes or waits (also for a
                // front end that just detached).
                if let Some(i) = ingress.as_ref().or(last.as_ref()) {
                    i.idle();
                }
                let driver = group.driver();
                let last = std::mem::replace(&mut driving, driver.clone());
                if let Some(d) = driver.as_ref().or(last.as_ref()) {
                    d.idle();
                }
                if refill_ready(&me, &signals) {
                    continue;
                }
                let timeout = earliest(timeout, ready_timeout(&signals));
                match (driver, ingress) {
                    (Some(d), i) => {
                        let source = i.map(|i| (i.fd(), changes));
                        let drive = |wake: RawFd, t| d.drive(wake, t);
                        notify.wait_driving(mode, timeout, source, has_work, drive)
                    }
                    (None, Some(i)) => notify.wait_on(mode, timeout, (i.fd(), changes), has_work),
                    (None, None) => notify.wait(mode, timeout, has_work),
                }
                // The loop ran until now.
                turned_at = signals.clock.now();
            }
        }
    }
    // The last answers this worker produced go out before it stops.
    if let Some(i) = group.ingress().or(reader) {
        i.idle();
    }
    // And the front end's own thread runs the loop from now on: this worker runs it no more.
    if let Some(d) = group.driver().or(driving) {
        d.busy();
    }
    INLINE.with(|cell| cell.borrow_mut().take());
    clear_ready(&me);
}

/// The worker thread's body.
pub(crate) fn run(
    me: Arc<WorkerShared>,
    dispatcher: Arc<Notify>,
    signals: Arc<Signals>,
    mode: WaitMode,
    cpu: Option<usize>,
) {
    if let Some(cpu) = cpu {
        crate::engine::pin_current_thread(cpu);
    }
    me.notify.bind_current();
    init_ready(&me);
    loop {
        if let Some(task) = me.inbox.pop() {
            execute(&me, &dispatcher, &signals, task);
            continue;
        }
        if me.stop.load(Ordering::Acquire) {
            clear_ready(&me);
            return;
        }
        if refill_ready(&me, &signals) {
            continue;
        }
        let timeout = ready_timeout(&signals);
        me.notify.wait(mode, timeout, || !me.inbox.is_empty() || me.stop.load(Ordering::Acquire));
    }
}

fn send(me: &WorkerShared, dispatcher: &Notify, mut event: WorkerEvent, wake: bool) {
    while let Err(back) = me.events.push(event) {
        event = back;
        dispatcher.notify();
        std::thread::yield_now();
    }
    if wake {
        dispatcher.notify();
    }
}

/// Runs one segment of `task` on this worker: [`begin`], then [`finish`].
pub(crate) fn execute(
    me: &WorkerShared,
    dispatcher: &Notify,
    signals: &Arc<Signals>,
    task: Box<Task>,
) {
    if let Some(segment) = begin(me, dispatcher, signals, task) {
        finish(me, dispatcher, signals, segment);
    }
}

/// A task started on a worker and not polled yet: its sandbox and when the segment began, on
/// the clock and on the worker thread's CPU clock.
pub(crate) struct Segment {
    task: Box<Task>,
    future: SandboxFuture,
    start: Nanos,
}

impl Segment {
    /// The dispatcher's id of the segment's request.
    #[cfg(test)]
    pub(crate) fn sched(&self) -> luge_sched::RequestId {
        self.task.sched
    }
}

/// Starts a run segment: reports `Started` and returns the sandbox to poll — unless a
/// preemption naming the task arrived before it started, which stops it at once, unchanged
/// (race 3 of `dispatcher.rs`).
pub(crate) fn begin(
    me: &WorkerShared,
    dispatcher: &Notify,
    signals: &Arc<Signals>,
    mut task: Box<Task>,
) -> Option<Segment> {
    let flag = &signals.workers[me.index].preempt;
    if flag.load(Ordering::Acquire) == task.sched.0
        && flag.compare_exchange(task.sched.0, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    {
        // Preempted before it started: stop it at once, execution unchanged.
        send(me, dispatcher, WorkerEvent::Started { sched: task.sched }, false);
        preempted(me, dispatcher, task);
        return None;
    }
    let start = signals.clock.now();
    task.clock.worker.store(me.index, Ordering::Relaxed);
    let budget = task.function.config.limits.max_execution;
    let cpu = task.clock.cpu.load(Ordering::Relaxed);
    // A short segment reads no CPU clock unless it outlives an epoch callback (`sandbox::arm`).
    sandbox::arm(&task.clock, &signals.clock, budget, (task.executed, cpu), task.short);
    task.first_run.get_or_insert(start);
    send(me, dispatcher, WorkerEvent::Started { sched: task.sched }, false);
    let future = match std::mem::replace(&mut task.state, TaskState::Running) {
        TaskState::Suspended(f) => f,
        TaskState::Fresh(payload) => sandbox::start(sandbox::Spec {
            ready: task
                .ull
                .then(|| READY.with(|pool| pool.borrow_mut().take(&task.function, start, me)))
                .flatten(),
            function: Arc::clone(&task.function),
            payload,
            guest: GuestContext {
                request_id: task.id,
                deadline_unix_us: task.deadline_unix_us,
                trace: task.trace,
            },
            id: task.sched.0,
            signals: Arc::clone(signals),
            clock: Arc::clone(&task.clock),
        }),
        TaskState::Running => {
            let now = signals.clock.now();
            complete(me, dispatcher, *task, now, Err(Failure::Internal("task ran twice".into())));
            return None;
        }
    };
    Some(Segment { task, future, start })
}

/// Runs a started segment until the sandbox finishes (answer, `Completed`) or yields to a
/// preemption (`Preempted`, the suspended sandbox handed back to the dispatcher).
pub(crate) fn finish(
    me: &WorkerShared,
    dispatcher: &Notify,
    signals: &Arc<Signals>,
    segment: Segment,
) {
    let Segment { mut task, mut future, start } = segment;
    let flag = &signals.workers[me.index].preempt;
    let mut cx = Context::from_waker(Waker::noop());
    // A panic in the host while it runs a sandbox (a bug in the WASI layer or below) ends that
    // request with an internal error; the worker, and every other request, go on.
    let polled = std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(&mut cx)));
    let polled = match polled {
        Ok(poll) => poll,
        Err(panic) => {
            drop(future);
            let _ = flag.compare_exchange(task.sched.0, 0, Ordering::AcqRel, Ordering::Relaxed);
            let now = ended(me, &mut task, signals, start);
            let what = panic_text(panic.as_ref());
            tracing::error!(
                request_id = task.id,
                function = %task.function.config.name,
                "the host panicked running a sandbox: {what}"
            );
            let failure = Failure::Internal(format!("the host panicked running it: {what}"));
            complete(me, dispatcher, *task, now, Err(failure));
            return;
        }
    };
    match polled {
        Poll::Ready(done) => {
            drop(future); // return the pool slot before answering
            // A preemption that lost the race with completion must not stay pending (race 2).
            let _ = flag.compare_exchange(task.sched.0, 0, Ordering::AcqRel, Ordering::Relaxed);
            let now = ended(me, &mut task, signals, start);
            if let Some(text) = &done.stderr {
                // Guest-controlled: bounded per request and rate-limited (`stderr_log`).
                crate::stderr_log::log_stderr(task.id, &task.function, text);
            }
            complete(me, dispatcher, *task, now, done.result);
        }
        Poll::Pending => {
            ended(me, &mut task, signals, start);
            task.preemptions += 1;
            task.state = TaskState::Suspended(future);
            preempted(me, dispatcher, task);
        }
    }
}

/// Hands the preempted `task` back to the dispatcher, and before it the batch committed behind
/// it (`Action::Follow`): those never start here. The dispatcher runs nothing else on this worker
/// before it has seen the `Preempted`, so every task in the inbox now is such a follower.
fn preempted(me: &WorkerShared, dispatcher: &Notify, task: Box<Task>) {
    while let Some(follower) = me.inbox.pop() {
        send(me, dispatcher, WorkerEvent::Returned { task: follower }, false);
    }
    send(me, dispatcher, WorkerEvent::Preempted { task }, true);
}

/// Accounts a run segment of `task` that began at `start` (clock) and ends now: the wall time it
/// occupied the worker (`Task::executed`, what the scheduler's estimator and turnaround see) and
/// the CPU it had (`sandbox::segment_cpu`, into `TaskClock::cpu`: what its budget counted and
/// `Timing::executed` reports), also counted as the worker's busy time. Returns the clock's now.
fn ended(me: &WorkerShared, task: &mut Task, signals: &Signals, start: Nanos) -> Nanos {
    let now = signals.clock.now();
    let cpu = sandbox::segment_cpu(&task.clock, &signals.clock, now);
    let wall = now.saturating_sub(start);
    // Less the inline dispatcher's polls during it (`sandbox::credit`): the function's own
    // execution, for its estimate.
    task.executed += wall.saturating_sub(task.clock.credited.load(Ordering::Relaxed));
    me.busy_ns.fetch_add(wall, Ordering::Relaxed);
    me.segments.fetch_add(1, Ordering::Relaxed);
    task.clock.cpu.fetch_add(cpu, Ordering::Relaxed);
    now
}

/// Answers `task` with `result` and reports the end of its run to the dispatcher.
fn complete(
    me: &WorkerShared,
    dispatcher: &Notify,
    task: Task,
    now: Nanos,
    result: Result<Vec<u8>, Failure>,
) {
    let (sched, function, executed) = (task.sched, Arc::clone(&task.function), task.executed);
    task.answer(now, result);
    // With a follower committed behind it (`Action::Follow`) the worker goes on at once and the
    // dispatcher needs no wake-up: it reads the event with the next one that wakes it, at the
    // latest the batch's last completion.
    let wake = me.inbox.is_empty();
    send(me, dispatcher, WorkerEvent::Completed { sched, function, executed }, wake);
}

/// The message of a caught panic.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}
