//! Configuration of a runtime and of the functions it serves, with the defaults an operator gets
//! when the manifest is silent.

use std::path::PathBuf;
use std::time::Duration;

use luge_proto::{MAX_FIELD_US, nanos};
use luge_sched::{Admission, Overrun, PolicyConfig, PolicyKind, QueueKind, UllConfig};

use crate::limits::RegistrationLimits;
use crate::tenants::TenantConfig;

/// How idle threads wait for work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WaitMode {
    /// Park the thread and wake it on new work (a cross-core wake-up costs tens of µs, idle
    /// cores cost nothing).
    #[default]
    Sleep,
    /// Busy-poll the queues (sub-µs hand-offs; burns one core per thread).
    Spin,
}

/// Cranelift's optimisation level for guest code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CodeOpt {
    /// No optimisation (fastest compilation).
    None,
    /// Optimise for speed (the default).
    #[default]
    Speed,
    /// Optimise for speed and size.
    SpeedAndSize,
}

/// Where dispatchers run (the thread layout is configuration, not architecture).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// The default: [`Inline`](Self::Inline) when the node runs one worker (and so one
    /// dispatcher), [`Threads`](Self::Threads) otherwise. With one worker a dispatcher thread of
    /// its own has nothing to balance and only adds a cross-thread hand-off (a wake-up when it
    /// sleeps) before and after every request; with several, one queue per group of workers
    /// keeps them balanced. [`Layout::resolve`] applies the rule.
    #[default]
    Auto,
    /// Each dispatcher has its own thread, separate from its workers'.
    Threads,
    /// Each dispatcher runs on the thread of its single worker (requires `dispatchers ==
    /// workers`); while a sandbox runs, the epoch callback polls for arrivals, and submitters
    /// bump the epoch so that happens at once.
    Inline,
}

impl Layout {
    /// The layout a node of `workers` workers in `dispatchers` groups runs: `Auto` resolved,
    /// the others as given.
    pub fn resolve(self, workers: usize, dispatchers: usize) -> Layout {
        match self {
            Layout::Auto if workers == 1 && dispatchers == 1 => Layout::Inline,
            Layout::Auto => Layout::Threads,
            given => given,
        }
    }

    /// `auto`, `threads` or `inline`, as the manifest and the command line spell it.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Auto => "auto",
            Layout::Threads => "threads",
            Layout::Inline => "inline",
        }
    }
}

impl std::str::FromStr for Layout {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Layout::Auto),
            "threads" => Ok(Layout::Threads),
            "inline" => Ok(Layout::Inline),
            other => Err(format!("layout must be `auto`, `threads` or `inline`, not `{other}`")),
        }
    }
}

/// The longest epoch tick a runtime accepts (1 s).
pub const MAX_TICK: Duration = Duration::from_secs(1);
/// The smallest pool slot, `max_memory_bytes` (one Wasm page, 64 KiB).
pub const MIN_MEMORY_BYTES: u64 = 64 << 10;
/// The largest pool slot, `max_memory_bytes` (4 GiB: a wasm32 memory's limit).
pub const MAX_MEMORY_BYTES: u64 = 4 << 30;

/// A runtime setting that cannot work ([`RuntimeConfig::check`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct BadSetting {
    /// The setting, by its manifest key (`[server]`).
    pub key: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

