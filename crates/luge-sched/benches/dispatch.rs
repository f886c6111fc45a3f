//! One dispatch decision vs worker count (1 … 64): SledgeScale's Algorithm 2 (a `work_before`
//! tree query per worker) beside LL(D) (the same scan reading one cached total per worker) and a
//! naive Algorithm 2 that sums each worker's queue from a `BTreeMap`, all in the same run.

#![allow(missing_docs, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use luge_sched::{
    Action, Event, FunctionId, Policy, PolicyConfig, PolicyKind, QueueKey, Request, RequestId,
};

const WORKERS: [usize; 5] = [1, 4, 16, 32, 64];
/// Requests queued per worker behind the running one.
const DEPTH: usize = 32;

fn loaded(kind: PolicyKind, workers: usize) -> Box<dyn Policy> {
    let mut p = kind.build(&PolicyConfig::with_workers(workers));
    let mut out = Vec::new();
    let mut x = 42u64;
    for id in 0..(workers * (DEPTH + 1)) as u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let r = Request::new(RequestId(id), FunctionId(0), 0, 1_000_000 + (x >> 40), 10_000);
        p.on_event(0, Event::Arrival(r), &mut out);
    }
    for a in std::mem::take(&mut out) {
        if let Action::Run { worker, req } = a {
            p.on_event(0, Event::Started { worker, id: req.id }, &mut out);
        }
    }
    p
}

fn decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("dispatch_decision");
    for n in WORKERS {
        for kind in [PolicyKind::SledgeScale, PolicyKind::Lld] {
            let base = loaded(kind, n);
            // Clone through a fresh build + replay is too slow per iteration; instead measure a
            // decision on a long-lived policy: each arrival lands in some queue, so the state
            // drifts by one request per iteration, negligible against 32·n queued.
            let mut p = base;
            let mut id = 1u64 << 40;
            let mut out = Vec::with_capacity(4);
            group.bench_with_input(BenchmarkId::new(kind.name(), n), &n, |b, _| {
                b.iter(|| {
                    id += 1;
                    out.clear();
                    // A late deadline: no preemption, Algorithm 2 scans every worker.
                    let r = Request::new(RequestId(id), FunctionId(0), 0, 5_000_000, 10_000);
                    p.on_event(0, Event::Arrival(r), &mut out);
                    black_box(&out);
                })
            });
        }
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
