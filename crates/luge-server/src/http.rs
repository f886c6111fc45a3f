//! HTTP/1.1 front end (hyper 1.x on a tokio runtime of its own): `POST /<route>` runs a function
//! with the body on stdin and answers with its stdout; `GET /metrics`, `GET /healthz` and
//! `GET /readyz` share that listener. The admin API (`/admin/functions`) has a listener of its
//! own (the admin plane, see `plane`), so that calling a function never grants managing one.
//! The protocol is specified in `docs/http.md`.
//!
//! - Every request gets exactly one response, and every response carries `Luge-Request-Id`,
//!   `Luge-Execution-Ns`, `Luge-Queueing-Ns` and `Luge-Outcome`. Errors found before submission
//!   (unknown route, bad header, body too large, …) get a server-local id with bit 63 set, so
//!   they never collide with the runtime's ids.
//! - The runtime answers through a callback on one of its own threads; a `oneshot` channel
//!   carries the [`Outcome`] back to the connection task, so no tokio thread ever blocks.
//!   Compiling a module (`PUT /admin/functions/…`) and rendering metrics run on tokio's blocking
//!   pool.
//! - Request bodies are read through [`Limited`] with the function's `max_request_bytes`: a
//!   `Content-Length` above it is refused before reading, a streamed body as soon as it crosses
//!   it. The rest of the body is then drained for a short, bounded while so the client can read
//!   the 413 instead of a connection reset.
//! - Shutdown: stop accepting, let every connection finish its in-flight request (hyper's
//!   graceful shutdown; idle keep-alive connections close at once, new requests on busy ones get
//!   503 `shutting_down`); when the grace period ends, requests still waiting for the runtime
//!   are answered 503 `shutting_down` and the connections are closed.
//!
//! This file holds the server (configuration, start, accept loop, connections, shutdown) and
//! the dispatch of a parsed request; `route` parses a request into its action and owns the route
//! table, `plane` what each listener serves and the admin token, `accept` the accepting and the
//! over-cap refusal, `body` the capped body reads, `invoke` a function call through the gate
//! shared with UDP-RPC, `admin` the admin API, `respond` the responses, `clients` the
//! per-address connection count, `fuzz` the fuzz target of request heads.
//!
//! Above ~600 lines on purpose: what is left here is one concern — the server's configuration
//! (every limit with its reason), its shared state and its accept and connection loops; a fifth
//! of its lines document them.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use luge_proto::nanos;
use luge_runtime::{
    BadRequest, Failure, Function, FunctionConfig, Health, Outcome, Rejection, Runtime, Timing,
};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use crate::arrival::arrival;
use crate::metrics::{Metrics, Protocol};
use crate::request_log::RequestLog;
use crate::status::{http_status, outcome_label};
use crate::submit::{Call, FunctionKey, Gate};
use crate::trace::Tracing;

mod accept;
mod admin;
mod admin_chains;
mod agent;
mod body;
mod clients;
mod drive;
mod fuzz;
mod invoke;
mod plane;
mod respond;
mod route;
mod scrape;
mod send_timeout;
mod stamped;
mod status_page;

pub use self::accept::accept_next;
use self::accept::{OVER_CAP_BODY, PER_CLIENT_BODY, accept_one, refuse_over_cap};
use self::admin::{Resource, admin_resource, list_functions};
use self::body::{
    BodyBudget, BodyError, Buffered, Rest, Unreadable, drain, expects_continue, read_body,
};
use self::clients::{ClientSlot, Clients};
pub use self::fuzz::fuzz_request_head;
use self::invoke::invoke;
use self::plane::Plane;
pub use self::plane::{AdminConfig, AdminToken, MIN_TOKEN_LEN};
use self::respond::Meta;
pub use self::route::check_route;
use self::route::{Action, check_name, micros_header};
use self::scrape::{Scrapes, metrics};
use self::send_timeout::{SendTimeout, send_timed_out};
use self::stamped::Stamped;

const DEADLINE_US: HeaderName = HeaderName::from_static(luge_proto::DEADLINE_HEADER);
const EXPECTED_US: HeaderName = HeaderName::from_static(luge_proto::EXPECTED_HEADER);
const REQUEST_ID: HeaderName = HeaderName::from_static(luge_proto::REQUEST_ID_HEADER);
const EXECUTION_NS: HeaderName = HeaderName::from_static(luge_proto::EXECUTION_HEADER);
const QUEUEING_NS: HeaderName = HeaderName::from_static(luge_proto::QUEUEING_HEADER);
const READINESS_NS: HeaderName = HeaderName::from_static(luge_proto::READINESS_HEADER);
const OUTCOME: HeaderName = HeaderName::from_static(luge_proto::OUTCOME_HEADER);
const LOAD: HeaderName = HeaderName::from_static(luge_proto::LOAD_HEADER);
const TRACEPARENT: HeaderName = HeaderName::from_static(luge_proto::TRACEPARENT_HEADER);
const STAGES: HeaderName = HeaderName::from_static(luge_proto::STAGES_HEADER);
const STAGE: HeaderName = HeaderName::from_static(luge_proto::STAGE_HEADER);

