//! Turning a [`WorkloadSpec`] into a stream of arrivals.
//!
//! # Reproducibility
//!
//! The spec's seed is expanded (SplitMix64) into two independent xoshiro256** streams: one for
//! service times, one for the arrival process. Service times therefore depend only on the
//! distribution and the seed — changing the load, the rate or the arrival process of an experiment
//! keeps the *same* sequence of requests and only moves them in time (common random numbers, so
//! sweeps over load compare like with like). Arrival instants are accumulated in `f64`
//! nanoseconds and rounded, so rounding never drifts the rate.

use luge_sched::{FunctionId, Nanos, Request, RequestId};

use crate::arrivals::ArrivalProcess;
use crate::deadline::DeadlineRule;
use crate::dist::ServiceDist;
use crate::rng::{Rng, SplitMix64};
use crate::spec::WorkloadSpec;
use crate::trace::Trace;

/// One generated request, before it gets a [`RequestId`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Arrival instant (ns from the start of the workload).
    pub at: Nanos,
    /// The function invoked (by default one per class: `FunctionId(class)`).
    pub function: FunctionId,
    /// Class tag (see [`ServiceDist::classes`]).
    pub class: u16,
    /// The request's true execution time (ns, ≥ 1).
    pub execution: Nanos,
    /// Relative deadline (ns, ≥ 1).
    pub relative_deadline: Nanos,
}

impl Arrival {
    /// A scheduler [`Request`] for this arrival, with the given id and expected execution
    /// (the estimate the driver chose; see [`to_oracle_request`](Self::to_oracle_request)).
    pub fn to_request(&self, id: RequestId, expected: Nanos) -> Request {
        Request::new(id, self.function, self.at, self.relative_deadline, expected)
            .with_class(self.class)
    }

    /// A [`Request`] whose expected execution is the true one (SledgeScale's "perfect execution
    /// time prediction", SledgeScale §4).
    pub fn to_oracle_request(&self, id: RequestId) -> Request {
        self.to_request(id, self.execution)
    }
}

#[derive(Debug, Clone)]
enum Clock {
    /// Exponential gaps with this rate (per ns).
    Poisson { rate: f64 },
    /// 2-state MMPP: per-state rates (per ns) and mean sojourns (ns), index 0 = high.
    Mmpp { rates: [f64; 2], sojourns: [f64; 2], state: usize, left: f64 },
    /// Replay of a trace from row `next`.
    Trace { trace: Trace, next: usize },
    /// A non-positive or non-finite rate: no arrivals at all.
    Stopped,
}

/// Iterator over the arrivals of a [`WorkloadSpec`]: infinite for Poisson and MMPP (use
/// `.take(n)`), as long as the trace for a trace replay.
#[derive(Debug, Clone)]
pub struct Generator {
    dist: ServiceDist,
    deadline: DeadlineRule,
    service_rng: Rng,
    arrival_rng: Rng,
    clock: Clock,
    now: f64,
}

/// The latest arrival, and the longest execution and relative deadline, a generator emits:
/// 2^62 ns (~146 years). A synthetic stream ends there; a trace's or a distribution's larger
/// values are cut to it, so that sums of a few of them (a simulator's clock plus an execution)
/// cannot overflow.
pub const MAX_TIME: Nanos = 1 << 62;

/// The most state changes an on/off or MMPP stream draws looking for one arrival: past it the
/// stream ends (a spec's cycles are checked to expect an arrival in far fewer:
/// `MIN_ARRIVALS_PER_CYCLE` in `spec.rs`).
pub(crate) const MAX_SWITCHES: u32 = 1 << 24;

