//! The uLL lane (HORSE §4.1.3): ultra-low-latency requests — functions of a few µs, declared
//! (`Request::ull`) or estimated within a threshold — wait in a run queue of their own, ahead of
//! every other request, and never behind another request's time slice.
//!
//! [`UllLane`] wraps any policy. The wrapped ("inner") policy schedules everything else as if
//! the lane did not exist; the lane takes workers from it for short moments:
//! - a uLL arrival runs at once on an idle worker; with none idle, the lane preempts the inner
//!   policy's run with the most slack (the latest deadline) and holds it back — the inner policy
//!   is not told, it sees its request as still running — runs the lane's requests there, first
//!   in first out, and then resumes the held request;
//! - an inner `Run` for a worker the lane occupies waits until the lane lets the worker go (to
//!   the inner policy it is a run that has not started yet), and an inner `Preempt` of a run the
//!   lane holds back is answered to it at once;
//! - a uLL request still running after the lane's slice is preempted and handed to the inner
//!   policy as an ordinary arrival with its execution so far: a function that is not short after
//!   all cannot hold a worker from the lane.
//!
//! So a uLL request waits for at most the other uLL requests ahead of it and one preemption
//! (the next epoch tick of a running guest, in the runtime), whatever the inner policy queued.
//! The price is the inner policy's view of time: a run it believes running made no progress
//! while the lane held it back, so its estimate of that run's remaining work is short by the
//! lane's work, at most one slice per uLL request. The lane refuses what the inner policy's
//! admission would refuse on the request alone (infeasible, more than `max_queued` waiting) and,
//! with shedding on, answers a uLL request whose deadline it can no longer meet before it runs.
//!
//! To a driver the wrapper is one policy of the same contract. Its workers no longer run their
//! own queue's EDF head first (the lane comes first), so it reports [`LocalOrder::Central`]; the
//! inner policy's own contract can be checked by wrapping it in [`Checked`](crate::Checked)
//! inside the lane, as the conformance tests do.

use std::collections::VecDeque;

use crate::backlog::Backlog;
use crate::policy::{Action, Admission, Event, LocalOrder, Policy, PolicyStats, RejectReason};
use crate::request::{Nanos, Overrun, Request, RequestId};

/// Settings of the uLL lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UllConfig {
    /// A request whose known estimate is at most this is ultra-low-latency even if its function
    /// is not declared so (HORSE §2: its Category 1, ≤ 20 µs). 0 = only declared functions.
    pub threshold: Nanos,
    /// How long a uLL request may run before it is handed to the inner policy (100 µs).
    pub slice: Nanos,
    /// The lane's share bound: on a worker where the inner policy's run waits (held back or
    /// not started), at most this many uLL requests run in a row; then that run has the worker
    /// for at least a slice before the lane may take it again (16). 0: no bound.
    pub burst: u32,
    /// Refusal and shedding of uLL requests (the inner policy's, usually).
    pub admission: Admission,
}

impl Default for UllConfig {
    fn default() -> Self {
        Self { threshold: 20_000, slice: 100_000, burst: 16, admission: Admission::default() }
    }
}

impl UllConfig {
    /// Whether `req` belongs in the lane: declared uLL, or a known estimate within the threshold
    /// that is not a client's figure ([`Request::client_estimate`]).
    pub fn is_ull(&self, req: &Request) -> bool {
        let node = (req.estimate_known && !req.client_estimate).then_some(req.expected);
        self.takes(req.ull, node, None)
    }

    /// Whether a request takes the lane: its function is `declared` uLL, or the node's own known
    /// estimate of it (`node`) is within the threshold — and then, if it carries a client's
    /// estimate (`client`), that too: a client's figure can leave a request out, never bring
    /// one in.
    pub fn takes(&self, declared: bool, node: Option<Nanos>, client: Option<Nanos>) -> bool {
        declared
            || (self.threshold > 0
                && node.is_some_and(|n| n <= self.threshold)
                && client.is_none_or(|c| c <= self.threshold))
    }
}

