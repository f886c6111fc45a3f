//! Every policy of `luge-sched`, driven by the simulator with contract checking on, over random
//! workloads (chains and demotable requests among them), worker counts, dispatcher groups and
//! racy overheads, batching and CT-EDF queues: no policy may run a request on a busy worker,
//! break EDF order on an EDF worker, answer a request twice or lose one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{
    Admission, CtEdfConfig, FunctionId, Overrun, PolicyKind, QueueKind, RejectReason,
};
use luge_sim::{Job, Outcome, Overheads, Record, SimConfig, simulate};
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
                stages: 1,
                on_overrun: Overrun::Kill,
            }
        })
        .collect()
}

/// `js` as chains of `stages` stages each (1: unchanged).
fn chained(mut js: Vec<Job>, stages: u8) -> Vec<Job> {
    for j in &mut js {
        j.stages = stages;
    }
    js
}

fn check(
    policy: PolicyKind,
    seed: u64,
    workers: usize,
    groups: usize,
    load: f64,
    admission: bool,
    stages: u8,
) {
    let mut cfg = SimConfig::new(policy, workers);
    cfg.dispatchers = groups;
    cfg.check_contract = true;
    cfg.overheads = if seed.is_multiple_of(2) { Overheads::DEFAULT } else { Overheads::NONE };
    if seed.is_multiple_of(3) {
        // Sleeping groups and periodic notification only delay hand-overs: no policy may care.
        cfg.overheads.wakeup = 20_000;
        cfg.notify_interval = 50_000 + seed % 200_000;
        cfg.notify_urgent = seed.is_multiple_of(2);
    }
    cfg.policy_config.sledge_batch = 1 + (seed % 5) as usize;
    if seed % 5 == 1 {
        // Deadline-limited batching (Edge-RT §IV-A): followers start unasked, or go back.
        cfg.policy_config.batch_window = 100_000 * (1 + seed % 100);
    }
    if seed % 7 == 2 {
        // CT-EDF as the early-binding workers' queue (Edge-RT §IV-C).
        let delta_window = 5_000 + seed % 500_000;
        cfg.policy_config.worker_queue = QueueKind::Timeline(CtEdfConfig { delta_window });
    }
    cfg.policy_config.admission = if admission {
        Admission { max_queued: Some(20), ..Admission::default() }
    } else {
        Admission::NONE
    };
    let mut js = chained(jobs(seed, 400, workers, load), stages);
    // Every third job, on odd seeds, asks to be demoted rather than answered at once.
    for (i, j) in js.iter_mut().enumerate() {
        if seed % 2 == 1 && i % 3 == 0 {
            j.on_overrun = Overrun::Demote;
        }
    }
    let out = simulate(&cfg, &js).unwrap_or_else(|e| panic!("{policy}: {e}"));
    assert!(out.records.iter().all(|r| r.outcome != Outcome::Pending), "{policy}: lost");
    let completed = out.records.iter().filter(|r| r.outcome == Outcome::Completed).count();
    if !admission && stages == 1 {
        assert_eq!(completed, js.len(), "{policy}: every request must complete");
    }
    if !admission {
        // A chain's stage left no time is ended by the chain, whatever the policy's admission.
        let chain_ended = |o: Outcome| {
            matches!(o, Outcome::Rejected(RejectReason::Infeasible | RejectReason::Late))
        };
        let other =
            out.records.iter().find(|r| r.outcome != Outcome::Completed && !chain_ended(r.outcome));
        assert_eq!(other, None, "{policy}: refused without admission");
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

/// Requests that ran late, under `admission`, with exact estimates and free scheduling.
fn late(
    policy: PolicyKind,
    seed: u64,
    workers: usize,
    load: f64,
    admission: Admission,
    stages: u8,
) -> usize {
    let js = chained(jobs(seed, 400, workers, load), stages);
    let mut cfg = SimConfig::new(policy, workers);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.policy_config.admission = admission;
    if seed.is_multiple_of(3) {
        // Followers count as work ahead: batching must not make admission promise too much.
        cfg.policy_config.batch_window = 1_000_000;
    }
    // Not on CT-EDF's timeline: there a preempted request goes back to the tail of its deadline
    // quantum, behind what arrived in that quantum while it ran, so the promise holds only up
    // to one quantum (`docs/edge-rt.md`, "CT-EDF as the worker's queue").
    let out = simulate(&cfg, &js).unwrap_or_else(|e| panic!("{policy}: {e}"));
    assert!(out.records.iter().all(|r| r.outcome != Outcome::Pending), "{policy}: lost");
    // Late: completed past its deadline, or ended late (a chain's stage that found its time
    // gone, or a run preempted past its deadline).
    let late = |r: &&Record| match r.outcome {
        Outcome::Completed => !r.met_deadline(),
        o => o == Outcome::Rejected(RejectReason::Late),
    };
    out.records.iter().filter(late).count()
}

/// Each mechanism keeps the promise when estimates are exact: admission on the wait that protects
/// what it admitted never admits what would be late, and shedding never starts what would be
/// late (alone, or behind admission on the newcomer's own wait). A chain's stages each meet the
/// deadline they inherit, so an admitted chain meets its own.
fn admitted_requests_meet_their_deadlines(
    policy: PolicyKind,
    seed: u64,
    workers: usize,
    load: f64,
    stages: u8,
) {
    let on = Admission::default();
    let protect = Admission { protect_admitted: true, ..on };
    for admission in
        [on, protect, Admission { shed: false, ..protect }, Admission { on_wait: false, ..on }]
    {
        let late = late(policy, seed, workers, load, admission, stages);
        assert_eq!(late, 0, "{policy}: {admission:?}, {stages} stages");
    }
}

#[test]
fn without_admission_the_same_overload_runs_requests_late() {
    // The premise of the property below: the workload it uses does overload the papers' setting.
    for policy in DEADLINE_AWARE {
        assert!(late(policy, 7, 2, 3.0, Admission::NONE, 1) > 50, "{policy}");
        assert!(late(policy, 7, 2, 3.0, Admission::NONE, 3) > 50, "{policy}: chains");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn deadline_aware_admission_never_runs_a_request_late(
        seed in any::<u64>(),
        workers in 1usize..5,
        load in 0.5f64..5.0,
        stages in 1u8..5,
    ) {
        for policy in DEADLINE_AWARE {
            admitted_requests_meet_their_deadlines(policy, seed, workers, load, stages);
        }
    }

    #[test]
    fn every_policy_keeps_the_contract(
        seed in any::<u64>(),
        workers in 1usize..7,
        groups in 1usize..3,
        load in 0.3f64..1.3,
        admission in any::<bool>(),
        stages in 1u8..5,
    ) {
        let groups = groups.min(workers);
        for policy in PolicyKind::ALL {
            check(policy, seed, workers, groups, load, admission, stages);
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

/// A case the property above found (2026-11-28): with batching and chains, a newcomer allowed to
/// preempt by the run's slack sent the run back behind queued work more urgent than it (work
/// that could not preempt it, and went behind it), and with `protect_admitted` the run then
/// finished late. Admission now protects the run and its batch as queued requests are.
#[test]
fn a_preempted_run_is_protected_from_the_urgent_work_queued_behind_it() {
    let (seed, load) = (16_627_202_768_775_184_125, 2.863_100_207_136_604_5);
    admitted_requests_meet_their_deadlines(PolicyKind::SledgeScale, seed, 3, load, 3);
}
