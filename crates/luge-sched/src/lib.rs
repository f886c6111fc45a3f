//! The pure scheduling core of Luge.
//!
//! Everything here is deterministic and free of I/O, threads and clocks: time is a [`Nanos`]
//! value passed in by the caller. The runtime's dispatcher threads and the simulator's event loop
//! drive the same code.
//!
//! - [`Request`] — the request model (deadlines, expected/executed/remaining work, slack).
//! - [`DeadlineQueue`] — exact EDF queue with O(log n) `work_before` (SledgeScale §3.3).
//! - [`CtEdfQueue`] — constant-time EDF over a quantised timeline (Edge-RT §IV-C, §V-D).
//! - [`RunQueue`] — an early-binding worker's queue, either of the two ([`QueueKind`]).
//! - [`Estimator`] — per-function percentile of recent executions (SledgeScale §4).
//! - [`Policy`] — sans-I/O dispatch/scheduling state machines; see the [`policy`
//!   contract](Policy) and [`PolicyKind`] for the list.
//! - [`ContractChecker`] — that contract checked on every call, by any driver; [`Checked`] wraps
//!   a policy in it.
//! - [`RunList`] — a sorted run list that merges a batch in one splice per insertion point
//!   (HORSE §4.1, P²SM); [`Affine`] — `n` load updates `x ← a·x + b` coalesced into one (HORSE
//!   §4.2).
//! - [`UllLane`] — a run queue for ultra-low-latency requests ahead of any policy (HORSE §4.1.3).

mod backlog;
mod coalesce;
mod contract;
mod ct_edf;
mod estimator;
mod p2sm;
mod policy;
mod queue;
mod request;
mod run_queue;
mod slot_tree;
mod sum_tree;
mod ull;

pub use crate::backlog::Backlog;
pub use crate::coalesce::Affine;
pub use crate::contract::{Checked, ContractChecker, ContractViolation};
pub use crate::ct_edf::{CtEdfConfig, CtEdfQueue};
pub use crate::estimator::{Estimator, EstimatorConfig};
pub use crate::p2sm::{MergePlan, RunList, StalePlan};
pub use crate::policy::{
    Action, Admission, Darc, EarlyBinding, EarlyChoice, Event, Fifo, LocalOrder, Policy,
    PolicyConfig, PolicyKind, PolicyStats, RejectReason, Sfs, Sledge, SledgeScale, Srpt,
    TimeSliced, UnknownPolicy, WaitTime, WorkerId,
};
pub use crate::queue::{DeadlineQueue, EdfQueue};
pub use crate::request::{
    FunctionId, MIN_REMAINING, Nanos, Overrun, QueueKey, Request, RequestId, UnknownOverrun,
};
pub use crate::run_queue::{QueueKind, RunQueue, UnknownQueueKind};
pub use crate::sum_tree::SumTree;
pub use crate::ull::{UllConfig, UllLane, UllStats};
