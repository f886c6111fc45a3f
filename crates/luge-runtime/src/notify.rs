//! Waking an idle thread: park/unpark with a "sleeping" flag so that a producer pays for an
//! unpark system call only when the consumer is actually asleep, or pure busy-polling in
//! [`WaitMode::Spin`]. Each handle counts the wake-ups it issued and the sleeps it took (each a
//! futex system call), for `Runtime::group_stats`.
//!
//! A consumer that must also wait on a file descriptor (an inline worker reading its front end's
//! socket, `ingress.rs`) waits in `epoll_pwait2` on that descriptor and an eventfd of its own
//! ([`Notify::wait_on`]); producers then write the eventfd (as cheap as an unpark, and only when
//! the consumer sleeps). Epoll rather than `ppoll`: the set is registered once, where `ppoll`
//! adds and removes its wait-queue entries on every call (`poll_freewait` was a fifth of an
//! inline worker's CPU under a closed loop of no-ops in a `perf -e cpu-clock` profile).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use crate::config::WaitMode;

/// The wake-up handle of one consumer thread.
#[derive(Debug, Default)]
pub(crate) struct Notify {
    thread: OnceLock<Thread>,
    sleeping: AtomicBool,
    wakeups: AtomicU64,
    sleeps: AtomicU64,
    /// The epoll set a consumer waiting in [`wait_on`](Self::wait_on) waits on (made on first
    /// use).
    poller: OnceLock<Poller>,
}

/// A consumer's epoll set: its eventfd, and the descriptor it waits on besides.
#[derive(Debug)]
struct Poller {
    epoll: OwnedFd,
    event: OwnedFd,
    /// The source registered besides the eventfd: its descriptor and the caller's key for it
    /// (a descriptor number may be reused by another file after the first closes).
    watched: Mutex<Option<(RawFd, u64)>>,
    /// `epoll_pwait2` works here (cleared when the kernel lacks it — before 5.11 — or a seccomp
    /// filter refuses it: [`wait`](Self::wait) then uses `epoll_wait`, whose timeout is in ms).
    pwait2: AtomicBool,
}

/// The epoll token of the eventfd (a source's token is its descriptor, never negative).
const EVENT_TOKEN: u64 = u64::MAX;

impl Poller {
    fn new() -> io::Result<Self> {
        // SAFETY: `epoll_create1` takes no pointers; a non-negative result is a new descriptor
        // nothing else owns.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: see above.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        // SAFETY: `eventfd` takes no pointers; as above.
        let event = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if event < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: see above.
        let event = unsafe { OwnedFd::from_raw_fd(event) };
        let poller =
            Self { epoll, event, watched: Mutex::new(None), pwait2: AtomicBool::new(true) };
        poller.control(libc::EPOLL_CTL_ADD, poller.event.as_raw_fd(), EVENT_TOKEN)?;
        Ok(poller)
    }

