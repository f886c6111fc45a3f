//! `darc`: Dynamic Application-aware Reserved Cores (Demoulin et al., "When Idling is Ideal",
//! SOSP'21) as SledgeScale integrates it for its comparison (SledgeScale §4,
//! "Baselines"): requests are grouped by expected execution, cores are reserved per group in
//! proportion to the group's demand, nothing is ever preempted, and "shorter groups can borrow
//! cycles from longer ones, but not vice versa" (§2.3): a long request never runs on a core
//! reserved for a shorter group, even if that core idles (§4.5, "High Bimodal": "long requests
//! cannot use the cores reserved for short requests, even if idle").
//!
//! One file on purpose (above ~600 lines): DARC's grouping, reservation and borrowing are one
//! algorithm; ~250 lines are its unit tests.
//!
//! # What is approximate versus DARC
//!
//! - **Demand.** DARC profiles each request type's mean service time and occurrence ratio and
//!   reserves `demand = ratio × mean service` cores' worth. Here demand is Σ *expected* execution
//!   (the driver's estimate, not the measured service time) of the group's last arrivals within a
//!   sliding window of [`DEMAND_WINDOW`] admitted arrivals; only the ratio between groups matters.
//! - **Rounding.** DARC rounds fractional demand with a shared "spillway" core. Here every active
//!   group gets at least one core while cores allow (the longest active group always keeps one, so
//!   every group can run somewhere), the rest go by largest remainder of the proportional quota.
//!   This reproduces SledgeScale's footnote 3 (§4.5: 2.75 / 0.56 / 2.68 CPUs → 3 / 1 / 2 cores)
//!   and the 1 + 5 split of its High Bimodal experiment.
//! - **Updates.** DARC recomputes reservations when its profiler detects a change; here the
//!   reservation is recomputed on every admitted arrival (cheap for few groups). A worker whose
//!   reservation changes keeps its running request (no preemption) and picks by its new group next.
//! - **Groups.** DARC merges types of similar service time into groups by itself; here groups are
//!   given: `PolicyConfig::darc_bounds` (expected-execution bounds) or the request's class tag,
//!   as SledgeScale "evenly divid\[es\]" each distribution into two groups (§4).
//! - **Order of service.** A freed worker serves its own group's queue first, then shorter groups,
//!   shortest first. DARC's dispatcher walks request types shortest first, which can hand a freed
//!   long core to a waiting short request ahead of a waiting long one.
//! - **Placement.** Reserved cores are contiguous, shortest group first; an arrival takes the
//!   first idle core of its own group, then of the next longer groups in order (late binding: the
//!   request stays in its group's FIFO queue until a worker is free, §3.3).

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

use super::algorithm;
use super::core::Cores;
use super::{Action, LocalOrder, PolicyConfig, WorkerId};
#[cfg(test)]
use super::{Event, Policy};
use crate::request::{Nanos, Request};

/// Admitted arrivals over which each group's demand (Σ expected execution) is measured.
pub const DEMAND_WINDOW: usize = 1_000;

/// One duration group: its FIFO queue and what has been seen of it.
#[derive(Debug, Clone)]
struct Group {
    /// Class tag (class grouping) or bound index (bound grouping).
    key: u32,
    queue: VecDeque<Request>,
    /// Arrivals ever, and their Σ expected execution (for the mean that orders groups).
    seen: u64,
    seen_work: u128,
    /// Arrivals in the demand window, and their Σ expected execution.
    window_count: usize,
    window_work: u128,
}

impl Group {
    fn new(key: u32) -> Self {
        Self { key, queue: VecDeque::new(), seen: 0, seen_work: 0, window_count: 0, window_work: 0 }
    }

    /// Observed mean expected execution, if any arrival was seen.
    fn mean(&self) -> Option<f64> {
        (self.seen > 0).then(|| self.seen_work as f64 / self.seen as f64)
    }

    /// Holds a core reservation: recent arrivals, or requests still waiting.
    fn active(&self) -> bool {
        self.window_count > 0 || !self.queue.is_empty()
    }
}

