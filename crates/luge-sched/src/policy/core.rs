//! Bookkeeping every policy needs about its workers: which request runs where, since when, and
//! whether a preemption is already on its way, together with the admission settings and decision
//! counters that go with placing requests on them. Keeps the driver contract of the parent module
//! (run only on idle workers, at most one preemption in flight per worker) and the admission
//! steps the policies share (refuse, admit on the wait, shed the doomed, demote) in one place,
//! with the group's best-effort lane of demoted requests (Edge-RT §IV-C).

use super::batch::Batches;
use super::lane::Lane;
use super::{Action, Admission, PolicyConfig, PolicyStats, RejectReason, WorkerId};
use crate::queue::EdfQueue;
use crate::request::{Nanos, Overrun, Request, RequestId};
use crate::run_queue::RunQueue;

/// The request on a worker.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Running {
    /// The request, with `executed` as of when it was last started.
    pub req: Request,
    /// When the driver reported it started (`None` between `Run` and `Started`).
    pub since: Option<Nanos>,
    /// Start of the current scheduling quantum (for time-sliced policies).
    pub slice_start: Option<Nanos>,
    /// A `Preempt` was sent and neither `Preempted` nor `Completed` has come back yet.
    pub preempt_pending: bool,
    /// It runs from the best-effort lane: it outranks nobody.
    pub demoted: bool,
}

impl Running {
    /// Remaining execution at `now`, floored like [`Request::remaining`].
    pub fn remaining_at(&self, now: Nanos) -> Nanos {
        self.req.remaining_after(self.since.map_or(0, |s| now.saturating_sub(s)))
    }

    /// Slack at `now`.
    pub fn slack_at(&self, now: Nanos) -> i128 {
        self.req.absolute_deadline as i128 - now as i128 - self.remaining_at(now) as i128
    }

    /// Time spent in the current quantum.
    pub fn in_slice(&self, now: Nanos) -> Nanos {
        self.slice_start.map_or(0, |s| now.saturating_sub(s))
    }
}

/// How a time slice ended at a `Tick` ([`Cores::end_slice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SliceEnd {
    /// Someone waits: the request was asked to stop.
    Preempted,
    /// Nobody waits: the request keeps its worker for a new slice.
    Renewed,
}

/// Per-worker running state of one group, with the policy's name, admission settings and
/// counters.
#[derive(Debug, Clone)]
pub(crate) struct Cores {
    running: Vec<Option<Running>>,
    /// Short name of the policy ([`Policy::name`](super::Policy::name)).
    pub name: &'static str,
    /// Admission control of the policy.
    pub admission: Admission,
    /// Decision counters of the policy.
    pub stats: PolicyStats,
    /// The best-effort lane: demoted requests not running.
    lane: Lane,
    /// Per worker, the run whose deadline a timer already watches ([`Cores::watch_deadline`]).
    watched: Vec<Option<RequestId>>,
    /// Per worker, the requests committed behind its run (Edge-RT §IV-A).
    batches: Batches,
}

impl Cores {
    /// `config.workers` idle workers (at least one) of the policy `name`, under
    /// `config.admission`.
    pub fn new(name: &'static str, config: &PolicyConfig) -> Self {
        Self {
            running: vec![None; config.workers.max(1)],
            name,
            admission: config.admission,
            stats: PolicyStats::default(),
            lane: Lane::new(config),
            watched: vec![None; config.workers.max(1)],
            batches: Batches::new(config),
        }
    }

    pub fn len(&self) -> usize {
        self.running.len()
    }

    pub fn get(&self, w: WorkerId) -> Option<&Running> {
        self.running.get(w).and_then(Option::as_ref)
    }

    pub fn get_mut(&mut self, w: WorkerId) -> Option<&mut Running> {
        self.running.get_mut(w).and_then(Option::as_mut)
    }

    pub fn is_idle(&self, w: WorkerId) -> bool {
        self.get(w).is_none()
    }

