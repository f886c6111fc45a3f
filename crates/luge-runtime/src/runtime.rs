//! The in-process API the front ends and tests use: start a runtime from a config, register
//! functions, submit requests (each gets exactly one [`Outcome`]), shut down gracefully.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use luge_sched::{Estimator, EstimatorConfig, Policy, PolicyConfig, RequestId, UllConfig, UllLane};

use luge_proto::{TraceContext, nanos};

use crate::chain::{self, Chain, ChainConfig, Chains};
use crate::config::{FunctionConfig, Layout, RuntimeConfig};
use crate::dispatcher::{Dispatcher, GroupShared, Submission};
use crate::error::{Error, RegisterError};
use crate::ingress::{Driver, Ingress};
use crate::outcome::{BadRequest, Failure, Outcome, Rejection, Timing};
use crate::registry::{Function, Registry};
use crate::reply::{Reply, Ticket};
use crate::request_ids::RequestIds;
use crate::signals::{Clock, Epoch, InlineHooks, Signals, TaskClock, WorkerSignals};
use crate::stats::{GroupStats, WorkerStats};
use crate::task::{Task, TaskState, WorkerShared};
use crate::tenants::{TenantStats, Tenants};
use crate::worker;

mod shutdown;
mod watch;

pub use self::watch::ThreadWatch;

/// Per-request options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SubmitOptions {
    /// Relative deadline; the function's default when `None`.
    pub deadline: Option<Duration>,
    /// The client's expected execution; used only if the function trusts client estimates.
    pub expected: Option<Duration>,
    /// When the node received the request (the datagram, the HTTP request head): its relative
    /// deadline, queueing and total time count from here, so time spent in a front end counts
    /// against the deadline. `None` (or a time after the submission) means the submission.
    pub received: Option<Instant>,
    /// The trace this request runs in, its span id the parent of the guest's work: the guest
    /// sees it as `TRACEPARENT` (W3C Trace Context, the OpenTelemetry environment carrier).
    pub trace: Option<TraceContext>,
    /// The worker group that received it, when a worker read it itself ([`Ingress`]): it runs
    /// there while that group has nothing queued (no hand-off), else goes where the runtime
    /// would put any arrival.
    pub group: Option<usize>,
    /// How long the front end takes to deliver an answer once the runtime has it (its own
    /// backlog and the write): the request is admitted and scheduled to complete this much
    /// before its deadline, so that its answer still leaves in time. At most a quarter of the
    /// relative deadline is set aside ([`scheduled_deadline`]); zero sets none.
    pub delivery: Duration,
}

/// The relative deadline a request is admitted and scheduled with: its own, less the time its
/// front end needs to deliver the answer, of which at most a quarter of the deadline is set
/// aside (a front end's estimate of its delivery cannot take more of a request's time than that).
pub fn scheduled_deadline(relative: Duration, delivery: Duration) -> Duration {
    relative.saturating_sub(delivery.min(relative / 4))
}

/// What [`Runtime::health`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Accepting, every thread alive, not saturated.
    Ready,
    /// Not ready to take requests, and why.
    NotReady(&'static str),
}

/// A sandbox built ahead of its request ([`Runtime::prepare_here`]): benchmarks only.
#[doc(hidden)]
pub struct PreparedSandbox(crate::sandbox::Ready);

/// A running Luge runtime. Dropping it shuts it down (as [`Runtime::shutdown`]).
pub struct Runtime {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The thread a shutdown asked for on one of the runtime's threads runs on.
    apart: Mutex<Option<JoinHandle<()>>>,
}

