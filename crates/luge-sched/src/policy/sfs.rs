//! `sfs`: SFS (§V), the FILTER policy ("First In but Longer jobs To
//! Extra Runqueue") for functions whose execution time is unknown. It never reads
//! `Request::expected`.
//!
//! - **Level 1, FILTER** (§V-B): one global FIFO queue; a request runs for at most the time slice
//!   `S` and is then demoted to level 2 (§V-B, case 4.2). A FILTER request is preempted only when
//!   its slice is used up; FILTER requests never preempt each other.
//! - **Level 2, fair share** (§V-C, last paragraph): SFS hands demoted functions to Linux CFS on
//!   the same cores, at lower priority than FILTER (SCHED_NORMAL vs SCHED_FIFO, §V-B step 2).
//!   Here: round robin among demoted requests with `PolicyConfig::fair_quantum` (CFS-like), on
//!   cores that FILTER does not use. A FILTER request that finds no idle worker preempts a worker
//!   running a level-2 request (which goes back to the level-2 tail), as a SCHED_FIFO process
//!   takes the core from a SCHED_NORMAL one.
//! - **Time slice** (§V-C): `S = mean IAT of the last N arrivals × cores`, recomputed every N
//!   arrivals (`PolicyConfig::sfs_window`, N = 100). Before the first full window, the mean of the
//!   inter-arrival times seen so far (once there are two arrivals), else
//!   `PolicyConfig::sfs_initial_slice`.
//! - **Overload** (§V-E): when a worker is about to start a FILTER request whose queueing delay
//!   (now − arrival) is at least `O × S` (`PolicyConfig::sfs_overload_factor`, O = 3), the request
//!   bypasses FILTER and goes to the level-2 tail.
//!
//! # What is approximate versus SFS
//!
//! - Level 2 is round robin with a fixed quantum over one central queue, not CFS's virtual-runtime
//!   order with per-core run queues; a level-2 request may resume on another core.
//! - When a FILTER slice expires and nothing waits (both queues empty), the request is demoted
//!   *in place*: it keeps its core and continues as a level-2 request with a fresh quantum, like
//!   SFS changing the process's policy to CFS without a context switch. When something waits, it
//!   is preempted and goes to the level-2 tail.
//! - Each FILTER run uses the `S` in force when it was started (SFS restarts the worker's slice
//!   timer per request); a later change of `S` does not move a running request's expiry.
//! - Inter-arrival times are measured on the driver's clock at `Arrival` (rejected arrivals count:
//!   they are load too) and `S` is floored at 1 ns. I/O blocking (§V-D) does not exist here:
//!   requests are CPU bound.
//! - A FILTER arrival preempts at most one level-2 worker, and none if the preemptions already in
//!   flight will free enough workers for the waiting FILTER requests; among level-2 workers it
//!   picks the one that has run longest in its current quantum (lowest-numbered on ties).

use std::collections::VecDeque;

use super::algorithm;
use super::core::{Cores, SliceEnd, take_one};
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request};

/// The level a running request is scheduled at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    /// Level 1: FILTER, bounded by the slice `S`.
    Filter,
    /// Level 2: fair share (round robin with the fair quantum).
    Fair,
}

/// SFS: FILTER (global FIFO with slice `S`) over a round-robin fair-share level; see the
/// module docs.
#[derive(Debug, Clone)]
pub struct Sfs {
    cores: Cores,
    /// Per worker: level of the running request (meaningful while one runs).
    level: Vec<Level>,
    /// Per worker: length of the running request's current slice or quantum.
    budget: Vec<Nanos>,
    /// Level-1 global FIFO.
    filter: VecDeque<Request>,
    /// Level-2 round-robin queue.
    fair: VecDeque<Request>,
    /// Current FILTER slice `S`.
    slice: Nanos,
    /// N.
    window: usize,
    /// O.
    overload_factor: u64,
    /// Level-2 quantum.
    quantum: Nanos,
    /// Driver time of the last arrival.
    last_arrival: Option<Nanos>,
    /// Σ and count of inter-arrival times in the current window.
    iat_sum: u128,
    iat_count: usize,
    /// A full window has been seen: `S` now changes only every N arrivals.
    full_window: bool,
    /// FILTER runs demoted to level 2 at slice expiry.
    demotions: u64,
    /// Requests that bypassed FILTER because of overload.
    bypassed: u64,
}

