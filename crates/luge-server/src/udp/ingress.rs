//! Who reads a socket: its inline worker when that worker is idle (run-to-completion), else
//! the socket's receive thread.
//!
//! In the inline layout each worker reads its own socket ([`WorkerIngress`], the runtime's
//! [`Ingress`]): a datagram that finds the worker waiting wakes *that* thread, which decodes it,
//! submits it to its own dispatcher, runs it and sends the answer — no other thread woken, no
//! hand-off (HORSE §4.1 makes the path to the run queue O(1); this takes the queue's hand-off
//! out of the path too). The receive thread stands by ([`Standby`]): parked while the worker
//! reads, woken when the worker starts a request not known to be short — in the uLL lane or
//! estimated at most the lane's slice, 100 µs — (or a run is still going after that long), so that arrivals during a long run are read at once, admitted
//! and allowed to preempt it — the threads layout's path, one hand-off. When the worker is idle
//! again the receive thread stops reading at once.
//!
//! The worker's answers go out together: each response it produces for its own socket is queued
//! in an outbox on its thread ([`queue`]) and the batch is sent with one `sendmmsg` before the
//! worker waits, before it starts a run not known to be short, or once 32 are queued or the
//! oldest has waited 100 µs. On loopback a `sendto` also delivers the datagram and wakes the
//! reader, and per response that was most of an inline worker's CPU on a closed loop of no-ops
//! (`perf -e cpu-clock`: `sendto` ~70 % of its samples); the echo floor sends its batch the
//! same way. A response waits at most for the short runs after it, within that bound. The
//! receive thread keeps an outbox too, for the refusals the runtime gives at once on its thread
//! (past capacity, most arrivals: `Runtime::submit_to` refuses there what the dispatcher would),
//! sent after each batch it reads.

use std::cell::RefCell;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use luge_runtime::Ingress;

use super::Shared;
use super::receiver::Receiver;
use super::sys::{self, ReplyTo, SendBatch};

/// Responses queued before the outbox is sent regardless.
const MAX_QUEUED: usize = 32;
/// The longest a queued response waits for the ones after it.
const MAX_HOLD: Duration = Duration::from_micros(100);

thread_local! {
    /// The outbox of the inline worker on this thread, for the socket it reads.
    static OUTBOX: RefCell<Option<Outbox>> = const { RefCell::new(None) };
}

/// Responses a worker produced for the socket it reads, not sent yet.
struct Outbox {
    /// The socket: kept open until what is queued for it is sent (the outbox is removed when
    /// its front end stops: [`WorkerIngress::idle`]).
    shared: Arc<Shared>,
    batch: SendBatch,
    /// When the oldest queued response was queued.
    oldest: Option<Instant>,
}

impl Outbox {
    fn flush(&mut self) {
        self.oldest = None;
        if self.batch.is_empty() {
            return;
        }
        let failed = self.batch.flush(self.shared.fd(), libc::MSG_DONTWAIT);
        self.shared.counters.send_errors.fetch_add(failed as u64, Ordering::Relaxed);
    }
}

/// Queues `bytes` for `to` when this thread is the worker reading `shared`'s socket (sent by
/// [`flush`] or when the outbox is full or old); whether it did — if not, the caller sends it.
pub(super) fn queue(shared: &Shared, bytes: &[u8], to: ReplyTo) -> bool {
    OUTBOX.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return false };
        let Some(out) = slot.as_mut() else { return false };
        if !std::ptr::eq(Arc::as_ptr(&out.shared), shared) {
            return false;
        }
        out.batch.push(to).extend_from_slice(bytes);
        let now = Instant::now();
        let oldest = *out.oldest.get_or_insert(now);
        if out.batch.len() >= MAX_QUEUED || now.duration_since(oldest) >= MAX_HOLD {
            out.flush();
        }
        true
    })
}

/// Sends what this thread's outbox holds; with `remove`, also removes the outbox (its front end
/// stops: answers produced later on this thread are sent one by one).
pub(super) fn flush(remove: bool) {
    OUTBOX.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut()
            && let Some(out) = slot.as_mut()
        {
            out.flush();
            if remove {
                *slot = None;
            }
        }
    });
}

/// Sends what this thread's outbox holds if its oldest response has waited [`MAX_HOLD`]: the
/// bound holds while the worker runs requests that answer on other front ends (no clock read
/// when nothing is queued).
fn flush_held() {
    OUTBOX.with(|cell| {
        if let Ok(mut slot) = cell.try_borrow_mut()
            && let Some(out) = slot.as_mut()
            && out.oldest.is_some_and(|oldest| oldest.elapsed() >= MAX_HOLD)
        {
            out.flush();
        }
    });
}