/// What the lane did, beyond the inner policy's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UllStats {
    /// uLL arrivals.
    pub arrivals: u64,
    /// uLL requests run to completion.
    pub completed: u64,
    /// Inner runs preempted and held back for the lane.
    pub borrowed: u64,
    /// uLL requests refused on arrival or shed.
    pub rejected: u64,
    /// Of `rejected`, those shed when their turn came (their deadline out of reach by then).
    pub shed: u64,
    /// uLL requests that outran the slice and went to the inner policy.
    pub overran: u64,
    /// uLL requests the lane could not serve within their deadline whose function demotes
    /// (`Overrun::Demote`), handed to the inner policy instead of refused or shed (Edge-RT
    /// §IV-C): it runs them late.
    pub demoted: u64,
}

/// The inner policy's run on a worker.
#[derive(Debug, Clone, Copy)]
struct InnerRun {
    /// The request as last run, with its execution so far.
    req: Request,
    state: InnerState,
    /// The inner policy asked to preempt it.
    preempt: bool,
    /// The inner policy was told it started.
    started: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InnerState {
    /// The inner policy ran it, the lane has the worker: not handed to the driver yet.
    Waiting,
    /// The driver runs it.
    Out,
    /// Preempted for the lane; the inner policy believes it runs.
    HeldBack,
}

/// What the driver runs on a worker, as the wrapper told it.
#[derive(Debug, Clone, Copy)]
struct Outer {
    id: RequestId,
    /// A request of the lane, whole (for an overrun hand-over); `None`: the inner policy's.
    ull: Option<Request>,
    /// When the driver reported it started.
    since: Option<Nanos>,
    /// A `Preempt` of it is on its way.
    preempt_asked: bool,
    /// That preemption was the lane's (to borrow the worker or end a uLL slice).
    by_lane: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Worker {
    outer: Option<Outer>,
    inner: Option<InnerRun>,
    /// uLL requests started here in a row while the inner policy's run waited here.
    streak: u32,
    /// The inner policy's run got the worker back from a full burst: the lane does not take it
    /// before this time.
    protected_until: Nanos,
}

/// A policy with a uLL lane in front of it (module doc).
#[derive(Debug, Clone)]
pub struct UllLane<P> {
    inner: P,
    config: UllConfig,
    /// uLL requests waiting, first in first out.
    lane: VecDeque<Request>,
    workers: Vec<Worker>,
    stats: UllStats,
    /// Events for the inner policy that arose while handling its actions.
    pending: VecDeque<Event>,
    /// The slice end a tick was last asked for ([`UllLane::arm`]).
    armed: Option<Nanos>,
    /// Buffer for the inner policy's actions ([`UllLane::feed`]).
    scratch: Vec<Action>,
    /// Per worker, the inner policy's batch behind its run there (`Follow`, Edge-RT §IV-A) that
    /// the driver does not hold: committed while the lane had the worker or a preemption was on
    /// its way. They reach the driver as `Run` and `Follow`s when the lane gives the worker back.
    follow: Vec<VecDeque<Request>>,
    /// Per worker, the inner policy's followers passed on to the driver (behind an inner run it
    /// runs), in order.
    sent: Vec<VecDeque<Request>>,
    /// [`Self::feed`] is draining `pending`: a nested call only queues its event.
    feeding: bool,
}

impl<P: Policy> UllLane<P> {
    /// `inner` behind a lane of `config`; `inner` has not been fed any event yet.
    pub fn new(inner: P, config: UllConfig) -> Self {
        let workers = inner.workers().max(1);
        // A slice of 0 would end every uLL run before it starts (and ask for a tick at `now`
        // at every tick until it does).
        let config = UllConfig { slice: config.slice.max(1), ..config };
        Self {
            inner,
            config,
            lane: VecDeque::new(),
            workers: vec![Worker::default(); workers],
            stats: UllStats::default(),
            pending: VecDeque::new(),
            armed: None,
            scratch: Vec::new(),
            follow: vec![VecDeque::new(); workers],
            sent: vec![VecDeque::new(); workers],
            feeding: false,
        }
    }

