//! The one answer every request gets: its output, or a typed failure with a reason.

use std::fmt;
use std::time::Duration;

use crate::tenants::TenantLimit;

/// What happened to one request. Every submitted request produces exactly one `Outcome`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The runtime-wide request id (also in logs and response headers).
    pub request_id: u64,
    /// The function's stdout, or why there is none.
    pub result: Result<Vec<u8>, Failure>,
    /// Where the time went (for a chain: the whole chain; see [`StageReport`]).
    pub timing: Timing,
    /// A chain's stages, in order, each with its own request id and timing, up to the one
    /// that answered (the last, when the chain failed). Empty for a function.
    pub stages: Vec<StageReport>,
}

/// One stage of a chain as it ran: which function, under which request id, and its timing
/// (from its hand-off to its answer).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageReport {
    /// The stage's function.
    pub name: String,
    /// The runtime request id the stage ran under.
    pub request_id: u64,
    /// The stage's own timing.
    pub timing: Timing,
}

impl Outcome {
    /// An outcome of a function (no chain stages).
    pub fn new(request_id: u64, result: Result<Vec<u8>, Failure>, timing: Timing) -> Self {
        Self { request_id, result, timing, stages: Vec::new() }
    }

    /// True when the function ran to completion and exited 0.
    pub fn is_ok(&self) -> bool {
        self.result.is_ok()
    }
}

/// Time accounting of one request, for slowdown and RTE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timing {
    /// From receipt by the node (or submission, `SubmitOptions::received`) until a worker
    /// started building its sandbox (or until rejection).
    pub queued: Duration,
    /// Time building its sandbox took on its worker (instantiation from the pre-linked module;
    /// wall time on a thread that does nothing else meanwhile), part of `executed`; 0 if it
    /// never ran or started in a ready sandbox.
    pub instantiation: Duration,
    /// From its worker picking it up to its first guest instruction: the store and its WASI
    /// set-up, the instantiation (none from a ready sandbox) and the entry point's lookup —
    /// `instantiation` and what surrounds it; part of `executed`.
    pub start_up: Duration,
    /// CPU time it had on workers, over all run segments, its sandbox's build and teardown
    /// included: the worker thread's CPU clock, which its execution budget counts too. Time the
    /// worker waited for a core is not in it (it is in `total`, so in [`Timing::queueing`]); on
    /// an uncontended core it is about the wall time the request ran.
    pub executed: Duration,
    /// From receipt by the node (or submission) to the answer.
    pub total: Duration,
    /// Times the request was preempted.
    pub preemptions: u32,
}

impl Timing {
    /// Time in the node not spent executing, from receipt to the answer: `total − executed` —
    /// waiting in Luge's queues, preempted, or waiting for a core while running.
    /// This is the one definition of "queueing" behind HTTP's `Luge-Queueing-Ns` and
    /// UDP-RPC's `queueing_ns`, so the two protocols report the same quantity.
    pub fn queueing(&self) -> Duration {
        self.total.saturating_sub(self.executed)
    }

    /// Readiness as HORSE §2 defines it: from receipt until the first guest instruction ran —
    /// parsing, admission, queueing, the hand-off to a worker and the sandbox's start-up
    /// (`queued + start_up`). Behind HTTP's `Luge-Readiness-Ns` and the readiness metric.
    pub fn readiness(&self) -> Duration {
        self.queued.saturating_add(self.start_up)
    }
}

