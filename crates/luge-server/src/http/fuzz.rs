//! The fuzz target of the HTTP front end's request heads ([`fuzz_request_head`]): raw bytes go
//! through hyper's HTTP/1.1 server parser, configured as the server configures it, over an
//! in-memory connection, and each request it yields through every function the server applies
//! to a head — the route's [`Action`] on both planes, the admin token check, the `PUT` query,
//! `Luge-Deadline-Us` / `Luge-Expected-Us` and `traceparent`. No runtime, no socket: the
//! function is pure apart from a current-thread tokio runtime kept per thread.
//!
//! As in `luge_proto::fuzz_decode`, a panic here is a violated invariant, i.e. a bug.

use std::cell::RefCell;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::admin::parse_put_query;
use super::invoke::traceparent;
use super::*;

/// The token the harness's admin plane expects.
const TOKEN: &str = "0123456789abcdef";

thread_local! {
    static RUNTIME: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

/// The fuzz target: serves `data` as the bytes a client sent on one connection (then closes
/// its sending half) and checks what the server would read from each request head; returns how
/// many heads hyper parsed. Panics only on a violated invariant.
pub fn fuzz_request_head(data: &[u8]) -> usize {
    RUNTIME.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = tokio::runtime::Builder::new_current_thread().enable_all().build().ok();
        }
        cell.as_ref().map_or(0, |rt| rt.block_on(serve(data)))
    })
}

async fn serve(data: &[u8]) -> usize {
    let heads = std::cell::Cell::new(0);
    let (mut client, server) = tokio::io::duplex(1 << 16);
    // As the server builds its connections (the header timeout is moot: the input is finite).
    let builder = connection_builder(HttpConfig::default().header_read_timeout);
    let service = service_fn(|request: Request<Incoming>| {
        heads.set(heads.get() + 1);
        async move {
            check_head(&request);
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
        }
    });
    let conn = builder.serve_connection(TokioIo::new(server), service);
    let feed = async move {
        // The server's answers are read (and dropped) as they come, so neither side blocks.
        let (mut rx, mut tx) = tokio::io::split(&mut client);
        let send = async {
            let _ = tx.write_all(data).await;
            let _ = tx.shutdown().await;
        };
        let mut sink = Vec::new();
        let _ = tokio::join!(send, rx.read_to_end(&mut sink));
    };
    let _ = tokio::join!(conn, feed);
    heads.get()
}

/// Everything the server reads from a head, with the invariants it relies on.
fn check_head(request: &Request<Incoming>) {
    let (method, path, headers) = (request.method(), request.uri().path(), request.headers());
    let parsed = Action::parse(method, path);
    for plane in [Plane::Functions, Plane::Admin] {
        for metrics in [false, true] {
            match parsed.clone().on(plane, metrics) {
                Action::Function(name) => {
                    assert_eq!(format!("/admin/functions/{name}"), path, "function name");
                    check_name_invariants(&name);
                }
                Action::Chain(name) => {
                    assert_eq!(format!("/admin/chains/{name}"), path, "chain name");
                    check_name_invariants(&name);
                }
                Action::Invoke => assert!(!route::is_reserved(path), "reserved path invoked"),
                _ => {}
            }
        }
    }
    check_addressed_locally(request);
    if let Ok(token) = AdminToken::new(TOKEN)
        && token.admits(headers)
    {
        let values: Vec<_> = headers.get_all(header::AUTHORIZATION).iter().collect();
        assert_eq!(values.len(), 1, "admitted with several Authorization headers");
        assert_eq!(values[0].as_bytes(), format!("Bearer {TOKEN}").as_bytes());
    }
    if let Ok(query) = parse_put_query(request.uri().query().unwrap_or("")) {
        if let Some(route) = &query.route {
            assert!(check_route(route).is_ok(), "an accepted route fails its check");
        }
        for d in [query.deadline, query.expected].into_iter().flatten() {
            assert!(!d.is_zero() && d <= Duration::from_micros(MAX_HEADER_US), "query µs");
        }
    }
    for name in [&DEADLINE_US, &EXPECTED_US] {
        if let Ok(Some(d)) = micros_header(headers, name) {
            assert!(!d.is_zero() && d <= Duration::from_micros(MAX_HEADER_US), "header µs");
            let text = headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
            assert_eq!(text.trim().parse::<u128>().ok(), Some(d.as_micros()), "header value");
        }
    }
    if let Some(trace) = traceparent(headers) {
        assert!(trace.trace_id != 0 && trace.span_id != 0, "zero trace or span id");
        let text = trace.to_string();
        assert_eq!(text.len(), luge_proto::TRACEPARENT_LEN);
        assert_eq!(luge_proto::TraceContext::parse(&text), Some(trace), "traceparent round trip");
    }
}

/// What a tokenless admin listener lets through ([`plane::addressed_locally`]): one `Host` that
/// names an IP address, `localhost` or `*.localhost` (with a port or not), or none at all.
fn check_addressed_locally(request: &Request<Incoming>) {
    if !plane::addressed_locally(request.headers(), request.uri()) {
        return;
    }
    let hosts: Vec<_> = request.headers().get_all(header::HOST).iter().collect();
    assert!(hosts.len() <= 1, "several Host headers addressed locally");
    let Some(host) = hosts.first() else { return };
    let text = host.to_str().unwrap_or_else(|_| panic!("a non-text Host passed: {host:?}"));
    let name = match text.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => text,
    };
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    let lower = name.to_ascii_lowercase();
    assert!(
        bare.parse::<std::net::IpAddr>().is_ok()
            || lower == "localhost"
            || lower.ends_with(".localhost"),
        "Host {text:?} passed as local"
    );
}

fn check_name_invariants(name: &str) {
    if check_name(name).is_ok() {
        assert!(!name.is_empty() && name.len() <= MAX_NAME_LEN, "name length");
        assert!(check_route(&format!("/{name}")).is_ok(), "a valid name's default route");
    }
}
