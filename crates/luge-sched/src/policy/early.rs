//! The early-binding baselines of SledgeScale §4: dispatch by round
//! robin (`rr`), join-the-shortest-queue (`jsq`) or join-the-least-loaded-queue by remaining work
//! (`lld`, LL(D) of §3.3); "each worker schedules using EDF with a fixed 1 ms scheduling quantum
//! triggered by a timer", i.e. a more urgent queued request displaces the running one only at the
//! next quantum boundary, never at arrival.

use super::core::{self, Cores};
use super::{Action, Admission, Event, LocalOrder, Policy, PolicyConfig, PolicyStats, WorkerId};
use crate::queue::{DeadlineQueue, EdfQueue};
use crate::request::Nanos;

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
    queues: Vec<DeadlineQueue>,
    next: WorkerId,
    quantum: Nanos,
    admission: Admission,
    stats: PolicyStats,
}

impl EarlyBinding {
    /// A dispatcher for `config.workers` workers with `config.edf_quantum`.
    pub fn new(choice: EarlyChoice, config: &PolicyConfig) -> Self {
        let n = config.workers.max(1);
        Self {
            choice,
            cores: Cores::new(n),
            queues: (0..n).map(|_| DeadlineQueue::new()).collect(),
            next: 0,
            quantum: config.edf_quantum.max(1),
            admission: config.admission,
            stats: PolicyStats::default(),
        }
    }

    fn pick(&mut self, now: Nanos) -> WorkerId {
        let n = self.queues.len();
        match self.choice {
            EarlyChoice::RoundRobin => {
                self.stats.workers_inspected += 1;
                let w = self.next;
                self.next = (self.next + 1) % n;
                w
            }
            EarlyChoice::ShortestQueue => {
                self.stats.workers_inspected += n as u64;
                (0..n)
                    .min_by_key(|&w| self.queues[w].len() + usize::from(!self.cores.is_idle(w)))
                    .unwrap_or(0)
            }
            EarlyChoice::LeastLoaded => {
                self.stats.workers_inspected += n as u64;
                (0..n)
                    .min_by_key(|&w| {
                        let run = self.cores.get(w).map_or(0, |r| r.remaining_at(now));
                        self.queues[w].total_work().saturating_add(run)
                    })
                    .unwrap_or(0)
            }
        }
    }

    /// Worker `w` just became idle at `now`: shed what its queue can no longer finish in time,
    /// then run the most urgent request that can still make it.
    fn run_next(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let queue = &mut self.queues[w];
        core::shed_doomed(&mut self.stats, &self.admission, queue, now, out);
        if let Some(next) = core::pop_runnable(&mut self.stats, &self.admission, queue, now, out) {
            self.cores.run(w, next, out);
        }
    }
}

impl Policy for EarlyBinding {
    fn name(&self) -> &'static str {
        match self.choice {
            EarlyChoice::RoundRobin => "rr",
            EarlyChoice::ShortestQueue => "jsq",
            EarlyChoice::LeastLoaded => "lld",
        }
    }

    fn workers(&self) -> usize {
        self.queues.len()
    }

    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Arrival(req) => {
                let queued = self.queued();
                if !core::admit(&mut self.stats, &self.admission, now, &req, queued, out) {
                    return;
                }
                let w = self.pick(now);
                let at = core::starts(self.cores.get(w), false, now, &req);
                if !core::passes_the_wait(
                    &mut self.stats,
                    &self.admission,
                    &self.queues[w],
                    at,
                    &req,
                    out,
                ) {
                    return;
                }
                out.push(Action::Enqueue { worker: w, id: req.id });
                if self.cores.is_idle(w) && self.queues[w].is_empty() {
                    self.cores.run(w, req, out);
                } else {
                    self.queues[w].insert(req);
                    // Admitted ahead of others: shed what it pushed past its deadline.
                    let queue = &mut self.queues[w];
                    core::shed_doomed(&mut self.stats, &self.admission, queue, at.0, out);
                }
            }
            Event::Started { worker, id } => {
                if self.cores.started(worker, id, now) {
                    out.push(Action::WakeAt(now.saturating_add(self.quantum)));
                }
            }
            Event::Completed { worker, id, executed } => {
                if self.cores.finish(worker, id, executed).is_some() {
                    self.run_next(worker, now, out);
                }
            }
            Event::Preempted { worker, id, executed } => {
                if let Some(req) = self.cores.finish(worker, id, executed) {
                    self.queues[worker].insert(req);
                    self.run_next(worker, now, out);
                }
            }
            Event::Tick => {
                for w in 0..self.queues.len() {
                    let quantum = self.quantum;
                    let head = self.queues[w].peek().map(|r| r.key());
                    let Some(run) = self.cores.get_mut(w) else { continue };
                    if run.preempt_pending || run.since.is_none() || run.in_slice(now) < quantum {
                        continue;
                    }
                    if head.is_some_and(|h| h < run.req.key()) {
                        if self.cores.preempt(w, out) {
                            self.stats.preemptions += 1;
                        }
                    } else {
                        run.slice_start = Some(now);
                        out.push(Action::WakeAt(now.saturating_add(quantum)));
                    }
                }
            }
        }
    }

    fn queued(&self) -> usize {
        self.queues.iter().map(EdfQueue::len).sum()
    }

    fn local_order(&self) -> LocalOrder {
        LocalOrder::Edf
    }

    fn stats(&self) -> PolicyStats {
        self.stats
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
