//! The load generator's HTTP/1.1 connections: opened on demand by the pacer, one request in
//! flight on each, read by receiver threads over epoll (`mio`), and never more of them open
//! than the window.
//!
//! The pacer takes an idle connection (or opens one while fewer than the window are open),
//! writes the request itself — one `write` on a non-blocking socket — and goes back to pacing.
//! A receiver reads every connection that has bytes, frames the response ([`wire`]), puts the
//! connection back in the idle list *before* it records the answer that frees a window slot
//! (so the request the slot lets start finds it idle), then records the answer in the ledger.
//! No task, channel or thread hand-off per request: the pacer's write wakes the server, the
//! server's answer wakes a receiver that is waiting in `epoll_wait`, as with `wrk`.
//!
//! Who owns what: a connection is idle (in [`Conns`]'s list: the pacer may take it) or carries
//! one request (its `seq`: the receiver answers it). Whoever swaps `seq` out first — the
//! receiver with an answer or a failure, the pacer when its write failed or it finds the
//! connection closed under it — reports the request, so each gets exactly one record (a
//! receiver marks a connection closed *before* it takes the request out, the pacer puts the
//! request in *before* it looks at the mark, all sequentially consistent: one of the two sees
//! the other). Only a receiver closes a connection: the server closed it, it broke, it
//! answered what nobody asked, or its request outlived the timeout (the ledger records that
//! request by itself).
//!
//! [`wire`]: super::wire

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token};

use super::wire::{Parsed, parse_response};
use crate::error::BenchError;
use crate::ledger::Ledger;
use crate::sample::ErrorKind;

/// `seq` of a connection that carries no request.
const NONE: u64 = u64::MAX;
/// The largest response a connection buffers (a larger one breaks it: `transport` error).
pub(super) const MAX_RESPONSE: usize = 8 << 20;
/// How often a receiver wakes without events (to see the stop flag and old requests).
const TICK: Duration = Duration::from_millis(10);

/// One connection.
pub(super) struct Conn {
    token: Token,
    stream: TcpStream,
    /// The request in flight on it, or [`NONE`].
    seq: AtomicU64,
    /// When that request was written (ledger ns).
    sent_ns: AtomicU64,
    /// Closed (by the receiver) or broken (a failed write): never handed out again.
    closed: AtomicBool,
}

