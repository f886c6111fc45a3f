//! How a request's [`Outcome`](luge_runtime::Outcome) maps onto each protocol's status: one table, shared by both front ends so HTTP and UDP-RPC never disagree.
//! Also the load signal both carry back (`docs/protocol.md` §3.1).

use std::time::Duration;

use luge_proto::{LOAD_REFUSED, Status, load_signal};
use luge_runtime::{BadRequest, Failure, Rejection, StageReport};

/// The load signal of an answer of `status` (`docs/protocol.md` §3.1): [`LOAD_REFUSED`] for a
/// refusal for load (the node's or the tenant's), else the share of its relative `deadline` the
/// request spent waiting in the node. Both protocols send it: UDP-RPC in flags bits 8–15, HTTP
/// as `Luge-Load`.
pub(crate) fn load_of(status: Status, queueing: Duration, deadline: Duration) -> u8 {
    match status {
        Status::Overloaded | Status::TenantLimit => LOAD_REFUSED,
        _ => load_signal(queueing, deadline),
    }
}

/// The message a protocol sends for `failure`: [`failure_message`], prefixed for a chain (its
/// `stages` that ran) with the stage that answered (``stage 2 `b`: ``).
pub(crate) fn outcome_message(stages: &[StageReport], failure: &Failure) -> String {
    let message = failure_message(failure);
    match stages.last() {
        Some(stage) => format!("stage {} `{}`: {message}", stages.len(), stage.name),
        None => message,
    }
}

/// The `Luge-Stages` value of a chain's `stages`: each stage that ran, in order, as
/// `name;q=<queueing ns>;e=<execution ns>`, comma-separated (empty for a function).
pub(crate) fn stages_header(stages: &[StageReport]) -> String {
    let mut out = String::new();
    for (i, s) in stages.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let t = stage_times(s);
        out.push_str(&format!("{};q={};e={}", s.name, t.queueing_ns, t.execution_ns));
    }
    out
}

/// One stage's times, as `Luge-Stages` and UDP-RPC's stage table (`docs/protocol.md` §1.5)
/// both give them.
pub(crate) fn stage_times(s: &StageReport) -> luge_proto::StageTimes {
    luge_proto::StageTimes {
        queueing_ns: luge_proto::nanos(s.timing.queueing()),
        execution_ns: luge_proto::nanos(s.timing.executed),
    }
}

/// The UDP-RPC status of a result.
pub fn rpc_status(result: &Result<Vec<u8>, Failure>) -> Status {
    match result {
        Ok(_) => Status::Ok,
        Err(Failure::BadRequest(BadRequest::UnknownFunction(_))) => Status::UnknownFunction,
        Err(Failure::BadRequest(BadRequest::TooLarge { .. })) => Status::TooLarge,
        Err(Failure::Rejected(Rejection::DeadlineInfeasible)) => Status::DeadlineInfeasible,
        Err(Failure::Rejected(
            Rejection::Overloaded
            | Rejection::PoolExhausted
            | Rejection::BuffersFull
            | Rejection::DeadlineUnreachable
            | Rejection::Shed,
        )) => Status::Overloaded,
        Err(Failure::Rejected(Rejection::ShuttingDown)) => Status::ShuttingDown,
        Err(Failure::Rejected(Rejection::TenantLimit(_))) => Status::TenantLimit,
        Err(Failure::Killed { .. }) => Status::Killed,
        Err(Failure::Trap(_)) => Status::Trap,
        Err(Failure::MemoryLimit { .. }) => Status::MemoryLimit,
        Err(Failure::OutputTooLarge { .. }) => Status::OutputTooLarge,
        Err(Failure::Exit(_)) => Status::ExitFailure,
        Err(Failure::DeadlineMissed | Failure::Late) => Status::DeadlineMissed,
        Err(Failure::StageRefused(_)) => Status::StageRefused,
        Err(Failure::Internal(_)) => Status::Internal,
    }
}

/// The message a protocol sends for `failure`: its `Display`, except that a function not found is
/// said to be not found (`not found: unknown function `f``) rather than a bad request.
pub(crate) fn failure_message(failure: &Failure) -> String {
    match failure {
        Failure::BadRequest(b @ BadRequest::UnknownFunction(_)) => format!("not found: {b}"),
        other => other.to_string(),
    }
}

/// The HTTP status code of a result: 200, 400, 404, 413, 429, 503, 504 or 500.
pub fn http_status(result: &Result<Vec<u8>, Failure>) -> u16 {
    rpc_status(result).http_status()
}

/// Every outcome label, indexed by [`outcome_index`] (metrics keep one counter per entry).
pub(crate) const OUTCOMES: [&str; 17] = [
    "ok",
    "trap",
    "killed",
    "memory_limit",
    "output_too_large",
    "exit_failure",
    "deadline_infeasible",
    "overloaded",
    "deadline_unreachable",
    "shed",
    "shutting_down",
    "unknown_function",
    "too_large",
    "internal",
    "tenant_limit",
    "deadline_missed",
    "stage_refused",
];

/// The position of a result's label in [`OUTCOMES`].
pub(crate) fn outcome_index(result: &Result<Vec<u8>, Failure>) -> usize {
    match result {
        Ok(_) => 0,
        Err(Failure::Trap(_)) => 1,
        Err(Failure::Killed { .. }) => 2,
        Err(Failure::MemoryLimit { .. }) => 3,
        Err(Failure::OutputTooLarge { .. }) => 4,
        Err(Failure::Exit(_)) => 5,
        Err(Failure::Rejected(Rejection::DeadlineInfeasible)) => 6,
        Err(Failure::Rejected(
            Rejection::Overloaded | Rejection::PoolExhausted | Rejection::BuffersFull,
        )) => 7,
        Err(Failure::Rejected(Rejection::DeadlineUnreachable)) => 8,
        Err(Failure::Rejected(Rejection::Shed)) => 9,
        Err(Failure::Rejected(Rejection::ShuttingDown)) => 10,
        Err(Failure::BadRequest(BadRequest::UnknownFunction(_))) => 11,
        Err(Failure::BadRequest(BadRequest::TooLarge { .. })) => 12,
        Err(Failure::Internal(_)) => 13,
        Err(Failure::Rejected(Rejection::TenantLimit(_))) => 14,
        Err(Failure::DeadlineMissed | Failure::Late) => 15,
        Err(Failure::StageRefused(_)) => 16,
    }
}

/// A short stable label of a result for metrics and logs (`ok`, `trap`, `killed`, …).
pub fn outcome_label(result: &Result<Vec<u8>, Failure>) -> &'static str {
    OUTCOMES[outcome_index(result)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_function_is_not_found_not_a_bad_request() {
        let missing = Failure::BadRequest(BadRequest::UnknownFunction("f".into()));
        assert_eq!(failure_message(&missing), "not found: unknown function `f`");
        let big = Failure::BadRequest(BadRequest::TooLarge { size: 2, cap: 1 });
        assert_eq!(failure_message(&big), big.to_string());
    }
}
