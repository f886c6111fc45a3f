//! Response status codes (`docs/protocol.md` §4): a u16 whose hundreds digit is the class, so a
//! client can act on codes it does not know; unknown values decode as [`Status::Unknown`].

use std::fmt;

/// The status of a [`Response`](crate::Response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Success; the payload is the function's stdout.
    Ok,
    /// A well-formed datagram carrying an unacceptable request.
    BadRequest,
    /// The datagram did not parse.
    Malformed,
    /// The version byte is not one this server speaks.
    UnsupportedVersion,
    /// No function has this id.
    UnknownFunction,
    /// The datagram, or the payload for this function, is too large.
    TooLarge,
    /// The tenant's rate or concurrency limit was hit.
    TenantLimit,
    /// The server's queues are full.
    Overloaded,
    /// Admission found that the deadline cannot be met; the request was not queued.
    DeadlineInfeasible,
    /// The server is draining.
    ShuttingDown,
    /// Killed for overrunning the function's execution time limit.
    Killed,
    /// The guest trapped (the payload names the trap kind).
    Trap,
    /// The guest hit its memory limit.
    MemoryLimit,
    /// The guest's output exceeded the response limit.
    OutputTooLarge,
    /// The guest exited with a non-zero status.
    ExitFailure,
    /// A chain's deadline passed, or could no longer be met, before one of its stages could
    /// run (earlier stages ran); the message names the stage.
    DeadlineMissed,
    /// A chain's later stage was refused (load, a tenant limit, a shutdown, its input too
    /// large) after earlier stages ran: unlike a refusal, the chain's work was partly done, so
    /// the answer is final for this request id. The message names the stage and the refusal.
    StageRefused,
    /// A server-side failure.
    Internal,
    /// A code this version of the crate does not know; see [`Status::class`].
    Unknown(u16),
}

/// The class of a status: its code's hundreds digit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusClass {
    /// Code 0.
    Success,
    /// 1xx: the request is wrong and was not executed; do not retry it unchanged.
    Client,
    /// 2xx: refused for now and not executed; retry later or elsewhere.
    Refused,
    /// 3xx: the function ran and failed.
    Function,
    /// Everything else (4xx and above, and 1–99): a server fault.
    Server,
}

/// `(status, code)` for every named status; the single source of the numbering.
const CODES: [(Status, u16); 18] = [
    (Status::Ok, 0),
    (Status::BadRequest, 100),
    (Status::Malformed, 101),
    (Status::UnsupportedVersion, 102),
    (Status::UnknownFunction, 103),
    (Status::TooLarge, 104),
    (Status::TenantLimit, 200),
    (Status::Overloaded, 201),
    (Status::DeadlineInfeasible, 202),
    (Status::ShuttingDown, 203),
    (Status::Killed, 300),
    (Status::Trap, 301),
    (Status::MemoryLimit, 302),
    (Status::OutputTooLarge, 303),
    (Status::ExitFailure, 304),
    (Status::DeadlineMissed, 305),
    (Status::StageRefused, 306),
    (Status::Internal, 400),
];

impl Status {
    /// Every named status (not [`Status::Unknown`]), in code order.
    pub fn named() -> impl Iterator<Item = Status> {
        CODES.iter().map(|&(s, _)| s)
    }

    /// The wire code.
    pub fn as_u16(self) -> u16 {
        match self {
            Status::Unknown(code) => code,
            named => CODES.iter().find(|(s, _)| *s == named).map_or(u16::MAX, |&(_, c)| c),
        }
    }

    /// The status for a wire code; codes without a name become [`Status::Unknown`].
    pub fn from_u16(code: u16) -> Status {
        CODES.iter().find(|&&(_, c)| c == code).map_or(Status::Unknown(code), |&(s, _)| s)
    }

    /// The class (hundreds digit) of the code.
    pub fn class(self) -> StatusClass {
        match self.as_u16() {
            0 => StatusClass::Success,
            100..=199 => StatusClass::Client,
            200..=299 => StatusClass::Refused,
            300..=399 => StatusClass::Function,
            _ => StatusClass::Server,
        }
    }

    /// The HTTP status the HTTP front end uses for the same outcome (`docs/protocol.md`).
    pub fn http_status(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest | Status::Malformed | Status::UnsupportedVersion => 400,
            Status::UnknownFunction => 404,
            Status::TooLarge => 413,
            Status::TenantLimit => 429,
            Status::Overloaded | Status::DeadlineInfeasible | Status::ShuttingDown => 503,
            Status::Killed | Status::DeadlineMissed => 504,
            Status::Trap
            | Status::MemoryLimit
            | Status::OutputTooLarge
            | Status::ExitFailure
            | Status::StageRefused
            | Status::Internal => 500,
            Status::Unknown(_) => match self.class() {
                StatusClass::Client => 400,
                StatusClass::Refused => 503,
                _ => 500,
            },
        }
    }

    /// A stable snake-case name, e.g. for metric labels (`unknown` for unknown codes).
    pub fn label(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::BadRequest => "bad_request",
            Status::Malformed => "malformed",
            Status::UnsupportedVersion => "unsupported_version",
            Status::UnknownFunction => "unknown_function",
            Status::TooLarge => "too_large",
            Status::TenantLimit => "tenant_limit",
            Status::Overloaded => "overloaded",
            Status::DeadlineInfeasible => "deadline_infeasible",
            Status::ShuttingDown => "shutting_down",
            Status::Killed => "killed",
            Status::Trap => "trap",
            Status::MemoryLimit => "memory_limit",
            Status::OutputTooLarge => "output_too_large",
            Status::ExitFailure => "exit_failure",
            Status::DeadlineMissed => "deadline_missed",
            Status::StageRefused => "stage_refused",
            Status::Internal => "internal",
            Status::Unknown(_) => "unknown",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Status::Unknown(code) => write!(f, "unknown status {code}"),
            named => write!(f, "{} ({})", named.label(), named.as_u16()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_are_distinct() {
        for code in 0..=u16::MAX {
            assert_eq!(Status::from_u16(code).as_u16(), code);
        }
        for (i, &(s, c)) in CODES.iter().enumerate() {
            assert_eq!(Status::from_u16(c), s);
            assert!(CODES[..i].iter().all(|&(t, d)| t != s && d != c));
        }
    }

    #[test]
    fn http_mapping_follows_the_brief() {
        assert_eq!(Status::Ok.http_status(), 200);
        assert_eq!(Status::UnknownFunction.http_status(), 404);
        assert_eq!(Status::TooLarge.http_status(), 413);
        assert_eq!(Status::TenantLimit.http_status(), 429);
        assert_eq!(Status::DeadlineInfeasible.http_status(), 503);
        assert_eq!(Status::Killed.http_status(), 504);
        assert_eq!(Status::Trap.http_status(), 500);
        assert_eq!(Status::from_u16(150).http_status(), 400);
        assert_eq!(Status::from_u16(299).http_status(), 503);
        assert_eq!(Status::from_u16(999).http_status(), 500);
        assert_eq!(Status::Overloaded.class(), StatusClass::Refused);
        assert_eq!(Status::Overloaded.to_string(), "overloaded (201)");
        assert_eq!(Status::Unknown(7).to_string(), "unknown status 7");
    }
}
