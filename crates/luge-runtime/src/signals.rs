//! What the runtime's threads share to steer running sandboxes, injected rather than reached
//! for: the clock every time stamp comes from (and the CPU clock of the calling thread, which
//! execution budgets count), the epoch that makes sandboxes check their flags, the per-worker
//! preemption flags, the abort flag of a shutdown, and the hook the epoch callback runs. The
//! dispatcher, the workers and the sandboxes all read them from one [`Signals`], so tests can
//! build one with a [`Clock::manual`] clock (whose CPU clock is the same manual time) and a
//! counting [`Epoch::counter`] and drive a dispatcher and a worker step by step,
//! deterministically.
//!
//! This module is the bottom layer of the runtime's threads: it knows nothing of tasks,
//! policies or sandboxes.

use std::sync::OnceLock;
#[cfg(test)]
use std::sync::atomic::Ordering;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::time::Instant;

use luge_sched::Nanos;

/// The runtime's monotonic clock: nanoseconds since start.
#[derive(Debug)]
pub(crate) enum Clock {
    /// The wall of the machine, from `Instant`.
    Real {
        /// When the clock read 0.
        base: Instant,
    },
    /// A clock that moves only when told ([`Clock::advance`]): tests.
    #[cfg(test)]
    Manual(AtomicU64),
}

impl Clock {
    /// A real clock reading 0 now.
    pub(crate) fn new() -> Self {
        Self::Real { base: Instant::now() }
    }

    /// A manual clock reading 0 until advanced.
    #[cfg(test)]
    pub(crate) fn manual() -> Self {
        Self::Manual(AtomicU64::new(0))
    }

    /// Moves a manual clock forward (no-op on the real one).
    #[cfg(test)]
    pub(crate) fn advance(&self, by: Nanos) {
        if let Self::Manual(now) = self {
            now.fetch_add(by, Ordering::SeqCst);
        }
    }