    /// The wrapped policy.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The lane's own counters.
    pub fn ull_stats(&self) -> UllStats {
        self.stats
    }

    /// uLL requests waiting in the lane.
    pub fn waiting(&self) -> usize {
        self.lane.len()
    }

    fn arrival(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>) {
        self.stats.arrivals += 1;
        if let Some(reason) = self.config.admission.check(now, &req, self.lane.len()) {
            // Not for a full lane (`max_queued`): the inner policy would not demote that either.
            if req.on_overrun == Overrun::Demote && reason != RejectReason::QueueFull {
                // The inner policy demotes what cannot make its deadline (a function whose
                // estimate shifted past it included): refusing it here would refuse it forever.
                self.stats.demoted += 1;
                self.feed(now, Event::Arrival(req), out);
                return;
            }
            self.stats.rejected += 1;
            out.push(Action::Reject { req, reason });
            return;
        }
        self.lane.push_back(req);
        if let Some(w) = self.workers.iter().position(|w| w.outer.is_none()) {
            self.next(now, w, out);
            return;
        }
        self.borrow(now, out);
    }

    /// With uLL requests waiting and no idle worker, preempts the inner policy's run with the
    /// latest deadline (not one protected by the share bound) — unless enough borrows are on
    /// their way already.
    fn borrow(&mut self, now: Nanos, out: &mut Vec<Action>) {
        let borrowing = self.workers.iter().filter(|w| w.outer.is_some_and(|o| o.by_lane)).count();
        if borrowing >= self.lane.len() {
            return;
        }
        let victim = (0..self.workers.len())
            .filter(|&w| {
                let slot = &self.workers[w];
                slot.outer.is_some_and(|o| o.ull.is_none() && !o.preempt_asked)
                    && slot.inner.is_some_and(|i| i.state == InnerState::Out)
                    && now >= slot.protected_until
            })
            .max_by_key(|&w| self.workers[w].inner.map_or(0, |i| i.req.absolute_deadline));
        if let Some(w) = victim
            && let Some(o) = self.workers[w].outer.as_mut()
        {
            o.preempt_asked = true;
            o.by_lane = true;
            self.stats.borrowed += 1;
            out.push(Action::Preempt { worker: w, id: o.id });
        }
    }

    /// Gives the idle worker `w` its next run: the lane's head (shedding the lost on the way),
    /// else the inner policy's run there, held back or waiting, if any.
    fn next(&mut self, now: Nanos, w: usize, out: &mut Vec<Action>) {
        let mut demoted = Vec::new();
        self.next_run(now, w, out, &mut demoted);
        // What the lane would have shed but whose function demotes: the inner policy's, once
        // this worker has its run.
        for req in demoted {
            self.stats.demoted += 1;
            self.feed(now, Event::Arrival(req), out);
        }
    }

    /// [`next`](Self::next), with the lane's requests that can no longer make their deadline
    /// but demote put in `demoted` instead of shed.
    fn next_run(
        &mut self,
        now: Nanos,
        w: usize,
        out: &mut Vec<Action>,
        demoted: &mut Vec<Request>,
    ) {
        debug_assert!(self.workers[w].outer.is_none());
        // The share bound: a full burst while the inner policy's run waits here gives it back.
        let inner_waits = self.workers[w].inner.is_some();
        let burst = self.config.burst;
        if !inner_waits {
            self.workers[w].streak = 0;
        } else if burst > 0 && self.workers[w].streak >= burst && !self.lane.is_empty() {
            self.workers[w].protected_until = now.saturating_add(self.config.slice);
            self.workers[w].streak = 0;
            self.resume_inner(w, out);
            return;
        }
        while let Some(req) = self.lane.pop_front() {
            let admission = &self.config.admission;
            if admission.shed && now.saturating_add(req.own_work()) > req.absolute_deadline {
                if req.on_overrun == Overrun::Demote {
                    demoted.push(req);
                    continue;
                }
                self.stats.rejected += 1;
                self.stats.shed += 1;
                out.push(Action::Reject { req, reason: RejectReason::Shed });
                continue;
            }
            let outer = Outer {
                id: req.id,
                ull: Some(req),
                since: None,
                preempt_asked: false,
                by_lane: false,
            };
            self.workers[w].outer = Some(outer);
            if inner_waits {
                self.workers[w].streak += 1;
            }
            out.push(Action::Run { worker: w, req });
            return;
        }
        self.resume_inner(w, out);
    }