/// How a request's group is found.
#[derive(Debug, Clone)]
enum Grouping {
    /// Index of the first bound above the expected execution (sorted, deduplicated).
    Bounds(Vec<Nanos>),
    /// By class tag; maps a tag to its group index.
    Class(BTreeMap<u16, usize>),
}

/// DARC: per-group FIFO queues, cores reserved per group by demand, short groups may steal idle
/// cores of longer groups, never the reverse; run to completion.
///
/// Decisions (see the module docs for the comparison with DARC):
/// - Group of a request: with `config.darc_bounds` non-empty, the index of the first bound with
///   `expected < bound` (else the last group); otherwise `req.class`. Groups are ranked shortest
///   first by their observed mean expected execution (with bounds that is the bound order).
/// - Reservation: recomputed on each admitted arrival; active groups (arrivals in the demand
///   window or a non-empty queue) get ≥ 1 core while cores allow, the rest by largest remainder
///   of `workers × demand / Σ demand`; cores are assigned contiguously, shortest group first.
/// - Arrival: the first idle worker reserved for its group, else the first idle worker of a
///   longer group (stealing), else the tail of its group's queue. `workers_inspected` counts the
///   worker states looked at on the way.
/// - A freed worker takes the head of its own group's queue, else of a shorter group's queue
///   (shortest first), else idles — even if longer groups wait.
/// - `Preempt` is never emitted; a `Preempted` from a confused driver puts the request back at
///   the head of its group's queue so it is not lost.
#[derive(Debug, Clone)]
pub struct Darc {
    grouping: Grouping,
    groups: Vec<Group>,
    /// Rank (shortest first) → group index.
    order: Vec<usize>,
    /// Group index → rank.
    rank: Vec<usize>,
    /// Rank → reserved cores.
    reservation: Vec<usize>,
    /// Rank → first reserved worker (cores are contiguous, shortest group first).
    first_core: Vec<WorkerId>,
    /// Worker → rank of the group it is reserved for.
    owner: Vec<Option<usize>>,
    /// (group, expected) of the last admitted arrivals.
    window: VecDeque<(usize, Nanos)>,
    cores: Cores,
}

impl Darc {
    /// A DARC scheduler for `config.workers` workers, grouped by `config.darc_bounds` (or by
    /// class tag when empty).
    pub fn new(config: &PolicyConfig) -> Self {
        let cores = Cores::new("darc", config);
        let mut bounds = config.darc_bounds.clone();
        bounds.sort_unstable();
        bounds.dedup();
        let (grouping, groups) = if bounds.is_empty() {
            (Grouping::Class(BTreeMap::new()), Vec::new())
        } else {
            let groups = (0..=bounds.len())
                .map(|i| Group::new(u32::try_from(i).unwrap_or(u32::MAX)))
                .collect();
            (Grouping::Bounds(bounds), groups)
        };
        let g = groups.len();
        Self {
            grouping,
            groups,
            order: (0..g).collect(),
            rank: (0..g).collect(),
            reservation: vec![0; g],
            first_core: vec![0; g],
            owner: vec![None; cores.len()],
            window: VecDeque::new(),
            cores,
        }
    }

    /// Cores currently reserved per group, shortest group first (with bounds: index `i` is the
    /// group below bound `i`; by class: see [`Darc::group_keys`]). Sums to the worker count once
    /// any group is active.
    pub fn reservation(&self) -> &[usize] {
        &self.reservation
    }

