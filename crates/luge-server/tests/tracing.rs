//! Trace context and spans end to end: a caller's W3C `traceparent` is continued (the answer's
//! `traceparent`, the guest's `TRACEPARENT`, each chain stage a child span), new traces are
//! started and sampled only when the node exports, and the exported spans carry the ids the
//! request ran under. Spans go to the SDK's in-memory exporter through its simple processor.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::net::SocketAddr;
use std::time::Duration;

use luge_client::{CallOptions, RpcClient, Status};
use luge_proto::TraceContext;
use luge_runtime::{ChainConfig, FunctionConfig, RuntimeConfig};
use luge_server::{HttpConfig, Node, NodeChain, NodeConfig, NodeFunction, Tracing, UdpConfig};
use opentelemetry::trace::{SpanId, SpanKind, TraceId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SimpleSpanProcessor, SpanData};

mod common;

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A node serving `args` (prints its environment) and the chain `traced` = echo → args, over
/// HTTP and UDP-RPC, exporting spans to a fresh in-memory exporter when `sample` is given.
fn start(sample: Option<f64>) -> (Node, InMemorySpanExporter) {
    let exporter = InMemorySpanExporter::default();
    let tracing = sample.map(|s| Tracing::new(SimpleSpanProcessor::new(exporter.clone()), s));
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: Some(HttpConfig { addr: any, tracing: tracing.clone(), ..HttpConfig::default() }),
        udp: Some(UdpConfig { addr: any, tracing, ..UdpConfig::default() }),
    };
    let functions: Vec<NodeFunction> = [("args", common::ARGS), ("echo", common::ECHO)]
        .into_iter()
        .map(|(name, wat)| NodeFunction {
            config: FunctionConfig::new(name),
            module: wat.as_bytes().to_vec(),
            route: format!("/{name}"),
        })
        .collect();
    let chain = NodeChain {
        config: ChainConfig {
            name: "traced".into(),
            stages: vec!["echo".into(), "args".into()],
            relative_deadline: Duration::from_secs(10),
        },
        route: "/traced".into(),
    };
    (Node::start_with_chains(config, &functions, &[chain]).unwrap(), exporter)
}

/// `POST path` with `traceparent` (if given) over a fresh connection: status, the answer's
/// `traceparent`, body.
fn post(node: &Node, path: &str, traceparent: Option<&str>) -> (u16, Option<String>, String) {
    let header: Vec<String> =
        traceparent.map(|t| format!("traceparent: {t}")).into_iter().collect();
    let answer = common::exchange(node.http_addr().unwrap(), "POST", path, &header, "");
    (answer.status, answer.header("traceparent"), answer.body)
}

/// The `TRACEPARENT` a guest printed, if any.
fn guest_context(body: &str) -> Option<TraceContext> {
    body.lines()
        .find_map(|l| l.strip_prefix("TRACEPARENT="))
        .map(|v| TraceContext::parse(v).unwrap())
}

fn spans(exporter: &InMemorySpanExporter) -> Vec<SpanData> {
    exporter.get_finished_spans().unwrap()
}

fn attribute(span: &SpanData, key: &str) -> String {
    let kv = span.attributes.iter().find(|kv| kv.key.as_str() == key);
    kv.unwrap_or_else(|| panic!("no {key} in {span:?}")).value.to_string()
}

#[test]
fn a_callers_trace_is_continued_into_the_guest_the_answer_and_the_span() {
    let (node, exporter) = start(Some(0.0));
    let caller = TraceContext::parse(CALLER).unwrap();
    let (status, answer, body) = post(&node, "/args", Some(CALLER));
    assert_eq!(status, 200, "{body}");
    // The node's span: same trace, a new span id, the caller's sampling decision.
    let ours = TraceContext::parse(&answer.expect("an answer's traceparent")).unwrap();
    assert_eq!((ours.trace_id, ours.sampled), (caller.trace_id, true));
    assert_ne!(ours.span_id, caller.span_id);
    assert_eq!(guest_context(&body), Some(ours), "the guest runs under the node's span: {body}");
    // Exported although the node samples none of its own traces: the caller sampled this one.
    let spans = spans(&exporter);
    let [span] = &spans[..] else { panic!("one span: {spans:?}") };
    assert_eq!(span.span_context.trace_id(), TraceId::from(caller.trace_id));
    assert_eq!(span.span_context.span_id(), SpanId::from(ours.span_id));
    assert_eq!(span.parent_span_id, SpanId::from(caller.span_id));
    assert!(span.parent_span_is_remote);
    assert_eq!((span.span_kind.clone(), span.name.as_ref()), (SpanKind::Server, "args"));
    assert_eq!(attribute(span, "luge.outcome"), "ok");
    assert_eq!(attribute(span, "luge.protocol"), "http");
    assert!(span.end_time > span.start_time);
    // An unsampled caller is continued, and not exported.
    let unsampled = CALLER.replace("-01", "-00");
    let (_, answer, body) = post(&node, "/args", Some(&unsampled));
    let ours = TraceContext::parse(&answer.unwrap()).unwrap();
    assert!(!ours.sampled && guest_context(&body) == Some(ours));
    assert_eq!(exporter.get_finished_spans().unwrap().len(), 1);
    node.shutdown();
}

