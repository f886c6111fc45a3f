//! The client's retransmission schedule (`docs/protocol.md` §6): exponential back-off, capped,
//! with a bounded number of attempts, never waiting past the time the client gives up.

use std::time::Duration;

/// Exponential back-off: attempt `k` (0 = the first send) waits
/// `min(initial · factorᵏ, max, remaining)` for the response before the next attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first send; should exceed the expected turnaround (RTT + queueing +
    /// execution), otherwise requests that are merely running get retransmitted.
    pub initial: Duration,
    /// Cap on any one wait.
    pub max: Duration,
    /// Growth per attempt (1 = constant; 0 is treated as 1).
    pub factor: u32,
    /// Sends in total, the first included (0 sends nothing).
    pub max_attempts: u32,
}

impl Default for Backoff {
    /// 2 ms, doubling, capped at 100 ms, 6 attempts: the last retransmission leaves 62 ms after
    /// the first send and the client gives up at 126 ms (less if the deadline is nearer).
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(2),
            max: Duration::from_millis(100),
            factor: 2,
            max_attempts: 6,
        }
    }
}

impl Backoff {
    /// The uncapped-by-deadline wait of attempt `attempt`: `min(initial · factorᵏ, max)`,
    /// saturating.
    pub fn delay(&self, attempt: u32) -> Duration {
        let growth = self.factor.max(1).saturating_pow(attempt);
        self.initial.saturating_mul(growth).min(self.max)
    }

    /// Whether to make attempt `attempt` (0-based) and, if so, how long to wait for its response:
    /// `None` once `max_attempts` sends are made or nothing `remaining` until the client gives up
    /// (normally the deadline, plus any tolerance beyond it); otherwise
    /// `min(delay(attempt), remaining)`.
    pub fn next_delay(&self, attempt: u32, remaining: Duration) -> Option<Duration> {
        if attempt >= self.max_attempts || remaining.is_zero() {
            return None;
        }
        Some(self.delay(attempt).min(remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn default_schedule() {
        let b = Backoff::default();
        let waits: Vec<_> = (0..).map_while(|k| b.next_delay(k, Duration::MAX)).collect();
        assert_eq!(waits, [2 * MS, 4 * MS, 8 * MS, 16 * MS, 32 * MS, 64 * MS]);
        assert_eq!(waits[..5].iter().sum::<Duration>(), 62 * MS);
        assert_eq!(waits.iter().sum::<Duration>(), 126 * MS);
        assert_eq!(b.delay(7), 100 * MS);
        assert_eq!(b.delay(u32::MAX), 100 * MS);
    }

    #[test]
    fn honours_the_remaining_deadline() {
        let b = Backoff::default();
        assert_eq!(b.next_delay(3, 5 * MS), Some(5 * MS));
        assert_eq!(b.next_delay(0, Duration::ZERO), None);
        let constant = Backoff { factor: 0, max_attempts: 0, ..b };
        assert_eq!(constant.delay(9), 2 * MS);
        assert_eq!(constant.next_delay(0, MS), None);
    }
}
