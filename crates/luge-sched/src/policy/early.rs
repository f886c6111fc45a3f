//! The early-binding baselines of SledgeScale §4: dispatch by round
//! robin (`rr`), join-the-shortest-queue (`jsq`) or join-the-least-loaded-queue by remaining work
//! (`lld`, LL(D) of §3.3); "each worker schedules using EDF with a fixed 1 ms scheduling quantum
//! triggered by a timer", i.e. a more urgent queued request displaces the running one only at the
//! next quantum boundary, never at arrival.

#[cfg(test)]
use super::Event;
use super::algorithm;
use super::core::{Cores, Running};
use super::edf;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
use crate::queue::EdfQueue;
use crate::request::{Nanos, Request};
use crate::run_queue::RunQueue;

/// How an early-binding dispatcher picks a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EarlyChoice {
    /// Cyclically, ignoring load (`rr`).
    RoundRobin,
    /// Fewest requests, running included (`jsq`).
    ShortestQueue,
    /// Least remaining work, running included (`lld`).
    LeastLoaded,
}

/// Early binding by [`EarlyChoice`] with quantum-driven EDF workers.
#[derive(Debug, Clone)]
pub struct EarlyBinding {
    choice: EarlyChoice,
    cores: Cores,
    queues: Vec<RunQueue>,
    next: WorkerId,
    quantum: Nanos,
    /// [`QueueKind::window`](crate::QueueKind::window) of the workers' queues.
    window: Nanos,
}

impl EarlyBinding {
    /// A dispatcher for `config.workers` workers with `config.edf_quantum`.
    pub fn new(choice: EarlyChoice, config: &PolicyConfig) -> Self {
        let name = match choice {
            EarlyChoice::RoundRobin => "rr",
            EarlyChoice::ShortestQueue => "jsq",
            EarlyChoice::LeastLoaded => "lld",
        };
        let cores = Cores::new(name, config);
        Self {
            choice,
            queues: (0..cores.len()).map(|_| RunQueue::new(config.worker_queue)).collect(),
            window: config.worker_queue.window(),
            cores,
            next: 0,
            quantum: config.edf_quantum.max(1),
        }
    }

    fn pick(&mut self, now: Nanos) -> WorkerId {
        let n = self.queues.len();
        let stats = &mut self.cores.stats;
        match self.choice {
            EarlyChoice::RoundRobin => {
                stats.workers_inspected += 1;
                let w = self.next;
                self.next = (self.next + 1) % n;
                w
            }
            EarlyChoice::ShortestQueue => {
                stats.workers_inspected += n as u64;
                (0..n)
                    .min_by_key(|&w| self.queues[w].len() + usize::from(!self.cores.is_idle(w)))
                    .unwrap_or(0)
            }
            EarlyChoice::LeastLoaded => {
                stats.workers_inspected += n as u64;
                (0..n)
                    .min_by_key(|&w| {
                        let run = self.cores.claim_on(now, w);
                        self.queues[w].total_work().saturating_add(run)
                    })
                    .unwrap_or(0)
            }
        }
    }
}

impl algorithm::Algorithm for EarlyBinding {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Edf;

    fn edf_window(&self) -> Nanos {
        self.window
    }

    /// The timelines move to `now` before the worker is picked by their waits.
    fn arrival_seen(&mut self, now: Nanos) {
        for q in &mut self.queues {
            q.advance(now);
        }
    }

