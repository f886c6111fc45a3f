//! Service-time (execution-time) distributions: the published workloads and user mixes.
//!
//! One file on purpose (above ~600 lines): the distributions, their parser and the table of named
//! workloads below are one concern, and ~260 of its lines are the tests that pin each workload
//! to its source table.
//!
//! # The named workloads
//!
//! | name | source | classes (tag: name, execution, share of requests) |
//! |---|---|---|
//! | `fixed` | SledgeScale §4 Table 3 | 0 `fixed` 10 µs 100 % |
//! | `high-bimodal` | Table 3 (Image Resizing / Image Classification) | 0 `short` 26 µs 50 %, 1 `long` 2070 µs 50 % |
//! | `extreme-bimodal` | Table 3 | 0 `short` 10 µs 99.5 %, 1 `long` 10 ms 0.5 % |
//! | `sdvbs` | Table 3 (SD-VBS) | 0 `sift` 113 µs 90 %, 1 `segmentation` 1100 µs 9 %, 2 `classification` 2070 µs 1 % |
//! | `exponential` | Table 3: Exp(μ = 1) × 100 µs | 0 `short` ≤ median, 1 `long` > median |
//! | `lognormal` | Table 3: LogNormal(μ = −0.38, σ = 2.36) s ÷ 1000 | 0 `short` ≤ median, 1 `long` > median |
//! | `edgert-bimodal` | Edge-RT §VI | 0 `light` 40 µs (deadline 10 ms), 1 `heavy` 5 ms (deadline 500 ms) |
//! | `azure` | SFS §VII Table I | five duration buckets, below |
//! | `file:PATH` | a mix file (see `mix.rs`) | one class per line |
//!
//! **Exponential.** SledgeScale uses μ = 1 "scaled up by a factor of 100": mean θ = 100 µs,
//! median θ·ln 2 = 69.3 µs (Table 3 prints "69 (median)").
//!
//! **Log-normal.** The Azure-trace parameters μ = −0.38, σ = 2.36 are in seconds; SledgeScale
//! scales execution times down by 1000, i.e. X = exp(N(μ, σ²)) *milliseconds*. Median
//! e^μ ms = 683.9 µs (Table 3: "683 (median)"); mean e^(μ+σ²/2) ms = 11.08 ms; p99 ≈ 166 ms
//! (the paper: "the 99th percentile of requests exceeds 140 milliseconds"); p99.99 ≈ 4.4 s.
//!
//! SledgeScale splits both continuous distributions "evenly … into two groups" at the median for
//! DARC (§4), so their samples are tagged class 0 (≤ median) and 1 (> median).
//!
//! **Edge-RT bimodal.** §VI: light tasks execute 40 µs (deadline 10 ms), heavy ones 5 ms (deadline
//! 500 ms), and "light tasks comprise 80 % of the total execution". The share of *requests* follows:
//! n_light · 40 µs / (n_heavy · 5 ms) = 0.8 / 0.2 ⇒ n_light : n_heavy = 4 · 5000 / 40 = 500 : 1, so
//! P(light) = 500/501 ≈ 99.80 % and the mean execution is 25 000/501 ≈ 49.9 µs. The weights are
//! computed from [`EDGERT_LIGHT_WORK_SHARE`] in code, not typed in.
//!
//! **Azure (SFS Table I).** FaaSBench's distribution of function duration (Azure Functions,
//! Day 1), encoded as uniform ranges (milliseconds; the fib N column of the paper is FaaSBench's
//! knob for hitting the range and has no meaning here):
//!
//! | tag | class | range | Table I | normalised |
//! |---|---|---|---|---|
//! | 0 | `0-50ms` | (0, 50] ms | 40.6 % | 42.47 % |
//! | 1 | `50-100ms` | [50, 100] ms | 9.8 % | 10.25 % |
//! | 2 | `100-200ms` | [100, 200] ms | 6.8 % | 7.11 % |
//! | 3 | `200-400ms` | [200, 400] ms | 22.7 % | 23.74 % |
//! | 4 | `1550ms+` | [1550, 2508] ms | 15.7 % | 16.42 % |
//!
//! The table's ranges are non-contiguous and sum to 95.6 %: per the paper each missing range
//! (400–1550 ms) has < 1 % probability and FaaSBench does not generate it, so neither do we; the
//! five probabilities are renormalised by 1/0.956. The last range is open-ended in the paper
//! ("≥ 1550 ms", fib N = 34–35); fib's cost grows by φ ≈ 1.618 per step of N, so we close it at
//! 1550 · φ ≈ 2508 ms, the duration of N = 35 if N = 34 takes 1550 ms. Mean ≈ 433 ms. Combine
//! with `scale=0.001` for a µs-range version (as SledgeScale did for the Azure log-normal).
//!
//! # Options
//!
//! - `scale` multiplies the whole time axis of the distribution: executions and the classes'
//!   fixed deadlines (default 1). A scaled deadline is rounded to whole nanoseconds and is at
//!   least 1 ns (a deadline of 0 cannot be met, and mix files refuse one).
//! - `truncate` (exponential and log-normal only; default off) replaces X by X | X ≤ cap — the
//!   *conditional* distribution, sampled exactly by inverse CDF on [0, F(cap)], so there is no
//!   atom at the cap. Mean, second moment, median and class split are recomputed in closed form
//!   for the truncated law (the class split is the truncated median, so classes stay 50:50). The
//!   simulator uses the untruncated log-normal; the real runtime should use
//!   [`LOGNORMAL_RUNTIME_TRUNCATION`] × `scale` (1 s ≈ the untruncated p99.9 at scale 1) because
//!   requests of seconds (p99.99 ≈ 4.4 s) would dominate a 20 s run on a small machine.
//!
//! # Sampling
//!
//! Every sample consumes exactly one `u64` of the [`Rng`]: continuous laws use the inverse CDF,
//! mixes pick the class from the uniform and reuse its residual for the position inside a uniform
//! range. Executions are rounded to whole nanoseconds and floored at 1 ns.

