//! Luge's load generator: drives a running node over UDP-RPC or HTTP with the published
//! workloads and reports tail latency, slowdown, deadline-miss rate, RTE, throughput and goodput
//! (for researchers comparing policies; issue #6). `luge bench` calls [`run`].
//!
//! # Shape of a run
//!
//! 1. **Calibrate** ([`Calibration`]): SledgeScale's synthetic functions are a hash loop whose
//!    iteration count sets the execution time; Luge's `spin` is calibrated on the target at the
//!    start of the run (a line fitted through two points, checked on a third) and the
//!    calibration is printed and reported.
//! 2. **Plan** ([`Plan`]): the [`WorkloadSpec`](luge_workload::WorkloadSpec) generates arrivals
//!    (instant, class, execution, deadline); a [`Mapping`] turns each into a call — `spin` with
//!    the calibrated iterations, a fixed payload (no-op/echo), or one real function per class.
//!    The log-normal gets its documented runtime truncation.
//! 3. **Drive**: an open loop sends each request at its intended time (the workload's arrival
//!    process: Poisson, on/off, MMPP or a trace), with a bounded window of requests in flight;
//!    a closed loop keeps N requests in flight. Latency always runs from the *intended* send
//!    time, so neither a stalled server nor a full window nor a late client can hide queueing
//!    (no coordinated omission). UDP-RPC uses one connected socket and a receiver thread;
//!    HTTP keep-alive connections the pacer writes on and a receiver thread reads over epoll;
//!    both share the pacer.
//! 4. **Report** ([`Report`]): HDR histograms with honest accounting — an error, a refusal, a
//!    timeout or a request the client failed to send is a deadline miss and an infinite latency
//!    in the percentiles — as a terminal table, JSON and a CSV of raw samples.
//!
//! # Safety
//!
//! A run sends only to the one address of its [`Target`] (IP literals, no DNS; loopback by
//! default), and is bounded in time and in count ([`MAX_DURATION`], [`MAX_REQUESTS`]).
//!
//! # Modules
//!
//! `target` (where), `plan` (what), `calibrate` (spin), `drive` (when: the pacer and the
//! bounds), `ledger` (in flight: window, timeouts), `udp` and `http` (the wire), `sample` and
//! `summary` (measurements and metrics), `report` (output), `run` (the entry point), and
//! [`scenario`]: the named benchmarks of `luge bench` (compare, noop, policies, density,
//! sim-vs-real, overload, slow-clients), which start Luge and the baselines in-process and write
//! dated results; `slow` the slow clients of `slow-clients`, run in a child process; `baseline`
//! holds those baselines ([`UdpEchoServer`], [`BareHttpServer`],
//! [`ProcessServer`]), built on Luge's own socket code (`luge_server::net`).

mod baseline;
mod calibrate;
mod cpu_busy;
mod drive;
mod error;
mod http;
mod ledger;
mod plan;
mod report;
mod run;
mod sample;
pub mod scenario;
mod slow;
mod summary;
mod target;
mod udp;

pub use crate::baseline::{
    BareHttpConfig, BareHttpServer, BaselineError, BaselineStats, ProcessConfig, ProcessServer,
    UdpEchoConfig, UdpEchoServer, native_program,
};
pub use crate::calibrate::{Calibration, CalibrationCheck, CalibrationOptions, CalibrationPoint};
pub use crate::cpu_busy::{CpuBusy, GeneratorCpu, SATURATED};
pub use crate::error::BenchError;
pub use crate::plan::{Mapping, Plan, Planned, PlannedPayload, Requests};
pub use crate::report::Report;
pub use crate::run::{
    CalibrationMode, MAX_DURATION, MAX_KEPT_SAMPLES, MAX_REQUESTS, MAX_TIMEOUT, MAX_WINDOW, Mode,
    RunConfig, calibrate, run,
};
pub use crate::sample::{ErrorKind, Sample, SampleObserver};
pub use crate::slow::hold_slow_connections;
pub use crate::summary::{ClassSummary, Percentiles, RteSummary, Summary};
pub use crate::target::{FunctionRef, Target};
