//! The HTTP driver against a tiny hyper server: `/ok` answers 200 after a delay with Luge's
//! headers, `/fail` 503 `overloaded`, `/teapot` 418 without an outcome, `/slow` never in time,
//! `/spin` reports 20 µs + 3 ns × k as its execution.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use luge_bench::{FunctionRef, Mapping, Mode, RunConfig, Target, run};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;

mod common;

use common::{accounted, fixed_call, run_within};

#[derive(Default)]
struct Stats {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    requests: AtomicU64,
    without_deadline: AtomicU64,
    connections: AtomicU64,
}

struct Fake {
    addr: SocketAddr,
    stats: Arc<Stats>,
    _rt: Runtime,
}

async fn handle(
    req: Request<Incoming>,
    stats: Arc<Stats>,
    delay: Duration,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let now = stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
    stats.requests.fetch_add(1, Ordering::SeqCst);
    if req.headers().get(luge_proto::DEADLINE_HEADER).is_none() {
        stats.without_deadline.fetch_add(1, Ordering::SeqCst);
    }
    let path = req.uri().path().to_owned();
    let body = req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    let (status, outcome, execution) = match path.as_str() {
        "/ok" => (200, Some("ok"), 1_000),
        "/fail" => (503, Some("overloaded"), 0),
        "/teapot" => (418, None, 0),
        "/spin" => {
            let k: u64 = std::str::from_utf8(&body).unwrap().parse().unwrap();
            (200, Some("ok"), 20_000 + 3 * k)
        }
        _ => {
            tokio::time::sleep(Duration::from_secs(2)).await;
            (200, Some("ok"), 1)
        }
    };
    tokio::time::sleep(delay).await;
    let mut b = Response::builder()
        .status(status)
        .header(luge_proto::QUEUEING_HEADER, "500")
        .header(luge_proto::READINESS_HEADER, "300");
    if let Some(o) = outcome {
        b = b.header(luge_proto::OUTCOME_HEADER, o);
    }
    if execution > 0 {
        b = b.header(luge_proto::EXECUTION_HEADER, execution);
    }
    // Leaves the count before the response is written: the client may send its next request
    // as soon as it has this one.
    stats.in_flight.fetch_sub(1, Ordering::SeqCst);
    Ok(b.body(Full::new(Bytes::from_static(b"done"))).unwrap())
}

