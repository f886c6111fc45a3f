//! Arrival processes: Poisson, a bursty 2-state MMPP (on/off as a special case), trace replay.
//!
//! SledgeScale's open-loop generator "follows a Poisson distribution" (SledgeScale
//! §4); SFS drives FaaSBench with Poisson inter-arrivals and "adjusted the IAT … proportionally
//! to simulate different loads" (SFS §VIII); its Azure-sampled load also
//! shows transient overloads, which the bursty process models.
//!
//! # Rates
//!
//! A [`Rate`] is either absolute (`rate=R`, requests per second) or a target utilisation
//! (`load=ρ,workers=W`): rate = ρ · W / E[S] with E[S] the distribution's exact
//! [`mean`](crate::ServiceDist::mean). For the bursty process it is the *long-run average* rate.
//!
//! # The bursty process (2-state MMPP)
//!
//! A Markov-modulated Poisson process with a *high* and a *low* state. Sojourn times are
//! exponential with means `on` (high) and `off` (low); inside a state arrivals are Poisson with
//! rate λ_high or λ_low. Parameters, for a long-run average rate λ̄:
//!
//! - `low` = λ_low / λ̄ ∈ [0, 1] (default 0: an **on/off** process, i.e. an interrupted Poisson
//!   process — nothing arrives while off);
//! - λ_high = (λ̄ · (on + off) − λ_low · off) / on, so that the time-average rate is exactly λ̄.
//!
//! Defaults: `on=10ms`, `off=30ms`, `low=0`, i.e. bursts at 4 × the average rate lasting 10 ms
//! on average, separated by 30 ms of silence on average. The initial state is drawn from the
//! stationary distribution (high with probability on / (on + off)), so the process is
//! stationary from t = 0. `arrivals=onoff` is `mmpp` with `low=0`.

use luge_sched::Nanos;

use crate::trace::Trace;

/// How fast requests arrive (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Requests per second.
    PerSecond(f64),
    /// Target utilisation ρ of `workers` workers: rate = ρ · workers / mean execution.
    Load {
        /// Target utilisation per worker (e.g. 0.9).
        load: f64,
        /// Number of workers the load is spread over.
        workers: u32,
    },
}

impl Default for Rate {
    /// `load=0.5,workers=1`.
    fn default() -> Self {
        Rate::Load { load: 0.5, workers: 1 }
    }
}

impl Rate {
    /// Requests per second, given the distribution's mean execution time in ns.
    pub fn per_second(&self, mean_execution_ns: f64) -> f64 {
        match *self {
            Rate::PerSecond(r) => r,
            Rate::Load { load, workers } => load * f64::from(workers) * 1e9 / mean_execution_ns,
        }
    }
}

/// The arrival process of a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrivalProcess {
    /// Open-loop Poisson arrivals (exponential inter-arrival times).
    Poisson {
        /// The arrival rate.
        rate: Rate,
    },
    /// The bursty 2-state MMPP (on/off when `low == 0`).
    Mmpp {
        /// Long-run average rate.
        rate: Rate,
        /// Mean sojourn in the high state (ns).
        on: Nanos,
        /// Mean sojourn in the low state (ns).
        off: Nanos,
        /// λ_low / λ̄, in [0, 1].
        low: f64,
    },
    /// Replay of a CSV trace (see `trace.rs`).
    Trace(Trace),
}

impl Default for ArrivalProcess {
    fn default() -> Self {
        ArrivalProcess::Poisson { rate: Rate::default() }
    }
}

impl ArrivalProcess {
    /// Default mean high-state sojourn of the bursty process (10 ms).
    pub const DEFAULT_ON: Nanos = 10_000_000;
    /// Default mean low-state sojourn of the bursty process (30 ms).
    pub const DEFAULT_OFF: Nanos = 30_000_000;

    /// The rate, unless the process is a trace.
    pub fn rate(&self) -> Option<Rate> {
        match self {
            ArrivalProcess::Poisson { rate } | ArrivalProcess::Mmpp { rate, .. } => Some(*rate),
            ArrivalProcess::Trace(_) => None,
        }
    }

    /// Replaces the rate (no effect on a trace).
    pub fn set_rate(&mut self, new: Rate) {
        match self {
            ArrivalProcess::Poisson { rate } | ArrivalProcess::Mmpp { rate, .. } => *rate = new,
            ArrivalProcess::Trace(_) => {}
        }
    }

    /// (λ_high, λ_low) per ns of the MMPP for a long-run rate `avg` per ns.
    pub(crate) fn mmpp_rates(avg: f64, on: Nanos, off: Nanos, low: f64) -> (f64, f64) {
        let (on, off) = (on as f64, off as f64);
        let lambda_low = low * avg;
        let lambda_high = (avg * (on + off) - lambda_low * off) / on;
        (lambda_high, lambda_low)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_gives_rate_over_mean() {
        // ρ = 0.8 on 6 workers with a 100 µs mean: 48 000 requests per second.
        let r = Rate::Load { load: 0.8, workers: 6 };
        assert!((r.per_second(100_000.0) - 48_000.0).abs() < 1e-9);
        assert_eq!(Rate::PerSecond(5.0).per_second(1.0), 5.0);
    }

    #[test]
    fn mmpp_rates_preserve_the_average() {
        for low in [0.0, 0.25, 1.0] {
            let (h, l) = ArrivalProcess::mmpp_rates(1.0, 10, 30, low);
            assert!(((h * 10.0 + l * 30.0) / 40.0 - 1.0).abs() < 1e-12);
            assert!(h >= 1.0 && l <= 1.0);
        }
        assert_eq!(ArrivalProcess::mmpp_rates(1.0, 10, 30, 0.0), (4.0, 0.0));
    }
}
