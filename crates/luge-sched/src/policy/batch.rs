//! Deadline-limited batching (Edge-RT §IV-A): per worker, the requests committed to run back to
//! back behind its current run ([`Action::Follow`](super::Action::Follow)), and the rule that
//! admits one more — its deadline no earlier than the batch's last one and at most Δbatch after
//! the batch's earliest, so that a batched request is served with an effective deadline in
//! `[d − Δbatch, d]`.

use std::collections::VecDeque;

use super::{PolicyConfig, WorkerId};
use crate::request::{Nanos, Request};

/// The followers of every worker of a group.
#[derive(Debug, Clone)]
pub(crate) struct Batches {
    /// Δbatch; 0 = batching off.
    window: Nanos,
    /// The most followers one worker holds.
    max: usize,
    followers: Vec<VecDeque<Request>>,
    /// Σ followers over the workers.
    len: usize,
}

impl Batches {
    pub fn new(config: &PolicyConfig) -> Self {
        Self {
            window: config.batch_window,
            max: config.batch_max,
            followers: vec![VecDeque::new(); config.workers.max(1)],
            len: 0,
        }
    }

    /// Whether `req` may join the batch on `w`, whose run is due at `first` (the batch's
    /// earliest deadline).
    pub fn admits(&self, w: WorkerId, first: Nanos, req: &Request) -> bool {
        let f = &self.followers[w];
        let last = f.back().map_or(first, |r| r.absolute_deadline);
        self.window > 0
            && f.len() < self.max
            && req.absolute_deadline >= last
            && req.absolute_deadline <= first.saturating_add(self.window)
    }

    pub fn push(&mut self, w: WorkerId, req: Request) {
        self.followers[w].push_back(req);
        self.len += 1;
    }

    /// The next follower of `w`, which becomes its run.
    pub fn pop(&mut self, w: WorkerId) -> Option<Request> {
        let next = self.followers[w].pop_front();
        self.len -= usize::from(next.is_some());
        next
    }

    /// Every follower of `w`, taken back (its run was preempted: the driver discarded them).
    pub fn take(&mut self, w: WorkerId) -> VecDeque<Request> {
        let taken = std::mem::take(&mut self.followers[w]);
        self.len -= taken.len();
        taken
    }

    /// `w`'s followers, in the order they run.
    pub fn iter(&self, w: WorkerId) -> impl Iterator<Item = &Request> {
        self.followers[w].iter()
    }

    /// Σ remaining work of `w`'s followers.
    pub fn work(&self, w: WorkerId) -> Nanos {
        self.followers[w].iter().fold(0, |sum, r| sum.saturating_add(r.remaining()))
    }

    /// Followers over all workers.
    pub fn len(&self) -> usize {
        self.len
    }
}