impl Generator {
    /// A generator positioned at the workload's first arrival.
    pub fn new(spec: &WorkloadSpec) -> Self {
        let mut seeds = SplitMix64::new(spec.seed);
        let service_rng = Rng::seed_from_u64(seeds.next_u64());
        let mut arrival_rng = Rng::seed_from_u64(seeds.next_u64());
        // A rate whose mean gap is past `MAX_TIME` (or not a number) has no arrivals to give.
        let usable = |r: f64| r.is_finite() && r > 0.0 && 1.0 / r <= MAX_TIME as f64;
        let per_ns = |rate: f64| Some(rate / 1e9).filter(|&r| usable(r));
        let clock = match &spec.arrivals {
            ArrivalProcess::Poisson { rate } => match per_ns(rate.per_second(spec.dist.mean())) {
                Some(rate) => Clock::Poisson { rate },
                None => Clock::Stopped,
            },
            ArrivalProcess::Mmpp { rate, on, off, low } => {
                match per_ns(rate.per_second(spec.dist.mean())) {
                    Some(avg) if *on > 0 && *off > 0 => {
                        let (high, low) = ArrivalProcess::mmpp_rates(avg, *on, *off, *low);
                        if !usable(high) {
                            return Self::stopped(spec, service_rng, arrival_rng);
                        }
                        let sojourns = [*on as f64, *off as f64];
                        let p_high = sojourns[0] / (sojourns[0] + sojourns[1]);
                        let state = usize::from(arrival_rng.next_f64() >= p_high);
                        let left = arrival_rng.exponential(sojourns[state]);
                        Clock::Mmpp { rates: [high, low], sojourns, state, left }
                    }
                    _ => Clock::Stopped,
                }
            }
            ArrivalProcess::Trace(trace) => Clock::Trace { trace: trace.clone(), next: 0 },
        };
        Self {
            dist: spec.dist.clone(),
            deadline: spec.deadline,
            service_rng,
            arrival_rng,
            clock,
            now: 0.0,
        }
    }

    /// A generator with no arrivals.
    fn stopped(spec: &WorkloadSpec, service_rng: Rng, arrival_rng: Rng) -> Self {
        Self {
            dist: spec.dist.clone(),
            deadline: spec.deadline,
            service_rng,
            arrival_rng,
            clock: Clock::Stopped,
            now: 0.0,
        }
    }

    /// The next arrival instant of a synthetic process (ns, f64), or `None` — also once the
    /// stream passes [`MAX_TIME`].
    fn next_instant(&mut self) -> Option<f64> {
        let next = self.next_unbounded();
        if next.is_some_and(|t| t <= MAX_TIME as f64) {
            return next;
        }
        self.clock = Clock::Stopped;
        None
    }

    fn next_unbounded(&mut self) -> Option<f64> {
        match &mut self.clock {
            Clock::Poisson { rate } => {
                self.now += self.arrival_rng.exponential(1.0 / *rate);
                Some(self.now)
            }
            Clock::Mmpp { rates, sojourns, state, left } => (0..MAX_SWITCHES).find_map(|_| {
                let rate = rates[*state];
                let gap = if rate > 0.0 {
                    self.arrival_rng.exponential(1.0 / rate)
                } else {
                    f64::INFINITY
                };
                if gap < *left {
                    *left -= gap;
                    self.now += gap;
                    return Some(Some(self.now));
                }
                // Memoryless: drop the partial gap at the state change and redraw in the new
                // state.
                self.now += *left;
                if self.now.is_nan() || self.now > MAX_TIME as f64 {
                    return Some(None);
                }
                *state ^= 1;
                *left = self.arrival_rng.exponential(sojourns[*state]);
                None
            })?,
            Clock::Trace { .. } | Clock::Stopped => None,
        }
    }
}

