//! The UDP-RPC front end end to end: real runtime (one worker, sleep mode, unpinned, so tests can run in parallel),
//! real sockets on 127.0.0.1, the built-in and test WAT functions, the `luge-client` clients and
//! raw sockets for what a well-behaved client never sends.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use luge_client::{Backoff, CallOptions, RpcClient, Status};
use luge_proto::{
    Flags, LOAD_REFUSED, MAX_DATAGRAM, Message, Request, RequestHeader, ResponseHeader, decode,
    load_signal,
};
use luge_runtime::{FunctionConfig, Layout, Runtime, RuntimeConfig};
use luge_server::{Metrics, Node, NodeConfig, NodeFunction, Protocol, UdpConfig, UdpServer};

mod common;

use common::{ECHO, EXIT3, FIB, HELLO, LOOP, NOOP, OOB, SPIN};

const MS: Duration = Duration::from_millis(1);
/// spin(k) output for k = 1000 (`functions/builtin/spin.wat`).
const SPIN_1000: &[u8] = b"432f32487609ff83\n";
/// spin iterations for a request that runs long enough to be retransmitted (~50–100 ms).
const SPIN_LONG: &[u8] = b"30000000";

/// A function to register: name, WAT text, settings tweak.
type Spec<'a> = (&'a str, &'a str, &'a dyn Fn(&mut FunctionConfig));

/// A [`Node`] serving UDP-RPC only (one worker, an ephemeral port), with handles the tests use.
struct Env {
    node: Option<Node>,
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    addr: SocketAddr,
}

