//! Traces: the W3C trace context each request runs in, and its spans, handed to an
//! OpenTelemetry span processor (the binary's OTLP exporter behind a batch processor; an
//! in-memory one in tests).
//!
//! A request that arrives with a `traceparent` continues the caller's trace whether or not the
//! node exports spans: the node's span is a child of the caller's, the guest sees its context as
//! `TRACEPARENT`, each chain stage runs under a child of the node's span, and the answer carries
//! the node's context back. A request without one starts a new trace only when the node
//! exports ([`Tracing`]) and samples it (at the configured ratio): an unsampled new trace would
//! cost every request a context, a header and an environment entry that nothing downstream of
//! the node reads. The caller's sampling decision is kept as it came.
//!
//! Spans are built when the request is answered, from its [`Outcome`]'s timing, with the ids
//! the request ran under: nothing is allocated for an unsampled request, and the processor's
//! queue is bounded (a full queue drops spans, it never blocks an answer). A chain's stage
//! spans are laid end to end from the chain's receipt, each as long as its stage's own receipt
//! to answer; the hand-overs between them (a few µs) are not spans of their own.

use std::borrow::Cow;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use luge_proto::TraceContext;
use luge_runtime::Outcome;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks, SpanProcessor};

use crate::metrics::Protocol;
use crate::status::outcome_label;

/// Where a node's spans go: a span processor, and the share of requests without a caller's
/// context that start a sampled trace. Cloning shares the processor.
#[derive(Clone)]
pub struct Tracing {
    inner: Arc<Inner>,
}

struct Inner {
    processor: Box<dyn SpanProcessor>,
    /// `ratio × 2^64`, compared with a random u64.
    threshold: u64,
    ratio: f64,
    scope: InstrumentationScope,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing").field("sample", &self.inner.ratio).finish_non_exhaustive()
    }
}

/// Two configurations share their tracing only if they share its processor.
impl PartialEq for Tracing {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Tracing {}

impl Tracing {
    /// Spans to `processor` (its resource set to `service.name = luge`), a new trace sampled for
    /// `sample` of the requests that arrive without a context (clamped to 0…1).
    pub fn new(mut processor: impl SpanProcessor + 'static, sample: f64) -> Self {
        processor.set_resource(&Resource::builder_empty().with_service_name("luge").build());
        let ratio = if sample.is_nan() { 0.0 } else { sample.clamp(0.0, 1.0) };
        // 2^64 × ratio, saturating at 1.0 (every request).
        let threshold = if ratio >= 1.0 { u64::MAX } else { (ratio * 2f64.powi(64)) as u64 };
        let scope = InstrumentationScope::builder("luge").with_version(env!("CARGO_PKG_VERSION"));
        let inner =
            Inner { processor: Box::new(processor), threshold, ratio, scope: scope.build() };
        Self { inner: Arc::new(inner) }
    }

    /// The share of new traces sampled.
    pub fn sample(&self) -> f64 {
        self.inner.ratio
    }

    /// Flushes and stops the processor (at node shutdown; later spans are dropped).
    pub fn shutdown(&self) {
        if let Err(e) = self.inner.processor.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!("stopping the span exporter failed: {e}");
        }
    }
}

/// The trace a request runs in: the node's own span, and the caller's span it continues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Traced {
    /// The node's span for the request (what the guest and the answer see).
    pub node: TraceContext,
    /// The caller's span, when the request carried a `traceparent`.
    pub parent: Option<u64>,
}

/// The trace context a request runs in: a child of `caller`'s, else a new, sampled trace if the
/// node exports spans and samples this request, else none.
pub(crate) fn begin(tracing: Option<&Tracing>, caller: Option<TraceContext>) -> Option<Traced> {
    match caller {
        Some(c) => Some(Traced { node: c.with_span(random()), parent: Some(c.span_id) }),
        None => {
            let t = tracing?;
            let sampled = t.inner.threshold == u64::MAX || random() < t.inner.threshold;
            if !sampled {
                return None;
            }
            let trace_id = (u128::from(random()) << 64 | u128::from(random())).max(1);
            let node = TraceContext { trace_id, span_id: random(), sampled: true };
            Some(Traced { node, parent: None })
        }
    }
}

