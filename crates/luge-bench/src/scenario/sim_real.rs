//! `luge bench sim-vs-real`: the same arrivals through the runtime and through `luge-sim`,
//! and how far apart their p50, p99 and deadline-miss rates are.
//!
//! The real run: `spin` on 1 worker under the policy, UDP-RPC, Poisson arrivals at each load,
//! calibrated iterations, trusted client estimates (= the simulator's oracle), seeded with
//! `--seed` unless the workload spec gives its own `seed=`. The simulated
//! run: the *same* arrivals — the report's canonical workload string parsed back, the same
//! number of requests — on 1 simulated worker with the same policy and admission settings.
//!
//! Two simulations per point: with each request's execution as the server measured it (so
//! that the simulator's scheduling and overhead model is what is compared), and with the
//! nominal executions (what a prediction from the workload spec gives, calibration error
//! included).
//!
//! The node model, unless `--overheads` replaces it, is [`Overheads::DEFAULT`] with
//! `sandbox_start = 0`: the calibration already maps each nominal execution to what the server
//! measures, instantiation included. What the simulator does not model at all is the path
//! outside the node — loopback, front end, the wake-up of an idle worker — so it is **measured**
//! here, as the median of (client latency − server execution) of a no-op with one request in
//! flight, and added to every simulated latency (and counted against its deadline). Under load
//! a queued request in fact skips the wake-up, so the simulator errs slightly high there.
//! Simulated executions are floored at `spin`'s calibrated fixed cost: a request nominally
//! shorter than it is sent 0 iterations and runs that long on the real runtime.
//!
//! `--trials` trials (default 5) run one after the other, each every workload at every load;
//! each trial's real run is simulated on its own (with its measured executions), and every
//! figure printed is the median of the trials, each Δ the median of the trials' Δs with its
//! range.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::{PolicyKind, RuntimeConfig};
use luge_sim::{
    Chart, EstimatorMode, Job, Overheads, Series, SimConfig, Summary, jobs_of, simulate,
};
use luge_workload::WorkloadSpec;
use serde::Serialize;
use serde_json::json;

use super::measure::Driver;
use super::measure::{median, user_workload};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, middle, pct, slug, us};
use super::policies::spin_function;
use super::{Protocol, ScenarioOptions, SimRealOptions, layout_name, wait_name};
use crate::calibrate::CalibrationOptions;
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::run::calibrate;
use crate::sample::Sample;
use crate::summary::Percentiles;

#[derive(Debug, Clone, Serialize)]
struct Side {
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    p999_us: Option<f64>,
    miss_rate: f64,
    requests: u64,
}

