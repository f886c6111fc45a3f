//! The best-effort lane of a dispatcher group (Edge-RT §IV-C): the requests that can no longer
//! meet their deadline and whose function asked to run late rather than be answered
//! ([`Overrun::Demote`]), waiting in round-robin order for a worker the policy leaves idle.
//! [`Cores`](super::core::Cores) owns one and decides who joins it, who runs from it and when a
//! run yields; this module holds the queue and its bounds.

use std::collections::{BTreeMap, BTreeSet};

use super::PolicyConfig;
use crate::request::{Nanos, Request};

/// Demoted requests not running, in round-robin order, with the lane's quantum and bounds.
///
/// Round robin moves each request from the front to the back once it has had its quantum, so a
/// request may wait a whole turn of the lane before it is at the front again; its expiry must
/// not wait for that. The requests are kept twice: by arrival in the lane (the round robin) and
/// by deadline (expiry), each O(log n).
#[derive(Debug, Clone)]
pub(crate) struct Lane {
    /// By order of joining: the round robin.
    order: BTreeMap<u64, Request>,
    /// (deadline, order key) of the same requests: which expires first.
    by_deadline: BTreeSet<(Nanos, u64)>,
    /// The order key of the next request to join.
    next: u64,
    /// Round-robin quantum (Edge-RT's Δtimer).
    pub quantum: Nanos,
    /// How long past its deadline a request may wait here.
    expiry: Nanos,
    /// Most requests held (`Admission::max_queued`).
    cap: Option<usize>,
    /// The expiry a timer was last asked for.
    armed: Option<Nanos>,
}

impl Lane {
    /// An empty lane with `config`'s quantum, expiry and queue cap.
    pub fn new(config: &PolicyConfig) -> Self {
        Self {
            order: BTreeMap::new(),
            by_deadline: BTreeSet::new(),
            next: 0,
            quantum: config.demoted_quantum.max(1),
            expiry: config.demoted_expiry,
            cap: config.admission.max_queued,
            armed: None,
        }
    }

    /// Requests waiting.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Whether one more request fits.
    pub fn has_room(&self) -> bool {
        self.cap.is_none_or(|max| self.order.len() < max)
    }

    /// `req` joins the back (also a demoted run back from its quantum).
    pub fn push(&mut self, req: Request) {
        let key = self.next;
        self.next += 1;
        self.by_deadline.insert((req.absolute_deadline, key));
        self.order.insert(key, req);
    }

    /// The request at the front, to run next.
    pub fn pop(&mut self) -> Option<Request> {
        let (key, req) = self.order.pop_first()?;
        self.by_deadline.remove(&(req.absolute_deadline, key));
        Some(req)
    }

    /// When the first request to expire does, if a timer for it is not armed yet: the caller
    /// asks for one (`WakeAt`), so that an expired request is answered without waiting for
    /// another event.
    pub fn arm_expiry(&mut self) -> Option<Nanos> {
        let &(deadline, _) = self.by_deadline.first()?;
        let at = deadline.saturating_add(self.expiry).saturating_add(1);
        if self.armed == Some(at) {
            return None;
        }
        self.armed = Some(at);
        Some(at)
    }

    /// Whether `req` is more than the expiry past its deadline at `now`.
    pub fn expired(&self, req: &Request, now: Nanos) -> bool {
        now.saturating_sub(req.absolute_deadline) > self.expiry
    }

    /// A request that has expired at `now`, wherever it is in the round robin (the earliest
    /// deadline first).
    pub fn pop_expired(&mut self, now: Nanos) -> Option<Request> {
        let &(deadline, key) = self.by_deadline.first()?;
        if now.saturating_sub(deadline) <= self.expiry {
            return None;
        }
        self.by_deadline.pop_first();
        self.order.remove(&key)
    }
}

#[cfg(test)]
mod tests {
    //! The lane as the policies drive it, through SledgeScale (the default policy).

    use super::super::core::Cores;
    use super::super::testing::{feed, rejected, runs};
    use super::super::{Action, Event, Policy, RejectReason, SledgeScale};
    use super::*;
    use crate::request::{FunctionId, Overrun, RequestId};

    /// Units: 1 ms.
    const MS: Nanos = 1_000_000;

