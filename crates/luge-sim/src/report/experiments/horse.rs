//! The uLL lane (HORSE §4.1.3) at the paper's and at this box's scale: `extreme-bimodal` (10 µs /
//! 10 ms, 99.5 : 0.5) with one deadline for both classes, so that EDF alone never favours the
//! short requests, on 1 and 48 workers at rising load, `sledgescale` with Luge's admission
//! without the lane, with it as shipped (share bound: 16 uLL requests in a row), and with it
//! unbounded.

use luge_sched::UllConfig;

use super::*;

/// Every request's relative deadline.
const DEADLINE: u64 = 50_000_000;

/// Runs the sweep: short-request p99 and long-request misses, lane off and on.
pub(super) fn run(run: &Run<'_>) -> Result<ExperimentOutput, ExperimentError> {
    let opts = run.opts;
    let n = run.requests(400_000);
    let loads: Vec<f64> =
        if opts.quick { vec![0.5, 0.9] } else { vec![0.5, 0.6, 0.7, 0.8, 0.9, 0.95] };
    let worker_counts = [1usize, 48];
    let mix = Mix::new(vec![
        MixClass::point("short", 10_000, 99.5).with_deadline(DEADLINE),
        MixClass::point("long", 10_000_000, 0.5).with_deadline(DEADLINE),
    ])
    .map_err(ExperimentError::Workload)?;
    let dist = ServiceDist::from_mix(Path::new("horse-lane.mix"), mix);
    // The lane: off, as shipped (bound 16), unbounded.
    let lanes: [(&str, Option<u32>); 3] = [("off", None), ("on", Some(16)), ("unbounded", Some(0))];
    let mut points = Vec::new();
    for &workers in &worker_counts {
        for (lane, burst) in lanes {
            for &load in &loads {
                points.push((workers, (lane, burst), load));
            }
        }
    }
    let reports = run.points(&points, |&(workers, (_, burst), load)| {
        let pc = PolicyConfig::with_workers(workers);
        let mut cfg = run.config(PolicyKind::SledgeScale, workers, &pc);
        cfg.ull_lane =
            burst.map(|burst| UllConfig { burst, admission: pc.admission, ..UllConfig::default() });
        run.at_load(&dist, load, &cfg, n)
    })?;
    let mut t = Tables::new(
        run.exp.title(),
        &format!(
            "`extreme-bimodal` (10 µs / 10 ms, 99.5 : 0.5) with one {} ms deadline for both \
             classes; `sledgescale` with Luge's default admission, without the uLL lane (`off`), \
             with it as shipped (`on`: threshold 20 µs, slice 100 µs, at most 16 uLL requests in \
             a row where another request waits) and without that share bound (`unbounded`); {n} \
             requests per point.",
            DEADLINE / 1_000_000
        ),
        "workers,lane,load,short_p50_us,short_p99_us,short_miss,long_p99_us,long_miss,deadline_miss_rate,preemptions",
        "workers | lane | load | short p50 µs | short p99 µs | short missed | long p99 µs | long missed",
    );
    for (&(workers, (lane_name, _), load), r) in points.iter().zip(&reports) {
        let class = |c: u16| r.per_class.iter().find(|x| x.class == c);
        let p = |c: u16, q: fn(&crate::record::Summary) -> Option<f64>| {
            fmt_opt(class(c).and_then(|x| q(&x.latency_us)))
        };
        let miss = |c: u16| class(c).map_or(0.0, |x| x.deadline_miss_rate);
        let _ = writeln!(
            t.csv,
            "{workers},{lane_name},{load:.2},{},{},{:.5},{},{:.5},{:.5},{}",
            p(0, |l| l.p50),
            p(0, |l| l.p99),
            miss(0),
            p(1, |l| l.p99),
            miss(1),
            r.deadline_miss_rate,
            r.preemptions
        );
        let _ = writeln!(
            t.md,
            "| {workers} | {lane_name} | {load:.2} | {} | {} | {:.2} % | {} | {:.2} % |",
            p(0, |l| l.p50),
            p(0, |l| l.p99),
            100.0 * miss(0),
            p(1, |l| l.p99),
            100.0 * miss(1)
        );
    }
    t.md.push_str(
        "\nHORSE §4.1.3 reserves a run queue for ultra-low-latency (≤ 20 µs, §2) functions so that they never wait \
         behind a longer request's slice. Without the lane a short request waits for the long \
         ones queued ahead of it whenever their deadlines are no later than its own.\n",
    );
    let mut w = Writer::new(&opts.out_dir)?;
    w.write("results.csv", &t.csv)?;
    for &workers in &worker_counts {
        let chart = Chart::new(
            format!("{} ({workers} workers)", run.exp.title()),
            "load",
            "short-request p99 (µs)",
        );
        let series: Vec<Series> = lanes
            .into_iter()
            .map(|(lane, _)| Series {
                name: format!("lane {lane}"),
                points: points
                    .iter()
                    .zip(&reports)
                    .filter(|((w, (l, _), _), _)| *w == workers && *l == lane)
                    .map(|((_, _, load), r)| {
                        let short = r.per_class.iter().find(|x| x.class == 0);
                        (*load, short.and_then(|x| x.latency_us.p99).unwrap_or(f64::INFINITY))
                    })
                    .collect(),
            })
            .collect();
        w.write(&format!("short_p99_{workers}w.svg"), &svg(&chart, &series))?;
    }
    w.finish(t.md)
}
