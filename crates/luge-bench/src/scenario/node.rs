//! The servers a scenario starts in-process: a Luge node (runtime + the front ends it needs,
//! configured as `luge serve` configures them) and the baselines of `crate::baseline`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use luge_runtime::{
    Admission, Layout, PolicyConfig, PolicyKind, Runtime, RuntimeConfig, TenantConfig, WaitMode,
};
use luge_server::{HttpConfig, Node, NodeConfig, Tracing, UdpConfig};
use serde::Serialize;

use super::{Protocol, ScenarioOptions, layout_name, wait_name};
use crate::baseline::{
    BareHttpConfig, BareHttpServer, ProcessConfig, ProcessServer, UdpEchoConfig, UdpEchoServer,
    native_program,
};
use crate::error::BenchError;
use crate::plan::Mapping;
use crate::target::{FunctionRef, Target};

/// A function a Luge node serves (settings, HTTP route and module, Wasm or WAT), and a chain of
/// them (stages, deadline, HTTP route).
pub use luge_server::{NodeChain, NodeFunction};

pub(crate) use luge_runtime::{affinity, set_affinity};

/// Where the threads of a scenario run (see [`Pin`](super::Pin)): the load generator on
/// `client`; each baseline's server threads on `server`; Luge's worker on `server` and, with
/// `whole_node`, every other thread of the node (front ends, ticker, dispatcher) too — else
/// those stay on `client`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pinning {
    pub client: usize,
    pub server: usize,
    pub whole_node: bool,
}

impl Pinning {
    /// The first and last CPU this process may use, if there are two or more.
    pub(crate) fn detect(pin: super::Pin) -> Option<Self> {
        let whole_node = match pin {
            super::Pin::None => return None,
            super::Pin::Worker => false,
            super::Pin::Server => true,
        };
        let cpus = affinity();
        match (cpus.first(), cpus.last()) {
            (Some(&client), Some(&server)) if client != server => {
                Some(Self { client, server, whole_node })
            }
            _ => None,
        }
    }

    pub(crate) fn describe(p: Option<Self>) -> String {
        match p {
            Some(p) if p.whole_node => format!(
                "pinned (`--pin server`): every thread of Luge and of the baselines on CPU {}, the \
                 load generator on CPU {}",
                p.server, p.client
            ),
            Some(p) => format!(
                "pinned (`--pin worker`): Luge's worker and the baselines' servers on CPU {}, \
                 Luge's front ends and the load generator on CPU {}",
                p.server, p.client
            ),
            None => "not pinned".to_owned(),
        }
    }

    /// Runs `start` with the calling thread on the server CPU, so that what it spawns stays
    /// there; then back on the client CPU.
    fn on_server<T>(p: Option<Self>, start: impl FnOnce() -> T) -> T {
        let Some(p) = p else { return start() };
        set_affinity(&[p.server]);
        let out = start();
        set_affinity(&[p.client]);
        out
    }
}

const LOOPBACK: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0);
const GRACE: Duration = Duration::from_secs(2);

fn fail(what: impl std::fmt::Display, e: impl std::fmt::Display) -> BenchError {
    BenchError::Scenario(format!("{what}: {e}"))
}

