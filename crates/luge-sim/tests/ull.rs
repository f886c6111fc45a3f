//! The uLL lane (HORSE §4.1.3) in the simulator, as the runtime runs it (`ull_lane`): short
//! requests run ahead of long ones whatever their deadlines, at the cost of one preemption of a
//! long run each time, and the long ones still complete.

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

/// A 10 ms request due in 40 ms, and a flood of 10 µs requests arriving faster than one worker
/// runs them for 60 ms: whether the long one completes in time, with the lane's share bound
/// `burst` (0: none).
fn long_beside_a_flood(burst: u32) -> bool {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.policy_config.admission = Admission::NONE;
    cfg.ull_lane = Some(UllConfig { burst, admission: Admission::NONE, ..UllConfig::default() });
    let job = |arrival, execution, relative_deadline, long: bool| Job {
        arrival,
        function: FunctionId(u32::from(long)),
        class: u16::from(long),
        execution,
        relative_deadline,
        stages: 1,
        on_overrun: Overrun::Kill,
    };
    let mut jobs = vec![job(0, 10 * MS, 40 * MS, true)];
    jobs.extend((1..6_000).map(|i| job(i * 10 * US - 1, 11 * US, 500 * MS, false)));
    let out = simulate(&cfg, &jobs).unwrap();
    out.records[0].met_deadline()
}

#[test]
fn the_share_bound_keeps_a_flood_of_short_requests_from_starving_a_long_one() {
    // Unbounded (HORSE's strict priority) the flood takes the worker until it ends (~66 ms);
    // with the default bound (16 in a row, then a 100 µs slice) the long request gets about a
    // third of it and finishes in ~28 ms.
    assert!(!long_beside_a_flood(0));
    assert!(long_beside_a_flood(UllConfig::default().burst));
}
