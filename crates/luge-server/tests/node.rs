//! [`Node`]: one function served over both front ends, start-up that fails whole, and the
//! ordered shutdown that answers what both front ends have in flight. A real runtime (one
//! worker, sleep mode, unpinned, so tests can run in parallel) on `127.0.0.1:0`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use luge_client::{CallOptions, RpcClient, Status};
use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{HttpConfig, Node, NodeConfig, NodeError, NodeFunction, UdpConfig};

mod common;

use common::{ECHO, SPIN};

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

fn config() -> NodeConfig {
    NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: Some(HttpConfig { addr: loopback(), ..HttpConfig::default() }),
        udp: Some(UdpConfig { addr: loopback(), ..UdpConfig::default() }),
    }
}

fn function(name: &str, wat: &str, route: &str) -> NodeFunction {
    let mut config = FunctionConfig::new(name);
    config.relative_deadline = Duration::from_secs(10);
    NodeFunction { config, module: wat.as_bytes().to_vec(), route: route.to_owned() }
}

/// `POST path` with `body` on a fresh connection; the status code and the body.
fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    let answer = common::exchange(addr, "POST", path, &[], body);
    (answer.status, answer.body)
}

fn opts() -> CallOptions {
    CallOptions { deadline: Some(Duration::from_secs(10)), ..CallOptions::default() }
}

#[test]
fn one_function_answers_over_both_front_ends() {
    let node = Node::start(config(), &[function("echo", ECHO, "/v1/echo")]).unwrap();
    let (http, rpc) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
    assert_eq!(post(http, "/v1/echo", "via http"), (200, "via http".to_owned()));
    assert_eq!(post(http, "/echo", "default route"), (200, "default route".to_owned()));
    let id = node.runtime().function("echo").unwrap().id.0;
    let reply = RpcClient::connect(rpc).unwrap().call(id, b"via rpc", opts()).unwrap();
    assert_eq!((reply.status, &reply.payload[..]), (Status::Ok, &b"via rpc"[..]));
    // Both front ends record into the node's one set of metrics (UDP-RPC records just after
    // it answers).
    let start = Instant::now();
    while node.metrics().requests("echo", "ok") < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "not all three were counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(node.metrics().requests("echo", "ok"), 3);
    // Registered later, routed too.
    node.register(&function("late", ECHO, "/v2/late")).unwrap();
    assert_eq!(post(http, "/v2/late", "x"), (200, "x".to_owned()));
    assert_eq!(node.shutdown().udp_unanswered, 0);
    assert!(TcpStream::connect(http).is_err(), "still accepting after shutdown");
}

/// A node starts with its functions' routes handed to the front end (`HttpConfig::routes`,
/// installed before the listener accepts), alongside the front end's own; and a function whose
/// route is refused at run time is not left registered without it. (The start-up race itself —
/// a request in the moment between the listener opening and a route set after — is too short
/// to provoke from a test.)
#[test]
fn routes_are_in_place_from_the_first_connection() {
    let mut c = config();
    if let Some(http) = c.http.as_mut() {
        http.routes = vec![("/v0/echo".to_owned(), "echo".to_owned())];
    }
    let node = Node::start(c, &[function("echo", ECHO, "/v1/echo")]).unwrap();
    let http = node.http_addr().unwrap();
    let mut routes = node.http().unwrap().routes();
    routes.sort();
    assert_eq!(
        routes,
        [("/v0/echo", "echo"), ("/v1/echo", "echo")].map(|(r, f)| (r.to_owned(), f.to_owned()))
    );
    assert_eq!(post(http, "/v0/echo", "a").1, "a");
    match node.register(&function("late", ECHO, "/metrics")) {
        Err(NodeError::Route { route, .. }) => assert_eq!(route, "/metrics"),
        other => panic!("expected a route error, got {other:?}"),
    }
    assert!(node.runtime().function("late").is_none(), "registered without its route");
    drop(node);
    // A bad route in the front end's own list refuses the start.
    let mut c = config();
    if let Some(http) = c.http.as_mut() {
        http.routes = vec![("/healthz".to_owned(), "echo".to_owned())];
    }
    assert!(matches!(Node::start(c, &[]), Err(NodeError::Http(_))));
}

#[test]
fn start_up_fails_whole() {
    // A bad module: nothing is left listening, the error names the function.
    let mut http = loopback();
    {
        let probe = std::net::TcpListener::bind(loopback()).unwrap();
        http.set_port(probe.local_addr().unwrap().port());
    }
    let mut c = config();
    c.http = Some(HttpConfig { addr: http, ..HttpConfig::default() });
    let bad = NodeFunction { module: b"not wasm".to_vec(), ..function("bad", ECHO, "/bad") };
    match Node::start(c, &[function("echo", ECHO, "/echo"), bad]) {
        Err(NodeError::Register { name, .. }) => assert_eq!(name, "bad"),
        other => panic!("expected a registration error, got {other:?}"),
    }
    assert!(TcpStream::connect(http).is_err(), "a failed start left HTTP listening");
    // A route that is not a path.
    match Node::start(config(), &[function("echo", ECHO, "no-slash")]) {
        Err(NodeError::Route { route, name, .. }) => {
            assert_eq!((&*route, &*name), ("no-slash", "echo"))
        }
        other => panic!("expected a route error, got {other:?}"),
    }
    // A runtime that cannot start.
    let mut c = config();
    c.runtime.workers = 0;
    assert!(matches!(Node::start(c, &[]), Err(NodeError::Runtime(_))));
}