impl Env {
    fn start(config: UdpConfig, functions: &[Spec<'_>]) -> Self {
        Self::start_with(RuntimeConfig { workers: 1, ..Default::default() }, config, functions)
    }

    fn start_with(runtime: RuntimeConfig, config: UdpConfig, functions: &[Spec<'_>]) -> Self {
        Self::start_on("127.0.0.1:0".parse().unwrap(), runtime, config, functions)
    }

    /// As [`Env::start_with`], with the socket bound to `addr`.
    fn start_on(
        addr: SocketAddr,
        runtime: RuntimeConfig,
        config: UdpConfig,
        functions: &[Spec<'_>],
    ) -> Self {
        let functions: Vec<NodeFunction> = functions
            .iter()
            .map(|(name, wat, tune)| {
                let mut config = FunctionConfig::new(*name);
                // Generous defaults: test machines are slow and shared.
                config.relative_deadline = Duration::from_secs(10);
                config.limits.max_execution = Duration::from_secs(10);
                tune(&mut config);
                NodeFunction { config, module: wat.as_bytes().to_vec(), route: format!("/{name}") }
            })
            .collect();
        let udp = UdpConfig { addr, ..config };
        let node =
            Node::start(NodeConfig { runtime, http: None, udp: Some(udp) }, &functions).unwrap();
        let (runtime, metrics) = (Arc::clone(node.runtime()), Arc::clone(node.metrics()));
        let addr = node.rpc_addr().unwrap();
        Self { node: Some(node), runtime, metrics, addr }
    }

    /// The node's ordered shutdown; returns the UDP-RPC requests left unanswered by the grace.
    fn shutdown(&mut self) -> usize {
        self.node.take().unwrap().shutdown().udp_unanswered
    }

    /// Waits until every submitted request has been answered *and* accounted: the server
    /// decrements `in_flight` after recording the outcome in the metrics, and a client may see
    /// the response before that.
    fn settled(&self) {
        wait_until("every request is accounted", || self.server().in_flight() == 0);
    }

    fn server(&self) -> &UdpServer {
        self.node.as_ref().unwrap().udp().unwrap()
    }

    fn id(&self, name: &str) -> u32 {
        self.runtime.function(name).unwrap().id.0
    }

    fn client(&self) -> RpcClient {
        RpcClient::connect(self.addr).unwrap()
    }

    /// A raw socket connected to the server, with a read timeout.
    fn raw(&self) -> UdpSocket {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.connect(self.addr).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        socket
    }
}

fn nothing(_: &mut FunctionConfig) {}

fn opts() -> CallOptions {
    CallOptions::default().with_timeout(Duration::from_secs(20))
}

fn request(id: u64, function: u32, flags: Flags, payload: &[u8]) -> Vec<u8> {
    let header = RequestHeader { request_id: id, flags, function, deadline_us: 0, expected_us: 0 };
    let mut out = Vec::new();
    Message::Request(Request { header, payload }).encode(&mut out).unwrap();
    out
}

/// Receives one datagram, which must be a Response.
fn recv_response(socket: &UdpSocket) -> (ResponseHeader, Vec<u8>) {
    let mut buf = vec![0; MAX_DATAGRAM + 1];
    let n = socket.recv(&mut buf).expect("a response");
    match decode(&buf[..n]) {
        Ok(Message::Response(r)) => (r.header, r.payload.to_vec()),
        other => panic!("expected a response, got {other:?}"),
    }
}

/// Waits until `cond` holds (or panics after 10 s).
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(10), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn builtin_functions_answer_over_rpc() {
    let env = Env::start(
        UdpConfig::default(),
        &[
            ("noop", NOOP, &nothing),
            ("echo", ECHO, &nothing),
            ("hello", HELLO, &nothing),
            ("fib", FIB, &nothing),
            ("spin", SPIN, &nothing),
        ],
    );
    let mut client = env.client();
    let call = |client: &mut RpcClient, name: &str, payload: &[u8]| {
        let r = client.call(env.id(name), payload, opts()).unwrap();
        assert_eq!(r.status, Status::Ok, "{name}: {}", r.message());
        assert!(!r.replayed);
        r
    };
    assert_eq!(call(&mut client, "noop", b"").payload, b"");
    let kib: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(call(&mut client, "echo", &kib).payload, kib);
    // The largest request payload a datagram carries, echoed in the largest response that fits.
    let big: Vec<u8> = (0..MAX_DATAGRAM - 40).map(|i| (i % 251) as u8).collect();
    assert_eq!(call(&mut client, "echo", &big).payload, big);
    assert_eq!(call(&mut client, "hello", b"").payload, b"Hello from Luge!\n");
    assert_eq!(call(&mut client, "hello", b"edge\n").payload, b"Hello, edge!\n");
    assert_eq!(call(&mut client, "fib", b"20\n").payload, b"6765\n");
    let spin = call(&mut client, "spin", b"1000");
    assert_eq!(spin.payload, SPIN_1000);
    assert!(spin.execution > Duration::ZERO, "{spin:?}");
    assert!(spin.queueing > Duration::ZERO, "{spin:?}");
    assert_eq!(client.ping(b"ping!", opts()).unwrap(), b"ping!");
    env.settled();
    assert_eq!(env.metrics.requests("spin", "ok"), 1);
}

/// A node bound to every address answers from the address each request was sent to: a client
/// whose connected socket addresses it at 127.0.0.2 drops a reply from 127.0.0.1, the kernel's
/// pick for its route back. Every reply path: the worker's outbox (inline), a runtime thread's
/// own send (threads), the receive thread's batch (a pong, a refusal), a replay. IPv4 on
/// `0.0.0.0`; on `::` (dual stack) an IPv4 client (mapped) and an IPv6 one — where the machine
/// has IPv6 (a container may have none: that part is then left out, and says so).
#[test]
fn a_node_bound_to_every_address_answers_from_the_one_each_request_was_sent_to() {
    let ipv6 = UdpSocket::bind("[::1]:0").is_ok();
    if !ipv6 {
        eprintln!("no IPv6 loopback here: the `::` cases are left out");
    }
    let cases: &[(&str, &[&str])] = if ipv6 {
        &[("0.0.0.0:0", &["127.0.0.2", "127.0.0.1"]), ("[::]:0", &["127.0.0.2", "[::1]"])]
    } else {
        &[("0.0.0.0:0", &["127.0.0.2", "127.0.0.1"])]
    };
    for (bind, clients) in cases {
        for layout in [Layout::Inline, Layout::Threads] {
            let runtime = RuntimeConfig { workers: 1, layout, ..Default::default() };
            let any = bind.parse().unwrap();
            let env =
                Env::start_on(any, runtime, UdpConfig::default(), &[("echo", ECHO, &nothing)]);
            let port = env.addr.port();
            for ip in *clients {
                let to: SocketAddr = format!("{ip}:{port}").parse().unwrap();
                let what = format!("{bind} {layout:?} {ip}");
                let mut client = RpcClient::connect(to).unwrap();
                let once = opts().with_timeout(Duration::from_secs(5));
                let r = client.call(env.id("echo"), b"hi", once).unwrap();
                assert_eq!((r.status, &r.payload[..]), (Status::Ok, &b"hi"[..]), "{what}");
                assert_eq!(client.ping(b"ping!", once).unwrap(), b"ping!", "{what}");
                let r = client.call(9_999, &[0; 64], once).unwrap();
                assert_eq!(r.status, Status::UnknownFunction, "{what}");
                // The same request again is answered from the duplicate cache.
                let local = if to.is_ipv6() { "[::1]:0" } else { "127.0.0.1:0" };
                let raw = UdpSocket::bind(local).unwrap();
                raw.connect(to).unwrap();
                raw.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                let echo = request(7, env.id("echo"), Flags::NONE, b"again");
                for replayed in [false, true] {
                    // The answer is cached just after it is sent: a copy arriving in between
                    // is dropped as in flight (§6), so the replay waits for the cache.
                    env.settled();
                    raw.send(&echo).unwrap();
                    let (header, payload) = recv_response(&raw);
                    assert_eq!(payload, b"again", "{what}");
                    assert_eq!(header.flags.contains(Flags::REPLAYED), replayed, "{what}");
                }
            }
            env.settled();
        }
    }
}

#[test]
fn every_status_path() {
    let env = Env::start(
        UdpConfig::default(),
        &[
            ("echo", ECHO, &|c| c.limits.max_request_bytes = 1024),
            ("noop", NOOP, &|c| c.expected_execution = Some(5 * MS)),
            ("loop", LOOP, &|c| c.limits.max_execution = 30 * MS),
            ("oob", OOB, &nothing),
            ("exit3", EXIT3, &nothing),
        ],
    );
    let mut client = env.client();
    let mut call = |function: u32, payload: &[u8], opts: CallOptions| {
        let r = client.call(function, payload, opts).unwrap();
        (r.status, r.message(), r.execution)
    };
    // 32 payload bytes: the 40-byte header and the 24-byte message fit in the request's size.
    let (status, message, _) = call(9_999, &[0; 32], opts());
    assert_eq!((status, message.as_str()), (Status::UnknownFunction, "no function with id 9999"));
    // A 42-byte request: the message is cut to the 2 bytes that fit.
    let (status, message, _) = call(9_999, &[0; 10], opts());
    assert_eq!((status, message.as_str()), (Status::UnknownFunction, "no"), "cut to fit");
    let (status, message, _) = call(env.id("echo"), &[0; 2000], opts());
    assert_eq!(status, Status::TooLarge, "{message}");
    let infeasible = opts().with_deadline(MS);
    let (status, message, execution) = call(env.id("noop"), b"", infeasible);
    assert_eq!((status, execution), (Status::DeadlineInfeasible, Duration::ZERO), "{message}");
    let (status, message, execution) = call(env.id("loop"), b"", opts());
    assert_eq!(status, Status::Killed, "{message}");
    assert!(execution >= 30 * MS, "{execution:?}");
    let (status, message, _) = call(env.id("oob"), b"", opts());
    assert_eq!((status, message.as_str()), (Status::Trap, "trap: memory_out_of_bounds"));
    let (status, message, _) = call(env.id("exit3"), b"", opts());
    assert_eq!((status, message.as_str()), (Status::ExitFailure, "exited with status 3"));
    // And the server is unharmed.
    let (status, message, _) = call(env.id("echo"), b"fine", opts());
    assert_eq!((status, message.as_str()), (Status::Ok, "fine"));
}

#[test]
fn refusals_are_not_cached_but_executions_are() {
    let env = Env::start(
        UdpConfig::default(),
        &[("noop", NOOP, &|c| c.expected_execution = Some(5 * MS)), ("exit3", EXIT3, &nothing)],
    );
    let raw = env.raw();
    // A refusal (2xx) twice: evaluated twice, never replayed.
    let mut refused = request(11, env.id("noop"), Flags::NONE, b"");
    refused[24..28].copy_from_slice(&1_000u32.to_le_bytes()); // deadline 1 ms < expected 5 ms
    for _ in 0..2 {
        raw.send(&refused).unwrap();
        let (h, _) = recv_response(&raw);
        assert_eq!((h.request_id, h.status), (11, Status::DeadlineInfeasible));
        assert!(!h.flags.contains(Flags::REPLAYED));
    }
    // A function failure (3xx) ran: its answer is cached and replayed, never run again.
    let failed = request(12, env.id("exit3"), Flags::NONE, b"");
    raw.send(&failed).unwrap();
    let (first, _) = recv_response(&raw);
    // No flag but the load signal (which depends on how long it waited).
    assert_eq!((first.status, first.flags.with_load(0)), (Status::ExitFailure, Flags::NONE));
    env.settled(); // cached just after it is sent
    raw.send(&failed).unwrap();
    let (again, message) = recv_response(&raw);
    assert_eq!(again.status, Status::ExitFailure);
    assert!(again.flags.contains(Flags::REPLAYED));
    assert_eq!((again.execution_ns, again.queueing_ns), (first.execution_ns, first.queueing_ns));
    assert_eq!(message, b"exited with status 3");
    env.settled();
    assert_eq!(env.metrics.requests("exit3", "exit_failure"), 1);
    assert_eq!(env.metrics.requests("noop", "deadline_infeasible"), 2);
}

#[test]
fn duplicates_run_once_and_are_replayed() {
    let env = Env::start(UdpConfig::default(), &[("spin", SPIN, &nothing)]);
    let raw = env.raw();
    let datagram = request(0xfeed, env.id("spin"), Flags::NONE, SPIN_LONG);
    raw.send(&datagram).unwrap();
    // Premise: the first copy is running when the duplicate arrives.
    wait_until("the request runs", || env.runtime.live_sandboxes() > 0);
    let mut retransmit = datagram.clone();
    retransmit[4] = Flags::RETRANSMIT.0 as u8;
    raw.send(&retransmit).unwrap();
    raw.send(&datagram).unwrap();
    let (first, output) = recv_response(&raw);
    let first_flags = first.flags.with_load(0);
    assert_eq!((first.request_id, first.status, first_flags), (0xfeed, Status::Ok, Flags::NONE));
    assert_eq!(output.len(), 17);
    // The two in-flight duplicates were dropped: the next answer is the replay of a third copy.
    // (Settled first: the response is cached just after it is sent.)
    env.settled();
    raw.send(&datagram).unwrap();
    let (replay, replayed_output) = recv_response(&raw);
    assert_eq!((replay.request_id, replay.status), (0xfeed, Status::Ok));
    assert!(replay.flags.contains(Flags::REPLAYED));
    assert_eq!(replayed_output, output);
    assert_eq!((replay.execution_ns, replay.queueing_ns), (first.execution_ns, first.queueing_ns));
    env.settled();
    assert_eq!(env.metrics.requests("spin", "ok"), 1, "the function ran exactly once");
    let stats = env.server().stats();
    assert_eq!((stats.duplicates_dropped, stats.replayed, stats.retransmits), (2, 1, 1));
    assert_eq!(stats.submitted, 1);
}

#[test]
fn a_retransmitting_client_is_answered_once() {
    let env = Env::start(UdpConfig::default(), &[("spin", SPIN, &nothing)]);
    let mut client = env.client();
    // A backoff far below the execution time: the client retransmits while the request runs.
    let eager = Backoff { initial: MS, max: 5 * MS, factor: 2, max_attempts: 20 };
    let r = client.call(env.id("spin"), SPIN_LONG, opts().with_backoff(eager)).unwrap();
    assert_eq!(r.status, Status::Ok);
    assert!(r.attempts > 1, "premise: the client retransmitted ({} attempts)", r.attempts);
    env.settled();
    assert_eq!(env.metrics.requests("spin", "ok"), 1);
    let stats = env.server().stats();
    assert_eq!(stats.retransmits, u64::from(r.attempts - 1));
    assert_eq!(stats.submitted, 1);
}

#[test]
fn a_full_duplicate_cache_answers_overloaded() {
    let config = UdpConfig { dedup_entries: 1, ..UdpConfig::default() };
    let env = Env::start(config, &[("spin", SPIN, &nothing)]);
    let raw = env.raw();
    raw.send(&request(1, env.id("spin"), Flags::NONE, SPIN_LONG)).unwrap();
    // Padded to 40 bytes: a refusal is never larger than its request (so here, no message).
    raw.send(&request(2, env.id("spin"), Flags::NONE, b"1000    ")).unwrap();
    let (h, message) = recv_response(&raw);
    assert_eq!((h.request_id, h.status, message.len()), (2, Status::Overloaded, 0));
    assert_eq!(h.flags.load(), LOAD_REFUSED, "a refusal for load says so");
    let (h, _) = recv_response(&raw);
    assert_eq!((h.request_id, h.status), (1, Status::Ok));
    // Now the one entry is done and evictable: a new request runs. (Settled first: the entry is
    // completed just after its response is sent.)
    env.settled();
    raw.send(&request(3, env.id("spin"), Flags::NONE, b"1000")).unwrap();
    let (h, out) = recv_response(&raw);
    assert_eq!((h.request_id, h.status, out.as_slice()), (3, Status::Ok, SPIN_1000));
}

#[test]
fn answers_carry_the_share_of_their_deadline_they_waited() {
    let env = Env::start(UdpConfig::default(), &[("spin", SPIN, &nothing)]);
    let raw = env.raw();
    let deadline = Duration::from_secs(5);
    let send = |id, payload: &[u8]| {
        let header = RequestHeader {
            request_id: id,
            flags: Flags::NONE,
            function: env.id("spin"),
            deadline_us: u32::try_from(deadline.as_micros()).unwrap(),
            expected_us: 0,
        };
        let mut out = Vec::new();
        Message::Request(Request { header, payload }).encode(&mut out).unwrap();
        raw.send(&out).unwrap();
    };
    // One worker: the second request (a later absolute deadline under EDF) waits behind the
    // first's ~50–100 ms.
    send(1, SPIN_LONG);
    send(2, b"1000");
    let mut waited = Duration::ZERO;
    for _ in 0..2 {
        let (h, _) = recv_response(&raw);
        assert_eq!(h.status, Status::Ok);
        let queueing = Duration::from_nanos(h.queueing_ns);
        assert_eq!(h.flags.load(), load_signal(queueing, deadline), "request {}", h.request_id);
        if h.request_id == 2 {
            waited = queueing;
        }
    }
    assert!(waited > 20 * MS, "premise: the second request waited ({waited:?})");
    assert!(load_signal(waited, deadline) > 0);
}

/// The 16-byte frozen prefix of a request with id `id`, then `rest`.
fn with_prefix(version: u8, kind: u8, id: u64, rest: &[u8]) -> Vec<u8> {
    let mut d = b"LU".to_vec();
    d.extend_from_slice(&[version, kind, 0, 0, 0, 0]);
    d.extend_from_slice(&id.to_le_bytes());
    d.extend_from_slice(rest);
    d
}

#[test]
fn malformed_datagrams_are_counted_answered_when_attributable_and_harmless() {
    let env = Env::start(UdpConfig::default(), &[("echo", ECHO, &nothing)]);
    let raw = env.raw();
    let echo = env.id("echo");
    // 42 bytes: long enough for a 40-byte reply.
    let valid = request(5, echo, Flags::NONE, b"hi, echo!!");

    // Not attributable or not ours: counted, never answered.
    let mut bad_magic = valid.clone();
    bad_magic[0] = b'X';
    let mut reply_kind = with_prefix(1, 2, 6, &[0; 4]); // a truncated Response
    reply_kind.truncate(24);
    let mut short_mismatch = valid[..34].to_vec();
    short_mismatch[16] = 10; // declares 10 payload bytes, carries 2
    let silent: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one byte", vec![b'L']),
        ("15 bytes", valid[..15].to_vec()),
        ("bad magic", bad_magic),
        ("malformed reply", reply_kind),
        // Attributable, but shorter than the 40-byte reply: answering would amplify.
        ("truncated header", valid[..25].to_vec()),
        ("short, length mismatch", short_mismatch),
        ("short, unknown version", with_prefix(9, 1, 23, &[0; 4])),
    ];
    for (_, d) in &silent {
        raw.send(d).unwrap();
    }

    // Attributable: answered with the id from bytes 8–15 and an error status.
    let mut mismatch = valid.clone();
    mismatch[16] = 20; // declares 20 payload bytes, carries 10
    let mut zero_id = valid.clone();
    zero_id[8..16].fill(0);
    let mut huge = with_prefix(1, 1, 0xabc, &[0; 4]); // payload length 0 …
    huge.resize(MAX_DATAGRAM, 0x55); // … in the largest IPv4 datagram
    let answered: Vec<(&str, Vec<u8>, u64, Status)> = vec![
        ("unknown version", with_prefix(9, 1, 21, &[0; 24]), 21, Status::UnsupportedVersion),
        ("length mismatch", mismatch, 5, Status::Malformed),
        ("unknown kind", with_prefix(1, 9, 22, &[0; 24]), 22, Status::Malformed),
        ("zero id", zero_id, 0, Status::Malformed),
        ("65507 bytes, bogus header", huge, 0xabc, Status::Malformed),
    ];
    for (what, d, id, status) in &answered {
        raw.send(d).unwrap();
        let (h, payload) = recv_response(&raw);
        assert_eq!((h.request_id, h.status), (*id, *status), "{what}");
        assert!(payload.is_empty(), "{what}");
    }
    // Nothing was sent for the silent ones: the next datagram is the answer to a real call.
    raw.send(&valid).unwrap();
    let (h, payload) = recv_response(&raw);
    assert_eq!((h.request_id, h.status, payload.as_slice()), (5, Status::Ok, &b"hi, echo!!"[..]));
    let malformed = (silent.len() + answered.len()) as u64;
    assert_eq!(env.metrics.malformed_total(Protocol::Rpc), malformed);
    let stats = env.server().stats();
    assert_eq!((stats.malformed, stats.stray_replies), (malformed, 0));
    assert_eq!(stats.invalid_replies, answered.len() as u64);
}

#[test]
fn oversized_datagrams_are_answered_too_large_over_ipv6() {
    // IPv6 carries UDP payloads up to 65 527 bytes, more than MAX_DATAGRAM (§5).
    // A container may have no IPv6 loopback: then there is nothing to send it over (said, not
    // silently passed).
    let Ok(probe) = UdpSocket::bind("[::1]:0") else {
        eprintln!("no IPv6 loopback here: oversized IPv6 datagrams are not tested");
        return;
    };
    drop(probe);
    let config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..Default::default() },
        http: None,
        udp: Some(UdpConfig { addr: "[::1]:0".parse().unwrap(), ..UdpConfig::default() }),
    };
    let node = Node::start(config, &[]).unwrap();
    let metrics = Arc::clone(node.metrics());
    let raw = UdpSocket::bind("[::1]:0").unwrap();
    raw.connect(node.rpc_addr().unwrap()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut d = with_prefix(1, 1, 77, &[0; 4]);
    d.resize(MAX_DATAGRAM + 10, 0);
    raw.send(&d).unwrap();
    let (h, _) = recv_response(&raw);
    assert_eq!((h.request_id, h.status), (77, Status::TooLarge));
    assert_eq!(metrics.malformed_total(Protocol::Rpc), 1);
    assert_eq!(node.shutdown().udp_unanswered, 0);
}

#[test]
fn concurrent_clients_each_get_their_own_answers() {
    const THREADS: usize = 8;
    const CALLS: usize = 100;
    let env = Env::start(UdpConfig::default(), &[("echo", ECHO, &nothing)]);
    let echo = env.id("echo");
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let env = &env;
            s.spawn(move || {
                let mut client = env.client();
                let mut ids = HashSet::new();
                for i in 0..CALLS {
                    let payload = format!("thread {t} call {i}");
                    let r = client.call(echo, payload.as_bytes(), opts()).unwrap();
                    assert_eq!(r.status, Status::Ok, "{}", r.message());
                    assert_eq!(r.payload, payload.as_bytes());
                    assert!(ids.insert(r.request_id));
                }
            });
        }
    });
    // Every call executed exactly once, whatever the retransmissions.
    env.settled();
    assert_eq!(env.metrics.requests("echo", "ok"), (THREADS * CALLS) as u64);
    assert_eq!(env.server().stats().submitted, (THREADS * CALLS) as u64);
}

