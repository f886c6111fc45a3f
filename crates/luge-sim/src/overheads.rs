//! The simulator's explicit cost model of a real machine: what each scheduling step costs and
//! when its effect becomes visible. `none` is the ideal machine of queueing theory; the defaults
//! are the order of magnitude measured on a 2-core VM and are meant to be replaced by
//! calibrated values exported by the runtime's benchmarks (`Overheads::parse`).

use std::fmt;
use std::str::FromStr;

use luge_sched::Nanos;
use serde::{Deserialize, Serialize};

/// Costs and latencies of the simulated machine, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overheads {
    /// Dispatcher CPU time per arrival, independent of the workers inspected.
    pub dispatch_base: Nanos,
    /// Dispatcher CPU time per worker state inspected (Algorithm 2 scans every worker).
    pub dispatch_per_worker: Nanos,
    /// Latency from a `Run` decision until the worker sees the request (queue hand-off).
    pub enqueue: Nanos,
    /// Worker time to switch to a request (start or resume), charged before it runs.
    pub context_switch: Nanos,
    /// Latency from a `Preempt` decision until the running request actually stops.
    pub preempt_delivery: Nanos,
    /// Extra worker time to resume a request that was preempted (saving and restoring its
    /// context), on top of `context_switch`.
    pub preempt_resume: Nanos,
    /// Worker time to instantiate a sandbox, charged on a request's first start only.
    pub sandbox_start: Nanos,
    /// Dispatcher CPU time per timer tick handled.
    pub tick: Nanos,
    /// Latency from notifying a dispatcher group whose threads all sleep (every worker idle)
    /// until it runs: a thread wake-up (~20 µs on a VM). Arrivals to a group with a request
    /// running are seen at once (the runtime interrupts the running sandbox), and so are all
    /// arrivals when this is 0. Periodic notification ([`SimConfig::notify_interval`]) trades
    /// these wake-ups for delay.
    ///
    /// [`SimConfig::notify_interval`]: crate::SimConfig::notify_interval
    pub wakeup: Nanos,
}

impl Overheads {
    /// The ideal machine: every step is free and instantaneous.
    pub const NONE: Overheads = Overheads {
        dispatch_base: 0,
        dispatch_per_worker: 0,
        enqueue: 0,
        context_switch: 0,
        preempt_delivery: 0,
        preempt_resume: 0,
        sandbox_start: 0,
        tick: 0,
        wakeup: 0,
    };

    /// Documented defaults for Luge's design (user-level fibers, preemption through an epoch
    /// check rather than a signal): a dispatcher decision of 100 ns + 20 ns per worker, 200 ns
    /// queue hand-off, 300 ns fiber switch, 2 µs preemption delivery (epoch granularity), 500 ns
    /// extra to resume a preempted sandbox, 5 µs sandbox instantiation from a pool, 100 ns per
    /// tick, wake-ups free (a group is modelled as always awake). Orders of magnitude, to be
    /// replaced by values the runtime's benchmarks calibrate.
    pub const DEFAULT: Overheads = Overheads {
        dispatch_base: 100,
        dispatch_per_worker: 20,
        enqueue: 200,
        context_switch: 300,
        preempt_delivery: 2_000,
        preempt_resume: 500,
        sandbox_start: 5_000,
        tick: 100,
        wakeup: 0,
    };

    /// The papers' platforms: preemption by signal, whose resume "requires a signal execution
    /// context … on the orders of the OS thread switch in Linux" (Sledge
    /// §3.5; SledgeScale §4 integrates Shinjuku with the same signals). As [`DEFAULT`](Self::DEFAULT)
    /// but 5 µs delivery and 5 µs extra per resume of a preempted request.
    pub const SIGNALS: Overheads =
        Overheads { preempt_delivery: 5_000, preempt_resume: 5_000, ..Overheads::DEFAULT };

    const FIELDS: [&'static str; 9] = [
        "dispatch_base",
        "dispatch_per_worker",
        "enqueue",
        "context_switch",
        "preempt_delivery",
        "preempt_resume",
        "sandbox_start",
        "tick",
        "wakeup",
    ];

