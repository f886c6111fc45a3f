//! The uLL lane (HORSE §3) in the simulator, as the runtime runs it (`ull_lane`): short requests
//! run ahead of long ones whatever their deadlines, at the cost of one preemption of a long run
//! each time, and the long ones still complete.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, FunctionId, Overrun, PolicyKind, UllConfig};
use luge_sim::{Job, Overheads, SimConfig, simulate};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// One worker at ~0.9 load: 2 ms requests (0.8 of it) and 10 µs ones, Poisson-like arrivals,
/// every request due 50 ms after it arrives (so EDF alone never favours the short ones).
fn jobs() -> Vec<Job> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut t, mut jobs) = (0, Vec::new());
    for _ in 0..4_000 {
        // 400 long/s (0.8 of the worker) and 2 000 short/s: a mean gap of ~417 µs.
        t += next() % (834 * US);
        let long = next() % 6 == 0;
        jobs.push(Job {
            arrival: t,
            function: FunctionId(u32::from(long)),
            class: u16::from(long),
            execution: if long { 2 * MS } else { 10 * US },
            relative_deadline: 50 * MS,
            stages: 1,
            on_overrun: Overrun::Kill,
        });
    }
    jobs
}

fn short_p99(lane: bool) -> (u64, usize, u64) {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.policy_config.admission = Admission::NONE;
    cfg.ull_lane = lane.then(|| UllConfig { admission: Admission::NONE, ..UllConfig::default() });
    let jobs = jobs();
    let out = simulate(&cfg, &jobs).unwrap();
    let mut short: Vec<u64> =
        out.records.iter().filter(|r| r.class == 0).map(|r| r.latency().unwrap()).collect();
    short.sort_unstable();
    let long_done = out.records.iter().filter(|r| r.class == 1 && r.completion.is_some()).count();
    (short[short.len() * 99 / 100], long_done, out.preemptions)
}

#[test]
fn short_requests_skip_the_long_ones_queue_with_the_lane() {
    let (without, long_without, _) = short_p99(false);
    let (with, long_with, preemptions) = short_p99(true);
    // Without the lane a short request waits for the long ones queued ahead (ms); with it, for
    // at most the short ones ahead and the running long request's preemption (free here).
    assert!(without > 2 * MS, "short p99 without the lane {without} ns");
    assert!(with < 100 * US, "short p99 with the lane {with} ns");
    // Every long request still completes; the lane took workers by preemption.
    assert_eq!(long_with, long_without);
    assert!(preemptions > 100, "{preemptions} preemptions");
}
