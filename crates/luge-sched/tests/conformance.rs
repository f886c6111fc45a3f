//! Every policy, wrapped in `Checked`, driven directly by a small racy driver written here (no
//! simulator): starts, completions and preemption deliveries arrive after random delays, so
//! preemptions race completions and reach requests that have not started yet. No call may break
//! the contract, and no request may be left unanswered once the driver has nothing left to do.
//! The same driver runs every policy behind the uLL lane (HORSE §4.1.3), each checked inside the
//! lane too, and holds the lane to its promise: no other request starts while a uLL request waits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use luge_sched::{
    Action, Admission, Backlog, Checked, ContractViolation, CtEdfConfig, Event, FunctionId, Nanos,
    Overrun, Policy, PolicyConfig, PolicyKind, QueueKind, RejectReason, Request, RequestId,
    UllConfig, UllLane, WorkerId,
};

/// The early-binding policies: per-worker EDF queues, batching.
const EARLY: [PolicyKind; 5] = [
    PolicyKind::SledgeScale,
    PolicyKind::SledgeScaleSteal,
    PolicyKind::Rr,
    PolicyKind::Jsq,
    PolicyKind::Lld,
];

/// A change to a policy's configuration.
type Tune<'a> = &'a dyn Fn(&mut PolicyConfig);

/// The configuration as it is.
const TREE: Tune<'static> = &|_| {};

/// The workload's shape beyond its load: behind a uLL lane of this share bound (0: none), and
/// with one relative deadline for every request.
#[derive(Debug, Clone, Copy, Default)]
struct Shape {
    lane: Option<u32>,
    one_deadline: Option<Nanos>,
}

/// No lane, each request its own deadline.
const PLAIN: Shape = Shape { lane: None, one_deadline: None };

/// Behind a uLL lane of share bound `burst` (0: none), if `Some`.
fn lane(burst: Option<u32>) -> Shape {
    Shape { lane: burst, ..PLAIN }
}

/// What the driver has to do at some time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    Arrival(u64),
    Start { worker: WorkerId, run: u64 },
    Complete { worker: WorkerId, run: u64 },
    Stop { worker: WorkerId, run: u64 },
    Tick,
}

/// A run handed to a worker.
#[derive(Debug, Clone, Copy)]
struct OnWorker {
    req: Request,
    run: u64,
    since: Option<Nanos>,
    stop_on_start: bool,
    /// A `Preempt` of this run was received.
    stop_asked: bool,
}

/// What the checker of a policy inside the uLL lane found: its first violation, and at the end
/// whether it still holds a request. `None`s without a lane.
type InnerCheck<P> = fn(&P) -> (Option<ContractViolation>, Option<ContractViolation>);

