//! The UDP-RPC receive loop both UDP baselines share: Luge's socket set-up and receive loop
//! (`udp.rs`) with the duplicate cache, admission and runtime taken out. One thread,
//! `recvmmsg` of up to `batch` datagrams with the same batch code as the front end (`luge_server::net`), blocking
//! (`MSG_WAITFORONE`, with a read timeout) or busy-polling a non-blocking socket; Pings are
//! answered with Pongs, Requests go to an [`OnRequest`] handler, anything else is counted and
//! ignored; replies queued during a batch leave with one `sendmmsg` at its end.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use luge_proto::{Echo, Flags, MAX_DATAGRAM, Message, Request, decode};

use super::{BaselineError, Counters, bump};
use luge_server::net::{self as sys, RecvBatch, SendBatch};
use luge_server::net::{usable, wake};

/// As in `udp.rs`: how long the blocking receive waits before re-checking the stop flag,
/// should the wake-up datagram be lost.
const READ_TIMEOUT: Duration = Duration::from_millis(100);

/// What a UDP baseline does with a decoded Request.
pub(super) trait OnRequest: Send + 'static {
    /// Handles `request` from `peer`, which the kernel received at `received` (as Luge's front
    /// end counts a request's time in the node: from its datagram's receive stamp). A reply ready
    /// at once is queued on `out` (sent with the batch's `sendmmsg`); a later one is sent with
    /// [`sys::send_to`] from whichever thread produces it, as Luge's completions are.
    fn request(
        &mut self,
        peer: SocketAddr,
        request: &Request<'_>,
        received: Instant,
        out: &mut SendBatch,
    );
}

/// Binds and configures the socket exactly as `UdpServer::start` does.
pub(super) fn bind(
    addr: SocketAddr,
    busy_poll: bool,
    recv_buffer_bytes: usize,
    send_buffer_bytes: usize,
) -> Result<Arc<UdpSocket>, BaselineError> {
    let socket = UdpSocket::bind(addr).map_err(|source| BaselineError::Bind { addr, source })?;
    let fd = socket.as_raw_fd();
    for (opt, bytes) in [(libc::SO_RCVBUF, recv_buffer_bytes), (libc::SO_SNDBUF, send_buffer_bytes)]
    {
        if bytes > 0 {
            let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
            sys::set_int_option(fd, opt, value).map_err(BaselineError::Socket)?;
        }
    }
    // Stamped by the kernel on receipt, as Luge's front end asks: a baseline's queueing and
    // readiness then count from the same instant as Luge's.
    if let Err(e) = sys::enable_receive_timestamps(fd) {
        tracing::warn!("baseline: no kernel receive timestamps ({e}): counting from the read");
    }
    if busy_poll {
        socket.set_nonblocking(true).map_err(BaselineError::Socket)?;
    } else {
        socket.set_read_timeout(Some(READ_TIMEOUT)).map_err(BaselineError::Socket)?;
    }
    Ok(Arc::new(socket))
}

/// A running receive thread. Dropping it stops the thread.
pub(super) struct Receiver {
    local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Receiver {
    /// Starts the receive thread `name` on `socket` (from [`bind`] with the same `busy_poll`).
    pub(super) fn start(
        name: &str,
        socket: Arc<UdpSocket>,
        busy_poll: bool,
        batch: usize,
        counters: Arc<Counters>,
        handler: impl OnRequest,
    ) -> Result<Self, BaselineError> {
        let local_addr = socket.local_addr().map_err(BaselineError::Socket)?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let batch = RecvBatch::new(batch, MAX_DATAGRAM + 1);
                run(&socket, &flag, busy_poll, batch, &counters, handler);
            })
            .map_err(BaselineError::Thread)?;
        Ok(Self { local_addr, stop, thread: Some(thread) })
    }

    /// The bound address (with the actual port when bound to port 0).
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops the receive thread and waits for it; idempotent.
    pub(super) fn stop(&mut self) {
        let Some(thread) = self.thread.take() else { return };
        self.stop.store(true, Ordering::SeqCst);
        wake(self.local_addr);
        if thread.join().is_err() {
            tracing::error!("a baseline UDP receive thread panicked");
        }
    }
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").field("local_addr", &self.local_addr).finish_non_exhaustive()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The receive loop: `udp.rs`'s `Receiver::run` with the per-datagram work of a baseline.
fn run(
    socket: &UdpSocket,
    stop: &AtomicBool,
    busy_poll: bool,
    mut batch: RecvBatch,
    counters: &Counters,
    mut handler: impl OnRequest,
) {
    let fd = socket.as_raw_fd();
    let flags = if busy_poll { libc::MSG_DONTWAIT } else { libc::MSG_WAITFORONE };
    let mut out = SendBatch::new();
    while !stop.load(Ordering::Acquire) {
        match batch.recv(fd, flags) {
            Ok(n) => {
                if stop.load(Ordering::Acquire) {
                    break;
                }
                let (read, wall) = (Instant::now(), SystemTime::now());
                for i in 0..n {
                    let received = sys::arrival(read, wall, batch.kernel_time(i));
                    let Some((data, peer, truncated)) = batch.get(i) else { continue };
                    bump(&counters.datagrams);
                    let decoded = if truncated { None } else { decode(data).ok() };
                    let Some(message) = decoded else {
                        bump(&counters.malformed);
                        continue;
                    };
                    // Nowhere to answer (§7 rule 3): ignore it.
                    let Some(peer) = peer.filter(|&p| usable(p)) else { continue };
                    match message {
                        Message::Request(request) => {
                            bump(&counters.requests);
                            handler.request(peer, &request, received, &mut out);
                        }
                        Message::Ping(ping) => {
                            bump(&counters.pings);
                            let pong = Message::Pong(Echo { flags: Flags::NONE, ..ping });
                            if pong.encode(out.push(peer)).is_err() {
                                out.pop();
                            }
                        }
                        // Replies are never answered.
                        Message::Response(_) | Message::Pong(_) => {}
                    }
                }
                if !out.is_empty() {
                    let failed = out.flush(fd, libc::MSG_DONTWAIT);
                    counters.send_errors.fetch_add(failed as u64, Ordering::Relaxed);
                }
            }
            Err(e) => match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    if busy_poll {
                        std::hint::spin_loop();
                    }
                }
                io::ErrorKind::Interrupted => {}
                _ => {
                    tracing::warn!("baseline udp: recvmmsg failed: {e}");
                    std::thread::sleep(Duration::from_millis(1));
                }
            },
        }
    }
}
