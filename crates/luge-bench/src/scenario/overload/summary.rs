//! The Markdown summary and the SVG plots of `luge bench overload`.

use std::fmt::Write as _;
use std::time::Duration;

use luge_sim::{Chart, Series};

use super::super::OverloadOptions;
use super::super::output::{Results, Table, pct, ratio, ratio_range, rps, spread, us};
use super::step::{StepBin, StepResult};
use super::{
    BIMODAL_SPEC, BIN_NS, CLOSED_OUTSTANDING, CapacityResult, FIXED_SPEC, FIXED_US, HOLD_BINS,
    OverloadPoint, RECOVERED, STEP_HIGH, STEP_LOW, TIMEOUT, label,
};
use crate::calibrate::Calibration;
use crate::cpu_busy::SATURATED;
use crate::error::BenchError;

/// The (protocol, mix) series of the points, in order, once each.
fn series(points: &[OverloadPoint]) -> Vec<(&'static str, &'static str)> {
    let mut names: Vec<_> = Vec::new();
    for p in points {
        if !names.contains(&(p.protocol, p.mix)) {
            names.push((p.protocol, p.mix));
        }
    }
    names
}

/// Every trial's point of one (protocol, mix, multiple).
fn trials_of<'a>(
    points: &'a [OverloadPoint],
    protocol: &str,
    mix: &str,
    multiple: f64,
) -> Vec<&'a OverloadPoint> {
    points
        .iter()
        .filter(|p| p.protocol == protocol && p.mix == mix && p.multiple == multiple)
        .collect()
}

/// Median, minimum and maximum of `f` over `trials`, a `None` counting as a failure at its rank
/// (infinite): for figures where lower is better (times).
fn over<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = trials.iter().map(|t| f(t).unwrap_or(f64::INFINITY)).collect();
    spread(&mut v)
}

/// Median, minimum and maximum of a share or rate where higher is better, a `None` (nothing to
/// count: no 200s, no bins) counting as 0, the worst.
fn over_good<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<(f64, f64, f64)> {
    over(trials, |t| Some(f(t).unwrap_or(0.0)))
}

/// Median, minimum and maximum over the trials where `f` was measured (RSS: `None` is unknown,
/// neither good nor bad).
fn over_known<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<(f64, f64, f64)> {
    let mut v: Vec<f64> = trials.iter().filter_map(|t| f(t)).collect();
    spread(&mut v)
}

/// Median of `f` over the trials where it has a value (`None` when none has: nothing to
/// measure, such as refusal latency where nothing was refused).
fn median_of_some<T>(trials: &[&T], f: impl Fn(&T) -> Option<f64>) -> Option<f64> {
    over_known(trials, f).map(|(m, _, _)| m)
}

/// The points (`protocol mix multiple×`) whose load generator's CPUs were saturated at the
/// median of the trials.
fn generator_bound(points: &[OverloadPoint], multiples: &[f64]) -> Vec<String> {
    let mut out = Vec::new();
    for (proto, mix) in series(points) {
        for &m in multiples {
            let p = trials_of(points, proto, mix, m);
            if median_of_some(&p, |p| p.cpu.generator_busy).is_some_and(|b| b >= SATURATED) {
                out.push(format!("{proto} {mix} {m}×"));
            }
        }
    }
    out
}

/// A share as `median [min–max]` in percent (`-` when there is none).
fn pct_range(s: Option<(f64, f64, f64)>) -> String {
    match s {
        Some((m, lo, hi)) if lo < hi => format!("{} [{}–{}]", pct(m), pct(lo), pct(hi)),
        Some((m, _, _)) => pct(m),
        None => "-".into(),
    }
}

/// Milliseconds as `median [min–max]`; `never` when the median trial never got there.
fn ms_range(s: Option<(f64, f64, f64)>) -> String {
    match s {
        Some((m, lo, hi)) if lo < hi => {
            let hi = if hi.is_finite() { format!("{hi:.0}") } else { "never".into() };
            format!("{m:.0} [{lo:.0}–{hi}]")
        }
        Some((m, _, _)) => format!("{m:.0}"),
        None => "never".into(),
    }
}

