//! The load step of `luge bench overload`: Poisson arrivals at 0.5× capacity, then 2×, as a
//! trace; goodput in 10 ms bins by answer time; how soon it is back, and when it holds.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use luge_workload::{ArrivalProcess, Rng, Trace};
use serde::Serialize;

use super::super::output::Results;
use super::{
    BIN_NS, Bench, FIXED_SPEC, HOLD_BINS, RECOVERED, STEP_HIGH, STEP_LOW, parse_spec, window,
};
use crate::error::BenchError;
use crate::run::Mode;

#[derive(Debug, Clone, Serialize)]
pub(super) struct StepBin {
    /// Start of the bin, ms from the step (negative before it).
    pub(super) t_ms: f64,
    pub(super) offered_rps: f64,
    pub(super) goodput_rps: f64,
    pub(super) refused_rps: f64,
    pub(super) goodput_over_capacity: f64,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct StepResult {
    /// The trial (from 1) this was measured in.
    pub(super) trial: usize,
    pub(super) protocol: &'static str,
    pub(super) capacity_rps: f64,
    pub(super) low_multiple: f64,
    pub(super) high_multiple: f64,
    pub(super) low_s: f64,
    pub(super) high_s: f64,
    pub(super) bin_ms: f64,
    pub(super) arrivals_file: String,
    pub(super) workload: String,
    pub(super) planned: u64,
    pub(super) answered: u64,
    pub(super) refused: u64,
    /// Sent and never answered (`Tally::unanswered`).
    pub(super) no_answer: u64,
    pub(super) unsent: u64,
    /// Mean goodput ÷ capacity over the 0.5× phase (its first 50 ms left out).
    pub(super) before_over_capacity: Option<f64>,
    /// Mean goodput ÷ capacity over the 2× phase.
    pub(super) after_over_capacity: Option<f64>,
    /// From the step to the end of the first bin with goodput ≥ 90 % of capacity.
    pub(super) back_ms: Option<f64>,
    /// From the step to the end of the first bin from which the 50 ms moving average of goodput
    /// (bins after the step only) stays ≥ 90 % of capacity to the end of the 2× phase.
    pub(super) holds_ms: Option<f64>,
    /// Share of the 2× phase's bins below 90 % of capacity.
    pub(super) bins_below_share: Option<f64>,
    pub(super) bins: Vec<StepBin>,
    pub(super) notes: Vec<String>,
}

/// Bins from the step (index `from`) to the end of the first bin in `from..until` whose value is
/// at least `threshold`.
pub(super) fn first_reach(
    values: &[f64],
    from: usize,
    until: usize,
    threshold: f64,
) -> Option<usize> {
    (from..until.min(values.len())).find(|&i| values[i] >= threshold).map(|i| i - from + 1)
}

/// Bins from the step (index `from`) to the end of the first bin of the suffix of
/// `from..until` over which the trailing moving average of goodput — over the last `hold` bins,
/// none before the step — stays at least `threshold`; `None` if it fails at the last bin.
pub(super) fn holds_from(
    values: &[f64],
    from: usize,
    until: usize,
    threshold: f64,
    hold: usize,
) -> Option<usize> {
    let until = until.min(values.len());
    let hold = hold.max(1);
    let avg = |i: usize| {
        let lo = (i + 1).saturating_sub(hold).max(from);
        values[lo..=i].iter().sum::<f64>() / (i + 1 - lo) as f64
    };
    let mut start = None;
    for i in from..until {
        if avg(i) >= threshold {
            start.get_or_insert(i);
        } else {
            start = None;
        }
    }
    start.map(|i| i - from + 1)
}

/// Poisson arrivals at `low_rps` for `low_s`, then `high_rps` for `high_s`, as a trace
/// (`arrival_ns`, one per line).
pub(super) fn step_trace(
    low_rps: f64,
    low_ns: u64,
    high_rps: f64,
    high_ns: u64,
    seed: u64,
) -> String {
    let mut rng = Rng::seed_from_u64(seed ^ 0x57e9);
    let mut text = String::from("# luge bench overload: the step's arrivals\narrival_ns\n");
    let mut t = 0.0f64;
    let end = (low_ns + high_ns) as f64;
    loop {
        let rate = if t < low_ns as f64 { low_rps } else { high_rps };
        t += rng.exponential(1e9 / rate.max(1e-3));
        if t >= end {
            break;
        }
        let _ = writeln!(text, "{}", t as u64);
    }
    text
}

pub(super) fn per_second(n: u32) -> f64 {
    f64::from(n) * 1e9 / BIN_NS as f64
}

pub(super) fn step(
    bench: &Bench<'_>,
    trial: usize,
    capacity: f64,
    low: Duration,
    high: Duration,
    dir: &Path,
    out: &mut Results,
) -> Result<StepResult, BenchError> {
    let protocol = bench.protocol;
    let low_ns = luge_proto::nanos(low);
    let high_ns = luge_proto::nanos(high);
    let text =
        step_trace(STEP_LOW * capacity, low_ns, STEP_HIGH * capacity, high_ns, bench.opts.seed);
    // The trace follows this trial's capacity: one file per trial.
    let file = format!("step-{}-arrivals-trial{trial}.csv", protocol.name());
    out.write(&file, &text)?;
    let path = dir.join(&file);
    let mut workload = parse_spec(FIXED_SPEC, bench.opts.seed)?;
    workload.arrivals = ArrivalProcess::Trace(Trace::parse(&text, &path)?);
    let m = bench.measure(workload, Mode::Open { window: window(protocol) }, low + high, true)?;
    let t = &m.tally;
    let bins = t.bins.clone().unwrap_or_default();
    let step_bin = usize::try_from(low_ns / BIN_NS).unwrap_or(0);
    let end_bin = usize::try_from((low_ns + high_ns) / BIN_NS).unwrap_or(0);
    let n = end_bin.max(bins.met.len()).max(bins.offered.len()).max(bins.refused.len());
    let at = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(0);
    let goodput: Vec<f64> = (0..n).map(|i| per_second(at(&bins.met, i)) / capacity).collect();
    let mean = |from: usize, to: usize| {
        let to = to.min(goodput.len());
        (to > from).then(|| goodput[from..to].iter().sum::<f64>() / (to - from) as f64)
    };
    let below = (end_bin > step_bin).then(|| {
        (step_bin..end_bin).filter(|&i| goodput.get(i).is_none_or(|&g| g < RECOVERED)).count()
            as f64
            / (end_bin - step_bin) as f64
    });
    let bin_ms = BIN_NS as f64 / 1e6;
    let series: Vec<StepBin> = (0..n)
        .map(|i| StepBin {
            t_ms: (i as f64 - step_bin as f64) * bin_ms,
            offered_rps: per_second(at(&bins.offered, i)),
            goodput_rps: per_second(at(&bins.met, i)),
            refused_rps: per_second(at(&bins.refused, i)),
            goodput_over_capacity: goodput.get(i).copied().unwrap_or(0.0),
        })
        .collect();
    Ok(StepResult {
        trial,
        protocol: protocol.name(),
        capacity_rps: capacity,
        low_multiple: STEP_LOW,
        high_multiple: STEP_HIGH,
        low_s: low.as_secs_f64(),
        high_s: high.as_secs_f64(),
        bin_ms,
        arrivals_file: file,
        workload: m.report.workload.clone(),
        planned: t.planned,
        answered: t.answered(),
        refused: t.refused,
        no_answer: t.unanswered(),
        unsent: t.unsent,
        before_over_capacity: mean(HOLD_BINS.min(step_bin), step_bin),
        after_over_capacity: mean(step_bin, end_bin),
        back_ms: first_reach(&goodput, step_bin, end_bin, RECOVERED).map(|b| b as f64 * bin_ms),
        holds_ms: holds_from(&goodput, step_bin, end_bin, RECOVERED, HOLD_BINS)
            .map(|b| b as f64 * bin_ms),
        bins_below_share: below,
        bins: series,
        notes: m.report.notes.clone(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn recovery_and_hold_are_counted_from_the_step() {
        // Step at bin 3; the 2× phase is bins 3..10.
        let g = [0.5, 0.5, 0.5, 0.6, 0.95, 0.5, 0.95, 1.0, 1.0, 1.0, 0.0];
        assert_eq!(first_reach(&g, 3, 10, 0.9), Some(2), "the end of bin 4");
        assert_eq!(first_reach(&g, 3, 4, 0.9), None);
        assert_eq!(holds_from(&g, 3, 10, 0.9, 1), Some(4), "bins 6.. hold on their own");
        // Averages over 2 bins (none before the step): .6 .775 .725 .725 .975 1 1.
        assert_eq!(holds_from(&g, 3, 10, 0.9, 2), Some(5), "from the end of bin 7");
        assert_eq!(holds_from(&g, 3, 11, 0.9, 1), None, "the last bin fails");
        assert_eq!(holds_from(&[0.5, 0.5, 1.0, 1.0, 1.0, 1.0], 2, 6, 0.9, 5), Some(1));
        assert_eq!(holds_from(&g, 5, 5, 0.9, 5), None, "no bins");
    }

    #[test]
    fn the_step_trace_switches_rate() {
        let text = step_trace(1_000.0, 1_000_000_000, 4_000.0, 1_000_000_000, 7);
        let t = Trace::parse(&text, Path::new("step.csv")).unwrap();
        let rows = t.rows();
        let low = rows.iter().filter(|r| r.at < 1_000_000_000).count() as f64;
        let high = rows.len() as f64 - low;
        assert!((900.0..1100.0).contains(&low), "{low}");
        assert!((3700.0..4300.0).contains(&high), "{high}");
        assert!(rows.windows(2).all(|w| w[0].at <= w[1].at));
        assert_eq!(
            step_trace(1_000.0, 1_000_000, 4_000.0, 1_000_000, 7),
            step_trace(1_000.0, 1_000_000, 4_000.0, 1_000_000, 7)
        );
    }
}
