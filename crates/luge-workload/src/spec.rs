//! The workload spec: a value that prints as one line and reads back (`Display` + `FromStr`).
//!
//! # Grammar
//!
//! Comma-separated, no spaces needed (so it is one shell word); the first item is the
//! distribution, the rest are `key=value` in any order, each at most once:
//!
//! ```text
//! DIST[,scale=S][,truncate=DUR][,deadline=RULE][,arrivals=PROC][,rate=R | ,load=L[,workers=W]]
//!     [,on=DUR][,off=DUR][,low=F][,seed=N]
//! ```
//!
//! | item | meaning | default |
//! |---|---|---|
//! | `DIST` | `fixed`, `high-bimodal`, `extreme-bimodal`, `sdvbs`, `exponential`, `lognormal`, `edgert-bimodal`, `azure`, or `file:PATH` (a mix file, read when the spec is parsed) | — |
//! | `scale` | multiplies executions and class deadlines | 1 |
//! | `truncate` | cap of the conditional law X \| X ≤ cap (exponential, lognormal) | off |
//! | `deadline` | `Kx`, a duration (`5ms`), or `class:Kx` ([`DeadlineRule`]) | `class:10x` |
//! | `arrivals` | `poisson`, `onoff`, `mmpp`, or `trace:PATH` (a CSV trace, read when parsed) | `poisson` |
//! | `rate` | requests per second, from [`MIN_RATE_PER_SECOND`] (0.001) to [`MAX_RATE_PER_SECOND`] (10⁹), also as `load` gives it | — |
//! | `load`, `workers` | target utilisation ρ of W workers: rate = ρ·W / mean | `load=0.5,workers=1` |
//! | `on`, `off` | mean high / low sojourn of `onoff` / `mmpp`; a cycle (on + off) must expect at least 10⁻⁴ arrivals at the rate | `10ms`, `30ms` |
//! | `low` | low-state rate / average rate of `mmpp` (`onoff` has 0) | 0 |
//! | `seed` | seed of the random streams (`u64`) | 0 |
//!
//! Durations take a unit: `ns`, `us`, `ms`, `s` (decimal allowed: `2.5us`). Paths are
//! percent-encoded where they contain `%`, `,` or whitespace. `Display` writes the canonical
//! form with every applicable key, e.g.
//! `lognormal,truncate=1s,deadline=class:10x,arrivals=poisson,load=0.9,workers=2,seed=7`,
//! and `spec.to_string().parse()` gives back an equal spec.
//!
//! Parsing `file:` and `trace:` reads the file then (relative paths are relative to the current
//! directory), so that the spec can answer `mean()` and so that every error surfaces at once.

use std::fmt;
use std::str::FromStr;

use crate::arrivals::{ArrivalProcess, Rate};
use crate::deadline::DeadlineRule;
use crate::dist::{Preset, ServiceDist};
use crate::error::WorkloadError;
use crate::generator::{Arrival, Generator};
use crate::text::{decode_path, encode_path, fmt_duration, parse_duration, parse_f64};
use crate::trace::Trace;

/// A complete, reproducible workload: service times, deadlines, arrivals and seed.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Service-time distribution.
    pub dist: ServiceDist,
    /// How relative deadlines are derived.
    pub deadline: DeadlineRule,
    /// The arrival process.
    pub arrivals: ArrivalProcess,
    /// Seed of the generator's random streams.
    pub seed: u64,
}

impl WorkloadSpec {
    /// A spec with the defaults of the module documentation.
    pub fn new(dist: ServiceDist) -> Self {
        Self {
            dist,
            deadline: DeadlineRule::default(),
            arrivals: ArrivalProcess::default(),
            seed: 0,
        }
    }

    /// The same spec with another rate, checked as the parser checks a spec's own
    /// ([`validate`](Self::validate)). Refused for a trace, which sets its own arrival times.
    pub fn with_rate(mut self, rate: Rate) -> Result<Self, WorkloadError> {
        if matches!(self.arrivals, ArrivalProcess::Trace(_)) {
            return Err(WorkloadError::Inconsistent(TRACE_SETS_ITS_TIMES.into()));
        }
        self.arrivals.set_rate(rate);
        self.validate()?;
        Ok(self)
    }