impl Side {
    /// The side of a run's summary (or of one of its classes).
    fn measured(latency_us: &Percentiles, miss_rate: f64, requests: u64) -> Self {
        Self {
            p50_us: latency_us.p50,
            p99_us: latency_us.p99,
            p999_us: latency_us.p999,
            miss_rate,
            requests,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Compared {
    /// The trial (from 1).
    trial: usize,
    workload: String,
    load: f64,
    /// `all` or a class name.
    class: String,
    real: Side,
    /// Simulated with each request's measured execution.
    sim: Side,
    /// Simulated with the nominal executions (calibration error included).
    sim_nominal: Side,
}

/// What a request really executed, for the simulation with measured executions: only an `Ok`
/// answer's report counts. A refusal or a shed request carries an execution of 0 (it never
/// ran), and a killed one its partial run; taking those would turn refused long requests into
/// instant ones and shrink the simulated load, so failures keep their nominal execution.
fn measured_execution(x: &Sample) -> Option<u64> {
    x.server_execution_ns.filter(|&e| x.ok() && e > 0)
}

/// (real − sim) ÷ sim of one trial; `None` stands for infinity. A side that failed (over the
/// quantile's share of requests missed: an infinite percentile) against a finite other side
/// counts as the farthest apart it can be — +∞ when the runtime's failed, −100 % when only the
/// simulator's did — so that such a trial moves the median rather than dropping out of it; a
/// trial where both failed has no Δ.
fn delta(real: Option<f64>, sim: Option<f64>) -> Option<f64> {
    match (real, sim) {
        (Some(r), Some(s)) if s > 0.0 => Some((r - s) / s),
        (None, Some(_)) => Some(f64::INFINITY),
        (Some(_), None) => Some(-1.0),
        _ => None,
    }
}

/// The trials' Δs of one quantity as `median [min–max]` in percent, over the trials where
/// either side was finite (`both inf` when neither ever was); `+∞` for a runtime side that
/// failed where the simulator's did not.
fn rel(rows: &[&Compared], f: fn(&Side) -> Option<f64>) -> String {
    let mut v: Vec<f64> = rows.iter().filter_map(|r| delta(f(&r.real), f(&r.sim))).collect();
    let pc = |x: f64| {
        if x.is_finite() { format!("{:+.0} %", 100.0 * x) } else { "+∞".to_owned() }
    };
    v.sort_by(f64::total_cmp);
    match (middle(&v), v.first(), v.last()) {
        (Some(m), Some(&lo), Some(&hi)) if lo < hi => {
            format!("{} [{}…{}]", pc(m), pc(lo), pc(hi))
        }
        (Some(m), _, _) => pc(m),
        _ => "both inf".into(),
    }
}

/// The simulated side of each class (and `all`), with `path_ns` added to every latency.
fn simulate_side(
    jobs: &[Job],
    cfg: &SimConfig,
    path_ns: u64,
) -> Result<Vec<(Option<u16>, Side)>, BenchError> {
    let out = simulate(cfg, jobs).map_err(|e| BenchError::Scenario(format!("simulator: {e}")))?;
    let mut classes: Vec<u16> = out.records.iter().map(|r| r.class).collect();
    classes.sort_unstable();
    classes.dedup();
    let side = |filter: Option<u16>| {
        let mut lat = Vec::new();
        let mut missed = 0u64;
        for r in out.records.iter().filter(|r| filter.is_none_or(|c| r.class == c)) {
            match r.latency() {
                Some(l) => {
                    let l = l + path_ns;
                    if l > r.relative_deadline {
                        missed += 1;
                    }
                    lat.push(l as f64 / 1e3);
                }
                None => {
                    missed += 1;
                    lat.push(f64::INFINITY);
                }
            }
        }
        let n = lat.len() as u64;
        let s = Summary::of(lat);
        Side {
            p50_us: s.p50,
            p99_us: s.p99,
            p999_us: s.p999,
            miss_rate: if n == 0 { 0.0 } else { missed as f64 / n as f64 },
            requests: n,
        }
    };
    let mut sides = vec![(None, side(None))];
    for c in classes {
        sides.push((Some(c), side(Some(c))));
    }
    Ok(sides)
}

/// Every trial's row of one workload, load and class.
fn group<'a>(rows: &'a [Compared], workload: &str, load: f64, class: &str) -> Vec<&'a Compared> {
    rows.iter().filter(|r| r.workload == workload && r.load == load && r.class == class).collect()
}

pub(crate) fn run(
    s: &SimRealOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let policy = s.policy.unwrap_or(PolicyKind::SledgeScale);
    let loads = opts.given_or(&s.loads, vec![0.7], vec![0.5, 0.7, 0.9]);
    let workloads = opts.given_or(
        &s.workloads,
        vec!["high-bimodal".into()],
        vec!["high-bimodal".into(), "exponential".into()],
    );
    let duration = opts.duration_or(s.duration, Duration::from_millis(300), Duration::from_secs(5));
    let trials = s.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let specs: Vec<WorkloadSpec> =
        workloads.iter().map(|w| user_workload(w, opts.seed)).collect::<Result<_, _>>()?;
    let mut functions = vec![spin_function(&opts.functions, &specs)?];
    functions.extend(opts.functions.iter().filter(|f| f.config.name == "noop").cloned());
    let spec = NodeSpec { policy, ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin) };
    let (cal, path_ns, reals) = LugeNode::with(&spec, &functions, |node| {
        let target = node.target(Protocol::Udp)?;
        let spin = node.function("spin")?;
        let cal = calibrate(&target, &spin, CalibrationOptions::default(), Duration::from_secs(5))?;
        opts.say(format!("sim-vs-real: calibration {cal}"));
        // The path outside the node: a no-op, one request in flight.
        let mut noop = Driver::fixed(
            target.clone(),
            Mapping::Fixed { function: node.function("noop")?, payload: Vec::new() },
            opts.seed,
        );
        noop.keep_samples = true;
        noop.closed(1, Duration::from_millis(if opts.quick { 20 } else { 300 }))?;
        let probe = noop.closed(
            1,
            if opts.quick { Duration::from_millis(100) } else { Duration::from_secs(2) },
        )?;
        let mut path: Vec<u64> = probe
            .samples
            .iter()
            .filter_map(|x| Some(x.ok_latency_ns()?.saturating_sub(x.server_execution_ns?)))
            .collect();
        path.sort_unstable();
        let path_ns = path.get(path.len() / 2).copied().ok_or_else(|| {
            BenchError::Scenario("the no-op probe got no answers to measure the path".into())
        })?;
        opts.say(format!(
            "sim-vs-real: path outside the node (no-op latency − execution, median of {}): {:.1} µs",
            path.len(),
            path_ns as f64 / 1e3
        ));
        let mut reals = Vec::new();
        for trial in 1..=trials {
            for w in &workloads {
                let base = user_workload(w, opts.seed)?;
                let driver = Driver {
                    target: target.clone(),
                    mapping: Mapping::Spin(spin.clone()),
                    workload: base,
                    timeout: Duration::from_secs(30),
                    calibration: Some(cal.clone()),
                    window: 4096,
                    keep_samples: true,
                };
                for &load in &loads {
                    let r = driver.at_load(load, duration)?;
                    opts.say(format!(
                        "sim-vs-real: trial {trial}/{trials}: {w} load {load}: real p50 {} µs \
                         p99 {} µs miss {} %",
                        us(r.summary.latency_us.p50),
                        us(r.summary.latency_us.p99),
                        pct(r.summary.deadline_miss_rate)
                    ));
                    reals.push((trial, w.clone(), load, r));
                }
            }
        }
        Ok((cal, path_ns, reals))
    })?;

