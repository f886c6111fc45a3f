//! The discrete-event loop: arrivals, dispatcher groups running unmodified `luge-sched`
//! policies, workers executing requests, preemptions and timers, on a virtual nanosecond clock.
//!
//! It plays the *driver* role of the policy contract (`luge_sched::Policy`) exactly as the
//! runtime will, and when [`SimConfig::check_contract`] is set it checks both sides of every call
//! of every group's policy with a [`ContractChecker`]: a `Run` targets an idle worker,
//! early-binding EDF policies run the most urgent request bound to the worker, every request ends
//! exactly once, and the simulator's own `Started`, `Completed` and `Preempted` name runs in
//! progress. Whether checked or not, it refuses to carry out a `Run` it cannot (on a worker
//! outside the group or a busy one) and to answer a request twice.
//!
//! A [`Job`] may be a chain of stages (Edge-RT §III), run as the runtime runs chains
//! (`docs/manifest.md`, `[[chain]]`): each stage is a request of its own, handed to a dispatcher
//! when the previous one completes, with the chain's absolute deadline minus the estimated work
//! of the stages after it; a stage left no time ends the chain (refused at the first stage, late
//! at a later one). The job's record is the chain's: its first start, its last stage's
//! completion.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};

use luge_sched::{
    Action, ContractChecker, ContractViolation, Estimator, EstimatorConfig, Event, FunctionId,
    Nanos, Overrun, Policy, PolicyConfig, PolicyKind, RejectReason, Request, RequestId, UllConfig,
    UllLane,
};

use crate::overheads::Overheads;
use crate::record::{Outcome, Record};

/// One request offered to the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Arrival time.
    pub arrival: Nanos,
    /// Function invoked.
    pub function: FunctionId,
    /// Class tag (for per-class metrics and DARC).
    pub class: u16,
    /// Actual execution time.
    pub execution: Nanos,
    /// Relative deadline.
    pub relative_deadline: Nanos,
    /// 1 for one function; n > 1 for a chain of n stages (at most [`MAX_STAGES`]) that share
    /// `execution` equally and `relative_deadline` end to end.
    pub stages: u8,
    /// What becomes of it once it can no longer meet its deadline: answered at once (`Kill`,
    /// the default) or demoted to its group's best-effort lane to complete late (`Demote`,
    /// Edge-RT §IV-C; `docs/scheduling.md`, "Demotion").
    pub on_overrun: Overrun,
}

/// The longest chain a [`Job`] may be.
pub const MAX_STAGES: u8 = 16;

impl Job {
    /// One request of function 0, class 0, that is answered at once when it can no longer meet
    /// its deadline (`Overrun::Kill`): the plainest job, for tests and hand-written loads.
    pub fn single(arrival: Nanos, execution: Nanos, relative_deadline: Nanos) -> Self {
        Self {
            arrival,
            function: FunctionId(0),
            class: 0,
            execution,
            relative_deadline,
            stages: 1,
            on_overrun: Overrun::Kill,
        }
    }

    /// Stage `k`'s execution: an equal share of the job's, the remainder on the last stage.
    fn stage_execution(&self, k: u8) -> Nanos {
        let n = Nanos::from(self.stages.max(1));
        let share = self.execution / n;
        if Nanos::from(k) + 1 == n { self.execution - share * (n - 1) } else { share }
    }
}

/// Stage `k` of job `i` is request `i·MAX_STAGES + k`: ids stay unique, and in arrival order
/// among first stages.
fn request_id(i: usize, k: u8) -> RequestId {
    RequestId(i as u64 * u64::from(MAX_STAGES) + u64::from(k))
}

/// The job and stage of a request id ([`request_id`] inverted).
fn job_of(id: RequestId) -> (usize, u8) {
    ((id.0 / u64::from(MAX_STAGES)) as usize, (id.0 % u64::from(MAX_STAGES)) as u8)
}

