//! Running a function for a request: submission to the runtime, the wait for its outcome (which
//! survives the client leaving, so the outcome is still recorded), and refusals.

use super::*;

/// A submitted request whose outcome has not arrived yet. If the connection goes away first
/// (hyper drops the handler), the outcome is still awaited and recorded in the metrics.
pub(super) struct Pending {
    rx: Option<oneshot::Receiver<Outcome>>,
    shared: Arc<Shared>,
    function: String,
}

/// How a wait for the runtime ended.
pub(super) enum Waited {
    Answered(Outcome),
    /// The server's grace period ended first.
    Abandoned,
}

impl Pending {
    async fn wait(&mut self) -> Waited {
        let abandon = phase_reached(self.shared.phase.subscribe(), |p| *p == Phase::Abandon);
        let Some(rx) = self.rx.as_mut() else { return Waited::Abandoned };
        let waited = tokio::select! {
            biased;
            outcome = rx => Waited::Answered(outcome.unwrap_or_else(|_| Outcome {
                // Unreachable with the runtime's `Reply` (it answers even when dropped).
                request_id: self.shared.local_id(),
                result: Err(Failure::Internal("the runtime dropped the request".into())),
                timing: Timing::default(),
            })),
            () = abandon => Waited::Abandoned,
        };
        self.rx = None;
        waited
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(rx) = self.rx.take() else { return };
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        let shared = Arc::clone(&self.shared);
        let function = std::mem::take(&mut self.function);
        handle.spawn(async move {
            if let Ok(outcome) = rx.await {
                tracing::debug!(request_id = outcome.request_id, function, "client left");
                shared.metrics.record(&function, Protocol::Http, &outcome);
            }
        });
    }
}

/// `<method> /<route>`: runs a function.
pub(super) async fn invoke(
    shared: &Arc<Shared>,
    path: &str,
    request: Request<Incoming>,
    received: Instant,
) -> Response<Full<Bytes>> {
    let name = shared.function_for(path).unwrap_or_default();
    let Some(function) = shared.runtime.function(&name) else {
        shared.metrics.malformed(Protocol::Http, "unknown_function");
        tracing::debug!(path, status = 404, "unknown function");
        return unknown_function(shared, &name);
    };
    let name = function.config.name.as_str();
    if request.method() != Method::POST {
        return shared.method_not_allowed("POST");
    }
    if shared.draining.load(Ordering::Relaxed) {
        return shared.answer(name, refused(shared, Failure::Rejected(Rejection::ShuttingDown)));
    }
    let (parts, body) = request.into_parts();
    let options = match (
        micros_header(&parts.headers, &DEADLINE_US),
        micros_header(&parts.headers, &EXPECTED_US),
    ) {
        (Ok(deadline), Ok(expected)) => {
            SubmitOptions { deadline, expected, received: Some(received) }
        }
        (Err(reason), _) | (_, Err(reason)) => {
            shared.metrics.malformed(Protocol::Http, "bad_header");
            tracing::debug!(function = name, status = 400, "{reason}");
            return shared.error(StatusCode::BAD_REQUEST, "bad_request", reason);
        }
    };
    let cap = function.config.limits.max_request_bytes;
    let expect = parts.headers.contains_key(header::EXPECT);
    let declared = body.size_hint().lower();
    let (body, size) = if declared > cap {
        (Limited::new(body, 0), declared)
    } else {
        match read_body(body, cap, shared.config.body_read_timeout).await {
            Ok(payload) => {
                return submit(shared, &function, payload, options).await;
            }
            Err(BodyError::TooLarge(rest)) => (rest, cap.saturating_add(1)),
            Err(BodyError::Unreadable(e)) => return shared.unreadable(e),
        }
    };
    let outcome = refused(shared, Failure::BadRequest(BadRequest::TooLarge { size, cap }));
    shared.metrics.record(name, Protocol::Http, &outcome);
    let reason = if declared > cap {
        format!("bad request: request of {declared} bytes exceeds the limit of {cap} bytes")
    } else {
        format!("bad request: request body exceeds the limit of {cap} bytes")
    };
    tracing::debug!(request_id = outcome.request_id, function = name, status = 413, "{reason}");
    let meta = Meta { request_id: outcome.request_id, timing: outcome.timing, label: "too_large" };
    shared.too_large(&meta, expect, body, reason)
}

/// An outcome for a request refused before submission, under a server-local id.
pub(super) fn refused(shared: &Shared, failure: Failure) -> Outcome {
    Outcome { request_id: shared.local_id(), result: Err(failure), timing: Timing::default() }
}

/// Submits a read request and waits for its outcome.
pub(super) async fn submit(
    shared: &Arc<Shared>,
    function: &Arc<Function>,
    payload: Vec<u8>,
    options: SubmitOptions,
) -> Response<Full<Bytes>> {
    let name = function.config.name.clone();
    let (tx, rx) = oneshot::channel();
    shared.runtime.submit_to(function, payload, options, move |outcome| {
        let _ = tx.send(outcome);
    });
    let mut pending = Pending { rx: Some(rx), shared: Arc::clone(shared), function: name };
    match pending.wait().await {
        Waited::Answered(outcome) => shared.answer(&pending.function, outcome),
        Waited::Abandoned => {
            let outcome = refused(shared, Failure::Rejected(Rejection::ShuttingDown));
            shared.answer(&pending.function, outcome)
        }
    }
}
