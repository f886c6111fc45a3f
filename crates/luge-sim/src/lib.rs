//! A deterministic discrete-event simulator of a Luge node: N workers in G dispatcher groups,
//! each group running an unmodified `luge-sched` policy, under an explicit overhead model.
//!
//! [`simulate`] turns a list of [`Job`]s into per-request [`Record`]s; [`Report::from_run`]
//! turns those into the metrics `luge sim` prints.

mod engine;
mod overheads;
mod record;
mod report;
mod sweep;

pub use crate::engine::{
    EstimatorMode, Job, MAX_STAGES, SimConfig, SimError, SimOutput, Spread, simulate,
};
pub use crate::overheads::{Overheads, OverheadsError};
pub use crate::record::{ClassReport, Outcome, Record, Report, Summary};
pub use crate::report::experiments::{
    Experiment, ExperimentError, ExperimentOptions, ExperimentOutput, JobShape, UnknownExperiment,
    jobs_of, run_experiment, run_point,
};
pub use crate::report::plot::{Chart, Series, svg};
pub use crate::sweep::{max_sustainable, sweep};
