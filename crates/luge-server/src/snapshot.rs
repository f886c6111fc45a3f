//! The node's state as one JSON document (`GET /admin/status.json`), what the status page polls:
//! every function's and chain's counters, the declared tenants', each worker's busy time and
//! each group's queue, and the node's configuration and limits. Every count is cumulative since
//! the node started, stamped with the node's own uptime, so a reader derives rates, shares and
//! percentiles over any interval from two snapshots without trusting its own clock.

use std::collections::BTreeMap;
use std::time::Duration;

use luge_runtime::{Health, Runtime, TenantLimit};
use serde::Serialize;

use crate::metrics::{BUCKETS, FunctionCounters, Metrics};

/// The whole document.
#[derive(Debug, Serialize)]
pub(crate) struct Snapshot {
    /// Luge's version.
    pub version: &'static str,
    /// Time since the front end started, ns: the clock every rate is taken against.
    pub uptime_ns: u64,
    /// The node's health, configuration and limits.
    pub node: NodeStatus,
    /// Upper bounds of the latency buckets, seconds; `FunctionStatus::latency` has one count
    /// per bound and one for everything above the last.
    pub buckets: &'static [f64],
    /// Registered functions and chains (and any that served requests and are gone), by name.
    pub functions: Vec<FunctionStatus>,
    /// The declared tenants.
    pub tenants: Vec<TenantStatus>,
    /// Each worker.
    pub workers: Vec<WorkerStatus>,
    /// Each dispatcher group.
    pub groups: Vec<GroupStatus>,
}

/// The node: health, what it runs with, and the front end's own limits.
#[derive(Debug, Serialize)]
pub(crate) struct NodeStatus {
    /// `"ready"`, or why not (what `/readyz` says).
    pub health: String,
    pub policy: String,
    pub layout: String,
    /// The uLL lane's threshold, µs (`ull_threshold_us`), or `None` with the lane off.
    pub ull_threshold_us: Option<u64>,
    /// Ready sandboxes per uLL function (`ready_sandboxes`; 0 with the lane off).
    pub ready_sandboxes: usize,
    pub workers: usize,
    pub dispatchers: usize,
    pub max_sandboxes: u32,
    pub live_sandboxes: u64,
    pub max_memory_bytes: u64,
    pub submit_queue: usize,
    pub shutdown_grace_ms: u64,
    /// The HTTP front end serving this page.
    pub http: HttpStatus,
}

/// The HTTP front end's limits and gauges.
#[derive(Debug, Serialize)]
pub(crate) struct HttpStatus {
    pub addr: String,
    /// The function listener's (not the admin listener's, which serves this page).
    pub connections: usize,
    pub max_connections: usize,
    pub max_connections_per_client: usize,
    pub refused_connections: u64,
    /// The function listener's requests being handled.
    pub in_flight: usize,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    pub send_timeout_ms: u64,
    /// Bytes per second an answer waiting on its client must go out at (0 = no minimum).
    pub min_send_rate: u64,
    /// Request bodies held now, and their bounds: the whole and one client's share (0 = none).
    pub buffered_body_bytes: u64,
    pub max_buffered_body_bytes: u64,
    pub max_buffered_body_bytes_per_client: u64,
    /// Bodies refused because their client held its share.
    pub bodies_refused_per_client: u64,
    pub max_module_bytes: u64,
    pub request_log: String,
}

/// One function or chain.
#[derive(Debug, Serialize)]
pub(crate) struct FunctionStatus {
    pub name: String,
    /// `"function"`, `"chain"`, or `"gone"` (unregistered since it served requests).
    pub kind: &'static str,
    /// Tenant id (a chain: its first stage's); `None` when gone.
    pub tenant: Option<u32>,
    /// Its default relative deadline, µs.
    pub deadline_us: Option<u64>,
    #[serde(flatten)]
    pub counters: FunctionCounters,
}

/// One declared tenant.
#[derive(Debug, Serialize)]
pub(crate) struct TenantStatus {
    pub id: u32,
    pub name: String,
    pub admitted: u64,
    /// Refused by its limits, by limit.
    pub limited: BTreeMap<&'static str, u64>,
    pub in_flight: u32,
    pub cpu_ns: u64,
}

