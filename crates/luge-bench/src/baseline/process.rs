//! The process-per-request baseline (the Sledge paper's churn comparison): every request starts
//! a fresh native process (`std::process::Command`: `posix_spawn`, or fork + exec), writes the
//! request body to its stdin, reads its stdout, waits for it and answers with the output.
//!
//! - HTTP (any method, any path) is served by hyper on a tokio runtime set up like Luge's HTTP
//!   front end (see [`super::http`]); `200` with stdout, or the status of the failure with a
//!   `Luge-Outcome` label (`exit_failure` → 500, …) so load generators classify it as Luge's.
//! - UDP-RPC uses the shared receive loop ([`super::rpc`]): a Ping is answered at once, a
//!   Request becomes a task on the runtime; the response is sent with `sendto` from the thread
//!   that waited for the process, as Luge's completions are. There is no duplicate cache: a
//!   retransmission starts another process.
//! - A process is started, fed and waited for on tokio's blocking pool; a semaphore bounds the
//!   processes alive at once ([`ProcessConfig::concurrency`]) and requests beyond it wait. UDP
//!   requests waiting or running are bounded by [`ProcessConfig::max_pending`], beyond which
//!   they are refused `Overloaded`.
//! - Not bounded: a process's run time. The programs are trusted (`/bin/true`, the native
//!   builds of Luge's own functions); one that never exits holds its permit forever.
//!
//! Stdin: an input of at most [`INLINE_INPUT`] bytes is written before reading (it fits the
//! pipe); a larger one is written by a helper thread while the output is read, so that a
//! program writing before it has read everything cannot deadlock with us. Stderr goes to
//! `/dev/null`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use luge_proto::{
    Flags, MAX_DATAGRAM, Message, RESPONSE_HEADER_LEN, Response as RpcResponse, ResponseHeader,
    Status,
};
use tokio::sync::Semaphore;

use super::http::{Host, HttpSettings, listen, runtime, serve, stopped, text};
use super::rpc::{self, OnRequest, Receiver};
use super::{BaselineError, BaselineStats, Counters, SHUTDOWN_GRACE, bump};
use luge_server::HttpConfig;
use luge_server::UdpConfig;
use luge_server::net::{self as sys, SendBatch};

/// Inputs up to this size are written to the child's stdin before its output is read: at most
/// one page, which an empty pipe always takes without blocking.
const INLINE_INPUT: usize = 4096;
/// Largest payload of a Response.
const MAX_RESPONSE_PAYLOAD: usize = MAX_DATAGRAM - RESPONSE_HEADER_LEN;
/// `Luge-Outcome`, as Luge's HTTP front end sends it.
const OUTCOME: HeaderName = HeaderName::from_static(luge_proto::OUTCOME_HEADER);
/// The no-op program used when no native build of the function is at hand.
const NOOP_PROGRAM: &str = "/bin/true";

/// Settings of the [`ProcessServer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessConfig {
    /// HTTP address to listen on (`None` = no HTTP; port 0 = any free port).
    pub http_addr: Option<SocketAddr>,
    /// UDP-RPC address to bind (`None` = no UDP; port 0 = any free port).
    pub udp_addr: Option<SocketAddr>,
    /// The program run per request: a path, or a bare name looked up in `PATH`. Default
    /// `/bin/true`; for a fair comparison the native build of the function Luge runs, see
    /// [`native_program`].
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Tokio worker threads (1 = a current-thread runtime on the server's own thread), as
    /// Luge's HTTP front end. Processes are started and waited for on tokio's blocking pool.
    pub threads: usize,
    /// Processes alive at once; further requests wait for one to finish.
    pub concurrency: usize,
    /// UDP requests waiting or running at once; beyond, they are refused `Overloaded`.
    pub max_pending: usize,
    /// UDP: spin on a non-blocking socket instead of sleeping in `recvmmsg`.
    pub busy_poll: bool,
    /// UDP: datagrams received per `recvmmsg`.
    pub batch: usize,
    /// HTTP: largest request body (else 413), as Luge's default function limit.
    pub max_request_bytes: usize,
    /// Largest output (HTTP; UDP is also bounded by the datagram): a process writing more is
    /// killed and the request fails `output_too_large`.
    pub max_output_bytes: usize,
}