    /// Checks the arrival process as the parser does: a rate (or load and workers) that is a
    /// positive number, from [`MIN_RATE_PER_SECOND`] to [`MAX_RATE_PER_SECOND`], and for
    /// `onoff` / `mmpp` positive sojourns, `low` in [0, 1] and cycles that expect an arrival
    /// often enough. A spec built
    /// or changed in code should pass it before it is run: a generator does not refuse a rate
    /// it cannot use, it gives no arrivals (or ends early).
    pub fn validate(&self) -> Result<(), WorkloadError> {
        check_arrivals(&self.arrivals, self.dist.mean())
    }

    /// The same spec with another seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The keys the text of a spec gives itself (`seed`, `rate`, `load`, `workers`, …, in the
    /// grammar's order), so that a caller with defaults of its own can tell a value the user
    /// wrote from one the spec defaulted. Only the items are read: the distribution, `file:PATH`
    /// included, is not a key (`file:runs/seed=3/m.mix` gives none), and no file is loaded.
    pub fn keys_given(text: &str) -> Result<Vec<&'static str>, WorkloadError> {
        let items = Items::split(text)?;
        Ok(KEYS.iter().copied().filter(|k| items.get(k).is_some()).collect())
    }

    /// Average arrival rate in requests per second (`None` for a trace).
    pub fn rate_per_second(&self) -> Option<f64> {
        self.arrivals.rate().map(|r| r.per_second(self.dist.mean()))
    }

    /// An infinite (finite for a trace) iterator over the workload's arrivals.
    pub fn generator(&self) -> Generator {
        Generator::new(self)
    }

    /// The first `n` arrivals (fewer if the stream ends first: a trace's end, or a synthetic
    /// stream's at [`MAX_TIME`](crate::MAX_TIME)). Nothing is reserved ahead for `n`.
    pub fn generate(&self, n: usize) -> Vec<Arrival> {
        self.generator().take(n).collect()
    }
}

impl fmt::Display for ServiceDist {
    /// `NAME[,scale=S][,truncate=DURATION]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())?;
        if self.scale() != 1.0 {
            write!(f, ",scale={}", self.scale())?;
        }
        if let Some(cap) = self.truncation() {
            write!(f, ",truncate={}", fmt_duration(cap))?;
        }
        Ok(())
    }
}

impl FromStr for ServiceDist {
    type Err = WorkloadError;

    /// Parses `NAME[,scale=S][,truncate=DURATION]` (other keys are refused).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let items = Items::split(s)?;
        let dist_keys = ["scale", "truncate"];
        if let Some(key) =
            KEYS.iter().filter(|k| !dist_keys.contains(k)).find(|k| items.get(k).is_some())
        {
            return Err(WorkloadError::Inconsistent(format!(
                "`{key}` belongs to a workload spec, not to a distribution"
            )));
        }
        items.dist()
    }
}

impl fmt::Display for WorkloadSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},deadline={}", self.dist, self.deadline)?;
        let write_rate = |f: &mut fmt::Formatter<'_>, rate: &Rate| match rate {
            Rate::PerSecond(r) => write!(f, ",rate={r}"),
            Rate::Load { load, workers } => write!(f, ",load={load},workers={workers}"),
        };
        match &self.arrivals {
            ArrivalProcess::Poisson { rate } => {
                f.write_str(",arrivals=poisson")?;
                write_rate(f, rate)?;
            }
            ArrivalProcess::Mmpp { rate, on, off, low } => {
                f.write_str(if *low == 0.0 { ",arrivals=onoff" } else { ",arrivals=mmpp" })?;
                write_rate(f, rate)?;
                write!(f, ",on={},off={}", fmt_duration(*on), fmt_duration(*off))?;
                if *low != 0.0 {
                    write!(f, ",low={low}")?;
                }
            }
            ArrivalProcess::Trace(t) => write!(f, ",arrivals=trace:{}", encode_path(t.path()))?,
        }
        write!(f, ",seed={}", self.seed)
    }
}

const KEYS: [&str; 11] = [
    "scale", "truncate", "deadline", "arrivals", "rate", "load", "workers", "on", "off", "low",
    "seed",
];

/// A spec split into its distribution name and `key=value` items.
struct Items<'a> {
    name: &'a str,
    values: [Option<&'a str>; KEYS.len()],
}

