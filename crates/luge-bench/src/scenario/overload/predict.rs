//! What the simulator predicts for each point of `luge bench overload`: the point's own
//! arrivals through `luge-sim`, with the node's policy and admission deciding, so that the
//! runtime's goodput curve can be set beside the simulator's.
//!
//! The model: one simulated worker under the policy and admission settings the node was started
//! with ([`NodeSpec::policy_config`]), the clients' estimates trusted (the oracle: the load
//! generator sends each request's expected execution, as the node is told), the uLL lane as the
//! node has it, each request's nominal execution (floored at `spin`'s calibrated fixed cost, as
//! the node runs it). Two figures come from the trial's closed-loop capacity run, not the
//! model: the mean execution the node reported there, which scales every nominal execution
//! (the calibration maps nominal to real only approximately), and the worker's cost per
//! request besides the execution, `1 / capacity − that mean` less the simulator's own fixed
//! costs per request, charged as its sandbox start.
//! So the simulated node serves about the measured capacity at 1×, and what past capacity does
//! to goodput (admission, shedding, queueing) is the simulator's prediction. The path outside
//! the node (the network, the front end's reading) is not modelled, so the prediction is
//! compared with the goodput the node reports by its own clock (`… in node`). The scenario
//! simulates once every point is measured, so the simulator's memory is not in a point's RSS.

use luge_runtime::RuntimeConfig;
use luge_sim::{EstimatorMode, Overheads, SimConfig, jobs_of, simulate};
use luge_workload::WorkloadSpec;

use super::super::node::NodeSpec;
use super::{Mix, OverloadPoint};
use crate::calibrate::Calibration;
use crate::error::BenchError;

/// Requests of a mix whose mean nominal execution stands for the mix's.
pub(super) const MEAN_SAMPLE: usize = 100_000;

/// How the simulated worker runs a mix, from its trial's capacity run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Cost {
    /// Per request besides the execution (ns).
    pub overhead_ns: u64,
    /// Measured ÷ nominal mean execution: what every nominal execution is multiplied by.
    pub scale: f64,
}

/// The simulated node of one series.
pub(super) struct Model {
    cfg: SimConfig,
    /// `spin`'s fixed cost (ns): no request runs shorter.
    floor_ns: u64,
}

impl Model {
    /// The node `spec` starts, serving `spin` as `calibration` maps it.
    pub(super) fn new(spec: &NodeSpec, calibration: &Calibration) -> Self {
        let node = RuntimeConfig {
            policy_config: spec.policy_config(),
            ull_lane: spec.ull_lane,
            ..RuntimeConfig::default()
        };
        let mut cfg = SimConfig::new(spec.policy, 1);
        cfg.ull_lane = node.ull_config();
        cfg.policy_config = node.policy_config;
        cfg.estimator = EstimatorMode::Oracle;
        let floor_ns = calibration.fixed_cost_ns().max(0.0).round() as u64;
        Self { cfg, floor_ns }
    }

    /// The jobs of `planned` requests of `workload` (a run's canonical workload string), as
    /// the node runs them.
    fn jobs(&self, workload: &str, planned: usize) -> Result<Vec<luge_sim::Job>, BenchError> {
        let spec: WorkloadSpec = workload.parse().map_err(|e| {
            BenchError::Scenario(format!("the run's workload `{workload}` does not parse: {e}"))
        })?;
        let mut jobs = jobs_of(&spec, planned);
        for j in &mut jobs {
            j.execution = j.execution.max(self.floor_ns);
        }
        Ok(jobs)
    }

    /// How the worker runs a mix (`workload`, any rate) whose closed loop served
    /// `capacity_rps` with `measured_mean_ns` of execution per request as the node reported
    /// it (`None`: the nominal mean, scale 1).
    pub(super) fn cost(
        &self,
        workload: &str,
        capacity_rps: f64,
        measured_mean_ns: Option<f64>,
    ) -> Result<Cost, BenchError> {
        let jobs = self.jobs(workload, MEAN_SAMPLE)?;
        let nominal =
            jobs.iter().map(|j| j.execution as f64).sum::<f64>() / jobs.len().max(1) as f64;
        let measured = measured_mean_ns.filter(|m| m.is_finite() && *m > 0.0).unwrap_or(nominal);
        let scale = if nominal > 0.0 { measured / nominal } else { 1.0 };
        let o = Overheads::DEFAULT;
        let fixed = o.dispatch_base + o.dispatch_per_worker + o.enqueue + o.context_switch;
        Ok(Cost {
            overhead_ns: per_request_ns(capacity_rps, measured).saturating_sub(fixed),
            scale,
        })
    }

    /// How many of `planned` requests of `workload` meet their deadline in the simulated node,
    /// its worker running them at `cost`.
    pub(super) fn met(&self, workload: &str, planned: u64, cost: Cost) -> Result<u64, BenchError> {
        let mut jobs = self.jobs(workload, usize::try_from(planned).unwrap_or(usize::MAX))?;
        for j in &mut jobs {
            j.execution = ((j.execution as f64 * cost.scale).round() as u64).max(1);
        }
        let mut cfg = self.cfg.clone();
        cfg.overheads = Overheads { sandbox_start: cost.overhead_ns, ..Overheads::DEFAULT };
        let out =
            simulate(&cfg, &jobs).map_err(|e| BenchError::Scenario(format!("simulator: {e}")))?;
        Ok(out.records.iter().filter(|r| r.met_deadline()).count() as u64)
    }
}

