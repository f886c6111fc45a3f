//! The log of what guests write to stderr, bounded: a guest controls its stderr, so a function
//! that writes on every request must not make the node write a log line for every request, nor
//! silence another tenant's.
//!
//! Each request's stderr is kept up to `wasi::STDERR_KEPT` bytes (the rest is only counted, in
//! the line's "… (N more bytes dropped)"). Lines are written at `INFO` at most
//! [`PER_FUNCTION_PER_SEC`] a second per function and [`LINES_PER_SEC`] over the whole process;
//! the others are dropped and counted ([`stderr_lines_suppressed`], which the server reports as
//! `luge_log_lines_suppressed_total{kind="guest_stderr"}`), and the next line written is
//! preceded by one line saying how many were dropped (of the function's, and of all). Only
//! lines whose level is enabled count. Lock-free ([`LineLimit`]), shared by every worker.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::line_limit::LineLimit;
use crate::registry::Function;

/// Lines of one function's guest stderr written per second at most.
pub(crate) const PER_FUNCTION_PER_SEC: u32 = 10;

/// Lines of guest stderr written per second at most, over all functions and workers.
pub(crate) const LINES_PER_SEC: u32 = 100;

/// The limit every function's guest stderr shares.
static LIMIT: LineLimit = LineLimit::new();

/// Lines dropped by either limit.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Lines of guest stderr dropped by the rate limits since the process started.
pub fn stderr_lines_suppressed() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// Whether a line of `function`'s may be written now: `Some((k, n))`, `k` being its own lines
/// and `n` all lines dropped since the last one written of each, or `None` (dropped, counted).
/// The function's own limit is asked first, so that its excess takes nothing from the others.
fn admit(function: &LineLimit) -> Option<(u64, u64)> {
    admit_within(&LIMIT, function)
}

/// [`admit`] under the process-wide limit `all`.
fn admit_within(all: &LineLimit, function: &LineLimit) -> Option<(u64, u64)> {
    let admitted = function
        .admit(PER_FUNCTION_PER_SEC)
        .and_then(|own| all.admit(LINES_PER_SEC).map(|all| (own, all)));
    if admitted.is_none() {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
    admitted
}

/// Logs the stderr `text` of request `request_id` to `function`, within the rate limits.
pub(crate) fn log_stderr(request_id: u64, function: &Function, text: &str) {
    if !tracing::enabled!(tracing::Level::INFO) {
        return;
    }
    let name = function.config.name.as_str();
    let Some((own, all)) = admit(&function.stderr) else { return };
    if own > 0 {
        tracing::info!(
            function = name,
            suppressed = own,
            "stderr: {own} more lines of this function's stderr dropped"
        );
    }
    if all > 0 {
        tracing::info!(suppressed = all, "stderr: {all} more lines of guest stderr dropped");
    }
    tracing::info!(request_id, function = name, "stderr: {text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_writes_its_quota_then_counts() {
        let before = stderr_lines_suppressed();
        let (all, noisy) = (LineLimit::new(), LineLimit::new());
        let admitted: Vec<_> = (0..1000).map(|_| admit_within(&all, &noisy)).collect();
        let written = admitted.iter().filter(|a| a.is_some()).count();
        // At most two windows' worth if the second turned over during the loop.
        assert!((1..=2 * PER_FUNCTION_PER_SEC as usize).contains(&written), "{written} written");
        assert!(stderr_lines_suppressed() - before >= (1000 - written) as u64);
        // Another function still writes: the flood spent its own quota, not the process's.
        let quiet = LineLimit::new();
        assert!(admit_within(&all, &quiet).is_some(), "one function's flood silenced another");
        std::thread::sleep(std::time::Duration::from_millis(1_050));
        let (own, _) = admit_within(&all, &noisy).unwrap_or_default();
        assert!(own > 0, "the next line reports the function's dropped ones");
    }

    #[test]
    fn the_process_writes_at_most_its_quota_over_all_functions() {
        let all = LineLimit::new();
        let functions: Vec<LineLimit> = (0..40).map(|_| LineLimit::new()).collect();
        // 400 lines, 10 per function (each within its own quota): the process's quota holds.
        let written = (0..PER_FUNCTION_PER_SEC)
            .flat_map(|_| functions.iter())
            .filter(|f| admit_within(&all, f).is_some())
            .count();
        assert!(written <= 2 * LINES_PER_SEC as usize, "{written} written");
        assert!(written >= LINES_PER_SEC as usize, "{written} written");
    }
}
