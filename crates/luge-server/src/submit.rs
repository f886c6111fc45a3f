//! The one submission step both front ends share.
//!
//! A front end parses its transport (an HTTP request, a UDP-RPC datagram) into a [`Call`] and
//! hands it to [`Gate::submit`]. The gate refuses it if the front end is draining, counts it in
//! flight, and submits it to the runtime, where routing to a worker group, admission on the
//! deadline and scheduling happen. When the runtime answers, the gate records the outcome in the
//! metrics and the request log and hands the [`Outcome`] back to the front end, which only renders it (HTTP status and
//! headers, or an RPC status and fields; both from the one table in `status`). A request refused
//! before it reaches the runtime (body too large, draining, …) gets its outcome from
//! [`Gate::refuse`] and is recorded the same way, so the metrics count every request once,
//! whichever protocol carried it and wherever it was refused — but for one naming no function,
//! counted only as malformed input (a per-function count of made-up names would be unbounded).
//!
//! Time is defined once for both protocols, by the runtime's [`Timing`]: everything counts from
//! [`Call::received`] (the datagram's arrival, the end of the HTTP request head), and
//! "queueing" is [`Timing::queueing`], receipt to answer minus execution.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use luge_runtime::{
    BadRequest, Chain, Failure, Function, Outcome, Rejection, Runtime, SubmitOptions, Timing,
};

use crate::delivery::Delivery;
use crate::log_limit::{LogKind, log_limited};
use crate::metrics::{Answer, Metrics, Protocol};
use crate::request_log::{Entry, RequestLog, Sampler};
use crate::trace::{self, Finished, Traced, Tracing};

/// Bit set in the ids of requests a front end answers without the runtime, so they never
/// collide with the runtime's ids.
pub(crate) const LOCAL_ID_BIT: u64 = 1 << 63;

/// What a request names: a function, or a chain of functions (`luge_runtime::Chain`).
#[derive(Debug, Clone)]
pub enum Target {
    /// One function.
    Function(Arc<Function>),
    /// A chain: its stages run one after the other under one deadline.
    Chain(Arc<Chain>),
}

impl Target {
    /// Its name (metrics, logs, routes).
    pub fn name(&self) -> &str {
        match self {
            Target::Function(f) => &f.config.name,
            Target::Chain(c) => &c.config.name,
        }
    }

    /// The tenant it is accounted to (a chain: its first stage's).
    pub fn tenant(&self) -> u32 {
        match self {
            Target::Function(f) => f.config.tenant,
            Target::Chain(c) => c.stages.first().map_or(0, |f| f.config.tenant),
        }
    }

    /// Its default relative deadline.
    pub fn relative_deadline(&self) -> Duration {
        match self {
            Target::Function(f) => f.config.relative_deadline,
            Target::Chain(c) => c.config.relative_deadline,
        }
    }

    /// The largest request body it takes (a chain: its first stage's).
    pub fn max_request_bytes(&self) -> u64 {
        match self {
            Target::Function(f) => f.config.limits.max_request_bytes,
            Target::Chain(c) => c.stages.first().map_or(0, |f| f.config.limits.max_request_bytes),
        }
    }
}

/// One request, as either front end hands it to [`Gate::submit`].
#[derive(Debug)]
pub struct Call {
    /// The function or chain to run (resolved with [`Gate::resolve`]).
    pub target: Target,
    /// The function's stdin.
    pub payload: Vec<u8>,
    /// The client's relative deadline; the function's default when `None`.
    pub deadline: Option<Duration>,
    /// The client's expected execution time (used only if the function trusts it).
    pub expected: Option<Duration>,
    /// Where the request came from.
    pub client: Option<SocketAddr>,
    /// The client's own id for the request (UDP-RPC), echoed in the answer.
    pub client_id: Option<u64>,
    /// When the node received it: its deadline and every time it reports count from here.
    pub received: Instant,
    /// The trace it runs in ([`Gate::traced`]).
    pub trace: Option<Traced>,
    /// The worker group whose worker read it itself (`SubmitOptions::group`).
    pub group: Option<usize>,
}

