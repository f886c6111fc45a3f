//! One request's measurement ([`Sample`]) and the ways a request can fail ([`ErrorKind`]).
//!
//! Times are nanoseconds from the start of the run. The latency of a request runs from its
//! *intended* send time (the arrival instant of the workload, or the moment a closed-loop slot
//! freed) to the receipt of its response, so time the request spent waiting in the client —
//! behind a full window or a late sender — is part of its latency (no coordinated omission).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

use luge_proto::Status;

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The server answered with this non-`Ok` status (UDP-RPC, or HTTP with a `Luge-Outcome`
    /// label that names a status).
    Status(Status),
    /// The server answered with this HTTP status and no recognised `Luge-Outcome` label.
    Http(u16),
    /// HTTP 503 with `Luge-Outcome: deadline_unreachable`: refused on admission, because at
    /// the current load the request would wait past its deadline (UDP-RPC answers
    /// `Status(Overloaded)` for the same refusal).
    DeadlineUnreachable,
    /// HTTP 503 with `Luge-Outcome: shed`: admitted, then answered instead of run because its
    /// deadline became unreachable while it waited (UDP-RPC: `Status(Overloaded)`).
    Shed,
    /// No response within the request timeout.
    Timeout,
    /// Never sent: the client fell so far behind its schedule that the run's time bound passed
    /// first. Counted so that a slow client cannot hide requests (honest accounting).
    Unsent,
    /// The send failed locally (socket error).
    Send,
    /// The HTTP connection could not be established.
    Connect,
    /// The HTTP exchange failed after the connection was made (reset, bad response, …).
    Transport,
}

impl ErrorKind {
    /// A short stable label: the status label (`overloaded`, `killed`, …), `http_NNN`,
    /// `deadline_unreachable`, `shed`, `timeout`, `unsent`, `send`, `connect` or `transport`.
    pub fn label(&self) -> Cow<'static, str> {
        match self {
            ErrorKind::Status(s) => Cow::Borrowed(s.label()),
            ErrorKind::Http(code) => Cow::Owned(format!("http_{code}")),
            ErrorKind::DeadlineUnreachable => Cow::Borrowed("deadline_unreachable"),
            ErrorKind::Shed => Cow::Borrowed("shed"),
            ErrorKind::Timeout => Cow::Borrowed("timeout"),
            ErrorKind::Unsent => Cow::Borrowed("unsent"),
            ErrorKind::Send => Cow::Borrowed("send"),
            ErrorKind::Connect => Cow::Borrowed("connect"),
            ErrorKind::Transport => Cow::Borrowed("transport"),
        }
    }

    /// The known status whose label is `label` (as sent in `Luge-Outcome`), if any.
    pub fn status_from_label(label: &str) -> Option<Status> {
        Status::named().find(|s| s.label() == label)
    }

    /// The error of an HTTP answer with a status other than 200 and this `Luge-Outcome` label:
    /// the status the label names, the two refusals that have no status of their own
    /// (`deadline_unreachable`, `shed`), else the bare HTTP status.
    pub fn from_http(status: u16, outcome: Option<&str>) -> Self {
        match outcome.map(str::trim) {
            Some("deadline_unreachable") => ErrorKind::DeadlineUnreachable,
            Some("shed") => ErrorKind::Shed,
            Some(label) => match ErrorKind::status_from_label(label) {
                Some(s) if s != Status::Ok => ErrorKind::Status(s),
                _ => ErrorKind::Http(status),
            },
            None => ErrorKind::Http(status),
        }
    }

    /// True when the server refused the request — answered it without running it because it
    /// is overloaded (HTTP 503: `overloaded`, `deadline_unreachable`, `shed`,
    /// `deadline_infeasible`, `shutting_down`, or a bare 503).
    pub fn is_refusal(&self) -> bool {
        match self {
            ErrorKind::Status(s) => s.http_status() == 503,
            ErrorKind::Http(code) => *code == 503,
            ErrorKind::DeadlineUnreachable | ErrorKind::Shed => true,
            ErrorKind::Timeout
            | ErrorKind::Unsent
            | ErrorKind::Send
            | ErrorKind::Connect
            | ErrorKind::Transport => false,
        }
    }

    /// True when the server answered (a non-`Ok` status is an answer; a timeout, a request
    /// never sent or a transport failure is not).
    pub fn is_answer(&self) -> bool {
        matches!(
            self,
            ErrorKind::Status(_)
                | ErrorKind::Http(_)
                | ErrorKind::DeadlineUnreachable
                | ErrorKind::Shed
        )
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// A callback given every [`Sample`] of a run as it is recorded, exactly once per planned
/// request (`RunConfig::observer`): streaming statistics of a long run without keeping its
/// samples. It runs under the run's book-keeping lock, on the receiver or sender thread, so it
/// must be short and must not block.
#[derive(Clone)]
pub struct SampleObserver(Arc<dyn Fn(&Sample) + Send + Sync>);

impl SampleObserver {
    /// Wraps a callback.
    pub fn new(f: impl Fn(&Sample) + Send + Sync + 'static) -> Self {
        Self(Arc::new(f))
    }

    /// Calls it.
    pub fn observe(&self, s: &Sample) {
        (self.0)(s);
    }
}

impl fmt::Debug for SampleObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SampleObserver(..)")
    }
}

