//! SledgeScale's dispatcher and EDF workers: Algorithm 1 (GetWaitTime) and Algorithm 2 (request
//! dispatch and preemption) of SledgeScale §3.3, with the zero-remaining-slack rule
//! of §3.2, sharpened as `docs/scheduling.md` ("SledgeScale decisions") explains.

use super::algorithm;
use super::core::Cores;
use super::edf;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::backlog::Backlog;
use crate::queue::EdfQueue;
use crate::request::{MIN_REMAINING, Nanos, Request};
use crate::run_queue::RunQueue;

/// What Algorithm 1 says about one worker for a new request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitTime {
    /// Nothing runs and nothing is queued (line 1–2): place the request here at once.
    Empty,
    /// The running request is less urgent and its slack exceeds the new request's execution
    /// (line 3–4): preempting it is allowed.
    Preemptible,
    /// The new request would wait this long (line 6): Σ remaining work of queued requests with a
    /// deadline ≤ its own, plus the running request's remaining work.
    Wait(Nanos),
}

/// SledgeScale: early binding by Algorithm 2, EDF on each worker, dispatcher-triggered
/// preemption.
///
/// Decisions (`docs/scheduling.md`, "SledgeScale decisions"):
/// - "Empty" means no running request *and* an empty queue, checked explicitly (an overrunning
///   request still occupies its worker).
/// - A worker is preemptible only if its running request is strictly less urgent than the new one
///   *and* its remaining slack exceeds the new request's expected execution; a worker with a
///   preemption already in flight is not preemptible again.
/// - When the new request cannot preempt, the running request's remaining work counts in Wᵢ.
/// - The total queuing cost Cᵢ (Eq. 2) is the remaining work of every request on the worker,
///   running or queued: the backlog the preempted request and the newcomer share.
/// - Ties in Cᵢ or Wᵢ go to the lowest-numbered worker (the paper's strict `<`).
/// - With shedding on (`Admission::shed`, Luge's default), a request still running at its
///   deadline no longer outranks anyone (Edge-RT §VI-D): its worker is preemptible for any
///   arrival, a timer at its deadline preempts it when requests wait on its worker, and once
///   preempted it is answered `Late` instead of resumed. A runaway request that has blown its
///   deadline so costs the requests behind it nothing more; with nothing else to run it runs on
///   until it finishes or its execution budget ends it.
#[derive(Debug, Clone)]
pub struct SledgeScale {
    cores: Cores,
    queues: Vec<RunQueue>,
    steal: bool,
    /// [`QueueKind::window`](crate::QueueKind::window) of the workers' queues.
    window: Nanos,
}

impl SledgeScale {
    /// A SledgeScale dispatcher for `config.workers` workers.
    pub fn new(config: &PolicyConfig) -> Self {
        Self::build("sledgescale", config, false)
    }

    /// Luge's extension (`sledgescale-steal`): Algorithm 2 unchanged, but a worker that becomes
    /// idle with an empty queue takes the most urgent request queued on another worker of its
    /// group instead of idling. Early binding decides with the backlog known at arrival; when
    /// execution then differs from that picture (a preemption, a request finishing early) one
    /// worker can idle while another still has waiting work. Stealing the earliest deadline
    /// keeps the group's EDF order and makes the group work-conserving. Not in the paper. It
    /// does not batch (`PolicyConfig::batch_window` is ignored).
    pub fn with_stealing(config: &PolicyConfig) -> Self {
        Self::build("sledgescale-steal", config, true)
    }

    fn build(name: &'static str, config: &PolicyConfig, steal: bool) -> Self {
        // With stealing, no batches (Edge-RT §IV-A): a request committed behind a run could not
        // be taken by an idle neighbour, which is what stealing is for, and the admission that
        // counted on the batch's worker would no longer hold once a steal reorders the rest.
        let batch_window = if steal { 0 } else { config.batch_window };
        let cores = Cores::new(name, &PolicyConfig { batch_window, ..config.clone() });
        let (kind, window) = (config.worker_queue, config.worker_queue.window());
        Self {
            queues: (0..cores.len()).map(|_| RunQueue::new(kind)).collect(),
            cores,
            steal,
            window,
        }
    }

