//! Worker run queues ordered by deadline: the trait they share and [`DeadlineQueue`], the exact
//! EDF queue with O(log n) waiting-time queries that SledgeScale's dispatcher needs
//! (SledgeScale §3.3, Eq. 1 and Alg. 1 line 6).

use crate::request::{Nanos, QueueKey, Request};
use crate::sum_tree::{Due, SumTree};

impl Due for QueueKey {
    fn due(&self) -> u64 {
        self.deadline
    }
}

/// Operations every EDF run queue offers. Implemented exactly by [`DeadlineQueue`] and, with
/// deadlines coarsened to a quantum, by [`CtEdfQueue`](crate::CtEdfQueue).
pub trait EdfQueue {
    /// Adds a request; returns `false` (and changes nothing) if its key is already queued.
    fn insert(&mut self, req: Request) -> bool;
    /// Removes the request with this key.
    fn remove(&mut self, key: QueueKey) -> Option<Request>;
    /// The most urgent request.
    fn peek(&self) -> Option<&Request>;
    /// Removes and returns the most urgent request.
    fn pop(&mut self) -> Option<Request>;
    /// Number of queued requests.
    fn len(&self) -> usize;
    /// True when nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Σ remaining execution over all queued requests.
    fn total_work(&self) -> Nanos;
}

/// Exact EDF queue: a balanced search tree keyed by [`QueueKey`] (absolute deadline, then id)
/// whose nodes carry the sum of remaining execution in their subtree.
///
/// Every operation is O(log n). The weight of an entry is [`Request::remaining`] at the time it
/// was inserted or last updated with [`set_executed`](Self::set_executed).
///
/// **Tie rule of [`work_before`](Self::work_before)**: an entry whose deadline *equals* the given
/// deadline counts as more urgent. Drivers hand out ids in arrival order and ties are broken by
/// id, so an already-queued request with the same deadline runs before a newcomer; its work is
/// part of the newcomer's wait.
#[derive(Debug, Clone, Default)]
pub struct DeadlineQueue {
    tree: SumTree<QueueKey, Request>,
}

impl DeadlineQueue {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty queue with room for `cap` requests before it allocates.
    pub fn with_capacity(cap: usize) -> Self {
        Self { tree: SumTree::with_capacity(cap) }
    }

    /// Σ remaining execution of the queued requests whose absolute deadline is ≤ `deadline`
    /// (SledgeScale's `TotalPrecedingExecutionTime`, Eq. 1). O(log n).
    pub fn work_before(&self, deadline: Nanos) -> Nanos {
        self.tree.prefix_sum(|k| k.deadline <= deadline)
    }

    /// The latest absolute deadline queued. O(log n).
    pub fn latest_deadline(&self) -> Option<Nanos> {
        self.tree.last().map(|(k, _, _)| k.deadline)
    }

    /// Σ remaining execution of the queued requests strictly before `key` in EDF order.
    pub fn work_before_key(&self, key: QueueKey) -> Nanos {
        self.tree.prefix_sum(|k| *k < key)
    }

    /// The queued request with this key.
    pub fn get(&self, key: QueueKey) -> Option<&Request> {
        self.tree.get(&key).map(|(r, _)| r)
    }

    /// Records that the request `key` has executed `executed` in total, updating its remaining
    /// work and every subtree sum above it. Returns `false` if the key is not queued.
    pub fn set_executed(&mut self, key: QueueKey, executed: Nanos) -> bool {
        self.tree.update_entry(&key, |req| {
            req.executed = executed;
            req.remaining()
        })
    }

    /// Replaces the expected execution of the request `key` (a new estimate).
    pub fn set_expected(&mut self, key: QueueKey, expected: Nanos) -> bool {
        self.tree.update_entry(&key, |req| {
            req.expected = expected;
            req.remaining()
        })
    }

    /// Whether a newcomer `req` placed in this queue, its work starting at `start` and counting
    /// `own`, would finish by its deadline (SledgeScale §3.3, Alg. 1's wait plus its own work).
    /// O(log n).
    pub fn fits(&self, req: &Request, own: Nanos, start: Nanos) -> bool {
        start.saturating_add(self.work_before_key(req.key())).saturating_add(own)
            <= req.absolute_deadline
    }

