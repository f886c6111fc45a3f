//! Chains of functions with one deadline (Edge-RT §III, §IV-A): a request to a chain gets one
//! absolute deadline on arrival, and each stage — its own fresh sandbox, its stdin the previous
//! stage's stdout — runs under that deadline. What is here: the chain as registered
//! ([`ChainConfig`], [`Chain`]) and each stage's execution estimate; `chain_run.rs` drives a
//! request through the stages.
//!
//! # The stages' deadlines
//! Edge-RT's stages inherit the message's deadline unchanged. Luge gives stage k that deadline
//! minus the estimated work of the stages after it (`Chain::work_after`): the latest time
//! stage k may finish and still leave the rest room — the classic deadline modification for
//! precedence constraints under EDF. The last stage inherits the chain's deadline exactly;
//! earlier stages are ordered by when they must finish, and admission, placement and shedding,
//! which judge a request by its deadline, see the chain's remaining work without any change to
//! the scheduler: a chain whose remaining stages cannot fit is refused at its first stage (or
//! answered `DeadlineMissed` at a later one), not run into certain lateness.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use luge_proto::nanos;
use luge_sched::FunctionId;

use crate::registry::Function;

/// The most stages a chain may have.
pub const MAX_STAGES: usize = 16;

/// A chain as declared (manifest `[[chain]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainConfig {
    /// Its name (and default route `/<name>`); shares the functions' namespace.
    pub name: String,
    /// The functions it runs, in order (1 to [`MAX_STAGES`]).
    pub stages: Vec<String>,
    /// The chain's relative deadline, from the request's receipt to the last stage's answer.
    pub relative_deadline: Duration,
}

/// A registered chain: its stages resolved to functions.
#[derive(Debug)]
pub struct Chain {
    /// Its id (from the functions' id space: a UDP-RPC request names it like a function).
    pub id: FunctionId,
    /// As declared.
    pub config: ChainConfig,
    /// The stages' functions, held for the chain's life.
    pub stages: Vec<Arc<Function>>,
    /// Per stage: a moving average of its measured execution (ns; 0 = none yet).
    measured: Vec<AtomicU64>,
}

impl Chain {
    pub(crate) fn new(id: FunctionId, config: ChainConfig, stages: Vec<Arc<Function>>) -> Self {
        let measured = stages.iter().map(|_| AtomicU64::new(0)).collect();
        Self { id, config, stages, measured }
    }

    /// Stage `k`'s execution estimate: its function's `expected_execution` when the manifest
    /// gives one, else the moving average of its runs in this chain (0 before the first).
    pub fn estimate(&self, k: usize) -> Duration {
        let declared = self.stages.get(k).and_then(|f| f.config.expected_execution);
        declared.unwrap_or_else(|| {
            Duration::from_nanos(self.measured.get(k).map_or(0, |m| m.load(Ordering::Relaxed)))
        })
    }

    /// The estimated work of the stages after stage `k`: what stage `k`'s deadline leaves room
    /// for.
    pub fn work_after(&self, k: usize) -> Duration {
        (k + 1..self.stages.len())
            .map(|j| self.estimate(j))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// Learns stage `k`'s execution from one run (moving average, weight 1/8).
    pub(crate) fn observe(&self, k: usize, executed: Duration) {
        let Some(m) = self.measured.get(k) else { return };
        let x = nanos(executed);
        let old = m.load(Ordering::Relaxed);
        let new = if old == 0 { x } else { old - old / 8 + x / 8 };
        // A lost update under a race only delays the average by one sample.
        m.store(new.max(1), Ordering::Relaxed);
    }
}

/// The registered chains, by name and by id.
#[derive(Debug, Default)]
pub(crate) struct Chains {
    pub by_name: std::collections::HashMap<String, Arc<Chain>>,
    pub by_id: std::collections::HashMap<u32, Arc<Chain>>,
}

/// Checks a declaration before its stages are resolved.
pub(crate) fn check(config: &ChainConfig) -> Result<(), String> {
    if config.stages.is_empty() {
        return Err("a chain needs at least one stage".into());
    }
    if config.stages.len() > MAX_STAGES {
        return Err(format!(
            "{} stages is more than the {MAX_STAGES} a chain may have",
            config.stages.len()
        ));
    }
    if config.relative_deadline.is_zero() {
        return Err("a chain's deadline must be above zero".into());
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(stages: usize) -> ChainConfig {
        ChainConfig {
            name: "c".into(),
            stages: (0..stages).map(|i| format!("f{i}")).collect(),
            relative_deadline: Duration::from_millis(10),
        }
    }

    #[test]
    fn a_declaration_is_checked() {
        assert!(check(&config(1)).is_ok());
        assert!(check(&config(MAX_STAGES)).is_ok());
        assert!(check(&config(0)).unwrap_err().contains("at least one"));
        assert!(check(&config(MAX_STAGES + 1)).unwrap_err().contains("more than"));
        let zero = ChainConfig { relative_deadline: Duration::ZERO, ..config(2) };
        assert!(check(&zero).unwrap_err().contains("above zero"));
    }
}