/// Where a policy's execution-time estimates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EstimatorMode {
    /// The actual execution time (SledgeScale's assumption for synthetic loads).
    #[default]
    Oracle,
    /// Median of the last 256 completions of the same function (SledgeScale §4).
    Median256,
}

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// Policy run by every dispatcher group.
    pub policy: PolicyKind,
    /// Policy tunables; `workers` is overwritten with each group's size.
    pub policy_config: PolicyConfig,
    /// Total workers.
    pub workers: usize,
    /// Dispatcher groups; workers are split as evenly as possible, contiguously.
    pub dispatchers: usize,
    /// Machine cost model.
    pub overheads: Overheads,
    /// Estimate source.
    pub estimator: EstimatorMode,
    /// Estimate for a function never seen (median mode only).
    pub default_estimate: Nanos,
    /// Check the policy contract on every call with a [`ContractChecker`] (cheap; on in
    /// tests).
    pub check_contract: bool,
    /// Estimates include a request's start-up on its worker (enqueue, context switch and sandbox
    /// start of the overhead model), as the runtime's do: its estimator measures a run from the
    /// moment the worker picks the request up, instantiation included. Admission needs this to
    /// keep its promise for functions as short as their start-up. On by default; the paper
    /// reproductions turn it off (the papers' estimators saw execution only).
    pub estimate_start_cost: bool,
    /// Periodic notification (Edge-RT §IV-B, Δtimer), as the runtime's `notify_interval`: 0
    /// (the default) hands every arrival — a job's first stage, or a chain's next stage — to
    /// its dispatcher group at once; above 0, an arrival whose slack exceeds it is held until
    /// the next multiple of the interval, when the group is notified once for all it holds.
    pub notify_interval: Nanos,
    /// With [`notify_interval`](Self::notify_interval): an arrival with less slack than the
    /// interval is notified at once (Luge's rule, the default). Off, every arrival waits for
    /// the next period, as Edge-RT's timer-polled scheduler does.
    pub notify_urgent: bool,
    /// The uLL lane (HORSE §4.1.3) in front of every group's policy, as the runtime's `ull_lane`
    /// (`luge_sched::UllLane`); `None` (the default, as in the papers' experiments): none.
    pub ull_lane: Option<UllConfig>,
    /// How requests are spread over dispatcher groups.
    pub spread: Spread,
}

/// How requests (a job's first stage and each later one) are spread over dispatcher groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Spread {
    /// In turn, as the runtime's submitters do (the default).
    #[default]
    RoundRobin,
    /// By a hash of the request's id: a NIC's receive-side scaling over many flows, as in
    /// SledgeScale §3.3 (the paper reproductions).
    Hash,
}

impl SimConfig {
    /// `policy` on `workers` workers and one dispatcher, default overheads, oracle estimates.
    pub fn new(policy: PolicyKind, workers: usize) -> Self {
        Self {
            policy,
            policy_config: PolicyConfig::default(),
            workers,
            dispatchers: 1,
            overheads: Overheads::DEFAULT,
            estimator: EstimatorMode::Oracle,
            default_estimate: 1_000_000,
            check_contract: false,
            estimate_start_cost: true,
            notify_interval: 0,
            notify_urgent: true,
            ull_lane: None,
            spread: Spread::RoundRobin,
        }
    }
}

/// A simulation that could not run or a policy that broke its contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The configuration is unusable.
    #[error("invalid simulation: {0}")]
    Config(String),
    /// The policy broke its side of the driver contract.
    #[error("policy `{policy}` broke the contract at t={at} ns: {what}")]
    Contract {
        /// Policy name.
        policy: &'static str,
        /// Virtual time.
        at: Nanos,
        /// Description.
        what: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrival(usize),
    Started {
        w: usize,
        epoch: u64,
    },
    Complete {
        w: usize,
        epoch: u64,
    },
    PreemptDeliver {
        w: usize,
        epoch: u64,
    },
    Tick {
        g: usize,
    },
    /// A request (a job's stage) that found its dispatcher group (the second field) busy or
    /// asleep, handed over when it is free or awake.
    Dispatch(RequestId, usize),
    /// A period of the periodic notification ends: group `g` gets what it was held.
    Notify {
        g: usize,
    },
}

/// An event in the queue, by (time, [`Ev::rank`], when it first fell due, sequence).
type Scheduled = (Nanos, u8, Nanos, u64, Ev);

#[derive(Debug, Clone, Copy)]
struct Current {
    req: Request,
    epoch: u64,
    /// When the worker picked it up (its `Started`).
    started: Option<Nanos>,
    /// When its execution proper begins, after the switch and the sandbox's start or resume.
    exec_from: Nanos,
    preempt_on_start: bool,
}

