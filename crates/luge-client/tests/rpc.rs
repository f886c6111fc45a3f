//! The UDP-RPC clients against fake servers: plain sockets that drop, delay, reorder or forge
//! datagrams on purpose, so retransmission and id demultiplexing are checked without a runtime.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::collections::{HashMap, HashSet};
use std::net::{SocketAddr, UdpSocket};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use luge_client::{AsyncRpcClient, Backoff, CallOptions, ClientError, RpcClient, Status};
use luge_proto::{
    Echo, Flags, MAX_DATAGRAM, Message, RequestHeader, Response, ResponseHeader, decode,
};

const MS: Duration = Duration::from_millis(1);

fn server_socket() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    socket
}

/// One Request as a fake server saw it.
struct Got {
    header: RequestHeader,
    payload: Vec<u8>,
}

/// Receives one datagram that must be a Request.
fn recv_request(socket: &UdpSocket, buf: &mut [u8]) -> (SocketAddr, Got) {
    let (n, peer) = socket.recv_from(buf).unwrap();
    match decode(&buf[..n]).unwrap() {
        Message::Request(r) => (peer, Got { header: r.header, payload: r.payload.to_vec() }),
        other => panic!("expected a request, got {other:?}"),
    }
}

/// An `Ok` Response to `id` whose payload is `payload`.
fn response(id: u64, status: Status, payload: &[u8]) -> Vec<u8> {
    let header = ResponseHeader {
        request_id: id,
        flags: Flags::NONE,
        status,
        execution_ns: 1_500,
        queueing_ns: 2_500,
    };
    let mut out = Vec::new();
    Message::Response(Response { header, payload }).encode(&mut out).unwrap();
    out
}

fn fast_backoff(attempts: u32) -> Backoff {
    Backoff { initial: 5 * MS, max: 20 * MS, factor: 2, max_attempts: attempts }
}

/// A fake server thread that drops the first `drop` datagrams and answers the next one with
/// the payload upper-cased, after sending a stale answer and garbage first. Returns the flags
/// and ids of every datagram it saw.
fn dropping_server(drop: usize) -> (SocketAddr, JoinHandle<Vec<(u64, Flags)>>) {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let thread = std::thread::spawn(move || {
        let mut buf = vec![0; MAX_DATAGRAM + 1];
        let mut seen = Vec::new();
        loop {
            let (peer, req) = recv_request(&socket, &mut buf);
            seen.push((req.header.request_id, req.header.flags));
            if seen.len() <= drop {
                continue;
            }
            // Noise first: an answer to another id, a foreign datagram, a Pong with our id.
            let id = req.header.request_id;
            socket.send_to(&response(id.wrapping_add(1000), Status::Ok, b"stale"), peer).unwrap();
            socket.send_to(b"not luge at all", peer).unwrap();
            let mut pong = Vec::new();
            Message::Pong(Echo { request_id: id, flags: Flags::NONE, payload: b"pong" })
                .encode(&mut pong)
                .unwrap();
            socket.send_to(&pong, peer).unwrap();
            let upper = req.payload.to_ascii_uppercase();
            socket.send_to(&response(id, Status::Ok, &upper), peer).unwrap();
            return seen;
        }
    });
    (addr, thread)
}

#[test]
fn blocking_client_retransmits_with_the_flag_and_ignores_other_answers() {
    let (addr, server) = dropping_server(2);
    let mut client = RpcClient::connect(addr).unwrap();
    let opts =
        CallOptions::default().with_backoff(fast_backoff(6)).with_timeout(Duration::from_secs(5));
    let r = client.call(7, b"hello", opts).unwrap();
    assert_eq!((r.status, r.payload.as_slice()), (Status::Ok, b"HELLO".as_slice()));
    assert_eq!(r.attempts, 3);
    assert_eq!(
        (r.execution, r.queueing),
        (Duration::from_nanos(1_500), Duration::from_nanos(2_500))
    );
    assert!(!r.replayed);
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|&(id, _)| id == r.request_id), "one id for every attempt: {seen:?}");
    assert!(!seen[0].1.contains(Flags::RETRANSMIT));
    assert!(seen[1..].iter().all(|(_, f)| f.contains(Flags::RETRANSMIT)));
}

