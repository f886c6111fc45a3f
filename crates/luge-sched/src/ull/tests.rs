//! The lane's unit tests: borrowing, the share bound, demotion and shedding, one event at a
//! time.

use super::*;
use crate::policy::{PolicyConfig, PolicyKind};
use crate::request::FunctionId;

fn lane() -> UllLane<Box<dyn Policy>> {
    let config = PolicyConfig::papers(1);
    let ull = UllConfig { admission: config.admission, ..UllConfig::default() };
    UllLane::new(PolicyKind::SledgeScale.build(&config), ull)
}

/// A lane over SledgeScale with Luge's default admission (refuse the infeasible, shed).
fn admitting_lane() -> UllLane<Box<dyn Policy>> {
    let config = PolicyConfig::default();
    let ull = UllConfig { admission: config.admission, ..UllConfig::default() };
    UllLane::new(PolicyKind::SledgeScale.build(&config), ull)
}

/// A uLL request that cannot make its deadline is refused — unless its function demotes:
/// then the inner policy takes it and runs it late (here at once: nothing else waits),
/// where the lane used to refuse it, and would have refused it forever once the function's
/// estimate had shifted past its deadline.
#[test]
fn a_late_ull_request_that_demotes_goes_to_the_inner_policy() {
    // 50 µs of work, 20 µs deadline: infeasible at arrival.
    let late = |id: u64, overrun: Overrun| {
        Request::new(RequestId(id), FunctionId(0), 0, 20_000, 50_000)
            .with_ull(true)
            .with_overrun(overrun)
    };
    let mut p = admitting_lane();
    let refused = step(&mut p, 0, Event::Arrival(late(1, Overrun::Kill)));
    assert!(matches!(refused[..], [Action::Reject { .. }]), "{refused:?}");
    let mut p = admitting_lane();
    let taken = step(&mut p, 0, Event::Arrival(late(2, Overrun::Demote)));
    assert!(
        taken.iter().any(|a| matches!(a, Action::Run { worker: 0, req } if req.id == RequestId(2))),
        "{taken:?}"
    );
    assert!(!taken.iter().any(|a| matches!(a, Action::Reject { .. })), "{taken:?}");
    assert_eq!(p.ull_stats().demoted, 1);
    assert_eq!(p.stats().arrivals, 1, "counted once");
}

/// A uLL request shed when its turn comes counts as shed, not only as refused.
#[test]
fn a_ull_request_shed_at_its_turn_counts_as_shed() {
    let mut p = admitting_lane();
    let ull =
        |id: u64, d: Nanos| Request::new(RequestId(id), FunctionId(0), 0, d, 50_000).with_ull(true);
    step(&mut p, 0, Event::Arrival(ull(1, 1_000_000)));
    step(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
    // Feasible alone (50 of 60 µs), not behind the first.
    assert_eq!(step(&mut p, 0, Event::Arrival(ull(2, 60_000))), []);
    let out =
        step(&mut p, 50_000, Event::Completed { worker: 0, id: RequestId(1), executed: 50_000 });
    assert!(out.contains(&Action::Reject { req: ull(2, 60_000), reason: RejectReason::Shed }));
    let stats = p.stats();
    assert_eq!((stats.rejected, stats.shed), (1, 1));
}

/// A threshold of 0 means declared functions only, even for a known estimate of 0.
#[test]
fn a_zero_threshold_takes_declared_functions_only() {
    let config = UllConfig { threshold: 0, ..UllConfig::default() };
    let free = Request::new(RequestId(1), FunctionId(0), 0, 1_000_000, 0);
    assert!(!config.is_ull(&free));
    assert!(config.is_ull(&free.with_ull(true)));
}

fn step(p: &mut UllLane<Box<dyn Policy>>, now: Nanos, event: Event) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_event(now, event, &mut out);
    out.retain(|a| !matches!(a, Action::Enqueue { .. } | Action::WakeAt(_)));
    out
}

