//! Prometheus metrics shared by the front ends: request counters by function,
//! outcome and protocol; latency and execution histograms by function; malformed-input
//! counters; the UDP-RPC front end's own counters (`luge_udp_*_total`, registered by the
//! front end when it starts); suppressed log lines; gauges read from the runtime at scrape time.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use luge_runtime::{GroupStats, Outcome, Runtime};

use crate::log_limit::{self, LogKind};
use crate::status::{OUTCOMES, outcome_index};
use crate::udp::{UdpCounters, UdpStats};

/// Upper bounds of the histogram buckets, in seconds (10 µs … 10 s).
pub(crate) const BUCKETS: [f64; 13] =
    [1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 5e-2, 0.25, 1.0, 10.0];

/// Unregistered functions and chains whose metrics a node keeps ([`Metrics::unregistered`]).
pub const MAX_GONE: usize = 256;

/// Which front end served a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// HTTP/1.1.
    Http,
    /// UDP-RPC.
    Rpc,
}

impl Protocol {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Rpc => "rpc",
        }
    }
}

const PROTOCOLS: [Protocol; 2] = [Protocol::Http, Protocol::Rpc];

/// A histogram updated with relaxed atomics: a scrape may see one request's increments
/// half-applied, never lose one.
#[derive(Debug, Default)]
struct Histogram {
    /// One count per bucket of [`BUCKETS`], and one above the last: a snapshot reads them
    /// alone, so a request observed meanwhile cannot land in the wrong one.
    counts: [AtomicU64; BUCKETS.len() + 1],
    count: AtomicU64,
    sum_ns: AtomicU64,
}

impl Histogram {
    fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        let i = BUCKETS.iter().position(|&b| s <= b).unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        let ns = luge_proto::nanos(d);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(&self.counts) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        // At least the buckets' sum, so that a scrape racing an update stays monotonic.
        let count = self.count.load(Ordering::Relaxed).max(cumulative);
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {count}");
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {count}");
    }
}

/// One function's cells: found by name under a shared lock, then updated with atomics.
#[derive(Debug, Default)]
struct FunctionMetrics {
    requests: [[AtomicU64; PROTOCOLS.len()]; OUTCOMES.len()],
    /// Answered with their result within their relative deadline.
    met: AtomicU64,
    /// Submitted to the runtime and not answered yet (queued or running).
    in_flight: AtomicU64,
    /// Receipt to answer of the requests that ran, summed: the whole trigger the readiness
    /// share divides by.
    ran_total_ns: AtomicU64,
    latency: Histogram,
    execution: Histogram,
    queueing: Histogram,
    readiness: Histogram,
}

impl FunctionMetrics {
    fn record(&self, protocol: Protocol, outcome: &Outcome, answer: Answer) {
        let o = outcome_index(&outcome.result);
        self.requests[o][protocol as usize].fetch_add(1, Ordering::Relaxed);
        if outcome.is_ok() && outcome.timing.total <= answer.deadline {
            self.met.fetch_add(1, Ordering::Relaxed);
        }
        if answer.was_in_flight {
            self.in_flight.fetch_sub(1, Ordering::Relaxed);
        }
        self.latency.observe(outcome.timing.total);
        if outcome.timing.executed > Duration::ZERO {
            self.execution.observe(outcome.timing.executed);
            self.queueing.observe(outcome.timing.queueing());
            self.readiness.observe(outcome.timing.readiness());
            let total = luge_proto::nanos(outcome.timing.total);
            self.ran_total_ns.fetch_add(total, Ordering::Relaxed);
        }
    }
}

/// One function's counters as the status page reads them (every count since the node
/// started; the page takes differences between two reads).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct FunctionCounters {
    /// Requests answered, whatever the outcome.
    pub answered: u64,
    /// Answered, by outcome label (`status::OUTCOMES`); labels never seen are left out.
    pub outcomes: BTreeMap<&'static str, u64>,
    /// Answered with their result within their deadline.
    pub met: u64,
    /// Submitted to the runtime and not answered yet.
    pub in_flight: u64,
    /// Receipt to answer, per bucket of [`BUCKETS`] (not cumulative), then those above the last.
    pub latency: Vec<u64>,
    /// Answered after running (the requests readiness is measured for).
    pub ran: u64,
    /// Their readiness (receipt to first guest instruction), summed.
    pub readiness_ns: u64,
    /// Their receipt to answer, summed.
    pub ran_total_ns: u64,
}

