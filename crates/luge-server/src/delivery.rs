//! How long a front end takes to deliver an answer once the runtime has it, learnt from its
//! answers, so that admission can set that time aside (`SubmitOptions::delivery`).
//!
//! The runtime's account of a request ends when the worker completes it; the client's ends when
//! the answer arrives. In between, the front end must get a CPU, take the outcome and write it:
//! microseconds on an idle node, milliseconds when its thread shares a core with a saturated
//! worker. Under sustained overload admission on the wait fills the queue up to the deadline,
//! so admitted requests complete just before it, and any delivery time makes them late at the
//! client while the node counts them as met (measured over HTTP with the node on one core: 98.5 %
//! in deadline by the node, 40 % by the client, the delivery p50 0.8 ms and p90 2.5 ms).
//!
//! The estimate is the retransmission-timeout estimator of TCP (RFC 6298 §2, Jacobson's
//! algorithm): a smoothed mean `s ← s + (x − s)/8` and mean deviation `v ← v + (|x − s| − v)/4`
//! of the samples, and the margin `s + 4v`, which covers a delay's usual spread without
//! following each outlier. Samples are clamped to [`MAX_SAMPLE`]; the runtime sets aside at most
//! a quarter of a request's deadline whatever the margin.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

/// The largest delivery sample believed (longer is a stall the margin must not chase).
pub const MAX_SAMPLE: Duration = Duration::from_millis(50);

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Smoothed delay and mean deviation, ns (`None` before the first sample).
    state: Mutex<Option<(f64, f64)>>,
}

impl Delivery {
    /// One answer took `delay` from the runtime's outcome to its delivery; returns the new
    /// [`margin`](Self::margin).
    pub fn observe(&self, delay: Duration) -> Duration {
        let x = delay.min(MAX_SAMPLE).as_nanos() as f64;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = Some(match *state {
            // RFC 6298 §2.2: the first measurement.
            None => (x, x / 2.0),
            // §2.3: variance first, with the old mean.
            Some((s, v)) => (s + (x - s) / 8.0, v + ((x - s).abs() - v) / 4.0),
        });
        margin_of(*state)
    }

    /// The time to set aside for delivery: smoothed delay plus four mean deviations.
    pub fn margin(&self) -> Duration {
        margin_of(*self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn margin_of(state: Option<(f64, f64)>) -> Duration {
    state.map_or(Duration::ZERO, |(s, v)| Duration::from_nanos((s + 4.0 * v) as u64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ms(x: f64) -> Duration {
        Duration::from_secs_f64(x / 1_000.0)
    }

    #[test]
    fn the_margin_covers_a_steady_delay_and_its_spread_without_chasing_outliers() {
        let d = Delivery::default();
        assert_eq!(d.margin(), Duration::ZERO, "nothing set aside before the first answer");
        // A delay alternating between 1 and 3 ms: the margin covers both.
        for i in 0..200 {
            d.observe(ms(if i % 2 == 0 { 1.0 } else { 3.0 }));
        }
        let m = d.margin();
        assert!(m >= ms(3.0) && m <= ms(8.0), "{m:?}");
        // One 40 ms stall raises it, and a few dozen ordinary answers bring it back.
        d.observe(ms(40.0));
        assert!(d.margin() > ms(10.0), "{:?}", d.margin());
        for i in 0..60 {
            d.observe(ms(if i % 2 == 0 { 1.0 } else { 3.0 }));
        }
        assert!(d.margin() <= ms(8.0), "{:?}", d.margin());
        // A sample beyond the clamp counts as the clamp.
        let stalled = Delivery::default();
        assert_eq!(stalled.observe(Duration::from_secs(10)), MAX_SAMPLE * 3);
        assert_eq!(stalled.margin(), MAX_SAMPLE * 3);
    }
}