struct Driver<P: Policy> {
    policy: Checked<P>,
    inner: InnerCheck<P>,
    /// Which requests a uLL lane takes (with or without one), and those waiting for a worker.
    ull: UllConfig,
    ull_waiting: BTreeSet<RequestId>,
    /// Runs of other requests started while a uLL request waited.
    ahead_of_ull: usize,
    rng: u64,
    now: Nanos,
    seq: u64,
    runs: u64,
    due: BinaryHeap<Reverse<(Nanos, u64, Due)>>,
    workers: Vec<Option<OnWorker>>,
    /// Actual execution of each request, by id.
    execution: Vec<Nanos>,
    requests: Vec<Request>,
    /// Runs that completed, and runs stopped by a preemption.
    completed: usize,
    stopped: usize,
    /// Per worker, the requests bound to it (`Enqueue`d) and neither run nor answered.
    bound: Vec<BTreeSet<RequestId>>,
    /// Requests answered `Late`.
    late: usize,
    /// Times a request waited bound to a worker whose run was past its deadline or demoted,
    /// started and not asked to stop, right after an arrival or a timer.
    late_waits: usize,
    /// Requests demoted to the best-effort lane, and how many of them completed.
    demoted: BTreeSet<RequestId>,
    demoted_completed: usize,
    /// Demoted requests answered with a `Reject` (the lane runs what it takes).
    demoted_rejected: usize,
    /// Requests asking for demotion answered late or shed while the lane had room.
    answered_with_room: usize,
    /// Per worker, the requests committed behind its run (`Follow`), and how many of those
    /// started (a run completed before them).
    followers: Vec<VecDeque<Request>>,
    followed: usize,
    /// The policy's backlog after its last event, and the arrivals it claimed would be refused
    /// (each checked against what the policy then did).
    backlog: Backlog,
    claimed: usize,
    /// A submitter that hands over several arrivals on one picture: the backlog as of the last
    /// event other than an arrival counted by the view, and that picture with the arrivals
    /// handed over since counted ([`Backlog::behind`]); the arrivals refused on such a view that
    /// the picture alone would have passed.
    picture: Backlog,
    view: Option<Backlog>,
    claimed_on_view: usize,
    /// Requests refused as unreachable at the current load (admission on the wait).
    unreachable: usize,
    /// Every request's relative deadline, if one for all (else each its own).
    one_deadline: Option<Nanos>,
    /// Whether the policy is behind a uLL lane.
    behind_lane: bool,
    /// Requests the policy refused (answered with a `Reject`).
    refused: BTreeSet<RequestId>,
}

/// The queue cap with admission on, which also bounds the best-effort lane.
const LANE: usize = 20;