/// Retransmits carry what is left of the deadline, and stop once it is spent (the call waits
/// out its timeout for an answer to a copy already sent); the async client's adaptive window
/// takes a call that got no answer at all as a sign of load.
#[test]
fn retransmits_carry_what_is_left_of_the_deadline_and_stop_when_it_is_spent() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let mut client = RpcClient::connect(addr).unwrap();
    let opts = CallOptions::default()
        .with_backoff(fast_backoff(10))
        .with_timeout(400 * MS)
        .with_deadline(100 * MS);
    let err = client.call(1, b"", opts).unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    socket.set_read_timeout(Some(10 * MS)).unwrap();
    let mut buf = [0; 128];
    let mut deadlines = Vec::new();
    while let Ok(n) = socket.recv(&mut buf) {
        if let Ok(Message::Request(r)) = decode(&buf[..n]) {
            deadlines.push(r.header.deadline_us);
        }
    }
    // Due at 0, 5, 15, 35, 55, 75, 95 ms and every 20 ms after, up to ten: those after the
    // 100 ms deadline are not sent (however late the machine runs them), and each carries less
    // of the deadline than the one before.
    assert!((2..=7).contains(&deadlines.len()), "{deadlines:?}");
    assert_eq!(deadlines[0], 100_000);
    assert!(deadlines.windows(2).all(|w| w[1] < w[0]), "{deadlines:?}");
}

/// A backoff of zero with the deadline spent at once: both clients listen for the answer instead
/// of spinning without reading until the timeout.
#[tokio::test]
async fn a_spent_deadline_turns_retransmits_into_listening() {
    let zero =
        Backoff { initial: Duration::ZERO, max: Duration::ZERO, factor: 2, max_attempts: 1000 };
    let opts = CallOptions::default()
        .with_backoff(zero)
        .with_timeout(Duration::from_secs(5))
        .with_deadline(Duration::from_micros(1));
    let late_server = || {
        let socket = server_socket();
        let addr = socket.local_addr().unwrap();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0; 2048];
            let (peer, req) = recv_request(&socket, &mut buf);
            std::thread::sleep(30 * MS);
            socket.send_to(&response(req.header.request_id, Status::Ok, b"late"), peer).unwrap();
        });
        (addr, thread)
    };
    let (addr, server) = late_server();
    let r =
        tokio::task::spawn_blocking(move || RpcClient::connect(addr).unwrap().call(1, b"", opts))
            .await
            .unwrap();
    assert_eq!(r.unwrap().payload, b"late");
    server.join().unwrap();
    let (addr, server) = late_server();
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    assert_eq!(client.call(1, b"", opts).await.unwrap().payload, b"late");
    server.join().unwrap();
}

#[tokio::test]
async fn an_unanswered_call_shrinks_the_adaptive_window() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let client = AsyncRpcClient::connect_adaptive(addr, 8).await.unwrap();
    let opts = CallOptions::default().with_backoff(fast_backoff(1)).with_timeout(30 * MS);
    let err = client.call(1, b"", opts).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    assert_eq!(client.window(), Some(4), "halved: the node answered nothing");
    drop(socket);
}

#[test]
fn blocking_client_gives_up_after_the_backoff_and_timeout() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let mut client = RpcClient::connect(addr).unwrap();
    let opts = CallOptions::default().with_backoff(fast_backoff(3)).with_timeout(100 * MS);
    let start = Instant::now();
    let err = client.call(1, b"", opts).unwrap_err();
    let elapsed = start.elapsed();
    assert!(matches!(err, ClientError::Timeout { attempts: 3, .. }), "{err}");
    assert!(elapsed >= 100 * MS && elapsed < Duration::from_secs(2), "{elapsed:?}");
    // Exactly three sends reached the server: 0 ms, 5 ms, 15 ms; then silence until 100 ms.
    socket.set_read_timeout(Some(10 * MS)).unwrap();
    let mut buf = [0; 128];
    let mut n = 0;
    while socket.recv(&mut buf).is_ok() {
        n += 1;
    }
    assert_eq!(n, 3);
}