/// Simulates every point once all are measured; a point the simulator cannot
/// run is left without a prediction and says why in its notes.
pub(super) fn predict_points(points: &mut [OverloadPoint], model: &Model, seed: u64) {
    for p in points.iter_mut() {
        let Some(mix) = Mix::ALL.into_iter().find(|m| m.name() == p.mix) else { continue };
        // Any rate: only the mix's executions count here.
        let mix_spec = format!("{},rate=1000,seed={seed}", mix.capacity_spec());
        let measured_mean_ns = p.capacity_mean_execution_us.map(|us| us * 1e3);
        let predicted = model
            .cost(&mix_spec, p.capacity_rps, measured_mean_ns)
            .and_then(|c| model.met(&p.workload, p.planned, c).map(|met| (c, met)));
        match predicted {
            Ok((cost, met)) => {
                p.simulated_overhead_ns = Some(cost.overhead_ns);
                p.simulated_execution_scale = Some(cost.scale);
                p.simulated_met = Some(met);
                p.simulated_goodput_over_capacity = (p.elapsed_s > 0.0 && p.capacity_rps > 0.0)
                    .then(|| met as f64 / p.elapsed_s / p.capacity_rps);
            }
            Err(e) => p.notes.push(format!("no prediction: {e}")),
        }
    }
}

/// The worker's cost per request besides the execution, from a capacity and a mean execution
/// (ns): what a closed loop at `capacity_rps` left over, never negative.
fn per_request_ns(capacity_rps: f64, mean_execution_ns: f64) -> u64 {
    if capacity_rps > 0.0 && capacity_rps.is_finite() {
        (1e9 / capacity_rps - mean_execution_ns).max(0.0).round() as u64
    } else {
        0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::scenario::Protocol;
    use luge_runtime::{Layout, WaitMode};

    fn model() -> Model {
        let spec = NodeSpec::new(WaitMode::Sleep, Layout::Inline, &[Protocol::Udp]);
        Model::new(&spec, &Calibration::given(1.0, 0.0).unwrap())
    }

    #[test]
    fn the_worker_cost_is_what_the_capacity_leaves_besides_the_execution() {
        assert_eq!(per_request_ns(5_000.0, 175_000.0), 25_000);
        assert_eq!(per_request_ns(10_000.0, 175_000.0), 0);
        assert_eq!(per_request_ns(0.0, 1.0), 0);
    }

    /// At capacity nearly everything meets its deadline; at 5× the simulated node keeps its
    /// goodput near capacity (admission refuses the rest), and without admission on the wait
    /// it collapses: the prediction depends on the settings the node runs.
    #[test]
    fn the_prediction_follows_capacity_and_admission() {
        let m = model();
        let capacity = 5_000.0;
        let mix = "fixed,scale=17.5,deadline=100ms,seed=3";
        let overhead = m.cost(mix, capacity, None).unwrap();
        // 200 µs per request: 175 µs of execution, the simulator's own 620 ns, the rest.
        assert_eq!(overhead, Cost { overhead_ns: 25_000 - 620, scale: 1.0 });
        // Executions that ran 10 % short of nominal leave more to the per-request cost.
        let short = m.cost(mix, capacity, Some(157_500.0)).unwrap();
        assert_eq!(short.overhead_ns, 42_500 - 620);
        assert!((short.scale - 0.9).abs() < 1e-9, "{short:?}");
        let at = |multiple: f64, m: &Model| {
            let rate = capacity * multiple;
            let planned = (rate * 2.0) as u64;
            let w = format!("fixed,scale=17.5,deadline=100ms,rate={rate},seed=3");
            m.met(&w, planned, overhead).unwrap() as f64 / 2.0 / capacity
        };
        let one = at(1.0, &m);
        let five = at(5.0, &m);
        assert!(one > 0.9 && one <= 1.05, "{one}");
        assert!(five > 0.9 && five <= 1.05, "{five}");
        let spec = NodeSpec {
            deadline_admission: false,
            ..NodeSpec::new(WaitMode::Sleep, Layout::Inline, &[Protocol::Udp])
        };
        let without = Model::new(&spec, &Calibration::given(1.0, 0.0).unwrap());
        let collapsed = at(5.0, &without);
        assert!(collapsed < 0.5 * five, "{collapsed} vs {five}");
    }

    /// Each point gets the simulator's goodput for its own arrivals, from its trial's
    /// capacity; a point whose workload the simulator cannot read says so and keeps none.
    #[test]
    fn every_point_gets_its_prediction_or_says_why_not() {
        use luge_runtime::{Layout, WaitMode};
        let spec = NodeSpec::new(WaitMode::Sleep, Layout::Inline, &[Protocol::Udp]);
        let model = Model::new(&spec, &Calibration::given(1.0, 0.0).unwrap());
        let measured = |workload: &str| OverloadPoint {
            mix: "fixed",
            workload: workload.to_owned(),
            planned: 10_000,
            elapsed_s: 1.0,
            capacity_rps: 5_000.0,
            ..OverloadPoint::default()
        };
        let mut points = vec![
            measured("fixed,scale=17.5,deadline=100ms,rate=10000,seed=1"),
            measured("no such workload"),
        ];
        predict_points(&mut points, &model, 1);
        // 10 000 requests offered at 2× in one second: about the 5 000 the worker serves in
        // that second meet their deadline, and what it admitted up to 100 ms of work ahead,
        // served after; the rest are refused.
        let met = points[0].simulated_met.unwrap();
        assert!((4_800..=5_700).contains(&met), "{met}");
        assert_eq!(points[0].simulated_overhead_ns, Some(25_000 - 620));
        assert_eq!(points[0].simulated_execution_scale, Some(1.0));
        let ratio = points[0].simulated_goodput_over_capacity.unwrap();
        assert!((ratio - met as f64 / 5_000.0).abs() < 1e-9);
        assert_eq!(points[1].simulated_met, None);
        assert!(points[1].notes.iter().any(|n| n.starts_with("no prediction")), "{:?}", points[1]);
    }
}