#[test]
fn shutdown_answers_everything_in_flight() {
    let mut env = Env::start(
        UdpConfig::default(),
        &[("spin", SPIN, &nothing), ("loop", LOOP, &|c| c.limits.max_execution = 400 * MS)],
    );
    let raw = env.raw();
    let spin = env.id("spin");
    for id in 1..=4 {
        raw.send(&request(id, spin, Flags::NONE, b"20000000")).unwrap();
    }
    wait_until("all four are submitted", || env.server().stats().submitted == 4);
    // Premise: shutdown starts with work in flight (four runs of ~40 ms on one worker).
    assert!(env.server().in_flight() >= 2, "in flight: {}", env.server().in_flight());
    // Draining: a new request is refused at once …
    env.server().drain();
    // (Padded to 8 bytes: a refusal is never larger than its request.)
    raw.send(&request(99, spin, Flags::NONE, b"1       ")).unwrap();
    let (h, _) = recv_response(&raw);
    assert_eq!((h.request_id, h.status), (99, Status::ShuttingDown));
    // … while everything in flight is answered before the node's shutdown returns.
    assert_eq!(env.shutdown(), 0);
    let mut ok = HashSet::new();
    for _ in 0..4 {
        let (h, payload) = recv_response(&raw);
        assert_eq!((h.status, payload.len()), (Status::Ok, 17));
        assert!(ok.insert(h.request_id));
    }
    assert_eq!(ok, (1..=4).collect());
    assert_eq!(env.metrics.requests("spin", "ok"), 4);
    // The receive thread is gone: nothing answers any more.
    raw.set_read_timeout(Some(50 * MS)).unwrap();
    raw.send(&request(100, spin, Flags::NONE, b"1")).unwrap();
    assert!(raw.recv(&mut [0; 64]).is_err());

    // A grace shorter than the work: shutdown reports what is left, and the request still
    // gets its answer: the runtime, stopping after the grace, answers it "shutting down".
    let runtime = RuntimeConfig { workers: 1, shutdown_grace: 20 * MS, ..Default::default() };
    let mut env = Env::start_with(
        runtime,
        UdpConfig::default(),
        &[("loop", LOOP, &|c| c.limits.max_execution = 2_000 * MS)],
    );
    let raw = env.raw();
    raw.send(&request(7, env.id("loop"), Flags::NONE, b"")).unwrap();
    wait_until("the loop is in flight", || env.server().in_flight() == 1);
    let started = Instant::now();
    assert_eq!(env.shutdown(), 1);
    let (h, _) = recv_response(&raw);
    assert_eq!((h.request_id, h.status), (7, Status::ShuttingDown));
    assert!(started.elapsed() < 1_000 * MS, "answered before its 2 s budget ran out");
}