    let overheads = s.overheads.unwrap_or(Overheads { sandbox_start: 0, ..Overheads::DEFAULT });
    let mut sim_cfg = SimConfig::new(policy, 1);
    sim_cfg.overheads = overheads;
    sim_cfg.estimator = EstimatorMode::Oracle;
    sim_cfg.policy_config = RuntimeConfig::default().policy_config;
    // A request shorter than spin's fixed cost gets 0 iterations and runs for the fixed cost.
    let floor_ns = cal.fixed_cost_ns().max(0.0).round() as u64;
    let mut rows: Vec<Compared> = Vec::new();
    let mut scales = Vec::new();
    for (trial, w, load, r) in &reals {
        let spec: WorkloadSpec = r.workload.parse().map_err(|e| {
            BenchError::Scenario(format!("the run's workload `{}` does not parse: {e}", r.workload))
        })?;
        let n = usize::try_from(r.summary.planned).unwrap_or(usize::MAX);
        let mut nominal = jobs_of(&spec, n);
        for j in &mut nominal {
            j.execution = j.execution.max(floor_ns);
        }
        // The same jobs with what each request really executed (failures keep the nominal).
        let mut measured = nominal.clone();
        let (mut real_sum, mut nominal_sum) = (0.0, 0.0);
        for x in &r.samples {
            if let (Some(j), Some(e)) = (
                usize::try_from(x.seq).ok().and_then(|i| measured.get_mut(i)),
                measured_execution(x),
            ) {
                real_sum += e as f64;
                nominal_sum += j.execution as f64;
                j.execution = e;
            }
        }
        let scale = if nominal_sum > 0.0 { real_sum / nominal_sum } else { 1.0 };
        scales.push(
            json!({ "trial": trial, "workload": w, "load": load, "measured_over_nominal": scale }),
        );
        let sims = simulate_side(&measured, &sim_cfg, path_ns)?;
        let sims_nominal = simulate_side(&nominal, &sim_cfg, path_ns)?;
        for ((class, sim), (_, sim_nominal)) in sims.into_iter().zip(sims_nominal) {
            let s = &r.summary;
            let real = match class {
                None => Side::measured(&s.latency_us, s.deadline_miss_rate, s.planned),
                Some(c) => match s.per_class.iter().find(|x| x.class == c) {
                    Some(x) => Side::measured(&x.latency_us, x.deadline_miss_rate, x.planned),
                    None => continue,
                },
            };
            let class_name = match class {
                None => "all".to_owned(),
                Some(c) => spec.dist.class_name(c).map_or_else(|| c.to_string(), str::to_owned),
            };
            rows.push(Compared {
                trial: *trial,
                workload: w.clone(),
                load: *load,
                class: class_name,
                real,
                sim,
                sim_nominal,
            });
        }
    }

