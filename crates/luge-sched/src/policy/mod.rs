//! Scheduling policies as sans-I/O state machines, and the contract between a policy and the
//! driver (the simulator's event loop or the runtime's dispatcher thread) that feeds it.
//!
//! # The contract
//!
//! A policy instance owns one *dispatcher group* of `workers` workers, numbered `0..workers`.
//! The driver calls [`Policy::on_event`] with the current time and one [`Event`]; the policy
//! appends [`Action`]s to the output vector and returns. Nothing else moves time.
//!
//! Driver obligations:
//! - Time never goes back: each call's `now` is at least the one before.
//! - Request ids are unique and handed out in arrival order.
//! - On [`Action::Run`] `{ worker, req }`, the worker is idle (the policy guarantees it) and the
//!   driver starts or resumes `req` there, then reports [`Event::Started`] when it actually runs
//!   (after any start-up overhead). Execution so far is `req.executed`.
//! - When a running request finishes, the driver reports [`Event::Completed`] with its total
//!   execution; if the policy committed followers to that worker ([`Action::Follow`]), the
//!   driver starts the first of them there at once and reports its `Started` in turn.
//! - When a run is preempted, the driver discards the worker's followers, unstarted; the policy
//!   takes them back with the `Preempted`.
//! - On [`Action::Preempt`] `{ worker, id }`, if `id` is still running on `worker` when the
//!   preemption is delivered, the driver stops it and reports [`Event::Preempted`] with its total
//!   execution so far; if `id` completed first, it reports only [`Event::Completed`] and drops the
//!   preemption. Either way exactly one of the two events ends that run.
//!   A `Preempt` for a request that was `Run` but has not `Started` yet takes effect as soon as
//!   it starts (it is stopped at once, with its execution unchanged).
//! - On [`Action::WakeAt`] `t` the driver delivers an [`Event::Tick`] at some time ≥ `t` (it may
//!   coalesce ticks and may deliver extra ones).
//! - On [`Action::Reject`] the driver answers the request with the reason at once.
//! - [`Action::Enqueue`] is informational: it reports that a request is now bound to a worker's
//!   local queue (early binding). A driver may ignore it — the simulator and the runtime's
//!   dispatcher do: the request reaches the worker with its `Run`, which carries it.
//! - A driver never stops a request on its own: `Preempted` only answers a `Preempt`.
//!
//! Policy obligations: every arrival is eventually either `Run` to completion or `Reject`ed, and
//! is never lost; at most one request is running per worker; a `Run` targets an idle worker, with
//! a request that is not running elsewhere and its execution so far; a `Preempt` names the
//! request running on that worker; a `Reject` answers a request that is not running. Policies of
//! the early-binding family ([`LocalOrder::Edf`]) only ever `Run` the most urgent request bound
//! to the worker by their `Enqueue`s, the head of its EDF queue.
//!
//! [`ContractChecker`](crate::ContractChecker) checks both sides on every call, and
//! [`Checked`](crate::Checked) wraps a policy in it; the conformance suites (this crate's,
//! driving every policy directly, and the simulator's) run every policy under it.

mod algorithm;
mod batch;
mod core;
mod darc;
mod early;
mod edf;
mod fifo;
mod lane;
mod sfs;
mod sledge;
mod sledgescale;
mod srpt;
#[cfg(test)]
mod testing;
mod timesliced;

use std::fmt;
use std::str::FromStr;

use crate::backlog::Backlog;
use crate::request::{Nanos, Request, RequestId};
use crate::run_queue::QueueKind;

pub use self::darc::Darc;
pub use self::early::{EarlyBinding, EarlyChoice};
pub use self::fifo::Fifo;
pub use self::sfs::Sfs;
pub use self::sledge::Sledge;
pub use self::sledgescale::{SledgeScale, WaitTime};
pub use self::srpt::Srpt;
pub use self::timesliced::TimeSliced;

/// Index of a worker within a dispatcher group.
pub type WorkerId = usize;

/// What happened, as told by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A new request for this dispatcher group.
    Arrival(Request),
    /// The request of an earlier `Run` is now executing on `worker`.
    Started {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
    },
    /// The running request finished after `executed` ns of execution in total.
    Completed {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
        /// Total execution the request received.
        executed: Nanos,
    },
    /// The running request stopped after a `Preempt`, having executed `executed` ns in total.
    Preempted {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
        /// Total execution so far.
        executed: Nanos,
    },
    /// A timer requested with [`Action::WakeAt`] fired.
    Tick,
}

