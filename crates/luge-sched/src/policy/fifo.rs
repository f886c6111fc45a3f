//! `fifo`: one global first-come-first-served queue feeding every worker, each request run to
//! completion. With Poisson arrivals and exponential service this is M/M/c, the closed-form
//! reference the simulator is validated against.

use std::collections::VecDeque;

use super::core::{self, Cores};
use super::{Action, Admission, Event, LocalOrder, Policy, PolicyConfig, PolicyStats};
use crate::request::{Nanos, Request};

/// Global FIFO, late binding, no preemption.
#[derive(Debug, Clone)]
pub struct Fifo {
    cores: Cores,
    queue: VecDeque<Request>,
    admission: Admission,
    stats: PolicyStats,
}

impl Fifo {
    /// A FIFO scheduler for `config.workers` workers.
    pub fn new(config: &PolicyConfig) -> Self {
        Self {
            cores: Cores::new(config.workers.max(1)),
            queue: VecDeque::new(),
            admission: config.admission,
            stats: PolicyStats::default(),
        }
    }
}

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn workers(&self) -> usize {
        self.cores.len()
    }

    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Arrival(req) => {
                let queued = self.queue.len();
                if !core::admit(&mut self.stats, &self.admission, now, &req, queued, out) {
                    return;
                }
                // Worker states looked at to find the first idle one, counted as the other
                // central policies count them.
                let idle = self.cores.first_idle();
                self.stats.workers_inspected += idle.map_or(self.cores.len(), |w| w + 1) as u64;
                match idle {
                    Some(w) => self.cores.run(w, req, out),
                    None => self.queue.push_back(req),
                }
            }
            Event::Started { worker, id } => {
                self.cores.started(worker, id, now);
            }
            Event::Completed { worker, id, executed }
            | Event::Preempted { worker, id, executed } => {
                // `fifo` never preempts; a `Preempted` can only come from a confused driver, and
                // the request then goes back to the head so it is not lost.
                let preempted = matches!(event, Event::Preempted { .. });
                if let Some(req) = self.cores.finish(worker, id, executed) {
                    if preempted {
                        self.queue.push_front(req);
                    }
                    if let Some(next) = self.queue.pop_front() {
                        self.cores.run(worker, next, out);
                    }
                }
            }
            Event::Tick => {}
        }
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn local_order(&self) -> LocalOrder {
        LocalOrder::Central
    }

    fn stats(&self) -> PolicyStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{FunctionId, RequestId};

    #[test]
    fn serves_in_arrival_order_on_the_first_free_worker() {
        let mut p = Fifo::new(&PolicyConfig::with_workers(2));
        let mut out = Vec::new();
        for i in 0..4 {
            // Later requests have earlier deadlines: FIFO must ignore them.
            let r = Request::new(RequestId(i), FunctionId(0), i, 1_000_000 - i * 1000, 1_000);
            p.on_event(i, Event::Arrival(r), &mut out);
        }
        let runs: Vec<_> = out
            .iter()
            .filter_map(|a| match a {
                Action::Run { worker, req } => Some((*worker, req.id.0)),
                _ => None,
            })
            .collect();
        assert_eq!(runs, vec![(0, 0), (1, 1)]);
        out.clear();
        p.on_event(10, Event::Completed { worker: 1, id: RequestId(1), executed: 5 }, &mut out);
        assert!(matches!(out[..], [Action::Run { worker: 1, req }] if req.id == RequestId(2)));
        assert_eq!(p.queued(), 1);
    }
}