impl<P: Policy> Driver<P> {
    fn new(policy: P, inner: InnerCheck<P>, seed: u64, workers: usize, ull: UllConfig) -> Self {
        Self {
            policy: Checked::new(policy),
            inner,
            ull,
            ull_waiting: BTreeSet::new(),
            ahead_of_ull: 0,
            rng: seed | 1,
            now: 0,
            seq: 0,
            runs: 0,
            due: BinaryHeap::new(),
            workers: vec![None; workers],
            execution: Vec::new(),
            requests: Vec::new(),
            completed: 0,
            stopped: 0,
            bound: vec![BTreeSet::new(); workers],
            late: 0,
            late_waits: 0,
            demoted: BTreeSet::new(),
            demoted_completed: 0,
            demoted_rejected: 0,
            answered_with_room: 0,
            followers: vec![VecDeque::new(); workers],
            followed: 0,
            backlog: Backlog::OPEN,
            claimed: 0,
            picture: Backlog::OPEN,
            view: None,
            claimed_on_view: 0,
            unreachable: 0,
            one_deadline: None,
            behind_lane: false,
            refused: BTreeSet::new(),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn at(&mut self, t: Nanos, due: Due) {
        self.seq += 1;
        self.due.push(Reverse((t, self.seq, due)));
    }

    /// Up to 5 µs from now.
    fn soon(&mut self) -> Nanos {
        self.now + self.next() % 5_000
    }

    fn feed(&mut self, event: Event) {
        let mut out = Vec::new();
        self.policy.on_event(self.now, event, &mut out);
        for action in out {
            match action {
                Action::Run { worker, req } => {
                    if !self.ull_waiting.remove(&req.id) && !self.ull_waiting.is_empty() {
                        self.ahead_of_ull += 1;
                    }
                    self.unbind(req.id);
                    self.runs += 1;
                    let run = self.runs;
                    let on =
                        OnWorker { req, run, since: None, stop_on_start: false, stop_asked: false };
                    self.workers[worker] = Some(on);
                    let t = self.soon();
                    self.at(t, Due::Start { worker, run });
                }
                Action::Preempt { worker, id } => {
                    if let Some(mut on) = self.workers[worker].filter(|on| on.req.id == id) {
                        on.stop_asked = true;
                        self.workers[worker] = Some(on);
                        let t = self.soon();
                        self.at(t, Due::Stop { worker, run: on.run });
                    }
                }
                Action::Follow { worker, req } => {
                    self.unbind(req.id);
                    self.followers[worker].push_back(req);
                }
                Action::WakeAt(t) => self.at(t.max(self.now), Due::Tick),
                Action::Enqueue { worker, id } => {
                    self.unbind(id);
                    self.bound[worker].insert(id);
                }
                Action::Reject { req, reason } => {
                    self.refused.insert(req.id);
                    if reason == RejectReason::Unreachable {
                        self.unreachable += 1;
                    }
                    self.ull_waiting.remove(&req.id);
                    self.unbind(req.id);
                    if reason == RejectReason::Late {
                        self.late += 1;
                    }
                    let lane = self.demoted.len() - self.demoted_completed - self.demoted_running();
                    if req.on_overrun == Overrun::Demote
                        && reason != RejectReason::QueueFull
                        && lane < LANE
                    {
                        self.answered_with_room += 1;
                    }
                    if self.demoted.contains(&req.id) {
                        self.demoted_rejected += 1;
                    }
                }
                Action::Demote { req } => {
                    self.unbind(req.id);
                    self.demoted.insert(req.id);
                }
            }
        }
        self.backlog = self.policy.backlog(self.now);
        if !matches!(event, Event::Arrival(_)) {
            self.picture = self.backlog;
            self.view = None;
        }
    }

    /// Demoted requests on a worker.
    fn demoted_running(&self) -> usize {
        self.workers.iter().flatten().filter(|on| self.demoted.contains(&on.req.id)).count()
    }

    fn unbind(&mut self, id: RequestId) {
        for b in &mut self.bound {
            b.remove(&id);
        }
    }

    /// Requests waiting on a worker whose started run is past its deadline or demoted, and not
    /// asked to stop.
    fn waiting_behind_late(&self) -> usize {
        (0..self.workers.len())
            .filter(|&w| {
                self.workers[w].is_some_and(|on| {
                    let outranks_none =
                        on.req.absolute_deadline <= self.now || self.demoted.contains(&on.req.id);
                    on.since.is_some() && !on.stop_asked && outranks_none
                })
            })
            .map(|w| self.bound[w].len())
            .sum()
    }

    /// The run `run` on `worker`, if it is still the one there.
    fn current(&self, worker: WorkerId, run: u64) -> Option<OnWorker> {
        self.workers[worker].filter(|on| on.run == run)
    }

    fn stop(&mut self, worker: WorkerId, on: OnWorker, since: Nanos) {
        self.workers[worker] = None;
        // The batch behind it never starts: the policy takes it back.
        self.followers[worker].clear();
        self.stopped += 1;
        let executed = on.req.executed + (self.now - since);
        self.feed(Event::Preempted { worker, id: on.req.id, executed });
    }

    fn step(&mut self, due: Due) {
        match due {
            Due::Arrival(i) => {
                let req = self.requests[i as usize];
                if self.ull.is_ull(&req) {
                    self.ull_waiting.insert(req.id);
                }
                // What a front end would refuse on the backlog as of the last event, at any
                // time since, the policy refuses when it gets the request, now (a uLL request
                // goes to the lane, which decides on its own; a request that asks for demotion
                // is demoted instead).
                let at = self.backlog.at.min(self.now);
                let checked = at + self.next() % (self.now - at + 1);
                let judged = !(self.behind_lane && self.ull.is_ull(&req))
                    && req.estimate_known
                    && req.on_overrun == Overrun::Kill;
                let (d, own) = (req.absolute_deadline, req.own_work());
                let claim = judged && self.backlog.refuses(checked, d, own);
                // The same on one picture, with what was handed over since counted.
                let view = self.view.unwrap_or(self.picture);
                let on_view = judged && view.refuses(self.now, d, own);
                let next = (judged && !on_view).then(|| view.behind(self.now, d, own)).flatten();
                self.feed(Event::Arrival(req));
                if on_view {
                    if !self.picture.refuses(self.now, d, own) {
                        self.claimed_on_view += 1;
                    }
                    assert!(
                        self.refused.contains(&req.id),
                        "the view {view:?} refused {req:?} at {}, the policy admitted it",
                        self.now
                    );
                }
                if let Some(next) = next {
                    assert!(
                        !self.refused.contains(&req.id) && !self.demoted.contains(&req.id),
                        "the view {view:?} counted {req:?} at {} as admitted, the policy did not",
                        self.now
                    );
                    self.view = Some(next);
                } else {
                    // An arrival the view does not account for (it may have preempted a run
                    // or had others shed): judge the next on the policy's picture after it.
                    self.picture = self.backlog;
                    self.view = None;
                }
                if claim {
                    self.claimed += 1;
                    assert!(
                        self.refused.contains(&req.id),
                        "the backlog {:?} refused {req:?} at {checked}, the policy admitted it \
                         at {}",
                        self.backlog,
                        self.now
                    );
                }
            }
            Due::Start { worker, run } => {
                let Some(mut on) = self.current(worker, run) else { return };
                on.since = Some(self.now);
                self.workers[worker] = Some(on);
                self.feed(Event::Started { worker, id: on.req.id });
                if on.stop_on_start {
                    self.stop(worker, on, self.now);
                } else {
                    let left = self.execution[on.req.id.0 as usize].saturating_sub(on.req.executed);
                    self.at(self.now + left, Due::Complete { worker, run });
                }
            }
            Due::Complete { worker, run } => {
                let Some(on) = self.current(worker, run) else { return };
                self.workers[worker] = None;
                self.completed += 1;
                if self.demoted.contains(&on.req.id) {
                    self.demoted_completed += 1;
                }
                let executed = self.execution[on.req.id.0 as usize];
                // The next request of its batch starts there at once, unasked.
                if let Some(req) = self.followers[worker].pop_front() {
                    if !self.ull_waiting.remove(&req.id) && !self.ull_waiting.is_empty() {
                        self.ahead_of_ull += 1;
                    }
                    self.followed += 1;
                    self.runs += 1;
                    let run = self.runs;
                    let on =
                        OnWorker { req, run, since: None, stop_on_start: false, stop_asked: false };
                    self.workers[worker] = Some(on);
                    let t = self.soon();
                    self.at(t, Due::Start { worker, run });
                }
                self.feed(Event::Completed { worker, id: on.req.id, executed });
            }
            Due::Stop { worker, run } => {
                let Some(mut on) = self.current(worker, run) else { return };
                match on.since {
                    Some(since) => self.stop(worker, on, since),
                    None => {
                        on.stop_on_start = true;
                        self.workers[worker] = Some(on);
                    }
                }
            }
            Due::Tick => self.feed(Event::Tick),
        }
    }
}

/// What one drive saw.
#[derive(Debug)]
struct Drove {
    /// Runs that completed.
    completed: usize,
    /// Runs stopped by a preemption.
    stopped: usize,
    /// Requests answered `Late`.
    late: usize,
    /// See [`Driver::ahead_of_ull`].
    ahead_of_ull: usize,
    /// See [`Driver::late_waits`].
    late_waits: usize,
    /// Requests demoted, demoted ones that completed, and demoted ones answered instead.
    demoted: usize,
    demoted_completed: usize,
    demoted_rejected: usize,
    answered_with_room: usize,
    /// Followers that started after the run before them completed.
    followed: usize,
    /// Arrivals the policy's backlog claimed it would refuse (and it did), and all those it
    /// refused as unreachable at the current load.
    claimed: usize,
    unreachable: usize,
    /// See [`Driver::claimed_on_view`].
    claimed_on_view: usize,
}

/// `policy` on `workers` workers under a bimodal load of 300 requests, `load` per worker; with
/// `runaways`, one request in ten runs 20× its estimate; with `demote`, every request asks to
/// be demoted rather than answered once it can no longer meet its deadline.
fn drive(
    policy: PolicyKind,
    seed: u64,
    workers: usize,
    load: f64,
    admission: bool,
    (runaways, demote): (bool, bool),
) -> Drove {
    drive_with(policy, seed, (workers, load), admission, (runaways, demote), PLAIN, TREE)
}

/// [`drive`], in the workload's `shape`: with `lane` = `Some(burst)`, behind a uLL lane of that
/// share bound (0: none) that takes the short requests (20 µs) and, declared, one request in
/// seven of the long ones; with `one_deadline`, every request due that long after it arrives.
/// The policy's configuration `tune`d (the early-binding workers' queue, batching).
fn drive_with(
    policy: PolicyKind,
    seed: u64,
    (workers, load): (usize, f64),
    admission: bool,
    (runaways, demote): (bool, bool),
    shape: Shape,
    tune: Tune<'_>,
) -> Drove {
    let Shape { lane, one_deadline } = shape;
    let mut config = PolicyConfig::papers(workers);
    if admission {
        config.admission = Admission { max_queued: Some(LANE), ..Admission::default() };
    }
    tune(&mut config);
    config.sledge_batch = 1 + (seed % 5) as usize;
    let burst = lane.unwrap_or(0);
    let ull = UllConfig { threshold: 20_000, slice: 100_000, burst, admission: config.admission };
    let built = policy.build(&config);
    if lane.is_some() {
        // The policy checked inside the lane too.
        let behind = UllLane::new(Checked::new(built), ull);
        let inner: InnerCheck<UllLane<Checked<Box<dyn Policy>>>> =
            |p| (p.inner().violation().cloned(), p.inner().end().err());
        let mut d = Driver::new(behind, inner, seed, workers, ull);
        d.one_deadline = one_deadline;
        d.behind_lane = true;
        return run(d, policy, load, (runaways, demote));
    }
    let mut d = Driver::new(built, |_| (None, None), seed, workers, ull);
    d.one_deadline = one_deadline;
    run(d, policy, load, (runaways, demote))
}

/// Runs 300 requests through `d` (module doc), checking the contract at every step.
fn run<P: Policy>(
    mut d: Driver<P>,
    policy: PolicyKind,
    load: f64,
    (runaways, demote): (bool, bool),
) -> Drove {
    let workers = d.workers.len();
    let gap = (0.8 * 20_000.0 + 0.2 * 500_000.0) / (load * workers as f64);
    let mut t = 0;
    for id in 0..300u64 {
        t += (gap * 2.0 * (d.next() % 1_000) as f64 / 1_000.0) as Nanos;
        let long = d.next().is_multiple_of(5);
        let expected: Nanos = if long { 500_000 } else { 20_000 };
        // Estimates are off by up to half either way.
        let mut actual = expected / 2 + d.next() % expected;
        if runaways && d.next().is_multiple_of(10) {
            actual = 20 * expected;
        }
        let deadline = expected * (2 + d.next() % 18);
        let deadline = d.one_deadline.unwrap_or(deadline);
        let class = u16::from(long);
        let overrun = if demote { Overrun::Demote } else { Overrun::Kill };
        let req = Request::new(RequestId(id), FunctionId(u32::from(long)), t, deadline, expected)
            .with_class(class)
            .with_overrun(overrun)
            .with_ull(long && id % 7 == 0);
        d.requests.push(req);
        d.execution.push(actual);
        d.at(t, Due::Arrival(id));
    }
    while let Some(Reverse((at, _, due))) = d.due.pop() {
        d.now = at;
        d.step(due);
        if let Some(v) = d.policy.violation() {
            panic!("{policy}: {v} at t={at} ns");
        }
        if let (Some(v), _) = (d.inner)(d.policy.policy()) {
            panic!("{policy} inside the uLL lane: {v} at t={at} ns");
        }
        if matches!(due, Due::Arrival(_) | Due::Tick) {
            d.late_waits += d.waiting_behind_late();
        }
    }
    if let Err(v) = d.policy.end() {
        panic!("{policy}: {v}");
    }
    if let (_, Some(v)) = (d.inner)(d.policy.policy()) {
        panic!("{policy} inside the uLL lane: {v}");
    }
    Drove {
        completed: d.completed,
        stopped: d.stopped,
        late: d.late,
        late_waits: d.late_waits,
        ahead_of_ull: d.ahead_of_ull,
        demoted: d.demoted.len(),
        demoted_completed: d.demoted_completed,
        demoted_rejected: d.demoted_rejected,
        answered_with_room: d.answered_with_room,
        followed: d.followed,
        claimed: d.claimed,
        unreachable: d.unreachable,
        claimed_on_view: d.claimed_on_view,
    }
}

#[test]
fn the_driver_completes_and_preempts() {
    // The premise of the property below: requests run, and preemptions land (before and after
    // the request started).
    for policy in [PolicyKind::SledgeScale, PolicyKind::Shinjuku, PolicyKind::Srpt, PolicyKind::Sfs]
    {
        let d = drive(policy, 7, 2, 1.2, false, (false, false));
        assert_eq!(d.completed, 300, "{policy}: every request completes");
        assert!(d.stopped > 10, "{policy}: only {} preemptions", d.stopped);
    }
}

#[test]
fn a_request_past_its_deadline_never_keeps_others_waiting_on_its_worker() {
    let (mut late, mut waits_without) = (0, 0);
    for seed in 1..=24u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 3) as usize, 0.5 + (x / 3 % 8) as f64 / 10.0);
        let d = drive(PolicyKind::SledgeScale, x, workers, load, true, (true, false));
        assert_eq!(d.late_waits, 0, "seed {seed}: {d:?}");
        late += d.late;
        // The paper's SledgeScale (no shedding) lets them wait: the property is not vacuous.
        waits_without +=
            drive(PolicyKind::SledgeScale, x, workers, load, false, (true, false)).late_waits;
    }
    assert!(late > 0, "runaways were answered late");
    assert!(waits_without > 0, "without shedding, requests waited behind late runs");
}

