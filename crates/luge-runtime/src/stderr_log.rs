//! The log of what guests write to stderr, bounded: a guest controls its stderr, so a function
//! that writes on every request must not make the node write a log line for every request.
//!
//! Each request's stderr is kept up to `wasi::STDERR_KEPT` bytes (the rest is only counted, in
//! the line's "… (N more bytes dropped)"). Lines are written at `INFO` at most
//! [`LINES_PER_SEC`] a second over the whole process; the others are dropped and counted
//! ([`stderr_lines_suppressed`], which the server reports as
//! `luge_log_lines_suppressed_total{kind="guest_stderr"}`), and the next line written is
//! preceded by one line saying how many were dropped. Only lines whose level is enabled count.
//! Lock-free ([`LineLimit`]), shared by every worker.

use crate::line_limit::LineLimit;

/// Lines of guest stderr written per second at most (over all functions and workers).
pub(crate) const LINES_PER_SEC: u32 = 10;

/// The limit every worker's guest stderr shares.
static LIMIT: LineLimit = LineLimit::new();

/// Lines of guest stderr dropped by the rate limit since the process started.
pub fn stderr_lines_suppressed() -> u64 {
    LIMIT.suppressed()
}

/// Whether a line may be written now: `Some(k)`, `k` being the lines dropped since the last
/// one written, or `None` (dropped and counted).
fn admit() -> Option<u64> {
    LIMIT.admit(LINES_PER_SEC)
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
