//! `luge bench chain`: what handing a request from stage to stage inside the node costs (Edge-RT
//! §III, §IV-A). A chain of real functions (by default the edge manifest's `keypoints`:
//! `resize` → `resize` → `sift` on a 256×192 grey image) is called end to end, and each of its
//! stages is called on its own with the input that stage sees in the chain, all on one node, one
//! request in flight (the lowest load), over HTTP and UDP-RPC, in interleaved trials. The chain
//! must answer byte for byte what calling its stages by hand gives (else the scenario fails);
//! the figure is the chain's p99 ÷ the sum of its stages' p99s: a chain saves the client's round
//! trips between stages, and must not spend them again on its hand-over (goal ≤ 1.2×).

use std::fmt::Write as _;
use std::time::Duration;

use luge_client::{CallOptions, HttpClient, RpcClient, Status};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median};
use super::node::{LugeNode, NodeChain, NodeSpec, Pinning};
use super::output::{Results, Table, us};
use super::overload::parse_spec;
use super::{ChainOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;

/// Requests carry this deadline: far above any stage's time, so that none is refused at this
/// load and the figure is latency alone.
const DEADLINE_SPEC: &str = "fixed,deadline=1s";

/// The default input: a deterministic 256×192 grey (P5) image of a few Gaussian blobs on a
/// gentle gradient, which `resize` halves twice and `sift` finds keypoints in.
pub fn blobs_image() -> Vec<u8> {
    const W: usize = 256;
    const H: usize = 192;
    let blobs =
        [(40.0, 50.0, 14.0), (120.0, 90.0, 20.0), (200.0, 40.0, 10.0), (180.0, 150.0, 16.0)];
    let mut out =
        format!("P5\n# luge bench chain input: {} blobs\n{W} {H}\n255\n", blobs.len()).into_bytes();
    for y in 0..H {
        for x in 0..W {
            let (xf, yf) = (x as f64, y as f64);
            let mut v = 40.0 + 30.0 * xf / W as f64;
            for &(bx, by, r) in &blobs {
                let d2 = (xf - bx).powi(2) + (yf - by).powi(2);
                v += 180.0 * (-d2 / (2.0 * r * r)).exp();
            }
            out.push(v.clamp(0.0, 255.0) as u8);
        }
    }
    out
}

/// One call measured: a stage alone or the whole chain.
#[derive(Debug, Clone, Serialize)]
struct Call {
    protocol: &'static str,
    /// `stage k: <function>` or `chain <name>`.
    what: String,
    trial: usize,
    point: Point,
}

/// What is measured, in order: `(label, function or chain name)` for each stage, then the chain.
fn calls_of(chain: &NodeChain) -> Vec<(String, String)> {
    let stages = chain.config.stages.iter().enumerate();
    let mut calls: Vec<(String, String)> =
        stages.map(|(k, s)| (format!("stage {k}: {s}"), s.clone())).collect();
    calls.push((format!("chain {}", chain.config.name), chain.config.name.clone()));
    calls
}

/// Calls `function` (a stage or the chain) once over `protocol` and returns its stdout.
fn call_once(
    node: &LugeNode,
    protocol: Protocol,
    name: &str,
    payload: &[u8],
) -> Result<Vec<u8>, BenchError> {
    let f = node.function(name)?;
    let opts = CallOptions {
        deadline: Some(Duration::from_secs(1)),
        timeout: Duration::from_secs(10),
        ..CallOptions::default()
    };
    let fail = |e: &dyn std::fmt::Display| BenchError::Scenario(format!("calling {name}: {e}"));
    let (ok, body, what) = match protocol {
        Protocol::Udp => {
            let addr = node.target(Protocol::Udp)?.addr();
            let mut c = RpcClient::connect(addr).map_err(|e| fail(&e))?;
            let r = c.call(f.rpc_id, payload, opts).map_err(|e| fail(&e))?;
            (r.status == Status::Ok, r.payload, format!("{:?}", r.status))
        }
        Protocol::Http => {
            let addr = node.http_addr().ok_or_else(|| fail(&"no HTTP"))?;
            let c = HttpClient::new().map_err(|e| fail(&e))?;
            let r = c
                .call(&format!("http://{addr}"), &f.http_route, payload, opts)
                .map_err(|e| fail(&e))?;
            (r.status == 200, r.body, r.status.to_string())
        }
    };
    if !ok {
        return Err(fail(&format!("answered {what}: {}", String::from_utf8_lossy(&body))));
    }
    Ok(body)
}

/// The chain's stages by hand, then the chain, over `protocol`: the inputs each stage sees,
/// checked against the chain's answer byte for byte.
fn by_hand(
    node: &LugeNode,
    protocol: Protocol,
    chain: &NodeChain,
    input: &[u8],
) -> Result<Vec<Vec<u8>>, BenchError> {
    let mut inputs = vec![input.to_vec()];
    let mut last = input.to_vec();
    for stage in &chain.config.stages {
        last = call_once(node, protocol, stage, &last)?;
        inputs.push(last.clone());
    }
    let whole = call_once(node, protocol, &chain.config.name, input)?;
    if whole != last {
        return Err(BenchError::Scenario(format!(
            "over {}, chain {} answered {} bytes that differ from its stages' {} bytes by hand",
            protocol.name(),
            chain.config.name,
            whole.len(),
            last.len()
        )));
    }
    inputs.pop();
    Ok(inputs)
}

pub(crate) fn run(
    o: &ChainOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let duration = opts.duration_or(o.duration, Duration::from_millis(300), Duration::from_secs(5));
    let trials = o.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let protocols = [Protocol::Http, Protocol::Udp];
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spec = NodeSpec {
        cache_dir: opts.cache_dir.clone(),
        pin,
        chains: vec![o.chain.clone()],
        ..NodeSpec::new(wait, layout, &protocols)
    };
    let chain = &o.chain;
    let stages = &chain.config.stages;
    let calls: Vec<Call> = LugeNode::with(&spec, &o.functions, |node| {
        let mut inputs = Vec::new();
        for p in protocols {
            let by = by_hand(node, p, chain, &o.input)?;
            opts.say(format!(
                "chain: {} over {} answers what its {} stages give by hand",
                chain.config.name,
                p.name(),
                stages.len()
            ));
            inputs.push(by);
        }
        if inputs[0] != inputs[1] {
            return Err(BenchError::Scenario(
                "the stages answered differently over HTTP and UDP-RPC".into(),
            ));
        }
        let inputs = &inputs[0];
        let mut calls = Vec::new();
        for trial in 0..trials {
            for p in protocols {
                let target = node.target(p)?;
                // Stage k gets the input it sees in the chain; the chain gets the input.
                let payloads = inputs.iter().chain(std::iter::once(&o.input));
                for ((label, name), payload) in calls_of(chain).into_iter().zip(payloads) {
                    let driver = Driver {
                        workload: parse_spec(DEADLINE_SPEC, opts.seed + trial as u64)?,
                        timeout: Duration::from_secs(5),
                        ..Driver::fixed(
                            target.clone(),
                            Mapping::Fixed {
                                function: node.function(&name)?,
                                payload: payload.to_vec(),
                            },
                            opts.seed,
                        )
                    };
                    let point = Point::of(&driver.closed(1, duration)?);
                    opts.say(format!(
                        "chain: trial {} {} {label}: p50 {} µs, p99 {} µs, errors {}",
                        trial + 1,
                        p.name(),
                        us(point.p50_us),
                        us(point.p99_us),
                        point.errors
                    ));
                    calls.push(Call { protocol: p.name(), what: label, trial, point });
                }
            }
        }
        Ok(calls)
    })?;

    let mut md = String::new();
    let _ = writeln!(
        md,
        "Edge-RT §III, §IV-A: chain `{}` ({}) on a {}-byte input, and each stage alone on the \
         input it sees in the chain; one request in flight, {:.1} s per call per trial, \
         {trials} interleaved trials (medians). 1 worker, {} layout, {} wait. The chain answered \
         byte for byte what its stages give by hand, over HTTP and UDP-RPC.\n",
        chain.config.name,
        stages.join(" → "),
        o.input.len(),
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&["protocol", "call", ">p50 µs", ">p99 µs", ">errors"]);
    let mut ratios = serde_json::Map::new();
    for p in protocols {
        let of = |what: &str| -> Vec<&Call> {
            calls.iter().filter(|c| c.protocol == p.name() && c.what == what).collect()
        };
        let labels: Vec<String> = calls_of(chain).into_iter().map(|(label, _)| label).collect();
        for label in &labels {
            let group = of(label);
            let errors: u64 = group.iter().map(|c| c.point.errors).sum();
            table.row(vec![
                p.name().to_owned(),
                label.clone(),
                us(median(&group, |c| c.point.p50_us)),
                us(median(&group, |c| c.point.p99_us)),
                errors.to_string(),
            ]);
        }
        // Per trial: the chain's p99 ÷ the sum of its stages' p99s; the median of those.
        let per_trial: Vec<Option<f64>> = (0..trials)
            .map(|t| {
                let p99 = |label: &str| {
                    calls
                        .iter()
                        .find(|c| c.protocol == p.name() && c.trial == t && c.what == label)
                        .and_then(|c| c.point.p99_us)
                };
                let sum: Option<f64> = labels[..stages.len()].iter().map(|l| p99(l)).sum();
                Some(p99(&labels[stages.len()])? / sum?)
            })
            .collect();
        let refs: Vec<&Option<f64>> = per_trial.iter().collect();
        let ratio = median(&refs, |r| *r);
        ratios.insert(p.name().into(), json!({ "median": ratio, "trials": per_trial }));
        table.row(vec![
            p.name().to_owned(),
            "chain p99 ÷ Σ stage p99".into(),
            String::new(),
            ratio.map_or("-".into(), |r| format!("{r:.2}×")),
            String::new(),
        ]);
    }
    let _ = writeln!(md, "{}", table.render());
    let _ = writeln!(
        md,
        "Goal: the chain's p99 ≤ 1.2× the sum of its stages' p99s (the hand-over costs nearly \
         nothing)."
    );
    Ok((
        md,
        json!({
            "chain": chain.config.name,
            "stages": stages,
            "input_bytes": o.input.len(),
            "duration_s": duration.as_secs_f64(),
            "trials": trials,
            "calls": calls,
            "chain_p99_over_stage_p99_sum": ratios,
        }),
    ))
}
