//! HTTP/1.1 front end (hyper 1.x on a tokio runtime of its own): `POST /<route>` runs a function
//! with the body on stdin and answers with its stdout; `GET /metrics`, `GET /healthz` and the
//! admin API (`/admin/functions`) share the listener. The protocol is specified in
//! `docs/http.md`.
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
//! This file holds the server (configuration, start, accept loop, connections, routing, responses,
//! shutdown); `accept` the accepting and the over-cap refusal, `body` the capped body reads,
//! `invoke` the submission and the wait for an outcome, `admin` the admin API.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body as _, Incoming};
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use luge_runtime::{
    BadRequest, Failure, Function, FunctionConfig, Outcome, Rejection, Runtime, Timing,
};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use crate::metrics::{Metrics, Protocol};
use crate::status::{http_status, outcome_label};
use crate::submit::{Call, FunctionKey, Gate};

mod accept;
mod admin;
mod body;
mod invoke;

pub use self::accept::accept_next;
use self::accept::{accept_one, refuse_over_cap};
use self::admin::{admin_function, list_functions};
use self::body::{BodyError, Unreadable, drain, read_body};
use self::invoke::invoke;

/// `Luge-Deadline-Us`: the request's relative deadline in µs (request header).
const DEADLINE_US: HeaderName = HeaderName::from_static("luge-deadline-us");
/// `Luge-Expected-Us`: the client's expected execution in µs (request header).
const EXPECTED_US: HeaderName = HeaderName::from_static("luge-expected-us");
/// `Luge-Request-Id` (response header).
const REQUEST_ID: HeaderName = HeaderName::from_static("luge-request-id");
/// `Luge-Execution-Ns` (response header).
const EXECUTION_NS: HeaderName = HeaderName::from_static("luge-execution-ns");
/// `Luge-Queueing-Ns` (response header).
const QUEUEING_NS: HeaderName = HeaderName::from_static("luge-queueing-ns");
/// `Luge-Outcome` (response header).
const OUTCOME: HeaderName = HeaderName::from_static("luge-outcome");

const OCTET_STREAM: &str = "application/octet-stream";
const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";
const PROMETHEUS: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Largest value accepted in `Luge-Deadline-Us` / `Luge-Expected-Us`: one hour.
const MAX_HEADER_US: u64 = 3_600_000_000;
/// After an oversized body is refused, how long and how many frames the server keeps reading
/// (and discarding) it so that the client sees the 413 rather than a reset.
const DRAIN_TIME: Duration = Duration::from_millis(500);
const DRAIN_FRAMES: usize = 64;
/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);
/// After the grace period, how long abandoned requests get to flush their 503.
const ABANDON_FLUSH: Duration = Duration::from_millis(200);
/// Longest function name the admin API accepts.
const MAX_NAME_LEN: usize = 128;
/// Longest route accepted.
const MAX_ROUTE_LEN: usize = 1024;

/// Settings of the HTTP front end.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Address to listen on (port 0 = any free port; see [`HttpServer::local_addr`]).
    pub addr: SocketAddr,
    /// Tokio worker threads serving connections (1 = a current-thread runtime on the server's
    /// own thread).
    pub threads: usize,
    /// Connections open at once; a connection beyond them is answered 503 `overloaded` at once
    /// and closed, instead of waiting in the listen backlog.
    pub max_connections: usize,
    /// Listen backlog.
    pub backlog: u32,
    /// A client must send a complete request head within this time, counted from the first
    /// read of the head — also on an idle keep-alive connection, so it is the idle timeout too.
    pub header_read_timeout: Duration,
    /// A client must send the whole request body within this time (else 408).
    pub body_read_timeout: Duration,
    /// `Retry-After` (seconds) on every 503.
    pub retry_after_secs: u32,
    /// Largest module accepted by `PUT /admin/functions/<name>`.
    pub max_module_bytes: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8080)),
            threads: 1,
            max_connections: 1024,
            backlog: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            retry_after_secs: 1,
            max_module_bytes: 64 << 20,
        }
    }
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
    /// One permit per open connection.
    slots: Arc<Semaphore>,
    /// Connection limit (the permits of `slots`).
    max_connections: usize,
    /// One permit per connection over the cap being answered 503 (as many as `slots`).
    refusing: Arc<Semaphore>,
    /// Connections answered 503 (or closed) because `max_connections` were open.
    refused_connections: AtomicU64,
    /// Connections being served.
    open: AtomicUsize,
    /// Requests between the start of their handler and their response.
    in_flight: AtomicUsize,
}