/// What the policy wants done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Bind `id` to `worker`'s local queue (early binding).
    Enqueue {
        /// Worker.
        worker: WorkerId,
        /// Request.
        id: RequestId,
    },
    /// Start or resume `req` on the idle `worker`.
    Run {
        /// Worker.
        worker: WorkerId,
        /// The request, with its execution so far.
        req: Request,
    },
    /// Stop request `id` on `worker` (it stays owned by the policy).
    Preempt {
        /// Worker.
        worker: WorkerId,
        /// The request expected to be running there.
        id: RequestId,
    },
    /// Answer the request at once with an error.
    Reject {
        /// The rejected request.
        req: Request,
        /// Why.
        reason: RejectReason,
    },
    /// Commit `req` to `worker` as the next run of its batch (Edge-RT §IV-A, deadline-limited
    /// batching): the driver starts it there as soon as the worker's current run (or the
    /// follower before it) *completes*, without asking the policy, and reports `Started` for it
    /// then. If that run is preempted instead, the driver discards the worker's followers (they
    /// never start) and the policy takes them back with the `Preempted`. Only ever emitted for a
    /// worker with a run in progress (`Run` issued, not ended).
    Follow {
        /// Worker.
        worker: WorkerId,
        /// The request, with its execution so far.
        req: Request,
    },
    /// Deliver an [`Event::Tick`] at or after this time.
    WakeAt(Nanos),
    /// Informational, like `Enqueue`: the held request `req` can no longer meet its deadline and
    /// its function asked for demotion ([`Overrun::Demote`](crate::Overrun::Demote)), so instead
    /// of a `Reject` it moved to the group's best-effort lane (Edge-RT §IV-C). It is no longer
    /// bound to any worker's queue; it will be `Run`, on any worker with no on-time work, and
    /// complete late. A driver may count it and otherwise ignore it.
    Demote {
        /// The request, with its execution so far.
        req: Request,
    },
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// It cannot meet its deadline even if started now.
    Infeasible,
    /// Admission on the wait: the wait predicted on the worker it would be bound to, plus its
    /// expected execution, overruns its deadline, or admitting it would push a request already
    /// admitted there past its own.
    Unreachable,
    /// Shed: it was admitted, but while it waited its deadline became unreachable (the wait grew
    /// beyond the estimates, a preemption took its slack); it is answered instead of run.
    Shed,
    /// The queues are full (the count cap, a safety net behind the time bound).
    QueueFull,
    /// It was still running at its deadline and was preempted for a request that could still
    /// meet its own; it is answered as late instead of resumed (Edge-RT §VI-D: a request past
    /// its deadline no longer outranks anyone).
    Late,
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RejectReason::Infeasible => "deadline infeasible",
            RejectReason::Unreachable => "deadline unreachable at the current load",
            RejectReason::Shed => "deadline became unreachable while queued",
            RejectReason::QueueFull => "queue full",
            RejectReason::Late => "deadline passed while it ran",
        })
    }
}

/// How a worker orders the requests bound to it, when the policy binds early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalOrder {
    /// Earliest deadline first over the worker's own queue.
    Edf,
    /// The policy holds the queue(s) and tells each worker what to run.
    Central,
    /// Round robin over the worker's own queue.
    RoundRobin,
}

/// Counters a policy keeps about its own decisions (for the overhead model and metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyStats {
    /// Arrivals seen.
    pub arrivals: u64,
    /// Worker states examined while placing arrivals (the dispatch-cost driver).
    pub workers_inspected: u64,
    /// Preemptions requested.
    pub preemptions: u64,
    /// Requests rejected (on arrival or shed), shed ones included.
    pub rejected: u64,
    /// Of `rejected`, requests shed after admission because their deadline became unreachable.
    pub shed: u64,
    /// Requests demoted to the best-effort lane instead of shed or answered late (not counted in
    /// `rejected`: they still run).
    pub demoted: u64,
}