    /// The first worker from `from` on that `free` accepts, each worker looked at counted in
    /// `workers_inspected` (up to and including the one found, or all of them).
    pub fn scan(
        &mut self,
        from: WorkerId,
        free: impl Fn(&Self, WorkerId) -> bool,
    ) -> Option<WorkerId> {
        for w in from..self.len() {
            self.stats.workers_inspected += 1;
            if free(self, w) {
                return Some(w);
            }
        }
        None
    }

    /// The lowest-numbered idle worker ([`Cores::scan`] from the first).
    pub fn scan_for_idle(&mut self) -> Option<WorkerId> {
        self.scan(0, Self::is_idle)
    }

    /// Iterates over (worker, running request).
    pub fn iter(&self) -> impl Iterator<Item = (WorkerId, &Running)> {
        self.running.iter().enumerate().filter_map(|(w, r)| r.as_ref().map(|r| (w, r)))
    }

    /// Puts `req` on the idle worker `w` and emits `Run`.
    pub fn run(&mut self, w: WorkerId, req: Request, out: &mut Vec<Action>) {
        self.put(w, req, false, out);
    }

    fn put(&mut self, w: WorkerId, req: Request, demoted: bool, out: &mut Vec<Action>) {
        debug_assert!(self.is_idle(w), "policy ran a request on busy worker {w}");
        let run = Running { req, since: None, slice_start: None, preempt_pending: false, demoted };
        self.running[w] = Some(run);
        out.push(Action::Run { worker: w, req });
    }

