//! Luge's runtime core: every request in a fresh Wasmtime sandbox (pooling allocator,
//! copy-on-write images, AoT-compiled modules), on worker threads ordered and preempted by
//! deadline through the `luge-sched` policies.
//!
//! - [`Runtime`] — start from a [`RuntimeConfig`], [`register`](Runtime::register) functions,
//!   [`submit`](Runtime::submit) requests (each gets exactly one [`Outcome`]), shut down.
//! - Chains (Edge-RT §III): [`register_chain`](Runtime::register_chain) names registered
//!   functions as stages; [`submit_chain`](Runtime::submit_chain) runs a request through them
//!   under one deadline, each stage in its own sandbox.
//! - Function ABI (Sledge): request body on stdin, response on stdout, stderr to the log
//!   (bounded and rate-limited; [`stderr_lines_suppressed`] counts what was dropped), exit
//!   status 0 = success; WASI preview1 through Luge's own non-blocking layer.
//! - Threads: one ticker (epoch), one dispatcher per worker group driving the policy, one worker
//!   per core running sandboxes as fibers; see `dispatcher.rs` for the design and its races.
//!
//! Modules are layered, each using only those below it (no import cycles): `tenants` · `config`,
//! `outcome`, `error` · `signals` (clock, epoch, flags), `notify`, `reply`, `turnaround`, `engine`,
//! `stderr_log`, `stats`, `ingress` · `wasi` · `store` · `registry` · `chain` · `sandbox` · `task` · `ready` · `dispatcher`
//! (knows tasks, not sandboxes) · `worker` · `runtime` · `chain_run`. The clock, the epoch and the epoch hook are injected through `signals`,
//! so `races.rs` drives a dispatcher and a worker deterministically under a manual clock.

mod affinity;
mod cache;
mod chain;
mod chain_run;
mod config;
mod dispatcher;
mod engine;
mod error;
mod ingress;
mod limits;
mod line_limit;
mod notify;
mod outcome;
mod ready;
mod registry;
mod reply;
mod request_ids;
mod runtime;
mod sandbox;
mod signals;
mod stats;
mod stderr_log;
mod store;
mod task;
mod tenants;
mod turnaround;
mod wasi;
mod worker;

pub use crate::affinity::{affinity, set_affinity};
pub use crate::chain::{Chain, ChainConfig, MAX_STAGES};
pub use crate::config::{
    BadSetting, CodeOpt, FunctionConfig, Layout, Limits, MAX_MEMORY_BYTES, MAX_TICK,
    MIN_MEMORY_BYTES, RuntimeConfig, WaitMode,
};
pub use crate::error::{Error, RegisterError, RegistrationLimit};
pub use crate::ingress::{Driver, Ingress};
pub use crate::limits::RegistrationLimits;
pub use crate::line_limit::LineLimit;
pub use crate::outcome::{BadRequest, Failure, Outcome, Rejection, StageReport, Timing, TrapKind};
pub use crate::registry::Function;
pub use crate::reply::Ticket;
pub use crate::runtime::{
    Health, PreparedSandbox, Runtime, SubmitOptions, ThreadWatch, scheduled_deadline,
};
pub use crate::stats::{GroupStats, WorkerStats};
pub use crate::stderr_log::stderr_lines_suppressed;
pub use crate::tenants::{CPU_WINDOW, TenantConfig, TenantLimit, TenantStats};
pub use luge_sched::{
    Admission, CtEdfConfig, Overrun, PolicyConfig, PolicyKind, QueueKind, UllConfig,
};