/// A scheduling policy for one dispatcher group. See the module docs for the contract.
pub trait Policy: Send {
    /// Short name, as accepted by [`PolicyKind::from_str`].
    fn name(&self) -> &'static str;
    /// Number of workers in the group.
    fn workers(&self) -> usize;
    /// Feeds one event at time `now`; actions are appended to `out`.
    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>);
    /// Requests held by the policy that are not running (queued anywhere).
    fn queued(&self) -> usize;
    /// How workers order their own queues.
    fn local_order(&self) -> LocalOrder;
    /// With [`LocalOrder::Edf`], the width of the deadline quanta within which a worker may run
    /// requests out of deadline order: 0 for exact EDF, Δwindow for CT-EDF timelines
    /// ([`QueueKind::Timeline`](crate::QueueKind::Timeline)).
    fn edf_window(&self) -> Nanos {
        0
    }
    /// Decision counters so far.
    fn stats(&self) -> PolicyStats;
    /// What its admission on the wait looks like as of `now`, the time of its last event, for a
    /// front end to refuse on ([`Backlog`]): [`Backlog::OPEN`], claiming nothing, unless the
    /// policy admits on the wait and can summarise it.
    fn backlog(&self, _now: Nanos) -> Backlog {
        Backlog::OPEN
    }
}

/// A boxed policy, as [`PolicyKind::build`] makes them, is a policy (so that it can be wrapped,
/// e.g. in [`Checked`](crate::Checked)).
impl Policy for Box<dyn Policy> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn workers(&self) -> usize {
        (**self).workers()
    }

    fn on_event(&mut self, now: Nanos, event: Event, out: &mut Vec<Action>) {
        (**self).on_event(now, event, out);
    }

    fn queued(&self) -> usize {
        (**self).queued()
    }

    fn local_order(&self) -> LocalOrder {
        (**self).local_order()
    }

    fn edf_window(&self) -> Nanos {
        (**self).edf_window()
    }

    fn stats(&self) -> PolicyStats {
        (**self).stats()
    }

    fn backlog(&self, now: Nanos) -> Backlog {
        (**self).backlog(now)
    }
}

/// Admission control and shedding (`docs/scheduling.md`, "Admission and shedding"). Rejected and
/// shed requests count as deadline misses in every report.
///
/// The default is deadline-aware: refuse the infeasible, admit on the wait, shed the doomed, with
/// a count cap as a memory safety net. With admission on the wait the queues are bounded in
/// *time*: every admitted request is expected to finish by its deadline, so a worker never holds
/// more work than fits before the latest deadline it has admitted. [`Admission::NONE`] queues
/// everything, as the papers' experiments do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// Reject a request whose expected execution cannot fit before its deadline even if it
    /// started now (all policies).
    pub reject_infeasible: bool,
    /// Admission on the wait (policies with per-worker deadline queues: `sledgescale`,
    /// `sledgescale-steal`, `rr`, `jsq`, `lld`): admit only if the wait predicted on the worker
    /// chosen (SledgeScale §3.3, Alg. 1) plus the expected execution fits the deadline.
    pub on_wait: bool,
    /// With `on_wait`: also refuse a newcomer that would push a request already admitted to that
    /// worker past its own deadline (the full EDF feasibility test, O(log n) on the deadline
    /// tree). Off by default: the newcomer is admitted and whatever it dooms is shed at once
    /// (with `shed`), which serves more requests in time when sizes differ — a long request that
    /// claimed the queue first no longer locks out many short ones — at the price that an
    /// admitted request may still be refused later.
    pub protect_admitted: bool,
    /// Shed, on the same policies: when a request is admitted ahead of others, when a worker
    /// picks its next request, and whenever one of its runs ends, answer every queued request
    /// that can no longer meet its deadline instead of running it ahead of requests that still
    /// can. On `sledgescale`, a request still running at its deadline is also preempted by the
    /// next arrival for its worker, or at the deadline when requests wait there, and answered
    /// [`RejectReason::Late`] (Edge-RT §VI-D). A request whose function asked for demotion
    /// ([`Overrun::Demote`](crate::Overrun::Demote)) goes to the group's best-effort lane
    /// instead of being answered (Edge-RT §IV-C), while the lane holds fewer than `max_queued`.
    pub shed: bool,
    /// Reject when the group already holds this many requests (queued, not running).
    pub max_queued: Option<usize>,
}

impl Admission {
    /// Queue everything, refuse nothing: the papers' setting.
    pub const NONE: Admission = Admission {
        reject_infeasible: false,
        on_wait: false,
        protect_admitted: false,
        shed: false,
        max_queued: None,
    };

    /// Luge's default: refuse the infeasible, admit on the wait, shed the doomed, and cap each
    /// group at 4096 queued requests as a memory safety net.
    pub const DEADLINE: Admission = Admission {
        reject_infeasible: true,
        on_wait: true,
        protect_admitted: false,
        shed: true,
        max_queued: Some(4096),
    };