struct Inner {
    config: RuntimeConfig,
    registry: Registry,
    signals: Arc<Signals>,
    groups: Vec<Arc<GroupShared>>,
    request_ids: RequestIds,
    next_group: AtomicUsize,
    accepting: AtomicBool,
    /// Submitters between their `accepting` check and their push (closes the shutdown race).
    submitting: AtomicUsize,
    ticker_stop: AtomicBool,
    /// The declared tenants' limits and counters.
    tenants: Tenants,
    /// The registered chains.
    chains: RwLock<Chains>,
    /// Each dispatcher group's workers (what `worker_stats` reads).
    group_workers: Vec<Vec<Arc<WorkerShared>>>,
    /// A thread serving the runtime from outside it panicked (`watch.rs`).
    serving_thread_died: AtomicBool,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

thread_local! {
    /// Set on the runtime's own threads (workers, dispatchers, the ticker).
    static RUNTIME_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn spawn(name: String, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            RUNTIME_THREAD.set(true);
            body();
        })
        .map_err(|source| Error::Thread { name, source })
}

impl Runtime {
    /// Builds the engine and starts the ticker, dispatcher and worker threads.
    pub fn start(config: RuntimeConfig) -> Result<Self, Error> {
        config.check().map_err(|e| Error::Config(e.to_string()))?;
        let tenants = Tenants::new(&config.tenants, config.workers).map_err(Error::Config)?;
        let inline = config.effective_layout() == Layout::Inline;
        crate::engine::raise_nofile_limit();
        let engine = crate::engine::build(&config)?;
        let registry = Registry::from_config(engine.clone(), &config)?;
        let signals = Arc::new(Signals {
            clock: Clock::new(),
            epoch: Epoch::Engine(engine.clone()),
            workers: (0..config.workers).map(|_| WorkerSignals::default()).collect(),
            abort: AtomicBool::new(false),
            inline: inline.then_some(InlineHooks {
                on_epoch: worker::poll_inline,
                arrivals_waiting: worker::inline_arrivals_waiting,
            }),
            contract_violation: OnceLock::new(),
        });
        let groups: Vec<Arc<GroupShared>> = (0..config.dispatchers)
            .map(|index| {
                Arc::new(GroupShared::new(index, config.submit_queue, config.ull_config()))
            })
            .collect();
        // Contiguous worker groups, sizes differing by at most one.
        let mut first = 0;
        let group_workers: Vec<Vec<Arc<WorkerShared>>> = (0..config.dispatchers)
            .map(|g| {
                let size = config.workers / config.dispatchers
                    + usize::from(g < config.workers % config.dispatchers);
                let workers = (first..first + size).map(|i| {
                    let pc = &config.policy_config;
                    let batch = if pc.batch_window > 0 { pc.batch_max } else { 0 };
                    let mut worker = WorkerShared::new(i, batch);
                    worker.ready_limits = config.ready_limits();
                    Arc::new(worker)
                });
                first += size;
                workers.collect()
            })
            .collect();
        let inner = Arc::new(Inner {
            group_workers: group_workers.clone(),
            registry,
            signals: Arc::clone(&signals),
            groups: groups.clone(),
            request_ids: RequestIds::new(),
            next_group: AtomicUsize::new(0),
            accepting: AtomicBool::new(true),
            serving_thread_died: AtomicBool::new(false),
            submitting: AtomicUsize::new(0),
            ticker_stop: AtomicBool::new(false),
            tenants,
            chains: RwLock::default(),
            config: config.clone(),
        });
        let mut threads = Vec::new();
        for (g, (group, workers)) in groups.iter().zip(group_workers).enumerate() {
            let size = workers.len();
            let spawn_workers = if inline { &workers[..0] } else { &workers[..] };
            for w in spawn_workers {
                let (me, notify, signals) =
                    (Arc::clone(w), Arc::clone(&group.notify), Arc::clone(&signals));
                let cpu =
                    (!config.cpus.is_empty()).then(|| config.cpus[w.index % config.cpus.len()]);
                let mode = config.wait;
                threads.push(spawn(format!("luge-worker-{}", w.index), move || {
                    worker::run(me, notify, signals, mode, cpu)
                })?);
            }
            let mut policy_config: PolicyConfig = config.policy_config.clone();
            policy_config.workers = size;
            let estimator = Estimator::new(EstimatorConfig {
                default_estimate: nanos(config.default_estimate),
                ..EstimatorConfig::default()
            });
            let inline_worker = inline.then(|| Arc::clone(&workers[0]));
            let max_suspended = config.max_suspended(size);
            if max_suspended == 0 {
                tracing::warn!(
                    max_sandboxes = config.max_sandboxes,
                    workers = config.workers,
                    "max_sandboxes leaves no slot for a preempted request: a more urgent arrival \
                     waits for the running request to end (raise max_sandboxes)"
                );
            }
            let dispatcher = Dispatcher::new(
                Arc::clone(group),
                workers,
                with_ull_lane(config.policy.build(&policy_config), group.ull_lane),
                estimator,
                Arc::clone(&signals),
                config.wait,
                config.shutdown_grace,
            )
            .with_max_suspended(max_suspended);
            match inline_worker {
                Some(me) => {
                    let signals = Arc::clone(&signals);
                    let cpu = (!config.cpus.is_empty())
                        .then(|| config.cpus[me.index % config.cpus.len()]);
                    let mode = config.wait;
                    threads.push(spawn(format!("luge-worker-{}", me.index), move || {
                        worker::run_inline(me, dispatcher, signals, mode, cpu)
                    })?);
                }
                None => {
                    threads.push(spawn(format!("luge-dispatch-{g}"), move || dispatcher.run())?)
                }
            }
        }
        let ticker = Arc::clone(&inner);
        threads.push(spawn("luge-ticker".into(), move || {
            // With periodic notification on, the ticker is also its timer (Edge-RT §IV-B): it
            // runs at least once per interval and notifies once per interval.
            let every = ticker.config.notify_interval;
            let period =
                if every.is_zero() { ticker.config.tick } else { ticker.config.tick.min(every) };
            let mut next_notify = Instant::now() + every;
            while !ticker.ticker_stop.load(Ordering::Acquire) {
                std::thread::sleep(period);
                // The bump makes a running inline sandbox's epoch callback poll its dispatcher
                // (which takes deferred arrivals too, so inline they are seen within a tick
                // while a sandbox runs).
                ticker.signals.epoch.bump();
                let now = Instant::now();
                if every.is_zero() || now < next_notify {
                    continue;
                }
                next_notify = now + every;
                // A sleeping dispatcher with deferred arrivals is woken once for all of them,
                // unless it took them all before it fell asleep (a wake-up for nothing).
                for g in &ticker.groups {
                    if g.deferred.swap(false, Ordering::AcqRel) && !g.submissions.is_empty() {
                        g.notify.notify();
                    }
                }
            }
        })?);
        Ok(Self { inner, threads: Mutex::new(threads), apart: Mutex::new(None) })
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &RuntimeConfig {
        &self.inner.config
    }

    /// How many worker groups can read a front end's socket themselves ([`Ingress`]): one per
    /// worker in the inline layout, none with dispatcher threads.
    pub fn ingress_groups(&self) -> usize {
        if self.inner.signals.inline() { self.inner.groups.len() } else { 0 }
    }

    /// Lets the inline worker of `group` read `ingress` when idle (see [`Ingress`]). Gives it
    /// back if the group cannot take one: no such inline group, or one is attached already
    /// (e.g. a second front end on the same runtime, which then reads on its own thread).
    pub fn attach_ingress(
        &self,
        group: usize,
        ingress: Arc<dyn Ingress>,
    ) -> Result<(), Arc<dyn Ingress>> {
        if group >= self.ingress_groups() {
            return Err(ingress);
        }
        if self.inner.groups[group].set_ingress(Some(Arc::clone(&ingress))) {
            Ok(())
        } else {
            Err(ingress)
        }
    }

    /// Detaches the ingress of `group` (its front end stops); the worker stops reading it from
    /// its next turn, and is woken for it.
    pub fn detach_ingress(&self, group: usize) {
        if let Some(shared) = self.inner.groups.get(group) {
            shared.set_ingress(None);
        }
    }

    /// Lets the inline worker of `group` run `driver`'s event loop when idle (see [`Driver`]);
    /// beside an attached [`Ingress`]. Gives it back if the group cannot take one: no such
    /// inline group, or a driver is attached already.
    pub fn attach_driver(
        &self,
        group: usize,
        driver: Arc<dyn Driver>,
    ) -> Result<(), Arc<dyn Driver>> {
        if group >= self.ingress_groups() {
            return Err(driver);
        }
        if self.inner.groups[group].set_driver(Some(Arc::clone(&driver))) {
            Ok(())
        } else {
            Err(driver)
        }
    }

    /// Detaches the driver of `group` (its front end stops); the worker stops running its loop
    /// from its next turn, and is woken for it.
    pub fn detach_driver(&self, group: usize) {
        if let Some(shared) = self.inner.groups.get(group) {
            shared.set_driver(None);
        }
    }

    /// Validates, compiles (or loads from the AoT cache) and registers a function. `module` is
    /// a Wasm binary or WAT text. Bad modules are rejected here, never at request time, and so
    /// is a function beyond its tenant's `max_functions`.
    pub fn register(&self, config: FunctionConfig, module: &[u8]) -> Result<Arc<Function>, Error> {
        let tenant = self.inner.tenants.config(config.tenant);
        if tenant.is_none() && config.tenant != 0 && !self.inner.config.tenants.is_empty() {
            let reason = RegisterError::UnknownTenant(config.tenant);
            return Err(Error::Register { name: config.name, reason });
        }
        if let Some(reason) = config.unservable(tenant, &self.inner.config) {
            return Err(Error::Register {
                name: config.name,
                reason: RegisterError::Limit(reason),
            });
        }
        let quota = tenant.and_then(|t| {
            Some(crate::registry::Quota {
                tenant: t.id,
                name: t.name.clone(),
                max: t.max_functions?,
            })
        });
        if let Some(q) = &quota {
            // Refused before compiling when the count is reached already; counted again at the
            // insertion, under the registry's lock, for registrations compiling side by side.
            let has = self.functions().iter().filter(|f| f.config.tenant == q.tenant).count();
            if has >= q.max as usize {
                let reason = RegisterError::TenantFunctions {
                    tenant: q.tenant,
                    name: q.name.clone(),
                    max: q.max,
                };
                return Err(Error::Register { name: config.name, reason });
            }
        }
        self.inner.registry.register_within(config, module, quota)
    }

    /// Every declared tenant's counters, by id (for metrics).
    pub fn tenant_stats(&self) -> Vec<TenantStats> {
        self.inner.tenants.stats()
    }

    /// Checks and compiles a module without registering it (`luge compile`).
    pub fn check(&self, config: &FunctionConfig, module: &[u8]) -> Result<(), Error> {
        self.inner.registry.compile(config, module).map(|_| ())
    }

    /// Removes a function; requests already submitted to it still finish.
    pub fn unregister(&self, name: &str) -> Result<(), Error> {
        self.unregister_with(name, || ())
    }

    /// Removes `function` only if it is still the one registered under its name — not one a
    /// later registration put there after it was removed — and says whether it did.
    pub fn unregister_exact(&self, function: &Arc<Function>) -> bool {
        self.inner.registry.unregister_exact(function)
    }

    /// [`unregister`](Self::unregister), running `then` as soon as the function is out of the
    /// registry — no new request finds it — and before its module is freed, which can take a
    /// while: e.g. to drop its routes under a lock that must not be held that long.
    pub fn unregister_with<T>(&self, name: &str, then: impl FnOnce() -> T) -> Result<T, Error> {
        self.inner
            .registry
            .unregister_with(name, then)
            .ok_or_else(|| Error::UnknownFunction(name.to_owned()))
    }

    /// The function registered under `name`.
    pub fn function(&self, name: &str) -> Option<Arc<Function>> {
        self.inner.registry.get(name)
    }

    /// The function registered under numeric id `id` (the UDP-RPC function id).
    pub fn function_by_id(&self, id: u32) -> Option<Arc<Function>> {
        self.inner.registry.get_by_id(id)
    }

    /// Runs one request of `function` in a fresh sandbox on the calling thread — the very
    /// future a worker polls, with the same store set-up — bypassing dispatch. For benchmarks
    /// that isolate the sandbox's cost (`benches/runtime.rs`); the runtime never calls it.
    #[doc(hidden)]
    pub fn run_here(&self, function: &Arc<Function>, payload: Vec<u8>) -> Result<Vec<u8>, Failure> {
        self.run_here_in(function, payload, None)
    }

    /// A sandbox of `function` built ahead of its request, as a worker builds its ready
    /// sandboxes (`ready.rs`), for [`Runtime::run_here_in`]; `None` if it cannot be built.
    /// Benchmarks only.
    #[doc(hidden)]
    pub fn prepare_here(&self, function: &Arc<Function>) -> Option<PreparedSandbox> {
        crate::sandbox::prepare(function, &self.inner.signals).ok().map(PreparedSandbox)
    }

    /// [`Runtime::run_here`] in `prepared`, if given (a ready sandbox), else in a fresh one.
    #[doc(hidden)]
    pub fn run_here_in(
        &self,
        function: &Arc<Function>,
        payload: Vec<u8>,
        prepared: Option<PreparedSandbox>,
    ) -> Result<Vec<u8>, Failure> {
        let clock = Arc::new(TaskClock::default());
        // No worker: no preemption flag can name it.
        clock.worker.store(usize::MAX, Ordering::Relaxed);
        let budget = function.config.limits.max_execution;
        crate::sandbox::arm(&clock, &self.inner.signals.clock, budget, (0, 0), false);
        let guest =
            crate::sandbox::GuestContext { request_id: 0, deadline_unix_us: 0, trace: None };
        let mut future = crate::sandbox::start(crate::sandbox::Spec {
            function: Arc::clone(function),
            payload,
            guest,
            id: 0,
            signals: Arc::clone(&self.inner.signals),
            clock,
            ready: prepared.map(|p| p.0),
        });
        crate::sandbox::poll_to_end(future.as_mut()).result
    }

    /// The runtime's Wasmtime engine (benchmarks compare against bare Wasmtime on it).
    #[doc(hidden)]
    pub fn engine(&self) -> &wasmtime::Engine {
        self.inner.registry.engine()
    }

    /// Sandboxes alive right now serving requests (running or preempted): the pooling
    /// allocator's instances less the ready sandboxes the workers hold (`ready.rs`).
    pub fn live_sandboxes(&self) -> u64 {
        let ready: u64 = self.worker_stats().iter().map(|w| w.ready).sum();
        self.pool_instances().saturating_sub(ready)
    }

    /// Instances the pooling allocator holds: live and ready sandboxes.
    fn pool_instances(&self) -> u64 {
        self.inner.registry.engine().pooling_allocator_metrics().map_or(0, |m| m.core_instances())
    }

    /// Whether the runtime can take requests now, and if not why (what `/readyz` reports).
    pub fn health(&self) -> Health {
        let inner = &self.inner;
        if let Health::NotReady(why) = self.health_ignoring_load() {
            return Health::NotReady(why);
        }
        // The dispatchers cannot keep up when their submission queues are nearly full.
        let saturated =
            inner.groups.iter().any(|g| g.submissions.len() * 10 >= g.submissions.capacity() * 9);
        if saturated {
            return Health::NotReady("saturated: the submission queues are 90 % full");
        }
        if self.pool_instances() >= u64::from(inner.config.max_sandboxes) {
            return Health::NotReady("saturated: every sandbox slot is in use");
        }
        Health::Ready
    }

    /// [`health`](Self::health) without saturation: not ready only while shutting down or with a
    /// runtime thread stopped (`/readyz?load=ignore`, for balancers that must not take a node
    /// out for load: it refuses what it cannot take, at once and cheaply).
    pub fn health_ignoring_load(&self) -> Health {
        if !self.inner.accepting.load(Ordering::SeqCst) {
            return Health::NotReady("shutting down");
        }
        match self.stopped_thread() {
            Some(why) => Health::NotReady(why),
            None => Health::Ready,
        }
    }

    /// Why the runtime cannot serve until the process restarts — one of its threads, or a
    /// thread serving it ([`ThreadWatch`]), has stopped while it was accepting — else `None`
    /// (also once it shuts down: its threads stop then by design). Liveness (`/healthz`).
    pub fn stopped_thread(&self) -> Option<&'static str> {
        // Not accepting: shutting down, its threads stop by design — and a shutdown holds the
        // list while it joins them, so asking for it would wait out the grace period.
        let stopped = self.inner.accepting.load(Ordering::SeqCst)
            && match self.threads.try_lock() {
                Ok(threads) => threads.iter().any(JoinHandle::is_finished),
                Err(TryLockError::Poisoned(p)) => {
                    p.into_inner().iter().any(JoinHandle::is_finished)
                }
                Err(TryLockError::WouldBlock) => false,
            };
        if stopped {
            return Some("a runtime thread has stopped");
        }
        if self.inner.serving_thread_died.load(Ordering::SeqCst) {
            return Some("a thread serving the runtime has stopped");
        }
        None
    }