/// Runtime-wide settings.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Worker threads (each runs sandboxes; one per core in production).
    pub workers: usize,
    /// Dispatcher threads; workers are split between them in contiguous groups.
    pub dispatchers: usize,
    /// Pin worker `i` to CPU `cpus[i % cpus.len()]`; empty = do not pin.
    pub cpus: Vec<usize>,
    /// Scheduling policy of every dispatcher group.
    pub policy: PolicyKind,
    /// Policy tunables (`workers` is overwritten with the group size).
    pub policy_config: PolicyConfig,
    /// Idle wait mode of dispatchers and workers.
    pub wait: WaitMode,
    /// Thread layout.
    pub layout: Layout,
    /// Epoch ticker period: bounds how late an overrunning guest is killed.
    pub tick: Duration,
    /// Periodic notification of arrivals (Edge-RT §IV-B, Δtimer); zero (the default) wakes a
    /// group's sleeping dispatcher (and, inline, interrupts its running sandbox) on every
    /// arrival. Above zero, an arrival whose slack exceeds it does not: the ticker, then running
    /// at least this often, notifies the groups that received such arrivals once per period, so
    /// that a burst costs one wake-up instead of one each, and such an arrival waits at most
    /// about this long to be seen. Arrivals with less slack are notified at once.
    pub notify_interval: Duration,
    /// The uLL lane (HORSE §4.1.3; `luge_sched::UllLane`): ultra-low-latency requests — functions
    /// declared so (`FunctionConfig::ull`) or whose known estimate is at most `ull_threshold` —
    /// run ahead of every other request, on a worker taken from a running request at its next
    /// epoch tick if none is idle. On by default.
    pub ull_lane: bool,
    /// The estimate at or under which a function's requests take the uLL lane without being
    /// declared (HORSE §2: its Category 1, ≤ 20 µs); zero = only declared functions.
    pub ull_threshold: Duration,
    /// How long a uLL request may run while others wait before it is handed to the policy as
    /// an ordinary request (100 µs).
    pub ull_slice: Duration,
    /// The lane's share bound: on a worker where another request waits, at most this many uLL
    /// requests run in a row before it gets the worker back for a slice (`UllConfig::burst`;
    /// 16); 0 = no bound.
    pub ull_burst: u32,
    /// Ready sandboxes (after HORSE §1–2's warm sandboxes) each worker keeps instantiated ahead of
    /// arrival per uLL function, at most (how many adapts to its arrivals, `ready.rs`); 0 = none.
    /// With the uLL lane only.
    pub ready_sandboxes: usize,
    /// Ready sandboxes each worker keeps in all, at most (also capped at half the pool's slots
    /// over all workers).
    pub ready_sandboxes_max: usize,
    /// Submissions a dispatcher can hold before `submit` answers `Overloaded`.
    pub submit_queue: usize,
    /// Sandboxes alive at once (running plus preempted) across the runtime: the pool size.
    pub max_sandboxes: u32,
    /// Largest linear memory any function may be given (the pool's slot size).
    pub max_memory_bytes: u64,
    /// Wasm stack per sandbox (the async fiber stack is this plus host headroom).
    pub wasm_stack_bytes: usize,
    /// Cranelift optimisation level (part of the AoT cache key).
    pub code_opt: CodeOpt,
    /// Compile guests with epoch checks (at every loop header and function entry): what lets
    /// the runtime preempt a guest and end it at its budget or deadline. On in every runtime that
    /// serves; off only to measure what the checks cost (`luge bench overhead`) — a runtime
    /// without them can neither preempt nor stop a guest, so no manifest setting reaches it.
    pub epoch_interruption: bool,
    /// Bounds-check every memory access in code instead of relying on a 4 GiB virtual
    /// reservation with guard pages (smaller address-space footprint, slower code).
    pub explicit_bounds_checks: bool,
    /// Reset a pool slot's memory after a sandbox by the pages it dirtied, found with Linux's
    /// `PAGEMAP_SCAN` (6.7+), instead of zeroing (`memset`) all of its low resident part. On by
    /// default where the kernel has it (elsewhere the runtime falls back to zeroing); off only
    /// to measure what it saves (`cargo bench -p luge-runtime --bench runtime -- sandbox`).
    pub pagemap_scan: bool,
    /// Initialise a sandbox's linear memory by mapping the module's copy-on-write memory image
    /// (built at registration, one memfd per function) instead of copying its data segments into
    /// the slot at every instantiation. Copying needs no image (less memory per function) and no
    /// remap when a pool slot passes to another function — better when more functions rotate
    /// than there are slots — but copies large data segments at every request. Manifest
    /// `memory_init = "cow" | "copy"`.
    pub memory_init_cow: bool,
    /// Where AoT-compiled artifacts are cached; `None` = compile in memory every start. Created
    /// owner-only; a directory other users can write is not used (see the `cache` module).
    pub cache_dir: Option<PathBuf>,
    /// Bound on the cached artifacts' total size: beyond it, the least recently used artifacts
    /// of no registered function are deleted.
    pub cache_max_bytes: u64,
    /// Bounds on the modules `register` accepts, checked before compiling.
    pub registration: RegistrationLimits,
    /// Estimator used for requests that bring no expected execution.
    pub default_estimate: Duration,
    /// Shutdown grace period: in-flight requests still running after it are killed.
    pub shutdown_grace: Duration,
    /// Tenants with limits (`crate::tenants`); functions of other tenants have none.
    pub tenants: Vec<TenantConfig>,
}