#[test]
fn blocking_client_reports_a_missing_server() {
    // Bind and drop a socket to get a port that is (almost surely) closed.
    let addr = server_socket().local_addr().unwrap();
    let mut client = RpcClient::connect(addr).unwrap();
    let opts = CallOptions::default().with_backoff(fast_backoff(2)).with_timeout(50 * MS);
    match client.call(1, b"", opts) {
        Err(ClientError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("expected connection refused, got {other:?}"),
    }
}

#[test]
fn request_fields_reach_the_wire() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let (peer, req) = recv_request(&socket, &mut buf);
        socket.send_to(&response(req.header.request_id, Status::Trap, b"oob"), peer).unwrap();
        req.header
    });
    let mut client = RpcClient::connect(addr).unwrap();
    let opts = CallOptions::default()
        .with_deadline(5 * MS)
        .with_expected(Duration::from_micros(100))
        .with_timeout(Duration::from_secs(5));
    let r = client.call(42, b"x", opts).unwrap();
    assert_eq!((r.status, r.message().as_str()), (Status::Trap, "oob"));
    let h = server.join().unwrap();
    assert_eq!((h.function, h.deadline_us, h.expected_us), (42, 5_000, 100));
    assert_eq!(h.request_id, r.request_id);
}

#[tokio::test]
async fn async_client_demultiplexes_concurrent_calls_by_id() {
    const CALLS: usize = 64;
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    // Collect every request first, then answer in reverse order, each twice (a duplicate),
    // plus one answer to an id nobody asked for.
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let mut requests = Vec::new();
        let mut ids = HashSet::new();
        while ids.len() < CALLS {
            let (peer, req) = recv_request(&socket, &mut buf);
            if ids.insert(req.header.request_id) {
                requests.push((peer, req.header.request_id, req.payload.clone()));
            }
        }
        socket.send_to(&response(12345, Status::Ok, b"nobody"), requests[0].0).unwrap();
        for (peer, id, payload) in requests.iter().rev() {
            let answer = response(*id, Status::Ok, &payload.to_ascii_uppercase());
            socket.send_to(&answer, peer).unwrap();
            socket.send_to(&answer, peer).unwrap();
        }
    });
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    // Patient backoff: the server answers only once it has all the calls.
    let opts = CallOptions::default()
        .with_backoff(Backoff { initial: Duration::from_secs(2), ..Backoff::default() })
        .with_timeout(Duration::from_secs(10));
    let calls = (0..CALLS).map(|i| {
        let client = client.clone();
        tokio::spawn(async move {
            let payload = format!("call number {i}");
            let r = client.call(3, payload.as_bytes(), opts).await.unwrap();
            assert_eq!(r.payload, payload.to_ascii_uppercase().into_bytes(), "call {i}");
            r.request_id
        })
    });
    let mut ids = HashSet::new();
    for call in calls.collect::<Vec<_>>() {
        assert!(ids.insert(call.await.unwrap()));
    }
    server.join().unwrap();
    assert_eq!(ids.len(), CALLS);
    assert_eq!(client.outstanding(), 0);
    // The duplicates and the unknown id were dropped, not delivered (some may still be in
    // flight to the receive task, so this is a lower bound after a short wait).
    tokio::time::sleep(20 * MS).await;
    assert!(client.stale_responses() >= 1, "{}", client.stale_responses());
}

#[tokio::test]
async fn async_client_retransmits_each_call_independently() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    // Drops the first datagram of every id; answers the second.
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let mut seen: HashMap<u64, Vec<Flags>> = HashMap::new();
        let mut answered = 0;
        while answered < 4 {
            let (peer, req) = recv_request(&socket, &mut buf);
            let flags = seen.entry(req.header.request_id).or_default();
            flags.push(req.header.flags);
            if flags.len() == 2 {
                socket
                    .send_to(&response(req.header.request_id, Status::Ok, &req.payload), peer)
                    .unwrap();
                answered += 1;
            }
        }
        seen
    });
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    let opts =
        CallOptions::default().with_backoff(fast_backoff(6)).with_timeout(Duration::from_secs(5));
    let calls: Vec<_> = (0..4u8)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move { client.call(1, &[i], opts).await.unwrap() })
        })
        .collect();
    for (i, call) in calls.into_iter().enumerate() {
        let r = call.await.unwrap();
        assert_eq!((r.payload, r.attempts), (vec![i as u8], 2));
    }
    let seen = server.join().unwrap();
    assert_eq!(seen.len(), 4);
    for flags in seen.values() {
        assert!(!flags[0].contains(Flags::RETRANSMIT) && flags[1].contains(Flags::RETRANSMIT));
    }
}

