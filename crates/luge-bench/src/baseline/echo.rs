//! The bare UDP echo baseline: Luge's UDP-RPC front end minus the runtime (see
//! [`super::rpc`]). Every Request is answered from the receive thread, in the batch's
//! `sendmmsg`, with status `Ok`, the request's payload, execution 0 and, as queueing, the time
//! from the kernel's receipt to its handler — what Luge's front end costs with nothing behind
//! it. A request that asks for its readiness ([`Flags::READINESS`], `docs/protocol.md` §1.6)
//! gets that same time as it, as Luge answers: the floor of any server's readiness on this
//! socket path (the kernel's delivery, the read and the parse), since the echo has no guest to
//! start.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use luge_proto::{
    Flags, MAX_DATAGRAM, Message, READINESS_LEN, RESPONSE_HEADER_LEN, Request, Response,
    ResponseHeader, Status, encode_readiness,
};

use super::rpc::{self, OnRequest, Receiver};
use super::{BaselineError, BaselineStats, Counters};
use luge_server::UdpConfig;
use luge_server::net::SendBatch;

/// Largest payload of a Response.
const MAX_RESPONSE_PAYLOAD: usize = MAX_DATAGRAM - RESPONSE_HEADER_LEN;

/// Settings of the [`UdpEchoServer`]; the same meaning as in Luge's [`UdpConfig`] (which
/// converts into one: `UdpEchoConfig::from(&udp_config)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpEchoConfig {
    /// Address to bind (port 0 = any free port; see [`UdpEchoServer::local_addr`]).
    pub addr: SocketAddr,
    /// Spin on a non-blocking socket instead of sleeping in `recvmmsg` (burns a core).
    pub busy_poll: bool,
    /// Datagrams received per `recvmmsg`.
    pub batch: usize,
    /// `SO_RCVBUF` to ask for (0 = the kernel's default).
    pub recv_buffer_bytes: usize,
    /// `SO_SNDBUF` to ask for (0 = the kernel's default).
    pub send_buffer_bytes: usize,
}

impl Default for UdpEchoConfig {
    /// Luge's UDP defaults, on `127.0.0.1:0`.
    fn default() -> Self {
        let luge = UdpConfig::default();
        Self { addr: SocketAddr::from(([127, 0, 0, 1], 0)), ..Self::from(&luge) }
    }
}

impl From<&UdpConfig> for UdpEchoConfig {
    /// The same address, poll mode, batch and socket buffers as Luge's front end.
    fn from(c: &UdpConfig) -> Self {
        Self {
            addr: c.addr,
            busy_poll: c.busy_poll,
            batch: c.batch,
            recv_buffer_bytes: c.recv_buffer_bytes,
            send_buffer_bytes: c.send_buffer_bytes,
        }
    }
}

/// Answers every Request with its own payload.
struct EchoHandler;

impl OnRequest for EchoHandler {
    fn request(
        &mut self,
        peer: SocketAddr,
        request: &Request<'_>,
        received: Instant,
        out: &mut SendBatch,
    ) {
        let queueing_ns = luge_proto::nanos(received.elapsed());
        let asked = request.header.flags.contains(Flags::READINESS);
        let room = MAX_RESPONSE_PAYLOAD - if asked { READINESS_LEN } else { 0 };
        let (status, payload): (_, &[u8]) = if request.payload.len() <= room {
            (Status::Ok, request.payload)
        } else {
            (Status::OutputTooLarge, b"the payload does not fit a Response")
        };
        // As Luge's answer: the readiness of what ran (not of a refusal) before the body.
        let joined;
        let (flags, payload) = if asked && status == Status::Ok {
            let mut field = Vec::with_capacity(READINESS_LEN + payload.len());
            encode_readiness(queueing_ns, &mut field);
            field.extend_from_slice(payload);
            joined = field;
            (Flags::NONE.with(Flags::READINESS), joined.as_slice())
        } else {
            (Flags::NONE, payload)
        };
        let header = ResponseHeader {
            request_id: request.header.request_id,
            flags,
            status,
            execution_ns: 0,
            queueing_ns,
        };
        if Message::Response(Response { header, payload }).encode(out.push(peer)).is_err() {
            out.pop();
        }
    }
}

/// A running UDP echo baseline. Dropping it stops the receive thread.
#[derive(Debug)]
pub struct UdpEchoServer {
    receiver: Receiver,
    counters: Arc<Counters>,
}

impl UdpEchoServer {
    /// Binds the socket and starts the receive thread (`luge-echo-recv`).
    pub fn start(config: UdpEchoConfig) -> Result<Self, BaselineError> {
        let socket = rpc::bind(
            config.addr,
            config.busy_poll,
            config.recv_buffer_bytes,
            config.send_buffer_bytes,
        )?;
        let counters = Arc::new(Counters::default());
        let receiver = Receiver::start(
            "luge-echo-recv",
            socket,
            config.busy_poll,
            config.batch,
            Arc::clone(&counters),
            EchoHandler,
        )?;
        tracing::info!(addr = %receiver.local_addr(), busy_poll = config.busy_poll, "UDP echo baseline listening");
        Ok(Self { receiver, counters })
    }

    /// The bound address (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.receiver.local_addr()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BaselineStats {
        self.counters.snapshot()
    }

    /// Stops the receive thread and waits for it (every reply is sent before the thread reads
    /// again, so nothing is left in flight).
    pub fn shutdown(mut self) {
        self.receiver.stop();
    }
}
