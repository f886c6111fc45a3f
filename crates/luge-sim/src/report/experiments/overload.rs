//! The overload experiment: what admission on the wait and shedding buy when more arrives than the
//! workers can serve (`docs/scheduling.md`, "Admission and shedding").
//!
//! Part 1 offers 1×, 1.5×, 2× and 5× the workers' capacity (capacity = workers ÷ mean execution)
//! of a fixed 10 µs mix and SledgeScale's high-bimodal mix (Table 3), deadlines 10× execution, to
//! `sledgescale` with Luge's default admission and with the papers' queue-everything setting, and
//! reports goodput (answers within their deadline per second) as a share of capacity and of the
//! same policy's goodput at 1×. Part 2 runs high-bimodal at 0.9 and 0.95 load and compares the
//! short requests' p99 with SRPT's (the oracle reference). Refused requests count as misses and as
//! infinite latency in the percentiles, as everywhere in the simulator.

use std::fmt::Write as _;

use luge_sched::{Admission, PolicyConfig, PolicyKind};
use luge_workload::{Preset, ServiceDist};

use super::{ExperimentError, ExperimentOutput, Run, Tables, Writer, md_head};
use crate::record::Report;
use crate::report::plot::{Chart, Series, svg};

/// One configuration compared: a label, the policy and its admission.
#[derive(Debug, Clone, Copy)]
struct Contender {
    label: &'static str,
    policy: PolicyKind,
    admission: Admission,
}

const LUGE: Contender = Contender {
    label: "sledgescale (Luge admission)",
    policy: PolicyKind::SledgeScale,
    admission: Admission::DEADLINE,
};
const PROTECT: Contender = Contender {
    // No comma: a label is a field of `results.csv`.
    label: "sledgescale (Luge admission; protect admitted)",
    policy: PolicyKind::SledgeScale,
    admission: Admission { protect_admitted: true, ..Admission::DEADLINE },
};
const PAPERS: Contender = Contender {
    label: "sledgescale (queue everything)",
    policy: PolicyKind::SledgeScale,
    admission: Admission::NONE,
};
const SRPT: Contender = Contender {
    label: "srpt (oracle reference)",
    policy: PolicyKind::Srpt,
    admission: Admission::NONE,
};

fn short_p99(r: &Report) -> Option<f64> {
    r.per_class.iter().find(|c| c.class == 0).and_then(|c| c.latency_us.p99)
}

fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "∞".into(), |v| format!("{v:.0}"))
}

/// Runs the overload experiment.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let n = run.requests(200_000);
    let workers = 2;
    let multiples = [1.0, 1.5, 2.0, 5.0];
    let mixes = [("fixed", Preset::Fixed), ("high-bimodal", Preset::HighBimodal)];
    let contenders = [LUGE, PROTECT, PAPERS];
    let mut points = Vec::new();
    for (mix, preset) in mixes {
        for c in contenders {
            for m in multiples {
                points.push((mix, ServiceDist::preset(preset), c, m));
            }
        }
    }
    for load in [0.9, 0.95] {
        for c in [LUGE, SRPT] {
            points.push(("high-bimodal", ServiceDist::preset(Preset::HighBimodal), c, load));
        }
    }
    let reports = run.points(&points, |(_, dist, c, load)| {
        let pc = PolicyConfig { admission: c.admission, ..PolicyConfig::papers(workers) };
        let mut cfg = run.config(c.policy, workers, &pc);
        // As in the runtime: estimates include a request's start-up on its worker.
        cfg.estimate_start_cost = true;
        run.at_load(dist, *load, &cfg, n)
    })?;
    let mut t = Tables::new(
        "Overload: admission on the wait and shedding",
        &format!(
            "{workers} workers, {n} requests per point, deadlines 10× execution, Poisson arrivals. Goodput = answers within their deadline per second; capacity = workers ÷ mean execution (start-up costs not included, so the fixed 10 µs mix cannot reach 100 %); useful work = share of worker time spent executing requests that met their deadline."
        ),
        "mix,contender,offered_x_capacity,goodput_rps,goodput_share_of_capacity,goodput_vs_1x,useful_utilization,refused_share,met_share_of_completed,p99_us",
        "mix | contender | offered | goodput / capacity | goodput / own 1× | useful work | refused | completed within deadline",
    );
    let mut charts: Vec<(String, Vec<Series>)> = Vec::new();
    let part1 = mixes.len() * contenders.len() * multiples.len();
    for (i, ((mix, dist, c, m), r)) in points.iter().zip(&reports).enumerate().take(part1) {
        let capacity = workers as f64 * 1e9 / dist.mean();
        let first = i - i % multiples.len();
        let at_1x = reports[first].goodput_rps.max(f64::MIN_POSITIVE);
        let refused = r.rejected as f64 / r.requests.max(1) as f64;
        let met = r.requests as f64 * (1.0 - r.deadline_miss_rate) / r.completed.max(1) as f64;
        let _ = writeln!(
            t.csv,
            "{mix},{},{m},{:.1},{:.4},{:.4},{:.4},{refused:.4},{met:.4},{}",
            c.label,
            r.goodput_rps,
            r.goodput_rps / capacity,
            r.goodput_rps / at_1x,
            r.useful_utilization,
            r.latency_us.p99.map_or(String::new(), |v| format!("{v:.1}")),
        );
        let _ = writeln!(
            t.md,
            "| {mix} | {} | {m}× | {:.1} % | {:.1} % | {:.1} % | {:.1} % | {:.2} % |",
            c.label,
            100.0 * r.goodput_rps / capacity,
            100.0 * r.goodput_rps / at_1x,
            100.0 * r.useful_utilization,
            100.0 * refused,
            100.0 * met,
        );
        let k = charts.iter().position(|(x, _)| x == mix).unwrap_or_else(|| {
            charts.push(((*mix).to_owned(), Vec::new()));
            charts.len() - 1
        });
        let series = &mut charts[k].1;
        let point = (*m, r.goodput_rps / capacity);
        match series.iter_mut().find(|s| s.name == c.label) {
            Some(s) => s.points.push(point),
            None => series.push(Series { name: c.label.into(), points: vec![point] }),
        }
    }
    t.md.push_str("\n## High-bimodal near saturation: short requests' p99 against SRPT\n\n");
    t.md.push_str(&md_head("load | Luge p99 (µs) | SRPT p99 (µs) | ratio | Luge refused"));
    let tail = &reports[part1..];
    for (pair, load) in tail.chunks(2).zip([0.9, 0.95]) {
        let [luge, srpt] = pair else { continue };
        let ratio = match (short_p99(luge), short_p99(srpt)) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
            _ => "∞".into(),
        };
        let _ = writeln!(
            t.md,
            "| {load} | {} | {} | {ratio} | {:.2} % |",
            us(short_p99(luge)),
            us(short_p99(srpt)),
            100.0 * luge.rejected as f64 / luge.requests.max(1) as f64,
        );
        let _ = writeln!(
            t.csv,
            "high-bimodal,short_p99_vs_srpt,{load},,,,,,,{}",
            short_p99(luge).map_or(String::new(), |v| format!("{v:.1}"))
        );
    }
    let mut w = Writer::new(&run.opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    for (mix, series) in &charts {
        let title = format!("Goodput under overload, {mix}");
        let chart = Chart::new(title, "offered load (× capacity)", "goodput / capacity");
        w.write(&format!("goodput_{mix}.svg"), &svg(&chart, series))?;
    }
    w.finish(t.md)
}
