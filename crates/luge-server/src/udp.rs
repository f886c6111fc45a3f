//! The UDP-RPC front end (`docs/protocol.md`): a socket per inline worker (or one), read by
//! that worker when it is idle and by a receive thread otherwise; answers sent straight from the
//! thread that produced them. This file holds the server (configuration, start, stats, shutdown)
//! and the rendering of an outcome as a Response; `receiver` the reading of a socket, `ingress`
//! who reads it when, `sys` the batched socket calls.
//!
//! # Threads and the send path
//!
//! - **Sockets**: in the inline layout (the default with one worker) one per worker, bound with
//!   `SO_REUSEPORT` when there are several, so that the kernel spreads flows over them; with
//!   dispatcher threads one socket.
//! - **The worker reads when idle** (run-to-completion, `ingress`): an inline worker with nothing
//!   to run reads its socket without blocking and waits on it (and on its own wake-up eventfd);
//!   what it reads is submitted to its own dispatcher and run and answered on that thread, so a
//!   request that finds its worker idle crosses no thread ([`UdpStats::worker_datagrams`]).
//! - **Receive thread** (`luge-udp-recv`, one per socket): reads while the worker is busy with
//!   a request not known to be short (or with no worker reading: the threads layout,
//!   or a second front end on the same runtime), and rests otherwise. It `recvmmsg`s up to
//!   [`UdpConfig::batch`] datagrams into buffers of `MAX_DATAGRAM + 1` bytes, blocking
//!   (`MSG_WAITFORONE`) or, with [`UdpConfig::busy_poll`], spinning on a non-blocking socket.
//! - Either reader decodes each datagram, consults the duplicate cache and submits requests to
//!   the runtime. Everything it can answer itself — Pongs, replies to invalid datagrams,
//!   `UnknownFunction`, `Overloaded` (cache full), `ShuttingDown`, replays from the cache — is
//!   queued during the batch and sent with one `sendmmsg` at its end.
//! - **Responses of executed requests** are encoded and sent by the runtime's completion
//!   callback itself, on the completing thread: an inline worker reading its own socket queues
//!   them in its outbox and sends them in batches (`ingress`); any other thread sends each with
//!   one non-blocking `sendto` on the shared socket (`sendto` on one UDP socket from several
//!   threads is safe and atomic per datagram).
//!
//! Why not a response queue drained by a sender thread (or by the receive thread)? On a
//! 2-core edge box the runtime's worker, its dispatcher and this receive thread already share
//! two cores, so moving the send to another thread creates no capacity, only a hand-off. A
//! micro-benchmark on this box (40-byte datagrams over loopback, one every 30 µs, a receiver
//! thread blocked in `recv`, other builds running) measured, at the median:
//!
//! | path | cost to the completing thread | completion → receipt by the client |
//! |---|---:|---:|
//! | `sendto` from the completing thread | 8–11 µs | 8–15 µs |
//! | bounded channel → parked sender thread → `sendto` | 3 µs | 19–28 µs (p99 in ms when cores are busy) |
//!
//! The hand-off saves the worker ~6 µs per response but costs more CPU in total (the same
//! `sendto` plus a futex wake and a context switch) and doubles the delivery latency; when both
//! cores are busy the sender waits for one. Draining from the receive thread between batches
//! does not work in blocking mode: it sleeps in `recvmmsg` and would hold responses until the
//! next datagram. Batching with `sendmmsg` pays off where many replies are ready at once — the
//! receive thread's situation (a batch of datagrams) but not a worker's (one completion at a
//! time). So each completion sends its own response — except on an inline worker that reads
//! its own socket, whose answers to a batch it read are ready together (`ingress`).
//!
//! The send is `MSG_DONTWAIT`: a worker never blocks on a full socket buffer. A response the
//! kernel refuses is counted ([`UdpStats::send_errors`]) and still cached, so the client's
//! retransmission is answered from the cache.
//!
//! # Replies nobody asked the runtime for
//!
//! A UDP source is unverified: a datagram may carry a victim's address. So every reply the
//! front end produces on its own — to an invalid datagram, and the refusals it gives before a
//! request reaches the runtime (`UnknownFunction`, `BadRequest`, `Overloaded` when the
//! duplicate cache is full, `ShuttingDown`) — must not let a spoofer aim traffic at someone:
//!
//! - it takes a token from its source's bucket and from a global one ([`limit`]); without
//!   tokens it is not sent, only counted ([`UdpStats::invalid_replies_limited`],
//!   [`UdpStats::refusals_limited`]);
//! - it is no larger than the datagram that caused it: the message is cut to fit
//!   ([`reply_room`]), and a datagram shorter than the 40-byte reply gets none (counted:
//!   [`UdpStats::refusals_too_short`]). So a Request with a payload under 8 bytes that the front
//!   end refuses goes unanswered and its client times out: the price of never answering a
//!   spoofer with more bytes than it sent.
//!
//! Refusals the runtime produces (`DeadlineInfeasible`, `Overloaded`, `TooLarge`) have their
//! message cut to the request's size the same way (so at most the 40-byte header, 1.25× a
//! 32-byte request) but are not rate-limited: the request named a registered function, the
//! runtime's admission ran, and a load generator must see every refusal it caused. A spoofer
//! naming a registered function gets no more from a refusal than from the function's own answer.
//!
//! # Duplicate suppression
//!
//! A [`DedupCache`] behind a `Mutex`, locked briefly by the receive thread (`mark_in_flight`,
//! replay) and by completion callbacks (`complete` / `abandon`). The lock is never held while
//! calling into the runtime: `submit_to` may run the callback synchronously on the receive
//! thread when it refuses a request at once. Refusals (1xx/2xx statuses) are `abandon`ed, not
//! cached (§6).
//!
//! # Shutdown
//!
//! [`UdpServer::shutdown`] sets *draining*: new requests are answered `ShuttingDown` (retransmits
//! of running ones are still dropped, finished ones still replayed), and it waits until every
//! request in flight has been answered or the grace passes. Then it stops the receive thread with
//! a self-addressed wake-up datagram (the socket also has a read timeout as a fallback).
//!
//! Above ~600 lines on purpose: a quarter of it is documentation (the send path, the replies it
//! budgets, duplicate suppression, shutdown). The counters every one of those paths reports are
//! in `stats`.

