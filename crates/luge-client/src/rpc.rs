//! What both UDP-RPC clients share — call options, the response type, request-id generation,
//! request encoding — and the blocking [`RpcClient`].

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use luge_proto::{
    Backoff, DecodeError, Echo, Flags, Kind, MAX_DATAGRAM, Message, Request, RequestHeader,
    Response, StageTimes, Status, StatusClass, decode, split_readiness, split_stage_table,
};

use crate::error::ClientError;

/// Per-call options of every client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallOptions {
    /// Relative deadline sent to the server (µs on the wire); `None` = the function's default.
    pub deadline: Option<Duration>,
    /// Expected execution sent to the server (a hint it trusts only if configured to).
    pub expected: Option<Duration>,
    /// How long the client waits for the response in total, from the first send. Retransmission
    /// follows `backoff` within it; once the backoff's attempts are spent the client keeps
    /// listening, without resending, until the timeout. Set it above the deadline plus what you
    /// tolerate beyond it (the server answers late or killed requests too).
    pub timeout: Duration,
    /// Retransmission schedule (UDP-RPC only; §6 of the protocol).
    pub backoff: Backoff,
    /// UDP-RPC: ask for a chain's per-stage times ([`RpcResponse::stages`]; `docs/protocol.md`
    /// §1.5). HTTP always sends them (`Luge-Stages`).
    pub stages: bool,
    /// UDP-RPC: ask for the request's readiness ([`RpcResponse::readiness`]; `docs/protocol.md`
    /// §1.6). HTTP always sends it (`Luge-Readiness-Ns`).
    pub readiness: bool,
}

impl Default for CallOptions {
    /// No deadline or estimate, 1 s timeout, the default backoff (2 ms doubling, 6 attempts).
    fn default() -> Self {
        Self {
            deadline: None,
            expected: None,
            timeout: Duration::from_secs(1),
            backoff: Backoff::default(),
            stages: false,
            readiness: false,
        }
    }
}

impl CallOptions {
    /// With this relative deadline.
    pub fn with_deadline(self, deadline: Duration) -> Self {
        Self { deadline: Some(deadline), ..self }
    }

    /// With this expected execution.
    pub fn with_expected(self, expected: Duration) -> Self {
        Self { expected: Some(expected), ..self }
    }

    /// With this overall timeout.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        Self { timeout, ..self }
    }

    /// With this retransmission schedule.
    pub fn with_backoff(self, backoff: Backoff) -> Self {
        Self { backoff, ..self }
    }

    /// Asking for a chain's per-stage times (UDP-RPC).
    pub fn with_stages(self) -> Self {
        Self { stages: true, ..self }
    }

    /// Asking for the request's readiness (UDP-RPC).
    pub fn with_readiness(self) -> Self {
        Self { readiness: true, ..self }
    }

    /// The wait after attempt `attempt`, `remaining` before the timeout: the backoff's delay,
    /// or — attempts spent — the whole remainder without a resend. `None`: give up.
    pub(crate) fn wait(&self, attempt: u32, remaining: Duration) -> Option<(Duration, bool)> {
        if remaining.is_zero() {
            return None;
        }
        match self.backoff.next_delay(attempt, remaining) {
            Some(wait) => Some((wait, true)),
            None if attempt > 0 => Some((remaining, false)),
            None => None,
        }
    }
}

/// A decoded Response, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcResponse {
    /// The outcome; anything but [`Status::Ok`] carries a short message as payload.
    pub status: Status,
    /// The function's stdout (`Ok`) or the server's message.
    pub payload: Vec<u8>,
    /// Guest execution measured by the server.
    pub execution: Duration,
    /// Time at the server not executing (queues, set-up, preemption).
    pub queueing: Duration,
    /// The request id this answers.
    pub request_id: u64,
    /// Served from the server's duplicate cache (the times are the original execution's).
    pub replayed: bool,
    /// The node's load signal (`docs/protocol.md` §3.1): the share of the deadline this request
    /// waited in the node, in 254ths ([`LOAD_WAITED_ALL`](crate::LOAD_WAITED_ALL) = all of
    /// it), or [`LOAD_REFUSED`](crate::LOAD_REFUSED) for a refusal for load; 0 from a node that
    /// sends none.
    pub load: u8,
    /// Datagrams the client sent for this call (1 = no retransmission).
    pub attempts: u32,
    /// A chain's answer to a call made with [`CallOptions::stages`]: each stage that ran, in
    /// order, the last being the one that answered (`docs/protocol.md` §1.5); empty otherwise,
    /// for a refusal, and from a server that does not send them. A table that does not parse
    /// leaves this empty and the payload whole.
    pub stages: Vec<StageTimes>,
    /// The answer to a call made with [`CallOptions::readiness`] that ran: from the datagram's
    /// receipt to the request's first guest instruction (HORSE §2; `docs/protocol.md` §1.6).
    /// `None` otherwise, for a refusal, and from a server that does not send it.
    pub readiness: Option<Duration>,
}

