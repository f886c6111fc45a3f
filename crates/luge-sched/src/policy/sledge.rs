//! `sledge`: Sledge's scheduler, work distribution decoupled from per-core preemptive scheduling
//! (Sledge §3.4, §4): new requests go to one global queue (Sledge's
//! work-stealing deque), a worker whose local run queue is empty takes work from it, and each
//! worker runs "a local, preemptive round-robin scheduling for the sandboxes on its run queue,
//! with a time slice set to 5 milliseconds" (§4). As SledgeScale's baseline
//! (SledgeScale §4.3), "each worker competes for a batch of requests (batch size 5)
//! from the global queue and schedules them locally using Round Robin"; the batch is
//! `PolicyConfig::sledge_batch`.

use std::collections::VecDeque;

use super::algorithm;
use super::core::Cores;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request};

/// Global FIFO feeding per-worker round robin.
///
/// Decisions:
/// - A worker is *idle* when nothing runs on it and its local queue is empty. An arrival goes
///   straight to the lowest-numbered idle worker (`Enqueue` then `Run`: a worker busy-polling the
///   global queue would take it at once); otherwise it waits in the global FIFO.
/// - A worker that frees up (`Completed` or `Preempted`) with an empty local queue takes up to
///   `sledge_batch` requests from the head of the global queue into its local queue, emitting an
///   `Enqueue` for each, then runs its local head. A worker that still has local work never pulls:
///   in Sledge the running sandbox is on the local run queue, which is therefore never empty
///   while the worker is busy.
/// - At quantum expiry (`WakeAt`/`Tick`, `sledge_quantum` after `Started`), the worker is
///   preempted only if its local queue is non-empty; the preempted request goes to the tail of
///   the *local* queue. Otherwise the slice is renewed. Requests never move between workers once
///   bound (no stealing between local queues).
/// - `workers_inspected` counts the worker states looked at to place an arrival: up to and
///   including the first idle one, or all of them.
#[derive(Debug, Clone)]
pub struct Sledge {
    cores: Cores,
    global: VecDeque<Request>,
    local: Vec<VecDeque<Request>>,
    quantum: Nanos,
    batch: usize,
}

impl Sledge {
    /// A Sledge scheduler for `config.workers` workers with `config.sledge_quantum` and
    /// `config.sledge_batch`.
    pub fn new(config: &PolicyConfig) -> Self {
        let cores = Cores::new("sledge", config);
        Self {
            global: VecDeque::new(),
            local: (0..cores.len()).map(|_| VecDeque::new()).collect(),
            cores,
            quantum: config.sledge_quantum.max(1),
            batch: config.sledge_batch.max(1),
        }
    }
}

impl algorithm::Algorithm for Sledge {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::RoundRobin;

    /// The first idle worker (nothing runs, nothing local), else the global queue.
    fn arrive(&mut self, _now: Nanos, req: Request, out: &mut Vec<Action>) {
        let local = &self.local;
        match self.cores.scan(0, |cores, w| cores.is_idle(w) && local[w].is_empty()) {
            Some(w) => {
                out.push(Action::Enqueue { worker: w, id: req.id });
                self.cores.run(w, req, out);
            }
            None => self.global.push_back(req),
        }
    }

    /// To the tail of the worker's local queue.
    fn requeue(&mut self, worker: WorkerId, req: Request) {
        self.local[worker].push_back(req);
    }

