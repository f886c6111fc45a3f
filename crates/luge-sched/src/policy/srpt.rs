//! `srpt`: preemptive shortest-remaining-processing-time over one central queue, an oracle
//! reference (it trusts `Request::expected`). Not from the papers: it is the classical
//! mean-response-time optimum (on one server) that the deadline-driven policies are compared to;
//! DARC's favouring of short requests (SledgeScale §4.5) is a coarse version of it.

use std::collections::BTreeMap;

use super::algorithm;
use super::core::Cores;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request, RequestId};

/// Preemptive SRPT, late binding.
///
/// Decisions:
/// - The queue is ordered by remaining work ([`Request::remaining`], floored at 1 µs), ties by id
///   (earlier arrival first). A queued request's key is fixed while it waits: it does not run.
/// - An arrival runs on the lowest-numbered idle worker. If none is idle, the running request with
///   the largest remaining work at `now` among workers without a preemption in flight is the
///   victim (ties: larger id, i.e. the one that would come last in the queue); if the newcomer's
///   remaining work is strictly smaller, the newcomer is queued and the victim preempted.
///   Otherwise the newcomer just waits.
/// - A freed worker (after `Completed` or `Preempted`) runs the queued request with the least
///   remaining work; a preempted request returns to the queue with its execution updated, so it
///   may be the one that resumes.
/// - Remaining work only shrinks while a request runs, so arrivals are the only moments at which
///   a queued request can become shorter than a running one; no timer is needed.
/// - `workers_inspected`: the workers scanned for an idle one (up to and including it), or all of
///   them when none is idle (the victim search looks at the same states).
#[derive(Debug, Clone)]
pub struct Srpt {
    cores: Cores,
    queue: BTreeMap<(Nanos, RequestId), Request>,
}

impl Srpt {
    /// An SRPT scheduler for `config.workers` workers.
    pub fn new(config: &PolicyConfig) -> Self {
        Self { cores: Cores::new("srpt", config), queue: BTreeMap::new() }
    }

    fn enqueue(&mut self, req: Request) {
        self.queue.insert((req.remaining(), req.id), req);
    }

    /// The running request to displace at `now`: largest remaining work, no preemption in flight.
    fn victim(&self, now: Nanos) -> Option<(WorkerId, Nanos)> {
        self.cores
            .iter()
            .filter(|(_, r)| !r.preempt_pending)
            .max_by_key(|(_, r)| (r.remaining_at(now), r.req.id))
            .map(|(w, r)| (w, r.remaining_at(now)))
    }
}

impl algorithm::Algorithm for Srpt {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Central;

