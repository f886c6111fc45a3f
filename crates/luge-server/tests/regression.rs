//! Tests named after the bugs they pin (listed in `docs/SPEC.md`, "Regressions"). A real node
//! (one worker, sleep mode, unpinned) on `127.0.0.1:0`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::time::Duration;

use luge_client::{CallOptions, RpcClient, Status};
use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{Node, NodeConfig, NodeFunction, Protocol, UdpConfig};

const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");

fn rpc_node(max_request_bytes: u64) -> Node {
    let mut config = FunctionConfig::new("echo");
    config.limits.max_request_bytes = max_request_bytes;
    let function =
        NodeFunction { config, module: ECHO.as_bytes().to_vec(), route: "/echo".to_owned() };
    let node_config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: None,
        udp: Some(UdpConfig {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..UdpConfig::default()
        }),
    };
    Node::start(node_config, &[function]).unwrap()
}

fn opts() -> CallOptions {
    CallOptions { deadline: Some(Duration::from_secs(10)), ..CallOptions::default() }
}

/// UDP-RPC measured `queueing` on the front end's clock and the runtime's early refusals
/// carried no timing, so a request refused before it was queued reported 0 ns in the node.
#[test]
fn a_refusal_reported_no_time_in_the_node() {
    let node = rpc_node(4);
    let id = node.runtime().function("echo").unwrap().id.0;
    let mut client = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let reply = client.call(id, b"too long", opts()).unwrap();
    assert_eq!(reply.status, Status::TooLarge);
    assert!(reply.queueing > Duration::ZERO);
    assert_eq!(reply.execution, Duration::ZERO);
    assert_eq!(node.shutdown().udp_unanswered, 0);
}

/// HTTP counted an unknown function in `luge_malformed_total`; UDP-RPC only in its own stats.
#[test]
fn an_unknown_rpc_function_was_not_counted_as_malformed() {
    let node = rpc_node(1 << 20);
    let mut client = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    // Padded: a refusal is never larger than its request, so one under 40 bytes gets none.
    let reply = client.call(4242, b"x, padded to 8 bytes", opts()).unwrap();
    assert_eq!(reply.status, Status::UnknownFunction);
    assert_eq!(node.metrics().malformed_total(Protocol::Rpc), 1);
    assert_eq!(node.udp().unwrap().stats().unknown_function, 1);
    assert_eq!(node.shutdown().udp_unanswered, 0);
}