/// How to start a Luge node.
#[derive(Debug, Clone)]
pub(crate) struct NodeSpec {
    pub policy: PolicyKind,
    pub wait: WaitMode,
    pub layout: Layout,
    pub protocols: Vec<Protocol>,
    pub cache_dir: Option<PathBuf>,
    /// Busy-poll the UDP socket too (`rpc_busy_poll`; off, as in `luge serve`, even with
    /// `--spin`: on a 2-core box a second spinning thread starves the client).
    pub udp_busy_poll: bool,
    /// Pin the worker to the server CPU (the rest stays on the caller's CPUs).
    pub pin: Option<Pinning>,
    /// Deadline-aware admission (admission on the wait and shedding), on as `luge serve` ships
    /// it; off, the node refuses only the infeasible and beyond its 4 096-request queue cap,
    /// as it did before (`luge bench overload --no-deadline-admission`, for a before/after).
    pub deadline_admission: bool,
    /// The papers' setting instead: admission off altogether ([`Admission::NONE`]: nothing
    /// refused, shed or demoted; `luge bench edge-rt`'s `edf`).
    pub papers_admission: bool,
    /// Tenants with limits (`luge bench tenants`; none otherwise, as `luge serve` without
    /// `[[tenant]]` tables).
    pub tenants: Vec<TenantConfig>,
    /// Span export (`luge bench tracing`; none otherwise, as `luge serve` without
    /// `--otlp-endpoint`).
    pub tracing: Option<Tracing>,
    /// Chains of the node's functions (`luge bench chain`; none otherwise).
    pub chains: Vec<NodeChain>,
    /// Periodic notification of arrivals (`notify_interval_us`; off, as `luge serve` ships,
    /// except in `luge bench edge-rt --figures 6b`).
    pub notify_interval: Duration,
    /// Deadline-limited batching (`batch_window_us`; off, as `luge serve` ships, except in
    /// `luge bench edge-rt --figures 6a`).
    pub batch_window: Duration,
    /// The uLL lane (`ull_lane`; on, as `luge serve` ships, except in `luge bench horse`'s
    /// `off` condition).
    pub ull_lane: bool,
    /// Ready sandboxes per uLL function (`ready_sandboxes`; 2, as `luge serve` ships, except
    /// in `luge bench horse`'s `lane` condition).
    pub ready_sandboxes: usize,
    /// Memory from the copy-on-write image (`memory_init_cow`; on, as `luge serve` ships, except
    /// in `luge bench density --memory-init copy`).
    pub memory_init_cow: bool,
}

impl NodeSpec {
    /// The scheduling settings of the node this starts: the runtime's defaults with this
    /// spec's batch window and admission (what `luge bench overload` also simulates).
    pub(crate) fn policy_config(&self) -> PolicyConfig {
        let mut c = RuntimeConfig::default().policy_config;
        c.batch_window = u64::try_from(self.batch_window.as_nanos()).unwrap_or(u64::MAX);
        if !self.deadline_admission {
            c.admission.on_wait = false;
            c.admission.shed = false;
        }
        if self.papers_admission {
            c.admission = Admission::NONE;
        }
        c
    }

    pub(crate) fn new(wait: WaitMode, layout: Layout, protocols: &[Protocol]) -> Self {
        Self {
            policy: PolicyKind::SledgeScale,
            wait,
            layout,
            protocols: protocols.to_vec(),
            cache_dir: None,
            udp_busy_poll: false,
            pin: None,
            deadline_admission: true,
            papers_admission: false,
            tenants: Vec::new(),
            tracing: None,
            chains: Vec::new(),
            notify_interval: Duration::ZERO,
            batch_window: Duration::ZERO,
            ull_lane: RuntimeConfig::default().ull_lane,
            ready_sandboxes: RuntimeConfig::default().ready_sandboxes,
            memory_init_cow: RuntimeConfig::default().memory_init_cow,
        }
    }

    /// The node of a scenario, on one protocol: the AoT cache of `opts`, pinned as `pin` says.
    pub(crate) fn of(
        opts: &ScenarioOptions,
        wait: WaitMode,
        layout: Layout,
        protocol: Protocol,
        pin: Option<Pinning>,
    ) -> Self {
        Self { cache_dir: opts.cache_dir.clone(), pin, ..Self::new(wait, layout, &[protocol]) }
    }

    /// `luge (inline, sleep, sledgescale)`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "luge ({} layout, {} wait, {}, 1 worker{})",
            layout_name(self.layout),
            wait_name(self.wait),
            self.policy,
            if self.papers_admission {
                ", admission off"
            } else if self.deadline_admission {
                ""
            } else {
                ", no deadline admission"
            }
        )
    }
}

