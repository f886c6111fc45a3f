//! The HTTP/1.1 driver: hyper client connections on a small tokio runtime, fed by the pacer.
//!
//! Tokio's timer has a 1 ms resolution, too coarse to pace an open loop (every request would
//! be up to 1 ms late, all of it counted as latency). So the same precise pacer thread as for
//! UDP decides *when*; at each intended time it spawns the request onto the runtime. The
//! window is the ledger's (the pacer blocks for a slot), which also bounds the number of
//! connections: HTTP/1.1 has one request in flight per connection, and the [`pool`] hands a
//! connection back before the answer frees its slot, so it never opens more connections than
//! the window. A request's send time is when
//! the pacer hands it to the runtime; its response time is taken when the whole body has been
//! read, so connection set-up and the runtime's scheduling count as latency.
//!
//! Headers (`docs/http.md`): requests carry [`DEADLINE_HEADER`] (relative deadline, µs) and,
//! when enabled, [`EXPECTED_HEADER`]; responses are read for [`EXECUTION_HEADER`],
//! [`QUEUEING_HEADER`] and [`OUTCOME_HEADER`]. Status 200 is success; any other status is an
//! error named by the `Luge-Outcome` label when it names a known status (`overloaded`,
//! `killed`, …) or one of the two refusals without a status of their own
//! (`deadline_unreachable`, `shed`), else `http_NNN`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HOST, HeaderValue};
use hyper::{Request, StatusCode, Uri};
use tokio::runtime::Runtime;

use self::pool::{ConnectError, Pool};

use crate::calibrate::{CALIBRATION_DEADLINE_US, Caller, Reply};
use crate::drive::Transport;
use crate::error::BenchError;
use crate::ledger::Ledger;
use crate::plan::Planned;
use luge_proto::{
    DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER, OUTCOME_HEADER, QUEUEING_HEADER,
    READINESS_HEADER,
};

use crate::sample::ErrorKind;
use crate::target::FunctionRef;

mod pool;

/// The runtime and the connections of an HTTP run.
pub(crate) struct HttpSetup {
    rt: Runtime,
    pool: Arc<Pool>,
    addr: SocketAddr,
    /// The `Host` of every request, built once.
    host: HeaderValue,
    base_path: String,
}

impl HttpSetup {
    pub(crate) fn new(
        addr: SocketAddr,
        base_path: &str,
        threads: usize,
    ) -> Result<Self, BenchError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("luge-bench-http")
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("starting the HTTP client runtime", e))?;
        // A socket address is always a valid header value.
        let host = HeaderValue::from_str(&addr.to_string())
            .map_err(|e| BenchError::Config(format!("`{addr}` as a Host header: {e}")))?;
        let pool = Arc::new(Pool::new(addr));
        Ok(Self { rt, pool, addr, host, base_path: base_path.to_owned() })
    }

    /// The path of a function on the target (requests carry the origin form and a `Host`).
    pub(crate) fn uri(&self, f: &FunctionRef) -> Result<Uri, BenchError> {
        let text = format!("{}{}", self.base_path, f.http_route);
        text.parse::<Uri>().map_err(|e| BenchError::Config(format!("bad path `{text}`: {e}")))
    }

    /// The most connections that were open at once.
    pub(crate) fn most_connections(&self) -> usize {
        self.pool.most_open()
    }

    pub(crate) fn caller(&self, timeout: Duration) -> HttpCaller<'_> {
        HttpCaller { setup: self, timeout }
    }

    pub(crate) fn transport(
        &self,
        functions: &[FunctionRef],
        ledger: Arc<Ledger>,
        timeout: Duration,
        send_expected: bool,
    ) -> Result<HttpTransport, BenchError> {
        let uris = functions.iter().map(|f| self.uri(f)).collect::<Result<_, _>>()?;
        Ok(HttpTransport {
            handle: self.rt.handle().clone(),
            pool: Arc::clone(&self.pool),
            host: self.host.clone(),
            uris,
            ledger,
            timeout,
            send_expected,
        })
    }

    /// Stops the runtime, dropping requests still in flight.
    pub(crate) fn shutdown(self) {
        drop(self.pool);
        self.rt.shutdown_timeout(Duration::from_millis(200));
    }
}