/// Why a request produced no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The guest trapped.
    #[error("trap: {0}")]
    Trap(TrapKind),
    /// The guest ran past its execution-time budget and was killed.
    #[error("killed after exceeding its execution budget of {budget:?}")]
    Killed {
        /// The budget it exceeded.
        budget: Duration,
    },
    /// The guest failed after its linear memory hit the function's cap.
    #[error("memory limit of {cap} bytes reached")]
    MemoryLimit {
        /// The cap, in bytes.
        cap: u64,
    },
    /// The guest wrote more than the function's output cap.
    #[error("output larger than the limit of {cap} bytes")]
    OutputTooLarge {
        /// The cap, in bytes.
        cap: u64,
    },
    /// The guest exited with a non-zero status.
    #[error("exited with status {0}")]
    Exit(i32),
    /// The request was refused before it ran.
    #[error("rejected: {0}")]
    Rejected(Rejection),
    /// A chain's deadline passed, or could no longer be met, before this stage could run
    /// (earlier stages ran: this is not a refusal to retry later).
    #[error("deadline missed: no time was left for this stage and the ones after it")]
    DeadlineMissed,
    /// It was still running at its deadline when requests that could still meet theirs needed
    /// its worker; it yielded to them and was ended (Edge-RT §VI-D). Not a refusal: it ran.
    #[error("deadline missed: still running at its deadline, it yielded to on-time requests")]
    Late,
    /// A chain's later stage was refused (for load, a tenant limit, a shutdown, or an input too
    /// large for it) after earlier stages ran: not a refusal of the chain, whose work was partly
    /// done and must not run again when the request is retried.
    #[error("a later stage was refused after earlier stages ran: {0}")]
    StageRefused(String),
    /// The request itself was invalid.
    #[error("bad request: {0}")]
    BadRequest(BadRequest),
    /// A bug or resource failure inside the runtime; the message says which.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why a request was refused without running (all of these are "try again later").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// It could not meet its deadline even if started at once.
    DeadlineInfeasible,
    /// Admission on the wait: at the current load it would wait too long to meet its deadline,
    /// or would push a request already admitted past its own.
    DeadlineUnreachable,
    /// It was admitted, but its deadline became unreachable while it waited (executions ran
    /// longer than estimated); it was answered instead of run.
    Shed,
    /// The queues are full.
    Overloaded,
    /// No sandbox slot was free in the pool.
    PoolExhausted,
    /// The front end that read it holds as many bytes of request bodies as it may (buffered, or
    /// waiting for their answer).
    BuffersFull,
    /// The runtime is shutting down.
    ShuttingDown,
    /// Its function's tenant is at one of its limits (`crate::TenantConfig`).
    TenantLimit(TenantLimit),
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rejection::DeadlineInfeasible => "deadline infeasible",
            Rejection::DeadlineUnreachable => "overloaded (the wait would miss the deadline)",
            Rejection::Shed => "overloaded (the deadline became unreachable while queued)",
            Rejection::Overloaded => "overloaded (queues full)",
            Rejection::PoolExhausted => "overloaded (no free sandbox slot)",
            Rejection::BuffersFull => "overloaded (request buffers full)",
            Rejection::ShuttingDown => "shutting down",
            Rejection::TenantLimit(limit) => return limit.fmt(f),
        })
    }
}

/// What was wrong with a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadRequest {
    /// No function has this name or id.
    #[error("unknown function `{0}`")]
    UnknownFunction(String),
    /// The payload exceeds the function's request-size cap.
    #[error("request of {size} bytes exceeds the limit of {cap} bytes")]
    TooLarge {
        /// Payload size.
        size: u64,
        /// The cap.
        cap: u64,
    },
}

/// The kind of a guest trap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrapKind {
    /// Call stack exhausted.
    StackOverflow,
    /// Out-of-bounds linear-memory access.
    MemoryOutOfBounds,
    /// `unreachable` executed.
    Unreachable,
    /// Integer division by zero.
    DivisionByZero,
    /// Integer overflow (e.g. `i32.div_s` of `MIN / -1`).
    IntegerOverflow,
    /// Invalid float-to-integer conversion.
    BadConversion,
    /// Indirect call through a null, out-of-bounds or mistyped table entry.
    BadIndirectCall,
    /// Any other trap.
    Other,
}

impl TrapKind {
    /// A short stable name (`stack_overflow`, …) for metrics, headers and wire codes.
    pub fn name(self) -> &'static str {
        match self {
            TrapKind::StackOverflow => "stack_overflow",
            TrapKind::MemoryOutOfBounds => "memory_out_of_bounds",
            TrapKind::Unreachable => "unreachable",
            TrapKind::DivisionByZero => "division_by_zero",
            TrapKind::IntegerOverflow => "integer_overflow",
            TrapKind::BadConversion => "bad_conversion",
            TrapKind::BadIndirectCall => "bad_indirect_call",
            TrapKind::Other => "other",
        }
    }

    pub(crate) fn of(trap: wasmtime::Trap) -> Self {
        use wasmtime::Trap;
        match trap {
            Trap::StackOverflow => TrapKind::StackOverflow,
            Trap::MemoryOutOfBounds | Trap::HeapMisaligned => TrapKind::MemoryOutOfBounds,
            Trap::UnreachableCodeReached => TrapKind::Unreachable,
            Trap::IntegerDivisionByZero => TrapKind::DivisionByZero,
            Trap::IntegerOverflow => TrapKind::IntegerOverflow,
            Trap::BadConversionToInteger => TrapKind::BadConversion,
            Trap::TableOutOfBounds | Trap::IndirectCallToNull | Trap::BadSignature => {
                TrapKind::BadIndirectCall
            }
            _ => TrapKind::Other,
        }
    }
}

impl fmt::Display for TrapKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