/// A running Luge node: 1 worker, 1 dispatcher, the front ends asked for, started and stopped
/// through [`luge_server::Node`] as `luge serve` does.
pub(crate) struct LugeNode {
    node: Node,
    functions: HashMap<String, FunctionRef>,
}

impl LugeNode {
    /// Starts the runtime, registers `functions` and starts the front ends.
    pub(crate) fn start(spec: &NodeSpec, functions: &[NodeFunction]) -> Result<Self, BenchError> {
        match spec.pin {
            Some(p) if p.whole_node => {
                Pinning::on_server(Some(p), || Self::start_here(spec, functions))
            }
            _ => Self::start_here(spec, functions),
        }
    }

    /// Starts a node, runs `f` against it and stops it (every request answered first), whether
    /// `f` succeeded or not.
    pub(crate) fn with<T>(
        spec: &NodeSpec,
        functions: &[NodeFunction],
        f: impl FnOnce(&LugeNode) -> Result<T, BenchError>,
    ) -> Result<T, BenchError> {
        let node = Self::start(spec, functions)?;
        let out = f(&node);
        node.stop();
        out
    }

    fn start_here(spec: &NodeSpec, functions: &[NodeFunction]) -> Result<Self, BenchError> {
        let mut runtime = RuntimeConfig {
            workers: 1,
            dispatchers: 1,
            policy: spec.policy,
            wait: spec.wait,
            layout: spec.layout,
            cache_dir: spec.cache_dir.clone(),
            cpus: spec.pin.map(|p| vec![p.server]).unwrap_or_default(),
            shutdown_grace: GRACE,
            notify_interval: spec.notify_interval,
            ull_lane: spec.ull_lane,
            ready_sandboxes: spec.ready_sandboxes,
            memory_init_cow: spec.memory_init_cow,
            tenants: spec.tenants.clone(),
            ..RuntimeConfig::default()
        };
        runtime.policy_config = spec.policy_config();
        let config = NodeConfig {
            runtime,
            http: spec.protocols.contains(&Protocol::Http).then(|| HttpConfig {
                addr: LOOPBACK,
                threads: 1,
                tracing: spec.tracing.clone(),
                ..HttpConfig::default()
            }),
            udp: spec.protocols.contains(&Protocol::Udp).then(|| UdpConfig {
                addr: LOOPBACK,
                busy_poll: spec.udp_busy_poll,
                tracing: spec.tracing.clone(),
                ..UdpConfig::default()
            }),
        };
        let node = Node::start_with_chains(config, functions, &spec.chains)
            .map_err(|e| fail("cannot start the node", e))?;
        let mut functions_by_name = HashMap::new();
        for f in functions {
            let registered = node.runtime().function(&f.config.name).ok_or_else(|| {
                BenchError::Scenario(format!("{} was not registered", f.config.name))
            })?;
            functions_by_name
                .insert(f.config.name.clone(), FunctionRef::new(registered.id.0, f.route.clone()));
        }
        // A chain is called like a function: by its route, or its id in the functions' space.
        for c in &spec.chains {
            let registered = node.runtime().chain(&c.config.name).ok_or_else(|| {
                BenchError::Scenario(format!("chain {} was not registered", c.config.name))
            })?;
            functions_by_name
                .insert(c.config.name.clone(), FunctionRef::new(registered.id.0, c.route.clone()));
        }
        Ok(Self { node, functions: functions_by_name })
    }

    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        self.node.runtime()
    }

    /// The HTTP front end, if the node has one.
    pub(crate) fn http(&self) -> Option<&luge_server::HttpServer> {
        self.node.http()
    }

    /// The HTTP front end's address, if the node has one.
    pub(crate) fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.node.http_addr()
    }

    /// Where to send on a protocol.
    pub(crate) fn target(&self, p: Protocol) -> Result<Target, BenchError> {
        match p {
            Protocol::Udp => self.node.rpc_addr().map(Target::Rpc),
            Protocol::Http => self.node.http_addr().map(Target::http),
        }
        .ok_or_else(|| BenchError::Scenario(format!("the node serves no {}", p.name())))
    }

    /// A registered function or chain.
    pub(crate) fn function(&self, name: &str) -> Result<FunctionRef, BenchError> {
        self.functions.get(name).cloned().ok_or_else(|| {
            BenchError::Scenario(format!(
                "the node has no function `{name}` (give it among the node's functions)"
            ))
        })
    }

    /// Every call to the node's `noop`, with an empty body.
    pub(crate) fn noop(&self) -> Result<Mapping, BenchError> {
        Ok(Mapping::Fixed { function: self.function("noop")?, payload: Vec::new() })
    }

    /// Stops the node in order (every request is answered first).
    pub(crate) fn stop(self) {
        self.node.shutdown();
    }
}

