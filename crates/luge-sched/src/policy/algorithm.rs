//! The event handling every policy shares, written once. A policy implements [`Algorithm`] —
//! what its paper decides: where an admitted arrival goes, where a preempted request goes back,
//! what a freed worker runs next, what a timer changes — and gets [`Policy`] from it. The shared
//! part is the bookkeeping of the driver contract (see the [`policy`](super) module): admission
//! before an arrival is placed; `Started`, `Completed` and `Preempted` recorded in [`Cores`] (a
//! stale report changes nothing); a freed worker handed back to the policy; the time slice armed
//! when a run starts.

use super::core::Cores;
use super::{Action, Event, LocalOrder, Policy, PolicyStats, WorkerId};
use crate::request::{Nanos, Request};

/// The decisions that set one policy apart; every `Algorithm` is a [`Policy`].
pub(crate) trait Algorithm: Send {
    /// How workers order the requests bound to them ([`Policy::local_order`]).
    const LOCAL_ORDER: LocalOrder;

    /// The admitted `req`, arriving at `now`: run it, bind it or queue it.
    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>);

    /// Takes back `req`, preempted on `worker`, its execution so far recorded.
    fn requeue(&mut self, worker: WorkerId, req: Request);

    /// `worker` became free at `now` (its run completed or was preempted): give it its next
    /// request, if any.
    fn run_next(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>);

    /// Requests held that are not running ([`Policy::queued`]).
    fn waiting(&self) -> usize;

    /// An arrival at `now`, before admission judges it (refused arrivals count too).
    fn arrival_seen(&mut self, _now: Nanos) {}

    /// The time slice of a run that starts on `worker`: a `WakeAt` is asked for its end.
    fn slice(&self, _worker: WorkerId) -> Option<Nanos> {
        None
    }

    /// A timer asked for with `WakeAt` fired at `now`.
    fn tick(&mut self, _now: Nanos, _out: &mut Vec<Action>) {}

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
                    && let Some(slice) = self.slice(worker)
                {
                    out.push(Action::WakeAt(now.saturating_add(slice)));
                }
            }
            Event::Completed { worker, id, executed } => {
                if self.cores_mut().finish(worker, id, executed).is_some() {
                    self.run_next(worker, now, out);
                }
            }
            Event::Preempted { worker, id, executed } => {
                if let Some(req) = self.cores_mut().finish(worker, id, executed) {
                    self.requeue(worker, req);
                    self.run_next(worker, now, out);
                }
            }
            Event::Tick => self.tick(now, out),
        }
    }

    fn queued(&self) -> usize {
        self.waiting()
    }

    fn local_order(&self) -> LocalOrder {
        A::LOCAL_ORDER
    }

    fn stats(&self) -> PolicyStats {
        self.cores().stats
    }
}
