//! Chains in the simulator run as the runtime runs them (`docs/manifest.md`, `[[chain]]`):
//! stage after stage, each a request of its own with a fresh sandbox, under the chain's deadline
//! less the estimated work after it; a stage left no time ends the chain without running.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, FunctionId, Overrun, PolicyKind, RejectReason};
use luge_sim::{Job, MAX_STAGES, Outcome, Overheads, SimConfig, SimError, simulate};

const MS: u64 = 1_000_000;

fn job(arrival: u64, execution: u64, relative_deadline: u64, stages: u8) -> Job {
    Job {
        arrival,
        function: FunctionId(u32::from(stages)),
        class: 0,
        execution,
        relative_deadline,
        stages,
        on_overrun: Overrun::Kill,
    }
}

fn machine(policy: PolicyKind, overheads: Overheads) -> SimConfig {
    let mut cfg = SimConfig::new(policy, 1);
    cfg.check_contract = true;
    cfg.overheads = overheads;
    cfg.policy_config.admission = Admission::NONE;
    cfg
}

#[test]
fn a_chain_runs_its_stages_back_to_back_and_is_answered_once() {
    let out = simulate(&machine(PolicyKind::Fifo, Overheads::NONE), &[job(0, 3 * MS, 10 * MS, 3)])
        .unwrap();
    let r = out.records[0];
    assert_eq!(r.outcome, Outcome::Completed);
    assert_eq!((r.first_start, r.completion), (Some(0), Some(3 * MS)));
    assert_eq!(out.worker_busy, 3 * MS);
}

#[test]
fn every_stage_pays_for_a_fresh_sandbox() {
    let o = Overheads::DEFAULT;
    let single = simulate(&machine(PolicyKind::Fifo, o), &[job(0, 3 * MS, 10 * MS, 1)]).unwrap();
    let chain = simulate(&machine(PolicyKind::Fifo, o), &[job(0, 3 * MS, 10 * MS, 3)]).unwrap();
    let (a, b) = (single.records[0].latency().unwrap(), chain.records[0].latency().unwrap());
    assert!(b >= a + 2 * o.sandbox_start, "one sandbox {a} ns, three {b} ns");
    assert_eq!(chain.worker_busy, single.worker_busy + 2 * (o.context_switch + o.sandbox_start));
}

#[test]
fn a_later_stage_left_no_time_is_answered_late_and_never_runs() {
    // FIFO runs the first stage long after it could help; the second finds its deadline gone.
    let jobs = [job(0, 10 * MS, 100 * MS, 1), job(1, 2 * MS, 5 * MS, 2)];
    let out = simulate(&machine(PolicyKind::Fifo, Overheads::NONE), &jobs).unwrap();
    assert_eq!(out.records[1].outcome, Outcome::Rejected(RejectReason::Late));
    assert_eq!(out.records[1].completion, None);
    // The blocker and the first stage ran; the second stage never did.
    assert_eq!(out.worker_busy, 11 * MS);
}

#[test]
fn a_chain_whose_later_stages_cannot_fit_is_refused_before_it_runs() {
    // Two 4 ms stages, due in 3 ms: the second alone does not fit, so the first is refused.
    let out = simulate(&machine(PolicyKind::Fifo, Overheads::NONE), &[job(0, 8 * MS, 3 * MS, 2)])
        .unwrap();
    assert_eq!(out.records[0].outcome, Outcome::Rejected(RejectReason::Infeasible));
    assert_eq!(out.worker_busy, 0);
}

#[test]
fn a_first_stage_ranks_by_the_chain_deadline_less_the_work_after_it() {
    // Behind a blocker with no slack (not preempted): a 2-stage chain due at 10 ms and a single
    // request due at 9.5 ms. The chain's first stage must finish by 9 ms for the second to fit,
    // so EDF runs it first, and both meet their deadlines.
    let jobs =
        [job(0, 5 * MS, 5 * MS, 1), job(1_000, 2 * MS, 10 * MS, 2), job(2_000, MS, 9_500_000, 1)];
    let out = simulate(&machine(PolicyKind::SledgeScale, Overheads::NONE), &jobs).unwrap();
    let (chain, single) = (out.records[1], out.records[2]);
    assert_eq!(chain.first_start, Some(5 * MS));
    assert_eq!(single.first_start, Some(6 * MS));
    assert!(chain.met_deadline() && single.met_deadline());
}

#[test]
fn too_long_a_chain_is_a_configuration_error() {
    let err = simulate(&SimConfig::new(PolicyKind::Fifo, 1), &[job(0, MS, MS, MAX_STAGES + 1)]);
    assert!(matches!(err, Err(SimError::Config(_))), "{err:?}");
    let err = simulate(&SimConfig::new(PolicyKind::Fifo, 1), &[job(0, MS, MS, 0)]);
    assert!(matches!(err, Err(SimError::Config(_))), "{err:?}");
}
