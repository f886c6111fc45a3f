//! Who runs the HTTP front end's event loop: the inline worker while it waits (run-to-completion
//! over HTTP), else the front end's own thread.
//!
//! With a current-thread tokio runtime and an inline layout of one worker group, the front end
//! attaches an [`HttpDriver`] to the worker (the runtime's [`Driver`]). The idle worker then runs
//! the runtime itself (`Runtime::block_on` until its wake-up eventfd or its UDP socket is
//! readable): a request read there is submitted to the worker's own dispatcher, which wakes the
//! loop through the eventfd (a write, no other thread), the worker runs it, and its answer is
//! written when the worker next runs the loop — no thread hand-off and no wake-up of another
//! thread per request, where the front end's own thread used to pay two (the worker woken for
//! the request, the front end for the answer; each ~20 µs on a VM). Requests that arrive
//! together are read in one turn and answered in the next: a batch per turn. Between short runs
//! back to back the worker takes a turn that does not wait every 500 µs ([`Driver::turn`]), so
//! answers and arrivals wait about that long at most.
//!
//! The front end's thread (`luge-http`) stands by ([`Handoff`]): it runs the loop while no worker
//! does — before the attach, while the worker runs a request not known to be short (the
//! runtime's `busy`, as for the UDP ingress: arrivals are then read at once and may preempt it),
//! and from the shutdown on — and parks otherwise. A tokio current-thread runtime lets any
//! thread drive it, one at a time: a thread that calls `block_on` while another drives waits
//! for the core, so the two hand it over (the standby stops at once when told).

use std::cell::Cell;
use std::future::{Future, poll_fn};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::task::Poll;
use std::thread::Thread;
use std::time::Duration;

use luge_runtime::Driver;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::runtime::Runtime as Tokio;
use tokio::sync::Notify;

