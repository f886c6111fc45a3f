//! Per-function execution-time estimates: a percentile of the most recent observations.
//!
//! SledgeScale (§4) estimates "execution time as the median observed
//! execution time during the last 256 requests". [`Estimator`] generalises the window length and
//! the percentile ([`EstimatorConfig`]) and adds an explicit default for functions never seen and a
//! per-function *seed* (e.g. a manifest value) that is used until the first real observation.
//! [`Estimator`] documents the data structure and its costs.

use std::collections::HashMap;

use crate::request::{FunctionId, Nanos};

/// Configuration of an [`Estimator`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EstimatorConfig {
    /// Number of most recent observations kept per function (SledgeScale: 256). 0 is treated
    /// as 1.
    pub window: usize,
    /// Which percentile to report, 0–100 (50 = median). Values above 100 are treated as 100; see
    /// [`rank`](Self::rank) for the exact definition.
    pub percentile: u8,
    /// Estimate for a function with neither observations nor a seed.
    pub default_estimate: Nanos,
    /// Shift detection (Luge's extension, not in SledgeScale): when the last `shift_run`
    /// observations all lie above the window's percentile, the estimate is the least of them;
    /// when they all lie below, the greatest. A change in a function's execution time is then
    /// followed within `shift_run` runs instead of the ~W/2 a median of W needs, so admission
    /// stops admitting on a stale estimate after a few requests. 0 turns it off.
    pub shift_run: usize,
}

impl EstimatorConfig {
    /// SledgeScale's window: the last 256 requests.
    pub const DEFAULT_WINDOW: usize = 256;
    /// The median.
    pub const DEFAULT_PERCENTILE: u8 = 50;
    /// 1 ms for a function never seen.
    pub const DEFAULT_ESTIMATE: Nanos = 1_000_000;
    /// Four consecutive runs on one side of the percentile (1 in 16 for a stable median).
    pub const DEFAULT_SHIFT_RUN: usize = 4;

    /// The 0-based index, in the ascending sorted window of `n ≥ 1` values, of the value reported
    /// as the `p`-th percentile: `⌈p/100 · n⌉ − 1`, floored at 0 (the *nearest-rank* percentile:
    /// the smallest value such that at least p % of the window is ≤ it). `p = 0` is the minimum,
    /// `p = 100` the maximum, and `p = 50` the *lower* median for even `n` (n = 4 → index 1).
    /// Computed exactly in integers. Returns 0 for `n = 0`.
    pub fn rank(&self, n: usize) -> usize {
        let p = u128::from(self.percentile.min(100));
        let k = (p * n as u128).div_ceil(100);
        usize::try_from(k).unwrap_or(usize::MAX).saturating_sub(1)
    }
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self {
            window: Self::DEFAULT_WINDOW,
            percentile: Self::DEFAULT_PERCENTILE,
            default_estimate: Self::DEFAULT_ESTIMATE,
            shift_run: Self::DEFAULT_SHIFT_RUN,
        }
    }
}

/// The recent observations of one function.
#[derive(Debug, Clone, Default)]
struct Window {
    /// Observations in arrival order until full, then a ring whose oldest value is at `oldest`.
    ring: Vec<Nanos>,
    oldest: usize,
    /// The values of `ring`, ascending.
    sorted: Vec<Nanos>,
    /// Seed used while `ring` is empty.
    seed: Option<Nanos>,
}

