//! Property tests of [`CtEdfQueue`] (Edge-RT §IV-C, §V-D) and
//! [`Estimator`] (SledgeScale §4) against naive references.
//!
//! The CT-EDF reference is a plain `Vec` implementing the *same quantised semantics* as documented
//! in `ct_edf.rs`: an entry is filed under `min(⌊d/Δ⌋, C + 1023)` with a global filing sequence
//! number; pop order is the minimum by (effective quantum, filing sequence) among timeline
//! entries, then the overdue entries in the order they became overdue; `advance` takes the passed
//! entries in (quantum, sequence) order and either marks them overdue (true quantum past) or
//! re-files them at `min(⌊d/Δ⌋, C' + 1023)`. Random sequences of insert / remove (live, absent and
//! wrong-deadline keys) / duplicate insert / pop / advance / `set_executed` must agree on every
//! observable after every operation.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{
    CtEdfConfig, CtEdfQueue, EdfQueue, Estimator, EstimatorConfig, FunctionId, Nanos, QueueKey,
    Request, RequestId,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

const SLOTS: u64 = 1024;
/// Random op sequences for the CT-EDF property (≈ 1.2 × 10^6 operations, ~2 s at opt-level 2).
const CT_EDF_CASES: u32 = 30_000;

fn cases(default: u32) -> u32 {
    std::env::var("LUGE_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// CT-EDF
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    /// Insert a request whose deadline is `now + quanta·Δ + frac mod Δ` (clamped at 0).
    Insert {
        quanta: i64,
        frac: u64,
        expected: Nanos,
    },
    /// Remove the live entry at this index (mod live count).
    Remove(usize),
    /// Remove a live id with a wrong deadline (must fail and change nothing).
    RemoveWrongDeadline(usize),
    /// Remove an id that was never inserted.
    RemoveAbsent,
    /// Re-insert a live request (must be refused).
    Duplicate(usize),
    Pop,
    /// Move the clock forward by this many ns.
    Advance(u64),
    /// Set `executed` of a live entry.
    SetExecuted(usize, Nanos),
    /// Compare the full `iter()` order with the reference.
    CheckOrder,
}

fn op(delta: u64) -> impl Strategy<Value = Op> {
    let d = delta;
    prop_oneof![
        // Deadlines near `now` (ties within a quantum, already-missed ones) ...
        6 => (-4..24i64, any::<u64>(), 0..5_000u64)
            .prop_map(|(quanta, frac, expected)| Op::Insert { quanta, frac, expected }),
        // ... and anywhere up to twice the horizon (clamping and re-filing).
        2 => (0..2_100i64, any::<u64>(), 0..5_000u64)
            .prop_map(|(quanta, frac, expected)| Op::Insert { quanta, frac, expected }),
        3 => any::<usize>().prop_map(Op::Remove),
        1 => any::<usize>().prop_map(Op::RemoveWrongDeadline),
        1 => Just(Op::RemoveAbsent),
        1 => any::<usize>().prop_map(Op::Duplicate),
        4 => Just(Op::Pop),
        3 => (0..2 * d).prop_map(Op::Advance),
        2 => (0..40 * d).prop_map(Op::Advance),
        1 => (900 * d..2_500 * d).prop_map(Op::Advance),
        1 => (any::<usize>(), 0..6_000u64).prop_map(|(i, x)| Op::SetExecuted(i, x)),
        1 => Just(Op::CheckOrder),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Loc {
    /// On the timeline under this effective quantum (sorts before every overdue entry).
    Quantum(u64),
    Overdue,
}

#[derive(Debug, Clone, Copy)]
struct Item {
    req: Request,
    loc: Loc,
    /// Global filing sequence: order within a quantum, and within the overdue list.
    seq: u64,
}

struct Model {
    delta: u64,
    cur: u64,
    seq: u64,
    items: Vec<Item>,
}

impl Model {
    fn new(delta: u64) -> Self {
        Self { delta: delta.max(1), cur: 0, seq: 0, items: Vec::new() }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Where a request with this deadline is filed at the current quantum.
    fn file(&self, deadline: Nanos) -> Loc {
        let true_q = deadline / self.delta;
        if true_q < self.cur {
            Loc::Overdue
        } else {
            Loc::Quantum(true_q.min(self.cur.saturating_add(SLOTS - 1)))
        }
    }

    fn insert(&mut self, req: Request) -> bool {
        if self.items.iter().any(|it| it.req.id == req.id) {
            return false;
        }
        let loc = self.file(req.absolute_deadline);
        let seq = self.next_seq();
        self.items.push(Item { req, loc, seq });
        true
    }

    fn sorted(&self) -> Vec<Item> {
        let mut v = self.items.clone();
        v.sort_by_key(|it| (it.loc, it.seq));
        v
    }

    fn first(&self) -> Option<Item> {
        self.items.iter().min_by_key(|it| (it.loc, it.seq)).copied()
    }

    fn take(&mut self, id: RequestId) -> Option<Request> {
        let i = self.items.iter().position(|it| it.req.id == id)?;
        Some(self.items.remove(i).req)
    }

    /// Returns (entries that became overdue, entries re-filed).
    fn advance(&mut self, now: Nanos) -> (usize, usize) {
        let new = now / self.delta;
        if new <= self.cur {
            return (0, 0);
        }
        let mut passed: Vec<usize> = (0..self.items.len())
            .filter(|&i| matches!(self.items[i].loc, Loc::Quantum(q) if q < new))
            .collect();
        passed.sort_by_key(|&i| (self.items[i].loc, self.items[i].seq));
        self.cur = new;
        let (mut overdue, mut refiled) = (0, 0);
        for i in passed {
            let loc = self.file(self.items[i].req.absolute_deadline);
            if loc == Loc::Overdue {
                overdue += 1;
            } else {
                refiled += 1;
            }
            let seq = self.next_seq();
            self.items[i].loc = loc;
            self.items[i].seq = seq;
        }
        (overdue, refiled)
    }

    fn total_work(&self) -> Nanos {
        let t: u128 = self.items.iter().map(|it| u128::from(it.req.remaining())).sum();
        u64::try_from(t).unwrap_or(u64::MAX)
    }

    fn overdue_len(&self) -> usize {
        self.items.iter().filter(|it| it.loc == Loc::Overdue).count()
    }
}

#[derive(Debug, Default)]
struct Hits {
    live_removes: u64,
    pops: u64,
    overdue_pops: u64,
    became_overdue: u64,
    refiled: u64,
    clamped_inserts: u64,
    /// Peeks whose quantum's slot lies *below* the current slot (the bitmap search wrapped).
    wrapped_peeks: u64,
    max_len: usize,
    /// `first_doomed` probes that found a request, and `admits` probes refused for a later one.
    doomed: u64,
    admits_refused_later: u64,
}

fn check_entry(q: &CtEdfQueue, it: &Item) -> Result<(), TestCaseError> {
    let k = it.req.key();
    prop_assert_eq!(q.get(k), Some(&it.req));
    prop_assert_eq!(q.is_overdue(k), Some(it.loc == Loc::Overdue));
    let want = match it.loc {
        Loc::Quantum(qq) => Some(qq),
        Loc::Overdue => None,
    };
    prop_assert_eq!(q.quantum_of(k), want);
    Ok(())
}

/// `work_before`, `fits`, `admits` and `first_doomed` against walks of the reference's order,
/// for newcomers with deadlines around `now` (past, this quantum, soon, far, beyond the horizon)
/// and starts at `now` and later.
fn check_queries(
    q: &CtEdfQueue,
    m: &Model,
    now: Nanos,
    hits: &mut Hits,
) -> Result<(), TestCaseError> {
    let order = m.sorted();
    let d = m.delta;
    for start in [now, now.saturating_add(5 * d), now.saturating_add(7_777)] {
        let mut done: u64 = 0;
        let doomed = order.iter().find_map(|it| {
            done = done.saturating_add(it.req.remaining());
            (start.saturating_add(done) > it.req.absolute_deadline).then(|| it.req.key())
        });
        hits.doomed += u64::from(doomed.is_some());
        prop_assert_eq!(q.first_doomed(start), doomed, "start {}", start);
    }
    let probes = [
        now.saturating_sub(2 * d),
        now,
        now.saturating_add(d / 2),
        now.saturating_add(3 * d + 1),
        now.saturating_add(40 * d),
        now.saturating_add(800 * d),
        now.saturating_add(2_000 * d),
    ];
    for (k, deadline) in probes.into_iter().enumerate() {
        let work_of = |keep: &dyn Fn(&Item) -> bool| -> u64 {
            let t: u128 =
                m.items.iter().filter(|it| keep(it)).map(|it| u128::from(it.req.remaining())).sum();
            u64::try_from(t).unwrap_or(u64::MAX)
        };
        let loc = m.file(deadline);
        let before = match loc {
            Loc::Overdue => m.total_work(),
            Loc::Quantum(eff) => work_of(&|it| matches!(it.loc, Loc::Quantum(x) if x <= eff)),
        };
        prop_assert_eq!(q.work_before(deadline), before, "deadline {}", deadline);
        let req = Request::new(RequestId(u64::MAX - k as u64), FunctionId(0), 0, deadline, 900);
        let own = req.remaining();
        for (start, rest) in [
            (now, now),
            (now, now.saturating_add(3 * d)),
            (now.saturating_add(1), now.saturating_add(2)),
        ] {
            let fits = start.saturating_add(before).saturating_add(own) <= deadline;
            prop_assert_eq!(q.fits(&req, own, start), fits);
            if now > 1 << 62 {
                continue; // quantum starts beyond i64: the bound saturates (not modelled)
            }
            // Every later quantum, by its start, after all the work up to its end and `own`.
            let later_ok = match loc {
                Loc::Overdue => true,
                Loc::Quantum(eff) => m.items.iter().all(|it| match it.loc {
                    Loc::Quantum(x) if x > eff => {
                        let end = work_of(&|o| matches!(o.loc, Loc::Quantum(y) if y <= x));
                        i128::from(x) * i128::from(d) - i128::from(end) - i128::from(own)
                            >= i128::from(rest)
                    }
                    _ => true,
                }),
            };
            hits.admits_refused_later += u64::from(fits && !later_ok);
            prop_assert_eq!(q.admits(&req, own, start, rest), fits && later_ok);
        }
    }
    Ok(())
}

fn run_case(delta: u64, start: Nanos, ops: &[Op], hits: &mut Hits) -> Result<(), TestCaseError> {
    let mut q = CtEdfQueue::new(CtEdfConfig { delta_window: delta });
    let mut m = Model::new(delta);
    let mut now = start;
    prop_assert_eq!(q.advance(now), 0);
    m.advance(now);
    let mut next_id = 0u64;
    for op in ops {
        match *op {
            Op::Insert { quanta, frac, expected } => {
                next_id += 1;
                let d = i128::from(now)
                    + i128::from(quanta) * i128::from(delta)
                    + i128::from(frac % delta);
                let deadline = d.clamp(0, i128::from(u64::MAX)) as u64;
                // arrival 0, relative deadline = absolute deadline.
                let r = Request::new(RequestId(next_id), FunctionId(0), 0, deadline, expected);
                if deadline / delta >= m.cur.saturating_add(SLOTS) {
                    hits.clamped_inserts += 1;
                }
                prop_assert!(m.insert(r));
                prop_assert!(q.insert(r));
            }
            Op::Remove(i) => {
                if m.items.is_empty() {
                    prop_assert_eq!(
                        q.remove(Request::new(RequestId(0), FunctionId(0), 0, 5, 1).key()),
                        None
                    );
                } else {
                    let r = m.items[i % m.items.len()].req;
                    prop_assert_eq!(q.remove(r.key()), m.take(r.id));
                    hits.live_removes += 1;
                }
            }
            Op::RemoveWrongDeadline(i) => {
                if !m.items.is_empty() {
                    let r = m.items[i % m.items.len()].req;
                    let k = QueueKey { deadline: r.absolute_deadline ^ 1, id: r.id };
                    prop_assert_eq!(q.remove(k), None);
                }
            }
            Op::RemoveAbsent => {
                let k = QueueKey { deadline: now, id: RequestId(u64::MAX) };
                prop_assert_eq!(q.remove(k), None);
            }
            Op::Duplicate(i) => {
                if !m.items.is_empty() {
                    let r = m.items[i % m.items.len()].req;
                    prop_assert!(!q.insert(r));
                    prop_assert!(!m.insert(r));
                }
            }
            Op::Pop => {
                let expect = m.first();
                if let Some(it) = expect {
                    m.take(it.req.id);
                    hits.pops += 1;
                    hits.overdue_pops += u64::from(it.loc == Loc::Overdue);
                }
                prop_assert_eq!(q.pop(), expect.map(|it| it.req));
            }
            Op::Advance(dt) => {
                now = now.saturating_add(dt);
                let (overdue, refiled) = m.advance(now);
                prop_assert_eq!(q.advance(now), overdue);
                hits.became_overdue += overdue as u64;
                hits.refiled += refiled as u64;
            }
            Op::SetExecuted(i, x) => {
                if !m.items.is_empty() {
                    let n = m.items.len();
                    let it = &mut m.items[i % n];
                    it.req.executed = x;
                    prop_assert!(q.set_executed(it.req.key(), x));
                }
            }
            Op::CheckOrder => {
                let got: Vec<Request> = q.iter().copied().collect();
                let want: Vec<Request> = m.sorted().iter().map(|it| it.req).collect();
                prop_assert_eq!(got, want);
            }
        }
        prop_assert_eq!(q.len(), m.items.len());
        prop_assert_eq!(q.is_empty(), m.items.is_empty());
        prop_assert_eq!(q.total_work(), m.total_work());
        prop_assert_eq!(q.overdue_len(), m.overdue_len());
        prop_assert_eq!(q.edf_len(), m.items.len() - m.overdue_len());
        prop_assert_eq!(q.now_quantum(), m.cur);
        let first = m.first();
        prop_assert_eq!(q.peek().copied(), first.map(|it| it.req));
        if let Some(Item { loc: Loc::Quantum(qq), .. }) = first {
            hits.wrapped_peeks += u64::from(qq % SLOTS < m.cur % SLOTS);
        }
        if let Some(it) = m.items.last() {
            check_entry(&q, it)?;
        }
        check_queries(&q, &m, now, hits)?;
        hits.max_len = hits.max_len.max(m.items.len());
    }
    let got: Vec<Request> = q.iter().copied().collect();
    let want: Vec<Request> = m.sorted().iter().map(|it| it.req).collect();
    prop_assert_eq!(got, want);
    for it in &m.items {
        check_entry(&q, it)?;
    }
    // Draining pops exactly the reference order and leaves nothing behind.
    let drained: Vec<Request> = std::iter::from_fn(|| q.pop()).collect();
    let want: Vec<Request> = m.sorted().iter().map(|it| it.req).collect();
    prop_assert_eq!(drained, want);
    prop_assert_eq!(q.total_work(), 0);
    prop_assert_eq!(q.overdue_len(), 0);
    Ok(())
}

fn case() -> impl Strategy<Value = (u64, u64, Vec<Op>)> {
    (prop_oneof![Just(1u64), Just(3), Just(1_000), Just(500_000)], 0..4u64).prop_flat_map(
        |(delta, start_kind)| {
            // Start at 0, mid-timeline, just before a wrap of the slot index, or near u64::MAX.
            let start = match start_kind {
                0 => Just(0u64).boxed(),
                1 => (0..5_000 * delta).boxed(),
                2 => ((SLOTS * 7 - 3) * delta..(SLOTS * 7 + 3) * delta).boxed(),
                _ => (u64::MAX - 3_000 * delta..=u64::MAX - 2_500 * delta).boxed(),
            };
            (Just(delta), start, proptest::collection::vec(op(delta), 0..80))
        },
    )
}

#[test]
fn ct_edf_matches_quantised_reference() {
    let mut runner = TestRunner::new(Config {
        cases: cases(CT_EDF_CASES),
        failure_persistence: None,
        ..Config::default()
    });
    let hits = std::cell::RefCell::new(Hits::default());
    let result = runner
        .run(&case(), |(delta, start, ops)| run_case(delta, start, &ops, &mut hits.borrow_mut()));
    if let Err(e) = result {
        panic!("{e}");
    }
    let hits = hits.into_inner();
    eprintln!("{hits:?}");
    // The premise: the sequences really exercised live entries and every special path
    // (thresholds per 10^4 cases, about a quarter of what the default seed produces).
    let k = u64::from(cases(CT_EDF_CASES)) / 10_000;
    if k > 0 {
        assert!(hits.live_removes > 20_000 * k, "{hits:?}");
        assert!(hits.pops > 20_000 * k, "{hits:?}");
        assert!(hits.overdue_pops > 4_000 * k, "{hits:?}");
        assert!(hits.became_overdue > 15_000 * k, "{hits:?}");
        assert!(hits.refiled > 500 * k, "{hits:?}");
        assert!(hits.clamped_inserts > 5_000 * k, "{hits:?}");
        assert!(hits.wrapped_peeks > 10_000 * k, "{hits:?}");
        assert!(hits.max_len >= 20, "{hits:?}");
        assert!(hits.doomed > 20_000 * k, "{hits:?}");
        assert!(hits.admits_refused_later > 1_000 * k, "{hits:?}");
    }
}

#[test]
fn ct_edf_large_queue_matches_reference() {
    // One long run with ~5000 live entries spread over the whole horizon and beyond, advancing in
    // steps of various sizes; full order compared after each step.
    let delta = 1_000;
    let mut q = CtEdfQueue::with_capacity(CtEdfConfig { delta_window: delta }, 8_000);
    let mut m = Model::new(delta);
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut now = 0;
    let mut id = 0;
    for step in 0..40 {
        for _ in 0..400 {
            id += 1;
            let d = now + rnd() % (1_500 * delta);
            let r = Request::new(RequestId(id), FunctionId(0), 0, d, rnd() % 10_000);
            assert!(q.insert(r));
            m.insert(r);
        }
        for _ in 0..150 {
            let r = m.items[(rnd() as usize) % m.items.len()].req;
            assert_eq!(q.remove(r.key()), m.take(r.id));
        }
        for _ in 0..50 {
            let want = m.first().map(|it| it.req);
            if let Some(r) = want {
                m.take(r.id);
            }
            assert_eq!(q.pop(), want);
        }
        now += if step % 7 == 6 { 1_100 * delta } else { rnd() % (60 * delta) };
        let (overdue, _) = m.advance(now);
        assert_eq!(q.advance(now), overdue);
        let got: Vec<Request> = q.iter().copied().collect();
        let want: Vec<Request> = m.sorted().iter().map(|it| it.req).collect();
        assert_eq!(got, want);
        assert_eq!(q.total_work(), m.total_work());
    }
    assert!(q.len() > 5_000 && q.overdue_len() > 1_000, "{q:?}");
}

// ---------------------------------------------------------------------------------------------
// Estimator
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum EstOp {
    Observe(u32, Nanos),
    Seed(u32, Nanos),
    Forget(u32),
}

fn est_op() -> impl Strategy<Value = EstOp> {
    prop_oneof![
        10 => (0..3u32, 0..40u64).prop_map(|(f, v)| EstOp::Observe(f, v)),
        2 => (0..3u32, 0..1_000_000u64).prop_map(|(f, v)| EstOp::Seed(f, v)),
        1 => (0..3u32).prop_map(EstOp::Forget),
    ]
}

#[derive(Default, Clone)]
struct NaiveFn {
    all: Vec<Nanos>,
    seed: Option<Nanos>,
}

/// Nearest-rank percentile, found by scanning: the smallest sorted value such that at least
/// `p` % of the window is ≤ it (`(i + 1) · 100 ≥ p · n`).
fn naive_estimate(f: &NaiveFn, window: usize, p: u8, shift: usize, default: Nanos) -> Nanos {
    let w = window.max(1);
    let mut last: Vec<Nanos> = f.all.iter().rev().take(w).copied().collect();
    if last.is_empty() {
        return f.seed.unwrap_or(default);
    }
    last.sort_unstable();
    let p = usize::from(p.min(100));
    let n = last.len();
    let pct = (0..n).find(|&i| (i + 1) * 100 >= p * n).map(|i| last[i]).unwrap();
    // Shift detection: the newest `shift` values (if that many are held) all on one side of
    // the median (the lower one) move the percentile to them.
    let median = last[(0..n).find(|&i| (i + 1) * 2 >= n).unwrap()];
    let newest: Vec<Nanos> = f.all.iter().rev().take(w.min(shift)).copied().collect();
    if shift == 0 || newest.len() < shift {
        return pct;
    }
    if newest.iter().all(|&x| x > median) {
        return pct.max(*newest.iter().min().unwrap());
    }
    if newest.iter().all(|&x| x < median) {
        return pct.min(*newest.iter().max().unwrap());
    }
    pct
}

#[test]
fn estimator_matches_sort_last_window() {
    let strategy = (
        prop_oneof![1..12usize, Just(0usize), 30..70usize],
        prop_oneof![0..=100u8, Just(50u8), 101..=255u8],
        proptest::collection::vec(est_op(), 0..200),
        prop_oneof![Just(0usize), 1..6usize],
    );
    let mut runner = TestRunner::new(Config {
        cases: cases(4_000),
        failure_persistence: None,
        ..Config::default()
    });
    let full_windows = std::cell::Cell::new(0u64);
    let result = runner.run(&strategy, |(window, percentile, ops, shift_run)| {
        const DEFAULT: Nanos = 777;
        let cfg = EstimatorConfig { window, percentile, default_estimate: DEFAULT, shift_run };
        let mut e = Estimator::new(cfg);
        let mut naive = vec![NaiveFn::default(); 3];
        for op in &ops {
            match *op {
                EstOp::Observe(f, v) => {
                    e.observe(FunctionId(f), v);
                    naive[f as usize].all.push(v);
                    naive[f as usize].seed = None;
                }
                EstOp::Seed(f, v) => {
                    let nf = &mut naive[f as usize];
                    let accepted = nf.all.is_empty();
                    if accepted {
                        nf.seed = Some(v);
                    }
                    prop_assert_eq!(e.seed(FunctionId(f), v), accepted);
                }
                EstOp::Forget(f) => {
                    e.forget(FunctionId(f));
                    naive[f as usize] = NaiveFn::default();
                }
            }
            for (f, nf) in naive.iter().enumerate() {
                let fid = FunctionId(f as u32);
                prop_assert_eq!(e.samples(fid), nf.all.len().min(window.max(1)));
                prop_assert_eq!(
                    e.estimate(fid),
                    naive_estimate(nf, window, percentile, shift_run, DEFAULT)
                );
                if nf.all.len() > window.max(1) {
                    full_windows.set(full_windows.get() + 1);
                }
            }
        }
        prop_assert_eq!(e.estimate(FunctionId(99)), DEFAULT);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // The premise: windows really wrapped (eviction path), not just filled.
    assert!(full_windows.get() > 10_000, "full windows: {}", full_windows.get());
}
