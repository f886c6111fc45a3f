//! Queue operations at 10 … 100 000 entries, each beside a std baseline doing the same work at
//! the same size in the same run: `CtEdfQueue` and `DeadlineQueue` insert+remove and pop+insert
//! vs `BTreeMap` and `BinaryHeap`; `work_before` (admission's wait, SledgeScale §3.3) and
//! `set_executed` of both vs the only std way to get them, a `BTreeMap` range sum and entry.
//! `scripts/bench-ratios.py` prints the ratios from criterion's output.

#![allow(missing_docs, clippy::unwrap_used)]

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use luge_sched::{
    CtEdfConfig, CtEdfQueue, DeadlineQueue, EdfQueue, Nanos, QueueKey, Request, RequestId,
};

mod common;

use common::Gen;

const SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];

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

/// Requests to add to full queues: ids above those of the filling.
struct Fresh {
    g: Gen,
    id: u64,
}

impl Fresh {
    fn new(seed: u64) -> Self {
        Self { g: Gen(seed), id: 1 << 40 }
    }

    fn req(&mut self) -> Request {
        self.id += 1;
        self.g.req(self.id)
    }
}

/// Benches `step` on `q` as `name`, handing it a fresh request each iteration.
fn with_fresh<Q, R>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    (name, n): (&str, usize),
    q: &mut Q,
    fresh: &mut Fresh,
    step: impl Fn(&mut Q, Request) -> R,
) {
    group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
        b.iter(|| {
            let r = fresh.req();
            black_box(step(q, r))
        })
    });
}

/// The benchmark group `name`: at every size, `ct` on a CT-EDF queue and `dq` on a
/// `DeadlineQueue` (the same operation), then the std baseline `step` on the structure `std_of`
/// fills to the same size, all fed one stream of fresh requests seeded with `seed`.
fn fresh_group<R, S, T>(
    c: &mut Criterion,
    (name, seed): (&str, u64),
    (ct, dq): (impl Fn(&mut CtEdfQueue, Request) -> R, impl Fn(&mut DeadlineQueue, Request) -> R),
    (std_name, std_of, step): (&str, impl Fn(usize) -> S, impl Fn(&mut S, Request) -> T),
) {
    let mut group = c.benchmark_group(name);
    for n in SIZES {
        let mut fresh = Fresh::new(seed);
        with_fresh(&mut group, ("ct_edf", n), &mut ct_filled(n), &mut fresh, &ct);
        with_fresh(&mut group, ("deadline_queue", n), &mut filled(n).0, &mut fresh, &dq);
        with_fresh(&mut group, (std_name, n), &mut std_of(n), &mut fresh, &step);
    }
    group.finish();
}

/// One insert of a fresh request into an EDF queue and its removal.
fn insert_then_remove<Q: EdfQueue>(q: &mut Q, r: Request) -> Option<Request> {
    q.insert(r);
    q.remove(r.key())
}

/// One pop of the most urgent request of an EDF queue and the insert of a fresh one.
fn pop_then_insert<Q: EdfQueue>(q: &mut Q, r: Request) -> Option<Request> {
    let top = q.pop();
    q.insert(r);
    top
}

fn insert_remove(c: &mut Criterion) {
    let btreemap = |m: &mut BTreeMap<QueueKey, Request>, r: Request| {
        m.insert(r.key(), r);
        m.remove(&r.key())
    };
    fresh_group(
        c,
        ("insert_remove", 99),
        (insert_then_remove, insert_then_remove),
        ("btreemap", |n| filled(n).1, btreemap),
    );
}

fn pop_insert(c: &mut Criterion) {
    let binary_heap = |h: &mut Heap, r: Request| {
        let top = h.pop();
        h.push(Reverse((r.key(), r.remaining())));
        top
    };
    fresh_group(
        c,
        ("pop_insert", 7),
        (pop_then_insert, pop_then_insert),
        ("binary_heap", |n| filled(n).2, binary_heap),
    );
}

fn work_before(c: &mut Criterion) {
    let mut group = c.benchmark_group("work_before");
    for n in SIZES {
        let (q, m, _, _) = filled(n);
        let ct = ct_filled(n);
        let mut g = Gen(5);
        group.bench_with_input(BenchmarkId::new("ct_edf", n), &n, |b, _| {
            b.iter(|| {
                let d: Nanos = g.next() % 1_000_000_000;
                black_box(ct.work_before(d))
            })
        });
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
        let mut ct = ct_filled(n);
        let mut g = Gen(11);
        group.bench_with_input(BenchmarkId::new("ct_edf", n), &n, |b, _| {
            b.iter(|| {
                let r = all[(g.next() % n as u64) as usize];
                black_box(ct.set_executed(r.key(), g.next() % 1_000))
            })
        });
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
