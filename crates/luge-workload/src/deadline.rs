//! Relative deadlines of generated requests.
//!
//! SledgeScale (§4): "Unless otherwise specified, we set the deadline
//! to be 10x the execution time." Edge-RT (§VI) gives each class a
//! fixed relative deadline instead (light 10 ms, heavy 500 ms). The default rule,
//! `class:10x`, covers both: a class's fixed deadline when it has one, else 10 × execution.

use std::fmt;
use std::str::FromStr;

use luge_sched::Nanos;

use crate::error::WorkloadError;
use crate::text::{fmt_duration, parse_duration, parse_f64};

/// How a request's relative deadline is derived from its class and execution time.
///
/// Text form (the `deadline=` spec key): `10x` ([`Multiple`](Self::Multiple)), `5ms`
/// ([`Fixed`](Self::Fixed)), `class:10x` ([`ClassOr`](Self::ClassOr)). K is any positive
/// decimal (`2.5x`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DeadlineRule {
    /// K × execution for every request, ignoring class deadlines.
    Multiple(f64),
    /// The same relative deadline for every request.
    Fixed(Nanos),
    /// The class's fixed deadline if it has one, else K × execution (the default, K = 10).
    ClassOr(f64),
}

impl Default for DeadlineRule {
    fn default() -> Self {
        DeadlineRule::ClassOr(DeadlineRule::DEFAULT_MULTIPLE)
    }
}

impl DeadlineRule {
    /// SledgeScale's default multiple of the execution time (§4).
    pub const DEFAULT_MULTIPLE: f64 = 10.0;

    /// The relative deadline of a request of `execution` ns whose class has the fixed deadline
    /// `class_deadline` (if any). K × execution is rounded to whole ns, at least 1 (a deadline
    /// of 0 cannot be met, and is refused wherever one is given), and saturates.
    pub fn relative_deadline(&self, class_deadline: Option<Nanos>, execution: Nanos) -> Nanos {
        let multiple = |k: f64| ((k * execution as f64).round() as Nanos).max(1);
        match *self {
            DeadlineRule::Multiple(k) => multiple(k),
            DeadlineRule::Fixed(d) => d,
            DeadlineRule::ClassOr(k) => class_deadline.unwrap_or_else(|| multiple(k)),
        }
    }
}

impl fmt::Display for DeadlineRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeadlineRule::Multiple(k) => write!(f, "{k}x"),
            DeadlineRule::Fixed(d) => f.write_str(&fmt_duration(*d)),
            DeadlineRule::ClassOr(k) => write!(f, "class:{k}x"),
        }
    }
}

impl FromStr for DeadlineRule {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |m: String| WorkloadError::bad_value("deadline", m);
        let multiple = |t: &str| -> Result<f64, WorkloadError> {
            let k = parse_f64(t).map_err(bad)?;
            if k > 0.0 { Ok(k) } else { Err(bad(format!("multiple {k} must be > 0"))) }
        };
        if let Some(rest) = s.strip_prefix("class:") {
            let k = rest
                .strip_suffix('x')
                .ok_or_else(|| bad(format!("`{s}`: expected `class:Kx`, e.g. `class:10x`")))?;
            return Ok(DeadlineRule::ClassOr(multiple(k)?));
        }
        if let Some(k) = s.strip_suffix('x') {
            return Ok(DeadlineRule::Multiple(multiple(k)?));
        }
        match parse_duration(s) {
            Ok(d) if d > 0 => Ok(DeadlineRule::Fixed(d)),
            Ok(_) => Err(bad("a fixed deadline must be > 0".to_owned())),
            Err(_) => Err(bad(format!(
                "`{s}`: expected `Kx` (K × execution), a duration such as `5ms`, or `class:Kx`"
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rules_apply_and_round_trip() {
        let e = 26_000;
        assert_eq!(DeadlineRule::Multiple(10.0).relative_deadline(Some(5), e), 260_000);
        assert_eq!(DeadlineRule::Fixed(7).relative_deadline(Some(5), e), 7);
        assert_eq!(DeadlineRule::default().relative_deadline(Some(5), e), 5);
        assert_eq!(DeadlineRule::default().relative_deadline(None, e), 260_000);
        assert_eq!(DeadlineRule::ClassOr(2.5).relative_deadline(None, 3), 8);
        // K × execution below half a nanosecond: 1 ns, not an unmeetable 0.
        assert_eq!(DeadlineRule::Multiple(0.1).relative_deadline(None, 1), 1);
        assert_eq!(DeadlineRule::ClassOr(0.001).relative_deadline(None, 100), 1);
        for r in [
            DeadlineRule::Multiple(10.0),
            DeadlineRule::Multiple(2.5),
            DeadlineRule::Fixed(1_130_000),
            DeadlineRule::ClassOr(10.0),
            DeadlineRule::ClassOr(0.1),
        ] {
            assert_eq!(r.to_string().parse::<DeadlineRule>().unwrap(), r, "{r}");
        }
        assert_eq!("10x".parse::<DeadlineRule>().unwrap(), DeadlineRule::Multiple(10.0));
        assert_eq!("class:10x".parse::<DeadlineRule>().unwrap(), DeadlineRule::default());
        for bad in ["0x", "-1x", "x", "class:10", "10", "0ms", "soon"] {
            assert!(bad.parse::<DeadlineRule>().is_err(), "{bad}");
        }
    }
}
