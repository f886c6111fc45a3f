//! Deadline-limited batching (Edge-RT §IV-A, Δbatch) in the simulator, as the runtime's
//! dispatcher does it (`batch_window_us`): requests due within the window of the one a worker
//! takes next are committed to it and start there as each run completes, without the hand-off
//! a `Run` costs; a preemption hands the batch back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, PolicyKind};
use luge_sim::{Job, Outcome, Overheads, SimConfig, simulate};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn job(arrival: u64, execution: u64, relative_deadline: u64) -> Job {
    Job::single(arrival, execution, relative_deadline)
}

/// One worker of `policy` whose every hand-off (`Run`) costs 20 µs, batching within `window`.
fn machine(policy: PolicyKind, window: u64) -> SimConfig {
    let mut cfg = SimConfig::new(policy, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads { enqueue: 20 * US, ..Overheads::NONE };
    cfg.policy_config.admission = Admission::NONE;
    cfg.policy_config.batch_window = window;
    cfg
}

#[test]
fn a_batch_saves_a_hand_off_per_follower() {
    // A 1 ms run, and ten 10 µs jobs queued behind it (due later: none preempts it), due
    // within 0.5 ms of each other.
    let mut jobs = vec![job(0, MS, 10 * MS)];
    jobs.extend((1..=10).map(|i| job(i * US, 10 * US, 50 * MS + i * 50 * US)));
    let off = simulate(&machine(PolicyKind::SledgeScale, 0), &jobs).unwrap();
    let on = simulate(&machine(PolicyKind::SledgeScale, MS), &jobs).unwrap();
    assert_eq!((off.followed, on.followed), (0, 9), "the first of the ten is the run");
    let last = |out: &luge_sim::SimOutput| out.records.iter().filter_map(|r| r.completion).max();
    // Off: 11 hand-offs of 20 µs; on: 2 (the long run's, the batch's first).
    assert_eq!(last(&off), Some(11 * 20 * US + MS + 100 * US));
    assert_eq!(last(&on), Some(2 * 20 * US + MS + 100 * US));
    assert!(on.records.iter().all(|r| r.outcome == Outcome::Completed));
    // A window narrower than their spread commits only what lies within it of the run.
    let narrow = simulate(&machine(PolicyKind::SledgeScale, 120 * US), &jobs).unwrap();
    // Due 50 µs apart: each run takes the two due within 120 µs of it, so 3 + 3 + 3 + 1.
    assert_eq!(narrow.followed, 6);
}

#[test]
fn a_preemption_hands_the_batch_back() {
    // The batch of ten runs; an urgent job arrives in its middle and preempts it: every job
    // still completes, the urgent one first of those left.
    let mut jobs: Vec<Job> = (0..10).map(|i| job(i, 100 * US, 50 * MS + i)).collect();
    jobs.push(job(250 * US, 10 * US, MS));
    let out = simulate(&machine(PolicyKind::SledgeScale, MS), &jobs).unwrap();
    assert!(out.records.iter().all(|r| r.outcome == Outcome::Completed));
    assert_eq!(out.preemptions, 1);
    let urgent = out.records[10].completion.unwrap();
    let later = out.records[..10].iter().filter(|r| r.completion.unwrap() > urgent).count();
    assert!(later >= 7, "the urgent job ran ahead of the rest of the batch: {later} after it");
}
