//! Delivering the one answer of a request: a callback run exactly once, and a [`Ticket`] built
//! on it that can be awaited or waited for.
//!
//! A [`Reply`] that is dropped without being sent (a bug, or a thread that died) still answers,
//! with an internal error: no request is ever lost silently. A callback that panics is caught
//! and logged: the runtime's thread that ran it goes on.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::outcome::{Failure, Outcome, Timing};

type Callback = Box<dyn FnOnce(Outcome) + Send>;

/// The answer channel of one request.
pub(crate) struct Reply {
    request_id: u64,
    callback: Option<Callback>,
}

impl Reply {
    pub(crate) fn new(request_id: u64, callback: Callback) -> Self {
        Self { request_id, callback: Some(callback) }
    }

    /// Sends the outcome (at most once; later calls are impossible because `self` is consumed).
    pub(crate) fn send(mut self, outcome: Outcome) {
        if let Some(callback) = self.callback.take() {
            deliver(self.request_id, callback, outcome);
        }
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        if let Some(callback) = self.callback.take() {
            let failure = Failure::Internal("request dropped by the runtime".into());
            let outcome = Outcome::new(self.request_id, Err(failure), Timing::default());
            deliver(self.request_id, callback, outcome);
        }
    }
}

/// Runs `callback` — the embedder's code, on a runtime thread — so that a panic in it stays
/// there: unwinding would end the worker or dispatcher between answering a request and telling
/// the dispatcher it ended, stranding the requests queued behind it and every later shutdown.
fn deliver(request_id: u64, callback: Callback, outcome: Outcome) {
    // Unwind safety: the callback is consumed either way, and the runtime's own state is not
    // in its reach — only what the embedder shared with it, which is the embedder's to judge.
    if catch_unwind(AssertUnwindSafe(move || callback(outcome))).is_err() {
        tracing::error!(request_id, "a request's answer callback panicked");
    }
}

#[derive(Default)]
struct Slot {
    outcome: Option<Outcome>,
    waker: Option<Waker>,
}

/// A pending outcome: `.await` it, or [`Ticket::wait`] for it on a plain thread. Not `Clone`:
/// the outcome is taken once and one waker is kept, so a second holder would wait forever.
pub struct Ticket {
    shared: Arc<(Mutex<Slot>, Condvar)>,
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").finish_non_exhaustive()
    }
}

impl Ticket {
    pub(crate) fn new() -> (Self, impl FnOnce(Outcome) + Send + 'static) {
        let shared = Arc::new((Mutex::new(Slot::default()), Condvar::new()));
        let filler = Arc::clone(&shared);
        let fill = move |outcome: Outcome| {
            let (lock, cvar) = &*filler;
            let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
            slot.outcome = Some(outcome);
            if let Some(w) = slot.waker.take() {
                w.wake();
            }
            cvar.notify_all();
        };
        (Self { shared }, fill)
    }

    /// Blocks until the outcome arrives.
    pub fn wait(self) -> Outcome {
        let (lock, cvar) = &*self.shared;
        let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(outcome) = slot.outcome.take() {
                return outcome;
            }
            slot = cvar.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Blocks until the outcome arrives or `timeout` passes (then gives the ticket back).
    pub fn wait_timeout(self, timeout: Duration) -> Result<Outcome, Ticket> {
        let (lock, cvar) = &*self.shared;
        let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
        let deadline = luge_proto::instant_after(std::time::Instant::now(), timeout);
        loop {
            if let Some(outcome) = slot.outcome.take() {
                return Ok(outcome);
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                drop(slot);
                return Err(self);
            }
            slot = cvar.wait_timeout(slot, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

impl Future for Ticket {
    type Output = Outcome;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome> {
        let (lock, _) = &*self.shared;
        let mut slot = lock.lock().unwrap_or_else(|p| p.into_inner());
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
