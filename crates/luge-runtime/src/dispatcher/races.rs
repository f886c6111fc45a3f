//! The races of the dispatcher's design (its module doc), each driven deterministically: one
//! dispatcher and one worker stepped by hand on the test thread, a manual clock and a counting
//! epoch injected through [`Signals`]. A sandbox never sees an epoch bump here (the counting
//! epoch does not touch the engine), so a preemption flag set while a sandbox runs is exactly
//! one its target finishes without seeing — the window each race is about. The rig also drives
//! the one decision of the dispatcher's own that needs a clock: probing a function whose
//! estimate overran its deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::Mutex;
use std::sync::atomic::Ordering;

use luge_sched::{Estimator, EstimatorConfig, PolicyConfig};

use super::*;
use crate::config::{FunctionConfig, RuntimeConfig};
use crate::outcome::Outcome;
use crate::registry::{Function, Registry};
use crate::reply::Reply;
use crate::signals::{Signals, TaskClock};
use crate::task::TaskState;
use crate::worker;

const ECHO: &str = include_str!("../../../../functions/builtin/echo.wat");
const MS: Nanos = 1_000_000;

struct Rig {
    signals: Arc<Signals>,
    group: Arc<GroupShared>,
    worker: Arc<WorkerShared>,
    dispatcher: Dispatcher,
    function: Arc<Function>,
    answered: Arc<Mutex<Vec<Outcome>>>,
    _registry: Registry,
    next_id: u64,
    /// The test breaks the contract on purpose.
    broken_on_purpose: bool,
}

impl Rig {
    /// One `sledgescale` group of one worker with the runtime's default admission.
    fn new() -> Self {
        let config = RuntimeConfig { max_sandboxes: 4, ..RuntimeConfig::default() };
        let engine = crate::engine::build(&config).unwrap();
        let registry = Registry::new(engine, None, config.max_memory_bytes).unwrap();
        let function = registry.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
        let signals = Arc::new(Signals::manual());
        let group = Arc::new(GroupShared::new(0, 16, None));
        let worker = Arc::new(WorkerShared::new(0, 0));
        let policy_config = PolicyConfig { workers: 1, ..config.policy_config.clone() };
        let dispatcher = Dispatcher::new(
            Arc::clone(&group),
            vec![Arc::clone(&worker)],
            config.policy.build(&policy_config),
            Estimator::new(EstimatorConfig::default()),
            Arc::clone(&signals),
            WaitMode::Sleep,
            Duration::from_secs(1),
        );
        Self {
            signals,
            group,
            worker,
            dispatcher,
            function,
            answered: Arc::default(),
            _registry: registry,
            next_id: 0,
            broken_on_purpose: false,
        }
    }

    /// Submits a request expected to run `expected` with a relative deadline; its runtime id.
    fn submit(&mut self, deadline: Nanos, expected: Nanos) -> u64 {
        self.submit_as(deadline, Some(expected))
    }

    /// Submits a request with a relative deadline and the client's `expected` execution, if
    /// any (else the function's estimate applies); its runtime id.
    fn submit_as(&mut self, deadline: Nanos, expected: Option<Nanos>) -> u64 {
        self.next_id += 1;
        let id = self.next_id;
        let answered = Arc::clone(&self.answered);
        let now = self.signals.clock.now();
        let task = Box::new(Task {
            id,
            sched: RequestId(0),
            function: Arc::clone(&self.function),
            reply: Reply::new(id, Box::new(move |o| answered.lock().unwrap().push(o))),
            received: now,
            deadline_unix_us: 0,
            trace: None,
            first_run: None,
            executed: 0,
            preemptions: 0,
            ull: false,
            short: false,
            state: TaskState::Fresh(format!("request {id}").into_bytes()),
            clock: Arc::new(TaskClock::default()),
        });
        let submission =
            Submission { task, relative_deadline: deadline, arrived: now, expected, tenant: 0 };
        assert!(self.group.submissions.push(submission).is_ok());
        id
    }

    /// The task the dispatcher handed to the worker, if any.
    fn handed(&self) -> Option<Box<Task>> {
        self.worker.inbox.pop()
    }

