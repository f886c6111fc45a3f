//! Running one request through a chain (`crate::chain`; Edge-RT §III, §IV-A): stage k's stdout
//! is stage k+1's stdin, handed over inside the node — the next stage is submitted from the
//! callback that receives the previous one's answer, on the runtime thread that produced it,
//! with no round trip through a front end.
//!
//! Every stage is a request of its own (fresh sandbox, its function's limits and tenant) whose
//! deadline is the chain's absolute deadline minus the estimated work of the stages after it
//! (`Chain::work_after`). When no time is left for a stage — or its admission finds its
//! deadline unreachable — the chain ends there: at the first stage with the refusal
//! (`DeadlineInfeasible`, `DeadlineUnreachable`, …, nothing ran), at a later one with
//! [`Failure::DeadlineMissed`]; any other refusal of a later stage (load, a tenant limit, a
//! shutdown, its input too large) with [`Failure::StageRefused`] — never as a refusal, since
//! earlier stages ran. A failing stage ends the chain with its own failure; nothing of
//! a partial chain's output is returned. The outcome lists every stage that ran
//! ([`Outcome::stages`]), the last one being the one that answered.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::chain::Chain;
use crate::outcome::{Failure, Outcome, Rejection, StageReport, Timing};
use crate::runtime::{Runtime, SubmitOptions};

type Callback = Box<dyn FnOnce(Outcome) + Send>;

impl Runtime {
    /// Submits a request to a chain: its stages run one after the other under the chain's one
    /// deadline (`options.deadline`, else the chain's), each in its own sandbox; `callback`
    /// gets the one outcome — the last stage's stdout, or the first failure — with every
    /// stage's report. `options.expected` is not used (each stage has its own estimate);
    /// `options.delivery` is set aside from the chain's deadline once, as for a function.
    pub fn submit_chain(
        self: &Arc<Self>,
        chain: &Arc<Chain>,
        payload: Vec<u8>,
        options: SubmitOptions,
        callback: impl FnOnce(Outcome) + Send + 'static,
    ) {
        let now = Instant::now();
        let received = options.received.map_or(now, |r| r.min(now));
        let relative = options.deadline.unwrap_or(chain.config.relative_deadline);
        // The front end's delivery of the chain's answer is set aside once, as for a function's
        // (`scheduled_deadline`): the stages are budgeted to end that much earlier.
        let scheduled = crate::runtime::scheduled_deadline(relative, options.delivery);
        let run = Run {
            runtime: Arc::clone(self),
            chain: Arc::clone(chain),
            received,
            // A library caller may pass any duration (`Duration::MAX`).
            deadline: luge_proto::instant_after(received, scheduled),
            trace: options.trace,
            stages: Vec::with_capacity(chain.stages.len()),
            callback: Box::new(callback),
        };
        run.stage(0, payload);
    }
}

/// One request's way through a chain.
struct Run {
    runtime: Arc<Runtime>,
    chain: Arc<Chain>,
    received: Instant,
    /// When the chain's last stage must end: its absolute deadline, less the front end's
    /// delivery set aside (`SubmitOptions::delivery`).
    deadline: Instant,
    /// The chain's trace context: stage k runs under `trace.stage(k)`.
    trace: Option<luge_proto::TraceContext>,
    stages: Vec<StageReport>,
    callback: Callback,
}

impl Run {
    /// Submits stage `k` with `payload`.
    fn stage(self, k: usize, payload: Vec<u8>) {
        let Some(function) = self.chain.stages.get(k).cloned() else {
            // Unreachable: `done` submits only existing stages.
            return self.finish(Err(Failure::Internal("a chain ran past its last stage".into())));
        };
        // The first stage counts from the chain's receipt (time in the front end counts); a
        // later one from its hand-off, so its report is its own.
        let start = if k == 0 { self.received } else { Instant::now() };
        let finish_by = self.deadline.checked_sub(self.chain.work_after(k));
        let left = finish_by.map(|t| t.saturating_duration_since(start)).unwrap_or_default();
        if left.is_zero() {
            let failure = if k == 0 {
                Failure::Rejected(Rejection::DeadlineInfeasible)
            } else {
                Failure::DeadlineMissed
            };
            let id = self.runtime.fresh_request_id();
            let waited = start.elapsed();
            let timing = Timing { queued: waited, total: waited, ..Timing::default() };
            return self.done(k, Outcome::new(id, Err(failure), timing));
        }
        // Each stage is a child span of the chain's (`TraceContext::stage`).
        let trace = self.trace.map(|t| t.stage(k));
        let options = SubmitOptions {
            deadline: Some(left),
            expected: None,
            received: Some(start),
            trace,
            group: None,
            delivery: Duration::ZERO,
        };
        let runtime = Arc::clone(&self.runtime);
        runtime.submit_to(&function, payload, options, move |outcome| self.done(k, outcome));
    }

    /// Stage `k` answered `outcome`: on to the next stage, or the chain's answer.
    fn done(mut self, k: usize, outcome: Outcome) {
        let Outcome { request_id, result, timing, .. } = outcome;
        if result.is_ok() {
            self.chain.observe(k, timing.executed);
        }
        let name = self.chain.config.stages.get(k).cloned().unwrap_or_default();
        self.stages.push(StageReport { name, request_id, timing });
        match result {
            Ok(stdout) if k + 1 < self.chain.stages.len() => self.stage(k + 1, stdout),
            // A later stage whose deadline admission finds out of reach: the chain missed it.
            Err(Failure::Rejected(
                Rejection::DeadlineInfeasible | Rejection::DeadlineUnreachable | Rejection::Shed,
            )) if k > 0 => self.finish(Err(Failure::DeadlineMissed)),
            // Any other refusal of a later stage: earlier stages ran, so the chain was not refused
            // (a retry must not run them again, and a cache must keep the answer).
            Err(refusal @ (Failure::Rejected(_) | Failure::BadRequest(_))) if k > 0 => {
                self.finish(Err(Failure::StageRefused(refusal.to_string())))
            }
            result => self.finish(result),
        }
    }

    /// Answers the chain: `result`, under the first stage's request id, with the whole chain's
    /// timing — queued and instantiation of the first stage (so readiness is the chain's time
    /// to its first guest instruction), execution and preemptions summed over the stages, total
    /// from the receipt.
    fn finish(self, result: Result<Vec<u8>, Failure>) {
        let first = self.stages.first().map(|s| (s.request_id, s.timing));
        let (request_id, first) = match first {
            Some((id, timing)) => (id, timing),
            None => (self.runtime.fresh_request_id(), Timing::default()),
        };
        let sum = |f: fn(&Timing) -> Duration| self.stages.iter().map(|s| f(&s.timing)).sum();
        let timing = Timing {
            queued: first.queued,
            instantiation: first.instantiation,
            start_up: first.start_up,
            executed: sum(|t| t.executed),
            total: self.received.elapsed(),
            preemptions: self.stages.iter().map(|s| s.timing.preemptions).sum(),
        };
        let outcome = Outcome { request_id, result, timing, stages: self.stages };
        (self.callback)(outcome);
    }
}
