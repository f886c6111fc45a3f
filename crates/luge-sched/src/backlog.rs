//! What a policy's admission on the wait looks like from outside: a summary a front end can
//! read on its own thread to refuse an arrival the policy would refuse, without handing it over.
//!
//! SledgeScale's dispatchers decide admission off the workers' cores (SledgeScale §3.3): a
//! refusal costs a worker nothing. Where a dispatcher shares its worker's thread (Luge's inline
//! layout), every arrival it refuses takes that worker's time — on a core at 5× its capacity,
//! four arrivals in five. A [`Backlog`], published by the policy after each of its rounds, lets
//! the thread that received the request make the same decision first.
//!
//! The summary only ever claims what the policy would conclude. For a newcomer whose deadline
//! lies after every deadline a worker holds, Algorithm 1's wait on that worker is all of its
//! work: the run's remaining claim, the batch committed behind it and the queue. A run started
//! at `s` with `r` left then claims until `max(s + r, now + 1 µs)` (its remaining work is floored,
//! never negative), so without an event a worker is busy until at least
//! `max(free_at_w, now + busy_for_w)`, for an instant `free_at_w` and a duration `busy_for_w`
//! fixed at the policy's last event; over several workers the earliest of those instants and the
//! least of those durations bound every worker's. With shedding on, a run that reaches its
//! deadline may be preempted by any arrival, which then waits only for the queue: from `until`,
//! the earliest such deadline, only the queued work is certain. The bound a newcomer is judged
//! on is the least of these over every instant from now on, so that a refusal made now holds
//! whenever the policy gets to judge the request, as long as no event came between. A newcomer
//! of known work `own` fits nowhere when that bound plus `own` passes its deadline.

use crate::request::Nanos;

/// A policy's backlog as of its last event ([`Policy::backlog`](crate::Policy::backlog)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// When it was taken; it says nothing about earlier instants.
    pub at: Nanos,
    /// An instant before which no worker is done with the work admitted to it.
    pub free_at: Nanos,
    /// Work (ns) every worker has left at any instant, running or not (the floor of a run's
    /// remaining work, and what is committed and queued behind it).
    pub busy_for: Nanos,
    /// Work (ns) every worker has queued (a newcomer that preempts a run waits for that much).
    pub queued: Nanos,
    /// The latest absolute deadline any worker holds (running, committed or queued).
    pub latest: Nanos,
    /// With shedding on, the earliest deadline of a running request that may not yet be
    /// preempted by anyone: from then on only [`queued`](Self::queued) is certain.
    pub until: Nanos,
    /// Workers summarised (0: the summary claims nothing).
    pub workers: usize,
}

impl Backlog {
    /// Claims nothing: every arrival goes to the policy.
    pub const OPEN: Backlog = Backlog {
        at: 0,
        free_at: 0,
        busy_for: 0,
        queued: 0,
        latest: Nanos::MAX,
        until: 0,
        workers: 0,
    };

    /// An instant before which, at `now` (≥ [`at`](Self::at)) or any later time with no event
    /// since, no worker can be done with all of its work. Never decreases as `now` grows.
    pub fn free_from(&self, now: Nanos) -> Nanos {
        let queued_only = |t: Nanos| t.saturating_add(self.queued);
        if now < self.until {
            // Until then the run's claim holds; from then on, the queue's (at the earliest then).
            self.running(now).min(queued_only(self.until))
        } else {
            queued_only(now)
        }
    }

    /// When the work held is done as of `now` if runs keep their claims.
    fn running(&self, now: Nanos) -> Nanos {
        self.free_at.max(now.saturating_add(self.busy_for))
    }

    /// Whether the summary speaks of an arrival at `now` due at `deadline` with work `own`: one
    /// behind everything held, feasible on its own (the policy judges the others itself).
    fn judges(&self, now: Nanos, deadline: Nanos, own: Nanos) -> bool {
        now >= self.at && deadline > self.latest && now.saturating_add(own) <= deadline
    }

