//! What the runtime's threads share to steer running sandboxes, injected rather than reached
//! for: the clock every time stamp comes from, the epoch that makes sandboxes check their
//! flags, the per-worker preemption flags, the abort flag of a shutdown, and the hook the epoch
//! callback runs. The dispatcher, the workers and the sandboxes all read them from one
//! [`Signals`], so tests can build one with a [`Clock::manual`] clock and a counting
//! [`Epoch::counter`] and drive a dispatcher and a worker step by step, deterministically.
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
    pub(crate) fn bump(&self) {
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
    /// Run first by every epoch callback: the inline layout polls the dispatcher that shares
    /// the worker's thread (`Layout::Inline`); `None` in the threads layout.
    pub on_epoch: Option<fn()>,
    /// The first policy-contract violation a dispatcher saw (checked in debug builds only;
    /// `Runtime::shutdown` then fails a debug assertion, so every test that runs a runtime
    /// also checks the contract).
    pub contract_violation: OnceLock<String>,
}

impl Signals {
    /// Whether dispatchers run on their workers' threads (an epoch hook is installed).
    pub(crate) fn inline(&self) -> bool {
        self.on_epoch.is_some()
    }
}

/// Per-task values the worker updates before each run segment and the epoch callback reads.
#[derive(Debug, Default)]
pub(crate) struct TaskClock {
    /// Worker currently running the task.
    pub worker: AtomicUsize,
    /// Clock time at which the execution budget runs out during this segment.
    pub budget_end: AtomicU64,
    /// How long building the task's sandbox took, ns (set once, before its first instruction).
    pub instantiation: AtomicU64,
}