#[test]
fn a_ull_arrival_borrows_the_worker_and_gives_it_back() {
    let mut p = lane();
    // A 1 ms request with a loose deadline runs; a 5 µs one arrives with a looser one still:
    // EDF alone would keep it waiting, the lane preempts the long one for it.
    let long = Request::new(RequestId(1), FunctionId(0), 0, 100_000_000, 1_000_000);
    assert_eq!(step(&mut p, 0, Event::Arrival(long)), [Action::Run { worker: 0, req: long }]);
    step(&mut p, 1_000, Event::Started { worker: 0, id: RequestId(1) });
    let short = Request::new(RequestId(2), FunctionId(1), 2_000, 200_000_000, 5_000);
    let preempt = Action::Preempt { worker: 0, id: RequestId(1) };
    assert_eq!(step(&mut p, 2_000, Event::Arrival(short)), [preempt]);
    let stopped = Event::Preempted { worker: 0, id: RequestId(1), executed: 2_000 };
    assert_eq!(step(&mut p, 3_000, stopped), [Action::Run { worker: 0, req: short }]);
    assert_eq!(p.waiting(), 0);
    step(&mut p, 3_100, Event::Started { worker: 0, id: RequestId(2) });
    let done = Event::Completed { worker: 0, id: RequestId(2), executed: 5_000 };
    let resumed = Request { executed: 2_000, ..long };
    assert_eq!(step(&mut p, 8_100, done), [Action::Run { worker: 0, req: resumed }]);
    // The resumed run's start is not news to the inner policy; its completion is.
    assert!(step(&mut p, 8_200, Event::Started { worker: 0, id: RequestId(1) }).is_empty());
    let done = Event::Completed { worker: 0, id: RequestId(1), executed: 1_000_000 };
    assert!(step(&mut p, 1_000_000, done).is_empty());
    let s = p.ull_stats();
    assert_eq!((s.arrivals, s.completed, s.borrowed), (1, 1, 1));
    assert_eq!(p.queued(), 0);
}

