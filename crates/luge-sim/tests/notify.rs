//! Sleeping dispatcher groups and periodic notification (Edge-RT §IV-B, Δtimer) in the
//! simulator, as the runtime's submitters and ticker do them (`notify_interval_us`): a group
//! with every worker idle pays a wake-up to see an arrival; with an interval, an arrival with
//! the slack for it waits for the period's end, where one notification serves all it held.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, PolicyKind};
use luge_sim::{Job, Outcome, Overheads, SimConfig, simulate};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

fn job(arrival: u64, execution: u64, relative_deadline: u64, stages: u8) -> Job {
    Job { stages, ..Job::single(arrival, execution, relative_deadline) }
}

/// One worker, free steps but for a 20 µs wake-up, notification every `every` (0 = off).
fn machine(every: u64, urgent: bool) -> SimConfig {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads { wakeup: 20 * US, ..Overheads::NONE };
    cfg.policy_config.admission = Admission::NONE;
    cfg.notify_interval = every;
    cfg.notify_urgent = urgent;
    cfg
}

#[test]
fn a_sleeping_group_pays_a_wake_up_and_a_busy_one_does_not() {
    // The second job arrives while the first runs: seen at once, no wake-up.
    let jobs = [job(0, MS, 100 * MS, 1), job(100 * US, 10 * US, 100 * MS, 1)];
    let out = simulate(&machine(0, true), &jobs).unwrap();
    assert_eq!(out.records[0].first_start, Some(20 * US));
    assert_eq!(out.wakeups, 1);
    assert_eq!(out.deferred, 0);
    // Without a wake-up cost the wake-ups are still counted, and cost nothing.
    let mut free = machine(0, true);
    free.overheads.wakeup = 0;
    let out = simulate(&free, &jobs).unwrap();
    assert_eq!((out.records[0].first_start, out.wakeups), (Some(0), 1));
}

#[test]
fn arrivals_with_slack_wait_for_the_period_and_share_one_wake_up() {
    // Ten short jobs 100 µs apart, each finding the worker asleep again.
    let jobs: Vec<Job> = (0..10).map(|i| job(i * 100 * US, 10 * US, 100 * MS, 1)).collect();
    let immediate = simulate(&machine(0, true), &jobs).unwrap();
    assert_eq!(immediate.wakeups, 10);
    // Every 1 ms: all ten are held to 1 ms, then woken for once.
    let periodic = simulate(&machine(MS, true), &jobs).unwrap();
    assert_eq!((periodic.wakeups, periodic.deferred), (1, 10));
    for r in &periodic.records {
        assert_eq!(r.outcome, Outcome::Completed);
        assert!(r.first_start.unwrap() >= MS + 20 * US, "{r:?}");
    }
}

#[test]
fn an_arrival_with_less_slack_than_the_period_is_notified_at_once_unless_told_otherwise() {
    // 1 ms of slack against a 5 ms period.
    let jobs = [job(100 * US, 10 * US, MS + 10 * US, 1)];
    let luge = simulate(&machine(5 * MS, true), &jobs).unwrap();
    assert_eq!(luge.deferred, 0);
    assert_eq!(luge.records[0].first_start, Some(120 * US));
    assert_eq!(luge.records[0].outcome, Outcome::Completed);
    // Edge-RT's timer-polled rule holds it to the period's end, past its deadline.
    let polled = simulate(&machine(5 * MS, false), &jobs).unwrap();
    assert_eq!(polled.deferred, 1);
    assert!(polled.records[0].first_start.unwrap() >= 5 * MS);
}

#[test]
fn a_chains_later_stages_are_notified_like_arrivals() {
    // Four stages of 10 µs under 100 ms: each hand-over has the slack to wait for the period.
    let out = simulate(&machine(MS, true), &[job(0, 40 * US, 100 * MS, 4)]).unwrap();
    assert_eq!(out.deferred, 4);
    let r = out.records[0];
    assert_eq!(r.outcome, Outcome::Completed);
    // Each stage waits for the next period's end (1, 2, 3, 4 ms) and a wake-up.
    assert!(r.completion.unwrap() >= 4 * MS + 20 * US, "{r:?}");
}

/// Times near `u64::MAX` (a trace's or a heavy-tailed distribution's) saturate: the clock never
/// runs backwards and no latency wraps to a small, plausible number.
#[test]
fn huge_executions_saturate_instead_of_wrapping_the_clock() {
    let huge = u64::MAX / 2;
    let jobs = [
        job(0, huge, u64::MAX, 1),
        job(10, huge, u64::MAX, 1),
        job(20, huge, u64::MAX, 2),
        job(30, 10 * US, u64::MAX, 1),
    ];
    let mut cfg = machine(0, true);
    cfg.overheads = Overheads::default();
    let out = simulate(&cfg, &jobs).unwrap();
    for r in &out.records {
        if let Some(completion) = r.completion {
            assert!(completion >= r.arrival, "{r:?}");
            assert!(r.latency().unwrap() >= 10 * US, "{r:?}");
        }
    }
    assert!(out.end >= huge, "the clock went past the first huge run");
}

/// Ticks occupy the dispatcher like arrivals do (a serial server per group): an arrival during
/// a tick's handling waits for it.
#[test]
fn a_tick_keeps_the_dispatcher_busy() {
    let mut cfg = SimConfig::new(PolicyKind::Shinjuku, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads { tick: 50 * US, ..Overheads::NONE };
    cfg.policy_config.admission = Admission::NONE;
    // A long run whose first quantum ends at 15 µs (a tick then, busy until 65 µs), and an
    // arrival at 20 µs: dispatched at 65 µs, once that tick is handled; the tick due at 30 µs
    // waited too and preempts the long run when handled, at 115 µs. (With ticks that kept no
    // one waiting, the arrival was dispatched at 20 µs and started at 80 µs.)
    let jobs = [job(0, MS, 100 * MS, 1), job(20 * US, 10 * US, 100 * MS, 1)];
    let out = simulate(&cfg, &jobs).unwrap();
    assert_eq!(out.records[1].first_start, Some(115 * US), "{:?}", out.records);
}