    /// Hands the idle worker `w` to the inner policy's run there, held back or waiting, if any.
    fn resume_inner(&mut self, w: usize, out: &mut Vec<Action>) {
        let slot = &mut self.workers[w];
        if let Some(inner) = slot.inner.as_mut() {
            inner.state = InnerState::Out;
            slot.streak = 0;
            let id = inner.req.id;
            slot.outer =
                Some(Outer { id, ull: None, since: None, preempt_asked: false, by_lane: false });
            out.push(Action::Run { worker: w, req: inner.req });
            // The batch the inner policy committed behind it goes out with it.
            while let Some(req) = self.follow[w].pop_front() {
                self.sent[w].push_back(req);
                out.push(Action::Follow { worker: w, req });
            }
        }
    }

    /// Feeds `event` to the inner policy and passes its actions on, with whatever they set off.
    /// Called while feeding (passing an action on gave a worker its next run, which handed a
    /// demoted uLL request over), the event waits its turn: the inner policy hears it once the
    /// actions of the event before are all passed on, in order.
    fn feed(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        self.pending.push_back(event);
        if self.feeding {
            return;
        }
        self.feeding = true;
        // The inner policy's actions, in a buffer kept across calls (no allocation per event).
        let mut actions = std::mem::take(&mut self.scratch);
        while let Some(event) = self.pending.pop_front() {
            actions.clear();
            self.inner.on_event(now, event, &mut actions);
            for &action in &actions {
                self.pass(now, action, out);
            }
        }
        actions.clear();
        self.scratch = actions;
        self.feeding = false;
    }

    /// One action of the inner policy.
    fn pass(&mut self, now: Nanos, action: Action, out: &mut Vec<Action>) {
        match action {
            Action::Run { worker, req } => {
                let Some(slot) = self.workers.get_mut(worker) else {
                    out.push(action);
                    return;
                };
                slot.inner = Some(InnerRun {
                    req,
                    state: InnerState::Waiting,
                    preempt: false,
                    started: false,
                });
                if slot.outer.is_none() {
                    self.next(now, worker, out);
                }
            }
            Action::Preempt { worker, id } => {
                let Some(slot) = self.workers.get_mut(worker) else {
                    out.push(action);
                    return;
                };
                let Some(inner) = slot.inner.as_mut().filter(|i| i.req.id == id) else {
                    out.push(action);
                    return;
                };
                match inner.state {
                    InnerState::Waiting => {
                        // It never reached the driver: it starts and stops at once, unchanged.
                        let executed = inner.req.executed;
                        if !inner.started {
                            self.pending.push_back(Event::Started { worker, id });
                        }
                        slot.inner = None;
                        self.follow[worker].clear();
                        self.pending.push_back(Event::Preempted { worker, id, executed });
                    }
                    InnerState::HeldBack => {
                        let executed = inner.req.executed;
                        slot.inner = None;
                        self.follow[worker].clear();
                        self.pending.push_back(Event::Preempted { worker, id, executed });
                    }
                    InnerState::Out => {
                        inner.preempt = true;
                        if let Some(o) = slot.outer.as_mut().filter(|o| !o.preempt_asked) {
                            o.preempt_asked = true;
                            out.push(action);
                        }
                    }
                }
            }
            Action::Follow { worker, req } => {
                let Some(slot) = self.workers.get(worker) else {
                    out.push(action);
                    return;
                };
                // Out with the inner run the driver runs, unless that run is being stopped or
                // part of the batch is still held here.
                let out_now = slot.inner.is_some_and(|i| i.state == InnerState::Out)
                    && slot.outer.is_some_and(|o| o.ull.is_none() && !o.preempt_asked)
                    && self.follow[worker].is_empty();
                if out_now {
                    self.sent[worker].push_back(req);
                    out.push(action);
                } else {
                    self.follow[worker].push_back(req);
                }
            }
            other => out.push(other),
        }
    }

