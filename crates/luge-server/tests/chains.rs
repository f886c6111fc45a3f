//! Chains through both front ends (Edge-RT §III, §IV-A): a chain is called like a function —
//! by route over HTTP, by id over UDP-RPC — and answers with its last stage's output, or with
//! the failing stage named. One worker, sleep mode, ephemeral ports.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::UdpSocket;
use std::time::Duration;

use luge_client::{
    AddOptions, AdminClient, CallOptions, ChainSpec, HttpClient, HttpResponse, RpcClient, Status,
};
use luge_proto::{Flags, MAX_DATAGRAM, Message, Request, RequestHeader, decode};
use luge_runtime::{ChainConfig, FunctionConfig, RuntimeConfig};
use luge_server::{AdminConfig, HttpConfig, Node, NodeChain, NodeConfig, NodeFunction, UdpConfig};

mod common;

use common::{ECHO, EXIT3, SPIN};

/// spin(k) output for k = 1000 (`functions/builtin/spin.wat`).
const SPIN_1000: &[u8] = b"432f32487609ff83\n";
/// spin iterations that run ~50–100 ms.
const SPIN_LONG: &[u8] = b"30000000";

fn chain(name: &str, route: &str, stages: &[&str], deadline: Duration) -> NodeChain {
    NodeChain {
        config: ChainConfig {
            name: name.into(),
            stages: stages.iter().map(|s| (*s).to_owned()).collect(),
            relative_deadline: deadline,
        },
        route: route.into(),
    }
}

fn node() -> Node {
    let functions: Vec<NodeFunction> =
        [("echo", ECHO), ("spin", SPIN), ("exit3", EXIT3), ("tiny", ECHO)]
            .into_iter()
            .map(|(name, wat)| {
                let mut config = FunctionConfig::new(name);
                config.relative_deadline = Duration::from_secs(10);
                if name == "tiny" {
                    // Takes at most 4 bytes: a longer input is refused before it runs.
                    config.limits.max_request_bytes = 4;
                }
                NodeFunction { config, module: wat.as_bytes().to_vec(), route: format!("/{name}") }
            })
            .collect();
    let second = Duration::from_secs(10);
    let chains = [
        chain("pipeline", "/edge/pipeline", &["echo", "spin", "echo"], second),
        chain("broken", "/broken", &["echo", "exit3", "echo"], second),
        chain("late", "/late", &["spin", "echo"], Duration::from_millis(20)),
        chain("narrow", "/narrow", &["spin", "tiny"], second),
    ];
    let config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: Some(HttpConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            admin: Some(AdminConfig {
                addr: "127.0.0.1:0".parse().unwrap(),
                ..AdminConfig::default()
            }),
            ..HttpConfig::default()
        }),
        udp: Some(UdpConfig { addr: "127.0.0.1:0".parse().unwrap(), ..UdpConfig::default() }),
    };
    Node::start_with_chains(config, &functions, &chains).unwrap()
}

fn opts() -> CallOptions {
    CallOptions::default().with_timeout(Duration::from_secs(20))
}

/// `POST route` on `node` with `body`.
fn post(node: &Node, route: &str, body: &[u8]) -> HttpResponse {
    let base = format!("http://{}", node.http_addr().unwrap());
    HttpClient::new().unwrap().call(&base, route, body, opts()).unwrap()
}

#[test]
fn a_chain_is_called_over_http_by_its_route() {
    let node = node();
    let r = post(&node, "/edge/pipeline", b"1000");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.body, SPIN_1000);
    // Every stage's times, in order.
    let stages = r.stages.unwrap();
    let names: Vec<_> = stages.split(", ").map(|s| s.split(';').next().unwrap()).collect();
    assert_eq!(names, ["echo", "spin", "echo"], "{stages}");
    assert!(stages.split(", ").all(|s| s.contains(";q=") && s.contains(";e=")), "{stages}");
    assert_eq!(r.stage, None, "no failing stage");
    // Also at /<name>, and accounted under the chain's name.
    assert_eq!(post(&node, "/pipeline", b"1000").body, SPIN_1000);
    let metrics = node.metrics();
    let settled = || metrics.requests("pipeline", "ok") == 2;
    let start = std::time::Instant::now();
    while !settled() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(settled());
}

