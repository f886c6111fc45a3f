//! How a request's [`Outcome`](luge_runtime::Outcome) maps onto each protocol's status: one table, shared by both front ends so HTTP and UDP-RPC never disagree.

use luge_proto::Status;
use luge_runtime::{BadRequest, Failure, Rejection};

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
            | Rejection::DeadlineUnreachable
            | Rejection::Shed,
        )) => Status::Overloaded,
        Err(Failure::Rejected(Rejection::ShuttingDown)) => Status::ShuttingDown,
        Err(Failure::Killed { .. }) => Status::Killed,
        Err(Failure::Trap(_)) => Status::Trap,
        Err(Failure::MemoryLimit { .. }) => Status::MemoryLimit,
        Err(Failure::OutputTooLarge { .. }) => Status::OutputTooLarge,
        Err(Failure::Exit(_)) => Status::ExitFailure,
        Err(Failure::Internal(_)) => Status::Internal,
    }
}

/// The HTTP status code of a result: 200, 400, 404, 413, 503, 504 or 500.
pub fn http_status(result: &Result<Vec<u8>, Failure>) -> u16 {
    rpc_status(result).http_status()
}

/// A short stable label of a result for metrics and logs (`ok`, `trap`, `killed`, …).
pub fn outcome_label(result: &Result<Vec<u8>, Failure>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(Failure::Trap(_)) => "trap",
        Err(Failure::Killed { .. }) => "killed",
        Err(Failure::MemoryLimit { .. }) => "memory_limit",
        Err(Failure::OutputTooLarge { .. }) => "output_too_large",
        Err(Failure::Exit(_)) => "exit_failure",
        Err(Failure::Rejected(Rejection::DeadlineInfeasible)) => "deadline_infeasible",
        Err(Failure::Rejected(Rejection::Overloaded | Rejection::PoolExhausted)) => "overloaded",
        Err(Failure::Rejected(Rejection::DeadlineUnreachable)) => "deadline_unreachable",
        Err(Failure::Rejected(Rejection::Shed)) => "shed",
        Err(Failure::Rejected(Rejection::ShuttingDown)) => "shutting_down",
        Err(Failure::BadRequest(BadRequest::UnknownFunction(_))) => "unknown_function",
        Err(Failure::BadRequest(BadRequest::TooLarge { .. })) => "too_large",
        Err(Failure::Internal(_)) => "internal",
    }
}
