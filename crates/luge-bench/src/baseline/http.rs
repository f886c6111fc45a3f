//! The bare hyper baseline, and the HTTP plumbing the process server shares with it: a tokio
//! runtime built as Luge's HTTP front end builds it (`threads == 1`: a current-thread runtime on
//! the server's own thread; more: a multi-thread runtime with that many workers), a listener with
//! the same socket options, and the same hyper HTTP/1.1 connection settings (keep-alive, header
//! read timeout, `TCP_NODELAY`, a bound on open connections).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{Semaphore, watch};

use super::{BaselineError, BaselineStats, Counters, SHUTDOWN_GRACE, bump};
use luge_server::HttpConfig;

/// Pause after a failed `accept` before trying again (as in `http.rs`).
/// After the grace period, how long the runtime gets to finish what is left.
const RUNTIME_FLUSH: Duration = Duration::from_millis(200);

const TEXT: &str = "text/plain; charset=utf-8";

/// Settings of the [`BareHttpServer`]; the same meaning as in Luge's [`HttpConfig`] (which
/// converts into one: `BareHttpConfig::from(&http_config)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BareHttpConfig {
    /// Address to listen on (port 0 = any free port; see [`BareHttpServer::local_addr`]).
    pub addr: SocketAddr,
    /// Tokio worker threads serving connections (1 = a current-thread runtime on the server's
    /// own thread).
    pub threads: usize,
    /// Connections open at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Listen backlog.
    pub backlog: u32,
    /// A client must send a complete request head within this time (also the idle timeout of
    /// a keep-alive connection).
    pub header_read_timeout: Duration,
}

impl Default for BareHttpConfig {
    /// Luge's HTTP defaults, on `127.0.0.1:0`.
    fn default() -> Self {
        let luge = HttpConfig::default();
        Self { addr: SocketAddr::from(([127, 0, 0, 1], 0)), ..Self::from(&luge) }
    }
}

impl From<&HttpConfig> for BareHttpConfig {
    /// The same address, threads and connection settings as Luge's front end.
    fn from(c: &HttpConfig) -> Self {
        Self {
            addr: c.addr,
            threads: c.threads,
            max_connections: c.max_connections,
            backlog: c.backlog,
            header_read_timeout: c.header_read_timeout,
        }
    }
}

/// A running bare HTTP baseline: a listener and a tokio runtime on a thread of their own.
/// Dropping it stops the server.
#[derive(Debug)]
pub struct BareHttpServer {
    host: Host,
    local_addr: SocketAddr,
    counters: Arc<Counters>,
}

impl BareHttpServer {
    /// Binds `config.addr` and starts serving on a thread of its own (`luge-bare-http`).
    pub fn start(config: BareHttpConfig) -> Result<Self, BaselineError> {
        let rt = runtime(config.threads, "luge-bare-http")?;
        let listener = {
            let _context = rt.enter();
            listen(config.addr, config.backlog)?
        };
        let local_addr = listener.local_addr().map_err(BaselineError::Socket)?;
        let counters = Arc::new(Counters::default());
        let handler_counters = Arc::clone(&counters);
        let handler = move |request: Request<Incoming>| {
            bump(&handler_counters.requests);
            answer_ok(request)
        };
        let settings = HttpSettings::from(&config);
        let host = Host::start(rt, "luge-bare-http", move |stop| {
            serve(listener, settings, stop, handler)
        })?;
        tracing::info!(addr = %local_addr, "bare HTTP baseline listening");
        Ok(Self { host, local_addr, counters })
    }

    /// The address the server listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// A snapshot of the counters (`requests` only).
    pub fn stats(&self) -> BaselineStats {
        self.counters.snapshot()
    }

    /// Stops accepting, lets connections finish their request (idle keep-alive connections
    /// close at once) for up to 2 s, and returns once the server thread has ended.
    pub fn shutdown(mut self) {
        self.host.stop();
    }
}

