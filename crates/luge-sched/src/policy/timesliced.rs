//! One central FIFO queue, late binding, fixed-quantum preemption to the tail of the queue:
//! `shinjuku` (15 µs) and `ps` (1 ms).
//!
//! - **Shinjuku** as SledgeScale integrates it for its comparison (SledgeScale §4,
//!   "Baselines" and §4.4): Single-Queue scheduling, a request that has run a full quantum while
//!   others wait is interrupted, and "preempted requests are moved to the end of the global
//!   queue"; "a 15 µs quantum yields optimal performance for Shinjuku". Late binding as in §3.3:
//!   a request stays in the dispatcher's queue until a worker is free.
//! - **PS**, processor sharing, approximated by round robin over the same central queue with the
//!   CFS-like fair quantum (`PolicyConfig::fair_quantum`, 1 ms). It is the fair reference of the
//!   reports; exact processor sharing is the limit as the quantum goes to 0.

use std::collections::VecDeque;

use super::core::{Cores, take_one};
use super::{Action, LocalOrder, PolicyConfig, WorkerId, algorithm, fifo};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request};

/// Central FIFO queue with fixed-quantum round-robin preemption.
///
/// Decisions:
/// - An arrival runs on the lowest-numbered idle worker, else waits at the tail of the queue.
/// - On `Started` the worker's slice begins and a `WakeAt(now + quantum)` is requested.
/// - On a `Tick`, a worker whose slice has lasted at least a quantum (and has no preemption in
///   flight) is preempted for a queued request that no preemption under way will serve — one
///   per such request, in worker order; otherwise its slice is renewed. Nobody is preempted
///   when nobody waits, and slices ending together are not all cut for one waiter.
/// - A preempted request goes to the *tail* of the central queue, and the freed worker runs the
///   head (which may be another worker's preempted request: requests migrate, the price of one
///   global queue; SledgeScale's integration resumes them "by the same worker", which a single
///   late-binding queue only approximates).
/// - `workers_inspected` counts the worker states looked at to place an arrival: up to and
///   including the first idle one, or all of them.
#[derive(Debug, Clone)]
pub struct TimeSliced {
    quantum: Nanos,
    cores: Cores,
    queue: VecDeque<Request>,
}

impl TimeSliced {
    /// Shinjuku with `config.shinjuku_quantum` (SledgeScale §4.4).
    pub fn shinjuku(config: &PolicyConfig) -> Self {
        Self::with_quantum("shinjuku", config.shinjuku_quantum, config)
    }

    /// Processor sharing approximated by round robin with `config.fair_quantum` (CFS-like).
    pub fn ps(config: &PolicyConfig) -> Self {
        Self::with_quantum("ps", config.fair_quantum, config)
    }

    fn with_quantum(name: &'static str, quantum: Nanos, config: &PolicyConfig) -> Self {
        Self { quantum: quantum.max(1), cores: Cores::new(name, config), queue: VecDeque::new() }
    }

    /// The preemption quantum.
    pub fn quantum(&self) -> Nanos {
        self.quantum
    }
}

impl algorithm::Algorithm for TimeSliced {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Central;

    /// As `fifo`: the first idle worker, else the tail of the queue.
    fn arrive(&mut self, _now: Nanos, req: Request, out: &mut Vec<Action>) {
        fifo::arrive(&mut self.cores, &mut self.queue, req, out);
    }

