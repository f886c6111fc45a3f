//! The engine drives a policy as the runtime's dispatcher does: what a worker reports at a
//! moment comes before an arrival at that moment, requests are spread over groups in turn,
//! and a run is reported started when its worker picks it up, before its start-up costs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{PolicyKind, UllConfig};
use luge_sim::{Job, Outcome, Overheads, Record, SimConfig, Spread, simulate};

const US: u64 = 1_000;

/// A more urgent request arriving the instant the worker finishes the one before it: the
/// completion comes first, so the policy sees an idle worker and runs it there (seen the other
/// way round, the finished run still looks busy — at least `MIN_REMAINING` left — and the
/// policy asks to preempt it).
#[test]
fn a_completion_is_seen_before_an_arrival_at_the_same_moment() {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    let jobs = [Job::single(0, 10 * US, 100 * US), Job::single(10 * US, 10 * US, 10 * US)];
    let out = simulate(&cfg, &jobs).unwrap();
    let b = out.records[1];
    assert_eq!(b.outcome, Outcome::Completed, "{b:?}");
    assert_eq!(b.completion, Some(20 * US));
    assert_eq!(out.preemptions, 0, "the policy asked to preempt a run that had ended");
}

/// Two groups of one worker each: arrivals alternate between them, as the runtime's
/// submitters hand them out; the hash spread (the papers' RSS) stays available.
#[test]
fn requests_go_to_the_groups_in_turn() {
    let mut cfg = SimConfig::new(PolicyKind::Fifo, 2);
    cfg.dispatchers = 2;
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    let jobs: Vec<Job> = (0..8).map(|i| Job::single(i, 100 * US, 10_000 * US)).collect();
    let out = simulate(&cfg, &jobs).unwrap();
    let done: Vec<u64> = out.records.iter().map(|r| r.completion.unwrap()).collect();
    // Jobs 0, 2, 4, 6 queue on one worker, 1, 3, 5, 7 on the other.
    let expected: Vec<u64> = (0..8).map(|i| (i / 2 + 1) * 100 * US + i % 2).collect();
    assert_eq!(done, expected);
    cfg.spread = Spread::Hash;
    let hashed = simulate(&cfg, &jobs).unwrap();
    assert!(hashed.records.iter().all(|r| r.outcome == Outcome::Completed));
    assert_eq!(hashed.records.len(), 8);
}

/// `Started` is reported as the worker picks the request up; the switch and the sandbox's
/// start follow, inside the run — as the runtime's worker reports it, and as estimates count
/// it — so a policy does not take the start-up for work still to do.
#[test]
fn a_run_starts_before_its_start_up_costs() {
    let mut cfg = SimConfig::new(PolicyKind::Fifo, 1);
    cfg.check_contract = true;
    let o = cfg.overheads;
    let out = simulate(&cfg, &[Job::single(0, 50 * US, 10_000 * US)]).unwrap();
    let r = out.records[0];
    let (start, end) = (r.first_start.unwrap(), r.completion.unwrap());
    assert_eq!(end - start, o.context_switch + o.sandbox_start + 50 * US);
    assert_eq!(start, o.dispatch_base + o.dispatch_per_worker + o.enqueue);
}