    /// The worker's events not yet read by the dispatcher, by kind (left in place).
    fn events(&self) -> Vec<&'static str> {
        let mut all = Vec::new();
        while let Some(e) = self.worker.events.pop() {
            all.push(e);
        }
        let kinds = all
            .iter()
            .map(|e| match e {
                WorkerEvent::Started { .. } => "started",
                WorkerEvent::Completed { .. } => "completed",
                WorkerEvent::Preempted { .. } => "preempted",
                WorkerEvent::Returned { .. } => "returned",
            })
            .collect();
        for e in all {
            assert!(self.worker.events.push(e).is_ok());
        }
        kinds
    }

    fn flag(&self) -> u64 {
        self.signals.workers[0].preempt.load(Ordering::SeqCst)
    }

    fn bumps(&self) -> u64 {
        self.signals.epoch.bumps()
    }

    /// Runs `task` to its end on the worker.
    fn execute(&self, task: Box<Task>) {
        worker::execute(&self.worker, &self.group.notify, &self.signals, task);
    }

    /// The ids answered so far and whether each succeeded.
    fn answers(&self) -> Vec<(u64, bool)> {
        self.answered.lock().unwrap().iter().map(|o| (o.request_id, o.is_ok())).collect()
    }
}

/// Every rig also checks the dispatcher's calls of its policy against the driver contract
/// (debug builds check it in every dispatcher).
impl Drop for Rig {
    fn drop(&mut self) {
        if !std::thread::panicking() && !self.broken_on_purpose {
            assert_eq!(self.signals.contract_violation.get(), None, "policy contract broken");
        }
    }
}

/// Race 1: a worker's events already queued are applied before the arrivals of the same round,
/// so a completion the worker has reported is never counted as remaining work. Here A is
/// expected to run 5 ms (with too little slack to be preempted) but finished at once; B (1 ms,
/// deadline 3 ms) fits only if the dispatcher knows that, and is admitted and run, not refused
/// as unreachable.
#[test]
fn reported_completions_count_before_new_arrivals() {
    let mut rig = Rig::new();
    let a = rig.submit(5 * MS + MS / 2, 5 * MS);
    assert!(matches!(rig.dispatcher.step(), Step::Busy));
    rig.execute(rig.handed().expect("A runs"));
    assert_eq!(rig.events(), ["started", "completed"]);
    rig.signals.clock.advance(MS / 10);
    let b = rig.submit(3 * MS, MS);
    rig.dispatcher.step();
    let task = rig.handed().expect("B is admitted and runs at once");
    assert_eq!(task.id, b);
    rig.execute(task);
    rig.dispatcher.step();
    assert_eq!(rig.answers(), [(a, true), (b, true)]);
}

/// Race 2: a `Preempt` whose target completes before any epoch check sees the flag. The worker
/// reports only `Completed` and clears the flag, so the dispatcher stops re-signalling it.
#[test]
fn a_preemption_that_loses_to_completion_is_dropped() {
    let mut rig = Rig::new();
    let a = rig.submit(100 * MS, MS);
    rig.dispatcher.step();
    let segment =
        worker::begin(&rig.worker, &rig.group.notify, &rig.signals, rig.handed().unwrap())
            .expect("A starts");
    // B, more urgent, arrives while A runs: the policy preempts A (flag set, epoch bumped).
    rig.signals.clock.advance(MS / 10);
    let b = rig.submit(2 * MS, MS / 10);
    rig.dispatcher.step();
    assert_ne!(rig.flag(), 0, "the policy asked for A's preemption");
    let bumps = rig.bumps();
    assert!(bumps > 0);
    // A finishes before seeing it.
    worker::finish(&rig.worker, &rig.group.notify, &rig.signals, segment);
    assert_eq!(rig.events(), ["completed"], "exactly one event ends A's run");
    assert_eq!(rig.flag(), 0, "the worker clears the flag of a request that completed");
    rig.dispatcher.step();
    let task = rig.handed().expect("B runs next");
    assert_eq!(task.id, b);
    rig.execute(task);
    rig.dispatcher.step();
    assert!(matches!(rig.dispatcher.step(), Step::Idle(None)));
    assert_eq!(rig.bumps(), bumps, "no re-signalling of a flag nobody holds");
    assert_eq!(rig.answers(), [(a, true), (b, true)]);
}

/// Race 2, the other interleaving: the `Preempt` lands after its target already completed and
/// cleared nothing (its completion is still queued). The dispatcher clears the flag when it
/// learns of the completion; otherwise the flag would be re-signalled every 50 µs forever.
#[test]
fn a_preemption_landing_after_its_target_completed_is_cleared() {
    let mut rig = Rig::new();
    rig.submit(100 * MS, MS);
    rig.dispatcher.step();
    let task = rig.handed().unwrap();
    let sched = task.sched;
    rig.execute(task);
    // The dispatcher, not yet aware of the completion, names A in a preemption.
    rig.signals.workers[0].preempt.store(sched.0, Ordering::SeqCst);
    rig.dispatcher.step();
    assert_eq!(rig.flag(), 0, "the completion clears a flag naming the completed request");
    let bumps = rig.bumps();
    assert!(matches!(rig.dispatcher.step(), Step::Idle(None)));
    assert_eq!(rig.bumps(), bumps);
}