    /// To the tail of the queue.
    fn requeue(&mut self, _worker: WorkerId, req: Request) {
        self.queue.push_back(req);
    }

    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        fifo::run_next(&mut self.cores, &mut self.queue, worker, out);
    }

    fn waiting(&self) -> usize {
        self.queue.len()
    }

    fn slice(&self, _worker: WorkerId) -> Option<Nanos> {
        Some(self.quantum)
    }

    /// A slice over is preempted for a waiting request that no preemption under way will serve
    /// (one per such request, in worker order), else renewed: slices ending at the same tick
    /// are not all cut for one waiter, whose others would only bounce back to the queue.
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        let mut unserved = self.queue.len().saturating_sub(self.cores.preempting());
        self.cores.end_slices(now, self.quantum, |_, _| take_one(&mut unserved), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{feed, refuses_the_third, req, runs_executed};
    use crate::request::RequestId;

    #[test]
    fn names_and_quanta_come_from_the_config() {
        let cfg = PolicyConfig::with_workers(2);
        let s = TimeSliced::shinjuku(&cfg);
        let ps = TimeSliced::ps(&cfg);
        assert_eq!((s.name(), s.quantum()), ("shinjuku", 15_000));
        assert_eq!((ps.name(), ps.quantum()), ("ps", 1_000_000));
        assert_eq!(s.local_order(), LocalOrder::Central);
    }

    #[test]
    fn shinjuku_preempts_at_the_quantum_only_when_someone_waits() {
        let mut p = TimeSliced::shinjuku(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 1_000_000)));
        assert_eq!(
            feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) }),
            vec![Action::WakeAt(15_000)]
        );
        // Nobody waits: the slice is renewed, no preemption.
        assert_eq!(feed(&mut p, 15_000, Event::Tick), vec![Action::WakeAt(30_000)]);
        assert_eq!(p.stats().preemptions, 0);
        // A short request arrives mid-slice: it waits for the slice boundary.
        let out = feed(&mut p, 20_000, Event::Arrival(req(2, 5_000)));
        assert!(out.is_empty(), "{out:?}");
        assert!(feed(&mut p, 29_999, Event::Tick).is_empty());
        let out = feed(&mut p, 30_000, Event::Tick);
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        assert_eq!(p.stats().preemptions, 1);
        // A second tick while the preemption is in flight does not preempt again.
        assert!(feed(&mut p, 31_000, Event::Tick).is_empty());
        assert_eq!(p.stats().preemptions, 1);
        let out = feed(
            &mut p,
            31_000,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 31_000 },
        );
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        // The preempted request sits in the queue with its execution recorded.
        assert_eq!(p.queued(), 1);
        assert_eq!(p.queue.front().map(|r| (r.id, r.executed)), Some((RequestId(1), 31_000)));
    }

    /// Two slices ending at one tick with one request waiting: one is preempted, the other
    /// renewed (preempting both would only send one back to the queue it came from).
    #[test]
    fn one_waiter_preempts_one_of_the_slices_that_end_together() {
        let mut p = TimeSliced::shinjuku(&PolicyConfig::with_workers(2));
        for (id, w) in [(1, 0), (2, 1)] {
            feed(&mut p, 0, Event::Arrival(req(id, 1_000_000)));
            feed(&mut p, 0, Event::Started { worker: w, id: RequestId(id) });
        }
        feed(&mut p, 1, Event::Arrival(req(3, 1_000_000)));
        let out = feed(&mut p, 15_000, Event::Tick);
        let preempts = out.iter().filter(|a| matches!(a, Action::Preempt { .. })).count();
        assert_eq!(preempts, 1, "{out:?}");
        assert!(out.contains(&Action::WakeAt(30_000)), "the other slice is renewed: {out:?}");
        // The preemption under way serves the waiter: the next tick preempts no one else.
        let out = feed(&mut p, 30_000, Event::Tick);
        assert!(!out.iter().any(|a| matches!(a, Action::Preempt { .. })), "{out:?}");
    }

    /// Shinjuku on one worker running request 1 (1 ms, started at 0), with `waiting` requests
    /// (id, expected execution) arriving at 1, 2, … ns: the tick at 15 µs preempts request 1.
    fn shinjuku_preempting(waiting: &[(u64, Nanos)]) -> TimeSliced {
        let mut p = TimeSliced::shinjuku(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 1_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        for (at, &(id, e)) in (1..).zip(waiting) {
            feed(&mut p, at, Event::Arrival(req(id, e)));
        }
        let out = feed(&mut p, 15_000, Event::Tick);
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        p
    }

    #[test]
    fn shinjuku_sends_the_preempted_request_to_the_tail() {
        let mut p = shinjuku_preempting(&[(2, 1_000_000), (3, 1_000_000)]);
        let out = feed(
            &mut p,
            15_000,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 15_000 },
        );
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        let order: Vec<_> = p.queue.iter().map(|r| r.id.0).collect();
        assert_eq!(order, vec![3, 1], "preempted request must go behind the earlier waiter");
    }

    #[test]
    fn ps_alternates_two_long_requests_every_quantum() {
        let mut p = TimeSliced::ps(&PolicyConfig::with_workers(1));
        let q = p.quantum();
        feed(&mut p, 0, Event::Arrival(req(1, 10 * q)));
        feed(&mut p, 0, Event::Arrival(req(2, 10 * q)));
        let mut running = 1;
        let mut order = vec![running];
        let mut executed = [0u64; 3];
        let mut now = 0;
        feed(&mut p, now, Event::Started { worker: 0, id: RequestId(running) });
        for _ in 0..4 {
            now += q;
            let out = feed(&mut p, now, Event::Tick);
            assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(running) }]);
            executed[running as usize] += q;
            let ev = Event::Preempted {
                worker: 0,
                id: RequestId(running),
                executed: executed[running as usize],
            };
            let r = runs_executed(&feed(&mut p, now, ev));
            assert_eq!(r.len(), 1);
            let (_, next, exec) = r[0];
            assert_eq!(exec, executed[next as usize], "resumes with its execution so far");
            running = next;
            order.push(running);
            feed(&mut p, now, Event::Started { worker: 0, id: RequestId(running) });
        }
        assert_eq!(order, vec![1, 2, 1, 2, 1]);
        assert_eq!(p.stats().preemptions, 4);
    }

    #[test]
    fn arrivals_take_the_first_idle_worker_and_count_inspections() {
        let mut p = TimeSliced::shinjuku(&PolicyConfig::with_workers(2));
        assert_eq!(runs_executed(&feed(&mut p, 0, Event::Arrival(req(1, 1_000)))), vec![(0, 1, 0)]);
        assert_eq!(runs_executed(&feed(&mut p, 0, Event::Arrival(req(2, 1_000)))), vec![(1, 2, 0)]);
        assert!(runs_executed(&feed(&mut p, 0, Event::Arrival(req(3, 1_000)))).is_empty());
        // 1 + 2 + 2 worker states looked at.
        assert_eq!(p.stats().workers_inspected, 5);
        assert_eq!(p.stats().arrivals, 3);
        let out = feed(&mut p, 5, Event::Completed { worker: 1, id: RequestId(2), executed: 5 });
        assert_eq!(runs_executed(&out), vec![(1, 3, 0)]);
    }

    #[test]
    fn completion_that_beats_the_preemption_and_stale_events_are_handled() {
        let mut p = shinjuku_preempting(&[(2, 1_000)]);
        let out = feed(
            &mut p,
            15_001,
            Event::Completed { worker: 0, id: RequestId(1), executed: 15_001 },
        );
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        // Stale events for a request that no longer runs change nothing.
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 15_001 };
        assert!(feed(&mut p, 15_002, ev).is_empty());
        assert!(feed(&mut p, 15_002, Event::Started { worker: 0, id: RequestId(1) }).is_empty());
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn admission_rejects_when_the_queue_is_full() {
        let p = refuses_the_third(TimeSliced::ps, [1, 2, 3].map(|id| req(id, 1_000)));
        assert_eq!(p.stats().rejected, 1);
    }
}
