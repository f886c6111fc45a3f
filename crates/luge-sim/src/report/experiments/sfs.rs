//! SFS §VIII: the Azure mix on 4 workers at 50–100 % load, policies told nothing true about
//! execution times.

use super::*;

/// SFS §VIII: Azure mix on 4 workers at 50–100 % load; policies are told nothing true about
/// execution times (the median-of-256 estimator), as SFS assumes.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let opts = run.opts;
    let n = run.requests(50_000);
    let workers = 4;
    let loads: Vec<f64> =
        if opts.quick { vec![0.5, 0.9] } else { vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0] };
    let policies = [PolicyKind::Sfs, PolicyKind::Ps, PolicyKind::Fifo, PolicyKind::Srpt];
    let dist = ServiceDist::preset(Preset::Azure);
    let points = grid(&policies, &loads);
    let config_for = |p: PolicyKind| {
        let mut cfg = run.config(p, workers, &PolicyConfig::papers(workers));
        // SRPT is the oracle reference; everything else schedules blind.
        if p != PolicyKind::Srpt {
            cfg.estimator = crate::engine::EstimatorMode::Median256;
        }
        cfg
    };
    let reports = run.points(&points, |&(p, l)| run.at_load(&dist, l, &config_for(p), n))?;
    let mut t = Tables::new(
        run.exp.title(),
        &format!(
            "{workers} workers, {n} requests per point; SRPT has oracle execution times, the others the median-of-256 estimate."
        ),
        "policy,load,rte_mean,rte_p50,latency_p50_ms,latency_p99_ms,slowdown_p50,slowdown_p99",
        "policy | load | mean RTE | median RTE | p50 latency ms | p99 latency ms",
    );
    for (&(p, l), r) in points.iter().zip(&reports) {
        let ms = |v: Option<f64>| v.map_or_else(|| "inf".into(), |v| format!("{:.1}", v / 1000.0));
        let _ = writeln!(
            t.csv,
            "{},{l:.2},{:.4},{},{},{},{},{}",
            p.name(),
            r.rte.mean,
            fmt_opt(r.rte.p50),
            ms(r.latency_us.p50),
            ms(r.latency_us.p99),
            fmt_opt(r.slowdown.p50),
            fmt_opt(r.slowdown.p99)
        );
        let _ = writeln!(
            t.md,
            "| {} | {l:.1} | {:.3} | {} | {} | {} |",
            p.name(),
            r.rte.mean,
            r.rte.p50.map_or("—".into(), |v| format!("{v:.3}")),
            ms(r.latency_us.p50),
            ms(r.latency_us.p99)
        );
    }
    t.md.push_str("\nPaper: SFS approximates SRTF: most short functions reach RTE ≈ 1 where CFS (PS) gives them far less; FIFO suffers from head-of-line blocking.\n");
    let mut w = Writer::new(&opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    let chart = Chart::new(run.exp.title(), "load", "mean RTE");
    w.write(
        "rte.svg",
        &svg(&chart, &series_of(&policies, &loads, &reports, |r| Some(r.rte.mean))),
    )?;
    // The RTE distribution at 90 % load (the paper's CDF): 50 quantiles per policy.
    let cdf_load = 0.9;
    let jobs = jobs_of(&spec_at(&dist, cdf_load, workers, opts.seed)?, n);
    let cdfs = sweep(
        &policies,
        opts.threads,
        |&p| -> Result<Vec<(f64, f64)>, SimError> {
            let out = simulate(&config_for(p), &jobs)?;
            let mut rte: Vec<f64> = out
                .records
                .iter()
                .map(|r| {
                    r.latency().map_or(0.0, |l| (r.execution as f64 / l.max(1) as f64).min(1.0))
                })
                .collect();
            rte.sort_by(f64::total_cmp);
            Ok((0..=50)
                .map(|i| {
                    let q = f64::from(i) / 50.0;
                    let idx =
                        ((q * rte.len() as f64).ceil() as usize).clamp(1, rte.len().max(1)) - 1;
                    (rte.get(idx).copied().unwrap_or(0.0), q)
                })
                .collect())
        },
        |_, _| {},
    );
    let mut cdf_csv = String::from("policy,cumulative_fraction,rte\n");
    let mut series = Vec::new();
    for (p, cdf) in policies.iter().zip(cdfs) {
        let cdf = cdf?;
        for &(rte, q) in &cdf {
            let _ = writeln!(cdf_csv, "{},{q:.2},{rte:.4}", p.name());
        }
        series.push(Series { name: p.name().into(), points: cdf });
    }
    w.write("rte_cdf.csv", &cdf_csv)?;
    let chart = Chart::new(
        format!("{} — RTE CDF at load {cdf_load}", run.exp.title()),
        "RTE (execution ÷ turnaround)",
        "fraction of requests",
    );
    w.write("rte_cdf.svg", &svg(&chart, &series))?;
    w.finish(t.md)
}