mod ingress;
mod limit;
mod receiver;
mod stats;
pub(crate) mod sys;

pub(crate) use self::stats::UdpCounters;
pub use self::stats::UdpStats;
use self::stats::bump;

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use luge_proto::nanos;
use luge_proto::{
    DecodeError, DedupCache, Echo, Flags, MAX_DATAGRAM, Message, RESPONSE_HEADER_LEN, Response,
    ResponseHeader, Seen, Status, StatusClass, decode, encode_readiness, encode_stage_table,
    reply_to_invalid,
};
use luge_runtime::{Failure, Outcome, Rejection, Runtime};

use crate::log_limit::{LogKind, log_limited};
use crate::metrics::{Metrics, Protocol};
use crate::request_log::RequestLog;
use crate::status::{load_of, outcome_message, rpc_status, stage_times};
use crate::submit::{Call, FunctionKey, Gate};
use crate::trace::Tracing;

use self::ingress::{Standby, WorkerIngress};
use self::limit::ReplyBudget;
use self::receiver::Receiver;
use self::sys::ReplyTo;

/// How long the blocking receive waits before re-checking the stop flag, should the wake-up
/// datagram be lost.
const READ_TIMEOUT: Duration = Duration::from_millis(100);
/// Largest payload of a Response.
const MAX_RESPONSE_PAYLOAD: usize = MAX_DATAGRAM - RESPONSE_HEADER_LEN;