#[test]
fn what_the_backlog_refuses_the_policy_refuses() {
    // The driver checks every arrival (in every test here): when the backlog the policy gave
    // after its last event says a front end may refuse it, the policy refuses it. Here the
    // claim is exercised past capacity, on one to three workers, with batches, runaways and the
    // uLL lane, so that it is not vacuous.
    let (mut claimed, mut unreachable, mut on_view) = (0, 0, 0);
    for seed in 1..=24u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 3) as usize, 1.0 + (x / 3 % 20) as f64 / 10.0);
        let window = [0, 100_000, 1_000_000][(seed % 3) as usize];
        // Queues bounded by time only (as in `luge serve`, whose count cap is far above what a
        // deadline's worth of these requests needs).
        let batched = |c: &mut PolicyConfig| {
            c.batch_window = window;
            c.admission.max_queued = None;
        };
        // One deadline for all (as for one function's requests) on most seeds, so that a
        // newcomer goes behind everything held; each its own on the others.
        let one_deadline = (!seed.is_multiple_of(3)).then_some(2_000_000 + 1_000_000 * (x % 8));
        let shape = Shape { lane: seed.is_multiple_of(4).then_some(0), one_deadline };
        for policy in [PolicyKind::SledgeScale, PolicyKind::SledgeScaleSteal] {
            let runaways = seed.is_multiple_of(5);
            let d =
                drive_with(policy, x, (workers, load), true, (runaways, false), shape, &batched);
            claimed += d.claimed;
            unreachable += d.unreachable;
            on_view += d.claimed_on_view;
        }
    }
    assert!(on_view > 10, "only {on_view} arrivals were refused for what was handed over before");
    assert!(
        claimed > 300 && 2 * claimed > unreachable,
        "only {claimed} of the {unreachable} arrivals refused at the current load were refused on \
         the backlog"
    );
}