struct Group {
    policy: Box<dyn Policy>,
    /// With [`SimConfig::check_contract`]: the checker of every call of `policy`.
    checker: Option<ContractChecker>,
    first_worker: usize,
    busy_until: Nanos,
    /// Tick times already scheduled (one event per distinct time).
    ticks: BTreeSet<Nanos>,
    /// Arrivals held for the end of the notification period ([`SimConfig::notify_interval`]).
    held: Vec<RequestId>,
    /// Until when a wake-up of the group's sleeping threads is in flight.
    waking_until: Nanos,
}

/// The result of one run: a record per request, plus machine counters.
#[derive(Debug, Clone)]
pub struct SimOutput {
    /// One record per offered job, in job order.
    pub records: Vec<Record>,
    /// Σ time workers spent executing requests or paying start/switch costs.
    pub worker_busy: Nanos,
    /// Time of the last event.
    pub end: Nanos,
    /// Preemptions requested by the policies.
    pub preemptions: u64,
    /// Worker states inspected by dispatchers.
    pub workers_inspected: u64,
    /// Events processed.
    pub events: u64,
    /// Wake-ups of sleeping dispatcher groups (a notification reaching a group with every
    /// worker idle and no wake-up in flight), counted whatever [`Overheads::wakeup`] costs.
    pub wakeups: u64,
    /// Arrivals held for the end of a notification period.
    pub deferred: u64,
    /// Requests a worker started unasked, committed behind the run before them
    /// ([`Action::Follow`], Edge-RT §IV-A): hand-offs that batching saved.
    pub followed: u64,
}

struct Sim<'a> {
    cfg: &'a SimConfig,
    jobs: &'a [Job],
    now: Nanos,
    seq: u64,
    heap: BinaryHeap<Reverse<Scheduled>>,
    /// When the event being handled first fell due.
    due: Nanos,
    /// The group the next request goes to ([`Spread::RoundRobin`]).
    next_group: usize,
    groups: Vec<Group>,
    group_of_worker: Vec<usize>,
    current: Vec<Option<Current>>,
    records: Vec<Record>,
    /// Per job: how many times its current stage has been started (a first start instantiates
    /// a sandbox; a later one resumes a preempted run).
    runs: Vec<u32>,
    /// Per job: the execution proper its current stage has had (without start-up costs, which
    /// the `executed` the policy is told includes, as the runtime's does).
    progress: Vec<Nanos>,
    estimator: Estimator,
    epoch: u64,
    worker_busy: Nanos,
    events: u64,
    wakeups: u64,
    deferred: u64,
    /// Per worker, the requests committed behind its run ([`Action::Follow`]).
    follow: Vec<VecDeque<Request>>,
    followed: u64,
    out: Vec<Action>,
}

/// Runs `jobs` (sorted by arrival) through the configured machine.
pub fn simulate(cfg: &SimConfig, jobs: &[Job]) -> Result<SimOutput, SimError> {
    if cfg.workers == 0 || cfg.dispatchers == 0 || cfg.dispatchers > cfg.workers {
        return Err(SimError::Config(format!(
            "need 1 ≤ dispatchers ≤ workers, got {} dispatchers and {} workers",
            cfg.dispatchers, cfg.workers
        )));
    }
    if jobs.windows(2).any(|w| w[1].arrival < w[0].arrival) {
        return Err(SimError::Config("jobs must be sorted by arrival".into()));
    }
    if let Some(j) = jobs.iter().find(|j| !(1..=MAX_STAGES).contains(&j.stages)) {
        return Err(SimError::Config(format!(
            "a job has {} stages; 1 to {MAX_STAGES} are allowed",
            j.stages
        )));
    }
    let mut sim = Sim::new(cfg, jobs);
    sim.run()?;
    let (preemptions, workers_inspected) = sim.groups.iter().fold((0, 0), |(p, i), g| {
        let s = g.policy.stats();
        (p + s.preemptions, i + s.workers_inspected)
    });
    Ok(SimOutput {
        records: sim.records,
        worker_busy: sim.worker_busy,
        end: sim.now,
        preemptions,
        workers_inspected,
        events: sim.events,
        wakeups: sim.wakeups,
        deferred: sim.deferred,
        followed: sim.followed,
    })
}

impl Ev {
    /// Which of the events at one time goes first: the workers' (a start, a completion, a
    /// preemption landing), as the runtime's dispatcher handles what the workers reported before
    /// what arrived, so that an arrival is placed on what they have already reported. The rest
    /// go by when they first fell due (then in the order scheduled): an arrival or a timer that
    /// waited for a busy dispatcher keeps its place among the others that waited, so that
    /// neither starves the other.
    fn rank(&self) -> u8 {
        match self {
            Self::Started { .. } | Self::Complete { .. } | Self::PreemptDeliver { .. } => 0,
            Self::Arrival(_) | Self::Dispatch(..) | Self::Notify { .. } | Self::Tick { .. } => 1,
        }
    }
}