    /// The worker `w` is free of the driver's run: the inner policy hears `event` (if any), and
    /// the worker gets its next run ([`UllLane::next`]: the lane first, also if the inner policy's
    /// reaction to `event` is a run there).
    fn freed(&mut self, now: Nanos, w: usize, event: Option<Event>, out: &mut Vec<Action>) {
        self.workers[w].outer = None;
        if let Some(event) = event {
            self.feed(now, event, out);
        }
        if self.workers[w].outer.is_none() {
            self.next(now, w, out);
        }
    }

    /// Whether anything waits for a worker the lane holds: a uLL request, or a run of the inner
    /// policy that the lane keeps waiting or holds back.
    fn contended(&self) -> bool {
        !self.lane.is_empty()
            || self.workers.iter().any(|w| w.inner.is_some_and(|i| i.state != InnerState::Out))
    }

    /// The end of the earliest slice of a uLL run not asked to stop yet (a run not started yet
    /// counts from `now`).
    fn slice_end(&self, now: Nanos) -> Option<Nanos> {
        let runs = self
            .workers
            .iter()
            .filter_map(|w| w.outer.filter(|o| o.ull.is_some() && !o.preempt_asked));
        runs.map(|o| o.since.unwrap_or(now).saturating_add(self.config.slice)).min()
    }

    /// Asks for a tick at the end of the earliest uLL slice while something waits: an
    /// uncontended uLL run needs no timer (most of them: they are short), so an idle node is
    /// not woken for nothing.
    fn arm(&mut self, now: Nanos, out: &mut Vec<Action>) {
        if !self.contended() {
            return;
        }
        // Also the end of a protection, if uLL requests wait for it to borrow again.
        let protected = (!self.lane.is_empty())
            .then(|| self.workers.iter().map(|w| w.protected_until).filter(|&t| t > now).min())
            .flatten();
        let end = match (self.slice_end(now), protected) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(end) = end
            && self.armed.is_none_or(|at| at > end || at <= now)
        {
            self.armed = Some(end);
            out.push(Action::WakeAt(end));
        }
    }

    /// At a tick: while something waits, ends the slice of every uLL run that outran it.
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        if self.armed.is_some_and(|at| at <= now) {
            self.armed = None;
        }
        if !self.contended() {
            return;
        }
        let slice = self.config.slice;
        for (w, slot) in self.workers.iter_mut().enumerate() {
            if let Some(o) = slot.outer.as_mut().filter(|o| o.ull.is_some() && !o.preempt_asked)
                && o.since.is_some_and(|since| now >= since.saturating_add(slice))
            {
                o.preempt_asked = true;
                o.by_lane = true;
                out.push(Action::Preempt { worker: w, id: o.id });
            }
        }
        // A protection may have ended: the waiting uLL requests borrow again.
        if !self.lane.is_empty() && self.workers.iter().all(|w| w.outer.is_some()) {
            self.borrow(now, out);
        }
    }
}

impl<P: Policy> Policy for UllLane<P> {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn workers(&self) -> usize {
        self.workers.len()
    }

    fn queued(&self) -> usize {
        self.inner.queued() + self.lane.len()
    }

    fn local_order(&self) -> LocalOrder {
        LocalOrder::Central
    }