#[test]
fn every_policy_keeps_the_contract_without_the_simulator() {
    // Workloads of 1 to 5 workers, 0.3 to 1.5 load per worker, admission on and off.
    for seed in 1..=32u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 5) as usize, 0.3 + (x / 5 % 13) as f64 / 10.0);
        for policy in PolicyKind::ALL {
            let (admission, runaways, demote) = (seed % 2 == 0, seed % 4 == 0, seed % 3 == 0);
            drive(policy, x, workers, load, admission, (runaways, demote));
        }
    }
}

#[test]
fn timeline_workers_keep_the_contract() {
    // CT-EDF as the early-binding workers' queue (Edge-RT §IV-C): quanta from 5 µs (a 5 ms
    // horizon, so long deadlines are clamped at its end) to 500 µs (Edge-RT's; most of these
    // deadlines share a quantum), with and without admission, shedding and demotion, and behind
    // the uLL lane. The checker holds each run to EDF within the quantum.
    for seed in 1..=24u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 4) as usize, 0.3 + (x / 4 % 13) as f64 / 10.0);
        let window = [5_000, 50_000, 500_000][(seed % 3) as usize];
        let timeline = |c: &mut PolicyConfig| {
            c.worker_queue = QueueKind::Timeline(CtEdfConfig { delta_window: window });
        };
        drive_early((seed, x), (workers, load), 4, &timeline);
    }
}