    /// Refill the local queue from the global one if it is empty, then run the local head.
    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        let local = &mut self.local[worker];
        if local.is_empty() {
            let take = self.batch.min(self.global.len());
            for req in self.global.drain(..take) {
                out.push(Action::Enqueue { worker, id: req.id });
                local.push_back(req);
            }
        }
        if let Some(next) = local.pop_front() {
            self.cores.run(worker, next, out);
        }
    }

    fn waiting(&self) -> usize {
        self.global.len() + self.local.iter().map(VecDeque::len).sum::<usize>()
    }

    fn slice(&self, _worker: WorkerId) -> Option<Nanos> {
        Some(self.quantum)
    }

    /// A slice over is preempted only if the worker's local queue holds others.
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        let local = &self.local;
        self.cores.end_slices(now, self.quantum, |w, _| !local[w].is_empty(), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{feed, runs};
    use crate::request::{FunctionId, RequestId};

    const Q: Nanos = 5_000_000;

    /// A request arriving at 0 with a loose deadline and expected execution `e`.
    fn req(id: u64, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, 10_000_000_000, e)
    }

    fn bound(out: &[Action]) -> Vec<(WorkerId, u64)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Enqueue { worker, id } => Some((*worker, id.0)),
                _ => None,
            })
            .collect()
    }

    fn local_ids(p: &Sledge, w: WorkerId) -> Vec<u64> {
        p.local[w].iter().map(|r| r.id.0).collect()
    }

    fn sledge(workers: usize, batch: usize) -> Sledge {
        let mut cfg = PolicyConfig::with_workers(workers);
        cfg.sledge_batch = batch;
        Sledge::new(&cfg)
    }

    #[test]
    fn arrivals_go_to_idle_workers_then_to_the_global_queue() {
        let mut p = sledge(2, 3);
        let out = feed(&mut p, 0, Event::Arrival(req(1, Q)));
        assert_eq!((bound(&out), runs(&out)), (vec![(0, 1)], vec![(0, 1)]));
        let out = feed(&mut p, 0, Event::Arrival(req(2, Q)));
        assert_eq!((bound(&out), runs(&out)), (vec![(1, 2)], vec![(1, 2)]));
        assert!(feed(&mut p, 0, Event::Arrival(req(3, Q))).is_empty());
        assert_eq!(p.global.len(), 1);
        assert_eq!(p.stats().workers_inspected, 1 + 2 + 2);
        assert_eq!(p.local_order(), LocalOrder::RoundRobin);
    }

    #[test]
    fn a_free_worker_pulls_a_batch_from_the_global_queue() {
        let mut p = sledge(2, 3);
        feed(&mut p, 0, Event::Arrival(req(1, Q)));
        feed(&mut p, 0, Event::Arrival(req(2, Q)));
        for id in 3..8 {
            feed(&mut p, 0, Event::Arrival(req(id, Q)));
        }
        assert_eq!(p.global.len(), 5);
        let out = feed(&mut p, 10, Event::Completed { worker: 1, id: RequestId(2), executed: 10 });
        // Worker 1 takes 3, 4, 5 at once and runs 3; 6 and 7 stay global.
        assert_eq!(bound(&out), vec![(1, 3), (1, 4), (1, 5)]);
        assert_eq!(runs(&out), vec![(1, 3)]);
        assert_eq!(local_ids(&p, 1), vec![4, 5]);
        assert_eq!(p.global.iter().map(|r| r.id.0).collect::<Vec<_>>(), vec![6, 7]);
        assert_eq!(p.queued(), 4);
        // Worker 1 still has local work: its next completion does not pull.
        let out = feed(&mut p, 20, Event::Completed { worker: 1, id: RequestId(3), executed: 10 });
        assert_eq!((bound(&out), runs(&out)), (vec![], vec![(1, 4)]));
        // Worker 0 has none: it pulls the rest (fewer than a batch).
        let out = feed(&mut p, 30, Event::Completed { worker: 0, id: RequestId(1), executed: 30 });
        assert_eq!(bound(&out), vec![(0, 6), (0, 7)]);
        assert_eq!(runs(&out), vec![(0, 6)]);
        assert!(p.global.is_empty());
    }

    #[test]
    fn local_round_robin_rotates_at_the_quantum() {
        let mut p = sledge(1, 3);
        feed(&mut p, 0, Event::Arrival(req(1, 10 * Q)));
        feed(&mut p, 0, Event::Arrival(req(2, 10 * Q)));
        feed(&mut p, 0, Event::Arrival(req(3, 10 * Q)));
        assert_eq!(
            feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) }),
            vec![Action::WakeAt(Q)]
        );
        // Worker 0 is busy with an empty local queue: 2 and 3 are global; the quantum renews.
        assert_eq!(feed(&mut p, Q, Event::Tick), vec![Action::WakeAt(2 * Q)]);
        assert_eq!(p.stats().preemptions, 0);
        // Request 1 completes early; the worker pulls 2 and 3 and round-robins them.
        let out =
            feed(&mut p, Q + 1, Event::Completed { worker: 0, id: RequestId(1), executed: Q });
        assert_eq!(runs(&out), vec![(0, 2)]);
        assert_eq!(local_ids(&p, 0), vec![3]);
        let mut now = Q + 1;
        let mut order = vec![2];
        for _ in 0..3 {
            let running = order[order.len() - 1];
            feed(&mut p, now, Event::Started { worker: 0, id: RequestId(running) });
            now += Q;
            let out = feed(&mut p, now, Event::Tick);
            assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(running) }]);
            let ev = Event::Preempted { worker: 0, id: RequestId(running), executed: Q };
            let out = feed(&mut p, now, ev);
            assert!(bound(&out).is_empty(), "a preempted request stays bound to its worker");
            let r = runs(&out);
            assert_eq!(r.len(), 1);
            order.push(r[0].1);
            assert!(local_ids(&p, 0).ends_with(&[running]), "preempted goes to the local tail");
        }
        assert_eq!(order, vec![2, 3, 2, 3]);
        assert_eq!(p.stats().preemptions, 3);
    }

    #[test]
    fn no_preemption_when_the_local_queue_is_empty_even_if_others_wait() {
        let mut p = sledge(2, 1);
        feed(&mut p, 0, Event::Arrival(req(1, 10 * Q)));
        feed(&mut p, 0, Event::Arrival(req(2, 10 * Q)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Started { worker: 1, id: RequestId(2) });
        // Worker 0 takes request 3 into its local queue by hand; worker 1 has nothing local.
        p.local[0].push_back(req(3, Q));
        // Request 4 waits in the global queue; that does not make worker 1 preemptible.
        assert!(feed(&mut p, 1, Event::Arrival(req(4, Q))).is_empty());
        assert_eq!(p.global.len(), 1);
        let out = feed(&mut p, Q, Event::Tick);
        assert_eq!(
            out,
            vec![Action::Preempt { worker: 0, id: RequestId(1) }, Action::WakeAt(2 * Q)]
        );
        assert_eq!(p.stats().preemptions, 1);
    }

    #[test]
    fn completion_that_beats_the_preemption_and_stale_events_are_handled() {
        let mut p = sledge(1, 2);
        feed(&mut p, 0, Event::Arrival(req(1, 10 * Q)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 1, Event::Arrival(req(2, Q)));
        feed(&mut p, 2, Event::Arrival(req(3, Q)));
        let out = feed(&mut p, 3, Event::Completed { worker: 0, id: RequestId(1), executed: 3 });
        assert_eq!(runs(&out), vec![(0, 2)]);
        feed(&mut p, 3, Event::Started { worker: 0, id: RequestId(2) });
        let out = feed(&mut p, Q + 3, Event::Tick);
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(2) }]);
        let out =
            feed(&mut p, Q + 4, Event::Completed { worker: 0, id: RequestId(2), executed: Q });
        assert_eq!(runs(&out), vec![(0, 3)]);
        let ev = Event::Preempted { worker: 0, id: RequestId(2), executed: Q };
        assert!(feed(&mut p, Q + 5, ev).is_empty());
        assert!(feed(&mut p, Q + 5, Event::Started { worker: 0, id: RequestId(9) }).is_empty());
        assert_eq!(p.queued(), 0);
    }

    #[test]
    fn admission_counts_global_and_local_queues() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.admission.max_queued = Some(2);
        cfg.sledge_batch = 5;
        let mut p = Sledge::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, Q)));
        p.local[0].push_back(req(2, Q));
        feed(&mut p, 0, Event::Arrival(req(3, Q)));
        let out = feed(&mut p, 0, Event::Arrival(req(4, Q)));
        assert!(matches!(out[..], [Action::Reject { req, .. }] if req.id == RequestId(4)));
        assert_eq!(p.stats().rejected, 1);
    }
}
