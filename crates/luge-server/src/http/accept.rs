//! Accepting connections: the next connection with `TCP_NODELAY`, and the answer to one over
//! the cap (503 at once, bounded) instead of a wait in the listen backlog.

use super::*;
use crate::log_limit::{LogKind, log_limited};

/// Waits for a connection slot, then for the next connection (with `TCP_NODELAY` set); `None`
/// once `stopping` completes or the slots are closed. Used by the bare-hyper baseline, whose
/// clients over the cap wait in the listen backlog.
pub async fn accept_next<F: Future<Output = ()>>(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
    stopping: &mut std::pin::Pin<&mut F>,
) -> Option<(TcpStream, SocketAddr, OwnedSemaphorePermit)> {
    let permit = tokio::select! {
        permit = Arc::clone(slots).acquire_owned() => permit.ok()?,
        () = &mut *stopping => return None,
    };
    let (stream, peer) = accept_one(listener, stopping).await?;
    Some((stream, peer, permit))
}

/// The next connection, with `TCP_NODELAY` set; `None` once `stopping` completes. Accept errors
/// (e.g. out of descriptors) back off and retry. Shared with the bare-hyper baseline, so both
/// accept alike.
pub(super) async fn accept_one<F: Future<Output = ()>>(
    listener: &TcpListener,
    stopping: &mut std::pin::Pin<&mut F>,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    log_limited!(LogKind::Accept, tracing::Level::WARN, "accept failed: {e}");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut *stopping => return None,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, "cannot set TCP_NODELAY: {e}");
        }
        return Some((stream, peer));
    }
}

/// The body of the answer to a connection over the cap.
pub(super) const OVER_CAP_BODY: &str = "rejected: overloaded (connections full)\n";
/// The body of the answer to a connection over its client's cap.
pub(super) const PER_CLIENT_BODY: &str =
    "rejected: overloaded (too many connections from your address)\n";

/// The answer to a connection over a cap: a complete response, with every Luge header, that
/// closes the connection.
pub(super) fn over_cap_response(request_id: u64, retry_after_secs: u32, body: &str) -> String {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\nluge-request-id: {request_id}\r\nluge-execution-ns: 0\r\nluge-queueing-ns: 0\r\nluge-readiness-ns: 0\r\nluge-outcome: overloaded\r\nretry-after: {retry_after_secs}\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// How long a refused connection's request is drained so the client reads the 503, not a reset.
pub(super) const OVER_CAP_DRAIN: Duration = Duration::from_millis(100);

/// Answers a connection over the cap with [`over_cap_response`] at once instead of leaving it in the
/// listen backlog, where its client would wait for nothing. Bounded: at most `max_connections`
/// such answers are in progress (more are closed without one), each reads at most 64 KiB for at
/// most [`OVER_CAP_DRAIN`].
pub(super) fn refuse_over_cap(shared: &Arc<Shared>, mut stream: TcpStream, body: &'static str) {
    shared.refused_connections.fetch_add(1, Ordering::Relaxed);
    let Ok(permit) = Arc::clone(&shared.refusing).try_acquire_owned() else {
        return; // dropping the stream closes it
    };
    let response = over_cap_response(shared.local_id(), shared.config.retry_after_secs, body);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let _permit = permit;
        let mut sink = [0u8; 4096];
        let drain = async {
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
            let mut left = 64 << 10;
            while left > 0 {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => left -= n.min(left),
                }
            }
        };
        let _ = tokio::time::timeout(OVER_CAP_DRAIN, drain).await;
    });
}
