//! `luge bench tenants`: does one tenant's burst become another tenant's latency? Tenant A calls
//! the no-op at a fixed rate; tenant B, limited to `rate_per_sec` requests per second by its
//! `[[tenant]]` limits, calls its own copy of `spin` (~1 ms of work each) at its limit, or at ten
//! times it. A's latency with B at 10× ÷ A's latency with B at its limit, in interleaved trials
//! (medians), both over UDP-RPC from two load generators running at once. B's 10× would take
//! the whole worker; its excess is refused at admission (`TenantLimit`, before any queue), so
//! all it can cost A is the refusals' front-end work. `--no-limits` runs the same load on a node
//! without tenant limits, for a before/after.

use std::fmt::Write as _;
use std::time::Duration;

use luge_runtime::{FunctionConfig, TenantConfig};
use serde::Serialize;
use serde_json::json;

use super::measure::{Driver, Point, median, median_ratio};
use super::node::{LugeNode, NodeFunction, NodeSpec, Pinning};
use super::output::{Results, Table, ratio, rps, us};
use super::{Protocol, ScenarioOptions, TenantsOptions, layout_name, wait_name};
use crate::error::BenchError;
use crate::plan::Mapping;

/// Tenant B's id and its function.
const B: u32 = 2;
const B_FUNCTION: &str = "spin-tenant-b";
/// `spin` iterations of one of B's requests: ~1 ms at the ~1.7 ns per iteration measured here.
const B_WORK: &[u8] = b"600000";

#[derive(Debug, Clone, Serialize)]
struct Trial {
    /// `at_limit` or `at_10x`: what B offers.
    condition: &'static str,
    /// Tenant A's run.
    a: Point,
    /// Tenant B's run.
    b: Point,
}

pub(crate) fn run(
    t: &TenantsOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let a_rate = t.rate.unwrap_or(if opts.quick { 500.0 } else { 2_000.0 });
    let b_limit = t.b_limit.unwrap_or(if opts.quick { 50.0 } else { 100.0 });
    let b_rate = 10.0 * b_limit;
    let duration = opts.duration_or(t.duration, Duration::from_millis(300), Duration::from_secs(3));
    let trials = t.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spin = opts
        .functions
        .iter()
        .find(|f| f.config.name == "spin")
        .ok_or_else(|| BenchError::Scenario("the node's functions have no `spin`".into()))?;
    let mut b_config = FunctionConfig::new(B_FUNCTION);
    b_config.tenant = B;
    let mut functions = opts.functions.clone();
    functions.push(NodeFunction {
        config: b_config,
        module: spin.module.clone(),
        route: format!("/{B_FUNCTION}"),
    });
    let tenant_b = TenantConfig {
        rate_per_sec: Some(b_limit),
        burst: Some((b_limit / 10.0).ceil().max(1.0) as u32),
        ..TenantConfig::new(B, "b")
    };
    let spec = NodeSpec {
        tenants: if t.no_limits { Vec::new() } else { vec![tenant_b] },
        ..NodeSpec::of(opts, wait, layout, Protocol::Udp, pin)
    };
    let results = LugeNode::with(&spec, &functions, |node| {
        let target = node.target(Protocol::Udp)?;
        let a = Driver::fixed(target.clone(), node.noop()?, opts.seed);
        let b_function = node.function(B_FUNCTION)?;
        let b = Driver::fixed(
            target,
            Mapping::Fixed { function: b_function, payload: B_WORK.to_vec() },
            opts.seed + 1,
        );
        a.open(a_rate, duration.min(Duration::from_secs(1)))?;
        let mut results = Vec::new();
        for trial in 0..trials {
            for (condition, b_offer) in [("at_limit", b_limit), ("at_10x", b_rate)] {
                let (a_run, b_run) = std::thread::scope(|s| {
                    let b_run = s.spawn(|| b.open(b_offer, duration));
                    let a_run = a.open(a_rate, duration);
                    let b_run = b_run.join().unwrap_or_else(|_| {
                        Err(BenchError::Scenario("tenant B's load generator panicked".into()))
                    });
                    Ok::<_, BenchError>((a_run?, b_run?))
                })?;
                let t = Trial { condition, a: Point::of(&a_run), b: Point::of(&b_run) };
                opts.say(format!(
                    "tenants: trial {} B {}: A p50 {} µs, p99 {} µs, errors {}; B answered {} /s \
                     of {} /s offered",
                    trial + 1,
                    t.condition,
                    us(t.a.p50_us),
                    us(t.a.p99_us),
                    t.a.errors,
                    rps(t.b.throughput_rps),
                    rps(t.b.offered_rps)
                ));
                results.push(t);
            }
        }
        Ok(results)
    })?;

    let of = |c: &str| results.iter().filter(|t| t.condition == c).collect::<Vec<_>>();
    let (at_limit, at_10x) = (of("at_limit"), of("at_10x"));
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Tenant A calls the no-op over UDP-RPC at {} /s (Poisson, {:.1} s per trial); tenant B, \
         limited to {} /s{}, calls its own copy of `spin` (~1 ms each) at the same time, at its \
         limit or at {} /s (10×, which alone would take the whole worker). 1 worker, {} layout, \
         {} wait; {trials} interleaved trials each; medians.\n",
        rps(a_rate),
        duration.as_secs_f64(),
        rps(b_limit),
        if t.no_limits {
            " (not enforced: --no-limits, the node without tenant limits)"
        } else {
            ""
        },
        rps(b_rate),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        "condition",
        ">A p50 µs",
        ">A p99 µs",
        ">A throughput /s",
        ">A errors",
        ">B answered /s",
        ">B failed share",
    ]);
    for (name, group) in [("B at its limit", &at_limit), ("B at 10×", &at_10x)] {
        table.row(vec![
            name.into(),
            us(median(group, |t| t.a.p50_us)),
            us(median(group, |t| t.a.p99_us)),
            rps(median(group, |t| Some(t.a.throughput_rps)).unwrap_or(0.0)),
            median(group, |t| Some(t.a.errors as f64)).map_or("-".into(), |v| v.to_string()),
            median(group, |t| Some(t.b.throughput_rps)).map_or("-".into(), rps),
            median(group, |t| Some(t.b.error_share()))
                .map_or("-".into(), |v| format!("{:.1} %", 100.0 * v)),
        ]);
    }
    let _ = writeln!(md, "{}", table.render());
    let r = |f: &dyn Fn(&Trial) -> Option<f64>| median_ratio(&at_10x, &at_limit, f);
    let (p50, p99) = (r(&|t| t.a.p50_us), r(&|t| t.a.p99_us));
    let _ = writeln!(
        md,
        "A with B at 10× ÷ at its limit: p50 {}, p99 {} (goal: p99 ≤ 1.20×)",
        ratio(p50),
        ratio(p99)
    );
    Ok((
        md,
        json!({
            "a_rate_rps": a_rate,
            "tenant_limits": !t.no_limits,
            "b_limit_rps": b_limit,
            "b_offered_rps": b_rate,
            "duration_s": duration.as_secs_f64(),
            "trials": results,
            "ratios": { "p50": p50, "p99": p99 },
        }),
    ))
}