/// Reads (and discards) the body, then answers `200 ok`.
async fn answer_ok(request: Request<Incoming>) -> Response<Full<Bytes>> {
    let mut body = request.into_body();
    while let Some(frame) = body.frame().await {
        if let Err(e) = frame {
            return text(StatusCode::BAD_REQUEST, e.to_string().into());
        }
    }
    text(StatusCode::OK, Bytes::from_static(b"ok"))
}

/// A `text/plain` response.
pub(super) fn text(status: StatusCode, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(TEXT));
    response
}

/// The connection settings [`serve`] applies.
#[derive(Debug, Clone, Copy)]
pub(super) struct HttpSettings {
    pub(super) max_connections: usize,
    pub(super) header_read_timeout: Duration,
}

impl From<&BareHttpConfig> for HttpSettings {
    fn from(c: &BareHttpConfig) -> Self {
        Self { max_connections: c.max_connections, header_read_timeout: c.header_read_timeout }
    }
}

/// A tokio runtime as Luge's HTTP front end builds it.
pub(super) fn runtime(
    threads: usize,
    name: &str,
) -> Result<tokio::runtime::Runtime, BaselineError> {
    if threads == 0 {
        return Err(BaselineError::Config("threads must be at least 1".into()));
    }
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_io().enable_time().thread_name(name).build().map_err(BaselineError::Runtime)
}

/// A listening socket as Luge's HTTP front end opens it; call inside the runtime's context.
pub(super) fn listen(addr: SocketAddr, backlog: u32) -> Result<TcpListener, BaselineError> {
    let open = || -> io::Result<TcpListener> {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(backlog)
    };
    open().map_err(|source| BaselineError::Bind { addr, source })
}

/// A tokio runtime driving one future on a thread of its own until told to stop.
pub(super) struct Host {
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").field("running", &self.thread.is_some()).finish_non_exhaustive()
    }
}

impl Host {
    /// Runs `main(stop)` on `rt` on thread `name`; `stop` turns `true` on [`stop`](Self::stop),
    /// and `main` must then return.
    pub(super) fn start<F>(
        rt: tokio::runtime::Runtime,
        name: &str,
        main: impl FnOnce(watch::Receiver<bool>) -> F,
    ) -> Result<Self, BaselineError>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let (stop, rx) = watch::channel(false);
        let main = main(rx);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                rt.block_on(main);
                rt.shutdown_timeout(RUNTIME_FLUSH);
            })
            .map_err(BaselineError::Thread)?;
        Ok(Self { stop, thread: Some(thread) })
    }

    /// Signals `main` to stop and waits for the thread; idempotent.
    pub(super) fn stop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take()
            && thread.join().is_err()
        {
            tracing::error!("a baseline server thread panicked");
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Resolves once `stop` turns `true` (or its sender is gone).
pub(super) async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}

/// The accept loop, then a graceful shutdown of up to [`SHUTDOWN_GRACE`]: every request gets
/// `handler(request)` as its response.
pub(super) async fn serve<H, F>(
    listener: TcpListener,
    settings: HttpSettings,
    stop: watch::Receiver<bool>,
    handler: H,
) where
    H: Fn(Request<Incoming>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let max_connections =
        settings.max_connections.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout)
        .keep_alive(true);
    let stopping = stopped(stop.clone());
    tokio::pin!(stopping);
    while let Some((stream, peer, permit)) =
        luge_server::net::accept_next(&listener, &slots, &mut stopping).await
    {
        let handler = handler.clone();
        let service = service_fn(move |request| {
            let response = handler(request);
            async move { Ok::<_, Infallible>(response.await) }
        });
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::pin!(conn);
            let result = tokio::select! {
                result = conn.as_mut() => result,
                () = stopped(stop) => {
                    conn.as_mut().graceful_shutdown();
                    conn.as_mut().await
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, "baseline connection ended: {e}");
            }
            drop(permit);
        });
    }
    drop(listener);
    // Every connection holds a permit: all permits back = every connection closed.
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(SHUTDOWN_GRACE, slots.acquire_many(all)).await.is_err() {
        tracing::info!("baseline HTTP grace period over; closing the remaining connections");
    }
}
