//! Early binding to per-worker EDF queues, the part SledgeScale's dispatcher (SledgeScale §3.3,
//! Alg. 2) and its early-binding baselines (§4: `rr`, `jsq`, `lld`) share once they have picked
//! a worker: admission on the wait there, the binding (`Enqueue`), running at once on an empty
//! worker or queueing by deadline, shedding what the newcomer pushed past its deadline; and what
//! a freed EDF worker runs next.

use super::core::Cores;
use super::{Action, WorkerId};
use crate::queue::EdfQueue;
use crate::request::{Nanos, Request};
use crate::run_queue::RunQueue;

/// Where a newcomer's work starts on worker `w`, and where the queued requests behind it start:
/// `(start, rest_start)`, the latter after what the running request and the batch committed
/// behind it still claim of the worker ([`Cores::claim_on`]). `preempts` says `req` will preempt
/// the running request; then, and when a preemption of the running request is already in flight
/// and `req` is more urgent than it, `req` does not wait for the running request (only the
/// queued requests behind `req` still count it).
pub(crate) fn starts(
    cores: &Cores,
    (w, preempts): (WorkerId, bool),
    now: Nanos,
    req: &Request,
) -> (Nanos, Nanos) {
    let running = cores.get(w);
    let rest_start = now.saturating_add(cores.claim_on(now, w));
    let jumps_ahead =
        running.is_some_and(|r| preempts || (r.preempt_pending && req.key() < r.req.key()));
    (if jumps_ahead { now } else { rest_start }, rest_start)
}

/// Binds the admitted `req`, arriving at `now`, to worker `w` whose EDF queue is `queue`, the
/// worker the policy picked: refused if it fails admission on the wait there; else `Enqueue`d,
/// and run at once if the worker is idle with an empty queue, or queued, shedding what it pushed
/// past its deadline and preempting the running request if `preempt`.
pub(crate) fn bind(
    cores: &mut Cores,
    queue: &mut RunQueue,
    (w, preempt): (WorkerId, bool),
    now: Nanos,
    req: Request,
    out: &mut Vec<Action>,
) {
    queue.advance(now);
    let at = starts(cores, (w, preempt), now, &req);
    if !cores.passes_the_wait((w, queue), (now, at), &req, out) {
        return;
    }
    out.push(Action::Enqueue { worker: w, id: req.id });
    if cores.is_idle(w) && queue.is_empty() {
        cores.run(w, req, out);
        return;
    }
    // A busy worker with nothing queued ahead of it: the newcomer joins its batch if Δbatch
    // allows (Edge-RT §IV-A: "if a receiving FWP is already active, messages transferred to it
    // are batched") and it finishes in time behind the batch — a committed request starts
    // unasked, so it is judged now, not when it would reach the head.
    let fits_behind = at.1.saturating_add(req.own_work()) <= req.absolute_deadline;
    if !preempt
        && fits_behind
        && queue.peek().is_none_or(|h| req.key() < h.key())
        && cores.may_follow(w, &req)
    {
        cores.follow(w, req, out);
        // Committed ahead of the queue: shed what it pushed past its deadline, as below.
        cores.shed_doomed(queue, (at.1.saturating_add(req.own_work()), now), out);
        return;
    }
    queue.insert(req);
    // Admitted ahead of others: shed what it pushed past its deadline.
    cores.shed_doomed(queue, (at.0, now), out);
    if preempt {
        cores.preempt(w, out);
    }
}

/// Worker `w`, whose EDF queue is `queue`, just became idle at `now`: shed what its queue can no
/// longer finish in time, then run the most urgent request that can still make it. Returns
/// whether one runs.
pub(crate) fn run_next(
    cores: &mut Cores,
    queue: &mut RunQueue,
    w: WorkerId,
    now: Nanos,
    out: &mut Vec<Action>,
) -> bool {
    queue.advance(now);
    cores.shed_doomed(queue, (now, now), out);
    match cores.pop_runnable(queue, now, out) {
        Some(next) => {
            cores.run(w, next, out);
            fill_batch(cores, queue, w, out);
            true
        }
        None => false,
    }
}

/// Deadline-limited batching (Edge-RT §IV-A): commits to `w`, behind the run it just got, the
/// queued requests whose deadlines lie within Δbatch of that run's, most urgent first, up to the
/// batch's size bound ([`Cores::may_follow`]). Nothing is committed with batching off. The
/// queue was just shed of what its work dooms, so every follower can still make its deadline
/// as expected.
fn fill_batch(cores: &mut Cores, queue: &mut RunQueue, w: WorkerId, out: &mut Vec<Action>) {
    while queue.peek().is_some_and(|head| cores.may_follow(w, head)) {
        let Some(req) = queue.pop() else { return };
        cores.follow(w, req, out);
    }
}
