//! One dispatch decision vs worker count (1 … 64): SledgeScale's Algorithm 2 (a `work_before`
//! tree query per worker) beside LL(D) (the same scan reading one cached total per worker) and a
//! naive Algorithm 2 that sums each worker's queue from a `BTreeMap`, all in the same run; and
//! SledgeScale behind the uLL lane (HORSE §4.1.3, on by default in the runtime): an ordinary
//! arrival passing through it, and a uLL arrival borrowing a worker.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main,
};
use luge_sched::{
    EarlyBinding, EarlyChoice, Event, FunctionId, Policy, PolicyConfig, QueueKey, Request,
    RequestId, SledgeScale, UllConfig, UllLane,
};

mod common;

use common::{DEPTH, loaded};

const WORKERS: [usize; 5] = [1, 4, 16, 32, 64];

/// Benches the arrival of `req` at the loaded policy `p`, as `name`: every iteration decides on a
/// fresh clone of `p` (the clone is set-up, not measured), so queues keep DEPTH entries instead of
/// growing by one per iteration. One clone per timed batch: with many clones made ahead
/// (criterion's small-input batches) the decision read cold memory, and the lane's larger clone
/// made it look up to 2× slower than the same decision without the lane.
fn arrival<P: Policy + Clone>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    (name, n): (&str, usize),
    p: &P,
    req: Request,
) {
    group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
        b.iter_batched_ref(
            || (p.clone(), Vec::with_capacity(4)),
            |(p, out)| {
                p.on_event(0, Event::Arrival(req), out);
                black_box(&out);
            },
            BatchSize::NumIterations(1),
        )
    });
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_decision");
    for n in WORKERS {
        let cfg = PolicyConfig::with_workers(n);
        // A late deadline: no preemption, Algorithm 2 scans every worker.
        let late = Request::new(RequestId(1 << 40), FunctionId(0), 0, 5_000_000, 10_000);
        arrival(&mut group, ("sledgescale", n), &loaded(SledgeScale::new(&cfg)), late);
        let lld = loaded(EarlyBinding::new(EarlyChoice::LeastLoaded, &cfg));
        arrival(&mut group, ("lld", n), &lld, late);
        // Behind the lane (declared uLL only, so that the loaded requests are ordinary ones):
        // the same arrival passes through; a declared uLL one preempts the latest deadline.
        let lane = UllConfig { threshold: 0, ..UllConfig::default() };
        let behind = loaded(UllLane::new(SledgeScale::new(&cfg), lane));
        arrival(&mut group, ("sledgescale_lane", n), &behind, late);
        arrival(&mut group, ("sledgescale_lane_ull", n), &behind, late.with_ull(true));
        // Naive Algorithm 2 line 6: an O(queue) range sum per worker from a BTreeMap.
        let queues: Vec<BTreeMap<QueueKey, u64>> = (0..n)
            .map(|w| {
                (0..DEPTH as u64)
                    .map(|i| {
                        let id = RequestId((w as u64) << 32 | i);
                        (QueueKey { deadline: 1_000_000 + i * 997, id }, 10_000)
                    })
                    .collect()
            })
            .collect();
        group.bench_with_input(BenchmarkId::new("naive_btreemap", n), &n, |b, _| {
            b.iter_batched(
                || QueueKey { deadline: 1_020_000, id: RequestId(u64::MAX) },
                |end| {
                    let best = queues
                        .iter()
                        .enumerate()
                        .map(|(w, q)| (q.range(..=end).map(|(_, e)| e).sum::<u64>(), w))
                        .min();
                    black_box(best)
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, decision);
criterion_main!(benches);