    fn field_mut(&mut self, name: &str) -> Option<&mut Nanos> {
        Some(match name {
            "dispatch_base" => &mut self.dispatch_base,
            "dispatch_per_worker" => &mut self.dispatch_per_worker,
            "enqueue" => &mut self.enqueue,
            "context_switch" => &mut self.context_switch,
            "preempt_delivery" => &mut self.preempt_delivery,
            "preempt_resume" => &mut self.preempt_resume,
            "sandbox_start" => &mut self.sandbox_start,
            "tick" => &mut self.tick,
            "wakeup" => &mut self.wakeup,
            _ => return None,
        })
    }

    fn fields(&self) -> [Nanos; 9] {
        [
            self.dispatch_base,
            self.dispatch_per_worker,
            self.enqueue,
            self.context_switch,
            self.preempt_delivery,
            self.preempt_resume,
            self.sandbox_start,
            self.tick,
            self.wakeup,
        ]
    }
}

impl Default for Overheads {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A malformed overhead specification.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverheadsError {
    /// A `key=value` pair names no known overhead.
    #[error("unknown overhead `{0}` (known: {known})", known = Overheads::FIELDS.join(", "))]
    UnknownKey(String),
    /// A value is not a non-negative integer of nanoseconds.
    #[error("overhead `{key}`: `{value}` is not a whole number of nanoseconds")]
    BadValue {
        /// Key.
        key: String,
        /// Value as written.
        value: String,
    },
    /// An item is not `key=value`.
    #[error("`{0}` is not `key=nanoseconds`")]
    Syntax(String),
}

/// Parses `none`, `default`, `signals`, or a base followed by overrides, separated by commas or newlines:
/// `default,preempt_delivery=5000` or the lines of a calibration file
/// (`# comment` lines and blank lines are ignored). This is also the export format of the
/// runtime's benchmarks.
impl FromStr for Overheads {
    type Err = OverheadsError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut o = Overheads::DEFAULT;
        // A `#` starts a comment to the end of its line (comments may contain commas).
        let items = s.lines().flat_map(|line| line.split('#').next().unwrap_or("").split(','));
        for item in items.map(str::trim) {
            if item.is_empty() {
                continue;
            }
            match item {
                "none" => o = Overheads::NONE,
                "default" => o = Overheads::DEFAULT,
                "signals" => o = Overheads::SIGNALS,
                _ => {
                    let (k, v) =
                        item.split_once('=').ok_or_else(|| OverheadsError::Syntax(item.into()))?;
                    let (k, v) = (k.trim(), v.trim());
                    let value: Nanos = v
                        .parse()
                        .map_err(|_| OverheadsError::BadValue { key: k.into(), value: v.into() })?;
                    *o.field_mut(k).ok_or_else(|| OverheadsError::UnknownKey(k.into()))? = value;
                }
            }
        }
        Ok(o)
    }
}

/// Prints the calibration-file form: one `key=ns` per line; it parses back to the same value.
impl fmt::Display for Overheads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in Overheads::FIELDS.iter().zip(self.fields()) {
            writeln!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_bases_overrides_and_round_trips() -> Result<(), OverheadsError> {
        assert_eq!("none".parse::<Overheads>()?, Overheads::NONE);
        let o: Overheads = "none, preempt_delivery=5000".parse()?;
        assert_eq!(o.preempt_delivery, 5000);
        assert_eq!(o.enqueue, 0);
        let text = Overheads::DEFAULT.to_string();
        assert_eq!(text.parse::<Overheads>()?, Overheads::DEFAULT);
        assert_eq!("signals".parse::<Overheads>()?, Overheads::SIGNALS);
        assert_eq!("# calibrated\n\nnone\ntick=7\n".parse::<Overheads>()?.tick, 7);
        let commented = "# measured: median, 1 worker\nnone # base, then\nenqueue=9 # µs, sleep\n";
        assert_eq!(commented.parse::<Overheads>()?.enqueue, 9);
        assert!(matches!("foo=1".parse::<Overheads>(), Err(OverheadsError::UnknownKey(_))));
        assert!(matches!("tick=-1".parse::<Overheads>(), Err(OverheadsError::BadValue { .. })));
        assert!(matches!("tick".parse::<Overheads>(), Err(OverheadsError::Syntax(_))));
        Ok(())
    }
}
