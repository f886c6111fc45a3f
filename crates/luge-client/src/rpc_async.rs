//! The async UDP-RPC client: many concurrent calls over one socket.
//!
//! Each call registers its request id in a table of pending calls, sends, and waits on a
//! oneshot channel with the backoff's timeouts, retransmitting between them. One receive task
//! per client reads every datagram and completes the pending call with that id; answers nobody
//! waits for (late, replayed, or for a call that gave up) are counted and dropped. A call that
//! is cancelled (its future dropped) removes its entry. An optional window bounds the calls
//! outstanding at once, as a pipelined load generator needs: fixed, or adaptive — shrinking when
//! the node's responses signal load, so a well-behaved client slows down before the node must
//! refuse ([`crate::window`]).

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use luge_proto::{DecodeError, Kind, MAX_DATAGRAM, Message, decode};
use tokio::net::{ToSocketAddrs, UdpSocket};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::ClientError;
use crate::rpc::{
    CallOptions, Expect, IdGenerator, Reply, RpcResponse, encode_ping, encode_request, first_addr,
    prepare_retransmit,
};
use crate::window::{Slot, Window};

type Pending = HashMap<u64, (Expect, oneshot::Sender<Reply>)>;

/// State shared by the calls and the receive task.
#[derive(Debug)]
struct Shared {
    socket: UdpSocket,
    server: SocketAddr,
    ids: IdGenerator,
    pending: Mutex<Pending>,
    /// ICMP "port unreachable" reports seen so far: a call that times out reports a refused
    /// connection if one came after its first send (its own or another call's: the same port).
    refusals: AtomicU64,
    /// Datagrams that answered no pending call.
    stale: AtomicU64,
    /// Datagrams that did not decode.
    undecodable: AtomicU64,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Completes the pending call a datagram answers, if any.
    fn deliver(&self, datagram: &[u8]) {
        let msg = match decode(datagram) {
            Ok(msg @ (Message::Response(_) | Message::Pong(_))) => msg,
            Ok(_) => {
                self.stale.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                self.undecodable.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let id = msg.request_id();
        let entry = {
            let mut pending = self.pending();
            match pending.get(&id) {
                // A Response may answer a Ping (a refusal); a Pong never answers a Request.
                Some((Expect::Response, _)) if matches!(msg, Message::Pong(_)) => None,
                Some(_) => pending.remove(&id),
                None => None,
            }
        };
        let Some((_, tx)) = entry else {
            self.stale.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let reply = match msg {
            Message::Pong(p) => Reply::Pong(p.payload.to_vec()),
            Message::Response(r) => Reply::Response(RpcResponse::from_wire(&r, 0)),
            Message::Request(_) | Message::Ping(_) => return,
        };
        // The call may have just given up; then the reply is simply dropped.
        let _ = tx.send(reply);
    }
}

/// Removes a call's pending entry when the call ends, however it ends.
struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.pending().remove(&self.id);
    }
}

/// Owns the receive task; aborts it when the last client handle goes away.
#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    window: Option<Window>,
    task: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An async (tokio) UDP-RPC client. Cheap to clone; every clone shares one socket, one id
/// sequence and one receive task, and any number of tasks may [`call`](Self::call) at once.
/// Must be created and used inside a tokio runtime with I/O and time enabled.
#[derive(Debug, Clone)]
pub struct AsyncRpcClient {
    inner: Arc<Inner>,
}

impl AsyncRpcClient {
    /// A client of the server at `server`, without a bound on outstanding calls.
    pub async fn connect(server: impl ToSocketAddrs) -> Result<Self, ClientError> {
        Self::build(server, None).await
    }

    /// A client that lets at most `window` calls be outstanding at once; further calls wait
    /// for a slot (the wait counts towards nothing: the timeout starts at the first send).
    pub async fn connect_with_window(
        server: impl ToSocketAddrs,
        window: usize,
    ) -> Result<Self, ClientError> {
        Self::build(server, Some(Window::fixed(window))).await
    }

    /// A client whose window adapts to the node's load signal (`docs/protocol.md` §3.1): at most
    /// `max` calls outstanding, halved when an answer waited half its deadline in the node or
    /// was refused for load, grown by one per window's worth of quiet answers. A call waits for
    /// a place at most half its deadline (its timeout if it has none) and is then not sent
    /// ([`ClientError::Backpressure`]); the time it waited is taken off the deadline it sends,
    /// since the node counts the deadline from receipt.
    pub async fn connect_adaptive(
        server: impl ToSocketAddrs,
        max: usize,
    ) -> Result<Self, ClientError> {
        Self::build(server, Some(Window::adaptive(max))).await
    }