    /// The first idle worker, else the queue, preempting the victim if the newcomer is shorter.
    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>) {
        if let Some(w) = self.cores.scan_for_idle() {
            self.cores.run(w, req, out);
            return;
        }
        let victim = self.victim(now);
        self.enqueue(req);
        if let Some((w, left)) = victim
            && req.remaining() < left
        {
            self.cores.preempt(w, out);
        }
    }

    fn requeue(&mut self, _worker: WorkerId, req: Request) {
        self.enqueue(req);
    }

    /// The queued request with the least remaining work.
    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        if let Some((_, next)) = self.queue.pop_first() {
            self.cores.run(worker, next, out);
        }
    }

    fn waiting(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{feed, req, runs_executed};
    use crate::request::FunctionId;

    /// Two workers: worker 0 runs request 1 (1 ms), worker 1 runs request 2 (500 µs), both
    /// started at 0.
    fn two_busy() -> Srpt {
        let mut p = Srpt::new(&PolicyConfig::with_workers(2));
        feed(&mut p, 0, Event::Arrival(req(1, 1_000_000)));
        feed(&mut p, 0, Event::Arrival(req(2, 500_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Started { worker: 1, id: RequestId(2) });
        p
    }

    #[test]
    fn shorter_arrival_preempts_the_largest_remaining() {
        let mut p = two_busy();
        // At 100 µs: worker 0 has 900 µs left, worker 1 has 400 µs left.
        let out = feed(&mut p, 100_000, Event::Arrival(req(3, 450_000)));
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        assert_eq!(p.stats().preemptions, 1);
        assert_eq!(p.queued(), 1);
        // The newcomer runs on the freed worker; the victim waits with its execution recorded.
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 100_000 };
        assert_eq!(runs_executed(&feed(&mut p, 100_000, ev)), vec![(0, 3, 0)]);
        let back: Vec<_> = p.queue.values().map(|r| (r.id.0, r.executed, r.remaining())).collect();
        assert_eq!(back, vec![(1, 100_000, 900_000)]);
    }

    #[test]
    fn longer_arrival_does_not_preempt() {
        let mut p = two_busy();
        // Worker 0 has exactly 900 µs left: equal work does not preempt either.
        for (id, e) in [(3, 900_000), (4, 2_000_000)] {
            let out = feed(&mut p, 100_000, Event::Arrival(req(id, e)));
            assert!(out.is_empty(), "{out:?}");
        }
        assert_eq!(p.stats().preemptions, 0);
        assert_eq!(p.queued(), 2);
        // Completion hands the worker to the shortest queued request.
        let ev = Event::Completed { worker: 1, id: RequestId(2), executed: 500_000 };
        assert_eq!(runs_executed(&feed(&mut p, 500_000, ev)), vec![(1, 3, 0)]);
    }

    #[test]
    fn a_worker_with_a_preemption_in_flight_is_not_a_victim_twice() {
        let mut p = two_busy();
        let a = feed(&mut p, 100_000, Event::Arrival(req(3, 10_000)));
        assert_eq!(a, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        // The next short arrival takes the other worker, with 400 µs left.
        let b = feed(&mut p, 100_000, Event::Arrival(req(4, 20_000)));
        assert_eq!(b, vec![Action::Preempt { worker: 1, id: RequestId(2) }]);
        // Nobody is left to preempt.
        assert!(feed(&mut p, 100_000, Event::Arrival(req(5, 5_000))).is_empty());
        assert_eq!(p.stats().preemptions, 2);
        // Freed workers take the shortest queued requests in order.
        let ev = Event::Preempted { worker: 1, id: RequestId(2), executed: 100_000 };
        assert_eq!(runs_executed(&feed(&mut p, 100_000, ev)), vec![(1, 5, 0)]);
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 100_000 };
        assert_eq!(runs_executed(&feed(&mut p, 100_000, ev)), vec![(0, 3, 0)]);
        let order: Vec<_> = p.queue.values().map(|r| r.id.0).collect();
        assert_eq!(order, vec![4, 2, 1]);
    }

    #[test]
    fn completion_that_beats_the_preemption_is_handled() {
        let mut p = Srpt::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 1_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, 10, Event::Arrival(req(2, 1_000)));
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        let ev = Event::Completed { worker: 0, id: RequestId(1), executed: 1_000_000 };
        assert_eq!(runs_executed(&feed(&mut p, 20, ev)), vec![(0, 2, 0)]);
        // The dropped preemption's stale report is ignored.
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 20 };
        assert!(feed(&mut p, 21, ev).is_empty());
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn idle_worker_first_and_inspections_counted() {
        let mut p = Srpt::new(&PolicyConfig::with_workers(2));
        assert_eq!(runs_executed(&feed(&mut p, 0, Event::Arrival(req(1, 5_000)))), vec![(0, 1, 0)]);
        assert_eq!(runs_executed(&feed(&mut p, 0, Event::Arrival(req(2, 5_000)))), vec![(1, 2, 0)]);
        feed(&mut p, 0, Event::Arrival(req(3, 5_000)));
        assert_eq!(p.stats().workers_inspected, 1 + 2 + 2);
        assert_eq!(p.stats().arrivals, 3);
    }

    #[test]
    fn admission_rejects_infeasible_requests() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.admission.reject_infeasible = true;
        let mut p = Srpt::new(&cfg);
        let late = Request::new(RequestId(1), FunctionId(0), 0, 1_000, 5_000);
        let out = feed(&mut p, 0, Event::Arrival(late));
        assert!(matches!(out[..], [Action::Reject { req, .. }] if req.id == RequestId(1)));
        assert_eq!(p.stats().rejected, 1);
    }
}