use std::path::{Path, PathBuf};

use luge_sched::Nanos;

use crate::error::WorkloadError;
use crate::math::{norm_cdf, norm_inv};
use crate::mix::{Mix, MixClass};
use crate::rng::Rng;

/// Share of the total *work* done by light requests in Edge-RT's bimodal workload
/// (Edge-RT §VI: "light tasks comprise 80% of the total execution").
pub const EDGERT_LIGHT_WORK_SHARE: f64 = 0.8;

/// The truncation the real runtime should apply to `lognormal` at scale 1 (1 s, ≈ the
/// untruncated p99.9; see the module documentation), times the spec's `scale` otherwise, so that
/// it stays at that quantile. Not applied by default.
pub const LOGNORMAL_RUNTIME_TRUNCATION: Nanos = 1_000_000_000;

const US: Nanos = 1_000;
const MS: Nanos = 1_000_000;

/// The named workloads (see the module documentation for their definitions and sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Preset {
    /// `fixed`: 10 µs (SledgeScale Table 3).
    Fixed,
    /// `high-bimodal`: 26 µs / 2070 µs, 50:50 (SledgeScale Table 3).
    HighBimodal,
    /// `extreme-bimodal`: 10 µs / 10 ms, 99.5:0.5 (SledgeScale Table 3).
    ExtremeBimodal,
    /// `sdvbs`: 113 / 1100 / 2070 µs, 90:9:1 (SledgeScale Table 3).
    SdVbs,
    /// `exponential`: mean 100 µs (SledgeScale Table 3).
    Exponential,
    /// `lognormal`: μ = −0.38, σ = 2.36, in ms (SledgeScale Table 3).
    LogNormal,
    /// `edgert-bimodal`: 40 µs / 5 ms with 80 % of the work light (Edge-RT §VI).
    EdgeRtBimodal,
    /// `azure`: the five duration buckets of SFS Table I.
    Azure,
}

impl Preset {
    /// Every preset, in documentation order.
    pub const ALL: [Preset; 8] = [
        Preset::Fixed,
        Preset::HighBimodal,
        Preset::ExtremeBimodal,
        Preset::SdVbs,
        Preset::Exponential,
        Preset::LogNormal,
        Preset::EdgeRtBimodal,
        Preset::Azure,
    ];

    /// The names accepted in a spec, in the order of [`ALL`](Self::ALL).
    pub const NAMES: [&'static str; 8] = [
        "fixed",
        "high-bimodal",
        "extreme-bimodal",
        "sdvbs",
        "exponential",
        "lognormal",
        "edgert-bimodal",
        "azure",
    ];

    /// The spec name of this preset.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Fixed => Self::NAMES[0],
            Preset::HighBimodal => Self::NAMES[1],
            Preset::ExtremeBimodal => Self::NAMES[2],
            Preset::SdVbs => Self::NAMES[3],
            Preset::Exponential => Self::NAMES[4],
            Preset::LogNormal => Self::NAMES[5],
            Preset::EdgeRtBimodal => Self::NAMES[6],
            Preset::Azure => Self::NAMES[7],
        }
    }

    /// The preset with this spec name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::NAMES.iter().position(|n| *n == name).map(|i| Self::ALL[i])
    }

    fn base(self) -> Base {
        // Valid by construction (`presets_are_valid_and_named` checks them with `Mix::new`).
        let mix = |classes: Vec<MixClass>| Base::Mix(Mix::trusted(classes));
        match self {
            Preset::Fixed => mix(vec![MixClass::point("fixed", 10 * US, 1.0)]),
            Preset::HighBimodal => mix(vec![
                MixClass::point("short", 26 * US, 50.0),
                MixClass::point("long", 2070 * US, 50.0),
            ]),
            Preset::ExtremeBimodal => mix(vec![
                MixClass::point("short", 10 * US, 99.5),
                MixClass::point("long", 10 * MS, 0.5),
            ]),
            Preset::SdVbs => mix(vec![
                MixClass::point("sift", 113 * US, 90.0),
                MixClass::point("segmentation", 1100 * US, 9.0),
                MixClass::point("classification", 2070 * US, 1.0),
            ]),
            Preset::EdgeRtBimodal => {
                let (light, heavy) = (40 * US, 5 * MS);
                // Requests ∝ work share / execution (500 : 1, see the module documentation).
                let w_light = EDGERT_LIGHT_WORK_SHARE / light as f64;
                let w_heavy = (1.0 - EDGERT_LIGHT_WORK_SHARE) / heavy as f64;
                mix(vec![
                    MixClass::point("light", light, w_light).with_deadline(10 * MS),
                    MixClass::point("heavy", heavy, w_heavy).with_deadline(500 * MS),
                ])
            }
            Preset::Azure => mix(vec![
                MixClass::uniform("0-50ms", 0, 50 * MS, 40.6),
                MixClass::uniform("50-100ms", 50 * MS, 100 * MS, 9.8),
                MixClass::uniform("100-200ms", 100 * MS, 200 * MS, 6.8),
                MixClass::uniform("200-400ms", 200 * MS, 400 * MS, 22.7),
                MixClass::uniform("1550ms+", 1550 * MS, 2508 * MS, 15.7),
            ]),
            Preset::Exponential => Base::Exponential { mean: 100.0 * US as f64 },
            Preset::LogNormal => Base::LogNormal { mu: -0.38, sigma: 2.36, unit: MS as f64 },
        }
    }
}