impl RuntimeConfig {
    /// The uLL lane every dispatcher group puts in front of its policy (HORSE §4.1.3), or `None`
    /// with `ull_lane` off.
    pub fn ull_config(&self) -> Option<UllConfig> {
        self.ull_lane.then(|| UllConfig {
            threshold: nanos(self.ull_threshold),
            slice: nanos(self.ull_slice),
            burst: self.ull_burst,
            admission: self.policy_config.admission,
        })
    }

    /// Whether the settings make a runtime that can serve: `Err` names the setting (its manifest
    /// key) and says why not. [`Runtime::start`](crate::Runtime::start) refuses what this does.
    pub fn check(&self) -> Result<(), BadSetting> {
        let bad = |key, reason: String| Err(BadSetting { key, reason });
        if self.workers == 0 || self.dispatchers == 0 || self.dispatchers > self.workers {
            return bad(
                "workers",
                format!(
                    "need 1 ≤ dispatchers ≤ workers (got {} dispatchers, {} workers)",
                    self.dispatchers, self.workers
                ),
            );
        }
        if self.effective_layout() == Layout::Inline && self.dispatchers != self.workers {
            return bad(
                "layout",
                format!(
                    "the inline layout runs each dispatcher on its worker's thread: it needs \
                     dispatchers == workers (got {} and {})",
                    self.dispatchers, self.workers
                ),
            );
        }
        if self.tick.is_zero() || self.tick > MAX_TICK {
            return bad(
                "tick_us",
                format!(
                    "the epoch tick must be within 1 µs and {MAX_TICK:?}, not {:?}: it bounds \
                     how late an overrun is stopped, a uLL arrival is seen and shutdown ends",
                    self.tick
                ),
            );
        }
        if (self.max_sandboxes as usize) < self.workers {
            return bad(
                "max_sandboxes",
                format!(
                    "max_sandboxes ({}) is below workers ({}): some workers could never run",
                    self.max_sandboxes, self.workers
                ),
            );
        }
        if !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&self.max_memory_bytes) {
            return bad(
                "max_memory_bytes",
                format!(
                    "max_memory_bytes must be within {MIN_MEMORY_BYTES} (one Wasm page) and \
                     {MAX_MEMORY_BYTES} (4 GiB, wasm32's limit), not {}",
                    self.max_memory_bytes
                ),
            );
        }
        // Settings of the early-binding policies' worker queues, which others would ignore.
        let (pc, policy) = (&self.policy_config, self.policy);
        if matches!(pc.worker_queue, QueueKind::Timeline(_)) && !policy.binds_early() {
            return bad(
                "worker_queue",
                format!(
                    "the timeline is a worker's run queue under the early-binding policies \
                     (sledgescale, sledgescale-steal, rr, jsq, lld); `{}` has none",
                    policy.name()
                ),
            );
        }
        if pc.batch_window > 0 && (!policy.binds_early() || policy == PolicyKind::SledgeScaleSteal)
        {
            return bad(
                "batch_window_us",
                format!(
                    "batches are committed behind a run on an early-binding policy's worker \
                     (sledgescale, rr, jsq, lld); `{}` takes none",
                    policy.name()
                ),
            );
        }
        if pc.admission.protect_admitted && !pc.admission.on_wait {
            return bad(
                "protect_admitted",
                "protect_admitted refines admission on the wait, which admit_on_wait = false \
                 switches off"
                    .into(),
            );
        }
        if self.ull_lane && self.ull_threshold > self.ull_slice {
            return bad(
                "ull_threshold_us",
                format!(
                    "ull_threshold ({:?}) is above the uLL lane's slice ({:?}): such requests \
                     would each be preempted at the slice and lose their place",
                    self.ull_threshold, self.ull_slice
                ),
            );
        }
        Ok(())
    }

    /// The memory cap of a function of `tenant` registered without one of its own: the default
    /// (64 MiB), or the pool's slot size or the tenant's `max_memory_bytes` if smaller — what
    /// the function could be given at all. The manifest and the admin API both use it.
    pub fn default_memory_cap(&self, tenant: u32) -> u64 {
        let tenant_max =
            self.tenants.iter().find(|t| t.id == tenant).and_then(|t| t.max_memory_bytes);
        Limits::default()
            .max_memory_bytes
            .min(self.max_memory_bytes)
            .min(tenant_max.unwrap_or(u64::MAX))
    }

    /// Ready sandboxes a worker keeps per uLL function and in all (`ready.rs`): as configured,
    /// with the total capped so that all workers' ready sandboxes hold at most half of the
    /// pool's slots.
    pub(crate) fn ready_limits(&self) -> (usize, usize) {
        if !self.ull_lane {
            return (0, 0);
        }
        let half_pool = usize::try_from(self.max_sandboxes / 2).unwrap_or(usize::MAX);
        let max = self.ready_sandboxes_max.min(half_pool / self.workers.max(1));
        (self.ready_sandboxes, max)
    }

    /// The sandboxes a group of `group_workers` may keep suspended: its share of the pool, less
    /// what its workers' ready sandboxes may hold ([`ready_limits`](Self::ready_limits)) and one
    /// running sandbox per worker. A preemption beyond it waits for a slot
    /// (`dispatcher/suspended.rs`).
    pub(crate) fn max_suspended(&self, group_workers: usize) -> usize {
        let slots = self.max_sandboxes as usize * group_workers / self.workers.max(1);
        let ready = match self.ready_limits() {
            (0, _) => 0,
            (_, per_worker) => per_worker.saturating_mul(group_workers),
        };
        slots.saturating_sub(ready).saturating_sub(group_workers)
    }

    /// The layout this configuration runs: [`Layout::Auto`] resolved for its worker and
    /// dispatcher counts.
    pub fn effective_layout(&self) -> Layout {
        self.layout.resolve(self.workers, self.dispatchers)
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        // Deadline-aware admission (refuse the infeasible, admit on the wait, shed the doomed);
        // the count cap is only a memory safety net behind the time bound it gives.
        let policy_config =
            PolicyConfig { admission: Admission::default(), ..PolicyConfig::default() };
        Self {
            workers: 1,
            dispatchers: 1,
            cpus: Vec::new(),
            policy: PolicyKind::SledgeScale,
            policy_config,
            wait: WaitMode::Sleep,
            layout: Layout::Auto,
            tick: Duration::from_millis(1),
            notify_interval: Duration::ZERO,
            ull_lane: true,
            ull_threshold: Duration::from_micros(20),
            ull_slice: Duration::from_micros(100),
            ull_burst: 16,
            ready_sandboxes: 2,
            ready_sandboxes_max: 16,
            submit_queue: 4096,
            max_sandboxes: 256,
            max_memory_bytes: 64 << 20,
            wasm_stack_bytes: 512 << 10,
            code_opt: CodeOpt::Speed,
            epoch_interruption: true,
            explicit_bounds_checks: false,
            pagemap_scan: true,
            memory_init_cow: true,
            cache_dir: None,
            cache_max_bytes: 1 << 30,
            registration: RegistrationLimits::default(),
            default_estimate: Duration::from_millis(1),
            shutdown_grace: Duration::from_secs(5),
            tenants: Vec::new(),
        }
    }
}

