//! Stopping a runtime: refuse new work, let what is in flight finish within the grace period,
//! join every thread — from a thread of its own when the shutdown is asked for (or the last
//! handle dropped) on one of the runtime's threads ([`Runtime::shutdown_within`], `Drop`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
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