    for w in &workloads {
        let pts = |f: fn(&Compared) -> Option<f64>| -> Vec<(f64, f64)> {
            loads
                .iter()
                .map(|&load| {
                    let t = group(&rows, w, load, "all");
                    (load, median(&t, f).unwrap_or(f64::INFINITY))
                })
                .collect()
        };
        let title = format!("simulator vs runtime, {w}, {policy}, 1 worker, median of trials");
        out.plot(
            &format!("{}-latency.svg", slug(w)),
            &Chart { log_y: true, ..Chart::new(title, "offered load", "latency (µs)") },
            &[
                Series { name: "real p50".into(), points: pts(|r| r.real.p50_us) },
                Series { name: "sim p50".into(), points: pts(|r| r.sim.p50_us) },
                Series { name: "real p99".into(), points: pts(|r| r.real.p99_us) },
                Series { name: "sim p99".into(), points: pts(|r| r.sim.p99_us) },
            ],
        )?;
    }

    let mut md = String::new();
    let _ = writeln!(
        md,
        "Policy `{policy}`, 1 worker ({} layout, {} wait), UDP-RPC, the same arrivals in both. \
         Simulator node model: `{}`; plus the measured path outside the node, {:.1} µs, added to \
         every simulated latency. `sim` columns simulate each request with the execution the \
         server measured for it (the simulator's model alone is compared); the `nominal-exec` \
         columns with the workload's nominal executions, floored at spin's fixed cost ({:.1} µs) \
         (what a prediction from the spec gives, calibration error included). Calibration: \
         {cal}. Δ = (real − sim) ÷ sim; miss Δ in percentage points. On a 50:50 bimodal mix the \
         overall p50 sits on the boundary between the classes: read the per-class rows. \
         **{trials} trial(s)**, each simulated on its own: every figure is the median of the \
         trials, a Δ `[min…max]` the range of the trials' Δs.\n",
        layout_name(layout),
        wait_name(wait),
        overheads.to_string().trim().replace('\n', ","),
        path_ns as f64 / 1e3,
        floor_ns as f64 / 1e3
    );
    let mut t = Table::new(&[
        "workload",
        ">load",
        "class",
        ">requests",
        ">sim p50 µs",
        ">real p50 µs",
        ">Δ p50",
        ">sim p99 µs",
        ">real p99 µs",
        ">Δ p99",
        ">sim miss %",
        ">real miss %",
        ">Δ miss pp",
        ">nominal-exec sim p99 µs",
        ">nominal-exec sim miss %",
    ]);
    let mut keys: Vec<(&str, f64, &str)> = Vec::new();
    for r in &rows {
        let key = (r.workload.as_str(), r.load, r.class.as_str());
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    for (w, load, class) in keys {
        let g = group(&rows, w, load, class);
        let m = |f: fn(&Compared) -> Option<f64>| median(&g, f);
        t.row(vec![
            w.to_owned(),
            format!("{load:.2}"),
            class.to_owned(),
            m(|r| Some(r.real.requests as f64)).map_or("-".into(), |x| format!("{x:.0}")),
            us(m(|r| r.sim.p50_us)),
            us(m(|r| r.real.p50_us)),
            rel(&g, |s| s.p50_us),
            us(m(|r| r.sim.p99_us)),
            us(m(|r| r.real.p99_us)),
            rel(&g, |s| s.p99_us),
            m(|r| Some(r.sim.miss_rate)).map_or("-".into(), pct),
            m(|r| Some(r.real.miss_rate)).map_or("-".into(), pct),
            m(|r| Some(r.real.miss_rate - r.sim.miss_rate))
                .map_or("-".into(), |d| format!("{:+.2}", 100.0 * d)),
            us(m(|r| r.sim_nominal.p99_us)),
            m(|r| Some(r.sim_nominal.miss_rate)).map_or("-".into(), pct),
        ]);
    }
    let _ = writeln!(md, "{}", t.render());
    for x in &scales {
        let _ = writeln!(
            md,
            "- trial {}, {} at load {}: measured executions were {:.3} × the nominal ones",
            x["trial"],
            x["workload"].as_str().unwrap_or("?"),
            x["load"],
            x["measured_over_nominal"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for (trial, _, _, r) in &reals {
        for n in &r.notes {
            let _ = writeln!(md, "- note (trial {trial}, {}): {n}", r.workload);
        }
    }
    Ok((
        md,
        json!({
            "policy": policy.name(),
            "trials": trials,
            "calibration": cal,
            "overheads": overheads,
            "path_outside_node_ns": path_ns,
            "execution_floor_ns": floor_ns,
            "execution_scale": scales,
            "rows": rows,
        }),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::ErrorKind;

    #[test]
    fn only_ok_answers_give_their_measured_execution() {
        let ok = Sample {
            seq: 0,
            class: 1,
            intended_ns: 0,
            sent_ns: Some(0),
            latency_ns: Some(3_000_000),
            error: None,
            server_execution_ns: Some(2_100_000),
            server_queueing_ns: Some(0),
            server_readiness_ns: None,
            nominal_execution_ns: 2_070_000,
            deadline_ns: 20_700_000,
        };
        assert_eq!(measured_execution(&ok), Some(2_100_000));
        // UDP-RPC reports an execution of 0 for a refusal: the job keeps its nominal one
        // instead of becoming an instant one.
        let refused = Sample {
            error: Some(ErrorKind::Status(luge_proto::Status::Overloaded)),
            server_execution_ns: Some(0),
            ..ok
        };
        assert_eq!(measured_execution(&refused), None);
        // A killed request reports its partial run: not what the request would execute.
        let killed = Sample {
            error: Some(ErrorKind::Status(luge_proto::Status::Killed)),
            server_execution_ns: Some(500_000),
            ..ok
        };
        assert_eq!(measured_execution(&killed), None);
        let unreported = Sample { server_execution_ns: Some(0), ..ok };
        assert_eq!(measured_execution(&unreported), None);
    }

    fn row(trial: usize, real_p99: Option<f64>, sim_p99: Option<f64>) -> Compared {
        let side = |p99_us| Side {
            p50_us: Some(1.0),
            p99_us,
            p999_us: None,
            miss_rate: 0.0,
            requests: 10,
        };
        Compared {
            trial,
            workload: "w".into(),
            load: 0.5,
            class: "all".into(),
            real: side(real_p99),
            sim: side(sim_p99),
            sim_nominal: side(sim_p99),
        }
    }

    #[test]
    fn each_delta_is_the_median_of_the_trials() {
        let rows = [
            row(1, Some(110.0), Some(100.0)),
            row(2, Some(90.0), Some(100.0)),
            row(3, Some(150.0), Some(100.0)),
            row(4, None, Some(100.0)),
        ];
        let all: Vec<&Compared> = rows.iter().collect();
        // Trials 1–3 compare (+10, −10, +50 %); trial 4's real p99 failed where the simulated
        // one did not: +∞, which moves the median of the four.
        assert_eq!(rel(&all, |s| s.p99_us), "+30 % [-10 %…+∞]");
        assert_eq!(rel(&all[..3], |s| s.p99_us), "+10 % [-10 %…+50 %]");
        assert_eq!(rel(&all[..1], |s| s.p99_us), "+10 %");
        let failed = [row(1, None, None), row(2, None, None)];
        let failed: Vec<&Compared> = failed.iter().collect();
        assert_eq!(rel(&failed, |s| s.p99_us), "both inf");
        assert_eq!(rel(&all[3..], |s| s.p99_us), "+∞");
        // Three of five trials failed on the runtime's side only: the median says so, instead
        // of the two finite trials' "+5 %".
        let mostly_failed = [
            row(1, Some(105.0), Some(100.0)),
            row(2, Some(105.0), Some(100.0)),
            row(3, None, Some(100.0)),
            row(4, None, Some(100.0)),
            row(5, None, Some(100.0)),
        ];
        let mostly_failed: Vec<&Compared> = mostly_failed.iter().collect();
        assert_eq!(rel(&mostly_failed, |s| s.p99_us), "+∞ [+5 %…+∞]");
        // Only the simulator failed: −100 %.
        let sim_failed = [row(1, Some(100.0), None)];
        let sim_failed: Vec<&Compared> = sim_failed.iter().collect();
        assert_eq!(rel(&sim_failed, |s| s.p99_us), "-100 %");
        assert_eq!(group(&rows, "w", 0.5, "all").len(), 4);
    }
}