/// What the gate keeps of a request until it is answered, for its accounting.
#[derive(Debug, Clone, Copy)]
struct Request {
    client: Option<SocketAddr>,
    client_id: Option<u64>,
    /// The relative deadline it was scheduled with.
    deadline: Duration,
    received: Instant,
    trace: Option<Traced>,
}

/// How a function is named by a transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKey<'a> {
    /// By name (HTTP, after the route table).
    Name(&'a str),
    /// By numeric id (UDP-RPC).
    Id(u32),
}

/// One front end's door to the runtime: the draining flag, the count of requests in flight and
/// the accounting of every outcome.
#[derive(Debug)]
pub struct Gate {
    runtime: Arc<Runtime>,
    metrics: Arc<Metrics>,
    protocol: Protocol,
    draining: AtomicBool,
    /// Submitted to the runtime and not answered yet.
    in_flight: AtomicUsize,
    next_local_id: AtomicU64,
    log: Sampler,
    /// Where spans go, if the node exports them.
    tracing: Option<Tracing>,
    /// How long the front end takes to deliver an answer, as it reports
    /// ([`Gate::delivered`]); set aside at admission.
    delivery: Delivery,
}

impl Gate {
    /// A gate for `protocol`'s front end.
    pub fn new(
        runtime: Arc<Runtime>,
        metrics: Arc<Metrics>,
        protocol: Protocol,
        log: RequestLog,
        tracing: Option<Tracing>,
    ) -> Self {
        Self {
            runtime,
            metrics,
            protocol,
            tracing,
            log: Sampler::new(log),
            draining: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            next_local_id: AtomicU64::new(1),
            delivery: Delivery::default(),
        }
    }

    /// The trace a request runs in: a child of the caller's context (a `traceparent`), else a
    /// new trace when the node exports spans, else none (`trace.rs`).
    pub fn traced(&self, caller: Option<luge_proto::TraceContext>) -> Option<Traced> {
        trace::begin(self.tracing.as_ref(), caller)
    }

    /// The function or chain a request names. An unknown one is counted as malformed input and
    /// yields the refusal to render.
    pub fn resolve(&self, key: FunctionKey<'_>) -> Result<Target, Box<Outcome>> {
        let rt = &self.runtime;
        let found = match key {
            FunctionKey::Name(name) => rt
                .function(name)
                .map(Target::Function)
                .or_else(|| rt.chain(name).map(Target::Chain)),
            FunctionKey::Id(id) => rt
                .function_by_id(id)
                .map(Target::Function)
                .or_else(|| rt.chain_by_id(id).map(Target::Chain)),
        };
        found.ok_or_else(|| {
            self.metrics.malformed(self.protocol, "unknown_function");
            let name = match key {
                FunctionKey::Name(name) => name.to_owned(),
                FunctionKey::Id(id) => format!("#{id}"),
            };
            Box::new(self.local(Err(Failure::BadRequest(BadRequest::UnknownFunction(name))), None))
        })
    }

