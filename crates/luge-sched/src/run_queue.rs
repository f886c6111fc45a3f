//! The run queue of an early-binding worker, selectable between the exact deadline tree
//! ([`DeadlineQueue`], SledgeScale §3.3) and Edge-RT's constant-time bitmap timeline
//! ([`CtEdfQueue`], Edge-RT §IV-C), behind the one set of operations the policies use.

use std::fmt;
use std::str::FromStr;

use crate::ct_edf::{CtEdfConfig, CtEdfQueue};
use crate::queue::{DeadlineQueue, EdfQueue};
use crate::request::{Nanos, QueueKey, Request};

/// Which structure orders each worker's queue ([`PolicyConfig::worker_queue`]
/// (crate::PolicyConfig::worker_queue)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueKind {
    /// The deadline tree: exact EDF, every operation `O(log n)`.
    #[default]
    Tree,
    /// The bitmap timeline of Edge-RT §IV-C: deadlines quantised to Δwindow, FIFO within a
    /// quantum, every operation `O(1)` in the number of queued requests.
    Timeline(CtEdfConfig),
}

impl QueueKind {
    /// The width of the deadline quanta within which the queue may serve requests out of
    /// deadline order (0: exact EDF).
    pub fn window(self) -> Nanos {
        match self {
            QueueKind::Tree => 0,
            QueueKind::Timeline(c) => c.delta_window.max(1),
        }
    }
}

impl fmt::Display for QueueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueKind::Tree => f.write_str("tree"),
            QueueKind::Timeline(_) => f.write_str("timeline"),
        }
    }
}

/// A worker queue name that is neither `tree` nor `timeline`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown worker queue `{0}` (tree, timeline)")]
pub struct UnknownQueueKind(pub String);

impl FromStr for QueueKind {
    type Err = UnknownQueueKind;

    /// `tree`, or `timeline` with Edge-RT's Δwindow (500 µs).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "tree" => Ok(QueueKind::Tree),
            "timeline" => Ok(QueueKind::Timeline(CtEdfConfig::default())),
            other => Err(UnknownQueueKind(other.to_owned())),
        }
    }
}

/// A worker's EDF run queue: a [`DeadlineQueue`] or a [`CtEdfQueue`], as [`QueueKind`] says.
///
/// The timeline's answers are exact *for its own order* (FIFO within a quantum, overdue
/// requests last); only [`admits`](Self::admits) is conservative there (see
/// [`CtEdfQueue::admits`]).
#[derive(Debug, Clone)]
pub enum RunQueue {
    /// Exact EDF.
    Tree(DeadlineQueue),
    /// Constant-time EDF over quantised deadlines.
    Timeline(Box<CtEdfQueue>),
}

impl RunQueue {
    /// An empty queue of this kind.
    pub fn new(kind: QueueKind) -> Self {
        match kind {
            QueueKind::Tree => RunQueue::Tree(DeadlineQueue::new()),
            QueueKind::Timeline(c) => RunQueue::Timeline(Box::new(CtEdfQueue::new(c))),
        }
    }

    /// Moves the timeline's current quantum to `now` ([`CtEdfQueue::advance`]); nothing for the
    /// tree. Policies call it before they place or pick at `now`.
    pub fn advance(&mut self, now: Nanos) {
        if let RunQueue::Timeline(q) = self {
            q.advance(now);
        }
    }

    /// Σ remaining work a newcomer with this deadline would wait behind.
    pub fn work_before(&self, deadline: Nanos) -> Nanos {
        match self {
            RunQueue::Tree(q) => q.work_before(deadline),
            RunQueue::Timeline(q) => q.work_before(deadline),
        }
    }

    /// The latest absolute deadline queued, `None` when nothing is. The timeline serves within
    /// a quantum first in first out, not by exact deadline, so for it anything queued answers
    /// `u64::MAX`: no newcomer is known to go behind all of it.
    pub fn latest_deadline(&self) -> Option<Nanos> {
        match self {
            RunQueue::Tree(q) => q.latest_deadline(),
            RunQueue::Timeline(q) => (!q.is_empty()).then_some(Nanos::MAX),
        }
    }

    /// Whether `req`, placed here with its work starting at `start` and counting `own`, finishes
    /// by its deadline.
    pub fn fits(&self, req: &Request, own: Nanos, start: Nanos) -> bool {
        match self {
            RunQueue::Tree(q) => q.fits(req, own, start),
            RunQueue::Timeline(q) => q.fits(req, own, start),
        }
    }

    /// [`fits`](Self::fits), and no queued request behind it is pushed past its deadline.
    pub fn admits(&self, req: &Request, own: Nanos, start: Nanos, rest_start: Nanos) -> bool {
        match self {
            RunQueue::Tree(q) => q.admits(req, own, start, rest_start),
            RunQueue::Timeline(q) => q.admits(req, own, start, rest_start),
        }
    }

    /// The first queued request, in the queue's order, that misses its deadline if the queue's
    /// work starts at `start`.
    pub fn first_doomed(&self, start: Nanos) -> Option<QueueKey> {
        match self {
            RunQueue::Tree(q) => q.first_doomed(start),
            RunQueue::Timeline(q) => q.first_doomed(start),
        }
    }

    /// The queued request with this key.
    pub fn get(&self, key: QueueKey) -> Option<&Request> {
        match self {
            RunQueue::Tree(q) => q.get(key),
            RunQueue::Timeline(q) => q.get(key),
        }
    }

    /// Queued requests in the order the queue serves them.
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Request> + '_> {
        match self {
            RunQueue::Tree(q) => Box::new(q.iter()),
            RunQueue::Timeline(q) => Box::new(q.iter()),
        }
    }
}

impl Default for RunQueue {
    fn default() -> Self {
        Self::new(QueueKind::Tree)
    }
}

impl EdfQueue for RunQueue {
    fn insert(&mut self, req: Request) -> bool {
        match self {
            RunQueue::Tree(q) => q.insert(req),
            RunQueue::Timeline(q) => q.insert(req),
        }
    }

    fn remove(&mut self, key: QueueKey) -> Option<Request> {
        match self {
            RunQueue::Tree(q) => q.remove(key),
            RunQueue::Timeline(q) => q.remove(key),
        }
    }

    fn peek(&self) -> Option<&Request> {
        match self {
            RunQueue::Tree(q) => q.peek(),
            RunQueue::Timeline(q) => q.peek(),
        }
    }

    fn pop(&mut self) -> Option<Request> {
        match self {
            RunQueue::Tree(q) => q.pop(),
            RunQueue::Timeline(q) => q.pop(),
        }
    }

    fn len(&self) -> usize {
        match self {
            RunQueue::Tree(q) => q.len(),
            RunQueue::Timeline(q) => q.len(),
        }
    }

    fn total_work(&self) -> Nanos {
        match self {
            RunQueue::Tree(q) => q.total_work(),
            RunQueue::Timeline(q) => q.total_work(),
        }
    }
}
