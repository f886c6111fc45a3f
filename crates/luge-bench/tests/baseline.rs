//! The `luge bench compare` baselines end to end: real sockets on 127.0.0.1, the `luge-client`
//! clients and raw sockets, real child processes (`/bin/sh`, `/bin/cat`, `/bin/true`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::HashSet;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use luge_bench::{
    BareHttpConfig, BareHttpServer, BaselineError, ProcessConfig, ProcessServer, UdpEchoConfig,
    UdpEchoServer, native_program,
};
use luge_client::{Backoff, CallOptions, HttpClient, RpcClient, Status};
use luge_proto::{Flags, Message, Request, RequestHeader, decode, split_readiness};
use luge_server::UdpConfig;

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// One send, a generous wait: no retransmission (the process server has no duplicate cache, so
/// a retransmit would start a second process).
fn once() -> CallOptions {
    CallOptions::default().with_timeout(Duration::from_secs(5)).with_backoff(Backoff {
        initial: Duration::from_secs(5),
        max_attempts: 1,
        ..Backoff::default()
    })
}

fn url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// A raw socket connected to `server`, with a read timeout.
fn raw(server: SocketAddr) -> UdpSocket {
    let socket = UdpSocket::bind(localhost()).unwrap();
    socket.connect(server).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    socket
}

/// An encoded Request with no flags, deadline or estimate (the function's defaults).
fn request(id: u64, function: u32, payload: &[u8]) -> Vec<u8> {
    let header = RequestHeader { request_id: id, function, ..RequestHeader::default() };
    let mut buf = Vec::new();
    Message::Request(Request { header, payload }).encode(&mut buf).unwrap();
    buf
}

fn echo_round_trips(config: UdpEchoConfig) {
    let server = UdpEchoServer::start(UdpEchoConfig { addr: localhost(), ..config }).unwrap();
    let mut client = RpcClient::connect(server.local_addr()).unwrap();
    for i in 0..20u32 {
        let payload = format!("hello {i}");
        let r = client.call(i, payload.as_bytes(), CallOptions::default()).unwrap();
        assert_eq!(r.status, Status::Ok);
        assert_eq!(r.payload, payload.as_bytes());
        assert_eq!(r.execution, Duration::ZERO);
        assert!(!r.replayed);
    }
    assert_eq!(client.ping(b"p", CallOptions::default()).unwrap(), b"p");
    let stats = server.stats();
    assert!(stats.requests >= 20, "{stats:?}");
    assert!(stats.pings >= 1, "{stats:?}");
    let start = Instant::now();
    server.shutdown();
    assert!(start.elapsed() < Duration::from_secs(1), "shutdown took {:?}", start.elapsed());
}

#[test]
fn echo_answers_in_blocking_mode() {
    echo_round_trips(UdpEchoConfig { busy_poll: false, ..Default::default() });
}

#[test]
fn echo_answers_in_busy_poll_mode() {
    echo_round_trips(UdpEchoConfig { busy_poll: true, batch: 8, ..Default::default() });
}

/// A request that asks for its readiness gets it, as Luge answers (`docs/protocol.md` §1.6):
/// the flag on the Response, the field before the echoed payload, equal to the queueing (the
/// echo has no guest to start); one that does not ask gets the payload alone.
#[test]
fn echo_reports_readiness_when_asked() {
    let server = UdpEchoServer::start(UdpEchoConfig::default()).unwrap();
    let socket = raw(server.local_addr());
    for asked in [true, false] {
        let flags = if asked { Flags::NONE.with(Flags::READINESS) } else { Flags::NONE };
        let header =
            RequestHeader { request_id: 7, function: 1, flags, ..RequestHeader::default() };
        let mut buf = Vec::new();
        Message::Request(Request { header, payload: b"ping" }).encode(&mut buf).unwrap();
        socket.send(&buf).unwrap();
        let mut answer = [0u8; 2048];
        let n = socket.recv(&mut answer).unwrap();
        let Ok(Message::Response(r)) = decode(&answer[..n]) else { panic!("not a Response") };
        assert_eq!(r.header.flags.contains(Flags::READINESS), asked);
        if asked {
            let (readiness, rest) = split_readiness(r.payload).unwrap();
            assert_eq!(rest, b"ping");
            assert_eq!(readiness, r.header.queueing_ns);
            assert!(readiness > 0);
        } else {
            assert_eq!(r.payload, b"ping");
        }
    }
}

