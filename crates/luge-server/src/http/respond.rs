//! Responses: every answer carries the `Luge-*` headers; outcomes are rendered with the status
//! table both front ends share; errors the server finds itself are plain text.

use super::*;
use crate::status::{outcome_message, stages_header};

/// What the response headers say about a request.
pub(super) struct Meta {
    pub(super) request_id: u64,
    pub(super) timing: Timing,
    pub(super) label: &'static str,
}

impl Shared {
    /// A request id for a request answered without reaching the runtime.
    pub(super) fn local_id(&self) -> u64 {
        self.gate.local_id()
    }

    pub(super) fn local_meta(&self, label: &'static str) -> Meta {
        Meta { request_id: self.local_id(), timing: Timing::default(), label }
    }
}

impl Shared {
    /// A response with the Luge headers (and `Retry-After` on 503).
    pub(super) fn respond(
        &self,
        status: StatusCode,
        meta: &Meta,
        content_type: Option<&'static str>,
        body: Bytes,
    ) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        // Room for every header an answer carries (Luge's six, content type, `Luge-Load`,
        // `Retry-After` or a chain's two) at once: growing the map rehashes it.
        headers.reserve(12);
        if let Some(content_type) = content_type {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        headers.insert(REQUEST_ID, HeaderValue::from(meta.request_id));
        headers.insert(EXECUTION_NS, HeaderValue::from(nanos(meta.timing.executed)));
        headers.insert(QUEUEING_NS, HeaderValue::from(nanos(meta.timing.queueing())));
        headers.insert(READINESS_NS, HeaderValue::from(nanos(meta.timing.readiness())));
        headers.insert(OUTCOME, HeaderValue::from_static(meta.label));
        if status == StatusCode::SERVICE_UNAVAILABLE || status == StatusCode::TOO_MANY_REQUESTS {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(self.config.retry_after_secs));
        }
        response
    }

    /// A `text/plain` error response whose body is `reason`.
    pub(super) fn error(
        &self,
        status: StatusCode,
        label: &'static str,
        reason: String,
    ) -> Response<Full<Bytes>> {
        self.respond(status, &self.local_meta(label), Some(TEXT), Bytes::from(reason))
    }

    pub(super) fn method_not_allowed(&self, allow: &'static str) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "method_not_allowed");
        let mut response = self.error(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("method not allowed (allowed: {allow})"),
        );
        response.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
        response
    }

    pub(super) fn not_found(&self, path: &str) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "not_found");
        self.error(StatusCode::NOT_FOUND, "not_found", format!("no such endpoint `{path}`"))
    }
}

impl Shared {
    /// Answers a body that is too large, draining the `rest` the client may still be sending
    /// (none when it waits for a `100 Continue` it was never sent).
    pub(super) fn too_large(
        &self,
        meta: &Meta,
        rest: Rest,
        reason: String,
    ) -> Response<Full<Bytes>> {
        if let Some(body) = rest.in_flight() {
            drain(body);
        }
        close(self.respond(StatusCode::PAYLOAD_TOO_LARGE, meta, Some(TEXT), Bytes::from(reason)))
    }

    /// The answer to a body that could not be read.
    pub(super) fn unreadable(&self, error: Unreadable) -> Response<Full<Bytes>> {
        let (status, label, reason) = match error {
            Unreadable::Timeout => (
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "request body not received in time".to_owned(),
            ),
            Unreadable::Read(e) => (
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("bad request: cannot read the body: {e}"),
            ),
        };
        self.metrics.malformed(Protocol::Http, label);
        close(self.error(status, label, reason))
    }

    /// The response to an outcome (recorded and logged by the gate, not here).
    pub(super) fn render(&self, outcome: Outcome) -> Response<Full<Bytes>> {
        let code = http_status(&outcome.result);
        let label = outcome_label(&outcome.result);
        let Outcome { request_id, result, timing, stages } = outcome;
        let meta = Meta { request_id, timing, label };
        let failed = result.is_err();
        let mut response = match result {
            Ok(stdout) => {
                self.respond(StatusCode::OK, &meta, Some(OCTET_STREAM), Bytes::from(stdout))
            }
            Err(failure) => {
                let shutting_down = matches!(failure, Failure::Rejected(Rejection::ShuttingDown));
                let reason = Bytes::from(outcome_message(&stages, &failure));
                let response = self.respond(status(code), &meta, Some(TEXT), reason);
                if shutting_down { close(response) } else { response }
            }
        };
        // A chain's stages: each one's times, and on a failure the stage that answered.
        if let Some(last) = stages.last() {
            let headers = response.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&stages_header(&stages)) {
                headers.insert(STAGES, v);
            }
            if failed && let Ok(v) = HeaderValue::from_str(&last.name) {
                headers.insert(STAGE, v);
            }
        }
        response
    }
}

pub(super) fn close(mut response: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(super) fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