/// Per-function limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Execution budget in CPU time (the worker thread's CPU clock); a request using more is
    /// killed, as is one that holds a worker 10× as long in wall time without getting that CPU.
    pub max_execution: Duration,
    /// Linear-memory cap in bytes (at most [`RuntimeConfig::max_memory_bytes`]).
    pub max_memory_bytes: u64,
    /// Stdout cap in bytes.
    pub max_output_bytes: u64,
    /// Request payload cap in bytes.
    pub max_request_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_execution: Duration::from_secs(1),
            max_memory_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
            max_request_bytes: 1 << 20,
        }
    }
}

/// A function to register: its name, module and settings.
#[derive(Debug, Clone)]
pub struct FunctionConfig {
    /// Unique name (also the default HTTP route).
    pub name: String,
    /// Relative deadline when the request brings none.
    pub relative_deadline: Duration,
    /// Expected execution, seeding the estimator until real runs replace it.
    pub expected_execution: Option<Duration>,
    /// Limits.
    pub limits: Limits,
    /// Owning tenant.
    pub tenant: u32,
    /// Use the expected execution a request brings (RPC field / HTTP header) instead of the
    /// estimator's (off by default: a client could otherwise claim a tiny estimate to jump
    /// ahead).
    pub trust_client_estimate: bool,
    /// What becomes of a request that can no longer meet its deadline: answered at once
    /// (`Kill`: 503 shed before it runs, 504 once it ran past its deadline) or demoted to the
    /// best-effort lane, run only when a worker has nothing on time to run and answered late
    /// (`Demote`, Edge-RT §IV-C). Either way it is still killed at `limits.max_execution`.
    pub on_overrun: Overrun,
    /// Declared ultra-low-latency (`class = "ull"` in a manifest): its requests take the uLL lane
    /// (`RuntimeConfig::ull_lane`) whatever their estimate.
    pub ull: bool,
}