    /// The reason to reject `req` at `now` with `queued` requests already waiting, if any: the
    /// checks every policy shares (infeasible on its own, count cap).
    pub fn check(&self, now: Nanos, req: &Request, queued: usize) -> Option<RejectReason> {
        if self.reject_infeasible && now.saturating_add(req.own_work()) > req.absolute_deadline {
            return Some(RejectReason::Infeasible);
        }
        match self.max_queued {
            Some(max) if queued >= max => Some(RejectReason::QueueFull),
            _ => None,
        }
    }
}

impl Default for Admission {
    fn default() -> Self {
        Self::DEADLINE
    }
}

/// Tunables of every policy, with the papers' defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// Workers in the group.
    pub workers: usize,
    /// EDF re-evaluation quantum of the `rr`/`jsq`/`lld` baselines (SledgeScale §4: 1 ms).
    pub edf_quantum: Nanos,
    /// Round-robin quantum of `sledge` (Sledge §4: 5 ms).
    pub sledge_quantum: Nanos,
    /// Requests a `sledge` worker takes from the global queue at once when its local queue is
    /// empty (SledgeScale §4.3, Fig. 8: 5). With 1, `sledge` degenerates to `fifo`.
    pub sledge_batch: usize,
    /// Preemption quantum of `shinjuku` (15 µs).
    pub shinjuku_quantum: Nanos,
    /// Time slice of `ps` and of the fair-share level of `sfs` (CFS-like; 1 ms).
    pub fair_quantum: Nanos,
    /// Inter-arrival window of `sfs` (SFS §V: N = 100).
    pub sfs_window: usize,
    /// Overload factor of `sfs` (SFS §V: O = 3).
    pub sfs_overload_factor: u64,
    /// Slice `sfs` uses before it has seen two arrivals.
    pub sfs_initial_slice: Nanos,
    /// Upper bounds (exclusive) of `darc`'s duration groups by expected execution; empty means
    /// "group by the request's class tag".
    pub darc_bounds: Vec<Nanos>,
    /// Round-robin quantum of the best-effort lane of demoted requests (Edge-RT §IV-C runs the
    /// lane round robin at its timer quantum Δtimer, 250 µs in §VI-B; here 1 ms by default —
    /// only demoted requests share it, and any arrival preempts a demoted run).
    pub demoted_quantum: Nanos,
    /// How long past its deadline a demoted request may wait in the lane without starting or
    /// resuming before it is answered instead (10 s): a lane that on-time work starves does not
    /// hold requests whose clients have long given up.
    pub demoted_expiry: Nanos,
    /// Admission control.
    pub admission: Admission,
    /// The run queue of each worker of the early-binding policies (`sledgescale`,
    /// `sledgescale-steal`, `rr`, `jsq`, `lld`): the exact deadline tree (default) or Edge-RT's
    /// constant-time timeline (§IV-C).
    pub worker_queue: QueueKind,
    /// Deadline-limited batching Δbatch (Edge-RT §IV-A) of the early-binding policies: when a
    /// worker takes its next request, the requests queued behind it whose deadlines lie within
    /// this window of its own are committed to it as one batch ([`Action::Follow`]), run back
    /// to back without a round trip through the dispatcher; an arrival for a busy worker with
    /// nothing queued joins its batch on the same terms. 0 (the default) is off.
    pub batch_window: Nanos,
    /// The most requests one batch commits beyond its first (32).
    pub batch_max: usize,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        Self {
            workers: 1,
            edf_quantum: 1_000_000,
            sledge_quantum: 5_000_000,
            sledge_batch: 5,
            shinjuku_quantum: 15_000,
            fair_quantum: 1_000_000,
            sfs_window: 100,
            sfs_overload_factor: 3,
            sfs_initial_slice: 1_000_000,
            darc_bounds: Vec::new(),
            demoted_quantum: 1_000_000,
            demoted_expiry: 10_000_000_000,
            admission: Admission::default(),
            worker_queue: QueueKind::Tree,
            batch_window: 0,
            batch_max: 32,
        }
    }
}

impl PolicyConfig {
    /// Defaults for a group of `workers` workers.
    pub fn with_workers(workers: usize) -> Self {
        Self { workers, ..Self::default() }
    }

