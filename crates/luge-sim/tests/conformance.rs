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
    cfg.policy_config.admission =
        Admission { reject_infeasible: admission, max_queued: admission.then_some(20) };
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

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

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
