//! Queue operations at 10 … 100 000 entries, each beside a std baseline doing the same work at
//! the same size in the same run: `DeadlineQueue` insert+remove and pop+insert vs
//! `BTreeMap` and `BinaryHeap`; `work_before` vs the only std way to get it, a `BTreeMap` range
//! sum. `scripts/bench-ratios.py` prints the ratios from criterion's output.

#![allow(missing_docs, clippy::unwrap_used)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use luge_sched::{
    CtEdfConfig, CtEdfQueue, DeadlineQueue, EdfQueue, FunctionId, Nanos, QueueKey, Request,
    RequestId,
};

const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];

struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn req(&mut self, id: u64) -> Request {
        let d = self.next() % 1_000_000_000;
        Request::new(RequestId(id), FunctionId(0), 0, d, 1_000 + self.next() % 100_000)
    }
}

type Heap = BinaryHeap<Reverse<(QueueKey, u64)>>;

fn filled(n: usize) -> (DeadlineQueue, BTreeMap<QueueKey, Request>, Heap, Vec<Request>) {
    let mut g = Gen(0x1234_5678);
    let mut q = DeadlineQueue::with_capacity(n + 1);
    let mut m = BTreeMap::new();
    let mut h = BinaryHeap::with_capacity(n + 1);
    let mut all = Vec::with_capacity(n);
    for id in 0..n as u64 {
        let r = g.req(id);
        q.insert(r);
        m.insert(r.key(), r);
        h.push(Reverse((r.key(), r.remaining())));
        all.push(r);
    }
    (q, m, h, all)
}

/// A CT-EDF queue over the same deadlines (0 … 1 s): Δwindow = 1 ms gives a 1.024 s horizon.
fn ct_filled(n: usize) -> CtEdfQueue {
    let (_, _, _, all) = filled(n);
    let mut q = CtEdfQueue::with_capacity(CtEdfConfig { delta_window: 1_000_000 }, n + 1);
    for r in all {
        q.insert(r);
    }
    q
}

fn insert_remove(c: &mut Criterion) {
    let mut group = c.benchmark_group("insert_remove");
    for n in SIZES {
        let (mut q, mut m, _, _) = filled(n);
        let mut ct = ct_filled(n);
        let mut g = Gen(99);
        let mut id = 1u64 << 40;
        group.bench_with_input(BenchmarkId::new("ct_edf", n), &n, |b, _| {
            b.iter(|| {
                id += 1;
                let r = g.req(id);
                ct.insert(r);
                black_box(ct.remove(r.key()));
            })
        });
        group.bench_with_input(BenchmarkId::new("deadline_queue", n), &n, |b, _| {
            b.iter(|| {
                id += 1;
                let r = g.req(id);
                q.insert(r);
                black_box(q.remove(r.key()));
            })
        });
        group.bench_with_input(BenchmarkId::new("btreemap", n), &n, |b, _| {
            b.iter(|| {
                id += 1;
                let r = g.req(id);
                m.insert(r.key(), r);
                black_box(m.remove(&r.key()));
            })
        });
    }
    group.finish();
}

fn pop_insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("pop_insert");
    for n in SIZES {
        let (mut q, _, mut h, _) = filled(n);
        let mut ct = ct_filled(n);
        let mut g = Gen(7);
        let mut id = 1u64 << 40;
        group.bench_with_input(BenchmarkId::new("ct_edf", n), &n, |b, _| {
            b.iter(|| {
                let top = ct.pop();
                id += 1;
                ct.insert(g.req(id));
                black_box(top)
            })
        });
        group.bench_with_input(BenchmarkId::new("deadline_queue", n), &n, |b, _| {
            b.iter(|| {
                let top = q.pop();
                id += 1;
                q.insert(g.req(id));
                black_box(top)
            })
        });
        group.bench_with_input(BenchmarkId::new("binary_heap", n), &n, |b, _| {
            b.iter(|| {
                let top = h.pop();
                id += 1;
                let r = g.req(id);
                h.push(Reverse((r.key(), r.remaining())));
                black_box(top)
            })
        });
    }
    group.finish();
}

fn work_before(c: &mut Criterion) {
    let mut group = c.benchmark_group("work_before");
    for n in SIZES {
        let (q, m, _, _) = filled(n);
        let mut g = Gen(5);
        group.bench_with_input(BenchmarkId::new("deadline_queue", n), &n, |b, _| {
            b.iter(|| {
                let d: Nanos = g.next() % 1_000_000_000;
                black_box(q.work_before(d))
            })
        });
        group.bench_with_input(BenchmarkId::new("btreemap_range_sum", n), &n, |b, _| {
            b.iter(|| {
                let d: Nanos = g.next() % 1_000_000_000;
                let end = QueueKey { deadline: d, id: RequestId(u64::MAX) };
                black_box(m.range(..=end).map(|(_, r)| r.remaining()).sum::<u64>())
            })
        });
    }
    group.finish();
}

fn update(c: &mut Criterion) {
    let mut group = c.benchmark_group("update_remaining");
    for n in SIZES {
        let (mut q, mut m, _, all) = filled(n);
        let mut g = Gen(11);
        group.bench_with_input(BenchmarkId::new("deadline_queue", n), &n, |b, _| {
            b.iter(|| {
                let r = all[(g.next() % n as u64) as usize];
                black_box(q.set_executed(r.key(), g.next() % 1_000))
            })
        });
        group.bench_with_input(BenchmarkId::new("btreemap", n), &n, |b, _| {
            b.iter(|| {
                let r = all[(g.next() % n as u64) as usize];
                if let Some(e) = m.get_mut(&r.key()) {
                    e.executed = g.next() % 1_000;
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, insert_remove, pop_insert, work_before, update);
criterion_main!(benches);
