//! Luge's UDP-RPC wire format, specified in `docs/protocol.md`.
//!
//! Everything here is pure: functions over byte slices and small data structures, with no I/O,
//! threads or clocks, so the server, the client and the fuzzer share exactly the same code.
//!
//! - [`decode`] / [`Message::encode_into`] — the wire format (SledgeScale §3.1: the numeric
//!   function id sits at a fixed offset ahead of the payload). Decoding never panics or allocates.
//! - [`Status`] — response status codes and the HTTP status each maps to.
//! - [`reply_to_invalid`] — whether and how to answer a datagram that did not decode.
//! - [`DedupCache`] — the server's bounded cache of recent responses, so that a retransmitted
//!   request is answered, not executed twice.
//! - [`Backoff`] — the client's retransmission schedule, bounded by the remaining deadline.
//! - [`fuzz_decode`] — the fuzz target.

mod backoff;
mod dedup;
mod status;
mod wire;

pub use crate::backoff::Backoff;
pub use crate::dedup::{DedupCache, Seen};
pub use crate::status::{Status, StatusClass};
pub use crate::wire::{
    DecodeError, Echo, EncodeError, FROZEN_PREFIX_LEN, Flags, InvalidReply, Kind, MAGIC,
    MAX_DATAGRAM, Message, PING_HEADER_LEN, PREFIX_LEN, RECOMMENDED_DATAGRAM, REQUEST_HEADER_LEN,
    RESPONSE_HEADER_LEN, Request, RequestHeader, Response, ResponseHeader, VERSION, decode,
    fuzz_decode, reply_to_invalid,
};