#[test]
fn busy_poll_mode_serves_and_stops() {
    let config = UdpConfig { busy_poll: true, batch: 4, ..UdpConfig::default() };
    let mut env = Env::start(config, &[("echo", ECHO, &nothing)]);
    let mut client = env.client();
    for i in 0..20u32 {
        let payload = i.to_le_bytes();
        let r = client.call(env.id("echo"), &payload, opts()).unwrap();
        assert_eq!(r.payload, payload);
    }
    assert_eq!(client.ping(b"spin", opts()).unwrap(), b"spin");
    assert_eq!(env.shutdown(), 0);
}

/// Receives Responses until none arrives for `idle`: each one's request id and size.
fn drain_responses(socket: &UdpSocket, idle: Duration) -> Vec<(u64, usize)> {
    socket.set_read_timeout(Some(idle)).unwrap();
    let mut buf = vec![0; MAX_DATAGRAM + 1];
    let mut got = Vec::new();
    while let Ok(n) = socket.recv(&mut buf) {
        match decode(&buf[..n]) {
            Ok(Message::Response(r)) => got.push((r.header.request_id, n)),
            other => panic!("expected a response, got {other:?}"),
        }
    }
    got
}

/// Issue #15: a flood of requests for unknown functions with a spoofed source (here: every
/// datagram from one socket) makes the server answer at most its per-source budget, each reply
/// no larger than its request, so the victim receives fewer bytes than the spoofer sent. Before,
/// every request got a reply of 40 bytes plus a message: 64 bytes for a 32-byte request.
#[test]
fn a_spoofed_flood_of_unknown_functions_is_not_amplified() {
    const PER_SOURCE: u32 = 20;
    const N: u64 = 400;
    let config = UdpConfig { refusals_per_source_per_sec: PER_SOURCE, ..UdpConfig::default() };
    let env = Env::start(config, &[("echo", ECHO, &nothing)]);
    let raw = env.raw();
    let started = Instant::now();
    let mut sizes = std::collections::HashMap::new();
    let mut sent = 0;
    for id in 1..=N {
        // Minimal requests (32 bytes) and requests with room for a message, alternately.
        let payload: &[u8] = if id % 2 == 0 { b"" } else { &[7; 24] };
        let d = request(id, 9_999, Flags::NONE, payload);
        sent += d.len();
        sizes.insert(id, d.len());
        raw.send(&d).unwrap();
    }
    let replies = drain_responses(&raw, Duration::from_secs(1));
    let elapsed = started.elapsed().as_secs_f64();
    let received: usize = replies.iter().map(|(_, n)| n).sum();
    for (id, n) in &replies {
        assert!(*n <= sizes[id], "a {n}-byte reply to a {}-byte request", sizes[id]);
        assert_eq!(sizes[id], 56, "only requests with room for the 40-byte header are answered");
    }
    // The burst, plus what the bucket refilled while the test ran (generously rounded up).
    let budget = f64::from(PER_SOURCE) * (1.0 + elapsed) + 1.0;
    assert!((1..=budget as usize).contains(&replies.len()), "{} replies", replies.len());
    assert!(received * 4 < sent, "{received} bytes answered to {sent} sent");
    let stats = env.server().stats();
    assert_eq!(stats.unknown_function, N);
    assert_eq!(stats.refusals_too_short, N / 2);
    assert_eq!(stats.refusals_limited, N / 2 - replies.len() as u64);
    assert_eq!(env.metrics.malformed_total(Protocol::Rpc), N);
    // A request for a registered function is still served: the budget is for refusals only.
    let r = env.client().call(env.id("echo"), b"still served", opts()).unwrap();
    assert_eq!((r.status, r.payload.as_slice()), (Status::Ok, &b"still served"[..]));
}