/// Where a distribution comes from: a named preset or a mix file.
#[derive(Debug, Clone, PartialEq)]
pub enum DistSource {
    /// A named workload.
    Preset(Preset),
    /// A mix file (its path as given, and its parsed contents).
    File {
        /// The path, as written in the spec (relative paths are relative to the current
        /// directory).
        path: PathBuf,
        /// The parsed mix.
        mix: Mix,
    },
}

/// What a class of a distribution looks like (after `scale` and `truncate`).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassInfo {
    /// Class name (e.g. `short`, `sift`, `light`).
    pub name: String,
    /// Share of requests in this class.
    pub probability: f64,
    /// Mean execution time of the class (ns, exact/closed form).
    pub mean_execution: f64,
    /// The class's fixed relative deadline, if it has one (ns).
    pub deadline: Option<Nanos>,
}

#[derive(Debug, Clone, PartialEq)]
enum Base {
    Mix(Mix),
    /// Exponential with this mean (ns).
    Exponential {
        mean: f64,
    },
    /// exp(N(mu, sigma²)) × unit ns.
    LogNormal {
        mu: f64,
        sigma: f64,
        unit: f64,
    },
}

impl Base {
    /// The continuous law after scaling, or `None` for a mix.
    fn law(&self, scale: f64) -> Option<Law> {
        match *self {
            Base::Mix(_) => None,
            Base::Exponential { mean } => Some(Law::Exp { theta: mean * scale }),
            Base::LogNormal { mu, sigma, unit } => {
                Some(Law::LogNormal { mu: mu + (unit * scale).ln(), sigma })
            }
        }
    }
}

/// The compiled sampler.
#[derive(Debug, Clone, PartialEq)]
enum Model {
    /// Class i is uniform on `[lo[i], hi[i]]` (a point if equal), chosen with probability
    /// `cumulative[i] − cumulative[i−1]`.
    Mix { lo: Vec<f64>, hi: Vec<f64>, cumulative: Vec<f64> },
    /// Continuous law with quantile function Q; samples Q(u · cap_p), classified at `median`.
    Continuous { law: Law, cap_p: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Law {
    /// Exponential with mean `theta` (ns).
    Exp { theta: f64 },
    /// exp(N(mu, sigma²)) ns.
    LogNormal { mu: f64, sigma: f64 },
}

impl Law {
    fn cdf(self, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        match self {
            Law::Exp { theta } => -(-x / theta).exp_m1(),
            Law::LogNormal { mu, sigma } => norm_cdf((x.ln() - mu) / sigma),
        }
    }

    fn quantile(self, p: f64) -> f64 {
        match self {
            Law::Exp { theta } => -theta * (-p).ln_1p(),
            Law::LogNormal { mu, sigma } => (mu + sigma * norm_inv(p)).exp(),
        }
    }

    /// Partial moment E[X^k · 1{X ≤ a}] for k = 1, 2 (a = ∞ allowed).
    fn partial_moment(self, k: i32, a: f64) -> f64 {
        match self {
            Law::Exp { theta } => {
                let full = if k == 1 { theta } else { 2.0 * theta * theta };
                if a.is_infinite() {
                    return full;
                }
                let r = a / theta;
                let tail = if k == 1 { 1.0 + r } else { 1.0 + r + r * r / 2.0 };
                full * (1.0 - (-r).exp() * tail)
            }
            Law::LogNormal { mu, sigma } => {
                let kf = f64::from(k);
                let full = (kf * mu + kf * kf * sigma * sigma / 2.0).exp();
                if a.is_infinite() {
                    return full;
                }
                full * norm_cdf((a.ln() - mu - kf * sigma * sigma) / sigma)
            }
        }
    }
}

/// A service-time distribution: a preset or a mix file, optionally scaled and truncated.
///
/// Construct with [`ServiceDist::preset`] or [`ServiceDist::from_file`], adjust with
/// [`with_scale`](Self::with_scale) / [`with_truncation`](Self::with_truncation); it displays as
/// (and parses from) `NAME[,scale=S][,truncate=DURATION]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceDist {
    source: DistSource,
    scale: f64,
    truncate: Option<Nanos>,
    model: Model,
    classes: Vec<ClassInfo>,
    mean: f64,
    second_moment: f64,
    median: f64,
}

impl ServiceDist {
    /// A named workload, unscaled and untruncated.
    pub fn preset(preset: Preset) -> Self {
        Self::compile(DistSource::Preset(preset), 1.0, None)
    }

