//! What a request costs a worker beyond its measured execution: the dispatcher's model of the
//! node's own per-request work, added to every request's execution estimate so that admission
//! on the wait (SledgeScale §3.3, Alg. 1) predicts the wait the node will really impose.
//!
//! A worker's time per request is the execution the worker measures (sandbox start, guest,
//! sandbox drop) plus what lies between the dispatcher's `Run` and the guest's start, and
//! between the completion and the dispatcher seeing it: the hand-off through the worker's inbox,
//! its wake-up, the completion event and the dispatcher's own wake-up. In the `threads` layout
//! with sleeping waits that is two blocking wake-ups, tens of µs: small beside one execution,
//! but summed over the hundreds of requests a queue holds at overload it is tens of ms, and an
//! admission that ignored it would admit requests that then finish late. The simulator models
//! the same cost as `SimConfig::estimate_start_cost`.
//!
//! The estimate is an exponentially weighted mean (weight 1/8, starting from 0) of
//! `turnaround − execution` per completed run slice, each sample clamped to [`MAX_SAMPLE`]: one
//! stall (a page-fault storm, a descheduled thread, the cold first request of a node) moves it
//! by at most 31 µs, so it cannot make the node refuse tight deadlines; a steady overhead is
//! learnt within a few dozen requests.

use luge_sched::Nanos;

/// The largest overhead sample believed (250 µs: a dozen wake-ups; more is a stall).
pub(crate) const MAX_SAMPLE: Nanos = 250_000;

/// Weight of a new sample: 1 / 2^`SHIFT`.
const SHIFT: u32 = 3;

/// Per-request overhead of a worker group, learnt from its runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Turnaround {
    /// Per worker: when the running slice was handed over, and the request's execution then.
    slices: Vec<Option<(Nanos, Nanos)>>,
    /// The mean, scaled by 2^`SHIFT`.
    scaled: Nanos,
}

impl Turnaround {
    pub(crate) fn new(workers: usize) -> Self {
        Self { slices: vec![None; workers], scaled: 0 }
    }

    /// The dispatcher handed a request that has executed `executed` so far to `worker` at `now`.
    pub(crate) fn ran(&mut self, worker: usize, now: Nanos, executed: Nanos) {
        if let Some(s) = self.slices.get_mut(worker) {
            *s = Some((now, executed));
        }
    }

    /// The dispatcher saw `worker`'s slice end at `now`, the request's execution then
    /// `executed` (a completion or a preemption).
    pub(crate) fn ended(&mut self, worker: usize, now: Nanos, executed: Nanos) {
        let Some((at, before)) = self.slices.get_mut(worker).and_then(Option::take) else {
            return;
        };
        let slice = executed.saturating_sub(before);
        let sample = now.saturating_sub(at).saturating_sub(slice).min(MAX_SAMPLE);
        self.scaled = self.scaled - (self.scaled >> SHIFT) + sample;
    }

    /// The current estimate of a slice's overhead (0 before the first run).
    pub(crate) fn overhead(&self) -> Nanos {
        self.scaled >> SHIFT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_the_gap_between_turnaround_and_execution() {
        let mut t = Turnaround::new(2);
        assert_eq!(t.overhead(), 0);
        t.ran(0, 1_000, 0);
        t.ended(0, 1_000 + 200_000 + 40_000, 200_000);
        assert_eq!(t.overhead(), 5_000, "one sample moves the mean by 1/8 of it");
        for i in 0..200 {
            let at = 1_000_000 * (i + 2);
            t.ran(1, at, 0);
            t.ended(1, at + 200_000 + 20_000, 200_000);
        }
        let o = t.overhead();
        assert!((20_000..20_100).contains(&o), "converges to the new gap: {o}");
    }

    #[test]
    fn counts_only_this_slice_of_a_preempted_request() {
        let mut t = Turnaround::new(1);
        // Resumed after 500 µs of execution; this slice ran 100 µs in a 130 µs turnaround.
        t.ran(0, 10_000_000, 500_000);
        t.ended(0, 10_130_000, 600_000);
        assert_eq!(t.overhead(), 30_000 / 8);
    }

    #[test]
    fn a_stall_is_clamped_and_unknown_slices_are_ignored() {
        let mut t = Turnaround::new(1);
        t.ended(0, 5_000, 0); // never ran: ignored
        t.ended(7, 5_000, 0); // no such worker: ignored
        assert_eq!(t.overhead(), 0);
        t.ran(0, 0, 0);
        t.ended(0, 1_000_000_000, 0);
        assert_eq!(t.overhead(), MAX_SAMPLE / 8, "a cold first request moves it by 31 µs");
        for _ in 0..100 {
            t.ran(0, 0, 0);
            t.ended(0, 1_000_000_000, 0);
        }
        assert!(t.overhead() <= MAX_SAMPLE, "never beyond the clamp: {}", t.overhead());
        t.ran(9, 0, 0); // no such worker: ignored
    }
}