/// What [`Metrics::record`] needs to know about an answered request beyond its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answer {
    /// The relative deadline it was scheduled with.
    pub deadline: Duration,
    /// Whether it was counted by [`Metrics::submitted`] (so the function's in-flight gauge
    /// goes back down).
    pub was_in_flight: bool,
}

/// The metrics registry of one server.
///
/// The per-request path ([`record`](Self::record)) takes a shared read lock to find the
/// function's cells by name (no allocation) and updates them with relaxed atomics, so the front
/// ends never wait for each other; only a function's first request takes the write lock. Readers
/// of every function (a scrape, the status page) hold the lock only to copy the cells' handles,
/// never while they format: a first request waiting for the write lock would otherwise hold up
/// every request's `record` behind it (the lock prefers writers) for the length of a scrape.
#[derive(Debug, Default)]
pub struct Metrics {
    functions: RwLock<BTreeMap<String, Arc<FunctionMetrics>>>,
    /// Unregistered functions and chains whose metrics are kept, oldest first
    /// ([`unregistered`](Self::unregistered)).
    gone: Mutex<VecDeque<String>>,
    malformed: Mutex<BTreeMap<(Protocol, &'static str), u64>>,
    /// The counters of the UDP-RPC front ends reporting here (normally one), rendered summed.
    udp: Mutex<Vec<Arc<UdpCounters>>>,
    /// Per protocol, the delivery time admission sets aside (ns; `delivery.rs`).
    delivery: [AtomicU64; PROTOCOLS.len()],
}

impl Metrics {
    /// A new, empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one answered request.
    pub fn record(&self, function: &str, protocol: Protocol, outcome: &Outcome, answer: Answer) {
        self.with(function, |f| f.record(protocol, outcome, answer));
    }

    /// The delivery time `protocol`'s front end has admission set aside now.
    pub fn delivery_margin(&self, protocol: Protocol, margin: Duration) {
        let ns = u64::try_from(margin.as_nanos()).unwrap_or(u64::MAX);
        self.delivery[protocol as usize].store(ns, Ordering::Relaxed);
    }

    /// Counts one request of `function` submitted to the runtime (in flight until recorded
    /// with [`Answer::was_in_flight`]).
    pub fn submitted(&self, function: &str) {
        self.with(function, |f| f.in_flight.fetch_add(1, Ordering::Relaxed));
    }

    /// `name` was unregistered. Its metrics stay (the status page's "gone" rows, its series in
    /// /metrics) while it is one of the last [`MAX_GONE`] unregistered; beyond that the oldest
    /// are forgotten — unless `registered` says the name is back, or a request of it is still
    /// in flight — so a deploy pipeline that registers `fn-<sha>` and removes the old one
    /// does not grow /metrics without bound.
    pub fn unregistered(&self, name: &str, registered: impl Fn(&str) -> bool) {
        let mut gone = self.gone.lock().unwrap_or_else(|p| p.into_inner());
        gone.retain(|n| n != name);
        gone.push_back(name.to_owned());
        while gone.len() > MAX_GONE {
            let Some(oldest) = gone.pop_front() else { break };
            if registered(&oldest) {
                continue;
            }
            let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
            if functions.get(&oldest).is_some_and(|f| f.in_flight.load(Ordering::Relaxed) > 0) {
                // Still answering: looked at again at the next removal.
                drop(functions);
                gone.push_back(oldest);
                break;
            }
            functions.remove(&oldest);
        }
    }

    /// Runs `update` on `function`'s cells, creating them on its first request.
    fn with<R>(&self, function: &str, update: impl FnOnce(&FunctionMetrics) -> R) -> R {
        {
            let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
            if let Some(f) = functions.get(function) {
                return update(f);
            }
        }
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        update(functions.entry(function.to_owned()).or_default())
    }

    /// Counts one input that could not be parsed (`reason` is a short label).
    pub fn malformed(&self, protocol: Protocol, reason: &'static str) {
        let mut m = self.malformed.lock().unwrap_or_else(|p| p.into_inner());
        *m.entry((protocol, reason)).or_default() += 1;
    }

    /// Adds a UDP-RPC front end's counters to what [`render`](Self::render) reports. Kept for
    /// the registry's lifetime, so the counters never go back when a front end stops.
    pub(crate) fn register_udp(&self, counters: Arc<UdpCounters>) {
        self.udp.lock().unwrap_or_else(|p| p.into_inner()).push(counters);
    }