    /// Group keys, shortest group first, in the order of [`Darc::reservation`]: the class tag
    /// when grouping by class, the bound index when grouping by bounds.
    pub fn group_keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.order.iter().filter_map(|&g| self.groups.get(g).map(|grp| grp.key))
    }

    /// Key (as in [`Darc::group_keys`]) of the group `worker` is reserved for, if any.
    pub fn reserved_for(&self, worker: WorkerId) -> Option<u32> {
        let r = self.owner.get(worker).copied().flatten()?;
        let g = *self.order.get(r)?;
        self.groups.get(g).map(|grp| grp.key)
    }

    /// The group `req` belongs to, if it exists yet.
    fn find_group(&self, req: &Request) -> Option<usize> {
        match &self.grouping {
            Grouping::Bounds(bounds) => Some(bounds.partition_point(|&b| b <= req.expected)),
            Grouping::Class(map) => map.get(&req.class).copied(),
        }
    }

    /// The group `req` belongs to, created on first sight of its class.
    fn group_of(&mut self, req: &Request) -> usize {
        if let Some(g) = self.find_group(req) {
            return g;
        }
        let g = self.groups.len();
        self.groups.push(Group::new(u32::from(req.class)));
        if let Grouping::Class(map) = &mut self.grouping {
            map.insert(req.class, g);
        }
        self.order.push(g);
        self.rank.push(self.order.len() - 1);
        self.reservation.push(0);
        self.first_core.push(self.cores.len());
        g
    }

    /// Records an admitted arrival of group `g` in the demand window.
    fn observe(&mut self, g: usize, expected: Nanos) {
        if let Some(grp) = self.groups.get_mut(g) {
            grp.seen += 1;
            grp.seen_work += u128::from(expected);
            grp.window_count += 1;
            grp.window_work += u128::from(expected);
        }
        self.window.push_back((g, expected));
        while self.window.len() > DEMAND_WINDOW {
            let Some((old, e)) = self.window.pop_front() else { break };
            if let Some(grp) = self.groups.get_mut(old) {
                grp.window_count = grp.window_count.saturating_sub(1);
                grp.window_work = grp.window_work.saturating_sub(u128::from(e));
            }
        }
    }

    /// Re-ranks the groups and recomputes the reservation; returns whether any worker changed
    /// group.
    fn reserve(&mut self) -> bool {
        if matches!(self.grouping, Grouping::Class(_)) {
            let groups = &self.groups;
            self.order.sort_by(|&a, &b| {
                let (ga, gb) = (&groups[a], &groups[b]);
                match (ga.mean(), gb.mean()) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    (Some(_), None) => Ordering::Less,
                    (None, Some(_)) => Ordering::Greater,
                    (None, None) => Ordering::Equal,
                }
                .then(ga.key.cmp(&gb.key))
            });
            for (r, &g) in self.order.iter().enumerate() {
                self.rank[g] = r;
            }
        }
        let active: Vec<bool> = self.order.iter().map(|&g| self.groups[g].active()).collect();
        let demand: Vec<u128> = self
            .order
            .iter()
            .zip(&active)
            .map(|(&g, &a)| if a { self.groups[g].window_work } else { 0 })
            .collect();
        let alloc = allocate(self.cores.len(), &active, &demand);

        let mut owner = vec![None; self.cores.len()];
        let mut next = 0;
        for (r, &cores) in alloc.iter().enumerate() {
            self.first_core[r] = next;
            for slot in owner.iter_mut().skip(next).take(cores) {
                *slot = Some(r);
            }
            next = next.saturating_add(cores).min(self.cores.len());
        }
        self.reservation = alloc;
        let changed = owner != self.owner;
        self.owner = owner;
        changed
    }

    /// The next request for the freed worker `w`: its own group's queue, then shorter groups',
    /// shortest first.
    fn take_for(&mut self, w: WorkerId) -> Option<Request> {
        let own = self.owner.get(w).copied().flatten();
        let longest = match own {
            Some(o) => {
                let g = self.order[o];
                if let Some(req) = self.groups[g].queue.pop_front() {
                    return Some(req);
                }
                o
            }
            // Reserved for nobody (no group active): serve anyone.
            None => self.order.len(),
        };
        for r in 0..longest {
            let g = self.order[r];
            if let Some(req) = self.groups[g].queue.pop_front() {
                return Some(req);
            }
        }
        None
    }

    /// Gives every idle worker what its (new) reservation lets it take.
    fn fill_idle(&mut self, out: &mut Vec<Action>) {
        for w in 0..self.cores.len() {
            if self.cores.is_idle(w)
                && let Some(req) = self.take_for(w)
            {
                self.cores.run(w, req, out);
            }
        }
    }
}

