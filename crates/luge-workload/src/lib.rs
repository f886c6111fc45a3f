//! Workloads for Luge: the service-time distributions and arrival processes of the papers Luge is
//! built from, trace replay, and a seeded, reproducible generator.
//!
//! A workload is a [`WorkloadSpec`] — a value that prints as one line and reads back
//! (`spec.to_string().parse()` round-trips), e.g.
//! `lognormal,deadline=class:10x,arrivals=poisson,load=0.9,workers=2,seed=7`. Its
//! [`Generator`] yields [`Arrival`]s (instant, function, class, execution, relative deadline)
//! that become [`luge_sched::Request`]s with [`Arrival::to_request`].
//!
//! - [`ServiceDist`] / [`Preset`] — SledgeScale's Table 3 (`fixed`, `high-bimodal`,
//!   `extreme-bimodal`, `sdvbs`, `exponential`, `lognormal`), Edge-RT's `edgert-bimodal`, SFS's
//!   `azure` duration mix, and user mix files ([`Mix`]); exact means, second moments, medians and
//!   per-class information ([`ClassInfo`]).
//! - [`DeadlineRule`] — K × execution (SledgeScale's default K = 10), fixed, or per class.
//! - [`ArrivalProcess`] / [`Rate`] — Poisson at a rate or a target load, a bursty 2-state MMPP
//!   (on/off), or replay of a CSV [`Trace`].
//! - [`Rng`] — the crate's own xoshiro256** generator (why not `rand`: see its docs).
//!
//! The grammar of the spec is documented on [`WorkloadSpec`]'s module (`spec.rs`), the mix-file
//! format on [`Mix`], the trace format on [`Trace`].

mod arrivals;
mod deadline;
mod dist;
mod error;
mod generator;
mod math;
mod mix;
mod rng;
mod spec;
mod text;
mod trace;

pub use crate::arrivals::{ArrivalProcess, Rate};
pub use crate::deadline::DeadlineRule;
pub use crate::dist::{
    ClassInfo, DistSource, EDGERT_LIGHT_WORK_SHARE, LOGNORMAL_RUNTIME_TRUNCATION, Preset,
    ServiceDist,
};
pub use crate::error::WorkloadError;
pub use crate::generator::{Arrival, Generator, MAX_TIME};
pub use crate::mix::{Mix, MixClass};
pub use crate::rng::Rng;
pub use crate::spec::{MAX_RATE_PER_SECOND, MIN_RATE_PER_SECOND, WorkloadSpec};
pub use crate::trace::{Trace, TraceRow};