/// Drives every early-binding policy, its configuration `tune`d, on the workload of `x`: with
/// admission on even `seed`s, runaways every `runaway_every`-th, demotion every 5th and the uLL
/// lane every 6th; without admission or runaways every request must complete. Returns the
/// followers that started.
fn drive_early(
    (seed, x): (u64, u64),
    (workers, load): (usize, f64),
    runaway_every: u64,
    tune: Tune<'_>,
) -> usize {
    let mut followed = 0;
    for policy in EARLY {
        let admission = seed.is_multiple_of(2);
        let (runaways, demote) = (seed.is_multiple_of(runaway_every), seed.is_multiple_of(5));
        let burst = seed.is_multiple_of(6).then_some(0);
        let d = drive_with(
            policy,
            x,
            (workers, load),
            admission,
            (runaways, demote),
            lane(burst),
            tune,
        );
        if !admission && !runaways {
            assert_eq!(d.completed, 300, "{policy} seed {seed}: every request completes");
        }
        followed += d.followed;
    }
    followed
}

#[test]
fn batches_keep_the_contract_and_run_back_to_back() {
    // Deadline-limited batching (Edge-RT §IV-A) on every early-binding policy, on both run
    // queues, with admission, runaways, demotion and the uLL lane mixed in: every follower the
    // driver starts unasked, and every batch it discards on a preemption, keeps the contract;
    // without admission every request completes.
    let mut followed = 0;
    for seed in 1..=24u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 3) as usize, 0.6 + (x / 3 % 10) as f64 / 10.0);
        let window = [100_000, 1_000_000, 10_000_000][(seed % 3) as usize];
        let timeline = seed % 4 == 0;
        let batched = |c: &mut PolicyConfig| {
            c.batch_window = window;
            c.batch_max = 1 + (seed % 8) as usize;
            if timeline {
                c.worker_queue = QueueKind::Timeline(CtEdfConfig { delta_window: 50_000 });
            }
        };
        followed += drive_early((seed, x), (workers, load), 3, &batched);
    }
    assert!(followed > 1_000, "batches ran back to back: {followed} followers");
}

