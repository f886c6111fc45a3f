//! The UDP-RPC driver: one connected socket, the pacer sending on it, one receiver thread.
//!
//! Its own implementation over `std::net::UdpSocket` and `luge-proto` (not `luge-client`): a
//! load generator needs many requests in flight on one socket and the receive timestamp taken
//! the moment the datagram arrives, not a call-and-wait client.
//!
//! - Request ids are a random base plus the request's position in the plan, so they are unique
//!   per run and a restarted run does not collide with ids the server's duplicate cache still
//!   remembers (`docs/protocol.md` §6). The receiver maps an id back to its request by
//!   subtraction.
//! - The socket is *connected* to the target: it sends only there, and the kernel drops
//!   datagrams from anyone else.
//! - There is no retransmission: a lost datagram is a `timeout`, as it should be in a
//!   measurement (and the window slot it held is freed at its timeout).
//! - Socket buffers are raised to 4 MiB (capped by `net.core.rmem_max` / `wmem_max`) so that a
//!   burst of responses is not dropped while the receiver is descheduled.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use luge_proto::{
    Flags, MAX_DATAGRAM, Message, Request, RequestHeader, Response, Status, decode, split_readiness,
};

use crate::calibrate::{CALIBRATION_DEADLINE_US, Caller, Reply};
use crate::drive::Transport;
use crate::error::BenchError;
use crate::ledger::Ledger;
use crate::plan::Planned;
use crate::sample::ErrorKind;
use crate::target::FunctionRef;

const SOCKET_BUFFER: usize = 4 << 20;

/// A UDP socket bound to an ephemeral port and connected to `target`.
pub(crate) fn connect(target: SocketAddr) -> Result<UdpSocket, BenchError> {
    let local: SocketAddr = if target.is_ipv4() {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let sock = UdpSocket::bind(local).map_err(|e| BenchError::io("binding a UDP socket", e))?;
    sock.connect(target).map_err(|e| BenchError::io(format!("connecting to {target}"), e))?;
    let s = socket2::SockRef::from(&sock);
    // Best effort: the kernel caps these at rmem_max / wmem_max.
    let _ = s.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = s.set_send_buffer_size(SOCKET_BUFFER);
    Ok(sock)
}

/// The reply carried by a Response (its readiness, when the server gave it: every request asks).
fn reply_of(r: &Response<'_>) -> Reply {
    let readiness = r.header.flags.contains(Flags::READINESS).then(|| split_readiness(r.payload));
    Reply {
        error: (r.header.status != Status::Ok).then_some(ErrorKind::Status(r.header.status)),
        execution_ns: Some(r.header.execution_ns),
        queueing_ns: Some(r.header.queueing_ns),
        readiness_ns: readiness.and_then(Result::ok).map(|(ns, _)| ns),
    }
}

/// The sending half of the driver.
pub(crate) struct UdpTransport {
    sock: UdpSocket,
    base: u64,
    send_expected: bool,
    buf: Vec<u8>,
}

impl UdpTransport {
    pub(crate) fn new(sock: UdpSocket, base: u64, send_expected: bool) -> Self {
        Self { sock, base, send_expected, buf: vec![0; MAX_DATAGRAM] }
    }
}

impl Transport for UdpTransport {
    fn send(
        &mut self,
        p: &Planned,
        function: &FunctionRef,
        payload: &[u8],
        intended_ns: u64,
        now_ns: u64,
    ) -> Result<(), ErrorKind> {
        let msg = Message::Request(Request {
            header: RequestHeader {
                request_id: self.base.wrapping_add(p.seq),
                // The node's readiness for the summary (8 more bytes per answer).
                flags: Flags::READINESS,
                function: function.rpc_id,
                deadline_us: p.deadline_left_us(now_ns.saturating_sub(intended_ns)),
                expected_us: if self.send_expected { p.expected_us() } else { 0 },
            },
            payload,
        });
        let n = msg.encode_into(&mut self.buf).map_err(|_| ErrorKind::Send)?;
        match self.sock.send(&self.buf[..n]) {
            Ok(_) => Ok(()),
            Err(_) => Err(ErrorKind::Send),
        }
    }
}

/// A receive that ended without a datagram but may be tried again: its read timeout passed
/// (`WouldBlock` or `TimedOut`, by platform) or a signal interrupted it.
fn again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// The receiving half: runs until `stop` is set, completing requests in the ledger.
pub(crate) fn receive(sock: &UdpSocket, base: u64, ledger: &Ledger, stop: &AtomicBool) {
    let _ = sock.set_read_timeout(Some(Duration::from_millis(5)));
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    while !stop.load(Ordering::Relaxed) {
        match sock.recv(&mut buf) {
            Ok(n) => {
                let now = ledger.now_ns();
                let Some(data) = buf.get(..n) else { continue };
                match decode(data) {
                    Ok(Message::Response(r)) => {
                        let seq = r.header.request_id.wrapping_sub(base);
                        ledger.complete(seq, now, reply_of(&r));
                    }
                    // Not an answer to us (or malformed): ignored; counted as stray.
                    _ => ledger.stray(),
                }
            }
            // Timeouts let the loop see `stop`; ECONNREFUSED (an ICMP port unreachable on a
            // connected socket) means nobody listens: the requests will time out.
            Err(e) if again(&e) || e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// One request at a time, for calibration.
pub(crate) struct UdpCaller {
    sock: UdpSocket,
    next_id: u64,
    timeout: Duration,
    buf: Vec<u8>,
}

impl UdpCaller {
    pub(crate) fn new(
        target: SocketAddr,
        base: u64,
        timeout: Duration,
    ) -> Result<Self, BenchError> {
        Ok(Self { sock: connect(target)?, next_id: base, timeout, buf: vec![0; MAX_DATAGRAM + 1] })
    }
}

impl Caller for UdpCaller {
    fn call(&mut self, function: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let msg = Message::Request(Request {
            header: RequestHeader {
                request_id: id,
                flags: Flags::NONE,
                function: function.rpc_id,
                deadline_us: CALIBRATION_DEADLINE_US,
                expected_us: 0,
            },
            payload,
        });
        let n = msg
            .encode_into(&mut self.buf)
            .map_err(|e| BenchError::Calibration(format!("cannot encode a request: {e}")))?;
        self.sock.send(&self.buf[..n]).map_err(|e| BenchError::io("sending to the target", e))?;
        let give_up = Instant::now() + self.timeout;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(BenchError::Calibration(format!(
                    "no answer within {:?} (is the server running on the target?)",
                    self.timeout
                )));
            }
            let _ = self.sock.set_read_timeout(Some(left));
            match self.sock.recv(&mut self.buf) {
                Ok(n) => {
                    if let Some(Ok(Message::Response(r))) = self.buf.get(..n).map(decode)
                        && r.header.request_id == id
                    {
                        return Ok(reply_of(&r));
                    }
                }
                Err(e) if again(&e) => {}
                Err(e) => return Err(BenchError::io("receiving from the target", e)),
            }
        }
    }
}
