//! Faults a node must ride out (`docs/reliability.md`, "Faults"): a guest that exhausts its
//! memory cap on every request, under load beside a well-behaved function; HTTP clients that
//! hang up before their answer; UDP-RPC clients whose port is gone when the answer is sent.
//! A real node (two workers, sleep mode, unpinned, so tests can run in parallel) serving both
//! front ends on `127.0.0.1:0`. Every wait is a bounded wait for a condition, never a sleep
//! whose length the test relies on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::Write;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use luge_client::{CallOptions, RpcClient, Status};
use luge_proto::{Flags, Message, Request, RequestHeader};
use luge_runtime::{FunctionConfig, Runtime, RuntimeConfig};
use luge_server::{HttpConfig, Metrics, Node, NodeConfig, NodeFunction, UdpConfig};

mod common;

use common::{ECHO, MEMBOMB, SPIN};

/// The membomb's memory cap.
const CAP: u64 = 8 << 20;
/// spin iterations for a request still running when its client goes (~250–500 ms: long enough
/// for the test to see it run even on a loaded machine).
const SPIN_LONG: &str = "150000000";
/// spin iterations of the requests of a burst (~50–100 ms each).
const SPIN_BURST: &str = "30000000";
/// Every wait in these tests is bounded by this (generous: a loaded debug CI run on 2 cores).
const PATIENCE: Duration = Duration::from_secs(60);

/// A node with `echo`, `spin` and `membomb` (capped at [`CAP`]) over HTTP and UDP-RPC.
struct Env {
    node: Option<Node>,
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    http: SocketAddr,
    rpc: SocketAddr,
}

impl Env {
    fn start() -> Self {
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let config = NodeConfig {
            runtime: RuntimeConfig { workers: 2, ..RuntimeConfig::default() },
            http: Some(HttpConfig { addr: loopback, ..HttpConfig::default() }),
            udp: Some(UdpConfig { addr: loopback, ..UdpConfig::default() }),
        };
        let function = |name: &str, wat: &str, cap: Option<u64>| {
            let mut config = FunctionConfig::new(name);
            // Generous: test machines are slow and shared, and a refusal for load is not what
            // these tests are about.
            config.relative_deadline = Duration::from_secs(30);
            config.limits.max_execution = Duration::from_secs(10);
            if let Some(cap) = cap {
                config.limits.max_memory_bytes = cap;
            }
            NodeFunction { config, module: wat.as_bytes().to_vec(), route: format!("/{name}") }
        };
        let functions = [
            function("echo", ECHO, None),
            function("spin", SPIN, None),
            function("membomb", MEMBOMB, Some(CAP)),
        ];
        let node = Node::start(config, &functions).unwrap();
        let (runtime, metrics) = (Arc::clone(node.runtime()), Arc::clone(node.metrics()));
        let (http, rpc) = (node.http_addr().unwrap(), node.rpc_addr().unwrap());
        Self { node: Some(node), runtime, metrics, http, rpc }
    }

    fn node(&self) -> &Node {
        self.node.as_ref().unwrap()
    }

    /// `luge_in_flight{function}` as `/metrics` renders it.
    fn in_flight_gauge(&self, function: &str) -> u64 {
        let series = format!("luge_in_flight{{function=\"{function}\"}} ");
        let text = self.metrics.render(&self.runtime);
        text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |n| n.trim().parse().unwrap())
    }

    /// Every answer recorded for `function`, whatever its outcome.
    fn answered(&self, function: &str) -> u64 {
        let series = format!("function=\"{function}\"");
        let text = self.metrics.render(&self.runtime);
        text.lines()
            .filter(|l| l.starts_with("luge_requests_total{") && l.contains(&series))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    }

    /// Nothing left anywhere: no request in flight on either front end or in the metrics, no
    /// connection open, no sandbox (instance, memory, stack) taken from the pool.
    fn settled(&self) -> bool {
        let node = self.node();
        let pool = self.runtime.engine().pooling_allocator_metrics().unwrap();
        node.http().unwrap().in_flight() == 0
            && node.http().unwrap().connections() == 0
            && node.udp().unwrap().in_flight() == 0
            && ["echo", "spin", "membomb"].iter().all(|f| self.in_flight_gauge(f) == 0)
            && self.runtime.live_sandboxes() == 0
            && pool.memories() == 0
            && pool.stacks() == 0
    }

    /// Whether `/readyz` answers 200 "ready".
    fn ready(&self) -> bool {
        let answer = common::exchange(self.http, "GET", "/readyz", &[], "");
        answer.status == 200 && answer.body == "ready"
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(node) = self.node.take() {
            node.shutdown();
        }
    }
}