    /// A mix read from a mix file (see `mix.rs` for the format).
    pub fn from_file(path: &Path) -> Result<Self, WorkloadError> {
        let mix = Mix::load(path)?;
        Ok(Self::from_mix(path, mix))
    }

    /// A mix already in memory; `path` is what the distribution displays as (`file:PATH`), so a
    /// spec printed from it reads back only if that file holds the same mix.
    pub fn from_mix(path: &Path, mix: Mix) -> Self {
        Self::compile(DistSource::File { path: path.to_owned(), mix }, 1.0, None)
    }

    /// The same distribution with its time axis multiplied by `scale` (finite, > 0).
    pub fn with_scale(&self, scale: f64) -> Result<Self, WorkloadError> {
        Self::build(self.source.clone(), scale, self.truncate)
    }

    /// The same distribution conditioned on X ≤ `cap` (exponential and log-normal only), or
    /// untruncated with `None`.
    pub fn with_truncation(&self, cap: Option<Nanos>) -> Result<Self, WorkloadError> {
        Self::build(self.source.clone(), self.scale, cap)
    }

    fn base(source: &DistSource) -> Base {
        match source {
            DistSource::Preset(p) => p.base(),
            DistSource::File { mix, .. } => Base::Mix(mix.clone()),
        }
    }

    /// Validates `scale` and `truncate`, then compiles.
    fn build(
        source: DistSource,
        scale: f64,
        truncate: Option<Nanos>,
    ) -> Result<Self, WorkloadError> {
        if !(scale.is_finite() && scale > 0.0) {
            return Err(WorkloadError::bad_value(
                "scale",
                format!("{scale} is not a positive number"),
            ));
        }
        if let Some(cap) = truncate {
            let Some(law) = Self::base(&source).law(scale) else {
                return Err(WorkloadError::bad_value(
                    "truncate",
                    "truncation applies only to the continuous distributions (exponential, \
                     lognormal)",
                ));
            };
            if cap == 0 || law.cdf(cap as f64) <= 0.0 {
                return Err(WorkloadError::bad_value(
                    "truncate",
                    "the cap must be > 0 and have positive probability",
                ));
            }
        }
        Ok(Self::compile(source, scale, truncate))
    }

    /// Compiles a validated (source, scale, truncate).
    fn compile(source: DistSource, scale: f64, truncate: Option<Nanos>) -> Self {
        let base = Self::base(&source);
        // A class deadline scaled below half a nanosecond is 1 ns, not an unmeetable 0.
        let scale_deadline = |ns: Nanos| ((ns as f64 * scale).round() as Nanos).max(1);
        let (model, classes, mean, second_moment, median) = match (base.law(scale), base) {
            (Some(law), _) => {
                let cap = truncate.map_or(f64::INFINITY, |c| c as f64);
                let cap_p = law.cdf(cap);
                let median = law.quantile(0.5 * cap_p);
                let m1 = law.partial_moment(1, cap);
                let m1_low = law.partial_moment(1, median);
                let half = 0.5 * cap_p;
                let classes = vec![
                    ClassInfo {
                        name: "short".to_owned(),
                        probability: 0.5,
                        mean_execution: m1_low / half,
                        deadline: None,
                    },
                    ClassInfo {
                        name: "long".to_owned(),
                        probability: 0.5,
                        mean_execution: (m1 - m1_low) / half,
                        deadline: None,
                    },
                ];
                let second = law.partial_moment(2, cap) / cap_p;
                (Model::Continuous { law, cap_p }, classes, m1 / cap_p, second, median)
            }
            (None, base) => {
                let classes_in: &[MixClass] = match &base {
                    Base::Mix(mix) => mix.classes(),
                    _ => &[],
                };
                let total: f64 = classes_in.iter().map(|c| c.weight).sum();
                let mut lo = Vec::new();
                let mut hi = Vec::new();
                let mut cumulative = Vec::new();
                let mut classes = Vec::new();
                let (mut acc, mut mean, mut second) = (0.0, 0.0, 0.0);
                for c in classes_in {
                    let p = c.weight / total;
                    let (a, b) = (c.execution as f64 * scale, c.execution_max as f64 * scale);
                    acc += p;
                    lo.push(a);
                    hi.push(b);
                    cumulative.push(acc);
                    mean += p * (a + b) / 2.0;
                    second += p * (a * a + a * b + b * b) / 3.0;
                    classes.push(ClassInfo {
                        name: c.name.clone(),
                        probability: p,
                        mean_execution: (a + b) / 2.0,
                        deadline: c.deadline.map(scale_deadline),
                    });
                }
                if let Some(last) = cumulative.last_mut() {
                    *last = 1.0;
                }
                let model = Model::Mix { lo, hi, cumulative };
                let median = mix_quantile(&model, 0.5);
                (model, classes, mean, second, median)
            }
        };
        Self { source, scale, truncate, model, classes, mean, second_moment, median }
    }

