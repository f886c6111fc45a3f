//! `luge bench backpressure`: clients that retry at once past capacity, with and without the
//! load signal (`docs/protocol.md` §3.1). `callers` closed-loop callers share one `luge-client`
//! [`AsyncRpcClient`] and call `spin` (~170 µs of work, a 10 ms deadline) over UDP-RPC, each
//! calling again the moment it has an answer — including a refusal, as a naive client retries.
//! There are far more callers than 10 ms of queue holds, so past the queue every call is refused
//! and retried at once. `fixed`: the client's window is `callers` (it ignores the signal);
//! `adaptive`: [`AsyncRpcClient::connect_adaptive`] with the same maximum, shrinking while the
//! node's answers signal load. Interleaved trials; medians. What the signal should buy: the same
//! goodput for far fewer refusals (each one work for the node's front end and the network).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use luge_client::{AsyncRpcClient, CallOptions, ClientError, StatusClass};
use serde::Serialize;
use serde_json::json;

use super::measure::{median, median_ratio};
use super::node::{LugeNode, NodeSpec, Pinning};
use super::output::{Results, Table, ratio, rps, us};
use super::{BackpressureOptions, Protocol, ScenarioOptions, layout_name, wait_name};
use crate::error::BenchError;

/// `spin` iterations of a call: ~170 µs at the ~1.7 ns per iteration measured here.
const WORK: &[u8] = b"100000";
/// Every call's relative deadline.
const DEADLINE: Duration = Duration::from_millis(10);
/// How long a call waits for its answer.
const TIMEOUT: Duration = Duration::from_secs(2);

/// One trial of one client.
#[derive(Debug, Clone, Serialize)]
struct Trial {
    /// `fixed` or `adaptive`.
    client: &'static str,
    duration_s: f64,
    /// 200s whose whole call (client-side) took at most the deadline, per second.
    goodput_rps: f64,
    /// 200s per second, however late.
    ok_rps: f64,
    /// Refusals the node answered (status class 2xx: overloaded, tenant limit, …), per second.
    refused_rps: f64,
    /// Requests the node answered, per 200 within the deadline.
    answers_per_good: Option<f64>,
    /// Answers neither a 200 nor a refusal (a trap, a kill, …).
    other_answers: u64,
    /// Calls the adaptive window gave up on before sending (half their deadline spent waiting).
    held_back: u64,
    /// Calls with no answer (timeouts, socket errors).
    lost: u64,
    /// Latency of the 200s (client-side, µs).
    ok_p50_us: Option<f64>,
    ok_p99_us: Option<f64>,
    /// The adaptive window at the end of the trial (the fixed one: `callers`).
    window_end: Option<usize>,
}

/// What the callers count.
#[derive(Default)]
struct Counts {
    good: AtomicU64,
    ok: AtomicU64,
    refused: AtomicU64,
    /// Other answers (a trap, a kill, …): answers all the same.
    other: AtomicU64,
    held_back: AtomicU64,
    lost: AtomicU64,
}

pub(crate) fn run(
    b: &BackpressureOptions,
    opts: &ScenarioOptions,
    pin: Option<Pinning>,
    _out: &mut Results,
) -> Result<(String, serde_json::Value), BenchError> {
    let callers = b.callers.unwrap_or(256).max(1);
    let duration = opts.duration_or(b.duration, Duration::from_millis(300), Duration::from_secs(3));
    let trials = b.trials.unwrap_or(if opts.quick { 1 } else { 5 }).max(1);
    let (wait, layout) = (opts.first_mode(), opts.first_layout());
    let spec = NodeSpec::of(opts, wait, layout, Protocol::Udp, pin);
    let results = LugeNode::with(&spec, &opts.functions, |node| {
        let crate::target::Target::Rpc(addr) = node.target(Protocol::Udp)? else {
            return Err(BenchError::Scenario("the node serves no UDP-RPC".into()));
        };
        let spin = node.function("spin")?.rpc_id;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("luge-bench-backpressure")
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("starting the client runtime", e))?;
        let mut results = Vec::new();
        // A short warm-up: the first calls compile nothing but do touch the pool.
        rt.block_on(trial("fixed", addr, spin, callers, Duration::from_millis(100)))?;
        for n in 0..trials {
            for client in ["fixed", "adaptive"] {
                let t = rt.block_on(trial(client, addr, spin, callers, duration))?;
                opts.say(format!(
                    "backpressure: trial {} {}: goodput {} /s, refused {} /s, held back {}, \
                     window {}",
                    n + 1,
                    t.client,
                    rps(t.goodput_rps),
                    rps(t.refused_rps),
                    t.held_back,
                    t.window_end.map_or("-".into(), |w| w.to_string())
                ));
                results.push(t);
            }
        }
        Ok(results)
    })?;

    let of = |c: &str| results.iter().filter(|t| t.client == c).collect::<Vec<_>>();
    let (fixed, adaptive) = (of("fixed"), of("adaptive"));
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{callers} closed-loop callers on one `luge-client` UDP-RPC client call `spin` (~170 µs, \
         {} ms deadline), each again as soon as it has an answer, refusals included; {:.1} s \
         per trial, {trials} interleaved trials per client, medians. 1 worker, {} layout, {} \
         wait. Goodput = 200s within the deadline by the client's clock.\n",
        DEADLINE.as_millis(),
        duration.as_secs_f64(),
        layout_name(layout),
        wait_name(wait)
    );
    let mut table = Table::new(&[
        "client",
        ">goodput /s",
        ">200s /s",
        ">refused /s",
        ">answers per good 200",
        ">200 p50 µs",
        ">200 p99 µs",
        ">held back",
        ">lost",
        ">window at end",
    ]);
    for (name, group) in [("fixed window (ignores the signal)", &fixed), ("adaptive", &adaptive)] {
        let num = |f: &dyn Fn(&Trial) -> Option<f64>| median(group, f);
        table.row(vec![
            name.into(),
            rps(num(&|t| Some(t.goodput_rps)).unwrap_or(0.0)),
            rps(num(&|t| Some(t.ok_rps)).unwrap_or(0.0)),
            rps(num(&|t| Some(t.refused_rps)).unwrap_or(0.0)),
            num(&|t| t.answers_per_good).map_or("-".into(), |v| format!("{v:.1}")),
            us(num(&|t| t.ok_p50_us)),
            us(num(&|t| t.ok_p99_us)),
            num(&|t| Some(t.held_back as f64)).map_or("-".into(), |v| format!("{v:.0}")),
            num(&|t| Some(t.lost as f64)).map_or("-".into(), |v| format!("{v:.0}")),
            num(&|t| t.window_end.map(|w| w as f64)).map_or("-".into(), |v| format!("{v:.0}")),
        ]);
    }
    let _ = writeln!(md, "{}", table.render());
    let r = |f: &dyn Fn(&Trial) -> Option<f64>| median_ratio(&adaptive, &fixed, f);
    let goodput = r(&|t| Some(t.goodput_rps));
    let refused = r(&|t| Some(t.refused_rps));
    let _ =
        writeln!(md, "adaptive ÷ fixed: goodput {}, refusals {}", ratio(goodput), ratio(refused));
    Ok((
        md,
        json!({
            "callers": callers,
            "deadline_ms": DEADLINE.as_millis(),
            "duration_s": duration.as_secs_f64(),
            "trials": results,
            "ratios": { "goodput": goodput, "refused": refused },
        }),
    ))
}