    pub(crate) fn now(&self) -> Nanos {
        match self {
            Self::Real { base } => base.elapsed().as_nanos() as Nanos,
            #[cfg(test)]
            Self::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// CPU time the calling thread has had, ns (`CLOCK_THREAD_CPUTIME_ID`: user and system
    /// time, so page faults and other kernel work done for it count; time spent waiting for a
    /// core does not). Only differences of two readings on one thread mean anything. Over any
    /// interval it advances at most as much as [`Clock::now`] (a thread runs on one core at a
    /// time). Where the platform has no thread CPU clock it is the wall clock — `clock_gettime`
    /// fails only for a clock id the system does not know, so that holds for the whole process,
    /// never for one reading. A manual clock's CPU clock is its wall clock.
    ///
    /// Costs a system call (the vDSO does not serve CPU-time clocks), where [`Clock::now`] is
    /// read in user space.
    pub(crate) fn cpu(&self) -> Nanos {
        match self {
            Self::Real { .. } => {
                let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
                // SAFETY: `ts` is a valid, writable timespec that outlives the call; the clock
                // id is a constant the kernel either knows or refuses with EINVAL.
                if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
                    return self.now();
                }
                let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
                let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
                secs.saturating_mul(1_000_000_000).saturating_add(nanos)
            }
            #[cfg(test)]
            Self::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// `instant` on this clock (0 if it is before the clock started; a manual clock's now).
    pub(crate) fn at(&self, instant: Instant) -> Nanos {
        match self {
            Self::Real { base } => {
                Nanos::try_from(instant.saturating_duration_since(*base).as_nanos())
                    .unwrap_or(Nanos::MAX)
            }
            #[cfg(test)]
            Self::Manual(now) => now.load(Ordering::SeqCst),
        }
    }
}

/// The engine-wide epoch: a bump makes every running sandbox run its epoch callback (check its
/// budget, the abort flag and its worker's preemption flag) at its next check.
#[derive(Debug)]
pub(crate) enum Epoch {
    /// Wasmtime's epoch of the runtime's engine.
    Engine(wasmtime::Engine),
    /// Bumps counted, nothing interrupted: tests of a dispatcher without sandboxes.
    #[cfg(test)]
    Counter(AtomicU64),
}

impl Epoch {
    /// Makes every running sandbox check in at its next epoch check. Whatever the calling
    /// thread wrote before is visible to a thread whose arming of a store's deadline read this
    /// bump's epoch or a later one and that then issues an acquire fence
    /// (`sandbox::arm_deadline`): a submitter pushes its arrival, then bumps, and a worker
    /// whose arming counted the bump sees the arrival.
    pub(crate) fn bump(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        match self {
            Self::Engine(engine) => engine.increment_epoch(),
            #[cfg(test)]
            Self::Counter(n) => {
                n.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// A counting epoch.
    #[cfg(test)]
    pub(crate) fn counter() -> Self {
        Self::Counter(AtomicU64::new(0))
    }

    /// Bumps so far of a counting epoch (0 for the engine's).
    #[cfg(test)]
    pub(crate) fn bumps(&self) -> u64 {
        match self {
            Self::Engine(_) => 0,
            Self::Counter(n) => n.load(Ordering::SeqCst),
        }
    }
}

/// What a worker publishes to the sandboxes it runs.
#[derive(Debug, Default)]
pub(crate) struct WorkerSignals {
    /// Dispatcher id of the request to preempt on this worker (0 = none).
    pub preempt: AtomicU64,
}

/// Signals shared by every dispatcher, worker and sandbox of a runtime.
#[derive(Debug)]
pub(crate) struct Signals {
    pub clock: Clock,
    pub epoch: Epoch,
    pub workers: Vec<WorkerSignals>,
    /// Set at the end of the shutdown grace period: running sandboxes stop at the next tick.
    pub abort: AtomicBool,
    /// What sandboxes ask of the dispatcher that shares their worker's thread in the inline
    /// layout (`Layout::Inline`); `None` in the threads layout.
    pub inline: Option<InlineHooks>,
    /// The first policy-contract violation a dispatcher saw (checked in debug builds only;
    /// `Runtime::shutdown` then fails a debug assertion, so every test that runs a runtime
    /// also checks the contract).
    pub contract_violation: OnceLock<String>,
}

impl Signals {
    /// Signals for one worker under a manual clock and a counting epoch, no hook: what tests
    /// drive a dispatcher or a worker's parts with, step by step.
    #[cfg(test)]
    pub(crate) fn manual() -> Self {
        Self {
            clock: Clock::manual(),
            epoch: Epoch::counter(),
            workers: vec![WorkerSignals::default()],
            abort: AtomicBool::new(false),
            inline: None,
            contract_violation: OnceLock::new(),
        }
    }

    /// Whether dispatchers run on their workers' threads (inline hooks are installed).
    pub(crate) fn inline(&self) -> bool {
        self.inline.is_some()
    }
}

/// How a sandbox reaches the inline dispatcher on its worker's thread (`Layout::Inline`), which
/// sees arrivals only when that thread looks: between runs, and from the epoch callback while a
/// sandbox runs. A submitter bumps the epoch after each arrival so that the running sandbox
/// calls back at once (unless periodic notification defers it: `notify_interval`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct InlineHooks {
    /// Run first by every epoch callback: polls the dispatcher.
    pub on_epoch: fn(),
    /// Whether arrivals wait that the dispatcher has not read yet. A bump spent before a store's
    /// deadline was armed does not interrupt it (the deadline counts from the epoch at arming),
    /// so a sandbox armed after an arrival's bump asks this and, if so, calls back at its first
    /// check (`sandbox::arm_deadline`), as does the epoch callback after its own poll; otherwise
    /// the arrival would wait for the next bump, up to a tick (1 ms) away.
    pub arrivals_waiting: fn() -> bool,
}

/// Per-task values the worker updates before each run segment and the epoch callback reads
/// (`sandbox::arm` sets them; the module doc of `sandbox.rs` has the budget's design).
#[derive(Debug)]
pub(crate) struct TaskClock {
    /// Worker currently running the task.
    pub worker: AtomicUsize,
    /// Clock time at which this segment is ended whatever CPU it had: the wall-time backstop.
    pub backstop_end: AtomicU64,
    /// Clock time before which the CPU budget cannot have run out (the segment's start plus
    /// the CPU budget left): the epoch callback reads the CPU clock only from then on.
    /// `u64::MAX` (the default): no CPU budget armed.
    pub cpu_from: AtomicU64,
    /// Reading of the running worker's CPU clock ([`Clock::cpu`]) at which the CPU budget runs
    /// out. `u64::MAX` (the default): no CPU budget armed.
    pub cpu_end: AtomicU64,
    /// CPU time the task had in its finished run segments, ns (sandbox build and teardown
    /// included): what `Timing::executed` reports.
    pub cpu: AtomicU64,
    /// Time building the task's sandbox took, ns (set once, before its first instruction; wall
    /// time on the worker's thread, which does nothing else meanwhile).
    pub instantiation: AtomicU64,
    /// Time from the worker picking the task up to its first guest instruction, ns (set once;
    /// `Timing::start_up`).
    pub start_up: AtomicU64,
    /// The running worker's CPU clock when this segment began ([`UNREAD`]: not read yet — a
    /// short segment reads it only if it lives to its first epoch callback; `sandbox::arm`).
    pub cpu_start: AtomicU64,
    /// Clock time this segment began.
    pub wall_start: AtomicU64,
    /// The CPU budget left when this segment began, ns.
    pub cpu_left: AtomicU64,
    /// Time in this segment the thread spent on the node's work, not the guest's — the inline
    /// dispatcher's polls in epoch callbacks (`sandbox::credit`) — ns: kept out of the
    /// segment's CPU, budget and `Task::executed`.
    pub credited: AtomicU64,
}

/// [`TaskClock::cpu_start`] not read.
pub(crate) const UNREAD: Nanos = u64::MAX;

impl Default for TaskClock {
    fn default() -> Self {
        Self {
            worker: AtomicUsize::new(0),
            backstop_end: AtomicU64::new(0),
            cpu_from: AtomicU64::new(u64::MAX),
            cpu_end: AtomicU64::new(u64::MAX),
            cpu: AtomicU64::new(0),
            instantiation: AtomicU64::new(0),
            start_up: AtomicU64::new(0),
            cpu_start: AtomicU64::new(UNREAD),
            wall_start: AtomicU64::new(0),
            cpu_left: AtomicU64::new(0),
            credited: AtomicU64::new(0),
        }
    }
}
