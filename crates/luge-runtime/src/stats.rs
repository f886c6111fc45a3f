//! What the runtime reports about its own threads, read at any time without stopping them: each
//! worker's busy time and each dispatcher group's queue and wake-ups (the status page and
//! `/metrics`).

use std::time::Duration;

/// One worker's counters since the runtime started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStats {
    /// Worker index (as in the `luge-worker-<index>` thread name).
    pub index: usize,
    /// The dispatcher group it belongs to.
    pub group: usize,
    /// Wall time it spent running sandboxes (instantiation included): utilisation is its growth
    /// over an interval divided by the interval.
    pub busy: Duration,
    /// Run segments it ended: one per completed request, plus one per preemption.
    pub segments: u64,
    /// Ready sandboxes it holds for uLL functions (after HORSE §1–2's warm sandboxes;
    /// `RuntimeConfig::ready_sandboxes`), each a slot of the sandbox pool.
    pub ready: u64,
    /// The linear memory those hold, bytes (their memories' sizes; resident only as touched).
    pub ready_bytes: u64,
}

/// One dispatcher group's queue, as of the dispatcher's last round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    /// Group index (as in the `luge-dispatch-<index>` thread name).
    pub index: usize,
    /// The indices of its workers.
    pub workers: Vec<usize>,
    /// Requests it holds that are not running: admitted and waiting, or preempted.
    pub queued: usize,
    /// Of those, the preempted ones that hold a suspended sandbox (a pool slot).
    pub suspended: usize,
    /// Submissions not yet taken by the dispatcher.
    pub submissions: usize,
    /// Requests demoted to the best-effort lane since the runtime started (functions with
    /// `on_overrun = demote`, Edge-RT §IV-C).
    pub demoted: u64,
    /// Preemptions deferred because the group held its bound of suspended sandboxes (its share
    /// of the pool, less its ready sandboxes' and a running one per worker): carried out once a
    /// slot is given back, unless the run ends first.
    pub preemptions_deferred: u64,
    /// Wake-ups issued to the group's sleeping threads (its dispatcher's and its workers'),
    /// each an unpark: a futex system call and, on this kind of VM, ~20 µs before the thread
    /// runs.
    pub wakeups: u64,
    /// Times the group's threads went to sleep (each a futex wait).
    pub sleeps: u64,
    /// Arrivals whose wake-up was left to the periodic notification (`notify_interval`,
    /// Edge-RT §IV-B's Δtimer) because they had slack for it.
    pub deferred: u64,
    /// Arrivals that took the uLL lane (HORSE §4.1.3; `RuntimeConfig::ull_lane`).
    pub ull: u64,
    /// Requests committed to a worker behind its run (deadline-limited batching, Edge-RT §IV-A;
    /// `PolicyConfig::batch_window`): each started there without a hand-off, or was handed back
    /// when that run was preempted and counted again if committed again.
    pub batched: u64,
    /// Of `batched`, the commitments handed back unstarted (`batched − batch_returned` requests
    /// started without a hand-off).
    pub batch_returned: u64,
    /// Arrivals refused as unreachable at the current load by the thread that submitted them,
    /// on the dispatcher's published backlog (`luge_sched::Backlog`), never handed over.
    pub refused_early: u64,
}