impl<'a> Items<'a> {
    fn split(s: &'a str) -> Result<Self, WorkloadError> {
        let mut items = s.split(',').map(str::trim);
        let name = items.next().unwrap_or("");
        let mut values: [Option<&str>; KEYS.len()] = [None; KEYS.len()];
        for item in items {
            let (key, value) =
                item.split_once('=').ok_or_else(|| WorkloadError::UnknownKey(item.to_owned()))?;
            let key = key.trim();
            let i = KEYS
                .iter()
                .position(|k| *k == key)
                .ok_or_else(|| WorkloadError::UnknownKey(item.to_owned()))?;
            if values[i].replace(value.trim()).is_some() {
                return Err(WorkloadError::DuplicateKey(key.to_owned()));
            }
        }
        Ok(Self { name, values })
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        KEYS.iter().position(|k| *k == key).and_then(|i| self.values[i])
    }

    /// The distribution: the name plus `scale` and `truncate`.
    fn dist(&self) -> Result<ServiceDist, WorkloadError> {
        let mut dist = if let Some(path) = self.name.strip_prefix("file:") {
            let path = decode_path(path).map_err(|m| WorkloadError::bad_value("file", m))?;
            ServiceDist::from_file(&path)?
        } else {
            let preset = Preset::from_name(self.name)
                .ok_or_else(|| WorkloadError::UnknownDistribution(self.name.to_owned()))?;
            ServiceDist::preset(preset)
        };
        if let Some(v) = self.get("scale") {
            let scale = parse_f64(v).map_err(|m| WorkloadError::bad_value("scale", m))?;
            dist = dist.with_scale(scale)?;
        }
        if let Some(v) = self.get("truncate") {
            let cap = parse_duration(v).map_err(|m| WorkloadError::bad_value("truncate", m))?;
            dist = dist.with_truncation(Some(cap))?;
        }
        Ok(dist)
    }
}

impl FromStr for WorkloadSpec {
    type Err = WorkloadError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let items = Items::split(s)?;
        let get = |key: &str| items.get(key);
        let dist = items.dist()?;
        let deadline = get("deadline").map(str::parse).transpose()?.unwrap_or_default();
        let seed = match get("seed") {
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| WorkloadError::bad_value("seed", format!("`{v}` is not a u64")))?,
            None => 0,
        };

        let positive = |key: &str| -> Result<Option<f64>, WorkloadError> {
            get(key)
                .map(|v| match parse_f64(v) {
                    Ok(x) if x > 0.0 => Ok(x),
                    Ok(x) => Err(WorkloadError::bad_value(key, format!("{x} must be > 0"))),
                    Err(m) => Err(WorkloadError::bad_value(key, m)),
                })
                .transpose()
        };
        let rate_value = positive("rate")?;
        let load_value = positive("load")?;
        let workers = match get("workers") {
            Some(v) => match v.parse::<u32>() {
                Ok(w) if w > 0 => Some(w),
                _ => {
                    return Err(WorkloadError::bad_value(
                        "workers",
                        format!("`{v}` is not a positive integer"),
                    ));
                }
            },
            None => None,
        };
        let rate = match (rate_value, load_value, workers) {
            (Some(_), Some(_), _) => {
                return Err(WorkloadError::Inconsistent("give `rate` or `load`, not both".into()));
            }
            (Some(_), None, Some(_)) => {
                return Err(WorkloadError::Inconsistent("`workers` goes with `load`".into()));
            }
            (Some(r), None, None) => Some(Rate::PerSecond(r)),
            (None, Some(load), w) => Some(Rate::Load { load, workers: w.unwrap_or(1) }),
            (None, None, Some(w)) => Some(Rate::Load { load: 0.5, workers: w }),
            (None, None, None) => None,
        };

        let duration = |key: &str, default| -> Result<_, WorkloadError> {
            match get(key) {
                Some(v) => match parse_duration(v) {
                    Ok(d) if d > 0 => Ok(d),
                    Ok(_) => Err(WorkloadError::bad_value(key, "must be > 0")),
                    Err(m) => Err(WorkloadError::bad_value(key, m)),
                },
                None => Ok(default),
            }
        };
        let bursty_keys = ["on", "off", "low"].into_iter().filter(|k| get(k).is_some());
        let arrivals_name = get("arrivals").unwrap_or("poisson");
        let arrivals = match arrivals_name {
            "poisson" | "onoff" | "mmpp" => {
                let rate = rate.unwrap_or_default();
                if arrivals_name == "poisson" {
                    if let Some(k) = bursty_keys.clone().next() {
                        return Err(WorkloadError::Inconsistent(format!(
                            "`{k}` applies only to arrivals=onoff or arrivals=mmpp"
                        )));
                    }
                    ArrivalProcess::Poisson { rate }
                } else {
                    let on = duration("on", ArrivalProcess::DEFAULT_ON)?;
                    let off = duration("off", ArrivalProcess::DEFAULT_OFF)?;
                    let low = match get("low") {
                        Some(_) if arrivals_name == "onoff" => {
                            return Err(WorkloadError::Inconsistent(
                                "`low` applies only to arrivals=mmpp (onoff has low=0)".into(),
                            ));
                        }
                        Some(v) => match parse_f64(v) {
                            Ok(x) if (0.0..=1.0).contains(&x) => x,
                            _ => {
                                return Err(WorkloadError::bad_value(
                                    "low",
                                    format!("`{v}` is not a number in [0, 1]"),
                                ));
                            }
                        },
                        None => 0.0,
                    };
                    ArrivalProcess::Mmpp { rate, on, off, low }
                }
            }
            other => {
                let Some(path) = other.strip_prefix("trace:") else {
                    return Err(WorkloadError::UnknownArrivals(other.to_owned()));
                };
                if rate.is_some() || bursty_keys.clone().next().is_some() {
                    return Err(WorkloadError::Inconsistent(TRACE_SETS_ITS_TIMES.into()));
                }
                let path =
                    decode_path(path).map_err(|m| WorkloadError::bad_value("arrivals", m))?;
                ArrivalProcess::Trace(Trace::load(&path)?)
            }
        };
        check_arrivals(&arrivals, dist.mean())?;
        Ok(Self { dist, deadline, arrivals, seed })
    }
}