/// The baselines of `luge bench compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BaselineKind {
    /// Luge's UDP front end minus the runtime.
    UdpEcho,
    /// hyper 1 answering `200 ok`.
    BareHttp,
    /// A fresh native process per request.
    Process,
}

impl BaselineKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BaselineKind::UdpEcho => "udp-echo",
            BaselineKind::BareHttp => "bare-hyper",
            BaselineKind::Process => "process",
        }
    }
}

/// Which server a no-op measurement is of, as the `compare` and `noop` tables and reports name
/// it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ServerId {
    /// `udp` or `http`.
    pub protocol: &'static str,
    /// `luge` or the baseline's name.
    pub server: String,
    /// Luge: its layout; baselines: `-`.
    pub layout: String,
    /// Luge and UDP baselines: the wait mode; others `-` (none).
    pub wait: String,
}

impl ServerId {
    /// The table columns of [`cells`](Self::cells).
    pub(crate) const COLUMNS: [&'static str; 4] = ["protocol", "server", "layout", "wait"];

    /// Luge in `layout` with `wait`.
    pub(crate) fn luge(protocol: Protocol, wait: WaitMode, layout: Layout) -> Self {
        Self {
            protocol: protocol.name(),
            server: "luge".into(),
            layout: layout_name(layout).into(),
            wait: wait_name(wait).into(),
        }
    }

    /// A baseline, with `wait` if it has a wait mode.
    pub(crate) fn baseline(kind: BaselineKind, protocol: Protocol, wait: Option<WaitMode>) -> Self {
        Self {
            protocol: protocol.name(),
            server: kind.name().into(),
            layout: "-".into(),
            wait: wait.map_or("-".into(), |w| wait_name(w).into()),
        }
    }

    /// The table cells, in [`COLUMNS`](Self::COLUMNS) order.
    pub(crate) fn cells(&self) -> Vec<String> {
        vec![self.protocol.into(), self.server.clone(), self.layout.clone(), self.wait.clone()]
    }

    /// The columns of a table of servers: [`COLUMNS`](Self::COLUMNS), then `more`.
    pub(crate) fn columns<'a>(more: &[&'a str]) -> Vec<&'a str> {
        Self::COLUMNS.iter().chain(more).copied().collect()
    }

    /// This server's row of such a table: its [`cells`](Self::cells), then `more`.
    pub(crate) fn row(&self, more: Vec<String>) -> Vec<String> {
        let mut row = self.cells();
        row.extend(more);
        row
    }
}

/// A running baseline.
pub(crate) enum Baseline {
    Echo(UdpEchoServer),
    Bare(BareHttpServer),
    Process(ProcessServer),
}

/// The program of the process baseline: the given one, else the native no-op build, else
/// `/bin/true`.
pub(crate) fn process_program(given: Option<&Path>) -> PathBuf {
    given
        .map(Path::to_path_buf)
        .or_else(|| native_program(Path::new("functions"), "noop"))
        .unwrap_or_else(|| PathBuf::from("/bin/true"))
}

