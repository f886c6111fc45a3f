//! A connection whose writes must make progress (`HttpConfig::send_timeout`, nginx's
//! `send_timeout`), and at a minimum rate (`HttpConfig::min_send_rate`): a client that stops
//! reading — its receive window shut, its socket never read — would otherwise keep its
//! connection, its slot and the unsent rest of its answer for as long as it liked, since hyper
//! bounds reading a head (`header_read_timeout`) but has no bound on writing. A write that the
//! kernel has not taken a byte of for that long fails with `TimedOut`, which ends the connection;
//! any progress restarts that clock. And once an answer is backed up (a write had to wait) and
//! the client has taken some of it, the client must take the rest at `min_send_rate` bytes per
//! second on average, counted from that first progress after the grace request bodies have too
//! (`body::RATE_GRACE`), until the answer is all written; else the write fails the same way. So a
//! client that reads a segment just often enough to beat the stall clock ("slow read") cannot
//! hold its answer and slot for hours.
//!
//! The rate counts what the kernel takes, which comes in bursts: a full send buffer takes
//! nothing until the client has emptied about a third of it. Counted from the first wait, a
//! client would have to drain that third within the grace, however fast it reads after;
//! counted from the first burst (which counts), a client that reads at the minimum rate or
//! faster always keeps up. The wait before the first burst is the stall limit's alone. Each
//! answer has its own clock: a flush that completes (hyper flushes once an answer is all
//! written) ends it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::body::RATE_GRACE;

/// `inner`, whose writes fail when stalled longer than the limit, or slower than the rate.
#[derive(Debug)]
pub(super) struct SendTimeout<T> {
    inner: T,
    /// `ZERO` = no bound.
    limit: Duration,
    /// Bytes per second an answer that had to wait must go out at on average, after the grace;
    /// 0 = no minimum.
    min_rate: u64,
    /// Since when a write has waited without progress.
    stalled_since: Option<Instant>,
    /// Whether what hyper wrote waits on the client (a write had to wait, and no flush has
    /// completed since), and how far it is paced.
    backlog: Option<Backlog>,
    /// Wakes a waiting write when its time is up.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<T> SendTimeout<T> {
    pub(super) fn new(inner: T, limit: Duration, min_rate: u64) -> Self {
        Self { inner, limit, min_rate, stalled_since: None, backlog: None, timer: None }
    }

    /// When a waiting write fails, and why, if nothing more is taken: the stall limit from
    /// when it began to wait, or the moment a paced backlog falls below the minimum rate. A
    /// bound past the clock's range is none.
    fn due(&self, stalled_since: Instant, backlog: Backlog) -> Option<(Instant, Why)> {
        let stall = (!self.limit.is_zero())
            .then(|| stalled_since.checked_add(self.limit))
            .flatten()
            .map(|at| (at, Why::Stalled));
        let pace = match backlog {
            Backlog::Paced { since, sent } if self.min_rate > 0 => {
                let next = Duration::from_secs_f64((sent + 1) as f64 / self.min_rate as f64);
                since.checked_add(RATE_GRACE + next).map(|at| (at, Why::Slow))
            }
            _ => None,
        };
        match (stall, pace) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
            (a, b) => a.or(b),
        }
    }

    /// What a pending write becomes: still pending, or `TimedOut` once its time is up.
    fn pending<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        let now = Instant::now();
        let stalled_since = *self.stalled_since.get_or_insert(now);
        let backlog = *self.backlog.get_or_insert(Backlog::Waiting);
        let Some((at, why)) = self.due(stalled_since, backlog) else { return Poll::Pending };
        let failed = || io::Error::new(io::ErrorKind::TimedOut, SendFailed(why, self.limit));
        if now >= at {
            return Poll::Ready(Err(failed()));
        }
        let timer = match &mut self.timer {
            Some(timer) => {
                if timer.deadline() != at {
                    timer.as_mut().reset(at);
                }
                timer
            }
            None => self.timer.insert(Box::pin(tokio::time::sleep_until(at))),
        };
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(failed())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Passes a write's result through: the bytes the kernel took count for the backlog's
    /// rate, and a pending write keeps its clocks.
    fn wrote(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        match result {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled_since = None;
                if let Poll::Ready(Ok(n)) = &ready {
                    let n = *n as u64;
                    self.backlog = match self.backlog {
                        None => None,
                        // The first burst: the pace starts here, and counts it.
                        Some(Backlog::Waiting) => {
                            Some(Backlog::Paced { since: Instant::now(), sent: n })
                        }
                        Some(Backlog::Paced { since, sent }) => {
                            Some(Backlog::Paced { since, sent: sent.saturating_add(n) })
                        }
                    };
                }
                ready
            }
        }
    }
}

