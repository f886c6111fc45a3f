//! Luge's front ends over the runtime: HTTP/1.1 (hyper) and UDP-RPC (`luge-proto`), the route
//! table, the status mapping both share, Prometheus metrics, and [`Node`], which owns a runtime
//! and its front ends and shuts them down in order.

mod arrival;
mod delivery;
mod http;
mod log_limit;
mod metrics;
pub mod net;
mod node;
mod otlp;
mod request_log;
mod snapshot;
mod status;
mod submit;
mod trace;
mod udp;

pub use crate::http::{
    AdminConfig, AdminToken, HTTP_BLOCKING_THREADS, HttpConfig, HttpError, HttpServer,
    MIN_TOKEN_LEN, check_route, fuzz_request_head,
};
pub use crate::log_limit::count_log_backlog_drops;
pub use crate::metrics::{Answer, MAX_GONE, Metrics, Protocol};
pub use crate::node::{Node, NodeChain, NodeConfig, NodeError, NodeFunction, ShutdownReport};
pub use crate::otlp::OtlpError;
pub use crate::request_log::{BadRequestLog, RequestLog};
pub use crate::status::{http_status, outcome_label, rpc_status};
pub use crate::submit::Target;
pub use crate::trace::{Traced, Tracing};
pub use crate::udp::{UdpConfig, UdpError, UdpServer, UdpStats};