/// Waits until `cond` holds (or panics after [`PATIENCE`]).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A guest that exhausts its memory cap on every request, called hundreds of times by
/// concurrent clients beside a well-behaved function: every one of its answers is the typed
/// memory-limit error (HTTP 500 `memory_limit`, UDP-RPC `MemoryLimit`), every answer of the
/// other function is its result, the node stays ready throughout, and afterwards every
/// instance, memory and stack is back in the pool and the idle slots do not keep the memory the
/// guest grew resident.
#[test]
fn a_guest_exhausting_its_memory_on_every_request_harms_no_one_else() {
    let env = Env::start();
    // One on its own first: the premise, and the answer's exact form.
    let membomb = common::exchange(env.http, "POST", "/membomb", &[], "");
    assert_eq!(
        (membomb.status, membomb.header("luge-outcome").as_deref()),
        (500, Some("memory_limit"))
    );
    wait_until("the warm-up is settled", || env.settled());
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 30;
    let (http, rpc) = (env.http, env.rpc);
    let membomb_id = env.runtime.function("membomb").unwrap().id.0;
    let echo_id = env.runtime.function("echo").unwrap().id.0;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let mut rpc_client = RpcClient::connect(rpc).unwrap();
                let opts = CallOptions::default()
                    .with_deadline(Duration::from_secs(30))
                    .with_timeout(PATIENCE);
                let mut not_ready = 0;
                for round in 0..ROUNDS {
                    let body = format!("client {c} round {round}");
                    if (c + round) % 2 == 0 {
                        let bomb = common::exchange(http, "POST", "/membomb", &[], &body);
                        assert_eq!(bomb.status, 500, "{}", bomb.body);
                        assert_eq!(bomb.header("luge-outcome").as_deref(), Some("memory_limit"));
                        assert!(bomb.body.contains(&format!("memory limit of {CAP} bytes")));
                        let echo = common::exchange(http, "POST", "/echo", &[], &body);
                        assert_eq!((echo.status, echo.body.as_str()), (200, body.as_str()));
                    } else {
                        let bomb = rpc_client.call(membomb_id, body.as_bytes(), opts).unwrap();
                        assert_eq!(bomb.status, Status::MemoryLimit);
                        let echo = rpc_client.call(echo_id, body.as_bytes(), opts).unwrap();
                        assert_eq!((echo.status, &echo.payload[..]), (Status::Ok, body.as_bytes()));
                    }
                    let ready = common::exchange(http, "GET", "/readyz", &[], "");
                    if ready.status != 200 {
                        not_ready += 1;
                    }
                }
                not_ready
            })
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), 0, "the node stopped being ready under the load");
    }
    wait_until("every request is accounted and every sandbox returned", || env.settled());
    assert!(env.ready());
    let total = (CLIENTS * ROUNDS) as u64 + 1;
    assert_eq!(env.metrics.requests("membomb", "memory_limit"), total);
    assert_eq!(env.answered("membomb"), total, "a membomb answer was not memory_limit");
    assert_eq!(env.metrics.requests("echo", "ok"), total - 1);
    // What the idle pool keeps resident is bounded by its slots, not by what guests grew: each
    // membomb grew its memory to the cap, and a slot that kept that would hold 8 MiB.
    let pool = env.runtime.engine().pooling_allocator_metrics().unwrap();
    let (resident, warm) =
        (pool.unused_memory_bytes_resident() as u64, pool.unused_warm_memories());
    assert!(warm > 0, "the load used no pool slot");
    assert!(
        resident < u64::from(warm) * CAP,
        "{resident} bytes kept resident by {warm} idle slots: the grown memory was kept"
    );
}

