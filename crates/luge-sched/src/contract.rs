//! The driver/policy contract of [`Policy`], checked as it happens. [`ContractChecker`] follows
//! the events a driver feeds one policy and the actions the policy answers with, and reports the
//! first step that breaks either side's obligations as a [`ContractViolation`]; [`Checked`]
//! wraps a policy so that every call is checked.
//!
//! It is pure and cheap — no I/O, clock or threads, O(log n) per event or action, memory for the
//! requests in flight only — and knows nothing of any driver: the simulator checks its runs with
//! it, and the runtime's dispatcher can wrap its policy in it in tests and debug builds.
//!
//! What it holds each side to:
//! - Driver: time never goes back; an arrival's id is not one the policy still holds;
//!   `Started`, `Completed` and `Preempted` name the run in progress on that worker (as the
//!   policy was last told), `Started` once per run, `Preempted` only after a `Preempt` of it.
//! - Policy: every action names a worker of the group and a request it holds; a `Run` targets an
//!   idle worker, with a request not running elsewhere and carrying its execution so far; a
//!   policy whose workers order their queues by EDF ([`LocalOrder::Edf`]) runs the most urgent
//!   request bound to the worker (by its `Enqueue`s) — or, when its queues quantise deadlines
//!   ([`Policy::edf_window`] `w` > 0, CT-EDF of Edge-RT §IV-C), one whose deadline lies in the
//!   same quantum `⌊d / w⌋` as the most urgent's, unless that one is past its deadline (the
//!   timeline serves overdue requests last) or the request run was filed beyond the timeline's
//!   1024-quantum horizon (its deadline quantum ≥ its arrival's + 1024) — and a demoted request only on a worker with
//!   no request bound to it; a `Demote` names a held request that is not running and unbinds
//!   it; a `Preempt` names the request running there; a `Reject` answers a request that is not
//!   running; and, once the driver has nothing left to deliver, no request is still held
//!   ([`ContractChecker::end`]).
//!
//! `Enqueue` is informational: it is checked for what it names, and only drives the EDF check.
//! A request id reused after its request was answered is not noticed: only requests in flight are
//! remembered.
//!
//! One file on purpose (above ~600 lines): the checker, its violations and the wrapper are one
//! concern; ~250 lines are the tests that break each obligation once.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::backlog::Backlog;
use crate::policy::{Action, Event, LocalOrder, Policy, PolicyStats, WorkerId};
use crate::request::{Nanos, QueueKey, RequestId};

