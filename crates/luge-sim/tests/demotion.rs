//! Demotion in the simulator (Edge-RT §IV-C; `docs/scheduling.md`, "Demotion"): a job that asks
//! for it completes late in the best-effort lane where one that does not is answered at once,
//! and on-time work is never kept waiting for it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{Admission, Overrun, PolicyKind, RejectReason};
use luge_sim::{Job, Outcome, Overheads, SimConfig, simulate};

const MS: u64 = 1_000_000;

/// One 10 ms request due in 12 ms, then four 4 ms requests due 5 ms after arriving at 1 ms:
/// the first has too little slack to yield to them, so none can make its deadline and each is
/// refused or demoted.
fn jobs(on_overrun: Overrun) -> Vec<Job> {
    let one = |arrival, execution, relative_deadline| Job {
        on_overrun,
        ..Job::single(arrival, execution, relative_deadline)
    };
    let mut js = vec![one(0, 10 * MS, 12 * MS)];
    js.extend((0..4).map(|_| one(MS, 4 * MS, 5 * MS)));
    js
}

fn run(on_overrun: Overrun) -> Vec<Outcome> {
    let mut cfg = SimConfig::new(PolicyKind::SledgeScale, 1);
    cfg.check_contract = true;
    cfg.overheads = Overheads::NONE;
    cfg.policy_config.admission = Admission::default();
    simulate(&cfg, &jobs(on_overrun)).unwrap().records.iter().map(|r| r.outcome).collect()
}

#[test]
fn demoted_jobs_complete_late_where_killed_ones_are_refused() {
    let killed = run(Overrun::Kill);
    let demoted = run(Overrun::Demote);
    // The first runs to completion either way.
    assert_eq!((killed[0], demoted[0]), (Outcome::Completed, Outcome::Completed));
    // The rest cannot make their deadline behind it: refused when killed…
    assert!(
        killed[1..].iter().all(|o| matches!(
            o,
            Outcome::Rejected(RejectReason::Unreachable | RejectReason::Infeasible)
        )),
        "{killed:?}"
    );
    // …and completed, late, when demoted.
    assert!(demoted[1..].iter().all(|o| *o == Outcome::Completed), "{demoted:?}");
}