    /// What each worker has done so far, by worker index (the status page, `/metrics`).
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        let mut stats: Vec<WorkerStats> = (self.inner.group_workers.iter().enumerate())
            .flat_map(|(group, workers)| {
                workers.iter().map(move |w| WorkerStats {
                    index: w.index,
                    group,
                    busy: Duration::from_nanos(w.busy_ns.load(Ordering::Relaxed)),
                    segments: w.segments.load(Ordering::Relaxed),
                    ready: w.ready.load(Ordering::Relaxed),
                    ready_bytes: w.ready_bytes.load(Ordering::Relaxed),
                })
            })
            .collect();
        stats.sort_by_key(|w| w.index);
        stats
    }

    /// Each dispatcher group's queue right now, by group index.
    pub fn group_stats(&self) -> Vec<GroupStats> {
        let inner = &self.inner;
        (inner.groups.iter().zip(&inner.group_workers).enumerate())
            .map(|(index, (g, workers))| GroupStats {
                index,
                workers: workers.iter().map(|w| w.index).collect(),
                queued: g.queued.load(Ordering::Relaxed),
                suspended: g.suspended.load(Ordering::Relaxed),
                submissions: g.submissions.len(),
                demoted: g.demoted.load(Ordering::Relaxed),
                preemptions_deferred: g.preemptions_deferred.load(Ordering::Relaxed),
                wakeups: g.notify.wakeups()
                    + workers.iter().map(|w| w.notify.wakeups()).sum::<u64>(),
                sleeps: g.notify.sleeps() + workers.iter().map(|w| w.notify.sleeps()).sum::<u64>(),
                deferred: g.deferred_total.load(Ordering::Relaxed),
                ull: g.ull.load(Ordering::Relaxed),
                batched: g.batched.load(Ordering::Relaxed),
                batch_returned: g.returned.load(Ordering::Relaxed),
                refused_early: g.refused_early.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Every registered function, by id.
    pub fn functions(&self) -> Vec<Arc<Function>> {
        self.inner.registry.list()
    }

    /// Registers a chain of functions already registered (Edge-RT §III; `crate::chain`): its
    /// name and id share the functions' namespace and id space, so a route or a UDP-RPC id
    /// names a chain as it names a function. Requests run through
    /// [`submit_chain`](Self::submit_chain).
    pub fn register_chain(&self, config: ChainConfig) -> Result<Arc<Chain>, Error> {
        let invalid = |reason| Error::Register {
            name: config.name.clone(),
            reason: RegisterError::Chain(reason),
        };
        chain::check(&config).map_err(invalid)?;
        let stages = config
            .stages
            .iter()
            .map(|s| self.function(s).ok_or_else(|| invalid(format!("no function named `{s}`"))))
            .collect::<Result<Vec<_>, _>>()?;
        let declared = (stages.iter().filter_map(|f| f.config.expected_execution))
            .fold(Duration::ZERO, Duration::saturating_add);
        if declared >= config.relative_deadline {
            return Err(invalid(format!(
                "its stages' declared executions add up to {declared:?}, not below its deadline \
                 of {:?}: every request would be refused as infeasible",
                config.relative_deadline
            )));
        }
        let id = self.inner.registry.reserve(&config.name)?;
        let chain = Arc::new(Chain::new(id, config, stages));
        let mut chains = self.inner.chains.write().unwrap_or_else(|p| p.into_inner());
        chains.by_name.insert(chain.config.name.clone(), Arc::clone(&chain));
        chains.by_id.insert(id.0, Arc::clone(&chain));
        Ok(chain)
    }

    /// Removes a chain; requests already in it finish.
    pub fn unregister_chain(&self, name: &str) -> Result<(), Error> {
        let mut chains = self.inner.chains.write().unwrap_or_else(|p| p.into_inner());
        let chain =
            chains.by_name.remove(name).ok_or_else(|| Error::UnknownFunction(name.to_owned()))?;
        chains.by_id.remove(&chain.id.0);
        self.inner.registry.release(name);
        Ok(())
    }

    /// The chain registered under `name`.
    pub fn chain(&self, name: &str) -> Option<Arc<Chain>> {
        self.inner.chains.read().unwrap_or_else(|p| p.into_inner()).by_name.get(name).cloned()
    }

    /// The chain registered under numeric id `id`.
    pub fn chain_by_id(&self, id: u32) -> Option<Arc<Chain>> {
        self.inner.chains.read().unwrap_or_else(|p| p.into_inner()).by_id.get(&id).cloned()
    }

    /// Every registered chain, by id.
    pub fn chains(&self) -> Vec<Arc<Chain>> {
        let chains = self.inner.chains.read().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = chains.by_name.values().cloned().collect();
        all.sort_by_key(|c| c.id);
        all
    }

    /// A fresh runtime-wide request id, for an answer given without a submission.
    pub(crate) fn fresh_request_id(&self) -> u64 {
        self.inner.request_ids.next()
    }

    /// Submits a request to the function named `function`; the ticket yields its one outcome.
    pub fn submit(&self, function: &str, payload: Vec<u8>, options: SubmitOptions) -> Ticket {
        let (ticket, fill) = Ticket::new();
        self.submit_with(function, payload, options, fill);
        ticket
    }

    /// Submits a request; `callback` receives its one outcome (on a runtime thread, or on the
    /// caller's thread when the request is refused at once — keep it short).
    pub fn submit_with(
        &self,
        function: &str,
        payload: Vec<u8>,
        options: SubmitOptions,
        callback: impl FnOnce(Outcome) + Send + 'static,
    ) {
        match self.inner.registry.get(function) {
            Some(f) => self.submit_to(&f, payload, options, callback),
            None => {
                let id = self.inner.request_ids.next();
                let failure = Failure::BadRequest(BadRequest::UnknownFunction(function.into()));
                callback(Outcome::new(id, Err(failure), Timing::default()));
            }
        }
    }

    /// Submits a request to an already resolved function.
    pub fn submit_to(
        &self,
        function: &Arc<Function>,
        payload: Vec<u8>,
        options: SubmitOptions,
        callback: impl FnOnce(Outcome) + Send + 'static,
    ) {
        let inner = &self.inner;
        let id = inner.request_ids.next();
        let now = inner.signals.clock.now();
        let received = options.received.map_or(now, |t| inner.signals.clock.at(t)).min(now);
        let refuse = |failure: Failure, callback: Box<dyn FnOnce(Outcome) + Send>| {
            // Refused before it was queued: all its time in the node was waiting.
            let waited = Duration::from_nanos(now - received);
            let timing = Timing { queued: waited, total: waited, ..Timing::default() };
            callback(Outcome::new(id, Err(failure), timing))
        };
        let cap = function.config.limits.max_request_bytes;
        if payload.len() as u64 > cap {
            let size = payload.len() as u64;
            return refuse(
                Failure::BadRequest(BadRequest::TooLarge { size, cap }),
                Box::new(callback),
            );
        }
        // A tenant over a limit is refused before anything is queued; an admitted request
        // gives its admission back when it is answered, whatever the answer.
        let memory = function.config.limits.max_memory_bytes;
        let callback: Box<dyn FnOnce(Outcome) + Send> =
            match inner.tenants.admit(function.config.tenant, memory, now) {
                Ok(None) => Box::new(callback),
                Ok(Some(admission)) => {
                    let signals = Arc::clone(&inner.signals);
                    Box::new(move |outcome: Outcome| {
                        Tenants::finish(admission, outcome.timing.executed, signals.clock.now());
                        callback(outcome)
                    })
                }
                Err(limit) => {
                    let failure = Failure::Rejected(Rejection::TenantLimit(limit));
                    return refuse(failure, Box::new(callback));
                }
            };
        inner.submitting.fetch_add(1, Ordering::SeqCst);
        if !inner.accepting.load(Ordering::SeqCst) {
            inner.submitting.fetch_sub(1, Ordering::SeqCst);
            return refuse(Failure::Rejected(Rejection::ShuttingDown), callback);
        }
        let relative = options.deadline.unwrap_or(function.config.relative_deadline);
        let unix_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .saturating_sub(Duration::from_nanos(now - received));
        let expected =
            options.expected.filter(|_| function.config.trust_client_estimate).map(nanos);
        let scheduled = nanos(scheduled_deadline(relative, options.delivery));
        let g = match options.group {
            // Run-to-completion: on the receiving worker while it has nothing queued.
            Some(g)
                if g < inner.groups.len()
                    && inner.groups[g].queued.load(Ordering::Relaxed) == 0 =>
            {
                g
            }
            _ => inner.next_group.fetch_add(1, Ordering::Relaxed) % inner.groups.len(),
        };
        let group = &inner.groups[g];
        // Refused here, on the submitter's thread, when the dispatcher would refuse it: an
        // inline dispatcher shares its worker's thread, and past capacity most arrivals are
        // refused (`luge_sched::Backlog`).
        if group.refuses(function, (received, scheduled), expected, now) {
            group.refused_early.fetch_add(1, Ordering::Relaxed);
            inner.submitting.fetch_sub(1, Ordering::SeqCst);
            return refuse(Failure::Rejected(Rejection::DeadlineUnreachable), callback);
        }
        let task = Box::new(Task {
            id,
            sched: RequestId(0),
            function: Arc::clone(function),
            reply: Reply::new(id, callback),
            received,
            deadline_unix_us: u64::try_from(unix_now.saturating_add(relative).as_micros())
                .unwrap_or(u64::MAX),
            trace: options.trace,
            first_run: None,
            executed: 0,
            preemptions: 0,
            ull: false,
            short: false,
            state: TaskState::Fresh(payload),
            clock: Arc::new(TaskClock::default()),
        });
        let submission = Submission {
            task,
            relative_deadline: scheduled,
            arrived: received,
            expected,
            tenant: function.config.tenant,
        };
        let pushed = group.submissions.push(submission);
        inner.submitting.fetch_sub(1, Ordering::SeqCst);
        match pushed {
            Ok(()) => {
                // Periodic notification (Edge-RT §IV-B): an arrival with more slack than the
                // interval is left to the ticker, which notifies within one interval; its
                // slack counts its declared (or trusted) execution and the time it already
                // spent in the node.
                let every = nanos(inner.config.notify_interval);
                let work = expected
                    .or(function.config.expected_execution.map(nanos))
                    .unwrap_or(0)
                    .saturating_add(now - received);
                if every > 0 && nanos(relative).saturating_sub(work) > every {
                    group.deferred_total.fetch_add(1, Ordering::Relaxed);
                    group.deferred.store(true, Ordering::Release);
                } else {
                    group.notify.notify();
                    if inner.signals.inline() {
                        // A running sandbox's epoch callback polls the inline dispatcher now.
                        inner.signals.epoch.bump();
                    }
                }
            }
            Err(sub) => {
                group.not_handed_over();
                sub.task.answer(now, Err(Failure::Rejected(Rejection::Overloaded)));
            }
        }
    }
}

/// `policy` behind the uLL lane of `lane`, if the lane is on.
fn with_ull_lane(policy: Box<dyn Policy>, lane: Option<UllConfig>) -> Box<dyn Policy> {
    match lane {
        Some(lane) => Box::new(UllLane::new(policy, lane)),
        None => policy,
    }
}
