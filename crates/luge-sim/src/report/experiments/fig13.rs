//! SledgeScale Fig. 13: SD-VBS on 6 workers with SIFT's deadline swept, per policy.

use super::*;

/// Fig. 13: SD-VBS at a fixed 14.4 k rps on 6 workers; Segmentation and Classification have
/// deadlines of 2 × execution, SIFT's deadline goes from 1.13 ms to 11.3 ms.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let opts = run.opts;
    let n = run.requests(200_000);
    let workers = 6;
    let sift_deadlines: Vec<u64> = if opts.quick {
        vec![1_130_000, 11_300_000]
    } else {
        (1..=10).map(|k| 1_130_000 * k).collect()
    };
    let dist_for = |d: u64| -> Result<ServiceDist, ExperimentError> {
        let mix = Mix::new(vec![
            MixClass::point("sift", 113_000, 90.0).with_deadline(d),
            MixClass::point("segmentation", 1_100_000, 9.0).with_deadline(2_200_000),
            MixClass::point("classification", 2_070_000, 1.0).with_deadline(4_140_000),
        ])
        .map_err(ExperimentError::Workload)?;
        Ok(ServiceDist::from_mix(Path::new("sdvbs-fig13.mix"), mix))
    };
    let policies = [PolicyKind::SledgeScale, PolicyKind::Darc];
    let mut points = Vec::new();
    for &p in &policies {
        for &d in &sift_deadlines {
            points.push((p, d, dist_for(d)?));
        }
    }
    let reports = run.points(&points, |(policy, _, dist)| {
        let spec = WorkloadSpec::new(dist.clone())
            .with_rate(Rate::PerSecond(14_400.0))
            .map_err(|e| SimError::Config(format!("workload: {e}")))?
            .with_seed(opts.seed);
        let cfg = run.config(*policy, workers, &PolicyConfig::papers(workers));
        run_point(&spec, &cfg, n, JobShape::default())
    })?;
    let mut t = Tables::new(
        run.exp.title(),
        &format!("6 workers, 14.4 k rps (≈ 53 % load), {n} requests per point."),
        "policy,sift_deadline_ms,deadline_miss_rate,sift_p999_us,segmentation_p999_us,classification_p999_us,sift_miss,segmentation_miss,classification_miss",
        "policy | SIFT deadline ms | miss rate | SIFT p99.9 µs | Seg. p99.9 µs | Class. p99.9 µs",
    );
    for ((p, d, _), r) in points.iter().zip(&reports) {
        let class = |c: u16| r.per_class.iter().find(|x| x.class == c);
        let p999 = |c: u16| fmt_opt(class(c).and_then(|x| x.latency_us.p999));
        let miss = |c: u16| class(c).map_or(0.0, |x| x.deadline_miss_rate);
        let _ = writeln!(
            t.csv,
            "{},{:.2},{:.5},{},{},{},{:.5},{:.5},{:.5}",
            p.name(),
            *d as f64 / 1e6,
            r.deadline_miss_rate,
            p999(0),
            p999(1),
            p999(2),
            miss(0),
            miss(1),
            miss(2)
        );
        let _ = writeln!(
            t.md,
            "| {} | {:.2} | {:.2} % | {} | {} | {} |",
            p.name(),
            *d as f64 / 1e6,
            r.deadline_miss_rate * 100.0,
            p999(0),
            p999(1),
            p999(2)
        );
    }
    t.md.push_str("\nPaper: as SIFT's deadline grows SledgeScale's miss rate falls (it postpones SIFT to serve Segmentation and Classification); DARC's stays constant.\n");
    let mut w = Writer::new(&opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    let xs: Vec<f64> = sift_deadlines.iter().map(|&d| d as f64 / 1e6).collect();
    let chart = Chart::new(run.exp.title(), "SIFT deadline (ms)", "deadline-miss rate");
    let series = series_of(&policies, &xs, &reports, |r| Some(r.deadline_miss_rate));
    w.write("deadline_miss.svg", &svg(&chart, &series))?;
    w.finish(t.md)
}