/// A step that broke the driver/policy contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractViolation {
    /// The driver fed a time earlier than the one before.
    #[error("time went back from {before} ns to {now} ns")]
    TimeWentBack {
        /// The earlier time fed before.
        before: Nanos,
        /// The time fed now.
        now: Nanos,
    },
    /// The driver fed an arrival whose id names a request the policy still holds.
    #[error("arrival of {id:?}, a request the policy already holds")]
    DuplicateArrival {
        /// The request.
        id: RequestId,
    },
    /// The driver reported on a request that is not running on that worker.
    #[error("{event:?} names no run in progress on that worker")]
    NoSuchRun {
        /// The report.
        event: Event,
    },
    /// The driver reported `Started` twice for one run.
    #[error("{id:?} started twice on worker {worker}")]
    StartedTwice {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
    },
    /// The driver stopped a request no `Preempt` asked it to stop.
    #[error("{id:?} was preempted on worker {worker} without a Preempt")]
    UnaskedPreemption {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
    },
    /// The policy named a worker outside its group.
    #[error("{action:?} names a worker outside the group of {workers}")]
    NoSuchWorker {
        /// The action.
        action: Action,
        /// Workers in the group.
        workers: usize,
    },
    /// The policy named a request it does not hold: one that never arrived, or one already
    /// answered (completed or rejected).
    #[error("{action:?} names a request the policy does not hold (never arrived or answered)")]
    NotHeld {
        /// The action.
        action: Action,
    },
    /// The policy ran a request on a worker that is running another one.
    #[error("run of {id:?} on worker {worker}, which is running {running:?}")]
    BusyWorker {
        /// Worker.
        worker: WorkerId,
        /// The request run.
        id: RequestId,
        /// The request already running there.
        running: RequestId,
    },
    /// The policy committed a request to the batch of a worker that has no run in progress.
    #[error("{id:?} follows on worker {worker}, which has no run")]
    FollowIdle {
        /// Worker.
        worker: WorkerId,
        /// The request committed.
        id: RequestId,
    },
    /// The policy ran a request that is already running on another worker.
    #[error("run of {id:?} on worker {worker} while it runs on worker {on}")]
    RunningElsewhere {
        /// The request.
        id: RequestId,
        /// The worker it was run on.
        worker: WorkerId,
        /// The worker it is running on.
        on: WorkerId,
    },
    /// The policy ran a request with an execution so far other than the driver reported.
    #[error("run of {id:?} with {executed} ns executed, but it has executed {reported} ns")]
    StaleExecution {
        /// The request.
        id: RequestId,
        /// Execution the `Run` carries.
        executed: Nanos,
        /// Execution the driver last reported (0 before any).
        reported: Nanos,
    },
    /// A policy with EDF workers ran a request other than the most urgent one bound to the worker.
    #[error("EDF worker {worker} ran {id:?} but its most urgent bound request is {head:?}")]
    NotEdfHead {
        /// Worker.
        worker: WorkerId,
        /// The request run.
        id: RequestId,
        /// The most urgent request bound to the worker, if any.
        head: Option<RequestId>,
    },
    /// The policy asked to preempt a request that is not running on that worker.
    #[error("preempt of {id:?} on worker {worker}, which is running {running:?}")]
    PreemptNotRunning {
        /// Worker.
        worker: WorkerId,
        /// The request to preempt.
        id: RequestId,
        /// The request running there, if any.
        running: Option<RequestId>,
    },
    /// A policy with EDF workers ran a demoted request on a worker that has on-time work bound
    /// to it.
    #[error("EDF worker {worker} ran demoted {id:?} while {head:?} is bound to it")]
    DemotedAheadOfOnTime {
        /// Worker.
        worker: WorkerId,
        /// The demoted request run.
        id: RequestId,
        /// The most urgent request bound to the worker.
        head: RequestId,
    },
    /// The policy demoted a request that is running.
    #[error("demotion of {id:?}, which is running on worker {worker}")]
    DemoteRunning {
        /// The request.
        id: RequestId,
        /// The worker it runs on.
        worker: WorkerId,
    },
    /// The policy rejected a request that is running.
    #[error("reject of {id:?}, which is running on worker {worker}")]
    RejectRunning {
        /// The request.
        id: RequestId,
        /// The worker it runs on.
        worker: WorkerId,
    },
    /// Requests were neither run to completion nor rejected by the end.
    #[error("{count} request(s) never completed nor rejected, the first {first:?}")]
    Lost {
        /// How many.
        count: usize,
        /// The lowest id among them.
        first: RequestId,
    },
}

/// A request the policy holds: arrived, not answered yet.
#[derive(Debug, Clone, Copy)]
struct Held {
    key: QueueKey,
    /// Execution so far, as the driver last reported it.
    executed: Nanos,
    /// The worker it runs on.
    running: Option<WorkerId>,
    /// The worker whose queue it is bound to (EDF policies only).
    bound: Option<WorkerId>,
    /// It was demoted to the best-effort lane.
    demoted: bool,
}

/// The run in progress on a worker, as the policy was told.
#[derive(Debug, Clone, Copy)]
struct Run {
    id: RequestId,
    started: bool,
    preempt_asked: bool,
}

/// Follows one policy's calls and checks both sides of the contract; see the module docs.
#[derive(Debug, Clone)]
pub struct ContractChecker {
    order: LocalOrder,
    /// Quantum of the EDF order (0: exact).
    window: Nanos,
    now: Option<Nanos>,
    held: BTreeMap<RequestId, Held>,
    runs: Vec<Option<Run>>,
    /// Per worker, the requests committed behind its run (`Follow`), in order.
    follow: Vec<VecDeque<RequestId>>,
    /// Per worker, the requests bound to it (EDF policies only).
    bound: Vec<BTreeSet<QueueKey>>,
}

impl ContractChecker {
    /// A checker for a policy of `workers` workers whose workers order their queues by `order`.
    pub fn new(workers: usize, order: LocalOrder) -> Self {
        let bound = if order == LocalOrder::Edf { workers } else { 0 };
        Self {
            order,
            window: 0,
            now: None,
            held: BTreeMap::new(),
            runs: vec![None; workers],
            follow: vec![VecDeque::new(); workers],
            bound: vec![BTreeSet::new(); bound],
        }
    }

    /// A checker for `policy`, which has not been fed any event yet.
    pub fn for_policy<P: Policy + ?Sized>(policy: &P) -> Self {
        Self::new(policy.workers(), policy.local_order()).with_window(policy.edf_window())
    }

    /// The EDF check relaxed to deadline quanta of `window` ns ([`Policy::edf_window`]; 0 is
    /// exact).
    pub fn with_window(mut self, window: Nanos) -> Self {
        self.window = window;
        self
    }

