//! The log of what guests write to stderr, bounded: a guest controls its stderr, so a function
//! that writes on every request must not make the node write a log line for every request.
//!
//! Each request's stderr is kept up to `wasi::STDERR_KEPT` bytes (the rest is only counted, in
//! the line's "… (N more bytes dropped)"). Lines are written at `INFO` at most
//! [`LINES_PER_SEC`] a second over the whole process; the others are dropped and counted
//! ([`stderr_lines_suppressed`], which the server reports as
//! `luge_log_lines_suppressed_total{kind="guest_stderr"}`), and the next line written is
//! preceded by one line saying how many were dropped. Only lines whose level is enabled count.
//! Lock-free: three relaxed atomics, shared by every worker.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

/// Lines of guest stderr written per second at most (over all functions and workers).
pub(crate) const LINES_PER_SEC: u32 = 10;

/// The second (since [`epoch`]) that [`WRITTEN`] counts lines for.
static WINDOW: AtomicU64 = AtomicU64::new(0);
/// Lines written in that second.
static WRITTEN: AtomicU32 = AtomicU32::new(0);
/// Lines dropped since the last one written.
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Lines dropped in all.
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Lines of guest stderr dropped by the rate limit since the process started.
pub fn stderr_lines_suppressed() -> u64 {
    SUPPRESSED.load(Ordering::Relaxed)
}

/// Whether a line may be written now: `Some(k)`, `k` being the lines dropped since the last
/// one written, or `None` (dropped and counted).
fn admit() -> Option<u64> {
    let second = epoch().elapsed().as_secs();
    let window = WINDOW.load(Ordering::Relaxed);
    if second != window
        && WINDOW.compare_exchange(window, second, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    {
        WRITTEN.store(0, Ordering::Relaxed);
    }
    if WRITTEN.fetch_add(1, Ordering::Relaxed) < LINES_PER_SEC {
        Some(PENDING.swap(0, Ordering::Relaxed))
    } else {
        // Saturate rather than wrap under a flood that lasts for ages.
        WRITTEN.store(LINES_PER_SEC, Ordering::Relaxed);
        PENDING.fetch_add(1, Ordering::Relaxed);
        SUPPRESSED.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Logs the stderr `text` of request `request_id` to `function`, within the rate limit.
pub(crate) fn log_stderr(request_id: u64, function: &str, text: &str) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let Some(skipped) = admit() else { return };
    if skipped > 0 {
        tracing::info!(
            suppressed = skipped,
            "stderr: {skipped} more lines of guest stderr dropped"
        );
    }
    tracing::info!(request_id, function, "stderr: {text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_its_quota_then_counts() {
        let before = stderr_lines_suppressed();
        let admitted: Vec<_> = (0..1000).map(|_| admit()).collect();
        let written = admitted.iter().filter(|a| a.is_some()).count();
        // At most two windows' worth if the second turned over during the loop.
        assert!((1..=2 * LINES_PER_SEC as usize).contains(&written), "{written} written");
        assert!(stderr_lines_suppressed() - before >= (1000 - written) as u64);
        std::thread::sleep(std::time::Duration::from_millis(1_050));
        assert!(admit().unwrap_or_default() > 0, "the next line reports the dropped ones");
    }
}