    /// The summary as it will be once the policy has admitted an arrival of work `own`, due at
    /// `deadline`, that this summary passes at `now` — when that is certain: one worker, and at
    /// `now` the bound is the worker's exact wait (not lowered for a run that reaches its
    /// deadline first), so that the policy, with no event in between, admits the arrival behind
    /// everything it holds. A submitter that hands over several requests on one summary judges
    /// each on the one before it so updated. `None` when not certain (keep judging on `self`: it
    /// stays a lower bound whatever the policy does with the arrival).
    ///
    /// The arrival's work is added to what the worker is busy with; not to what it has queued,
    /// since it may run at once, and the summary stops counting its run from the arrival's own
    /// deadline on, as for any run (both only lower the bound).
    pub fn behind(&self, now: Nanos, deadline: Nanos, own: Nanos) -> Option<Backlog> {
        let running = self.running(now);
        let exact = now >= self.until || running <= self.until.saturating_add(self.queued);
        let passes =
            self.judges(now, deadline, own) && self.free_from(now).saturating_add(own) <= deadline;
        (self.workers == 1 && exact && passes).then(|| Backlog {
            free_at: running.saturating_add(own),
            busy_for: self.busy_for.saturating_add(own),
            latest: deadline,
            until: self.until.min(deadline),
            ..*self
        })
    }

    /// Whether the policy that published this would refuse, at `now`, an arrival whose
    /// absolute deadline is `deadline` and whose known work is `own`, as unreachable at the
    /// current load (admission on the wait), with no event since. An arrival that is infeasible
    /// on its own (`now + own` past its deadline) is left to the policy, which may treat it
    /// otherwise (refuse it as infeasible, or probe its function).
    pub fn refuses(&self, now: Nanos, deadline: Nanos, own: Nanos) -> bool {
        self.judges(now, deadline, own) && self.free_from(now).saturating_add(own) > deadline
    }
}

impl Default for Backlog {
    fn default() -> Self {
        Self::OPEN
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn refuses_only_a_newcomer_behind_everything_whose_work_ends_past_its_deadline() {
        let b = Backlog {
            at: 100,
            free_at: 1_000,
            busy_for: 300,
            queued: 200,
            latest: 900,
            until: 900,
            workers: 1,
        };
        assert!(b.refuses(100, 1_050, 100), "1 000 + 100 > 1 050");
        assert!(!b.refuses(100, 1_100, 100), "ends exactly at its deadline: admitted");
        assert!(!b.refuses(100, 900, 850), "not behind everything (a deadline held is as late)");
        assert!(!b.refuses(99, 1_050, 100), "before the summary was taken");
        assert!(!b.refuses(100, 1_050, 960), "infeasible on its own: left to the policy");
        // Later, the work left counts from then: 750 + 300 + 100 > 1 110…
        assert!(b.refuses(750, 1_110, 100));
        // …but from the run's deadline on only the queue is certain: 900 + 200 + 100 ≤ 1 210,
        // so a newcomer that would fit then is not refused now.
        assert!(!b.refuses(850, 1_210, 100));
        assert!(b.refuses(950, 1_200, 100), "950 + 200 + 100 > 1 200");
        assert!(!Backlog::OPEN.refuses(10, 20, 5));
        assert!(!Backlog::default().refuses(0, Nanos::MAX, Nanos::MAX));
    }

    #[test]
    fn what_is_handed_over_on_an_exact_picture_counts_for_the_next_one() {
        // One worker busy until 1 000 at least, its run due at 5 000.
        let b = Backlog {
            at: 0,
            free_at: 1_000,
            busy_for: 300,
            queued: 200,
            latest: 900,
            until: 5_000,
            workers: 1,
        };
        // A newcomer of 100 due at 1 200 passes; the next, of 200 due at 1 250, passes on the
        // picture alone but not once the first is counted.
        let next = b.behind(100, 1_200, 100).unwrap();
        assert!(!b.refuses(100, 1_250, 200));
        assert!(next.refuses(100, 1_250, 200), "1 000 + 100 + 200 > 1 250");
        assert_eq!((next.free_at, next.busy_for, next.latest), (1_100, 400, 1_200));
        // Not for one that does not pass, nor on several workers, nor where the bound is
        // lowered for a run reaching its deadline first.
        assert_eq!(b.behind(100, 1_050, 100), None);
        assert_eq!(Backlog { workers: 2, ..b }.behind(100, 1_200, 100), None);
        assert_eq!(Backlog { until: 700, ..b }.behind(100, 1_200, 100), None);
        assert_eq!(Backlog::OPEN.behind(100, 1_200, 100), None);
    }

    #[test]
    fn the_bound_never_decreases() {
        let b = Backlog {
            at: 0,
            free_at: 1_000,
            busy_for: 300,
            queued: 200,
            latest: 0,
            until: 900,
            workers: 1,
        };
        let mut last = 0;
        for now in (0..3_000).step_by(7) {
            let free = b.free_from(now);
            assert!(free >= last, "{now}: {free} < {last}");
            last = free;
        }
    }
}
