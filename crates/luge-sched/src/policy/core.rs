//! Bookkeeping every policy needs about its workers: which request runs where, since when, and
//! whether a preemption is already on its way. Keeps the driver contract of the parent module
//! (run only on idle workers, at most one preemption in flight per worker) in one place.

use super::{Action, Admission, PolicyStats, RejectReason, WorkerId};
use crate::queue::{DeadlineQueue, EdfQueue};
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
            reject(stats, *req, reason, out);
            false
        }
        None => true,
    }
}

/// Emits the `Reject` of `req` for `reason` and counts it.
fn reject(stats: &mut PolicyStats, req: Request, reason: RejectReason, out: &mut Vec<Action>) {
    stats.rejected += 1;
    if reason == RejectReason::Shed {
        stats.shed += 1;
    }
    out.push(Action::Reject { req, reason });
}

/// Answers the admitted `req`, whose deadline became unreachable, instead of running it.
pub(crate) fn shed(stats: &mut PolicyStats, req: Request, out: &mut Vec<Action>) {
    reject(stats, req, RejectReason::Shed, out);
}

/// Where a newcomer's work starts on a worker whose running request is `running`, and where the
/// queued requests behind it start: `(start, rest_start)`. `preempts` says `req` will preempt the
/// running request; then, and when a preemption of the running request is already in flight and
/// `req` is more urgent than it, `req` does not wait for the running request (only the queued
/// requests behind `req` still count it).
pub(crate) fn starts(
    running: Option<&Running>,
    preempts: bool,
    now: Nanos,
    req: &Request,
) -> (Nanos, Nanos) {
    let rest_start = now.saturating_add(running.map_or(0, |r| r.remaining_at(now)));
    let jumps_ahead =
        running.is_some_and(|r| preempts || (r.preempt_pending && req.key() < r.req.key()));
    (if jumps_ahead { now } else { rest_start }, rest_start)
}

/// Admission on the wait (`Admission::on_wait`) for `req` bound to a worker whose EDF queue is
/// `queue`, its work starting at `start` and the queued requests behind it at `rest_start`
/// ([`starts`]): whether `req` meets its deadline there and, with `protect_admitted`, pushes no
/// request already admitted there past its own.
pub(crate) fn fits_the_wait(
    admission: &Admission,
    queue: &DeadlineQueue,
    (start, rest_start): (Nanos, Nanos),
    req: &Request,
) -> bool {
    if admission.protect_admitted {
        queue.admits(req, req.own_work(), start, rest_start)
    } else {
        queue.fits(req, req.own_work(), start)
    }
}

/// Admission on the wait for `req` ([`fits_the_wait`], when `Admission::on_wait`): false, with
/// `req` refused as unreachable at the current load, when it does not fit.
pub(crate) fn passes_the_wait(
    stats: &mut PolicyStats,
    admission: &Admission,
    queue: &DeadlineQueue,
    at: (Nanos, Nanos),
    req: &Request,
    out: &mut Vec<Action>,
) -> bool {
    if admission.on_wait && !fits_the_wait(admission, queue, at, req) {
        reject(stats, *req, RejectReason::Unreachable, out);
        return false;
    }
    true
}

/// With `Admission::shed`, whether `req`, started at `now`, can no longer finish by its deadline
/// on its own work alone.
pub(crate) fn lost(admission: &Admission, now: Nanos, req: &Request) -> bool {
    admission.shed && now.saturating_add(req.own_work()) > req.absolute_deadline
}

/// The next request of `queue` to run at `now`: with `Admission::shed`, every request at the head
/// that can no longer finish by its deadline is answered instead (its own estimate known).
pub(crate) fn pop_runnable(
    stats: &mut PolicyStats,
    admission: &Admission,
    queue: &mut DeadlineQueue,
    now: Nanos,
    out: &mut Vec<Action>,
) -> Option<Request> {
    while let Some(next) = queue.pop() {
        if lost(admission, now, &next) {
            shed(stats, next, out);
            continue;
        }
        return Some(next);
    }
    None
}

/// With `Admission::shed`, answers every request of `queue` that would miss its deadline if the
/// queue's work started at `start` and ran as expected, earliest first (shedding one gives those
/// behind it back its work). Stops at a doomed request whose estimate is only a guess: that one is
/// judged when it reaches the head ([`pop_runnable`], on its own work alone). O(log n) per
/// request examined.
pub(crate) fn shed_doomed(
    stats: &mut PolicyStats,
    admission: &Admission,
    queue: &mut DeadlineQueue,
    start: Nanos,
    out: &mut Vec<Action>,
) {
    if !admission.shed {
        return;
    }
    while let Some(key) = queue.first_doomed(start) {
        if !queue.get(key).is_some_and(|r| r.estimate_known) {
            return;
        }
        if let Some(req) = queue.remove(key) {
            shed(stats, req, out);
        }
    }
}