impl Window {
    /// The `k` most recent observations, or `None` if fewer are held.
    fn recent(&self, k: usize) -> Option<impl Iterator<Item = Nanos> + '_> {
        let len = self.ring.len();
        if k == 0 || k > len {
            return None;
        }
        // The newest value sits just before `oldest` (which is 0 until the ring is full).
        let end = if self.oldest == 0 { len } else { self.oldest };
        Some((1..=k).map(move |i| self.ring[(end + len - i) % len]))
    }

    fn observe(&mut self, value: Nanos, cap: usize) {
        self.seed = None;
        let len = self.ring.len();
        if len < cap {
            if len == self.ring.capacity() {
                // Grow geometrically but never past `cap`.
                let extra = len.max(4).min(cap - len);
                self.ring.reserve_exact(extra);
                self.sorted.reserve_exact(extra);
            }
            self.ring.push(value);
            let j = self.sorted.partition_point(|&x| x < value);
            self.sorted.insert(j, value);
            return;
        }
        let old = std::mem::replace(&mut self.ring[self.oldest], value);
        self.oldest = (self.oldest + 1) % cap;
        // Replace one copy of `old` by `value` with a single shift of the values between them.
        let i = self.sorted.partition_point(|&x| x < old);
        let j = self.sorted.partition_point(|&x| x < value);
        if j <= i {
            // sorted[j..i] are ≥ value: shift them right over `old`.
            self.sorted.copy_within(j..i, j + 1);
            self.sorted[j] = value;
        } else {
            // sorted[i+1..j] are < value: shift them left over `old`.
            self.sorted.copy_within(i + 1..j, i);
            self.sorted[j - 1] = value;
        }
    }
}

/// Per-function percentile-of-recent-executions estimator (SledgeScale
/// SledgeScale §4, "the median observed execution time during the last 256
/// requests").
///
/// # Data structure
///
/// Per function, a ring buffer of the last `window` observations plus a sorted array of the same
/// values. When the window is full, an observation replaces the oldest value: both positions in
/// the sorted array are found by binary search (O(log W) comparisons) and the values between them
/// are shifted by one in a single `copy_within` (one memmove of at most `W − 1` values, ≤ 2 KiB for
/// W = 256). At this size that is simpler than an order-statistic tree and needs no pointers and
/// no allocation after warm-up; the memmove touches a few cache lines. A query is one array
/// index, O(1).
///
/// Storage grows lazily: a function's two arrays start empty and grow (doubling, capped at
/// exactly `window`) as observations arrive, so a function seen once costs a few words, not 4 KiB.
/// A function that was only seeded costs one hash-map entry and no array.
///
/// Deterministic: the per-function map is only looked up, never iterated.
#[derive(Debug, Clone, Default)]
pub struct Estimator {
    config: EstimatorConfig,
    functions: HashMap<FunctionId, Window>,
}

impl Estimator {
    /// An empty estimator (`window` 0 is raised to 1).
    pub fn new(config: EstimatorConfig) -> Self {
        let config = EstimatorConfig { window: config.window.max(1), ..config };
        Self { config, functions: HashMap::new() }
    }

    /// The configuration in use.
    pub fn config(&self) -> &EstimatorConfig {
        &self.config
    }

    /// Records one execution of `function` that took `execution` ns. Evicts the oldest
    /// observation once `window` are held, and discards any seed. O(log W) comparisons plus one
    /// memmove of ≤ W values.
    pub fn observe(&mut self, function: FunctionId, execution: Nanos) {
        self.functions.entry(function).or_default().observe(execution, self.config.window);
    }

    /// The estimate for `function`: the [`rank`](EstimatorConfig::rank)-th smallest of its recent
    /// observations; its seed if it has none; `default_estimate` if it has neither. O(1).
    ///
    /// With [`shift_run`](EstimatorConfig::shift_run) = k > 0, a run of the last k observations
    /// all above (below) the window's median — a shift of the distribution — moves the estimate
    /// up to at least their minimum (down to at most their maximum): O(k). Judged against the
    /// median whatever the percentile, so that a high or low percentile is not overridden by
    /// runs that are merely on its usual side.
    pub fn estimate(&self, function: FunctionId) -> Nanos {
        let Some(w) = self.functions.get(&function) else { return self.config.default_estimate };
        let n = w.sorted.len();
        let Some(&p) = w.sorted.get(self.config.rank(n)) else {
            return w.seed.unwrap_or(self.config.default_estimate);
        };
        let Some(recent) = w.recent(self.config.shift_run) else { return p };
        let median = w.sorted[(n - 1) / 2];
        let (lo, hi) = recent.fold((Nanos::MAX, 0), |(lo, hi), x| (lo.min(x), hi.max(x)));
        if lo > median {
            p.max(lo)
        } else if hi < median {
            p.min(hi)
        } else {
            p
        }
    }

