//! The receive thread: `recvmmsg` a batch, decode each datagram, answer what the front end can
//! answer itself (queued and sent with one `sendmmsg` at the end of the batch), and hand requests
//! to the gate shared with HTTP.

use super::sys::{RecvBatch, SendBatch};
use super::*;

/// The receive thread's state.
pub(super) struct Receiver {
    shared: Arc<Shared>,
    busy_poll: bool,
    batch: RecvBatch,
    out: SendBatch,
    invalid_budget: u32,
    invalid_left: u32,
    invalid_window: Instant,
}

impl Receiver {
    pub(super) fn new(shared: Arc<Shared>, config: &UdpConfig) -> Self {
        Self {
            shared,
            busy_poll: config.busy_poll,
            batch: RecvBatch::new(config.batch, MAX_DATAGRAM + 1),
            out: SendBatch::new(),
            invalid_budget: config.invalid_replies_per_sec,
            invalid_left: config.invalid_replies_per_sec,
            invalid_window: Instant::now(),
        }
    }

    pub(super) fn run(mut self) {
        let fd = self.shared.fd();
        let flags = if self.busy_poll { libc::MSG_DONTWAIT } else { libc::MSG_WAITFORONE };
        while !self.shared.stop.load(Ordering::Acquire) {
            match self.batch.recv(fd, flags) {
                Ok(n) => {
                    if self.shared.stop.load(Ordering::Acquire) {
                        break;
                    }
                    let received = Instant::now();
                    for i in 0..n {
                        self.datagram(i, received);
                    }
                    if !self.out.is_empty() {
                        let failed = self.out.flush(fd, libc::MSG_DONTWAIT);
                        self.shared
                            .counters
                            .send_errors
                            .fetch_add(failed as u64, Ordering::Relaxed);
                    }
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
                        tracing::warn!("udp: recvmmsg failed: {e}");
                        std::thread::sleep(Duration::from_millis(1));
                    }
                },
            }
        }
    }

    /// Handles datagram `i` of the current batch.
    fn datagram(&mut self, i: usize, received: Instant) {
        let shared = Arc::clone(&self.shared);
        let Some((data, peer, truncated)) = self.batch.get(i) else { return };
        bump(&shared.counters.datagrams);
        let decoded = if truncated {
            Err(DecodeError::TooLarge { len: data.len().max(MAX_DATAGRAM + 1) })
        } else {
            decode(data)
        };
        let Some(peer) = peer.filter(|&p| usable(p)) else {
            // Nowhere to answer: count what is wrong with it, otherwise ignore it.
            if let Err(e) = decoded {
                shared.metrics.malformed(Protocol::Rpc, e.label());
                bump(&shared.counters.malformed);
            }
            return;
        };
        match decoded {
            Err(e) => {
                shared.metrics.malformed(Protocol::Rpc, e.label());
                bump(&shared.counters.malformed);
                if let Some(reply) = reply_to_invalid(data, &e) {
                    if self.take_invalid_budget(received) {
                        bump(&shared.counters.invalid_replies);
                        let buf = self.out.push(peer);
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
                let buf = self.out.push(peer);
                if pong.encode(buf).is_err() {
                    self.out.pop();
                }
            }
            Ok(Message::Response(_) | Message::Pong(_)) => bump(&shared.counters.stray_replies),
            Ok(Message::Request(request)) => {
                // Copy what outlives the borrow of the batch buffer.
                let header = request.header;
                let payload = request.payload.to_vec();
                self.request(&shared, peer, header, payload, received);
            }
        }
    }

    /// Consumes one unit of the per-second budget for replies to invalid datagrams.
    fn take_invalid_budget(&mut self, now: Instant) -> bool {
        if now.duration_since(self.invalid_window) >= Duration::from_secs(1) {
            self.invalid_window = now;
            self.invalid_left = self.invalid_budget;
        }
        if self.invalid_left == 0 {
            return false;
        }
        self.invalid_left -= 1;
        true
    }

    /// Queues a payload-less-or-short Response produced by the front end itself.
    fn refuse(&mut self, peer: SocketAddr, request_id: u64, status: Status, message: &str) {
        let header = ResponseHeader::new(request_id, status);
        let buf = self.out.push(peer);
        let msg = Message::Response(Response { header, payload: message.as_bytes() });
        if msg.encode(buf).is_err() {
            self.out.pop();
        }
    }

    fn request(
        &mut self,
        shared: &Arc<Shared>,
        peer: SocketAddr,
        header: luge_proto::RequestHeader,
        payload: Vec<u8>,
        received: Instant,
    ) {
        let id = header.request_id;
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
                    bump(&counters.replayed);
                    self.out.push(peer).extend_from_slice(bytes);
                    return;
                }
                Seen::Full => {
                    drop(dedup);
                    bump(&counters.overloaded);
                    self.refuse(peer, id, Status::Overloaded, "too many requests in flight");
                    return;
                }
            }
        }
        let function = match shared.gate.resolve(FunctionKey::Id(header.function)) {
            Ok(function) => function,
            Err(_) => {
                shared.dedup().abandon(peer, id);
                bump(&counters.unknown_function);
                let message = format!("no function with id {}", header.function);
                self.refuse(peer, id, Status::UnknownFunction, &message);
                return;
            }
        };
        if shared.gate.is_draining() {
            bump(&counters.shutting_down);
        } else {
            bump(&counters.submitted);
        }
        let micros = |us: u32| (us > 0).then(|| Duration::from_micros(u64::from(us)));
        let call = Call {
            function,
            payload,
            deadline: micros(header.deadline_us),
            expected: micros(header.expected_us),
            client: Some(peer),
            client_id: Some(id),
            received,
        };
        let callback_shared = Arc::clone(shared);
        shared.gate.submit(call, move |outcome| callback_shared.answer(peer, id, outcome));
    }
}