/// A spoofed source repeating a finished request must not get its cached answer — larger than
/// the request — again and again: replays take the refusals' budget (`replays_limited`).
#[test]
fn replays_larger_than_their_request_are_budgeted() {
    const PER_SOURCE: u32 = 5;
    const N: usize = 100;
    let config = UdpConfig { refusals_per_source_per_sec: PER_SOURCE, ..UdpConfig::default() };
    let env = Env::start(config, &[("spin", SPIN, &nothing)]);
    let raw = env.raw();
    let datagram = request(0xbeef, env.id("spin"), Flags::RETRANSMIT, b"1000");
    raw.send(&datagram).unwrap();
    let (first, output) = recv_response(&raw);
    assert_eq!((first.status, output.as_slice()), (Status::Ok, SPIN_1000));
    env.settled();
    let started = Instant::now();
    for _ in 0..N {
        raw.send(&datagram).unwrap();
    }
    let replies = drain_responses(&raw, Duration::from_secs(1));
    let elapsed = started.elapsed().as_secs_f64();
    // Premise: each replay is larger than the request that asked for it.
    assert!(replies.iter().all(|&(id, n)| id == 0xbeef && n > datagram.len()), "{replies:?}");
    let budget = f64::from(PER_SOURCE) * (1.0 + elapsed) + 1.0;
    assert!((1..=budget as usize).contains(&replies.len()), "{} replays", replies.len());
    let stats = env.server().stats();
    assert_eq!(stats.replayed, replies.len() as u64);
    assert_eq!(stats.replays_limited, (N - replies.len()) as u64);
    assert_eq!(env.metrics.requests("spin", "ok"), 1, "the function ran exactly once");
}