#[test]
fn a_failing_stage_is_named_and_nothing_of_the_chain_leaks() {
    let node = node();
    let r = post(&node, "/broken", b"secret");
    assert_eq!(r.status, 500);
    assert_eq!(r.outcome.as_deref(), Some("exit_failure"));
    assert_eq!(r.stage.as_deref(), Some("exit3"));
    let body = String::from_utf8_lossy(&r.body);
    assert!(body.starts_with("stage 2 `exit3`: "), "{body}");
    assert!(!body.contains("secret"), "no partial output: {body}");
    // A deadline that passes mid-chain: 504, naming the stage that found no time left.
    let r = post(&node, "/late", SPIN_LONG);
    assert_eq!(r.status, 504, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.outcome.as_deref(), Some("deadline_missed"));
    assert_eq!(r.stage.as_deref(), Some("echo"));
}

/// A later stage refused (here: its input is over its size limit) after earlier stages ran is
/// not a refusal of the chain: a refusal says nothing ran, so a client would retry it and run
/// the earlier stages again. It is a final answer, cached for the request id like any other
/// execution's (a retransmit is replayed, the first stage runs once).
#[test]
fn a_later_stage_refused_is_not_a_refusal_of_the_chain() {
    let node = node();
    let r = post(&node, "/narrow", b"1000");
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.outcome.as_deref(), Some("stage_refused"));
    assert_eq!(r.stage.as_deref(), Some("tiny"));
    let body = String::from_utf8_lossy(&r.body);
    assert!(body.starts_with("stage 2 `tiny`: ") && body.contains("exceeds the limit"), "{body}");
    // Over UDP-RPC, the same request twice under one id: the second is the cached answer.
    let id = node.runtime().chain("narrow").unwrap().id.0;
    let header = RequestHeader {
        request_id: 7,
        flags: Flags::NONE,
        function: id,
        deadline_us: 0,
        expected_us: 0,
    };
    let mut datagram = Vec::new();
    Message::Request(Request { header, payload: b"1000" }).encode(&mut datagram).unwrap();
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(node.rpc_addr().unwrap()).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = vec![0; MAX_DATAGRAM + 1];
    let mut answer = || {
        socket.send(&datagram).unwrap();
        let n = socket.recv(&mut buf).unwrap();
        match decode(&buf[..n]).unwrap() {
            Message::Response(r) => (r.header.status, r.header.flags.contains(Flags::REPLAYED)),
            other => panic!("not a response: {other:?}"),
        }
    };
    assert_eq!(answer(), (Status::StageRefused, false));
    // The answer is cached just after it is sent: settled first.
    let start = std::time::Instant::now();
    while node.udp().unwrap().in_flight() > 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(answer(), (Status::StageRefused, true), "replayed, not run again");
    assert_eq!(node.metrics().requests("narrow", "stage_refused"), 2, "one per protocol");
}

#[test]
fn a_chain_is_called_over_udp_rpc_by_its_id() {
    let node = node();
    let id = node.runtime().chain("pipeline").unwrap().id.0;
    let mut rpc = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let r = rpc.call(id, b"1000", opts()).unwrap();
    assert_eq!((r.status, r.payload.as_slice()), (Status::Ok, SPIN_1000));
    let broken = node.runtime().chain("broken").unwrap().id.0;
    let r = rpc.call(broken, b"x", opts()).unwrap();
    assert_eq!(r.status, Status::ExitFailure);
    assert!(r.message().starts_with("stage 2 `exit3`: "), "{}", r.message());
    let late = node.runtime().chain("late").unwrap().id.0;
    let r = rpc.call(late, SPIN_LONG, opts()).unwrap();
    assert_eq!(r.status, Status::DeadlineMissed, "{}", r.message());
}

#[test]
fn a_chain_answers_its_stage_times_over_udp_rpc_when_asked() {
    let node = node();
    let id = node.runtime().chain("pipeline").unwrap().id.0;
    let mut rpc = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    // Asked: a table of the three stages before the stdout, which is the same as without.
    let r = rpc.call(id, b"1000", opts().with_stages()).unwrap();
    assert_eq!((r.status, r.payload.as_slice()), (Status::Ok, SPIN_1000));
    assert_eq!(r.stages.len(), 3, "{:?}", r.stages);
    assert!(r.stages.iter().all(|s| s.execution_ns > 0), "{:?}", r.stages);
    // The request's execution is the stages' sum, as over HTTP.
    let sum: u64 = r.stages.iter().map(|s| s.execution_ns).sum();
    assert_eq!(Duration::from_nanos(sum), r.execution);
    // Not asked: no table, the same stdout.
    let r = rpc.call(id, b"1000", opts()).unwrap();
    assert_eq!((r.payload.as_slice(), r.stages.len()), (SPIN_1000, 0));
    // A failing chain names its stage after the table of the stages that ran.
    let broken = node.runtime().chain("broken").unwrap().id.0;
    let r = rpc.call(broken, b"x", opts().with_stages()).unwrap();
    assert_eq!((r.status, r.stages.len()), (Status::ExitFailure, 2));
    assert!(r.message().starts_with("stage 2 `exit3`: "), "{}", r.message());
    // A function asked for stages has none to give: a plain answer.
    let spin = node.runtime().function("spin").unwrap().id.0;
    let r = rpc.call(spin, b"1000", opts().with_stages()).unwrap();
    assert_eq!((r.payload.as_slice(), r.stages.len()), (SPIN_1000, 0));
}

