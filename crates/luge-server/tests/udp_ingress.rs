//! Run-to-completion over UDP-RPC (`luge-server/src/udp/ingress.rs`): in the inline layout an
//! idle worker reads its socket itself and runs what it reads on its own thread, while a long
//! run hands reading back to the receive thread so that arrivals still preempt it. Real runtime,
//! real sockets on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::UdpSocket;
use std::sync::Arc;
use std::time::{Duration, Instant};

use luge_client::{CallOptions, RpcClient, Status};
use luge_proto::{Flags, MAX_DATAGRAM, Message, Request, RequestHeader, decode};
use luge_runtime::{Layout, Runtime, RuntimeConfig, WaitMode};
use luge_server::{Metrics, Node, NodeConfig, NodeFunction, UdpConfig, UdpServer};

mod common;

use common::{ECHO, NOOP, SPIN, function};

/// spin iterations of a request that runs for tens of milliseconds.
const SPIN_LONG: &[u8] = b"30000000";

fn start(runtime: RuntimeConfig, functions: &[NodeFunction]) -> Node {
    let udp = UdpConfig { addr: "127.0.0.1:0".parse().unwrap(), ..UdpConfig::default() };
    Node::start(NodeConfig { runtime, http: None, udp: Some(udp) }, functions).unwrap()
}

fn opts() -> CallOptions {
    CallOptions::default().with_timeout(Duration::from_secs(20))
}

fn id(node: &Node, name: &str) -> u32 {
    node.runtime().function(name).unwrap().id.0
}

/// Waits until the node's metrics hold `n` answered requests (the front end records an answer
/// after sending it).
fn wait_until_accounted(node: &Node, n: usize) {
    let start = Instant::now();
    while node.udp().unwrap().in_flight() > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "{n} requests never accounted");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Wake-ups the runtime issued to its sleeping threads so far (all groups).
fn wakeups(runtime: &Runtime) -> u64 {
    runtime.group_stats().iter().map(|g| g.wakeups).sum()
}

/// 40 sequential no-ops; the wake-ups the runtime issued meanwhile, and the datagrams workers
/// read themselves.
fn sequential_noops(layout: Layout, wait: WaitMode) -> (u64, u64, usize) {
    let runtime = RuntimeConfig { workers: 1, layout, wait, ..Default::default() };
    let node = start(runtime, &[function("noop", NOOP, true)]);
    let mut client = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let noop = id(&node, "noop");
    // Warm: the first call compiles nothing but touches everything once.
    assert_eq!(client.call(noop, b"", opts()).unwrap().status, Status::Ok);
    let before = wakeups(node.runtime());
    let read_before = node.udp().unwrap().stats().worker_datagrams;
    for _ in 0..40 {
        let r = client.call(noop, b"", opts()).unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message());
    }
    let woken = wakeups(node.runtime()) - before;
    let read = node.udp().unwrap().stats().worker_datagrams - read_before;
    let readers = node.udp().unwrap().worker_readers();
    node.shutdown();
    (woken, read, readers)
}

#[test]
fn an_idle_worker_receives_runs_and_answers_on_its_own_thread() {
    // As shipped (one worker: inline), the worker reads every datagram itself and nothing
    // wakes another thread to run a request; spinning, it polls its socket.
    for wait in [WaitMode::Sleep, WaitMode::Spin] {
        let (woken, read, readers) = sequential_noops(Layout::Auto, wait);
        assert_eq!(readers, 1);
        // (Not all 40: on a loaded box a no-op descheduled past 100 µs is a long run, and the
        // receive thread reads the next datagram, as it should.)
        assert!(read >= 30, "{wait:?}: only {read} of 40 requests read by the worker");
        assert!(woken < 10, "{woken} wake-ups for 40 requests: requests were handed over");
    }
    // With a dispatcher thread of its own the same requests each need a hand-off: the test
    // above is not vacuous.
    let (woken, read, readers) = sequential_noops(Layout::Threads, WaitMode::Sleep);
    assert_eq!((readers, read), (0, 0));
    assert!(woken >= 40, "threads layout: {woken} wake-ups for 40 requests");
}