/// Settings of the UDP-RPC front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to bind (port 0 = any free port; see [`UdpServer::local_addr`]).
    pub addr: SocketAddr,
    /// Spin on a non-blocking socket instead of sleeping in `recvmmsg`: lowest latency, burns a
    /// core. Not for machines whose cores the workers need.
    pub busy_poll: bool,
    /// Datagrams received per `recvmmsg` (each gets a `MAX_DATAGRAM + 1`-byte buffer).
    pub batch: usize,
    /// Entry bound of the duplicate cache; also the bound on requests in flight (§6).
    pub dedup_entries: usize,
    /// Byte bound of the cached responses.
    pub dedup_bytes: usize,
    /// `SO_RCVBUF` to ask for (0 = the kernel's default; the kernel caps it at `rmem_max`).
    pub recv_buffer_bytes: usize,
    /// `SO_SNDBUF` to ask for (0 = the kernel's default; capped at `wmem_max`).
    pub send_buffer_bytes: usize,
    /// Replies the front end produces on its own (to invalid datagrams, refusals before the
    /// runtime: unknown function, bad field, cache full, draining, and replays larger than their
    /// retransmit) allowed per second over
    /// all sources, in bursts of as many; the excess is counted and dropped (§7, §11.1).
    pub invalid_replies_per_sec: u32,
    /// The same replies allowed per second to one source (an IPv4 address or an IPv6 /64), in
    /// bursts of as many: a spoofed source is answered at most this often.
    pub refusals_per_source_per_sec: u32,
    /// Which answered requests get a line in the request log (`luge::request`).
    pub request_log: RequestLog,
    /// Where request spans go (`None`: no export). UDP-RPC carries no trace context: with
    /// export on, a request starts a new trace when it is sampled.
    pub tracing: Option<Tracing>,
}

impl Default for UdpConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 8081)),
            busy_poll: false,
            batch: 32,
            dedup_entries: 65_536,
            dedup_bytes: 64 << 20,
            recv_buffer_bytes: 4 << 20,
            send_buffer_bytes: 4 << 20,
            invalid_replies_per_sec: 1_000,
            refusals_per_source_per_sec: 50,
            request_log: RequestLog::Off,
            tracing: None,
        }
    }
}

