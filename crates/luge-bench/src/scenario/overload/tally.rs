//! What `luge bench overload` keeps as a run's samples stream by: answers, refusals and their
//! latency (client-side and in the node), silence, and per-bin counts for the step; and the
//! process's `VmRSS` around a measurement.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::super::density::rss_kib;
use super::{BIN_NS, MAX_BINS, TIMEOUT_NS};
use crate::error::BenchError;
use crate::sample::{ErrorKind, Sample};

/// Counts kept as a run's samples stream by: what [`Summary`](crate::Summary) does not split
/// out (refusals and their latency, answers vs no answers, the time series).
#[derive(Debug)]
pub(super) struct Tally {
    pub(super) planned: u64,
    pub(super) ok: u64,
    pub(super) met: u64,
    /// 200s whose server-reported time in the node (queueing + execution) is within the
    /// deadline: the node's part of the promise, without the network and the client.
    pub(super) server_met: u64,
    pub(super) refused: u64,
    /// Answers other than 200 and refusals (a kill, a trap, …).
    pub(super) other_answers: u64,
    pub(super) timeouts: u64,
    pub(super) unsent: u64,
    /// Local failures: send, connect, transport.
    pub(super) local: u64,
    /// Failures by label.
    pub(super) kinds: BTreeMap<String, u64>,
    /// Latency of the refusals (ns), measured by the client from the intended send time.
    pub(super) refusal_ns: Histogram<u64>,
    /// Time of the refusals in the node (ns), as the node reports it (queueing + execution).
    pub(super) refusal_server_ns: Histogram<u64>,
    /// Sum and count of the server-reported executions of the 200s.
    pub(super) execution_ns: (u128, u64),
    pub(super) bins: Option<Bins>,
}

/// Per-[`BIN_NS`] counts: arrivals by intended time, 200s within their deadline and refusals by
/// answer time.
#[derive(Debug, Default, Clone)]
pub(super) struct Bins {
    pub(super) offered: Vec<u32>,
    pub(super) met: Vec<u32>,
    pub(super) refused: Vec<u32>,
}

pub(super) fn bump(v: &mut Vec<u32>, at_ns: u64) {
    let i = usize::try_from(at_ns / BIN_NS).unwrap_or(usize::MAX);
    if i >= MAX_BINS {
        return;
    }
    if v.len() <= i {
        v.resize(i + 1, 0);
    }
    v[i] = v[i].saturating_add(1);
}

impl Tally {
    pub(super) fn new(bins: bool) -> Result<Self, BenchError> {
        // Bounded, so that `saturating_record` clamps rather than drops (an auto-resizing
        // histogram starts with a top of 2 and does not grow on a saturating record).
        let histogram = || {
            Histogram::new_with_bounds(1, TIMEOUT_NS, 3)
                .map_err(|e| BenchError::Scenario(format!("cannot make a histogram: {e}")))
        };
        let (refusal_ns, refusal_server_ns) = (histogram()?, histogram()?);
        Ok(Self {
            planned: 0,
            ok: 0,
            met: 0,
            server_met: 0,
            refused: 0,
            other_answers: 0,
            timeouts: 0,
            unsent: 0,
            local: 0,
            kinds: BTreeMap::new(),
            refusal_ns,
            refusal_server_ns,
            execution_ns: (0, 0),
            bins: bins.then(Bins::default),
        })
    }

    pub(super) fn record(&mut self, s: &Sample) {
        self.planned += 1;
        if let Some(b) = &mut self.bins {
            bump(&mut b.offered, s.intended_ns);
        }
        let answered_at = s.latency_ns.map(|l| s.intended_ns.saturating_add(l));
        let in_node = match (s.server_queueing_ns, s.server_execution_ns) {
            (None, None) => None,
            (q, e) => Some(q.unwrap_or(0).saturating_add(e.unwrap_or(0))),
        };
        match s.error {
            None if s.ok() => {
                self.ok += 1;
                if let Some(e) = s.server_execution_ns {
                    self.execution_ns.0 += u128::from(e);
                    self.execution_ns.1 += 1;
                }
                if in_node.is_some_and(|t| t <= s.deadline_ns) {
                    self.server_met += 1;
                }
                if s.met_deadline() {
                    self.met += 1;
                    if let (Some(b), Some(at)) = (&mut self.bins, answered_at) {
                        bump(&mut b.met, at);
                    }
                }
            }
            None => self.timeouts += 1,
            Some(e) => {
                *self.kinds.entry(e.label().into_owned()).or_default() += 1;
                if e.is_refusal() {
                    self.refused += 1;
                    if let Some(l) = s.latency_ns {
                        self.refusal_ns.saturating_record(l.max(1));
                    }
                    if let Some(t) = in_node {
                        self.refusal_server_ns.saturating_record(t.max(1));
                    }
                    if let (Some(b), Some(at)) = (&mut self.bins, answered_at) {
                        bump(&mut b.refused, at);
                    }
                } else if e.is_answer() {
                    self.other_answers += 1;
                } else {
                    match e {
                        ErrorKind::Timeout => self.timeouts += 1,
                        ErrorKind::Unsent => self.unsent += 1,
                        _ => self.local += 1,
                    }
                }
            }
        }
    }

