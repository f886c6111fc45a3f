//! Running a function for a request: the HTTP request becomes a [`Call`] for the shared
//! [`Gate`], and its outcome (or a refusal) becomes the response. The outcome is recorded by
//! the gate when the runtime answers, so a client that leaves early is still counted.

use super::respond::close;
use super::*;
use crate::status::{load_of, rpc_status};
use crate::trace::Traced;
use luge_proto::TraceContext;

/// `<method> /<route>`: runs a function.
pub(super) async fn invoke(
    shared: &Arc<Shared>,
    path: &str,
    request: Request<Incoming>,
    received: Instant,
    (client, held): (SocketAddr, Arc<Held>),
) -> Response<Full<Bytes>> {
    let name = shared.function_for(path).unwrap_or_default();
    let function = match shared.gate.resolve(FunctionKey::Name(&name)) {
        Ok(function) => function,
        Err(outcome) => {
            tracing::debug!(path, status = 404, "unknown function");
            return shared.render(*outcome);
        }
    };
    if request.method() != Method::POST {
        return shared.method_not_allowed("POST");
    }
    // The trace it runs in, or is refused in: a refusal is a span and answers a `traceparent`.
    let trace = shared.gate.traced(traceparent(request.headers()));
    if shared.gate.is_draining() {
        // Refused before its body is read; the gate would refuse it after, too.
        let failure = Failure::Rejected(Rejection::ShuttingDown);
        let outcome = shared.gate.refuse(&function, failure, received, trace);
        return traced(shared.render(outcome), trace);
    }
    let (parts, body) = request.into_parts();
    let (deadline, expected) = match (
        micros_header(&parts.headers, &DEADLINE_US),
        micros_header(&parts.headers, &EXPECTED_US),
    ) {
        (Ok(deadline), Ok(expected)) => (deadline, expected),
        (Err(reason), _) | (_, Err(reason)) => {
            shared.metrics.malformed(Protocol::Http, "bad_header");
            tracing::debug!(function = name, status = 400, "{reason}");
            return shared.error(StatusCode::BAD_REQUEST, "bad_request", reason);
        }
    };
    // No body may be larger than a client's share of the node's buffer budget (or the whole
    // budget): one that could never fit is too large (413), not a refusal for load (503) to be
    // retried.
    let cap = function.max_request_bytes().min(shared.bodies.bound().unwrap_or(u64::MAX));
    let expect = expects_continue(&parts.headers);
    let declared = body.size_hint().lower();
    let (rest, size) = if declared > cap {
        (Rest::Unread { body, expect }, declared)
    } else {
        match read_body(body, cap, shared.body_pace(), (&shared.bodies, Some(client.ip()))).await {
            Ok((payload, buffered)) => {
                if super::drive::on_worker() {
                    shared.worker_requests.fetch_add(1, Ordering::Relaxed);
                }
                let call = Call {
                    target: function,
                    payload,
                    deadline,
                    expected,
                    client: Some(client),
                    client_id: None,
                    received,
                    trace,
                    group: None,
                };
                return submit(shared, call, (held, buffered)).await;
            }
            Err(BodyError::TooLarge(rest)) => (Rest::Reading(rest), cap.saturating_add(1)),
            Err(BodyError::BuffersFull(rest)) => {
                let failure = Failure::Rejected(Rejection::BuffersFull);
                tracing::debug!(function = name, status = 503, "{failure}");
                let outcome = shared.gate.refuse(&function, failure, received, trace);
                drain(rest);
                let mut response = traced(shared.render(outcome), trace);
                // A refusal for load: the signal says so, as on every such refusal (§4).
                let refused = HeaderValue::from(u16::from(luge_proto::LOAD_REFUSED));
                response.headers_mut().insert(LOAD, refused);
                return close(response);
            }
            Err(BodyError::Unreadable(e)) => return shared.unreadable(e),
        }
    };
    let failure = Failure::BadRequest(BadRequest::TooLarge { size, cap });
    let outcome = shared.gate.refuse(&function, failure, received, trace);
    let reason = if declared > cap {
        format!("bad request: request of {declared} bytes exceeds the limit of {cap} bytes")
    } else {
        format!("bad request: request body exceeds the limit of {cap} bytes")
    };
    tracing::debug!(request_id = outcome.request_id, function = name, status = 413, "{reason}");
    let meta = Meta { request_id: outcome.request_id, timing: outcome.timing, label: "too_large" };
    traced(shared.too_large(&meta, rest, reason), trace)
}

/// Submits a read request through the gate and waits for its answer, or for the end of the
/// server's grace period (then it is answered 503 `shutting_down`; the runtime's later outcome
/// is still recorded by the gate). The connection's slots and the body's share of the buffer
/// budget are `held` until the runtime answers, even if the client has left by then.
async fn submit(
    shared: &Arc<Shared>,
    call: Call,
    held: (Arc<Held>, Buffered),
) -> Response<Full<Bytes>> {
    let deadline = call.deadline.unwrap_or(call.target.relative_deadline());
    let (trace, received) = (call.trace, call.received);
    let (tx, rx) = oneshot::channel();
    shared.gate.submit(call, move |outcome| {
        // The receiver is gone when the client left; the gate has recorded the outcome.
        // The slots and the body's bytes first: a client that reads this answer and comes
        // straight back must find them free.
        drop(held);
        let _ = tx.send(outcome);
    });
    let abandon = phase_reached(shared.phase.subscribe(), |p| *p == Phase::Abandon);
    let outcome = tokio::select! {
        biased;
        outcome = rx => match outcome {
            Ok(outcome) => {
                // The runtime answered `timing.total` after receipt; this thread takes the
                // answer now, and writes it when this returns: the difference is the delivery
                // that admission sets aside for later requests.
                shared.gate.delivered(received.elapsed().saturating_sub(outcome.timing.total));
                outcome
            }
            // Unreachable with the runtime's `Reply` (it answers even when dropped).
            Err(_) => shared
                .gate
                .local(Err(Failure::Internal("the runtime dropped the request".into())), None),
        },
        () = abandon => {
            shared.gate.local(Err(Failure::Rejected(Rejection::ShuttingDown)), None)
        }
    };
    let load = load_of(rpc_status(&outcome.result), outcome.timing.queueing(), deadline);
    let mut response = shared.render(outcome);
    response.headers_mut().insert(LOAD, HeaderValue::from(u16::from(load)));
    traced(response, trace)
}

/// `response`, answering the node's span of `trace` (if any) in its `traceparent`.
fn traced(mut response: Response<Full<Bytes>>, trace: Option<Traced>) -> Response<Full<Bytes>> {
    if let Some(trace) = trace.map(|t| t.node) {
        // 55 characters of lower-case hex and dashes: always a valid header value.
        if let Ok(value) = HeaderValue::from_str(&trace.to_string()) {
            response.headers_mut().insert(TRACEPARENT, value);
        }
    }
    response
}

/// The caller's trace context: one valid `traceparent` header, else none (W3C Trace Context:
/// a receiver ignores an invalid or repeated one and starts a new trace).
pub(super) fn traceparent(headers: &HeaderMap) -> Option<TraceContext> {
    let mut values = headers.get_all(TRACEPARENT).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    TraceContext::parse(value.to_str().ok()?)
}