/// The HTTP/1.1 front end: a listener and a tokio runtime on a thread of their own.
pub struct HttpServer {
    shared: Arc<Shared>,
    local_addr: SocketAddr,
    thread: Option<JoinHandle<()>>,
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
        if config.threads == 0 {
            return Err(HttpError::Config("threads must be at least 1".into()));
        }
        if config.max_connections == 0 {
            return Err(HttpError::Config("max_connections must be at least 1".into()));
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
        let (phase, _) = watch::channel(Phase::Running);
        let max_connections =
            config.max_connections.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        let gate = Arc::new(Gate::new(Arc::clone(&runtime), Arc::clone(&metrics), Protocol::Http));
        let shared = Arc::new(Shared {
            runtime,
            metrics,
            config,
            gate,
            routes: RwLock::default(),
            phase,
            slots: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            refusing: Arc::new(Semaphore::new(max_connections)),
            refused_connections: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
        });
        let server = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("luge-http".into())
            .spawn(move || {
                rt.block_on(serve(server, listener));
                // Whatever is left (a compile on the blocking pool, a connection that ignored
                // the shutdown) is abandoned here.
                rt.shutdown_timeout(ABANDON_FLUSH);
            })
            .map_err(HttpError::Thread)?;
        tracing::info!(addr = %local_addr, "HTTP front end listening");
        Ok(Self { shared, local_addr, thread: Some(thread) })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connections open right now.
    pub fn connections(&self) -> usize {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// Connections answered 503 at once (or closed) because `max_connections` were open.
    pub fn refused_connections(&self) -> u64 {
        self.shared.refused_connections.load(Ordering::Relaxed)
    }

    /// Requests being handled right now: from their arrival (head read) to their response.
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

    /// Stops accepting connections, lets requests in flight get their answers for up to
    /// `grace`, answers those still waiting after it with 503 and returns once the server
    /// thread has ended. The runtime itself keeps running.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop(grace);
    }

    fn stop(&mut self, grace: Duration) {
        self.shared.gate.drain();
        self.shared.phase.send_if_modified(|phase| {
            let running = *phase == Phase::Running;
            if running {
                *phase = Phase::Draining(grace);
            }
            running
        });
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

/// Checks that `route` is a path the server can route (absolute, printable, not reserved).
fn check_route(route: &str) -> Result<(), HttpError> {
    let reason = if !route.starts_with('/') || route.len() < 2 {
        Some("a route is an absolute path with at least one character after `/`")
    } else if route.len() > MAX_ROUTE_LEN {
        Some("longer than 1024 bytes")
    } else if !route.bytes().all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#') {
        Some("only printable ASCII without `?` and `#` is allowed")
    } else if is_reserved(route) {
        Some("reserved for the server (`/metrics`, `/healthz`, `/admin/…`)")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(HttpError::Route { route: route.to_owned(), reason }),
        None => Ok(()),
    }
}

fn is_reserved(path: &str) -> bool {
    matches!(path, "/metrics" | "/healthz" | "/admin") || path.starts_with("/admin/")
}

/// A function name the admin API accepts (it becomes the path segment of its default route).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("a function name has 1 to {MAX_NAME_LEN} characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')) {
        return Err("a function name may only contain A-Z a-z 0-9 - _ . ~".into());
    }
    if is_reserved(&format!("/{name}")) {
        return Err(format!("`{name}` is reserved for the server"));
    }
    Ok(())
}

/// Resolves once the phase satisfies `pred` (or the server is gone).
async fn phase_reached(mut rx: watch::Receiver<Phase>, pred: impl FnMut(&Phase) -> bool) {
    // The `Ref` is dropped inside this expression, so no lock is held across an await.
    let _ = rx.wait_for(pred).await.map(|_| ());
}

async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let slots = Arc::clone(&shared.slots);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.config.header_read_timeout)
        .keep_alive(true);
    let stopping = phase_reached(shared.phase.subscribe(), |p| *p != Phase::Running);
    tokio::pin!(stopping);
    while let Some((stream, peer)) = accept_one(&listener, &mut stopping).await {
        match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => {
                tokio::spawn(connection(
                    Arc::clone(&shared),
                    builder.clone(),
                    stream,
                    peer,
                    permit,
                ));
            }
            Err(_) => refuse_over_cap(&shared, stream),
        }
    }
    drop(listener);
    let grace = match *shared.phase.borrow() {
        Phase::Draining(grace) => grace,
        Phase::Running | Phase::Abandon => Duration::ZERO,
    };
    // Every connection holds a permit: all permits back = every connection closed.
    let all = u32::try_from(shared.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(grace, slots.acquire_many(all)).await.is_err() {
        tracing::info!("HTTP grace period over; answering what still waits with 503");
        shared.phase.send_replace(Phase::Abandon);
        let _ = tokio::time::timeout(ABANDON_FLUSH, slots.acquire_many(all)).await;
    }
}