impl Iterator for Generator {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        let (at, row) = match &mut self.clock {
            Clock::Trace { trace, next } => {
                let row = *trace.rows().get(*next)?;
                *next += 1;
                (row.at, Some(row))
            }
            _ => (self.next_instant()?.round() as Nanos, None),
        };
        let row_class = row.and_then(|r| r.class);
        let (class, execution) = match row.and_then(|r| r.execution) {
            Some(e) => (row_class.unwrap_or_else(|| self.dist.classify(e)), e.max(1)),
            // A row's class without an execution: drawn from that class's part of the law.
            None => match row_class {
                Some(class) => (class, self.dist.sample_in_class(class, &mut self.service_rng)),
                None => self.dist.sample(&mut self.service_rng),
            },
        };
        let (at, execution) = (at.min(MAX_TIME), execution.min(MAX_TIME));
        let class_deadline = self.dist.classes().get(usize::from(class)).and_then(|c| c.deadline);
        let relative_deadline = row
            .and_then(|r| r.relative_deadline)
            .unwrap_or_else(|| self.deadline.relative_deadline(class_deadline, execution))
            .min(MAX_TIME);
        let function = row.and_then(|r| r.function).unwrap_or(FunctionId(u32::from(class)));
        Some(Arrival { at, function, class, execution, relative_deadline })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.clock {
            Clock::Trace { trace, next } => {
                let n = trace.rows().len() - next;
                (n, Some(n))
            }
            Clock::Stopped => (0, Some(0)),
            // Unbounded, but a synthetic stream can end (at `MAX_TIME`, or out of state
            // changes): no lower bound to promise (a collector would reserve it).
            Clock::Poisson { .. } | Clock::Mmpp { .. } => (0, None),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::arrivals::Rate;

    fn spec(s: &str) -> WorkloadSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn gaps(arrivals: &[Arrival]) -> Vec<f64> {
        arrivals.windows(2).map(|w| (w[1].at - w[0].at) as f64).collect()
    }

    fn mean_cv(xs: &[f64]) -> (f64, f64) {
        let n = xs.len() as f64;
        let m = xs.iter().sum::<f64>() / n;
        let var = xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n;
        (m, var.sqrt() / m)
    }

    /// Rates too low for the parser, given directly, end the stream instead of hanging (a
    /// bursty process switching states for ever before its first arrival) or overflowing.
    #[test]
    fn streams_end_at_the_largest_time_they_can_give() {
        for arrivals in ["poisson", "onoff", "mmpp"] {
            let mut s = spec(&format!("fixed,arrivals={arrivals},rate=1000,seed=3"));
            let tiny = Rate::PerSecond(1e-300);
            match &mut s.arrivals {
                ArrivalProcess::Poisson { rate } | ArrivalProcess::Mmpp { rate, .. } => {
                    *rate = tiny
                }
                ArrivalProcess::Trace(_) => unreachable!(),
            }
            assert!(s.generate(10).is_empty(), "{arrivals}: no arrival in any lifetime");
            // One arrival in ~30 years: a few, then the end, every one at most `MAX_TIME`; a
            // bursty stream whose cycles almost never hold one ends after `MAX_SWITCHES`.
            match &mut s.arrivals {
                ArrivalProcess::Poisson { rate } | ArrivalProcess::Mmpp { rate, .. } => {
                    *rate = Rate::PerSecond(1e-9);
                }
                ArrivalProcess::Trace(_) => unreachable!(),
            }
            assert_eq!(s.generator().size_hint(), (0, None), "{arrivals}: it can end");
            let a = s.generate(1_000);
            assert!(a.len() < 1_000, "{arrivals}: {}", a.len());
            // As many as there are: nothing reserved for a lower bound the stream never meets.
            assert_eq!(s.generate(usize::MAX), a, "{arrivals}");
            assert!(arrivals != "poisson" || !a.is_empty(), "a few in 146 years");
            assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
            assert!(a.iter().all(|x| x.at <= MAX_TIME));
        }
    }

    #[test]
    fn poisson_gaps_are_exponential() {
        let n = 400_000;
        let a = spec("exponential,rate=100000,seed=21").generate(n);
        assert!(a.windows(2).all(|w| w[0].at <= w[1].at));
        let (m, cv) = mean_cv(&gaps(&a));
        // Mean 10 µs within 5 standard errors; CV 1 (its estimate has SE ≈ 0.0022 here).
        assert!((m - 10_000.0).abs() < 5.0 * 10_000.0 / (n as f64).sqrt(), "mean gap {m}");
        assert!((cv - 1.0).abs() < 0.015, "cv {cv}");
    }

    #[test]
    fn load_sets_rate_from_the_mean() {
        let s = spec("sdvbs,load=0.9,workers=2,seed=22");
        let mean = 0.9 * 113e3 + 0.09 * 1100e3 + 0.01 * 2070e3;
        assert!((s.rate_per_second().unwrap() - 1.8e9 / mean).abs() < 1e-6);
        let a = s.generate(400_000);
        let span = a.last().unwrap().at as f64;
        let work: f64 = a.iter().map(|x| x.execution as f64).sum();
        let offered = work / span;
        assert!((offered - 1.8).abs() < 0.05, "offered load {offered} of 2 workers");
    }

    #[test]
    fn onoff_is_bursty_and_keeps_the_average_rate() {
        let n = 1_000_000;
        // ~2500 on/off cycles: the long-run rate is within a few % of 100k/s.
        let a = spec("fixed,arrivals=onoff,rate=100000,on=1ms,off=3ms,seed=23").generate(n);
        let rate = n as f64 / (a.last().unwrap().at as f64 / 1e9);
        assert!((rate / 100_000.0 - 1.0).abs() < 0.1, "rate {rate}");
        let g = gaps(&a);
        let (_, cv) = mean_cv(&g);
        assert!(cv > 3.0, "on/off gaps must be far burstier than Poisson: cv {cv}");
        // Silences: gaps longer than 1 ms (a Poisson gap at 400k/s essentially never is) happen
        // about once per cycle.
        let silences = g.iter().filter(|&&x| x > 1e6).count();
        let cycles = a.last().unwrap().at as f64 / 4e6;
        assert!(silences as f64 > 0.5 * cycles && (silences as f64) < 1.1 * cycles, "{silences}");
        // Premise check: an MMPP whose low state has the average rate is Poisson again.
        let p = spec("fixed,arrivals=mmpp,rate=100000,on=1ms,off=3ms,low=1,seed=23").generate(n);
        let (m, cv_poisson) = mean_cv(&gaps(&p));
        assert!((m - 10_000.0).abs() < 100.0 && (cv_poisson - 1.0).abs() < 0.02, "{m}");
        // In between, low=0.5 is bursty but less so.
        let h = spec("fixed,arrivals=mmpp,rate=100000,on=1ms,off=3ms,low=0.5,seed=23").generate(n);
        let (_, cv_half) = mean_cv(&gaps(&h));
        assert!(cv_half > 1.05 && cv_half < cv, "{cv_half}");
    }

    /// The bursty process starts in its stationary state: off with probability off/(on+off).
    #[test]
    fn onoff_starts_stationary() {
        let seeds = 400;
        let late = (0..seeds)
            .filter(|seed| {
                let s =
                    spec(&format!("fixed,arrivals=onoff,rate=100000,on=1ms,off=3ms,seed={seed}"));
                // In a burst the first gap is ~2.5 µs; starting off it is ~3 ms.
                s.generate(1)[0].at > 100_000
            })
            .count();
        // P(late) = 0.75 · e^(−0.1/3) ≈ 0.725; binomial sd ≈ 0.022.
        let share = late as f64 / f64::from(seeds);
        assert!((share - 0.725).abs() < 0.09, "share starting off: {share}");
    }

    #[test]
    fn same_seed_same_sequence_different_seed_different() {
        for name in ["high-bimodal", "lognormal,arrivals=onoff", "azure,arrivals=mmpp,low=0.3"] {
            let a = spec(&format!("{name},seed=1")).generate(2000);
            let b = spec(&format!("{name},seed=1")).generate(2000);
            let c = spec(&format!("{name},seed=2")).generate(2000);
            assert_eq!(a, b, "{name}");
            assert_ne!(a, c, "{name}");
            assert!(a.iter().zip(&c).filter(|(x, y)| x.at == y.at).count() < 10);
        }
        // Service times do not depend on the arrival process or the rate (common random numbers).
        let slow = spec("sdvbs,load=0.2,seed=5").generate(1000);
        let fast = spec("sdvbs,arrivals=onoff,rate=1000000,seed=5").generate(1000);
        let exec = |a: &[Arrival]| a.iter().map(|x| (x.class, x.execution)).collect::<Vec<_>>();
        assert_eq!(exec(&slow), exec(&fast));
        assert_ne!(slow[10].at, fast[10].at);
    }

    /// Guards the generator against accidental changes of its random streams: these values were
    /// produced by this implementation and must only change deliberately.
    #[test]
    fn known_answer() {
        let a = spec("high-bimodal,rate=1000,seed=42").generate(4);
        let got: Vec<_> = a.iter().map(|x| (x.at, x.class, x.execution)).collect();
        assert_eq!(got, GOLDEN);
    }
    const GOLDEN: [(Nanos, u16, Nanos); 4] = [
        (2_267_398, 0, 26_000),
        (2_958_368, 0, 26_000),
        (4_022_904, 1, 2_070_000),
        (5_129_975, 1, 2_070_000),
    ];

    #[test]
    fn classes_functions_and_deadlines() {
        let a = spec("edgert-bimodal,seed=3").generate(20_000);
        assert!(a.iter().any(|x| x.class == 1), "premise: some heavy requests");
        for x in &a {
            assert_eq!(x.function, FunctionId(u32::from(x.class)));
            let (exec, deadline) =
                if x.class == 0 { (40_000, 10_000_000) } else { (5_000_000, 500_000_000) };
            assert_eq!((x.execution, x.relative_deadline), (exec, deadline));
        }
        let m = spec("edgert-bimodal,deadline=10x,seed=3").generate(100);
        assert!(m.iter().all(|x| x.relative_deadline == 10 * x.execution));
        let f = spec("sdvbs,deadline=7ms").generate(100);
        assert!(f.iter().all(|x| x.relative_deadline == 7_000_000));
        let e = spec("exponential,seed=4").generate(10_000);
        let median = 100_000.0 * std::f64::consts::LN_2;
        assert!(e.iter().all(|x| (x.class == 1) == (x.execution as f64 > median)));
        assert!(e.iter().all(|x| x.relative_deadline == 10 * x.execution));
    }

    /// No generated request is due the instant it arrives, however small the deadline's
    /// multiple or the scale of a class deadline.
    #[test]
    fn relative_deadlines_are_never_zero() {
        for text in [
            "fixed,scale=1e-5,deadline=0.1x,rate=1000,seed=1",
            "edgert-bimodal,scale=1e-8,rate=1000,seed=2",
        ] {
            let a = spec(text).generate(2_000);
            assert!(a.iter().all(|x| x.relative_deadline >= 1), "{text}");
        }
    }

    #[test]
    fn requests_carry_the_arrival() {
        let x = Arrival {
            at: 5,
            function: FunctionId(9),
            class: 2,
            execution: 100,
            relative_deadline: 1_000,
        };
        let r = x.to_request(RequestId(7), 80);
        assert_eq!(
            (r.id, r.function, r.arrival, r.absolute_deadline),
            (RequestId(7), FunctionId(9), 5, 1_005)
        );
        assert_eq!((r.expected, r.class, r.executed), (80, 2, 0));
        assert_eq!(x.to_oracle_request(RequestId(1)).expected, 100);
    }

    /// A row that gives a class but no execution is given an execution of that class, for
    /// mixes (each class its range) and continuous laws (each its side of the median) alike.
    #[test]
    fn a_rows_class_draws_an_execution_of_that_class() {
        let mut text = String::from("arrival_us,class\n");
        for i in 0..2_000 {
            text.push_str(&format!("{i},{}\n", i % 2));
        }
        let trace = Trace::parse(&text, Path::new("t.csv")).unwrap();
        for preset in [crate::Preset::EdgeRtBimodal, crate::Preset::Exponential] {
            let mut s = WorkloadSpec::new(ServiceDist::preset(preset)).with_seed(5);
            s.arrivals = ArrivalProcess::Trace(trace.clone());
            for a in s.generator() {
                assert_eq!(s.dist.classify(a.execution), a.class, "{preset:?} {a:?}");
            }
        }
    }

    #[test]
    fn trace_replay_fills_gaps_from_the_spec() {
        let text = "arrival_us,function,class,execution_us,deadline_us\n\
                    0,3,,120.5,1205\n\
                    10,,,,\n\
                    10,,1,3000,\n\
                    25,,,30,\n";
        let trace = Trace::parse(text, Path::new("t.csv")).unwrap();
        let mut s = WorkloadSpec::new(ServiceDist::preset(crate::Preset::HighBimodal)).with_seed(9);
        s.arrivals = ArrivalProcess::Trace(trace);
        let g = s.generator();
        assert_eq!(g.size_hint(), (4, Some(4)));
        let a: Vec<_> = g.collect();
        assert_eq!(a.len(), 4);
        assert_eq!(
            a[0],
            Arrival {
                at: 0,
                function: FunctionId(3),
                class: 0,
                execution: 120_500,
                relative_deadline: 1_205_000
            }
        );
        assert_eq!(a[1].at, 10_000);
        assert!(a[1].execution == 26_000 || a[1].execution == 2_070_000, "sampled");
        assert_eq!(a[1].relative_deadline, 10 * a[1].execution);
        assert_eq!(a[1].function, FunctionId(u32::from(a[1].class)));
        assert_eq!((a[2].class, a[2].execution, a[2].function), (1, 3_000_000, FunctionId(1)));
        assert_eq!((a[3].class, a[3].relative_deadline), (0, 300_000));
        // A trace takes no rate; a zero rate, set without the spec's checks, stops a
        // synthetic generator.
        assert!(s.clone().with_rate(Rate::PerSecond(1.0)).is_err());
        let mut stopped = WorkloadSpec::new(ServiceDist::preset(crate::Preset::Fixed));
        stopped.arrivals.set_rate(Rate::PerSecond(0.0));
        assert!(stopped.generate(3).is_empty());
    }
}