const OCTET_STREAM: &str = "application/octet-stream";
const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Largest value accepted in `Luge-Deadline-Us` / `Luge-Expected-Us`: one hour, as in UDP-RPC.
const MAX_HEADER_US: u64 = luge_proto::MAX_FIELD_US;
/// After an oversized body is refused, how long and how many frames the server keeps reading
/// (and discarding) it so that the client sees the 413 rather than a reset.
const DRAIN_TIME: Duration = Duration::from_millis(500);
const DRAIN_FRAMES: usize = 64;
/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// After the grace period, how long abandoned requests get to flush their 503.
const ABANDON_FLUSH: Duration = Duration::from_millis(200);
/// One client address holds at most this share of the admin listener's connections (1/4: 16
/// of the default 64), so that one address sending heads slowly cannot take them all; the
/// listener belongs on a private address all the same (`docs/http.md` §5).
const ADMIN_CLIENT_SHARE: usize = 4;
/// Longest function name the admin API accepts.
const MAX_NAME_LEN: usize = 128;
/// Longest route accepted.
const MAX_ROUTE_LEN: usize = 1024;

/// Threads of the HTTP front end's blocking pool, at most: what renders `/metrics` and the
/// status page and runs admin registrations off the event loop. Tokio's default (512) would let
/// a flood of scrapes on the public listener, which serves `/metrics` by default, start a thread
/// per scrape on a node with a few cores; beyond this bound they queue.
pub const HTTP_BLOCKING_THREADS: usize = 8;

/// Settings of the HTTP front end.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Address to listen on (port 0 = any free port; see [`HttpServer::local_addr`]).
    pub addr: SocketAddr,
    /// Tokio worker threads serving connections (1 = a current-thread runtime on the server's
    /// own thread).
    pub threads: usize,
    /// Connections open at once; a connection beyond them is answered 503 `overloaded` at once
    /// and closed, instead of waiting in the listen backlog. Each open connection needs a file
    /// descriptor: `luge serve` raises its soft `RLIMIT_NOFILE` to the hard limit.
    pub max_connections: usize,
    /// Connections one client address (an IPv6 client's /64) may hold open; beyond it, answered
    /// like a connection over `max_connections`. 0 = no cap (e.g. behind a load balancer that
    /// is the only client).
    pub max_connections_per_client: usize,
    /// Listen backlog.
    pub backlog: u32,
    /// A client must send a complete request head within this time, counted from the first
    /// read of the head — also on an idle keep-alive connection, so it is the idle timeout too.
    pub header_read_timeout: Duration,
    /// A write of an answer must make progress — the client read some of it — within this
    /// time, else the connection is closed (`luge_malformed_total{reason="send_timeout"}`): a
    /// client that stops reading would otherwise hold its connection and its answer for good.
    /// Any progress restarts it; `ZERO` = no bound.
    pub send_timeout: Duration,
    /// Once an answer had to wait for its client and the client took a first burst of it, the
    /// client must take the rest at least this fast on average, in bytes per second, counted
    /// from that burst after a 2 s grace, until it is all written, else the connection is
    /// closed as for `send_timeout`: a client reading a segment just often enough to beat that
    /// clock would otherwise hold its answer and slot for hours. Each answer has its own clock.
    /// 0 = no minimum.
    pub min_send_rate: u64,
    /// A client must send the whole request body within this time (else 408).
    pub body_read_timeout: Duration,
    /// After a 2 s grace, a body must arrive at least this fast on average, in bytes per second
    /// (else 408); 0 = no minimum.
    pub min_body_rate: u64,
    /// Bytes of function request bodies the front end holds at once, being read or waiting for
    /// their answer (by buffer capacity); a body that would take more is answered 503
    /// `overloaded` at once. Bounds what many connections, each under its function's
    /// `max_request_bytes`, can make the node buffer together. 0 = no bound.
    pub max_buffered_body_bytes: u64,
    /// Of those bytes, what one client address (IPv6: its /64) may hold; a body that would
    /// take its client past it is answered 503 `overloaded` at once, and none may be larger
    /// (413). So one client cannot take the whole bound from every other. 0 = no share: for
    /// a node whose only client is a load balancer. The default is a fixed 64 MiB, a quarter of
    /// the default bound; an embedder that lowers the bound lowers this with it (the manifest
    /// derives it: a quarter of `max_buffered_body_bytes` unless given).
    pub max_buffered_body_bytes_per_client: u64,
    /// `Retry-After` (seconds) on every 503.
    pub retry_after_secs: u32,
    /// Largest module accepted by `PUT /admin/functions/<name>`.
    pub max_module_bytes: u64,
    /// Which answered requests get a line in the request log (`luge::request`).
    pub request_log: RequestLog,
    /// The admin plane's listener; `None` = no admin API (functions only from the manifest).
    pub admin: Option<AdminConfig>,
    /// Whether the function listener serves `/metrics` (the admin listener always does).
    pub expose_metrics: bool,
    /// Where request spans go (`None`: no export; a caller's `traceparent` is still continued).
    pub tracing: Option<Tracing>,
    /// The load-balancer agent's listener (HAProxy agent-check: `up <weight>%` or `drain`);
    /// `None` = none.
    pub agent: Option<SocketAddr>,
    /// Explicit routes (path, function or chain) in place before the first connection is
    /// accepted; [`HttpServer::set_route`] adds more later. Each must pass [`check_route`].
    pub routes: Vec<(String, String)>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            threads: 1,
            max_connections: 16_384,
            max_connections_per_client: 1024,
            backlog: 1024,
            header_read_timeout: Duration::from_secs(10),
            send_timeout: Duration::from_secs(10),
            min_send_rate: 1024,
            body_read_timeout: Duration::from_secs(30),
            min_body_rate: 1024,
            max_buffered_body_bytes: 256 << 20,
            max_buffered_body_bytes_per_client: 64 << 20,
            retry_after_secs: 1,
            max_module_bytes: 64 << 20,
            request_log: RequestLog::Off,
            admin: None,
            expose_metrics: true,
            tracing: None,
            agent: None,
            routes: Vec::new(),
        }
    }
}