#[tokio::test]
async fn async_client_window_bounds_outstanding_calls() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    // Holds requests until two are waiting (or 30 ms pass), then answers them; records the
    // largest number of distinct unanswered ids it ever saw.
    let server = std::thread::spawn(move || {
        socket.set_read_timeout(Some(30 * MS)).unwrap();
        let mut buf = vec![0; 2048];
        let (mut held, mut most, mut answered) = (Vec::new(), 0, 0);
        while answered < 10 {
            if let Ok((n, peer)) = socket.recv_from(&mut buf)
                && let Ok(Message::Request(r)) = decode(&buf[..n])
            {
                held.push((peer, r.header.request_id));
                most = most.max(held.len());
                if held.len() < 2 {
                    continue;
                }
            }
            for (peer, id) in held.drain(..) {
                socket.send_to(&response(id, Status::Ok, b""), peer).unwrap();
                answered += 1;
            }
        }
        most
    });
    let client = AsyncRpcClient::connect_with_window(addr, 2).await.unwrap();
    let opts = CallOptions::default()
        .with_backoff(Backoff { initial: Duration::from_secs(2), ..Backoff::default() })
        .with_timeout(Duration::from_secs(10));
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.call(1, b"", opts).await.unwrap() })
        })
        .collect();
    for call in calls {
        assert_eq!(call.await.unwrap().status, Status::Ok);
    }
    // Premise: the server did hold two at once (the window was used), never three.
    assert_eq!(server.join().unwrap(), 2);
}

#[tokio::test]
async fn async_client_times_out_and_cleans_up() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    let opts = CallOptions::default().with_backoff(fast_backoff(2)).with_timeout(40 * MS);
    let err = client.call(1, b"", opts).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { attempts: 2, .. }), "{err}");
    assert_eq!(client.outstanding(), 0);
    // A cancelled call leaves nothing behind either.
    let slow = CallOptions::default().with_timeout(Duration::from_secs(10));
    let cancelled = tokio::time::timeout(10 * MS, client.call(1, b"", slow)).await;
    assert!(cancelled.is_err());
    assert_eq!(client.outstanding(), 0);
    drop(socket);
}

#[tokio::test]
async fn async_client_reports_a_missing_server() {
    let addr = server_socket().local_addr().unwrap();
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    let opts = CallOptions::default().with_backoff(fast_backoff(2)).with_timeout(50 * MS);
    match client.call(1, b"", opts).await {
        Err(ClientError::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused),
        other => panic!("expected connection refused, got {other:?}"),
    }
}

/// A "port unreachable" from a node that was down says nothing of a call sent after it: that
/// call, if unanswered, times out rather than report the old refusal.
#[tokio::test]
async fn an_earlier_connection_refused_is_not_blamed_on_a_later_call() {
    // A port with nothing behind it; a call cancelled there leaves its refusal unclaimed.
    let addr = server_socket().local_addr().unwrap();
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    let slow = CallOptions::default().with_timeout(Duration::from_secs(10));
    assert!(tokio::time::timeout(10 * MS, client.call(1, b"", slow)).await.is_err());
    tokio::time::sleep(20 * MS).await;
    // The node comes up on that port, answers one call and then loses a datagram.
    let socket = UdpSocket::bind(addr).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let (peer, req) = recv_request(&socket, &mut buf);
        socket.send_to(&response(req.header.request_id, Status::Ok, b"up"), peer).unwrap();
        recv_request(&socket, &mut buf);
        socket
    });
    let opts = || CallOptions::default().with_backoff(fast_backoff(1)).with_timeout(100 * MS);
    assert_eq!(client.call(1, b"", opts()).await.unwrap().payload, b"up");
    let err = client.call(1, b"", opts()).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    drop(server.join().unwrap());
}

