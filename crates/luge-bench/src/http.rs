//! The HTTP/1.1 driver: keep-alive connections written by the pacer and read by receiver
//! threads over epoll ([`conns`]), requests and responses framed by [`wire`].
//!
//! The pacer decides *when* (tokio's 1 ms timer is too coarse to pace an open loop) and writes
//! each request itself on an idle connection; a receiver thread reads the answers. The window
//! is the ledger's (the pacer blocks for a slot), which also bounds the connections: HTTP/1.1
//! has one request in flight per connection, and a receiver hands a connection back before the
//! answer frees its slot, so no more connections open than the window. A request's send time
//! is when the pacer takes it up; its response time is taken when the whole response has been
//! read, so connection set-up counts as latency.
//!
//! Written here rather than with hyper's client, which spawned a task per request from the
//! pacer (a wake-up of the runtime's thread each) and went through a channel to each
//! connection's task: offering 27.8 k requests/s (5× a one-worker node's capacity) it took all
//! of its CPU (101 % of CPU 0, the node alone on CPU 1), so its own queueing was measured as
//! the node's latency; this driver took 64 % there, and 48 % instead of 61 % at 11 k/s. What is
//! left is mostly the kernel's: on loopback the sender's `write` runs the receiver's TCP input.
//! The parser is `httparse`, hyper's own.
//!
//! Headers (`docs/http.md`): requests carry [`DEADLINE_HEADER`] (relative deadline, µs) and,
//! when enabled, [`EXPECTED_HEADER`]; responses are read for [`EXECUTION_HEADER`],
//! [`QUEUEING_HEADER`] and [`OUTCOME_HEADER`]. Status 200 is success; any other status is an
//! error named by the `Luge-Outcome` label when it names a known status (`overloaded`,
//! `killed`, …) or one of the two refusals without a status of their own
//! (`deadline_unreachable`, `shed`), else `http_NNN`.
//!
//! [`DEADLINE_HEADER`]: luge_proto::DEADLINE_HEADER
//! [`EXPECTED_HEADER`]: luge_proto::EXPECTED_HEADER
//! [`EXECUTION_HEADER`]: luge_proto::EXECUTION_HEADER
//! [`QUEUEING_HEADER`]: luge_proto::QUEUEING_HEADER
//! [`OUTCOME_HEADER`]: luge_proto::OUTCOME_HEADER

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) use self::conns::Receivers;
use self::conns::{Conns, MAX_RESPONSE};
use self::wire::{Parsed, encode_request, parse_response, valid_path};

use crate::calibrate::{CALIBRATION_DEADLINE_US, Caller, Reply};
use crate::drive::Transport;
use crate::error::BenchError;
use crate::ledger::Ledger;
use crate::plan::Planned;
use crate::sample::ErrorKind;
use crate::target::FunctionRef;

mod conns;
mod wire;

/// Where an HTTP run goes.
pub(crate) struct HttpSetup {
    addr: SocketAddr,
    /// The `Host` of every request.
    host: String,
    base_path: String,
    /// Receiver threads.
    threads: usize,
}

impl HttpSetup {
    pub(crate) fn new(addr: SocketAddr, base_path: &str, threads: usize) -> Self {
        Self { addr, host: addr.to_string(), base_path: base_path.to_owned(), threads }
    }

    /// The path of a function on the target (requests carry the origin form and a `Host`):
    /// visible ASCII only, so that no route can split or add to a request.
    fn path(&self, f: &FunctionRef) -> Result<String, BenchError> {
        let path = format!("{}{}", self.base_path, f.http_route);
        if valid_path(&path) {
            Ok(path)
        } else {
            Err(BenchError::Config(format!(
                "`{path}` cannot be an HTTP path: visible ASCII without `#` only"
            )))
        }
    }

    pub(crate) fn caller(&self, timeout: Duration) -> HttpCaller<'_> {
        HttpCaller { setup: self, timeout, stream: None, out: Vec::new(), buf: Vec::new() }
    }

    /// The sending half of a run and its receivers (run them while the pacer runs).
    pub(crate) fn transport(
        &self,
        functions: &[FunctionRef],
        ledger: Arc<Ledger>,
        timeout: Duration,
        send_expected: bool,
        window: usize,
    ) -> Result<(HttpTransport, Receivers), BenchError> {
        let (conns, receivers) = Conns::new(self.addr, window, timeout, self.threads)?;
        let transport = HttpTransport {
            conns,
            host: self.host.clone(),
            paths: functions.iter().map(|f| self.path(f)).collect::<Result<_, _>>()?,
            ledger,
            send_expected,
            buf: Vec::with_capacity(256),
        };
        Ok((transport, receivers))
    }
}