/// Writes a `POST /spin` of `k` iterations on a fresh connection.
fn spin_request(http: SocketAddr, k: &str) -> TcpStream {
    let mut stream = TcpStream::connect(http).unwrap();
    let request =
        format!("POST /spin HTTP/1.1\r\nHost: luge\r\nContent-Length: {}\r\n\r\n{k}", k.len());
    stream.write_all(request.as_bytes()).unwrap();
    stream
}

/// HTTP clients that hang up before their answer, many times over: while the request runs, as
/// soon as the node has read it, and a burst of them at once. Each time, the connection and its
/// handler go away, the request still runs to its end and is answered into the void and
/// counted, and `luge_in_flight` returns to zero; afterwards no connection, handler or sandbox
/// is left, and the node serves as before.
#[test]
fn http_clients_hanging_up_mid_request_leave_nothing_behind() {
    let env = Env::start();
    let server = env.node().http().unwrap();
    const ROUNDS: u64 = 20;
    let mut received = 0;
    for round in 0..ROUNDS {
        wait_until("the previous round is settled", || env.settled());
        let answered = env.answered("spin");
        let stream = spin_request(env.http, SPIN_LONG);
        // The node has read the request (its handler is in flight)…
        wait_until("the request to be read", || server.in_flight() == 1);
        if round % 2 == 0 {
            // …and runs it: hang up while it runs.
            wait_until("the spin to run", || env.runtime.live_sandboxes() == 1);
        } // …else hang up at once, maybe before it was handed to the runtime.
        drop(stream);
        wait_until("the handler to go", || server.in_flight() == 0 && server.connections() == 0);
        if round % 2 == 0 {
            wait_until("the request to be answered and counted", || {
                env.answered("spin") == answered + 1
            });
            received += 1;
        }
    }
    // A burst: every client gone at once, some before the node read their request.
    let burst: Vec<_> = (0..16).map(|_| spin_request(env.http, SPIN_BURST)).collect();
    drop(burst);
    wait_until("the burst is settled", || env.settled());
    let answered = env.answered("spin");
    assert!(
        (received..=ROUNDS + 16).contains(&answered),
        "{answered} spins answered, {received} certainly received"
    );
    assert_eq!(env.metrics.requests("spin", "ok"), answered, "a spin failed");
    // The node is unharmed.
    assert!(env.ready());
    let echo = common::exchange(env.http, "POST", "/echo", &[], "after");
    assert_eq!((echo.status, echo.body.as_str()), (200, "after"));
    let spin = common::exchange(env.http, "POST", "/spin", &[], "1000");
    assert_eq!((spin.status, spin.body.as_str()), (200, "432f32487609ff83\n"));
}

/// UDP-RPC clients whose socket is closed before their answer is sent (so the answer goes to a
/// port nobody holds, and the kernel may report it unreachable): the receive loop goes on, every
/// request is still answered into the void and accounted, and a new client is served.
#[test]
fn udp_clients_gone_before_their_answer_do_not_stop_the_receiver() {
    let env = Env::start();
    let spin = env.runtime.function("spin").unwrap().id.0;
    const CLIENTS: u64 = 30;
    for id in 0..CLIENTS {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let header = RequestHeader {
            request_id: id + 1,
            flags: Flags::NONE,
            function: spin,
            deadline_us: 0,
            expected_us: 0,
        };
        let mut datagram = Vec::new();
        Message::Request(Request { header, payload: &b"3000000"[..] })
            .encode(&mut datagram)
            .unwrap();
        socket.send_to(&datagram, env.rpc).unwrap();
        drop(socket);
    }
    let udp = env.node().udp().unwrap();
    wait_until("every request is received", || udp.stats().submitted == CLIENTS);
    wait_until("every request is answered and accounted", || env.settled());
    assert_eq!(env.metrics.requests("spin", "ok"), CLIENTS);
    // The receiver is alive: a new client is answered.
    let opts = CallOptions::default().with_deadline(Duration::from_secs(30)).with_timeout(PATIENCE);
    let reply = RpcClient::connect(env.rpc).unwrap().call(spin, b"1000", opts).unwrap();
    assert_eq!((reply.status, &reply.payload[..]), (Status::Ok, &b"432f32487609ff83\n"[..]));
    assert!(env.ready());
}