/// A request shed while it waited (its deadline became unreachable behind a run far longer
/// than estimated) is refused — and a retransmit of it, which its client may have sent
/// meanwhile, is answered the same refusal from the cache instead of running after it.
#[test]
fn a_retransmit_of_a_shed_request_is_refused_again_not_run() {
    let estimated = |ms: u32| move |c: &mut FunctionConfig| c.expected_execution = Some(MS * ms);
    let (short, long) = (estimated(1), estimated(20));
    let env = Env::start(UdpConfig::default(), &[("spin", SPIN, &short), ("slow", SPIN, &long)]);
    let raw = env.raw();
    let call = |id, function, deadline_us, payload: &[u8]| {
        let header = RequestHeader {
            request_id: id,
            flags: Flags::NONE,
            function,
            deadline_us,
            expected_us: 0,
        };
        let mut datagram = Vec::new();
        Message::Request(Request { header, payload }).encode(&mut datagram).unwrap();
        datagram
    };
    // ~50-100 ms of work the node expects to take 1 ms, due in 50 ms.
    raw.send(&call(1, env.id("spin"), 50_000, SPIN_LONG)).unwrap();
    wait_until("the long run starts", || env.runtime.live_sandboxes() > 0);
    // Due in 60 ms, expected to take 20: admitted behind "1 ms" of work, waiting (its deadline
    // is later), and doomed once less than 20 ms are left while the long run goes on.
    let mut doomed = call(2, env.id("slow"), 60_000, b"1000");
    raw.send(&doomed).unwrap();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let (h, _) = recv_response(&raw);
        answers.insert(h.request_id, h);
    }
    assert_eq!(answers[&2].status, Status::Overloaded, "{:?}", answers[&2]);
    assert_eq!(env.metrics.requests("slow", "shed"), 1, "premise: refused as shed");
    env.settled();
    // The retransmit (the node is idle now, so it would run and succeed): the cached refusal.
    doomed[4] = Flags::RETRANSMIT.0 as u8;
    raw.send(&doomed).unwrap();
    let (again, _) = recv_response(&raw);
    assert_eq!((again.request_id, again.status), (2, Status::Overloaded));
    assert!(again.flags.contains(Flags::REPLAYED), "{again:?}");
    env.settled();
    assert_eq!(env.metrics.requests("slow", "ok"), 0, "the shed request never ran");
}

