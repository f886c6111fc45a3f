//! `fifo`: one global first-come-first-served queue feeding every worker, each request run to
//! completion. With Poisson arrivals and exponential service this is M/M/c, the closed-form
//! reference the simulator is validated against. The central queue's placement and hand-out,
//! `arrive` and `run_next`, serve `timesliced` too.

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
        arrive(&mut self.cores, &mut self.queue, req, out);
    }

    /// `fifo` never preempts; a `Preempted` can only come from a confused driver, and the request
    /// then goes back to the head so it is not lost.
    fn requeue(&mut self, _worker: WorkerId, req: Request) {
        self.queue.push_front(req);
    }

    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        run_next(&mut self.cores, &mut self.queue, worker, out);
    }

    fn waiting(&self) -> usize {
        self.queue.len()
    }
}

/// Places the admitted `req` on the first idle worker of `cores` (the worker states looked at
/// to find it are counted), else at the tail of the central `queue`.
pub(crate) fn arrive(
    cores: &mut Cores,
    queue: &mut VecDeque<Request>,
    req: Request,
    out: &mut Vec<Action>,
) {
    match cores.scan_for_idle() {
        Some(w) => cores.run(w, req, out),
        None => queue.push_back(req),
    }
}

/// Worker `w` just became free: it runs the head of the central `queue`, if any.
pub(crate) fn run_next(
    cores: &mut Cores,
    queue: &mut VecDeque<Request>,
    w: WorkerId,
    out: &mut Vec<Action>,
) {
    if let Some(next) = queue.pop_front() {
        cores.run(w, next, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::runs;
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
        assert_eq!(runs(&out), vec![(0, 0), (1, 1)]);
        out.clear();
        p.on_event(10, Event::Completed { worker: 1, id: RequestId(1), executed: 5 }, &mut out);
        assert!(matches!(out[..], [Action::Run { worker: 1, req }] if req.id == RequestId(2)));
        assert_eq!(p.queued(), 1);
    }
}
