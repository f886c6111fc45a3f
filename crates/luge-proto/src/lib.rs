//! Luge's wire formats: UDP-RPC's, specified in `docs/protocol.md`, and the HTTP front end's
//! header names and admin JSON (`docs/http.md`).
//!
//! Everything here is pure: functions over byte slices and small data structures, with no I/O,
//! threads or clocks, so the server, the client and the fuzzer share exactly the same code.
//!
//! - [`decode`] / [`Message::encode_into`] — the wire format (SledgeScale §3.1: the numeric
//!   function id sits at a fixed offset ahead of the payload). Decoding never panics or allocates.
//! - [`Status`] — response status codes and the HTTP status each maps to.
//! - [`reply_to_invalid`] — whether and how to answer a datagram that did not decode.
//! - [`RequestFields`], [`validate_deadline`], [`validate_expected`] — the one check of a
//!   request's deadline and expected execution, and the meaning of `0`, for both protocols.
//! - [`DedupCache`] — the server's bounded cache of recent responses, so that a retransmitted
//!   request is answered, not executed twice.
//! - [`Backoff`] — the client's retransmission schedule, bounded by the remaining deadline.
//! - [`load_signal`] — the load a Response carries back (flags bits 8–15), so clients can slow
//!   down before the node must refuse.
//! - [`split_stage_table`] / [`encode_stage_table`] — a chain's per-stage times at the front of
//!   a Response's payload, when the request asked ([`Flags::STAGES`]).
//! - [`TraceContext`] — W3C `traceparent`, parsed and formatted once for the front end and the
//!   guest's `TRACEPARENT`.
//! - [`fuzz_decode`] — the fuzz target.
//! - [`FunctionInfo`], [`ChainInfo`], [`ChainSpec`] and the `*_HEADER` names — HTTP's vocabulary; [`micros`] / [`nanos`] — the
//!   one Duration → integer conversion of every `*_us` / `*_ns` field.

mod backoff;
mod dedup;
mod fields;
mod http;
mod load;
mod readiness;
mod stages;
mod status;
mod trace;
mod wire;

pub use crate::backoff::Backoff;
pub use crate::dedup::{DedupCache, Seen};
pub use crate::fields::{
    Field, FieldError, MAX_FIELD_US, RequestFields, validate_deadline, validate_expected,
    validate_us,
};
pub use crate::http::{
    ChainInfo, ChainSpec, DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER, FunctionInfo,
    LOAD_HEADER, OUTCOME_HEADER, QUEUEING_HEADER, READINESS_HEADER, REQUEST_ID_HEADER,
    STAGE_HEADER, STAGES_HEADER, instant_after, micros, nanos,
};
pub use crate::load::{LOAD_REFUSED, LOAD_WAITED_ALL, load_signal};
pub use crate::readiness::{READINESS_LEN, ReadinessTruncated, encode_readiness, split_readiness};
pub use crate::stages::{
    MAX_TABLE_STAGES, STAGE_ENTRY_LEN, StageTable, StageTableError, StageTimes, encode_stage_table,
    split_stage_table, stage_table_len,
};
pub use crate::status::{Status, StatusClass};
pub use crate::trace::{TRACEPARENT_HEADER, TRACEPARENT_LEN, TraceContext, splitmix64};
pub use crate::wire::{
    DecodeError, Echo, EncodeError, FROZEN_PREFIX_LEN, Flags, InvalidReply, Kind, MAGIC,
    MAX_DATAGRAM, Message, PING_HEADER_LEN, PREFIX_LEN, RECOMMENDED_DATAGRAM, REQUEST_HEADER_LEN,
    RESPONSE_HEADER_LEN, Request, RequestHeader, Response, ResponseHeader, VERSION, decode,
    fuzz_decode, reply_to_invalid,
};
