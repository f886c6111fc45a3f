//! A connection whose writes must make progress (`HttpConfig::send_timeout`, nginx's
//! `send_timeout`): a client that stops reading — its receive window shut, its socket never
//! read — would otherwise keep its connection, its slot and the unsent rest of its answer for
//! as long as it liked, since hyper bounds reading a head (`header_read_timeout`) but has no
//! bound on writing. A write that the kernel has not taken a byte of for that long fails with
//! `TimedOut`, which ends the connection; any progress restarts the clock, so a slow reader is
//! served as long as it reads.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

/// `inner`, whose writes fail when stalled longer than the limit.
#[derive(Debug)]
pub(super) struct SendTimeout<T> {
    inner: T,
    /// `ZERO` = no bound.
    limit: Duration,
    /// Running while a write waits for the socket; reset by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> SendTimeout<T> {
    pub(super) fn new(inner: T, limit: Duration) -> Self {
        Self { inner, limit, stalled: None }
    }

    /// What a pending write becomes: still pending, or `TimedOut` once it has waited the limit.
    fn pending<R>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<R>> {
        if self.limit.is_zero() {
            return Poll::Pending;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, Stalled(limit))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Passes a write's result through, keeping the clock while it is pending.
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match result {
            Poll::Pending => self.pending(cx),
            ready => {
                self.stalled = None;
                ready
            }
        }
    }
}

/// The error a stalled write fails with (inside an `io::Error` of kind `TimedOut`).
#[derive(Debug, thiserror::Error)]
#[error("the client read nothing of its answer for {0:?}")]
struct Stalled(Duration);

/// Whether a connection ended because a write stalled past the limit (and not, say, because the
/// kernel timed the connection out).
pub(super) fn send_timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(e) = source {
        if e.downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
            .is_some_and(|inner| inner.is::<Stalled>())
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
        this.watch(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.watch(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.watch(cx, result)
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
    async fn pair(limit: Duration) -> (SendTimeout<TcpStream>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let client = socket.connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        socket2::SockRef::from(&server).set_send_buffer_size(4096).unwrap();
        (SendTimeout::new(server, limit), client)
    }

    #[tokio::test]
    async fn a_client_that_reads_nothing_fails_the_write_after_the_limit() {
        let (mut server, _client) = pair(Duration::from_millis(200)).await;
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
        for limit in [Duration::from_millis(300), Duration::ZERO] {
            let (mut server, mut client) = pair(limit).await;
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
}
