//! The book of requests in flight, shared by the sender (pacer) and whoever receives responses
//! (the UDP receiver thread, or the HTTP receiver threads).
//!
//! It owns the window (at most `window` requests in flight: the sender blocks for a slot), the
//! per-request timeout (a request unanswered `timeout` after it was *sent* is recorded as
//! [`ErrorKind::Timeout`] and frees its slot, so a lost datagram cannot shrink the window for
//! good), and the [`Recorder`] (plus the run's [`SampleObserver`], if any, which sees each
//! sample as it is recorded). Times are ns since `start`, one monotonic clock for everyone.
//!
//! One mutex guards the pending map and the recorder; it is held for a map operation and a few
//! histogram increments. The condition variable is signalled only when the sender is waiting
//! on it, so the common path makes no futex call.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::calibrate::Reply;
use crate::plan::Planned;
use crate::sample::{ErrorKind, Sample, SampleObserver};
use crate::summary::Recorder;

/// How often timeouts are looked for (ns).
const REAP_EVERY_NS: u64 = 10_000_000;

#[derive(Debug, Clone, Copy)]
struct Pending {
    class: u16,
    intended_ns: u64,
    sent_ns: u64,
    deadline_ns: u64,
    nominal_ns: u64,
}

#[derive(Debug)]
struct State {
    pending: HashMap<u64, Pending>,
    waiting: bool,
    recorder: Recorder,
    stray: u64,
    max_pending: usize,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Ledger {
    start: Instant,
    window: usize,
    timeout_ns: u64,
    state: Mutex<State>,
    freed: Condvar,
    last_reap_ns: AtomicU64,
    observer: Option<SampleObserver>,
    /// Requests sent so far (for the progress line).
    pub sent: AtomicU64,
    /// Successes so far.
    pub ok: AtomicU64,
    /// Failures so far.
    pub failed: AtomicU64,
}

impl Ledger {
    pub(crate) fn new(
        window: usize,
        timeout: Duration,
        keep_samples: bool,
        observer: Option<SampleObserver>,
    ) -> Self {
        Self {
            start: Instant::now(),
            window: window.max(1),
            timeout_ns: luge_proto::nanos(timeout),
            state: Mutex::new(State {
                pending: HashMap::with_capacity(window.clamp(1, 1 << 16)),
                waiting: false,
                recorder: Recorder::new(keep_samples),
                stray: 0,
                max_pending: 0,
            }),
            freed: Condvar::new(),
            last_reap_ns: AtomicU64::new(0),
            observer,
            sent: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Now, in ns since the start of the run.
    pub(crate) fn now_ns(&self) -> u64 {
        luge_proto::nanos(self.start.elapsed())
    }

    pub(crate) fn timeout_ns(&self) -> u64 {
        self.timeout_ns
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves consistent data (plain inserts and
        // removals), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Requests in flight.
    pub(crate) fn in_flight(&self) -> usize {
        self.lock().pending.len()
    }

    /// Blocks until fewer than `window` requests are in flight (true), or `until_ns` passes
    /// (false). Looks for timeouts while it waits.
    pub(crate) fn wait_for_slot(&self, until_ns: u64) -> bool {
        self.wait_while(until_ns, |s, window| s.pending.len() >= window)
    }

    /// Blocks until nothing is in flight or `until_ns` passes.
    pub(crate) fn wait_drained(&self, until_ns: u64) {
        self.wait_while(until_ns, |s, _| !s.pending.is_empty());
    }

    fn wait_while(&self, until_ns: u64, blocked: impl Fn(&State, usize) -> bool) -> bool {
        let mut state = self.lock();
        loop {
            let now = self.now_ns();
            self.reap_locked(&mut state, now);
            if !blocked(&state, self.window) {
                state.waiting = false;
                return true;
            }
            if now >= until_ns {
                state.waiting = false;
                return false;
            }
            state.waiting = true;
            let wait = Duration::from_nanos((until_ns - now).min(REAP_EVERY_NS));
            state = match self.freed.wait_timeout(state, wait) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
    }

    /// Records that request `seq` is about to be sent (call *before* the send: the answer may
    /// come back before the send call returns).
    pub(crate) fn begin(&self, p: &Planned, intended_ns: u64, sent_ns: u64) {
        let pending = Pending {
            class: p.class,
            intended_ns,
            sent_ns,
            deadline_ns: p.deadline_ns,
            nominal_ns: p.execution_ns,
        };
        let mut state = self.lock();
        state.pending.insert(p.seq, pending);
        state.max_pending = state.max_pending.max(state.pending.len());
        drop(state);
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Request `seq` is written at `sent_ns`, later than [`begin`](Self::begin) said: its
    /// transport waited for a connection (or opened one) first. Its send lag counts the wait.
    pub(crate) fn written(&self, seq: u64, sent_ns: u64) {
        if let Some(p) = self.lock().pending.get_mut(&seq) {
            p.sent_ns = p.sent_ns.max(sent_ns);
        }
    }

    /// The response to `seq` arrived at `recv_ns`. False if `seq` was not in flight (a stray or
    /// late answer, counted).
    pub(crate) fn complete(&self, seq: u64, recv_ns: u64, reply: Reply) -> bool {
        let mut state = self.lock();
        let Some(p) = state.pending.remove(&seq) else {
            state.stray += 1;
            return false;
        };
        let sample = Sample {
            seq,
            class: p.class,
            intended_ns: p.intended_ns,
            sent_ns: Some(p.sent_ns),
            latency_ns: Some(recv_ns.saturating_sub(p.intended_ns)),
            error: reply.error,
            server_execution_ns: reply.execution_ns,
            server_queueing_ns: reply.queueing_ns,
            server_readiness_ns: reply.readiness_ns,
            nominal_execution_ns: p.nominal_ns,
            deadline_ns: p.deadline_ns,
        };
        self.record_locked(&mut state, sample);
        true
    }

    /// A datagram that answers none of our requests.
    pub(crate) fn stray(&self) {
        self.lock().stray += 1;
    }

    /// The send of `seq` failed (`Send`, `Connect`): no response will come, and the request
    /// never reached a socket — it is not counted as sent, nor in the send lag.
    pub(crate) fn fail(&self, seq: u64, kind: ErrorKind) {
        self.end_unanswered(seq, kind, false);
    }

    /// The connection `seq` was sent on broke before its answer (`Transport`): no response, so no
    /// latency; nothing if it was answered or timed out already (not a stray: nothing arrived).
    pub(crate) fn lost(&self, seq: u64, kind: ErrorKind) {
        self.end_unanswered(seq, kind, true);
    }

    /// Records `seq`, if still in flight, as ended without an answer (`kind`); `sent`: it
    /// reached a socket.
    fn end_unanswered(&self, seq: u64, kind: ErrorKind, sent: bool) {
        let mut state = self.lock();
        if let Some(p) = state.pending.remove(&seq) {
            let sample = Self::unanswered(seq, &p, kind);
            let sample = Sample { sent_ns: sample.sent_ns.filter(|_| sent), ..sample };
            self.record_locked(&mut state, sample);
        }
    }

    /// A planned request that was never sent.
    pub(crate) fn unsent(&self, p: &Planned, intended_ns: u64) {
        let sample = Sample {
            seq: p.seq,
            class: p.class,
            intended_ns,
            sent_ns: None,
            latency_ns: None,
            error: Some(ErrorKind::Unsent),
            server_execution_ns: None,
            server_queueing_ns: None,
            server_readiness_ns: None,
            nominal_execution_ns: p.execution_ns,
            deadline_ns: p.deadline_ns,
        };
        let mut state = self.lock();
        self.record_locked(&mut state, sample);
    }

    /// Looks for timeouts if none was done for a while (cheap when not due).
    pub(crate) fn maybe_reap(&self, now_ns: u64) {
        if now_ns >= self.last_reap_ns.load(Ordering::Relaxed) + REAP_EVERY_NS {
            let mut state = self.lock();
            self.reap_locked(&mut state, now_ns);
        }
    }

    /// Records every request still in flight as a timeout (the end of the drain).
    pub(crate) fn expire_all(&self) {
        let mut state = self.lock();
        let all: Vec<(u64, Pending)> = state.pending.drain().collect();
        for (seq, p) in all {
            self.record_locked(&mut state, Self::unanswered(seq, &p, ErrorKind::Timeout));
        }
    }

    fn reap_locked(&self, state: &mut State, now_ns: u64) {
        if now_ns < self.last_reap_ns.load(Ordering::Relaxed) + REAP_EVERY_NS {
            return;
        }
        self.last_reap_ns.store(now_ns, Ordering::Relaxed);
        let cutoff = now_ns.saturating_sub(self.timeout_ns);
        let expired: Vec<u64> =
            state.pending.iter().filter(|(_, p)| p.sent_ns < cutoff).map(|(&seq, _)| seq).collect();
        for seq in expired {
            if let Some(p) = state.pending.remove(&seq) {
                self.record_locked(state, Self::unanswered(seq, &p, ErrorKind::Timeout));
            }
        }
    }

    fn unanswered(seq: u64, p: &Pending, kind: ErrorKind) -> Sample {
        Sample {
            seq,
            class: p.class,
            intended_ns: p.intended_ns,
            sent_ns: Some(p.sent_ns),
            latency_ns: None,
            error: Some(kind),
            server_execution_ns: None,
            server_queueing_ns: None,
            server_readiness_ns: None,
            nominal_execution_ns: p.nominal_ns,
            deadline_ns: p.deadline_ns,
        }
    }

    fn record_locked(&self, state: &mut State, sample: Sample) {
        if sample.ok() {
            self.ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(o) = &self.observer {
            o.observe(&sample);
        }
        state.recorder.record(sample);
        if state.waiting {
            self.freed.notify_one();
        }
    }

    /// The recorder, the count of stray responses and the most requests ever in flight.
    /// Takes the recorder out (leaving an empty one): call once, after everything stopped.
    pub(crate) fn finish(&self) -> (Recorder, u64, usize) {
        let mut state = self.lock();
        let recorder = std::mem::replace(&mut state.recorder, Recorder::new(false));
        (recorder, state.stray, state.max_pending)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use crate::plan::PlannedPayload;

    #[test]
    fn a_request_written_after_a_wait_for_its_connection_lags_by_it() {
        let ledger = Ledger::new(4, Duration::from_secs(1), true, None);
        let p = Planned {
            seq: 7,
            offset_ns: 100,
            function: 0,
            class: 0,
            payload: PlannedPayload::Fixed(0),
            deadline_ns: 1_000_000,
            execution_ns: 10_000,
        };
        ledger.begin(&p, 100, 150);
        ledger.written(7, 40_150); // 40 µs opening a connection
        ledger.written(7, 200); // never earlier than it was
        let reply =
            Reply { error: None, execution_ns: None, queueing_ns: None, readiness_ns: None };
        assert!(ledger.complete(7, 90_000, reply));
        let (recorder, _, _) = ledger.finish();
        let (summary, samples) = recorder.finish(|_| None);
        assert_eq!(samples[0].sent_ns, Some(40_150));
        let lag = summary.send_lag_us.max.unwrap();
        assert!((lag - 40.05).abs() < 0.1, "a lag of {lag} µs (the histogram's precision)");
    }
}