/// Why a trace takes no rate.
const TRACE_SETS_ITS_TIMES: &str =
    "a trace sets its own arrival times: no rate, load, workers, on, off or low";

/// The checks of [`WorkloadSpec::validate`], for a distribution of mean `mean` (ns).
fn check_arrivals(arrivals: &ArrivalProcess, mean: f64) -> Result<(), WorkloadError> {
    let rate = match arrivals {
        ArrivalProcess::Poisson { rate } | ArrivalProcess::Mmpp { rate, .. } => *rate,
        ArrivalProcess::Trace(_) => return Ok(()),
    };
    let key = match rate {
        Rate::PerSecond(r) if !(r.is_finite() && r > 0.0) => {
            return Err(WorkloadError::bad_value("rate", format!("{r} must be > 0")));
        }
        Rate::PerSecond(_) => "rate",
        Rate::Load { load, .. } if !(load.is_finite() && load > 0.0) => {
            return Err(WorkloadError::bad_value("load", format!("{load} must be > 0")));
        }
        Rate::Load { workers: 0, .. } => {
            return Err(WorkloadError::bad_value("workers", "0 is not a positive integer"));
        }
        Rate::Load { .. } => "load",
    };
    // A rate so low that an arrival is not expected for ages makes a bursty process
    // switch states without end before its first arrival (and overflows the time).
    let per_second = rate.per_second(mean);
    if per_second.is_nan() || per_second < MIN_RATE_PER_SECOND {
        return Err(WorkloadError::bad_value(
            key,
            format!(
                "{per_second:e} requests/s is below the least the generator takes, \
                 {MIN_RATE_PER_SECOND} (one a quarter of an hour)"
            ),
        ));
    }
    // Arrival instants are whole nanoseconds: a faster rate piles arrivals onto the same
    // instants (an infinite one, from a huge `load` over a short mean, onto 0).
    if per_second > MAX_RATE_PER_SECOND {
        return Err(WorkloadError::bad_value(
            key,
            format!(
                "{per_second:e} requests/s is above the most the generator takes, \
                 {MAX_RATE_PER_SECOND:e} (one a nanosecond)"
            ),
        ));
    }
    if let ArrivalProcess::Mmpp { on, off, low, .. } = arrivals {
        for (key, d) in [("on", on), ("off", off)] {
            if *d == 0 {
                return Err(WorkloadError::bad_value(key, "must be > 0"));
            }
        }
        if !(0.0..=1.0).contains(low) {
            return Err(WorkloadError::bad_value("low", format!("{low} is not in [0, 1]")));
        }
        // A bursty process draws its state changes one by one, and gives up (ends the stream)
        // after the generator's budget of them: cycles so short that hardly any has an arrival
        // would cost millions of draws per arrival, and could spend the budget.
        // In f64: each sojourn may be up to u64::MAX ns, their sum past it.
        let per_cycle = per_second / 1e9 * (*on as f64 + *off as f64);
        if per_cycle < MIN_ARRIVALS_PER_CYCLE {
            return Err(WorkloadError::Inconsistent(format!(
                "{per_cycle:e} arrivals per on/off cycle: lengthen `on`/`off` or raise the \
                 rate (at least {MIN_ARRIVALS_PER_CYCLE:e}, one per {} cycles, so that the \
                 generator, which draws at most {} state changes looking for an arrival, \
                 never ends the stream early)",
                1.0 / MIN_ARRIVALS_PER_CYCLE,
                crate::generator::MAX_SWITCHES
            )));
        }
    }
    Ok(())
}

