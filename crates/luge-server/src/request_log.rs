//! The per-request log: one structured line per answered request on the `luge::request` target
//! (JSON with `luge serve --log-format json`), for all requests or one in n. Off by default:
//! at overload a line per request is tens of thousands of lines a second, and /metrics counts
//! every request anyway.

use std::fmt;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use luge_runtime::Outcome;

use crate::metrics::Protocol;
use crate::status::outcome_label;
use crate::trace::Traced;

/// Which answered requests get a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestLog {
    /// None (the default).
    #[default]
    Off,
    /// One in every n (1 = all), counted per front end.
    Every(NonZeroU32),
}

/// A `RequestLog` that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid request log `{0}`: expected `off`, `all` or n (one request in n)")]
pub struct BadRequestLog(String);

impl FromStr for RequestLog {
    type Err = BadRequestLog;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" | "0" => Ok(Self::Off),
            "all" => Ok(Self::Every(NonZeroU32::MIN)),
            n => n.parse().map(Self::Every).map_err(|_| BadRequestLog(s.to_owned())),
        }
    }
}

impl fmt::Display for RequestLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Off => f.write_str("off"),
            Self::Every(n) if n.get() == 1 => f.write_str("all"),
            Self::Every(n) => write!(f, "{n}"),
        }
    }
}

/// What one line says about a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    pub protocol: Protocol,
    pub function: &'a str,
    pub tenant: u32,
    pub client: Option<SocketAddr>,
    pub client_id: Option<u64>,
    /// The relative deadline it was scheduled with.
    pub deadline: Duration,
    /// The trace it ran in.
    pub trace: Option<Traced>,
    pub outcome: &'a Outcome,
}

/// A front end's request log: the setting and the count that samples it.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    setting: RequestLog,
    seen: AtomicU64,
}

impl Sampler {
    pub(crate) fn new(setting: RequestLog) -> Self {
        Self { setting, seen: AtomicU64::new(0) }
    }

    /// Whether the next answered request is one to log (counts it).
    pub(crate) fn sample(&self) -> bool {
        match self.setting {
            RequestLog::Off => false,
            RequestLog::Every(n) => {
                self.seen.fetch_add(1, Ordering::Relaxed).is_multiple_of(u64::from(n.get()))
            }
        }
    }

    /// Writes `entry`'s line if it is sampled; true if it was.
    pub(crate) fn record(&self, entry: &Entry<'_>) -> bool {
        if !self.sample() {
            return false;
        }
        let (o, t) = (entry.outcome, entry.outcome.timing);
        let us = |d: Duration| luge_proto::micros(d);
        tracing::info!(
            target: "luge::request",
            request_id = o.request_id,
            protocol = entry.protocol.label(),
            function = entry.function,
            tenant = entry.tenant,
            client = entry.client.map(|c| c.to_string()),
            client_id = entry.client_id,
            outcome = outcome_label(&o.result),
            deadline_us = us(entry.deadline),
            queueing_us = us(t.queueing()),
            readiness_us = us(t.readiness()),
            execution_us = us(t.executed),
            total_us = us(t.total),
            preemptions = t.preemptions,
            trace_id = entry.trace.map(|t| format!("{:032x}", t.node.trace_id)),
            span_id = entry.trace.map(|t| format!("{:016x}", t.node.span_id)),
            "request"
        );
        true
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn settings_parse_and_print() {
        assert_eq!("off".parse::<RequestLog>().unwrap(), RequestLog::Off);
        assert_eq!("all".parse::<RequestLog>().unwrap().to_string(), "all");
        assert_eq!("100".parse::<RequestLog>().unwrap().to_string(), "100");
        for bad in ["", "-1", "some", "1.5"] {
            assert!(bad.parse::<RequestLog>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn one_in_n_is_sampled() {
        let s = Sampler::new("4".parse().unwrap());
        let picked: Vec<bool> = (0..8).map(|_| s.sample()).collect();
        assert_eq!(picked, [true, false, false, false, true, false, false, false]);
        let off = Sampler::new(RequestLog::Off);
        assert!((0..10).all(|_| !off.sample()));
        let all = Sampler::new(RequestLog::Every(NonZeroU32::MIN));
        assert!((0..10).all(|_| all.sample()));
    }
}
