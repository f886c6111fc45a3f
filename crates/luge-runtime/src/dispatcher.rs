//! Dispatcher threads: each owns a worker group and drives a `luge-sched` policy with the events
//! of its workers, exactly as the simulator's event loop does (`luge_sched::policy` contract).
//!
//! # Design and races (SledgeScale §3.3)
//! The dispatcher is the single authority for its group: it holds every request that is not
//! running (fresh payloads and preempted sandboxes) and the policy's own model of each worker
//! (for `sledgescale`, a deadline tree per worker with subtree sums, so Algorithm 1's wait time
//! is O(log n)). Workers only run what they are told and report back on single-producer queues.
//! The model lags reality by the events still in those queues — at most one `Started` and one
//! `Completed`/`Preempted` per worker, a few µs in spin mode and one wake-up in sleep mode:
//! 1. A request may have finished while the policy still counts its remaining work: the new
//!    request's wait on that worker is overestimated by at most one remaining execution, and the
//!    policy learns the truth with the next event. Events already reported are applied before
//!    the arrivals of the same round, so only a completion not yet reported can be missed.
//! 2. A `Preempt` may race with the completion of its target: the flag carries the request id,
//!    so a stale flag never stops another request, and the worker reports only `Completed`
//!    (the contract's "exactly one of the two events"). The worker clears a flag naming the
//!    request it just completed; a flag that lands after that is cleared by the dispatcher when
//!    it reads the completion.
//! 3. A `Preempt` may reach a worker before the `Run` it refers to: the worker checks the flag
//!    before starting, and stops the request at once (execution unchanged).
//! 4. The epoch bump of a `Preempt` may be spent while its target is being (re)started, before
//!    the sandbox arms its next deadline: while any flag of the group is set, an idle dispatcher
//!    bumps the epoch again every 50 µs until the target yields (flags of ended runs are
//!    cleared, race 2, so none stays set).
//!
//! 5. A submitter refuses on what the dispatcher published after its last round
//!    (`dispatcher/refusal.rs`): events it has not read yet are missing from that picture as
//!    they are from its own, and a refusal made there stands.
//!
//! `dispatcher/races.rs` drives races 1–4 deterministically (manual clock, counting epoch).
//!
//! Because the worker never picks locally, every policy — early-binding EDF, central queues,
//! time slicing — runs unchanged, and a completion costs one dispatcher round trip before the
//! worker's next start (sub-µs when spinning).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use crossbeam_utils::atomic::AtomicCell;
use luge_proto::nanos;
use luge_sched::{
    Action, Estimator, Event, Nanos, Overrun, Policy, RejectReason, Request, RequestId, UllConfig,
};

use crate::config::WaitMode;
use crate::ingress::{Driver, Ingress};
use crate::notify::Notify;
use crate::outcome::{Failure, Rejection};
use crate::registry::Function;
use crate::signals::Signals;
use crate::task::{Task, WorkerEvent, WorkerShared};
use crate::turnaround::Turnaround;

#[cfg(test)]
mod races;
mod refusal;
mod suspended;

pub(crate) use refusal::Published;

/// A request handed to a dispatcher, with what the policy needs to place it.
pub(crate) struct Submission {
    pub task: Box<Task>,
    pub relative_deadline: Nanos,
    /// When the node received the request; its deadline counts from here.
    pub arrived: Nanos,
    pub expected: Option<Nanos>,
    pub tenant: u32,
}

/// How often an undelivered preemption is re-signalled.
const PREEMPT_RETRY: Duration = Duration::from_micros(50);

/// How long after a first probe a function whose estimate alone overruns a request's deadline
/// gets its next request run on a guessed estimate (a probe), so that its estimate can come back
/// down: without probes such a function would be refused forever, since a refused request is
/// never observed. The interval doubles with every probe that did not bring the estimate back,
/// up to [`PROBE_INTERVAL_MAX`], as a circuit breaker's back-off does: a runaway's probes cost
/// a deadline's worth of work each, ever more rarely.
const PROBE_INTERVAL: Nanos = 1_000_000_000;
/// The longest interval between two probes of a function.
const PROBE_INTERVAL_MAX: Nanos = 64 * PROBE_INTERVAL;

/// When a function whose estimate overran its deadline was last probed, and the wait before the
/// next probe.
#[derive(Debug, Clone, Copy)]
struct Probe {
    at: Nanos,
    interval: Nanos,
}