impl FunctionConfig {
    /// A function with default settings (100 ms deadline, default limits, tenant 0).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            relative_deadline: Duration::from_millis(100),
            expected_execution: None,
            limits: Limits::default(),
            tenant: 0,
            trust_client_estimate: false,
            on_overrun: Overrun::Kill,
            ull: false,
        }
    }

    /// Whether every setting is within what a request can carry and a sandbox can run: times of
    /// 1 µs to an hour (a client's deadline and estimate fields are bounded the same,
    /// `luge_proto::MAX_FIELD_US`), byte limits of at least 1. The manifest and the admin API
    /// refuse the same values; `Err` names the manifest key.
    pub fn check(&self) -> Result<(), BadSetting> {
        let most = Duration::from_micros(MAX_FIELD_US);
        let times = [
            ("relative_deadline_us", Some(self.relative_deadline)),
            ("max_execution_us", Some(self.limits.max_execution)),
            ("expected_execution_us", self.expected_execution),
        ];
        for (key, value) in times {
            if let Some(v) = value
                && !(Duration::from_micros(1)..=most).contains(&v)
            {
                let reason = format!("{key} must be within 1 µs and {most:?}, not {v:?}");
                return Err(BadSetting { key, reason });
            }
        }
        let bytes = [
            ("max_memory_bytes", self.limits.max_memory_bytes),
            ("max_request_bytes", self.limits.max_request_bytes),
            ("max_output_bytes", self.limits.max_output_bytes),
        ];
        if let Some((key, _)) = bytes.into_iter().find(|&(_, v)| v == 0) {
            let reason = format!("{key} must be at least 1 (0 would fail every request)");
            return Err(BadSetting { key, reason });
        }
        Ok(())
    }

    /// Why a function with these settings, of `tenant`, on a runtime with `runtime`'s, cannot be
    /// served as declared, if so: a setting out of range ([`check`](Self::check)); declared uLL
    /// but estimated above the lane's slice (each request would be preempted at the slice and
    /// lose its place); its declared execution not below its own deadline and not demoted (every
    /// request that brings no longer deadline of its own refused as infeasible: the function's
    /// default deadline must cover its declared work); or its memory cap above its tenant's
    /// `max_memory_bytes` (every request refused by that limit).
    pub(crate) fn unservable(
        &self,
        tenant: Option<&TenantConfig>,
        runtime: &RuntimeConfig,
    ) -> Option<String> {
        if let Err(bad) = self.check() {
            return Some(bad.reason);
        }
        let slice = runtime.ull_slice;
        if let Some(e) =
            self.expected_execution.filter(|&e| runtime.ull_lane && self.ull && e > slice)
        {
            return Some(format!(
                "declared uLL with an expected execution of {e:?}, above the lane's slice of \
                 {slice:?}: each request would be preempted at the slice and lose its place"
            ));
        }
        if let Some(expected) = self.expected_execution
            && expected >= self.relative_deadline
            && self.on_overrun == Overrun::Kill
        {
            return Some(format!(
                "expected execution of {expected:?} is not below the relative deadline of {:?}: \
                 every request without a longer deadline of its own would be refused as \
                 infeasible (give a relative deadline that covers it, or on_overrun = \"demote\" \
                 to run such requests late)",
                self.relative_deadline
            ));
        }
        let tenant_max = tenant.and_then(|t| Some((t, t.max_memory_bytes?)));
        if let Some((t, max)) = tenant_max
            && self.limits.max_memory_bytes > max
        {
            return Some(format!(
                "memory limit of {} bytes exceeds tenant {} (`{}`)'s max_memory_bytes of {max}: \
                 every request would be refused by the tenant's limit",
                self.limits.max_memory_bytes, t.id, t.name
            ));
        }
        None
    }
}