#[test]
fn demoted_requests_run_late_and_never_keep_on_time_requests_waiting() {
    // Edge-RT §IV-C: with demotion asked for, what overran its deadline (or can no longer make
    // it) runs in the best-effort lane instead of being answered: every demoted request completes
    // (the contract checker also holds that a demoted request never runs on an EDF worker with
    // on-time work bound to it), and on SledgeScale an arrival or the lane's quantum takes the
    // worker back from it at once.
    let mut demoted = 0;
    for seed in 1..=24u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 3) as usize, 0.5 + (x / 3 % 8) as f64 / 10.0);
        for policy in [PolicyKind::SledgeScale, PolicyKind::SledgeScaleSteal, PolicyKind::Lld] {
            let d = drive(policy, x, workers, load, true, (true, true));
            assert_eq!(d.demoted_rejected, 0, "{policy} seed {seed}: {d:?}");
            assert_eq!(d.demoted_completed, d.demoted, "{policy} seed {seed}: {d:?}");
            // Only a full lane sends them back to being answered.
            assert_eq!(d.answered_with_room, 0, "{policy} seed {seed}: {d:?}");
            if policy != PolicyKind::Lld {
                // rr/jsq/lld re-evaluate only at their quantum boundary, by design.
                assert_eq!(d.late_waits, 0, "{policy} seed {seed}: {d:?}");
            }
            demoted += d.demoted;
        }
    }
    assert!(demoted > 0, "requests were demoted");
}