/// Race 3: a `Preempt` reaches the worker before the `Run` of its target: the worker stops the
/// request at once, unchanged (no sandbox built, nothing executed), and runs it later.
#[test]
fn a_preemption_before_the_start_stops_the_request_unchanged() {
    let mut rig = Rig::new();
    let a = rig.submit(100 * MS, MS);
    rig.dispatcher.step();
    let a_task = rig.handed().expect("A is handed to the worker");
    // B arrives before the worker started A: the policy preempts A, still in the inbox.
    let b = rig.submit(2 * MS, MS / 10);
    rig.dispatcher.step();
    assert_ne!(rig.flag(), 0);
    rig.execute(a_task);
    assert_eq!(rig.events(), ["started", "preempted"]);
    assert_eq!(rig.flag(), 0);
    rig.dispatcher.step();
    let held = rig.dispatcher.pending.values().next().expect("A is back with the dispatcher");
    assert!(matches!(held.state, TaskState::Fresh(_)), "A never built a sandbox");
    assert_eq!(held.executed, 0);
    let task = rig.handed().expect("B runs first");
    assert_eq!(task.id, b);
    rig.execute(task);
    rig.dispatcher.step();
    rig.execute(rig.handed().expect("then A"));
    rig.dispatcher.step();
    assert_eq!(rig.answers(), [(b, true), (a, true)]);
}

/// Race 4: the epoch bump of a `Preempt` may be spent before its target armed its deadline.
/// While a flag is set the idle dispatcher bumps again every `PREEMPT_RETRY` (measured on the
/// injected clock), and stops once the flag is taken.
#[test]
fn an_undelivered_preemption_is_signalled_again_until_taken() {
    let mut rig = Rig::new();
    rig.submit(100 * MS, MS);
    rig.dispatcher.step();
    let segment =
        worker::begin(&rig.worker, &rig.group.notify, &rig.signals, rig.handed().unwrap()).unwrap();
    rig.dispatcher.step(); // reads Started
    rig.signals.workers[0].preempt.store(segment.sched().0, Ordering::SeqCst);
    let before = rig.bumps();
    for i in 1..=3 {
        assert!(matches!(rig.dispatcher.step(), Step::Idle(Some(PREEMPT_RETRY))));
        assert_eq!(rig.bumps(), before + i);
        rig.signals.clock.advance(PREEMPT_RETRY.as_nanos() as Nanos);
    }
    // The target finishes (here before taking the flag: the worker clears it).
    worker::finish(&rig.worker, &rig.group.notify, &rig.signals, segment);
    rig.dispatcher.step();
    let after = rig.bumps();
    assert!(matches!(rig.dispatcher.step(), Step::Idle(None)));
    assert_eq!(rig.bumps(), after, "no bump once no flag is set");
}

/// The contract check is live in the dispatcher: an event no run explains is recorded.
#[test]
fn a_broken_contract_is_recorded() {
    let mut rig = Rig::new();
    rig.broken_on_purpose = true;
    rig.dispatcher.feed(0, Event::Started { worker: 0, id: RequestId(99) });
    let violation = rig.signals.contract_violation.get().expect("the violation is recorded");
    assert!(violation.contains("99"), "{violation}");
}