    fn control(&self, op: libc::c_int, fd: RawFd, token: u64) -> io::Result<()> {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `event` is a live, initialised `epoll_event` the kernel only reads.
        if unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), op, fd, &mut event) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Makes `source` (descriptor, key) the one watched besides the eventfd.
    fn watch(&self, source: (RawFd, u64)) -> io::Result<()> {
        let mut watched = self.watched.lock().unwrap_or_else(|p| p.into_inner());
        if *watched == Some(source) {
            return Ok(());
        }
        if let Some((old, _)) = watched.take() {
            // Fails harmlessly when the old file is closed (epoll dropped it then).
            let _ = self.control(libc::EPOLL_CTL_DEL, old, 0);
        }
        let token = u64::try_from(source.0).unwrap_or(0);
        match self.control(libc::EPOLL_CTL_ADD, source.0, token) {
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                self.control(libc::EPOLL_CTL_MOD, source.0, token)?
            }
            other => other?,
        }
        *watched = Some(source);
        Ok(())
    }

    /// Waits until the eventfd or the watched descriptor is readable, or `timeout` passes;
    /// resets the eventfd if it was signalled.
    fn wait(&self, timeout: Option<Duration>) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 2];
        let spec = timeout.map(|t| libc::timespec {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(t.subsec_nanos()),
        });
        let spec_ptr = spec.as_ref().map_or(std::ptr::null(), |s| s as *const libc::timespec);
        let mut n = -1;
        if self.pwait2.load(Ordering::Relaxed) {
            // SAFETY: `events` has room for the 2 entries we allow; `spec_ptr` is null or points
            // at a live `timespec`; a null signal mask leaves the thread's mask unchanged.
            n = unsafe {
                libc::epoll_pwait2(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    2,
                    spec_ptr,
                    std::ptr::null(),
                )
            };
            let missing = [Some(libc::ENOSYS), Some(libc::EPERM)];
            if n < 0 && missing.contains(&io::Error::last_os_error().raw_os_error()) {
                // Taken for a wake-up, the error would make an idle worker spin.
                tracing::warn!("epoll_pwait2 is not available: idle waits time out in whole ms");
                self.pwait2.store(false, Ordering::Relaxed);
            }
        }
        if !self.pwait2.load(Ordering::Relaxed) {
            // Rounded up, so that a wait never ends before its timeout.
            let ms = timeout.map_or(-1, |t| {
                libc::c_int::try_from(t.as_micros().div_ceil(1000)).unwrap_or(libc::c_int::MAX)
            });
            // SAFETY: `events` has room for the 2 entries we allow.
            n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), 2, ms) };
        }
        // An error left (EINTR) is a spurious wake-up: the caller looks for work again.
        let ready = usize::try_from(n).unwrap_or(0).min(events.len());
        if events[..ready].iter().any(|e| e.u64 == EVENT_TOKEN) {
            drain(self.event.as_raw_fd());
        }
    }
}

impl Notify {
    /// Registers the calling thread as the consumer.
    pub(crate) fn bind_current(&self) {
        let _ = self.thread.set(std::thread::current());
    }

    /// Wakes the consumer if it sleeps. Call after publishing work.
    pub(crate) fn notify(&self) {
        // Pairs with the fence in `wait`: either the consumer sees the work, or we see it asleep.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed)
            && self.sleeping.swap(false, Ordering::AcqRel)
            && let Some(t) = self.thread.get()
        {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            if let Some(poller) = self.poller.get() {
                signal(poller.event.as_raw_fd());
            }
            // Also when the consumer waits in `ppoll` now: it may still be parked from before
            // the eventfd existed, and an unpark of a thread that is not parked is one atomic.
            t.unpark();
        }
    }

    /// The consumer's epoll set, made on first use.
    fn poller(&self) -> io::Result<&Poller> {
        if let Some(p) = self.poller.get() {
            return Ok(p);
        }
        let made = Poller::new()?;
        Ok(self.poller.get_or_init(|| made))
    }

    /// Waits, as [`wait`](Self::wait) does, for work (as told by `has_work`), for `source`'s
    /// descriptor to become readable, or for `timeout`; in [`WaitMode::Spin`] by polling the
    /// descriptor without blocking between checks. `source` is the descriptor and a key that
    /// changes whenever the file behind it may have (the number may be reused). Falls back to
    /// [`wait`](Self::wait) if no epoll set can be made.
    pub(crate) fn wait_on(
        &self,
        mode: WaitMode,
        timeout: Option<Duration>,
        source: (RawFd, u64),
        has_work: impl Fn() -> bool,
    ) {
        match mode {
            WaitMode::Spin => self.wait(mode, timeout, || has_work() || readable(source.0)),
            WaitMode::Sleep => match self.poller().and_then(|p| p.watch(source).map(|()| p)) {
                Ok(poller) => self.sleep_unless(has_work, || poller.wait(timeout)),
                Err(e) => {
                    log_poller_error(&e);
                    self.wait(mode, timeout, has_work)
                }
            },
        }
    }

