//! Property tests of [`DeadlineQueue`] against a naive `Vec` reference: random sequences of
//! insert / remove / pop / update / `work_before` must agree on every observable after every op.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{DeadlineQueue, EdfQueue, FunctionId, Nanos, QueueKey, Request, RequestId};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

#[derive(Debug, Clone)]
enum Op {
    /// Insert a new request (deadline drawn from a small range so ties are common).
    Insert {
        deadline: Nanos,
        expected: Nanos,
    },
    /// Remove the live entry at this index (mod live count), or an absent key if none.
    Remove(usize),
    /// Re-insert an existing key (must be refused).
    Duplicate(usize),
    Pop,
    /// Set `executed` of a live entry (may exceed `expected` to hit the floor).
    SetExecuted(usize, Nanos),
    WorkBefore(Nanos),
    WorkBeforeKey(usize),
    /// Admission of a newcomer (not inserted) with its own counted work and the queue's start.
    Admits {
        deadline: Nanos,
        expected: Nanos,
        own: Nanos,
        start: Nanos,
        rest_extra: Nanos,
    },
    /// The first request that misses if the queue starts at this time.
    FirstDoomed(Nanos),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..64u64, 0..5_000u64).prop_map(|(d, e)| Op::Insert { deadline: d * 1_000, expected: e }),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => any::<usize>().prop_map(Op::Duplicate),
        1 => Just(Op::Pop),
        2 => (any::<usize>(), 0..6_000u64).prop_map(|(i, x)| Op::SetExecuted(i, x)),
        2 => (0..70_000u64).prop_map(Op::WorkBefore),
        1 => any::<usize>().prop_map(Op::WorkBeforeKey),
        2 => (0..64u64, 0..5_000u64, 0..5_000u64, 0..30_000u64, prop_oneof![Just(0u64), 0..5_000u64])
            .prop_map(|(d, e, o, s, x)| Op::Admits {
                deadline: d * 1_000,
                expected: e,
                own: o,
                start: s,
                rest_extra: x,
            }),
        2 => (0..30_000u64).prop_map(Op::FirstDoomed),
    ]
}

#[derive(Default)]
struct Reference {
    items: Vec<Request>,
}

impl Reference {
    fn sorted(&self) -> Vec<Request> {
        let mut v = self.items.clone();
        v.sort_by_key(Request::key);
        v
    }
    fn work_before(&self, d: Nanos) -> Nanos {
        self.items.iter().filter(|r| r.absolute_deadline <= d).map(Request::remaining).sum()
    }
    fn work_before_key(&self, k: QueueKey) -> Nanos {
        self.items.iter().filter(|r| r.key() < k).map(Request::remaining).sum()
    }
    /// Whether `req` (counting `own` for itself, starting at `start`) fits, and everything queued
    /// after it (starting at `rest`) still finishes in time: every prefix summed naively.
    fn admits(&self, req: &Request, own: Nanos, start: Nanos, rest: Nanos) -> bool {
        if start + self.work_before_key(req.key()) + own > req.absolute_deadline {
            return false;
        }
        let sorted = self.sorted();
        (0..sorted.len()).filter(|&j| sorted[j].key() > req.key()).all(|j| {
            let upto: Nanos = sorted[..=j].iter().map(Request::remaining).sum();
            rest + upto + own <= sorted[j].absolute_deadline
        })
    }
    fn first_doomed(&self, start: Nanos) -> Option<QueueKey> {
        let mut t = start;
        self.sorted().into_iter().find_map(|r| {
            t += r.remaining();
            (t > r.absolute_deadline).then(|| r.key())
        })
    }
}

#[derive(Default)]
struct Hits {
    live_removes: u64,
    updates: u64,
    nonzero_work_before: u64,
    pops: u64,
    admitted: u64,
    refused_for_others: u64,
    doomed: u64,
}

