//! The load generator's HTTP/1.1 connections to one address: opened on demand, reused one
//! request at a time, and never more of them than requests in flight.
//!
//! hyper-util's pooled client opens a new connection whenever none is idle at the instant a
//! request starts — including the instant between a response being read and its connection
//! going back to the pool — and keeps the surplus idle. Under overload the load generator then
//! held ~1 000 connections for a 900-request window, crossed the 1 024 connections `luge serve`
//! allows one client address, and the node's "too many connections" 503s reached hyper as
//! transport errors. Here the caller puts a connection back ([`Pool::checkin`]) *before* it
//! records the answer that frees its window slot, so the next request finds it idle: the
//! connections open never exceed the most requests in flight at once.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::Full;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One open connection, checked out for one request.
pub(crate) struct Conn {
    sender: SendRequest<Full<Bytes>>,
    _open: Open,
}

impl Conn {
    pub(crate) fn sender(&mut self) -> &mut SendRequest<Full<Bytes>> {
        &mut self.sender
    }
}

/// Counts a connection as open while alive.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why a connection could not be had.
#[derive(Debug)]
pub(crate) enum ConnectError {
    /// The TCP connection failed.
    Tcp,
    /// The HTTP/1.1 handshake failed.
    Handshake,
}

/// Connections to one address.
pub(crate) struct Pool {
    addr: SocketAddr,
    idle: Mutex<Vec<Conn>>,
    open: Arc<AtomicUsize>,
    most_open: AtomicUsize,
}

impl Pool {
    pub(crate) fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            idle: Mutex::new(Vec::new()),
            open: Arc::new(AtomicUsize::new(0)),
            most_open: AtomicUsize::new(0),
        }
    }

    /// An idle connection ready for a request, or a new one if none is.
    pub(crate) async fn checkout(&self) -> Result<Conn, ConnectError> {
        loop {
            let popped = self.idle.lock().unwrap_or_else(PoisonError::into_inner).pop();
            let Some(mut conn) = popped else { break };
            // Ready at once unless the previous exchange's end is still being processed; an
            // error means the server closed it (e.g. its keep-alive timeout): try the next.
            if conn.sender.ready().await.is_ok() {
                return Ok(conn);
            }
        }
        self.connect().await
    }

    /// Returns a connection after its response was read whole; call it before recording the
    /// answer, so the request the answer lets start reuses this connection.
    pub(crate) fn checkin(&self, conn: Conn) {
        if !conn.sender.is_closed() {
            self.idle.lock().unwrap_or_else(PoisonError::into_inner).push(conn);
        }
    }

    /// The most connections that were open at once.
    pub(crate) fn most_open(&self) -> usize {
        self.most_open.load(Ordering::Relaxed)
    }

    async fn connect(&self) -> Result<Conn, ConnectError> {
        let stream = TcpStream::connect(self.addr).await.map_err(|_| ConnectError::Tcp)?;
        // Small requests must not wait for Nagle; a failure only costs latency.
        let _ = stream.set_nodelay(true);
        let (sender, connection) =
            http1::handshake(TokioIo::new(stream)).await.map_err(|_| ConnectError::Handshake)?;
        // The connection's I/O runs on its own task until either side closes it.
        tokio::spawn(connection);
        let now = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.most_open.fetch_max(now, Ordering::Relaxed);
        Ok(Conn { sender, _open: Open(Arc::clone(&self.open)) })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use hyper::server::conn::http1 as server;
    use hyper::service::service_fn;
    use hyper::{Request, Response};
    use std::convert::Infallible;
    use std::time::Duration;
    use tokio::net::TcpListener;

    /// A server that answers every request after `delay`.
    async fn server(delay: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let service = service_fn(move |_req| async move {
                    tokio::time::sleep(delay).await;
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                });
                tokio::spawn(
                    server::Builder::new().serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        addr
    }

    async fn exchange(pool: &Pool, addr: SocketAddr) {
        let mut conn = pool.checkout().await.unwrap();
        let req = Request::get("/").header("host", addr.to_string()).body(Full::default()).unwrap();
        let resp = conn.sender().send_request(req).await.unwrap();
        resp.into_body().collect().await.unwrap();
        pool.checkin(conn);
    }

    /// A window of `n` requests kept full, each new one started the moment one ends (as the
    /// pacer does), never opens more than `n` connections.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connections_never_exceed_the_requests_in_flight() {
        let addr = server(Duration::from_micros(200)).await;
        let pool = Arc::new(Pool::new(addr));
        let window = 8;
        let mut tasks = Vec::new();
        for _ in 0..window {
            let pool = Arc::clone(&pool);
            tasks.push(tokio::spawn(async move {
                for _ in 0..100 {
                    exchange(&pool, addr).await;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(pool.most_open() <= window, "{} connections for {window}", pool.most_open());
        assert!(pool.most_open() >= 1);
    }

    /// A connection the server closed is not handed out again.
    #[tokio::test]
    async fn a_closed_connection_is_replaced() {
        let addr = server(Duration::ZERO).await;
        let pool = Pool::new(addr);
        exchange(&pool, addr).await;
        let mut conn = pool.checkout().await.unwrap();
        // Close this one as a server's keep-alive timeout would, then put it back.
        let req = Request::get("/")
            .header("host", addr.to_string())
            .header("connection", "close")
            .body(Full::default())
            .unwrap();
        let resp = conn.sender().send_request(req).await.unwrap();
        resp.into_body().collect().await.unwrap();
        pool.checkin(conn);
        tokio::time::sleep(Duration::from_millis(20)).await;
        exchange(&pool, addr).await;
        assert_eq!(pool.most_open(), 1, "the closed connection was dropped, not reused");
    }
}