/// The sending half: writes each request on a connection of its own.
pub(crate) struct HttpTransport {
    conns: Arc<Conns>,
    host: String,
    paths: Vec<String>,
    ledger: Arc<Ledger>,
    send_expected: bool,
    buf: Vec<u8>,
}

impl Transport for HttpTransport {
    fn send(
        &mut self,
        p: &Planned,
        _: &FunctionRef,
        payload: &[u8],
        intended_ns: u64,
        sent_ns: u64,
    ) -> Result<(), ErrorKind> {
        let Self { conns, host, paths, ledger, send_expected, buf } = self;
        let path = paths.get(p.function).ok_or(ErrorKind::Send)?;
        let expected = send_expected.then(|| p.expected_us());
        // The deadline left and the send time are taken when a connection is at hand, just
        // before the request is written: the pacer may have waited for one (or opened it), and
        // that wait is the client's, not the node's (its send lag, `sent_too_late`).
        let build = |buf: &mut Vec<u8>| {
            let now = ledger.now_ns();
            // (Not the ledger's lock per request for the ~0.1 µs of taking an idle one.)
            if now > sent_ns + 1_000 {
                ledger.written(p.seq, now);
            }
            let waited = now.saturating_sub(intended_ns);
            encode_request(buf, path, host, p.deadline_left_us(waited), expected, payload);
            now
        };
        conns.send(p.seq, buf, build)
    }
}

/// One request at a time on one kept connection, for calibration.
pub(crate) struct HttpCaller<'a> {
    setup: &'a HttpSetup,
    timeout: Duration,
    stream: Option<TcpStream>,
    out: Vec<u8>,
    buf: Vec<u8>,
}

impl HttpCaller<'_> {
    fn connect(&self) -> Result<TcpStream, BenchError> {
        let cannot = || BenchError::Calibration(format!("cannot connect to {}", self.setup.addr));
        let stream =
            TcpStream::connect_timeout(&self.setup.addr, self.timeout).map_err(|_| cannot())?;
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }

    /// One exchange on `stream`: `None` when the connection broke before an answer began (a
    /// kept connection the server has closed since: try a new one).
    fn exchange(&mut self, stream: &mut TcpStream) -> Result<Option<(Reply, bool)>, BenchError> {
        let no_answer = || {
            BenchError::Calibration(format!(
                "no answer within {:?} (is the server running on the target?)",
                self.timeout
            ))
        };
        let give_up = Instant::now() + self.timeout;
        let _ = stream.set_write_timeout(Some(self.timeout));
        if stream.write_all(&self.out).is_err() {
            return Ok(None);
        }
        self.buf.clear();
        let mut chunk = [0u8; 16 << 10];
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(no_answer());
            }
            let _ = stream.set_read_timeout(Some(left));
            let (n, eof) = match stream.read(&mut chunk) {
                Ok(0) => (0, true),
                Ok(n) => (n, false),
                Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted) => continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(no_answer());
                }
                Err(_) => (0, true),
            };
            if eof && self.buf.is_empty() {
                return Ok(None);
            }
            if self.buf.len() + n > MAX_RESPONSE {
                let reply = Reply { error: Some(ErrorKind::Transport), ..Reply::default() };
                return Ok(Some((reply, true)));
            }
            self.buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
            match parse_response(&self.buf, eof) {
                Parsed::Partial => {}
                Parsed::Complete { reply, close, .. } => return Ok(Some((reply, close || eof))),
                Parsed::Invalid => {
                    let reply = Reply { error: Some(ErrorKind::Transport), ..Reply::default() };
                    return Ok(Some((reply, true)));
                }
            }
        }
    }
}

impl Caller for HttpCaller<'_> {
    fn call(&mut self, function: &FunctionRef, payload: &[u8]) -> Result<Reply, BenchError> {
        let path = self.setup.path(function)?;
        let mut out = std::mem::take(&mut self.out);
        encode_request(&mut out, &path, &self.setup.host, CALIBRATION_DEADLINE_US, None, payload);
        self.out = out;
        // A kept connection may have been closed by the server since: one more on a new one.
        for _ in 0..2 {
            let mut stream = match self.stream.take() {
                Some(s) => s,
                None => self.connect()?,
            };
            if let Some((reply, close)) = self.exchange(&mut stream)? {
                if !close {
                    self.stream = Some(stream);
                }
                return Ok(reply);
            }
        }
        Err(BenchError::Calibration(format!(
            "{} closed the connection without an answer",
            self.setup.addr
        )))
    }
}