thread_local! {
    /// Set while this thread is a worker running the loop ([`HttpDriver`]).
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// Whether the loop is running on a worker's thread now: a request read here runs on this
/// thread.
pub(super) fn on_worker() -> bool {
    ON_WORKER.with(Cell::get)
}

/// Whether the front end's own thread must run the loop, and the handles to tell it.
#[derive(Debug)]
pub(super) struct Handoff {
    /// The standby thread runs the loop (true from the start: until a worker takes it).
    needed: AtomicBool,
    /// The front end stops: the standby runs the loop to the end, the worker no more.
    stopping: AtomicBool,
    thread: OnceLock<Thread>,
    /// Tells a standby that runs the loop to stop (the worker takes it again).
    released: Notify,
    /// Times the worker handed the loop to the standby.
    handovers: AtomicU64,
}

impl Handoff {
    pub(super) fn new() -> Self {
        Self {
            needed: AtomicBool::new(true),
            stopping: AtomicBool::new(false),
            thread: OnceLock::new(),
            released: Notify::new(),
            handovers: AtomicU64::new(0),
        }
    }

    /// Registers the standby thread.
    pub(super) fn bind(&self, thread: Thread) {
        let _ = self.thread.set(thread);
    }

    /// The standby must run the loop (the worker is busy): wakes it if it rests. One atomic
    /// when it already runs it.
    fn take_over(&self) {
        if !self.needed.load(Ordering::Relaxed)
            && !self.needed.swap(true, Ordering::AcqRel)
            && let Some(t) = self.thread.get()
        {
            self.handovers.fetch_add(1, Ordering::Relaxed);
            t.unpark();
        }
    }

    /// Times the worker handed the loop to the standby so far.
    pub(super) fn handovers(&self) -> u64 {
        self.handovers.load(Ordering::Relaxed)
    }

    /// The worker runs the loop again: the standby stops after its current turn.
    pub(super) fn give_back(&self) {
        if !self.stopping.load(Ordering::Acquire)
            && self.needed.load(Ordering::Relaxed)
            && self.needed.swap(false, Ordering::AcqRel)
        {
            self.released.notify_one();
        }
    }

    /// The front end stops: the standby runs the loop until the server ends.
    pub(super) fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
        self.needed.store(true, Ordering::Release);
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Parks the standby until it must run the loop.
    pub(super) fn wait_needed(&self) {
        while !self.needed.load(Ordering::Acquire) {
            std::thread::park();
        }
    }

    /// Resolves when the standby may stop running the loop.
    pub(super) async fn no_longer_needed(&self) {
        loop {
            let mut released = pin!(self.released.notified());
            released.as_mut().enable();
            if !self.needed.load(Ordering::Acquire) {
                return;
            }
            released.await;
        }
    }
}

/// The descriptor the worker wakes for, registered with the loop's reactor for one
/// [`Driver::drive`] (not owned: closing it is the runtime's business) when it cannot be
/// duplicated for a kept [`Wake`] (no descriptor left).
struct Borrowed(RawFd);

impl AsRawFd for Borrowed {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// The runtime's [`Driver`] for the HTTP front end: runs its tokio runtime on the worker's
/// thread.
pub(super) struct HttpDriver {
    tokio: Arc<Tokio>,
    handoff: Arc<Handoff>,
    /// The worker's wake-up descriptor (a duplicate, so that the registration can never
    /// outlive the descriptor it names), registered with the loop's reactor at the worker's
    /// first wait and kept while the worker runs the loop between short runs: registering it
    /// for each wait cost two `epoll_ctl` calls per request on an idle node. Deregistered (the
    /// duplicate kept) when the worker hands the loop to the standby ([`Driver::busy`]), so that
    /// the standby's reactor is not woken for the worker's events (datagrams on an attached UDP
    /// socket) meanwhile. Taken out while a wait uses it.
    wake: Mutex<Option<Wake>>,
}

/// The duplicate of a worker's wake-up descriptor `of`, registered with the loop's reactor or
/// not.
enum Wake {
    Registered { of: RawFd, fd: AsyncFd<OwnedFd> },
    Spare { of: RawFd, fd: OwnedFd },
}

impl HttpDriver {
    pub(super) fn new(tokio: Arc<Tokio>, handoff: Arc<Handoff>) -> Self {
        Self { tokio, handoff, wake: Mutex::new(None) }
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Option<Wake>> {
        self.wake.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The registration of `wake`'s duplicate, registered now if it is not (within the loop's
    /// runtime), duplicated first if there is none. `None` if that cannot be done.
    fn registered(&self, wake: RawFd) -> Option<AsyncFd<OwnedFd>> {
        let fd = match self.kept().take() {
            Some(Wake::Registered { of, fd }) if of == wake => return Some(fd),
            Some(Wake::Spare { of, fd }) if of == wake => fd,
            // SAFETY: `wake` is open for the whole `Driver::drive` call that called this.
            _ => unsafe { BorrowedFd::borrow_raw(wake) }.try_clone_to_owned().ok()?,
        };
        // SAFETY: the `AsyncFd` owns the duplicate, so the descriptor stays open and names the
        // same file for as long as the registration lives, and `as_raw_fd` always returns it.
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }.ok()
    }

    /// Runs the loop on this (the worker's) thread until `until` resolves; what it reads there
    /// counts as read by the worker.
    fn run(&self, until: impl Future<Output = ()>) {
        ON_WORKER.with(|w| w.set(true));
        self.tokio.block_on(until);
        ON_WORKER.with(|w| w.set(false));
    }
}

/// Why a wait on the wake-up descriptor ended.
enum Woken {
    /// It became readable, or the timeout passed.
    Normally,
    /// The reactor is gone: the registration is useless.
    Broken,
}

/// Waits until `wake` is readable or `timeout` passes, running the loop meanwhile.
///
/// Readiness is edge-triggered and cached: cleared here when it ends a wait (the worker then
/// drains its set; what it leaves is seen by the level-triggered `readable` at the top of the
/// next `drive`). A readiness that came after the guard is not cleared (tokio compares the
/// event's tick).
async fn wait<T: AsRawFd>(wake: &AsyncFd<T>, timeout: Option<Duration>) -> Woken {
    let mut sleep = pin!(timeout.map(tokio::time::sleep));
    poll_fn(|cx| {
        if let Poll::Ready(ready) = wake.poll_read_ready(cx) {
            return Poll::Ready(match ready {
                Ok(mut guard) => {
                    guard.clear_ready();
                    Woken::Normally
                }
                Err(_) => Woken::Broken,
            });
        }
        match sleep.as_mut().as_pin_mut().map(|s| s.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Woken::Normally),
            _ => Poll::Pending,
        }
    })
    .await
}

impl Driver for HttpDriver {
    fn drive(&self, wake: RawFd, timeout: Option<Duration>) {
        if self.handoff.stopping() || readable(wake) {
            return;
        }
        if timeout == Some(Duration::ZERO) {
            // One turn, as a spinning worker asks for again and again: no timer, whose 1 ms
            // resolution made a zero-length `sleep` wait up to a tick (HTTP at 1 in flight took
            // 1.3 ms at the median with `wait = "spin"`).
            self.run(tokio::task::yield_now());
            return;
        }
        self.run(async {
            if let Some(fd) = self.registered(wake) {
                if let Woken::Normally = wait(&fd, timeout).await {
                    *self.kept() = Some(Wake::Registered { of: wake, fd });
                }
                return;
            }
            // No descriptor to spare for a duplicate: registered for this wait only (an
            // `epoll_ctl` each way).
            // SAFETY: `wake` is open and names the same file until this call returns
            // (`Driver::drive`: the worker's epoll set, owned by the runtime); the `AsyncFd` is
            // dropped before then, at the end of this block.
            let borrowed =
                unsafe { AsyncFd::register_with_interest(Borrowed(wake), Interest::READABLE) };
            match borrowed {
                // Dropped at the end of this call whichever way the wait ended.
                Ok(borrowed) => {
                    let _ = wait(&borrowed, timeout).await;
                }
                // Cannot wait on it: one turn of the loop, then the worker looks again.
                Err(_) => tokio::task::yield_now().await,
            }
        });
    }

    fn turn(&self) {
        if self.handoff.needed.load(Ordering::Acquire) {
            return; // the standby runs the loop
        }
        self.run(tokio::task::yield_now());
    }

    fn busy(&self) {
        self.handoff.take_over();
        // The standby's reactor must not wake for the worker's events while it runs the loop.
        let mut kept = self.kept();
        if let Some(Wake::Registered { of, fd }) = kept.take() {
            *kept = Some(Wake::Spare { of, fd: fd.into_inner() });
        }
    }

    fn idle(&self) {
        self.handoff.give_back();
    }
}

/// Whether `fd` is readable now (a `poll` that does not wait).
fn readable(fd: RawFd) -> bool {
    let mut polled = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live, initialised `pollfd`; a zero timeout does not block.
    unsafe { libc::poll(&mut polled, 1, 0) > 0 }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::time::Instant;

    use super::*;

    /// A driver on a runtime of its own, and an eventfd to wake it with.
    fn driver_and_wake() -> (HttpDriver, OwnedFd) {
        let tokio =
            Arc::new(tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap());
        let driver = HttpDriver::new(tokio, Arc::new(Handoff::new()));
        // SAFETY: `eventfd` returns a new descriptor (checked below) that nothing else owns.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: `fd` is open and owned by nothing else.
        (driver, unsafe { OwnedFd::from_raw_fd(fd) })
    }

    #[test]
    fn a_turn_with_a_zero_timeout_does_not_wait_for_the_timer() {
        let (driver, wake) = driver_and_wake();
        // A spinning worker's loop: 1 000 turns. Waiting for the timer's 1 ms tick would take
        // ~0.5 ms each (half a second); a turn that does not wait takes microseconds.
        let start = Instant::now();
        for _ in 0..1_000 {
            driver.drive(wake.as_raw_fd(), Some(Duration::ZERO));
        }
        let took = start.elapsed();
        assert!(took < Duration::from_millis(250), "1 000 turns took {took:?}");
    }

    #[test]
    fn the_kept_registration_wakes_the_worker_for_each_wake_up_and_only_then() {
        let (driver, wake) = driver_and_wake();
        let wake = Arc::new(wake);
        let drain = |wake: &OwnedFd| {
            let mut count = [0u8; 8];
            // SAFETY: an 8-byte buffer for an eventfd read on an open descriptor.
            unsafe { libc::read(wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        };
        let signal = |wake: &OwnedFd| {
            let one = 1u64.to_ne_bytes();
            // SAFETY: an 8-byte eventfd write on an open descriptor.
            unsafe { libc::write(wake.as_raw_fd(), one.as_ptr().cast(), 8) };
        };
        for round in 0..3 {
            // Woken by the write (not the 2 s timeout, not at once by a readiness left over
            // from the round before), with the same registration each round.
            let writer = {
                let wake = Arc::clone(&wake);
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(30));
                    signal(&wake);
                })
            };
            let start = Instant::now();
            driver.drive(wake.as_raw_fd(), Some(Duration::from_secs(2)));
            let took = start.elapsed();
            writer.join().unwrap();
            assert!(took >= Duration::from_millis(25), "round {round}: woke after {took:?}");
            assert!(took < Duration::from_secs(1), "round {round}: woke after {took:?}");
            drain(&wake);
        }
        // Nothing written: the wait lasts its timeout.
        let start = Instant::now();
        driver.drive(wake.as_raw_fd(), Some(Duration::from_millis(50)));
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(45), "returned after {took:?} with nothing to read");
        // Kept between waits; deregistered when the standby takes the loop, registered again
        // after.
        let registered = |d: &HttpDriver| matches!(*d.kept(), Some(Wake::Registered { .. }));
        assert!(registered(&driver));
        driver.busy();
        assert!(!registered(&driver), "the standby's reactor would wake for the worker");
        signal(&wake);
        let start = Instant::now();
        driver.drive(wake.as_raw_fd(), Some(Duration::from_secs(2)));
        assert!(start.elapsed() < Duration::from_secs(1));
        drain(&wake);
        driver.drive(wake.as_raw_fd(), Some(Duration::from_millis(20)));
        assert!(registered(&driver));
    }
}
