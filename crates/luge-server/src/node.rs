//! A Luge node: the runtime, its functions, the front ends that serve them and their ordered
//! shutdown, owned by one value so that `luge serve`, the benchmarks and the tests start and
//! stop a node the same way.
//!
//! Start-up registers every function before the front ends bind, and the HTTP front end starts
//! with every route in place, so the first request a socket accepts finds its function. Shutdown runs in this order:
//! 1. stop accepting: UDP-RPC answers new requests `ShuttingDown`, HTTP stops accepting
//!    connections and answers new requests on open ones 503;
//! 2. drain: requests in flight get their answers, for up to the runtime's `shutdown_grace`;
//! 3. what still waits after the grace is answered "shutting down" (HTTP 503; UDP-RPC answers
//!    when the runtime does);
//! 4. the runtime stops its dispatchers and workers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use luge_runtime::{ChainConfig, FunctionConfig, Runtime, RuntimeConfig};

use crate::http::{HttpConfig, HttpError, HttpServer, check_route};
use crate::metrics::Metrics;
use crate::trace::Tracing;
use crate::udp::{UdpConfig, UdpError, UdpServer};

/// What a node runs: the runtime's configuration and the front ends to open (`None`: not
/// served over that protocol).
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Workers, dispatchers, policy, admission, limits, grace period.
    pub runtime: RuntimeConfig,
    /// The HTTP/1.1 front end.
    pub http: Option<HttpConfig>,
    /// The UDP-RPC front end.
    pub udp: Option<UdpConfig>,
}

/// A function to serve: its configuration, its module (Wasm bytes) and its HTTP route.
#[derive(Debug, Clone)]
pub struct NodeFunction {
    /// Name, limits, deadline, tenant.
    pub config: FunctionConfig,
    /// The Wasm module.
    pub module: Vec<u8>,
    /// The HTTP path that reaches it, e.g. `/resize` (`/<name>` always does too).
    pub route: String,
}

/// A chain to serve (Edge-RT §III): its declaration (stages among the node's functions) and
/// its HTTP route. UDP-RPC names it by its id, as a function.
#[derive(Debug, Clone)]
pub struct NodeChain {
    /// Name, stages, deadline.
    pub config: ChainConfig,
    /// The HTTP route (`/<name>` always works too).
    pub route: String,
}

/// Why a node could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The runtime refused its configuration or could not start its threads.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] luge_runtime::Error),
    /// A function could not be registered.
    #[error("cannot register {name}: {source}")]
    Register {
        /// The function.
        name: String,
        /// Cause.
        #[source]
        source: luge_runtime::Error,
    },
    /// A route is not a valid path.
    #[error("cannot route {route} to {name}: {source}")]
    Route {
        /// The path.
        route: String,
        /// The function.
        name: String,
        /// Cause.
        #[source]
        source: HttpError,
    },
    /// The HTTP front end could not start.
    #[error(transparent)]
    Http(HttpError),
    /// The UDP-RPC front end could not start.
    #[error(transparent)]
    Udp(UdpError),
}

/// A running node.
#[derive(Debug)]
pub struct Node {
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    http: Option<HttpServer>,
    udp: Option<UdpServer>,
    /// The front ends' span exports (each once), flushed at shutdown.
    tracing: Vec<Tracing>,
}

/// What [`Node::shutdown`] left unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ShutdownReport {
    /// UDP-RPC requests still running when the grace period ended (answered if the runtime
    /// still answers them; HTTP answers its own 503 at the end of the grace).
    pub udp_unanswered: usize,
}

/// Fails if an address the node will listen on is held by another socket, before the runtime
/// starts or any module is compiled (which can take minutes on a big manifest): each is bound
/// once and let go at once. The real bind, later, still decides; this catches the usual mistake
/// early, another process on the port. A UDP port that another process shares with
/// `SO_REUSEPORT` is refused here too, rather than shared without a word. Port 0 is not probed.
fn probe_listeners(http: Option<&HttpConfig>, udp: Option<&UdpConfig>) -> Result<(), NodeError> {
    let tcp =
        http.into_iter().flat_map(|h| [Some(h.addr), h.admin.as_ref().map(|a| a.addr), h.agent]);
    for addr in tcp.flatten().filter(|a| a.port() != 0) {
        if let Err(source) = std::net::TcpListener::bind(addr) {
            return Err(NodeError::Http(HttpError::Bind { addr, source }));
        }
    }
    if let Some(addr) = udp.map(|u| u.addr).filter(|a| a.port() != 0)
        && let Err(source) = std::net::UdpSocket::bind(addr)
    {
        return Err(NodeError::Udp(UdpError::Bind { addr, source }));
    }
    Ok(())
}

impl Node {
    /// Starts the runtime, registers `functions`, then opens the front ends. On an error,
    /// whatever had started is stopped again.
    pub fn start(config: NodeConfig, functions: &[NodeFunction]) -> Result<Self, NodeError> {
        Self::start_with_chains(config, functions, &[])
    }