/// Cores per rank for `workers` workers: every active rank gets ≥ 1 while cores allow (the
/// longest active rank always keeps one), the rest by largest remainder of the proportional
/// quota `workers × demand / Σ demand`. Ties favour shorter ranks when giving and longer ranks
/// when keeping. Equal shares if no active rank has demand.
fn allocate(workers: usize, active: &[bool], demand: &[u128]) -> Vec<usize> {
    let ranks = active.len();
    let mut alloc = vec![0usize; ranks];
    let Some(longest) = active.iter().rposition(|&a| a) else { return alloc };
    let mut demand: Vec<u128> = demand.to_vec();
    let mut total: u128 = demand.iter().sum();
    if total == 0 {
        for (d, &a) in demand.iter_mut().zip(active) {
            *d = u128::from(a);
        }
        total = demand.iter().sum();
    }
    let n = workers as u128;
    // a·Σd − n·d: positive when over-provisioned relative to the quota.
    let excess = |a: usize, d: u128| -> i128 {
        let have = (a as i128).saturating_mul(total as i128);
        let quota = (n as i128).saturating_mul(d as i128);
        have.saturating_sub(quota)
    };
    for r in 0..ranks {
        if active[r] {
            let floor = n.saturating_mul(demand[r]) / total;
            alloc[r] = usize::try_from(floor).unwrap_or(workers).max(1);
        }
    }
    // Too many groups for the cores: take from the most over-provisioned (the longest active
    // group keeps its last core so that every group can run somewhere).
    while alloc.iter().sum::<usize>() > workers {
        let mut pick: Option<(usize, i128)> = None;
        for r in 0..ranks {
            if alloc[r] == 0 || (r == longest && alloc[r] == 1) {
                continue;
            }
            let e = excess(alloc[r], demand[r]);
            if pick.is_none_or(|(_, best)| e > best) {
                pick = Some((r, e));
            }
        }
        let Some((r, _)) = pick else { break };
        alloc[r] -= 1;
    }
    // Largest remainder for what is left.
    let mut rest = workers.saturating_sub(alloc.iter().sum());
    while rest > 0 {
        let mut pick: Option<(usize, i128)> = None;
        for r in 0..ranks {
            if !active[r] {
                continue;
            }
            let deficit = excess(alloc[r], demand[r]).saturating_neg();
            if pick.is_none_or(|(_, best)| deficit > best) {
                pick = Some((r, deficit));
            }
        }
        let Some((r, _)) = pick else { break };
        alloc[r] += 1;
        rest -= 1;
    }
    alloc
}

impl algorithm::Algorithm for Darc {
    algorithm::cores_field!();

    const LOCAL_ORDER: LocalOrder = LocalOrder::Central;

    fn arrive(&mut self, _now: Nanos, req: Request, out: &mut Vec<Action>) {
        let g = self.group_of(&req);
        self.observe(g, req.expected);
        if self.reserve() {
            self.fill_idle(out);
        }
        // Own cores first, then longer groups' cores (contiguous after them): stealing.
        let start = self.rank.get(g).and_then(|&r| self.first_core.get(r)).copied();
        match self.cores.scan(start.unwrap_or(0), Cores::is_idle) {
            Some(w) => self.cores.run(w, req, out),
            None => self.groups[g].queue.push_back(req),
        }
    }

    /// `darc` never preempts; only a confused driver sends a `Preempted`. Keep the request at
    /// the head of its group so it is not lost.
    fn requeue(&mut self, _worker: WorkerId, req: Request) {
        let g = self.group_of(&req);
        self.groups[g].queue.push_front(req);
    }

    fn run_next(&mut self, worker: WorkerId, _now: Nanos, out: &mut Vec<Action>) {
        if let Some(next) = self.take_for(worker) {
            self.cores.run(worker, next, out);
        }
    }