    /// What a `Run` or `Follow` of `req` on `worker` must hold of the request: not running
    /// elsewhere, and carrying the execution the driver last reported.
    fn startable(
        held: &Held,
        req: &crate::request::Request,
        worker: WorkerId,
    ) -> Result<(), ContractViolation> {
        if let Some(on) = held.running {
            return Err(ContractViolation::RunningElsewhere { id: req.id, worker, on });
        }
        if req.executed != held.executed {
            let (id, executed, reported) = (req.id, req.executed, held.executed);
            return Err(ContractViolation::StaleExecution { id, executed, reported });
        }
        Ok(())
    }

    /// Whether an EDF worker whose order has quanta of `w` ns may run `req` at `now` while `head`
    /// is the most urgent request bound to it: it is the head, or, with a window, see the module
    /// docs.
    fn edf_allows(w: Nanos, now: Nanos, req: &crate::request::Request, head: QueueKey) -> bool {
        if head == req.key() {
            return true;
        }
        if w == 0 {
            return false;
        }
        req.absolute_deadline / w == head.deadline / w
            || head.deadline < now
            || req.absolute_deadline / w >= (req.arrival / w).saturating_add(1024)
    }

    /// Checks one call: `event` fed at `now`, and the `actions` the policy answered with.
    pub fn step(
        &mut self,
        now: Nanos,
        event: &Event,
        actions: &[Action],
    ) -> Result<(), ContractViolation> {
        self.event(now, event)?;
        self.actions(actions)
    }

    /// Checks the driver's side of one call: `event` fed at `now`.
    pub fn event(&mut self, now: Nanos, event: &Event) -> Result<(), ContractViolation> {
        if let Some(before) = self.now
            && now < before
        {
            return Err(ContractViolation::TimeWentBack { before, now });
        }
        self.now = Some(now);
        match *event {
            Event::Arrival(req) => {
                if self.held.contains_key(&req.id) {
                    return Err(ContractViolation::DuplicateArrival { id: req.id });
                }
                let held = Held {
                    key: req.key(),
                    executed: req.executed,
                    running: None,
                    bound: None,
                    demoted: false,
                };
                self.held.insert(req.id, held);
            }
            Event::Started { worker, id } => {
                let run = self.run_of(worker, id, event)?;
                if run.started {
                    return Err(ContractViolation::StartedTwice { worker, id });
                }
                run.started = true;
            }
            Event::Completed { worker, id, .. } => {
                self.run_of(worker, id, event)?;
                self.runs[worker] = None;
                if let Some(held) = self.held.remove(&id) {
                    self.unbind(&held);
                }
                // The driver starts the next follower there at once.
                if let Some(next) = self.follow[worker].pop_front() {
                    let run = Run { id: next, started: false, preempt_asked: false };
                    self.runs[worker] = Some(run);
                }
            }
            Event::Preempted { worker, id, executed } => {
                if !self.run_of(worker, id, event)?.preempt_asked {
                    return Err(ContractViolation::UnaskedPreemption { worker, id });
                }
                self.runs[worker] = None;
                if let Some(held) = self.held.get_mut(&id) {
                    held.running = None;
                    held.executed = executed;
                }
                // The driver discarded the batch behind it: back with the policy, still bound.
                for f in std::mem::take(&mut self.follow[worker]) {
                    if let Some(held) = self.held.get_mut(&f) {
                        held.running = None;
                    }
                }
            }
            Event::Tick => {}
        }
        Ok(())
    }

    /// Checks the policy's side of one call: the `actions` it emitted, in order.
    pub fn actions(&mut self, actions: &[Action]) -> Result<(), ContractViolation> {
        actions.iter().try_for_each(|action| self.action(action))
    }

    /// Checks that no request is still held: call it once the driver has nothing left to deliver
    /// (every run ended, every timer fired).
    pub fn end(&self) -> Result<(), ContractViolation> {
        match self.held.keys().next() {
            Some(&first) => Err(ContractViolation::Lost { count: self.held.len(), first }),
            None => Ok(()),
        }
    }

