//! A request as the runtime's threads pass it around — a [`Task`] holding its payload or its
//! suspended sandbox — and the queues a worker shares with its dispatcher. The dispatcher sees a
//! task's sandbox only as an opaque future to hand back to a worker.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use luge_sched::{Nanos, RequestId};

use crate::notify::Notify;
use crate::outcome::{Failure, Outcome, Timing};
use crate::registry::Function;
use crate::reply::Reply;
use crate::sandbox::SandboxFuture;
use crate::signals::TaskClock;

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
    /// The trace it runs in (`SubmitOptions::trace`).
    pub trace: Option<luge_proto::TraceContext>,
    pub first_run: Option<Nanos>,
    /// Wall time it has occupied workers, over all run segments: the execution the scheduler
    /// sees (policy events, estimator, turnaround), since that is what delays the requests
    /// behind it. The CPU it had — its budget, what it reports — is `clock.cpu`.
    pub executed: Nanos,
    pub preemptions: u32,
    /// It takes the uLL lane (HORSE §4.1.3): a worker starts it in a ready sandbox if it has one.
    pub ull: bool,
    /// It is known to run briefly: it takes the uLL lane, or its known estimate is at most the
    /// group's short run (`GroupShared::short_run`). Its worker keeps reading its own socket
    /// meanwhile (`ingress.rs`) and reads no CPU clock for it (`sandbox::arm`).
    pub short: bool,
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
    /// Whether its sandbox is suspended, holding a pool slot while it waits.
    pub(crate) fn holds_sandbox(&self) -> bool {
        matches!(self.state, TaskState::Suspended(_))
    }

    /// Answers the request (consuming the task) with `result`.
    pub(crate) fn answer(self, now: Nanos, result: Result<Vec<u8>, Failure>) {
        let queued = self.first_run.unwrap_or(now).saturating_sub(self.received);
        let timing = Timing {
            queued: Duration::from_nanos(queued),
            instantiation: Duration::from_nanos(self.clock.instantiation.load(Ordering::Relaxed)),
            start_up: Duration::from_nanos(self.clock.start_up.load(Ordering::Relaxed)),
            executed: Duration::from_nanos(self.clock.cpu.load(Ordering::Relaxed)),
            total: Duration::from_nanos(now.saturating_sub(self.received)),
            preemptions: self.preemptions,
        };
        self.reply.send(Outcome::new(self.id, result, timing));
    }
}

/// What a worker tells its dispatcher.
pub(crate) enum WorkerEvent {
    Started {
        sched: RequestId,
    },
    Completed {
        sched: RequestId,
        function: Arc<Function>,
        executed: Nanos,
    },
    Preempted {
        task: Box<Task>,
    },
    /// A task committed behind a run that was preempted (`Action::Follow`): it never started and
    /// goes back to the dispatcher, ahead of that `Preempted`.
    Returned {
        task: Box<Task>,
    },
}

/// The queues and flags a worker shares with its dispatcher.
pub(crate) struct WorkerShared {
    /// Global worker index (into `Signals::workers`).
    pub index: usize,
    pub inbox: ArrayQueue<Box<Task>>,
    pub events: ArrayQueue<WorkerEvent>,
    pub notify: Notify,
    pub stop: AtomicBool,
    /// Wall time spent running sandboxes, summed over run segments (`Runtime::worker_stats`).
    pub busy_ns: AtomicU64,
    /// Run segments ended (completions and preemptions).
    pub segments: AtomicU64,
    /// Ready sandboxes it keeps per uLL function and in all (`RuntimeConfig::ready_sandboxes`,
    /// `ready_sandboxes_max`; `ready.rs`).
    pub ready_limits: (usize, usize),
    /// Ready sandboxes it holds, and their linear memory in bytes (`Runtime::worker_stats`).
    pub ready: AtomicU64,
    pub ready_bytes: AtomicU64,
}

impl WorkerShared {
    /// Worker `index`, whose inbox holds a run and up to `batch` followers committed behind it
    /// (`PolicyConfig::batch_max` with batching on, else 0).
    pub(crate) fn new(index: usize, batch: usize) -> Self {
        Self {
            index,
            inbox: ArrayQueue::new(4 + batch),
            events: ArrayQueue::new(64 + 2 * batch),
            notify: Notify::default(),
            stop: AtomicBool::new(false),
            busy_ns: AtomicU64::new(0),
            segments: AtomicU64::new(0),
            ready_limits: (0, 0),
            ready: AtomicU64::new(0),
            ready_bytes: AtomicU64::new(0),
        }
    }
}
