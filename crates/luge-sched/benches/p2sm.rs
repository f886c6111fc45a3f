//! P²SM (HORSE §4.1, Alg. 1) beside what it replaces, in the same run: merging a batch of m
//! requests into a sorted run list of n with a precomputed plan (`plan` on the front end's side,
//! `merge` on the worker's) vs m single sorted inserts. `merge` alone is the worker's cost.

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use luge_sched::RunList;

mod common;

use common::Gen;

fn list(n: usize, g: &mut Gen) -> RunList<u64, u64> {
    let mut keys: Vec<u64> = (0..n).map(|_| g.next() % 1_000_000).collect();
    keys.sort_unstable();
    let mut plan_list = RunList::new();
    let plan = plan_list.plan(keys.iter().map(|&k| (k, k)));
    plan_list.merge(plan).unwrap();
    plan_list
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("p2sm");
    for (n, m) in [(100, 16), (1_000, 16), (1_000, 64), (10_000, 64)] {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let base = list(n, &mut g);
        let batch: Vec<(u64, u64)> = (0..m).map(|_| (g.next() % 1_000_000, 0)).collect();
        let id = format!("n={n}/m={m}");
        group.bench_function(BenchmarkId::new("single_inserts", &id), |b| {
            b.iter_batched(
                || base.clone(),
                |mut l| {
                    for &(k, v) in &batch {
                        l.insert(k, v);
                    }
                    black_box(l.len())
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(BenchmarkId::new("plan_and_merge", &id), |b| {
            b.iter_batched(
                || base.clone(),
                |mut l| {
                    let plan = l.plan(batch.iter().copied());
                    l.merge(plan).unwrap();
                    black_box(l.len())
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(BenchmarkId::new("merge_only", &id), |b| {
            b.iter_batched(
                || {
                    let mut l = base.clone();
                    let plan = l.plan(batch.iter().copied());
                    (l, plan)
                },
                |(mut l, plan)| {
                    l.merge(plan).unwrap();
                    black_box(l.len())
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