/// What a dispatcher's round asks of its thread.
pub(crate) enum Step {
    /// Something happened: go round again.
    Busy,
    /// Nothing to do: wait for input, at most this long.
    Idle(Option<Duration>),
    /// Shut down and drained.
    Done,
}

/// What a dispatcher shares with submitters and the runtime.
pub(crate) struct GroupShared {
    /// Its index among the runtime's groups (`Function::expected`).
    pub index: usize,
    pub submissions: ArrayQueue<Submission>,
    pub notify: Arc<Notify>,
    /// Set by `shutdown`: drain, then stop the workers and exit.
    pub shutdown: AtomicBool,
    /// The grace period of this shutdown, ns, when it is not the configured one
    /// (`Runtime::shutdown_within`); `u64::MAX` = the configured one. Written before `shutdown`.
    pub grace_ns: AtomicU64,
    /// Requests the dispatcher holds that are not running (queued fresh or preempted), as of
    /// its last round (`Runtime::group_stats`).
    pub queued: AtomicUsize,
    /// Of those, the preempted ones holding a suspended sandbox, as of its last round.
    pub suspended: AtomicUsize,
    /// Requests demoted to the best-effort lane so far (`Runtime::group_stats`).
    pub demoted: AtomicU64,
    /// Preemptions the dispatcher deferred because the group held its bound of suspended
    /// sandboxes (`dispatcher/suspended.rs`; `Runtime::group_stats`).
    pub preemptions_deferred: AtomicU64,
    /// The uLL lane in front of the group's policy, if on (`RuntimeConfig::ull_lane`).
    pub ull_lane: Option<UllConfig>,
    /// Arrivals that took the uLL lane so far (`Runtime::group_stats`).
    pub ull: AtomicU64,
    /// Requests committed behind a worker's run so far (`Action::Follow`, Edge-RT §IV-A), and
    /// of those, handed back unstarted when the run was preempted (`Runtime::group_stats`).
    pub batched: AtomicU64,
    pub returned: AtomicU64,
    /// Set by a submitter that left its arrival's notification to the ticker
    /// (`RuntimeConfig::notify_interval`); the ticker clears it and notifies.
    pub deferred: AtomicBool,
    /// Arrivals whose notification was deferred so far (`Runtime::group_stats`).
    pub deferred_total: AtomicU64,
    /// The front end's socket the group's inline worker reads when idle (`ingress.rs`).
    pub ingress: Mutex<Option<Arc<dyn Ingress>>>,
    /// The front end whose event loop the group's inline worker runs when idle (`ingress.rs`).
    pub driver: Mutex<Option<Arc<dyn Driver>>>,
    /// Bumped on every attach and detach (of either), so that a waiting worker (spinning too)
    /// notices.
    pub ingress_changes: AtomicU64,
    /// The policy's backlog after the dispatcher's last round that changed anything, and the
    /// node's per-request overhead then: what a submitter refuses on ([`Published`]).
    pub published: AtomicCell<Published>,
    /// Arrivals refused on [`published`](Self::published) by the thread that submitted them,
    /// never handed to the dispatcher (`Runtime::group_stats`).
    pub refused_early: AtomicU64,
}

/// [`GroupShared::short_run`] without the uLL lane: 100 µs (the lane's default slice).
pub(crate) const SHORT_RUN: Nanos = 100_000;

impl GroupShared {
    /// Group `index`, taking up to `submit_queue` submissions, with the uLL lane `ull_lane`.
    pub(crate) fn new(index: usize, submit_queue: usize, ull_lane: Option<UllConfig>) -> Self {
        Self {
            index,
            submissions: ArrayQueue::new(submit_queue.max(1)),
            notify: Arc::new(Notify::default()),
            shutdown: AtomicBool::new(false),
            grace_ns: AtomicU64::new(u64::MAX),
            queued: AtomicUsize::new(0),
            suspended: AtomicUsize::new(0),
            demoted: AtomicU64::new(0),
            preemptions_deferred: AtomicU64::new(0),
            ull_lane,
            ull: AtomicU64::new(0),
            batched: AtomicU64::new(0),
            returned: AtomicU64::new(0),
            deferred: AtomicBool::new(false),
            deferred_total: AtomicU64::new(0),
            ingress: Mutex::new(None),
            driver: Mutex::new(None),
            ingress_changes: AtomicU64::new(0),
            published: AtomicCell::new(Published::default()),
            refused_early: AtomicU64::new(0),
        }
    }