#[test]
fn echo_config_follows_luges() {
    let luge = UdpConfig { busy_poll: true, batch: 7, ..Default::default() };
    let echo = UdpEchoConfig::from(&luge);
    assert_eq!((echo.addr, echo.busy_poll, echo.batch), (luge.addr, true, 7));
    assert_eq!(echo.recv_buffer_bytes, luge.recv_buffer_bytes);
    assert_eq!(UdpEchoConfig::default().batch, UdpConfig::default().batch);
}

#[test]
fn echo_answers_a_burst_and_ignores_garbage() {
    for busy_poll in [false, true] {
        let config = UdpEchoConfig { addr: localhost(), busy_poll, batch: 4, ..Default::default() };
        let server = UdpEchoServer::start(config).unwrap();
        let socket = raw(server.local_addr());
        // Garbage first: ignored, counted, never answered.
        socket.send(b"not luge").unwrap();
        socket.send(&[]).unwrap();
        // A burst larger than the batch: every request answered, with its own payload.
        let n = 50u64;
        for id in 1..=n {
            socket.send(&request(id, 3, &id.to_le_bytes())).unwrap();
        }
        let mut seen = HashSet::new();
        let mut buf = vec![0; 70_000];
        while seen.len() < n as usize {
            let len = socket.recv(&mut buf).unwrap();
            let Ok(Message::Response(r)) = decode(&buf[..len]) else {
                panic!("not a Response: {:?}", &buf[..len])
            };
            assert_eq!(r.header.status, Status::Ok);
            assert_eq!(r.header.execution_ns, 0);
            assert_eq!(r.payload, r.header.request_id.to_le_bytes());
            assert!(seen.insert(r.header.request_id), "answered twice");
        }
        // Nothing else comes back (the garbage got no reply).
        socket.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        assert!(socket.recv(&mut buf).is_err());
        let stats = server.stats();
        assert_eq!(stats.malformed, 2, "{stats:?}");
        assert_eq!(stats.requests, n, "{stats:?}");
        assert_eq!(stats.datagrams, n + 2, "{stats:?}");
        server.shutdown();
    }
}

#[test]
fn bare_http_answers_ok() {
    for threads in [1, 2] {
        let config = BareHttpConfig { addr: localhost(), threads, ..Default::default() };
        let server = BareHttpServer::start(config).unwrap();
        let client = HttpClient::new().unwrap();
        let base = url(server.local_addr());
        for (route, body) in
            [("/noop", &b""[..]), ("/anything/else", b"some body"), ("/x", &[7; 100_000])]
        {
            let r = client.call(&base, route, body, CallOptions::default()).unwrap();
            assert_eq!(r.status, 200);
            assert_eq!(r.body, b"ok");
        }
        assert_eq!(server.stats().requests, 3);
        // The keep-alive connection is idle in the client's pool: shutdown does not wait for it.
        let start = Instant::now();
        server.shutdown();
        assert!(start.elapsed() < Duration::from_secs(1), "shutdown took {:?}", start.elapsed());
        assert!(client.call(&base, "/noop", b"", CallOptions::default()).is_err());
    }
}

#[test]
fn bare_http_refuses_zero_threads() {
    let config = BareHttpConfig { addr: localhost(), threads: 0, ..Default::default() };
    assert!(matches!(BareHttpServer::start(config), Err(BaselineError::Config(_))));
}

fn process_server(program: &str, args: &[&str]) -> ProcessServer {
    ProcessServer::start(ProcessConfig {
        http_addr: Some(localhost()),
        udp_addr: Some(localhost()),
        program: PathBuf::from(program),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn process_server_starts_a_process_per_request() {
    let server = process_server("/bin/sh", &["-c", "echo $$"]);
    let http = HttpClient::new().unwrap();
    let mut rpc = RpcClient::connect(server.udp_addr().unwrap()).unwrap();
    let base = url(server.http_addr().unwrap());
    let mut pids = HashSet::new();
    for _ in 0..3 {
        let r = http.call(&base, "/noop", b"", once()).unwrap();
        assert_eq!(r.status, 200, "{r:?}");
        pids.insert(String::from_utf8(r.body).unwrap().trim().parse::<u32>().unwrap());
        let r = rpc.call(1, b"", once()).unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message());
        pids.insert(String::from_utf8(r.payload).unwrap().trim().parse::<u32>().unwrap());
    }
    assert_eq!(pids.len(), 6, "{pids:?}");
    assert!(!pids.contains(&std::process::id()));
    let stats = server.stats();
    assert_eq!((stats.requests, stats.spawned, stats.exit_failures), (6, 6, 0), "{stats:?}");
    assert_eq!(server.shutdown(), 0);
}

#[test]
fn process_server_pipes_stdin_to_stdout() {
    let server = process_server("cat", &[]);
    let http = HttpClient::new().unwrap();
    let base = url(server.http_addr().unwrap());
    // Larger than a pipe: written while the output is read.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    for body in [&b"hello"[..], &big] {
        let r = http.call(&base, "/cat", body, once()).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, body);
    }
    let mut rpc = RpcClient::connect(server.udp_addr().unwrap()).unwrap();
    let datagram = vec![b'x'; 20_000];
    for payload in [&b"hi"[..], &datagram] {
        let r = rpc.call(9, payload, once()).unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message());
        assert_eq!(r.payload, payload);
    }
    server.shutdown();
}