fn fake(delay: Duration) -> Fake {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let stats = Arc::new(Stats::default());
    let st = Arc::clone(&stats);
    rt.spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            st.connections.fetch_add(1, Ordering::SeqCst);
            let st = Arc::clone(&st);
            tokio::spawn(async move {
                let service = service_fn(move |req| handle(req, Arc::clone(&st), delay));
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Fake { addr, stats, _rt: rt }
}

fn config(addr: SocketAddr, workload: &str, route: &str) -> RunConfig {
    let mut c = fixed_call(Target::http(addr), workload, route);
    c.duration = Duration::from_millis(200);
    c
}

#[test]
fn open_loop_reads_luge_headers_and_names_errors() {
    let server = fake(Duration::from_millis(1));
    let mut c = config(server.addr, "high-bimodal,rate=400,seed=1", "/ok");
    c.duration = Duration::from_millis(300);
    c.mapping = Mapping::PerClass(vec![
        (FunctionRef::new(1, "/ok"), b"a".to_vec()),
        (FunctionRef::new(2, "/fail"), b"b".to_vec()),
    ]);
    let r = run(c).unwrap();
    accounted(&r);
    let s = &r.summary;
    let (ok, fail) = (&s.per_class[0], &s.per_class[1]);
    assert!(ok.planned > 20 && fail.planned > 20, "premise: both classes ran");
    assert_eq!((ok.errors, s.completed), (0, ok.planned));
    assert_eq!(s.errors_by_kind.get("overloaded"), Some(&fail.planned));
    assert_eq!((fail.deadline_miss_rate, fail.latency_us.p50), (1.0, None));
    // Latency ≥ the server's 1 ms; slowdown against the reported 1 µs execution.
    assert!(ok.latency_us.p50.unwrap() >= 1_000.0, "{:?}", ok.latency_us);
    assert!(ok.slowdown.p50.unwrap() >= 1_000.0, "{:?}", ok.slowdown);
    assert!((s.server_queueing_us.p50.unwrap() - 0.5).abs() < 0.01);
    // `Luge-Readiness-Ns` is read too.
    assert!((s.server_readiness_us.p50.unwrap() - 0.3).abs() < 0.01, "{:?}", s.server_readiness_us);
    let ok_samples = r.samples.iter().filter(|x| x.ok());
    assert!(ok_samples.clone().all(|x| x.server_execution_ns == Some(1_000)));
    assert_eq!(server.stats.without_deadline.load(Ordering::SeqCst), 0);
    assert_eq!(server.stats.requests.load(Ordering::SeqCst), s.planned);
}

#[test]
fn status_without_outcome_and_refused_connections() {
    let server = fake(Duration::ZERO);
    let r = run(config(server.addr, "fixed,rate=500,seed=2", "/teapot")).unwrap();
    accounted(&r);
    assert!(r.summary.planned > 20);
    assert_eq!(r.summary.errors_by_kind.get("http_418"), Some(&r.summary.planned));

    // A port nobody listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let r = run(config(closed, "fixed,rate=500,seed=2", "/ok")).unwrap();
    accounted(&r);
    assert_eq!(r.summary.errors_by_kind.get("connect"), Some(&r.summary.planned));
    assert_eq!(r.summary.latency_us.p50, None);
    // Nothing reached a socket: none sent, none sent too late.
    assert_eq!((r.summary.sent, r.summary.sent_too_late), (0, 0));
}

#[test]
fn requests_past_the_timeout_are_timeouts() {
    let server = fake(Duration::ZERO);
    let mut c = config(server.addr, "fixed,rate=200,seed=3", "/slow");
    c.duration = Duration::from_millis(50);
    c.timeout = Duration::from_millis(100);
    let r = run_within(c, Duration::from_secs(1));
    assert!(r.summary.planned > 3);
    assert_eq!(r.summary.errors_by_kind.get("timeout"), Some(&r.summary.planned));
    assert_eq!(r.summary.deadline_miss_rate, 1.0);
}

#[test]
fn closed_loop_keeps_n_requests_at_the_server() {
    let server = fake(Duration::from_millis(5));
    let mut c = config(server.addr, "fixed,seed=4", "/ok");
    c.mode = Mode::Closed { outstanding: 4 };
    c.duration = Duration::from_millis(300);
    // Connections spread over three receiver threads.
    c.http_threads = 3;
    let r = run(c).unwrap();
    accounted(&r);
    assert_eq!(r.summary.errors, 0);
    assert!(r.samples.len() > 80, "premise: the loop ran ({})", r.samples.len());
    assert_eq!(server.stats.max_in_flight.load(Ordering::SeqCst), 4);
    assert_eq!(r.max_in_flight, 4);
    assert!(server.stats.connections.load(Ordering::SeqCst) <= 4, "pooled connections");
    let busy: u64 = r.samples.iter().map(|s| s.latency_ns.unwrap()).sum();
    let first = r.samples.iter().map(|s| s.sent_ns.unwrap()).min().unwrap();
    let last = r.samples.iter().map(|s| s.intended_ns + s.latency_ns.unwrap()).max().unwrap();
    let mean_in_flight = busy as f64 / (last - first) as f64;
    assert!(mean_in_flight > 3.4 && mean_in_flight <= 4.0 + 1e-9, "{mean_in_flight}");
}

#[test]
fn open_loop_window_bounds_connections_and_in_flight() {
    let server = fake(Duration::from_millis(20));
    let mut c = config(server.addr, "fixed,rate=1000,seed=5", "/ok");
    c.mode = Mode::Open { window: 8 };
    let r = run(c).unwrap();
    accounted(&r);
    assert_eq!(r.summary.errors, 0);
    assert_eq!(server.stats.max_in_flight.load(Ordering::SeqCst), 8);
    assert!(server.stats.connections.load(Ordering::SeqCst) <= 8);
    // The backlog behind the window is in the latency (capacity 400/s < 1000/s offered).
    assert!(r.summary.latency_us.p99.unwrap() > 50_000.0, "{:?}", r.summary.latency_us);
}

#[test]
fn spin_is_calibrated_over_http() {
    let server = fake(Duration::ZERO);
    let mut c = config(server.addr, "sdvbs,rate=300,seed=6", "/spin");
    c.mapping = Mapping::Spin(FunctionRef::new(9, "/spin"));
    let r = run(c).unwrap();
    accounted(&r);
    let cal = r.calibration.as_ref().unwrap();
    assert!((cal.ns_per_iteration - 3.0).abs() < 0.03, "{cal}");
    assert!((cal.overhead_ns - 20_000.0).abs() < 500.0, "{cal}");
    for s in &r.samples {
        let (got, want) = (s.server_execution_ns.unwrap() as f64, s.nominal_execution_ns as f64);
        assert!((got / want - 1.0).abs() < 0.01, "{got} vs {want}");
    }
    assert!(r.to_json().contains("\"protocol\": \"http\""));
}

/// A plain TCP server that reads each request (head and `content-length` body) and writes
/// `response` for it, closing the connection after `per_connection` answers; the number of
/// connections it accepted.
fn raw_server(response: &'static [u8], per_connection: usize) -> (SocketAddr, Arc<AtomicU64>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            count.fetch_add(1, Ordering::SeqCst);
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                for _ in 0..per_connection {
                    // One whole request: the head, then its body.
                    let whole = loop {
                        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                            let len: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map_or(0, |v| v.trim().parse().unwrap());
                            if buf.len() >= end + 4 + len {
                                break end + 4 + len;
                            }
                        }
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    buf.drain(..whole);
                    if stream.write_all(response).is_err() {
                        return;
                    }
                }
                // Dropped: closed without saying so, as a keep-alive timeout would.
            });
        }
    });
    (addr, accepted)
}