    /// Binds to the picked worker; its run is preempted at arrival only if it is demoted: a
    /// demoted run claims no time in the newcomer's wait (`Cores::claim`), so it must not keep
    /// the worker to its quantum's end either (as SledgeScale preempts it too). On-time runs
    /// yield only at quantum boundaries.
    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>) {
        let w = self.pick(now);
        let preempt = self.cores.get(w).is_some_and(|r| r.demoted && !r.preempt_pending);
        edf::bind(&mut self.cores, &mut self.queues[w], (w, preempt), now, req, out);
    }

    fn requeue(&mut self, worker: WorkerId, req: Request) {
        self.queues[worker].insert(req);
    }

    fn run_next(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        edf::run_next(&mut self.cores, &mut self.queues[worker], worker, now, out);
    }

    /// Queued requests, and those committed to a worker's batch that have not started.
    fn waiting(&self) -> usize {
        self.queues.iter().map(EdfQueue::len).sum::<usize>() + self.cores.following()
    }

    fn on_time_for(&self, worker: WorkerId) -> bool {
        !self.queues[worker].is_empty()
    }

    fn slice(&self, _worker: WorkerId) -> Option<Nanos> {
        Some(self.quantum)
    }

    /// At a quantum boundary the head of the worker's queue displaces the running request if it
    /// is more urgent; otherwise the quantum renews.
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        for q in &mut self.queues {
            q.advance(now);
        }
        let queues = &self.queues;
        let more_urgent = |w: WorkerId, run: &Running| {
            queues[w].peek().is_some_and(|head| head.key() < run.req.key())
        };
        self.cores.end_slices(now, self.quantum, more_urgent, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::feed;
    use crate::request::{FunctionId, Request, RequestId};

    fn req(id: u64, d: Nanos, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, d, e)
    }

    fn bound_to(out: &[Action]) -> Option<WorkerId> {
        out.iter().find_map(|a| match a {
            Action::Enqueue { worker, .. } => Some(*worker),
            _ => None,
        })
    }

    /// A demoted run holds the worker for nothing: an arrival preempts it at once, where it
    /// used to wait for the quantum's end (and then be shed, though admitted on a wait that did
    /// not count the demoted run).
    #[test]
    fn an_arrival_preempts_a_demoted_run_at_once() {
        use crate::policy::testing::rejected;
        use crate::request::Overrun;
        for choice in
            [EarlyChoice::RoundRobin, EarlyChoice::ShortestQueue, EarlyChoice::LeastLoaded]
        {
            let mut p = EarlyBinding::new(choice, &PolicyConfig::default());
            // 1 ms of work due in 10 µs: demoted, and run on the idle worker.
            let late = req(1, 10_000, 1_000_000).with_overrun(Overrun::Demote);
            let out = feed(&mut p, 0, Event::Arrival(late));
            assert!(out.iter().any(|a| matches!(a, Action::Run { req, .. } if req.id.0 == 1)));
            feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
            // 0.9 ms of work due at 1.1 ms, arriving at 0.1 ms: it fits only if it starts now.
            let on_time = Request::new(RequestId(2), FunctionId(0), 100_000, 1_000_000, 900_000);
            let out = feed(&mut p, 100_000, Event::Arrival(on_time));
            assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
            assert_eq!(rejected(&out), [], "{out:?}");
        }
    }

    #[test]
    fn rr_cycles_regardless_of_load() {
        let mut p = EarlyBinding::new(EarlyChoice::RoundRobin, &PolicyConfig::papers(3));
        let ws: Vec<_> = (0..6)
            .map(|i| bound_to(&feed(&mut p, 0, Event::Arrival(req(i, 1_000_000, 1)))))
            .collect();
        assert_eq!(ws, [0, 1, 2, 0, 1, 2].map(Some));
    }

    #[test]
    fn jsq_counts_requests_and_lld_counts_work() {
        let cfg = PolicyConfig::papers(2);
        for (choice, expect) in [(EarlyChoice::ShortestQueue, 1), (EarlyChoice::LeastLoaded, 0)] {
            let mut p = EarlyBinding::new(choice, &cfg);
            // Worker 0: two short requests (2 requests, 20 µs); worker 1: one long (1, 1 ms).
            feed(&mut p, 0, Event::Arrival(req(1, 1_000_000, 10_000)));
            feed(&mut p, 0, Event::Arrival(req(2, 1_000_000, 1_000_000)));
            // Both workers are busy now; put a second short request on worker 0 by hand.
            p.queues[0].insert(req(3, 1_000_000, 10_000));
            let w = bound_to(&feed(&mut p, 0, Event::Arrival(req(4, 1_000_000, 10_000))));
            assert_eq!(w, Some(expect), "{choice:?}");
        }
    }

    #[test]
    fn urgent_request_waits_for_the_quantum_boundary() {
        let mut p = EarlyBinding::new(EarlyChoice::RoundRobin, &PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 100_000_000, 10_000_000)));
        let out = feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        assert_eq!(out, vec![Action::WakeAt(1_000_000)]);
        let out = feed(&mut p, 10, Event::Arrival(req(2, 5_000_000, 1_000)));
        assert!(!out.iter().any(|a| matches!(a, Action::Preempt { .. })));
        // A tick before the boundary changes nothing; at the boundary the head preempts.
        assert!(feed(&mut p, 999_999, Event::Tick).is_empty());
        let out = feed(&mut p, 1_000_000, Event::Tick);
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
    }

    #[test]
    fn quantum_renews_when_nothing_is_more_urgent() {
        let mut p = EarlyBinding::new(EarlyChoice::RoundRobin, &PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 1_000_000, 10_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 10, Event::Arrival(req(2, 50_000_000, 1_000)));
        assert_eq!(feed(&mut p, 1_000_000, Event::Tick), vec![Action::WakeAt(2_000_000)]);
    }
}
