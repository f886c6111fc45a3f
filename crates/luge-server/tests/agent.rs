//! The load-balancer agent (HAProxy agent-check) end to end: `ready up 100%` when idle, a weight that
//! falls as requests queue, and `drain` while the node drains — never `down` for load.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{HttpConfig, Node, NodeConfig, NodeFunction};

mod common;

fn ask(agent: SocketAddr) -> String {
    let mut stream = TcpStream::connect(agent).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut line = String::new();
    stream.read_to_string(&mut line).unwrap();
    line
}

/// Asks until the answer satisfies `want` (bounded).
fn ask_until(agent: SocketAddr, want: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let line = ask(agent);
        if want(&line) {
            return line;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "the agent still says {line:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_agent_weights_the_node_by_its_queue_and_drains_it() {
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let http = HttpConfig { addr: any, agent: Some(any), ..HttpConfig::default() };
    let runtime = RuntimeConfig {
        workers: 1,
        shutdown_grace: Duration::from_secs(20),
        ..RuntimeConfig::default()
    };
    let mut spin = FunctionConfig::new("spin");
    spin.relative_deadline = Duration::from_secs(60);
    spin.limits.max_execution = Duration::from_secs(60);
    spin.expected_execution = Some(Duration::from_millis(100));
    let spin = NodeFunction {
        config: spin,
        module: common::SPIN.as_bytes().to_vec(),
        route: "/spin".into(),
    };
    let config = NodeConfig { runtime, http: Some(http), udp: None };
    let node = Node::start(config, &[spin]).unwrap();
    let agent = node.http().unwrap().agent_addr().unwrap();
    assert_eq!(ask(agent), "ready up 100%\n");
    // A balancer that sends something first (HAProxy's `agent-send`) still gets the line.
    let mut stream = TcpStream::connect(agent).unwrap();
    std::io::Write::write_all(&mut stream, b"hello luge\n").unwrap();
    let mut line = String::new();
    stream.read_to_string(&mut line).unwrap();
    assert_eq!(line, "ready up 100%\n");
    // One running, three queued behind it on the one worker: 100 / (1 + 3). Sent over HTTP,
    // so the front end (and its agent) drains while they finish.
    let http = node.http_addr().unwrap();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            // ~0.4 s each: the state with three queued lasts that long.
            std::thread::spawn(move || common::exchange(http, "POST", "/spin", &[], "200000000"))
        })
        .collect();
    assert_eq!(ask_until(agent, |l| l == "ready up 25%\n"), "ready up 25%\n");
    // Draining (the requests still run): `drain`, not `down`.
    let stopping = std::thread::spawn(move || node.shutdown());
    assert_eq!(ask_until(agent, |l| l == "drain\n"), "drain\n");
    for call in calls {
        let answer = call.join().unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
    }
    stopping.join().unwrap();
}

/// At most 64 agent exchanges are in progress (`AGENT_CONNECTIONS`): a peer that connects
/// beyond them while they last is closed without a line, so a flood of agent connections cannot
/// take the node's descriptors, and the agent answers again once they end.
#[test]
fn agent_exchanges_in_progress_are_bounded() {
    const AGENT_CONNECTIONS: usize = 64;
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let http = HttpConfig { addr: any, agent: Some(any), ..HttpConfig::default() };
    let config = NodeConfig { runtime: RuntimeConfig::default(), http: Some(http), udp: None };
    let node = Node::start(config, &[]).unwrap();
    let agent = node.http().unwrap().agent_addr().unwrap();
    // Peers that read their line but never close: each exchange lasts its 1 s bound, so the
    // one over the bound must be asked within that second of the first; on a machine too
    // loaded for that the round is inconclusive and is tried again (at most 5 times).
    for round in 1..=5 {
        let start = Instant::now();
        let held: Vec<TcpStream> = (0..AGENT_CONNECTIONS)
            .map(|_| {
                let mut stream = TcpStream::connect(agent).unwrap();
                stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut line = [0u8; 14];
                stream.read_exact(&mut line).unwrap();
                assert_eq!(&line, b"ready up 100%\n");
                stream
            })
            .collect();
        let over = ask(agent);
        let in_time = start.elapsed() < Duration::from_millis(800);
        drop(held);
        if in_time {
            assert_eq!(over, "", "one over the bound is closed without a line");
            assert_eq!(ask_until(agent, |l| !l.is_empty()), "ready up 100%\n");
            return;
        }
        eprintln!("round {round}: the connections took {:?}; again", start.elapsed());
        // Let the held exchanges end before the next round.
        std::thread::sleep(Duration::from_millis(1100));
    }
    panic!("64 loopback connections never fit in 800 ms");
}
