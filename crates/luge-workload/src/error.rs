//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong while reading a workload spec, a mix file or a trace.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The distribution name is not one of [`Preset::NAMES`](crate::Preset::NAMES) nor
    /// `file:PATH`.
    #[error(
        "unknown distribution `{0}`; expected one of fixed, high-bimodal, extreme-bimodal, sdvbs, \
         exponential, lognormal, edgert-bimodal, azure or file:PATH"
    )]
    UnknownDistribution(String),
    /// The arrival process name is not `poisson`, `onoff`, `mmpp` or `trace:PATH`.
    #[error("unknown arrival process `{0}`; expected poisson, onoff, mmpp or trace:PATH")]
    UnknownArrivals(String),
    /// A spec item that is not `key=value`, or a key the spec does not know.
    #[error(
        "unknown spec item `{0}`; expected one of scale, truncate, deadline, arrivals, rate, load, workers, on, off, low, seed (as key=value)"
    )]
    UnknownKey(String),
    /// The same key appears twice in a spec.
    #[error("duplicate spec key `{0}`")]
    DuplicateKey(String),
    /// A key's value does not parse or is out of range.
    #[error("bad value for `{key}`: {message}")]
    BadValue {
        /// The spec key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
    /// Keys that make no sense together (e.g. `rate` and `load`, or `on` with `poisson`).
    #[error("inconsistent workload spec: {0}")]
    Inconsistent(String),
    /// A mix file or a trace could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A line of a mix file or trace is malformed (1-based line number).
    #[error("{path}:{line}: {message}")]
    BadLine {
        /// The file (or a label for in-memory text).
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with the line.
        message: String,
    },
    /// A whole file is unusable (empty mix, trace without header, …).
    #[error("{path}: {message}")]
    BadFile {
        /// The file (or a label for in-memory text).
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
}

impl WorkloadError {
    pub(crate) fn bad_value(key: &str, message: impl Into<String>) -> Self {
        Self::BadValue { key: key.to_owned(), message: message.into() }
    }
}