    /// Sets the estimate of `function` to `estimate` until its first real observation (e.g. a
    /// value from the function's manifest). Returns `false`, and changes nothing, if the function
    /// already has observations. Seeding again replaces the seed.
    pub fn seed(&mut self, function: FunctionId, estimate: Nanos) -> bool {
        let w = self.functions.entry(function).or_default();
        if !w.ring.is_empty() {
            return false;
        }
        w.seed = Some(estimate);
        true
    }

    /// Number of real observations currently held for `function` (≤ `window`; a seed does not
    /// count).
    pub fn samples(&self, function: FunctionId) -> usize {
        self.functions.get(&function).map_or(0, |w| w.ring.len())
    }

    /// Drops everything known about `function` (observations and seed). Returns `false` if
    /// nothing was known.
    pub fn forget(&mut self, function: FunctionId) -> bool {
        self.functions.remove(&function).is_some()
    }

    /// Number of functions with observations or a seed.
    pub fn functions(&self) -> usize {
        self.functions.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const F: FunctionId = FunctionId(7);

    fn est(window: usize, percentile: u8) -> Estimator {
        Estimator::new(EstimatorConfig {
            window,
            percentile,
            default_estimate: 1_000_000,
            shift_run: 0,
        })
    }

    #[test]
    fn rank_is_nearest_rank() {
        let c = |p| EstimatorConfig { percentile: p, ..EstimatorConfig::default() };
        assert_eq!(c(50).rank(1), 0);
        assert_eq!(c(50).rank(4), 1); // lower median
        assert_eq!(c(50).rank(5), 2);
        assert_eq!(c(50).rank(256), 127);
        assert_eq!(c(0).rank(10), 0);
        assert_eq!(c(100).rank(10), 9);
        assert_eq!(c(250).rank(10), 9);
        assert_eq!(c(90).rank(10), 8);
        assert_eq!(c(91).rank(10), 9);
        assert_eq!(c(99).rank(256), 253); // ⌈253.44⌉ − 1
        assert_eq!(c(7).rank(100), 6); // exact where 0.07 · 100 in f64 is 7.000000000000001
        assert_eq!(c(50).rank(0), 0);
    }

    #[test]
    fn default_then_seed_then_observations() {
        let mut e = Estimator::new(EstimatorConfig::default());
        assert_eq!(e.estimate(F), EstimatorConfig::DEFAULT_ESTIMATE);
        assert_eq!(e.samples(F), 0);
        assert!(e.seed(F, 42_000));
        assert_eq!(e.estimate(F), 42_000);
        assert_eq!(e.samples(F), 0);
        e.observe(F, 7_000);
        assert_eq!(e.estimate(F), 7_000); // the first observation replaces the seed
        assert_eq!(e.samples(F), 1);
        assert!(!e.seed(F, 1));
        assert_eq!(e.estimate(F), 7_000);
        assert_eq!(e.estimate(FunctionId(8)), EstimatorConfig::DEFAULT_ESTIMATE);
        assert_eq!(e.functions(), 1);
        assert!(e.forget(F));
        assert!(!e.forget(F));
        assert_eq!(e.estimate(F), EstimatorConfig::DEFAULT_ESTIMATE);
    }

    /// Shift detection judges runs against the median, not the configured percentile: with a
    /// p99 estimate, four recent values below the p99 (as 96 % of runs are) are no shift.
    #[test]
    fn a_high_percentile_is_not_pulled_down_by_ordinary_runs() {
        let cfg = EstimatorConfig {
            window: 100,
            percentile: 99,
            shift_run: 4,
            ..EstimatorConfig::default()
        };
        let mut e = Estimator::new(cfg);
        for v in 1..=100 {
            e.observe(F, v * 1_000);
        }
        // The last four (97–100 µs) lie above the median: a shift up, but the p99 (99 µs) is
        // above their minimum already.
        assert_eq!(e.estimate(F), 99_000);
        for v in [10, 60, 20, 70] {
            e.observe(F, v * 1_000); // both sides of the median: no shift
        }
        assert_eq!(e.estimate(F), 99_000, "not the maximum of the last four (70 µs)");
        for v in [1, 2, 3, 4] {
            e.observe(F, v * 1_000); // all below the median: a shift down
        }
        assert_eq!(e.estimate(F), 4_000, "at most their maximum");
    }

    #[test]
    fn median_of_last_window_evicts_oldest() {
        let mut e = est(3, 50);
        for v in [10, 20, 30] {
            e.observe(F, v);
        }
        assert_eq!(e.estimate(F), 20);
        e.observe(F, 5); // window {20, 30, 5}
        assert_eq!(e.estimate(F), 20);
        e.observe(F, 1); // {30, 5, 1}
        assert_eq!(e.estimate(F), 5);
        e.observe(F, 100); // {5, 1, 100}
        e.observe(F, 100); // {1, 100, 100}
        assert_eq!(e.estimate(F), 100);
        assert_eq!(e.samples(F), 3);
        let w = &e.functions[&F];
        assert_eq!(w.sorted, vec![1, 100, 100]);
    }

    #[test]
    fn window_of_256_matches_sorting_and_storage_is_lazy() {
        let mut e = Estimator::new(EstimatorConfig { shift_run: 0, ..EstimatorConfig::default() });
        e.observe(F, 1);
        assert!(e.functions[&F].ring.capacity() <= 4);
        let mut all = vec![1];
        let mut x = 88_172_645_463_325_252u64;
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x % 10_000;
            e.observe(F, v);
            all.push(v);
            let mut last: Vec<u64> = all.iter().rev().take(256).copied().collect();
            last.sort_unstable();
            assert_eq!(e.estimate(F), last[last.len().div_ceil(2) - 1]);
        }
        assert_eq!(e.samples(F), 256);
        assert_eq!(e.functions[&F].ring.capacity(), 256);
        assert_eq!(e.functions[&F].sorted.capacity(), 256);
    }