impl HttpConfig {
    /// Whether the front end can start with this configuration, short of binding: counts of at
    /// least 1, an admin listener exposed beyond loopback only with a token, and no two
    /// listeners on one port (one on `0.0.0.0` takes the port on every address). For a caller
    /// to refuse before it does anything slow, as `luge serve` does before compiling modules;
    /// [`HttpServer::start`] checks it too.
    pub fn check(&self) -> Result<(), HttpError> {
        if self.threads == 0 {
            return Err(HttpError::Config("threads must be at least 1".into()));
        }
        if self.max_connections == 0 {
            return Err(HttpError::Config("max_connections must be at least 1".into()));
        }
        let admin = self.admin.as_ref().map(|a| a.addr);
        if let Some(a) = &self.admin {
            a.check()?;
        }
        let listeners =
            [("the function listener", Some(self.addr)), ("admin", admin), ("agent", self.agent)];
        for (i, (a, x)) in listeners.iter().enumerate() {
            for (b, y) in &listeners[i + 1..] {
                if let (Some(x), Some(y)) = (x, y)
                    && x.port() != 0
                    && x.port() == y.port()
                    && collide(x.ip(), y.ip())
                {
                    return Err(HttpError::Config(format!(
                        "{a} ({x}) and {b} ({y}) would listen on the same port"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Whether two listeners on one port would collide: the same address, or an unspecified one
/// of the other's family — or `::`, which (dual-stack, as Linux binds it by default) takes IPv4
/// addresses too.
fn collide(x: std::net::IpAddr, y: std::net::IpAddr) -> bool {
    let v6_any = |a: std::net::IpAddr| a.is_ipv6() && a.is_unspecified();
    x == y
        || v6_any(x)
        || v6_any(y)
        || (x.is_ipv4() == y.is_ipv4() && (x.is_unspecified() || y.is_unspecified()))
}

/// Why the HTTP front end could not start, or a route was refused.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The configuration is inconsistent.
    #[error("invalid HTTP configuration: {0}")]
    Config(String),
    /// The tokio runtime could not be built.
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(#[source] io::Error),
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Cause.
        source: io::Error,
    },
    /// The server thread could not be started.
    #[error("cannot start thread `luge-http`: {0}")]
    Thread(#[source] io::Error),
    /// A route is not a usable path.
    #[error("invalid route `{route}`: {reason}")]
    Route {
        /// The route.
        route: String,
        /// Why.
        reason: &'static str,
    },
}

/// Life cycle of the server, broadcast to the accept loop, every connection and every request
/// waiting for the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    /// Not accepting; in-flight requests have this grace period.
    Draining(Duration),
    /// The grace period is over: answer whatever still waits with 503.
    Abandon,
}

struct Shared {
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    config: HttpConfig,
    /// The submission step shared with UDP-RPC; its draining flag is the fast-path copy of
    /// `phase != Running`.
    gate: Arc<Gate>,
    /// Path → function name; a path not in here is looked up as `/<function name>`.
    routes: RwLock<HashMap<String, String>>,
    phase: watch::Sender<Phase>,
    /// One permit per open connection of the function listener.
    slots: Arc<Semaphore>,
    /// Connection limit (the permits of `slots`).
    max_connections: usize,
    /// One permit per open connection of the admin listener, and their number.
    admin_slots: Arc<Semaphore>,
    admin_max_connections: usize,
    /// One permit per connection over the cap being answered 503 (as many as `slots`).
    refusing: Arc<Semaphore>,
    /// Connections answered 503 (or closed) because `max_connections` were open, or their
    /// client held `max_connections_per_client`.
    refused_connections: AtomicU64,
    /// Of those, the ones refused for their client's cap.
    refused_per_client: AtomicU64,
    /// Function calls read on the inline worker's thread, which then ran them (`drive`).
    worker_requests: AtomicU64,
    /// Who runs the event loop (`drive`): for its hand-over count in `/metrics`.
    handoff: Arc<drive::Handoff>,
    /// Open connections per client address.
    clients: Arc<Clients>,
    /// Connections per client address on the admin listener (a share of its cap).
    admin_clients: Arc<Clients>,
    /// Connections being served on the function listener (what `max_connections` bounds).
    open: AtomicUsize,
    /// Requests on the function listener between the start of their handler and their
    /// response.
    in_flight: AtomicUsize,
    /// Bytes of function request bodies held (`HttpConfig::max_buffered_body_bytes`).
    bodies: BodyBudget,
    /// Admin request bodies: bounded by the admin connections and `max_module_bytes` instead.
    admin_bodies: BodyBudget,
    /// When the server started: the status snapshot's clock.
    started: Instant,
    /// The function listener's bound address (the status snapshot's).
    local_addr: SocketAddr,
    /// `/metrics` renders, one at a time (`scrape`).
    scrapes: Scrapes,
}

/// The HTTP/1.1 front end: a listener and a tokio runtime on a thread of their own.
pub struct HttpServer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    admin_addr: Option<SocketAddr>,
    agent_addr: Option<SocketAddr>,
    thread: Option<JoinHandle<()>>,
    /// The worker group whose inline worker runs the event loop when idle (`drive`), if any.
    driven_by: Option<usize>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("local_addr", &self.local_addr)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds `config.addr` and starts serving on a thread of its own. Functions are reached at
    /// `/<name>` unless [`set_route`](Self::set_route) maps another path to them.
    pub fn start(
        runtime: Arc<Runtime>,
        metrics: Arc<Metrics>,
        config: HttpConfig,
    ) -> Result<Self, HttpError> {
        config.check()?;
        // Installed before the listener accepts: a route set after start-up would answer 404
        // to whatever arrived in between.
        let mut routes = HashMap::with_capacity(config.routes.len());
        for (route, function) in &config.routes {
            check_route(route)?;
            routes.insert(route.clone(), function.clone());
        }
        let mut builder = if config.threads == 1 {
            tokio::runtime::Builder::new_current_thread()
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(config.threads);
            b
        };
        let rt = builder
            .enable_io()
            .enable_time()
            .thread_name("luge-http")
            .max_blocking_threads(HTTP_BLOCKING_THREADS)
            .build()
            .map_err(HttpError::Runtime)?;
        let listener = {
            let _context = rt.enter();
            listen(config.addr, config.backlog)
                .map_err(|source| HttpError::Bind { addr: config.addr, source })?
        };
        let local_addr = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr: config.addr, source })?;
        let admin_listener = match &config.admin {
            Some(admin) => {
                let _context = rt.enter();
                let bind = |source| HttpError::Bind { addr: admin.addr, source };
                let listener = listen(admin.addr, 128).map_err(bind)?;
                let addr = listener.local_addr().map_err(bind)?;
                Some((listener, addr))
            }
            None => None,
        };
        let admin_addr = admin_listener.as_ref().map(|(_, addr)| *addr);
        let agent_listener = match config.agent {
            Some(addr) => {
                let _context = rt.enter();
                let bind = |source| HttpError::Bind { addr, source };
                let listener = listen(addr, 128).map_err(bind)?;
                let local = listener.local_addr().map_err(bind)?;
                Some((listener, local))
            }
            None => None,
        };
        let agent_addr = agent_listener.as_ref().map(|(_, addr)| *addr);
        let admin_max_connections = config
            .admin
            .as_ref()
            .map_or(1, |a| a.max_connections.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize));
        let (phase, _) = watch::channel(Phase::Running);
        let max_connections =
            config.max_connections.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        let gate = Arc::new(Gate::new(
            Arc::clone(&runtime),
            Arc::clone(&metrics),
            Protocol::Http,
            config.request_log,
            config.tracing.clone(),
        ));
        let max_connections_per_client = config.max_connections_per_client;
        let bodies = BodyBudget::new(
            config.max_buffered_body_bytes,
            config.max_buffered_body_bytes_per_client,
        );
        let shared = Arc::new(Shared {
            runtime,
            metrics,
            config,
            gate,
            routes: RwLock::new(routes),
            phase,
            slots: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            admin_slots: Arc::new(Semaphore::new(admin_max_connections)),
            admin_max_connections,
            refusing: Arc::new(Semaphore::new(max_connections)),
            refused_connections: AtomicU64::new(0),
            refused_per_client: AtomicU64::new(0),
            worker_requests: AtomicU64::new(0),
            handoff: Arc::new(drive::Handoff::new()),
            clients: Clients::new(max_connections_per_client),
            admin_clients: Clients::new(admin_max_connections.div_ceil(ADMIN_CLIENT_SHARE)),
            open: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            bodies,
            admin_bodies: BodyBudget::new(0, 0),
            started: Instant::now(),
            local_addr,
            scrapes: Scrapes::new(),
        });
        let server = Arc::clone(&shared);
        let rt = Arc::new(rt);
        let handoff = Arc::clone(&shared.handoff);
        let (tokio, standby) = (Arc::clone(&rt), Arc::clone(&handoff));
        let thread = std::thread::Builder::new()
            .name("luge-http".into())
            .spawn(move || {
                if let Some((agent, _)) = agent_listener {
                    tokio.spawn(agent::serve(Arc::clone(&server), agent));
                }
                let mut serving =
                    tokio.spawn(serve(server, listener, admin_listener.map(|(l, _)| l)));
                // The standby (`drive`): runs the loop whenever the worker does not.
                standby.bind(std::thread::current());
                loop {
                    standby.wait_needed();
                    let ended = tokio.block_on(async {
                        tokio::select! {
                            biased;
                            _ = &mut serving => true,
                            () = standby.no_longer_needed() => false,
                        }
                    });
                    if ended {
                        break;
                    }
                }
                // Whatever is left (a compile on the blocking pool, a connection that ignored
                // the shutdown) is abandoned here; if the worker still holds the runtime, it
                // goes when the worker lets it go.
                if let Ok(rt) = Arc::try_unwrap(tokio) {
                    rt.shutdown_timeout(ABANDON_FLUSH);
                }
            })
            .map_err(HttpError::Thread)?;
        // Run-to-completion over HTTP (`drive`): one inline worker group and a current-thread
        // runtime, which any one thread at a time can run.
        let runtime = &shared.runtime;
        let driven_by = (shared.config.threads == 1 && runtime.ingress_groups() == 1)
            .then(|| {
                let driver = Arc::new(drive::HttpDriver::new(rt, Arc::clone(&handoff)));
                runtime.attach_driver(0, driver).ok().map(|()| 0)
            })
            .flatten();
        if driven_by.is_some() {
            handoff.give_back();
        }
        tracing::info!(addr = %local_addr, "HTTP front end listening");
        if let Some(addr) = admin_addr {
            tracing::info!(%addr, "admin API listening");
        }
        if let Some(addr) = agent_addr {
            tracing::info!(%addr, "load-balancer agent listening");
        }
        Ok(Self { shared, local_addr, admin_addr, agent_addr, thread: Some(thread), driven_by })
    }

    /// The address the function listener listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The address the admin listener listens on, if there is one.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The address the load-balancer agent listens on, if there is one.
    pub fn agent_addr(&self) -> Option<SocketAddr> {
        self.agent_addr
    }

    /// Connections open on the function listener right now.
    pub fn connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Connections answered 503 at once (or closed) because `max_connections` were open or
    /// their client held `max_connections_per_client`.
    pub fn refused_connections(&self) -> u64 {
        self.shared.refused_connections.load(Ordering::Relaxed)
    }

    /// Of [`refused_connections`](Self::refused_connections), those refused for their client's
    /// cap.
    pub fn refused_per_client(&self) -> u64 {
        self.shared.refused_per_client.load(Ordering::Relaxed)
    }

    /// Function calls read by the inline worker while it ran the front end's event loop, and so
    /// run on the thread that read them (run-to-completion; see `drive`).
    pub fn worker_requests(&self) -> u64 {
        self.shared.worker_requests.load(Ordering::Relaxed)
    }

    /// Times the inline worker handed the event loop to the front end's own thread (a run not
    /// known to be short, or short runs back to back for longer than the hold; `drive`).
    pub fn loop_handovers(&self) -> u64 {
        self.shared.handoff.handovers()
    }

    /// Whether an inline worker runs the front end's event loop when idle (`drive`): a
    /// current-thread runtime (`threads = 1`) on a runtime with one inline worker group.
    pub fn driven_by_worker(&self) -> bool {
        self.driven_by.is_some()
    }

    /// Requests on the function listener being handled right now: from their arrival (head
    /// read) to their response.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Routes requests for `route` (an absolute path such as `/resize`) to `function`, replacing
    /// any previous mapping of that path. The function need not be registered yet (until it
    /// is, the route answers 404). The function's default route `/<name>` keeps working.
    pub fn set_route(&self, route: &str, function: &str) -> Result<(), HttpError> {
        check_route(route)?;
        self.shared.routes_mut().insert(route.to_owned(), function.to_owned());
        Ok(())
    }

    /// Removes an explicit route; returns the function it pointed to.
    pub fn remove_route(&self, route: &str) -> Option<String> {
        self.shared.routes_mut().remove(route)
    }

    /// Every explicit route and its function, sorted by route.
    pub fn routes(&self) -> Vec<(String, String)> {
        let routes = self.shared.routes.read().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = routes.iter().map(|(r, f)| (r.clone(), f.clone())).collect();
        all.sort();
        all
    }

    /// Stops accepting connections, lets requests in flight (also those whose client has left)
    /// get their answers for up to `grace`, answers those still waiting after it with 503 and
    /// returns once the server thread has ended. The runtime itself keeps running.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop(grace);
    }

    fn stop(&mut self, grace: Duration) {
        // The worker lets the loop go first, while the server thread (which cannot end before
        // the phase below changes) still holds the tokio runtime: so the driver's handle to it is
        // never the last one dropped here, where the caller may be in an async context, in which
        // dropping a runtime panics. The last handle goes on the server thread or the worker's.
        if let Some(group) = self.driven_by.take() {
            self.shared.runtime.detach_driver(group);
        }
        self.shared.gate.drain();
        self.shared.phase.send_if_modified(|phase| {
            let running = *phase == Phase::Running;
            if running {
                *phase = Phase::Draining(grace);
            }
            running
        });
        // The standby runs the loop to the end.
        self.shared.handoff.stop();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the HTTP server thread panicked");
            }
            tracing::info!(addr = %self.local_addr, "HTTP front end stopped");
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

fn listen(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Resolves once the phase satisfies `pred` (or the server is gone).
async fn phase_reached(mut rx: watch::Receiver<Phase>, pred: impl FnMut(&Phase) -> bool) {
    // The `Ref` is dropped inside this expression, so no lock is held across an await.
    let _ = rx.wait_for(pred).await.map(|_| ());
}

/// How the server's connections parse and keep HTTP/1.1 (the fuzz target builds them so too).
fn connection_builder(header_read_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .keep_alive(true)
        // A client may shut its sending side once its request is out (`shutdown(SHUT_WR)`) and
        // still read the answer: without this, hyper takes that end of input for the client
        // leaving and drops the request unanswered — and frees the connection's slot while its
        // work still runs.
        .half_close(true);
    builder
}

async fn serve(shared: Arc<Shared>, listener: TcpListener, admin: Option<TcpListener>) {
    let builder = connection_builder(shared.config.header_read_timeout);
    let admin = async {
        if let Some(admin) = admin {
            accept_loop(&shared, &builder, admin, Plane::Admin).await;
        }
    };
    tokio::join!(accept_loop(&shared, &builder, listener, Plane::Functions), admin);
    let grace = match *shared.phase.borrow() {
        Phase::Draining(grace) => grace,
        Phase::Running | Phase::Abandon => Duration::ZERO,
    };
    // Every connection holds a permit, and so does every call it made until the runtime answers:
    // all permits back = every connection closed and every call answered (also those whose
    // client left; after the grace, the abandon flush bounds the wait for them).
    let closed = || async {
        let all = u32::try_from(shared.max_connections).unwrap_or(u32::MAX);
        let _ = shared.slots.acquire_many(all).await;
        let all = u32::try_from(shared.admin_max_connections).unwrap_or(u32::MAX);
        let _ = shared.admin_slots.acquire_many(all).await;
    };
    if tokio::time::timeout(grace, closed()).await.is_err() {
        tracing::info!("HTTP grace period over; answering what still waits with 503");
        shared.phase.send_replace(Phase::Abandon);
        let _ = tokio::time::timeout(ABANDON_FLUSH, closed()).await;
    }
}

/// Accepts the connections of one listener until the server stops accepting.
async fn accept_loop(
    shared: &Arc<Shared>,
    builder: &http1::Builder,
    listener: TcpListener,
    plane: Plane,
) {
    let slots = match plane {
        Plane::Functions => &shared.slots,
        Plane::Admin => &shared.admin_slots,
    };
    let stopping = phase_reached(shared.phase.subscribe(), |p| *p != Phase::Running);
    tokio::pin!(stopping);
    while let Some((stream, peer)) = accept_one(&listener, &mut stopping).await {
        let client = match plane {
            Plane::Functions => match shared.clients.admit(peer.ip()) {
                Some(slot) => Some(slot),
                None => {
                    shared.refused_per_client.fetch_add(1, Ordering::Relaxed);
                    refuse_over_cap(shared, stream, PER_CLIENT_BODY);
                    continue;
                }
            },
            Plane::Admin => match shared.admin_clients.admit(peer.ip()) {
                Some(slot) => Some(slot),
                // Closed, as over the admin plane's cap.
                None => {
                    drop(stream);
                    continue;
                }
            },
        };
        match Arc::clone(slots).try_acquire_owned() {
            Ok(permit) => {
                let shared = Arc::clone(shared);
                let conn =
                    connection(shared, builder.clone(), stream, peer, (permit, client), plane);
                tokio::spawn(conn);
            }
            // An admin connection over the cap is closed: the admin plane's clients are few.
            Err(_) if plane == Plane::Admin => drop(stream),
            Err(_) => refuse_over_cap(shared, stream, OVER_CAP_BODY),
        }
    }
}

/// Serves one connection until the client closes it or the server shuts down.
async fn connection(
    shared: Arc<Shared>,
    builder: http1::Builder,
    stream: TcpStream,
    peer: SocketAddr,
    slots: (OwnedSemaphorePermit, Option<ClientSlot>),
    plane: Plane,
) {
    // The function listener's: the admin plane's (an operator's status page among them) are
    // not what `max_connections` bounds or the status page shows beside it.
    let open = (plane == Plane::Functions).then(|| Gauge::new(&shared, |s| &s.open));
    let service_shared = Arc::clone(&shared);
    let held = Arc::new(Held { _node: slots.0, _client: slots.1 });
    let service_held = Arc::clone(&held);
    let (stream, last) = Stamped::new(stream);
    let service = service_fn(move |request| {
        // Hyper calls this once it has parsed the head, which ended in the connection's last
        // read: the request arrived when the kernel received that.
        let received = arrival(Instant::now(), SystemTime::now(), last.get());
        let shared = Arc::clone(&service_shared);
        let held = Arc::clone(&service_held);
        async move { Ok::<_, Infallible>(handle(shared, request, peer, plane, held, received).await) }
    });
    let stream = SendTimeout::new(stream, shared.config.send_timeout, shared.config.min_send_rate);
    let conn = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let stopping = phase_reached(shared.phase.subscribe(), |p| *p != Phase::Running);
    tokio::pin!(stopping);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = &mut stopping => {
            conn.as_mut().graceful_shutdown();
            conn.as_mut().await
        }
    };
    if let Err(e) = result {
        if e.is_parse() || e.is_parse_too_large() {
            shared.metrics.malformed(Protocol::Http, "http_parse");
            tracing::debug!(%peer, "malformed HTTP request: {e}");
        } else if e.is_timeout() {
            shared.metrics.malformed(Protocol::Http, "header_timeout");
            tracing::debug!(%peer, "connection timed out: {e}");
        } else if send_timed_out(&e) {
            shared.metrics.malformed(Protocol::Http, "send_timeout");
            tracing::debug!(%peer, "connection closed: {e}");
        } else {
            tracing::debug!(%peer, "connection ended: {e}");
        }
    }
    drop(open);
    drop(held);
}

/// A connection's slots (the node's and its client's), shared with the work it submitted: they
/// return when the connection has ended *and* the runtime has answered every call it made, so a
/// client that resets its connections mid-request cannot queue more work than its slots allow.
struct Held {
    _node: OwnedSemaphorePermit,
    _client: Option<ClientSlot>,
}

/// Counts one open connection or request in flight while alive.
struct Gauge(Arc<Shared>, fn(&Shared) -> &AtomicUsize);

impl Gauge {
    fn new(shared: &Arc<Shared>, gauge: fn(&Shared) -> &AtomicUsize) -> Self {
        gauge(shared).fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(shared), gauge)
    }
}

impl Drop for Gauge {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

/// Serves one request: parses what it asks for, checks the admin plane's token, then does it.
async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
    peer: SocketAddr,
    plane: Plane,
    held: Arc<Held>,
    received: Instant,
) -> Response<Full<Bytes>> {
    // `received`: the request head's arrival; its deadline and queueing count from there.
    let _in_flight = (plane == Plane::Functions).then(|| Gauge::new(&shared, |s| &s.in_flight));
    let path = request.uri().path().to_owned();
    let action = Action::parse(request.method(), &path).on(plane, shared.config.expose_metrics);
    // The status page is the same static HTML on every node: it needs no token (its script
    // sends one, from the page's URL fragment, when it fetches the data).
    if plane == Plane::Admin {
        let token = shared.config.admin.as_ref().and_then(|a| a.token.as_ref());
        match token {
            Some(t) if action != Action::StatusPage && !t.admits(request.headers()) => {
                return shared.unauthorized();
            }
            // Without a token, the listener is loopback: only a name can let another site's
            // page in (DNS rebinding; `plane.rs`).
            None if !plane::addressed_locally(request.headers(), request.uri()) => {
                return shared.forbidden_host();
            }
            _ => {}
        }
    }
    match action {
        // Liveness: the listener answers and no thread the node needs has died (a restart is
        // the cure); not draining, not load — a node refusing load must not be restarted.
        Action::Health => match shared.runtime.stopped_thread() {
            None => {
                shared.respond(StatusCode::OK, &shared.local_meta("ok"), Some(TEXT), "ok".into())
            }
            Some(why) => shared.error(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_alive",
                format!("not alive: {why}"),
            ),
        },
        Action::Ready => ready(&shared, request.uri().query()),
        Action::Metrics => metrics(&shared).await,
        Action::ListFunctions => list_functions(&shared).await,
        Action::Function(name) => admin_resource(&shared, Resource::Function, &name, request).await,
        Action::ListChains => admin_chains::list(&shared),
        Action::Chain(name) => admin_resource(&shared, Resource::Chain, &name, request).await,
        Action::StatusPage => status_page::page(&shared),
        Action::StatusJson => status_page::snapshot(&shared).await,
        Action::Invoke => invoke(&shared, &path, request, received, (peer, held)).await,
        Action::MethodNotAllowed(allow) => shared.method_not_allowed(allow),
        Action::NotFound => shared.not_found(&path),
    }
}

impl Shared {
    /// What `/readyz` and the status page report: not ready while this front end drains, else
    /// the runtime's health — leaving saturation out with `ignore_load`.
    fn health(&self, ignore_load: bool) -> Health {
        if self.gate.is_draining() {
            Health::NotReady("draining")
        } else if ignore_load {
            self.runtime.health_ignoring_load()
        } else {
            self.runtime.health()
        }
    }
}

/// `GET /readyz`: 200 when this front end and the runtime can take requests (not draining,
/// every runtime thread alive, not saturated), else 503 with the reason and `Retry-After`. With
/// the query `load=ignore`, saturation does not count: for a balancer (a Kubernetes Service)
/// that would take a loaded node out — moving its load onto the others, and with every node
/// saturated leaving none — where the node itself refuses what it cannot take.
fn ready(shared: &Shared, query: Option<&str>) -> Response<Full<Bytes>> {
    let ignore_load = query.is_some_and(|q| q.split('&').any(|pair| pair == "load=ignore"));
    match shared.health(ignore_load) {
        Health::Ready => {
            shared.respond(StatusCode::OK, &shared.local_meta("ok"), Some(TEXT), "ready".into())
        }
        Health::NotReady(why) => {
            shared.error(StatusCode::SERVICE_UNAVAILABLE, "not_ready", format!("not ready: {why}"))
        }
    }
}