/// Chunked answers (what a streaming server such as `wasmtime serve` sends) are read whole,
/// trailers included, and the connection is reused.
#[test]
fn chunked_answers_are_read_and_their_connection_reused() {
    let response = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nluge-execution-ns: 7\r\n\r\n\
                     4\r\ndone\r\n0\r\nx-trailer: 1\r\n\r\n";
    let (addr, accepted) = raw_server(response, usize::MAX);
    let mut c = config(addr, "fixed,rate=300,seed=7", "/ok");
    c.mode = Mode::Closed { outstanding: 1 };
    let r = run(c).unwrap();
    accounted(&r);
    assert_eq!(r.summary.errors, 0, "{:?}", r.summary.errors_by_kind);
    assert!(r.summary.completed > 20, "premise: the loop ran");
    assert!(r.samples.iter().all(|s| s.server_execution_ns == Some(7)));
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection, kept alive");
}

/// A server that closes each connection after one answer costs a new connection per request,
/// not a failed request: every one succeeds when the server says so (`connection: close`);
/// when it closes without saying, a request written in the instant between its answer and
/// its close can fail as `transport` (as with any HTTP/1.1 client), so only nearly all do.
#[test]
fn connections_the_server_closes_are_replaced() {
    let said = b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
    let silent = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    for (response, most_failed) in [(&said[..], 0), (&silent[..], 2)] {
        let (addr, accepted) = raw_server(response, 1);
        let r = run(config(addr, "fixed,rate=200,seed=8", "/ok")).unwrap();
        accounted(&r);
        let s = &r.summary;
        assert!(s.planned > 20, "premise: the run sent");
        let transport = s.errors_by_kind.get("transport").copied().unwrap_or(0);
        assert_eq!(s.errors, transport, "{:?}", s.errors_by_kind);
        assert!(s.errors <= most_failed, "{:?}", s.errors_by_kind);
        // A request that failed so was written on the closed connection: no new one.
        assert_eq!(accepted.load(Ordering::SeqCst), s.planned - s.errors);
        assert_eq!(r.stray_responses, 0);
    }
}

