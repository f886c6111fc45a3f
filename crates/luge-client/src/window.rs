//! The async client's window on outstanding calls: a fixed bound, or one that adapts to the
//! load signal the node's responses carry (`docs/protocol.md` §3.1).
//!
//! The adaptive window is additive-increase, multiplicative-decrease on that signal: while
//! answered requests waited less than a quarter of their deadline ([`LOW`]) it grows by one call
//! per window's worth of responses; when one waited half its deadline ([`HIGH`]) or was refused
//! for load, it halves, at most once per round trip (the latency of the call that reported it),
//! so one burst of bad news counts once. It starts at its maximum and never falls below one.
//! Breakwater (OSDI '20) adjusts its credit pool by the same rule on the server's queueing delay.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use luge_proto::LOAD_REFUSED;
use tokio::sync::Notify;
use tokio::time::Instant;

/// At or above this load signal (half the deadline spent waiting, or a refusal) the adaptive
/// window halves.
pub(crate) const HIGH: u8 = 127;
/// Below this load signal (a quarter of the deadline) the adaptive window grows.
pub(crate) const LOW: u8 = 63;

/// A bound on the calls outstanding at once.
#[derive(Debug)]
pub(crate) struct Window {
    state: Mutex<State>,
    freed: Notify,
    /// `Some(max)`: adapts between 1 and `max`; `None`: fixed.
    adaptive: Option<usize>,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    /// Calls allowed at once, at least one.
    limit: usize,
    /// Quiet responses since the limit last changed: at `limit` of them it grows by one.
    quiet: usize,
    last_decrease: Option<Instant>,
}

/// A call's place in the window, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot<'a>(&'a Window);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.lock().in_flight -= 1;
        self.0.freed.notify_one();
    }
}

impl Window {
    /// At most `n` calls at once (at least one).
    pub(crate) fn fixed(n: usize) -> Self {
        Self::new(n, None)
    }

    /// At most `max` calls at once, fewer while the node signals load.
    pub(crate) fn adaptive(max: usize) -> Self {
        Self::new(max, Some(max.max(1)))
    }

    fn new(n: usize, adaptive: Option<usize>) -> Self {
        let state = State { in_flight: 0, limit: n.max(1), quiet: 0, last_decrease: None };
        Self { state: Mutex::new(state), freed: Notify::new(), adaptive }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the window adapts to the load signal.
    pub(crate) fn is_adaptive(&self) -> bool {
        self.adaptive.is_some()
    }

    /// The most calls it ever allows at once.
    pub(crate) fn max(&self) -> usize {
        self.adaptive.unwrap_or_else(|| self.limit())
    }

    /// The calls allowed at once right now.
    pub(crate) fn limit(&self) -> usize {
        self.lock().limit
    }

    /// Waits for a place, until `until` if given; `None` if none came by then.
    pub(crate) async fn acquire(&self, until: Option<Instant>) -> Option<Slot<'_>> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check, so a place freed in between is not missed.
            freed.as_mut().enable();
            {
                let mut state = self.lock();
                if state.in_flight < state.limit {
                    state.in_flight += 1;
                    return Some(Slot(self));
                }
            }
            match until {
                Some(until) => tokio::time::timeout_at(until, freed).await.ok()?,
                None => freed.await,
            }
        }
    }

    /// Learns from one response: its load signal and the call's latency (one round trip).
    pub(crate) fn observe(&self, load: u8, latency: Duration) {
        let Some(max) = self.adaptive else { return };
        let grew = {
            let mut state = self.lock();
            if load >= HIGH || load == LOAD_REFUSED {
                let now = Instant::now();
                if state.last_decrease.is_none_or(|t| now.duration_since(t) >= latency) {
                    state.limit = (state.limit / 2).max(1);
                    state.quiet = 0;
                    state.last_decrease = Some(now);
                }
                false
            } else if load < LOW && state.limit < max {
                state.quiet += 1;
                let grow = state.quiet >= state.limit;
                if grow {
                    state.limit += 1;
                    state.quiet = 0;
                }
                grow
            } else {
                false
            }
        };
        if grew {
            self.freed.notify_one();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_window_ignores_the_signal() {
        let w = Window::fixed(4);
        w.observe(LOAD_REFUSED, Duration::ZERO);
        assert_eq!(w.limit(), 4);
        assert!(!w.is_adaptive());
    }

    #[test]
    fn halves_once_per_round_trip_and_grows_back_by_one_per_window() {
        let w = Window::adaptive(64);
        assert_eq!(w.limit(), 64, "starts at its maximum");
        // A burst of refusals within one round trip halves it once.
        for _ in 0..10 {
            w.observe(LOAD_REFUSED, Duration::from_secs(60));
        }
        assert_eq!(w.limit(), 32);
        // With a zero round trip every report counts: down to the floor of one.
        for _ in 0..10 {
            w.observe(HIGH, Duration::ZERO);
        }
        assert_eq!(w.limit(), 1);
        // In between: held.
        w.observe(LOW, Duration::ZERO);
        assert_eq!(w.limit(), 1);
        // Quiet answers grow it by about one per window's worth of responses: 1 → 2 takes one,
        // 2 → 3 two, … so 1 + 2 + … + 9 = 45 responses reach 10.
        for _ in 0..45 {
            w.observe(0, Duration::ZERO);
        }
        assert_eq!(w.limit(), 10);
        for _ in 0..10_000 {
            w.observe(0, Duration::ZERO);
        }
        assert_eq!(w.limit(), 64, "never above its maximum");
    }

    #[tokio::test]
    async fn a_full_window_makes_calls_wait_and_gives_up_at_their_bound() {
        let w = Window::fixed(1);
        let held = w.acquire(None).await.unwrap();
        let soon = Instant::now() + Duration::from_millis(20);
        assert!(w.acquire(Some(soon)).await.is_none(), "no place by the bound");
        drop(held);
        let later = Instant::now() + Duration::from_secs(5);
        assert!(w.acquire(Some(later)).await.is_some(), "a freed place is taken");
    }

    #[tokio::test]
    async fn a_growing_window_lets_a_waiting_call_in() {
        let w = std::sync::Arc::new(Window::adaptive(2));
        w.observe(LOAD_REFUSED, Duration::ZERO);
        assert_eq!(w.limit(), 1);
        let _held = w.acquire(None).await.unwrap();
        let waiter = {
            let w = std::sync::Arc::clone(&w);
            tokio::spawn(async move { w.acquire(None).await.is_some() })
        };
        tokio::task::yield_now().await;
        // 1 → 2 after one quiet response: the waiting call gets in without any place freed.
        w.observe(0, Duration::ZERO);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
        assert!(got);
    }
}