impl Default for ProcessConfig {
    /// `/bin/true` on both protocols on `127.0.0.1:0`, one tokio thread, 64 processes at once.
    fn default() -> Self {
        let localhost = SocketAddr::from(([127, 0, 0, 1], 0));
        Self {
            http_addr: Some(localhost),
            udp_addr: Some(localhost),
            program: PathBuf::from(NOOP_PROGRAM),
            args: Vec::new(),
            threads: 1,
            concurrency: 64,
            max_pending: 65_536,
            busy_poll: false,
            batch: 32,
            max_request_bytes: 1 << 20,
            max_output_bytes: 1 << 20,
        }
    }
}

/// The native build of function `name` under `functions_dir` (the repository's `functions/`):
/// `functions_dir/build/native/<name>`, if `make -C functions` has built it (an executable
/// file); `None` otherwise (fall back to the default `/bin/true` for a no-op).
pub fn native_program(functions_dir: &Path, name: &str) -> Option<PathBuf> {
    let path = functions_dir.join("build").join("native").join(name);
    is_executable(&path).then_some(path)
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks that `program` names an executable file, as `Command` will resolve it.
fn check_program(program: &Path) -> Result<(), BaselineError> {
    let fail = |reason: &str| BaselineError::Program {
        program: program.to_owned(),
        reason: reason.to_owned(),
    };
    if program.as_os_str().is_empty() {
        return Err(fail("no program given"));
    }
    if program.components().count() > 1 {
        return if is_executable(program) { Ok(()) } else { Err(fail("not an executable file")) };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program))) {
        Ok(())
    } else {
        Err(fail("not found in PATH"))
    }
}

/// State shared by the handlers, the tasks and the handle.
struct Shared {
    program: PathBuf,
    args: Vec<String>,
    /// One permit per process alive.
    slots: Arc<Semaphore>,
    max_request_bytes: usize,
    max_output_bytes: usize,
    max_pending: usize,
    /// UDP requests admitted and not answered yet.
    pending: AtomicUsize,
    counters: Arc<Counters>,
}

impl Shared {
    /// Runs the program once on `input`: its stdout, or the status and message of the failure.
    /// Blocks for the life of the process.
    fn run(&self, input: &[u8], max_output: usize) -> Result<Vec<u8>, (Status, String)> {
        let mut child = match Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                bump(&self.counters.spawn_errors);
                let message = format!("cannot start `{}`: {e}", self.program.display());
                tracing::warn!("{message}");
                return Err((Status::Internal, message));
            }
        };
        bump(&self.counters.spawned);
        let output = exchange(&mut child, input, max_output);
        let status = match child.wait() {
            Ok(status) => status,
            Err(e) => return Err((Status::Internal, format!("cannot wait for the process: {e}"))),
        };
        let output = match output {
            Exchanged::Output(output) => output,
            Exchanged::TooLarge => {
                return Err((
                    Status::OutputTooLarge,
                    format!("output exceeds the limit of {max_output} bytes"),
                ));
            }
            Exchanged::Failed(e) => {
                return Err((Status::Internal, format!("cannot read the output: {e}")));
            }
        };
        if status.success() {
            return Ok(output);
        }
        bump(&self.counters.exit_failures);
        let message = match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(signal)) => format!("killed by signal {signal}"),
            (None, None) => status.to_string(),
        };
        Err((Status::ExitFailure, message))
    }
}

/// What came out of a child.
enum Exchanged {
    Output(Vec<u8>),
    /// More than the limit: the child was killed.
    TooLarge,
    /// Reading failed: the child was killed.
    Failed(io::Error),
}

/// Feeds `input` to the child's stdin (closing it) while reading its stdout to the end, up to
/// `max_output` bytes. Kills the child if it writes more, or if reading fails.
fn exchange(child: &mut Child, input: &[u8], max_output: usize) -> Exchanged {
    let stdin = child.stdin.take();
    let Some(mut stdout) = child.stdout.take() else {
        // Unreachable: stdout was piped.
        let _ = child.kill();
        return Exchanged::Failed(io::Error::other("no stdout pipe"));
    };
    let mut output = Vec::new();
    let limit = u64::try_from(max_output).unwrap_or(u64::MAX).saturating_add(1);
    std::thread::scope(|scope| {
        if let Some(stdin) = stdin {
            if input.len() <= INLINE_INPUT {
                feed(stdin, input);
            } else {
                scope.spawn(move || feed(stdin, input));
            }
        }
        let read = (&mut stdout).take(limit).read_to_end(&mut output);
        let result = match read {
            Ok(_) if output.len() > max_output => Exchanged::TooLarge,
            Ok(_) => return Exchanged::Output(output),
            Err(e) => Exchanged::Failed(e),
        };
        // Unblocks the feeding thread too: the pipe's reader is gone.
        let _ = child.kill();
        result
    })
}