    /// Submits `call`; `reply` receives its one outcome, for the front end to render, on a
    /// runtime thread (or on the caller's, when the request is refused at once). The outcome is
    /// recorded before `reply` runs, so it is counted even if the client is gone.
    pub fn submit(self: &Arc<Self>, call: Call, reply: impl FnOnce(Outcome) + Send + 'static) {
        // Counted before the draining check (both SeqCst), so that a shutdown, which sets
        // `draining` and then waits for zero in flight, cannot miss a request admitted
        // concurrently.
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let Call { target, payload, deadline, expected, client, client_id, received, trace, group } =
            call;
        let relative = deadline.unwrap_or(target.relative_deadline());
        let request = Request { client, client_id, deadline: relative, received, trace };
        if self.draining.load(Ordering::SeqCst) {
            let failure = Failure::Rejected(Rejection::ShuttingDown);
            let outcome = self.local(Err(failure), Some(received));
            self.account(&target, &outcome, &request, false);
            reply(outcome);
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        let trace = trace.map(|t| t.node);
        let delivery = self.delivery.margin();
        let options =
            SubmitOptions { deadline, expected, received: Some(received), trace, group, delivery };
        let gate = Arc::clone(self);
        let answered = target.clone();
        self.metrics.submitted(target.name());
        let done = move |outcome: Outcome| {
            gate.account(&answered, &outcome, &request, true);
            reply(outcome);
            // After the reply is rendered (and, for UDP-RPC, cached), so that zero in flight
            // means every answer is out or in the outbox of the thread that rendered it, which
            // sends it before that thread waits (`udp::ingress`).
            gate.in_flight.fetch_sub(1, Ordering::SeqCst);
        };
        match &target {
            Target::Function(f) => self.runtime.submit_to(f, payload, options, done),
            Target::Chain(c) => self.runtime.submit_chain(c, payload, options, done),
        }
    }

    /// The front end delivered an answer `delay` after the runtime produced it (its thread's
    /// wait for a CPU, then the write): learnt, and set aside in later admissions
    /// (`delivery.rs`).
    pub fn delivered(&self, delay: Duration) {
        let margin = self.delivery.observe(delay);
        self.metrics.delivery_margin(self.protocol, margin);
    }

    /// The outcome of a request to `target` refused by the front end before submission,
    /// recorded, under a local id. Its time in the node counts from `received`; it is a span
    /// of `trace` (from [`traced`](Self::traced)) like a request that ran.
    pub fn refuse(
        &self,
        target: &Target,
        failure: Failure,
        received: Instant,
        trace: Option<Traced>,
    ) -> Outcome {
        self.refuse_call(target, failure, received, (None, None), trace)
    }

    /// [`refuse`](Self::refuse), with the client's address and own id for the request log.
    pub fn refuse_call(
        &self,
        target: &Target,
        failure: Failure,
        received: Instant,
        client: (Option<SocketAddr>, Option<u64>),
        trace: Option<Traced>,
    ) -> Outcome {
        let outcome = self.local(Err(failure), Some(received));
        let (client, client_id) = client;
        let deadline = target.relative_deadline();
        let request = Request { client, client_id, deadline, received, trace };
        self.account(target, &outcome, &request, false);
        outcome
    }

    /// Records one answered request in the metrics and the request log (`RequestLog`: off by
    /// default, as refusals, traps and limits are caused by clients and guests, are counted in
    /// /metrics, and at overload would write tens of thousands of lines a second); a failure
    /// of the node itself is a warning, at most `log_limit::LINES_PER_SEC` a second.
    fn account(&self, target: &Target, outcome: &Outcome, request: &Request, was_in_flight: bool) {
        let name = target.name();
        let deadline = request.deadline;
        self.metrics.record(name, self.protocol, outcome, Answer { deadline, was_in_flight });
        let entry = Entry {
            protocol: self.protocol,
            function: name,
            tenant: target.tenant(),
            client: request.client,
            client_id: request.client_id,
            deadline,
            trace: request.trace,
            outcome,
        };
        self.log.record(&entry);
        if let (Some(tracing), Some(traced)) = (&self.tracing, request.trace) {
            tracing.finished(&Finished {
                traced,
                function: name,
                tenant: target.tenant(),
                protocol: self.protocol,
                deadline,
                received: request.received,
                outcome,
            });
        }
        if let Err(failure @ Failure::Internal(_)) = &outcome.result {
            // Rate-limited: a node failing every request must not write a line for each.
            log_limited!(
                LogKind::Internal,
                tracing::Level::WARN,
                request_id = outcome.request_id,
                function = name,
                "{failure}"
            );
        }
    }

    /// An outcome produced by the front end itself (not recorded), under a local id.
    pub fn local(&self, result: Result<Vec<u8>, Failure>, received: Option<Instant>) -> Outcome {
        let waited = received.map(|r| r.elapsed()).unwrap_or_default();
        let timing = Timing { queued: waited, total: waited, ..Timing::default() };
        Outcome::new(self.local_id(), result, timing)
    }

    /// A request id for a request answered without the runtime (bit 63 set).
    pub fn local_id(&self) -> u64 {
        LOCAL_ID_BIT | self.next_local_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Refuses every later call with "shutting down".
    pub fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// True once [`drain`](Self::drain) was called.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Requests submitted to the runtime and not answered yet.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }
}