/// Why the UDP front end could not start.
#[derive(Debug, thiserror::Error)]
pub enum UdpError {
    /// The address could not be bound.
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Configuring the socket failed.
    #[error("cannot configure the UDP socket: {0}")]
    Socket(#[source] io::Error),
    /// The receive thread could not be spawned.
    #[error("cannot spawn the UDP receive thread: {0}")]
    Thread(#[source] io::Error),
}

/// State shared by the receive thread, the completion callbacks and the handle.
struct Shared {
    socket: UdpSocket,
    metrics: Arc<Metrics>,
    /// The submission step shared with HTTP: draining, requests in flight, accounting.
    gate: Arc<Gate>,
    dedup: Mutex<DedupCache>,
    /// The receive thread exits.
    stop: AtomicBool,
    /// Also registered with `metrics`, which renders them in /metrics.
    counters: Arc<UdpCounters>,
    /// Tokens for the replies the front end produces on its own, shared by every reader of
    /// every socket of the front end.
    budget: Arc<Mutex<ReplyBudget>>,
    /// The worker group whose inline worker reads this socket when idle (`ingress`), if any.
    group: Option<usize>,
    /// Whether the receive thread reads the socket now: always without a worker reading it,
    /// else only while that worker is busy (`ingress`).
    standby: Standby,
}

impl Shared {
    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn dedup(&self) -> std::sync::MutexGuard<'_, DedupCache> {
        self.dedup.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn budget(&self) -> std::sync::MutexGuard<'_, ReplyBudget> {
        self.budget.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Renders the answer to a submitted request of `request_len` bytes: encode, send, cache.
    /// Runs on a runtime thread (or on the receive thread for an immediate refusal); never
    /// blocks. The gate has counted and recorded it. A refusal's message is cut so that the
    /// answer is no larger than the request ([`reply_room`]).
    /// `deadline` is the relative deadline the request was held to, for the load signal.
    /// `want_stages`: the request asked for a chain's stage table ([`Flags::STAGES`]); a chain's
    /// answer then carries one, unless it is a refusal (nothing ran, and a refusal must not be
    /// larger than its cause).
    fn answer(
        &self,
        to: ReplyTo,
        request: (u64, usize, Flags),
        deadline: Duration,
        outcome: Outcome,
    ) {
        let (request_id, request_len, asked) = request;
        let mut status = rpc_status(&outcome.result);
        let refusal = matches!(status.class(), StatusClass::Client | StatusClass::Refused);
        // What goes before the body, as asked (`docs/protocol.md` §1.5, §1.6): the readiness of
        // a request that ran, then a chain's stage table.
        let mut table = Vec::new();
        let mut added = Flags::NONE;
        if asked.contains(Flags::READINESS) && !refusal && !outcome.timing.executed.is_zero() {
            encode_readiness(nanos(outcome.timing.readiness()), &mut table);
            added = added.with(Flags::READINESS);
        }
        if asked.contains(Flags::STAGES) && !refusal && !outcome.stages.is_empty() {
            let times: Vec<_> = outcome.stages.iter().map(stage_times).collect();
            // Unreachable: a chain has at most 16 stages, the table's limit; an error writes
            // nothing, and the answer goes without a table.
            if encode_stage_table(&times, &mut table).is_ok() {
                added = added.with(Flags::STAGES);
            }
        }
        let room = MAX_RESPONSE_PAYLOAD - table.len();
        let message;
        let body: &[u8] = match &outcome.result {
            Ok(stdout) if stdout.len() <= room => stdout,
            Ok(stdout) => {
                status = Status::OutputTooLarge;
                message = format!(
                    "output of {} bytes exceeds the {room}-byte datagram payload",
                    stdout.len()
                );
                message.as_bytes()
            }
            Err(failure) => {
                message = outcome_message(&outcome.stages, failure);
                let room = if refusal { reply_room(request_len) } else { room };
                truncate_utf8(&message, room)
            }
        };
        let queueing = outcome.timing.queueing();
        let mut flags = Flags::NONE.with_load(load_of(status, queueing, deadline));
        let joined;
        let payload: &[u8] = if table.is_empty() {
            body
        } else {
            flags = flags.with(added);
            table.extend_from_slice(body);
            joined = table;
            &joined
        };
        let header = ResponseHeader {
            request_id,
            flags,
            status,
            execution_ns: nanos(outcome.timing.executed),
            queueing_ns: nanos(queueing),
        };
        let mut bytes = Vec::with_capacity(RESPONSE_HEADER_LEN + payload.len());
        let encoded = Message::Response(Response { header, payload }).encode(&mut bytes).is_ok();
        // A refusal is forgotten *before* it is sent, so that a client retrying at once with the
        // same id (allowed: nothing ran) is evaluated again, not dropped as "in flight". An
        // executed request is cached *after* its response is sent (the cache takes the bytes
        // and marks them REPLAYED); a retransmit arriving in between is dropped, harmlessly:
        // the original response is already on its way. So is a refusal given after the request
        // waited in the queue (shed: its deadline became unreachable there): its client may have
        // retransmitted meanwhile, and that copy must get the refusal, not run after it.
        let shed = matches!(outcome.result, Err(Failure::Rejected(Rejection::Shed)));
        let cache = encoded && (!refusal || shed);
        let peer = to.peer;
        if !cache {
            self.dedup().abandon(peer, request_id);
        }
        if encoded && ingress::queue(self, &bytes, to) {
            // The worker that read this socket sends it with the others it answers (`ingress`).
        } else if encoded {
            if let Err(e) = sys::send_to(self.fd(), &bytes, to, libc::MSG_DONTWAIT) {
                log_limited!(
                    LogKind::UdpSend,
                    tracing::Level::DEBUG,
                    "udp: cannot send the response to {peer}: {e}"
                );
                bump(&self.counters.send_errors);
            }
        } else {
            // Unreachable: the payload was bounded above and the id is the request's.
            tracing::error!("udp: cannot encode the response to request {request_id}");
        }
        if cache {
            self.dedup().complete(peer, request_id, bytes);
        }
    }
}

/// How many payload bytes a reply the server gives without running anything — a refusal, an
/// answer to an invalid datagram — may carry in answer to a datagram of `cause_len` bytes, so
/// that the reply is no larger than its cause (0 when even the bare header is larger).
pub(crate) fn reply_room(cause_len: usize) -> usize {
    cause_len.saturating_sub(RESPONSE_HEADER_LEN).min(MAX_RESPONSE_PAYLOAD)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate_utf8(s: &str, max: usize) -> &[u8] {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// A running UDP-RPC front end. Dropping it stops the receive threads without waiting for the
/// requests in flight (their responses are still sent when they finish).
pub struct UdpServer {
    /// One per socket: a single socket, or one per inline worker (`SO_REUSEPORT`).
    sockets: Vec<Arc<Shared>>,
    runtime: Arc<Runtime>,
    local_addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for UdpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpServer")
            .field("local_addr", &self.local_addr)
            .field("sockets", &self.sockets.len())
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

/// Binds a UDP socket to `addr`, with `SO_REUSEPORT` when `share` (so that several sockets
/// split the port's datagrams, each flow to one of them), and applies `config`'s buffers.
fn bind(addr: SocketAddr, share: bool, config: &UdpConfig) -> Result<UdpSocket, UdpError> {
    use socket2::{Domain, Protocol as IpProtocol, Socket, Type};
    let bind_error = |source| UdpError::Bind { addr, source };
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(IpProtocol::UDP))
        .map_err(UdpError::Socket)?;
    if share {
        sys::set_int_option(socket.as_raw_fd(), libc::SO_REUSEPORT, 1).map_err(UdpError::Socket)?;
    }
    socket.bind(&addr.into()).map_err(bind_error)?;
    let socket: UdpSocket = socket.into();
    let fd = socket.as_raw_fd();
    for (opt, bytes) in
        [(libc::SO_RCVBUF, config.recv_buffer_bytes), (libc::SO_SNDBUF, config.send_buffer_bytes)]
    {
        if bytes > 0 {
            let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
            sys::set_int_option(fd, opt, value).map_err(UdpError::Socket)?;
        }
    }
    // Each datagram's kernel receive time: its deadline counts from there, not from when a
    // thread got to it (`udp/receiver.rs`). Without it, from the latter.
    if let Err(e) = sys::enable_receive_timestamps(fd) {
        tracing::warn!(
            "udp: no kernel receive timestamps ({e}): time in the socket buffer is not counted"
        );
    }
    // Bound to every address: each reply leaves from the address its request was sent to
    // (`sys::Local`), which the kernel's route to the client may not pick.
    if addr.ip().is_unspecified()
        && let Err(e) = sys::enable_local_addresses(fd, addr.is_ipv6())
    {
        tracing::warn!(
            "udp: cannot learn each datagram's local address ({e}): replies leave from the \
             address the kernel picks, which a client that sent to another one drops"
        );
    }
    if config.busy_poll {
        socket.set_nonblocking(true).map_err(UdpError::Socket)?;
    } else {
        socket.set_read_timeout(Some(READ_TIMEOUT)).map_err(UdpError::Socket)?;
    }
    Ok(socket)
}

impl UdpServer {
    /// Binds the socket(s), lets each inline worker read one (`ingress`), and starts the
    /// receive thread(s).
    pub fn start(
        runtime: Arc<Runtime>,
        metrics: Arc<Metrics>,
        config: UdpConfig,
    ) -> Result<Self, UdpError> {
        // One socket per inline worker, so each reads its own; one socket otherwise.
        let count = runtime.ingress_groups().max(1);
        let share = count > 1;
        let first = bind(config.addr, share, &config)?;
        let local_addr = first.local_addr().map_err(UdpError::Socket)?;
        let mut bound = vec![first];
        for _ in 1..count {
            bound.push(bind(local_addr, share, &config)?);
        }
        let gate = Arc::new(Gate::new(
            Arc::clone(&runtime),
            Arc::clone(&metrics),
            Protocol::Rpc,
            config.request_log,
            config.tracing.clone(),
        ));
        let counters = Arc::new(UdpCounters::default());
        metrics.register_udp(Arc::clone(&counters));
        let budget = Arc::new(Mutex::new(ReplyBudget::new(
            config.refusals_per_source_per_sec,
            config.invalid_replies_per_sec,
        )));
        // A flow always reaches the same socket, so each socket's cache sees all of a
        // client's retransmits; together they hold what one would.
        let entries = config.dedup_entries.div_ceil(count).max(1);
        let bytes = config.dedup_bytes.div_ceil(count).max(1);
        let ingress = runtime.ingress_groups() > 0;
        let mut sockets = Vec::with_capacity(count);
        for (i, socket) in bound.into_iter().enumerate() {
            sockets.push(Arc::new(Shared {
                socket,
                metrics: Arc::clone(&metrics),
                gate: Arc::clone(&gate),
                dedup: Mutex::new(DedupCache::new(entries, bytes)),
                stop: AtomicBool::new(false),
                counters: Arc::clone(&counters),
                budget: Arc::clone(&budget),
                group: ingress.then_some(i),
                standby: Standby::new().map_err(UdpError::Socket)?,
            }));
        }
        let mut server = Self { sockets, runtime, local_addr, threads: Vec::new() };
        for (i, shared) in server.sockets.iter().enumerate() {
            if let Some(group) = shared.group {
                // Before the receive thread starts, so that it starts resting. Refused (another
                // front end's socket is attached already): the receive thread reads alone.
                shared.standby.hand_to_worker();
                let worker = WorkerIngress::new(
                    Arc::clone(shared),
                    Receiver::new(Arc::clone(shared), &config),
                );
                if server.runtime.attach_ingress(group, Arc::new(worker)).is_err() {
                    shared.standby.take_back();
                }
            }
            let receiver = Receiver::new(Arc::clone(shared), &config);
            let name =
                if count > 1 { format!("luge-udp-recv-{i}") } else { "luge-udp-recv".into() };
            // A receive thread that panics leaves UDP-RPC silent: the runtime reports it.
            let watch = server.runtime.watch_thread(name.clone());
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    let _watch = watch;
                    receiver.run();
                })
                .map_err(UdpError::Thread)?;
            shared.standby.bind(thread.thread().clone());
            server.threads.push(thread);
        }
        Ok(server)
    }

    /// The bound address (with the actual port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The front end's state shared by its sockets (gate, counters).
    fn common(&self) -> &Shared {
        &self.sockets[0]
    }

    /// Requests submitted to the runtime and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.common().gate.in_flight()
    }

    /// How many of the node's workers read a socket of this front end themselves when idle
    /// (run-to-completion; 0 with dispatcher threads, or when another front end's socket is
    /// attached to them).
    pub fn worker_readers(&self) -> usize {
        self.sockets.iter().filter(|s| s.standby.worker_reads()).count()
    }

    /// A snapshot of the front end's counters.
    pub fn stats(&self) -> UdpStats {
        self.common().counters.snapshot()
    }

    /// Starts draining without stopping: from now on new requests are answered `ShuttingDown`
    /// (retransmits of requests in flight are still absorbed, finished ones still replayed).
    /// [`shutdown`](Self::shutdown) does this first; call it earlier to drain several front ends
    /// at once. Irreversible.
    pub fn drain(&self) {
        self.common().gate.drain();
    }

    /// Whether [`drain`](Self::drain) (or `shutdown`) has been called.
    pub fn is_draining(&self) -> bool {
        self.common().gate.is_draining()
    }

    /// Drains and stops: new requests are answered `ShuttingDown` while it waits, up to `grace`,
    /// for every request in flight to be answered; then the receive threads are stopped (and
    /// the workers stop reading). Returns the number of requests still unanswered when it gave
    /// up (0 = drained). Their responses are still sent if the runtime answers them later.
    pub fn shutdown(mut self, grace: Duration) -> usize {
        self.drain();
        let start = Instant::now();
        let mut left = self.in_flight();
        while left > 0 && start.elapsed() < grace {
            std::thread::sleep(Duration::from_micros(200));
            left = self.in_flight();
        }
        self.stop_threads();
        left
    }

    /// Stops reading every socket (the workers too) and joins the receive threads. Idempotent;
    /// also right after a failed `start` (a worker may already read a socket then).
    fn stop_threads(&mut self) {
        for shared in &self.sockets {
            if shared.stop.swap(true, Ordering::SeqCst) {
                continue;
            }
            // Stopped first: the worker, woken by the detach, then lets its outbox for this
            // socket go (`ingress`).
            if let Some(group) = shared.group
                && shared.standby.worker_reads()
            {
                self.runtime.detach_ingress(group);
            }
            shared.standby.stop();
        }
        if self.threads.is_empty() {
            return;
        }
        // With several sockets a wake-up datagram reaches one of them; the read timeout ends
        // the others' waits.
        wake(self.local_addr);
        for thread in self.threads.drain(..) {
            if thread.join().is_err() {
                tracing::error!("a UDP receive thread panicked");
            }
        }
    }
}

impl Drop for UdpServer {
    fn drop(&mut self) {
        self.stop_threads();
    }
}

/// Sends an empty datagram to the server so that a blocking `recvmmsg` returns.
pub fn wake(server: SocketAddr) {
    let target = match server.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), server.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), server.port())
        }
        _ => server,
    };
    let bind: SocketAddr = match target {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    // Best effort: the read timeout ends the wait anyway.
    if let Ok(socket) = UdpSocket::bind(bind) {
        let _ = socket.send_to(&[], target);
    }
}