pub(super) fn plots(
    points: &[OverloadPoint],
    steps: &[StepResult],
    out: &mut Results,
) -> Result<(), BenchError> {
    let names = series(points);
    let mut multiples: Vec<f64> = points.iter().map(|p| p.multiple).collect();
    multiples.sort_by(f64::total_cmp);
    multiples.dedup();
    let sweep = |get: fn(&OverloadPoint) -> f64| -> Vec<Series> {
        names
            .iter()
            .map(|&(proto, mix)| Series {
                name: format!("{proto} {mix} (median of the trials)"),
                points: multiples
                    .iter()
                    .filter_map(|&m| {
                        let t = trials_of(points, proto, mix, m);
                        over(&t, |p| Some(get(p))).map(|(median, _, _)| (m, median))
                    })
                    .collect(),
            })
            .collect()
    };
    let x_label = "offered load (multiple of the closed-loop capacity)";
    out.plot(
        "goodput.svg",
        &Chart::new("goodput ÷ capacity past capacity, 1 worker", x_label, "goodput ÷ capacity"),
        &sweep(|p| p.goodput_over_capacity),
    )?;
    out.plot(
        "refused.svg",
        &Chart::new("share of requests refused (503 / Overloaded)", x_label, "refused ÷ offered"),
        &sweep(|p| p.refused_share),
    )?;
    let mut protocols: Vec<&str> = steps.iter().map(|s| s.protocol).collect();
    protocols.dedup();
    for protocol in protocols {
        let runs: Vec<&StepResult> = steps.iter().filter(|s| s.protocol == protocol).collect();
        let Some(first) = runs.first() else { continue };
        let of = |s: &StepResult, name: String, get: fn(&StepBin) -> f64| Series {
            name,
            points: s.bins.iter().map(|b| (b.t_ms, get(b) / s.capacity_rps)).collect(),
        };
        let mut lines: Vec<Series> = runs
            .iter()
            .map(|s| of(s, format!("goodput, trial {}", s.trial), |b| b.goodput_rps))
            .collect();
        lines.push(of(first, format!("offered, trial {}", first.trial), |b| b.offered_rps));
        lines.push(of(first, format!("refused, trial {}", first.trial), |b| b.refused_rps));
        let title = format!(
            "{protocol} fixed mix, {}× → {}× capacity: 10 ms bins",
            first.low_multiple, first.high_multiple
        );
        out.plot(
            &format!("step-{protocol}.svg"),
            &Chart::new(title, "time from the step (ms)", "÷ capacity"),
            &lines,
        )?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(super) fn summary(
    node: &str,
    calibration: Option<&Calibration>,
    capacities: &[CapacityResult],
    points: &[OverloadPoint],
    steps: &[StepResult],
    multiples: &[f64],
    point_s: Duration,
    trials: usize,
    o: &OverloadOptions,
) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{node}, serving `spin` (its expected execution trusted); deadline-aware admission {}. \
         Calibration: {}.\n\n\
         Mixes: `fixed` = spin {FIXED_US} µs, deadline 100 ms (`{FIXED_SPEC}`); `bimodal` = \
         `{BIMODAL_SPEC}` (26 µs / 2.07 ms, half each), deadlines 10 × execution. Capacity = \
         closed-loop throughput ({CLOSED_OUTSTANDING} in flight, 100 ms deadlines) of that mix \
         on that protocol, measured in every trial; each multiple is of its trial's. Open-loop \
         Poisson points of {:.2} s. Goodput = 200s whose client-measured latency is within their \
         deadline, per second; `… in node` = the same judged on the time the node reports \
         (queueing + execution: from the datagram's receipt or the HTTP request head's to the \
         answer). Refused = 503 (HTTP `Luge-Outcome` `deadline_unreachable`, `shed`, \
         `overloaded`) / `Overloaded` (UDP-RPC). No answer = sent and never answered (timeouts of {} s, and \
         local send, connect or transport failures), summed over the \
         trials. RSS = peak `VmRSS` of this process (node and load generator, which keeps no \
         samples) during the point, ÷ the first trial's 1× point.\n\n\
         **{trials} trial(s)**, one after the other on the same node (each: both mixes' capacity \
         and points, then the step); every figure is the median of the trials, `[min–max]` \
         their range.\n",
        if o.no_deadline_admission { "**off** (`--no-deadline-admission`)" } else { "on" },
        calibration.map_or("none".into(), ToString::to_string),
        point_s.as_secs_f64(),
        TIMEOUT.as_secs()
    );

    let mut head: Vec<String> = vec!["protocol".into(), "mix".into()];
    head.extend(multiples.iter().map(|m| format!(">{m}×")));
    let cols: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut headline = Table::new(&cols);
    for (proto, mix) in series(points) {
        let mut row = vec![proto.to_owned(), mix.to_owned()];
        for &m in multiples {
            let t = trials_of(points, proto, mix, m);
            row.push(if t.is_empty() {
                "-".into()
            } else {
                ratio_range(over(&t, |p| Some(p.goodput_over_capacity)))
            });
        }
        headline.row(row);
    }
    md.push_str(&headline.section("Goodput ÷ capacity"));

    let mut cap = Table::new(&[
        "protocol",
        "mix",
        ">capacity /s",
        ">[min–max]",
        ">mean execution µs",
        ">refused",
        ">no answer",
    ]);
    for (proto, mix) in series(points) {
        let t: Vec<&CapacityResult> =
            capacities.iter().filter(|c| c.protocol == proto && c.mix == mix).collect();
        let range = over(&t, |c| Some(c.capacity_rps));
        cap.row(vec![
            proto.into(),
            mix.into(),
            range.map_or("-".into(), |(m, _, _)| rps(m)),
            range.map_or("-".into(), |(_, lo, hi)| format!("{}–{}", rps(lo), rps(hi))),
            us(median_of_some(&t, |c| c.mean_execution_us)),
            t.iter().map(|c| c.refused).sum::<u64>().to_string(),
            t.iter().map(|c| c.no_answer).sum::<u64>().to_string(),
        ]);
    }
    md.push_str(&cap.section("Capacity (closed loop)"));

    let mut t = Table::new(&[
        "protocol",
        "mix",
        ">×",
        ">offered /s",
        ">goodput /s",
        ">÷ capacity",
        ">÷ 1×",
        ">200s in deadline %",
        ">… in node %",
        ">refused %",
        ">no answer",
        ">refusal p50 µs",
        ">refusal p99 µs",
        ">… in node p50 µs",
        ">… in node p99 µs",
        ">RSS ÷ 1×",
        ">client lag p99 µs",
        ">generator CPU busy %",
    ]);
    // No refusal, no refusal latency: `-` (`inf` is a failure at that rank).
    let us_or_none = |v: Option<f64>| v.map_or("-".into(), |v| us(Some(v)));
    for (proto, mix) in series(points) {
        for &m in multiples {
            let p = trials_of(points, proto, mix, m);
            if p.is_empty() {
                continue;
            }
            let med = |f: fn(&OverloadPoint) -> Option<f64>| over(&p, f).map(|(m, _, _)| m);
            t.row(vec![
                proto.into(),
                mix.into(),
                format!("{m}"),
                rps(med(|p| Some(p.offered_rps)).unwrap_or(0.0)),
                rps(med(|p| Some(p.goodput_rps)).unwrap_or(0.0)),
                ratio_range(over(&p, |p| Some(p.goodput_over_capacity))),
                ratio(over_good(&p, |p| p.goodput_over_1x).map(|(m, _, _)| m)),
                pct_range(over_good(&p, |p| p.ok_within_deadline_share)),
                over_good(&p, |p| p.ok_within_deadline_in_node_share)
                    .map_or("-".into(), |(m, _, _)| pct(m)),
                pct(med(|p| Some(p.refused_share)).unwrap_or(0.0)),
                p.iter().map(|p| p.timeouts + p.local_failures).sum::<u64>().to_string(),
                us_or_none(median_of_some(&p, |p| p.refusal_p50_us)),
                us_or_none(median_of_some(&p, |p| p.refusal_p99_us)),
                us_or_none(median_of_some(&p, |p| p.refusal_in_node_p50_us)),
                us_or_none(median_of_some(&p, |p| p.refusal_in_node_p99_us)),
                ratio_range(over_known(&p, |p| p.rss_over_1x)),
                us(median_of_some(&p, |p| p.send_lag_p99_us)),
                pct_range(over_known(&p, |p| p.cpu.generator_busy)),
            ]);
        }
    }
    md.push_str(&t.section("Past capacity"));

    let mut sim = Table::new(&[
        "protocol",
        "mix",
        ">×",
        ">goodput in node ÷ capacity",
        ">simulated ÷ capacity",
        ">simulated ÷ in node",
    ]);
    for (proto, mix) in series(points) {
        for &m in multiples {
            let p = trials_of(points, proto, mix, m);
            if p.is_empty() {
                continue;
            }
            sim.row(vec![
                proto.into(),
                mix.into(),
                format!("{m}"),
                ratio_range(over(&p, |p| Some(p.node_goodput_over_capacity))),
                ratio_range(over_known(&p, |p| p.simulated_goodput_over_capacity)),
                ratio_range(over_known(&p, |p| {
                    p.simulated_met
                        .filter(|_| p.server_met > 0)
                        .map(|s| s as f64 / p.server_met as f64)
                })),
            ]);
        }
    }
    md.push_str(&sim.section("The simulator's prediction"));
    md.push_str(
        "The same arrivals through `luge-sim`: one worker under the node's policy and admission, \
         estimates trusted; executions scaled to the mean the trial's closed-loop capacity run \
         measured, and each request costing the worker what that capacity leaves besides it (so \
         the simulated node serves the measured capacity at 1×). The path outside the node is \
         not modelled: the prediction stands beside the goodput the node reports by its own \
         clock.\n\n",
    );
    let saturated = generator_bound(points, multiples);
    if !saturated.is_empty() {
        let _ = writeln!(
            md,
            "**The load generator had no CPU left** at {} (its CPUs ≥ {:.0} % busy at the median \
             of the trials; `generator CPU busy` = the mean busy share, from `/proc/stat`, of the \
             CPUs it ran on over the whole point, its drain included — with `--pin worker` the \
             node's front ends share them). There the \
             client-measured columns include the generator's own queueing for a CPU: they \
             measure this machine as much as the node, whose own account is `… in node`.\n",
            saturated.join(", "),
            100.0 * SATURATED
        );
    }

    let mut st = Table::new(&[
        "protocol",
        ">capacity /s",
        ">before ÷ capacity",
        ">after ÷ capacity",
        ">back ≥ 90 % after ms",
        ">holds ≥ 90 % after ms",
        ">bins < 90 %",
        ">refused",
        ">no answer",
    ]);
    let mut protocols: Vec<&str> = steps.iter().map(|s| s.protocol).collect();
    protocols.dedup();
    for protocol in protocols {
        let s: Vec<&StepResult> = steps.iter().filter(|s| s.protocol == protocol).collect();
        st.row(vec![
            protocol.into(),
            rps(median_of_some(&s, |s| Some(s.capacity_rps)).unwrap_or(0.0)),
            ratio_range(over_good(&s, |s| s.before_over_capacity)),
            ratio_range(over_good(&s, |s| s.after_over_capacity)),
            ms_range(over(&s, |s| s.back_ms)),
            ms_range(over(&s, |s| s.holds_ms)),
            pct_range(over(&s, |s| s.bins_below_share)),
            s.iter().map(|s| s.refused).sum::<u64>().to_string(),
            s.iter().map(|s| s.no_answer).sum::<u64>().to_string(),
        ]);
    }
    let _ = writeln!(
        md,
        "## Step {STEP_LOW}× → {STEP_HIGH}× (fixed mix, 10 ms bins)\n\n\
         Goodput binned by answer time. `back`: from the step to the end of the first bin at \
         ≥ {:.0} % of capacity; `holds`: from the step until the {} ms moving average stays \
         ≥ {:.0} % to the end of the {STEP_HIGH}× phase.\n\n{}",
        100.0 * RECOVERED,
        HOLD_BINS as u64 * BIN_NS / 1_000_000,
        100.0 * RECOVERED,
        st.render()
    );
    let notes: Vec<String> = points
        .iter()
        .flat_map(|p| p.notes.iter().map(move |n| format!("{}: {n}", label(p))))
        .chain(steps.iter().flat_map(|s| {
            s.notes.iter().map(move |n| format!("{} step (trial {}): {n}", s.protocol, s.trial))
        }))
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}
