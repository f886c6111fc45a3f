//! The status page on the admin listener: `GET /admin/status` serves one static HTML file
//! (`status.html`: no build step, no external resources) whose script polls
//! `GET /admin/status.json` (the node's [`snapshot`](crate::snapshot)) every second and derives
//! rates, percentiles and shares from the difference between snapshots.

use super::*;
use crate::snapshot::{self, HttpStatus};

/// The page, compiled into the binary.
const PAGE: &str = include_str!("status.html");

/// `GET /admin/status`.
pub(super) fn page(shared: &Shared) -> Response<Full<Bytes>> {
    let meta = shared.local_meta("ok");
    let mut response =
        shared.respond(StatusCode::OK, &meta, Some(HTML), Bytes::from_static(PAGE.as_bytes()));
    // The page only talks to its own origin; nothing else may load into it.
    let policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
                  connect-src 'self'; img-src data:; frame-ancestors 'none'";
    response
        .headers_mut()
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(policy));
    response
}

/// `GET /admin/status.json`: taken on the blocking pool (it walks every function).
pub(super) async fn snapshot(shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let worker = Arc::clone(shared);
    let taken = tokio::task::spawn_blocking(move || {
        let s = &worker;
        let health = s.health(false);
        let http = HttpStatus {
            addr: s.local_addr.to_string(),
            connections: s.open.load(Ordering::SeqCst),
            max_connections: s.max_connections,
            max_connections_per_client: s.config.max_connections_per_client,
            refused_connections: s.refused_connections.load(Ordering::Relaxed),
            in_flight: s.in_flight.load(Ordering::SeqCst),
            header_read_timeout_ms: millis(s.config.header_read_timeout),
            body_read_timeout_ms: millis(s.config.body_read_timeout),
            send_timeout_ms: millis(s.config.send_timeout),
            min_send_rate: s.config.min_send_rate,
            buffered_body_bytes: s.bodies.in_use(),
            max_buffered_body_bytes: s.config.max_buffered_body_bytes,
            max_buffered_body_bytes_per_client: s.config.max_buffered_body_bytes_per_client,
            bodies_refused_per_client: s.bodies.refused_per_client(),
            max_module_bytes: s.config.max_module_bytes,
            request_log: s.config.request_log.to_string(),
        };
        let snapshot = snapshot::take(&s.metrics, &s.runtime, s.started.elapsed(), health, http);
        serde_json::to_vec(&snapshot)
    })
    .await;
    match taken {
        Ok(Ok(json)) => {
            let mut response =
                shared.respond(StatusCode::OK, &shared.local_meta("ok"), Some(JSON), json.into());
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
        Ok(Err(e)) => shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
        Err(e) => shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
