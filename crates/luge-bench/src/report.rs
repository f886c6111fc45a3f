//! What a run reports, in three forms: a terminal table ([`Report::render_table`]), JSON
//! ([`Report::to_json`]; the [`Summary`] fields are flattened into the top level) and a CSV of
//! the raw samples ([`Report::write_csv`], when the run kept them).
//!
//! In JSON, a `null` percentile is infinite (a failed request sits at that rank, see
//! [`Summary`](crate::Summary)); the table prints `inf`.

use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;

use crate::calibrate::Calibration;
use crate::cpu_busy::GeneratorCpu;
use crate::sample::Sample;
use crate::summary::{Percentiles, Summary};

/// The result of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// The address driven (`udp://…` or `http://…`).
    pub target: String,
    /// `udp` or `http`.
    pub protocol: String,
    /// `open` or `closed`.
    pub mode: String,
    /// Open loop: the bound on requests in flight. Closed loop: the requests kept in flight.
    pub window: usize,
    /// The workload as run (canonical spec string, runtime truncation included).
    pub workload: String,
    /// How arrivals were mapped onto functions.
    pub mapping: String,
    /// The `spin` calibration used, if any.
    pub calibration: Option<Calibration>,
    /// The run's duration bound (s).
    pub duration_s: f64,
    /// Per-request timeout (s).
    pub timeout_s: f64,
    /// The metrics.
    #[serde(flatten)]
    pub summary: Summary,
    /// Most requests ever in flight at once.
    pub max_in_flight: usize,
    /// HTTP: the most connections open at once (at most `max_in_flight`); `None` over UDP-RPC.
    pub max_connections: Option<usize>,
    /// Datagrams or responses that answered no request in flight (late answers after a
    /// timeout, or foreign datagrams).
    pub stray_responses: u64,
    /// How busy the CPUs were while the load generator ran.
    pub generator_cpu: GeneratorCpu,
    /// Warnings about how far to trust the numbers.
    pub notes: Vec<String>,
    /// Raw samples, sorted by `seq` (empty unless the run kept them).
    #[serde(skip)]
    pub samples: Vec<Sample>,
}

impl Report {
    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The raw samples as CSV (header first; no rows unless the run kept its samples).
    pub fn write_csv(&self, w: &mut impl Write) -> io::Result<()> {
        writeln!(w, "{}", Sample::CSV_HEADER)?;
        for s in &self.samples {
            s.write_csv_row(w)?;
        }
        Ok(())
    }

    /// A table for the terminal.
    pub fn render_table(&self) -> String {
        let s = &self.summary;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "luge bench → {} ({} loop, {} {}, {} s, timeout {} s)",
            self.target,
            self.mode,
            if self.mode == "closed" { "outstanding" } else { "window" },
            self.window,
            self.duration_s,
            self.timeout_s
        );
        let _ = writeln!(out, "workload     {}", self.workload);
        let _ = writeln!(out, "mapping      {}", self.mapping);
        if let Some(c) = &self.calibration {
            let _ = writeln!(out, "calibration  {c}");
        }
        let _ = writeln!(
            out,
            "requests     planned {}  sent {}  completed {}  errors {}",
            s.planned, s.sent, s.completed, s.errors
        );
        if !s.errors_by_kind.is_empty() {
            let kinds: Vec<String> =
                s.errors_by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(out, "errors       {}", kinds.join(", "));
        }
        let _ = writeln!(
            out,
            "rate         offered {:.1}/s  throughput {:.1}/s  goodput {:.1}/s  (elapsed {:.3} s)",
            s.offered_rps, s.throughput_rps, s.goodput_rps, s.elapsed_s
        );
        let _ = write!(out, "deadlines    miss rate {:.3} %", 100.0 * s.deadline_miss_rate);
        if s.sent_too_late > 0 {
            let _ =
                write!(out, "  ({} sent too late for any server by the client)", s.sent_too_late);
        }
        let _ = writeln!(out);
        if let Some(busy) = self.generator_cpu.generator_busy {
            let _ = writeln!(
                out,
                "client CPU   {:.1} % busy (CPUs {:?}, the load generator's)",
                100.0 * busy,
                self.generator_cpu.cpus
            );
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<14}{:>12}{:>12}{:>12}{:>12}{:>12}",
            "", "mean", "p50", "p99", "p99.9", "max"
        );
        let any = s.planned > 0;
        // Queueing and send lag have no infinities: a missing value there means "none".
        for (name, p, inf) in [
            ("latency µs", &s.latency_us, any),
            ("slowdown", &s.slowdown, any),
            ("queueing µs", &s.server_queueing_us, false),
            ("readiness µs", &s.server_readiness_us, false),
            ("execution µs", &s.server_execution_us, false),
            ("send lag µs", &s.send_lag_us, false),
        ] {
            let _ = writeln!(out, "{}", row(name, p, inf));
        }
        if let Some(share) = s.readiness_share {
            let _ = writeln!(
                out,
                "readiness     {:.1} % of the server's receipt-to-answer (HORSE §2)",
                100.0 * share
            );
        }
        let _ = writeln!(
            out,
            "RTE           mean {:.3}  p50 {}  p1 {}  (over {} requests)",
            s.rte.mean,
            num(s.rte.p50, any),
            num(s.rte.p1, any),
            s.rte.count
        );
        if s.per_class.len() > 1 {
            let _ = writeln!(out);
            let _ = writeln!(
                out,
                "{:<6}{:<12}{:>10}{:>10}{:>12}{:>12}{:>12}{:>14}{:>16}",
                "class",
                "name",
                "planned",
                "miss %",
                "p50 µs",
                "p99 µs",
                "p99.9 µs",
                "slowdown p99",
                "ran ÷ nominal"
            );
            for c in &s.per_class {
                let _ = writeln!(
                    out,
                    "{:<6}{:<12}{:>10}{:>10.3}{:>12}{:>12}{:>12}{:>14}{:>16}",
                    c.class,
                    c.name.as_deref().unwrap_or("-"),
                    c.planned,
                    100.0 * c.deadline_miss_rate,
                    num(c.latency_us.p50, true),
                    num(c.latency_us.p99, true),
                    num(c.latency_us.p999, true),
                    num(c.slowdown.p99, true),
                    c.execution_vs_nominal
                        .p50
                        .map_or_else(|| "-".to_owned(), |r| format!("{r:.2}×")),
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}

fn num(v: Option<f64>, any: bool) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
        None if any => "inf".to_owned(),
        None => "-".to_owned(),
    }
}