impl RpcResponse {
    /// Whether the status is `Ok`.
    pub fn is_ok(&self) -> bool {
        self.status == Status::Ok
    }

    /// The status class (what the client should do about a failure).
    pub fn class(&self) -> StatusClass {
        self.status.class()
    }

    /// The payload as text (lossy), e.g. the server's message for a failure.
    pub fn message(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }

    pub(crate) fn from_wire(response: &Response<'_>, attempts: u32) -> Self {
        let h = &response.header;
        let mut payload = response.payload;
        let mut readiness = None;
        if h.flags.contains(Flags::READINESS)
            && let Ok((ns, rest)) = split_readiness(payload)
        {
            (readiness, payload) = (Some(Duration::from_nanos(ns)), rest);
        }
        let split = h.flags.contains(Flags::STAGES).then(|| split_stage_table(payload));
        let (stages, payload) = match split {
            Some(Ok((table, rest))) => (table.iter().collect(), rest),
            _ => (Vec::new(), payload),
        };
        Self {
            status: h.status,
            payload: payload.to_vec(),
            execution: Duration::from_nanos(h.execution_ns),
            queueing: Duration::from_nanos(h.queueing_ns),
            request_id: h.request_id,
            replayed: h.flags.contains(Flags::REPLAYED),
            load: h.flags.load(),
            attempts,
            stages,
            readiness,
        }
    }
}

/// Request ids: a random start, then counting up (skipping the reserved 0), so that a
/// restarted client reusing its port does not collide with ids the server still remembers.
#[derive(Debug)]
pub(crate) struct IdGenerator(AtomicU64);

impl IdGenerator {
    pub(crate) fn new() -> Self {
        Self(AtomicU64::new(random_u64()))
    }

    pub(crate) fn next(&self) -> u64 {
        loop {
            let id = self.0.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                return id;
            }
        }
    }
}

/// 64 random-enough bits without a dependency: std's randomly keyed SipHash over the time,
/// the process id and an address.
fn random_u64() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.write_u32(std::process::id());
    let local = 0u8;
    h.write_usize(std::ptr::from_ref(&local) as usize);
    h.finish()
}

/// A duration as wire µs: 0 = none; anything else at least 1, saturating.
fn micros(d: Option<Duration>) -> u32 {
    match d {
        None => 0,
        Some(d) => u32::try_from(d.as_micros()).unwrap_or(u32::MAX).max(1),
    }
}

/// Encodes a Request into `buf` (cleared first).
pub(crate) fn encode_request(
    buf: &mut Vec<u8>,
    request_id: u64,
    function: u32,
    payload: &[u8],
    opts: &CallOptions,
) -> Result<(), ClientError> {
    buf.clear();
    let header = RequestHeader {
        request_id,
        flags: Flags::NONE
            .with(if opts.stages { Flags::STAGES } else { Flags::NONE })
            .with(if opts.readiness { Flags::READINESS } else { Flags::NONE }),
        function,
        deadline_us: micros(opts.deadline),
        expected_us: micros(opts.expected),
    };
    Message::Request(Request { header, payload }).encode(buf)?;
    Ok(())
}

/// Encodes a Ping into `buf` (cleared first).
pub(crate) fn encode_ping(
    buf: &mut Vec<u8>,
    request_id: u64,
    payload: &[u8],
) -> Result<(), ClientError> {
    buf.clear();
    Message::Ping(Echo { request_id, flags: Flags::NONE, payload }).encode(buf)?;
    Ok(())
}

/// Prepares a Request datagram for its retransmission `elapsed` after the first send: the
/// retransmit flag set and, when the call has a `deadline`, the deadline field rewritten to what
/// is left of it — a copy the node sees first (the earlier ones lost) must not run as if it had
/// the whole deadline again. `false` when nothing is left: no copy sent now could be answered in
/// time, so none is sent (the call waits out its timeout for an answer to one already sent).
pub(crate) fn prepare_retransmit(
    datagram: &mut [u8],
    deadline: Option<Duration>,
    elapsed: Duration,
) -> bool {
    if let Some(deadline) = deadline {
        let left = deadline.saturating_sub(elapsed);
        if left.is_zero() {
            return false;
        }
        if let Some(field) = datagram.get_mut(DEADLINE_FIELD) {
            field.copy_from_slice(&micros(Some(left)).to_le_bytes());
        }
    }
    mark_retransmit(datagram);
    true
}

