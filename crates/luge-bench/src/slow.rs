//! Slow clients ("slowloris"): many connections that each send half a request head and then
//! a header line now and then, never finishing it — the attack that holds a server's connection
//! slots without costing the attacker anything. `luge bench slow-clients` runs this in a child
//! process ([`hold_slow_connections`], behind the hidden `luge bench hold-slow-connections`), so
//! that the node under test and the attacker each have their own open-file limit.
//!
//! Connections come from many loopback source addresses (`127.1.0.1`, `127.1.0.2`, …: all of
//! 127/8 is loopback on Linux), `per_address` from each, as from many attacking hosts. A
//! connection the server closes (its head timed out) is opened again at once, so the number
//! held stays at `connections` as long as the server accepts them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::BenchError;

/// How often a slow connection sends one more header line.
const TRICKLE: Duration = Duration::from_secs(5);
/// How often the holder reports how many connections it holds (`open N` on stdout).
const REPORT: Duration = Duration::from_millis(100);
/// The half request head each slow connection starts with.
const HALF_HEAD: &[u8] = b"POST /noop HTTP/1.1\r\nHost: luge\r\n";

/// The `n`th source address: `127.1.0.1` + `n`.
fn source(n: usize) -> IpAddr {
    let base = u32::from(Ipv4Addr::new(127, 1, 0, 1));
    IpAddr::V4(Ipv4Addr::from(base.wrapping_add(n as u32)))
}

/// Holds `connections` slow connections to `to`, `per_address` from each source address, and
/// prints `open N` on stdout every 100 ms, until stdin is closed (the parent ended). Runs in the
/// calling thread.
pub fn hold_slow_connections(
    to: SocketAddr,
    connections: usize,
    per_address: usize,
) -> Result<(), BenchError> {
    if per_address == 0 {
        return Err(BenchError::Config("per_address must be at least 1".into()));
    }
    let _ = luge_server::net::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::io("cannot start the holder's runtime", e))?;
    let open = Arc::new(AtomicUsize::new(0));
    // Stdin's end is the parent's signal to stop: read it on a thread of its own.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        let _ = stop_tx.send(());
    });
    rt.block_on(async {
        for i in 0..connections {
            tokio::spawn(hold_one(to, source(i / per_address), Arc::clone(&open)));
        }
        let mut tick = tokio::time::interval(REPORT);
        let mut stdout = std::io::stdout();
        loop {
            tokio::select! {
                _ = &mut stop_rx => break,
                _ = tick.tick() => {
                    if writeln!(stdout, "open {}", open.load(Ordering::Relaxed))
                        .and_then(|()| stdout.flush())
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    Ok(())
}

/// One slow connection from `from`, opened again whenever it ends.
async fn hold_one(to: SocketAddr, from: IpAddr, open: Arc<AtomicUsize>) {
    loop {
        let Some(mut conn) = connect(to, from).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        open.fetch_add(1, Ordering::Relaxed);
        if conn.write_all(HALF_HEAD).await.is_ok() {
            let mut buf = [0u8; 512];
            let mut trickle = tokio::time::interval(TRICKLE);
            trickle.tick().await;
            loop {
                tokio::select! {
                    // The server answered or closed: this connection is over.
                    r = conn.read(&mut buf) => if !matches!(r, Ok(n) if n > 0) { break },
                    _ = trickle.tick() => if conn.write_all(b"X-Slow: 1\r\n").await.is_err() {
                        break
                    },
                }
            }
        }
        open.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connect(to: SocketAddr, from: IpAddr) -> Option<tokio::net::TcpStream> {
    let socket = tokio::net::TcpSocket::new_v4().ok()?;
    socket.bind(SocketAddr::new(from, 0)).ok()?;
    socket.connect(to).await.ok()
}

/// A holder running in a child process, stopped (and waited for) on drop.
pub(crate) struct Holder {
    child: Child,
    stdin: Option<ChildStdin>,
    open: Arc<AtomicUsize>,
}

impl Holder {
    /// Starts `program bench hold-slow-connections …` against `to` and waits until it holds
    /// `connections` (or `wait` passes: an error).
    pub(crate) fn start(
        program: &Path,
        to: SocketAddr,
        connections: usize,
        per_address: usize,
        wait: Duration,
    ) -> Result<Self, BenchError> {
        let mut child = Command::new(program)
            .args(["bench", "hold-slow-connections", "--to"])
            .arg(to.to_string())
            .args(["--connections", &connections.to_string()])
            .args(["--per-address", &per_address.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| BenchError::io(format!("cannot start {}", program.display()), e))?;
        let stdin = child.stdin.take();
        let open = Arc::new(AtomicUsize::new(0));
        if let Some(stdout) = child.stdout.take() {
            let open = Arc::clone(&open);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if let Some(n) = line.strip_prefix("open ").and_then(|n| n.parse().ok()) {
                        open.store(n, Ordering::Relaxed);
                    }
                }
            });
        }
        let holder = Self { child, stdin, open };
        let started = Instant::now();
        while holder.open() < connections {
            if started.elapsed() > wait {
                return Err(BenchError::Scenario(format!(
                    "the slow clients opened only {} of {connections} connections in {wait:?}",
                    holder.open()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(holder)
    }

    /// Connections held right now (as last reported).
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        // Closing stdin stops the holder; kill it too in case it does not notice.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_are_distinct_loopback_addresses() {
        assert_eq!(source(0), IpAddr::V4(Ipv4Addr::new(127, 1, 0, 1)));
        assert_eq!(source(255), IpAddr::V4(Ipv4Addr::new(127, 1, 1, 0)));
        assert!((0..1000).all(|n| source(n).is_loopback()));
    }
}