    /// Algorithm 1 for worker `w` at `now`.
    pub fn wait_time(&self, w: WorkerId, req: &Request, now: Nanos) -> WaitTime {
        let queue = &self.queues[w];
        let running = self.cores.get(w);
        let Some(run) = running else {
            if queue.is_empty() {
                return WaitTime::Empty;
            }
            return WaitTime::Wait(queue.work_before(req.absolute_deadline));
        };
        if !run.preempt_pending
            && (self.cores.past_deadline(now, run)
                || (run.req.absolute_deadline > req.absolute_deadline
                    && run.slack_at(now) > req.remaining() as i128))
        {
            return WaitTime::Preemptible;
        }
        // A preemption of the run is in flight and `req` is more urgent than it: `req` starts
        // before the run resumes, as `edf::starts` has it when binding — waiting only for the
        // queue ahead of it (the preempting request among it), not for the run's claim.
        if run.preempt_pending && req.key() < run.req.key() {
            return WaitTime::Wait(queue.work_before(req.absolute_deadline));
        }
        WaitTime::Wait(
            queue.work_before(req.absolute_deadline).saturating_add(self.cores.claim_on(now, w)),
        )
    }

    /// Cᵢ (Eq. 2): remaining work of everything on worker `w`.
    pub fn total_work(&self, w: WorkerId, now: Nanos) -> Nanos {
        let running = self.cores.claim_on(now, w);
        self.queues[w].total_work().saturating_add(running)
    }

    /// The summary of Algorithm 1 for newcomers behind everything ([`Backlog`]), at `now`: per
    /// worker, when it is done with its run, its batch and its queue, and the work it has left
    /// whenever that is; a run that any arrival may preempt (demoted, or at its deadline with
    /// shedding on) counts for nothing, the newcomer waiting only for the queue.
    fn summarise(&self, now: Nanos) -> Backlog {
        let admission = &self.cores.admission;
        if !admission.on_wait {
            return Backlog::OPEN;
        }
        let mut b = Backlog {
            at: now,
            free_at: Nanos::MAX,
            busy_for: Nanos::MAX,
            queued: Nanos::MAX,
            latest: 0,
            until: Nanos::MAX,
            workers: self.queues.len(),
        };
        for (w, queue) in self.queues.iter().enumerate() {
            let queued = queue.total_work();
            let on_worker = self.cores.get(w);
            let run = on_worker.filter(|run| !self.cores.past_deadline(now, run));
            // The run's end as estimated (`None` while it has not started: its remaining work
            // does not shrink yet) and the floor of its remaining work.
            let (end, floor, rest) = match run {
                // A run any arrival may preempt claims nothing; but while a preemption of it is
                // on its way the newcomer waits behind the batch committed to it.
                None if on_worker.is_some_and(|r| r.preempt_pending) => {
                    (None, 0, self.cores.batch_work(w).saturating_add(queued))
                }
                None => (None, 0, queued),
                Some(run) => {
                    if admission.shed {
                        b.until = b.until.min(run.req.absolute_deadline);
                    }
                    let rest = self.cores.batch_work(w).saturating_add(queued);
                    match run.since {
                        Some(s) => {
                            let left = run.req.expected.saturating_sub(run.req.executed);
                            (Some(s.saturating_add(left)), MIN_REMAINING, rest)
                        }
                        None => (None, run.req.remaining(), rest),
                    }
                }
            };
            let busy_for = floor.saturating_add(rest);
            let free = end.map_or(now, |e| e.max(now)).saturating_add(rest);
            b.free_at = b.free_at.min(free.max(now.saturating_add(busy_for)));
            b.busy_for = b.busy_for.min(busy_for);
            b.queued = b.queued.min(queued);
            let held = self.cores.get(w).map(|r| r.req.absolute_deadline);
            let followers = self.cores.followers(w).map(|f| f.absolute_deadline);
            b.latest =
                followers.chain(held).chain(queue.latest_deadline()).fold(b.latest, Nanos::max);
        }
        b
    }

    /// Algorithm 2: the worker for `req` and whether to preempt it.
    pub fn choose(&mut self, req: &Request, now: Nanos) -> (WorkerId, bool) {
        let mut p: Option<(WorkerId, Nanos)> = None;
        let mut c: Option<(WorkerId, Nanos)> = None;
        for w in 0..self.queues.len() {
            self.cores.stats.workers_inspected += 1;
            match self.wait_time(w, req, now) {
                WaitTime::Empty => return (w, false),
                WaitTime::Preemptible => {
                    let cw = self.total_work(w, now);
                    if p.is_none_or(|(_, cp)| cw < cp) {
                        p = Some((w, cw));
                    }
                }
                WaitTime::Wait(wt) => {
                    if c.is_none_or(|(_, wc)| wt < wc) {
                        c = Some((w, wt));
                    }
                }
            }
        }
        match (p, c) {
            (Some((w, _)), _) => (w, true),
            (None, Some((w, _))) => (w, false),
            // Unreachable with ≥ 1 worker: every worker is one of the three cases.
            (None, None) => (0, false),
        }
    }