#[test]
fn behind_the_ull_lane_every_policy_keeps_the_contract_and_nothing_starts_while_ull_waits() {
    // HORSE §4.1.3: with the lane, a uLL request waits only for the uLL requests ahead of it; every
    // policy, checked outside the lane and inside it, with the short requests (and one long
    // request in seven, declared) in the lane, and runaways that outrun the lane's slice.
    let mut stopped = 0;
    for seed in 1..=16u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 4) as usize, 0.3 + (x / 4 % 13) as f64 / 10.0);
        for policy in PolicyKind::ALL {
            let (admission, runaways) = (seed % 2 == 0, seed % 3 == 0);
            let d = drive_with(
                policy,
                x,
                (workers, load),
                admission,
                (runaways, false),
                lane(Some(0)),
                TREE,
            );
            assert_eq!(d.ahead_of_ull, 0, "{policy} seed {seed}: {d:?}");
            if !admission {
                assert_eq!(d.completed, 300, "{policy} seed {seed}: every request completes");
            }
            stopped += d.stopped;
        }
    }
    assert!(stopped > 100, "the lane borrowed workers: {stopped} preemptions");
}

#[test]
fn without_the_lane_other_requests_start_while_ull_requests_wait() {
    // The property above is not vacuous: the same loads without the lane start other requests
    // ahead of waiting short ones.
    let mut ahead = 0;
    for seed in 1..=8u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let d = drive(PolicyKind::SledgeScale, x, 1, 1.1, false, (false, false));
        ahead += d.ahead_of_ull;
    }
    assert!(ahead > 0);
}

#[test]
fn with_a_share_bound_the_lane_gives_a_waiting_run_its_turn_and_keeps_the_contract() {
    // The bound lets the policy's waiting run start after a burst of uLL requests, so other
    // requests now start while uLL requests wait — which the unbounded lane never allows —
    // and every policy still keeps the contract, inside and outside the lane.
    let mut turns = 0;
    for seed in 1..=16u64 {
        let x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 16;
        let (workers, load) = (1 + (x % 3) as usize, 0.8 + (x / 3 % 5) as f64 / 10.0);
        for policy in PolicyKind::ALL {
            let burst = Some(2);
            let d = drive_with(
                policy,
                x,
                (workers, load),
                seed % 2 == 0,
                (true, false),
                lane(burst),
                TREE,
            );
            if seed % 2 == 1 {
                assert_eq!(d.completed, 300, "{policy} seed {seed}: every request completes");
            }
            turns += d.ahead_of_ull;
        }
    }
    assert!(turns > 0, "the bound gave waiting runs their turn");
}