#[test]
fn process_server_maps_failures() {
    let server = process_server("/bin/sh", &["-c", "cat >/dev/null; echo oops; exit 3"]);
    let http = HttpClient::new().unwrap();
    let r = http.call(&url(server.http_addr().unwrap()), "/f", b"in", once()).unwrap();
    assert_eq!(r.status, 500);
    assert_eq!(r.outcome.as_deref(), Some("exit_failure"));
    assert_eq!(r.body, b"exit status 3");
    let mut rpc = RpcClient::connect(server.udp_addr().unwrap()).unwrap();
    let r = rpc.call(1, b"in", once()).unwrap();
    assert_eq!(r.status, Status::ExitFailure);
    assert_eq!(r.message(), "exit status 3");
    assert_eq!(server.stats().exit_failures, 2);
    server.shutdown();

    // Too much output: killed, `output_too_large`.
    let server = ProcessServer::start(ProcessConfig {
        http_addr: Some(localhost()),
        udp_addr: None,
        program: "yes".into(),
        max_output_bytes: 10_000,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(server.udp_addr(), None);
    let r = http.call(&url(server.http_addr().unwrap()), "/f", b"", once()).unwrap();
    assert_eq!(r.status, 500);
    assert_eq!(r.outcome.as_deref(), Some("output_too_large"));
    server.shutdown();
}

#[test]
fn process_server_defaults_to_a_native_noop() {
    let server = ProcessServer::start(ProcessConfig {
        http_addr: None,
        udp_addr: Some(localhost()),
        busy_poll: true,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(server.http_addr(), None);
    let mut rpc = RpcClient::connect(server.udp_addr().unwrap()).unwrap();
    for _ in 0..5 {
        let r = rpc.call(1, b"ignored by /bin/true", once()).unwrap();
        assert_eq!(r.status, Status::Ok, "{}", r.message());
        assert!(r.payload.is_empty());
    }
    assert_eq!(rpc.ping(b"p", once()).unwrap(), b"p");
    assert_eq!(server.stats().spawned, 5);
    server.shutdown();
}

#[test]
fn process_server_runs_requests_concurrently() {
    let server = process_server("/bin/sh", &["-c", "sleep 0.4"]);
    let addr = server.udp_addr().unwrap();
    let start = Instant::now();
    let calls: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut rpc = RpcClient::connect(addr).unwrap();
                rpc.call(1, b"", once()).unwrap().status
            })
        })
        .collect();
    for call in calls {
        assert_eq!(call.join().unwrap(), Status::Ok);
    }
    // Sequentially they would take 1.6 s.
    assert!(start.elapsed() < Duration::from_millis(1_200), "took {:?}", start.elapsed());
    server.shutdown();
}

#[test]
fn process_server_checks_its_program_and_config() {
    let missing = ProcessConfig { program: "/nonexistent/luge-fn".into(), ..Default::default() };
    assert!(matches!(ProcessServer::start(missing), Err(BaselineError::Program { .. })));
    let unknown = ProcessConfig { program: "no-such-luge-program".into(), ..Default::default() };
    assert!(matches!(ProcessServer::start(unknown), Err(BaselineError::Program { .. })));
    let nothing = ProcessConfig { http_addr: None, udp_addr: None, ..Default::default() };
    assert!(matches!(ProcessServer::start(nothing), Err(BaselineError::Config(_))));
}

#[test]
fn native_programs_are_found_when_built() {
    let dir = std::env::temp_dir().join(format!("luge-baseline-{}", std::process::id()));
    let native = dir.join("build").join("native");
    std::fs::create_dir_all(&native).unwrap();
    assert_eq!(native_program(&dir, "noop"), None);
    std::fs::copy("/bin/true", native.join("noop")).unwrap();
    assert_eq!(native_program(&dir, "noop"), Some(native.join("noop")));
    std::fs::write(native.join("data"), b"not a program").unwrap();
    assert_eq!(native_program(&dir, "data"), None);
    std::fs::remove_dir_all(&dir).unwrap();
}