    /// Luge's stealing ([`SledgeScale::with_stealing`]): the idle worker `w`, its own queue
    /// empty, takes the most urgent request queued on another worker.
    fn steal_for(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        // The most urgent head among the other workers' queues, shedding heads that can no
        // longer make it here either.
        loop {
            let victim = (0..self.queues.len())
                .filter(|&v| v != w)
                .filter_map(|v| self.queues[v].peek().map(|r| (r.key(), v)))
                .min();
            self.cores.stats.workers_inspected += self.queues.len() as u64 - 1;
            let Some((key, v)) = victim else { return };
            let Some(req) = self.queues[v].remove(key) else { return };
            if self.cores.lost(now, &req) {
                self.cores.shed(req, now, out);
                continue;
            }
            out.push(Action::Enqueue { worker: w, id: req.id });
            self.cores.run(w, req, out);
            return;
        }
    }

    /// With requests waiting behind the run on `w`, a timer at its deadline
    /// ([`Cores::watch_deadline`]): if it is still running then, it yields to them.
    fn watch_deadline(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        if !self.queues[w].is_empty() {
            self.cores.watch_deadline(w, now, out);
        }
    }
}

impl algorithm::Algorithm for SledgeScale {
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

    /// Algorithm 2: the worker chosen, preempted if it allows.
    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>) {
        let (w, preempt) = self.choose(&req, now);
        edf::bind(&mut self.cores, &mut self.queues[w], (w, preempt), now, req, out);
        if !preempt {
            self.watch_deadline(w, now, out);
        }
    }

    fn requeue(&mut self, worker: WorkerId, req: Request) {
        self.queues[worker].insert(req);
    }

    /// EDF on the worker (§3.3); with stealing, from another worker's queue if its own is empty.
    fn run_next(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let ran = edf::run_next(&mut self.cores, &mut self.queues[worker], worker, now, out);
        if !ran && self.steal {
            self.steal_for(worker, now, out);
        }
        self.watch_deadline(worker, now, out);
    }

    fn backlog(&self, now: Nanos) -> Backlog {
        self.summarise(now)
    }

    /// Queued requests, and those committed to a worker's batch that have not started.
    /// A follower's deadline is watched as a run's is.
    fn promoted(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        self.watch_deadline(worker, now, out);
    }

    fn waiting(&self) -> usize {
        self.queues.iter().map(EdfQueue::len).sum::<usize>() + self.cores.following()
    }

    fn on_time_for(&self, worker: WorkerId) -> bool {
        !self.queues[worker].is_empty()
    }

    /// A watched deadline passed: every request still running past its deadline with requests
    /// waiting on its worker is preempted (and answered `Late` when it comes back).
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        for w in 0..self.queues.len() {
            let late = self
                .cores
                .get(w)
                .is_some_and(|run| !run.preempt_pending && self.cores.past_deadline(now, run));
            if late && !self.queues[w].is_empty() {
                self.cores.preempt(w, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RejectReason;
    use crate::policy::testing::{feed, rejected};
    use crate::request::{FunctionId, RequestId};

    /// A request with an absolute deadline `d` and expected execution `e` arriving at 0.
    fn req(id: u64, d: Nanos, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, d, e)
    }

    /// Builds the two workers of Figure 4 (units: µs scaled to ns ×1000 so that the 1 µs floor
    /// of remaining work never bites). Worker 0 ("worker 1" in the paper) runs a request with
    /// deadline 100 and 30 left, and queues (110, 50) and (200, 20): W = 80, C = 100 for a request
    /// due at 125. Worker 1 runs (120, 50) and queues (300, 100): W = 50, C = 150.
    fn figure4() -> SledgeScale {
        const K: Nanos = 1_000;
        let mut p = SledgeScale::new(&PolicyConfig::papers(2));
        let mut id = 0;
        let mut put = |p: &mut SledgeScale, w: usize, d: Nanos, e: Nanos, running: bool| {
            id += 1;
            let r = req(id, d * K, e * K);
            if running {
                p.cores.run(w, r, &mut Vec::new());
                p.cores.started(w, r.id, 0);
            } else {
                p.queues[w].insert(r);
            }
        };
        put(&mut p, 0, 100, 30, true);
        put(&mut p, 0, 110, 50, false);
        put(&mut p, 0, 200, 20, false);
        put(&mut p, 1, 120, 50, true);
        put(&mut p, 1, 300, 100, false);
        p
    }

    /// The `Follow`s among `out`: (worker, request id).
    fn follows(out: &[Action]) -> Vec<(WorkerId, u64)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Follow { worker, req } => Some((*worker, req.id.0)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_batch_holds_what_lies_within_delta_batch_of_its_run_and_runs_unasked() {
        // Edge-RT §IV-A with Δbatch = 1 ms on one worker: a long run, then three requests due at
        // 10.5, 10.9 and 11.6 ms queue behind it.
        let cfg = PolicyConfig { batch_window: 1_000_000, ..PolicyConfig::papers(1) };
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 100_000_000, 1_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        for (id, d) in [(2, 10_500_000), (3, 10_900_000), (4, 11_600_000)] {
            let out = feed(&mut p, 1, Event::Arrival(req(id, d, 10_000)));
            assert!(follows(&out).is_empty(), "nothing joins a run due at 100 ms: {out:?}");
        }
        // The long run completes: 2 runs, 3 follows it (0.4 ms later), 4 (1.1 ms later) waits.
        let out = feed(&mut p, 2, Event::Completed { worker: 0, id: RequestId(1), executed: 2 });
        assert!(out.iter().any(|a| matches!(a, Action::Run { req, .. } if req.id.0 == 2)));
        assert_eq!(follows(&out), [(0, 3)]);
        assert_eq!(p.queued(), 2, "a follower counts as queued until it starts");
        // An arrival due after the follower, within the window of the run and ahead of the
        // queued 4, joins the batch; one due after 4 does not.
        let out = feed(&mut p, 3, Event::Arrival(req(5, 11_000_000, 10_000)));
        assert_eq!(follows(&out), [(0, 5)]);
        let out = feed(&mut p, 3, Event::Arrival(req(7, 11_700_000, 10_000)));
        assert_eq!(follows(&out), []);
        // 2 completes: the driver started 3 unasked, the policy asks for nothing.
        let out = feed(&mut p, 4, Event::Completed { worker: 0, id: RequestId(2), executed: 9 });
        assert!(out.iter().all(|a| matches!(a, Action::WakeAt(_))), "{out:?}");
        feed(&mut p, 4, Event::Started { worker: 0, id: RequestId(3) });
        // 3 is preempted by something due at once: 5 and 4 go back to the queue, run in order.
        let out = feed(&mut p, 5, Event::Arrival(req(6, 200_000, 10_000)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(3) }), "{out:?}");
        let out = feed(&mut p, 6, Event::Preempted { worker: 0, id: RequestId(3), executed: 2 });
        assert!(out.iter().any(|a| matches!(a, Action::Run { req, .. } if req.id.0 == 6)));
    }

    /// A newcomer committed to a run's batch is ahead of the queue: what it pushes past its
    /// deadline there is shed at once, as when it is queued ahead of it.
    #[test]
    fn joining_a_batch_sheds_what_it_pushed_past_its_deadline() {
        const US: Nanos = 1_000;
        let cfg = PolicyConfig { batch_window: 1_000 * US, ..PolicyConfig::default() };
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 10_000 * US, 9_000 * US)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // Past the batch window of the run (due 10 ms): queued; it ends at 10.5 ms, in time.
        let out = feed(&mut p, 0, Event::Arrival(req(2, 11_200 * US, 1_500 * US)));
        assert_eq!((rejected(&out), follows(&out)), (vec![], vec![]), "{out:?}");
        // Within the window and ahead of 2: it joins the batch, and 2 now ends at 11.5 ms.
        let out = feed(&mut p, 0, Event::Arrival(req(3, 10_500 * US, 1_000 * US)));
        assert_eq!(follows(&out), [(0, 3)]);
        assert_eq!(rejected(&out), [(2, RejectReason::Shed)], "{out:?}");
    }

    #[test]
    fn an_arrival_for_a_busy_worker_with_nothing_queued_joins_its_batch() {
        let cfg = PolicyConfig { batch_window: 1_000_000, ..PolicyConfig::papers(1) };
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 10_000_000, 100_000)));
        let out = feed(&mut p, 1, Event::Arrival(req(2, 10_500_000, 100_000)));
        assert_eq!(follows(&out), [(0, 2)]);
        // Earlier than the batch's last, or past the window: queued instead.
        let out = feed(&mut p, 2, Event::Arrival(req(3, 10_400_000, 100_000)));
        assert_eq!(follows(&out), []);
        let out = feed(&mut p, 2, Event::Arrival(req(4, 12_000_000, 100_000)));
        assert_eq!(follows(&out), []);
        // Batching off: never.
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 10_000_000, 100_000)));
        assert_eq!(follows(&feed(&mut p, 1, Event::Arrival(req(2, 10_500_000, 1_000)))), []);
    }

    /// While a preemption is in flight, a newcomer more urgent than the preempted run waits on
    /// that worker only for the queue ahead of it, as the binding has it: picking the worker and
    /// binding agree, and a request that fits there is not sent to refuse elsewhere.
    #[test]
    fn a_pending_preemption_does_not_count_against_a_more_urgent_newcomer() {
        const MS: Nanos = 1_000_000;
        let mut p = SledgeScale::new(&PolicyConfig { workers: 2, ..PolicyConfig::default() });
        feed(&mut p, 0, Event::Arrival(req(1, 100 * MS, 50 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Arrival(req(2, 16 * MS, 15 * MS)));
        feed(&mut p, 0, Event::Started { worker: 1, id: RequestId(2) });
        // Due at 5 ms: it preempts the loose run on worker 0 (the preemption in flight).
        let out = feed(&mut p, 0, Event::Arrival(req(3, 5 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
        // Due at 10 ms with 2 ms of work: behind the 1 ms one on worker 0 it ends at 3 ms;
        // worker 1 is held 15 ms. It goes to worker 0 and is admitted.
        assert_eq!(p.wait_time(0, &req(4, 10 * MS, 2 * MS), 0), WaitTime::Wait(MS));
        let out = feed(&mut p, 0, Event::Arrival(req(4, 10 * MS, 2 * MS)));
        assert_eq!(rejected(&out), [], "{out:?}");
        assert!(out.contains(&Action::Enqueue { worker: 0, id: RequestId(4) }), "{out:?}");
    }

    #[test]
    fn figure_4a_enqueues_where_the_wait_is_shortest() {
        let mut p = figure4();
        let r = req(10, 125_000, 10_000);
        assert_eq!(p.wait_time(0, &r, 0), WaitTime::Wait(80_000));
        assert_eq!(p.wait_time(1, &r, 0), WaitTime::Wait(50_000));
        let out = feed(&mut p, 0, Event::Arrival(r));
        assert_eq!(out, vec![Action::Enqueue { worker: 1, id: RequestId(10) }]);
        assert_eq!(p.queues[1].len(), 2);
        assert_eq!(p.stats().preemptions, 0);
    }

    #[test]
    fn figure_4b_preempts_the_worker_with_less_total_work() {
        let mut p = figure4();
        let r = req(11, 50_000, 5_000);
        assert_eq!(p.wait_time(0, &r, 0), WaitTime::Preemptible);
        assert_eq!(p.wait_time(1, &r, 0), WaitTime::Preemptible);
        assert_eq!(p.total_work(0, 0), 100_000);
        assert_eq!(p.total_work(1, 0), 150_000);
        let out = feed(&mut p, 0, Event::Arrival(r));
        assert_eq!(
            out,
            vec![
                Action::Enqueue { worker: 0, id: RequestId(11) },
                Action::Preempt { worker: 0, id: RequestId(1) },
            ]
        );
        // The preempted request goes back to the queue and the urgent one runs next.
        let out =
            feed(&mut p, 1_000, Event::Preempted { worker: 0, id: RequestId(1), executed: 1_000 });
        assert_eq!(out.len(), 1);
        assert!(matches!(out[0], Action::Run { worker: 0, req } if req.id == RequestId(11)));
        let back = p.queues[0].iter().find(|q| q.id == RequestId(1)).copied();
        assert_eq!(back.map(|b| b.executed), Some(1_000));
    }

    #[test]
    fn empty_worker_wins_at_once() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(3));
        let out = feed(&mut p, 0, Event::Arrival(req(1, 1_000_000, 10_000)));
        assert!(matches!(
            out[..],
            [Action::Enqueue { worker: 0, .. }, Action::Run { worker: 0, .. }]
        ));
        let out = feed(&mut p, 0, Event::Arrival(req(2, 1_000_000, 10_000)));
        assert!(matches!(
            out[..],
            [Action::Enqueue { worker: 1, .. }, Action::Run { worker: 1, .. }]
        ));
        // Inspection stops at the first empty worker: 1 for the first request, 2 for the second.
        assert_eq!(p.stats().workers_inspected, 3);
    }

    #[test]
    fn zero_slack_request_is_never_preempted() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        // Running request: deadline 100 µs, expected 100 µs → slack 0 at start.
        feed(&mut p, 0, Event::Arrival(req(1, 100_000, 100_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let urgent = req(2, 50_000, 1_000);
        assert_eq!(p.wait_time(0, &urgent, 10_000), WaitTime::Wait(90_000));
        let out = feed(&mut p, 10_000, Event::Arrival(urgent));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(2) }]);
    }

    #[test]
    fn slack_must_exceed_the_new_execution_strictly() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        // Slack of the running request: 200 − 0 − 100 = 100 µs.
        feed(&mut p, 0, Event::Arrival(req(1, 200_000, 100_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        assert_eq!(p.wait_time(0, &req(2, 150_000, 100_000), 0), WaitTime::Wait(100_000));
        assert_eq!(p.wait_time(0, &req(3, 150_000, 99_999), 0), WaitTime::Preemptible);
        // A less urgent newcomer never preempts.
        assert!(matches!(p.wait_time(0, &req(4, 300_000, 1_000), 0), WaitTime::Wait(_)));
    }

    #[test]
    fn one_preemption_in_flight_per_worker() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 10_000_000, 1_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let a = feed(&mut p, 1, Event::Arrival(req(2, 100_000, 1_000)));
        let b = feed(&mut p, 2, Event::Arrival(req(3, 90_000, 1_000)));
        assert_eq!(a.iter().filter(|x| matches!(x, Action::Preempt { .. })).count(), 1);
        assert_eq!(b.iter().filter(|x| matches!(x, Action::Preempt { .. })).count(), 0);
        // The most urgent request runs once the preemption lands.
        let out = feed(&mut p, 5, Event::Preempted { worker: 0, id: RequestId(1), executed: 5 });
        assert!(matches!(out[..], [Action::Run { req, .. }] if req.id == RequestId(3)));
    }

    #[test]
    fn stealing_keeps_an_idle_worker_busy_with_the_most_urgent_queued_request() {
        for steal in [false, true] {
            let cfg = PolicyConfig::papers(2);
            let mut p =
                if steal { SledgeScale::with_stealing(&cfg) } else { SledgeScale::new(&cfg) };
            // Both workers busy with requests more urgent than what follows, so nothing can
            // preempt; the next two queue behind worker 0's shorter remaining work.
            feed(&mut p, 0, Event::Arrival(req(1, 10_000_000, 1_000_000)));
            feed(&mut p, 0, Event::Arrival(req(2, 20_000_000, 9_000_000)));
            feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
            feed(&mut p, 0, Event::Started { worker: 1, id: RequestId(2) });
            feed(&mut p, 1, Event::Arrival(req(3, 50_000_000, 1_000_000)));
            feed(&mut p, 1, Event::Arrival(req(4, 40_000_000, 1_000_000)));
            assert_eq!(p.queues[0].len(), 2, "premise: both queued on worker 0");
            // Worker 1 finishes its long request early; worker 0 is still busy.
            let out =
                feed(&mut p, 2, Event::Completed { worker: 1, id: RequestId(2), executed: 2 });
            if steal {
                assert_eq!(
                    out,
                    vec![
                        Action::Enqueue { worker: 1, id: RequestId(4) },
                        Action::Run { worker: 1, req: req(4, 40_000_000, 1_000_000) },
                    ]
                );
                assert_eq!(p.name(), "sledgescale-steal");
            } else {
                assert!(out.is_empty(), "the paper's policy leaves worker 1 idle");
            }
        }
    }

    #[test]
    fn completion_that_beats_the_preemption_is_handled() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 10_000_000, 1_000_000)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 1, Event::Arrival(req(2, 100_000, 1_000)));
        let out = feed(&mut p, 2, Event::Completed { worker: 0, id: RequestId(1), executed: 2 });
        assert!(matches!(out[..], [Action::Run { req, .. }] if req.id == RequestId(2)));
        assert_eq!(p.queued(), 0);
    }

    /// Units of the admission tests: 1 ms.
    const MS: Nanos = 1_000_000;

    /// One busy worker with the default (deadline-aware) admission: `R` runs (deadline 5 ms,
    /// 5 ms of work) and `A` waits behind it (deadline 10 ms, 4 ms: done at 9 ms).
    fn one_busy_worker() -> SledgeScale {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, 5 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, 0, Event::Arrival(req(2, 10 * MS, 4 * MS)));
        // Queued behind `R`, whose deadline (5 ms) is now watched.
        let expect = vec![Action::Enqueue { worker: 0, id: RequestId(2) }, Action::WakeAt(5 * MS)];
        assert_eq!(out, expect, "premise");
        p
    }

    #[test]
    fn a_request_running_past_its_deadline_yields_to_any_arrival_and_is_answered_late() {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        // Before its deadline a less urgent arrival waits (no preemption)…
        let out = feed(&mut p, MS / 2, Event::Arrival(req(2, 50 * MS, MS)));
        assert!(!out.iter().any(|a| matches!(a, Action::Preempt { .. })), "{out:?}");
        // …past it (a runaway: expected 1 ms, still running at 6 ms) any arrival preempts it,
        // even one due later.
        let out = feed(&mut p, 6 * MS, Event::Arrival(req(3, 90 * MS, MS)));
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }), "{out:?}");
        let out = feed(
            &mut p,
            6 * MS,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 6 * MS },
        );
        assert_eq!(rejected(&out), vec![(1, RejectReason::Late)]);
        let ran = out.iter().find_map(|a| match a {
            Action::Run { req, .. } => Some(req.id),
            _ => None,
        });
        assert_eq!(ran, Some(RequestId(2)), "the most urgent of the rest runs: {out:?}");
        assert_eq!(p.stats().shed, 0, "late is not shed");
    }

    #[test]
    fn a_watched_deadline_preempts_the_runaway_when_requests_wait() {
        let mut p = one_busy_worker();
        // Nothing happens before the deadline…
        assert!(feed(&mut p, 4 * MS, Event::Tick).is_empty());
        // …at it, `R` (still running) yields to `A`, which still fits (due at 10 ms, 4 ms).
        let out = feed(&mut p, 5 * MS, Event::Tick);
        assert_eq!(out, vec![Action::Preempt { worker: 0, id: RequestId(1) }]);
        let out = feed(
            &mut p,
            5 * MS,
            Event::Preempted { worker: 0, id: RequestId(1), executed: 5 * MS },
        );
        assert_eq!(rejected(&out), vec![(1, RejectReason::Late)]);
        assert!(matches!(out.last(), Some(Action::Run { req, .. }) if req.id == RequestId(2)));
    }

    #[test]
    fn alone_a_request_past_its_deadline_runs_on() {
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        assert!(feed(&mut p, 6 * MS, Event::Tick).is_empty());
        let out = feed(
            &mut p,
            9 * MS,
            Event::Completed { worker: 0, id: RequestId(1), executed: 9 * MS },
        );
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn without_shedding_a_late_request_keeps_its_rank_as_in_the_paper() {
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, 6 * MS, Event::Arrival(req(2, 90 * MS, MS)));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(2) }]);
    }

    #[test]
    fn admission_on_the_wait_refuses_a_request_that_would_miss() {
        let mut p = one_busy_worker();
        // Wait 5 + 4 = 9 ms, then 2 ms of its own: done at 11 ms, past its 10.5 ms deadline.
        let out = feed(&mut p, 0, Event::Arrival(req(3, 10 * MS + MS / 2, 2 * MS)));
        assert_eq!(rejected(&out), vec![(3, RejectReason::Unreachable)]);
        // With 1 ms of work it fits (done at 10 ms).
        let out = feed(&mut p, 0, Event::Arrival(req(4, 10 * MS + MS / 2, MS)));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(4) }]);
        assert_eq!(p.stats().rejected, 1);
        // The papers' setting queues the doomed request.
        let mut p = SledgeScale::new(&PolicyConfig::papers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, 5 * MS)));
        let out = feed(&mut p, 0, Event::Arrival(req(3, 10 * MS + MS / 2, 7 * MS)));
        assert!(rejected(&out).is_empty());
    }

    #[test]
    fn a_newcomer_that_dooms_an_admitted_request_sheds_it_or_is_refused() {
        // Done at 5 + 2 = 7 ms, inside its 8 ms deadline, but it pushes `A` to 11 ms > 10 ms.
        // By default the newcomer is admitted and `A`, now doomed, is shed at once.
        let mut p = one_busy_worker();
        let out = feed(&mut p, 0, Event::Arrival(req(3, 8 * MS, 2 * MS)));
        assert_eq!(rejected(&out), vec![(2, RejectReason::Shed)]);
        assert!(out.contains(&Action::Enqueue { worker: 0, id: RequestId(3) }));
        assert_eq!(p.queued(), 1);
        // With `protect_admitted`, the newcomer is refused instead and `A` keeps its place.
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.admission.protect_admitted = true;
        let mut p = SledgeScale::new(&cfg);
        feed(&mut p, 0, Event::Arrival(req(1, 5 * MS, 5 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        feed(&mut p, 0, Event::Arrival(req(2, 10 * MS, 4 * MS)));
        let out = feed(&mut p, 0, Event::Arrival(req(3, 8 * MS, 2 * MS)));
        assert_eq!(rejected(&out), vec![(3, RejectReason::Unreachable)]);
        // One that leaves `A` its deadline is admitted ahead of it.
        let out = feed(&mut p, 0, Event::Arrival(req(4, 8 * MS, MS)));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(4) }]);
    }

    #[test]
    fn an_urgent_request_that_preempts_is_judged_from_now() {
        // Running: deadline 20 ms, 5 ms of work (slack 15 ms). A 2 ms request due in 3 ms cannot
        // wait 5 ms, but it preempts and starts at once.
        let mut p = SledgeScale::new(&PolicyConfig::with_workers(1));
        feed(&mut p, 0, Event::Arrival(req(1, 20 * MS, 5 * MS)));
        feed(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
        let out = feed(&mut p, 0, Event::Arrival(req(2, 3 * MS, 2 * MS)));
        assert!(rejected(&out).is_empty());
        assert!(out.contains(&Action::Preempt { worker: 0, id: RequestId(1) }));
        // While that preemption is in flight, a second urgent request will also run before the
        // stopped one resumes: it is judged from now too (after the first one's 2 ms).
        let out = feed(&mut p, 0, Event::Arrival(req(3, 4 * MS + MS / 2, 2 * MS)));
        assert_eq!(out, vec![Action::Enqueue { worker: 0, id: RequestId(3) }]);
        let out = feed(&mut p, 0, Event::Arrival(req(4, 5 * MS, 2 * MS)));
        assert_eq!(rejected(&out), vec![(4, RejectReason::Unreachable)], "2 + 2 + 2 > 5 ms");
    }

    #[test]
    fn a_request_whose_deadline_became_unreachable_is_shed_not_run() {
        let mut p = one_busy_worker();
        feed(&mut p, 0, Event::Arrival(req(3, 30 * MS, 4 * MS)));
        // `R` overran: it ends at 8 ms instead of 5, so `A` (4 ms, due at 10 ms) cannot make it,
        // while the request due at 30 ms still can and runs at once.
        let out = feed(
            &mut p,
            8 * MS,
            Event::Completed { worker: 0, id: RequestId(1), executed: 8 * MS },
        );
        assert_eq!(rejected(&out), vec![(2, RejectReason::Shed)]);
        assert!(matches!(out.last(), Some(Action::Run { req, .. }) if req.id == RequestId(3)));
        assert_eq!((p.stats().shed, p.stats().rejected), (1, 1));
    }

    #[test]
    fn a_guessed_estimate_is_never_refused_on_its_own_guess() {
        let mut p = one_busy_worker();
        // A 100 ms guess that cannot fit anywhere: admitted on the 1 µs floor of its own work.
        let guessed = req(3, 30 * MS, 100 * MS).with_guessed_estimate();
        let out = feed(&mut p, 0, Event::Arrival(guessed));
        assert!(rejected(&out).is_empty(), "{out:?}");
        // Known, the same request is infeasible.
        let out = feed(&mut p, 0, Event::Arrival(req(4, 30 * MS, 100 * MS)));
        assert_eq!(rejected(&out), vec![(4, RejectReason::Infeasible)]);
    }
}