impl Sfs {
    /// An SFS scheduler for `config.workers` workers with `config.sfs_window`,
    /// `config.sfs_overload_factor`, `config.sfs_initial_slice` and `config.fair_quantum`.
    pub fn new(config: &PolicyConfig) -> Self {
        let cores = Cores::new("sfs", config);
        let n = cores.len();
        Self {
            cores,
            level: vec![Level::Filter; n],
            budget: vec![0; n],
            filter: VecDeque::new(),
            fair: VecDeque::new(),
            slice: config.sfs_initial_slice.max(1),
            window: config.sfs_window.max(1),
            overload_factor: config.sfs_overload_factor,
            quantum: config.fair_quantum.max(1),
            last_arrival: None,
            iat_sum: 0,
            iat_count: 0,
            full_window: false,
            demotions: 0,
            bypassed: 0,
        }
    }

    /// The current FILTER time slice `S`.
    pub fn slice(&self) -> Nanos {
        self.slice
    }

    /// Level of the request running on `worker`: 1 (FILTER) or 2 (fair share); `None` if idle.
    pub fn running_level(&self, worker: WorkerId) -> Option<u8> {
        if self.cores.is_idle(worker) {
            return None;
        }
        match self.level.get(worker)? {
            Level::Filter => Some(1),
            Level::Fair => Some(2),
        }
    }

    /// FILTER runs demoted to level 2 because their slice expired.
    pub fn demotions(&self) -> u64 {
        self.demotions
    }

    /// Requests sent straight to level 2 by overload detection.
    pub fn bypassed(&self) -> u64 {
        self.bypassed
    }

    /// Updates the inter-arrival window and `S` for an arrival at `now` (SFS §V-C).
    fn observe_arrival(&mut self, now: Nanos) {
        let previous = self.last_arrival;
        self.last_arrival = Some(previous.map_or(now, |p| p.max(now)));
        let Some(prev) = previous else { return };
        self.iat_sum = self.iat_sum.saturating_add(u128::from(now.saturating_sub(prev)));
        self.iat_count += 1;
        let full = self.iat_count >= self.window;
        if full || !self.full_window {
            let mean = self.iat_sum / self.iat_count as u128;
            let workers = self.cores.len() as u128;
            let s = mean.saturating_mul(workers);
            self.slice = Nanos::try_from(s).unwrap_or(Nanos::MAX).max(1);
        }
        if full {
            self.full_window = true;
            self.iat_sum = 0;
            self.iat_count = 0;
        }
    }

    fn start(&mut self, w: WorkerId, req: Request, level: Level, out: &mut Vec<Action>) {
        self.level[w] = level;
        self.budget[w] = match level {
            Level::Filter => self.slice,
            Level::Fair => self.quantum,
        };
        self.cores.run(w, req, out);
    }

    /// Gives the idle worker `w` its next request: the FILTER head (unless overloaded, in which
    /// case it moves to level 2 and the next head is tried), else the level-2 head.
    fn dispatch(&mut self, w: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        let limit = self.overload_factor.saturating_mul(self.slice);
        while let Some(req) = self.filter.pop_front() {
            if now.saturating_sub(req.arrival) >= limit {
                self.bypassed += 1;
                self.fair.push_back(req);
                continue;
            }
            self.start(w, req, Level::Filter, out);
            return;
        }
        if let Some(req) = self.fair.pop_front() {
            self.start(w, req, Level::Fair, out);
        }
    }

    /// Places a new FILTER request: the first idle worker, else preempt a level-2 worker.
    fn place(&mut self, req: Request, now: Nanos, out: &mut Vec<Action>) {
        self.filter.push_back(req);
        let mut victim: Option<(WorkerId, Nanos)> = None;
        let mut pending = 0usize;
        for w in 0..self.cores.len() {
            self.cores.stats.workers_inspected += 1;
            let Some(run) = self.cores.get(w) else {
                // An idle worker means both queues were empty: it runs the new request.
                self.dispatch(w, now, out);
                return;
            };
            if run.preempt_pending {
                pending += 1;
            } else if self.level[w] == Level::Fair {
                let ran = run.in_slice(now);
                if victim.is_none_or(|(_, best)| ran > best) {
                    victim = Some((w, ran));
                }
            }
        }
        if self.filter.len() > pending
            && let Some((w, _)) = victim
        {
            self.cores.preempt(w, out);
        }
    }
}

impl algorithm::Algorithm for Sfs {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Central;

    fn arrival_seen(&mut self, now: Nanos) {
        self.observe_arrival(now);
    }

    fn arrive(&mut self, now: Nanos, req: Request, out: &mut Vec<Action>) {
        self.place(req, now, out);
    }

    /// To the level-2 tail: a FILTER request preempted at the end of its slice is demoted.
    fn requeue(&mut self, worker: WorkerId, req: Request) {
        if self.level[worker] == Level::Filter {
            self.demotions += 1;
        }
        self.fair.push_back(req);
    }

