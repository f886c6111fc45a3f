//! The per-request metrics path (`Metrics::record`, called once per answered request by both
//! front ends) beside a std baseline doing the same bookkeeping the plain way in the same run:
//! one `Mutex<BTreeMap<String, _>>` keyed by an owned function name (a lock and an allocation
//! per request). Single-threaded and with two threads recording at once (the two front ends).
//! `scripts/bench-ratios.py` prints the ratios from criterion's output.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use luge_runtime::{Outcome, Timing};
use luge_server::{Answer, Metrics, Protocol};

fn outcome() -> Outcome {
    Outcome {
        request_id: 1,
        result: Ok(Vec::new()),
        timing: Timing {
            queued: Duration::from_micros(12),
            instantiation: Duration::from_micros(8),
            start_up: Duration::from_micros(9),
            executed: Duration::from_micros(30),
            total: Duration::from_micros(45),
            preemptions: 0,
        },
        stages: Vec::new(),
    }
}

/// The plain way: a lock, an owned key, a counter and three sums per request.
#[derive(Default)]
struct Naive(Mutex<BTreeMap<(String, &'static str), [u64; 4]>>);

impl Naive {
    fn record(&self, function: &str, o: &Outcome) {
        let mut m = self.0.lock().unwrap();
        let e = m.entry((function.to_owned(), "ok")).or_default();
        e[0] += 1;
        e[1] += o.timing.total.as_nanos() as u64;
        e[2] += o.timing.executed.as_nanos() as u64;
        e[3] += o.timing.queued.as_nanos() as u64;
    }
}

const NAMES: usize = 100;

/// Answered within a 10 ms deadline, not counted in flight.
const ANSWER: Answer = Answer { deadline: Duration::from_millis(10), was_in_flight: false };

fn names() -> Vec<String> {
    (0..NAMES).map(|i| format!("function-{i}")).collect()
}

/// Runs `f` on two threads at once for `iters` calls each; the time of the slower.
fn two_threads(iters: u64, f: impl Fn(u64) + Sync) -> Duration {
    let barrier = Barrier::new(2);
    std::thread::scope(|s| {
        let run = || {
            barrier.wait();
            let start = Instant::now();
            for i in 0..iters {
                f(i);
            }
            start.elapsed()
        };
        let a = s.spawn(run);
        let b = s.spawn(run);
        a.join().unwrap().max(b.join().unwrap())
    })
}

fn record(c: &mut Criterion) {
    let names = names();
    let o = outcome();
    let metrics = Arc::new(Metrics::new());
    let naive = Arc::new(Naive::default());
    for n in &names {
        metrics.record(n, Protocol::Rpc, &o, ANSWER);
        naive.record(n, &o);
    }
    let mut g = c.benchmark_group("metrics");
    g.bench_function(BenchmarkId::new("luge", "record"), |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            metrics.record(black_box(&names[i % NAMES]), Protocol::Rpc, black_box(&o), ANSWER);
        });
    });
    g.bench_function(BenchmarkId::new("std", "record"), |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            naive.record(black_box(&names[i % NAMES]), black_box(&o));
        });
    });
    g.bench_function(BenchmarkId::new("luge", "record-2-threads"), |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |i| {
                metrics.record(&names[i as usize % NAMES], Protocol::Rpc, black_box(&o), ANSWER);
            })
        });
    });
    g.bench_function(BenchmarkId::new("std", "record-2-threads"), |b| {
        b.iter_custom(|iters| {
            two_threads(iters, |i| naive.record(&names[i as usize % NAMES], black_box(&o)))
        });
    });
    g.finish();
}

criterion_group!(benches, record);
criterion_main!(benches);
