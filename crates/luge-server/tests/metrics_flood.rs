//! `/metrics` is rendered off the event loop, on tokio's blocking pool; a flood of scrapes on
//! the public listener (it serves `/metrics` by default) must not make that pool spawn a thread
//! per scrape. A test binary of its own: it counts this process's `luge-http` threads, so no
//! other node may run beside it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use luge_runtime::RuntimeConfig;
use luge_server::{HttpConfig, Node, NodeConfig};

/// Threads of this process whose name is `luge-http` (the HTTP runtime's and its blocking
/// pool's).
fn http_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "luge-http")
        .count()
}

/// Reads one response's head and body off `reader`; its status code.
fn read_response(reader: &mut BufReader<TcpStream>) -> u16 {
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let status = line[9..12].parse().unwrap();
    let mut length = 0;
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    status
}

#[test]
fn a_flood_of_scrapes_does_not_grow_a_thread_per_scrape() {
    const CONNECTIONS: usize = 64;
    // One event-loop thread (the default, said here since the bound below counts it).
    let http =
        HttpConfig { addr: "127.0.0.1:0".parse().unwrap(), threads: 1, ..HttpConfig::default() };
    let config = NodeConfig { runtime: RuntimeConfig::default(), http: Some(http), udp: None };
    let node = Node::start(config, &[]).unwrap();
    let addr = node.http_addr().unwrap();
    let before = http_threads();
    let mut connections: Vec<BufReader<TcpStream>> = (0..CONNECTIONS)
        .map(|_| {
            let stream = TcpStream::connect(addr).unwrap();
            stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            BufReader::new(stream)
        })
        .collect();
    let mut peak = before;
    for _ in 0..10 {
        // Every connection asks at once, so the loop reads them all in one turn.
        for c in &mut connections {
            c.get_mut().write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").unwrap();
        }
        for c in &mut connections {
            assert_eq!(read_response(c), 200);
        }
        // Idle blocking threads live on for seconds: the count now is the round's peak.
        peak = peak.max(http_threads());
    }
    // The server's own thread and the blocking pool's. (Counted as a bound, not as growth over
    // `before`: the server thread may not carry its name yet when `before` is read.)
    assert!(
        peak <= 1 + luge_server::HTTP_BLOCKING_THREADS,
        "{before} luge-http threads before, {peak} during {CONNECTIONS} scrapes at once"
    );
    drop(connections);
    node.shutdown();
}