    #[test]
    fn odd_window_capacity_is_capped_and_zero_window_is_one() {
        let mut e = est(300, 50);
        for v in 0..1_000 {
            e.observe(F, v);
        }
        assert_eq!(e.functions[&F].ring.capacity(), 300);
        assert_eq!(e.estimate(F), 700 + 149);
        let mut z = est(0, 50);
        assert_eq!(z.config().window, 1);
        z.observe(F, 3);
        z.observe(F, 9);
        assert_eq!((z.estimate(F), z.samples(F)), (9, 1));
    }

    #[test]
    fn percentiles_select_min_and_max() {
        let mut lo = est(8, 0);
        let mut hi = est(8, 100);
        for v in [5, 3, 9, 1, 7] {
            lo.observe(F, v);
            hi.observe(F, v);
        }
        assert_eq!((lo.estimate(F), hi.estimate(F)), (1, 9));
    }

    #[test]
    fn a_shift_is_followed_within_the_run_length() {
        let mut e = Estimator::new(EstimatorConfig::default());
        for _ in 0..256 {
            e.observe(F, 100);
        }
        // The execution time triples: the median of 256 would need 129 runs to follow.
        for (i, want) in [100, 100, 100, 300].into_iter().enumerate() {
            e.observe(F, 300);
            assert_eq!(e.estimate(F), want, "after {} slow runs", i + 1);
        }
        // Back down: the window's median never moved, so the first fast run ends the override.
        e.observe(F, 100);
        assert_eq!(e.estimate(F), 100);
        // Noise around a stable median changes nothing: 4 in a row on one side is needed.
        let mut e = Estimator::new(EstimatorConfig::default());
        for x in [90, 110, 95, 105, 120, 80, 130, 100, 101, 99] {
            e.observe(F, x);
        }
        assert_eq!(e.estimate(F), 100);
        // Before the ring wraps and after: the newest values are the ones looked at.
        let mut e = Estimator::new(EstimatorConfig { window: 8, ..EstimatorConfig::default() });
        for x in [5, 5, 5, 5, 5, 5, 5, 5, 5, 9, 8, 7, 6] {
            e.observe(F, x);
        }
        assert_eq!(e.estimate(F), 6, "min of the last four, all above the median 5");
    }
}