/// How far an answer that waits on its client is paced.
#[derive(Debug, Clone, Copy)]
enum Backlog {
    /// A write had to wait and the client has taken none of it since: the stall limit alone.
    Waiting,
    /// The client took some at `since`; the kernel has taken `sent` bytes from then on.
    Paced { since: Instant, sent: u64 },
}

/// Which bound a write failed.
#[derive(Debug, Clone, Copy)]
enum Why {
    Stalled,
    Slow,
}

/// The error a write fails with past a bound (inside an `io::Error` of kind `TimedOut`), with
/// the stall limit.
#[derive(Debug, thiserror::Error)]
#[error("{}", match .0 {
    Why::Stalled => format!("the client read nothing of its answer for {:?}", .1),
    Why::Slow => "the client read its answer slower than the minimum send rate".to_owned(),
})]
struct SendFailed(Why, Duration);

/// Whether a connection ended because a write stalled past the limit or fell below the rate
/// (and not, say, because the kernel timed the connection out).
pub(super) fn send_timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|inner| inner.is::<SendFailed>())
        {
            return true;
        }
        source = e.source();
    }
    false
}

impl<T: AsyncRead + Unpin> AsyncRead for SendTimeout<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendTimeout<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_flush(cx) {
            Poll::Pending => this.pending(cx),
            done => {
                // Everything written is with the kernel: the answer no longer waits on us.
                this.stalled_since = None;
                this.backlog = None;
                done
            }
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::time::Instant;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpSocket, TcpStream};

    use super::*;

    /// A server end wrapped with `limit`, and a client; both ends' buffers small (no
    /// autotuning), so that writes wait for the reader after a few KiB.
    async fn pair(limit: Duration, min_rate: u64) -> (SendTimeout<TcpStream>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let client = socket.connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        socket2::SockRef::from(&server).set_send_buffer_size(4096).unwrap();
        (SendTimeout::new(server, limit, min_rate), client)
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_fails_the_write_after_the_limit() {
        let (mut server, _client) = pair(Duration::from_millis(200), 1024).await;
        let start = Instant::now();
        let chunk = vec![7u8; 1 << 20];
        // More than the kernel's buffers on both sides can hold: some write must wait.
        let err = loop {
            if let Err(e) = server.write_all(&chunk).await {
                break e;
            }
            assert!(start.elapsed() < Duration::from_secs(20), "the writes never stalled");
        };
        assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
        assert!(send_timed_out(&err), "{err}");
        assert!(!send_timed_out(&io::Error::from(io::ErrorKind::TimedOut)));
        assert!(start.elapsed() >= Duration::from_millis(200), "{:?}", start.elapsed());
    }

    #[tokio::test]
    async fn a_slow_reader_is_served_and_no_limit_means_none() {
        for (limit, rate) in [(Duration::from_millis(300), 1024), (Duration::ZERO, 0)] {
            let (mut server, mut client) = pair(limit, rate).await;
            let total = 256 << 10;
            let reader = tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                let mut got = 0;
                // Pauses shorter than the limit between reads, longer than it in all.
                while got < total {
                    let n = client.read(&mut buf).await.unwrap();
                    assert!(n > 0, "closed after {got} bytes");
                    got += n;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                got
            });
            server.write_all(&vec![1u8; total]).await.unwrap();
            server.flush().await.unwrap();
            assert_eq!(reader.await.unwrap(), total, "limit {limit:?}");
        }
    }

    /// Writes `chunk` again and again until a write fails or `within` has passed (each write
    /// bounded by what is left of it): the error, or `None`.
    async fn write_until(
        server: &mut SendTimeout<TcpStream>,
        chunk: &[u8],
        within: Duration,
    ) -> Option<io::Error> {
        let end = Instant::now() + within;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, server.write_all(chunk)).await {
                Err(_) => return None,
                Ok(Err(e)) => return Some(e),
                Ok(Ok(())) => {}
            }
        }
    }

    /// A reader that takes `each` bytes every `pause` until it has `total` or the server
    /// closes; `stop_after`: it stops reading then, the connection left open.
    fn reader(
        mut client: TcpStream,
        each: usize,
        pause: Duration,
        stop_after: Option<Duration>,
    ) -> tokio::task::JoinHandle<(usize, TcpStream)> {
        tokio::spawn(async move {
            let (start, mut buf, mut got) = (Instant::now(), vec![0u8; each], 0);
            while stop_after.is_none_or(|d| start.elapsed() < d) {
                match client.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                tokio::time::sleep(pause).await;
            }
            (got, client)
        })
    }

    /// A client that takes a few bytes just often enough to beat the stall limit fails the
    /// write once, after the grace from its first burst, it has read less than the minimum
    /// rate allows; the same reader with no minimum is still being served then.
    #[tokio::test]
    async fn a_reader_below_the_minimum_rate_fails_the_write_after_the_grace() {
        for rate in [64 << 10, 0] {
            let (mut server, client) = pair(Duration::from_secs(30), rate).await;
            // 256 bytes every 50 ms: ~5 KiB/s, far below 64 KiB/s, never stalled for 30 s.
            let reading = reader(client, 256, Duration::from_millis(50), None);
            let start = Instant::now();
            let failed =
                write_until(&mut server, &[7u8; 64 << 10], RATE_GRACE + Duration::from_secs(3))
                    .await;
            match (rate, failed) {
                (0, None) => {}
                (0, Some(e)) => panic!("no minimum, yet the write failed: {e}"),
                (_, Some(e)) => {
                    assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
                    assert!(send_timed_out(&e), "{e}");
                    assert!(e.to_string().contains("minimum send rate"), "{e}");
                    let took = start.elapsed();
                    assert!(took >= RATE_GRACE, "{took:?}");
                    assert!(took < RATE_GRACE + Duration::from_secs(2), "{took:?}");
                }
                (_, None) => panic!("a reader at ~5 KiB/s was served past the grace"),
            }
            reading.abort();
        }
    }

    /// A reader that stops after its first second, the connection open, fails the write at its
    /// pace's deadline, by the timer alone (nothing wakes the write otherwise), long before the
    /// stall limit of 30 s.
    #[tokio::test]
    async fn a_reader_that_stops_fails_at_the_pace_not_the_stall_limit() {
        let (mut server, client) = pair(Duration::from_secs(30), 64 << 10).await;
        let reading = reader(client, 1024, Duration::from_millis(10), Some(Duration::from_secs(1)));
        let start = Instant::now();
        let failed = write_until(&mut server, &[7u8; 64 << 10], Duration::from_secs(8)).await;
        let e = failed.expect("the write went on after the reader stopped");
        assert!(e.to_string().contains("minimum send rate"), "{e}");
        assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
        reading.abort();
    }

    /// A reader at about twice the minimum rate, on the kernel's own (autotuned) buffers, is
    /// served a 2 MiB answer whole, and a second answer on the same connection after it: the
    /// kernel's bursts do not count against it.
    #[tokio::test]
    async fn a_reader_above_the_minimum_rate_is_served_whole() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let mut server = SendTimeout::new(server, Duration::from_secs(10), 256 << 10);
        let total = 2 << 20;
        // 48 KiB every 100 ms: ~480 KiB/s against a minimum of 256 KiB/s.
        let reading = reader(client, 48 << 10, Duration::from_millis(100), None);
        for _ in 0..2 {
            server.write_all(&vec![1u8; total / 2]).await.unwrap();
            server.flush().await.unwrap();
        }
        drop(server);
        let (got, _client) = reading.await.unwrap();
        assert_eq!(got, total);
    }

    /// A reader just above the minimum rate behind a large send buffer keeps up: the kernel
    /// takes nothing after the first wait until the reader has emptied about a third of the
    /// buffer, longer than the grace at this rate, and that wait is not counted against it.
    #[tokio::test]
    async fn a_reader_at_the_rate_behind_a_large_send_buffer_keeps_up() {
        let (server, client) = pair(Duration::from_secs(30), 16 << 10).await;
        // ~256 KiB of send buffer (the kernel doubles what is asked): a third of it takes the
        // reader ~3.5 s at ~24 KiB/s, past the 2 s grace.
        socket2::SockRef::from(&server.inner).set_send_buffer_size(128 << 10).unwrap();
        let mut server = server;
        let reading = reader(client, 2400, Duration::from_millis(100), None);
        let failed = write_until(&mut server, &[7u8; 16 << 10], Duration::from_secs(6)).await;
        assert!(failed.is_none(), "a reader at ~24 KiB/s against 16 KiB/s was cut: {failed:?}");
        reading.abort();
    }

    /// A stall limit past the clock's range is no bound, not a panic.
    #[tokio::test]
    async fn a_limit_past_the_clocks_range_is_no_bound() {
        let (server, _client) = pair(Duration::MAX, 0).await;
        assert!(server.due(tokio::time::Instant::now(), Backlog::Waiting).is_none());
        let (server, _client) = pair(Duration::from_secs(1), 0).await;
        assert!(server.due(tokio::time::Instant::now(), Backlog::Waiting).is_some());
    }
}