    /// Waits, as [`wait_on`](Self::wait_on) does, but by running a front end's event loop
    /// (`drive`, `ingress::Driver`) until this handle's epoll set is readable — its eventfd
    /// signalled, or `source` (an ingress's socket beside) readable — or `timeout` passes; in
    /// [`WaitMode::Spin`] by turns that do not wait. The loop is given the epoll set's
    /// descriptor, one that lives as long as this handle. Falls back to [`wait`](Self::wait) if
    /// no epoll set can be made (the loop then runs only on the front end's own thread).
    pub(crate) fn wait_driving(
        &self,
        mode: WaitMode,
        timeout: Option<Duration>,
        source: Option<(RawFd, u64)>,
        has_work: impl Fn() -> bool,
        drive: impl Fn(RawFd, Option<Duration>),
    ) {
        let watched = self.poller().and_then(|p| match source {
            Some(source) => p.watch(source).map(|()| p),
            None => Ok(p),
        });
        let poller = match watched {
            Ok(p) => p,
            Err(e) => {
                log_poller_error(&e);
                return self.wait(mode, timeout, has_work);
            }
        };
        let wake = poller.epoll.as_raw_fd();
        match mode {
            WaitMode::Spin => {
                let start = std::time::Instant::now();
                while !has_work() && !source.is_some_and(|(fd, _)| readable(fd)) {
                    if timeout.is_some_and(|t| start.elapsed() >= t) {
                        return;
                    }
                    drive(wake, Some(Duration::ZERO));
                }
            }
            WaitMode::Sleep => self.sleep_unless(has_work, || {
                drive(wake, timeout);
                drain(poller.event.as_raw_fd());
            }),
        }
    }

    /// Marks the consumer asleep and, unless `has_work` then says otherwise, blocks in `block`
    /// (counted as a sleep). Pairs with the fence in [`notify`](Self::notify): either the
    /// consumer sees the work, or the producer sees it asleep and wakes it.
    fn sleep_unless(&self, has_work: impl Fn() -> bool, block: impl FnOnce()) {
        // Release: a producer that takes the flag (an acquiring swap) also sees the poller this
        // thread made before its first sleep, and writes its eventfd rather than only unparking.
        self.sleeping.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        if !has_work() {
            self.sleeps.fetch_add(1, Ordering::Relaxed);
            block();
        }
        self.sleeping.store(false, Ordering::Relaxed);
    }

    /// Wake-ups issued to the consumer so far (unparks of a sleeping consumer).
    pub(crate) fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Times the consumer went to sleep so far.
    pub(crate) fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::Relaxed)
    }

    /// Waits for work (as told by `has_work`) for at most `timeout`, in `mode`.
    pub(crate) fn wait(
        &self,
        mode: WaitMode,
        timeout: Option<Duration>,
        has_work: impl Fn() -> bool,
    ) {
        match mode {
            WaitMode::Spin => {
                let start = std::time::Instant::now();
                while !has_work() {
                    if timeout.is_some_and(|t| start.elapsed() >= t) {
                        return;
                    }
                    std::hint::spin_loop();
                }
            }
            WaitMode::Sleep => self.sleep_unless(has_work, || match timeout {
                Some(t) => std::thread::park_timeout(t),
                None => std::thread::park(),
            }),
        }
    }
}

/// Adds one to eventfd `fd` (a wake-up; never blocks: a full counter is already a wake-up).
fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live `u64` to a descriptor this handle owns.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Resets eventfd `fd` (non-blocking: nothing to read is fine).
fn drain(fd: RawFd) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live `u64` from a descriptor this handle owns.
    let _ = unsafe { libc::read(fd, (&raw mut count).cast(), 8) };
}

/// Whether `fd` is readable now (a `poll` that does not wait).
fn readable(fd: RawFd) -> bool {
    let mut polled = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one live, initialised `pollfd`; a zero timeout does not block.
    unsafe { libc::poll(&mut polled, 1, 0) > 0 }
}

