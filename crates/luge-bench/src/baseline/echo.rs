//! The bare UDP echo baseline: Luge's UDP-RPC front end minus the runtime (see
//! [`super::rpc`]). Every Request is answered from the receive thread, in the batch's
//! `sendmmsg`, with status `Ok`, the request's payload, execution 0 and the time since the batch
//! was received as queueing — what Luge's front end costs with nothing behind it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use luge_proto::{
    Flags, MAX_DATAGRAM, Message, RESPONSE_HEADER_LEN, Request, Response, ResponseHeader, Status,
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
        let (status, payload): (_, &[u8]) = if request.payload.len() <= MAX_RESPONSE_PAYLOAD {
            (Status::Ok, request.payload)
        } else {
            (Status::OutputTooLarge, b"the payload does not fit a Response")
        };
        let header = ResponseHeader {
            request_id: request.header.request_id,
            flags: Flags::NONE,
            status,
            execution_ns: 0,
            queueing_ns: luge_proto::nanos(received.elapsed()),
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
