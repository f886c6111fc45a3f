//! The one error type of every client.

use std::time::Duration;

use luge_proto::{DecodeError, EncodeError, Status};

/// Why a call produced no response. A response with a failure status is *not* an error: it is
/// returned with its status (RPC) or HTTP status code.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No response arrived before the call's timeout.
    #[error("no response within {elapsed:?} after {attempts} attempt(s)")]
    Timeout {
        /// Datagrams sent (1 for HTTP).
        attempts: u32,
        /// Time waited.
        elapsed: Duration,
    },
    /// A socket operation failed (including "connection refused": no server at the address).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// Only undecodable datagrams came back from the server.
    #[error("undecodable response: {0}")]
    Protocol(#[from] DecodeError),
    /// The request could not be encoded (e.g. the payload does not fit a datagram).
    #[error("cannot encode the request: {0}")]
    Encode(#[from] EncodeError),
    /// The HTTP exchange failed (connection, protocol or body error).
    #[error("HTTP error: {0}")]
    Http(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The base URL and route do not form a usable `http://` URL.
    #[error("invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL as built.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server answered a Ping with a Response of this status (it refused the datagram).
    #[error("the server answered with status {0}")]
    Status(Status),
    /// The admin API refused the request (its HTTP status and message).
    #[error("HTTP {status}: {message}")]
    Refused {
        /// The HTTP status code.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// Not sent: the adaptive window (the node had signalled load) stayed full for half the
    /// call's deadline, or its timeout when it has none.
    #[error("not sent: the client's window stayed full for {waited:?} (the node signalled load)")]
    Backpressure {
        /// Time the call waited for a place.
        waited: Duration,
    },
    /// The async client's receive task is gone (its runtime shut down).
    #[error("the client's receive task has stopped")]
    Closed,
}