    /// A run this long or shorter is short: no other thread need read the worker's socket
    /// meanwhile (`ingress.rs`). The uLL lane's slice when the lane is on, else [`SHORT_RUN`].
    pub(crate) fn short_run(&self) -> Nanos {
        self.ull_lane.map_or(SHORT_RUN, |lane| lane.slice)
    }

    /// The attached ingress, if any.
    pub(crate) fn ingress(&self) -> Option<Arc<dyn Ingress>> {
        self.ingress.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Attaches or detaches (`None`) the ingress and wakes the worker to take the change;
    /// whether it was done (an attach is refused when one is attached already).
    pub(crate) fn set_ingress(&self, ingress: Option<Arc<dyn Ingress>>) -> bool {
        self.set_front_end(&self.ingress, ingress)
    }

    /// The attached driver, if any.
    pub(crate) fn driver(&self) -> Option<Arc<dyn Driver>> {
        self.driver.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// As [`set_ingress`](Self::set_ingress), for the driver.
    pub(crate) fn set_driver(&self, driver: Option<Arc<dyn Driver>>) -> bool {
        self.set_front_end(&self.driver, driver)
    }

    /// Fills or empties a front end's `slot`, refusing to replace one that is attached, and wakes
    /// the worker to take the change.
    fn set_front_end<T: ?Sized>(&self, slot: &Mutex<Option<Arc<T>>>, new: Option<Arc<T>>) -> bool {
        {
            let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
            if new.is_some() && slot.is_some() {
                return false;
            }
            *slot = new;
        }
        self.ingress_changes.fetch_add(1, Ordering::Release);
        self.notify.notify();
        true
    }
}

/// One dispatcher and its group.
pub(crate) struct Dispatcher {
    pub shared: Arc<GroupShared>,
    pub workers: Vec<Arc<WorkerShared>>,
    pub policy: Box<dyn Policy>,
    pub estimator: Estimator,
    pub signals: Arc<Signals>,
    pub mode: WaitMode,
    pub grace: Duration,
    pending: HashMap<RequestId, Box<Task>>,
    running: usize,
    grace_end: Option<Nanos>,
    next_id: u64,
    /// The times the policy asked to be woken at (`Action::WakeAt`), each delivered as a
    /// `Tick` once due; several due at once are one `Tick`.
    wake_at: BTreeSet<Nanos>,
    actions: Vec<Action>,
    turnaround: Turnaround,
    /// Functions whose estimate overran a deadline, and their probes ([`PROBE_INTERVAL`]).
    probed: HashMap<luge_sched::FunctionId, Probe>,
    /// The sandboxes the group's preempted requests hold, bounded: at the bound a preemption
    /// waits for a slot to be given back (`suspended.rs`). Set by the runtime
    /// (`with_max_suspended`).
    suspended: suspended::Suspended,
    /// Debug builds check every call of the policy against the driver contract, with the same
    /// checker the simulator uses; a violation is recorded in `Signals::contract_violation`.
    #[cfg(debug_assertions)]
    contract: luge_sched::ContractChecker,
}

impl Dispatcher {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        shared: Arc<GroupShared>,
        workers: Vec<Arc<WorkerShared>>,
        policy: Box<dyn Policy>,
        estimator: Estimator,
        signals: Arc<Signals>,
        mode: WaitMode,
        grace: Duration,
    ) -> Self {
        let workers_len = workers.len();
        #[cfg(debug_assertions)]
        let contract = luge_sched::ContractChecker::for_policy(policy.as_ref());
        Self {
            shared,
            workers,
            policy,
            estimator,
            signals,
            mode,
            grace,
            pending: HashMap::new(),
            running: 0,
            grace_end: None,
            next_id: 0,
            wake_at: BTreeSet::new(),
            actions: Vec::new(),
            turnaround: Turnaround::new(workers_len),
            probed: HashMap::new(),
            suspended: suspended::Suspended::new(usize::MAX),
            #[cfg(debug_assertions)]
            contract,
        }
    }

    /// Bounds the sandboxes this group keeps suspended (see `Dispatcher::suspended`).
    pub(crate) fn with_max_suspended(mut self, max: usize) -> Self {
        self.suspended = suspended::Suspended::new(max);
        self
    }

    /// One round: handle all input, then say whether to go on at once, wait, or stop (shut
    /// down and drained).
    pub(crate) fn step(&mut self) -> Step {
        let busy = self.poll();
        let shutdown = self.enforce_grace();
        if shutdown
            && self.pending.is_empty()
            && self.running == 0
            && self.shared.submissions.is_empty()
        {
            return Step::Done;
        }
        if busy {
            return Step::Busy;
        }
        if self.preemption_pending() {
            // The target may have been (re)started after our epoch bump and armed its deadline
            // past it: bump again until its epoch callback takes the flag.
            self.signals.epoch.bump();
            return Step::Idle(Some(PREEMPT_RETRY));
        }
        Step::Idle(match (self.wake_at.first().copied(), shutdown) {
            (_, true) => Some(Duration::from_millis(1)),
            (Some(t), false) => {
                Some(Duration::from_nanos(t.saturating_sub(self.signals.clock.now())))
            }
            (None, false) => None,
        })
    }

    /// What an inline dispatcher does from the epoch callback of the sandbox its thread runs:
    /// handle input, and past a shutdown's grace period abort (the sandbox then stops at this
    /// same check, as it would when a dispatcher thread of its own aborted).
    pub(crate) fn poll_while_running(&mut self) {
        self.poll();
        self.enforce_grace();
    }

    /// During a shutdown, aborts once its grace period is over: running sandboxes stop at their
    /// next epoch check, queued requests are refused. Returns whether a shutdown is under way.
    fn enforce_grace(&mut self) -> bool {
        let shutdown = self.shared.shutdown.load(Ordering::Acquire);
        if shutdown {
            let now = self.signals.clock.now();
            let grace = match self.shared.grace_ns.load(Ordering::Acquire) {
                u64::MAX => nanos(self.grace),
                given => given,
            };
            let end = *self.grace_end.get_or_insert(now.saturating_add(grace));
            if now >= end {
                self.abort(now);
            }
        }
        shutdown
    }

    /// Whether a preemption flag of this group is still set (its target has neither yielded nor
    /// finished: workers clear a flag naming a request that completed).
    fn preemption_pending(&self) -> bool {
        self.workers
            .iter()
            .any(|w| self.signals.workers[w.index].preempt.load(Ordering::Relaxed) != 0)
    }

    /// Whether submissions are waiting.
    pub(crate) fn has_arrivals(&self) -> bool {
        !self.shared.submissions.is_empty()
    }

    /// Whether submissions or worker events are waiting, or a shutdown this dispatcher has not
    /// seen yet (a spinning wait has no unpark to end it: without this, an idle dispatcher in
    /// spin mode would never notice `shutdown`).
    pub(crate) fn has_input(&self) -> bool {
        self.has_arrivals()
            || self.workers.iter().any(|w| !w.events.is_empty())
            || (self.grace_end.is_none() && self.shared.shutdown.load(Ordering::Acquire))
    }

    /// The thread body: serve until shut down and drained, then stop the workers.
    pub(crate) fn run(mut self) {
        self.shared.notify.bind_current();
        loop {
            match self.step() {
                Step::Busy => {}
                Step::Idle(timeout) => {
                    let notify = Arc::clone(&self.shared.notify);
                    notify.wait(self.mode, timeout, || self.has_input());
                }
                Step::Done => break,
            }
        }
        for w in &self.workers {
            w.stop.store(true, Ordering::Release);
            w.notify.notify();
        }
    }

    /// Past the grace period: stop running sandboxes at the next tick and refuse the queued.
    fn abort(&mut self, now: Nanos) {
        self.signals.abort.store(true, Ordering::Release);
        self.signals.epoch.bump();
        for (_, task) in self.pending.drain() {
            task.answer(now, Err(Failure::Rejected(Rejection::ShuttingDown)));
        }
        self.suspended.clear();
    }

    /// Handles everything queued; returns whether anything happened. The workers' events come
    /// first, so that an arrival is placed on what the workers have already reported (race 1).
    pub(crate) fn poll(&mut self) -> bool {
        let mut busy = false;
        // The time of the last event fed: the backlog is published as of then.
        let mut last = None;
        for w in 0..self.workers.len() {
            while let Some(event) = self.workers[w].events.pop() {
                busy = true;
                let now = self.signals.clock.now();
                last = Some(now);
                let event = match event {
                    WorkerEvent::Started { sched } => {
                        self.suspended.started(sched);
                        Event::Started { worker: w, id: sched }
                    }
                    WorkerEvent::Completed { sched, function, executed } => {
                        self.running -= 1;
                        self.run_ended(w, sched);
                        self.suspended.ended(sched);
                        self.estimator.observe(function.id, executed);
                        self.learnt(&function);
                        self.turnaround.ended(w, now, executed);
                        Event::Completed { worker: w, id: sched, executed }
                    }
                    // A follower of the preempted run, which the policy takes back with the
                    // `Preempted` that comes next.
                    WorkerEvent::Returned { task } => {
                        busy = true;
                        self.shared.returned.fetch_add(1, Ordering::Relaxed);
                        self.running -= 1;
                        self.suspended.returned(task.sched, task.holds_sandbox());
                        self.pending.insert(task.sched, task);
                        continue;
                    }
                    WorkerEvent::Preempted { task } => {
                        self.running -= 1;
                        let (id, executed) = (task.sched, task.executed);
                        self.run_ended(w, id);
                        self.turnaround.ended(w, now, executed);
                        self.suspended.preempted(id, task.holds_sandbox());
                        self.pending.insert(id, task);
                        Event::Preempted { worker: w, id, executed }
                    }
                };
                self.feed(now, event);
            }
        }
        // The clock is read only when there is something to time: the dispatcher is polled
        // several times per request, mostly to find nothing.
        let mut arrived_at = None;
        while let Some(sub) = self.shared.submissions.pop() {
            busy = true;
            let now = *arrived_at.get_or_insert_with(|| self.signals.clock.now());
            last = Some(now);
            self.arrival(now, sub);
        }
        if let Some(&due) = self.wake_at.first()
            && let now = self.signals.clock.now()
            && due <= now
        {
            busy = true;
            // Every timer due fires now; the later ones stay armed.
            self.wake_at = self.wake_at.split_off(&now.saturating_add(1));
            last = Some(now);
            self.feed(now, Event::Tick);
        }
        // Here, not in `step`: an inline dispatcher is polled from a running sandbox's epoch
        // callback too, and what it queued there must show.
        self.shared.queued.store(self.pending.len(), Ordering::Relaxed);
        for (worker, run) in self.suspended.due() {
            self.signal_preemption(worker, run);
        }
        self.shared.suspended.store(self.suspended.held(), Ordering::Relaxed);
        if let Some(now) = last {
            let backlog = self.policy.backlog(now);
            let overhead = self.turnaround.overhead();
            self.shared.published.store(Published { backlog, overhead });
        }
        busy
    }

    /// The run of `id` on group worker `w` has ended: a preemption flag still naming it landed
    /// after the worker last looked (race 2) and must not be re-signalled forever.
    fn run_ended(&self, w: usize, id: RequestId) {
        let flag = &self.signals.workers[self.workers[w].index].preempt;
        let _ = flag.compare_exchange(id.0, 0, Ordering::AcqRel, Ordering::Relaxed);
    }

    fn arrival(&mut self, now: Nanos, sub: Submission) {
        let Submission { mut task, relative_deadline, arrived, expected, tenant } = sub;
        if self.signals.abort.load(Ordering::Acquire) {
            task.answer(now, Err(Failure::Rejected(Rejection::ShuttingDown)));
            return;
        }
        self.next_id += 1;
        let id = RequestId(self.next_id);
        task.sched = id;
        let function = task.function.id;
        if let Some(seed) = task.function.config.expected_execution {
            self.estimator.seed(function, nanos(seed));
        }
        // The policy's admission judges the request on its own estimate only when that rests on
        // knowledge (`Request::estimate_known`): a function never run and not seeded has only the
        // default estimate, and refusing on that guess would refuse it forever.
        let given = expected.is_some();
        let seeded = task.function.config.expected_execution.is_some();
        let declared = given || seeded;
        let known = declared || self.estimator.samples(function) > 0;
        // The node's own per-request work (hand-offs, wake-ups) occupies the worker too: the
        // wait a request imposes on those behind it is its execution plus that.
        let expected = match expected {
            Some(given) => given,
            None => {
                let estimate = self.estimator.estimate(function);
                if known {
                    // What a submitter refuses this function's requests on (`refusal`).
                    task.function.publish_expected(self.shared.index, estimate);
                }
                estimate
            }
        }
        .saturating_add(self.turnaround.overhead());
        // A function whose measured estimate alone overruns this deadline (its recent runs
        // ended late or were killed) is refused as infeasible, except for one probe per
        // interval, so that its outcome can bring the estimate back. A probe is demoted from the
        // start: it runs in the best-effort lane, on spare worker time only, so that it costs
        // on-time requests nothing (on its estimate it would hold the worker for a deadline with
        // EDF's priority). A function that asks for demotion needs no probe: every such request
        // runs in the lane. A declared execution time is the operator's word: not probed. A
        // deadline tighter than the function's own default is the client's choice: refused,
        // not probed (requests at the default deadline probe when it overruns that too).
        let mut on_overrun = task.function.config.on_overrun;
        let default_deadline = nanos(task.function.config.relative_deadline);
        let overruns = expected > relative_deadline.max(default_deadline);
        if known && !declared && overruns && on_overrun == Overrun::Kill {
            let probe = match self.probed.get(&function) {
                None => Some(Probe { at: now, interval: PROBE_INTERVAL }),
                Some(p) if now >= p.at.saturating_add(p.interval) => Some(Probe {
                    at: now,
                    interval: p.interval.saturating_mul(2).min(PROBE_INTERVAL_MAX),
                }),
                Some(_) => None,
            };
            if let Some(probe) = probe {
                self.probed.insert(function, probe);
                on_overrun = Overrun::Demote;
            }
        } else if !self.probed.is_empty() && !overruns {
            // Its estimate fits again: the next overrun starts the back-off afresh.
            self.probed.remove(&function);
        }
        let arrival = arrived.min(now);
        let mut request = Request::new(id, function, arrival, relative_deadline, expected)
            .with_tenant(tenant)
            .with_overrun(on_overrun)
            .with_ull(task.function.config.ull);
        if !known {
            request = request.with_guessed_estimate();
        }
        if given {
            // The lane takes no client's word (`Request::client_estimate`, `UllConfig::takes`):
            // a request carrying an estimate is uLL only if the node's own estimate of its
            // function makes it so, and the client's too.
            request = request.with_client_estimate();
            let node = (seeded || self.estimator.samples(function) > 0).then(|| {
                self.estimator.estimate(function).saturating_add(self.turnaround.overhead())
            });
            if self.shared.ull_lane.is_some_and(|lane| lane.takes(false, node, Some(expected))) {
                request = request.with_ull(true);
            }
        }
        if self.shared.ull_lane.is_some_and(|lane| lane.is_ull(&request)) {
            self.shared.ull.fetch_add(1, Ordering::Relaxed);
            task.ull = true;
        }
        task.short = task.ull || (known && expected <= self.shared.short_run());
        self.pending.insert(id, task);
        self.feed(now, Event::Arrival(request));
    }

    fn feed(&mut self, now: Nanos, event: Event) {
        let mut actions = std::mem::take(&mut self.actions);
        actions.clear();
        self.policy.on_event(now, event, &mut actions);
        #[cfg(debug_assertions)]
        if let Err(violation) = self.contract.step(now, &event, &actions) {
            tracing::error!("policy contract broken: {violation}");
            let _ = self.signals.contract_violation.set(violation.to_string());
        }
        for action in actions.drain(..) {
            self.apply(now, action);
        }
        self.actions = actions;
    }

    /// Publishes what the estimator now expects of `function`, for submitters to refuse on
    /// (`refusal`). Called after an observed run: from then on the estimate rests on knowledge.
    fn learnt(&self, function: &Function) {
        function.publish_expected(self.shared.index, self.estimator.estimate(function.id));
    }

    /// `req` of `function` ran `executed` and was still running at its deadline: it would have
    /// run at least until then, so its function's estimator observes that (a censored run).
    fn observe_censored(&mut self, function: &Function, req: &Request, executed: Nanos) {
        let relative = req.absolute_deadline.saturating_sub(req.arrival);
        self.estimator.observe(function.id, executed.max(relative));
        self.learnt(function);
    }

    /// Moves the task of `id` to `worker`'s inbox (a `Run`, or a `Follow` behind its run) and
    /// notifies the worker (free while it is awake); returns the task's execution so far, or
    /// `None` if the dispatcher does not hold it (a policy bug, logged).
    fn hand_over(&mut self, worker: usize, id: RequestId, follow: bool) -> Option<Nanos> {
        let Some(mut task) = self.pending.remove(&id) else {
            tracing::error!(id = id.0, "policy handed over a request the dispatcher does not hold");
            return None;
        };
        self.suspended.handed_over(id, task.holds_sandbox(), follow);
        let executed = task.executed;
        self.running += 1;
        let w = &self.workers[worker];
        while let Err(back) = w.inbox.push(task) {
            // The inbox holds a run and a full batch; the worker drains it promptly.
            task = back;
            w.notify.notify();
            std::thread::yield_now();
        }
        w.notify.notify();
        Some(executed)
    }

    /// Signals the preemption of `run` on `worker`: the flag names the request by the
    /// dispatcher's id, unique within the group; bumping the epoch makes every running sandbox
    /// check its worker's flag now.
    fn signal_preemption(&self, worker: usize, run: RequestId) {
        let Some(w) = self.workers.get(worker) else { return };
        self.signals.workers[w.index].preempt.store(run.0, Ordering::Release);
        self.signals.epoch.bump();
    }

    fn apply(&mut self, now: Nanos, action: Action) {
        match action {
            Action::Enqueue { .. } => {}
            // It runs on, from the best-effort lane, and is answered late. If it ran past its
            // deadline, its function's estimate learns that now, as for `Late` below: its next
            // requests go to the lane at once instead of holding the worker for a deadline
            // each, and its own run may not end for a long time.
            Action::Demote { req } => {
                self.shared.demoted.fetch_add(1, Ordering::Relaxed);
                if req.executed > 0
                    && now >= req.absolute_deadline
                    && let Some(task) = self.pending.get(&req.id)
                {
                    let (function, executed) = (Arc::clone(&task.function), task.executed);
                    self.observe_censored(&function, &req, executed);
                }
            }
            Action::Run { worker, req } => {
                if let Some(executed) = self.hand_over(worker, req.id, false) {
                    self.turnaround.ran(worker, now, executed);
                }
            }
            // Committed behind the worker's run (Edge-RT §IV-A): it starts there when that run
            // completes, without a round trip through this thread. The worker is notified all
            // the same (free while it is awake, which it nearly always is): the run may have
            // completed already and the worker gone to sleep before the follower landed.
            Action::Follow { worker, req } => {
                if self.hand_over(worker, req.id, true).is_some() {
                    self.shared.batched.fetch_add(1, Ordering::Relaxed);
                }
            }
            Action::Preempt { worker, id } => {
                if self.suspended.preempt(worker, id) {
                    self.signal_preemption(worker, id);
                } else {
                    // At the bound of suspended sandboxes: signalled once a slot is given back,
                    // unless the run ends first (then the policy sees it complete, as when a
                    // preemption loses the race with completion).
                    self.shared.preemptions_deferred.fetch_add(1, Ordering::Relaxed);
                }
            }
            Action::Reject { req, reason } => {
                if let Some(task) = self.pending.remove(&req.id) {
                    self.suspended.answered(task.holds_sandbox());
                    let why = match reason {
                        RejectReason::Infeasible => Rejection::DeadlineInfeasible,
                        RejectReason::Unreachable => Rejection::DeadlineUnreachable,
                        RejectReason::Shed => Rejection::Shed,
                        RejectReason::QueueFull => Rejection::Overloaded,
                        // It ran past its deadline and yielded to requests that can still
                        // make theirs: not a refusal, it ran. It would have run at least its
                        // deadline: observed as that (censored), so that the function's next
                        // requests are refused as infeasible at once, bar a probe per
                        // `PROBE_INTERVAL`, backing off (`docs/scheduling.md`, "Runaways").
                        RejectReason::Late => {
                            self.observe_censored(&task.function, &req, task.executed);
                            task.answer(now, Err(Failure::Late));
                            return;
                        }
                    };
                    task.answer(now, Err(Failure::Rejected(why)));
                }
            }
            Action::WakeAt(t) => {
                self.wake_at.insert(t);
            }
        }
    }
}
