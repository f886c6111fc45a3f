//! `scripts/cluster.sh` end to end: three `luge serve` nodes behind HAProxy weighting them by
//! their agents. Requests through the balancer reach every node; a node killed mid-run
//! (SIGKILL, between requests) loses no request — the balancer retries the refused connection
//! on another node and marks the dead one down — and the others serve the rest.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::LUGE;

/// The cluster script, stopped with SIGTERM when dropped.
struct Cluster {
    child: Child,
    base: u16,
    /// Each node's pid, in order.
    nodes: Vec<i32>,
}

impl Cluster {
    fn start(base: u16) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/cluster.sh");
        let mut child = Command::new("bash")
            .args([script, "--luge", LUGE, "--base", &base.to_string()])
            .env("RUST_LOG", "error")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut nodes = Vec::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            let line = lines.next().expect("the cluster script ended early").unwrap();
            if line.starts_with("cluster ready") {
                break;
            }
            if let Some(rest) = line.strip_prefix("node").and_then(|l| l.split_once(" pid ")) {
                nodes.push(rest.1.split_whitespace().next().unwrap().parse().unwrap());
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Self { child, base, nodes }
    }

    /// `POST /hello` through the balancer: the status code (0 if the connection failed).
    fn hello(&self) -> u16 {
        post(self.base, "/hello", "edge")
    }

    /// Requests node `i` (1-based) answered `ok`, from its /metrics.
    fn served(&self, i: u16) -> u64 {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.base + i)) else { return 0 };
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let request = "GET /metrics HTTP/1.1\r\nHost: l\r\nConnection: close\r\n\r\n";
        stream.write_all(request.as_bytes()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        let line = "luge_requests_total{function=\"hello\",outcome=\"ok\",protocol=\"http\"} ";
        text.lines().find_map(|l| l.strip_prefix(line)).map_or(0, |n| n.parse().unwrap())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SAFETY: `kill` with a pid this process spawned and a valid signal number.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while self.child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(20)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn post(port: u16, path: &str, body: &str) -> u16 {
    post_with(port, path, "", body)
}

/// `POST path` to `port` with `headers` (each ending in CRLF) and `body`: the status code (0 if
/// the connection failed).
fn post_with(port: u16, path: &str, headers: &str, body: &str) -> u16 {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return 0 };
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: l\r\n{headers}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    if stream.write_all(request.as_bytes()).is_err() {
        return 0;
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn the_balancer_spreads_requests_and_routes_around_a_dead_node() {
    // Below the ephemeral port range (32768–60999), where the suite's client sockets live.
    let base = 20_000 + (std::process::id() % 120) as u16 * 100;
    let cluster = Cluster::start(base);
    assert_eq!(cluster.nodes.len(), 3);
    for _ in 0..60 {
        assert_eq!(cluster.hello(), 200);
    }
    let before: Vec<u64> = (1..=3).map(|i| cluster.served(i)).collect();
    assert_eq!(before.iter().sum::<u64>(), 60, "{before:?}");
    assert!(before.iter().all(|&n| n > 0), "every node served some: {before:?}");
    // Node 2 dies between requests: nothing of it is in flight, so nothing may be lost.
    // SAFETY: `kill` with a pid the cluster script printed for its child and a valid signal.
    assert_eq!(unsafe { libc::kill(cluster.nodes[1], libc::SIGKILL) }, 0);
    // SIGKILL is asynchronous: until the kernel has torn the process down its listening socket
    // still accepts, and a request accepted then dies with it (a request in flight).
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", base + 2)).is_ok() {
        assert!(start.elapsed() < Duration::from_secs(10), "node 2 still accepts after SIGKILL");
        std::thread::sleep(Duration::from_millis(5));
    }
    let statuses: Vec<u16> = (0..100).map(|_| cluster.hello()).collect();
    let lost = statuses.iter().filter(|&&s| s != 200).count();
    assert_eq!(lost, 0, "requests lost after a node died: {statuses:?}");
    let after = [cluster.served(1), cluster.served(3)];
    assert_eq!(after[0] + after[1], before[0] + before[2] + 100, "{before:?} → {after:?}");
}

/// A node drained and restarted on the same address gets its share again: while it drained its
/// agent said `drain`, which HAProxy keeps as the server's administrative state until an agent
/// says `ready` — which the restarted node's says with its weight.
#[test]
fn a_node_restarted_after_a_drain_is_sent_requests_again() {
    // Another range than the other test's (same pid, so the two never overlap).
    let base = 8_000 + (std::process::id() % 120) as u16 * 100;
    let cluster = Cluster::start(base);
    for _ in 0..30 {
        assert_eq!(cluster.hello(), 200);
    }
    // Node 2 drains with a ~0.4 s request in flight, long enough for the balancer to ask its
    // agent (every 100 ms) and be told `drain`.
    let long = std::thread::spawn(move || post_spin(base + 2));
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: `kill` with a pid the cluster script printed for its child and a valid signal.
    assert_eq!(unsafe { libc::kill(cluster.nodes[1], libc::SIGTERM) }, 0);
    assert_eq!(long.join().unwrap(), 200, "the request in flight finished");
    let start = Instant::now();
    while std::path::Path::new(&format!("/proc/{}", cluster.nodes[1])).exists() {
        assert!(start.elapsed() < Duration::from_secs(20), "node 2 did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The same node again, on the same addresses (with the built-in functions the script's
    // manifest also serves).
    let mut restarted = Command::new(LUGE)
        .args(["serve", "--workers", "1", "--admin", "off"])
        .args(["--http", &format!("127.0.0.1:{}", base + 2)])
        .args(["--rpc", &format!("127.0.0.1:{}", base + 102)])
        .args(["--agent", &format!("127.0.0.1:{}", base + 202)])
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", base + 2)).is_err() {
        assert!(start.elapsed() < Duration::from_secs(20), "node 2 did not come back");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The balancer's health check (every 200 ms) and agent (every 100 ms) see it: requests
    // through the balancer reach it within a few seconds, every one answered.
    let mut statuses = Vec::new();
    let mut served = 0;
    let start = Instant::now();
    while served == 0 && start.elapsed() < Duration::from_secs(10) {
        statuses.extend((0..10).map(|_| cluster.hello()));
        served = cluster.served(2);
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: `kill` with the pid of a child this test spawned and a valid signal number.
    unsafe { libc::kill(restarted.id() as i32, libc::SIGTERM) };
    let _ = restarted.wait();
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    assert!(served > 0, "the restarted node was sent nothing: still drained at the balancer");
}

/// `POST /spin` with ~0.4 s of work (and a deadline it can meet) straight to a node.
fn post_spin(port: u16) -> u16 {
    post_with(port, "/spin", "Luge-Deadline-Us: 5000000\r\n", "200000000")
}