#[test]
fn a_ull_request_that_outruns_its_slice_while_others_wait_goes_to_the_inner_policy() {
    let mut p = lane();
    let short = Request::new(RequestId(1), FunctionId(1), 0, 100_000_000, 5_000);
    let mut out = Vec::new();
    p.on_event(0, Event::Arrival(short), &mut out);
    // Nothing waits: no timer, the uLL run may take as long as it needs.
    assert_eq!(out, [Action::Run { worker: 0, req: short }]);
    step(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
    // Another request arrives: the inner policy runs it on the worker the lane holds, which
    // arms the slice.
    let long = Request::new(RequestId(2), FunctionId(0), 50_000, 50_000_000, 1_000_000);
    out.clear();
    p.on_event(50_000, Event::Arrival(long), &mut out);
    assert!(out.contains(&Action::WakeAt(100_000)), "{out:?}");
    assert!(!out.iter().any(|a| matches!(a, Action::Run { .. })), "{out:?}");
    let preempt = Action::Preempt { worker: 0, id: RequestId(1) };
    assert_eq!(step(&mut p, 100_000, Event::Tick), [preempt]);
    // The waiting run (the earlier deadline) goes first; the overrun uLL request joins the
    // inner policy's queue as an ordinary request.
    let stopped = Event::Preempted { worker: 0, id: RequestId(1), executed: 100_000 };
    assert_eq!(step(&mut p, 100_500, stopped), [Action::Run { worker: 0, req: long }]);
    assert_eq!(p.ull_stats().overran, 1);
    assert_eq!(p.queued(), 1);
}

#[test]
fn after_a_burst_the_held_back_run_gets_a_slice_before_the_lane_borrows_again() {
    let config = PolicyConfig::papers(1);
    let ull = UllConfig { burst: 2, admission: config.admission, ..UllConfig::default() };
    let mut p: UllLane<Box<dyn Policy>> = UllLane::new(PolicyKind::SledgeScale.build(&config), ull);
    let long = Request::new(RequestId(1), FunctionId(0), 0, 100_000_000, 1_000_000);
    step(&mut p, 0, Event::Arrival(long));
    step(&mut p, 0, Event::Started { worker: 0, id: RequestId(1) });
    let short = |id: u64| Request::new(RequestId(id), FunctionId(1), 1_000, 100_000_000, 5_000);
    let preempt = Action::Preempt { worker: 0, id: RequestId(1) };
    assert_eq!(step(&mut p, 1_000, Event::Arrival(short(2))), [preempt]);
    for id in 3..=5 {
        assert!(step(&mut p, 1_000, Event::Arrival(short(id))).is_empty(), "one borrow");
    }
    let stopped = Event::Preempted { worker: 0, id: RequestId(1), executed: 1_000 };
    assert_eq!(step(&mut p, 2_000, stopped), [Action::Run { worker: 0, req: short(2) }]);
    let mut now = 2_000;
    let mut done = |p: &mut UllLane<Box<dyn Policy>>, id: u64| {
        step(p, now, Event::Started { worker: 0, id: RequestId(id) });
        now += 5_000;
        let mut out = Vec::new();
        p.on_event(
            now,
            Event::Completed { worker: 0, id: RequestId(id), executed: 5_000 },
            &mut out,
        );
        out
    };
    assert_eq!(done(&mut p, 2), [Action::Run { worker: 0, req: short(3) }]);
    // Two in a row: the long run gets the worker back, protected for a slice (100 µs).
    let resumed = Request { executed: 1_000, ..long };
    let out = done(&mut p, 3);
    assert_eq!(out[0], Action::Run { worker: 0, req: resumed }, "{out:?}");
    assert_eq!(p.waiting(), 2);
    step(&mut p, 12_500, Event::Started { worker: 0, id: RequestId(1) });
    // Neither an arrival nor a tick within the slice takes it (a tick re-arms for its
    // end); the slice's end does.
    assert!(step(&mut p, 50_000, Event::Arrival(short(6))).is_empty());
    let mut out = Vec::new();
    p.on_event(102_000, Event::Tick, &mut out);
    assert!(!out.contains(&preempt) && out.contains(&Action::WakeAt(112_000)), "{out:?}");
    assert_eq!(step(&mut p, 112_000, Event::Tick), [preempt]);
}

/// A configured slice of 0 is a slice of 1 ns: a uLL run is not over before it starts.
#[test]
fn a_zero_slice_is_one_nanosecond() {
    let config = PolicyConfig::papers(1);
    let ull = UllConfig { slice: 0, admission: config.admission, ..UllConfig::default() };
    let p = UllLane::new(PolicyKind::SledgeScale.build(&config), ull);
    assert_eq!(p.config.slice, 1);
}

/// A client's estimate never earns the lane: a request within the threshold on a client's
/// figure goes to the inner policy, the same request on the node's own estimate to the lane.
#[test]
fn a_clients_estimate_does_not_earn_the_lane() {
    let lane = UllConfig::default();
    let short = Request::new(RequestId(1), FunctionId(0), 0, 1_000_000, 1_000);
    assert!(lane.is_ull(&short), "the node's own estimate within the threshold");
    assert!(!lane.is_ull(&short.with_client_estimate()), "a client's claim");
    assert!(lane.is_ull(&short.with_client_estimate().with_ull(true)), "declared by the operator");
    // With both estimates: the node's must bring it in, and the client's may leave it out.
    assert!(lane.takes(false, Some(1_000), Some(1_000)));
    assert!(!lane.takes(false, None, Some(1_000)), "a client's claim alone");
    assert!(!lane.takes(false, Some(1_000), Some(1_000_000)), "a client saying it is long");
    assert!(lane.takes(true, None, Some(1_000_000)), "declared");
    assert!(!UllConfig { threshold: 0, ..lane }.takes(false, Some(1), None), "threshold 0");
}