fn request(
    uri: Uri,
    host: &HeaderValue,
    payload: Bytes,
    deadline_us: u32,
    expected_us: Option<u32>,
) -> Request<Full<Bytes>> {
    let mut b = Request::post(uri).header(HOST, host).header(DEADLINE_HEADER, deadline_us);
    if let Some(e) = expected_us {
        b = b.header(EXPECTED_HEADER, e);
    }
    // A POST with a valid URI, a socket address for host and integer headers always builds.
    b.body(Full::new(payload)).unwrap_or_else(|_| Request::new(Full::new(Bytes::new())))
}

/// Sends one request on a connection of `pool` and reads the whole response; the connection
/// is back in the pool before this returns.
async fn exchange(
    pool: &Pool,
    build: impl FnOnce() -> Request<Full<Bytes>>,
    timeout: Duration,
) -> Reply {
    let error = |kind| Reply { error: Some(kind), ..Reply::default() };
    let fut = async {
        let mut conn = match pool.checkout().await {
            Ok(conn) => conn,
            Err(ConnectError::Tcp | ConnectError::Handshake) => return error(ErrorKind::Connect),
        };
        let Ok(resp) = conn.sender().send_request(build()).await else {
            return error(ErrorKind::Transport);
        };
        let (parts, body) = resp.into_parts();
        if body.collect().await.is_err() {
            return error(ErrorKind::Transport);
        }
        pool.checkin(conn);
        let text = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let number = |name: &str| text(name).and_then(|s| s.trim().parse::<u64>().ok());
        let failure = (parts.status != StatusCode::OK)
            .then(|| ErrorKind::from_http(parts.status.as_u16(), text(OUTCOME_HEADER)));
        Reply {
            error: failure,
            execution_ns: number(EXECUTION_HEADER),
            queueing_ns: number(QUEUEING_HEADER),
            readiness_ns: number(READINESS_HEADER),
        }
    };
    tokio::time::timeout(timeout, fut).await.unwrap_or_else(|_| error(ErrorKind::Timeout))
}

/// The sending half: spawns each request onto the runtime.
pub(crate) struct HttpTransport {
    handle: tokio::runtime::Handle,
    pool: Arc<Pool>,
    host: HeaderValue,
    uris: Vec<Uri>,
    ledger: Arc<Ledger>,
    timeout: Duration,
    send_expected: bool,
}

impl Transport for HttpTransport {
    fn send(
        &mut self,
        p: &Planned,
        _: &FunctionRef,
        payload: &[u8],
        intended_ns: u64,
        _: u64,
    ) -> Result<(), ErrorKind> {
        let uri = self.uris.get(p.function).cloned().ok_or(ErrorKind::Send)?;
        let expected = self.send_expected.then(|| p.expected_us());
        let (host, payload, planned) = (self.host.clone(), Bytes::copy_from_slice(payload), *p);
        let (pool, ledger, timeout, seq) =
            (Arc::clone(&self.pool), Arc::clone(&self.ledger), self.timeout, p.seq);
        self.handle.spawn(async move {
            // The deadline left is taken when a connection is at hand, just before the request
            // is written: the task may have waited for this thread and for the connection.
            let build = || {
                let waited = ledger.now_ns().saturating_sub(intended_ns);
                request(uri, &host, payload, planned.deadline_left_us(waited), expected)
            };
            let reply = exchange(&pool, build, timeout).await;
            let now = ledger.now_ns();
            ledger.complete(seq, now, reply);
        });
        Ok(())
    }
}

/// One request at a time, for calibration.
pub(crate) struct HttpCaller<'a> {
    setup: &'a HttpSetup,
    timeout: Duration,
}

impl Caller for HttpCaller<'_> {
    fn call(&mut self, function: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError> {
        let uri = self.setup.uri(function)?;
        let req = request(
            uri,
            &self.setup.host,
            Bytes::copy_from_slice(payload),
            CALIBRATION_DEADLINE_US,
            None,
        );
        let reply = self.setup.rt.block_on(exchange(&self.setup.pool, || req, self.timeout));
        match reply.error {
            Some(ErrorKind::Timeout) => Err(BenchError::Calibration(format!(
                "no answer within {:?} (is the server running on the target?)",
                self.timeout
            ))),
            Some(ErrorKind::Connect) => {
                Err(BenchError::Calibration(format!("cannot connect to {}", self.setup.addr)))
            }
            _ => Ok(reply),
        }
    }
}