#[test]
fn each_chain_stage_is_a_child_span_of_the_request() {
    let (node, exporter) = start(Some(1.0));
    let (status, answer, body) = post(&node, "/traced", Some(CALLER));
    assert_eq!(status, 200, "{body}");
    let ours = TraceContext::parse(&answer.unwrap()).unwrap();
    // The last stage's guest runs under stage 1's span.
    assert_eq!(guest_context(&body), Some(ours.stage(1)), "{body}");
    let spans = spans(&exporter);
    assert_eq!(spans.len(), 3, "{spans:?}");
    let server = spans.iter().find(|s| s.span_kind == SpanKind::Server).unwrap();
    assert_eq!(
        (server.name.as_ref(), server.span_context.span_id()),
        ("traced", SpanId::from(ours.span_id))
    );
    for (k, name) in ["echo", "args"].into_iter().enumerate() {
        let stage =
            spans.iter().find(|s| s.span_context.span_id() == SpanId::from(ours.stage(k).span_id));
        let stage = stage.unwrap_or_else(|| panic!("no span for stage {k}: {spans:?}"));
        assert_eq!((stage.name.as_ref(), stage.span_kind.clone()), (name, SpanKind::Internal));
        assert_eq!(stage.parent_span_id, SpanId::from(ours.span_id));
        assert_eq!(stage.span_context.trace_id(), TraceId::from(ours.trace_id));
        assert_eq!(attribute(stage, "luge.stage"), k.to_string());
        assert!(stage.start_time >= server.start_time && stage.end_time <= server.end_time);
    }
    node.shutdown();
}

#[test]
fn new_traces_are_started_and_sampled_only_when_the_node_exports() {
    // Exporting, every request sampled: over HTTP without a context, and over UDP-RPC.
    let (node, exporter) = start(Some(1.0));
    let (_, answer, body) = post(&node, "/args", None);
    let ours = TraceContext::parse(&answer.expect("a new trace")).unwrap();
    assert!(ours.sampled && guest_context(&body) == Some(ours));
    // An invalid context is ignored: a new trace, not the caller's.
    let (_, answer, _) = post(&node, "/args", Some(&CALLER.to_uppercase()));
    let other = TraceContext::parse(&answer.unwrap()).unwrap();
    assert_ne!(other.trace_id, TraceContext::parse(CALLER).unwrap().trace_id);
    let id = node.runtime().function("args").unwrap().id.0;
    let mut rpc = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let r =
        rpc.call(id, b"", CallOptions::default().with_timeout(Duration::from_secs(20))).unwrap();
    assert_eq!(r.status, Status::Ok);
    let guest =
        guest_context(&String::from_utf8_lossy(&r.payload)).expect("a new trace over UDP-RPC");
    let spans = spans(&exporter);
    assert_eq!(spans.len(), 3, "{spans:?}");
    let rpc_span = spans.iter().find(|s| attribute(s, "luge.protocol") == "rpc").unwrap();
    assert_eq!(rpc_span.span_context.span_id(), SpanId::from(guest.span_id));
    assert_eq!(rpc_span.parent_span_id, SpanId::INVALID, "a root span");
    node.shutdown();

    // Exporting, none of the node's own traces sampled: no context, nothing exported.
    let (node, exporter) = start(Some(0.0));
    let (_, answer, body) = post(&node, "/args", None);
    assert_eq!((answer, guest_context(&body)), (None, None));
    assert!(exporter.get_finished_spans().unwrap().is_empty());
    node.shutdown();

    // Not exporting: no new trace, but a caller's is still continued.
    let (node, _) = start(None);
    let (_, answer, body) = post(&node, "/args", None);
    assert_eq!((answer, guest_context(&body)), (None, None));
    let (_, answer, body) = post(&node, "/args", Some(CALLER));
    let ours = TraceContext::parse(&answer.unwrap()).unwrap();
    assert_eq!(guest_context(&body), Some(ours));
    node.shutdown();
}

#[test]
fn a_request_refused_before_it_runs_is_a_span_and_answers_the_callers_trace() {
    let (node, exporter) = start(Some(0.0));
    let caller = TraceContext::parse(CALLER).unwrap();
    // A body over the function's 1 MiB limit: refused 413 by the front end, never submitted.
    let header = [format!("traceparent: {CALLER}")];
    let big = "x".repeat((1 << 20) + 1);
    let answer = common::exchange(node.http_addr().unwrap(), "POST", "/args", &header, &big);
    assert_eq!(answer.status, 413, "{}", answer.body);
    let ours = TraceContext::parse(&answer.header("traceparent").expect("a traceparent")).unwrap();
    assert_eq!((ours.trace_id, ours.sampled), (caller.trace_id, true));
    let spans = spans(&exporter);
    let [span] = &spans[..] else { panic!("one span: {spans:?}") };
    assert_eq!(span.span_context.span_id(), SpanId::from(ours.span_id));
    assert_eq!(span.parent_span_id, SpanId::from(caller.span_id));
    assert_eq!(attribute(span, "luge.outcome"), "too_large");
    node.shutdown();
}