/// Where a Request's deadline (µs, little-endian) sits in its header (`docs/protocol.md` §1.2).
const DEADLINE_FIELD: std::ops::Range<usize> = 24..28;

/// Sets the `RETRANSMIT` flag of an encoded Request or Ping.
pub(crate) fn mark_retransmit(datagram: &mut [u8]) {
    if let Some(field) = datagram.get_mut(4..8) {
        let mut flags = [0; 4];
        flags.copy_from_slice(field);
        let flags = Flags(u32::from_le_bytes(flags)).with(Flags::RETRANSMIT);
        field.copy_from_slice(&flags.0.to_le_bytes());
    }
}

/// What a call is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expect {
    Response,
    Pong,
}

/// What a call got back.
#[derive(Debug)]
pub(crate) enum Reply {
    Response(RpcResponse),
    Pong(Vec<u8>),
}

/// Binds an ephemeral socket of `server`'s family and connects it, so the kernel drops
/// datagrams from anyone else.
fn connected_socket(server: SocketAddr) -> io::Result<UdpSocket> {
    let bind: SocketAddr = match server {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(bind)?;
    socket.connect(server)?;
    Ok(socket)
}

pub(crate) fn first_addr(
    addrs: impl Iterator<Item = SocketAddr>,
    what: &str,
) -> io::Result<SocketAddr> {
    let mut addrs = addrs;
    addrs.next().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("no address for {what}"))
    })
}

/// A blocking UDP-RPC client: one socket, one call at a time (`&mut self`); use one client per
/// thread, or [`AsyncRpcClient`](crate::AsyncRpcClient) for many concurrent calls.
#[derive(Debug)]
pub struct RpcClient {
    socket: UdpSocket,
    server: SocketAddr,
    ids: IdGenerator,
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
}

impl RpcClient {
    /// A client of the server at `server` (the first address it resolves to).
    pub fn connect(server: impl ToSocketAddrs) -> Result<Self, ClientError> {
        let server = first_addr(server.to_socket_addrs()?, "the server")?;
        Ok(Self {
            socket: connected_socket(server)?,
            server,
            ids: IdGenerator::new(),
            send_buf: Vec::new(),
            recv_buf: vec![0; MAX_DATAGRAM + 1],
        })
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.server
    }

    /// The client's own address.
    pub fn local_addr(&self) -> Result<SocketAddr, ClientError> {
        Ok(self.socket.local_addr()?)
    }

    /// Invokes function `function_id` with `payload` as stdin; returns its response, whatever
    /// its status, or an error if none arrived within `opts.timeout`.
    pub fn call(
        &mut self,
        function_id: u32,
        payload: &[u8],
        opts: CallOptions,
    ) -> Result<RpcResponse, ClientError> {
        let id = self.ids.next();
        encode_request(&mut self.send_buf, id, function_id, payload, &opts)?;
        match self.exchange(id, Expect::Response, &opts)? {
            Reply::Response(r) => Ok(r),
            // Never: a Pong is accepted only when one is expected.
            Reply::Pong(_) => {
                Err(ClientError::Protocol(DecodeError::UnknownKind(Kind::Pong as u8)))
            }
        }
    }

    /// Sends a Ping with `payload`; returns the echoed payload.
    pub fn ping(&mut self, payload: &[u8], opts: CallOptions) -> Result<Vec<u8>, ClientError> {
        let id = self.ids.next();
        encode_ping(&mut self.send_buf, id, payload)?;
        match self.exchange(id, Expect::Pong, &opts)? {
            Reply::Pong(p) => Ok(p),
            Reply::Response(r) => Err(ClientError::Status(r.status)),
        }
    }

