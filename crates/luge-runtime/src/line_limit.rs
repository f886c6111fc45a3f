//! A rate limit for log lines, shared by the runtime's guest-stderr log and the front ends'
//! logs of repeated failures: at most N lines a second, the rest dropped and counted, and the
//! next line written told how many were dropped before it. Lock-free: the second and the count
//! of lines written in it are one atomic word, updated with one compare-and-swap, so that a
//! thread still counting in the old second can never undo another's move to the new one.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// One stream of log lines' limit.
#[derive(Debug)]
pub struct LineLimit {
    /// The second (since the process's first use of a limit) in the high 32 bits, the lines
    /// written in it in the low 32.
    window: AtomicU64,
    /// Lines dropped since the last line written.
    pending: AtomicU64,
    /// Lines dropped in all.
    suppressed: AtomicU64,
}

impl Default for LineLimit {
    fn default() -> Self {
        Self::new()
    }
}

impl LineLimit {
    /// A limit that has written nothing.
    pub const fn new() -> Self {
        Self {
            window: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now, at most `per_second` a second: `Some(k)` if so, `k`
    /// being the lines dropped since the last one written (to report first); `None` if it is
    /// dropped (and counted).
    pub fn admit(&self, per_second: u32) -> Option<u64> {
        self.admit_at(second(), per_second)
    }

    /// [`admit`](Self::admit) in second `now` (since the process's first use of a limit).
    fn admit_at(&self, now: u64, per_second: u32) -> Option<u64> {
        let mut written = false;
        let _ = self.window.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
            let (second, count) = (word >> 32, word & u64::from(u32::MAX));
            // A thread that read the clock before another moved the window on counts in the
            // newer second: the window never goes back.
            let (second, count) = if now > second { (now, 0) } else { (second, count) };
            written = count < u64::from(per_second);
            Some((second << 32) | if written { count + 1 } else { count })
        });
        if written {
            Some(self.pending.swap(0, Ordering::Relaxed))
        } else {
            self.pending.fetch_add(1, Ordering::Relaxed);
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            None
        }
    }

    /// Lines dropped so far.
    pub fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }
}

/// Seconds since the process first used a limit (fits the window's 32 bits for 136 years).
fn second() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs() & u64::from(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_second_writes_its_quota_and_reports_what_it_dropped() {
        let limit = LineLimit::new();
        let in_first: Vec<_> = (0..15).map(|_| limit.admit_at(7, 10)).collect();
        assert_eq!(in_first.iter().filter(|a| a.is_some()).count(), 10);
        assert_eq!(limit.suppressed(), 5);
        // The next second: the first line written reports the five dropped.
        assert_eq!(limit.admit_at(8, 10), Some(5));
        assert_eq!(limit.admit_at(8, 10), Some(0));
        // A late reader of the clock (second 7) counts in second 8: it does not reset it.
        for _ in 0..8 {
            assert!(limit.admit_at(7, 10).is_some());
        }
        assert_eq!(limit.admit_at(7, 10), None, "second 8's quota is spent");
        assert_eq!(limit.admit_at(8, 10), None);
    }

    /// Threads flooding across a second's turn: each second writes at most its quota.
    #[test]
    fn concurrent_floods_keep_to_the_quota() {
        let limit = std::sync::Arc::new(LineLimit::new());
        let written: usize = (0..4)
            .map(|_| {
                let limit = std::sync::Arc::clone(&limit);
                std::thread::spawn(move || {
                    (0..10_000u64).filter(|i| limit.admit_at(100 + i / 5_000, 10).is_some()).count()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .sum();
        // Two seconds (100 and 101) at 10 each, whatever the interleaving.
        assert!((10..=20).contains(&written), "{written}");
        assert_eq!(limit.suppressed(), 40_000 - written as u64);
    }
}