/// What a span says about the request it stands for.
pub(crate) struct Finished<'a> {
    pub traced: Traced,
    pub function: &'a str,
    pub tenant: u32,
    pub protocol: Protocol,
    pub deadline: Duration,
    pub received: Instant,
    pub outcome: &'a Outcome,
}

impl Tracing {
    /// Hands the spans of an answered, sampled request to the processor.
    pub(crate) fn finished(&self, f: &Finished<'_>) {
        if !f.traced.node.sampled {
            return;
        }
        let (o, t) = (f.outcome, f.outcome.timing);
        // The wall-clock time of receipt: now, less the time since.
        let start = SystemTime::now() - f.received.elapsed();
        let us = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let mut attributes = vec![
            KeyValue::new("faas.invoked_name", f.function.to_owned()),
            KeyValue::new("luge.protocol", f.protocol.label()),
            KeyValue::new("luge.tenant", i64::from(f.tenant)),
            KeyValue::new("luge.request_id", o.request_id.to_string()),
            KeyValue::new("luge.outcome", outcome_label(&o.result)),
            KeyValue::new("luge.deadline_us", us(f.deadline)),
            KeyValue::new("luge.queueing_us", us(t.queueing())),
            KeyValue::new("luge.readiness_us", us(t.readiness())),
            KeyValue::new("luge.execution_us", us(t.executed)),
        ];
        if t.preemptions > 0 {
            attributes.push(KeyValue::new("luge.preemptions", i64::from(t.preemptions)));
        }
        let status = match &o.result {
            Ok(_) => Status::Unset,
            Err(e) => Status::error(e.to_string()),
        };
        let node = f.traced.node;
        let parent = f.traced.parent.map_or(SpanId::INVALID, SpanId::from);
        self.export(Span {
            context: node,
            parent,
            remote_parent: f.traced.parent.is_some(),
            kind: SpanKind::Server,
            name: Cow::Owned(f.function.to_owned()),
            start,
            end: start + t.total,
            attributes,
            status,
        });
        let mut at = start;
        for (k, stage) in o.stages.iter().enumerate() {
            let st = stage.timing;
            self.export(Span {
                context: node.stage(k),
                parent: SpanId::from(node.span_id),
                remote_parent: false,
                kind: SpanKind::Internal,
                name: Cow::Owned(stage.name.clone()),
                start: at,
                end: at + st.total,
                attributes: vec![
                    KeyValue::new("luge.stage", k as i64),
                    KeyValue::new("luge.request_id", stage.request_id.to_string()),
                    KeyValue::new("luge.queueing_us", us(st.queueing())),
                    KeyValue::new("luge.execution_us", us(st.executed)),
                ],
                status: Status::Unset,
            });
            at += st.total;
        }
    }

    fn export(&self, span: Span) {
        let context = SpanContext::new(
            TraceId::from(span.context.trace_id),
            SpanId::from(span.context.span_id),
            TraceFlags::SAMPLED,
            false,
            TraceState::NONE,
        );
        self.inner.processor.on_end(SpanData {
            span_context: context,
            parent_span_id: span.parent,
            parent_span_is_remote: span.remote_parent,
            span_kind: span.kind,
            name: span.name,
            start_time: span.start,
            end_time: span.end,
            attributes: span.attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: span.status,
            instrumentation_scope: self.inner.scope.clone(),
        });
    }
}

/// One span, before it becomes the SDK's `SpanData`.
struct Span {
    context: TraceContext,
    parent: SpanId,
    remote_parent: bool,
    kind: SpanKind,
    name: Cow<'static, str>,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<KeyValue>,
    status: Status,
}

/// A random u64 (never 0) from std's per-process random hasher keys: ids need to be unique, not
/// unpredictable.
fn random() -> u64 {
    std::hash::RandomState::new().hash_one(Instant::now()).max(1)
}
