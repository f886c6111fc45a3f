//! Refused where it arrives (`docs/scheduling.md`): what a group's dispatcher publishes after
//! each round so that the thread submitting a request can refuse it as the dispatcher would,
//! without handing it over — in the inline layout the dispatcher shares its worker's thread, and
//! past capacity most arrivals are refused.
//!
//! The dispatcher publishes its policy's [`Backlog`] and the node's per-request overhead
//! ([`Published`], after every round that handled anything), and the estimate of each function
//! whenever it changes (`Function::publish_expected`: at an arrival judged on knowledge, after
//! every observed run). A submitter reads both without a lock; it may mix two rounds, and its
//! picture lags the dispatcher's by the events the dispatcher has not read yet — as the
//! dispatcher's lags the workers' (module `dispatcher`, "Design and races").
//!
//! A thread that hands over several requests before the dispatcher publishes again (a receive
//! thread's batch of datagrams) judges each on the picture with the ones it handed over before
//! counted, where the policy is certain to have admitted them ([`Backlog::behind`]): judged on
//! the picture alone, past capacity about half of those that passed were then refused by the
//! dispatcher. Each thread keeps its own view per group; a new publication replaces it.

use std::cell::RefCell;

use luge_sched::{Backlog, Nanos, Overrun, Request, RequestId};

use super::GroupShared;
use crate::registry::Function;

/// What a group's dispatcher publishes for submitters after a round (`Runtime::submit_to`):
/// its policy's [`Backlog`] and the node's per-request overhead, which it adds to every
/// request's expected execution (`Turnaround::overhead`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Published {
    pub backlog: Backlog,
    pub overhead: Nanos,
}

thread_local! {
    /// Per group, the picture this thread judges on with what it handed over since counted.
    static VIEWS: RefCell<Vec<Option<Backlog>>> = const { RefCell::new(Vec::new()) };
}

impl GroupShared {
    /// Whether this group's dispatcher, as of its last round, refuses a request of `function`
    /// received at `arrival`, with `relative` deadline (as scheduled) and the client's trusted
    /// estimate `given`, at `now`: unreachable at the current load (`Backlog::refuses`). The
    /// request's own work is what the dispatcher would expect of it: the client's trusted
    /// estimate, else the function's published one, plus the node's overhead; unknown, the
    /// request is not refused here. Nor are requests the dispatcher may treat otherwise: of a
    /// function that asks for demotion (demoted, not refused), and uLL requests (the lane admits
    /// on its own terms).
    pub(crate) fn refuses(
        &self,
        function: &Function,
        (arrival, relative): (Nanos, Nanos),
        given: Option<Nanos>,
        now: Nanos,
    ) -> bool {
        let Published { backlog, overhead } = self.published.load();
        if backlog.latest == Nanos::MAX || function.config.on_overrun != Overrun::Kill {
            return false;
        }
        let Some(estimate) = given.or_else(|| function.published_expected(self.index)) else {
            return false;
        };
        let own = estimate.saturating_add(overhead);
        let req = Request::new(RequestId(0), function.id, arrival.min(now), relative, own);
        // The lane judges on the node's estimate, and a client's can only leave a request out
        // (`UllConfig::takes`, as the dispatcher judges it).
        let node = function.published_expected(self.index).map(|n| n.saturating_add(overhead));
        let client = given.map(|_| own);
        if self.ull_lane.is_some_and(|l| l.takes(function.config.ull, node, client)) {
            return false;
        }
        let (deadline, own) = (req.absolute_deadline, req.own_work());
        VIEWS.with(|cell| {
            let Ok(mut views) = cell.try_borrow_mut() else {
                return backlog.refuses(now, deadline, own);
            };
            if views.len() <= self.index {
                views.resize(self.index + 1, None);
            }
            let slot = &mut views[self.index];
            let view = slot.filter(|v| v.at == backlog.at).unwrap_or(backlog);
            if view.refuses(now, deadline, own) {
                return true;
            }
            // Handed over next: counted where the policy will admit it for certain.
            *slot = view.behind(now, deadline, own);
            false
        })
    }

    /// This thread did not hand over the request it last let through: its view must not count
    /// it.
    pub(crate) fn not_handed_over(&self) {
        VIEWS.with(|cell| {
            if let Ok(mut views) = cell.try_borrow_mut()
                && let Some(slot) = views.get_mut(self.index)
            {
                *slot = None;
            }
        });
    }
}