fn run_case(ops: &[Op], hits: &mut Hits) -> Result<(), TestCaseError> {
    let mut q = DeadlineQueue::new();
    let mut reference = Reference::default();
    let mut next_id = 0u64;
    for op in ops {
        match *op {
            Op::Insert { deadline, expected } => {
                next_id += 1;
                let r = Request::new(RequestId(next_id), FunctionId(0), 0, deadline, expected);
                prop_assert!(q.insert(r));
                reference.items.push(r);
            }
            Op::Remove(i) => {
                if reference.items.is_empty() {
                    let absent = QueueKey { deadline: 1, id: RequestId(u64::MAX) };
                    prop_assert_eq!(q.remove(absent), None);
                } else {
                    let r = reference.items.swap_remove(i % reference.items.len());
                    prop_assert_eq!(q.remove(r.key()), Some(r));
                    hits.live_removes += 1;
                }
            }
            Op::Duplicate(i) => {
                if !reference.items.is_empty() {
                    let r = reference.items[i % reference.items.len()];
                    prop_assert!(!q.insert(r));
                }
            }
            Op::Pop => {
                let expect = reference.sorted().first().copied();
                if let Some(e) = expect {
                    reference.items.retain(|r| r.id != e.id);
                    hits.pops += 1;
                }
                prop_assert_eq!(q.pop(), expect);
            }
            Op::SetExecuted(i, x) => {
                if !reference.items.is_empty() {
                    let n = reference.items.len();
                    let r = &mut reference.items[i % n];
                    r.executed = x;
                    prop_assert!(q.set_executed(r.key(), x));
                    hits.updates += 1;
                }
            }
            Op::WorkBefore(d) => {
                let w = reference.work_before(d);
                hits.nonzero_work_before += u64::from(w > 0);
                prop_assert_eq!(q.work_before(d), w);
            }
            Op::WorkBeforeKey(i) => {
                if !reference.items.is_empty() {
                    let k = reference.items[i % reference.items.len()].key();
                    prop_assert_eq!(q.work_before_key(k), reference.work_before_key(k));
                }
            }
            Op::Admits { deadline, expected, own, start, rest_extra } => {
                let r = Request::new(RequestId(next_id + 1), FunctionId(0), 0, deadline, expected);
                let rest = start + rest_extra;
                let want = reference.admits(&r, own, start, rest);
                let own_fits = start + reference.work_before_key(r.key()) + own <= deadline;
                hits.admitted += u64::from(want);
                hits.refused_for_others += u64::from(!want && own_fits);
                prop_assert_eq!(q.admits(&r, own, start, rest), want);
            }
            Op::FirstDoomed(start) => {
                let want = reference.first_doomed(start);
                hits.doomed += u64::from(want.is_some());
                prop_assert_eq!(q.first_doomed(start), want);
            }
        }
        prop_assert_eq!(q.len(), reference.items.len());
        prop_assert_eq!(
            q.total_work(),
            reference.items.iter().map(Request::remaining).sum::<u64>()
        );
        prop_assert_eq!(q.peek().copied(), reference.sorted().first().copied());
        prop_assert_eq!(
            q.latest_deadline(),
            reference.items.iter().map(|r| r.absolute_deadline).max()
        );
    }
    let in_order: Vec<Request> = q.iter().copied().collect();
    prop_assert_eq!(in_order, reference.sorted());
    Ok(())
}

#[test]
fn deadline_queue_matches_naive_reference() {
    // 10^5 random op sequences (≈ 3 × 10^6 operations) — a few seconds with opt-level 2.
    let cases = std::env::var("LUGE_PROPTEST_CASES").ok().and_then(|s| s.parse().ok());
    let mut runner = TestRunner::new(Config {
        cases: cases.unwrap_or(100_000),
        failure_persistence: None,
        ..Config::default()
    });
    let hits = std::cell::RefCell::new(Hits::default());
    let result = runner
        .run(&proptest::collection::vec(op(), 0..60), |ops| run_case(&ops, &mut hits.borrow_mut()));
    if let Err(e) = result {
        panic!("{e}");
    }
    let hits = hits.into_inner();
    // The premise: the sequences really exercised live entries, not just an empty queue.
    assert!(hits.live_removes > 10_000, "live removes: {}", hits.live_removes);
    assert!(hits.updates > 10_000, "updates: {}", hits.updates);
    assert!(hits.pops > 10_000, "pops: {}", hits.pops);
    assert!(hits.nonzero_work_before > 10_000, "work_before > 0: {}", hits.nonzero_work_before);
    assert!(hits.admitted > 10_000, "admitted: {}", hits.admitted);
    assert!(
        hits.refused_for_others > 1_000,
        "refused to protect a queued request: {}",
        hits.refused_for_others
    );
    assert!(hits.doomed > 10_000, "doomed found: {}", hits.doomed);
}

#[test]
fn large_queue_matches_reference_at_scale() {
    // One long sequence at 10^4 live entries, where tree depth matters.
    let mut q = DeadlineQueue::new();
    let mut reference = Reference::default();
    let mut x = 12345u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for id in 0..10_000u64 {
        let r = Request::new(RequestId(id), FunctionId(0), 0, rnd() % 5_000, rnd() % 10_000);
        q.insert(r);
        reference.items.push(r);
    }
    for _ in 0..2_000 {
        let i = (rnd() as usize) % reference.items.len();
        let r = reference.items.swap_remove(i);
        assert_eq!(q.remove(r.key()), Some(r));
        let d = rnd() % 5_000;
        assert_eq!(q.work_before(d), reference.work_before(d));
    }
    assert_eq!(q.total_work(), reference.items.iter().map(Request::remaining).sum::<u64>());
}