/// Serves one connection until the client closes it or the server shuts down.
async fn connection(
    shared: Arc<Shared>,
    builder: http1::Builder,
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
) {
    let open = Gauge::new(&shared, |s| &s.open);
    let service_shared = Arc::clone(&shared);
    let service = service_fn(move |request| {
        let shared = Arc::clone(&service_shared);
        async move { Ok::<_, Infallible>(handle(shared, request, peer).await) }
    });
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
        } else {
            tracing::debug!(%peer, "connection ended: {e}");
        }
    }
    drop(open);
    drop(permit);
}

/// What the response headers say about a request.
struct Meta {
    request_id: u64,
    timing: Timing,
    label: &'static str,
}

impl Shared {
    fn routes_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, String>> {
        self.routes.write().unwrap_or_else(|p| p.into_inner())
    }

    /// A request id for a request answered without reaching the runtime.
    fn local_id(&self) -> u64 {
        self.gate.local_id()
    }

    fn local_meta(&self, label: &'static str) -> Meta {
        Meta { request_id: self.local_id(), timing: Timing::default(), label }
    }

    /// The function name a request path routes to.
    fn function_for(&self, path: &str) -> Option<String> {
        let routes = self.routes.read().unwrap_or_else(|p| p.into_inner());
        match routes.get(path) {
            Some(function) => Some(function.clone()),
            None => path.strip_prefix('/').filter(|n| !n.is_empty()).map(str::to_owned),
        }
    }

    /// The route the admin API reports for `function`: its first explicit route, else the
    /// default one.
    fn route_of(routes: &HashMap<String, String>, function: &str) -> String {
        routes
            .iter()
            .filter(|(_, f)| f.as_str() == function)
            .map(|(r, _)| r)
            .min()
            .cloned()
            .unwrap_or_else(|| format!("/{function}"))
    }

    /// A response with the Luge headers (and `Retry-After` on 503).
    fn respond(
        &self,
        status: StatusCode,
        meta: &Meta,
        content_type: Option<&'static str>,
        body: Bytes,
    ) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        if let Some(content_type) = content_type {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        headers.insert(REQUEST_ID, HeaderValue::from(meta.request_id));
        headers.insert(EXECUTION_NS, HeaderValue::from(nanos(meta.timing.executed)));
        headers.insert(QUEUEING_NS, HeaderValue::from(nanos(meta.timing.queueing())));
        headers.insert(OUTCOME, HeaderValue::from_static(meta.label));
        if status == StatusCode::SERVICE_UNAVAILABLE {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(self.config.retry_after_secs));
        }
        response
    }

    /// A `text/plain` error response whose body is `reason`.
    fn error(
        &self,
        status: StatusCode,
        label: &'static str,
        reason: String,
    ) -> Response<Full<Bytes>> {
        self.respond(status, &self.local_meta(label), Some(TEXT), Bytes::from(reason))
    }

    fn method_not_allowed(&self, allow: &'static str) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "method_not_allowed");
        let mut response = self.error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("method not allowed (allowed: {allow})"),
        );
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        response
    }

    fn not_found(&self, path: &str) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "not_found");
        self.error(StatusCode::NOT_FOUND, "not_found", format!("no such endpoint `{path}`"))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn close(mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
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

/// Routes one request.
async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
    peer: SocketAddr,
) -> Response<Full<Bytes>> {
    // The request head has been read: its deadline and queueing count from here.
    let received = Instant::now();
    let _in_flight = Gauge::new(&shared, |s| &s.in_flight);
    let path = request.uri().path().to_owned();
    let get = request.method() == Method::GET;
    match path.as_str() {
        "/healthz" if get => {
            shared.respond(StatusCode::OK, &shared.local_meta("ok"), Some(TEXT), "ok".into())
        }
        "/metrics" if get => {
            let worker = Arc::clone(&shared);
            let text = tokio::task::spawn_blocking(move || {
                let mut text = worker.metrics.render(&worker.runtime);
                let _ = writeln!(
                    text,
                    "# HELP luge_http_connections_refused_total Connections answered 503 at once because max_connections were open.\n# TYPE luge_http_connections_refused_total counter\nluge_http_connections_refused_total {}",
                    worker.refused_connections.load(Ordering::Relaxed)
                );
                text
            })
            .await;
            match text {
                Ok(text) => shared.respond(
                    StatusCode::OK,
                    &shared.local_meta("ok"),
                    Some(PROMETHEUS),
                    Bytes::from(text),
                ),
                Err(e) => {
                    shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
                }
            }
        }
        "/healthz" | "/metrics" | "/admin/functions" if !get => shared.method_not_allowed("GET"),
        "/admin/functions" => list_functions(&shared).await,
        p if p.starts_with("/admin/functions/") => {
            let name = p.trim_start_matches("/admin/functions/").to_owned();
            admin_function(&shared, &name, request).await
        }
        p if is_reserved(p) => shared.not_found(p),
        _ => invoke(&shared, &path, request, received, peer).await,
    }
}

