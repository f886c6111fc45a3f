//! The crate's error type: what stops a run before or while it starts. Failures of individual
//! requests are not errors of the run; they are [`ErrorKind`](crate::ErrorKind)s in the report.

use std::io;

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The configuration is inconsistent or out of the safety bounds.
    #[error("bad benchmark configuration: {0}")]
    Config(String),
    /// A target string did not parse.
    #[error("bad target `{target}`: {reason}")]
    Target {
        /// The text given.
        target: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The workload could not be adapted to the target (e.g. a truncation was refused).
    #[error("workload: {0}")]
    Workload(#[from] luge_workload::WorkloadError),
    /// Calibration of `spin` failed (no answer, an error status, or no execution time reported).
    #[error("calibration of spin failed: {0}")]
    Calibration(String),
    /// A scenario could not start a server, register a function or write its results.
    #[error("{0}")]
    Scenario(String),
    /// A socket or runtime could not be set up.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        source: io::Error,
    },
}

impl BenchError {
    pub(crate) fn io(what: impl Into<String>, source: io::Error) -> Self {
        BenchError::Io { what: what.into(), source }
    }
}