/// What happened to one planned request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Position in the plan (0-based; the request id is a random base plus this).
    pub seq: u64,
    /// Class tag from the workload.
    pub class: u16,
    /// Intended send time (ns from the start of the run).
    pub intended_ns: u64,
    /// Actual send time, `None` if never sent.
    pub sent_ns: Option<u64>,
    /// From the intended send time to the receipt of the response; `None` without a response.
    pub latency_ns: Option<u64>,
    /// `None` on success.
    pub error: Option<ErrorKind>,
    /// Execution time reported by the server (ns), if it reported one.
    pub server_execution_ns: Option<u64>,
    /// Queueing time reported by the server (ns), if it reported one.
    pub server_queueing_ns: Option<u64>,
    /// Readiness reported by the server (ns), if it reported one: from its receipt of the
    /// request to the first guest instruction (HORSE §2).
    pub server_readiness_ns: Option<u64>,
    /// The workload's execution time for this request (ns).
    pub nominal_execution_ns: u64,
    /// Relative deadline (ns), counted from the intended send time.
    pub deadline_ns: u64,
}

impl Sample {
    /// True when the server answered `Ok`.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.latency_ns.is_some()
    }

    /// Latency if the request succeeded; `None` stands for infinity (honest accounting: an
    /// error, a refusal or a timeout is an infinitely late answer).
    pub fn ok_latency_ns(&self) -> Option<u64> {
        if self.ok() { self.latency_ns } else { None }
    }

    /// True when it succeeded within its deadline.
    pub fn met_deadline(&self) -> bool {
        self.ok_latency_ns().is_some_and(|l| l <= self.deadline_ns)
    }

    /// True when it missed its deadline and was sent so late that even an answer at once after
    /// its nominal execution would have missed it: the client's lag alone failed it.
    pub fn sent_too_late(&self) -> bool {
        !self.met_deadline()
            && self.sent_ns.is_some_and(|sent| {
                sent.saturating_sub(self.intended_ns).saturating_add(self.nominal_execution_ns)
                    >= self.deadline_ns
            })
    }

    /// The execution time slowdown and RTE are computed against: the server's report when it
    /// gave a non-zero one, else the workload's nominal time; `None` when neither is known.
    pub fn execution_ns(&self) -> Option<u64> {
        self.server_execution_ns
            .filter(|&e| e > 0)
            .or(Some(self.nominal_execution_ns).filter(|&e| e > 0))
    }

    /// Slowdown = latency ÷ execution: `Some(f64::INFINITY)` for a failed request, `None` when
    /// the execution time is unknown.
    pub fn slowdown(&self) -> Option<f64> {
        match self.ok_latency_ns() {
            Some(l) => self.execution_ns().map(|e| l.max(1) as f64 / e as f64),
            None => Some(f64::INFINITY),
        }
    }

    /// RTE = server-reported execution ÷ latency (SFS), capped at 1: `Some(0.0)` for a failed
    /// request, `None` when the server reported no execution time.
    pub fn rte(&self) -> Option<f64> {
        match self.ok_latency_ns() {
            Some(l) => self
                .server_execution_ns
                .filter(|&e| e > 0)
                .map(|e| (e as f64 / l.max(1) as f64).min(1.0)),
            None => Some(0.0),
        }
    }

    /// The CSV header matching [`write_csv_row`](Self::write_csv_row).
    pub const CSV_HEADER: &'static str = "seq,class,intended_ns,sent_ns,latency_ns,outcome,\
        server_execution_ns,server_queueing_ns,server_readiness_ns,nominal_execution_ns,deadline_ns,\
        met_deadline";

    /// Writes one CSV row (empty fields for unknown values).
    pub fn write_csv_row(&self, w: &mut impl Write) -> io::Result<()> {
        fn opt(v: Option<u64>) -> String {
            v.map_or_else(String::new, |v| v.to_string())
        }
        let outcome = self.error.map_or(Cow::Borrowed("ok"), |e| e.label());
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            self.seq,
            self.class,
            self.intended_ns,
            opt(self.sent_ns),
            opt(self.latency_ns),
            outcome,
            opt(self.server_execution_ns),
            opt(self.server_queueing_ns),
            opt(self.server_readiness_ns),
            self.nominal_execution_ns,
            self.deadline_ns,
            u8::from(self.met_deadline()),
        )
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_outcome_round_trip() {
        assert_eq!(ErrorKind::status_from_label("overloaded"), Some(Status::Overloaded));
        assert_eq!(ErrorKind::status_from_label("killed"), Some(Status::Killed));
        // Every status the node sends, the chains' and late requests' 504 included.
        for code in (0..=500).filter(|&c| !matches!(Status::from_u16(c), Status::Unknown(_))) {
            let s = Status::from_u16(code);
            assert_eq!(ErrorKind::status_from_label(s.label()), Some(s), "{code}");
        }
        assert_eq!(ErrorKind::status_from_label("nonsense"), None);
        assert_eq!(ErrorKind::Http(502).label(), "http_502");
        assert_eq!(ErrorKind::Status(Status::Trap).to_string(), "trap");
    }

    #[test]
    fn http_refusals_are_named_by_their_outcome() {
        let of = ErrorKind::from_http;
        assert_eq!(of(503, Some("deadline_unreachable")), ErrorKind::DeadlineUnreachable);
        assert_eq!(of(503, Some(" shed ")), ErrorKind::Shed);
        assert_eq!(of(503, Some("overloaded")), ErrorKind::Status(Status::Overloaded));
        assert_eq!(of(503, Some("ok")), ErrorKind::Http(503));
        assert_eq!(of(418, None), ErrorKind::Http(418));
        assert_eq!(ErrorKind::Shed.label(), "shed");
        for refused in [
            ErrorKind::DeadlineUnreachable,
            ErrorKind::Shed,
            ErrorKind::Http(503),
            ErrorKind::Status(Status::Overloaded),
            ErrorKind::Status(Status::DeadlineInfeasible),
        ] {
            assert!(refused.is_refusal() && refused.is_answer(), "{refused}");
        }
        for other in [ErrorKind::Status(Status::Killed), ErrorKind::Http(500)] {
            assert!(!other.is_refusal() && other.is_answer(), "{other}");
        }
        for none in [ErrorKind::Timeout, ErrorKind::Unsent, ErrorKind::Transport] {
            assert!(!none.is_refusal() && !none.is_answer(), "{none}");
        }
    }

    #[test]
    fn slowdown_rte_and_deadline() {
        let mut s = Sample {
            seq: 0,
            class: 0,
            intended_ns: 0,
            sent_ns: Some(0),
            latency_ns: Some(4_000),
            error: None,
            server_execution_ns: Some(1_000),
            server_queueing_ns: Some(500),
            server_readiness_ns: Some(300),
            nominal_execution_ns: 2_000,
            deadline_ns: 4_000,
        };
        assert_eq!((s.slowdown(), s.rte(), s.met_deadline()), (Some(4.0), Some(0.25), true));
        s.server_execution_ns = None;
        assert_eq!((s.slowdown(), s.rte()), (Some(2.0), None));
        s.latency_ns = Some(4_001);
        assert!(!s.met_deadline());
        s.error = Some(ErrorKind::Status(Status::Overloaded));
        assert_eq!((s.slowdown(), s.rte(), s.ok()), (Some(f64::INFINITY), Some(0.0), false));
        let mut row = Vec::new();
        s.write_csv_row(&mut row).unwrap();
        assert_eq!(
            String::from_utf8(row).unwrap(),
            "0,0,0,0,4001,overloaded,,500,300,2000,4000,0\n"
        );
    }
}
