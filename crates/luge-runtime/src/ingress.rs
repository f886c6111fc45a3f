//! Requests a worker receives itself (run-to-completion; HORSE §4.1, the O(1) path to the run
//! queue, taken one step further): a front end attaches an [`Ingress`] — a socket and the code
//! that reads it — to an inline worker ([`Layout::Inline`](crate::Layout::Inline)). When the
//! worker has nothing to run it reads the socket itself and waits on it, so a request that finds
//! its worker idle is received, admitted, run and answered on that one thread: no wake-up of
//! another thread, no hand-off. While the worker runs a request not known to be short (in the uLL
//! lane or estimated at most the lane's slice, `Task::short`), or any run past that long, the
//! front end's own thread reads instead ([`Ingress::busy`]) and hands requests over as before, so
//! an urgent arrival still preempts a long run at once. The worker calls [`Ingress::idle`]
//! whenever it has nothing left to run: the front end sends what the worker answered meanwhile.
//!
//! A front end read through an event loop (HTTP: hyper on a tokio runtime, whose connections
//! are tasks, not one socket) attaches a [`Driver`] instead: the idle worker runs the event loop
//! itself until there is work, so a request read there is submitted, run and answered on the
//! worker's thread; while the worker is busy the front end's own thread runs the loop, as above.

use std::os::fd::RawFd;
use std::time::Duration;

/// A source of requests an inline worker reads when idle. Called only from that worker's
/// thread.
pub trait Ingress: Send + Sync {
    /// The descriptor the idle worker waits on: readable means there is something to read.
    fn fd(&self) -> RawFd;

    /// Reads what is waiting, without blocking, and submits it
    /// ([`Runtime::submit_to`](crate::Runtime::submit_to), from this thread); how many datagrams
    /// it read. Nothing it submits runs before it returns.
    fn poll(&self) -> usize;

    /// The worker starts something that may keep it from reading for a while (a request not
    /// known to be short, or a run that has lasted a short run's length): someone else must read
    /// meanwhile. Called often; cheap when nothing changes.
    fn busy(&self);

    /// The worker has nothing left to run (it will wait on [`fd`](Self::fd), or build ready
    /// sandboxes first): whoever read for it may stop. Also called once after a detach.
    fn idle(&self);

    /// Between two runs of a worker running short requests back to back — it neither waits
    /// nor calls [`busy`](Self::busy) meanwhile, so without this the socket would go unread
    /// and answers unsent while requests from elsewhere (another front end's loop) keep it
    /// busy: answers held long enough go out, and with `read` (at most every 500 µs) what
    /// waits on the socket is read and submitted, as [`poll`](Self::poll) does.
    fn turn(&self, read: bool);
}

/// A front end whose event loop an inline worker runs on its own thread while it waits (see the
/// module docs). Called only from that worker's thread, except where said.
pub trait Driver: Send + Sync {
    /// Runs the event loop on this thread until `wake` is readable (the worker's wake-up epoll
    /// set: readable when the worker is notified or the socket of an [`Ingress`] attached beside
    /// has data; the same descriptor at every call from one worker, open as long as the
    /// runtime) or `timeout` passes
    /// (`Some(ZERO)`: one turn that does not wait). Requests the loop submits here run after it
    /// returns.
    fn drive(&self, wake: RawFd, timeout: Option<Duration>);

    /// One turn of the loop that does not wait (answers written, arrivals read and submitted),
    /// between two runs; nothing if the front end's own thread runs the loop now.
    fn turn(&self);

    /// As [`Ingress::busy`]: the front end's own thread must run the loop meanwhile. Also
    /// called when the worker stops for good.
    fn busy(&self);

    /// As [`Ingress::idle`]: the worker runs the loop again. Also called once after a detach.
    fn idle(&self);
}
