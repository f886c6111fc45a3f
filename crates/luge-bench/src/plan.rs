//! From a workload to the requests of a run.
//!
//! A [`Plan`] is a [`WorkloadSpec`] plus a [`Mapping`] of its arrivals onto real functions, plus
//! the run's bounds. It is lazy — [`Plan::requests`] generates each [`Planned`] request on demand
//! — so a long run costs no memory up front, and it is deterministic: the same spec, mapping,
//! calibration and bounds give the same requests in the same order.
//!
//! - [`Mapping::Spin`]: every arrival calls `spin` with the calibrated iteration count for its
//!   execution time (the synthetic workloads of SledgeScale).
//! - [`Mapping::Fixed`]: every arrival calls one function with one payload (no-op and echo
//!   scenarios); the workload still gives the arrival times, classes and deadlines.
//! - [`Mapping::PerClass`]: class *i* of the workload calls the *i*-th function with its payload
//!   (e.g. `sdvbs` onto the real `sift`, `segment` and `classify` functions).
//! - [`Mapping::Spread`]: request *i* calls function *i* mod *n* of a list with one payload
//!   (thousands of distinct functions at one rate, `luge bench density`).
//!
//! The untruncated log-normal has a p99.99 of seconds, which would dominate a short run on a
//! small machine; on the real runtime the plan applies the documented truncation
//! [`LOGNORMAL_RUNTIME_TRUNCATION`] scaled with the law (X | X ≤ 1 s × `scale`: the same
//! quantile, ≈ p99.9, at every scale) when the spec has none, and the report's workload string
//! shows it. A `load=` rate is then relative to the truncated mean, so the offered utilisation
//! is what it says.
//!
//! Deadlines are the workload's (default 10 × execution, `deadline=class:10x`), sent to the
//! server in µs (rounded up) and checked by the client from the intended send time.

use luge_workload::{
    Arrival, DistSource, Generator, LOGNORMAL_RUNTIME_TRUNCATION, Preset, WorkloadSpec,
};

use crate::calibrate::Calibration;
use crate::error::BenchError;
use crate::target::FunctionRef;

/// How the workload's arrivals become calls of real functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// Every arrival calls this `spin` function with the calibrated iteration count.
    Spin(FunctionRef),
    /// Every arrival calls this function with this payload.
    Fixed {
        /// The function.
        function: FunctionRef,
        /// Its stdin.
        payload: Vec<u8>,
    },
    /// Class tag *i* calls the *i*-th function with its payload.
    PerClass(Vec<(FunctionRef, Vec<u8>)>),
    /// Request *i* (in plan order) calls function *i* mod *n* with this payload.
    Spread {
        /// The functions, called in turn (at least one).
        functions: Vec<FunctionRef>,
        /// The stdin of every call.
        payload: Vec<u8>,
    },
}

impl Mapping {
    /// True when the plan needs a [`Calibration`].
    pub fn needs_calibration(&self) -> bool {
        matches!(self, Mapping::Spin(_))
    }

    /// A one-line description for the report.
    pub fn describe(&self, target: &crate::Target) -> String {
        match self {
            Mapping::Spin(f) => format!("spin {}", f.label(target)),
            Mapping::Fixed { function, payload } => {
                format!("fixed {} ({} B payload)", function.label(target), payload.len())
            }
            Mapping::PerClass(fs) => {
                let names: Vec<String> = fs.iter().map(|(f, _)| f.label(target)).collect();
                format!("per class {}", names.join(" "))
            }
            Mapping::Spread { functions, payload } => match (functions.first(), functions.last()) {
                (Some(first), Some(last)) => format!(
                    "spread over {} functions {}…{} ({} B payload)",
                    functions.len(),
                    first.label(target),
                    last.label(target),
                    payload.len()
                ),
                _ => "spread over no functions".to_owned(),
            },
        }
    }
}

/// The payload of a planned request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannedPayload {
    /// `spin`'s iteration count, sent as ASCII decimal.
    Iterations(u64),
    /// Index of a fixed payload of the plan.
    Fixed(usize),
}

/// One request of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Position in the plan (0-based).
    pub seq: u64,
    /// Intended send time, ns from the start of the run (open loop; the closed loop ignores it).
    pub offset_ns: u64,
    /// Index of the function in [`Plan::functions`].
    pub function: usize,
    /// Class tag from the workload.
    pub class: u16,
    /// What to send.
    pub payload: PlannedPayload,
    /// Relative deadline (ns).
    pub deadline_ns: u64,
    /// The workload's execution time (ns).
    pub execution_ns: u64,
}