/// Makes this thread's outbox the one for `shared`'s socket (sending what it held for another).
/// The worker that reads the socket installs it before each read; the receive thread once, for
/// the refusals the runtime gives at once on its thread (`Runtime::submit_to` refuses there what
/// the dispatcher would), which it sends after each batch as it sends its own replies.
pub(super) fn install(shared: &Arc<Shared>) {
    OUTBOX.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else { return };
        if let Some(out) = slot.as_mut() {
            if Arc::ptr_eq(&out.shared, shared) {
                return;
            }
            out.flush();
        }
        *slot = Some(Outbox { shared: Arc::clone(shared), batch: SendBatch::new(), oldest: None });
    });
}

/// Whether a socket's receive thread reads it, and the handles to wake it (parked) and to call
/// it off (waiting on the socket).
#[derive(Debug)]
pub(super) struct Standby {
    /// The receive thread reads (true from the start: until a worker takes the socket).
    reads: AtomicBool,
    /// A worker reads the socket when idle.
    worker: AtomicBool,
    thread: OnceLock<Thread>,
    /// Written when the worker reads again, so that a receive thread waiting on the socket
    /// stops at once instead of racing the worker for the next datagram.
    off: OwnedFd,
}

impl Standby {
    pub(super) fn new() -> std::io::Result<Self> {
        Ok(Self {
            reads: AtomicBool::new(true),
            worker: AtomicBool::new(false),
            thread: OnceLock::new(),
            off: sys::eventfd()?,
        })
    }

    /// The descriptor the receive thread waits on beside the socket.
    pub(super) fn off_fd(&self) -> RawFd {
        self.off.as_raw_fd()
    }

    /// Registers the receive thread.
    pub(super) fn bind(&self, thread: Thread) {
        let _ = self.thread.set(thread);
    }

    /// A worker now reads the socket when idle: the receive thread may rest.
    pub(super) fn hand_to_worker(&self) {
        self.worker.store(true, Ordering::Release);
        self.reads.store(false, Ordering::Release);
    }

    /// No worker reads the socket (its attachment was refused, or the front end stops): the
    /// receive thread reads alone.
    pub(super) fn take_back(&self) {
        self.worker.store(false, Ordering::Release);
        self.reads.store(true, Ordering::Release);
    }

    /// Whether a worker reads the socket when idle.
    pub(super) fn worker_reads(&self) -> bool {
        self.worker.load(Ordering::Acquire)
    }

    /// Whether the receive thread should read now.
    pub(super) fn should_read(&self) -> bool {
        self.reads.load(Ordering::Acquire)
    }

    /// The receive thread must read (the worker is busy, or the front end stops): wakes it if
    /// it rests. One atomic when it already reads.
    pub(super) fn wake(&self) {
        if !self.reads.load(Ordering::Relaxed)
            && !self.reads.swap(true, Ordering::AcqRel)
            && let Some(t) = self.thread.get()
        {
            t.unpark();
        }
    }

    /// The front end stops: wakes the receive thread wherever it waits, to see it.
    pub(super) fn stop(&self) {
        self.wake();
        sys::signal(self.off.as_raw_fd());
    }

    /// The worker reads again: the receive thread rests after the batch it is reading, or at
    /// once if it waits.
    fn rest(&self) {
        if self.reads.load(Ordering::Relaxed) && self.reads.swap(false, Ordering::AcqRel) {
            sys::signal(self.off.as_raw_fd());
        }
    }
}

/// An inline worker's reader of one socket: its own receive state (buffers, the batch of
/// replies), the socket's shared state.
pub(super) struct WorkerIngress {
    shared: Arc<Shared>,
    /// Locked only by the worker's thread (the trait needs `Sync`).
    receiver: Mutex<Receiver>,
}

impl WorkerIngress {
    pub(super) fn new(shared: Arc<Shared>, receiver: Receiver) -> Self {
        Self { shared, receiver: Mutex::new(receiver) }
    }
}

impl Ingress for WorkerIngress {
    fn fd(&self) -> RawFd {
        self.shared.fd()
    }

    fn poll(&self) -> usize {
        if self.shared.stop.load(Ordering::Acquire) {
            return 0;
        }
        install(&self.shared);
        match self.receiver.try_lock() {
            Ok(mut receiver) => receiver.poll(),
            Err(_) => 0,
        }
    }

    fn busy(&self) {
        flush(false);
        self.shared.standby.wake();
    }

    fn idle(&self) {
        // A stopping front end has detached this ingress: the worker's last call. Its socket is
        // let go once what was queued for it is sent.
        flush(self.shared.stop.load(Ordering::Acquire));
        self.shared.standby.rest();
    }

    fn turn(&self, read: bool) {
        if read && self.poll() > 0 {
            // Refusals the runtime gave at once while reading are queued with the rest.
            flush(false);
        } else {
            flush_held();
        }
    }
}
