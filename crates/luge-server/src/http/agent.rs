//! The load-balancer agent: a TCP listener that answers each connection with one line of
//! HAProxy's agent-check protocol and closes it, so a balancer in front of several nodes weights
//! them by their own load instead of by connection counts alone.
//!
//! The line is `drain` while the node drains (the balancer sends it nothing new, and lets what
//! it sent finish), else `ready up <w>%` with `w = 100 / (1 + q)`, `q` the requests queued per
//! worker: 100 % idle, 50 % with one queued per worker, never below 1 %. A node that is refusing
//! for overload is therefore weighted down, never marked down: its 503s and 429s are answers,
//! and a balancer that ejected it for them would move the overload onto the others. `ready`
//! because HAProxy keeps a server it was told `drain` in that state until an agent says
//! `ready`: a node restarted on the same address would otherwise never be sent anything again.

use super::*;
use crate::log_limit::{LogKind, log_limited};

/// The weight, in percent of the balancer's configured weight, for `queued` requests waiting on
/// `workers` workers.
pub(super) fn weight(queued: usize, workers: usize) -> u32 {
    let per_worker = queued as f64 / workers.max(1) as f64;
    ((100.0 / (1.0 + per_worker)).round() as u32).clamp(1, 100)
}

/// What the agent says now.
fn reply(shared: &Shared) -> String {
    if *shared.phase.borrow() != Phase::Running {
        return "drain\n".to_owned();
    }
    let queued: usize = shared.runtime.group_stats().iter().map(|g| g.queued + g.submissions).sum();
    format!("ready up {}%\n", weight(queued, shared.runtime.config().workers))
}

/// Answers every connection until the server's runtime ends, at most [`AGENT_CONNECTIONS`] at a
/// time: one over those is closed at once without a line (HAProxy ignores an agent it cannot
/// reach — its health check judges connectivity — so this only skips one weight update), so a
/// flood of agent connections cannot take the descriptors the function listener needs.
pub(super) async fn serve(shared: Arc<Shared>, listener: TcpListener) {
    let slots = Arc::new(Semaphore::new(AGENT_CONNECTIONS));
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                log_limited!(LogKind::Accept, tracing::Level::WARN, "agent: accept failed: {e}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            tracing::debug!(%peer, "agent: {AGENT_CONNECTIONS} exchanges in progress; closed");
            continue; // dropping the stream closes it
        };
        let line = reply(&shared);
        // One short write, then whatever the balancer sent (HAProxy's `agent-send`) is read and
        // dropped until it closes: closing with unread input would reset the connection and
        // could discard the line. Bounded: a peer that neither reads nor closes is cut off.
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let _permit = permit;
            let answered = tokio::time::timeout(AGENT_WRITE, async {
                stream.write_all(line.as_bytes()).await?;
                stream.shutdown().await?;
                let mut sink = [0u8; 256];
                while stream.read(&mut sink).await? > 0 {}
                Ok::<(), io::Error>(())
            });
            if let Ok(Err(e)) | Err(e) = answered.await.map_err(io::Error::from) {
                tracing::debug!(%peer, "agent: {e}");
            }
        });
    }
}

/// How long one agent exchange may take (the answer written, the peer's close awaited).
const AGENT_WRITE: Duration = Duration::from_secs(1);

/// Agent exchanges in progress at most. A balancer checks a node every few seconds per balancer
/// process; this leaves room for many balancers.
const AGENT_CONNECTIONS: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weight_falls_with_the_queue_per_worker() {
        assert_eq!(weight(0, 1), 100);
        assert_eq!(weight(1, 1), 50);
        assert_eq!(weight(2, 2), 50);
        assert_eq!(weight(3, 1), 25);
        assert_eq!(weight(10_000, 1), 1, "never 0: a loaded node is weighted down, not out");
        assert_eq!(weight(5, 0), weight(5, 1));
    }
}