/// Deterministic spread of requests over dispatcher groups by a hash ([`Spread::Hash`], the
/// paper's RSS, SledgeScale §3.3): a job's first stage by its index, later stages elsewhere.
fn hashed_group(id: RequestId, groups: usize) -> usize {
    let (i, k) = job_of(id);
    let mut z = (i as u64 ^ (u64::from(k) << 40)).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) % groups as u64) as usize
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig, jobs: &'a [Job]) -> Self {
        let mut groups = Vec::with_capacity(cfg.dispatchers);
        let mut group_of_worker = Vec::with_capacity(cfg.workers);
        let mut first = 0;
        for g in 0..cfg.dispatchers {
            let size =
                cfg.workers / cfg.dispatchers + usize::from(g < cfg.workers % cfg.dispatchers);
            let mut pc = cfg.policy_config.clone();
            pc.workers = size;
            let mut policy = cfg.policy.build(&pc);
            if let Some(lane) = cfg.ull_lane {
                policy = Box::new(UllLane::new(policy, lane));
            }
            groups.push(Group {
                checker: cfg.check_contract.then(|| ContractChecker::for_policy(&policy)),
                policy,
                first_worker: first,
                busy_until: 0,
                ticks: BTreeSet::new(),
                held: Vec::new(),
                waking_until: 0,
            });
            group_of_worker.extend(std::iter::repeat_n(g, size));
            first += size;
        }
        let records = jobs
            .iter()
            .map(|j| Record {
                arrival: j.arrival,
                class: j.class,
                execution: j.execution,
                relative_deadline: j.relative_deadline,
                first_start: None,
                completion: None,
                preemptions: 0,
                outcome: Outcome::Pending,
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(1024);
        if let Some(j) = jobs.first() {
            heap.push(Reverse((j.arrival, Ev::Arrival(0).rank(), j.arrival, 0, Ev::Arrival(0))));
        }
        Self {
            cfg,
            jobs,
            now: 0,
            seq: 1,
            heap,
            due: 0,
            next_group: 0,
            groups,
            group_of_worker,
            current: vec![None; cfg.workers],
            records,
            runs: vec![0; jobs.len()],
            progress: vec![0; jobs.len()],
            estimator: Estimator::new(EstimatorConfig {
                default_estimate: cfg.default_estimate,
                ..EstimatorConfig::default()
            }),
            epoch: 0,
            worker_busy: 0,
            events: 0,
            wakeups: 0,
            deferred: 0,
            follow: vec![VecDeque::new(); cfg.workers],
            followed: 0,
            out: Vec::new(),
        }
    }

    /// Schedules `ev` at `at`. Every time the engine computes saturates (`saturating_add`): a
    /// workload whose times or executions reach `u64::MAX` ns piles its events there instead
    /// of wrapping the clock backwards.
    fn push(&mut self, at: Nanos, ev: Ev) {
        self.push_due(at, at, ev);
    }

    /// Schedules `ev` at `at`, ordered among the events at that time as if due at `due`.
    fn push_due(&mut self, at: Nanos, due: Nanos, ev: Ev) {
        self.heap.push(Reverse((at, ev.rank(), due, self.seq, ev)));
        self.seq += 1;
    }

    fn violation(&self, g: usize, what: String) -> SimError {
        SimError::Contract { policy: self.groups[g].policy.name(), at: self.now, what }
    }

    fn broke(&self, g: usize, v: &ContractViolation) -> SimError {
        self.violation(g, v.to_string())
    }

    fn run(&mut self) -> Result<(), SimError> {
        while let Some(Reverse((at, _, due, _, ev))) = self.heap.pop() {
            self.now = at;
            self.due = due;
            self.events += 1;
            match ev {
                Ev::Arrival(i) => self.arrival(i)?,
                Ev::Dispatch(id, g) => self.dispatch(id, g)?,
                Ev::Notify { g } => self.period_end(g)?,
                Ev::Started { w, epoch } => self.started(w, epoch)?,
                Ev::Complete { w, epoch } => self.complete(w, epoch)?,
                Ev::PreemptDeliver { w, epoch } => self.preempt_deliver(w, epoch)?,
                Ev::Tick { g } => self.tick(g, at)?,
            }
        }
        for (g, group) in self.groups.iter().enumerate() {
            if let Some(Err(v)) = group.checker.as_ref().map(ContractChecker::end) {
                return Err(self.broke(g, &v));
            }
        }
        // Every request ends completed, refused or shed, exactly once, whether or not the
        // contract is checked: one left pending would be counted as refused in the report.
        if let Some(i) = self.records.iter().position(|r| r.outcome == Outcome::Pending) {
            let what = format!("job {i} was never answered (its events ran out)");
            return Err(SimError::Contract {
                policy: self.groups[0].policy.name(),
                at: self.now,
                what,
            });
        }
        Ok(())
    }

    fn arrival(&mut self, i: usize) -> Result<(), SimError> {
        if let Some(next) = self.jobs.get(i + 1) {
            self.push(next.arrival, Ev::Arrival(i + 1));
        }
        self.notify(request_id(i, 0))
    }

    /// Whether every worker of group `g` is idle and no wake-up is in flight: its threads
    /// sleep, and a notification must wake them.
    fn asleep(&self, g: usize) -> bool {
        let group = &self.groups[g];
        let workers = group.first_worker..group.first_worker + group.policy.workers();
        group.waking_until <= self.now && self.current[workers].iter().all(Option::is_none)
    }

    /// Hands request `id` to its group: at once, after a wake-up if the group sleeps, or at
    /// the end of the notification period if it has the slack for that
    /// ([`SimConfig::notify_interval`]), as the runtime's submitters do.
    fn notify(&mut self, id: RequestId) -> Result<(), SimError> {
        let g = match self.cfg.spread {
            Spread::Hash => hashed_group(id, self.groups.len()),
            Spread::RoundRobin => {
                let g = self.next_group % self.groups.len();
                self.next_group = self.next_group.wrapping_add(1);
                g
            }
        };
        let every = self.cfg.notify_interval;
        if every > 0 && (!self.cfg.notify_urgent || self.slack(id) > every) {
            self.deferred += 1;
            if self.groups[g].held.is_empty() {
                let end = (self.now / every + 1).saturating_mul(every);
                self.push(end, Ev::Notify { g });
            }
            self.groups[g].held.push(id);
            return Ok(());
        }
        match self.wake(g) {
            Some(at) => {
                self.push_due(at, self.due, Ev::Dispatch(id, g));
                Ok(())
            }
            None => self.dispatch(id, g),
        }
    }

    /// A notification period ends for group `g`: one notification for everything it held.
    fn period_end(&mut self, g: usize) -> Result<(), SimError> {
        let held = std::mem::take(&mut self.groups[g].held);
        if held.is_empty() {
            // Seen already, on a round the group made for something else.
            return Ok(());
        }
        let at = self.wake(g);
        for id in held {
            match at {
                Some(at) => self.push_due(at, self.due, Ev::Dispatch(id, g)),
                None => self.dispatch(id, g)?,
            }
        }
        Ok(())
    }

    /// Group `g` makes a round for something else (a completion, a preemption, a timer, an
    /// arrival it was notified of): like the runtime's dispatcher, which reads its whole
    /// submission queue on every round, it takes the arrivals held for the period's end too.
    /// Not under Edge-RT's rule ([`SimConfig::notify_urgent`] off), whose scheduler sees
    /// messages only at the period's end.
    fn take_held(&mut self, g: usize) -> Result<(), SimError> {
        if !self.cfg.notify_urgent {
            return Ok(());
        }
        for id in std::mem::take(&mut self.groups[g].held) {
            self.dispatch(id, g)?;
        }
        Ok(())
    }

    /// Notifies group `g`: `None` if it is awake (it sees the notification at once), else when
    /// it runs, counting a wake-up unless one is already in flight.
    fn wake(&mut self, g: usize) -> Option<Nanos> {
        if self.groups[g].waking_until > self.now {
            return Some(self.groups[g].waking_until);
        }
        if !self.asleep(g) {
            return None;
        }
        self.wakeups += 1;
        let wakeup = self.cfg.overheads.wakeup;
        (wakeup > 0).then(|| {
            self.groups[g].waking_until = self.now.saturating_add(wakeup);
            self.now.saturating_add(wakeup)
        })
    }

    /// How long request `id` may wait before it must start: its deadline (a stage's, for a
    /// chain) less now and its estimated work.
    fn slack(&self, id: RequestId) -> Nanos {
        let (i, k) = job_of(id);
        let job = self.jobs[i];
        let deadline = job.arrival.saturating_add(job.relative_deadline);
        let finish_by = deadline.saturating_sub(self.work_after(&job, k));
        finish_by.saturating_sub(self.now).saturating_sub(self.estimate(&job, k).0)
    }

    /// What estimates add to a request's execution for its start-up on a worker
    /// ([`SimConfig::estimate_start_cost`]).
    fn start_cost(&self) -> Nanos {
        let o = &self.cfg.overheads;
        if self.cfg.estimate_start_cost {
            o.enqueue.saturating_add(o.context_switch).saturating_add(o.sandbox_start)
        } else {
            0
        }
    }

    /// The estimate of stage `k` of `job`, and whether it rests on knowledge.
    fn estimate(&self, job: &Job, k: u8) -> (Nanos, bool) {
        match self.cfg.estimator {
            EstimatorMode::Oracle => {
                (job.stage_execution(k).saturating_add(self.start_cost()), true)
            }
            EstimatorMode::Median256 => {
                (self.estimator.estimate(job.function), self.estimator.samples(job.function) > 0)
            }
        }
    }

    /// The estimated work of `job`'s stages after `k` (known estimates only, as admission
    /// refuses on knowledge only).
    fn work_after(&self, job: &Job, k: u8) -> Nanos {
        let known = (k + 1..job.stages).map(|j| self.estimate(job, j)).filter(|e| e.1);
        known.map(|e| e.0).fold(0, Nanos::saturating_add)
    }

    /// A timer tick of group `g` due at `at`: the dispatcher is a serial server, so a tick that
    /// finds it busy waits for it, and handling one (`Overheads::tick`) keeps it busy — arrivals
    /// meanwhile wait, as they do for each other.
    fn tick(&mut self, g: usize, at: Nanos) -> Result<(), SimError> {
        self.groups[g].ticks.remove(&at);
        let busy = self.groups[g].busy_until;
        if busy > self.now {
            if self.groups[g].ticks.insert(busy) {
                self.push_due(busy, self.due, Ev::Tick { g });
            }
            return Ok(());
        }
        let cost = self.cfg.overheads.tick;
        self.groups[g].busy_until = self.now.saturating_add(cost);
        self.feed(g, Event::Tick, cost)?;
        self.take_held(g)
    }

    /// Hands request `id` (a job's stage) to group `g`'s policy; a busy dispatcher sees it when
    /// it is free again.
    fn dispatch(&mut self, id: RequestId, g: usize) -> Result<(), SimError> {
        if self.groups[g].busy_until > self.now {
            let at = self.groups[g].busy_until;
            self.push_due(at, self.due, Ev::Dispatch(id, g));
            return Ok(());
        }
        let (i, k) = job_of(id);
        let job = self.jobs[i];
        let (expected, known) = self.estimate(&job, k);
        let mut req = if job.stages == 1 {
            Request::new(id, job.function, job.arrival, job.relative_deadline, expected)
        } else {
            // The chain's deadline less the work after this stage: when it must finish for the
            // rest to fit (`docs/manifest.md`, `[[chain]]`).
            let arrival = if k == 0 { job.arrival } else { self.now };
            let deadline = job.arrival.saturating_add(job.relative_deadline);
            let finish_by = deadline.saturating_sub(self.work_after(&job, k));
            if finish_by <= self.now {
                let reason = if k == 0 { RejectReason::Infeasible } else { RejectReason::Late };
                return self.finish_record(g, id, Outcome::Rejected(reason));
            }
            Request::new(id, job.function, arrival, finish_by - arrival, expected)
        }
        .with_class(job.class)
        .with_overrun(job.on_overrun);
        if !known {
            // As in the runtime: admission refuses only on knowledge, never on the default guess.
            req = req.with_guessed_estimate();
        }
        let before = self.groups[g].policy.stats().workers_inspected;
        self.feed_inner(g, Event::Arrival(req))?;
        let inspected = self.groups[g].policy.stats().workers_inspected - before;
        // Refused outright: the runtime refuses such an arrival on the thread that received it,
        // from the backlog the group last published, and its dispatcher never sees it.
        let refused = matches!(self.out.as_slice(), [Action::Reject { req: r, .. }] if r.id == id);
        let o = &self.cfg.overheads;
        let cost = if refused {
            0
        } else {
            o.dispatch_base.saturating_add(o.dispatch_per_worker.saturating_mul(inspected))
        };
        self.groups[g].busy_until = self.now.saturating_add(cost);
        self.apply(g, cost)?;
        self.take_held(g)
    }

    fn feed(&mut self, g: usize, ev: Event, cost: Nanos) -> Result<(), SimError> {
        self.feed_inner(g, ev)?;
        self.apply(g, cost)
    }

    /// Hands one event to group `g`'s policy, checking the call if asked to; its actions land in
    /// `self.out` for [`Self::apply`].
    fn feed_inner(&mut self, g: usize, ev: Event) -> Result<(), SimError> {
        self.out.clear();
        let group = &mut self.groups[g];
        group.policy.on_event(self.now, ev, &mut self.out);
        match group.checker.as_mut().map(|c| c.step(self.now, &ev, &self.out)) {
            Some(Err(v)) => Err(self.broke(g, &v)),
            _ => Ok(()),
        }
    }

    /// Carries out the actions of the last policy call; they take effect `delay` from now.
    fn apply(&mut self, g: usize, delay: Nanos) -> Result<(), SimError> {
        let actions = std::mem::take(&mut self.out);
        let base = self.groups[g].first_worker;
        let size = self.groups[g].policy.workers();
        let at = self.now.saturating_add(delay);
        for a in &actions {
            match *a {
                // Informational: the request reaches its worker with its `Run`.
                // Informational: a demoted request still runs (late) and is recorded when it ends.
                Action::Enqueue { .. } | Action::Demote { .. } => {}
                Action::Run { worker, req } => {
                    if worker >= size {
                        return Err(self.violation(g, format!("run on worker {worker} of {size}")));
                    }
                    self.run_on(g, base + worker, req, at)?;
                }
                // Started by the worker itself when the run before it completes.
                Action::Follow { worker, req } => {
                    if worker >= size {
                        let what = format!("follow on worker {worker} of {size}");
                        return Err(self.violation(g, what));
                    }
                    self.follow[base + worker].push_back(req);
                }
                Action::Preempt { worker, id } => {
                    let w = base + worker;
                    if let Some(cur) = self.current.get(w).copied().flatten()
                        && cur.req.id == id
                    {
                        let epoch = cur.epoch;
                        self.push(
                            at.saturating_add(self.cfg.overheads.preempt_delivery),
                            Ev::PreemptDeliver { w, epoch },
                        );
                    }
                }
                Action::Reject { req, reason } => {
                    self.finish_record(g, req.id, Outcome::Rejected(reason))?;
                }
                Action::WakeAt(t) => {
                    let t = t.max(self.now);
                    if self.groups[g].ticks.insert(t) {
                        self.push(t, Ev::Tick { g });
                    }
                }
            }
        }
        self.out = actions;
        Ok(())
    }

    fn run_on(&mut self, g: usize, w: usize, req: Request, at: Nanos) -> Result<(), SimError> {
        if self.current[w].is_some() {
            return Err(self.violation(g, format!("run of {:?} on busy worker {w}", req.id)));
        }
        self.start_on(w, req, at, self.cfg.overheads.enqueue);
        Ok(())
    }

    /// Starts `req` on the free worker `w` at `at`, after a hand-off of `handoff` ns (none for
    /// a follower: the worker holds it already). The worker reports `Started` as it picks the
    /// request up, before the switch and the sandbox's start (or resume), as the runtime's does:
    /// a policy counts the start-up as part of the run, as its estimates do
    /// ([`SimConfig::estimate_start_cost`]).
    fn start_on(&mut self, w: usize, req: Request, at: Nanos, handoff: Nanos) {
        // A uLL request's first start takes a sandbox its worker built ahead, while idle
        // (`SimConfig::ull_lane`; the runtime's ready sandboxes, after HORSE §1–2's warm
        // sandboxes).
        let ready = self.cfg.ull_lane.is_some_and(|lane| lane.is_ull(&req));
        let runs = &mut self.runs[job_of(req.id).0];
        let o = &self.cfg.overheads;
        let start_cost = o.context_switch.saturating_add(match *runs {
            0 if ready => 0,
            0 => o.sandbox_start,
            _ => o.preempt_resume,
        });
        *runs += 1;
        self.epoch += 1;
        let epoch = self.epoch;
        let picked = at.saturating_add(handoff);
        let exec_from = picked.saturating_add(start_cost);
        self.current[w] =
            Some(Current { req, epoch, started: None, exec_from, preempt_on_start: false });
        self.push(picked, Ev::Started { w, epoch });
    }

    fn started(&mut self, w: usize, epoch: u64) -> Result<(), SimError> {
        let Some(cur) = self.current[w].as_mut().filter(|c| c.epoch == epoch) else {
            return Ok(());
        };
        cur.started = Some(self.now);
        let (req, preempt, exec_from) = (cur.req, cur.preempt_on_start, cur.exec_from);
        let (i, k) = job_of(req.id);
        self.records[i].first_start.get_or_insert(self.now);
        let g = self.group_of_worker[w];
        let local = w - self.groups[g].first_worker;
        self.feed(g, Event::Started { worker: local, id: req.id }, 0)?;
        if preempt {
            return self.preempt_deliver(w, epoch);
        }
        let left = self.jobs[i].stage_execution(k).saturating_sub(self.progress[i]);
        self.push(exec_from.saturating_add(left), Ev::Complete { w, epoch });
        Ok(())
    }

    fn complete(&mut self, w: usize, epoch: u64) -> Result<(), SimError> {
        let Some(cur) = self.current[w].filter(|c| c.epoch == epoch) else { return Ok(()) };
        self.current[w] = None;
        let id = cur.req.id;
        let (i, k) = job_of(id);
        let job = self.jobs[i];
        let execution = job.stage_execution(k);
        // This run, start-up included, from the worker's pick-up; and what the policy is told
        // this run and the ones before it took.
        let ran = self.now - cur.started.unwrap_or(self.now);
        self.worker_busy = self.worker_busy.saturating_add(ran);
        let executed = cur.req.executed.saturating_add(ran);
        self.estimator.observe(job.function, execution.saturating_add(self.start_cost()));
        let g = self.group_of_worker[w];
        let local = w - self.groups[g].first_worker;
        // The next request of its batch starts there at once, without a hand-off.
        if let Some(next) = self.follow[w].pop_front() {
            self.followed += 1;
            self.start_on(w, next, self.now, 0);
        }
        let last = k + 1 == job.stages;
        if last {
            self.finish_record(g, id, Outcome::Completed)?;
        }
        self.feed(g, Event::Completed { worker: local, id, executed }, 0)?;
        self.take_held(g)?;
        if last {
            return Ok(());
        }
        // The next stage is handed over inside the node, as its predecessor completes.
        self.runs[i] = 0;
        self.progress[i] = 0;
        self.notify(request_id(i, k + 1))
    }

    fn preempt_deliver(&mut self, w: usize, epoch: u64) -> Result<(), SimError> {
        let Some(cur) = self.current[w].as_mut().filter(|c| c.epoch == epoch) else {
            return Ok(());
        };
        let Some(started) = cur.started else {
            cur.preempt_on_start = true;
            return Ok(());
        };
        // The policy is told the whole run, start-up included, and the job keeps the execution
        // proper it had. A preemption that lands before the execution begins stops the run
        // before its sandbox starts, as the runtime's worker does: nothing ran, and the next
        // start pays the start-up again.
        let ran = self.now - started;
        let id = cur.req.id;
        let i = job_of(id).0;
        let executed = if self.now < cur.exec_from {
            self.runs[i] = self.runs[i].saturating_sub(1);
            cur.req.executed
        } else {
            cur.req.executed.saturating_add(ran)
        };
        let proper = self.now.saturating_sub(cur.exec_from);
        self.current[w] = None;
        self.progress[i] = self.progress[i].saturating_add(proper);
        // The batch behind it never starts: the policy takes it back.
        self.follow[w].clear();
        self.worker_busy = self.worker_busy.saturating_add(ran);
        self.records[job_of(id).0].preemptions += 1;
        let g = self.group_of_worker[w];
        let local = w - self.groups[g].first_worker;
        self.feed(g, Event::Preempted { worker: local, id, executed }, 0)?;
        self.take_held(g)
    }

    fn finish_record(&mut self, g: usize, id: RequestId, outcome: Outcome) -> Result<(), SimError> {
        let Some(rec) = self.records.get_mut(job_of(id).0) else {
            return Err(self.violation(g, format!("unknown request {id:?}")));
        };
        if rec.outcome != Outcome::Pending {
            return Err(self.violation(g, format!("request {id:?} answered twice")));
        }
        rec.outcome = outcome;
        if outcome == Outcome::Completed {
            rec.completion = Some(self.now);
        }
        Ok(())
    }
}