    async fn build(
        server: impl ToSocketAddrs,
        window: Option<Window>,
    ) -> Result<Self, ClientError> {
        let server = first_addr(tokio::net::lookup_host(server).await?, "the server")?;
        let bind: SocketAddr = match server {
            SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = UdpSocket::bind(bind).await?;
        socket.connect(server).await?;
        make_room_for_answers(&socket, window.as_ref().map(Window::max));
        let shared = Arc::new(Shared {
            socket,
            server,
            ids: IdGenerator::new(),
            pending: Mutex::new(HashMap::new()),
            refusals: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            undecodable: AtomicU64::new(0),
        });
        let task = tokio::spawn(receive(Arc::clone(&shared)));
        Ok(Self { inner: Arc::new(Inner { shared, window, task }) })
    }

    /// The server's address.
    pub fn server(&self) -> SocketAddr {
        self.inner.shared.server
    }

    /// The client's own address.
    pub fn local_addr(&self) -> Result<SocketAddr, ClientError> {
        Ok(self.inner.shared.socket.local_addr()?)
    }

    /// Calls waiting for their answer right now.
    pub fn outstanding(&self) -> usize {
        self.inner.shared.pending().len()
    }

    /// The calls the window lets be outstanding right now (`None`: no window).
    pub fn window(&self) -> Option<usize> {
        self.inner.window.as_ref().map(Window::limit)
    }

    /// Datagrams received that answered no pending call (late answers, replays, duplicates).
    pub fn stale_responses(&self) -> u64 {
        self.inner.shared.stale.load(Ordering::Relaxed)
    }

    /// Invokes function `function_id` with `payload` as stdin; returns its response, whatever
    /// its status, or an error if none arrived within `opts.timeout`.
    pub async fn call(
        &self,
        function_id: u32,
        payload: &[u8],
        opts: CallOptions,
    ) -> Result<RpcResponse, ClientError> {
        let (slot, opts) = self.place(opts).await?;
        let id = self.inner.shared.ids.next();
        let mut datagram = Vec::new();
        encode_request(&mut datagram, id, function_id, payload, &opts)?;
        match self.exchange(id, datagram, Expect::Response, &opts, slot).await? {
            Reply::Response(r) => Ok(r),
            // Never: the receive task hands a Pong only to a Ping.
            Reply::Pong(_) => {
                Err(ClientError::Protocol(DecodeError::UnknownKind(Kind::Pong as u8)))
            }
        }
    }

    /// Sends a Ping with `payload`; returns the echoed payload.
    pub async fn ping(&self, payload: &[u8], opts: CallOptions) -> Result<Vec<u8>, ClientError> {
        let (slot, opts) = self.place(opts).await?;
        let id = self.inner.shared.ids.next();
        let mut datagram = Vec::new();
        encode_ping(&mut datagram, id, payload)?;
        match self.exchange(id, datagram, Expect::Pong, &opts, slot).await? {
            Reply::Pong(p) => Ok(p),
            Reply::Response(r) => Err(ClientError::Status(r.status)),
        }
    }

    /// A place in the window, if there is one, and the options to send with: a fixed window
    /// waits as long as it takes (the wait counts towards nothing); an adaptive one at most the
    /// deadline (else the timeout), which it shortens by the wait.
    async fn place(
        &self,
        opts: CallOptions,
    ) -> Result<(Option<Slot<'_>>, CallOptions), ClientError> {
        let Some(window) = &self.inner.window else { return Ok((None, opts)) };
        if !window.is_adaptive() {
            return Ok((window.acquire(None).await, opts));
        }
        let start = tokio::time::Instant::now();
        // At most half the deadline waits here, so that a request the node then refuses had
        // at least half of it left: its refusal says something about the node's load, not
        // about how long this client kept it.
        let bound = opts.deadline.map_or(opts.timeout, |d| d / 2);
        let until =
            tokio::time::Instant::from_std(luge_proto::instant_after(start.into_std(), bound));
        let slot = window.acquire(Some(until)).await;
        let waited = start.elapsed();
        match slot {
            Some(slot) if waited < bound => {
                let deadline = opts.deadline.map(|d| d.saturating_sub(waited));
                Ok((Some(slot), CallOptions { deadline, ..opts }))
            }
            _ => Err(ClientError::Backpressure { waited }),
        }
    }

    /// A call's answer, `attempts` sends after `start`: counted, and taught to the window.
    fn answered(&self, reply: Reply, attempts: u32, start: Instant) -> Reply {
        match reply {
            Reply::Response(mut r) => {
                r.attempts = attempts;
                if let Some(window) = &self.inner.window {
                    window.observe(r.load, start.elapsed());
                }
                Reply::Response(r)
            }
            pong => pong,
        }
    }

    async fn exchange(
        &self,
        id: u64,
        mut datagram: Vec<u8>,
        expect: Expect,
        opts: &CallOptions,
        _slot: Option<Slot<'_>>,
    ) -> Result<Reply, ClientError> {
        let shared = &*self.inner.shared;
        let (tx, mut rx) = oneshot::channel();
        shared.pending().insert(id, (expect, tx));
        let _guard = PendingGuard { shared, id };
        let start = Instant::now();
        let mut attempts = 0u32;
        let mut refused = false;
        let refusals_before = shared.refusals.load(Ordering::SeqCst);
        let deadline = if expect == Expect::Response { opts.deadline } else { None };
        let mut listen_only = false;
        loop {
            let remaining = opts.timeout.saturating_sub(start.elapsed());
            let Some((mut wait, resend)) = opts.wait(attempts, remaining) else { break };
            if resend
                && !listen_only
                && attempts > 0
                && !prepare_retransmit(&mut datagram, deadline, start.elapsed())
            {
                // The deadline is spent: no retransmit would be run, so the rest of the time
                // goes to listening for the answer to what was sent.
                listen_only = true;
            }
            if listen_only {
                wait = remaining;
            } else if resend {
                attempts += 1;
                match shared.socket.send(&datagram).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => refused = true,
                    Err(e) => return Err(e.into()),
                }
            }
            match tokio::time::timeout(wait, &mut rx).await {
                Ok(Ok(reply)) => return Ok(self.answered(reply, attempts, start)),
                // The sender is gone: the receive task stopped.
                Ok(Err(_)) => return Err(ClientError::Closed),
                Err(_elapsed) => {}
            }
        }
        // An answer delivered as the last wait ran out is an answer, not a timeout (which would
        // also shrink the window).
        if let Ok(reply) = rx.try_recv() {
            return Ok(self.answered(reply, attempts, start));
        }
        if refused || shared.refusals.load(Ordering::SeqCst) > refusals_before {
            return Err(ClientError::Io(std::io::ErrorKind::ConnectionRefused.into()));
        }
        // No answer at all to a call: a node so loaded that it drops datagrams says so only
        // this way. Taken as a refusal for load (the window halves, at most once per round
        // trip). Not for a ping, which says nothing of the node's load.
        if let (Some(window), Expect::Response) = (&self.inner.window, expect) {
            window.observe(luge_proto::LOAD_REFUSED, start.elapsed());
        }
        Err(ClientError::Timeout { attempts, elapsed: start.elapsed() })
    }
}

/// The receive task: reads every datagram and completes the call it answers.
async fn receive(shared: Arc<Shared>) {
    let mut buf = vec![0; MAX_DATAGRAM + 1];
    loop {
        match shared.socket.recv(&mut buf).await {
            Ok(n) => shared.deliver(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                shared.refusals.fetch_add(1, Ordering::SeqCst);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// Receive-buffer room per answer the window lets be outstanding: a small datagram takes 1–2 KiB
/// of a socket's buffer with the kernel's bookkeeping.
const ANSWER_ROOM: usize = 2 << 10;
/// The receive buffer asked for when no window bounds the calls outstanding.
const UNBOUNDED_ROOM: usize = 4 << 20;

/// Asks for a receive buffer that holds an answer to every call the window lets be outstanding
/// (`None`: no window), so that answers arriving together while the receive task waits for a
/// CPU are not dropped (a dropped answer is a call lost to its timeout). The kernel's default
/// (~208 KiB) holds ~150 small datagrams. Best effort: never below the default, and the kernel
/// caps it at `net.core.rmem_max`.
fn make_room_for_answers(socket: &UdpSocket, window: Option<usize>) {
    let want = window.map_or(UNBOUNDED_ROOM, |w| w.saturating_mul(ANSWER_ROOM));
    let sock = socket2::SockRef::from(socket);
    if sock.recv_buffer_size().is_ok_and(|have| have < want) {
        let _ = sock.set_recv_buffer_size(want);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A window of 256 gets room for 256 answers, as far as the kernel allows.
    #[tokio::test]
    async fn the_socket_has_room_for_the_windows_answers() {
        let server = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let client = AsyncRpcClient::connect_with_window(addr, 256).await.unwrap();
        let socket = &client.inner.shared.socket;
        let have = socket2::SockRef::from(socket).recv_buffer_size().unwrap();
        let rmem_max: usize =
            std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap().trim().parse().unwrap();
        // Linux grants twice what is asked for (its bookkeeping), up to twice `rmem_max`.
        let granted = 2 * (256 * ANSWER_ROOM).min(rmem_max);
        assert!(have >= granted, "{have} bytes, {granted} expected (rmem_max {rmem_max})");
    }
}