/// One worker.
#[derive(Debug, Serialize)]
pub(crate) struct WorkerStatus {
    pub index: usize,
    pub group: usize,
    /// Wall time it ran sandboxes, ns: utilisation is its growth over an interval.
    pub busy_ns: u64,
    pub segments: u64,
    /// Ready sandboxes it holds for uLL functions, and their linear memory, bytes.
    pub ready: u64,
    pub ready_bytes: u64,
}

/// One dispatcher group.
#[derive(Debug, Serialize)]
pub(crate) struct GroupStatus {
    pub index: usize,
    pub workers: Vec<usize>,
    /// Requests it holds that are not running.
    pub queued: usize,
}

/// Reads the node's state now.
pub(crate) fn take(
    metrics: &Metrics,
    runtime: &Runtime,
    uptime: Duration,
    health: Health,
    http: HttpStatus,
) -> Snapshot {
    let config = runtime.config();
    let mut counters = metrics.counters();
    let mut functions = Vec::new();
    let mut entry = |name: &str, kind, tenant, deadline: Duration| FunctionStatus {
        name: name.to_owned(),
        kind,
        tenant,
        deadline_us: Some(luge_proto::micros(deadline)),
        counters: counters.remove(name).unwrap_or_else(|| empty(BUCKETS.len() + 1)),
    };
    for f in runtime.functions() {
        let c = &f.config;
        functions.push(entry(&c.name, "function", Some(c.tenant), c.relative_deadline));
    }
    for chain in runtime.chains() {
        let tenant = chain.stages.first().map(|f| f.config.tenant);
        functions.push(entry(&chain.config.name, "chain", tenant, chain.config.relative_deadline));
    }
    functions.extend(counters.into_iter().map(|(name, counters)| FunctionStatus {
        name,
        kind: "gone",
        tenant: None,
        deadline_us: None,
        counters,
    }));
    functions.sort_by(|a, b| a.name.cmp(&b.name));
    let tenants = runtime
        .tenant_stats()
        .into_iter()
        .map(|t| TenantStatus {
            id: t.id,
            limited: TenantLimit::ALL.iter().map(|l| l.label()).zip(t.limited).collect(),
            name: t.name,
            admitted: t.admitted,
            in_flight: t.in_flight,
            cpu_ns: t.cpu_ns,
        })
        .collect();
    let workers = runtime
        .worker_stats()
        .into_iter()
        .map(|w| WorkerStatus {
            index: w.index,
            group: w.group,
            busy_ns: luge_proto::nanos(w.busy),
            segments: w.segments,
            ready: w.ready,
            ready_bytes: w.ready_bytes,
        })
        .collect();
    let groups = runtime
        .group_stats()
        .into_iter()
        .map(|g| GroupStatus { index: g.index, workers: g.workers, queued: g.queued })
        .collect();
    Snapshot {
        version: env!("CARGO_PKG_VERSION"),
        uptime_ns: luge_proto::nanos(uptime),
        node: NodeStatus {
            health: match health {
                Health::Ready => "ready".to_owned(),
                Health::NotReady(why) => format!("not ready: {why}"),
            },
            policy: config.policy.to_string(),
            layout: config.effective_layout().name().to_owned(),
            ull_threshold_us: config
                .ull_lane
                .then(|| u64::try_from(config.ull_threshold.as_micros()).unwrap_or(u64::MAX)),
            ready_sandboxes: if config.ull_lane { config.ready_sandboxes } else { 0 },
            workers: config.workers,
            dispatchers: config.dispatchers,
            max_sandboxes: config.max_sandboxes,
            live_sandboxes: runtime.live_sandboxes(),
            max_memory_bytes: config.max_memory_bytes,
            submit_queue: config.submit_queue,
            shutdown_grace_ms: u64::try_from(config.shutdown_grace.as_millis()).unwrap_or(u64::MAX),
            http,
        },
        buckets: &BUCKETS,
        functions,
        tenants,
        workers,
        groups,
    }
}

/// The counters of a function that has not been called.
fn empty(buckets: usize) -> FunctionCounters {
    FunctionCounters {
        answered: 0,
        outcomes: BTreeMap::new(),
        met: 0,
        in_flight: 0,
        latency: vec![0; buckets],
        ran: 0,
        readiness_ns: 0,
        ran_total_ns: 0,
    }
}