impl Planned {
    /// The relative deadline in whole µs for the wire (rounded up, at least 1).
    pub fn deadline_us(&self) -> u32 {
        u32::try_from(self.deadline_ns.div_ceil(1_000).max(1)).unwrap_or(u32::MAX)
    }

    /// What is left of the relative deadline after the client itself held the request
    /// `waited_ns` past its intended send time, in whole µs for the wire (rounded up, at least
    /// 1: a request whose deadline the client spent is still sent, and the node refuses it).
    /// A client tells the node the time it has left, as `luge-client` does.
    pub fn deadline_left_us(&self, waited_ns: u64) -> u32 {
        let left = self.deadline_ns.saturating_sub(waited_ns);
        u32::try_from(left.div_ceil(1_000).max(1)).unwrap_or(u32::MAX)
    }

    /// The expected execution in whole µs for the wire (rounded up, at least 1).
    pub fn expected_us(&self) -> u32 {
        u32::try_from(self.execution_ns.div_ceil(1_000).max(1)).unwrap_or(u32::MAX)
    }
}

/// A workload mapped onto functions, within bounds.
#[derive(Debug, Clone)]
pub struct Plan {
    workload: WorkloadSpec,
    truncated: bool,
    functions: Vec<FunctionRef>,
    payloads: Vec<Vec<u8>>,
    calibration: Option<Calibration>,
    per_class: bool,
    spread: bool,
    horizon_ns: Option<u64>,
    max_requests: u64,
}

impl Plan {
    /// A plan of at most `max_requests` requests; with `horizon_ns`, only arrivals before it
    /// (open loop). `calibration` is required by [`Mapping::Spin`].
    pub fn new(
        workload: &WorkloadSpec,
        mapping: &Mapping,
        calibration: Option<&Calibration>,
        horizon_ns: Option<u64>,
        max_requests: u64,
    ) -> Result<Self, BenchError> {
        let mut workload = workload.clone();
        let truncated = workload.dist.source() == &DistSource::Preset(Preset::LogNormal)
            && workload.dist.truncation().is_none();
        if truncated {
            // The cap is of the unscaled law: scaled with it, it cuts at the same quantile.
            let cap =
                (LOGNORMAL_RUNTIME_TRUNCATION as f64 * workload.dist.scale()).round().max(1.0);
            workload.dist = workload.dist.with_truncation(Some(cap as u64))?;
        }
        let mut spread = false;
        let (functions, payloads, per_class) = match mapping {
            Mapping::Spin(f) => (vec![f.clone()], Vec::new(), false),
            Mapping::Fixed { function, payload } => {
                (vec![function.clone()], vec![payload.clone()], false)
            }
            Mapping::Spread { functions, payload } => {
                if functions.is_empty() {
                    return Err(BenchError::Config("a spread mapping needs a function".into()));
                }
                spread = true;
                (functions.clone(), vec![payload.clone()], false)
            }
            Mapping::PerClass(fs) => {
                let classes = workload.dist.classes().len();
                if fs.len() < classes {
                    return Err(BenchError::Config(format!(
                        "the workload has {classes} classes but only {} functions are mapped",
                        fs.len()
                    )));
                }
                let (f, p) = fs.iter().cloned().unzip();
                (f, p, true)
            }
        };
        let calibration = match (mapping.needs_calibration(), calibration) {
            (true, None) => {
                return Err(BenchError::Config("the spin mapping needs a calibration".into()));
            }
            (true, Some(c)) => Some(c.clone()),
            (false, _) => None,
        };
        Ok(Self {
            workload,
            truncated,
            functions,
            payloads,
            calibration,
            per_class,
            spread,
            horizon_ns,
            max_requests,
        })
    }

    /// The workload as run (with the runtime truncation if one was applied).
    pub fn workload(&self) -> &WorkloadSpec {
        &self.workload
    }

    /// True when [`LOGNORMAL_RUNTIME_TRUNCATION`] (× the law's scale) was applied.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// The functions requests refer to by index.
    pub fn functions(&self) -> &[FunctionRef] {
        &self.functions
    }