#[test]
fn a_request_answers_its_readiness_over_udp_rpc_when_asked() {
    // HORSE §2's readiness, as HTTP's `Luge-Readiness-Ns` gives it (`docs/protocol.md` §1.6).
    let node = node();
    let mut rpc = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let spin = node.runtime().function("spin").unwrap().id.0;
    let r = rpc.call(spin, b"1000", opts().with_readiness()).unwrap();
    assert_eq!((r.status, r.payload.as_slice()), (Status::Ok, SPIN_1000));
    let readiness = r.readiness.expect("asked and ran: readiness given");
    // Receipt to first instruction: some of the queueing and instantiation, never the whole.
    assert!(!readiness.is_zero() && readiness < r.queueing + r.execution, "{r:?}");
    // Not asked: nothing added, the same stdout.
    let r = rpc.call(spin, b"1000", opts()).unwrap();
    assert_eq!((r.payload.as_slice(), r.readiness), (SPIN_1000, None));
    // With a chain's stage table too: readiness first, then the table, then the stdout.
    let chain = node.runtime().chain("pipeline").unwrap().id.0;
    let r = rpc.call(chain, b"1000", opts().with_readiness().with_stages()).unwrap();
    assert_eq!((r.payload.as_slice(), r.stages.len()), (SPIN_1000, 3));
    assert!(r.readiness.is_some_and(|d| !d.is_zero()), "{r:?}");
    // A refusal ran nothing: no readiness, and no larger than before.
    let unknown = rpc.call(u32::MAX - 1, b"0123456789abcdef", opts().with_readiness()).unwrap();
    assert_eq!(unknown.readiness, None, "{unknown:?}");
}

#[test]
fn chains_are_added_and_removed_through_the_admin_api() {
    let node = node();
    let admin = format!("http://{}", node.http().unwrap().admin_addr().unwrap());
    let admin = AdminClient::new(&admin).unwrap();
    let listed: Vec<_> = admin.chains().unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(listed, ["pipeline", "broken", "late", "narrow"], "the node's chains, by id");
    let spec = ChainSpec {
        stages: vec!["spin".into(), "echo".into()],
        relative_deadline_us: 5_000_000,
        route: Some("/v2/spin-echo".into()),
    };
    let info = admin.add_chain("spin-echo", &spec).unwrap();
    assert_eq!((info.route.as_str(), info.stages.len()), ("/v2/spin-echo", 2));
    assert_eq!(admin.id_of("spin-echo").unwrap(), info.id, "looked up like a function");
    assert_eq!(post(&node, "/v2/spin-echo", b"1000").body, SPIN_1000);
    // A name in use (a function's or a chain's) is a conflict; an unknown stage a bad request.
    let conflict = admin.add_chain("echo", &spec).unwrap_err().to_string();
    assert!(conflict.contains("409"), "{conflict}");
    let unknown = ChainSpec { stages: vec!["nope".into()], route: None, ..spec.clone() };
    let refused = admin.add_chain("other", &unknown).unwrap_err().to_string();
    assert!(refused.contains("400") && refused.contains("no function named `nope`"), "{refused}");
    // A deadline beyond the hour every other deadline is bounded by.
    let forever = ChainSpec { relative_deadline_us: 3_600_000_001, route: None, ..spec.clone() };
    let refused = admin.add_chain("forever", &forever).unwrap_err().to_string();
    assert!(refused.contains("400") && refused.contains("relative_deadline_us"), "{refused}");
    // A function cannot take a chain's route (nor a chain a function's).
    let options = AddOptions { route: Some("/v2/spin-echo".into()), ..AddOptions::default() };
    let taken = admin.add("thief", ECHO.as_bytes(), &options).unwrap_err().to_string();
    assert!(taken.contains("400") && taken.contains("already belongs to `spin-echo`"), "{taken}");
    assert!(admin.get("thief").unwrap().is_none(), "not registered either");
    assert_eq!(post(&node, "/v2/spin-echo", b"1000").body, SPIN_1000, "still the chain's");
    // Removed: gone from the list, its route and its name.
    admin.remove_chain("spin-echo").unwrap();
    assert!(admin.chain("spin-echo").unwrap().is_none());
    assert_eq!(post(&node, "/v2/spin-echo", b"1000").status, 404);
}
