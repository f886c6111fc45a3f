//! What the driver tests of both protocols share: a run that calls one fixed function, and the
//! accounting every report must balance.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use luge_bench::{FunctionRef, Mapping, Report, RunConfig, Target, run};

/// A run of `workload` against `target` calling `route` (UDP-RPC id 1) with the body `x`,
/// keeping its samples, with a 2 s timeout.
pub fn fixed_call(target: Target, workload: &str, route: &str) -> RunConfig {
    let mut c = RunConfig::new(
        target,
        workload.parse().unwrap(),
        Mapping::Fixed { function: FunctionRef::new(1, route), payload: b"x".to_vec() },
    );
    c.keep_samples = true;
    c.timeout = Duration::from_secs(2);
    c
}

/// Every planned request is completed or failed with a named kind, and has its sample, in
/// `seq` order.
pub fn accounted(r: &Report) {
    let s = &r.summary;
    assert_eq!(s.completed + s.errors, s.planned);
    assert_eq!(s.errors, s.errors_by_kind.values().sum::<u64>());
    assert_eq!(r.samples.len() as u64, s.planned);
    assert!(r.samples.iter().enumerate().all(|(i, x)| x.seq == i as u64));
}

/// Runs `c`, which must return within `bound` however the server behaves, and checks the
/// accounting of its report.
pub fn run_within(c: RunConfig, bound: Duration) -> Report {
    let started = Instant::now();
    let r = run(c).unwrap();
    assert!(started.elapsed() < bound, "bounded: {:?}", started.elapsed());
    accounted(&r);
    r
}
