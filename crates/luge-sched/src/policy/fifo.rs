//! `fifo`: one global first-come-first-served queue feeding every worker, each request run to
//! completion. With Poisson arrivals and exponential service this is M/M/c, the closed-form
//! reference the simulator is validated against.

use std::collections::VecDeque;

use super::algorithm;
use super::core::Cores;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request};

/// Global FIFO, late binding, no preemption.
#[derive(Debug, Clone)]
pub struct Fifo {
    cores: Cores,
    queue: VecDeque<Request>,
}

impl Fifo {
    /// A FIFO scheduler for `config.workers` workers.
    pub fn new(config: &PolicyConfig) -> Self {
        Self { cores: Cores::new("fifo", config), queue: VecDeque::new() }
    }
}

impl algorithm::Algorithm for Fifo {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Central;

    /// The first idle worker (the worker states looked at to find it are counted as the other
    /// central policies count them), else the tail of the queue.
    fn arrive(&mut self, _now: Nanos, req: Request, out: &mut Vec<Action>) {
        match self.cores.scan_for_idle() {
            Some(w) => self.cores.run(w, req, out),
            None => self.queue.push_back(req),
        }
    }

    /// `fifo` never preempts; a `Preempted` can only come from a confused driver, and the request
    /// then goes back to the head so it is not lost.
    fn requeue(&mut self, _worker: WorkerId, req: Request) {
        self.queue.push_front(req);
    }

    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        if let Some(next) = self.queue.pop_front() {
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
