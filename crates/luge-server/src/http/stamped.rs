//! A connection that remembers when the kernel received what it last read (`SO_TIMESTAMPNS`),
//! so that a request's deadline and queueing count from its head's arrival at the node, as over
//! UDP-RPC, and not from when the front end got round to reading it: on a busy node a request
//! can wait milliseconds in its socket buffer, time its deadline has spent.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::udp::sys::{enable_receive_timestamps, recv_with_time};

/// When the kernel received the bytes a connection read last (wall clock).
///
/// Hyper reads a connection only while its buffer holds no complete head, so when it calls the
/// service the last read held the end of that head: its stamp is the request's arrival (for a
/// head in several segments, its last one's). Requests pipelined in one read share its stamp;
/// every read replaces it (with none when the kernel gave none), so a stamp never outlives the
/// bytes it came with.
#[derive(Debug, Default)]
pub(super) struct LastArrival(AtomicU64);

impl LastArrival {
    /// The stamp of the last read, if it had one.
    pub(super) fn get(&self) -> Option<SystemTime> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            ns => SystemTime::UNIX_EPOCH.checked_add(Duration::from_nanos(ns)),
        }
    }

    fn set(&self, time: Option<SystemTime>) {
        let ns = time
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok())
            .unwrap_or(0);
        self.0.store(ns, Ordering::Relaxed);
    }
}

/// A TCP connection whose reads record their kernel receive time in a [`LastArrival`].
#[derive(Debug)]
pub(super) struct Stamped {
    inner: TcpStream,
    last: Arc<LastArrival>,
}

impl Stamped {
    /// Wraps `inner` and asks the kernel to stamp what it receives; if it cannot (the option
    /// refused), reads work as before and carry no stamp.
    pub(super) fn new(inner: TcpStream) -> (Self, Arc<LastArrival>) {
        if let Err(e) = enable_receive_timestamps(inner.as_raw_fd()) {
            tracing::debug!("no receive timestamps on a connection: {e}");
        }
        let last = Arc::new(LastArrival::default());
        (Self { inner, last: Arc::clone(&last) }, last)
    }
}

impl AsyncRead for Stamped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.inner.poll_read_ready(cx))?;
            let fd = this.inner.as_raw_fd();
            // SAFETY: the unfilled part is only handed to `recvmsg`, which writes bytes into it
            // and never de-initialises any.
            let unfilled = unsafe { buf.unfilled_mut() };
            match this.inner.try_io(Interest::READABLE, || recv_with_time(fd, unfilled)) {
                Ok((n, time)) => {
                    if n > 0 {
                        this.last.set(time);
                    }
                    // SAFETY: `recvmsg` wrote the first `n` bytes of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                // `try_io` cleared the readiness: wait for the next.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
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
    use tokio::net::TcpListener;

    use super::*;

    /// Bytes that waited in the socket buffer carry the time they arrived, not the time they
    /// were read.
    #[tokio::test]
    async fn a_read_carries_when_the_kernel_received_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (mut server, last) = Stamped::new(server);
        // Linux turns receive stamps on for the whole stack lazily (a deferred static key) when
        // the first socket asks, so the first bytes may carry none (the request then counts from
        // its read): exchange until one is stamped.
        let mut buf = [0u8; 64];
        for _ in 0..200 {
            client.write_all(b"x").await.unwrap();
            assert_eq!(server.read(&mut buf).await.unwrap(), 1);
            if last.get().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(last.get().is_some(), "no stamp within 1 s");
        let sent = SystemTime::now();
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let read_at = Instant::now();
        let n = server.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
        let stamp = last.get().expect("the read is stamped");
        // On the wall clock, between the write and the read.
        assert!(stamp + Duration::from_millis(1) >= sent, "{stamp:?} before {sent:?}");
        let waited = SystemTime::now().duration_since(stamp).unwrap();
        assert!(waited >= Duration::from_millis(45), "waited {waited:?} in the buffer");
        assert!(waited < Duration::from_secs(1), "waited {waited:?}: not this write's stamp");
        assert!(read_at.elapsed() < waited, "the stamp is older than the read");
        assert_eq!(last.get(), Some(stamp), "kept until the next read");
        // Writes pass through.
        server.write_all(b"ok").await.unwrap();
        let mut back = [0u8; 2];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"ok");
    }
}
