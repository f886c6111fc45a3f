//! The sandboxes a dispatcher group keeps suspended, and the preemptions it defers at their
//! bound.
//!
//! A preempted request keeps its sandbox — a pool slot — until it runs to its end. Clients
//! choose their deadlines, so ever more urgent arrivals could each preempt the last and hold
//! every slot, leaving every other request `PoolExhausted`. A group therefore counts the slots
//! its preempted requests hold (waiting in the dispatcher, or handed to a worker behind a run and
//! not started yet) and the preemptions it has signalled and not yet seen end; at its bound it
//! defers a preemption instead of signalling it, and signals it once a slot is given back, if the
//! run it targets still runs. The policy sees nothing of this: a deferred preemption is one that
//! takes longer to land, or loses the race with the run's completion, which it handles already.

use std::collections::HashSet;

use luge_sched::RequestId;

/// The count, the bound and the deferred preemptions (`Dispatcher`).
#[derive(Debug)]
pub(crate) struct Suspended {
    /// Slots held by preempted requests: in the dispatcher's hands, or committed to a worker
    /// behind a run (`followers`) and not started.
    held: usize,
    /// Of the committed ones, those holding a suspended sandbox, by id.
    followers: HashSet<RequestId>,
    /// Preemptions signalled whose run has neither yielded nor completed yet: each will hold a
    /// slot.
    signalled: HashSet<RequestId>,
    /// Preemptions not signalled yet, oldest first: (worker, run).
    deferred: Vec<(usize, RequestId)>,
    /// The bound on `held` plus `signalled`.
    max: usize,
}

impl Suspended {
    /// None held, at most `max`.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            held: 0,
            followers: HashSet::new(),
            signalled: HashSet::new(),
            deferred: Vec::new(),
            max,
        }
    }

    /// Slots held now (for `/metrics`).
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Asks to preempt `run` on `worker`: `true` to signal it now (counted), `false` if it is
    /// deferred until a slot is given back.
    pub(crate) fn preempt(&mut self, worker: usize, run: RequestId) -> bool {
        if self.held + self.signalled.len() < self.max {
            self.signalled.insert(run);
            true
        } else {
            if !self.deferred.iter().any(|&(_, r)| r == run) {
                self.deferred.push((worker, run));
            }
            false
        }
    }

    /// The deferred preemptions to signal now, as many as there is room for (each counted).
    pub(crate) fn due(&mut self) -> Vec<(usize, RequestId)> {
        let room = self.max.saturating_sub(self.held + self.signalled.len());
        let due: Vec<_> = self.deferred.drain(..room.min(self.deferred.len())).collect();
        self.signalled.extend(due.iter().map(|&(_, run)| run));
        due
    }

    /// `run` yielded to a preemption; `holds` whether it left a suspended sandbox (it had
    /// started).
    pub(crate) fn preempted(&mut self, run: RequestId, holds: bool) {
        self.ended(run);
        self.held += usize::from(holds);
    }

    /// `run` completed (or yielded): a preemption of it is no longer pending.
    pub(crate) fn ended(&mut self, run: RequestId) {
        self.signalled.remove(&run);
        self.deferred.retain(|&(_, r)| r != run);
    }

    /// A committed request came back unstarted (its run was preempted).
    pub(crate) fn returned(&mut self, id: RequestId, holds: bool) {
        if !self.followers.remove(&id) {
            self.held += usize::from(holds);
        }
    }

    /// A request leaves the dispatcher for a worker: to run now (its slot counts as the
    /// worker's), or committed behind a run (`follow`: still counted until it starts).
    pub(crate) fn handed_over(&mut self, id: RequestId, holds: bool, follow: bool) {
        if holds {
            if follow {
                self.followers.insert(id);
            } else {
                self.held = self.held.saturating_sub(1);
            }
        }
    }

    /// A request started on a worker.
    pub(crate) fn started(&mut self, id: RequestId) {
        if self.followers.remove(&id) {
            self.held = self.held.saturating_sub(1);
        }
    }

    /// A request the dispatcher held was answered without running again.
    pub(crate) fn answered(&mut self, holds: bool) {
        self.held = self.held.saturating_sub(usize::from(holds));
    }

    /// Everything was answered (a shutdown's abort).
    pub(crate) fn clear(&mut self) {
        *self = Self::new(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: RequestId = RequestId(1);
    const B: RequestId = RequestId(2);
    const C: RequestId = RequestId(3);

    #[test]
    fn at_the_bound_a_preemption_waits_for_a_slot_and_is_dropped_if_its_run_ends() {
        let mut s = Suspended::new(1);
        assert!(s.preempt(0, A), "room for one");
        // Signalled, not yet yielded: it counts, so a second waits.
        assert!(!s.preempt(0, B));
        assert!(s.due().is_empty());
        s.preempted(A, true);
        assert_eq!(s.held(), 1);
        assert!(s.due().is_empty(), "A's slot is held");
        // A runs again: its slot is the worker's; B's preemption is due now.
        s.handed_over(A, true, false);
        assert_eq!(s.due(), [(0, B)]);
        assert!(!s.preempt(0, C), "B's is signalled");
        // C completes before a slot frees: its deferral goes.
        s.ended(C);
        s.ended(B);
        assert!(s.due().is_empty());
        assert!(s.preempt(0, C));
    }

    #[test]
    fn a_suspended_follower_counts_until_it_starts() {
        let mut s = Suspended::new(4);
        s.preempted(A, true);
        s.handed_over(A, true, true);
        assert_eq!(s.held(), 1, "committed behind a run, still suspended");
        // Its run is preempted: it comes back, counted once.
        s.returned(A, true);
        assert_eq!(s.held(), 1);
        s.handed_over(A, true, true);
        s.started(A);
        assert_eq!(s.held(), 0);
        // A fresh follower holds nothing.
        s.handed_over(B, false, true);
        s.started(B);
        s.returned(C, false);
        assert_eq!(s.held(), 0);
        // Preempted before it started: no sandbox.
        s.preempted(C, false);
        assert_eq!(s.held(), 0);
        s.preempted(B, true);
        s.answered(true);
        assert_eq!(s.held(), 0);
    }
}