    /// The calibration used for `spin`.
    pub fn calibration(&self) -> Option<&Calibration> {
        self.calibration.as_ref()
    }

    /// The requests, lazily, in arrival order.
    pub fn requests(&self) -> Requests<'_> {
        Requests { plan: self, generator: self.workload.generator(), seq: 0 }
    }

    /// Writes a request's payload into `buf` (cleared first).
    pub fn payload_into(&self, p: &Planned, buf: &mut Vec<u8>) {
        buf.clear();
        match p.payload {
            PlannedPayload::Iterations(k) => {
                use std::io::Write;
                // Writing into a Vec cannot fail.
                let _ = write!(buf, "{k}");
            }
            PlannedPayload::Fixed(i) => {
                if let Some(bytes) = self.payloads.get(i) {
                    buf.extend_from_slice(bytes);
                }
            }
        }
    }

    fn plan(&self, seq: u64, a: &Arrival) -> Planned {
        let (function, payload) = match &self.calibration {
            Some(c) => (0, PlannedPayload::Iterations(c.iterations_for(a.execution))),
            None if self.per_class => {
                let i = usize::from(a.class).min(self.functions.len().saturating_sub(1));
                (i, PlannedPayload::Fixed(i))
            }
            None if self.spread => {
                let n = self.functions.len().max(1) as u64;
                (usize::try_from(seq % n).unwrap_or(0), PlannedPayload::Fixed(0))
            }
            None => (0, PlannedPayload::Fixed(0)),
        };
        Planned {
            seq,
            offset_ns: a.at,
            function,
            class: a.class,
            payload,
            deadline_ns: a.relative_deadline,
            execution_ns: a.execution,
        }
    }
}

/// Iterator over a plan's requests (see [`Plan::requests`]).
#[derive(Debug, Clone)]
pub struct Requests<'a> {
    plan: &'a Plan,
    generator: Generator,
    seq: u64,
}