#[test]
fn shutdown_answers_both_front_ends_in_flight_then_stops() {
    let node = Node::start(config(), &[function("spin", SPIN, "/spin")]).unwrap();
    let (http, rpc) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
    let id = node.runtime().function("spin").unwrap().id.0;
    // ~30 ms each on the one worker, one over each protocol.
    let over_http = std::thread::spawn(move || post(http, "/spin", "20000000"));
    let over_rpc = std::thread::spawn(move || {
        RpcClient::connect(rpc).unwrap().call(id, b"20000000", opts()).unwrap()
    });
    let start = Instant::now();
    // Premise: both have reached the runtime (a connection still in the listen backlog when
    // shutdown begins is never accepted).
    while node.http().unwrap().in_flight() == 0 || node.udp().unwrap().in_flight() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the requests never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(node.shutdown().udp_unanswered, 0);
    let (status, body) = over_http.join().unwrap();
    assert_eq!((status, body.len()), (200, 17), "{body}");
    let reply = over_rpc.join().unwrap();
    assert_eq!((reply.status, reply.payload.len()), (Status::Ok, 17));
}

/// One grace period for the whole node: a request still running when it ends is stopped then,
/// not after a second grace period of the runtime's own.
#[test]
fn shutdown_takes_one_grace_period_not_two() {
    let grace = Duration::from_secs(2);
    let mut config = config();
    config.runtime.shutdown_grace = grace;
    let mut spin = function("spin", SPIN, "/spin");
    spin.config.limits.max_execution = Duration::from_secs(30);
    spin.config.relative_deadline = Duration::from_secs(30);
    let node = Node::start(config, &[spin]).unwrap();
    let http = node.http_addr().unwrap();
    // ~6 s of work: it outlives the grace period.
    let long = std::thread::spawn(move || post(http, "/spin", "3000000000"));
    let start = Instant::now();
    while node.runtime().live_sandboxes() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the request never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let start = Instant::now();
    node.shutdown();
    let took = start.elapsed();
    // The grace, the HTTP front end's 200 ms to flush its 503s, and slack for a loaded machine;
    // two grace periods (the bug) took 4 s.
    assert!(took >= grace && took < grace + Duration::from_millis(1500), "shutdown took {took:?}");
    let (status, _) = long.join().unwrap();
    assert_eq!(status, 503, "answered `shutting down` at the end of the grace");
}

/// Both front ends submit through one gate: a request refused before it runs is counted once,
/// under its function, whichever protocol carried it; an unknown function is counted as
/// malformed input of the protocol that named it; and a refusal reports its time in the node.
#[test]
fn both_front_ends_account_through_one_gate() {
    let mut small = function("echo", ECHO, "/echo");
    small.config.limits.max_request_bytes = 8;
    let node = Node::start(config(), &[small]).unwrap();
    let (http, rpc) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
    let id = node.runtime().function("echo").unwrap().id.0;
    let mut client = RpcClient::connect(rpc).unwrap();

    assert_eq!(post(http, "/echo", "123456789").0, 413);
    let reply = client.call(id, b"123456789", opts()).unwrap();
    assert_eq!(reply.status, Status::TooLarge);
    assert_eq!(reply.execution, Duration::ZERO);
    assert!(reply.queueing > Duration::ZERO, "a refusal reports no time in the node");
    assert_eq!(post(http, "/echo", "12345678"), (200, "12345678".to_owned()));
    let reply = client.call(id, b"12345678", opts()).unwrap();
    assert_eq!((reply.status, &reply.payload[..]), (Status::Ok, &b"12345678"[..]));

    let metrics = node.metrics();
    let start = Instant::now();
    while metrics.requests("echo", "ok") < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "the answers were not counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(metrics.requests("echo", "too_large"), 2, "each refusal counted once");
    assert_eq!(metrics.requests("echo", "ok"), 2);

    assert_eq!(post(http, "/nope", "x").0, 404);
    // Padded: a refusal is never larger than its request, so one under 40 bytes gets none.
    let reply = client.call(id + 1000, b"x, padded to 8 bytes", opts()).unwrap();
    assert_eq!(reply.status, Status::UnknownFunction);
    assert_eq!(metrics.malformed_total(luge_server::Protocol::Http), 1);
    assert_eq!(metrics.malformed_total(luge_server::Protocol::Rpc), 1);
    assert_eq!(node.shutdown().udp_unanswered, 0);
}