/// A timer that finds its dispatcher busy waits its turn among the arrivals that wait too:
/// with the dispatcher kept busy by arrivals, a time slice still ends and the long run is
/// preempted for the waiting ones (ranked behind every arrival, it would wait until they stop).
#[test]
fn a_timer_is_not_starved_by_arrivals_at_a_busy_dispatcher() {
    let mut cfg = SimConfig::new(PolicyKind::Shinjuku, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads { dispatch_base: 10 * US, ..Overheads::NONE };
    // A dispatcher-saturating stream for 2 ms of 1 ms requests.
    let jobs: Vec<Job> =
        (0..200).map(|i| Job::single(i * 10 * US, 1_000 * US, 1_000_000 * US)).collect();
    let out = simulate(&cfg, &jobs).unwrap();
    let first = out.records[0];
    assert!(first.preemptions > 0, "the first run was never sliced: {first:?}");
    assert!(first.completion.unwrap() > 2_000 * US, "{first:?}");
}

/// A preemption that lands during a run's start-up stops it before its sandbox starts, as the
/// runtime's worker does: it ran nothing, its next start pays the sandbox start again (not a
/// resume), and the worker was busy only while it really was.
#[test]
fn a_preemption_during_start_up_loses_the_start_up() {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads { sandbox_start: 100 * US, preempt_resume: US, ..Overheads::NONE };
    let long = Job::single(0, 1_000 * US, 100_000 * US);
    let urgent = Job::single(10 * US, 50 * US, 200 * US);
    let out = simulate(&cfg, &[long, urgent]).unwrap();
    let (a, b) = (out.records[0], out.records[1]);
    assert_eq!(b.completion, Some(10 * US + 100 * US + 50 * US), "{b:?}");
    assert_eq!(a.preemptions, 1, "{a:?}");
    assert_eq!(a.completion, Some(160 * US + 100 * US + 1_000 * US), "{a:?}");
    assert_eq!(out.worker_busy, 1_260 * US);
}

/// An arrival held for the notification period's end is seen sooner when its group makes a
/// round for something else — here the completion of the run before it — as the runtime's
/// dispatcher reads its whole submission queue on every round.
#[test]
fn a_held_arrival_is_seen_on_the_groups_next_round() {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.notify_interval = 1_000 * US;
    // The first has too little slack to be held (notified at once); the second is held.
    let jobs = [Job::single(0, 300 * US, 500 * US), Job::single(100 * US, 10 * US, 50_000 * US)];
    let out = simulate(&cfg, &jobs).unwrap();
    assert_eq!(out.deferred, 1);
    assert_eq!(out.records[0].first_start, Some(0));
    // Taken when the first run ends, not at the period's end (1 ms).
    assert_eq!(out.records[1].first_start, Some(300 * US), "{:?}", out.records);
    // Edge-RT's rule holds everything to the period's end: its scheduler sees messages then.
    cfg.notify_urgent = false;
    let out = simulate(&cfg, &jobs).unwrap();
    assert_eq!(out.records[1].first_start, Some(1_000 * US), "{:?}", out.records);
}

/// With the uLL lane, a uLL request's first start takes a sandbox its worker built ahead: no
/// sandbox start on its path (the runtime's ready sandboxes); other requests pay it.
#[test]
fn a_ull_request_starts_in_a_ready_sandbox() {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.ull_lane = Some(UllConfig::default());
    let o = cfg.overheads;
    let jobs =
        [Job::single(0, 5 * US, 10_000 * US), Job::single(1_000 * US, 500 * US, 10_000 * US)];
    let out = simulate(&cfg, &jobs).unwrap();
    let ran = |r: Record| r.completion.unwrap() - r.first_start.unwrap();
    assert_eq!(ran(out.records[0]), o.context_switch + 5 * US);
    assert_eq!(ran(out.records[1]), o.context_switch + o.sandbox_start + 500 * US);
}

/// An arrival refused outright costs its dispatcher nothing (the runtime refuses it on the
/// thread that received it): the next arrival is dispatched as if it had not come.
#[test]
fn an_arrival_refused_outright_costs_the_dispatcher_nothing() {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 2);
    cfg.check_contract = true;
    cfg.overheads = Overheads { dispatch_base: 50 * US, ..Overheads::NONE };
    let jobs = [
        Job::single(0, 1_000 * US, 100_000 * US),
        // Cannot make its deadline even if it started now.
        Job::single(10 * US, 100 * US, 50 * US),
        Job::single(20 * US, 10 * US, 100_000 * US),
    ];
    let out = simulate(&cfg, &jobs).unwrap();
    assert!(matches!(out.records[1].outcome, Outcome::Rejected(_)), "{:?}", out.records[1]);
    // The dispatcher was busy with the first until 50 µs; the third is dispatched then.
    assert_eq!(out.records[2].first_start, Some(100 * US), "{:?}", out.records);
}
