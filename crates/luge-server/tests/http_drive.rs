//! Run-to-completion over HTTP (`luge-server/src/http/drive.rs`): in the inline layout with one
//! worker an idle worker runs the HTTP front end's event loop itself, so a request it reads
//! runs and is answered on its own thread, while a long run hands the loop back to the front
//! end's thread so that arrivals still preempt it. Real runtime, real sockets on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use luge_client::{CallOptions, HttpClient};
use luge_runtime::{Layout, RuntimeConfig, WaitMode};
use luge_server::{HttpConfig, Node, NodeConfig, UdpConfig};

mod common;

use common::{NOOP, SPIN, exchange, function};

/// A node with HTTP (and, with `udp`, UDP-RPC beside it) serving `noop` (in the uLL lane: it
/// preempts a long run) and `spin`.
fn start(runtime: RuntimeConfig, udp: bool) -> Node {
    let http = HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), ..HttpConfig::default() };
    let udp =
        udp.then(|| UdpConfig { addr: "127.0.0.1:0".parse().unwrap(), ..UdpConfig::default() });
    let config = NodeConfig { runtime, http: Some(http), udp };
    Node::start(config, &[function("noop", NOOP, true), function("spin", SPIN, false)]).unwrap()
}

fn base(node: &Node) -> String {
    let addr: SocketAddr = node.http_addr().unwrap();
    format!("http://{addr}")
}

fn opts() -> CallOptions {
    CallOptions::default().with_timeout(Duration::from_secs(20))
}

/// 40 sequential no-ops over one keep-alive connection: how many the worker read itself.
fn sequential_noops(layout: Layout, wait: WaitMode, udp: bool) -> (bool, u64) {
    let runtime = RuntimeConfig { workers: 1, layout, wait, ..Default::default() };
    let node = start(runtime, udp);
    let client = HttpClient::new().unwrap();
    let url = base(&node);
    let http = node.http().unwrap();
    assert!(client.call(&url, "noop", b"", opts()).unwrap().is_success());
    let before = http.worker_requests();
    for _ in 0..40 {
        let r = client.call(&url, "noop", b"", opts()).unwrap();
        assert!(r.is_success(), "{}", r.status);
    }
    let read = http.worker_requests() - before;
    let driven = http.driven_by_worker();
    // The same count in /metrics, for operators.
    let metrics = exchange(node.http_addr().unwrap(), "GET", "/metrics", &[], "");
    let exported = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("luge_http_worker_requests_total "))
        .and_then(|v| v.parse::<u64>().ok());
    assert_eq!(exported, Some(http.worker_requests()), "{}", metrics.body);
    node.shutdown();
    (driven, read)
}

#[test]
fn an_idle_worker_reads_runs_and_answers_http_on_its_own_thread() {
    // As shipped (one worker: inline), the worker runs the event loop when idle and reads the
    // requests itself; beside a UDP front end reading its own socket too, and spinning.
    for (wait, udp) in [(WaitMode::Sleep, false), (WaitMode::Sleep, true), (WaitMode::Spin, true)] {
        let (driven, read) = sequential_noops(Layout::Auto, wait, udp);
        assert!(driven, "{wait:?}, udp {udp}: the worker does not run the loop");
        // (Not all 40: on a loaded box a no-op descheduled past the hold hands the loop to the
        // front end's thread, which then reads the next request, as it should.)
        assert!(read >= 30, "{wait:?}, udp {udp}: only {read} of 40 requests read by the worker");
    }
    // With a dispatcher thread of its own the front end's thread reads everything: the test
    // above is not vacuous.
    assert_eq!(sequential_noops(Layout::Threads, WaitMode::Sleep, false), (false, 0));
}

#[test]
fn sparse_short_requests_never_hand_the_loop_over() {
    // Requests that find the worker idle (here 3 ms apart) are short runs: the loop stays with
    // the worker, however long it waited for them.
    let node = start(RuntimeConfig { workers: 1, ..Default::default() }, false);
    let client = HttpClient::new().unwrap();
    let url = base(&node);
    let http = node.http().unwrap();
    assert!(client.call(&url, "noop", b"", opts()).unwrap().is_success());
    let before = http.loop_handovers();
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(3));
        assert!(client.call(&url, "noop", b"", opts()).unwrap().is_success());
    }
    let handovers = http.loop_handovers() - before;
    let metrics = exchange(node.http_addr().unwrap(), "GET", "/metrics", &[], "");
    let line = format!("luge_http_loop_handovers_total {}", http.loop_handovers());
    assert!(metrics.body.lines().any(|l| l == line), "{}", metrics.body);
    // (One or two on a loaded box: a no-op descheduled past the hold.)
    assert!(handovers <= 2, "{handovers} hand-overs for 10 sparse no-ops");
    node.shutdown();
}

#[test]
fn a_long_run_hands_the_loop_back_so_an_http_arrival_still_preempts_it() {
    let node = start(RuntimeConfig { workers: 1, ..Default::default() }, false);
    assert!(node.http().unwrap().driven_by_worker());
    let url = base(&node);
    let long = {
        let url = url.clone();
        std::thread::spawn(move || {
            let client = HttpClient::new().unwrap();
            // Tens of milliseconds of spinning, read (and started) by the worker itself.
            let r = client.call(&url, "spin", b"30000000", opts()).unwrap();
            assert!(r.is_success(), "{}", r.status);
            Instant::now()
        })
    };
    // Let the spin start on the worker, then ask for the no-op on another connection.
    let start = Instant::now();
    let http = node.http().unwrap();
    while http.in_flight() < 1
        || http.worker_requests() < 1
        || node.runtime().group_stats()[0].queued > 0
        || start.elapsed() < Duration::from_millis(5)
    {
        assert!(start.elapsed() < Duration::from_secs(10), "the spin never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let client = HttpClient::new().unwrap();
    let r = client.call(&url, "noop", b"", opts()).unwrap();
    let noop_answered = Instant::now();
    assert!(r.is_success(), "{}", r.status);
    let spin_answered = long.join().unwrap();
    // Without the hand-back the no-op would not be read until the spin ended.
    assert!(noop_answered < spin_answered, "the no-op is answered while the spin still runs");
    // The spin ran in two segments around the no-op's: the no-op preempted it.
    let segments = node.runtime().worker_stats()[0].segments;
    assert!(segments >= 3, "{segments} segments: the no-op did not preempt the spin");
    node.shutdown();
}