    /// Requests counted so far for `function` with outcome label `outcome` (tests, status page).
    pub fn requests(&self, function: &str, outcome: &str) -> u64 {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        let Some(o) = OUTCOMES.iter().position(|l| *l == outcome) else { return 0 };
        functions
            .get(function)
            .map_or(0, |f| f.requests[o].iter().map(|n| n.load(Ordering::Relaxed)).sum())
    }

    /// Every function's cells, copied out under the lock (see the type's doc).
    fn snapshot(&self) -> Vec<(String, Arc<FunctionMetrics>)> {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        functions.iter().map(|(name, m)| (name.clone(), Arc::clone(m))).collect()
    }

    /// Every function's counters so far, by name (the status page's snapshot).
    pub(crate) fn counters(&self) -> BTreeMap<String, FunctionCounters> {
        let functions = self.snapshot();
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        functions
            .iter()
            .map(|(name, m)| {
                let outcomes: BTreeMap<&'static str, u64> = OUTCOMES
                    .iter()
                    .zip(&m.requests)
                    .map(|(label, per_protocol)| (*label, per_protocol.iter().map(load).sum()))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                let latency: Vec<u64> = m.latency.counts.iter().map(load).collect();
                let counters = FunctionCounters {
                    answered: outcomes.values().sum(),
                    outcomes,
                    met: load(&m.met),
                    in_flight: load(&m.in_flight),
                    latency,
                    ran: load(&m.readiness.count),
                    readiness_ns: load(&m.readiness.sum_ns),
                    ran_total_ns: load(&m.ran_total_ns),
                };
                (name.clone(), counters)
            })
            .collect()
    }

    /// Malformed inputs counted so far on `protocol`.
    pub fn malformed_total(&self, protocol: Protocol) -> u64 {
        let m = self.malformed.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().filter(|((p, _), _)| *p == protocol).map(|(_, n)| n).sum()
    }

