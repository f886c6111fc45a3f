//! One sandbox serving one request: a fresh `Store` from the pool, the module instantiated from
//! its `InstancePre`, `_start` run as an async task on fibers, and the result classified into a
//! typed [`Failure`] or the guest's stdout.
//!
//! The task suspends only at epoch ticks, when the epoch callback finds a preemption request for
//! it (a per-worker flag set by the dispatcher) — SledgeScale §3.4 preempts with signals; Luge
//! uses a user-level switch on Wasmtime fibers instead. The same callback enforces
//! the execution budget by reading the clock: the epoch is engine-wide, so ticks are not time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use luge_sched::Nanos;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::config::Limits;
use crate::outcome::{Failure, Rejection, TrapKind};
use crate::registry::Function;
use crate::signals::{Signals, TaskClock};
use crate::store::{MemoryLimiter, SandboxState};
use crate::wasi::{self, GuestExit, OutputCapExceeded, WasiCtx};

/// Why the epoch callback ended the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum Stopped {
    /// Its execution budget ran out.
    #[error("execution budget exceeded")]
    Budget,
    /// The runtime is shutting down.
    #[error("aborted by shutdown")]
    Aborted,
}

/// What a finished sandbox produced.
#[derive(Debug)]
pub(crate) struct SandboxResult {
    pub result: Result<Vec<u8>, Failure>,
    pub stderr: Option<String>,
}

/// A sandbox in progress: created on first run, suspended at preemption, dropped when done
/// (returning its pool slot).
pub(crate) type SandboxFuture = Pin<Box<dyn Future<Output = SandboxResult> + Send>>;

/// The request's identity as the guest sees it (args and environment).
pub(crate) struct GuestContext {
    pub request_id: u64,
    /// Absolute deadline, µs since the Unix epoch.
    pub deadline_unix_us: u64,
}

/// What a sandbox is built for: one request of one function.
pub(crate) struct Spec {
    pub function: Arc<Function>,
    /// The request body (its stdin).
    pub payload: Vec<u8>,
    pub guest: GuestContext,
    /// The dispatcher's id of the request, which a preemption flag names.
    pub id: u64,
    pub signals: Arc<Signals>,
    pub clock: Arc<TaskClock>,
}

/// Builds the future that instantiates the function and runs `_start` with the payload on stdin.
pub(crate) fn start(spec: Spec) -> SandboxFuture {
    Box::pin(run(spec))
}

async fn run(spec: Spec) -> SandboxResult {
    let Spec { function, payload, guest, id, signals, clock } = spec;
    let limits = function.config.limits;
    let name = function.config.name.as_str();
    let wasi = WasiCtx {
        stdin: payload,
        stdout_cap: usize::try_from(limits.max_output_bytes).unwrap_or(usize::MAX),
        args: vec![name.as_bytes().to_vec()],
        env: vec![
            format!("LUGE_FUNCTION={name}").into_bytes(),
            format!("LUGE_REQUEST_ID={}", guest.request_id).into_bytes(),
            format!("LUGE_DEADLINE_US={}", guest.deadline_unix_us).into_bytes(),
        ],
        ..WasiCtx::default()
    };
    let cap = usize::try_from(limits.max_memory_bytes).unwrap_or(usize::MAX);
    let state = SandboxState { wasi, limiter: MemoryLimiter { cap, hit: false } };
    let mut store = Store::new(function.pre.module().engine(), state);
    store.limiter(|s| &mut s.limiter);
    // A preemption whose epoch bump was spent before this deadline was armed is re-bumped by
    // the dispatcher until it lands (`Dispatcher::step`); checking at deadline 0 instead would
    // cost every request a callback (~0.3 µs, measured by `benches/runtime.rs`).
    store.set_epoch_deadline(1);
    let (task_clock, timer) = (Arc::clone(&clock), Arc::clone(&signals));
    store.epoch_deadline_callback(move |_ctx| {
        if let Some(hook) = signals.on_epoch {
            hook();
        }
        let now = signals.clock.now();
        if signals.abort.load(Ordering::Relaxed) {
            return Err(wasmtime::Error::new(Stopped::Aborted));
        }
        if now >= clock.budget_end.load(Ordering::Relaxed) {
            return Err(wasmtime::Error::new(Stopped::Budget));
        }
        let worker = clock.worker.load(Ordering::Relaxed);
        if let Some(w) = signals.workers.get(worker)
            && w.preempt.load(Ordering::Acquire) == id
            && w.preempt.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            return Ok(UpdateDeadline::Yield(1));
        }
        Ok(UpdateDeadline::Continue(1))
    });
    let outcome = async {
        let building = timer.clock.now();
        let instance = function.pre.instantiate_async(&mut store).await.map_err(Stage::Start)?;
        let built = timer.clock.now().saturating_sub(building);
        task_clock.instantiation.store(built, Ordering::Relaxed);
        store.data_mut().wasi.memory = instance.get_memory(&mut store, "memory");
        let entry =
            instance.get_typed_func::<(), ()>(&mut store, "_start").map_err(Stage::Start)?;
        entry.call_async(&mut store, ()).await.map_err(Stage::Run)
    }
    .await;
    let state = store.into_data();
    let result = classify(outcome, &state, &limits);
    let stderr = wasi::stderr_text(&state.wasi);
    SandboxResult { result: result.map(|()| state.wasi.stdout), stderr }
}

enum Stage {
    Start(wasmtime::Error),
    Run(wasmtime::Error),
}

fn classify(
    outcome: Result<(), Stage>,
    state: &SandboxState,
    limits: &Limits,
) -> Result<(), Failure> {
    let memory_limit = Failure::MemoryLimit { cap: limits.max_memory_bytes };
    let err = match outcome {
        Ok(()) => return Ok(()),
        Err(Stage::Start(e)) => {
            if e.downcast_ref::<wasmtime::PoolConcurrencyLimitError>().is_some() {
                return Err(Failure::Rejected(Rejection::PoolExhausted));
            }
            if state.limiter.hit {
                return Err(memory_limit);
            }
            if e.downcast_ref::<Trap>().is_none() {
                return Err(Failure::Internal(format!("instantiation failed: {e:#}")));
            }
            e
        }
        Err(Stage::Run(e)) => e,
    };
    if let Some(GuestExit(code)) = err.downcast_ref::<GuestExit>() {
        return match *code {
            0 => Ok(()),
            _ if state.limiter.hit => Err(memory_limit),
            code => Err(Failure::Exit(code)),
        };
    }
    if err.downcast_ref::<OutputCapExceeded>().is_some() {
        return Err(Failure::OutputTooLarge { cap: limits.max_output_bytes });
    }
    match err.downcast_ref::<Stopped>() {
        Some(Stopped::Budget) => return Err(Failure::Killed { budget: limits.max_execution }),
        Some(Stopped::Aborted) => return Err(Failure::Rejected(Rejection::ShuttingDown)),
        None => {}
    }
    if state.limiter.hit {
        return Err(memory_limit);
    }
    match err.downcast_ref::<Trap>() {
        Some(trap) => Err(Failure::Trap(TrapKind::of(*trap))),
        None => Err(Failure::Internal(format!("{err:#}"))),
    }
}

/// Remaining budget as an absolute clock time, given the execution so far.
pub(crate) fn budget_end(now: Nanos, budget: Duration, executed: Nanos) -> Nanos {
    let budget = budget.as_nanos().min(u128::from(u64::MAX)) as Nanos;
    now.saturating_add(budget.saturating_sub(executed))
}