#[tokio::test]
async fn async_ping_is_echoed() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let (n, peer) = socket.recv_from(&mut buf).unwrap();
        let Ok(Message::Ping(p)) = decode(&buf[..n]) else { panic!("expected a ping") };
        let mut pong = Vec::new();
        Message::Pong(Echo { flags: Flags::NONE, ..p }).encode(&mut pong).unwrap();
        socket.send_to(&pong, peer).unwrap();
    });
    let client = AsyncRpcClient::connect(addr).await.unwrap();
    let echoed = client.ping(b"are you there", CallOptions::default()).await.unwrap();
    assert_eq!(echoed, b"are you there");
    server.join().unwrap();
}

/// A Response to `id` with `status` and the load signal `load` in its flags.
fn loaded_response(id: u64, status: Status, load: u8) -> Vec<u8> {
    let header = ResponseHeader {
        request_id: id,
        flags: Flags::NONE.with_load(load),
        status,
        execution_ns: 1_500,
        queueing_ns: 2_500,
    };
    let mut out = Vec::new();
    Message::Response(Response { header, payload: b"" }).encode(&mut out).unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_client_slows_down_when_the_node_signals_load() {
    let socket = server_socket();
    let addr = socket.local_addr().unwrap();
    // Three refusals for load, then one answer held 100 ms (load 100: hold the window), then one
    // quiet answer. Returns the deadline (µs) of every request it saw.
    let server = std::thread::spawn(move || {
        let mut buf = vec![0; 2048];
        let mut deadlines = Vec::new();
        for n in 0..5 {
            let (peer, got) = recv_request(&socket, &mut buf);
            deadlines.push(got.header.deadline_us);
            let (status, load) = match n {
                0..3 => (Status::Overloaded, luge_client::LOAD_REFUSED),
                3 => {
                    std::thread::sleep(100 * MS);
                    (Status::Ok, 100)
                }
                _ => (Status::Ok, 0),
            };
            socket.send_to(&loaded_response(got.header.request_id, status, load), peer).unwrap();
        }
        deadlines
    });
    let client = AsyncRpcClient::connect_adaptive(addr, 8).await.unwrap();
    assert_eq!(client.window(), Some(8), "starts at its maximum");
    // No retransmissions: the fake server counts datagrams.
    let once = Duration::from_secs(10);
    let opts = CallOptions::default()
        .with_backoff(Backoff { initial: once, max: once, ..Backoff::default() })
        .with_timeout(Duration::from_secs(5));
    for _ in 0..3 {
        let r = client.call(1, b"", opts.with_deadline(Duration::from_secs(1))).await.unwrap();
        assert_eq!((r.status, r.load), (Status::Overloaded, luge_client::LOAD_REFUSED));
    }
    assert_eq!(client.window(), Some(1), "halved on each refusal: 8 → 4 → 2 → 1");
    // One call holds the only place for 100 ms.
    let held = {
        let client = client.clone();
        tokio::spawn(async move { client.call(1, b"", opts.with_deadline(10 * 1000 * MS)).await })
    };
    tokio::time::sleep(10 * MS).await;
    // A call with a 1 s deadline waits for the place and sends what is left of its deadline…
    let waiting = {
        let client = client.clone();
        tokio::spawn(async move { client.call(1, b"", opts.with_deadline(1000 * MS)).await })
    };
    // …and one with a 30 ms deadline, which may wait half of it, is not sent at all.
    let err = client.call(1, b"", opts.with_deadline(30 * MS)).await.unwrap_err();
    let gave_up = |w: Duration| w >= 15 * MS && w < 90 * MS;
    assert!(matches!(err, ClientError::Backpressure { waited } if gave_up(waited)), "{err}");
    assert_eq!(held.await.unwrap().unwrap().load, 100);
    assert_eq!(waiting.await.unwrap().unwrap().load, 0);
    let deadlines = server.join().unwrap();
    assert_eq!(deadlines.len(), 5, "the call given up on was never sent");
    let left = deadlines[4];
    assert!(left < 950_000 && left > 500_000, "the wait came off the deadline: {left} µs");
    assert_eq!(client.window(), Some(2), "a quiet answer at a window of 1 grows it to 2");
}