fn row(name: &str, p: &Percentiles, any: bool) -> String {
    // The mean is over the finite values, 0 when there are none (every request failed, or
    // nothing was reported): then there is no mean to print.
    let none = p.mean == 0.0 && p.p50.is_none() && p.max.is_none();
    format!(
        "{:<14}{:>12}{:>12}{:>12}{:>12}{:>12}",
        name,
        if none { "-".to_owned() } else { num(Some(p.mean), any) },
        num(p.p50, any),
        num(p.p99, any),
        num(p.p999, any),
        num(p.max, any)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::cpu_busy::GeneratorCpu;
    use crate::sample::ErrorKind;

    fn report(samples: &[Sample]) -> Report {
        Report {
            target: "udp://127.0.0.1:1".into(),
            protocol: "udp".into(),
            mode: "open".into(),
            window: 1,
            workload: "fixed".into(),
            mapping: "spin".into(),
            calibration: None,
            duration_s: 1.0,
            timeout_s: 1.0,
            summary: Summary::from_samples(samples, |_| None),
            max_in_flight: 1,
            max_connections: None,
            stray_responses: 0,
            generator_cpu: GeneratorCpu::default(),
            notes: Vec::new(),
            samples: Vec::new(),
        }
    }

    /// The table says how many misses the client's lag alone caused, when it caused any.
    #[test]
    fn the_table_names_requests_sent_too_late() {
        let sample = |seq: u64, lag_ns: u64| Sample {
            seq,
            class: 0,
            intended_ns: 1_000 * seq,
            sent_ns: Some(1_000 * seq + lag_ns),
            latency_ns: Some(lag_ns + 20_000),
            error: None,
            server_execution_ns: Some(10_000),
            server_queueing_ns: Some(1_000),
            server_readiness_ns: None,
            nominal_execution_ns: 10_000,
            deadline_ns: 100_000,
        };
        let on_time = report(&[sample(1, 0), sample(2, 0)]).render_table();
        assert!(!on_time.contains("sent too late"), "{on_time}");
        let late = report(&[sample(1, 0), sample(2, 95_000)]).render_table();
        assert!(late.contains("miss rate 50.000 %  (1 sent too late"), "{late}");
    }

    /// With every request failed there is no mean latency: the table says none, not 0.
    #[test]
    fn no_mean_is_printed_when_nothing_succeeded() {
        let failed = |seq: u64| Sample {
            seq,
            class: 0,
            intended_ns: 1_000 * seq,
            sent_ns: Some(1_000 * seq),
            latency_ns: Some(5_000),
            error: Some(ErrorKind::Timeout),
            server_execution_ns: None,
            server_queueing_ns: None,
            server_readiness_ns: None,
            nominal_execution_ns: 10_000,
            deadline_ns: 100_000,
        };
        let table = report(&[failed(1), failed(2)]).render_table();
        let latency = table.lines().find(|l| l.starts_with("latency µs")).unwrap();
        let cells: Vec<&str> = latency.split_whitespace().collect();
        assert_eq!(cells[2..], ["-", "inf", "inf", "inf", "inf"], "{table}");
        let queueing = table.lines().find(|l| l.starts_with("queueing µs")).unwrap();
        assert_eq!(queueing.split_whitespace().filter(|c| *c == "-").count(), 5, "{table}");
    }
}
