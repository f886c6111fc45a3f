//! Issue #15: the two protocols check a request's fields with one function and give them one
//! meaning (`0` = not given; at most one hour), and the small HTTP answers found on the way
//! (`HEAD /healthz`, what a 404 says). One [`Node`] serving both front ends on `127.0.0.1:0`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use luge_client::{CallOptions, RpcClient, Status};
use luge_proto::{Flags, Message, Request, RequestHeader};
use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{HttpConfig, Node, NodeConfig, NodeFunction, UdpConfig};

const NOOP: &str = include_str!("../../../functions/builtin/noop.wat");

fn node() -> Node {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: Some(HttpConfig { addr: loopback, ..HttpConfig::default() }),
        udp: Some(UdpConfig { addr: loopback, ..UdpConfig::default() }),
    };
    // Its own estimate (5 ms) is what a deadline of 0 µs could never meet.
    let mut noop = FunctionConfig::new("noop");
    noop.relative_deadline = Duration::from_secs(10);
    noop.expected_execution = Some(Duration::from_millis(5));
    let noop =
        NodeFunction { config: noop, module: NOOP.as_bytes().to_vec(), route: "/noop".into() };
    Node::start(config, &[noop]).unwrap()
}

/// Sends `method path` with `headers` on a fresh connection; the status and the whole answer.
fn http(addr: SocketAddr, method: &str, path: &str, headers: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: l\r\nConnection: close\r\nContent-Length: 0\r\n{headers}\r\n"
    );
    conn.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    let status = answer.split(' ').nth(1).unwrap().parse().unwrap();
    (status, answer)
}

fn body(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A raw Request with the two µs fields as given (the client API rounds and saturates).
fn rpc(addr: SocketAddr, function: u32, deadline_us: u32, expected_us: u32) -> (Status, String) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let header =
        RequestHeader { request_id: 9, flags: Flags::NONE, function, deadline_us, expected_us };
    let payload = [b' '; 100]; // room for the whole message in a refusal
    let mut datagram = Vec::new();
    Message::Request(Request { header, payload: &payload }).encode(&mut datagram).unwrap();
    socket.send(&datagram).unwrap();
    let mut buf = [0; 2048];
    let n = socket.recv(&mut buf).unwrap();
    match luge_proto::decode(&buf[..n]) {
        Ok(Message::Response(r)) => {
            (r.header.status, String::from_utf8_lossy(r.payload).into_owned())
        }
        other => panic!("expected a response, got {other:?}"),
    }
}

#[test]
fn a_deadline_of_zero_means_the_default_over_both_protocols() {
    let node = node();
    let (http_addr, rpc_addr) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
    let id = node.runtime().function("noop").unwrap().id.0;
    // A deadline that is given and shorter than the estimate is refused by both. (First: once
    // noop has run, the runtime estimates from what it measured, far below 1 ms.)
    let (status, _) = http(http_addr, "POST", "/noop", "Luge-Deadline-Us: 1000\r\n");
    assert_eq!(status, 503);
    assert_eq!(rpc(rpc_addr, id, 1000, 0).0, Status::DeadlineInfeasible);
    // Before, HTTP read `Luge-Deadline-Us: 0` as a deadline of 0 µs: 503, deadline infeasible.
    let (status, answer) = http(http_addr, "POST", "/noop", "Luge-Deadline-Us: 0\r\n");
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = http(http_addr, "POST", "/noop", "Luge-Expected-Us: 0\r\n");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(rpc(rpc_addr, id, 0, 0).0, Status::Ok);
    assert_eq!(node.shutdown().udp_unanswered, 0);
}

#[test]
fn a_field_above_one_hour_is_refused_by_both_protocols() {
    let node = node();
    let (http_addr, rpc_addr) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
    let id = node.runtime().function("noop").unwrap().id.0;
    for (header, deadline_us, expected_us) in [
        ("Luge-Deadline-Us: 3600000001\r\n", 3_600_000_001, 0),
        ("Luge-Expected-Us: 4000000000\r\n", 0, 4_000_000_000),
    ] {
        let (status, answer) = http(http_addr, "POST", "/noop", header);
        assert_eq!(status, 400, "{answer}");
        let (status, message) = rpc(rpc_addr, id, deadline_us, expected_us);
        assert_eq!(status, Status::BadRequest, "{message}");
        assert!(message.contains("exceeds the maximum of 3600000000 µs"), "{message}");
    }
    // One hour is accepted by both.
    let (status, _) = http(http_addr, "POST", "/noop", "Luge-Deadline-Us: 3600000000\r\n");
    assert_eq!(status, 200);
    assert_eq!(rpc(rpc_addr, id, 3_600_000_000, 3_600_000_000).0, Status::Ok);
    // Through the client too.
    let mut client = RpcClient::connect(rpc_addr).unwrap();
    let opts = CallOptions::default()
        .with_timeout(Duration::from_secs(20))
        .with_deadline(Duration::from_secs(3601));
    let r = client.call(id, &[b' '; 100], opts).unwrap();
    assert_eq!(r.status, Status::BadRequest, "{}", r.message());
    assert_eq!(node.shutdown().udp_unanswered, 0);
}

#[test]
fn head_healthz_answers_like_get_without_a_body() {
    let node = node();
    let addr = node.http_addr().unwrap();
    let (status, get) = http(addr, "GET", "/healthz", "");
    assert_eq!((status, body(&get)), (200, "ok"));
    let (status, head) = http(addr, "HEAD", "/healthz", "");
    assert_eq!((status, body(&head)), (200, ""), "{head}");
    assert!(head.to_ascii_lowercase().contains("content-length: 2"), "{head}");
    let (status, head) = http(addr, "HEAD", "/metrics", "");
    assert_eq!((status, body(&head)), (200, ""), "{head}");
    let (status, answer) = http(addr, "POST", "/healthz", "");
    assert_eq!(status, 405);
    assert!(answer.to_ascii_lowercase().contains("allow: get, head"), "{answer}");
    assert_eq!(node.shutdown().udp_unanswered, 0);
}

#[test]
fn a_404_says_what_is_not_found() {
    let node = node();
    let addr = node.http_addr().unwrap();
    let (status, answer) = http(addr, "POST", "/nosuch", "");
    assert_eq!((status, body(&answer)), (404, "not found: unknown function `nosuch`"));
    let (status, answer) = http(addr, "GET", "/admin/nope", "");
    assert_eq!(status, 404);
    assert!(body(&answer).contains("no such endpoint `/admin/nope`"), "{answer}");
    assert_eq!(node.shutdown().udp_unanswered, 0);
}