#[test]
fn a_long_run_hands_reading_back_so_an_arrival_still_preempts_it() {
    let runtime = RuntimeConfig { workers: 1, ..Default::default() };
    let node = start(runtime, &[function("spin", SPIN, false), function("noop", NOOP, true)]);
    assert_eq!(node.udp().unwrap().worker_readers(), 1);
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(node.rpc_addr().unwrap()).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let send = |request_id: u64, function: u32, payload: &[u8]| {
        let header = RequestHeader {
            request_id,
            flags: Flags::NONE,
            function,
            deadline_us: 0,
            expected_us: 0,
        };
        let mut out = Vec::new();
        Message::Request(Request { header, payload }).encode(&mut out).unwrap();
        socket.send(&out).unwrap();
    };
    send(1, id(&node, "spin"), SPIN_LONG);
    // Let the spin start on the worker (which read it itself), then ask for the no-op.
    let start = Instant::now();
    let udp = node.udp().unwrap();
    while udp.stats().datagrams < 1
        || node.runtime().group_stats()[0].queued > 0
        || start.elapsed() < Duration::from_millis(5)
    {
        assert!(start.elapsed() < Duration::from_secs(10), "the spin never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    send(2, id(&node, "noop"), b"");
    let mut order = Vec::new();
    let mut buf = vec![0; MAX_DATAGRAM + 1];
    while order.len() < 2 {
        let n = socket.recv(&mut buf).expect("an answer");
        match decode(&buf[..n]) {
            Ok(Message::Response(r)) => {
                assert_eq!(r.header.status, Status::Ok);
                order.push(r.header.request_id);
            }
            other => panic!("expected a response, got {other:?}"),
        }
    }
    // Without the hand-back the no-op would sit in the socket until the spin ended.
    assert_eq!(order, [2, 1], "the no-op is answered while the spin still runs");
    let stats = node.udp().unwrap().stats();
    assert_eq!(stats.datagrams, 2);
    assert_eq!(stats.worker_datagrams, 1, "the receive thread read the no-op");
    node.shutdown();
}

#[test]
fn each_inline_worker_reads_its_own_socket() {
    let runtime =
        RuntimeConfig { workers: 2, dispatchers: 2, layout: Layout::Inline, ..Default::default() };
    let node = start(runtime, &[function("echo", ECHO, true)]);
    let udp = node.udp().unwrap();
    assert_eq!(udp.worker_readers(), 2);
    let echo = id(&node, "echo");
    // Clients on distinct ports: the kernel spreads their flows over the two sockets.
    let handles: Vec<_> = (0..8u8)
        .map(|c| {
            let addr = node.rpc_addr().unwrap();
            std::thread::spawn(move || {
                let mut client = RpcClient::connect(addr).unwrap();
                for i in 0..10u8 {
                    let payload = [c, i, b'!'];
                    let r = client.call(echo, &payload, opts()).unwrap();
                    assert_eq!(r.status, Status::Ok, "{}", r.message());
                    assert_eq!(r.payload, payload);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let stats = udp.stats();
    // (A client may retransmit on a loaded box: a retransmit never runs twice.)
    assert_eq!(stats.datagrams - stats.retransmits, 80, "{stats:?}");
    assert!(stats.worker_datagrams > 0);
    // Each request ran once (in one segment or, preempted on a loaded box, more).
    let ran: Vec<u64> = node.runtime().worker_stats().iter().map(|w| w.segments).collect();
    assert!(ran.iter().sum::<u64>() >= 80, "{ran:?}");
    wait_until_accounted(&node, 80);
    assert_eq!(node.metrics().requests("echo", "ok"), 80);
    node.shutdown();
}

#[test]
fn a_second_front_end_on_the_same_runtime_reads_on_its_own_thread() {
    let runtime =
        Arc::new(Runtime::start(RuntimeConfig { workers: 1, ..Default::default() }).unwrap());
    runtime.register(function("noop", NOOP, true).config, NOOP.as_bytes()).unwrap();
    let config = || UdpConfig { addr: "127.0.0.1:0".parse().unwrap(), ..UdpConfig::default() };
    let metrics = Arc::new(Metrics::new());
    let first = UdpServer::start(Arc::clone(&runtime), Arc::clone(&metrics), config()).unwrap();
    let second = UdpServer::start(Arc::clone(&runtime), Arc::clone(&metrics), config()).unwrap();
    assert_eq!((first.worker_readers(), second.worker_readers()), (1, 0));
    let noop = runtime.function("noop").unwrap().id.0;
    for server in [&first, &second] {
        let mut client = RpcClient::connect(server.local_addr()).unwrap();
        assert_eq!(client.call(noop, b"", opts()).unwrap().status, Status::Ok);
    }
    // Stopping the first lets the worker go back to sleeping without its socket; the second
    // still answers.
    assert_eq!(first.shutdown(Duration::from_secs(5)), 0);
    let mut client = RpcClient::connect(second.local_addr()).unwrap();
    assert_eq!(client.call(noop, b"", opts()).unwrap().status, Status::Ok);
    assert_eq!(second.shutdown(Duration::from_secs(5)), 0);
    runtime.shutdown();
}
