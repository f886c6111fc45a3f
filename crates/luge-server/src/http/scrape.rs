//! `GET /metrics` on either listener: the Prometheus text, rendered on the blocking pool — one
//! render at a time, at most one per [`MIN_INTERVAL`], each shared by every scrape that arrived
//! before it started.
//!
//! The function listener serves `/metrics` to anyone by default, and a render walks every
//! function (milliseconds with thousands registered): a flood of scrapes rendering one each
//! would take the blocking pool's threads, which admin registrations need, and the node's
//! cores. Coalesced, a flood costs at most one render per interval. Every answer is still
//! fresh: rendered after its scrape arrived, so what a client did before it scraped is in it.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use tokio::sync::Mutex;

use super::{PROMETHEUS, Shared};

/// The least time between the starts of two renders.
pub(super) const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The last render and when it started.
pub(super) struct Scrapes {
    last: Arc<Mutex<Option<(Instant, Bytes)>>>,
    renders: AtomicU64,
}

impl Scrapes {
    pub(super) fn new() -> Self {
        Self { last: Arc::new(Mutex::new(None)), renders: AtomicU64::new(0) }
    }
}

/// `GET /metrics`: a render started after this scrape arrived — the one in progress or the
/// last, if it started after, else a new one no sooner than [`MIN_INTERVAL`] after the last.
/// A render runs in a task of its own that holds the lock until it has stored its text, so a
/// scrape that is dropped meanwhile (its client gone) does not let another render start beside
/// it.
pub(super) async fn metrics(shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let arrived = Instant::now();
    let mut last = Arc::clone(&shared.scrapes.last).lock_owned().await;
    if let Some((started, text)) = last.as_ref() {
        if *started >= arrived {
            return answer(shared, text.clone());
        }
        tokio::time::sleep_until((*started + MIN_INTERVAL).into()).await;
    }
    let worker = Arc::clone(shared);
    let rendering = tokio::spawn(async move {
        let started = Instant::now();
        let text = tokio::task::spawn_blocking(move || render(&worker)).await.map(Bytes::from);
        if let Ok(text) = &text {
            *last = Some((started, text.clone()));
        }
        text.map_err(|e| e.to_string())
    });
    match rendering.await.map_err(|e| e.to_string()).and_then(|text| text) {
        Ok(text) => answer(shared, text),
        Err(e) => shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e),
    }
}

fn answer(shared: &Shared, text: Bytes) -> Response<Full<Bytes>> {
    shared.respond(StatusCode::OK, &shared.local_meta("ok"), Some(PROMETHEUS), text)
}

/// The text: the runtime's and the protocols' metrics, then the HTTP front end's own.
fn render(shared: &Shared) -> String {
    let renders = shared.scrapes.renders.fetch_add(1, Ordering::Relaxed) + 1;
    let mut text = shared.metrics.render(&shared.runtime);
    let counters = [
        (
            "connections_refused",
            "Connections answered 503 at once because max_connections were open or their client held max_connections_per_client.",
            shared.refused_connections.load(Ordering::Relaxed),
        ),
        (
            "connections_refused_per_client",
            "Connections refused because their client held max_connections_per_client.",
            shared.refused_per_client.load(Ordering::Relaxed),
        ),
        (
            "bodies_refused_per_client",
            "Request bodies answered 503 at once because their client held max_buffered_body_bytes_per_client (also in luge_requests_total as overloaded).",
            shared.bodies.refused_per_client(),
        ),
        (
            "worker_requests",
            "Function calls an idle inline worker read itself while running the HTTP event loop, and ran on its own thread.",
            shared.worker_requests.load(Ordering::Relaxed),
        ),
        (
            "loop_handovers",
            "Times the inline worker handed the HTTP event loop to the front end's own thread (a run not known to be short).",
            shared.handoff.handovers(),
        ),
    ];
    for (name, help, value) in counters {
        let _ = writeln!(
            text,
            "# HELP luge_http_{name}_total {help}\n# TYPE luge_http_{name}_total counter\nluge_http_{name}_total {value}"
        );
    }
    let buffered = shared.bodies.in_use();
    let _ = writeln!(
        text,
        "# HELP luge_http_buffered_body_bytes Bytes of function request bodies held, being read or waiting for their answer (bound: max_buffered_body_bytes).\n# TYPE luge_http_buffered_body_bytes gauge\nluge_http_buffered_body_bytes {buffered}"
    );
    let _ = writeln!(
        text,
        "# HELP luge_http_metrics_renders_total Renders of this text: concurrent scrapes share one, at most one per 100 ms.\n# TYPE luge_http_metrics_renders_total counter\nluge_http_metrics_renders_total {renders}"
    );
    text
}
