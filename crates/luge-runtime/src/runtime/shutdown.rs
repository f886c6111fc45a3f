//! Stopping a runtime: refuse new work, let what is in flight finish within the grace period,
//! join every thread — from a thread of its own when the shutdown is asked for (or the last
//! handle dropped) on one of the runtime's threads ([`Runtime::shutdown_within`], `Drop`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;

use luge_proto::nanos;

use super::{Inner, Runtime};

/// Stops `inner`'s runtime and joins its `threads` (the last one the ticker):
/// [`Runtime::shutdown_within`].
pub(super) fn shut_down(inner: &Inner, mut threads: Vec<JoinHandle<()>>, grace: Duration) {
    inner.accepting.store(false, Ordering::SeqCst);
    while inner.submitting.load(Ordering::SeqCst) > 0 {
        std::thread::yield_now();
    }
    for g in &inner.groups {
        g.grace_ns.store(nanos(grace).min(u64::MAX - 1), Ordering::Release);
        g.shutdown.store(true, Ordering::Release);
        g.notify.notify();
    }
    // Ticker last: sandboxes aborted after the grace period stop at its next tick.
    let ticker = threads.pop();
    for t in threads.drain(..) {
        if t.join().is_err() {
            tracing::error!("a runtime thread panicked");
        }
    }
    inner.ticker_stop.store(true, Ordering::Release);
    if let Some(t) = ticker
        && t.join().is_err()
    {
        tracing::error!("the ticker thread panicked");
    }
    let violation = inner.signals.contract_violation.get();
    debug_assert!(violation.is_none(), "a dispatcher broke the policy contract: {violation:?}");
}

impl Runtime {
    /// Stops accepting, lets everything in flight finish within the grace period (then kills
    /// what still runs and refuses what still waits), and joins every thread. Every submitted
    /// request has been answered when this returns. Idempotent.
    pub fn shutdown(&self) {
        self.shutdown_within(self.inner.config.shutdown_grace);
    }

    /// [`shutdown`](Self::shutdown), with `grace` instead of the configured grace period: what
    /// a caller that has already spent part of its own grace (`luge_server::Node`) leaves.
    ///
    /// Called on one of the runtime's own threads (in a completion callback), it cannot wait
    /// for the threads to end — that thread is one of them, and its dispatcher waits for the
    /// callback to return: the shutdown then runs on a thread of its own and this returns at
    /// once.
    pub fn shutdown_within(&self, grace: Duration) {
        if super::RUNTIME_THREAD.get() {
            let mut threads = match self.threads.try_lock() {
                Ok(threads) => threads,
                Err(TryLockError::Poisoned(p)) => p.into_inner(),
                // Another caller holds it while it joins the threads: a shutdown is under way.
                Err(TryLockError::WouldBlock) => return,
            };
            if !threads.is_empty() {
                let apart = shut_down_apart(&self.inner, std::mem::take(&mut *threads), grace);
                *self.apart.lock().unwrap_or_else(|p| p.into_inner()) = apart;
            }
            return;
        }
        // Held until the threads are joined: a second caller returns when they are.
        let mut threads = self.threads.lock().unwrap_or_else(|p| p.into_inner());
        if threads.is_empty() {
            // Already shut down, or under way on a thread of its own: wait for that one.
            let apart = self.apart.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(apart) = apart
                && apart.join().is_err()
            {
                tracing::error!("the shutdown thread panicked");
            }
            return;
        }
        shut_down(&self.inner, std::mem::take(&mut *threads), grace);
    }
}

impl Drop for Runtime {
    /// Shuts down. On one of the runtime's own threads — the last handle dropped in a
    /// completion callback, e.g. by a chain in flight when its caller let go of the runtime —
    /// that thread cannot join itself, nor wait for the dispatcher that waits for it: the
    /// shutdown then runs on a thread of its own, and this thread goes back to its loop and ends
    /// there.
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// [`shut_down`] on a thread of its own, for a caller on one of the runtime's threads: it
/// cannot join itself, nor wait for the dispatcher that waits for it to finish its callback.
pub(super) fn shut_down_apart(
    inner: &Arc<Inner>,
    threads: Vec<JoinHandle<()>>,
    grace: Duration,
) -> Option<JoinHandle<()>> {
    let inner = Arc::clone(inner);
    let spawned = std::thread::Builder::new()
        .name("luge-shutdown".into())
        .spawn(move || shut_down(&inner, threads, grace));
    spawned.map_err(|e| tracing::error!("cannot start a thread to shut the runtime down: {e}")).ok()
}