    /// EDF feasibility of a newcomer, the test of admission on the wait that protects what was
    /// admitted: whether `req`, placed in
    /// this queue, would finish by its deadline *and* leave every queued request behind it
    /// finishing by its own. The newcomer's work starts at `start` (now, plus the remaining work of
    /// a running request it does not preempt) and counts `own` (its remaining work, or less when
    /// its estimate is only a guess); the queued requests start at `rest_start` ≥ `start` (later
    /// when the newcomer preempts the running request: only the newcomer jumps ahead of it) and
    /// are pushed back by `own` too. O(log n).
    pub fn admits(&self, req: &Request, own: Nanos, start: Nanos, rest_start: Nanos) -> bool {
        if !self.fits(req, own, start) {
            return false;
        }
        let later = self.tree.min_margin_after(&req.key());
        let rest_start = i64::try_from(rest_start).unwrap_or(i64::MAX);
        later == i64::MAX
            || later.saturating_sub(i64::try_from(own).unwrap_or(i64::MAX)) >= rest_start
    }

    /// The first queued request (in EDF order) that would miss its deadline if the queue's work
    /// started at `start` and every request ran as expected: a request to shed. O(log n).
    pub fn first_doomed(&self, start: Nanos) -> Option<QueueKey> {
        self.tree.first_margin_below(i64::try_from(start).unwrap_or(i64::MAX)).copied()
    }

    /// Queued requests in EDF order.
    pub fn iter(&self) -> impl Iterator<Item = &Request> {
        self.tree.iter().map(|(_, r, _)| r)
    }
}

impl EdfQueue for DeadlineQueue {
    fn insert(&mut self, req: Request) -> bool {
        self.tree.insert(req.key(), req.remaining(), req)
    }

    fn remove(&mut self, key: QueueKey) -> Option<Request> {
        self.tree.remove(&key).map(|(r, _)| r)
    }

    fn peek(&self) -> Option<&Request> {
        self.tree.first().map(|(_, r, _)| r)
    }

    fn pop(&mut self) -> Option<Request> {
        self.tree.pop_first().map(|(_, r, _)| r)
    }

    fn len(&self) -> usize {
        self.tree.len()
    }

    fn total_work(&self) -> Nanos {
        self.tree.total()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{FunctionId, MIN_REMAINING, RequestId};

    fn req(id: u64, deadline: Nanos, expected: Nanos) -> Request {
        Request::new(RequestId(id), FunctionId(0), 0, deadline, expected)
    }

    #[test]
    fn work_before_counts_ties_as_more_urgent() {
        let mut q = DeadlineQueue::new();
        q.insert(req(1, 100, 10_000));
        q.insert(req(2, 200, 20_000));
        q.insert(req(3, 200, 30_000));
        q.insert(req(4, 300, 40_000));
        assert_eq!(q.work_before(99), 0);
        assert_eq!(q.work_before(100), 10_000);
        assert_eq!(q.work_before(200), 60_000);
        assert_eq!(q.work_before_key(req(3, 200, 0).key()), 30_000);
        assert_eq!(q.total_work(), 100_000);
        assert_eq!(q.pop().map(|r| r.id), Some(RequestId(1)));
        assert_eq!(q.peek().map(|r| r.id), Some(RequestId(2)));
    }

    #[test]
    fn set_executed_updates_sums_with_floor() {
        let mut q = DeadlineQueue::new();
        let r = req(1, 100, 10_000);
        q.insert(r);
        q.insert(req(2, 200, 5_000));
        assert!(q.set_executed(r.key(), 4_000));
        assert_eq!(q.work_before(100), 6_000);
        assert!(q.set_executed(r.key(), 50_000));
        assert_eq!(q.work_before(100), MIN_REMAINING);
        assert_eq!(q.get(r.key()).map(|r| r.executed), Some(50_000));
        assert!(!q.set_executed(req(9, 1, 1).key(), 1));
    }
}
