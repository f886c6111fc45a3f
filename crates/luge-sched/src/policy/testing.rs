//! Helpers shared by the policies' unit tests.

use super::{Action, Event, Policy, PolicyConfig, RejectReason, WorkerId};
use crate::request::{FunctionId, Nanos, Request, RequestId};

/// Feeds one event at `now` and returns the actions.
pub(crate) fn feed<P: Policy + ?Sized>(p: &mut P, now: Nanos, ev: Event) -> Vec<Action> {
    let mut out = Vec::new();
    p.on_event(now, ev, &mut out);
    out
}

/// The policy `build` makes for one worker with room for one queued request, after the three
/// `arrivals` at 0: the first runs, the second waits, the third must be refused.
pub(crate) fn refuses_the_third<P: Policy>(
    build: impl FnOnce(&PolicyConfig) -> P,
    arrivals: [Request; 3],
) -> P {
    let mut cfg = PolicyConfig::with_workers(1);
    cfg.admission.max_queued = Some(1);
    let mut p = build(&cfg);
    let [first, second, third] = arrivals;
    let id = third.id;
    feed(&mut p, 0, Event::Arrival(first));
    feed(&mut p, 0, Event::Arrival(second));
    let out = feed(&mut p, 0, Event::Arrival(third));
    assert!(matches!(out[..], [Action::Reject { req, .. }] if req.id == id), "{out:?}");
    p
}

/// A request arriving at 0 with a loose deadline (1 s) and expected execution `e`.
pub(crate) fn req(id: u64, e: Nanos) -> Request {
    Request::new(RequestId(id), FunctionId(0), 0, 1_000_000_000, e)
}

/// The `Run` actions among `out`: (worker, request id, its execution so far).
pub(crate) fn runs_executed(out: &[Action]) -> Vec<(WorkerId, u64, Nanos)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Run { worker, req } => Some((*worker, req.id.0, req.executed)),
            _ => None,
        })
        .collect()
}

/// The `Run` actions among `out`: (worker, request id).
pub(crate) fn runs(out: &[Action]) -> Vec<(WorkerId, u64)> {
    runs_executed(out).into_iter().map(|(w, id, _)| (w, id)).collect()
}

/// The `Reject` actions among `out`: (request id, reason).
pub(crate) fn rejected(out: &[Action]) -> Vec<(u64, RejectReason)> {
    out.iter()
        .filter_map(|a| match a {
            Action::Reject { req, reason } => Some((req.id.0, *reason)),
            _ => None,
        })
        .collect()
}