/// The refusal budget is per source: a source that spent its budget is not answered, another
/// source still is. (Sources hash into a table of buckets, so try a few: two may share one.)
#[test]
fn refusals_are_budgeted_per_source() {
    let config = UdpConfig { refusals_per_source_per_sec: 5, ..UdpConfig::default() };
    let env = Env::start(config, &[]);
    let unknown = |id| request(id, 9_999, Flags::NONE, &[0; 24]);
    let noisy = env.raw();
    for id in 1..=50 {
        noisy.send(&unknown(id)).unwrap();
    }
    let replies = drain_responses(&noisy, Duration::from_millis(500));
    assert!((1..=15).contains(&replies.len()), "{} replies to the noisy source", replies.len());
    let others = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"];
    let answered = others.iter().filter(|ip| {
        let Ok(quiet) = UdpSocket::bind((**ip, 0)) else { return false };
        quiet.connect(env.addr).unwrap();
        quiet.send(&unknown(1)).unwrap();
        quiet.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        quiet.recv(&mut [0; 128]).is_ok()
    });
    assert!(answered.count() >= 1, "no other source was answered");
    assert!(env.server().stats().refusals_limited >= 35);
}

/// Issue #15: both protocols check the two µs fields with one function. Over UDP-RPC a value
/// above one hour is `BadRequest`, naming the field; one hour itself and 0 are accepted.
#[test]
fn out_of_range_fields_are_bad_requests() {
    let env = Env::start(UdpConfig::default(), &[("echo", ECHO, &nothing)]);
    let mut client = env.client();
    let echo = env.id("echo");
    let payload = [b'x'; 100]; // room for the whole message in the reply
    let hour = Duration::from_secs(3600);
    let r = client.call(echo, &payload, opts().with_deadline(hour + MS)).unwrap();
    assert_eq!(r.status, Status::BadRequest, "{}", r.message());
    assert_eq!(
        r.message(),
        "bad request: deadline of 3600001000 µs exceeds the maximum of 3600000000 µs"
    );
    let r = client.call(echo, &payload, opts().with_expected(Duration::from_secs(4000))).unwrap();
    assert_eq!(r.status, Status::BadRequest);
    assert!(r.message().contains("expected execution"), "{}", r.message());
    let r = client.call(echo, b"ok", opts().with_deadline(hour).with_expected(hour)).unwrap();
    assert_eq!(r.status, Status::Ok, "{}", r.message());
    // 0 is "not given": the function's default deadline.
    let raw = env.raw();
    raw.send(&request(3, echo, Flags::NONE, b"zero")).unwrap();
    let (h, out) = recv_response(&raw);
    assert_eq!((h.status, out.as_slice()), (Status::Ok, &b"zero"[..]));
    env.settled();
    // (A client may retransmit a request whose refusal is late: refusals are not cached.)
    let stats = env.server().stats();
    assert_eq!(stats.submitted, 2);
    assert!(stats.bad_request >= 2, "{stats:?}");
    assert_eq!(env.metrics.malformed_total(Protocol::Rpc), stats.bad_request);
}