/// Parses a `*-Us` header: absent, or exactly one decimal u64 of at most [`MAX_HEADER_US`].
fn micros_header(headers: &HeaderMap, name: &HeaderName) -> Result<Option<Duration>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else { return Ok(None) };
    let bad = || {
        format!(
            "bad request: invalid `{name}` header (expected one decimal number of microseconds, \
             at most {MAX_HEADER_US})"
        )
    };
    if values.next().is_some() {
        return Err(bad());
    }
    let text = value.to_str().map_err(|_| bad())?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    match text.parse::<u64>() {
        Ok(us) if us <= MAX_HEADER_US => Ok(Some(Duration::from_micros(us))),
        _ => Err(bad()),
    }
}

impl Shared {
    /// Answers a body that is too large, draining the rest unless the client waits for
    /// `100 Continue` (then it has not sent the body and will not).
    fn too_large(
        &self,
        meta: &Meta,
        expect: bool,
        body: Limited<Incoming>,
        reason: String,
    ) -> Response<Full<Bytes>> {
        if !expect {
            drain(body);
        }
        close(self.respond(StatusCode::PAYLOAD_TOO_LARGE, meta, Some(TEXT), Bytes::from(reason)))
    }

    /// The answer to a body that could not be read.
    fn unreadable(&self, error: Unreadable) -> Response<Full<Bytes>> {
        let (status, label, reason) = match error {
            Unreadable::Timeout => (
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "request body not received in time".to_owned(),
            ),
            Unreadable::Read(e) => (
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("bad request: cannot read the body: {e}"),
            ),
        };
        self.metrics.malformed(Protocol::Http, label);
        close(self.error(status, label, reason))
    }

    /// The response to an outcome (recorded and logged by the gate, not here).
    fn render(&self, outcome: Outcome) -> Response<Full<Bytes>> {
        let code = http_status(&outcome.result);
        let label = outcome_label(&outcome.result);
        let meta = Meta { request_id: outcome.request_id, timing: outcome.timing, label };
        match outcome.result {
            Ok(stdout) => {
                self.respond(StatusCode::OK, &meta, Some(OCTET_STREAM), Bytes::from(stdout))
            }
            Err(failure) => {
                let shutting_down = matches!(failure, Failure::Rejected(Rejection::ShuttingDown));
                let reason = Bytes::from(failure.to_string());
                let response = self.respond(status(code), &meta, Some(TEXT), reason);
                if shutting_down { close(response) } else { response }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn deadline_headers_are_strict() {
        let mut h = HeaderMap::new();
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(None));
        h.insert(DEADLINE_US, HeaderValue::from_static(" 1500 "));
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(Some(Duration::from_micros(1500))));
        for bad in ["", "-1", "+5", "1.5", "1e3", "abc", "99999999999999999999", "3600000001"] {
            h.insert(DEADLINE_US, HeaderValue::from_static(bad));
            assert!(micros_header(&h, &DEADLINE_US).is_err(), "{bad:?} accepted");
        }
        h.insert(DEADLINE_US, HeaderValue::from_static("5"));
        h.append(DEADLINE_US, HeaderValue::from_static("6"));
        assert!(micros_header(&h, &DEADLINE_US).is_err(), "two values accepted");
    }

    #[test]
    fn routes_and_names_are_checked() {
        assert!(check_route("/x").is_ok());
        assert!(check_route("/a/b-c").is_ok());
        for bad in ["", "/", "x", "/metrics", "/healthz", "/admin", "/admin/x", "/a b", "/a?b"] {
            assert!(check_route(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_name("echo-2.v_1").is_ok());
        for bad in ["", "a/b", "a b", "metrics", "healthz", "admin", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