    /// A request with an absolute deadline `d` and expected execution `e` arriving at 0.
    fn req(id: u64, d: Nanos, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, d, e)
    }

    /// The same, of a function that asks for demotion.
    fn demotable(id: u64, d: Nanos, e: Nanos) -> Request {
        req(id, d, e).with_overrun(Overrun::Demote)
    }

    fn demoted(out: &[Action]) -> Vec<u64> {
        out.iter()
            .filter_map(|a| match a {
                Action::Demote { req } => Some(req.id.0),
                _ => None,
            })
            .collect()
    }

    fn without_timers(out: &[Action]) -> Vec<Action> {
        out.iter().filter(|a| !matches!(a, Action::WakeAt(_))).copied().collect()
    }

    #[test]
    fn a_late_request_that_asks_for_demotion_runs_on_in_the_lane_when_the_worker_is_free() {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(demotable(1, 5 * MS, MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // Past its deadline it yields to an arrival, as a killed one would…
        let out = feed(&mut p, 6 * MS, Event::Arrival(req(2, 90 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
        // …but is demoted, not answered: the on-time request runs first.
        let out = feed(
            &mut p,
            6 * MS,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 6 * MS },
        );
        assert_eq!(demoted(&out[..1]), vec![1]);
        assert_eq!(runs(&out), vec![(0, 2)]);
        assert!(rejected(&out).is_empty());
        assert_eq!((p.queued(), p.stats().demoted, p.stats().rejected), (1, 1, 0));
        // When the worker has nothing on time left, the demoted request resumes where it was.
        feed(&mut p, 6 * MS, Event::Started { worker: 0, id: RequestId(2) });
        let out =
            feed(&mut p, 7 * MS, Event::Completed { worker: 0, id: RequestId(2), executed: MS });
        assert!(
            matches!(out[..], [Action::Run { worker: 0, req }] if req.id == RequestId(1) && req.executed == 6 * MS),
            "{out:?}"
        );
        // Running from the lane it outranks nobody: the next arrival takes the worker back.
        feed(&mut p, 7 * MS, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, 7 * MS, Event::Arrival(req(3, 200 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
    }

    #[test]
    fn a_demoted_request_outranks_nobody_even_before_its_deadline() {
        // `A` asks for demotion and is doomed while it waits (a more urgent newcomer takes its
        // slack) long before its deadline: it is demoted, not shed.
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, 5 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Arrival(demotable(2, 10 * MS, 4 * MS)));
        let out = feed(&mut p, 0, Event::Arrival(req(3, 8 * MS, 2 * MS)));
        assert_eq!(demoted(&out), vec![2], "{out:?}");
        assert!(rejected(&out).is_empty(), "{out:?}");
        let done = |id, executed| Event::Completed { worker: 0, id: RequestId(id), executed };
        assert_eq!(runs(&feed(&mut p, 5 * MS, done(1, 5 * MS))), vec![(0, 3)]);
        feed(&mut p, 5 * MS, Event::Started { worker: 0, id: RequestId(3) });
        let out = feed(&mut p, 7 * MS, done(3, 2 * MS));
        assert_eq!(runs(&out), vec![(0, 2)], "the lane gets the free worker");
        // At 7 ms, before its 10 ms deadline, a request due later still preempts it.
        feed(&mut p, 7 * MS, Event::Started { worker: 0, id: RequestId(2) });
        let out = feed(&mut p, 7 * MS, Event::Arrival(req(4, 500 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(2) }), "{out:?}");
    }

    #[test]
    fn the_lane_is_a_round_robin_of_one_quantum_that_a_lone_request_keeps() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.demoted_quantum = MS;
        let mut p = SledgeScale::new(&cfg);
        // Two demotable runaways, both past their deadlines with an on-time request waiting.
        feed(&mut p, 0, Event::Arrival(demotable(1, 2 * MS, MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Arrival(demotable(2, 3 * MS, MS)));
        feed(&mut p, 10 * MS, Event::Arrival(req(3, 90 * MS, MS)));
        let out = feed(
            &mut p,
            10 * MS,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 10 * MS },
        );
        assert_eq!(demoted(&out), vec![1], "{out:?}");
        assert_eq!(p.stats().demoted, 2, "the waiting one was demoted at the arrival");
        assert_eq!(runs(&out), vec![(0, 3)]);
        feed(&mut p, 10 * MS, Event::Started { worker: 0, id: RequestId(3) });
        let out =
            feed(&mut p, 11 * MS, Event::Completed { worker: 0, id: RequestId(3), executed: MS });
        assert_eq!(runs(&out), vec![(0, 2)], "lane order: first demoted (at the arrival) first");
        let out = feed(&mut p, 11 * MS, Event::Started { worker: 0, id: RequestId(2) });
        assert!(out.contains(&Action::WakeAt(12 * MS)), "the lane's quantum: {out:?}");
        // At the quantum's end it yields to the other demoted request…
        let out = feed(&mut p, 12 * MS, Event::Tick);
        assert_eq!(without_timers(&out), vec![Action::Preempt { worker: 0, id: RequestId(2) }]);
        let out =
            feed(&mut p, 12 * MS, Event::Preempted { worker: 0, id: RequestId(2), executed: MS });
        assert_eq!(runs(&out), vec![(0, 1)]);
        // …which, once alone and with nothing on time, keeps the worker quantum after quantum.
        feed(&mut p, 12 * MS, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(
            &mut p,
            12 * MS,
            Event::Completed { worker: 0, id: RequestId(1), executed: 10 * MS },
        );
        assert_eq!(runs(&out), vec![(0, 2)]);
        feed(&mut p, 12 * MS, Event::Started { worker: 0, id: RequestId(2) });
        let out = feed(&mut p, 13 * MS, Event::Tick);
        assert_eq!((without_timers(&out), out.contains(&Action::WakeAt(14 * MS))), (vec![], true));
    }

    #[test]
    fn a_demotable_request_refused_on_its_deadline_goes_to_the_lane_and_expires_there() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.demoted_expiry = 100 * MS;
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 40 * MS, 40 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // Infeasible on its own (20 ms of work, due in 10 ms), and unreachable behind `1`:
        // both are run late instead of refused.
        let out = feed(&mut p, 0, Event::Arrival(demotable(2, 10 * MS, 20 * MS)));
        assert_eq!((demoted(&out), without_timers(&out).len()), (vec![2], 1));
        let out = feed(&mut p, 0, Event::Arrival(demotable(3, 42 * MS, 5 * MS)));
        assert_eq!((demoted(&out), without_timers(&out).len()), (vec![3], 1));
        // A full queue is no reason to demote.
        assert_eq!(p.stats().rejected, 0);
        // On-time work keeps the worker until 200 ms; by then `2` and `3` are more than 100 ms
        // past their deadlines: answered as shed (they never ran), not run.
        for (at, id) in [(40 * MS, 1), (200 * MS, 4)] {
            if id == 4 {
                feed(&mut p, 40 * MS, Event::Arrival(req(4, 500 * MS, 160 * MS)));
                feed(&mut p, 40 * MS, Event::Started { worker: 0, id: RequestId(4) });
            }
            let out =
                feed(&mut p, at, Event::Completed { worker: 0, id: RequestId(id), executed: 0 });
            if id == 1 {
                assert_eq!(runs(&out), vec![(0, 2)], "the lane gets the free worker");
                let back = Event::Preempted { worker: 0, id: RequestId(2), executed: MS };
                feed(&mut p, 40 * MS, Event::Started { worker: 0, id: RequestId(2) });
                let out = feed(&mut p, 40 * MS, Event::Arrival(req(5, 900 * MS, MS)));
                assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(2) }));
                feed(&mut p, 40 * MS, back);
            } else {
                // Earliest deadline first, wherever they wait.
                assert_eq!(rejected(&out), vec![(2, RejectReason::Late), (3, RejectReason::Shed)]);
            }
        }
    }

    #[test]
    fn a_demoted_run_on_its_way_out_claims_no_time_in_the_waits() {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        // Known to run 10 s, due in 5 ms: demoted at once, and run from the lane (idle worker).
        let out = feed(&mut p, 0, Event::Arrival(demotable(1, 5 * MS, 10_000 * MS)));
        assert_eq!((demoted(&out), runs(&out)), (vec![1], vec![(0, 1)]));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, MS, Event::Arrival(req(2, 50 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
        // While that preemption is in flight, a request due after the demoted one's deadline
        // waits only for the on-time work ahead of it, not for the demoted run's 10 s.
        let out = feed(&mut p, MS, Event::Arrival(req(3, 20 * MS, MS)));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(3) }]);
    }

    #[test]
    fn a_full_lane_sends_demotable_requests_back_to_being_answered() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.admission.max_queued = Some(1);
        let mut cores = Cores::new("sledgescale", &cfg);
        let mut out = Vec::new();
        cores.shed(demotable(1, MS, MS), 2 * MS, &mut out);
        cores.shed(demotable(2, MS, MS), 2 * MS, &mut out);
        assert_eq!(demoted(&out[..1]), vec![1]);
        assert_eq!(rejected(&out[1..]), vec![(2, RejectReason::Shed)], "the lane holds one");
    }

    #[test]
    fn a_run_past_its_deadline_yields_to_the_lane_at_its_deadline() {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 10 * MS, 5 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // A demotable request known to overrun its deadline goes to the lane; a timer watches
        // the running request's deadline.
        let out = feed(&mut p, MS, Event::Arrival(demotable(2, 5 * MS, 50 * MS)));
        assert_eq!(demoted(&out), vec![2]);
        assert!(out.contains(&Action::WakeAt(10 * MS)), "{out:?}");
        // Still running at its deadline, `1` outranks nobody: it yields to the lane and, not
        // demotable, is answered late; the demoted request gets the worker.
        let out = feed(&mut p, 10 * MS, Event::Tick);
        assert_eq!(without_timers(&out), vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        let out = feed(
            &mut p,
            10 * MS,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 10 * MS },
        );
        assert_eq!(rejected(&out), vec![(1, RejectReason::Late)]);
        assert_eq!(runs(&out), vec![(0, 2)]);
    }

    #[test]
    fn an_expired_request_is_answered_on_a_timer_of_its_own() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.demoted_expiry = 100 * MS;
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 1_000 * MS, 500 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // Demoted at once (infeasible), behind on-time work that keeps the worker for 500 ms.
        let out = feed(&mut p, 0, Event::Arrival(demotable(2, 5 * MS, 50 * MS)));
        let expiry = 5 * MS + 100 * MS + 1;
        assert!(out.contains(&Action::WakeAt(expiry)), "{out:?}");
        // No other event comes: the timer alone answers it.
        let out = feed(&mut p, expiry, Event::Tick);
        assert_eq!(rejected(&out), vec![(2, RejectReason::Shed)]);
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn a_lone_demoted_run_past_its_expiry_is_stopped_and_answered() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.demoted_expiry = 100 * MS;
        cfg.demoted_quantum = MS;
        let mut p = SledgeScale::new(&cfg);
        // Demoted at once and run from the lane, alone: it keeps the worker quantum after
        // quantum…
        let out = feed(&mut p, 0, Event::Arrival(demotable(1, 5 * MS, 50 * MS)));
        assert_eq!(runs(&out), vec![(0, 1)]);
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        assert!(without_timers(&feed(&mut p, MS, Event::Tick)).is_empty());
        // …until it is past its expiry (5 + 100 ms): then it is stopped, and answered.
        let out = feed(&mut p, 106 * MS, Event::Tick);
        assert_eq!(without_timers(&out), vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        let back = Event::Preempted { worker: 0, id: RequestId(1), executed: 106 * MS };
        assert_eq!(rejected(&feed(&mut p, 106 * MS, back)), vec![(1, RejectReason::Late)]);
    }

    #[test]
    fn a_request_expires_wherever_it_waits_in_the_round_robin() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.demoted_expiry = 100 * MS;
        let mut lane = Lane::new(&cfg);
        // The front is due late; behind it, one due early, as after a turn of the round robin.
        lane.push(req(1, 900 * MS, MS));
        lane.push(req(2, 10 * MS, MS));
        lane.push(req(3, 500 * MS, MS));
        assert_eq!(lane.arm_expiry(), Some(110 * MS + 1), "the earliest deadline's expiry");
        assert_eq!(lane.arm_expiry(), None, "armed once");
        assert!(lane.pop_expired(110 * MS).is_none(), "not past it yet");
        assert_eq!(lane.pop_expired(110 * MS + 1).map(|r| r.id), Some(RequestId(2)));
        assert!(lane.pop_expired(110 * MS + 1).is_none());
        // The round robin is untouched: 1 is still the front, then 3.
        assert_eq!(
            (lane.pop().map(|r| r.id), lane.pop().map(|r| r.id)),
            (Some(RequestId(1)), Some(RequestId(3)))
        );
        assert!(lane.is_empty() && lane.pop_expired(u64::MAX).is_none());
    }
}