/// Whether replies may be sent to `peer` (§7 rule 3). An IPv4 address mapped into IPv6 (a
/// dual-stack socket's view of an IPv4 source) is judged as the IPv4 address: `::ffff:0.0.0.0`
/// is unspecified too, and Linux would deliver a reply to it on this host.
pub fn usable(peer: SocketAddr) -> bool {
    peer.port() != 0 && !peer.ip().to_canonical().is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_no_larger_than_their_cause() {
        assert_eq!(reply_room(0), 0);
        assert_eq!(reply_room(RESPONSE_HEADER_LEN), 0);
        assert_eq!(reply_room(RESPONSE_HEADER_LEN + 5), 5);
        assert_eq!(reply_room(usize::MAX), MAX_RESPONSE_PAYLOAD);
    }

    #[test]
    fn replies_go_only_to_addresses_that_can_be_answered() {
        let usable_at = |a: &str| a.parse().is_ok_and(usable);
        assert!(usable_at("127.0.0.1:9"));
        assert!(usable_at("[::ffff:192.0.2.1]:9"));
        assert!(!usable_at("127.0.0.1:0"));
        assert!(!usable_at("not an address"));
        assert!(!usable_at("0.0.0.0:9"));
        assert!(!usable_at("[::]:9"));
        // An IPv4 source of 0.0.0.0 as a dual-stack socket reports it.
        assert!(!usable_at("[::ffff:0.0.0.0]:9"));
    }

    #[test]
    fn truncation_keeps_characters_whole() {
        assert_eq!(truncate_utf8("héllo", 2), b"h");
        assert_eq!(truncate_utf8("héllo", 3), "hé".as_bytes());
        assert_eq!(truncate_utf8("abc", 10), b"abc");
    }

    #[test]
    fn socket_addresses_round_trip() {
        for addr in ["127.0.0.1:8081", "[::1]:9", "[fe80::1%2]:443", "0.0.0.0:0"] {
            let addr: SocketAddr = match addr.parse() {
                Ok(a) => a,
                Err(_) => continue,
            };
            let mut storage = sys_storage();
            let len = sys::to_storage(addr, &mut storage);
            assert_eq!(sys::from_storage(&storage, len), Some(addr));
        }
    }

    fn sys_storage() -> libc::sockaddr_storage {
        // SAFETY: all-zero is a valid `sockaddr_storage`.
        unsafe { std::mem::zeroed() }
    }
}
