//! Rust clients for Luge's two front ends.
//!
//! - UDP-RPC (`docs/protocol.md`): [`RpcClient`] (blocking, one call at a time per client) and
//!   [`AsyncRpcClient`] (tokio; any number of concurrent calls over one socket, demultiplexed by
//!   request id, optionally bounded by a window, fixed or adapting to the load signal in the
//!   node's responses: [`AsyncRpcClient::connect_adaptive`]). Both retransmit on the [`Backoff`] schedule
//!   with the `RETRANSMIT` flag, start their request ids from a random value and ignore
//!   responses to other ids.
//! - HTTP/1.1: [`AsyncHttpClient`] (hyper-util's pooled keep-alive client) and [`HttpClient`]
//!   (the same, driven by a private current-thread tokio runtime), reading Luge's timing headers.
//!
//! - The admin API: [`AdminClient`] (blocking) lists, shows, adds and removes functions as
//!   [`FunctionInfo`], the type the server writes, and chains ([`ChainSpec`] in, [`ChainInfo`]
//!   out).
//!
//! Every call takes [`CallOptions`]: deadline and expected execution for the server, and how
//! long the client waits.

mod admin;
mod error;
mod http;
mod rpc;
mod rpc_async;
mod window;

pub use crate::admin::{AddOptions, AdminClient};
pub use crate::error::ClientError;
pub use crate::http::{AsyncHttpClient, HttpClient, HttpResponse};
pub use crate::rpc::{CallOptions, RpcClient, RpcResponse};
pub use crate::rpc_async::AsyncRpcClient;
pub use luge_proto::{
    Backoff, ChainInfo, ChainSpec, DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER,
    FunctionInfo, LOAD_HEADER, LOAD_REFUSED, LOAD_WAITED_ALL, OUTCOME_HEADER, QUEUEING_HEADER,
    READINESS_HEADER, REQUEST_ID_HEADER, StageTimes, Status, StatusClass,
};