impl Conn {
    /// Writes `bytes` whole. The socket is non-blocking: a full send buffer (a large body) is
    /// waited out with `poll`, until `deadline`.
    fn write_all(&self, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
        while !bytes.is_empty() {
            match (&self.stream).write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => bytes = bytes.get(n..).unwrap_or_default(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    let mut fd = libc::pollfd {
                        fd: self.stream.as_raw_fd(),
                        events: libc::POLLOUT,
                        revents: 0,
                    };
                    let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
                    // SAFETY: `fd` is one valid pollfd that lives across the call; nfds is 1.
                    unsafe { libc::poll(&mut fd, 1, ms) };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The idle list, and whether the pacer waits on it.
struct Idle {
    conns: Vec<Arc<Conn>>,
    waiting: bool,
}

/// Connections a receiver has not adopted yet, and where they are registered.
struct Inbox {
    registry: Registry,
    new: Mutex<Vec<Arc<Conn>>>,
}

/// The connections of one run.
pub(super) struct Conns {
    addr: SocketAddr,
    /// The most connections open at once (the run's window).
    window: usize,
    timeout: Duration,
    idle: Mutex<Idle>,
    /// An idle connection came back, or one closed.
    freed: Condvar,
    open: AtomicUsize,
    most_open: AtomicUsize,
    next_token: AtomicUsize,
    inboxes: Vec<Inbox>,
}

/// The receiving half of a run: the receivers' event loops, one per thread, until they run.
pub(crate) struct Receivers {
    conns: Arc<Conns>,
    polls: Vec<Poll>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Conns {
    /// Connections to `addr`, at most `window` of them, read by `threads` receivers.
    pub(super) fn new(
        addr: SocketAddr,
        window: usize,
        timeout: Duration,
        threads: usize,
    ) -> Result<(Arc<Self>, Receivers), BenchError> {
        let mut polls = Vec::new();
        let mut inboxes = Vec::new();
        for _ in 0..threads.max(1) {
            let poll = Poll::new().map_err(|e| BenchError::io("creating an epoll instance", e))?;
            let registry = poll
                .registry()
                .try_clone()
                .map_err(|e| BenchError::io("cloning an epoll registry", e))?;
            polls.push(poll);
            inboxes.push(Inbox { registry, new: Mutex::new(Vec::new()) });
        }
        let conns = Arc::new(Self {
            addr,
            window: window.max(1),
            timeout,
            idle: Mutex::new(Idle { conns: Vec::new(), waiting: false }),
            freed: Condvar::new(),
            open: AtomicUsize::new(0),
            most_open: AtomicUsize::new(0),
            next_token: AtomicUsize::new(0),
            inboxes,
        });
        Ok((Arc::clone(&conns), Receivers { conns, polls }))
    }

    /// The most connections that were open at once.
    fn most_open(&self) -> usize {
        self.most_open.load(Ordering::Relaxed)
    }

    /// Sends request `seq`, written whole into `buf` by `build` once a connection is at hand
    /// (so that the deadline it carries counts the wait for one); `build` gives the ledger's
    /// time of the write, from which the request's timeout counts (as in the ledger). A
    /// connection the server closed while idle is dropped and the next one tried.
    pub(super) fn send(
        &self,
        seq: u64,
        buf: &mut Vec<u8>,
        mut build: impl FnMut(&mut Vec<u8>) -> u64,
    ) -> Result<(), ErrorKind> {
        loop {
            let (conn, fresh) = self.checkout()?;
            let written_ns = build(buf);
            conn.sent_ns.store(written_ns, Ordering::Relaxed);
            conn.seq.store(seq, Ordering::SeqCst);
            // Closed by a receiver since the checkout: it may not look at this one again.
            let written = if conn.closed.load(Ordering::SeqCst) {
                Err(io::ErrorKind::NotConnected.into())
            } else {
                conn.write_all(buf, Instant::now() + self.timeout)
            };
            if written.is_ok() {
                return Ok(());
            }
            conn.closed.store(true, Ordering::SeqCst);
            if conn.seq.swap(NONE, Ordering::SeqCst) == NONE {
                // The receiver saw the connection fail first and has recorded the request.
                return Ok(());
            }
            if fresh {
                // A new connection the server would not take (one refused at its accept).
                return Err(ErrorKind::Connect);
            }
        }
    }

    /// An idle connection, else a new one while fewer than the window are open, else waits
    /// for one: when every connection is still held — by requests past their timeout (a
    /// receiver closes those within a tick of it) or by an answer a receiver is recording
    /// (it closes or returns the connection at once). `true` with a new connection.
    fn checkout(&self) -> Result<(Arc<Conn>, bool), ErrorKind> {
        let give_up = Instant::now() + self.timeout;
        let mut idle = lock(&self.idle);
        loop {
            while let Some(conn) = idle.conns.pop() {
                if !conn.closed.load(Ordering::SeqCst) {
                    return Ok((conn, false));
                }
            }
            // Only this thread opens connections: the count cannot pass the window.
            if self.open.load(Ordering::Acquire) < self.window {
                drop(idle);
                return self.connect().map(|c| (c, true));
            }
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ErrorKind::Send);
            }
            idle.waiting = true;
            idle = self.freed.wait_timeout(idle, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }

    fn connect(&self) -> Result<Arc<Conn>, ErrorKind> {
        let stream =
            TcpStream::connect_timeout(&self.addr, self.timeout).map_err(|_| ErrorKind::Connect)?;
        // Small requests must not wait for Nagle; a failure only costs latency.
        let _ = stream.set_nodelay(true);
        stream.set_nonblocking(true).map_err(|_| ErrorKind::Connect)?;
        let token = Token(self.next_token.fetch_add(1, Ordering::Relaxed));
        let conn = Arc::new(Conn {
            token,
            stream,
            seq: AtomicU64::new(NONE),
            sent_ns: AtomicU64::new(0),
            closed: AtomicBool::new(false),
        });
        let Some(inbox) = self.inboxes.get(token.0 % self.inboxes.len()) else {
            return Err(ErrorKind::Connect);
        };
        // In the inbox before it can have events: the receiver adopts what is there first.
        lock(&inbox.new).push(Arc::clone(&conn));
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        self.most_open.fetch_max(open, Ordering::Relaxed);
        let fd = conn.stream.as_raw_fd();
        if inbox.registry.register(&mut SourceFd(&fd), token, Interest::READABLE).is_err() {
            // Left in the inbox: the receiver adopts it and closes it at its next sweep.
            conn.closed.store(true, Ordering::SeqCst);
            return Err(ErrorKind::Connect);
        }
        Ok(conn)
    }

    /// Back in the idle list after its answer was read whole.
    fn checkin(&self, conn: Arc<Conn>) {
        let mut idle = lock(&self.idle);
        idle.conns.push(conn);
        self.wake(&mut idle);
    }

    /// Closes a connection (receiver only): the server sees it closed at once, and it leaves
    /// the idle list (its descriptor goes with the last reference).
    fn close(&self, conn: &Conn, registry: &Registry) {
        conn.closed.store(true, Ordering::SeqCst);
        let _ = registry.deregister(&mut SourceFd(&conn.stream.as_raw_fd()));
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        self.open.fetch_sub(1, Ordering::AcqRel);
        let mut idle = lock(&self.idle);
        idle.conns.retain(|c| !std::ptr::eq(Arc::as_ptr(c), conn));
        self.wake(&mut idle);
    }

    fn wake(&self, idle: &mut Idle) {
        if idle.waiting {
            idle.waiting = false;
            self.freed.notify_one();
        }
    }
}

/// What a receiver keeps per connection.
struct Slot {
    conn: Arc<Conn>,
    buf: Vec<u8>,
}

impl Receivers {
    /// Runs every receiver (on this thread and, past the first, on threads of their own) until
    /// `stop`, recording answers in `ledger`; returns the most connections open at once.
    pub(crate) fn run(self, ledger: &Ledger, stop: &AtomicBool) -> usize {
        let conns = &self.conns;
        std::thread::scope(|s| {
            let mut polls = self.polls.into_iter().enumerate();
            let first = polls.next();
            for (i, poll) in polls {
                s.spawn(move || receive(conns, i, poll, ledger, stop));
            }
            if let Some((i, poll)) = first {
                receive(conns, i, poll, ledger, stop);
            }
        });
        conns.most_open()
    }
}

/// One receiver's loop.
fn receive(conns: &Conns, index: usize, mut poll: Poll, ledger: &Ledger, stop: &AtomicBool) {
    let Some(inbox) = conns.inboxes.get(index) else { return };
    let mut events = Events::with_capacity(256);
    let mut slots: HashMap<Token, Slot> = HashMap::new();
    let mut scratch = vec![0u8; 64 << 10];
    let timeout_ns = u64::try_from(conns.timeout.as_nanos()).unwrap_or(u64::MAX);
    let mut next_sweep = 0;
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(TICK))
            && e.kind() != io::ErrorKind::Interrupted
        {
            std::thread::sleep(TICK);
        }
        for conn in lock(&inbox.new).drain(..) {
            slots.insert(conn.token, Slot { conn, buf: Vec::new() });
        }
        for event in events.iter() {
            let token = event.token();
            let Some(slot) = slots.get_mut(&token) else { continue };
            if !service(conns, slot, &mut scratch, ledger) {
                conns.close(&slot.conn, &inbox.registry);
                slots.remove(&token);
            }
        }
        // Connections marked closed (a failed write, a failed registration) go, with their
        // request as a `transport` failure; so do those whose request is past the timeout
        // (the ledger records that one by itself). Only this thread takes a request out of a
        // connection that carries one, so `seq` cannot change under the check.
        let now = ledger.now_ns();
        if now >= next_sweep {
            next_sweep = now + 10_000_000;
            slots.retain(|_, slot| {
                let conn = &slot.conn;
                let expired = conn.seq.load(Ordering::SeqCst) != NONE
                    && now.saturating_sub(conn.sent_ns.load(Ordering::Relaxed)) > timeout_ns;
                if conn.closed.load(Ordering::SeqCst) {
                    fail(slot, ledger);
                } else if expired {
                    conn.closed.store(true, Ordering::SeqCst);
                    conn.seq.swap(NONE, Ordering::SeqCst);
                } else {
                    return true;
                }
                conns.close(conn, &inbox.registry);
                false
            });
        }
    }
    for slot in slots.values() {
        conns.close(&slot.conn, &inbox.registry);
    }
}

/// Reads what a readable connection has and records the answers it completes. False when the
/// connection is done (closed by the server, broken, or not reusable).
fn service(conns: &Conns, slot: &mut Slot, scratch: &mut [u8], ledger: &Ledger) -> bool {
    let mut eof = false;
    loop {
        match (&slot.conn.stream).read(scratch) {
            Ok(0) => {
                eof = true;
                break;
            }
            Ok(n) => {
                if slot.buf.len() + n > MAX_RESPONSE {
                    return fail(slot, ledger);
                }
                slot.buf.extend_from_slice(scratch.get(..n).unwrap_or_default());
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                eof = true;
                break;
            }
        }
    }
    let now = ledger.now_ns();
    while !slot.buf.is_empty() {
        match parse_response(&slot.buf, eof) {
            Parsed::Partial => break,
            Parsed::Invalid => return fail(slot, ledger),
            Parsed::Complete { len, reply, close } => {
                slot.buf.drain(..len.min(slot.buf.len()));
                // One request is outstanding per connection: bytes past its answer (a body
                // longer than its length, a second answer) mean the framing is off. The
                // connection is closed before it is offered again — once checked in, the
                // pacer may write the next request on it, which the leftover would then answer.
                let reusable = !close && !eof && slot.buf.is_empty();
                if !reusable {
                    slot.conn.closed.store(true, Ordering::SeqCst);
                }
                let seq = slot.conn.seq.swap(NONE, Ordering::SeqCst);
                if seq == NONE {
                    // An answer nobody asked for (a server's refusal at accept, a second
                    // answer): the connection's framing cannot be trusted any more.
                    ledger.stray();
                    return fail(slot, ledger);
                }
                if reusable {
                    conns.checkin(Arc::clone(&slot.conn));
                }
                ledger.complete(seq, now, reply);
                if !reusable {
                    return false;
                }
            }
        }
    }
    if eof {
        return fail(slot, ledger);
    }
    true
}

/// The connection broke: its request (if any) failed in transport.
fn fail(slot: &Slot, ledger: &Ledger) -> bool {
    slot.conn.closed.store(true, Ordering::SeqCst);
    let seq = slot.conn.seq.swap(NONE, Ordering::SeqCst);
    if seq != NONE {
        ledger.lost(seq, ErrorKind::Transport);
    }
    false
}