    fn stats(&self) -> PolicyStats {
        let mut stats = self.inner.stats();
        // An overrun or demoted uLL request reached the inner policy as an arrival too.
        stats.arrivals += self.stats.arrivals - self.stats.overran - self.stats.demoted;
        stats.preemptions += self.stats.borrowed + self.stats.overran;
        stats.rejected += self.stats.rejected;
        stats.shed += self.stats.shed;
        stats
    }

    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        self.handle(now, event, out);
        self.arm(now, out);
    }

    /// The inner policy's: an arrival outside the lane goes to it unchanged. (Not for a uLL
    /// arrival, which the lane admits on its own terms.)
    fn backlog(&self, now: Nanos) -> Backlog {
        self.inner.backlog(now)
    }
}

impl<P: Policy> UllLane<P> {
    /// One event from the driver ([`Policy::on_event`] before the slice timer is armed).
    fn handle(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        match event {
            Event::Arrival(req) if self.config.is_ull(&req) => self.arrival(now, req, out),
            Event::Arrival(_) => self.feed(now, event, out),
            Event::Started { worker, id } => {
                let Some(slot) = self.workers.get_mut(worker) else { return };
                match slot.outer.as_mut() {
                    Some(o) if o.id == id => o.since = Some(now),
                    _ => return,
                }
                if let Some(inner) = slot.inner.as_mut().filter(|i| i.req.id == id && !i.started) {
                    inner.started = true;
                    self.feed(now, event, out);
                }
            }
            Event::Completed { worker, id, .. } => {
                let Some(slot) = self.workers.get_mut(worker) else { return };
                if slot.outer.is_none_or(|o| o.id != id) {
                    return;
                }
                if slot.outer.is_some_and(|o| o.ull.is_some()) {
                    self.stats.completed += 1;
                    self.freed(now, worker, None, out);
                } else if let Some(req) = self.sent[worker].pop_front() {
                    // The driver started the inner policy's next follower there at once. A
                    // borrow the lane asked of the run that completed is asked of it instead.
                    let borrow = slot.outer.is_some_and(|o| o.preempt_asked && o.by_lane);
                    let state = InnerState::Out;
                    slot.inner = Some(InnerRun { req, state, preempt: false, started: false });
                    let outer = Outer {
                        id: req.id,
                        ull: None,
                        since: None,
                        preempt_asked: borrow,
                        by_lane: borrow,
                    };
                    slot.outer = Some(outer);
                    if borrow {
                        out.push(Action::Preempt { worker, id: req.id });
                    }
                    self.feed(now, event, out);
                } else {
                    // The inner policy's next follower held here, if any, is its run now.
                    slot.inner = self.follow[worker].pop_front().map(|req| InnerRun {
                        req,
                        state: InnerState::Waiting,
                        preempt: false,
                        started: false,
                    });
                    self.freed(now, worker, Some(event), out);
                }
            }
            Event::Preempted { worker, id, executed } => {
                let Some(slot) = self.workers.get_mut(worker) else { return };
                let Some(o) = slot.outer.filter(|o| o.id == id) else { return };
                if let Some(req) = o.ull {
                    // Outran its slice: the inner policy takes it as an ordinary request.
                    self.stats.overran += 1;
                    let req = Request { executed, ..req };
                    self.freed(now, worker, Some(Event::Arrival(req)), out);
                    return;
                }
                let Some(inner) = slot.inner.as_mut() else { return };
                inner.req.executed = executed;
                if inner.preempt {
                    // The inner policy takes its batch back with the `Preempted`.
                    slot.inner = None;
                    self.follow[worker].clear();
                    self.sent[worker].clear();
                    self.freed(now, worker, Some(event), out);
                } else {
                    // Borrowed by the lane: the driver discarded the batch it held; it goes out
                    // again with the run when the lane gives the worker back.
                    inner.state = InnerState::HeldBack;
                    let mut held = std::mem::take(&mut self.sent[worker]);
                    held.append(&mut self.follow[worker]);
                    self.follow[worker] = held;
                    self.freed(now, worker, None, out);
                }
            }
            Event::Tick => {
                self.tick(now, out);
                self.feed(now, event, out);
            }
        }
    }
}

#[cfg(test)]
mod tests;
