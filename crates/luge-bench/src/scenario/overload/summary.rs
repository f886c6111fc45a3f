//! The Markdown summary and the SVG plots of `luge bench overload`.

use std::fmt::Write as _;
use std::time::Duration;

use luge_sim::{Chart, Series};

use super::super::OverloadOptions;
use super::super::output::{Results, Table, pct, ratio, rps, us};
use super::step::{StepBin, StepResult};
use super::{
    BIMODAL_SPEC, BIN_NS, CLOSED_OUTSTANDING, CapacityResult, FIXED_SPEC, FIXED_US, HOLD_BINS,
    OverloadPoint, RECOVERED, STEP_HIGH, STEP_LOW, TIMEOUT, label,
};
use crate::calibrate::Calibration;
use crate::error::BenchError;

/// The (protocol, mix) series of the points, in order, once each.
fn series(points: &[OverloadPoint]) -> Vec<(&'static str, &'static str)> {
    let mut names: Vec<_> = points.iter().map(|p| (p.protocol, p.mix)).collect();
    names.dedup();
    names
}

pub(super) fn plots(
    points: &[OverloadPoint],
    steps: &[StepResult],
    out: &mut Results,
) -> Result<(), BenchError> {
    let names = series(points);
    let sweep = |get: fn(&OverloadPoint) -> f64| -> Vec<Series> {
        names
            .iter()
            .map(|&(proto, mix)| Series {
                name: format!("{proto} {mix}"),
                points: points
                    .iter()
                    .filter(|p| p.protocol == proto && p.mix == mix)
                    .map(|p| (p.multiple, get(p)))
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
    for s in steps {
        let series = |name: &str, get: fn(&StepBin) -> f64| Series {
            name: name.to_owned(),
            points: s.bins.iter().map(|b| (b.t_ms, get(b) / s.capacity_rps)).collect(),
        };
        let title = format!(
            "{} fixed mix, {}× → {}× capacity: 10 ms bins",
            s.protocol, s.low_multiple, s.high_multiple
        );
        out.plot(
            &format!("step-{}.svg", s.protocol),
            &Chart::new(title, "time from the step (ms)", "÷ capacity"),
            &[
                series("goodput", |b| b.goodput_rps),
                series("offered", |b| b.offered_rps),
                series("refused", |b| b.refused_rps),
            ],
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
         on that protocol; each multiple is of it. Open-loop Poisson points of {:.2} s. Goodput = \
         200s whose client-measured latency is within their deadline, per second; `… in node` = \
         the same judged on the time the node reports (queueing + execution: from the \
         datagram's receipt or the HTTP request head's to the answer). Refused = 503 \
         (HTTP `Luge-Outcome` `deadline_unreachable`, `shed`, `overloaded`) / `Overloaded` \
         (UDP-RPC). No answer = timeouts ({} s). RSS = peak `VmRSS` of this process (node and \
         load generator, which keeps no samples) during the point.\n",
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
            let p = points.iter().find(|p| p.protocol == proto && p.mix == mix && p.multiple == m);
            row.push(ratio(p.map(|p| p.goodput_over_capacity)));
        }
        headline.row(row);
    }
    md.push_str(&headline.section("Goodput ÷ capacity"));

    let mut cap = Table::new(&[
        "protocol",
        "mix",
        ">capacity /s",
        ">mean execution µs",
        ">refused",
        ">no answer",
    ]);
    for c in capacities {
        cap.row(vec![
            c.protocol.into(),
            c.mix.into(),
            rps(c.capacity_rps),
            us(c.mean_execution_us),
            c.refused.to_string(),
            c.timeouts.to_string(),
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
        ">no answer %",
        ">refusal p50 µs",
        ">refusal p99 µs",
        ">… in node p50 µs",
        ">… in node p99 µs",
        ">RSS ÷ 1×",
        ">client lag p99 µs",
    ]);
    // No refusal, no refusal latency: `-` (`inf` is a failure at that rank).
    let us_or_none = |v: Option<f64>| v.map_or("-".into(), |v| us(Some(v)));
    for p in points {
        t.row(vec![
            p.protocol.into(),
            p.mix.into(),
            format!("{}", p.multiple),
            rps(p.offered_rps),
            rps(p.goodput_rps),
            ratio(Some(p.goodput_over_capacity)),
            ratio(p.goodput_over_1x),
            p.ok_within_deadline_share.map_or("-".into(), pct),
            p.ok_within_deadline_in_node_share.map_or("-".into(), pct),
            pct(p.refused_share),
            pct(p.no_answer_share),
            us_or_none(p.refusal_p50_us),
            us_or_none(p.refusal_p99_us),
            us_or_none(p.refusal_in_node_p50_us),
            us_or_none(p.refusal_in_node_p99_us),
            ratio(p.rss_over_1x),
            us(p.send_lag_p99_us),
        ]);
    }
    md.push_str(&t.section("Past capacity"));

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
    let ms = |v: Option<f64>| v.map_or("never".into(), |x| format!("{x:.0}"));
    for s in steps {
        st.row(vec![
            s.protocol.into(),
            rps(s.capacity_rps),
            ratio(s.before_over_capacity),
            ratio(s.after_over_capacity),
            ms(s.back_ms),
            ms(s.holds_ms),
            s.bins_below_share.map_or("-".into(), |x| format!("{} %", pct(x))),
            s.refused.to_string(),
            s.timeouts.to_string(),
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
        .chain(
            steps
                .iter()
                .flat_map(|s| s.notes.iter().map(move |n| format!("{} step: {n}", s.protocol))),
        )
        .collect();
    if !notes.is_empty() {
        let _ = writeln!(md, "## Notes\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}