    /// [`start`](Self::start), and registers `chains` (after the functions, before the front
    /// ends open).
    pub fn start_with_chains(
        config: NodeConfig,
        functions: &[NodeFunction],
        chains: &[NodeChain],
    ) -> Result<Self, NodeError> {
        let mut tracing: Vec<Tracing> = Vec::new();
        let exports = [
            config.http.as_ref().and_then(|h| h.tracing.clone()),
            config.udp.as_ref().and_then(|u| u.tracing.clone()),
        ];
        for t in exports.into_iter().flatten() {
            if !tracing.contains(&t) {
                tracing.push(t);
            }
        }
        probe_listeners(config.http.as_ref(), config.udp.as_ref())?;
        let runtime = Arc::new(Runtime::start(config.runtime).map_err(NodeError::Runtime)?);
        let started = Self::open(&runtime, config.http, config.udp, functions, chains);
        if started.is_err() {
            runtime.shutdown();
        }
        let (metrics, http, udp) = started?;
        Ok(Self { runtime, metrics, http, udp, tracing })
    }

    #[allow(clippy::type_complexity)]
    fn open(
        runtime: &Arc<Runtime>,
        http: Option<HttpConfig>,
        udp: Option<UdpConfig>,
        functions: &[NodeFunction],
        chains: &[NodeChain],
    ) -> Result<(Arc<Metrics>, Option<HttpServer>, Option<UdpServer>), NodeError> {
        for f in functions {
            runtime
                .register(f.config.clone(), &f.module)
                .map_err(|source| NodeError::Register { name: f.config.name.clone(), source })?;
        }
        for c in chains {
            runtime
                .register_chain(c.config.clone())
                .map_err(|source| NodeError::Register { name: c.config.name.clone(), source })?;
        }
        let metrics = Arc::new(Metrics::new());
        let http = match http {
            Some(mut c) => {
                let named = functions
                    .iter()
                    .map(|f| (&f.route, &f.config.name))
                    .chain(chains.iter().map(|c| (&c.route, &c.config.name)));
                for (route, name) in named {
                    if let Some(route) = explicit_route(route, name)? {
                        c.routes.push(route);
                    }
                }
                Some(
                    HttpServer::start(Arc::clone(runtime), Arc::clone(&metrics), c)
                        .map_err(NodeError::Http)?,
                )
            }
            None => None,
        };
        let udp = match udp {
            Some(c) => Some(
                UdpServer::start(Arc::clone(runtime), Arc::clone(&metrics), c)
                    .map_err(NodeError::Udp)?,
            ),
            None => None,
        };
        Ok((metrics, http, udp))
    }

    /// Registers one more function while the node serves, and routes `function.route` to it.
    pub fn register(
        &self,
        function: &NodeFunction,
    ) -> Result<Arc<luge_runtime::Function>, NodeError> {
        let f = function;
        // Checked first: a bad route leaves nothing registered.
        let route = explicit_route(&f.route, &f.config.name)?;
        let registered = self
            .runtime
            .register(f.config.clone(), &f.module)
            .map_err(|source| NodeError::Register { name: f.config.name.clone(), source })?;
        if let (Some(http), Some((route, name))) = (&self.http, route) {
            // Cannot fail: `explicit_route` checked it.
            http.set_route(&route, &name).map_err(|source| NodeError::Route {
                route: route.clone(),
                name: name.clone(),
                source,
            })?;
        }
        Ok(registered)
    }

    /// The runtime.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The metrics both front ends record into.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The HTTP front end, if served.
    pub fn http(&self) -> Option<&HttpServer> {
        self.http.as_ref()
    }

    /// The UDP-RPC front end, if served.
    pub fn udp(&self) -> Option<&UdpServer> {
        self.udp.as_ref()
    }

    /// The HTTP address (with the actual port when bound to port 0).
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().map(HttpServer::local_addr)
    }

    /// The UDP-RPC address (with the actual port when bound to port 0).
    pub fn rpc_addr(&self) -> Option<SocketAddr> {
        self.udp.as_ref().map(UdpServer::local_addr)
    }

    /// Shuts the node down in order (module doc), within the runtime's `shutdown_grace`.
    pub fn shutdown(self) -> ShutdownReport {
        let grace = self.runtime.config().shutdown_grace;
        // (A huge `shutdown_grace_ms` saturates.)
        let end = luge_proto::instant_after(Instant::now(), grace);
        if let Some(u) = &self.udp {
            u.drain();
        }
        if let Some(h) = self.http {
            h.shutdown(grace);
        }
        // One grace period for the whole node: UDP-RPC drained alongside HTTP, so it gets
        // what is left of it.
        let left = end.saturating_duration_since(Instant::now());
        let udp_unanswered = self.udp.map_or(0, |u| u.shutdown(left));
        // What is still running gets what is left of the one grace period, not a fresh one.
        self.runtime.shutdown_within(end.saturating_duration_since(Instant::now()));
        // Every answer is recorded now: export the last spans and stop the exporter, within
        // one bound (5 s) — a flush and then a shutdown would each wait that long on a collector
        // that does not answer.
        for t in &self.tracing {
            t.shutdown();
        }
        ShutdownReport { udp_unanswered }
    }
}

/// `route` to the function or chain `name`, checked, unless it is the route every one has
/// anyway (`/<name>`).
fn explicit_route(route: &str, name: &str) -> Result<Option<(String, String)>, NodeError> {
    if route.strip_prefix('/') == Some(name) {
        return Ok(None);
    }
    match check_route(route) {
        Ok(()) => Ok(Some((route.to_owned(), name.to_owned()))),
        Err(source) => {
            Err(NodeError::Route { route: route.to_owned(), name: name.to_owned(), source })
        }
    }
}
