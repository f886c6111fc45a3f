//! Reading a socket: `recvmmsg` a batch, decode each datagram, answer what the front end can
//! answer itself (within the reply budgets, no larger than the datagram; queued and sent with
//! one `sendmmsg` at the end of the batch), and hand requests to the gate shared with HTTP.
//! The receive thread runs [`Receiver::run`]; an inline worker reading the socket itself
//! (`ingress`) calls [`Receiver::poll`].

use luge_proto::RequestHeader;
use luge_runtime::{Failure, Rejection};

use std::time::SystemTime;

use super::sys::{Local, RecvBatch, SendBatch};
use super::*;
use crate::arrival::arrival;

/// A reader's state: its buffers and the replies it queued.
pub(super) struct Receiver {
    shared: Arc<Shared>,
    busy_poll: bool,
    batch: RecvBatch,
    out: SendBatch,
}

impl Receiver {
    pub(super) fn new(shared: Arc<Shared>, config: &UdpConfig) -> Self {
        Self {
            shared,
            busy_poll: config.busy_poll,
            batch: RecvBatch::new(config.batch, MAX_DATAGRAM + 1),
            out: SendBatch::new(),
        }
    }

    /// The receive thread: reads while [`Standby::should_read`](super::ingress::Standby), rests
    /// (parked) while a worker reads the socket itself, until the front end stops.
    pub(super) fn run(mut self) {
        let fd = self.shared.fd();
        let flags = if self.busy_poll { libc::MSG_DONTWAIT } else { libc::MSG_WAITFORONE };
        // Refusals the runtime gives on this thread go out with the batch's other replies.
        super::ingress::install(&self.shared);
        while !self.shared.stop.load(Ordering::Acquire) {
            let standby = &self.shared.standby;
            if !standby.should_read() {
                std::thread::park_timeout(READ_TIMEOUT);
                continue;
            }
            if standby.worker_reads() && !self.busy_poll {
                // Wait on the socket *and* the call-off, so that a worker reading again stops
                // this thread at once rather than racing it for the next datagram.
                let (socket, off) = sys::wait_readable(fd, standby.off_fd(), READ_TIMEOUT);
                if off {
                    sys::drain_event(standby.off_fd());
                }
                if !socket || !standby.should_read() {
                    continue;
                }
            }
            let flags = if standby.worker_reads() { libc::MSG_DONTWAIT } else { flags };
            match self.batch.recv(fd, flags) {
                Ok(n) => {
                    if self.shared.stop.load(Ordering::Acquire) {
                        break;
                    }
                    self.handle(n);
                    super::ingress::flush(false);
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        if self.busy_poll {
                            std::hint::spin_loop();
                        }
                    }
                    io::ErrorKind::Interrupted => {}
                    _ => {
                        // E.g. ENOMEM or an ICMP error surfacing on the socket: never spin hot
                        // on a persistent error.
                        log_limited!(
                            LogKind::UdpReceive,
                            tracing::Level::WARN,
                            "udp: recvmmsg failed: {e}"
                        );
                        std::thread::sleep(Duration::from_millis(1));
                    }
                },
            }
        }
        super::ingress::flush(true);
    }

    /// One non-blocking read on the worker's thread (`ingress`): handles what was waiting;
    /// how many datagrams it read.
    pub(super) fn poll(&mut self) -> usize {
        match self.batch.recv(self.shared.fd(), libc::MSG_DONTWAIT) {
            Ok(n) => {
                self.shared.counters.worker_datagrams.fetch_add(n as u64, Ordering::Relaxed);
                self.handle(n);
                n
            }
            Err(e) => {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) {
                    log_limited!(
                        LogKind::UdpReceive,
                        tracing::Level::WARN,
                        "udp: recvmmsg failed: {e}"
                    );
                }
                0
            }
        }
    }

    /// Handles the `n` datagrams of the batch just read, then sends the replies it queued.
    fn handle(&mut self, n: usize) {
        let received = Instant::now();
        let wall = SystemTime::now();
        for i in 0..n {
            // A request's time in the node starts when the kernel received it: a datagram that
            // waited in the socket buffer has spent part of its deadline already.
            let (stamp, local) = self.batch.received_with(i);
            let arrived = arrival(received, wall, stamp);
            self.datagram(i, (received, arrived), local);
        }
        if !self.out.is_empty() {
            let failed = self.out.flush(self.shared.fd(), libc::MSG_DONTWAIT);
            self.shared.counters.send_errors.fetch_add(failed as u64, Ordering::Relaxed);
        }
    }

    /// Handles datagram `i` of the current batch, read at `received`, which the kernel
    /// received at `arrived`, sent to `local` (when the socket learns it).
    fn datagram(
        &mut self,
        i: usize,
        (received, arrived): (Instant, Instant),
        local: Option<Local>,
    ) {
        let shared = Arc::clone(&self.shared);
        let Some((data, peer, truncated)) = self.batch.get(i) else { return };
        bump(&shared.counters.datagrams);
        let decoded = if truncated {
            Err(DecodeError::TooLarge { len: data.len().max(MAX_DATAGRAM + 1) })
        } else {
            decode(data)
        };
        let Some(to) = peer.filter(|&p| usable(p)).map(|peer| ReplyTo { peer, local }) else {
            // Nowhere to answer: count what is wrong with it, otherwise ignore it.
            if let Err(e) = decoded {
                shared.metrics.malformed(Protocol::Rpc, e.label());
                bump(&shared.counters.malformed);
            }
            return;
        };
        let len = data.len();
        match decoded {
            Err(e) => {
                shared.metrics.malformed(Protocol::Rpc, e.label());
                bump(&shared.counters.malformed);
                // `reply_to_invalid` answers only datagrams at least as long as the reply.
                if let Some(reply) = reply_to_invalid(data, &e) {
                    if shared.budget().take(to.peer.ip(), received).is_ok() {
                        bump(&shared.counters.invalid_replies);
                        let buf = self.out.push(to);
                        if reply.message().encode(buf).is_err() {
                            self.out.pop();
                        }
                    } else {
                        bump(&shared.counters.invalid_replies_limited);
                    }
                }
            }
            Ok(Message::Ping(ping)) => {
                bump(&shared.counters.pings);
                let pong = Message::Pong(Echo { flags: Flags::NONE, ..ping });
                let buf = self.out.push(to);
                if pong.encode(buf).is_err() {
                    self.out.pop();
                }
            }
            Ok(Message::Response(_) | Message::Pong(_)) => bump(&shared.counters.stray_replies),
            Ok(Message::Request(request)) => {
                // Copy what outlives the borrow of the batch buffer.
                let header = request.header;
                let payload = request.payload.to_vec();
                self.request(&shared, to, (header, len), payload, (received, arrived));
            }
        }
    }

    /// Queues a refusal of a request of `request_len` bytes, produced by the front end itself:
    /// its status and as much of `message` as keeps the reply no larger than the request. Not
    /// sent, only counted, when even the bare 40-byte header is larger than the request, or when
    /// the reply budgets are spent.
    fn refuse(
        &mut self,
        to: ReplyTo,
        (request_id, request_len): (u64, usize),
        status: Status,
        message: &str,
        now: Instant,
    ) {
        if request_len < RESPONSE_HEADER_LEN {
            bump(&self.shared.counters.refusals_too_short);
            return;
        }
        if self.shared.budget().take(to.peer.ip(), now).is_err() {
            bump(&self.shared.counters.refusals_limited);
            return;
        }
        let mut header = ResponseHeader::new(request_id, status);
        // Nothing waited: only a refusal for load signals anything.
        header.flags = header.flags.with_load(load_of(status, Duration::ZERO, Duration::ZERO));
        let payload = truncate_utf8(message, reply_room(request_len));
        let buf = self.out.push(to);
        if Message::Response(Response { header, payload }).encode(buf).is_err() {
            self.out.pop();
        }
    }

    fn request(
        &mut self,
        shared: &Arc<Shared>,
        to: ReplyTo,
        (header, len): (RequestHeader, usize),
        payload: Vec<u8>,
        (received, arrived): (Instant, Instant),
    ) {
        let id = header.request_id;
        let peer = to.peer;
        let counters = &shared.counters;
        if header.flags.contains(Flags::RETRANSMIT) {
            bump(&counters.retransmits);
        }
        {
            let mut dedup = shared.dedup();
            match dedup.mark_in_flight(peer, id) {
                Seen::New => {}
                Seen::InFlight => {
                    bump(&counters.duplicates_dropped);
                    return;
                }
                Seen::Done(bytes) => {
                    // A replay larger than the datagram asking for it would amplify whatever a
                    // spoofed source repeats: it takes a reply token, as a refusal does (§11.1).
                    // (The budget's lock is only ever taken inside the cache's, never around it.)
                    if bytes.len() > len && shared.budget().take(peer.ip(), received).is_err() {
                        bump(&counters.replays_limited);
                        return;
                    }
                    bump(&counters.replayed);
                    self.out.push(to).extend_from_slice(bytes);
                    return;
                }
                Seen::Full => {
                    drop(dedup);
                    bump(&counters.overloaded);
                    let message = "too many requests in flight";
                    self.refuse(to, (id, len), Status::Overloaded, message, received);
                    return;
                }
            }
        }
        // Checked in HTTP's order: the function, draining, then the fields.
        let function = match shared.gate.resolve(FunctionKey::Id(header.function)) {
            Ok(function) => function,
            Err(_) => {
                shared.dedup().abandon(peer, id);
                bump(&counters.unknown_function);
                let message = format!("no function with id {}", header.function);
                self.refuse(to, (id, len), Status::UnknownFunction, &message, received);
                return;
            }
        };
        if shared.gate.is_draining() {
            // Refused here rather than by the gate, so that the refusal is within the budgets.
            shared.dedup().abandon(peer, id);
            bump(&counters.shutting_down);
            let failure = Failure::Rejected(Rejection::ShuttingDown);
            let message = failure.to_string();
            // A span when the node samples it, as for a request that runs (no context: below).
            let trace = shared.gate.traced(None);
            shared.gate.refuse_call(&function, failure, arrived, (Some(peer), Some(id)), trace);
            self.refuse(to, (id, len), Status::ShuttingDown, &message, received);
            return;
        }
        let fields = match header.fields() {
            Ok(fields) => fields,
            Err(e) => {
                shared.dedup().abandon(peer, id);
                shared.metrics.malformed(Protocol::Rpc, e.label());
                bump(&counters.bad_request);
                let message = format!("bad request: {e}");
                self.refuse(to, (id, len), Status::BadRequest, &message, received);
                return;
            }
        };
        bump(&counters.submitted);
        let deadline = fields.deadline.unwrap_or(function.relative_deadline());
        let call = Call {
            target: function,
            payload,
            deadline: fields.deadline,
            expected: fields.expected,
            client: Some(peer),
            client_id: Some(id),
            received: arrived,
            // UDP-RPC carries no trace context: a new trace when the node exports spans and samples it.
            trace: shared.gate.traced(None),
            // Read by the socket's worker (or for it): it runs there if that worker is free.
            group: shared.group,
        };
        // What the client asked to have added to the answer (stage table, readiness).
        let asked = Flags(header.flags.0 & (Flags::STAGES.0 | Flags::READINESS.0));
        let callback_shared = Arc::clone(shared);
        shared.gate.submit(call, move |outcome| {
            callback_shared.answer(to, (id, len, asked), deadline, outcome)
        });
    }
}
