//! Prometheus metrics shared by the front ends: request counters by function,
//! outcome and protocol; latency and execution histograms by function; malformed-input
//! counters; gauges read from the runtime at scrape time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use luge_runtime::{Outcome, Runtime};

use crate::status::outcome_label;

/// Upper bounds of the histogram buckets, in seconds (10 µs … 10 s).
const BUCKETS: [f64; 13] =
    [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 5e-2, 0.25, 1.0, 10.0];

/// Which front end served a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// HTTP/1.1.
    Http,
    /// UDP-RPC.
    Rpc,
}

impl Protocol {
    fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Rpc => "rpc",
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|&b| s <= b) {
            self.counts[i] += 1;
        }
        self.count += 1;
        self.sum += s;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(self.counts) {
            cumulative += n;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

#[derive(Debug, Default)]
struct State {
    requests: BTreeMap<(String, &'static str, Protocol), u64>,
    latency: BTreeMap<String, Histogram>,
    execution: BTreeMap<String, Histogram>,
    queueing: BTreeMap<String, Histogram>,
    malformed: BTreeMap<(Protocol, String), u64>,
}

/// The metrics registry of one server.
#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    /// A new, empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one answered request.
    pub fn record(&self, function: &str, protocol: Protocol, outcome: &Outcome) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let label = outcome_label(&outcome.result);
        *s.requests.entry((function.to_owned(), label, protocol)).or_default() += 1;
        s.latency.entry(function.to_owned()).or_default().observe(outcome.timing.total);
        if outcome.timing.executed > Duration::ZERO {
            s.execution.entry(function.to_owned()).or_default().observe(outcome.timing.executed);
            s.queueing.entry(function.to_owned()).or_default().observe(outcome.timing.queued);
        }
    }

    /// Counts one input that could not be parsed (`reason` is a short label).
    pub fn malformed(&self, protocol: Protocol, reason: &str) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        *s.malformed.entry((protocol, reason.to_owned())).or_default() += 1;
    }

    /// Requests counted so far for `function` with outcome label `outcome` (tests, status page).
    pub fn requests(&self, function: &str, outcome: &str) -> u64 {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.requests
            .iter()
            .filter(|((f, o, _), _)| f == function && *o == outcome)
            .map(|(_, n)| n)
            .sum()
    }

    /// Malformed inputs counted so far on `protocol`.
    pub fn malformed_total(&self, protocol: Protocol) -> u64 {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.malformed.iter().filter(|((p, _), _)| *p == protocol).map(|(_, n)| n).sum()
    }

    /// The Prometheus text exposition of every metric, with gauges read from `runtime`.
    pub fn render(&self, runtime: &Runtime) -> String {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        out.push_str(
            "# HELP luge_requests_total Requests answered, by function, outcome and protocol.\n",
        );
        out.push_str("# TYPE luge_requests_total counter\n");
        for ((f, o, p), n) in &s.requests {
            let _ = writeln!(
                out,
                "luge_requests_total{{function=\"{}\",outcome=\"{o}\",protocol=\"{}\"}} {n}",
                escape(f),
                p.label()
            );
        }
        for (name, help, map) in [
            ("luge_request_duration_seconds", "Submission to answer.", &s.latency),
            (
                "luge_execution_seconds",
                "Execution on a worker, instantiation included.",
                &s.execution,
            ),
            ("luge_queueing_seconds", "Submission to first instruction.", &s.queueing),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            for (f, h) in map {
                h.render(&mut out, name, &format!("function=\"{}\"", escape(f)));
            }
        }
        out.push_str("# HELP luge_malformed_total Inputs rejected before routing, by reason.\n");
        out.push_str("# TYPE luge_malformed_total counter\n");
        for ((p, r), n) in &s.malformed {
            let _ = writeln!(
                out,
                "luge_malformed_total{{protocol=\"{}\",reason=\"{}\"}} {n}",
                p.label(),
                escape(r)
            );
        }
        let _ = writeln!(
            out,
            "# HELP luge_live_sandboxes Sandboxes alive (running or preempted).\n# TYPE luge_live_sandboxes gauge\nluge_live_sandboxes {}",
            runtime.live_sandboxes()
        );
        let _ = writeln!(
            out,
            "# HELP luge_functions Registered functions.\n# TYPE luge_functions gauge\nluge_functions {}",
            runtime.functions().len()
        );
        out
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