/// The lowest arrival rate a spec may ask for (per second): one request in ~17 minutes.
pub const MIN_RATE_PER_SECOND: f64 = 1e-3;

/// The highest average arrival rate a spec may ask for (per second): one request a nanosecond,
/// the resolution of arrival instants.
pub const MAX_RATE_PER_SECOND: f64 = 1e9;

/// The fewest arrivals an on/off or MMPP cycle may expect: one per 10 000 cycles.
///
/// With m arrivals expected per cycle, a cycle has none with probability at most 1 / (1 + m)
/// (exactly that for on/off; an MMPP's low state only adds arrivals), so the generator's
/// [`MAX_SWITCHES`](crate::generator::MAX_SWITCHES) state changes (2^23 cycles) all pass without
/// one with probability below (1 + m)^−2^23: e^−839 at this minimum, never in practice (at
/// 10⁻⁶ it would be e^−8.4, an early end every ~4 000 arrivals). A stream at the minimum
/// costs ~10⁴ cycles of draws per arrival.
pub(crate) const MIN_ARRIVALS_PER_CYCLE: f64 = 1e-4;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A file in a scratch directory of its own, both removed when dropped. Each file has its
    /// own directory: with one shared by the tests of a process, one test's clean-up could
    /// remove it between another's `create_dir_all` and `write`.
    struct TmpFile(PathBuf);

    impl Drop for TmpFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            if let Some(dir) = self.0.parent() {
                let _ = std::fs::remove_dir(dir);
            }
        }
    }

    impl std::ops::Deref for TmpFile {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }

    fn tmp(name: &str, contents: &str) -> TmpFile {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("luge-workload-spec-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, contents).unwrap();
        TmpFile(p)
    }

    /// Scratch files of concurrent tests do not share a directory, so that dropping one never
    /// removes the directory of another.
    #[test]
    fn each_scratch_file_has_a_directory_of_its_own() {
        let a = tmp("same.csv", "a");
        let b = tmp("same.csv", "b");
        assert_ne!(a.parent(), b.parent());
        let dir = b.parent().unwrap().to_owned();
        drop(a);
        assert!(dir.is_dir());
        assert_eq!(std::fs::read_to_string(&*b).unwrap(), "b");
        drop(b);
        assert!(!dir.exists());
    }

    fn round_trip(spec: &WorkloadSpec) {
        let text = spec.to_string();
        let back: WorkloadSpec = text.parse().unwrap_or_else(|e| panic!("`{text}`: {e}"));
        assert_eq!(&back, spec, "{text}");
        assert_eq!(back.to_string(), text);
    }

    /// Rates so low that no arrival is expected for ages are refused, naming the key.
    #[test]
    fn vanishing_rates_are_refused() {
        for (text, key) in [
            ("fixed,arrivals=onoff,rate=1e-300", "rate"),
            ("fixed,rate=0.0001", "rate"),
            ("fixed,load=1e-300", "load"),
            ("exponential,arrivals=mmpp,load=1e-12", "load"),
            ("fixed,arrivals=onoff,rate=0.001,on=1ns,off=1ns", "per on/off cycle"),
        ] {
            let err = text.parse::<WorkloadSpec>().unwrap_err().to_string();
            assert!(err.contains(key), "{text}: {err}");
        }
        assert!("fixed,rate=0.001".parse::<WorkloadSpec>().is_ok());
    }

    /// The per-cycle minimum keeps the generator's budget of state changes out of reach: a
    /// spec with fewer arrivals per cycle, which would end early now and then, is refused
    /// (`rate=0.001` with 1 ms cycles expects 10⁻⁶ per cycle) and says why.
    #[test]
    fn cycles_too_empty_for_the_generators_budget_are_refused() {
        let text = "fixed,arrivals=onoff,rate=0.001,on=500us,off=500us";
        let err = text.parse::<WorkloadSpec>().unwrap_err().to_string();
        assert!(err.contains("per on/off cycle") && err.contains("ends the stream early"), "{err}");
        assert!("fixed,arrivals=onoff,rate=0.1,on=500us,off=500us".parse::<WorkloadSpec>().is_ok());
        // P(2^23 cycles without an arrival) at the minimum: negligible.
        let cycles = f64::from(crate::generator::MAX_SWITCHES / 2);
        let ln_p_early_end = -cycles * MIN_ARRIVALS_PER_CYCLE.ln_1p();
        assert!(ln_p_early_end < -690.0, "{ln_p_early_end}");
    }

    /// Sojourns that fit a u64 each but not summed are read, not overflowed (a panic in a
    /// debug build).
    #[test]
    fn long_sojourns_do_not_overflow() {
        let text = "fixed,arrivals=onoff,on=10000000000s,off=10000000000s";
        let spec: WorkloadSpec = text.parse().unwrap();
        assert!(matches!(
            spec.arrivals,
            ArrivalProcess::Mmpp { on: 10_000_000_000_000_000_000, .. }
        ));
        round_trip(&spec);
    }

    /// Rates past one a nanosecond are refused, an infinite one (a huge load) included.
    #[test]
    fn absurd_rates_are_refused() {
        for (text, key) in [
            ("fixed,load=1e308,workers=2", "`load`"),
            ("fixed,rate=1e15", "`rate`"),
            ("fixed,scale=1e-6,load=0.9,workers=8", "`load`"),
        ] {
            let err = text.parse::<WorkloadSpec>().unwrap_err().to_string();
            assert!(err.contains(key) && err.contains("above the most"), "{text}: {err}");
        }
        assert!("fixed,rate=1e9".parse::<WorkloadSpec>().is_ok());
        let spec: WorkloadSpec = "fixed".parse().unwrap();
        assert!(spec.with_rate(Rate::Load { load: 1e308, workers: 2 }).is_err());
    }

    /// A rate given in code is checked as one in the text: `luge sim --load 0`, `--rate nan`
    /// or a rate too low for on/off cycles must not run a workload without arrivals. A trace
    /// takes no rate at all, rather than ignoring it.
    #[test]
    fn with_rate_checks_the_rate_as_the_parser_does() {
        let base: WorkloadSpec = "fixed,seed=3".parse().unwrap();
        for (rate, key) in [
            (Rate::Load { load: 0.0, workers: 4 }, "`load`"),
            (Rate::Load { load: -1.0, workers: 4 }, "`load`"),
            (Rate::Load { load: f64::NAN, workers: 4 }, "`load`"),
            (Rate::Load { load: 0.5, workers: 0 }, "`workers`"),
            (Rate::PerSecond(f64::NAN), "`rate`"),
            (Rate::PerSecond(-1.0), "`rate`"),
            (Rate::PerSecond(1e-6), "`rate`"),
        ] {
            let err = base.clone().with_rate(rate).unwrap_err().to_string();
            assert!(err.contains(key), "{rate:?}: {err}");
        }
        let onoff: WorkloadSpec = "fixed,arrivals=onoff,on=1ns,off=1ns".parse().unwrap();
        let err = onoff.with_rate(Rate::PerSecond(0.001)).unwrap_err().to_string();
        assert!(err.contains("per on/off cycle"), "{err}");
        let spec = base.with_rate(Rate::Load { load: 0.8, workers: 2 }).unwrap();
        assert_eq!(spec.arrivals.rate(), Some(Rate::Load { load: 0.8, workers: 2 }));
        assert_eq!(spec.seed, 3);

        let trace = tmp("rate.csv", "arrival_us\n0\n");
        let t: WorkloadSpec = format!("fixed,arrivals=trace:{}", trace.display()).parse().unwrap();
        assert!(t.validate().is_ok());
        let err = t.with_rate(Rate::PerSecond(1.0)).unwrap_err().to_string();
        assert!(err.contains("own arrival times"), "{err}");
    }

    /// The keys a spec's text gives are its items', never words inside a path.
    #[test]
    fn keys_given_are_the_items_of_the_text() {
        let keys = |t: &str| WorkloadSpec::keys_given(t).unwrap();
        assert_eq!(keys("exponential,seed=7, load=0.8"), ["load", "seed"]);
        assert_eq!(keys("fixed,truncate=1s,deadline=10x"), ["truncate", "deadline"]);
        assert!(keys("file:runs/seed=3/rate=5/m.mix").is_empty());
        assert!(keys("file:/nonexistent/load=1.mix,workers=2").contains(&"workers"));
        assert!(WorkloadSpec::keys_given("fixed,seed=1,seed=2").is_err());
    }

    #[test]
    fn every_name_round_trips() {
        for name in Preset::NAMES {
            let spec: WorkloadSpec = name.parse().unwrap();
            assert_eq!(
                spec,
                WorkloadSpec::new(ServiceDist::preset(Preset::from_name(name).unwrap()))
            );
            round_trip(&spec);
            let dist: ServiceDist = name.parse().unwrap();
            assert_eq!(dist.to_string(), name);
        }
        let mix = tmp("rt weird,%.mix", "a 10 1\nb 20..30 3 500\n");
        let spec_text = format!("file:{},seed=3", encode_path(&mix));
        let spec: WorkloadSpec = spec_text.parse().unwrap();
        assert_eq!(spec.dist.classes().len(), 2);
        round_trip(&spec);
        round_trip(&spec.clone().with_rate(Rate::PerSecond(1234.5)).unwrap());
    }

    #[test]
    fn options_round_trip() {
        let trace = tmp("rt.csv", "arrival_us,execution_us\n0,10\n5,20\n");
        let texts = [
            "lognormal,truncate=1s,deadline=class:10x,arrivals=poisson,load=0.9,workers=2,seed=7",
            "azure,scale=0.001,deadline=2.5x,arrivals=poisson,rate=100000,seed=18446744073709551615",
            "edgert-bimodal,deadline=5ms,arrivals=onoff,load=1.2,workers=4,on=1ms,off=3ms,seed=1",
            "sdvbs,deadline=class:2x,arrivals=mmpp,rate=14400,on=500us,off=2500us,low=0.25,seed=2",
            "exponential,truncate=1500ns,deadline=10x,arrivals=poisson,load=0.1,workers=1,seed=0",
        ];
        for t in texts {
            let spec: WorkloadSpec = t.parse().unwrap();
            assert_eq!(spec.to_string(), t);
            round_trip(&spec);
        }
        let t = format!("fixed,deadline=10x,arrivals=trace:{},seed=0", encode_path(&trace));
        let spec: WorkloadSpec = t.parse().unwrap();
        assert_eq!(spec.to_string(), t);
        assert_eq!(spec.rate_per_second(), None);
        round_trip(&spec);
    }

    #[test]
    fn defaults_and_rates() {
        let spec: WorkloadSpec = " exponential , load=0.8 , workers=6 ".parse().unwrap();
        assert!((spec.rate_per_second().unwrap() - 48_000.0).abs() < 1e-6);
        assert_eq!(spec.deadline, DeadlineRule::ClassOr(10.0));
        assert_eq!(spec.seed, 0);
        let onoff: WorkloadSpec = "fixed,arrivals=onoff".parse().unwrap();
        assert_eq!(
            onoff.arrivals,
            ArrivalProcess::Mmpp {
                rate: Rate::default(),
                on: 10_000_000,
                off: 30_000_000,
                low: 0.0
            }
        );
        let w: WorkloadSpec = "fixed,workers=2".parse().unwrap();
        assert_eq!(w.arrivals.rate(), Some(Rate::Load { load: 0.5, workers: 2 }));
    }

    #[test]
    fn bad_specs_say_why() {
        let cases = [
            ("", "unknown distribution"),
            ("gaussian", "unknown distribution `gaussian`"),
            ("fixed,speed=3", "unknown spec item `speed=3`"),
            ("fixed,seed", "unknown spec item `seed`"),
            ("fixed,seed=1,seed=2", "duplicate spec key `seed`"),
            ("fixed,seed=-1", "bad value for `seed`"),
            ("fixed,rate=10,load=0.5", "not both"),
            ("fixed,rate=10,workers=2", "`workers` goes with `load`"),
            ("fixed,load=0", "bad value for `load`"),
            ("fixed,workers=0", "bad value for `workers`"),
            ("fixed,on=1ms", "`on` applies only"),
            ("fixed,arrivals=onoff,low=0.5", "`low` applies only to arrivals=mmpp"),
            ("fixed,arrivals=mmpp,low=2", "bad value for `low`"),
            ("fixed,arrivals=mmpp,off=0ms", "bad value for `off`"),
            ("fixed,arrivals=bursty", "unknown arrival process `bursty`"),
            ("fixed,truncate=1s", "continuous"),
            ("lognormal,truncate=1", "bad value for `truncate`"),
            ("fixed,scale=-2", "bad value for `scale`"),
            ("fixed,deadline=soon", "bad value for `deadline`"),
            ("file:/nonexistent/luge.mix", "cannot read /nonexistent/luge.mix"),
            ("fixed,arrivals=trace:/nonexistent/t.csv", "cannot read"),
        ];
        for (text, needle) in cases {
            let err = text.parse::<WorkloadSpec>().unwrap_err().to_string();
            assert!(err.contains(needle), "`{text}` → {err}");
        }
        let trace = tmp("bad.csv", "arrival_us\n0\n");
        let t = format!("fixed,arrivals=trace:{},rate=5", trace.display());
        assert!(t.parse::<WorkloadSpec>().unwrap_err().to_string().contains("own arrival"));
        let bad_mix = tmp("bad.mix", "ok 10 1\nbad 10\n");
        let err = format!("file:{}", bad_mix.display()).parse::<WorkloadSpec>().unwrap_err();
        assert!(
            err.to_string().ends_with(
                "bad.mix:2: expected `name execution_us weight [deadline_us]`, found 2 field(s)"
            ),
            "{err}"
        );
        assert!("fixed,seed=3".parse::<ServiceDist>().is_err());
        assert!("fixed,deadline=10x".parse::<ServiceDist>().is_err());
        assert!("lognormal,scale=2,truncate=1s".parse::<ServiceDist>().is_ok());
    }

    fn arb_rate() -> impl proptest::strategy::Strategy<Value = Rate> {
        use proptest::prelude::*;
        prop_oneof![
            (1e-3f64..1e9).prop_map(Rate::PerSecond),
            (1e-3f64..10.0, 1u32..512).prop_map(|(load, workers)| Rate::Load { load, workers }),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any spec built from valid parts prints and reads back equal.
        #[test]
        fn random_specs_round_trip(
            preset in 0usize..Preset::ALL.len(),
            scale in proptest::option::of(1e-6f64..1e3),
            cap in 1u64..u64::MAX / 4,
            truncate in proptest::bool::ANY,
            rule in 0u8..3,
            k in 1e-3f64..1e3,
            fixed in 1u64..u64::MAX,
            kind in 0u8..3,
            rate in arb_rate(),
            on in 1u64..10_000_000_000,
            off in 1u64..10_000_000_000,
            low in 0.0f64..=1.0,
            seed in proptest::num::u64::ANY,
        ) {
            let mut dist = ServiceDist::preset(Preset::ALL[preset]);
            if let Some(scale) = scale {
                dist = dist.with_scale(scale).unwrap();
            }
            if truncate && let Ok(d) = dist.with_truncation(Some(cap)) {
                dist = d;
            }
            let deadline = match rule {
                0 => DeadlineRule::Multiple(k),
                1 => DeadlineRule::Fixed(fixed),
                _ => DeadlineRule::ClassOr(k),
            };
            let arrivals = match kind {
                0 => ArrivalProcess::Poisson { rate },
                1 => ArrivalProcess::Mmpp { rate, on, off, low: 0.0 },
                _ => ArrivalProcess::Mmpp { rate, on, off, low },
            };
            let spec = WorkloadSpec { dist, deadline, arrivals, seed };
            // Random parts can make a rate the parser refuses (a tiny scale's huge `load`
            // rate, cycles too short for a low rate): then so must `validate`, and vice versa.
            match spec.validate() {
                Ok(()) => round_trip(&spec),
                Err(e) => {
                    let text = spec.to_string();
                    proptest::prop_assert!(text.parse::<WorkloadSpec>().is_err(), "{text}: {e}");
                }
            }
        }
    }
}
