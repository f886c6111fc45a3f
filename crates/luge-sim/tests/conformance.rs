//! Every policy of `luge-sched`, driven by the simulator with contract checking on, over random
//! workloads, worker counts, dispatcher groups and racy overheads: no policy may run a request on
//! a busy worker, break EDF order on an EDF worker, answer a request twice or lose one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, FunctionId, PolicyKind};
use luge_sim::{Job, Outcome, Overheads, SimConfig, simulate};
use proptest::prelude::*;

/// Poisson arrivals of a bimodal mix with deadlines 2–20 × execution; `load` per worker.
fn jobs(seed: u64, n: usize, workers: usize, load: f64) -> Vec<Job> {
    let mut x = seed | 1;
    let mut unit = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let mean = 0.8 * 20_000.0 + 0.2 * 500_000.0;
    let gap = mean / (load * workers as f64);
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += -gap * (1.0 - unit()).ln();
            let long = unit() < 0.2;
            let execution = if long { 500_000 } else { 20_000 } + (unit() * 5_000.0) as u64;
            let k = 2 + (unit() * 18.0) as u64;
            Job {
                arrival: t as u64,
                function: FunctionId(u32::from(long)),
                class: u16::from(long),
                execution,
                relative_deadline: execution * k,
            }
        })
        .collect()
}

fn check(policy: PolicyKind, seed: u64, workers: usize, groups: usize, load: f64, admission: bool) {
    let mut cfg = SimConfig::new(policy, workers);
    cfg.dispatchers = groups;
    cfg.check_contract = true;
    cfg.overheads = if seed.is_multiple_of(2) { Overheads::DEFAULT } else { Overheads::NONE };
    cfg.policy_config.sledge_batch = 1 + (seed % 5) as usize;
    cfg.policy_config.admission = if admission {
        Admission { max_queued: Some(20), ..Admission::default() }
    } else {
        Admission::NONE
    };
    let js = jobs(seed, 400, workers, load);
    let out = simulate(&cfg, &js).unwrap_or_else(|e| panic!("{policy}: {e}"));
    let completed = out.records.iter().filter(|r| r.outcome == Outcome::Completed).count();
    if !admission {
        assert_eq!(completed, js.len(), "{policy}: every request must complete");
    }
    for r in &out.records {
        if let Some(c) = r.completion {
            // A request cannot finish before it could have run to completion.
            assert!(c >= r.arrival + r.execution, "{policy}: finished too early");
        }
    }
}

/// The policies whose workers keep deadline queues: admission on the wait and shedding apply.
const DEADLINE_AWARE: [PolicyKind; 5] = [
    PolicyKind::SledgeScale,
    PolicyKind::SledgeScaleSteal,
    PolicyKind::Rr,
    PolicyKind::Jsq,
    PolicyKind::Lld,
];

/// Requests run to completion after their deadline, under `admission`, with exact estimates and
/// free scheduling.
fn late(policy: PolicyKind, seed: u64, workers: usize, load: f64, admission: Admission) -> usize {
    let js = jobs(seed, 400, workers, load);
    let mut cfg = SimConfig::new(policy, workers);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.policy_config.admission = admission;
    let out = simulate(&cfg, &js).unwrap_or_else(|e| panic!("{policy}: {e}"));
    assert!(out.records.iter().all(|r| r.outcome != Outcome::Pending), "{policy}: lost");
    out.records.iter().filter(|r| r.outcome == Outcome::Completed && !r.met_deadline()).count()
}

/// Each mechanism keeps the promise when estimates are exact: admission on the wait that protects
/// what it admitted never admits what would be late, and shedding never starts what would be
/// late (alone, or behind admission on the newcomer's own wait).
fn admitted_requests_meet_their_deadlines(
    policy: PolicyKind,
    seed: u64,
    workers: usize,
    load: f64,
) {
    let on = Admission::default();
    let protect = Admission { protect_admitted: true, ..on };
    for admission in
        [on, protect, Admission { shed: false, ..protect }, Admission { on_wait: false, ..on }]
    {
        assert_eq!(late(policy, seed, workers, load, admission), 0, "{policy}: {admission:?}");
    }
}

#[test]
fn without_admission_the_same_overload_runs_requests_late() {
    // The premise of the property below: the workload it uses does overload the papers' setting.
    for policy in DEADLINE_AWARE {
        assert!(late(policy, 7, 2, 3.0, Admission::NONE) > 50, "{policy}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn deadline_aware_admission_never_runs_a_request_late(
        seed in any::<u64>(),
        workers in 1usize..5,
        load in 0.5f64..5.0,
    ) {
        for policy in DEADLINE_AWARE {
            admitted_requests_meet_their_deadlines(policy, seed, workers, load);
        }
    }

    #[test]
    fn every_policy_keeps_the_contract(
        seed in any::<u64>(),
        workers in 1usize..7,
        groups in 1usize..3,
        load in 0.3f64..1.3,
        admission in any::<bool>(),
    ) {
        let groups = groups.min(workers);
        for policy in PolicyKind::ALL {
            check(policy, seed, workers, groups, load, admission);
        }
    }
}

#[test]
fn preemptive_policies_really_preempt() {
    // The premise of the contract test: the racy paths (preemptions in flight) are exercised.
    for policy in [PolicyKind::SledgeScale, PolicyKind::Shinjuku, PolicyKind::Srpt, PolicyKind::Sfs]
    {
        let mut cfg = SimConfig::new(policy, 2);
        cfg.check_contract = true;
        let out = simulate(&cfg, &jobs(7, 3_000, 2, 0.9)).unwrap();
        assert!(out.preemptions > 10, "{policy}: only {} preemptions", out.preemptions);
    }
}

#[test]
fn deterministic() {
    let cfg = SimConfig::new(PolicyKind::SledgeScale, 4);
    let js = jobs(3, 2_000, 4, 0.8);
    let a = simulate(&cfg, &js).unwrap();
    let b = simulate(&cfg, &js).unwrap();
    assert_eq!(a.records, b.records);
}