    /// Records the driver's `Started`; returns false if `id` is not what runs on `w`.
    pub fn started(&mut self, w: WorkerId, id: RequestId, now: Nanos) -> bool {
        match self.get_mut(w) {
            Some(r) if r.req.id == id => {
                r.since = Some(now);
                r.slice_start = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Whether `req` may join the batch of `w` behind its run (Edge-RT §IV-A, Δbatch): batching
    /// is on, an on-time run holds `w` with no preemption on its way, and `req`'s deadline is no
    /// earlier than the batch's last and within Δbatch of its run's.
    pub fn may_follow(&self, w: WorkerId, req: &Request) -> bool {
        self.get(w).is_some_and(|run| {
            !run.demoted
                && !run.preempt_pending
                && self.batches.admits(w, run.req.absolute_deadline, req)
        })
    }

    /// Commits `req` to `w` behind its run and the followers before it, and emits `Follow`.
    pub fn follow(&mut self, w: WorkerId, req: Request, out: &mut Vec<Action>) {
        debug_assert!(!self.is_idle(w), "policy batched a request on idle worker {w}");
        self.batches.push(w, req);
        out.push(Action::Follow { worker: w, req });
    }

    /// After the `Completed` of `ended` on `w`: its next follower, which the driver has started
    /// already, becomes the run; if a preemption of `ended` was on its way, it is asked again of
    /// the follower (the worker was wanted for something more urgent). Returns whether a
    /// follower took over.
    pub fn promote(&mut self, w: WorkerId, ended: &Running, out: &mut Vec<Action>) -> bool {
        let Some(req) = self.batches.pop(w) else { return false };
        let run =
            Running { req, since: None, slice_start: None, preempt_pending: false, demoted: false };
        self.running[w] = Some(run);
        if ended.preempt_pending {
            self.preempt(w, out);
        }
        true
    }

    /// Σ remaining work of `w`'s followers.
    pub fn batch_work(&self, w: WorkerId) -> Nanos {
        self.batches.work(w)
    }

    /// `w`'s followers: committed behind its run, not started.
    pub fn followers(&self, w: WorkerId) -> impl Iterator<Item = &Request> {
        self.batches.iter(w)
    }

    /// `w`'s followers, taken back after its run was preempted (the driver discarded them).
    pub fn take_followers(&mut self, w: WorkerId) -> impl Iterator<Item = Request> + use<> {
        self.batches.take(w).into_iter()
    }

    /// Requests committed to workers behind their runs, not started.
    pub fn following(&self) -> usize {
        self.batches.len()
    }

    /// What `w` is held for ahead of the requests bound there at `now`: its run's
    /// [`claim`](Self::claim) and the work of the followers committed behind it.
    pub fn claim_on(&self, now: Nanos, w: WorkerId) -> Nanos {
        let run = self.get(w).map_or(0, |r| self.claim(now, r));
        run.saturating_add(self.batches.work(w))
    }

    /// Takes the run of `id` off `w` (on `Completed` or `Preempted`), with `executed` recorded.
    pub fn finish(&mut self, w: WorkerId, id: RequestId, executed: Nanos) -> Option<Running> {
        match self.running.get_mut(w) {
            Some(slot @ Some(_)) if slot.as_ref().is_some_and(|r| r.req.id == id) => {
                let mut run = slot.take()?;
                run.req.executed = executed;
                Some(run)
            }
            _ => None,
        }
    }

    /// Asks the driver to stop `w`'s request unless a preemption is already in flight, counting
    /// it in `preemptions`. Returns whether a `Preempt` was emitted.
    pub fn preempt(&mut self, w: WorkerId, out: &mut Vec<Action>) -> bool {
        match self.get_mut(w) {
            Some(r) if !r.preempt_pending => {
                r.preempt_pending = true;
                out.push(Action::Preempt { worker: w, id: r.req.id });
                self.stats.preemptions += 1;
                true
            }
            _ => false,
        }
    }

    /// Time slicing at a `Tick` at `now`: once the request on `w`, started and with no preemption
    /// in flight, has used `len` of its current slice, it is preempted if `waiting` says another
    /// request should take its place, else it keeps the worker for a new slice of `next` (and a
    /// `WakeAt` for its end). `None` while the slice lasts or when nothing runs there.
    pub fn end_slice(
        &mut self,
        w: WorkerId,
        now: Nanos,
        (len, next): (Nanos, Nanos),
        waiting: impl FnOnce(&Running) -> bool,
        out: &mut Vec<Action>,
    ) -> Option<SliceEnd> {
        let run = self.get_mut(w)?;
        if run.preempt_pending || run.since.is_none() || run.in_slice(now) < len {
            return None;
        }
        if !waiting(run) {
            run.slice_start = Some(now);
            out.push(Action::WakeAt(now.saturating_add(next)));
            return Some(SliceEnd::Renewed);
        }
        self.preempt(w, out);
        Some(SliceEnd::Preempted)
    }

    /// Workers whose run has a preemption under way (each will take a waiting request).
    pub fn preempting(&self) -> usize {
        (0..self.len()).filter(|&w| self.get(w).is_some_and(|r| r.preempt_pending)).count()
    }

    /// [`Cores::end_slice`] on every worker with one `quantum`, `waiting(w, running)` saying
    /// whether another request should take worker `w`; demoted runs keep the lane's own quantum
    /// ([`Cores::rotate_demoted`]).
    pub fn end_slices(
        &mut self,
        now: Nanos,
        quantum: Nanos,
        mut waiting: impl FnMut(WorkerId, &Running) -> bool,
        out: &mut Vec<Action>,
    ) {
        for w in 0..self.len() {
            if !self.get(w).is_some_and(|r| r.demoted) {
                self.end_slice(w, now, (quantum, quantum), |run| waiting(w, run), out);
            }
        }
    }

    /// The arrival prelude every policy shares: counts the arrival and, if admission refuses it
    /// with `queued` requests already waiting, answers or demotes it ([`Cores::refuse`]).
    /// Returns whether it was admitted.
    pub fn admit(
        &mut self,
        now: Nanos,
        req: &Request,
        queued: usize,
        out: &mut Vec<Action>,
    ) -> bool {
        self.stats.arrivals += 1;
        match self.admission.check(now, req, queued) {
            Some(reason) => {
                self.refuse(*req, reason, out);
                false
            }
            None => true,
        }
    }

    /// `req` will not run on time for `reason`. If that is its deadline (not a full queue), its
    /// function asked for demotion and the lane has room (`Admission::max_queued`), it joins the
    /// back of the best-effort lane (Edge-RT §IV-C); else it is answered with `reason`.
    fn refuse(&mut self, req: Request, reason: RejectReason, out: &mut Vec<Action>) {
        let demote = req.on_overrun == Overrun::Demote && reason != RejectReason::QueueFull;
        if demote && self.lane.has_room() {
            self.stats.demoted += 1;
            out.push(Action::Demote { req });
            self.lane.push(req);
            return;
        }
        self.reject(req, reason, out);
    }

    /// Emits the `Reject` of `req` for `reason` and counts it.
    fn reject(&mut self, req: Request, reason: RejectReason, out: &mut Vec<Action>) {
        self.stats.rejected += 1;
        if reason == RejectReason::Shed {
            self.stats.shed += 1;
        }
        out.push(Action::Reject { req, reason });
    }

    /// The admitted `req`, whose deadline became unreachable, is not run ahead of requests that
    /// can still make theirs, at `now`. If its function asked for demotion and the lane has room
    /// (`Admission::max_queued`), it joins the back of the best-effort lane (Edge-RT §IV-C);
    /// else it is answered: [`RejectReason::Late`] if it already ran and its deadline has passed
    /// (it was preempted past it, [`Cores::past_deadline`]), else [`RejectReason::Shed`].
    pub fn shed(&mut self, req: Request, now: Nanos, out: &mut Vec<Action>) {
        self.refuse(req, late_or_shed(&req, now), out);
    }

    /// Whether `run` no longer outranks anyone at `now`: it runs from the best-effort lane, or,
    /// with `Admission::shed`, it is still running at or past its deadline (Edge-RT §VI-D
    /// deprioritises such requests). Any arrival may preempt it; once preempted, a late request is
    /// answered [`RejectReason::Late`] or demoted ([`Cores::shed`]) instead of resumed, and a
    /// demoted one goes back to the lane. With nothing else to run it runs on.
    pub fn past_deadline(&self, now: Nanos, run: &Running) -> bool {
        run.demoted || (self.admission.shed && now >= run.req.absolute_deadline)
    }

    /// The work `run` holds its worker for ahead of the requests bound there, at `now`: its
    /// remaining work, except for a run that outranks nobody and will not keep the worker — a
    /// demoted one (any arrival or the lane's quantum stops it, and it resumes only when nothing
    /// on time waits) or one past its deadline with a preemption on its way (it will be answered
    /// late) — which holds it for nothing.
    pub fn claim(&self, now: Nanos, run: &Running) -> Nanos {
        let late = self.admission.shed && run.preempt_pending && now >= run.req.absolute_deadline;
        if run.demoted || late { 0 } else { run.remaining_at(now) }
    }

    /// Demoted requests waiting in the best-effort lane.
    pub fn demoted_waiting(&self) -> usize {
        self.lane.len()
    }

    /// Puts `req`, a demoted request preempted from its quantum, back at the end of the lane.
    pub fn requeue_demoted(&mut self, req: Request) {
        self.lane.push(req);
    }

    /// Serves the lane at `now`, after every event while it holds requests:
    /// - the requests more than `PolicyConfig::demoted_expiry` past their deadline are answered
    ///   (late if they ran, else shed), and a timer is armed for the next expiry: a lane starved
    ///   by on-time work does not hold work whose clients gave up;
    /// - each idle worker, lowest first, takes the request at its front (the policy offers its
    ///   idle workers its own, on-time, work first, so the lane only ever gets workers with
    ///   nothing on time to run);
    /// - with shedding on and `late_yields` (the policies that answer or demote a preempted late
    ///   request, [`Cores::shed`], rather than run it again), a run past its deadline yields to
    ///   the lane (it outranks nobody), and a timer is armed at the deadline of each run not past
    ///   it yet, once per run.
    pub fn serve_lane(&mut self, now: Nanos, late_yields: bool, out: &mut Vec<Action>) {
        while let Some(req) = self.lane.pop_expired(now) {
            self.reject(req, late_or_shed(&req, now), out);
        }
        if let Some(t) = self.lane.arm_expiry() {
            out.push(Action::WakeAt(t));
        }
        for w in 0..self.len() {
            if self.lane.is_empty() {
                return;
            }
            let Some(run) = self.get(w) else {
                if let Some(req) = self.lane.pop() {
                    self.put(w, req, true, out);
                }
                continue;
            };
            let yields = late_yields && self.admission.shed;
            if !yields || run.demoted || run.preempt_pending || run.since.is_none() {
                continue;
            }
            if now >= run.req.absolute_deadline {
                self.preempt(w, out);
            } else {
                self.watch_deadline(w, now, out);
            }
        }
    }

    /// With shedding on, asks for a `Tick` at the deadline of the request running on `w`, once
    /// per run; the caller asks when requests wait that it would yield to if it were still
    /// running then.
    pub fn watch_deadline(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let Some(run) = self.get(w) else { return };
        let (id, deadline) = (run.req.id, run.req.absolute_deadline);
        if !self.admission.shed
            || run.preempt_pending
            || self.watched[w] == Some(id)
            || deadline <= now
        {
            return;
        }
        self.watched[w] = Some(id);
        out.push(Action::WakeAt(deadline));
    }

    /// The lane's round robin at a `Tick` at `now`, for worker `w` if it runs a demoted
    /// request: a run whose quantum is over yields if `on_time` (on-time work waits for its
    /// worker), other demoted requests wait, or it has expired (it goes back to the lane, which
    /// answers it), else it gets another quantum.
    pub fn rotate_demoted(
        &mut self,
        w: WorkerId,
        now: Nanos,
        on_time: bool,
        out: &mut Vec<Action>,
    ) {
        let Some(run) = self.get(w).filter(|r| r.demoted) else { return };
        let expired = self.lane.expired(&run.req, now);
        let (quantum, others) = (self.lane.quantum, !self.lane.is_empty());
        self.end_slice(w, now, (quantum, quantum), |_| others || expired || on_time, out);
    }

    /// The time slice of a run that starts on `w`: the lane's quantum for a demoted run, else
    /// `policy`'s.
    pub fn slice_of(&self, w: WorkerId, policy: Option<Nanos>) -> Option<Nanos> {
        if self.get(w).is_some_and(|r| r.demoted) { Some(self.lane.quantum) } else { policy }
    }

    /// Admission on the wait for `req` on worker `w` whose queue is `queue`, at `now`, its work
    /// starting at `at` ([`fits_the_wait`], when `Admission::on_wait`; with `protect_admitted`
    /// also the batch committed behind `w`'s run when `req` goes ahead of it): false, with `req`
    /// refused as unreachable at the current load, when it does not fit.
    pub fn passes_the_wait(
        &mut self,
        (w, queue): (WorkerId, &RunQueue),
        (now, at): (Nanos, (Nanos, Nanos)),
        req: &Request,
        out: &mut Vec<Action>,
    ) -> bool {
        let fits = fits_the_wait(&self.admission, queue, at, req)
            && (!self.admission.protect_admitted
                || at.0 >= at.1
                || self.run_and_followers_fit((w, queue), now, req.own_work()));
        if self.admission.on_wait && !fits {
            self.refuse(*req, RejectReason::Unreachable, out);
            return false;
        }
        true
    }

    /// Whether `w`'s run and every follower committed behind it still finish by their
    /// deadlines when a newcomer of `own` work goes ahead of them (it preempts the run). The
    /// run and the batch go back to `queue`, where whatever queued is more urgent than one of
    /// them now runs before it: the run was not always the most urgent request bound there (a
    /// batch's follower runs before more urgent work that arrived after it was committed, and a
    /// request that could not preempt the run queues behind it), and its slack, which let the
    /// newcomer preempt, does not count that work. A run already unable to finish in time is
    /// not protected.
    fn run_and_followers_fit(
        &self,
        (w, queue): (WorkerId, &RunQueue),
        now: Nanos,
        own: Nanos,
    ) -> bool {
        let running = self.get(w);
        let run = running.map_or(0, |r| self.claim(now, r));
        let run_fits = running.is_none_or(|r| {
            let deadline = r.req.absolute_deadline;
            let on_time = now.saturating_add(run) <= deadline;
            let before = queue.work_before(deadline);
            !on_time
                || now.saturating_add(own).saturating_add(before).saturating_add(run) <= deadline
        });
        let mut end = now.saturating_add(run).saturating_add(own);
        run_fits
            && self.batches.iter(w).all(|f| {
                end = end.saturating_add(f.remaining());
                end.saturating_add(queue.work_before(f.absolute_deadline)) <= f.absolute_deadline
            })
    }

    /// With `Admission::shed`, whether `req`, started at `now`, can no longer finish by its
    /// deadline on its own work alone.
    pub fn lost(&self, now: Nanos, req: &Request) -> bool {
        self.admission.shed && now.saturating_add(req.own_work()) > req.absolute_deadline
    }

    /// The next request of `queue` to run at `now`: with `Admission::shed`, every request at the
    /// head that can no longer finish by its deadline is answered instead (its own estimate
    /// known).
    pub fn pop_runnable(
        &mut self,
        queue: &mut RunQueue,
        now: Nanos,
        out: &mut Vec<Action>,
    ) -> Option<Request> {
        while let Some(next) = queue.pop() {
            if self.lost(now, &next) {
                self.shed(next, now, out);
                continue;
            }
            return Some(next);
        }
        None
    }

    /// With `Admission::shed`, answers every request of `queue` that would miss its deadline if
    /// the queue's work started at `start` (≥ `now`) and ran as expected, earliest first
    /// (shedding one gives those behind it back its work). Stops at a doomed request whose
    /// estimate is only a guess: that one is judged when it reaches the head
    /// ([`Cores::pop_runnable`], on its own work alone). O(log n) per request examined.
    pub fn shed_doomed(
        &mut self,
        queue: &mut RunQueue,
        (start, now): (Nanos, Nanos),
        out: &mut Vec<Action>,
    ) {
        if !self.admission.shed {
            return;
        }
        while let Some(key) = queue.first_doomed(start) {
            if !queue.get(key).is_some_and(|r| r.estimate_known) {
                return;
            }
            if let Some(req) = queue.remove(key) {
                self.shed(req, now, out);
            }
        }
    }
}

/// Takes one from `left` if any remain: whether one did (a slice's end that may preempt for a
/// waiting request not yet served).
pub(crate) fn take_one(left: &mut usize) -> bool {
    let some = *left > 0;
    *left = left.saturating_sub(1);
    some
}

/// How an admitted request that will not run on time is answered at `now`:
/// [`RejectReason::Late`] if it already ran and its deadline has passed (it was preempted past
/// it), else [`RejectReason::Shed`].
fn late_or_shed(req: &Request, now: Nanos) -> RejectReason {
    if req.executed > 0 && now >= req.absolute_deadline {
        RejectReason::Late
    } else {
        RejectReason::Shed
    }
}

/// Admission on the wait (`Admission::on_wait`) for `req` bound to a worker whose EDF queue is
/// `queue`, its work starting at `start` and the queued requests behind it at `rest_start`
/// ([`starts`](super::edf::starts)): whether `req` meets its deadline there and, with
/// `protect_admitted`, pushes no request already admitted there past its own.
fn fits_the_wait(
    admission: &Admission,
    queue: &RunQueue,
    (start, rest_start): (Nanos, Nanos),
    req: &Request,
) -> bool {
    if admission.protect_admitted {
        queue.admits(req, req.own_work(), start, rest_start)
    } else {
        queue.fits(req, req.own_work(), start)
    }
}
