//! The HTTP/1.1 driver: a pooled hyper client on a small tokio runtime, fed by the pacer.
//!
//! Tokio's timer has a 1 ms resolution, too coarse to pace an open loop (every request would
//! be up to 1 ms late, all of it counted as latency). So the same precise pacer thread as for
//! UDP decides *when*; at each intended time it spawns the request onto the runtime. The
//! window is the ledger's (the pacer blocks for a slot), which also bounds the number of
//! connections: HTTP/1.1 has one request in flight per connection, and the pool
//! (`pool_max_idle_per_host` = window) keeps them open for reuse. A request's send time is when
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
use hyper::{Request, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::runtime::Runtime;

use crate::calibrate::{CALIBRATION_DEADLINE_US, Caller, Reply};
use crate::drive::Transport;
use crate::error::BenchError;
use crate::ledger::Ledger;
use crate::plan::Planned;
use luge_proto::{
    DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER, OUTCOME_HEADER, QUEUEING_HEADER,
};

use crate::sample::ErrorKind;
use crate::target::FunctionRef;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The runtime and the pooled client of an HTTP run.
pub(crate) struct HttpSetup {
    rt: Runtime,
    client: HttpClient,
    addr: SocketAddr,
    base_path: String,
}

impl HttpSetup {
    pub(crate) fn new(
        addr: SocketAddr,
        base_path: &str,
        threads: usize,
        window: usize,
    ) -> Result<Self, BenchError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("luge-bench-http")
            .enable_all()
            .build()
            .map_err(|e| BenchError::io("starting the HTTP client runtime", e))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(window)
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_timer(TokioTimer::new())
            .build(connector);
        Ok(Self { rt, client, addr, base_path: base_path.to_owned() })
    }

    /// The URI of a function on the target.
    pub(crate) fn uri(&self, f: &FunctionRef) -> Result<Uri, BenchError> {
        let text = format!("http://{}{}{}", self.addr, self.base_path, f.http_route);
        text.parse::<Uri>().map_err(|e| BenchError::Config(format!("bad URI `{text}`: {e}")))
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
            client: self.client.clone(),
            uris,
            ledger,
            timeout,
            send_expected,
        })
    }

    /// Stops the runtime, dropping requests still in flight.
    pub(crate) fn shutdown(self) {
        drop(self.client);
        self.rt.shutdown_timeout(Duration::from_millis(200));
    }
}

fn request(
    uri: Uri,
    payload: &[u8],
    deadline_us: u32,
    expected_us: Option<u32>,
) -> Request<Full<Bytes>> {
    let mut b = Request::post(uri).header(DEADLINE_HEADER, deadline_us);
    if let Some(e) = expected_us {
        b = b.header(EXPECTED_HEADER, e);
    }
    // A POST with a valid URI and integer headers always builds.
    b.body(Full::new(Bytes::copy_from_slice(payload)))
        .unwrap_or_else(|_| Request::new(Full::new(Bytes::new())))
}

/// Sends one request and reads the whole response.
async fn exchange(client: &HttpClient, req: Request<Full<Bytes>>, timeout: Duration) -> Reply {
    let error = |kind| Reply { error: Some(kind), ..Reply::default() };
    let fut = async {
        let resp = match client.request(req).await {
            Ok(r) => r,
            Err(e) => {
                return error(if e.is_connect() {
                    ErrorKind::Connect
                } else {
                    ErrorKind::Transport
                });
            }
        };
        let (parts, body) = resp.into_parts();
        if body.collect().await.is_err() {
            return error(ErrorKind::Transport);
        }
        let text = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok());
        let number = |name: &str| text(name).and_then(|s| s.trim().parse::<u64>().ok());
        let failure = (parts.status != StatusCode::OK)
            .then(|| ErrorKind::from_http(parts.status.as_u16(), text(OUTCOME_HEADER)));
        Reply {
            error: failure,
            execution_ns: number(EXECUTION_HEADER),
            queueing_ns: number(QUEUEING_HEADER),
        }
    };
    tokio::time::timeout(timeout, fut).await.unwrap_or_else(|_| error(ErrorKind::Timeout))
}

/// The sending half: spawns each request onto the runtime.
pub(crate) struct HttpTransport {
    handle: tokio::runtime::Handle,
    client: HttpClient,
    uris: Vec<Uri>,
    ledger: Arc<Ledger>,
    timeout: Duration,
    send_expected: bool,
}

impl Transport for HttpTransport {
    fn send(&mut self, p: &Planned, _: &FunctionRef, payload: &[u8]) -> Result<(), ErrorKind> {
        let uri = self.uris.get(p.function).cloned().ok_or(ErrorKind::Send)?;
        let req =
            request(uri, payload, p.deadline_us(), self.send_expected.then(|| p.expected_us()));
        let (client, ledger, timeout, seq) =
            (self.client.clone(), Arc::clone(&self.ledger), self.timeout, p.seq);
        self.handle.spawn(async move {
            let reply = exchange(&client, req, timeout).await;
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
        let req = request(self.setup.uri(function)?, payload, CALIBRATION_DEADLINE_US, None);
        let reply = self.setup.rt.block_on(exchange(&self.setup.client, req, self.timeout));
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