impl Iterator for Requests<'_> {
    type Item = Planned;

    fn next(&mut self) -> Option<Planned> {
        if self.seq >= self.plan.max_requests {
            return None;
        }
        let a = self.generator.next()?;
        if self.plan.horizon_ns.is_some_and(|h| a.at >= h) {
            self.seq = self.plan.max_requests;
            return None;
        }
        let p = self.plan.plan(self.seq, &a);
        self.seq += 1;
        Some(p)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A planned request with this deadline and execution (ns).
    fn planned(deadline_ns: u64, execution_ns: u64) -> Planned {
        Planned {
            seq: 0,
            offset_ns: 0,
            function: 0,
            class: 0,
            payload: PlannedPayload::Fixed(0),
            deadline_ns,
            execution_ns,
        }
    }

    #[test]
    fn the_deadline_left_is_what_the_client_did_not_spend() {
        let p = planned(1_000_000, 10_000);
        assert_eq!(p.deadline_left_us(0), 1_000);
        assert_eq!(p.deadline_left_us(300_000), 700);
        assert_eq!(p.deadline_left_us(300_001), 700, "rounded up");
        assert_eq!(p.deadline_left_us(999_999), 1);
        assert_eq!(p.deadline_left_us(5_000_000), 1, "spent: still sent, and refused there");
    }

    fn spec(s: &str) -> WorkloadSpec {
        s.parse().unwrap()
    }

    #[test]
    fn spin_plan_uses_the_calibration_and_bounds() {
        let cal = Calibration::given(2.0, 1_000.0).unwrap();
        let spin = Mapping::Spin(FunctionRef::new(4, "/spin"));
        let w = spec("high-bimodal,rate=10000,seed=3");
        let plan = Plan::new(&w, &spin, Some(&cal), Some(100_000_000), 1_000_000).unwrap();
        let reqs: Vec<Planned> = plan.requests().collect();
        // ~1000 arrivals in 100 ms at 10k/s, all before the horizon.
        assert!((900..1100).contains(&reqs.len()), "{}", reqs.len());
        assert!(reqs.iter().all(|r| r.offset_ns < 100_000_000));
        assert!(reqs.iter().enumerate().all(|(i, r)| r.seq == i as u64));
        for r in &reqs {
            let k = if r.execution_ns == 26_000 { 12_500 } else { 1_034_500 };
            assert_eq!(r.payload, PlannedPayload::Iterations(k));
            assert_eq!(r.deadline_ns, 10 * r.execution_ns);
        }
        let mut buf = Vec::new();
        plan.payload_into(&reqs[0], &mut buf);
        assert!(buf == b"12500" || buf == b"1034500");
        assert_eq!(plan.requests().count(), reqs.len(), "deterministic");
        let capped = Plan::new(&w, &spin, Some(&cal), Some(100_000_000), 10).unwrap();
        assert_eq!(capped.requests().count(), 10);
        assert!(Plan::new(&w, &spin, None, None, 10).is_err(), "spin needs a calibration");
    }

    #[test]
    fn lognormal_is_truncated_on_the_runtime() {
        let fixed = Mapping::Fixed { function: FunctionRef::new(1, "/noop"), payload: vec![] };
        let plan = Plan::new(&spec("lognormal,seed=1"), &fixed, None, None, 200_000).unwrap();
        assert!(plan.truncated());
        assert!(plan.workload().to_string().contains("truncate=1s"));
        assert!(plan.requests().all(|r| r.execution_ns <= LOGNORMAL_RUNTIME_TRUNCATION));
        // Premise: the untruncated law does exceed 1 s in as many draws.
        assert!(
            spec("lognormal,seed=1").generate(200_000).iter().any(|a| a.execution > 1_000_000_000)
        );
        let given = Plan::new(&spec("lognormal,truncate=5ms"), &fixed, None, None, 10).unwrap();
        assert!(!given.truncated());
        // A scaled law is cut at the same quantile: 1 s × scale.
        for (scale, cap) in [(10.0, 10_000_000_000), (0.001, 1_000_000)] {
            let w = spec(&format!("lognormal,scale={scale},seed=1"));
            let plan = Plan::new(&w, &fixed, None, None, 10).unwrap();
            assert!(plan.truncated());
            assert_eq!(plan.workload().dist.truncation(), Some(cap), "scale {scale}");
            let unscaled = plan.workload().dist.quantile(0.999) / scale;
            let at_scale_1 = Plan::new(&spec("lognormal"), &fixed, None, None, 10)
                .unwrap()
                .workload()
                .dist
                .quantile(0.999);
            assert!((unscaled / at_scale_1 - 1.0).abs() < 1e-9, "scale {scale}");
        }
    }

    #[test]
    fn per_class_mapping() {
        let m = Mapping::PerClass(vec![
            (FunctionRef::new(10, "/sift"), b"a".to_vec()),
            (FunctionRef::new(11, "/segment"), b"b".to_vec()),
            (FunctionRef::new(12, "/classify"), b"c".to_vec()),
        ]);
        let plan = Plan::new(&spec("sdvbs,seed=2"), &m, None, None, 2_000).unwrap();
        let mut buf = Vec::new();
        let mut seen = [false; 3];
        for r in plan.requests() {
            assert_eq!(r.function, usize::from(r.class));
            plan.payload_into(&r, &mut buf);
            assert_eq!(buf, [b"abc"[r.function]]);
            seen[r.function] = true;
        }
        assert!(seen.iter().all(|&s| s), "premise: every class occurs");
        let short = Mapping::PerClass(vec![(FunctionRef::new(10, "/sift"), vec![])]);
        assert!(Plan::new(&spec("sdvbs"), &short, None, None, 10).is_err());
    }

    #[test]
    fn spread_mapping_calls_every_function_in_turn() {
        let fs: Vec<FunctionRef> = (0..7).map(|i| FunctionRef::new(100 + i, "/x")).collect();
        let m = Mapping::Spread { functions: fs, payload: b"p".to_vec() };
        let plan = Plan::new(&spec("fixed,rate=1000"), &m, None, None, 70).unwrap();
        let mut counts = [0u32; 7];
        let mut buf = Vec::new();
        for r in plan.requests() {
            assert_eq!(r.function, (r.seq % 7) as usize);
            counts[r.function] += 1;
            plan.payload_into(&r, &mut buf);
            assert_eq!(buf, b"p");
        }
        assert_eq!(counts, [10; 7]);
        let empty = Mapping::Spread { functions: vec![], payload: vec![] };
        assert!(Plan::new(&spec("fixed"), &empty, None, None, 1).is_err());
    }

    #[test]
    fn wire_units_round_up() {
        let p = planned(100_001, 10);
        assert_eq!((p.deadline_us(), p.expected_us()), (101, 1));
    }
}