/// Bytes past an answer (here a second answer to one request) close the connection before it is
/// used again: the leftover is never taken for the next request's answer. Every request gets
/// its own first answer, on a connection of its own; nothing is stray.
#[test]
fn bytes_past_an_answer_retire_the_connection() {
    let doubled = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok\
                    HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    let (addr, accepted) = raw_server(doubled, usize::MAX);
    let r = run(config(addr, "fixed,rate=200,seed=11", "/ok")).unwrap();
    accounted(&r);
    let s = &r.summary;
    assert!(s.planned > 20, "premise: the run sent");
    assert_eq!(s.errors, 0, "{:?}", s.errors_by_kind);
    assert_eq!(r.stray_responses, 0, "the leftover was never parsed as an answer");
    assert_eq!(accepted.load(Ordering::SeqCst), s.planned, "a connection per request");
}

/// A connection closed in the middle of an answer, or answered with something that is not
/// HTTP, fails its request once, as `transport`; the run goes on with new connections.
#[test]
fn broken_answers_are_transport_errors() {
    let cut = b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly part of it";
    let garbage = b"SSH-2.0-OpenSSH_9.2\r\n\r\n";
    for response in [&cut[..], &garbage[..]] {
        let (addr, accepted) = raw_server(response, 1);
        let r = run(config(addr, "fixed,rate=200,seed=9", "/ok")).unwrap();
        accounted(&r);
        assert!(r.summary.planned > 20, "premise: the run sent");
        assert_eq!(r.summary.errors_by_kind.get("transport"), Some(&r.summary.planned));
        assert_eq!(accepted.load(Ordering::SeqCst), r.summary.planned);
        // No answer, so no latency (a CSV row without one), though each was sent.
        assert!(r.samples.iter().all(|s| s.latency_ns.is_none() && s.sent_ns.is_some()));
        // Each failed once: a second report would show as a stray answer.
        assert_eq!(r.stray_responses, 0);
    }
}

/// A server that answers at once, before any request, and closes (as `luge serve` refuses a
/// connection over its per-client cap): every request is accounted for — refused, or failed
/// to connect — and the run ends.
#[test]
fn a_server_that_answers_before_the_request_fails_it_once() {
    // `raw_server` reads first; this one writes first.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let eager = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        use std::io::Write;
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nluge-outcome: overloaded\r\n\
                  connection: close\r\ncontent-length: 0\r\n\r\n",
            );
        }
    });
    let r = run_within(config(eager, "fixed,rate=300,seed=10", "/ok"), Duration::from_secs(5));
    let s = &r.summary;
    assert!(s.planned > 20, "premise: the run sent");
    assert_eq!(s.completed, 0);
    let known = ["overloaded", "connect", "transport"];
    assert!(s.errors_by_kind.keys().all(|k| known.contains(&k.as_str())), "{:?}", s.errors_by_kind);
}

/// Requests that outlive the timeout hold every connection of a small window: the receiver
/// closes those connections, the next requests get new ones, and connections never outnumber
/// the window.
#[test]
fn timed_out_requests_give_their_connections_back_within_the_window() {
    let server = fake(Duration::ZERO);
    let mut c = config(server.addr, "fixed,rate=100,seed=11", "/slow");
    c.mode = Mode::Open { window: 2 };
    c.duration = Duration::from_millis(300);
    c.timeout = Duration::from_millis(50);
    let r = run_within(c, Duration::from_secs(3));
    let s = &r.summary;
    assert!(s.planned > 10, "premise: the run planned");
    // Each slot is held ~60 ms (the timeout, then the ledger's reaping), so the pacer sends
    // about two requests per 60 ms and gives up on the rest at its hard stop: `unsent`.
    let timeouts = s.errors_by_kind.get("timeout").copied().unwrap_or(0);
    let unsent = s.errors_by_kind.get("unsent").copied().unwrap_or(0);
    assert!(timeouts >= 6, "{:?}", s.errors_by_kind);
    assert_eq!(timeouts + unsent, s.planned, "{:?}", s.errors_by_kind);
    assert!(r.max_connections.unwrap() <= 2, "{:?}", r.max_connections);
    // More connections than the window were opened over the run: the timed-out ones went.
    assert!(server.stats.connections.load(Ordering::SeqCst) > 2);
}