    /// Requests the policy holds: arrived and not answered yet, running ones included.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    fn action(&mut self, action: &Action) -> Result<(), ContractViolation> {
        let not_held = || ContractViolation::NotHeld { action: *action };
        match *action {
            Action::Enqueue { worker, id } => {
                self.worker(worker, action)?;
                let held = *self.held.get(&id).ok_or_else(not_held)?;
                if self.order == LocalOrder::Edf {
                    self.unbind(&held);
                    self.bound[worker].insert(held.key);
                    self.held.insert(id, Held { bound: Some(worker), ..held });
                }
            }
            Action::Run { worker, req } => {
                self.worker(worker, action)?;
                let held = self.held.get_mut(&req.id).ok_or_else(not_held)?;
                if let Some(run) = self.runs[worker] {
                    let (id, running) = (req.id, run.id);
                    return Err(ContractViolation::BusyWorker { worker, id, running });
                }
                Self::startable(held, &req, worker)?;
                if let Some(bound) = self.bound.get(worker) {
                    let head = bound.first();
                    if held.demoted {
                        if let Some(head) = head {
                            let (id, head) = (req.id, head.id);
                            return Err(ContractViolation::DemotedAheadOfOnTime {
                                worker,
                                id,
                                head,
                            });
                        }
                    } else if !head.is_some_and(|&h| {
                        Self::edf_allows(self.window, self.now.unwrap_or(0), &req, h)
                    }) {
                        let head = head.map(|k| k.id);
                        return Err(ContractViolation::NotEdfHead { worker, id: req.id, head });
                    }
                }
                held.running = Some(worker);
                let run = Run { id: req.id, started: false, preempt_asked: false };
                self.runs[worker] = Some(run);
            }
            Action::Follow { worker, req } => {
                self.worker(worker, action)?;
                let held = *self.held.get(&req.id).ok_or_else(not_held)?;
                let Some(run) = self.runs[worker] else {
                    return Err(ContractViolation::FollowIdle { worker, id: req.id });
                };
                Self::startable(&held, &req, worker)?;
                if let Some(bound) = self.bound.get(worker) {
                    // The most urgent bound request that is neither the run nor committed yet.
                    let committed =
                        |k: &&QueueKey| k.id == run.id || self.follow[worker].contains(&k.id);
                    let head = bound.iter().find(|k| !committed(k)).copied();
                    let now = self.now.unwrap_or(0);
                    if held.demoted
                        || !head.is_some_and(|h| Self::edf_allows(self.window, now, &req, h))
                    {
                        let head = head.map(|k| k.id);
                        return Err(ContractViolation::NotEdfHead { worker, id: req.id, head });
                    }
                }
                if let Some(h) = self.held.get_mut(&req.id) {
                    h.running = Some(worker);
                }
                self.follow[worker].push_back(req.id);
            }
            Action::Preempt { worker, id } => {
                self.worker(worker, action)?;
                match &mut self.runs[worker] {
                    Some(run) if run.id == id => run.preempt_asked = true,
                    other => {
                        let running = other.map(|r| r.id);
                        return Err(ContractViolation::PreemptNotRunning { worker, id, running });
                    }
                }
            }
            Action::Reject { req, .. } => {
                let held = *self.held.get(&req.id).ok_or_else(not_held)?;
                if let Some(worker) = held.running {
                    return Err(ContractViolation::RejectRunning { id: req.id, worker });
                }
                self.held.remove(&req.id);
                self.unbind(&held);
            }
            Action::Demote { req } => {
                let id = req.id;
                let held = *self.held.get(&id).ok_or_else(not_held)?;
                if let Some(worker) = held.running {
                    return Err(ContractViolation::DemoteRunning { id, worker });
                }
                self.unbind(&held);
                self.held.insert(id, Held { bound: None, demoted: true, ..held });
            }
            Action::WakeAt(_) => {}
        }
        Ok(())
    }

    /// Fails unless `worker` is one of the group's.
    fn worker(&self, worker: WorkerId, action: &Action) -> Result<(), ContractViolation> {
        if worker < self.runs.len() {
            return Ok(());
        }
        Err(ContractViolation::NoSuchWorker { action: *action, workers: self.runs.len() })
    }

    /// The run of `id` in progress on `worker`, which the driver's `event` reports on.
    fn run_of(
        &mut self,
        worker: WorkerId,
        id: RequestId,
        event: &Event,
    ) -> Result<&mut Run, ContractViolation> {
        match self.runs.get_mut(worker) {
            Some(Some(run)) if run.id == id => Ok(run),
            _ => Err(ContractViolation::NoSuchRun { event: *event }),
        }
    }

    /// Forgets the binding of `held` to a worker's queue.
    fn unbind(&mut self, held: &Held) {
        if let Some(set) = held.bound.and_then(|w| self.bound.get_mut(w)) {
            set.remove(&held.key);
        }
    }
}

/// A policy whose every call is checked by a [`ContractChecker`]: it behaves exactly as the
/// policy it wraps, and records the first violation (later calls are not checked: the checker
/// no longer knows the state).
#[derive(Debug, Clone)]
pub struct Checked<P> {
    policy: P,
    checker: ContractChecker,
    violation: Option<ContractViolation>,
}