/// Writes `input` to the child's stdin and closes it; a child that exits without reading all
/// of it (`/bin/true`) is no error.
fn feed(mut stdin: ChildStdin, input: &[u8]) {
    if let Err(e) = stdin.write_all(input)
        && e.kind() != io::ErrorKind::BrokenPipe
    {
        tracing::debug!("cannot write the process's stdin: {e}");
    }
}

/// Decrements the pending count of a UDP request when it is answered (or abandoned).
struct Pending(Arc<Shared>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Hands UDP requests to the runtime.
struct Spawner {
    shared: Arc<Shared>,
    socket: Arc<UdpSocket>,
    runtime: tokio::runtime::Handle,
}

impl OnRequest for Spawner {
    fn request(
        &mut self,
        peer: SocketAddr,
        request: &luge_proto::Request<'_>,
        received: Instant,
        out: &mut SendBatch,
    ) {
        let id = request.header.request_id;
        let shared = &self.shared;
        if shared.pending.fetch_add(1, Ordering::SeqCst) >= shared.max_pending {
            shared.pending.fetch_sub(1, Ordering::SeqCst);
            bump(&shared.counters.overloaded);
            let header = ResponseHeader::new(id, Status::Overloaded);
            let message = b"too many requests pending";
            let reply = Message::Response(RpcResponse { header, payload: message });
            if reply.encode(out.push(peer)).is_err() {
                out.pop();
            }
            return;
        }
        let pending = Pending(Arc::clone(shared));
        let payload = request.payload.to_vec();
        let socket = Arc::clone(&self.socket);
        self.runtime.spawn(async move {
            let Ok(permit) = Arc::clone(&pending.0.slots).acquire_owned().await else { return };
            let job = tokio::task::spawn_blocking(move || {
                let shared = &pending.0;
                let result =
                    shared.run(&payload, shared.max_output_bytes.min(MAX_RESPONSE_PAYLOAD));
                drop(permit);
                let (status, message);
                let body: &[u8] = match &result {
                    Ok(output) => {
                        status = Status::Ok;
                        output
                    }
                    Err((failure, reason)) => {
                        status = *failure;
                        message = truncate_utf8(reason, MAX_RESPONSE_PAYLOAD);
                        message
                    }
                };
                let header = ResponseHeader {
                    request_id: id,
                    flags: Flags::NONE,
                    status,
                    execution_ns: 0,
                    queueing_ns: luge_proto::nanos(received.elapsed()),
                };
                let mut bytes = Vec::with_capacity(RESPONSE_HEADER_LEN + body.len());
                if Message::Response(RpcResponse { header, payload: body })
                    .encode(&mut bytes)
                    .is_err()
                {
                    // Unreachable: the payload was bounded above.
                    tracing::error!("cannot encode the response to request {id}");
                    return;
                }
                if let Err(e) = sys::send_to(socket.as_raw_fd(), &bytes, peer, libc::MSG_DONTWAIT) {
                    tracing::debug!("process baseline: cannot send the response to {peer}: {e}");
                    bump(&shared.counters.send_errors);
                }
            });
            if job.await.is_err() {
                tracing::error!("a process baseline job panicked");
            }
        });
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
fn truncate_utf8(s: &str, max: usize) -> &[u8] {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// An HTTP request: read the body, run the program, answer.
async fn answer_http(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    bump(&shared.counters.requests);
    let body = match Limited::new(request.into_body(), shared.max_request_bytes).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
            let message = format!("request body exceeds {} bytes", shared.max_request_bytes);
            return failure(Status::TooLarge, message);
        }
        Err(e) => return failure(Status::BadRequest, e.to_string()),
    };
    let Ok(permit) = Arc::clone(&shared.slots).acquire_owned().await else {
        return failure(Status::ShuttingDown, "the server is stopping".into());
    };
    let job = tokio::task::spawn_blocking(move || {
        let result = shared.run(&body, shared.max_output_bytes);
        drop(permit);
        result
    });
    match job.await {
        Ok(Ok(output)) => text(StatusCode::OK, output.into()),
        Ok(Err((status, message))) => failure(status, message),
        Err(e) => failure(Status::Internal, format!("the job failed: {e}")),
    }
}

/// The HTTP response of a failed request: the status's HTTP code and `Luge-Outcome` label.
fn failure(status: Status, message: String) -> Response<Full<Bytes>> {
    let code =
        StatusCode::from_u16(status.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = text(code, message.into());
    response.headers_mut().insert(OUTCOME, HeaderValue::from_static(status.label()));
    response
}

/// A running process-per-request baseline. Dropping it stops it without waiting for the UDP
/// requests in flight.
#[derive(Debug)]
pub struct ProcessServer {
    udp: Option<Receiver>,
    host: Host,
    shared: Arc<Shared>,
    http_addr: Option<SocketAddr>,
    udp_addr: Option<SocketAddr>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("pending", &self.pending.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ProcessServer {
    /// Checks the program, binds the configured addresses and starts serving (thread
    /// `luge-proc`, plus `luge-proc-recv` for UDP).
    pub fn start(config: ProcessConfig) -> Result<Self, BaselineError> {
        if config.http_addr.is_none() && config.udp_addr.is_none() {
            return Err(BaselineError::Config("neither an HTTP nor a UDP address".into()));
        }
        if config.concurrency == 0 {
            return Err(BaselineError::Config("concurrency must be at least 1".into()));
        }
        check_program(&config.program)?;
        // Transport settings as Luge's front ends have them by default.
        let (luge_http, luge_udp) = (HttpConfig::default(), UdpConfig::default());
        let rt = runtime(config.threads, "luge-proc")?;
        let listener = match config.http_addr {
            Some(addr) => {
                let _context = rt.enter();
                Some(listen(addr, luge_http.backlog)?)
            }
            None => None,
        };
        let http_addr = match &listener {
            Some(l) => Some(l.local_addr().map_err(BaselineError::Socket)?),
            None => None,
        };
        let socket = match config.udp_addr {
            Some(addr) => Some(rpc::bind(
                addr,
                config.busy_poll,
                luge_udp.recv_buffer_bytes,
                luge_udp.send_buffer_bytes,
            )?),
            None => None,
        };
        let counters = Arc::new(Counters::default());
        let concurrency = config.concurrency.min(Semaphore::MAX_PERMITS);
        let shared = Arc::new(Shared {
            program: config.program,
            args: config.args,
            slots: Arc::new(Semaphore::new(concurrency)),
            max_request_bytes: config.max_request_bytes,
            max_output_bytes: config.max_output_bytes,
            max_pending: config.max_pending,
            pending: AtomicUsize::new(0),
            counters: Arc::clone(&counters),
        });
        let handle = rt.handle().clone();
        let http_shared = Arc::clone(&shared);
        let settings = HttpSettings {
            max_connections: luge_http.max_connections,
            header_read_timeout: luge_http.header_read_timeout,
        };
        let host = Host::start(rt, "luge-proc", move |stop| async move {
            match listener {
                Some(listener) => {
                    let handler = move |request| answer_http(Arc::clone(&http_shared), request);
                    serve(listener, settings, stop, handler).await;
                }
                None => stopped(stop).await,
            }
        })?;
        let udp = match socket {
            Some(socket) => {
                let spawner = Spawner {
                    shared: Arc::clone(&shared),
                    socket: Arc::clone(&socket),
                    runtime: handle,
                };
                Some(Receiver::start(
                    "luge-proc-recv",
                    socket,
                    config.busy_poll,
                    config.batch,
                    counters,
                    spawner,
                )?)
            }
            None => None,
        };
        let udp_addr = udp.as_ref().map(Receiver::local_addr);
        tracing::info!(
            program = %shared.program.display(),
            http = ?http_addr,
            udp = ?udp_addr,
            "process baseline listening"
        );
        Ok(Self { udp, host, shared, http_addr, udp_addr })
    }

    /// The HTTP address, if serving HTTP.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The UDP-RPC address, if serving UDP.
    pub fn udp_addr(&self) -> Option<SocketAddr> {
        self.udp_addr
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> BaselineStats {
        self.shared.counters.snapshot()
    }

    /// Stops receiving UDP, waits up to 2 s for the UDP requests in flight to be answered, then
    /// stops the HTTP server as [`BareHttpServer::shutdown`](super::BareHttpServer::shutdown)
    /// does. Returns the UDP requests still unanswered (0 = drained).
    pub fn shutdown(mut self) -> usize {
        if let Some(udp) = &mut self.udp {
            udp.stop();
        }
        let start = Instant::now();
        let mut left = self.shared.pending.load(Ordering::SeqCst);
        while left > 0 && start.elapsed() < SHUTDOWN_GRACE {
            std::thread::sleep(Duration::from_millis(1));
            left = self.shared.pending.load(Ordering::SeqCst);
        }
        self.host.stop();
        left
    }
}