    /// Where the distribution comes from.
    pub fn source(&self) -> &DistSource {
        &self.source
    }

    /// The `scale` factor (1 unless changed).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The truncation cap, if any (ns).
    pub fn truncation(&self) -> Option<Nanos> {
        self.truncate
    }

    /// The classes, indexed by class tag.
    pub fn classes(&self) -> &[ClassInfo] {
        &self.classes
    }

    /// The name of class `tag`, if the distribution has such a class.
    pub fn class_name(&self, tag: u16) -> Option<&str> {
        self.classes.get(usize::from(tag)).map(|c| c.name.as_str())
    }

    /// The tag of the class called `name`.
    pub fn class_tag(&self, name: &str) -> Option<u16> {
        self.classes.iter().position(|c| c.name == name).and_then(|i| u16::try_from(i).ok())
    }

    /// Mean execution time E(X) in ns. Exact for mixes (Σ p · range midpoint); closed form for
    /// the exponential (θ) and log-normal (e^(μ+σ²/2)); for a truncated law E[X · 1{X ≤ c}] / F(c)
    /// with the exponential's and log-normal's partial moments (the latter through Φ, accurate to
    /// ~10⁻⁷). Ignores the 1 ns floor and rounding to whole ns.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Second moment E(X²) in ns², in closed form like [`mean`](Self::mean) (for the
    /// Pollaczek–Khinchine checks of the simulator).
    pub fn second_moment(&self) -> f64 {
        self.second_moment
    }

    /// Median in ns: closed form for continuous laws (of the truncated law when truncated); for
    /// mixes the *lower* median, the smallest x with P(X ≤ x) ≥ ½ (26 µs for `high-bimodal`).
    pub fn median(&self) -> f64 {
        self.median
    }

    /// The `q`-quantile in ns (smallest x with P(X ≤ x) ≥ q), `q` clamped to [0, 1].
    pub fn quantile(&self, q: f64) -> f64 {
        let q = q.clamp(0.0, 1.0);
        match &self.model {
            Model::Mix { .. } => mix_quantile(&self.model, q),
            Model::Continuous { law, cap_p } => law.quantile(q * cap_p),
        }
    }

    /// Draws one execution time: `(class tag, execution in ns)`. Consumes one `u64` of `rng`.
    pub fn sample(&self, rng: &mut Rng) -> (u16, Nanos) {
        let to_ns = |x: f64| (x.round() as Nanos).max(1);
        match &self.model {
            Model::Mix { lo, hi, cumulative } => {
                let u = rng.next_f64();
                let i = cumulative.partition_point(|&c| c <= u).min(cumulative.len() - 1);
                let x = if lo[i] == hi[i] {
                    lo[i]
                } else {
                    let start = if i == 0 { 0.0 } else { cumulative[i - 1] };
                    let v = ((u - start) / (cumulative[i] - start)).clamp(0.0, 1.0);
                    lo[i] + v * (hi[i] - lo[i])
                };
                (class_tag(i), to_ns(x))
            }
            Model::Continuous { law, cap_p } => {
                let x = law.quantile(rng.next_open01() * cap_p);
                (u16::from(x > self.median), to_ns(x))
            }
        }
    }

    /// Draws one execution time of class `class`: the law conditioned on the class (for trace
    /// rows that give a class but no execution; a class the distribution lacks draws from the
    /// whole law). Consumes one `u64` of `rng`.
    pub fn sample_in_class(&self, class: u16, rng: &mut Rng) -> Nanos {
        let to_ns = |x: f64| (x.round() as Nanos).max(1);
        let i = usize::from(class);
        match &self.model {
            Model::Mix { lo, hi, cumulative } if i < cumulative.len() => {
                let v = rng.next_f64();
                to_ns(lo[i] + v * (hi[i] - lo[i]))
            }
            // Class 0 is at most the median (quantiles up to ½), class 1 above it.
            Model::Continuous { law, cap_p } if i < 2 => {
                let q = 0.5 * (rng.next_open01() + f64::from(class));
                to_ns(law.quantile(q * cap_p))
            }
            _ => self.sample(rng).1,
        }
    }

    /// The class an execution time of `execution` ns belongs to (for trace rows that give an
    /// execution but no class): the median split for continuous laws; for mixes the class whose
    /// range is nearest (the first one on ties).
    pub fn classify(&self, execution: Nanos) -> u16 {
        let x = execution as f64;
        match &self.model {
            Model::Continuous { .. } => u16::from(x > self.median),
            Model::Mix { lo, hi, .. } => {
                let mut best = (f64::INFINITY, 0);
                for i in 0..lo.len() {
                    let d = if x < lo[i] {
                        lo[i] - x
                    } else if x > hi[i] {
                        x - hi[i]
                    } else {
                        0.0
                    };
                    if d < best.0 {
                        best = (d, i);
                    }
                }
                class_tag(best.1)
            }
        }
    }