    /// Requests sent and never answered: timeouts, and local send, connect or transport
    /// failures (a connection the node reset or refused leaves its request unanswered too).
    pub(super) fn unanswered(&self) -> u64 {
        self.timeouts + self.local
    }

    /// Requests the server answered (200, a refusal, or another status).
    pub(super) fn answered(&self) -> u64 {
        self.ok + self.refused + self.other_answers
    }

    pub(super) fn refusal_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.refusal_ns, q)
    }

    pub(super) fn refusal_server_us(&self, q: f64) -> Option<f64> {
        quantile_us(&self.refusal_server_ns, q)
    }

    pub(super) fn mean_execution_us(&self) -> Option<f64> {
        let (sum, n) = self.execution_ns;
        (n > 0).then(|| sum as f64 / n as f64 / 1e3)
    }

    pub(super) fn share(&self, n: u64) -> f64 {
        if self.planned == 0 { 0.0 } else { n as f64 / self.planned as f64 }
    }
}

pub(super) fn quantile_us(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1e3)
}

pub(super) fn lock(t: &Mutex<Option<Tally>>) -> MutexGuard<'_, Option<Tally>> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

/// `VmRSS` of this process around a measurement (KiB).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(super) struct Rss {
    pub(super) start_kib: Option<u64>,
    pub(super) peak_kib: Option<u64>,
    pub(super) end_kib: Option<u64>,
}

/// Runs `f` while a thread samples `VmRSS` every 10 ms.
pub(super) fn with_rss<T>(f: impl FnOnce() -> T) -> (T, Rss) {
    let stop = AtomicBool::new(false);
    let start_kib = rss_kib();
    std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut peak: Option<u64> = None;
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib());
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        });
        let out = f();
        stop.store(true, Ordering::Relaxed);
        let end_kib = rss_kib();
        let peak_kib = sampler.join().ok().flatten().max(end_kib).max(start_kib);
        (out, Rss { start_kib, peak_kib, end_kib })
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use luge_proto::Status;

    use super::*;

    fn sample(seq: u64, latency_us: Option<u64>, error: Option<ErrorKind>) -> Sample {
        Sample {
            seq,
            class: 0,
            intended_ns: seq * 1_000_000,
            sent_ns: Some(seq * 1_000_000),
            latency_ns: latency_us.map(|l| l * 1_000),
            error,
            server_execution_ns: latency_us.map(|_| 175_000),
            server_queueing_ns: None,
            server_readiness_ns: None,
            nominal_execution_ns: 175_000,
            deadline_ns: 100_000_000,
        }
    }

    #[test]
    fn the_tally_splits_answers_refusals_and_silence() {
        let mut t = Tally::new(true).unwrap();
        t.record(&sample(0, Some(500), None));
        t.record(&sample(1, Some(150_000), None)); // 200, but late
        t.record(&sample(2, Some(40), Some(ErrorKind::Status(Status::Overloaded))));
        t.record(&sample(3, Some(60), Some(ErrorKind::Shed)));
        t.record(&sample(4, Some(60), Some(ErrorKind::Status(Status::Killed))));
        t.record(&sample(5, None, Some(ErrorKind::Timeout)));
        t.record(&sample(6, None, Some(ErrorKind::Unsent)));
        t.record(&sample(7, None, Some(ErrorKind::Connect)));
        assert_eq!((t.planned, t.ok, t.met, t.refused), (8, 2, 1, 2));
        assert_eq!(t.server_met, 2, "in the node, both 200s took 175 µs");
        assert_eq!((t.other_answers, t.timeouts, t.unsent, t.local), (1, 1, 1, 1));
        assert_eq!(t.answered(), 5);
        assert_eq!(t.unanswered(), 2, "a timeout and a refused connection; not the unsent one");
        assert_eq!(t.kinds.get("shed"), Some(&1));
        let p50 = t.refusal_us(0.5).unwrap();
        assert!((40.0..=40.1).contains(&p50), "{p50}");
        let in_node = t.refusal_server_us(0.5).unwrap();
        assert!((175.0..=175.2).contains(&in_node), "{in_node}");
        assert!((t.mean_execution_us().unwrap() - 175.0).abs() < 1e-9);
        let b = t.bins.unwrap();
        // One arrival per ms: 8 in bin 0; the one met answer at 0.5 ms, in bin 0.
        assert_eq!((b.offered, b.met), (vec![8], vec![1]));
        assert_eq!(b.refused, vec![2]);
        assert_eq!(Tally::new(false).unwrap().refusal_us(0.5), None);
    }
}