    /// Sends `send_buf` and retransmits it until the reply to `id` arrives or the time is up.
    fn exchange(
        &mut self,
        id: u64,
        expect: Expect,
        opts: &CallOptions,
    ) -> Result<Reply, ClientError> {
        let start = Instant::now();
        let mut attempts = 0u32;
        let mut refused = None;
        let mut undecodable = None;
        let deadline = if expect == Expect::Response { opts.deadline } else { None };
        let mut listen_only = false;
        loop {
            let remaining = opts.timeout.saturating_sub(start.elapsed());
            let Some((mut wait, resend)) = opts.wait(attempts, remaining) else { break };
            if resend
                && !listen_only
                && attempts > 0
                && !prepare_retransmit(&mut self.send_buf, deadline, start.elapsed())
            {
                // The deadline is spent: no retransmit would be run, so the rest of the time
                // goes to listening for the answer to what was sent.
                listen_only = true;
            }
            if listen_only {
                wait = remaining;
            } else if resend {
                attempts += 1;
                match self.socket.send(&self.send_buf) {
                    Ok(_) => {}
                    // A pending ICMP error of an earlier send; the server may be back.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused = Some(e),
                    Err(e) => return Err(e.into()),
                }
            }
            let until = luge_proto::instant_after(Instant::now(), wait);
            loop {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                self.socket.set_read_timeout(Some(left))?;
                let n = match self.socket.recv(&mut self.recv_buf) {
                    Ok(n) => n,
                    Err(e) => match e.kind() {
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => break,
                        io::ErrorKind::Interrupted => continue,
                        io::ErrorKind::ConnectionRefused => {
                            refused = Some(e);
                            continue;
                        }
                        _ => return Err(e.into()),
                    },
                };
                match decode(&self.recv_buf[..n]) {
                    Ok(Message::Response(r))
                        if expect == Expect::Response && r.header.request_id == id =>
                    {
                        return Ok(Reply::Response(RpcResponse::from_wire(&r, attempts)));
                    }
                    // A server refusing the Ping itself (e.g. malformed) answers with a Response.
                    Ok(Message::Response(r)) if r.header.request_id == id => {
                        return Ok(Reply::Response(RpcResponse::from_wire(&r, attempts)));
                    }
                    Ok(Message::Pong(p)) if expect == Expect::Pong && p.request_id == id => {
                        return Ok(Reply::Pong(p.payload.to_vec()));
                    }
                    // A late answer to an earlier call, or a replay: not ours.
                    Ok(_) => {}
                    Err(e) => undecodable = Some(e),
                }
            }
        }
        if let Some(e) = refused {
            return Err(e.into());
        }
        if let Some(e) = undecodable {
            return Err(e.into());
        }
        Err(ClientError::Timeout { attempts, elapsed: start.elapsed() })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ids_count_up_and_skip_zero() {
        let ids = IdGenerator(AtomicU64::new(u64::MAX));
        assert_eq!(ids.next(), u64::MAX);
        assert_eq!(ids.next(), 1);
        assert_eq!(ids.next(), 2);
        assert_ne!(IdGenerator::new().next(), IdGenerator::new().next());
    }

    #[test]
    fn wire_micros() {
        assert_eq!(micros(None), 0);
        assert_eq!(micros(Some(Duration::from_nanos(1))), 1);
        assert_eq!(micros(Some(Duration::from_millis(5))), 5_000);
        assert_eq!(micros(Some(Duration::from_secs(1 << 40))), u32::MAX);
    }

    #[test]
    fn waits_follow_the_backoff_then_the_timeout() {
        let opts = CallOptions::default();
        let ms = Duration::from_millis;
        assert_eq!(opts.wait(0, ms(1000)), Some((ms(2), true)));
        assert_eq!(opts.wait(5, ms(1000)), Some((ms(64), true)));
        assert_eq!(opts.wait(6, ms(500)), Some((ms(500), false)));
        assert_eq!(opts.wait(0, Duration::ZERO), None);
        let none = opts.with_backoff(Backoff { max_attempts: 0, ..Backoff::default() });
        assert_eq!(none.wait(0, ms(10)), None);
    }

    /// A retransmit carries what is left of the deadline, and none goes out once it is spent.
    #[test]
    fn a_retransmit_carries_what_is_left_of_the_deadline() {
        let mut buf = Vec::new();
        let opts = CallOptions::default().with_deadline(Duration::from_millis(5));
        encode_request(&mut buf, 9, 1, b"x", &opts).unwrap();
        let ms = Duration::from_millis;
        assert!(prepare_retransmit(&mut buf, opts.deadline, ms(2)));
        match decode(&buf) {
            Ok(Message::Request(r)) => {
                assert!(r.header.flags.contains(Flags::RETRANSMIT));
                assert_eq!(r.header.deadline_us, 3_000);
                assert_eq!(r.payload, b"x");
            }
            other => panic!("{other:?}"),
        }
        let before = buf.clone();
        assert!(!prepare_retransmit(&mut buf, opts.deadline, ms(5)), "the deadline is spent");
        assert_eq!(buf, before, "not touched");
        // No deadline of its own (the function's applies): only the flag.
        let mut plain = Vec::new();
        encode_request(&mut plain, 9, 1, b"x", &CallOptions::default()).unwrap();
        assert!(prepare_retransmit(&mut plain, None, ms(500)));
        match decode(&plain) {
            Ok(Message::Request(r)) => assert_eq!(r.header.deadline_us, 0),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn retransmit_flag_is_set_in_place() {
        let mut buf = Vec::new();
        encode_request(&mut buf, 9, 1, b"x", &CallOptions::default()).unwrap();
        mark_retransmit(&mut buf);
        match decode(&buf) {
            Ok(Message::Request(r)) => assert!(r.header.flags.contains(Flags::RETRANSMIT)),
            other => panic!("{other:?}"),
        }
    }
}
