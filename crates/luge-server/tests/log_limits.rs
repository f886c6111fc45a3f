//! Issue #15: what a guest writes to stderr reaches the log rate-limited, and the lines dropped
//! are counted in /metrics (`luge_log_lines_suppressed_total{kind="guest_stderr"}`). A test
//! binary of its own: it installs a process-wide `tracing` subscriber that counts the lines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use luge_client::{CallOptions, RpcClient, Status};
use luge_runtime::{FunctionConfig, RuntimeConfig};
use luge_server::{Node, NodeConfig, NodeFunction, UdpConfig};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// `spin` writes a line to stderr and exits 2 when its input is not a number.
const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");

/// Counts the log lines that carry a guest's stderr; every level enabled.
struct Counter;

/// Lines of `spin`'s stderr written to the log.
static STDERR_LINES: AtomicU64 = AtomicU64::new(0);

/// Finds whether an event's message is a line of `spin`'s stderr.
struct IsStderr(bool);

impl Visit for IsStderr {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 |= format!("{value:?}").starts_with("stderr: spin:");
        }
    }
}

impl Subscriber for Counter {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut is = IsStderr(false);
        event.record(&mut is);
        if is.0 {
            STDERR_LINES.fetch_add(1, Ordering::Relaxed);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_guest_writing_stderr_on_every_request_is_rate_limited_and_counted() {
    tracing::subscriber::set_global_default(Counter).unwrap();
    let mut spin = FunctionConfig::new("spin");
    spin.relative_deadline = Duration::from_secs(10);
    let config = NodeConfig {
        runtime: RuntimeConfig { workers: 1, ..RuntimeConfig::default() },
        http: None,
        udp: Some(UdpConfig { addr: ([127, 0, 0, 1], 0).into(), ..UdpConfig::default() }),
    };
    let function =
        NodeFunction { config: spin, module: SPIN.as_bytes().to_vec(), route: "/s".into() };
    let node = Node::start(config, &[function]).unwrap();
    let id = node.runtime().function("spin").unwrap().id.0;
    let mut client = RpcClient::connect(node.rpc_addr().unwrap()).unwrap();
    let opts = CallOptions::default().with_timeout(Duration::from_secs(20));
    const CALLS: u64 = 200;
    let started = Instant::now();
    for _ in 0..CALLS {
        let r = client.call(id, b"not a number", opts).unwrap();
        assert_eq!(r.status, Status::ExitFailure, "{}", r.message());
    }
    let windows = started.elapsed().as_secs() + 2;
    let suppressed = luge_runtime::stderr_lines_suppressed();
    let written = STDERR_LINES.load(Ordering::Relaxed);
    // Each run's stderr is either written or counted (a client's retransmissions of a finished
    // request are replayed, not run again) …
    assert_eq!(written + suppressed, CALLS, "{written} written, {suppressed} suppressed");
    // … and at most 10 are written in a second, however fast the guest produces them.
    assert!(written <= 10 * windows, "{written} lines written in {windows} one-second windows");
    assert!(suppressed > 0 || windows * 10 >= CALLS);
    let text = node.metrics().render(node.runtime());
    let line = format!("luge_log_lines_suppressed_total{{kind=\"guest_stderr\"}} {suppressed}\n");
    assert!(text.contains(&line), "no {line:?} in\n{text}");
    for kind in ["udp_receive", "udp_send", "internal"] {
        assert!(text.contains(&format!("luge_log_lines_suppressed_total{{kind=\"{kind}\"}} ")));
    }
    assert_eq!(node.shutdown().udp_unanswered, 0);
}
