//! One request's measurement ([`Sample`]) and the ways a request can fail ([`ErrorKind`]).
//!
//! Times are nanoseconds from the start of the run. The latency of a request runs from its
//! *intended* send time (the arrival instant of the workload, or the moment a closed-loop slot
//! freed) to the receipt of its response, so time the request spent waiting in the client —
//! behind a full window or a late sender — is part of its latency (no coordinated omission).

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};

use luge_proto::Status;

/// Why a request did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The server answered with this non-`Ok` status (UDP-RPC, or HTTP with a `Luge-Outcome`
    /// label that names a status).
    Status(Status),
    /// The server answered with this HTTP status and no recognised `Luge-Outcome` label.
    Http(u16),
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
    /// `timeout`, `unsent`, `send`, `connect` or `transport`.
    pub fn label(&self) -> Cow<'static, str> {
        match self {
            ErrorKind::Status(s) => Cow::Borrowed(s.label()),
            ErrorKind::Http(code) => Cow::Owned(format!("http_{code}")),
            ErrorKind::Timeout => Cow::Borrowed("timeout"),
            ErrorKind::Unsent => Cow::Borrowed("unsent"),
            ErrorKind::Send => Cow::Borrowed("send"),
            ErrorKind::Connect => Cow::Borrowed("connect"),
            ErrorKind::Transport => Cow::Borrowed("transport"),
        }
    }

    /// The known status whose label is `label` (as sent in `Luge-Outcome`), if any.
    pub fn status_from_label(label: &str) -> Option<Status> {
        const CODES: [u16; 16] =
            [0, 100, 101, 102, 103, 104, 200, 201, 202, 203, 300, 301, 302, 303, 304, 400];
        CODES.iter().map(|&c| Status::from_u16(c)).find(|s| s.label() == label)
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
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
        server_execution_ns,server_queueing_ns,nominal_execution_ns,deadline_ns,met_deadline";

    /// Writes one CSV row (empty fields for unknown values).
    pub fn write_csv_row(&self, w: &mut impl Write) -> io::Result<()> {
        fn opt(v: Option<u64>) -> String {
            v.map_or_else(String::new, |v| v.to_string())
        }
        let outcome = self.error.map_or(Cow::Borrowed("ok"), |e| e.label());
        writeln!(
            w,
            "{},{},{},{},{},{},{},{},{},{},{}",
            self.seq,
            self.class,
            self.intended_ns,
            opt(self.sent_ns),
            opt(self.latency_ns),
            outcome,
            opt(self.server_execution_ns),
            opt(self.server_queueing_ns),
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
        assert_eq!(ErrorKind::status_from_label("nonsense"), None);
        assert_eq!(ErrorKind::Http(502).label(), "http_502");
        assert_eq!(ErrorKind::Status(Status::Trap).to_string(), "trap");
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
        assert_eq!(String::from_utf8(row).unwrap(), "0,0,0,0,4001,overloaded,,500,2000,4000,0\n");
    }
}