    fn waiting(&self) -> usize {
        self.groups.iter().map(|g| g.queue.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{feed, refuses_the_third, runs};
    use crate::request::{FunctionId, RequestId};

    const SHORT: u16 = 0;
    const LONG: u16 = 1;

    /// A request of class `class` with expected execution `e`, loose deadline.
    fn req(id: u64, class: u16, e: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, 1_000_000_000, e).with_class(class)
    }

    fn done(worker: WorkerId, id: u64) -> Event {
        Event::Completed { worker, id: RequestId(id), executed: 1 }
    }

    #[test]
    fn groups_by_first_bound_above_the_expected_execution() {
        let mut cfg = PolicyConfig::with_workers(3);
        cfg.darc_bounds = vec![1_000_000, 10_000];
        let mut p = Darc::new(&cfg);
        let g = |p: &Darc, e| p.find_group(&req(0, 7, e));
        // Bounds are sorted: [10 µs, 1 ms]; `expected < bound` picks the group, the class is
        // ignored.
        assert_eq!(g(&p, 9_999), Some(0));
        assert_eq!(g(&p, 10_000), Some(1));
        assert_eq!(g(&p, 999_999), Some(1));
        assert_eq!(g(&p, 1_000_000), Some(2));
        assert_eq!(p.group_keys().collect::<Vec<_>>(), vec![0, 1, 2]);
        // Only the short group is active: it gets every core.
        feed(&mut p, 0, Event::Arrival(req(1, 7, 5_000)));
        assert_eq!(p.reservation(), &[3, 0, 0]);
    }

    #[test]
    fn reservation_follows_demand_with_at_least_one_core_each() {
        let mut p = Darc::new(&PolicyConfig::with_workers(5));
        // 80 short requests of 10 µs (800 µs) and 1 long of 200 µs: demand 80/20.
        for i in 0..80 {
            feed(&mut p, i, Event::Arrival(req(i, SHORT, 10_000)));
        }
        assert_eq!(p.reservation(), &[5], "only the short group is active yet");
        feed(&mut p, 80, Event::Arrival(req(80, LONG, 200_000)));
        assert_eq!(p.group_keys().collect::<Vec<_>>(), vec![u32::from(SHORT), u32::from(LONG)]);
        assert_eq!(p.reservation(), &[4, 1]);
        let owners: Vec<_> = (0..5).map(|w| p.reserved_for(w)).collect();
        assert_eq!(owners, [0, 0, 0, 0, 1].map(Some), "contiguous, shortest group first");
        // 99/1: the long group still keeps one core.
        for i in 81..1_000 {
            feed(&mut p, i, Event::Arrival(req(i, SHORT, 10_000)));
        }
        assert_eq!(p.reservation(), &[4, 1]);
        // The demand shifts to long requests: 700 long (140 ms) vs 300 short in the window.
        for i in 1_000..1_700 {
            feed(&mut p, i, Event::Arrival(req(i, LONG, 200_000)));
        }
        assert_eq!(p.reservation(), &[1, 4]);
        assert_eq!(p.reservation().iter().sum::<usize>(), 5);
    }

    #[test]
    fn reservation_reproduces_sledgescale_footnote_3() {
        // SledgeScale §4.5, footnote 3: SIFT needs 2.75 CPUs and gets 3,
        // Classification 0.56 → 1, Segmentation 2.68 → 2, of 6.
        let (sift, classification, segmentation) = (2, 0, 1);
        let mut p = Darc::new(&PolicyConfig::with_workers(6));
        feed(&mut p, 0, Event::Arrival(req(1, sift, 275_000)));
        feed(&mut p, 0, Event::Arrival(req(2, classification, 56_000)));
        feed(&mut p, 0, Event::Arrival(req(3, segmentation, 268_000)));
        // Shortest first: Classification (56 µs), Segmentation (268 µs), SIFT (275 µs).
        assert_eq!(p.group_keys().collect::<Vec<_>>(), vec![0, 1, 2]);
        assert_eq!(p.reservation(), &[1, 2, 3]);
    }

    #[test]
    fn allocation_keeps_the_longest_group_alive_when_groups_outnumber_cores() {
        // Three active groups, two cores: the least loaded short group gives its core up.
        assert_eq!(allocate(2, &[true, true, true], &[10, 50, 40]), vec![0, 1, 1]);
        // One core: the longest keeps it, the others steal it.
        assert_eq!(allocate(1, &[true, true], &[90, 10]), vec![0, 1]);
        // Inactive groups get nothing; no demand at all shares equally.
        assert_eq!(allocate(4, &[true, false, true], &[0, 0, 0]), vec![2, 0, 2]);
        assert_eq!(allocate(4, &[false, false], &[0, 0]), vec![0, 0]);
    }

    /// Two workers, one reserved per group: w0 short, w1 long.
    fn split_two() -> Darc {
        let mut p = Darc::new(&PolicyConfig::with_workers(2));
        // Establish demand: a short and a long request that complete at once.
        let a = feed(&mut p, 0, Event::Arrival(req(1, SHORT, 10_000)));
        assert_eq!(runs(&a), vec![(0, 1)]);
        let b = feed(&mut p, 0, Event::Arrival(req(2, LONG, 1_000_000)));
        assert_eq!(runs(&b), vec![(1, 2)]);
        feed(&mut p, 1, done(0, 1));
        feed(&mut p, 1, done(1, 2));
        assert_eq!(p.reservation(), &[1, 1]);
        assert_eq!((p.reserved_for(0), p.reserved_for(1)), (Some(0), Some(1)));
        p
    }

    #[test]
    fn long_request_never_runs_on_a_core_reserved_for_the_short_group() {
        let mut p = split_two();
        assert!(p.cores.is_idle(0) && p.cores.is_idle(1));
        assert_eq!(runs(&feed(&mut p, 10, Event::Arrival(req(3, LONG, 1_000_000)))), vec![(1, 3)]);
        // The short core idles, yet the next long requests wait for the long core.
        let out = feed(&mut p, 11, Event::Arrival(req(4, LONG, 1_000_000)));
        assert!(runs(&out).is_empty(), "{out:?}");
        let out = feed(&mut p, 12, Event::Arrival(req(5, LONG, 1_000_000)));
        assert!(runs(&out).is_empty(), "{out:?}");
        assert!(p.cores.is_idle(0));
        assert_eq!(p.reservation(), &[1, 1]);
        assert_eq!(p.queued(), 2);
        // The long core serves its queue in FIFO order.
        assert_eq!(runs(&feed(&mut p, 20, done(1, 3))), vec![(1, 4)]);
        // A short request still finds its own core free at once.
        assert_eq!(runs(&feed(&mut p, 21, Event::Arrival(req(6, SHORT, 10_000)))), vec![(0, 6)]);
        // When the short core frees up, it does not take the waiting long request.
        assert!(runs(&feed(&mut p, 22, done(0, 6))).is_empty());
        assert_eq!(p.queued(), 1);
    }

    #[test]
    fn short_request_steals_an_idle_long_core() {
        let mut p = split_two();
        assert_eq!(runs(&feed(&mut p, 10, Event::Arrival(req(3, SHORT, 10_000)))), vec![(0, 3)]);
        let before = p.stats().workers_inspected;
        // Its own core is busy; the long core idles: steal it.
        assert_eq!(runs(&feed(&mut p, 11, Event::Arrival(req(4, SHORT, 10_000)))), vec![(1, 4)]);
        assert_eq!(p.stats().workers_inspected - before, 2);
        assert_eq!(p.reserved_for(1), Some(u32::from(LONG)));
        // Both busy now: a long and a short request queue.
        assert!(runs(&feed(&mut p, 12, Event::Arrival(req(5, LONG, 1_000_000)))).is_empty());
        assert!(runs(&feed(&mut p, 13, Event::Arrival(req(6, SHORT, 10_000)))).is_empty());
        // The long core, once free, serves its own group first, then a shorter one.
        assert_eq!(runs(&feed(&mut p, 20, done(1, 4))), vec![(1, 5)]);
        assert_eq!(runs(&feed(&mut p, 21, done(1, 5))), vec![(1, 6)]);
    }

    #[test]
    fn never_preempts_and_serves_everyone() {
        let mut p = Darc::new(&PolicyConfig::with_workers(3));
        let mut running: VecDeque<(WorkerId, u64)> = VecDeque::new();
        let mut ran = Vec::new();
        // Checks every action when it is emitted, against the reservation of that moment.
        let mut check = |p: &Darc, out: Vec<Action>, running: &mut VecDeque<_>| {
            for a in out {
                match a {
                    Action::Run { worker, req } => {
                        if req.class == LONG {
                            assert_eq!(p.reserved_for(worker), Some(u32::from(LONG)), "{req:?}");
                        }
                        ran.push(req.id.0);
                        running.push_back((worker, req.id.0));
                    }
                    Action::Preempt { .. }
                    | Action::WakeAt(_)
                    | Action::Enqueue { .. }
                    | Action::Follow { .. }
                    | Action::Demote { .. } => panic!("darc emitted {a:?}"),
                    Action::Reject { .. } => panic!("nothing should be rejected: {a:?}"),
                }
            }
        };
        let mut now = 0;
        for i in 0..40u64 {
            let (class, e) = if i % 4 == 0 { (LONG, 1_000_000) } else { (SHORT, 10_000) };
            now += 1;
            let out = feed(&mut p, now, Event::Arrival(req(i, class, e)));
            check(&p, out, &mut running);
            // Complete one running request every third arrival.
            if i % 3 == 2
                && let Some((w, id)) = running.pop_front()
            {
                let out = feed(&mut p, now, done(w, id));
                check(&p, out, &mut running);
            }
        }
        while let Some((w, id)) = running.pop_front() {
            now += 1;
            let out = feed(&mut p, now, Event::Started { worker: w, id: RequestId(id) });
            check(&p, out, &mut running);
            let out = feed(&mut p, now, done(w, id));
            check(&p, out, &mut running);
        }
        ran.sort_unstable();
        assert_eq!(ran, (0..40).collect::<Vec<_>>());
        assert_eq!(p.queued(), 0);
        assert_eq!(p.stats().preemptions, 0);
        assert_eq!(p.stats().arrivals, 40);
    }

    #[test]
    fn a_newly_reserved_idle_core_picks_up_waiting_work() {
        let mut p = Darc::new(&PolicyConfig::with_workers(2));
        // Long requests first: the long group holds both cores.
        assert_eq!(runs(&feed(&mut p, 0, Event::Arrival(req(1, LONG, 1_000_000)))), vec![(0, 1)]);
        assert_eq!(runs(&feed(&mut p, 0, Event::Arrival(req(2, LONG, 1_000_000)))), vec![(1, 2)]);
        assert!(runs(&feed(&mut p, 0, Event::Arrival(req(3, LONG, 1_000_000)))).is_empty());
        assert_eq!(p.reservation(), &[2]);
        // A short request arrives: worker 0 becomes the short core (still busy with request 1).
        assert!(runs(&feed(&mut p, 1, Event::Arrival(req(4, SHORT, 10_000)))).is_empty());
        assert_eq!(p.reservation(), &[1, 1]);
        // Worker 0 frees: it takes the short request, not the earlier long one.
        assert_eq!(runs(&feed(&mut p, 2, done(0, 1))), vec![(0, 4)]);
        assert_eq!(runs(&feed(&mut p, 3, done(1, 2))), vec![(1, 3)]);
    }

    #[test]
    fn stale_events_and_a_confused_preemption_lose_nothing() {
        let mut p = split_two();
        feed(&mut p, 10, Event::Arrival(req(3, LONG, 1_000_000)));
        feed(&mut p, 10, Event::Started { worker: 1, id: RequestId(3) });
        feed(&mut p, 11, Event::Arrival(req(4, LONG, 1_000_000)));
        // Stale: wrong worker, unknown id, already-finished request.
        assert!(feed(&mut p, 12, done(0, 3)).is_empty());
        assert!(feed(&mut p, 12, done(1, 99)).is_empty());
        assert!(feed(&mut p, 12, Event::Started { worker: 0, id: RequestId(1) }).is_empty());
        assert!(feed(&mut p, 12, Event::Tick).is_empty());
        // A `Preempted` nobody asked for: the request goes back to the head of its queue.
        let ev = Event::Preempted { worker: 1, id: RequestId(3), executed: 2 };
        let out = feed(&mut p, 13, ev);
        assert_eq!(runs(&out), vec![(1, 3)]);
        assert!(matches!(out[..], [Action::Run { req, .. }] if req.executed == 2));
        assert_eq!(p.queued(), 1);
    }

    #[test]
    fn admission_rejects_and_counts() {
        let p = refuses_the_third(Darc::new, [1, 2, 3].map(|id| req(id, SHORT, 1_000)));
        let s = p.stats();
        assert_eq!((s.arrivals, s.rejected, s.preemptions), (3, 1, 0));
        assert_eq!(p.name(), "darc");
        assert_eq!(p.local_order(), LocalOrder::Central);
    }
}