impl<P: Policy> Checked<P> {
    /// Wraps `policy`, which has not been fed any event yet.
    pub fn new(policy: P) -> Self {
        let checker = ContractChecker::for_policy(&policy);
        Self { policy, checker, violation: None }
    }

    /// The first violation so far, if any.
    pub fn violation(&self) -> Option<&ContractViolation> {
        self.violation.as_ref()
    }

    /// The first violation so far, else whether a request is still held ([`ContractChecker::end`]):
    /// call it once the driver has nothing left to deliver.
    pub fn end(&self) -> Result<(), ContractViolation> {
        match &self.violation {
            Some(v) => Err(v.clone()),
            None => self.checker.end(),
        }
    }

    /// The wrapped policy.
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// Unwraps the policy.
    pub fn into_inner(self) -> P {
        self.policy
    }
}

impl<P: Policy> Policy for Checked<P> {
    fn name(&self) -> &'static str {
        self.policy.name()
    }

    fn workers(&self) -> usize {
        self.policy.workers()
    }

    fn queued(&self) -> usize {
        self.policy.queued()
    }

    fn local_order(&self) -> LocalOrder {
        self.policy.local_order()
    }

    fn edf_window(&self) -> Nanos {
        self.policy.edf_window()
    }

    fn stats(&self) -> PolicyStats {
        self.policy.stats()
    }

    fn backlog(&self, now: Nanos) -> Backlog {
        self.policy.backlog(now)
    }

    /// The wrapped policy's call, then the check of the event and of the actions it appended.
    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        let first = out.len();
        self.policy.on_event(now, event, out);
        if self.violation.is_none()
            && let Err(v) = self.checker.step(now, &event, out.get(first..).unwrap_or_default())
        {
            self.violation = Some(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Fifo, PolicyConfig, RejectReason};
    use crate::request::{FunctionId, Request};

    type V = ContractViolation;

    /// A request arriving at 0, due at `d`, with 1 ms of expected execution.
    fn req(id: u64, d: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, d, 1_000_000)
    }

    fn arrival(id: u64) -> Event {
        Event::Arrival(req(id, 10_000_000))
    }

    fn run(worker: WorkerId, id: u64) -> Action {
        Action::Run { worker, req: req(id, 10_000_000) }
    }

    fn started(worker: WorkerId, id: u64) -> Event {
        Event::Started { worker, id: RequestId(id) }
    }

    fn completed(worker: WorkerId, id: u64) -> Event {
        Event::Completed { worker, id: RequestId(id), executed: 1_000_000 }
    }

    /// Two central workers; request 1 runs on worker 0, request 2 has arrived and waits.
    fn one_running() -> ContractChecker {
        let mut c = ContractChecker::new(2, LocalOrder::Central);
        assert_eq!(c.step(0, &arrival(1), &[run(0, 1)]), Ok(()));
        assert_eq!(c.step(0, &started(0, 1), &[]), Ok(()));
        assert_eq!(c.step(0, &arrival(2), &[]), Ok(()));
        c
    }

    #[test]
    fn followers_start_when_the_run_completes_and_are_discarded_when_it_is_preempted() {
        let follow = |worker, id| Action::Follow { worker, req: req(id, 10_000_000) };
        // Only behind a run.
        let mut c = one_running();
        let v = V::FollowIdle { worker: 1, id: RequestId(2) };
        assert_eq!(c.clone().actions(&[follow(1, 2)]), Err(v));
        assert_eq!(c.actions(&[follow(0, 2)]), Ok(()));
        // Committed, it is on the worker: neither run elsewhere nor rejected.
        let v = V::RunningElsewhere { id: RequestId(2), worker: 1, on: 0 };
        assert_eq!(c.clone().actions(&[run(1, 2)]), Err(v));
        // The run completes: the driver started the follower unasked.
        let mut done = c.clone();
        let completed = Event::Completed { worker: 0, id: RequestId(1), executed: 5 };
        assert_eq!(done.step(1, &completed, &[]), Ok(()));
        assert_eq!(done.step(2, &started(0, 2), &[]), Ok(()));
        // The run is preempted: the follower is the policy's again, to run anywhere.
        let preempt = Action::Preempt { worker: 0, id: RequestId(1) };
        assert_eq!(c.actions(&[preempt]), Ok(()));
        let stopped = Event::Preempted { worker: 0, id: RequestId(1), executed: 5 };
        assert_eq!(c.step(1, &stopped, &[run(1, 2)]), Ok(()));
        assert_eq!(c.step(2, &started(0, 2), &[]), Err(V::NoSuchRun { event: started(0, 2) }));
    }

    #[test]
    fn a_conforming_lifecycle_passes_and_ends_with_nothing_held() {
        let mut c = one_running();
        assert_eq!(c.held(), 2);
        let preempt = Action::Preempt { worker: 0, id: RequestId(1) };
        assert_eq!(c.step(5, &Event::Tick, &[preempt, Action::WakeAt(9)]), Ok(()));
        // The completion wins the race with the preemption: the driver drops the preemption.
        assert_eq!(c.step(6, &completed(0, 1), &[run(0, 2)]), Ok(()));
        assert_eq!(c.step(6, &started(0, 2), &[]), Ok(()));
        // Asked now, and stopped: it resumes with its execution so far, elsewhere.
        assert_eq!(
            c.step(7, &Event::Tick, &[Action::Preempt { worker: 0, id: RequestId(2) }]),
            Ok(())
        );
        let stopped = Event::Preempted { worker: 0, id: RequestId(2), executed: 40 };
        let resumed = Request { executed: 40, ..req(2, 10_000_000) };
        assert_eq!(c.step(8, &stopped, &[Action::Run { worker: 1, req: resumed }]), Ok(()));
        assert_eq!(c.end(), Err(V::Lost { count: 1, first: RequestId(2) }));
        assert_eq!(
            c.step(9, &Event::Completed { worker: 1, id: RequestId(2), executed: 50 }, &[]),
            Ok(())
        );
        assert_eq!(c.end(), Ok(()));
        assert_eq!(c.held(), 0);
    }

    #[test]
    fn a_run_on_a_busy_worker_is_caught() {
        let mut c = one_running();
        let v = V::BusyWorker { worker: 0, id: RequestId(2), running: RequestId(1) };
        assert_eq!(c.actions(&[run(0, 2)]), Err(v));
    }

    #[test]
    fn a_request_run_twice_at_once_is_caught() {
        let mut c = one_running();
        let v = V::RunningElsewhere { id: RequestId(1), worker: 1, on: 0 };
        assert_eq!(c.actions(&[run(1, 1)]), Err(v));
    }

    #[test]
    fn a_lost_request_is_caught_at_the_end() {
        let mut c = one_running();
        assert_eq!(c.step(1, &completed(0, 1), &[]), Ok(()));
        // Request 2 is never run nor rejected.
        assert_eq!(c.end(), Err(V::Lost { count: 1, first: RequestId(2) }));
        assert!(c.end().is_err_and(|v| v.to_string().contains("never completed nor rejected")));
    }

    #[test]
    fn a_preempt_of_a_request_not_running_is_caught() {
        let mut c = one_running();
        let waiting = Action::Preempt { worker: 0, id: RequestId(2) };
        let v = V::PreemptNotRunning { worker: 0, id: RequestId(2), running: Some(RequestId(1)) };
        assert_eq!(c.clone().actions(&[waiting]), Err(v));
        let idle = Action::Preempt { worker: 1, id: RequestId(1) };
        let v = V::PreemptNotRunning { worker: 1, id: RequestId(1), running: None };
        assert_eq!(c.actions(&[idle]), Err(v));
    }

    #[test]
    fn answers_must_name_a_held_request_that_is_not_running() {
        let mut c = one_running();
        let reject = |id| Action::Reject { req: req(id, 10_000_000), reason: RejectReason::Shed };
        let v = V::RejectRunning { id: RequestId(1), worker: 0 };
        assert_eq!(c.clone().actions(&[reject(1)]), Err(v));
        // Rejected twice: the second one names a request the policy no longer holds.
        assert_eq!(
            c.clone().actions(&[reject(2), reject(2)]),
            Err(V::NotHeld { action: reject(2) })
        );
        // Never arrived.
        assert_eq!(c.clone().actions(&[run(1, 7)]), Err(V::NotHeld { action: run(1, 7) }));
        // Completed, then run again.
        assert_eq!(c.step(1, &completed(0, 1), &[]), Ok(()));
        assert_eq!(c.actions(&[run(0, 1)]), Err(V::NotHeld { action: run(0, 1) }));
    }

    #[test]
    fn actions_must_name_a_worker_of_the_group() {
        let mut c = one_running();
        let enqueue = Action::Enqueue { worker: 2, id: RequestId(2) };
        let v = V::NoSuchWorker { action: enqueue, workers: 2 };
        assert_eq!(c.clone().actions(&[enqueue]), Err(v));
        assert_eq!(c.actions(&[run(2, 2)]), Err(V::NoSuchWorker { action: run(2, 2), workers: 2 }));
    }

    #[test]
    fn a_run_carries_the_execution_the_driver_reported() {
        let mut c = one_running();
        assert_eq!(
            c.step(1, &Event::Tick, &[Action::Preempt { worker: 0, id: RequestId(1) }]),
            Ok(())
        );
        let stopped = Event::Preempted { worker: 0, id: RequestId(1), executed: 300 };
        let v = V::StaleExecution { id: RequestId(1), executed: 0, reported: 300 };
        assert_eq!(c.step(2, &stopped, &[run(0, 1)]), Err(v));
    }

    #[test]
    fn a_demoted_request_runs_only_where_nothing_on_time_is_bound_and_is_not_demoted_running() {
        let mut c = ContractChecker::new(2, LocalOrder::Edf);
        let bind = |worker, id| Action::Enqueue { worker, id: RequestId(id) };
        let (late, soon) = (req(1, 5_000_000), req(2, 9_000_000));
        assert_eq!(c.step(0, &Event::Arrival(late), &[bind(0, 1)]), Ok(()));
        assert_eq!(c.step(0, &Event::Arrival(soon), &[bind(0, 2)]), Ok(()));
        // Demoted, request 1 is unbound and no longer worker 0's head…
        assert_eq!(c.actions(&[Action::Demote { req: late }]), Ok(()));
        // …it may run on worker 1, where nothing is bound, but not ahead of request 2.
        let v = V::DemotedAheadOfOnTime { worker: 0, id: RequestId(1), head: RequestId(2) };
        assert_eq!(c.clone().actions(&[Action::Run { worker: 0, req: late }]), Err(v));
        assert_eq!(c.actions(&[Action::Run { worker: 1, req: late }]), Ok(()));
        let v = V::DemoteRunning { id: RequestId(1), worker: 1 };
        assert_eq!(c.actions(&[Action::Demote { req: late }]), Err(v));
    }

    #[test]
    fn a_windowed_edf_worker_may_run_within_the_heads_quantum_only() {
        // Quanta of 1 ms: deadlines 5.0 and 5.9 ms share one, 6.0 ms does not.
        let bind = |id| Action::Enqueue { worker: 0, id: RequestId(id) };
        let at = |id, deadline, arrival| {
            Request::new(RequestId(id), FunctionId(0), arrival, deadline - arrival, 1_000)
        };
        let checker = |reqs: &[Request], now| {
            let mut c = ContractChecker::new(1, LocalOrder::Edf).with_window(1_000_000);
            for r in reqs {
                assert_eq!(c.step(now, &Event::Arrival(*r), &[bind(r.id.0)]), Ok(()));
            }
            c
        };
        let (head, same, next) = (at(1, 5_000_000, 0), at(2, 5_900_000, 0), at(3, 6_000_000, 0));
        let mut c = checker(&[head, same, next], 0);
        assert_eq!(c.clone().actions(&[Action::Run { worker: 0, req: same }]), Ok(()));
        let v = V::NotEdfHead { worker: 0, id: RequestId(3), head: Some(RequestId(1)) };
        assert_eq!(c.actions(&[Action::Run { worker: 0, req: next }]), Err(v));
        // Past its deadline, the head may wait (the timeline serves overdue requests last).
        let mut c = checker(&[head, next], 0);
        assert_eq!(
            c.step(5_000_001, &Event::Tick, &[Action::Run { worker: 0, req: next }]),
            Ok(())
        );
        // Filed beyond the 1024-quantum horizon from its arrival, a request may be served early.
        let far = at(4, 1_030_000_000, 1_000_000);
        let c = checker(&[head, far], 1_000_000);
        assert_eq!(c.clone().actions(&[Action::Run { worker: 0, req: far }]), Ok(()));
        let near = at(5, 1_020_000_000, 1_000_000);
        let c = checker(&[head, near], 1_000_000);
        assert!(c.clone().actions(&[Action::Run { worker: 0, req: near }]).is_err());
    }

    #[test]
    fn an_edf_worker_runs_the_most_urgent_request_bound_to_it() {
        let mut c = ContractChecker::new(2, LocalOrder::Edf);
        let bind = |worker, id| Action::Enqueue { worker, id: RequestId(id) };
        let (late, soon) = (req(1, 9_000_000), req(2, 5_000_000));
        assert_eq!(c.step(0, &Event::Arrival(late), &[bind(0, 1)]), Ok(()));
        assert_eq!(c.step(0, &Event::Arrival(soon), &[bind(0, 2)]), Ok(()));
        // Request 2 is more urgent on worker 0; request 1 may run once it moved to worker 1.
        let v = V::NotEdfHead { worker: 0, id: RequestId(1), head: Some(RequestId(2)) };
        assert_eq!(c.clone().actions(&[Action::Run { worker: 0, req: late }]), Err(v));
        let moved = [bind(1, 1), Action::Run { worker: 1, req: late }];
        assert_eq!(c.clone().actions(&moved), Ok(()));
        // A run without a binding has no head to be.
        let mut c = ContractChecker::new(1, LocalOrder::Edf);
        let v = V::NotEdfHead { worker: 0, id: RequestId(1), head: None };
        assert_eq!(
            c.step(0, &Event::Arrival(late), &[Action::Run { worker: 0, req: late }]),
            Err(v)
        );
    }

    #[test]
    fn enqueue_is_informational_for_other_orders() {
        let mut c = ContractChecker::new(1, LocalOrder::RoundRobin);
        let bind = Action::Enqueue { worker: 0, id: RequestId(1) };
        assert_eq!(c.step(0, &arrival(1), &[bind, run(0, 1)]), Ok(()));
        assert_eq!(c.step(0, &arrival(2), &[]), Ok(()));
        // It still names a request the policy holds.
        let unknown = Action::Enqueue { worker: 0, id: RequestId(3) };
        assert_eq!(c.actions(&[unknown]), Err(V::NotHeld { action: unknown }));
    }

    #[test]
    fn the_driver_side_is_checked_too() {
        let c = one_running();
        let mut later = c.clone();
        assert_eq!(later.event(10, &Event::Tick), Ok(()));
        assert_eq!(later.event(10, &Event::Tick), Ok(()), "the same time again is fine");
        assert_eq!(later.event(9, &Event::Tick), Err(V::TimeWentBack { before: 10, now: 9 }));
        assert_eq!(c.clone().event(1, &arrival(2)), Err(V::DuplicateArrival { id: RequestId(2) }));
        assert_eq!(
            c.clone().event(1, &started(0, 1)),
            Err(V::StartedTwice { worker: 0, id: RequestId(1) })
        );
        for stray in [started(1, 1), completed(0, 2), completed(5, 1)] {
            assert_eq!(c.clone().event(1, &stray), Err(V::NoSuchRun { event: stray }));
        }
        let unasked = Event::Preempted { worker: 0, id: RequestId(1), executed: 1 };
        let v = V::UnaskedPreemption { worker: 0, id: RequestId(1) };
        assert_eq!(c.clone().event(1, &unasked), Err(v));
    }

    /// Runs every request it is given on worker 0, busy or not.
    struct Reckless;

    impl Policy for Reckless {
        fn name(&self) -> &'static str {
            "reckless"
        }
        fn workers(&self) -> usize {
            1
        }
        fn on_event(&mut self, _now: Nanos, event: Event, out: &mut Vec<Action>) {
            if let Event::Arrival(req) = event {
                out.push(Action::Run { worker: 0, req });
            }
        }
        fn queued(&self) -> usize {
            0
        }
        fn local_order(&self) -> LocalOrder {
            LocalOrder::Central
        }
        fn stats(&self) -> PolicyStats {
            PolicyStats::default()
        }
    }

    #[test]
    fn checked_records_the_first_violation_of_the_actions_it_added() {
        let mut p = Checked::new(Reckless);
        // Actions already in the vector are the driver's business, not this call's.
        let mut out = vec![run(0, 9), run(0, 9)];
        p.on_event(0, arrival(1), &mut out);
        assert_eq!(p.violation(), None);
        p.on_event(0, arrival(2), &mut out);
        let v = V::BusyWorker { worker: 0, id: RequestId(2), running: RequestId(1) };
        assert_eq!(p.violation(), Some(&v));
        assert_eq!(p.end(), Err(v.clone()));
        p.on_event(1, arrival(3), &mut out);
        assert_eq!(p.violation(), Some(&v), "the first one is kept");
        assert_eq!(out.len(), 5, "the policy's actions pass through");
    }

    #[test]
    fn checked_is_transparent_for_a_conforming_policy() {
        let cfg = PolicyConfig::with_workers(2);
        let boxed: Box<dyn Policy> = Box::new(Fifo::new(&cfg));
        let mut p = Checked::new(boxed);
        let mut plain = Fifo::new(&cfg);
        let events = [arrival(1), arrival(2), arrival(3), started(0, 1), completed(0, 1)];
        for ev in events {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            p.on_event(1, ev, &mut a);
            plain.on_event(1, ev, &mut b);
            assert_eq!(a, b);
        }
        assert_eq!((p.name(), p.workers(), p.queued()), ("fifo", 2, 0));
        assert_eq!((p.stats(), p.local_order()), (plain.stats(), LocalOrder::Central));
        assert_eq!(p.violation(), None);
        // Requests 2 and 3 still run.
        assert_eq!(p.end(), Err(V::Lost { count: 2, first: RequestId(2) }));
        assert_eq!(p.into_inner().name(), "fifo");
    }
}
