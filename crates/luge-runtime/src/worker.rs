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

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Waker};

use crossbeam_queue::ArrayQueue;
use luge_sched::{FunctionId, Nanos, RequestId};

use crate::config::WaitMode;
use crate::dispatcher::{Dispatcher, Step};
use crate::notify::Notify;
use crate::outcome::{Outcome, Timing};
use crate::registry::Function;
use crate::reply::Reply;
use crate::sandbox::{self, GuestContext, SandboxFuture, Signals, TaskClock};

/// A request owned by the runtime until it is answered.
pub(crate) struct Task {
    /// Runtime-wide request id (logs, replies).
    pub id: u64,
    /// The dispatcher's id for it (policy events, preemption flags); unique within its group.
    pub sched: RequestId,
    pub function: Arc<Function>,
    pub reply: Reply,
    /// When the node received it (runtime clock): deadline, queueing and total count from here.
    pub received: Nanos,
    pub deadline_unix_us: u64,
    pub first_run: Option<Nanos>,
    pub executed: Nanos,
    pub preemptions: u32,
    pub state: TaskState,
    pub clock: Arc<TaskClock>,
}

/// Where a task's sandbox is.
pub(crate) enum TaskState {
    /// Not started: just the payload (no pool slot held while queued).
    Fresh(Vec<u8>),
    /// Started and preempted.
    Suspended(SandboxFuture),
    /// Transient while running.
    Running,
}

impl Task {
    /// Answers the request (consuming the task) with `result`.
    pub(crate) fn answer(self, now: Nanos, result: Result<Vec<u8>, crate::outcome::Failure>) {
        let queued = self.first_run.unwrap_or(now).saturating_sub(self.received);
        let timing = Timing {
            queued: std::time::Duration::from_nanos(queued),
            executed: std::time::Duration::from_nanos(self.executed),
            total: std::time::Duration::from_nanos(now.saturating_sub(self.received)),
            preemptions: self.preemptions,
        };
        self.reply.send(Outcome { request_id: self.id, result, timing });
    }
}

/// What a worker tells its dispatcher.
pub(crate) enum WorkerEvent {
    Started { sched: RequestId },
    Completed { sched: RequestId, function: FunctionId, executed: Nanos },
    Preempted { task: Box<Task> },
}

/// The queues and flags a worker shares with its dispatcher.
pub(crate) struct WorkerShared {
    /// Global worker index (into [`Signals::workers`]).
    pub index: usize,
    pub inbox: ArrayQueue<Box<Task>>,
    pub events: ArrayQueue<WorkerEvent>,
    pub notify: Notify,
    pub stop: AtomicBool,
}

impl WorkerShared {
    pub(crate) fn new(index: usize) -> Self {
        Self {
            index,
            inbox: ArrayQueue::new(4),
            events: ArrayQueue::new(64),
            notify: Notify::default(),
            stop: AtomicBool::new(false),
        }
    }
}

thread_local! {
    /// The dispatcher of an inline worker (dispatcher and worker on one thread).
    static INLINE: RefCell<Option<Dispatcher>> = const { RefCell::new(None) };
}

/// Lets the inline dispatcher of this thread handle arrivals and events while a sandbox runs
/// (called from the epoch callback); a no-op on other threads.
pub(crate) fn poll_inline() {
    INLINE.with(|cell| {
        if let Ok(mut guard) = cell.try_borrow_mut()
            && let Some(d) = guard.as_mut()
        {
            d.poll();
        }
    });
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
    INLINE.with(|cell| *cell.borrow_mut() = Some(dispatcher));
    loop {
        let step = INLINE.with(|cell| cell.borrow_mut().as_mut().map_or(Step::Done, |d| d.step()));
        if let Some(task) = me.inbox.pop() {
            execute(&me, &notify, &signals, task);
            continue;
        }
        match step {
            Step::Busy => {}
            Step::Done => break,
            Step::Idle(timeout) => notify.wait(mode, timeout, || {
                !me.inbox.is_empty()
                    || INLINE.with(|cell| cell.borrow().as_ref().is_some_and(|d| d.has_input()))
            }),
        }
    }
    INLINE.with(|cell| cell.borrow_mut().take());
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
    loop {
        if let Some(task) = me.inbox.pop() {
            execute(&me, &dispatcher, &signals, task);
            continue;
        }
        if me.stop.load(Ordering::Acquire) {
            return;
        }
        me.notify.wait(mode, None, || !me.inbox.is_empty() || me.stop.load(Ordering::Acquire));
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

fn execute(me: &WorkerShared, dispatcher: &Notify, signals: &Arc<Signals>, mut task: Box<Task>) {
    let flag = &signals.workers[me.index].preempt;
    if flag.load(Ordering::Acquire) == task.sched.0
        && flag.compare_exchange(task.sched.0, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
    {
        // Preempted before it started: stop it at once, execution unchanged.
        send(me, dispatcher, WorkerEvent::Started { sched: task.sched }, false);
        send(me, dispatcher, WorkerEvent::Preempted { task }, true);
        return;
    }
    let start = signals.clock.now();
    task.clock.worker.store(me.index, Ordering::Relaxed);
    let budget = task.function.config.limits.max_execution;
    task.clock
        .budget_end
        .store(sandbox::budget_end(start, budget, task.executed), Ordering::Relaxed);
    task.first_run.get_or_insert(start);
    send(me, dispatcher, WorkerEvent::Started { sched: task.sched }, false);
    let mut future = match std::mem::replace(&mut task.state, TaskState::Running) {
        TaskState::Suspended(f) => f,
        TaskState::Fresh(payload) => sandbox::start(
            Arc::clone(&task.function),
            payload,
            GuestContext { request_id: task.id, deadline_unix_us: task.deadline_unix_us },
            task.sched.0,
            Arc::clone(signals),
            Arc::clone(&task.clock),
        ),
        TaskState::Running => {
            let now = signals.clock.now();
            let (sched, function) = (task.sched, task.function.id);
            let executed = task.executed;
            task.answer(now, Err(crate::outcome::Failure::Internal("task ran twice".into())));
            send(me, dispatcher, WorkerEvent::Completed { sched, function, executed }, true);
            return;
        }
    };
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(done) => {
            drop(future); // return the pool slot before answering
            // A preemption that lost the race with completion must not stay pending.
            let _ = flag.compare_exchange(task.sched.0, 0, Ordering::AcqRel, Ordering::Relaxed);
            let now = signals.clock.now();
            task.executed += now.saturating_sub(start);
            if let Some(text) = &done.stderr {
                tracing::info!(
                    request_id = task.id,
                    function = %task.function.config.name,
                    "stderr: {text}"
                );
            }
            let (sched, function, executed) = (task.sched, task.function.id, task.executed);
            task.answer(now, done.result);
            send(me, dispatcher, WorkerEvent::Completed { sched, function, executed }, true);
        }
        Poll::Pending => {
            let now = signals.clock.now();
            task.executed += now.saturating_sub(start);
            task.preemptions += 1;
            task.state = TaskState::Suspended(future);
            send(me, dispatcher, WorkerEvent::Preempted { task }, true);
        }
    }
}
