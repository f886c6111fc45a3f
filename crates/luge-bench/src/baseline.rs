//! Baselines for `luge bench compare` (issue #6): servers started and measured by `luge bench`
//! in the same run as Luge, so that a ratio compares like with like on the same box.
//!
//! - [`UdpEchoServer`]: Luge's UDP-RPC front end minus the runtime. The same socket set-up, the
//!   same `recvmmsg` batching and poll mode (blocking `MSG_WAITFORONE`, or spinning on a
//!   non-blocking socket) and the same `sendmmsg` path (`luge_server::net`, the front end's code itself, not a copy);
//!   each Request is answered `Ok` with its own payload. It speaks `luge-proto`, so the same load
//!   generator drives both.
//! - [`BareHttpServer`]: hyper 1 on the same tokio set-up as Luge's HTTP front end (same thread
//!   count semantics, same HTTP/1.1 connection settings), answering every request `200 ok`.
//! - [`ProcessServer`]: process-per-request, the churn comparison of the Sledge paper: every
//!   request, on HTTP and/or UDP-RPC, forks and execs a native program with the body on its stdin
//!   and answers with its stdout. For a fair comparison run the native build of the *same*
//!   function (`functions/build/native/<name>`, built by `make -C functions`; see
//!   [`native_program`]); `/bin/true` is the no-op stand-in when no native no-op is built.
//!
//! None of them has Luge's duplicate cache, admission control or timing: they report an
//! execution time of 0 (a load generator then falls back to the workload's nominal time).
//! Every server binds port 0 by default (read the port back with `local_addr`), counts what it
//! did in a [`BaselineStats`], and stops on `shutdown` or when dropped.

mod echo;
mod http;
mod process;
mod rpc;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

pub use self::echo::{UdpEchoConfig, UdpEchoServer};
pub use self::http::{BareHttpConfig, BareHttpServer};
pub use self::process::{ProcessConfig, ProcessServer, native_program};

/// How long `shutdown` lets requests in flight finish before it stops waiting.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Why a baseline server could not start.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The configuration is inconsistent.
    #[error("invalid baseline configuration: {0}")]
    Config(String),
    /// An address could not be bound.
    #[error("cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// Configuring a socket failed.
    #[error("cannot configure a socket: {0}")]
    Socket(#[source] io::Error),
    /// The tokio runtime could not be built.
    #[error("cannot start the tokio runtime: {0}")]
    Runtime(#[source] io::Error),
    /// A server thread could not be spawned.
    #[error("cannot spawn a server thread: {0}")]
    Thread(#[source] io::Error),
    /// The process server's program is not an executable file.
    #[error("cannot run `{}`: {reason}", program.display())]
    Program {
        /// The program as configured.
        program: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// What a baseline server did (a snapshot; see each server's `stats`). Counters that do not
/// apply to a server stay 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BaselineStats {
    /// UDP datagrams received.
    pub datagrams: u64,
    /// Requests received: UDP-RPC Requests and HTTP requests.
    pub requests: u64,
    /// UDP-RPC Pings answered.
    pub pings: u64,
    /// Datagrams that did not decode (ignored: no reply).
    pub malformed: u64,
    /// UDP replies the kernel refused to send.
    pub send_errors: u64,
    /// Processes started (process server).
    pub spawned: u64,
    /// Processes that could not be started (process server).
    pub spawn_errors: u64,
    /// Processes that exited with a failure status or were killed by a signal (process server).
    pub exit_failures: u64,
    /// UDP requests refused `Overloaded` because too many were pending (process server).
    pub overloaded: u64,
}

/// The live counters behind [`BaselineStats`].
#[derive(Debug, Default)]
struct Counters {
    datagrams: AtomicU64,
    requests: AtomicU64,
    pings: AtomicU64,
    malformed: AtomicU64,
    send_errors: AtomicU64,
    spawned: AtomicU64,
    spawn_errors: AtomicU64,
    exit_failures: AtomicU64,
    overloaded: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> BaselineStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        BaselineStats {
            datagrams: get(&self.datagrams),
            requests: get(&self.requests),
            pings: get(&self.pings),
            malformed: get(&self.malformed),
            send_errors: get(&self.send_errors),
            spawned: get(&self.spawned),
            spawn_errors: get(&self.spawn_errors),
            exit_failures: get(&self.exit_failures),
            overloaded: get(&self.overloaded),
        }
    }
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}