/// A panic in the host while it runs a sandbox is contained to that request: it is answered
/// with an internal error naming the panic (what the front ends count under the outcome
/// `internal`), the worker reports the run as ended and counts its segment, and goes on: here
/// three panics in a row, each followed by a request that runs, on the one worker. Afterwards
/// the dispatcher holds nothing and no preemption flag is left set.
#[test]
fn a_host_panic_ends_only_its_own_request() {
    let mut rig = Rig::new();
    let mut expected = Vec::new();
    for round in 0..3u64 {
        let a = rig.submit(100 * MS, MS);
        rig.dispatcher.step();
        let mut task = rig.handed().expect("the worker is handed the next request");
        task.state = TaskState::Suspended(Box::pin(async { panic!("injected host bug") }));
        rig.execute(task);
        assert_eq!(rig.events(), ["started", "completed"], "round {round}");
        assert_eq!(rig.flag(), 0);
        let b = rig.submit(100 * MS, MS);
        rig.dispatcher.step();
        rig.execute(rig.handed().expect("the worker goes on"));
        rig.dispatcher.step();
        assert_eq!(rig.worker.segments.load(Ordering::Relaxed), 2 * (round + 1));
        expected.extend([(a, false), (b, true)]);
    }
    assert_eq!(rig.answers(), expected);
    for panicked in rig.answered.lock().unwrap().iter().filter(|o| !o.is_ok()) {
        assert!(
            matches!(&panicked.result, Err(crate::outcome::Failure::Internal(m)) if m.contains("injected host bug")),
            "{:?}",
            panicked.result
        );
    }
    assert!(matches!(rig.dispatcher.step(), Step::Idle(None)));
    assert!(rig.dispatcher.pending.is_empty(), "the dispatcher still holds a request");
    assert!(rig.handed().is_none());
}

/// A function whose measured estimate overruns the deadline is refused as infeasible, except for
/// probes run on a guess, the first at once and each next one after twice the wait before.
#[test]
fn probes_of_a_function_that_overran_its_deadline_back_off() {
    let mut rig = Rig::new();
    // Ten runs that each took 150 ms, past the function's own 100 ms deadline: one fast probe
    // does not bring the estimate back.
    for _ in 0..10 {
        rig.dispatcher.estimator.observe(rig.function.id, 150 * MS);
    }
    // Whether a request due in 10 ms, submitted `after` the previous one, runs (a probe).
    let mut runs = |after: Nanos| {
        rig.signals.clock.advance(after);
        let id = rig.submit_as(10 * MS, None);
        rig.dispatcher.step();
        match rig.handed() {
            Some(task) => {
                rig.execute(task);
                rig.dispatcher.step();
                assert_eq!(rig.answers().last(), Some(&(id, true)));
                true
            }
            None => {
                let refused = rig.answered.lock().unwrap().last().cloned().unwrap();
                assert_eq!(refused.request_id, id);
                let why = Err(Failure::Rejected(Rejection::DeadlineInfeasible));
                assert_eq!(refused.result, why);
                false
            }
        }
    };
    let s = 1_000 * MS;
    let seen: Vec<bool> = [0, 0, s, s, s, s, s, s, 2 * s].into_iter().map(&mut runs).collect();
    // Probes at 0, 1 s, 3 s (2 s after) and 8 s (at least 4 s after); refused between.
    assert_eq!(seen, [true, false, true, false, true, false, false, false, true]);
}

#[test]
fn every_timer_the_policy_asks_for_fires_not_only_the_earliest() {
    // The contract: each `WakeAt` is delivered as a `Tick` at or after its time. A later timer
    // must survive an earlier one firing (the lane's quantum after a deadline watch, say).
    let mut rig = Rig::new();
    let now = rig.signals.clock.now();
    rig.dispatcher.apply(now, Action::WakeAt(now + 2 * MS));
    rig.dispatcher.apply(now, Action::WakeAt(now + MS));
    rig.dispatcher.apply(now, Action::WakeAt(now + MS));
    rig.signals.clock.advance(MS);
    assert!(matches!(rig.dispatcher.step(), Step::Busy), "the first timer fired");
    let left: Vec<Nanos> = rig.dispatcher.wake_at.iter().copied().collect();
    assert_eq!(left, [now + 2 * MS], "the later one stays armed, the duplicate is gone");
    rig.signals.clock.advance(MS);
    assert!(matches!(rig.dispatcher.step(), Step::Busy), "the second timer fired");
    assert!(rig.dispatcher.wake_at.is_empty());
}

/// What an inline worker's sandbox asks before it runs and after each epoch callback
/// (`signals::InlineHooks::arrivals_waiting`): whether submissions wait that the dispatcher has
/// not read.
#[test]
fn arrivals_waiting_are_the_submissions_not_read_yet() {
    let mut rig = Rig::new();
    assert!(!rig.dispatcher.has_arrivals());
    rig.submit(10 * MS, MS);
    assert!(rig.dispatcher.has_arrivals());
    rig.dispatcher.step();
    assert!(!rig.dispatcher.has_arrivals(), "the step read it");
    assert!(rig.handed().is_some());
    // A thread with no inline dispatcher has nothing waiting for it.
    assert!(!worker::inline_arrivals_waiting());
}