    /// The spec name (`lognormal`, `file:PATH`, …) without options.
    pub(crate) fn name(&self) -> String {
        match &self.source {
            DistSource::Preset(p) => p.name().to_owned(),
            DistSource::File { path, .. } => format!("file:{}", crate::text::encode_path(path)),
        }
    }
}

fn class_tag(i: usize) -> u16 {
    // Mixes have at most 65 536 classes (checked by `Mix::new`).
    u16::try_from(i).unwrap_or(u16::MAX)
}

/// Smallest x with CDF(x) ≥ q for a mix, by bisection on f64 (exact for point masses).
fn mix_quantile(model: &Model, q: f64) -> f64 {
    let Model::Mix { lo, hi, cumulative } = model else {
        return f64::NAN;
    };
    let cdf = |x: f64| -> f64 {
        let mut acc = 0.0;
        for i in 0..lo.len() {
            let p = cumulative[i] - if i == 0 { 0.0 } else { cumulative[i - 1] };
            let f = if x >= hi[i] {
                1.0
            } else if x < lo[i] {
                0.0
            } else {
                (x - lo[i]) / (hi[i] - lo[i])
            };
            acc += p * f;
        }
        acc
    };
    let target = q - 1e-12;
    let mut a = lo.iter().copied().fold(f64::INFINITY, f64::min);
    let mut b = hi.iter().copied().fold(0.0, f64::max);
    if cdf(a) >= target {
        return a;
    }
    // Invariant: cdf(a) < target ≤ cdf(b).
    loop {
        let mid = a + (b - a) / 2.0;
        if mid <= a || mid >= b {
            return b;
        }
        if cdf(mid) >= target {
            b = mid;
        } else {
            a = mid;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Empirical statistics of `n` samples.
    struct Stats {
        n: f64,
        mean: f64,
        counts: Vec<u64>,
        work: Vec<f64>,
        sorted: Vec<Nanos>,
    }

    fn run(dist: &ServiceDist, n: usize, seed: u64) -> Stats {
        let mut rng = Rng::seed_from_u64(seed);
        let mut counts = vec![0u64; dist.classes().len()];
        let mut work = vec![0.0; dist.classes().len()];
        let mut sorted = Vec::with_capacity(n);
        let mut sum = 0.0;
        for _ in 0..n {
            let (c, x) = dist.sample(&mut rng);
            counts[usize::from(c)] += 1;
            work[usize::from(c)] += x as f64;
            sum += x as f64;
            sorted.push(x);
        }
        sorted.sort_unstable();
        Stats { n: n as f64, mean: sum / n as f64, counts, work, sorted }
    }

    impl Stats {
        fn quantile(&self, q: f64) -> f64 {
            self.sorted[((self.n * q) as usize).min(self.sorted.len() - 1)] as f64
        }

        fn share(&self, class: usize) -> f64 {
            self.counts[class] as f64 / self.n
        }
    }

    /// |empirical − expected| within 5 standard errors of the sample mean.
    fn assert_mean(dist: &ServiceDist, s: &Stats) {
        let var = dist.second_moment() - dist.mean() * dist.mean();
        let se = (var / s.n).sqrt();
        assert!(
            (s.mean - dist.mean()).abs() <= 5.0 * se + 1.0,
            "{}: empirical mean {} vs {} (se {se})",
            dist.name(),
            s.mean,
            dist.mean()
        );
    }

    /// A class share within 5 binomial standard errors.
    fn assert_share(s: &Stats, class: usize, p: f64) {
        let se = (p * (1.0 - p) / s.n).sqrt();
        let got = s.share(class);
        assert!((got - p).abs() <= 5.0 * se, "class {class}: share {got} vs {p} (se {se})");
    }

    /// The empirical median lies within the true quantiles at 0.5 ± 5 SE of a proportion.
    fn assert_median(dist: &ServiceDist, s: &Stats) {
        let se = (0.25 / s.n).sqrt();
        let lo = dist.quantile(0.5 - 5.0 * se);
        let hi = dist.quantile(0.5 + 5.0 * se);
        let m = s.quantile(0.5);
        assert!(lo - 1.0 <= m && m <= hi + 1.0, "{}: median {m} not in [{lo}, {hi}]", dist.name());
    }

    const N: usize = 400_000;

    #[test]
    fn presets_are_valid_and_named() {
        for (p, name) in Preset::ALL.iter().zip(Preset::NAMES) {
            assert_eq!(p.name(), name);
            assert_eq!(Preset::from_name(name), Some(*p));
            let d = ServiceDist::preset(*p);
            if let Base::Mix(m) = p.base() {
                assert_eq!(Mix::new(m.classes().to_vec()).unwrap(), m, "{name}");
            }
            let total: f64 = d.classes().iter().map(|c| c.probability).sum();
            assert!((total - 1.0).abs() < 1e-12, "{name}");
            let mean: f64 = d.classes().iter().map(|c| c.probability * c.mean_execution).sum();
            assert!((mean - d.mean()).abs() < 1e-6 * d.mean(), "{name}: class means");
        }
        assert_eq!(Preset::from_name("nope"), None);
    }

    /// Class deadlines scaled below half a nanosecond stay meetable: 1 ns, never 0.
    #[test]
    fn scaled_class_deadlines_are_at_least_one_nanosecond() {
        let d = ServiceDist::preset(Preset::EdgeRtBimodal).with_scale(1e-8).unwrap();
        let deadlines: Vec<_> = d.classes().iter().map(|c| c.deadline).collect();
        // 10 ms and 500 ms × 1e-8: 0.1 ns → 1 ns, 5 ns.
        assert_eq!(deadlines, [Some(1), Some(5)]);
    }

    #[test]
    fn fixed_is_ten_microseconds() {
        let d = ServiceDist::preset(Preset::Fixed);
        let mut rng = Rng::seed_from_u64(1);
        assert!((0..1000).all(|_| d.sample(&mut rng) == (0, 10_000)));
        assert_eq!((d.mean(), d.median(), d.second_moment()), (10_000.0, 10_000.0, 1e8));
    }

    #[test]
    fn high_bimodal_is_fifty_fifty() {
        let d = ServiceDist::preset(Preset::HighBimodal);
        assert_eq!(d.mean(), (26_000.0 + 2_070_000.0) / 2.0);
        assert_eq!(d.median(), 26_000.0);
        assert_eq!(d.class_name(0), Some("short"));
        assert_eq!(d.class_tag("long"), Some(1));
        let s = run(&d, N, 11);
        assert_share(&s, 0, 0.5);
        assert_mean(&d, &s);
        assert!(s.sorted.iter().all(|&x| x == 26_000 || x == 2_070_000));
    }

    #[test]
    fn extreme_bimodal_has_half_a_percent_long() {
        let d = ServiceDist::preset(Preset::ExtremeBimodal);
        assert!((d.mean() - (0.995 * 10_000.0 + 0.005 * 10_000_000.0)).abs() < 1e-6);
        assert_eq!(d.median(), 10_000.0);
        let s = run(&d, N, 12);
        assert_share(&s, 1, 0.005);
        assert_mean(&d, &s);
    }

    #[test]
    fn sdvbs_is_90_9_1() {
        let d = ServiceDist::preset(Preset::SdVbs);
        let names: Vec<_> = d.classes().iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["sift", "segmentation", "classification"]);
        assert!((d.mean() - (0.9 * 113e3 + 0.09 * 1100e3 + 0.01 * 2070e3)).abs() < 1e-6);
        assert_eq!(d.median(), 113_000.0);
        let s = run(&d, N, 13);
        assert_share(&s, 0, 0.9);
        assert_share(&s, 1, 0.09);
        assert_share(&s, 2, 0.01);
        assert_mean(&d, &s);
    }

    #[test]
    fn exponential_matches_table_3() {
        let d = ServiceDist::preset(Preset::Exponential);
        assert!((d.mean() - 100_000.0).abs() < 1e-6);
        assert!((d.median() - 100_000.0 * std::f64::consts::LN_2).abs() < 1e-6);
        assert_eq!(d.median().round(), 69_315.0); // Table 3: "69 (median)" µs
        assert!((d.second_moment() - 2e10).abs() < 1e-3);
        let s = run(&d, N, 14);
        assert_mean(&d, &s);
        assert_median(&d, &s);
        assert_share(&s, 0, 0.5);
        // Coefficient of variation 1.
        let var = s.sorted.iter().map(|&x| (x as f64 - s.mean).powi(2)).sum::<f64>() / s.n;
        assert!((var.sqrt() / s.mean - 1.0).abs() < 0.02);
    }

    #[test]
    fn lognormal_matches_table_3() {
        let d = ServiceDist::preset(Preset::LogNormal);
        // Median e^−0.38 ms = 683.9 µs (Table 3: "683 (median)").
        assert!((d.median() - (-0.38f64).exp() * 1e6).abs() < 1e-3);
        assert_eq!((d.median() / 1e3).floor(), 683.0);
        assert!((d.mean() - (-0.38f64 + 2.36 * 2.36 / 2.0).exp() * 1e6).abs() < 1e-3);
        // p99 ≈ 166 ms ("exceeds 140 milliseconds", SledgeScale §4.3).
        assert!(d.quantile(0.99) > 140e6 && d.quantile(0.99) < 170e6);
        let s = run(&d, 1_000_000, 15);
        assert_median(&d, &s);
        assert_share(&s, 0, 0.5);
        assert_mean(&d, &s);
        // The log of the samples is N(ln 1e6 − 0.38, 2.36²).
        let logs: Vec<f64> = s.sorted.iter().map(|&x| (x as f64).ln()).collect();
        let m = logs.iter().sum::<f64>() / s.n;
        let sd = (logs.iter().map(|l| (l - m).powi(2)).sum::<f64>() / s.n).sqrt();
        assert!((m - (1e6f64.ln() - 0.38)).abs() < 5.0 * 2.36 / s.n.sqrt(), "log mean {m}");
        assert!((sd - 2.36).abs() < 0.01, "log sd {sd}");
        // Class split at the median: class means match the closed forms.
        for c in 0..2 {
            let emp = s.work[c] / s.counts[c] as f64;
            let exp = d.classes()[c].mean_execution;
            assert!((emp / exp - 1.0).abs() < if c == 0 { 0.01 } else { 0.1 }, "class {c}");
        }
    }

    #[test]
    fn truncated_lognormal_is_the_conditional_law() {
        let full = ServiceDist::preset(Preset::LogNormal);
        let d = full.with_truncation(Some(LOGNORMAL_RUNTIME_TRUNCATION)).unwrap();
        assert_eq!(d.truncation(), Some(1_000_000_000));
        let f_cap = norm_cdf(((1e9f64).ln() - (1e6f64.ln() - 0.38)) / 2.36);
        assert!(f_cap > 0.998 && f_cap < 0.9995, "1 s is about p99.9: {f_cap}");
        assert!(d.mean() < full.mean() && d.median() < full.median());
        assert!((d.median() - full.quantile(0.5 * f_cap)).abs() < 1e-6 * d.median());
        let s = run(&d, N, 16);
        assert!(*s.sorted.last().unwrap() <= 1_000_000_000);
        assert_mean(&d, &s);
        assert_median(&d, &s);
        assert_share(&s, 0, 0.5);
        // Exponential truncation too; mixes refuse it.
        let e = ServiceDist::preset(Preset::Exponential).with_truncation(Some(200_000)).unwrap();
        let s = run(&e, N, 17);
        assert!(*s.sorted.last().unwrap() <= 200_000);
        assert_mean(&e, &s);
        assert_median(&e, &s);
        assert!(ServiceDist::preset(Preset::Fixed).with_truncation(Some(5)).is_err());
        assert!(full.with_truncation(Some(0)).is_err());
        assert_eq!(d.with_truncation(None).unwrap(), full);
    }

    #[test]
    fn edgert_light_is_80_percent_of_work() {
        let d = ServiceDist::preset(Preset::EdgeRtBimodal);
        let [light, heavy] = d.classes() else { panic!("two classes") };
        assert_eq!((light.name.as_str(), heavy.name.as_str()), ("light", "heavy"));
        assert_eq!((light.deadline, heavy.deadline), (Some(10_000_000), Some(500_000_000)));
        assert!((light.probability / heavy.probability - 500.0).abs() < 1e-9);
        assert!((d.mean() - 25_000_000.0 / 501.0).abs() < 1e-6);
        let share = light.probability * light.mean_execution / d.mean();
        assert!((share - EDGERT_LIGHT_WORK_SHARE).abs() < 1e-12);
        let s = run(&d, 1_000_000, 18);
        assert_share(&s, 1, 1.0 / 501.0);
        assert_mean(&d, &s);
        let emp_share = s.work[0] / (s.work[0] + s.work[1]);
        assert!((emp_share - 0.8).abs() < 0.02, "light work share {emp_share}");
    }

    #[test]
    fn azure_encodes_sfs_table_1() {
        let d = ServiceDist::preset(Preset::Azure);
        let table = [40.6, 9.8, 6.8, 22.7, 15.7];
        let total: f64 = table.iter().sum();
        assert!((total - 95.6).abs() < 1e-9);
        for (c, t) in d.classes().iter().zip(table) {
            assert!((c.probability - t / total).abs() < 1e-12, "{}", c.name);
        }
        let s = run(&d, N, 19);
        for (i, t) in table.iter().enumerate() {
            assert_share(&s, i, t / total);
        }
        assert_mean(&d, &s);
        assert_median(&d, &s);
        assert!(s.sorted.iter().all(|&x| x <= 400 * MS || (1550 * MS..=2508 * MS).contains(&x)));
        assert_eq!(d.classify(30 * MS), 0);
        assert_eq!(d.classify(500 * MS), 3); // nearest range: [200, 400] ms
        assert_eq!(d.classify(1000 * MS), 4); // nearer to 1550 ms than to 400 ms
        assert_eq!(d.classify(5000 * MS), 4);
        // scale=0.001 gives the same shape in µs.
        let small = d.with_scale(0.001).unwrap();
        assert!((small.mean() - d.mean() / 1000.0).abs() < 1e-6);
        assert!(d.with_scale(0.0).is_err());
    }

    #[test]
    fn scale_stretches_executions_and_class_deadlines() {
        let d = ServiceDist::preset(Preset::EdgeRtBimodal).with_scale(0.5).unwrap();
        assert_eq!(d.classes()[0].deadline, Some(5_000_000));
        assert_eq!(d.classes()[0].mean_execution, 20_000.0);
        let l = ServiceDist::preset(Preset::LogNormal).with_scale(0.001).unwrap();
        assert!((l.median() - (-0.38f64).exp() * 1e3).abs() < 1e-6);
    }

    #[test]
    fn classify_uses_the_median_split() {
        let d = ServiceDist::preset(Preset::Exponential);
        assert_eq!(d.classify(69_000), 0);
        assert_eq!(d.classify(70_000), 1);
        let b = ServiceDist::preset(Preset::HighBimodal);
        assert_eq!(b.classify(20_000), 0);
        assert_eq!(b.classify(1_000_000), 0);
        assert_eq!(b.classify(1_100_000), 1);
    }
}
