//! Threads outside the runtime that serve it (a front end's receive threads): one that dies by
//! a panic makes the runtime not ready, as a stopped thread of its own does, so `/readyz`, the
//! status page and a load balancer see a node whose UDP-RPC went silent.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Inner, Runtime};

/// Held by a thread that serves the runtime from outside it, for the thread's life: dropped by
/// a panic's unwinding, it marks the runtime not ready ([`Runtime::health`]).
#[must_use = "a watch reports the thread's panic when it is dropped by it"]
pub struct ThreadWatch {
    inner: Arc<Inner>,
    name: String,
}

impl std::fmt::Debug for ThreadWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadWatch").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Drop for ThreadWatch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.inner.serving_thread_died.store(true, Ordering::SeqCst);
            tracing::error!(thread = self.name, "a thread serving the runtime panicked");
        }
    }
}

impl Runtime {
    /// A watch for the calling thread, `name`d in the error it logs if the thread panics.
    pub fn watch_thread(&self, name: impl Into<String>) -> ThreadWatch {
        ThreadWatch { inner: Arc::clone(&self.inner), name: name.into() }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use crate::{Health, Runtime, RuntimeConfig};

    #[test]
    fn a_watched_thread_that_panics_makes_the_runtime_not_ready() {
        let runtime =
            Runtime::start(RuntimeConfig { workers: 1, ..RuntimeConfig::default() }).unwrap();
        // A thread that ends normally changes nothing.
        let watch = runtime.watch_thread("fine");
        std::thread::spawn(move || drop(watch)).join().unwrap();
        assert_eq!(runtime.health_ignoring_load(), Health::Ready);
        assert_eq!(runtime.stopped_thread(), None);
        let watch = runtime.watch_thread("doomed");
        let died = std::thread::spawn(move || {
            let _watch = watch;
            panic!("a receive thread's bug");
        });
        assert!(died.join().is_err());
        let expected = Health::NotReady("a thread serving the runtime has stopped");
        assert_eq!(runtime.health_ignoring_load(), expected);
        assert_eq!(runtime.health(), expected);
        assert_eq!(runtime.stopped_thread(), Some("a thread serving the runtime has stopped"));
        runtime.shutdown();
    }

    /// Liveness is answered while a shutdown drains: the shutdown holds the thread list while it
    /// joins the threads, and `/healthz` asked for it before it looked at whether the runtime
    /// still accepts — so it waited out the drain.
    #[test]
    fn liveness_is_answered_while_a_shutdown_drains() {
        use std::sync::{Arc, mpsc};
        use std::time::Duration;

        use crate::{FunctionConfig, SubmitOptions};

        const SPIN: &str = include_str!("../../../../functions/builtin/spin.wat");
        let config = RuntimeConfig {
            workers: 1,
            shutdown_grace: Duration::from_secs(30),
            ..RuntimeConfig::default()
        };
        let runtime = Arc::new(Runtime::start(config).unwrap());
        let mut spin = FunctionConfig::new("spin");
        spin.relative_deadline = Duration::from_secs(30);
        runtime.register(spin, SPIN.as_bytes()).unwrap();
        // ~0.5 s of guest work: the drain waits for it.
        let ticket = runtime.submit("spin", b"200000000".to_vec(), SubmitOptions::default());
        std::thread::sleep(Duration::from_millis(50));
        let (done, drained) = mpsc::channel();
        let stopping = Arc::clone(&runtime);
        std::thread::spawn(move || {
            stopping.shutdown();
            done.send(()).unwrap();
        });
        while runtime.health_ignoring_load() != Health::NotReady("shutting down") {
            std::thread::yield_now();
        }
        assert_eq!(runtime.stopped_thread(), None);
        assert!(drained.try_recv().is_err(), "liveness waited for the drain to end");
        drained.recv().unwrap();
        assert!(ticket.wait().result.is_ok());
    }

    #[test]
    fn a_runtime_shut_down_on_purpose_has_no_stopped_thread() {
        let runtime =
            Runtime::start(RuntimeConfig { workers: 1, ..RuntimeConfig::default() }).unwrap();
        runtime.shutdown();
        assert_eq!(runtime.stopped_thread(), None, "its threads stopped by design");
        assert_eq!(runtime.health_ignoring_load(), Health::NotReady("shutting down"));
    }
}