/// `callers` callers on one client of kind `client` for `duration`.
async fn trial(
    client: &'static str,
    addr: std::net::SocketAddr,
    function: u32,
    callers: usize,
    duration: Duration,
) -> Result<Trial, BenchError> {
    let rpc = match client {
        "adaptive" => AsyncRpcClient::connect_adaptive(addr, callers).await,
        _ => AsyncRpcClient::connect_with_window(addr, callers).await,
    }
    .map_err(|e| BenchError::Scenario(format!("cannot open a UDP-RPC client: {e}")))?;
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let opts = CallOptions::default().with_deadline(DEADLINE).with_timeout(TIMEOUT);
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (rpc, counts, stop) = (rpc.clone(), Arc::clone(&counts), Arc::clone(&stop));
            tokio::spawn(async move {
                // 1 µs .. 10 s, 2 significant digits: the histogram's bounds are valid.
                let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000, 2).ok();
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let result = rpc.call(function, WORK, opts).await;
                    let took = sent.elapsed();
                    let bump = |c: &AtomicU64| c.fetch_add(1, Ordering::Relaxed);
                    match result {
                        Ok(r) if r.is_ok() => {
                            bump(&counts.ok);
                            if took <= DEADLINE {
                                bump(&counts.good);
                            }
                            if let Some(h) = latency.as_mut() {
                                let _ = h.record(u64::try_from(took.as_micros()).unwrap_or(0));
                            }
                        }
                        Ok(r) if r.class() == StatusClass::Refused => {
                            bump(&counts.refused);
                        }
                        Ok(_) => {
                            bump(&counts.other);
                        }
                        Err(ClientError::Backpressure { .. }) => {
                            bump(&counts.held_back);
                        }
                        Err(_) => {
                            bump(&counts.lost);
                        }
                    }
                }
                latency
            })
        })
        .collect();
    tokio::time::sleep(duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut latency = Histogram::<u64>::new_with_bounds(1, 10_000_000, 2)
        .map_err(|e| BenchError::Scenario(format!("histogram: {e}")))?;
    for t in tasks {
        if let Ok(Some(h)) = t.await {
            let _ = latency.add(h);
        }
    }
    // Counted to the last answer: the callers finish their calls in flight after the stop.
    let elapsed = start.elapsed().as_secs_f64();
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let (good, ok, refused) = (get(&counts.good), get(&counts.ok), get(&counts.refused));
    let other = get(&counts.other);
    let quantile = |q: f64| (!latency.is_empty()).then(|| latency.value_at_quantile(q) as f64);
    Ok(Trial {
        client,
        duration_s: elapsed,
        goodput_rps: good as f64 / elapsed,
        ok_rps: ok as f64 / elapsed,
        refused_rps: refused as f64 / elapsed,
        answers_per_good: (good > 0).then(|| (ok + refused + other) as f64 / good as f64),
        other_answers: other,
        held_back: get(&counts.held_back),
        lost: get(&counts.lost),
        ok_p50_us: quantile(0.5),
        ok_p99_us: quantile(0.99),
        window_end: rpc.window(),
    })
}
