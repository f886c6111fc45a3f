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

use std::os::fd::RawFd;

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
}