    fn run_next(&mut self, worker: WorkerId, now: Nanos, out: &mut Vec<Action>) {
        self.dispatch(worker, now, out);
    }

    fn waiting(&self) -> usize {
        self.filter.len() + self.fair.len()
    }

    fn slice(&self, worker: WorkerId) -> Option<Nanos> {
        self.budget.get(worker).copied()
    }

    /// A FILTER slice used up or a level-2 quantum over: to the level-2 tail once the driver
    /// confirms if anyone waits; else the request keeps its core, a FILTER one demoted in place.
    /// One preemption per waiting request no preemption under way serves (SFS §V-B: preempted
    /// "only if it has used up the time slice" — and only for someone to take its place);
    /// demoted runs keep the best-effort lane's own quantum.
    fn tick(&mut self, now: Nanos, out: &mut Vec<Action>) {
        let waiting = self.filter.len() + self.fair.len();
        let mut unserved = waiting.saturating_sub(self.cores.preempting());
        for w in 0..self.cores.len() {
            if self.cores.get(w).is_some_and(|r| r.demoted) {
                continue;
            }
            let lengths = (self.budget[w], self.quantum);
            let ended = self.cores.end_slice(w, now, lengths, |_| take_one(&mut unserved), out);
            if ended == Some(SliceEnd::Renewed) {
                if self.level[w] == Level::Filter {
                    self.level[w] = Level::Fair;
                    self.demotions += 1;
                }
                self.budget[w] = self.quantum;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{feed, refuses_the_third, runs_executed};
    use crate::request::{FunctionId, RequestId};

    /// A request arriving at `at`, loose deadline, expected execution `e` (SFS ignores it).
    fn req(id: u64, at: Nanos, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), at, 1_000_000_000_000, e)
    }

    fn arrive(p: &mut Sfs, id: u64, at: Nanos) -> Vec<Action> {
        feed(p, at, Event::Arrival(req(id, at, 10_000_000)))
    }

    fn started(p: &mut Sfs, now: Nanos, worker: WorkerId, id: u64) -> Vec<Action> {
        feed(p, now, Event::Started { worker, id: RequestId(id) })
    }

    /// `Sfs` for `cfg` with request 1 arrived and started on worker 0 at 0.
    fn running_one(cfg: &PolicyConfig) -> Sfs {
        let mut p = Sfs::new(cfg);
        arrive(&mut p, 1, 0);
        started(&mut p, 0, 0, 1);
        p
    }

    fn preempts(out: &[Action]) -> Vec<(WorkerId, u64)> {
        out.iter()
            .filter_map(|a| match a {
                Action::Preempt { worker, id } => Some((*worker, id.0)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn slice_is_mean_inter_arrival_times_workers_after_a_window() {
        let mut cfg = PolicyConfig::with_workers(4);
        cfg.sfs_initial_slice = 777;
        let mut p = Sfs::new(&cfg);
        assert_eq!(p.slice(), 777);
        arrive(&mut p, 0, 0);
        assert_eq!(p.slice(), 777, "one arrival: the initial slice");
        // Before the first full window: the mean of what has been seen, times 4 workers.
        arrive(&mut p, 1, 1_000);
        assert_eq!(p.slice(), 4_000);
        arrive(&mut p, 2, 4_000);
        assert_eq!(p.slice(), 8_000, "mean IAT (1000 + 3000) / 2 × 4");
        // Complete the first window of N = 100 inter-arrival times: 1000 + 3000 + 98 × 1000.
        let mut now = 4_000;
        for i in 3..=100u64 {
            now += 1_000;
            arrive(&mut p, i, now);
        }
        let mean = 102_000 / 100;
        assert_eq!(p.slice(), mean * 4);
        // The next window arrives twice as slowly: S stays put until it is full.
        let base = now;
        for i in 101..200u64 {
            arrive(&mut p, i, base + (i - 100) * 2_000);
        }
        assert_eq!(p.slice(), mean * 4, "not recomputed mid-window");
        arrive(&mut p, 200, base + 100 * 2_000);
        assert_eq!(p.slice(), 8_000);
    }

    #[test]
    fn request_running_past_the_slice_is_preempted_and_demoted() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.sfs_initial_slice = 10_000;
        let mut p = Sfs::new(&cfg);
        assert_eq!(runs_executed(&arrive(&mut p, 1, 0)), vec![(0, 1, 0)]);
        assert_eq!(p.running_level(0), Some(1));
        assert_eq!(started(&mut p, 0, 0, 1), vec![Action::WakeAt(10_000)]);
        // B waits in FILTER; S becomes 4 µs but A keeps the slice it started with.
        assert!(arrive(&mut p, 2, 4_000).is_empty());
        assert_eq!(p.slice(), 4_000);
        assert!(feed(&mut p, 9_999, Event::Tick).is_empty());
        assert_eq!(preempts(&feed(&mut p, 10_000, Event::Tick)), vec![(0, 1)]);
        assert_eq!(p.stats().preemptions, 1);
        // A is demoted to the level-2 tail; B runs at level 1 (queued 6 µs < 3 × S).
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 10_000 };
        assert_eq!(runs_executed(&feed(&mut p, 10_000, ev)), vec![(0, 2, 0)]);
        assert_eq!(p.running_level(0), Some(1));
        assert_eq!(p.demotions(), 1);
        assert_eq!(p.fair.iter().map(|r| (r.id.0, r.executed)).collect::<Vec<_>>(), [(1, 10_000)]);
        // B finishes within its slice; A resumes at level 2 with the fair quantum.
        started(&mut p, 10_000, 0, 2);
        let out =
            feed(&mut p, 11_000, Event::Completed { worker: 0, id: RequestId(2), executed: 1 });
        assert_eq!(runs_executed(&out), vec![(0, 1, 10_000)]);
        assert_eq!(p.running_level(0), Some(2));
        assert_eq!(started(&mut p, 11_000, 0, 1), vec![Action::WakeAt(11_000 + 1_000_000)]);
    }

    #[test]
    fn slice_expiry_with_nothing_waiting_demotes_in_place() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.sfs_initial_slice = 10_000;
        let mut p = running_one(&cfg);
        assert_eq!(feed(&mut p, 10_000, Event::Tick), vec![Action::WakeAt(1_010_000)]);
        assert_eq!(p.running_level(0), Some(2));
        assert_eq!((p.demotions(), p.stats().preemptions), (1, 0));
        // Level 2 alone: the quantum is renewed.
        assert_eq!(feed(&mut p, 1_010_000, Event::Tick), vec![Action::WakeAt(2_010_000)]);
    }

    #[test]
    fn filter_arrival_preempts_fair_share_but_never_filter() {
        let mut p = Sfs::new(&PolicyConfig::with_workers(2));
        assert_eq!(p.slice(), 1_000_000);
        // A runs on worker 0 and is demoted in place after 1 ms: worker 0 runs level 2.
        assert_eq!(runs_executed(&arrive(&mut p, 1, 0)), vec![(0, 1, 0)]);
        started(&mut p, 0, 0, 1);
        feed(&mut p, 1_000_000, Event::Tick);
        assert_eq!(p.running_level(0), Some(2));
        // B takes the idle worker 1 at level 1.
        assert_eq!(runs_executed(&arrive(&mut p, 2, 1_000_000)), vec![(1, 2, 0)]);
        started(&mut p, 1_000_000, 1, 2);
        assert_eq!(p.running_level(1), Some(1));
        // C finds no idle worker: it preempts the level-2 worker, not the FILTER one.
        let out = arrive(&mut p, 3, 1_000_100);
        assert_eq!(preempts(&out), vec![(0, 1)]);
        assert!(runs_executed(&out).is_empty());
        // D: the only level-2 worker is already being preempted; FILTER is never preempted.
        assert!(arrive(&mut p, 4, 1_000_200).is_empty());
        assert_eq!(p.stats().preemptions, 1);
        assert_eq!(p.stats().workers_inspected, 1 + 2 + 2 + 2);
        // Worker 0 frees: C (FIFO head) runs at level 1; A waits at the level-2 tail.
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 1_000_300 };
        assert_eq!(runs_executed(&feed(&mut p, 1_000_300, ev)), vec![(0, 3, 0)]);
        assert_eq!(p.running_level(0), Some(1));
        assert_eq!(p.demotions(), 1, "A was demoted once, at its slice expiry");
        assert_eq!((p.filter.len(), p.fair.len()), (1, 1));
    }

    #[test]
    fn overload_sends_a_long_queued_request_straight_to_level_2() {
        let mut p = running_one(&PolicyConfig::with_workers(1));
        arrive(&mut p, 2, 1_000);
        assert_eq!(p.slice(), 1_000);
        arrive(&mut p, 3, 2_000);
        assert_eq!(p.slice(), 1_000);
        // At 4 µs, B has queued 3 µs = 3 × S: it bypasses FILTER; C (2 µs) runs at level 1.
        let out =
            feed(&mut p, 4_000, Event::Completed { worker: 0, id: RequestId(1), executed: 4 });
        assert_eq!(runs_executed(&out), vec![(0, 3, 0)]);
        assert_eq!(p.running_level(0), Some(1));
        assert_eq!(p.bypassed(), 1);
        assert_eq!(p.fair.iter().map(|r| r.id.0).collect::<Vec<_>>(), [2]);
        // Once C completes, B runs at level 2.
        let out =
            feed(&mut p, 5_000, Event::Completed { worker: 0, id: RequestId(3), executed: 1 });
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        assert_eq!(p.running_level(0), Some(2));
    }

    #[test]
    fn just_below_the_overload_threshold_stays_in_filter() {
        let mut p = running_one(&PolicyConfig::with_workers(1));
        arrive(&mut p, 2, 1_000);
        let out =
            feed(&mut p, 3_999, Event::Completed { worker: 0, id: RequestId(1), executed: 4 });
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        assert_eq!((p.running_level(0), p.bypassed()), (Some(1), 0));
    }

    #[test]
    fn level_2_round_robins_with_the_fair_quantum() {
        let mut cfg = PolicyConfig::with_workers(1);
        cfg.sfs_initial_slice = 10_000;
        cfg.fair_quantum = 50_000;
        let mut p = running_one(&cfg);
        arrive(&mut p, 2, 10_000);
        assert_eq!(p.slice(), 10_000);
        // Request 1 used its (initial) slice: demoted, 2 runs at level 1.
        assert_eq!(preempts(&feed(&mut p, 10_000, Event::Tick)), vec![(0, 1)]);
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 10_000 };
        assert_eq!(runs_executed(&feed(&mut p, 10_000, ev)), vec![(0, 2, 0)]);
        started(&mut p, 10_000, 0, 2);
        assert_eq!(preempts(&feed(&mut p, 20_000, Event::Tick)), vec![(0, 2)]);
        let ev = Event::Preempted { worker: 0, id: RequestId(2), executed: 10_000 };
        assert_eq!(runs_executed(&feed(&mut p, 20_000, ev)), vec![(0, 1, 10_000)]);
        // Level 2: alternate every 50 µs.
        assert_eq!(started(&mut p, 20_000, 0, 1), vec![Action::WakeAt(70_000)]);
        assert!(preempts(&feed(&mut p, 60_000, Event::Tick)).is_empty());
        assert_eq!(preempts(&feed(&mut p, 70_000, Event::Tick)), vec![(0, 1)]);
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 60_000 };
        assert_eq!(runs_executed(&feed(&mut p, 70_000, ev)), vec![(0, 2, 10_000)]);
        assert_eq!(p.running_level(0), Some(2));
        assert_eq!(p.demotions(), 2);
    }

    #[test]
    fn simultaneous_arrivals_floor_the_slice_at_one_nanosecond() {
        let mut p = Sfs::new(&PolicyConfig::with_workers(2));
        arrive(&mut p, 1, 5);
        arrive(&mut p, 2, 5);
        assert_eq!(p.slice(), 1);
    }

    #[test]
    fn completion_that_beats_the_preemption_and_stale_events_are_handled() {
        let mut p = running_one(&PolicyConfig::with_workers(1));
        feed(&mut p, 1_000_000, Event::Tick);
        assert_eq!(p.running_level(0), Some(2));
        let out = arrive(&mut p, 2, 1_000_000);
        assert_eq!(preempts(&out), vec![(0, 1)]);
        // The level-2 request completes before the preemption lands.
        let out = feed(
            &mut p,
            1_000_001,
            Event::Completed { worker: 0, id: RequestId(1), executed: 1_000_001 },
        );
        assert_eq!(runs_executed(&out), vec![(0, 2, 0)]);
        assert_eq!(p.running_level(0), Some(1));
        // Stale events change nothing.
        let ev = Event::Preempted { worker: 0, id: RequestId(1), executed: 1_000_001 };
        assert!(feed(&mut p, 1_000_002, ev).is_empty());
        assert!(started(&mut p, 1_000_002, 0, 1).is_empty());
        assert!(feed(&mut p, 1_000_002, Event::Tick).is_empty(), "not started yet: no timer");
        assert_eq!(p.queued(), 0);
        assert_eq!(p.running_level(0), Some(1));
    }

    #[test]
    fn admission_rejects_and_counts() {
        let p = refuses_the_third(Sfs::new, [1, 2, 3].map(|id| req(id, 0, 10_000_000)));
        let s = p.stats();
        assert_eq!((s.arrivals, s.rejected), (3, 1));
        assert_eq!((p.name(), p.local_order()), ("sfs", LocalOrder::Central));
    }
}