    /// The Prometheus text exposition of every metric, with gauges read from `runtime`.
    pub fn render(&self, runtime: &Runtime) -> String {
        let functions = self.snapshot();
        let mut out = String::new();
        out.push_str(
            "# HELP luge_requests_total Requests answered, by function, outcome and protocol.\n",
        );
        out.push_str("# TYPE luge_requests_total counter\n");
        for (f, m) in functions.iter() {
            for (o, per_protocol) in OUTCOMES.iter().zip(&m.requests) {
                for (p, n) in PROTOCOLS.iter().zip(per_protocol) {
                    let n = n.load(Ordering::Relaxed);
                    if n > 0 {
                        let _ = writeln!(
                            out,
                            "luge_requests_total{{function=\"{}\",outcome=\"{o}\",protocol=\"{}\"}} {n}",
                            escape(f),
                            p.label()
                        );
                    }
                }
            }
        }
        out.push_str(
            "# HELP luge_deadline_met_total Requests answered with their result within their \
             deadline, by function.\n# TYPE luge_deadline_met_total counter\n",
        );
        for (f, m) in functions.iter() {
            let n = m.met.load(Ordering::Relaxed);
            let _ = writeln!(out, "luge_deadline_met_total{{function=\"{}\"}} {n}", escape(f));
        }
        out.push_str(
            "# HELP luge_in_flight Requests submitted to the runtime and not answered (queued or \
             running), by function.\n# TYPE luge_in_flight gauge\n",
        );
        for (f, m) in functions.iter() {
            let n = m.in_flight.load(Ordering::Relaxed);
            let _ = writeln!(out, "luge_in_flight{{function=\"{}\"}} {n}", escape(f));
        }
        out.push_str(
            "# HELP luge_delivery_margin_seconds Time admission sets aside for the front end to \
             deliver an answer after the runtime has it, by protocol.\n\
             # TYPE luge_delivery_margin_seconds gauge\n",
        );
        for (p, ns) in PROTOCOLS.iter().zip(&self.delivery) {
            let seconds = ns.load(Ordering::Relaxed) as f64 / 1e9;
            let _ = writeln!(
                out,
                "luge_delivery_margin_seconds{{protocol=\"{}\"}} {seconds}",
                p.label()
            );
        }
        type Pick = fn(&FunctionMetrics) -> &Histogram;
        let histograms: [(&str, &str, Pick); 4] = [
            ("luge_request_duration_seconds", "Receipt by the node to answer.", |m| &m.latency),
            ("luge_execution_seconds", "Execution on a worker, instantiation included.", |m| {
                &m.execution
            }),
            (
                "luge_queueing_seconds",
                "Time in the node not executing: receipt to answer minus execution.",
                |m| &m.queueing,
            ),
            (
                "luge_readiness_seconds",
                "Receipt by the node to the first guest instruction (instantiation included).",
                |m| &m.readiness,
            ),
        ];
        for (name, help, pick) in histograms {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
            for (f, m) in functions.iter() {
                let h = pick(m);
                if h.count.load(Ordering::Relaxed) > 0 {
                    h.render(&mut out, name, &format!("function=\"{}\"", escape(f)));
                }
            }
        }
        drop(functions);
        let malformed = self.malformed.lock().unwrap_or_else(|p| p.into_inner()).clone();
        out.push_str("# HELP luge_malformed_total Inputs rejected before routing, by reason.\n");
        out.push_str("# TYPE luge_malformed_total counter\n");
        for ((p, r), n) in &malformed {
            let _ = writeln!(
                out,
                "luge_malformed_total{{protocol=\"{}\",reason=\"{}\"}} {n}",
                p.label(),
                escape(r)
            );
        }
        self.render_udp(&mut out);
        out.push_str(
            "# HELP luge_log_lines_suppressed_total Log lines dropped by the rate limits, by \
             kind: repeated failures (udp_receive, udp_send, internal, accept), guest_stderr, \
             and backlog (written to an output that did not keep up).\n# TYPE luge_log_lines_suppressed_total counter\n",
        );
        let stderr = ("guest_stderr", luge_runtime::stderr_lines_suppressed());
        let backlog = ("backlog", log_limit::backlog_drops());
        let server = LogKind::ALL.map(|kind| (kind.label(), log_limit::suppressed(kind)));
        for (kind, n) in server.into_iter().chain([stderr, backlog]) {
            let _ = writeln!(out, "luge_log_lines_suppressed_total{{kind=\"{kind}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP luge_live_sandboxes Sandboxes alive (running or preempted).\n# TYPE luge_live_sandboxes gauge\nluge_live_sandboxes {}",
            runtime.live_sandboxes()
        );
        let _ = writeln!(
            out,
            "# HELP luge_functions Registered functions.\n# TYPE luge_functions gauge\nluge_functions {}",
            runtime.functions().len()
        );
        render_tenants(&mut out, runtime);
        render_workers(&mut out, runtime);
        out
    }
}

impl Metrics {
    /// `luge_udp_<counter>_total` for every [`UdpStats`] counter, summed over the registered
    /// front ends; nothing when none is registered.
    fn render_udp(&self, out: &mut String) {
        let udp = self.udp.lock().unwrap_or_else(|p| p.into_inner());
        if udp.is_empty() {
            return;
        }
        let total = udp.iter().fold(UdpStats::default(), |sum, c| sum.plus(c.snapshot()));
        drop(udp);
        for (name, help, value) in total.series() {
            let _ = writeln!(
                out,
                "# HELP luge_udp_{name}_total UDP-RPC: {help}\n# TYPE luge_udp_{name}_total counter\nluge_udp_{name}_total {value}"
            );
        }
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The declared tenants' counters (`luge_tenant_*`, labelled by tenant name); nothing when no
/// tenant is declared.
fn render_tenants(out: &mut String, runtime: &Runtime) {
    let tenants = runtime.tenant_stats();
    if tenants.is_empty() {
        return;
    }
    let label =
        |t: &luge_runtime::TenantStats| format!("tenant=\"{}\",id=\"{}\"", escape(&t.name), t.id);
    out.push_str("# HELP luge_tenant_admitted_total Requests admitted within their tenant's limits.\n# TYPE luge_tenant_admitted_total counter\n");
    for t in &tenants {
        let _ = writeln!(out, "luge_tenant_admitted_total{{{}}} {}", label(t), t.admitted);
    }
    out.push_str("# HELP luge_tenant_limited_total Requests refused (429 / TenantLimit) by their tenant's limit, by limit.\n# TYPE luge_tenant_limited_total counter\n");
    for t in &tenants {
        for (limit, n) in luge_runtime::TenantLimit::ALL.iter().zip(t.limited) {
            let _ = writeln!(
                out,
                "luge_tenant_limited_total{{{},limit=\"{}\"}} {n}",
                label(t),
                limit.label()
            );
        }
    }
    out.push_str("# HELP luge_tenant_in_flight Requests of the tenant admitted and not answered.\n# TYPE luge_tenant_in_flight gauge\n");
    for t in &tenants {
        let _ = writeln!(out, "luge_tenant_in_flight{{{}}} {}", label(t), t.in_flight);
    }
    out.push_str("# HELP luge_tenant_cpu_seconds_total CPU time the tenant's answered requests used.\n# TYPE luge_tenant_cpu_seconds_total counter\n");
    for t in &tenants {
        let _ = writeln!(
            out,
            "luge_tenant_cpu_seconds_total{{{}}} {}",
            label(t),
            t.cpu_ns as f64 / 1e9
        );
    }
}

/// A metric family with a sample per dispatcher group: name, type, help, value.
type GroupFamily = (&'static str, &'static str, &'static str, fn(&GroupStats) -> u64);

/// Each worker's busy time and run segments, each group's queue and wake-ups.
fn render_workers(out: &mut String, runtime: &Runtime) {
    let workers = runtime.worker_stats();
    out.push_str("# HELP luge_worker_busy_seconds_total Wall time the worker ran sandboxes.\n# TYPE luge_worker_busy_seconds_total counter\n");
    for w in &workers {
        let s = w.busy.as_secs_f64();
        let _ = writeln!(out, "luge_worker_busy_seconds_total{{worker=\"{}\"}} {s}", w.index);
    }
    out.push_str("# HELP luge_worker_segments_total Run segments the worker ended (completions and preemptions).\n# TYPE luge_worker_segments_total counter\n");
    for w in &workers {
        let n = w.segments;
        let _ = writeln!(out, "luge_worker_segments_total{{worker=\"{}\"}} {n}", w.index);
    }
    out.push_str("# HELP luge_worker_ready_sandboxes Sandboxes the worker keeps instantiated ahead of uLL requests.\n# TYPE luge_worker_ready_sandboxes gauge\n");
    for w in &workers {
        let _ = writeln!(out, "luge_worker_ready_sandboxes{{worker=\"{}\"}} {}", w.index, w.ready);
    }
    out.push_str("# HELP luge_worker_ready_bytes Linear memory of those ready sandboxes, bytes.\n# TYPE luge_worker_ready_bytes gauge\n");
    for w in &workers {
        let _ =
            writeln!(out, "luge_worker_ready_bytes{{worker=\"{}\"}} {}", w.index, w.ready_bytes);
    }
    let groups = runtime.group_stats();
    let families: [GroupFamily; 11] = [
        (
            "luge_group_queued",
            "gauge",
            "Requests a dispatcher group holds that are not running.",
            |g| g.queued as u64,
        ),
        (
            "luge_group_demoted_total",
            "counter",
            "Requests demoted to the best-effort lane (on_overrun = demote).",
            |g| g.demoted,
        ),
        (
            "luge_group_suspended",
            "gauge",
            "Preempted requests of the group holding a suspended sandbox (a pool slot).",
            |g| g.suspended as u64,
        ),
        (
            "luge_group_preemptions_deferred_total",
            "counter",
            "Preemptions deferred: the group held its bound of suspended sandboxes.",
            |g| g.preemptions_deferred,
        ),
        (
            "luge_group_wakeups_total",
            "counter",
            "Wake-ups issued to the group's sleeping dispatcher and worker threads (unparks).",
            |g| g.wakeups,
        ),
        (
            "luge_group_sleeps_total",
            "counter",
            "Times the group's dispatcher and worker threads went to sleep (parks).",
            |g| g.sleeps,
        ),
        (
            "luge_group_deferred_total",
            "counter",
            "Arrivals whose wake-up was left to the periodic notification (notify_interval_us).",
            |g| g.deferred,
        ),
        (
            "luge_group_batched_total",
            "counter",
            "Requests committed behind a worker's run, to start without a hand-off (batch_window_us).",
            |g| g.batched,
        ),
        (
            "luge_group_batch_returned_total",
            "counter",
            "Of the batched requests, those handed back unstarted when the run before them was preempted.",
            |g| g.batch_returned,
        ),
        (
            "luge_group_refused_early_total",
            "counter",
            "Arrivals refused as unreachable at the current load by the thread that received them, on the dispatcher's published backlog.",
            |g| g.refused_early,
        ),
        (
            "luge_group_ull_total",
            "counter",
            "Arrivals that took the uLL lane (class = ull, or an estimate within ull_threshold_us).",
            |g| g.ull,
        ),
    ];
    for (name, kind, help, value) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for g in &groups {
            let _ = writeln!(out, "{name}{{group=\"{}\"}} {}", g.index, value(g));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use luge_runtime::{BadRequest, Failure, Rejection, Timing, TrapKind};

    use super::*;
    use crate::status::outcome_label;

    fn outcome(result: Result<Vec<u8>, Failure>, executed_us: u64) -> Outcome {
        let us = Duration::from_micros;
        Outcome {
            request_id: 1,
            result,
            timing: Timing {
                queued: us(5),
                instantiation: us(executed_us / 2),
                start_up: us(executed_us / 2),
                executed: us(executed_us),
                total: us(5 + executed_us),
                preemptions: 0,
            },
            stages: Vec::new(),
        }
    }

    fn answer(deadline_us: u64) -> Answer {
        Answer { deadline: Duration::from_micros(deadline_us), was_in_flight: false }
    }

    fn every_result() -> Vec<Result<Vec<u8>, Failure>> {
        let rejected = [
            Rejection::DeadlineInfeasible,
            Rejection::DeadlineUnreachable,
            Rejection::Shed,
            Rejection::Overloaded,
            Rejection::PoolExhausted,
            Rejection::BuffersFull,
            Rejection::ShuttingDown,
            Rejection::TenantLimit(luge_runtime::TenantLimit::Rate),
        ];
        let mut all = vec![
            Ok(b"x".to_vec()),
            Err(Failure::Trap(TrapKind::Unreachable)),
            Err(Failure::Killed { budget: Duration::from_millis(1) }),
            Err(Failure::MemoryLimit { cap: 1 }),
            Err(Failure::OutputTooLarge { cap: 1 }),
            Err(Failure::Exit(3)),
            Err(Failure::BadRequest(BadRequest::UnknownFunction("f".into()))),
            Err(Failure::BadRequest(BadRequest::TooLarge { size: 2, cap: 1 })),
            Err(Failure::Internal("x".into())),
            Err(Failure::DeadlineMissed),
        ];
        all.extend(rejected.into_iter().map(|r| Err(Failure::Rejected(r))));
        all
    }

    #[test]
    fn every_outcome_label_has_a_counter() {
        for result in every_result() {
            let label = outcome_label(&result);
            assert!(OUTCOMES.contains(&label), "{label} has no counter");
        }
    }

    #[test]
    fn counts_by_function_outcome_and_protocol() {
        let m = Metrics::new();
        for result in every_result() {
            m.record("f", Protocol::Http, &outcome(result.clone(), 10), answer(1000));
            m.record("f", Protocol::Rpc, &outcome(result, 0), answer(10));
        }
        m.record("g", Protocol::Rpc, &outcome(Ok(Vec::new()), 10), answer(1000));
        assert_eq!(m.requests("f", "ok"), 2);
        assert_eq!(
            m.requests("f", "overloaded"),
            6,
            "Overloaded, PoolExhausted and BuffersFull, both protocols"
        );
        assert_eq!(m.requests("f", "shed"), 2);
        assert_eq!(m.requests("f", "tenant_limit"), 2);
        assert_eq!(m.requests("g", "ok"), 1);
        // Met: answered with its result within its deadline (15 µs ≤ 1 ms, 5 µs ≤ 10 µs).
        m.record("f", Protocol::Rpc, &outcome(Ok(Vec::new()), 10), answer(10));
        m.submitted("f");
        m.submitted("f");
        let in_flight = Answer { was_in_flight: true, ..answer(1000) };
        m.record("f", Protocol::Rpc, &outcome(Err(Failure::Exit(1)), 10), in_flight);
        assert_eq!((m.requests("h", "ok"), m.requests("f", "no-such-label")), (0, 0));
        let functions = m.functions.read().unwrap();
        let f = &functions["f"];
        assert_eq!(f.met.load(Ordering::Relaxed), 2, "a late or failed answer is not met");
        assert_eq!(f.in_flight.load(Ordering::Relaxed), 1);
        // Requests that ran: the HTTP half of every result, and the last two.
        let n = every_result().len() as u64 + 2;
        assert_eq!(f.latency.count.load(Ordering::Relaxed), 2 * n - 2);
        // Execution and queueing only for requests that ran.
        assert_eq!(f.execution.count.load(Ordering::Relaxed), n);
        assert_eq!(f.execution.sum_ns.load(Ordering::Relaxed), n * 10_000);
        let mut out = String::new();
        f.execution.render(&mut out, "x", "function=\"f\"");
        assert!(out.contains(&format!("x_bucket{{function=\"f\",le=\"0.00001\"}} {n}\n")), "{out}");
        assert!(out.contains(&format!("x_count{{function=\"f\"}} {n}\n")), "{out}");
        let sum = format!("x_sum{{function=\"f\"}} {}\n", n as f64 * 10e-6);
        assert!(out.contains(&sum), "{sum} in {out}");
        // Queueing is receipt to answer minus execution (5 µs here), readiness is queueing up to
        // the sandbox (5 µs) plus its instantiation (5 µs), as the HTTP headers report them.
        assert_eq!(f.queueing.sum_ns.load(Ordering::Relaxed), n * 5_000);
        assert_eq!(f.readiness.sum_ns.load(Ordering::Relaxed), n * 10_000);
    }

    #[test]
    fn only_the_last_unregistered_keep_their_metrics() {
        let m = Metrics::new();
        let ok = || outcome(Ok(Vec::new()), 10);
        let name = |i: usize| format!("fn-{i}");
        for i in 0..MAX_GONE + 10 {
            m.record(&name(i), Protocol::Http, &ok(), answer(1000));
        }
        m.submitted(&name(1)); // still in flight when it goes
        let back = name(2); // registered again
        for i in 0..MAX_GONE + 10 {
            m.unregistered(&name(i), |n| n == back);
        }
        let kept = m.snapshot();
        // The last 256 (fn-1 among them: in flight when its turn came, it went to the back)
        // and fn-2, which is back.
        assert_eq!(kept.len(), MAX_GONE + 1);
        assert!(kept.iter().any(|(n, _)| *n == name(1)) && kept.iter().any(|(n, _)| *n == back));
        assert!(!kept.iter().any(|(n, _)| *n == name(0)), "the oldest is forgotten");
        assert!(!kept.iter().any(|(n, _)| *n == name(10)));
        assert!(kept.iter().any(|(n, _)| *n == name(11)), "the oldest kept");
        // Unregistered again, a name is the newest, not forgotten as its first removal's age.
        m.unregistered(&name(11), |_| false);
        m.unregistered("another", |_| false);
        assert!(m.snapshot().iter().any(|(n, _)| *n == name(11)));
        assert!(!m.snapshot().iter().any(|(n, _)| *n == name(12)), "the oldest now");
        // The one that was in flight is forgotten at a removal after its answer.
        let done = Answer { was_in_flight: true, ..answer(1000) };
        m.record(&name(1), Protocol::Http, &ok(), done);
        for i in 0..=MAX_GONE {
            m.unregistered(&format!("later-{i}"), |_| false);
        }
        assert!(!m.snapshot().iter().any(|(n, _)| *n == name(1)), "fn-1 is forgotten");
    }

    #[test]
    fn a_request_above_the_last_bucket_has_a_count_of_its_own() {
        let h = Histogram::default();
        h.observe(Duration::from_secs(11));
        h.observe(Duration::from_micros(5));
        let counts: Vec<u64> = h.counts.iter().map(|n| n.load(Ordering::Relaxed)).collect();
        assert_eq!((counts[0], counts[BUCKETS.len()], counts.iter().sum::<u64>()), (1, 1, 2));
        let mut out = String::new();
        h.render(&mut out, "x", "f=\"f\"");
        assert!(out.contains("x_bucket{f=\"f\",le=\"10\"} 1\n"), "{out}");
        assert!(out.contains("x_bucket{f=\"f\",le=\"+Inf\"} 2\n"), "{out}");
    }

    #[test]
    fn malformed_inputs_are_counted_per_protocol() {
        let m = Metrics::new();
        m.malformed(Protocol::Http, "bad_header");
        m.malformed(Protocol::Http, "bad_header");
        m.malformed(Protocol::Rpc, "short");
        assert_eq!((m.malformed_total(Protocol::Http), m.malformed_total(Protocol::Rpc)), (2, 1));
    }
}
