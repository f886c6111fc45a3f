//! SFS §VIII: the Azure mix on 4 workers at 50–100 % load, policies told nothing true about
//! execution times.

use super::*;

/// SFS §VIII: Azure mix on 4 workers at 50–100 % load; policies are told nothing true about
/// execution times (the median-of-256 estimator), as SFS assumes.
pub(super) fn run(
    opts: &ExperimentOptions,
    progress: &(dyn Fn(&str, usize, usize) + Sync),
) -> Result<ExperimentOutput, ExperimentError> {
    let exp = Experiment::Sfs;
    let n = requests(opts, 50_000);
    let workers = 4;
    let loads: Vec<f64> =
        if opts.quick { vec![0.5, 0.9] } else { vec![0.5, 0.6, 0.7, 0.8, 0.9, 1.0] };
    let policies = [PolicyKind::Sfs, PolicyKind::Ps, PolicyKind::Fifo, PolicyKind::Srpt];
    let dist = ServiceDist::preset(Preset::Azure);
    let points: Vec<(PolicyKind, f64)> =
        policies.iter().flat_map(|&p| loads.iter().map(move |&l| (p, l))).collect();
    let config_for = |p: PolicyKind| {
        let mut cfg = base_config(opts, p, workers, &PolicyConfig::papers(workers));
        // SRPT is the oracle reference; everything else schedules blind.
        if p != PolicyKind::Srpt {
            cfg.estimator = crate::engine::EstimatorMode::Median256;
        }
        cfg
    };
    let reports = run_points(
        &points,
        opts,
        exp.name(),
        |&(p, l)| run_point(&spec_at(&dist, l, workers, opts.seed), &config_for(p), n),
        progress,
    )?;
    let mut w = Writer::new(&opts.out_dir)?;
    let mut csv = String::from(
        "policy,load,rte_mean,rte_p50,latency_p50_ms,latency_p99_ms,slowdown_p50,slowdown_p99\n",
    );
    let mut md = format!(
        "# {}\n\n{workers} workers, {n} requests per point; SRPT has oracle execution times, the others the median-of-256 estimate.\n\n| policy | load | mean RTE | median RTE | p50 latency ms | p99 latency ms |\n|---|---|---|---|---|---|\n",
        exp.title()
    );
    for (&(p, l), r) in points.iter().zip(&reports) {
        let ms = |v: Option<f64>| v.map_or_else(|| "inf".into(), |v| format!("{:.1}", v / 1000.0));
        let _ = writeln!(
            csv,
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
            md,
            "| {} | {l:.1} | {:.3} | {} | {} | {} |",
            p.name(),
            r.rte.mean,
            r.rte.p50.map_or("—".into(), |v| format!("{v:.3}")),
            ms(r.latency_us.p50),
            ms(r.latency_us.p99)
        );
    }
    md.push_str("\nPaper: SFS approximates SRTF: most short functions reach RTE ≈ 1 where CFS (PS) gives them far less; FIFO suffers from head-of-line blocking.\n");
    w.write("results.csv", &csv)?;
    let chart = Chart {
        title: exp.title().into(),
        x_label: "load".into(),
        y_label: "mean RTE".into(),
        log_y: false,
    };
    w.write(
        "rte.svg",
        &svg(&chart, &series_of(&policies, &loads, &reports, |r| Some(r.rte.mean))),
    )?;
    // The RTE distribution at 90 % load (the paper's CDF): 50 quantiles per policy.
    let cdf_load = 0.9;
    let jobs = jobs_of(&spec_at(&dist, cdf_load, workers, opts.seed), n);
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
    let chart = Chart {
        title: format!("{} — RTE CDF at load {cdf_load}", exp.title()),
        x_label: "RTE (execution ÷ turnaround)".into(),
        y_label: "fraction of requests".into(),
        log_y: false,
    };
    w.write("rte_cdf.svg", &svg(&chart, &series))?;
    w.write("summary.md", &md)?;
    Ok(ExperimentOutput { summary: md, files: w.files })
}
