//! Waking an idle thread: park/unpark with a "sleeping" flag so that a producer pays for an
//! unpark system call only when the consumer is actually asleep, or pure busy-polling in
//! [`WaitMode::Spin`]. Each handle counts the wake-ups it issued and the sleeps it took (each a
//! futex system call), for `Runtime::group_stats`.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
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
            t.unpark();
        }
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
            WaitMode::Sleep => {
                self.sleeping.store(true, Ordering::Relaxed);
                fence(Ordering::SeqCst);
                if !has_work() {
                    self.sleeps.fetch_add(1, Ordering::Relaxed);
                    match timeout {
                        Some(t) => std::thread::park_timeout(t),
                        None => std::thread::park(),
                    }
                }
                self.sleeping.store(false, Ordering::Relaxed);
            }
        }
    }
}