/// Issue #15: every counter of the UDP-RPC front end (`docs/protocol.md` §11.1) is in /metrics.
#[test]
fn udp_counters_are_in_the_metrics() {
    let env = Env::start(UdpConfig::default(), &[("echo", ECHO, &nothing)]);
    let mut client = env.client();
    assert_eq!(client.call(env.id("echo"), b"1", opts()).unwrap().status, Status::Ok);
    let r = client.call(9_999, &[0; 32], opts()).unwrap();
    assert_eq!(r.status, Status::UnknownFunction);
    assert_eq!(client.ping(b"p", opts()).unwrap(), b"p");
    env.settled();
    let text = env.metrics.render(&env.runtime);
    let stats = env.server().stats();
    // (A client may retransmit: its counters are read from the stats, not predicted.)
    assert_eq!(stats.submitted, 1);
    assert!(stats.pings >= 1 && stats.unknown_function >= 1, "{stats:?}");
    let every = [
        ("datagrams", stats.datagrams),
        ("worker_datagrams", stats.worker_datagrams),
        ("submitted", stats.submitted),
        ("pings", stats.pings),
        ("malformed", stats.malformed),
        ("invalid_replies", stats.invalid_replies),
        ("invalid_replies_limited", stats.invalid_replies_limited),
        ("stray_replies", stats.stray_replies),
        ("retransmits", stats.retransmits),
        ("duplicates_dropped", stats.duplicates_dropped),
        ("replayed", stats.replayed),
        ("replays_limited", stats.replays_limited),
        ("unknown_function", stats.unknown_function),
        ("bad_request", stats.bad_request),
        ("refusals_limited", stats.refusals_limited),
        ("refusals_too_short", stats.refusals_too_short),
        ("overloaded", stats.overloaded),
        ("shutting_down", stats.shutting_down),
        ("send_errors", stats.send_errors),
    ];
    for (name, value) in every {
        let line = format!("\nluge_udp_{name}_total {value}\n");
        assert!(text.contains(&line), "no {line:?} in\n{text}");
        assert!(text.contains(&format!("# TYPE luge_udp_{name}_total counter")), "{name}");
    }
    assert_eq!(text.matches("# TYPE luge_udp_").count(), every.len(), "a counter not listed");
}
