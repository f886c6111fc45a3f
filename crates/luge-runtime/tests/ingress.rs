//! An inline worker that runs short requests back to back — so it neither waits nor hands its
//! socket to the front end's thread — still takes turns of an attached [`Ingress`]: after every
//! run (answers held long enough go out) and, every 500 µs, a read of the socket. Without them a
//! socket whose requests are not the ones keeping the worker busy (another front end's, here
//! the test's own submissions) went unread, and its answers unsent, until the worker was idle.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use luge_runtime::{FunctionConfig, Ingress, Layout, Runtime, RuntimeConfig, SubmitOptions};

const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");

/// A socket nothing is ever sent to: counts the worker's calls.
struct Counting {
    /// Never readable: nothing writes to its peer.
    socket: UnixStream,
    _peer: UnixStream,
    turns: AtomicUsize,
    reads: AtomicUsize,
}

impl Ingress for Counting {
    fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    fn poll(&self) -> usize {
        0
    }

    fn busy(&self) {}

    fn idle(&self) {}

    fn turn(&self, read: bool) {
        self.turns.fetch_add(1, Ordering::Relaxed);
        if read {
            self.reads.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[test]
fn a_worker_busy_with_short_runs_still_reads_its_socket() {
    let config = RuntimeConfig { workers: 1, layout: Layout::Inline, ..RuntimeConfig::default() };
    let rt = Runtime::start(config).unwrap();
    // Declared ultra-short: every request is a short run, which calls no `busy`.
    let mut spin = FunctionConfig::new("spin");
    spin.ull = true;
    spin.relative_deadline = Duration::from_secs(30);
    rt.register(spin, SPIN.as_bytes()).unwrap();
    let (socket, peer) = UnixStream::pair().unwrap();
    let ingress = Arc::new(Counting {
        socket,
        _peer: peer,
        turns: AtomicUsize::new(0),
        reads: AtomicUsize::new(0),
    });
    assert!(rt.attach_ingress(0, Arc::clone(&ingress) as Arc<dyn Ingress>).is_ok());
    // 400 runs of ~20–60 µs each, submitted at once: well over 500 µs back to back.
    let tickets: Vec<_> =
        (0..400).map(|_| rt.submit("spin", b"10000".to_vec(), SubmitOptions::default())).collect();
    for t in tickets {
        let outcome = t.wait_timeout(Duration::from_secs(30)).unwrap();
        assert!(outcome.result.is_ok(), "{:?}", outcome.result);
    }
    let (turns, reads) =
        (ingress.turns.load(Ordering::Relaxed), ingress.reads.load(Ordering::Relaxed));
    // One turn after every run; a read at least every 500 µs of them (the worker may go idle
    // between submissions, where it reads without a turn, so not every run is counted).
    assert!(turns >= 100, "{turns} turns for 400 runs");
    assert!(reads >= 2, "{reads} reads in {turns} turns");
    assert!(reads < turns, "a read in every one of {turns} turns");
    rt.detach_ingress(0);
    rt.shutdown();
}
