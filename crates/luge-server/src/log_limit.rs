//! Rate limits for log lines of repeated failures: a failure that repeats (a socket error on
//! every receive, a send the kernel refuses under load, a runtime failing every request, an
//! `accept` out of descriptors under a connection flood) must
//! not turn into thousands of identical lines a second, which cost the node more than the
//! failure and bury everything else in the log.
//!
//! Each [`LogKind`] may write [`LINES_PER_SEC`] lines a second; the rest are dropped and
//! counted (`luge_log_lines_suppressed_total{kind}` in /metrics), and the next line that is
//! written is preceded by one line `suppressed K similar messages`. Only lines whose level is
//! enabled count: a debug line nobody asked for is neither written nor "suppressed".
//!
//! Guest stderr is limited the same way by the runtime (`luge_runtime::stderr_lines_suppressed`,
//! reported as `kind="guest_stderr"`).
//!
//! Use [`log_limited!`]:
//! `log_limited!(LogKind::UdpReceive, tracing::Level::WARN, "udp: recvmmsg failed: {e}")`.
//! Process-wide and lock-free (a [`LineLimit`] per kind).

use std::sync::OnceLock;

use luge_runtime::LineLimit;

/// Lines of one kind written per second at most.
pub(crate) const LINES_PER_SEC: u32 = 10;

/// A kind of repeated failure, limited separately from the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum LogKind {
    /// The UDP receive call failed.
    UdpReceive,
    /// The kernel refused to send a UDP reply.
    UdpSend,
    /// A request failed inside the node (`Failure::Internal`).
    Internal,
    /// Accepting a TCP connection failed (e.g. out of descriptors under a connection flood).
    Accept,
}

impl LogKind {
    /// Every kind, in the order of [`LIMITS`].
    pub(crate) const ALL: [LogKind; 4] =
        [LogKind::UdpReceive, LogKind::UdpSend, LogKind::Internal, LogKind::Accept];

    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            LogKind::UdpReceive => "udp_receive",
            LogKind::UdpSend => "udp_send",
            LogKind::Internal => "internal",
            LogKind::Accept => "accept",
        }
    }
}

static LIMITS: [LineLimit; LogKind::ALL.len()] = [const { LineLimit::new() }; LogKind::ALL.len()];

/// Whether a line of `kind` may be written now: `Some(k)` if so, `k` being the lines
/// suppressed since the last one written (to report first); `None` if it is suppressed.
/// Called by [`log_limited!`] only when the line's level is enabled.
pub(crate) fn admit(kind: LogKind) -> Option<u64> {
    LIMITS[kind as usize].admit(LINES_PER_SEC)
}

/// What counts the log lines the process's log writer dropped because its output blocked
/// ([`count_log_backlog_drops`]).
static BACKLOG_DROPS: OnceLock<Box<dyn Fn() -> u64 + Send + Sync>> = OnceLock::new();

/// Tells the node how many log lines the process's writer has dropped so far because its output
/// (stderr: a full pipe, a slow log agent) did not keep up — `luge serve` writes its log from a
/// thread of its own with a bounded backlog, so that no worker ever blocks on a log line. Shown
/// as `luge_log_lines_suppressed_total{kind="backlog"}`. The first call wins.
pub fn count_log_backlog_drops(dropped: impl Fn() -> u64 + Send + Sync + 'static) {
    let _ = BACKLOG_DROPS.set(Box::new(dropped));
}

/// Log lines the process's writer dropped so far (0 if nothing counts them).
pub(crate) fn backlog_drops() -> u64 {
    BACKLOG_DROPS.get().map_or(0, |dropped| dropped())
}

/// Lines of `kind` suppressed so far (process-wide).
pub(crate) fn suppressed(kind: LogKind) -> u64 {
    LIMITS[kind as usize].suppressed()
}

/// Writes a `tracing` event at `$level` (a `tracing::Level` constant) unless lines of `$kind`
/// ([`LogKind`]) are over their rate; see the module doc.
macro_rules! log_limited {
    ($kind:expr, $level:expr, $($arg:tt)+) => {
        if ::tracing::enabled!($level) {
            let kind: $crate::log_limit::LogKind = $kind;
            if let Some(skipped) = $crate::log_limit::admit(kind) {
                if skipped > 0 {
                    ::tracing::event!(
                        $level,
                        kind = kind.label(),
                        suppressed = skipped,
                        "suppressed {skipped} similar messages"
                    );
                }
                ::tracing::event!($level, $($arg)+);
            }
        }
    };
}
pub(crate) use log_limited;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_quota_and_label() {
        let labels: std::collections::HashSet<_> = LogKind::ALL.iter().map(|k| k.label()).collect();
        assert_eq!(labels.len(), LogKind::ALL.len());
        assert!(labels.contains("accept"));
        // Accept failures (a connection flood out of descriptors) are limited like the rest.
        let kind = LogKind::Accept;
        let before = suppressed(kind);
        let written = (0..100).filter(|_| admit(kind).is_some()).count();
        assert!(written <= 2 * LINES_PER_SEC as usize, "{written} written");
        assert_eq!(suppressed(kind) - before, (100 - written) as u64);
    }

    #[test]
    fn a_flood_writes_its_quota_then_counts() {
        // Process-wide state: use one kind no other unit test logs.
        let kind = LogKind::UdpReceive;
        let before = suppressed(kind);
        let admitted: Vec<_> = (0..1000).map(|_| admit(kind)).collect();
        let written = admitted.iter().filter(|a| a.is_some()).count();
        // At most two windows' worth if the second turned over during the loop.
        assert!((1..=2 * LINES_PER_SEC as usize).contains(&written), "{written} written");
        assert_eq!(suppressed(kind) - before, (1000 - written) as u64);
        // The next line in a new window reports what was skipped.
        std::thread::sleep(std::time::Duration::from_millis(1_050));
        let reported = admit(kind).unwrap_or_default();
        assert!(reported > 0, "the suppressed lines are reported with the next line");
    }
}
