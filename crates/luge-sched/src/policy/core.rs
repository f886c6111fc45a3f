//! Bookkeeping every policy needs about its workers: which request runs where, since when, and
//! whether a preemption is already on its way. Keeps the driver contract of the parent module
//! (run only on idle workers, at most one preemption in flight per worker) in one place.

use super::{Action, Admission, PolicyStats, WorkerId};
use crate::request::{Nanos, Request, RequestId};

/// The request on a worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Running {
    /// The request, with `executed` as of when it was last started.
    pub req: Request,
    /// When the driver reported it started (`None` between `Run` and `Started`).
    pub since: Option<Nanos>,
    /// Start of the current scheduling quantum (for time-sliced policies).
    pub slice_start: Option<Nanos>,
    /// A `Preempt` was sent and neither `Preempted` nor `Completed` has come back yet.
    pub preempt_pending: bool,
}

impl Running {
    /// Remaining execution at `now`, floored like [`Request::remaining`].
    pub fn remaining_at(&self, now: Nanos) -> Nanos {
        self.req.remaining_after(self.since.map_or(0, |s| now.saturating_sub(s)))
    }

    /// Slack at `now`.
    pub fn slack_at(&self, now: Nanos) -> i128 {
        self.req.absolute_deadline as i128 - now as i128 - self.remaining_at(now) as i128
    }

    /// Time spent in the current quantum.
    pub fn in_slice(&self, now: Nanos) -> Nanos {
        self.slice_start.map_or(0, |s| now.saturating_sub(s))
    }
}

/// Per-worker running state of one group.
#[derive(Debug, Clone)]
pub(crate) struct Cores {
    running: Vec<Option<Running>>,
}

impl Cores {
    pub fn new(workers: usize) -> Self {
        Self { running: vec![None; workers] }
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn get(&self, w: WorkerId) -> Option<&Running> {
        self.running.get(w).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, w: WorkerId) -> Option<&mut Running> {
        self.running.get_mut(w).and_then(Option::as_mut)
    }

    pub fn is_idle(&self, w: WorkerId) -> bool {
        self.get(w).is_none()
    }

    /// The lowest-numbered idle worker.
    pub fn first_idle(&self) -> Option<WorkerId> {
        self.running.iter().position(Option::is_none)
    }

    /// Iterates over (worker, running request).
    pub fn iter(&self) -> impl Iterator<Item = (WorkerId, &Running)> {
        self.running.iter().enumerate().filter_map(|(w, r)| r.as_ref().map(|r| (w, r)))
    }

    /// Puts `req` on the idle worker `w` and emits `Run`.
    pub fn run(&mut self, w: WorkerId, req: Request, out: &mut Vec<Action>) {
        debug_assert!(self.is_idle(w), "policy ran a request on busy worker {w}");
        self.running[w] =
            Some(Running { req, since: None, slice_start: None, preempt_pending: false });
        out.push(Action::Run { worker: w, req });
    }

    /// Records the driver's `Started`; returns false if `id` is not what runs on `w`.
    pub fn started(&mut self, w: WorkerId, id: RequestId, now: Nanos) -> bool {
        match self.get_mut(w) {
            Some(r) if r.req.id == id => {
                r.since = Some(now);
                r.slice_start = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Takes the run of `id` off `w` (on `Completed` or `Preempted`), with `executed` recorded.
    pub fn finish(&mut self, w: WorkerId, id: RequestId, executed: Nanos) -> Option<Request> {
        match self.running.get_mut(w) {
            Some(slot @ Some(_)) if slot.as_ref().is_some_and(|r| r.req.id == id) => {
                let mut req = slot.take()?.req;
                req.executed = executed;
                Some(req)
            }
            _ => None,
        }
    }

    /// Asks the driver to stop `w`'s request unless a preemption is already in flight.
    /// Returns whether a `Preempt` was emitted.
    pub fn preempt(&mut self, w: WorkerId, out: &mut Vec<Action>) -> bool {
        match self.get_mut(w) {
            Some(r) if !r.preempt_pending => {
                r.preempt_pending = true;
                out.push(Action::Preempt { worker: w, id: r.req.id });
                true
            }
            _ => false,
        }
    }
}

/// The arrival prelude every policy shares: counts the arrival and, if `admission` refuses it
/// with `queued` requests already waiting, emits the `Reject`. Returns whether it was admitted.
pub(crate) fn admit(
    stats: &mut PolicyStats,
    admission: &Admission,
    now: Nanos,
    req: &Request,
    queued: usize,
    out: &mut Vec<Action>,
) -> bool {
    stats.arrivals += 1;
    match admission.check(now, req, queued) {
        Some(reason) => {
            stats.rejected += 1;
            out.push(Action::Reject { req: *req, reason });
            false
        }
        None => true,
    }
}