    /// The papers' setting for a group of `workers` workers: every tunable at its default but
    /// admission off ([`Admission::NONE`]: queue everything, as the papers' experiments do).
    pub fn papers(workers: usize) -> Self {
        Self { workers, admission: Admission::NONE, ..Self::default() }
    }
}

/// Every policy Luge ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    /// SledgeScale Alg. 1–2 with EDF workers.
    SledgeScale,
    /// SledgeScale plus stealing by idle workers (Luge's extension).
    SledgeScaleSteal,
    /// Round-robin dispatch, EDF workers with a 1 ms quantum.
    Rr,
    /// Join the shortest queue, EDF workers with a 1 ms quantum.
    Jsq,
    /// Join the least loaded queue (remaining work), EDF workers with a 1 ms quantum.
    Lld,
    /// Sledge: global FIFO feeding per-worker round robin.
    Sledge,
    /// One global FIFO queue, run to completion.
    Fifo,
    /// One central queue with fixed-quantum preemption to the tail.
    Shinjuku,
    /// Cores reserved per duration group.
    Darc,
    /// SFS FILTER + fair share.
    Sfs,
    /// Shortest remaining processing time (oracle reference).
    Srpt,
    /// Processor sharing approximated by fine round robin (CFS-like reference).
    Ps,
}

impl PolicyKind {
    /// Whether it binds each request to a worker on arrival (SledgeScale §3.3) and keeps a run
    /// queue per worker: what `PolicyConfig::worker_queue`, `batch_window` and admission on the
    /// wait apply to.
    pub fn binds_early(self) -> bool {
        matches!(
            self,
            PolicyKind::SledgeScale
                | PolicyKind::SledgeScaleSteal
                | PolicyKind::Rr
                | PolicyKind::Jsq
                | PolicyKind::Lld
        )
    }

    /// Every policy, in the order reports list them.
    pub const ALL: [PolicyKind; 12] = [
        PolicyKind::SledgeScale,
        PolicyKind::SledgeScaleSteal,
        PolicyKind::Rr,
        PolicyKind::Jsq,
        PolicyKind::Lld,
        PolicyKind::Sledge,
        PolicyKind::Fifo,
        PolicyKind::Shinjuku,
        PolicyKind::Darc,
        PolicyKind::Sfs,
        PolicyKind::Srpt,
        PolicyKind::Ps,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::SledgeScale => "sledgescale",
            PolicyKind::SledgeScaleSteal => "sledgescale-steal",
            PolicyKind::Rr => "rr",
            PolicyKind::Jsq => "jsq",
            PolicyKind::Lld => "lld",
            PolicyKind::Sledge => "sledge",
            PolicyKind::Fifo => "fifo",
            PolicyKind::Shinjuku => "shinjuku",
            PolicyKind::Darc => "darc",
            PolicyKind::Sfs => "sfs",
            PolicyKind::Srpt => "srpt",
            PolicyKind::Ps => "ps",
        }
    }

    /// Builds a policy instance for one dispatcher group.
    pub fn build(self, config: &PolicyConfig) -> Box<dyn Policy> {
        match self {
            PolicyKind::SledgeScale => Box::new(SledgeScale::new(config)),
            PolicyKind::SledgeScaleSteal => Box::new(SledgeScale::with_stealing(config)),
            PolicyKind::Rr => Box::new(EarlyBinding::new(EarlyChoice::RoundRobin, config)),
            PolicyKind::Jsq => Box::new(EarlyBinding::new(EarlyChoice::ShortestQueue, config)),
            PolicyKind::Lld => Box::new(EarlyBinding::new(EarlyChoice::LeastLoaded, config)),
            PolicyKind::Sledge => Box::new(Sledge::new(config)),
            PolicyKind::Fifo => Box::new(Fifo::new(config)),
            PolicyKind::Shinjuku => Box::new(TimeSliced::shinjuku(config)),
            PolicyKind::Darc => Box::new(Darc::new(config)),
            PolicyKind::Sfs => Box::new(Sfs::new(config)),
            PolicyKind::Srpt => Box::new(Srpt::new(config)),
            PolicyKind::Ps => Box::new(TimeSliced::ps(config)),
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that is not one of [`PolicyKind::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown policy `{0}` (expected one of: sledgescale, sledgescale-steal, rr, jsq, lld, sledge, fifo, shinjuku, darc, sfs, srpt, ps)"
)]
pub struct UnknownPolicy(pub String);

impl FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}