/// The `noop` function of `functions` alone: what the no-op scenarios serve.
pub(crate) fn noop_only(functions: &[NodeFunction]) -> Vec<NodeFunction> {
    functions.iter().filter(|f| f.config.name == "noop").cloned().collect()
}

impl Baseline {
    /// Every call to a baseline's no-op: baselines ignore the function id and route.
    pub(crate) fn noop() -> Mapping {
        Mapping::Fixed { function: FunctionRef::new(1, "/noop"), payload: Vec::new() }
    }

    /// Starts a baseline, runs `f` against it and stops it, whether `f` succeeded or not.
    pub(crate) fn with<T>(
        kind: BaselineKind,
        protocol: Protocol,
        busy_poll: bool,
        program: &Path,
        pin: Option<Pinning>,
        f: impl FnOnce(&Baseline) -> Result<T, BenchError>,
    ) -> Result<T, BenchError> {
        let server = Self::start(kind, protocol, busy_poll, program, pin)?;
        let out = f(&server);
        server.stop();
        out
    }

    /// Starts a baseline on `protocol` (`busy_poll` applies to the UDP ones).
    pub(crate) fn start(
        kind: BaselineKind,
        protocol: Protocol,
        busy_poll: bool,
        program: &Path,
        pin: Option<Pinning>,
    ) -> Result<Self, BenchError> {
        Pinning::on_server(pin, || Self::start_here(kind, protocol, busy_poll, program))
    }

    fn start_here(
        kind: BaselineKind,
        protocol: Protocol,
        busy_poll: bool,
        program: &Path,
    ) -> Result<Self, BenchError> {
        let what = format!("cannot start the {} baseline", kind.name());
        Ok(match (kind, protocol) {
            (BaselineKind::UdpEcho, Protocol::Udp) => Baseline::Echo(
                UdpEchoServer::start(UdpEchoConfig {
                    addr: LOOPBACK,
                    busy_poll,
                    ..UdpEchoConfig::default()
                })
                .map_err(|e| fail(&what, e))?,
            ),
            (BaselineKind::BareHttp, Protocol::Http) => Baseline::Bare(
                BareHttpServer::start(BareHttpConfig {
                    addr: LOOPBACK,
                    threads: 1,
                    ..BareHttpConfig::default()
                })
                .map_err(|e| fail(&what, e))?,
            ),
            (BaselineKind::Process, p) => Baseline::Process(
                ProcessServer::start(ProcessConfig {
                    http_addr: (p == Protocol::Http).then_some(LOOPBACK),
                    udp_addr: (p == Protocol::Udp).then_some(LOOPBACK),
                    program: program.to_path_buf(),
                    busy_poll,
                    ..ProcessConfig::default()
                })
                .map_err(|e| fail(&what, e))?,
            ),
            (k, p) => {
                return Err(BenchError::Scenario(format!(
                    "the {} baseline does not speak {}",
                    k.name(),
                    p.name()
                )));
            }
        })
    }

    pub(crate) fn target(&self) -> Result<Target, BenchError> {
        match self {
            Baseline::Echo(s) => Ok(Target::Rpc(s.local_addr())),
            Baseline::Bare(s) => Ok(Target::http(s.local_addr())),
            Baseline::Process(s) => s
                .udp_addr()
                .map(Target::Rpc)
                .or_else(|| s.http_addr().map(Target::http))
                .ok_or_else(|| BenchError::Scenario("the process baseline has no address".into())),
        }
    }

    pub(crate) fn stop(self) {
        match self {
            Baseline::Echo(s) => s.shutdown(),
            Baseline::Bare(s) => s.shutdown(),
            Baseline::Process(s) => {
                let _ = s.shutdown();
            }
        }
    }
}
