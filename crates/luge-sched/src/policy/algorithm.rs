//! The event handling every policy shares, written once. A policy implements [`Algorithm`] —
//! what its paper decides: where an admitted arrival goes, where a preempted request goes back,
//! what a freed worker runs next, what a timer changes — and gets [`Policy`] from it. The shared
//! part is the bookkeeping of the driver contract (see the [`policy`](super) module): admission
//! before an arrival is placed; `Started`, `Completed` and `Preempted` recorded in [`Cores`] (a
//! stale report changes nothing); a freed worker handed back to the policy; the time slice armed
//! when a run starts; and the best-effort lane of demoted requests (Edge-RT §IV-C), which gets
//! the workers the policy left idle and yields them back at its quantum's end.

use super::core::Cores;
use super::{Action, Event, LocalOrder, Policy, PolicyStats, WorkerId};
use crate::backlog::Backlog;
use crate::request::{Nanos, Request};

/// The decisions that set one policy apart; every `Algorithm` is a [`Policy`].
pub(crate) trait Algorithm: Send {
    /// How workers order the requests bound to them ([`Policy::local_order`]).
    const LOCAL_ORDER: LocalOrder;

    /// With [`LocalOrder::Edf`], the quantum of the workers' EDF order ([`Policy::edf_window`]).
    fn edf_window(&self) -> Nanos {
        0
    }

    /// The admitted `req`, arriving at `now`: run it, bind it or queue it.
    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>);

    /// Takes back `req`, preempted on `worker`, its execution so far recorded.
    fn requeue(&mut self, worker: WorkerId, req: Request);

    /// `worker` became free at `now` (its run completed or was preempted): give it its next
    /// request, if any.
    fn run_next(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>);

    /// Requests held that are not running ([`Policy::queued`]), the best-effort lane aside.
    fn waiting(&self) -> usize;

    /// Whether on-time work waits that `worker` should take: a demoted run there yields to it
    /// at the end of its quantum.
    fn on_time_for(&self, _worker: WorkerId) -> bool {
        self.waiting() > 0
    }

    /// An arrival at `now`, before admission judges it (refused arrivals count too).
    fn arrival_seen(&mut self, _now: Nanos) {}

    /// The time slice of a run that starts on `worker`: a `WakeAt` is asked for its end.
    fn slice(&self, _worker: WorkerId) -> Option<Nanos> {
        None
    }

    /// A follower committed to `worker` (Edge-RT §IV-A) took over from the run that completed
    /// there at `now`.
    fn promoted(&mut self, _worker: WorkerId, _now: Nanos, _out: &mut Vec<Action>) {}

    /// A timer asked for with `WakeAt` fired at `now`.
    fn tick(&mut self, _now: Nanos, _out: &mut Vec<Action>) {}

    /// [`Policy::backlog`].
    fn backlog(&self, _now: Nanos) -> Backlog {
        Backlog::OPEN
    }

    /// The policy's name, its workers' running state, admission settings and counters.
    fn cores(&self) -> &Cores;

    /// Mutable [`Algorithm::cores`].
    fn cores_mut(&mut self) -> &mut Cores;
}

/// Implements [`Algorithm::cores`] and [`Algorithm::cores_mut`] for a policy that keeps its
/// [`Cores`] in its field `cores`, as every policy does.
macro_rules! cores_field {
    () => {
        fn cores(&self) -> &Cores {
            &self.cores
        }

        fn cores_mut(&mut self) -> &mut Cores {
            &mut self.cores
        }
    };
}
pub(crate) use cores_field;

impl<A: Algorithm> Policy for A {
    fn name(&self) -> &'static str {
        self.cores().name
    }

    fn workers(&self) -> usize {
        self.cores().len()
    }

    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Arrival(req) => {
                self.arrival_seen(now);
                let queued = self.waiting();
                if self.cores_mut().admit(now, &req, queued, out) {
                    self.arrive(now, req, out);
                }
            }
            Event::Started { worker, id } => {
                if self.cores_mut().started(worker, id, now)
                    && let Some(slice) = self.cores().slice_of(worker, self.slice(worker))
                {
                    out.push(Action::WakeAt(now.saturating_add(slice)));
                }
            }
            Event::Completed { worker, id, executed } => {
                if let Some(ended) = self.cores_mut().finish(worker, id, executed) {
                    if self.cores_mut().promote(worker, &ended, out) {
                        self.promoted(worker, now, out);
                    } else {
                        self.run_next(worker, now, out);
                    }
                }
            }
            Event::Preempted { worker, id, executed } => {
                if let Some(run) = self.cores_mut().finish(worker, id, executed) {
                    if run.demoted {
                        self.cores_mut().requeue_demoted(run.req);
                    } else {
                        self.requeue(worker, run.req);
                    }
                    // The driver discarded the batch behind it.
                    let back: Vec<Request> = self.cores_mut().take_followers(worker).collect();
                    for req in back {
                        self.requeue(worker, req);
                    }
                    self.run_next(worker, now, out);
                }
            }
            Event::Tick => {
                // The lane first: a policy's own slicing leaves demoted runs alone. A rotation
                // only asks for preemptions, so the policy's queues (`on_time_for`) stay as
                // they are while the workers are visited in turn.
                for w in 0..self.cores().len() {
                    if self.cores().get(w).is_some_and(|run| run.demoted) {
                        let on_time = self.on_time_for(w);
                        self.cores_mut().rotate_demoted(w, now, on_time, out);
                    }
                }
                self.tick(now, out);
            }
        }
        if self.cores().demoted_waiting() > 0 {
            // Early-binding (EDF) policies answer or demote a preempted late request.
            let late_yields = A::LOCAL_ORDER == LocalOrder::Edf;
            self.cores_mut().serve_lane(now, late_yields, out);
        }
    }

    fn queued(&self) -> usize {
        self.waiting() + self.cores().demoted_waiting()
    }

    fn local_order(&self) -> LocalOrder {
        A::LOCAL_ORDER
    }

    fn edf_window(&self) -> Nanos {
        Algorithm::edf_window(self)
    }

    fn stats(&self) -> PolicyStats {
        self.cores().stats
    }

    fn backlog(&self, now: Nanos) -> Backlog {
        Algorithm::backlog(self, now)
    }
}