/// Says once per process that a worker cannot wait on its socket (it then waits as without one
/// and is woken only by notifications and timeouts: its socket is read by the front end).
fn log_poller_error(e: &io::Error) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        tracing::warn!("cannot wait on a front end's socket ({e}): workers do not read it")
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A consumer waiting on a descriptor wakes for a notification (through the eventfd), for
    /// the descriptor becoming readable, and at its timeout.
    #[test]
    fn a_consumer_waiting_on_a_descriptor_wakes_for_either() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = socket.as_raw_fd();
        let notify = Arc::new(Notify::default());
        let work = Arc::new(AtomicBool::new(false));
        let (n, w) = (Arc::clone(&notify), Arc::clone(&work));
        let consumer = std::thread::spawn(move || {
            n.bind_current();
            let start = std::time::Instant::now();
            while !w.load(Ordering::Acquire) {
                n.wait_on(WaitMode::Sleep, None, (fd, 0), || w.load(Ordering::Acquire));
            }
            start.elapsed()
        });
        while notify.sleeps() == 0 {
            std::thread::yield_now();
        }
        work.store(true, Ordering::Release);
        notify.notify();
        let waited = consumer.join().unwrap();
        assert!(waited < Duration::from_secs(5), "woken by the notification");
        assert!(notify.wakeups() >= 1);

        // Readable descriptor: the wait returns without a notification.
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        let start = std::time::Instant::now();
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_secs(30)), (fd, 0), || false);
        assert!(start.elapsed() < Duration::from_secs(10), "woken by the datagram");
        let start = std::time::Instant::now();
        notify.wait_on(WaitMode::Spin, Some(Duration::from_secs(30)), (fd, 0), || false);
        assert!(start.elapsed() < Duration::from_secs(10), "spinning: sees the datagram");

        // Another source (a front end restarted): the set follows it.
        let other = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"y", other.local_addr().unwrap()).unwrap();
        let start = std::time::Instant::now();
        let key = (other.as_raw_fd(), 1);
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_secs(30)), key, || false);
        assert!(start.elapsed() < Duration::from_secs(10), "woken by the other socket");
        drop(other);

        // Nothing to read, no work: the timeout ends it.
        let mut buf = [0u8; 8];
        socket.recv(&mut buf).unwrap();
        let start = std::time::Instant::now();
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_millis(20)), (fd, 0), || false);
        assert!(start.elapsed() >= Duration::from_millis(19));
    }

    /// Where `epoll_pwait2` is missing (a kernel before 5.11, a seccomp filter), the wait falls
    /// back to `epoll_wait` and still sleeps: until its timeout, a readable descriptor or a
    /// notification. Before, the error was taken for a wake-up and an idle worker spun.
    #[test]
    fn without_epoll_pwait2_a_consumer_still_sleeps() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = socket.as_raw_fd();
        let notify = Notify::default();
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_millis(1)), (fd, 0), || false);
        notify.poller.get().unwrap().pwait2.store(false, Ordering::Relaxed);

        let start = std::time::Instant::now();
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_micros(20_500)), (fd, 0), || false);
        assert!(start.elapsed() >= Duration::from_micros(20_500), "slept its timeout out");

        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(b"x", socket.local_addr().unwrap()).unwrap();
        let start = std::time::Instant::now();
        notify.wait_on(WaitMode::Sleep, Some(Duration::from_secs(30)), (fd, 0), || false);
        assert!(start.elapsed() < Duration::from_secs(10), "woken by the datagram");

        let mut buf = [0u8; 8];
        socket.recv(&mut buf).unwrap();
        let notify = Arc::new(notify);
        let before = notify.sleeps();
        let n = Arc::clone(&notify);
        let consumer = std::thread::spawn(move || {
            n.bind_current();
            let start = std::time::Instant::now();
            n.wait_on(WaitMode::Sleep, Some(Duration::from_secs(30)), (fd, 0), || false);
            start.elapsed()
        });
        while notify.sleeps() == before {
            std::thread::yield_now();
        }
        notify.notify();
        assert!(consumer.join().unwrap() < Duration::from_secs(10), "woken by the notification");
    }
}
