//! The datagram format of `docs/protocol.md` §1–§3 and §7: constants, borrowing message views,
//! canonical encoding, bounds-checked decoding, the reply rule for invalid datagrams and the fuzz
//! target.
//!
//! One file on purpose (above ~600 lines): encoding and decoding mirror each other field by field
//! and are easiest to check side by side; ~150 lines are unit tests.

use thiserror::Error;

use crate::fields::{FieldError, RequestFields};
use crate::status::Status;

/// The first two bytes of every message: ASCII `"LU"`.
pub const MAGIC: [u8; 2] = *b"LU";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 1;
/// Length of the prefix common to every kind (magic … payload length).
pub const PREFIX_LEN: usize = 20;
/// Bytes that mean the same in every version: magic, version, kind, flags, request id.
pub const FROZEN_PREFIX_LEN: usize = 16;
/// Header length of a Request.
pub const REQUEST_HEADER_LEN: usize = 32;
/// Header length of a Response.
pub const RESPONSE_HEADER_LEN: usize = 40;
/// Header length of a Ping or Pong (the prefix alone).
pub const PING_HEADER_LEN: usize = PREFIX_LEN;
/// Largest datagram: the largest UDP payload over IPv4, 65 535 − 20 (IP) − 8 (UDP).
pub const MAX_DATAGRAM: usize = 65_507;
/// Largest datagram that avoids IP fragmentation on a 1 500-byte-MTU IPv4 path (1 500 − 20 − 8).
pub const RECOMMENDED_DATAGRAM: usize = 1_472;

/// Message kind (byte 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Client → server: invoke a function.
    Request = 1,
    /// Server → client: the one answer to a Request.
    Response = 2,
    /// Client → server: echo request (health check, bare-echo baseline).
    Ping = 3,
    /// Server → client: the echo.
    Pong = 4,
}

impl Kind {
    /// The kind for a wire byte, if any.
    pub fn from_u8(byte: u8) -> Option<Kind> {
        match byte {
            1 => Some(Kind::Request),
            2 => Some(Kind::Response),
            3 => Some(Kind::Ping),
            4 => Some(Kind::Pong),
            _ => None,
        }
    }

    /// Header length (prefix included) of this kind.
    pub fn header_len(self) -> usize {
        match self {
            Kind::Request => REQUEST_HEADER_LEN,
            Kind::Response => RESPONSE_HEADER_LEN,
            Kind::Ping | Kind::Pong => PING_HEADER_LEN,
        }
    }

    /// Whether this kind is a reply (never answered, even when invalid).
    pub fn is_reply(self) -> bool {
        matches!(self, Kind::Response | Kind::Pong)
    }
}

/// The flags field (bytes 4–7). Bits without a meaning are ignored by receivers and preserved
/// by the decoder (a datagram re-encodes to the same bytes); they never make a datagram
/// malformed (`docs/protocol.md` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flags(pub u32);

impl Flags {
    /// No flags.
    pub const NONE: Flags = Flags(0);
    /// Request, Ping: this datagram repeats an earlier one with the same request id.
    pub const RETRANSMIT: Flags = Flags(1 << 0);
    /// Response: served from the duplicate cache; the times describe the original execution.
    pub const REPLAYED: Flags = Flags(1 << 1);
    /// Request: answer a chain's per-stage times. Response: the payload begins with the stage
    /// table ([`split_stage_table`](crate::split_stage_table)); set only in answer to a request
    /// that asked.
    pub const STAGES: Flags = Flags(1 << 2);
    /// Request: answer the request's readiness. Response: the payload begins with it
    /// ([`split_readiness`](crate::split_readiness)), before a stage table; set only in answer
    /// to a request that asked and ran.
    pub const READINESS: Flags = Flags(1 << 3);
    /// Response: bits 8–15 hold the load signal ([`Flags::load`]).
    const LOAD_MASK: u32 = 0xff << 8;

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with the bits of `other` set.
    pub fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// Response: the node's load signal, bits 8–15 ([`load_signal`](crate::load_signal),
    /// [`LOAD_REFUSED`](crate::LOAD_REFUSED)); `0` from a node that sends none.
    pub fn load(self) -> u8 {
        // The mask keeps 8 bits: the cast drops nothing.
        ((self.0 & Self::LOAD_MASK) >> 8) as u8
    }

    /// `self` with the load signal set to `load`.
    pub fn with_load(self, load: u8) -> Flags {
        Flags((self.0 & !Self::LOAD_MASK) | (u32::from(load) << 8))
    }
}

/// The fixed fields of a Request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RequestHeader {
    /// Client-chosen, non-zero, unique per client socket.
    pub request_id: u64,
    /// Flags ([`Flags::RETRANSMIT`]).
    pub flags: Flags,
    /// Numeric id of the function to invoke.
    pub function: u32,
    /// Relative deadline in µs from receipt; 0 = the function's default; at most
    /// [`MAX_FIELD_US`](crate::MAX_FIELD_US) (see [`RequestHeader::fields`]).
    pub deadline_us: u32,
    /// Expected execution in µs; 0 = none; at most [`MAX_FIELD_US`](crate::MAX_FIELD_US).
    /// Trusted only where the tenant's config allows.
    pub expected_us: u32,
}

impl RequestHeader {
    /// The deadline and expected execution, checked as both protocols check them
    /// ([`RequestFields::from_us`]).
    pub fn fields(&self) -> Result<RequestFields, FieldError> {
        RequestFields::from_us(u64::from(self.deadline_us), u64::from(self.expected_us))
    }
}

/// The fixed fields of a Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResponseHeader {
    /// The request id being answered (0: an unattributable invalid datagram).
    pub request_id: u64,
    /// Flags ([`Flags::REPLAYED`]).
    pub flags: Flags,
    /// Outcome.
    pub status: Status,
    /// Guest execution on a worker, ns, summed across preemptions.
    pub execution_ns: u64,
    /// Time at the server not executing (receipt to response, minus execution), ns.
    pub queueing_ns: u64,
}

impl ResponseHeader {
    /// A header with this id and status, no flags and zero times.
    pub fn new(request_id: u64, status: Status) -> Self {
        Self { request_id, flags: Flags::NONE, status, execution_ns: 0, queueing_ns: 0 }
    }
}

/// A Request: header and borrowed payload (the function's stdin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// Fixed fields.
    pub header: RequestHeader,
    /// The function's stdin.
    pub payload: &'a [u8],
}

/// A Response: header and borrowed payload (stdout, or a UTF-8 message when not `Ok`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    /// Fixed fields.
    pub header: ResponseHeader,
    /// Stdout when `status` is `Ok`, otherwise a short UTF-8 message (possibly empty).
    pub payload: &'a [u8],
}

/// A Ping or a Pong: request id, flags and an opaque payload echoed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo<'a> {
    /// Non-zero for a Ping; a Pong echoes the Ping's.
    pub request_id: u64,
    /// Flags.
    pub flags: Flags,
    /// Opaque bytes, echoed.
    pub payload: &'a [u8],
}

/// One decoded datagram, borrowing its payload from the datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// Invoke a function.
    Request(Request<'a>),
    /// Answer to a Request.
    Response(Response<'a>),
    /// Echo request.
    Ping(Echo<'a>),
    /// Echo reply.
    Pong(Echo<'a>),
}

/// Why a datagram did not decode. Checks run in the order of the variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum DecodeError {
    /// Longer than [`MAX_DATAGRAM`].
    #[error("datagram of {len} bytes exceeds the maximum of {MAX_DATAGRAM}")]
    TooLarge {
        /// Datagram length.
        len: usize,
    },
    /// Shorter than the prefix or than its kind's header.
    #[error("datagram of {len} bytes is shorter than the {needed}-byte header")]
    Truncated {
        /// Datagram length.
        len: usize,
        /// Bytes the header needs.
        needed: usize,
    },
    /// Does not start with [`MAGIC`].
    #[error("bad magic")]
    BadMagic,
    /// A version this crate does not speak.
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u8),
    /// A kind byte with no meaning.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// Header length + declared payload length ≠ datagram length.
    #[error("payload length {declared} does not match the {actual} bytes after the header")]
    LengthMismatch {
        /// Payload length field.
        declared: u32,
        /// Bytes actually after the header.
        actual: usize,
    },
    /// A Request or Ping with the reserved request id 0.
    #[error("request id 0 is reserved")]
    ZeroRequestId,
    /// A Response whose reserved field is not zero.
    #[error("reserved field is not zero")]
    ReservedNonZero,
}

impl DecodeError {
    /// The status to answer with (if [`reply_to_invalid`] says to answer).
    pub fn status(&self) -> Status {
        match self {
            DecodeError::TooLarge { .. } => Status::TooLarge,
            DecodeError::UnsupportedVersion(_) => Status::UnsupportedVersion,
            _ => Status::Malformed,
        }
    }

    /// A stable snake-case name for metric labels.
    pub fn label(&self) -> &'static str {
        match self {
            DecodeError::TooLarge { .. } => "too_large",
            DecodeError::Truncated { .. } => "truncated",
            DecodeError::BadMagic => "bad_magic",
            DecodeError::UnsupportedVersion(_) => "unsupported_version",
            DecodeError::UnknownKind(_) => "unknown_kind",
            DecodeError::LengthMismatch { .. } => "length_mismatch",
            DecodeError::ZeroRequestId => "zero_request_id",
            DecodeError::ReservedNonZero => "reserved_nonzero",
        }
    }
}

/// Why a message could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
pub enum EncodeError {
    /// Header + payload would exceed [`MAX_DATAGRAM`].
    #[error("payload of {len} bytes exceeds the maximum of {max} for this kind")]
    PayloadTooLarge {
        /// Payload length.
        len: usize,
        /// Largest payload of this kind.
        max: usize,
    },
    /// The output buffer is too small.
    #[error("buffer of {available} bytes is too small for {needed}")]
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// A Request or Ping with the reserved request id 0.
    #[error("request id 0 is reserved")]
    ZeroRequestId,
}

impl<'a> Message<'a> {
    /// The kind.
    pub fn kind(&self) -> Kind {
        match self {
            Message::Request(_) => Kind::Request,
            Message::Response(_) => Kind::Response,
            Message::Ping(_) => Kind::Ping,
            Message::Pong(_) => Kind::Pong,
        }
    }

    /// The request id.
    pub fn request_id(&self) -> u64 {
        match self {
            Message::Request(r) => r.header.request_id,
            Message::Response(r) => r.header.request_id,
            Message::Ping(e) | Message::Pong(e) => e.request_id,
        }
    }

    /// The flags.
    pub fn flags(&self) -> Flags {
        match self {
            Message::Request(r) => r.header.flags,
            Message::Response(r) => r.header.flags,
            Message::Ping(e) | Message::Pong(e) => e.flags,
        }
    }

    /// The payload.
    pub fn payload(&self) -> &'a [u8] {
        match self {
            Message::Request(r) => r.payload,
            Message::Response(r) => r.payload,
            Message::Ping(e) | Message::Pong(e) => e.payload,
        }
    }

    /// Header + payload length.
    pub fn encoded_len(&self) -> usize {
        self.kind().header_len() + self.payload().len()
    }

    /// The checks every encoder runs first: size, then a zero request id where one is reserved.
    fn check(&self) -> Result<(), EncodeError> {
        let (header_len, len) = (self.kind().header_len(), self.payload().len());
        if header_len + len > MAX_DATAGRAM {
            return Err(EncodeError::PayloadTooLarge { len, max: MAX_DATAGRAM - header_len });
        }
        if matches!(self, Message::Request(_) | Message::Ping(_)) && self.request_id() == 0 {
            return Err(EncodeError::ZeroRequestId);
        }
        Ok(())
    }

    /// Writes the header alone into `buf[..header_len]` (the payload length field counts the
    /// payload), for a vectored send of header and payload. Returns the header length.
    pub fn encode_header(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        self.check()?;
        let kind = self.kind();
        let (header_len, len) = (kind.header_len(), self.payload().len());
        let available = buf.len();
        let h = buf
            .get_mut(..header_len)
            .ok_or(EncodeError::BufferTooSmall { needed: header_len, available })?;
        h[0..2].copy_from_slice(&MAGIC);
        h[2] = VERSION;
        h[3] = kind as u8;
        h[4..8].copy_from_slice(&self.flags().0.to_le_bytes());
        h[8..16].copy_from_slice(&self.request_id().to_le_bytes());
        // `len ≤ MAX_DATAGRAM`, checked above, so it fits a u32.
        h[16..20].copy_from_slice(&(len as u32).to_le_bytes());
        match self {
            Message::Request(r) => {
                h[20..24].copy_from_slice(&r.header.function.to_le_bytes());
                h[24..28].copy_from_slice(&r.header.deadline_us.to_le_bytes());
                h[28..32].copy_from_slice(&r.header.expected_us.to_le_bytes());
            }
            Message::Response(r) => {
                h[20..22].copy_from_slice(&r.header.status.as_u16().to_le_bytes());
                h[22..24].fill(0);
                h[24..32].copy_from_slice(&r.header.execution_ns.to_le_bytes());
                h[32..40].copy_from_slice(&r.header.queueing_ns.to_le_bytes());
            }
            Message::Ping(_) | Message::Pong(_) => {}
        }
        Ok(header_len)
    }

    /// Writes the whole message into `buf` without allocating; returns its length.
    pub fn encode_into(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        self.check()?;
        let (total, available) = (self.encoded_len(), buf.len());
        let out =
            buf.get_mut(..total).ok_or(EncodeError::BufferTooSmall { needed: total, available })?;
        let header_len = self.encode_header(out)?;
        out[header_len..].copy_from_slice(self.payload());
        Ok(total)
    }

    /// Appends the whole message to `out`; returns its length. On error `out` is unchanged.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<usize, EncodeError> {
        let start = out.len();
        out.resize(start + self.kind().header_len(), 0);
        match self.encode_header(&mut out[start..]) {
            Ok(_) => {
                out.extend_from_slice(self.payload());
                Ok(out.len() - start)
            }
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }
}

/// Reads `N` bytes at `at`; callers have checked the length.
fn bytes<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    if let Some(src) = data.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

fn u16_at(data: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(bytes(data, at))
}

fn u32_at(data: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes(data, at))
}

fn u64_at(data: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes(data, at))
}

/// Decodes one datagram. Never panics or allocates; see `docs/protocol.md` §7 for the order of
/// the checks. Every datagram that decodes re-encodes to the same bytes.
pub fn decode(data: &[u8]) -> Result<Message<'_>, DecodeError> {
    let len = data.len();
    if len > MAX_DATAGRAM {
        return Err(DecodeError::TooLarge { len });
    }
    // Magic and version are read from the frozen prefix alone, before anything of version 1's
    // layout: a later version's datagram is `UnsupportedVersion` whatever its length (§8).
    if len < FROZEN_PREFIX_LEN {
        return Err(DecodeError::Truncated { len, needed: PREFIX_LEN });
    }
    if data[0..2] != MAGIC {
        return Err(DecodeError::BadMagic);
    }
    if data[2] != VERSION {
        return Err(DecodeError::UnsupportedVersion(data[2]));
    }
    if len < PREFIX_LEN {
        return Err(DecodeError::Truncated { len, needed: PREFIX_LEN });
    }
    let kind = Kind::from_u8(data[3]).ok_or(DecodeError::UnknownKind(data[3]))?;
    let header_len = kind.header_len();
    if len < header_len {
        return Err(DecodeError::Truncated { len, needed: header_len });
    }
    let declared = u32_at(data, 16);
    let payload = &data[header_len..];
    if u64::from(declared) != payload.len() as u64 {
        return Err(DecodeError::LengthMismatch { declared, actual: payload.len() });
    }
    let flags = Flags(u32_at(data, 4));
    let request_id = u64_at(data, 8);
    if request_id == 0 && matches!(kind, Kind::Request | Kind::Ping) {
        return Err(DecodeError::ZeroRequestId);
    }
    Ok(match kind {
        Kind::Request => Message::Request(Request {
            header: RequestHeader {
                request_id,
                flags,
                function: u32_at(data, 20),
                deadline_us: u32_at(data, 24),
                expected_us: u32_at(data, 28),
            },
            payload,
        }),
        Kind::Response => {
            if u16_at(data, 22) != 0 {
                return Err(DecodeError::ReservedNonZero);
            }
            Message::Response(Response {
                header: ResponseHeader {
                    request_id,
                    flags,
                    status: Status::from_u16(u16_at(data, 20)),
                    execution_ns: u64_at(data, 24),
                    queueing_ns: u64_at(data, 32),
                },
                payload,
            })
        }
        Kind::Ping => Message::Ping(Echo { request_id, flags, payload }),
        Kind::Pong => Message::Pong(Echo { request_id, flags, payload }),
    })
}

/// How to answer a datagram that did not decode: a payload-less Response with this id and status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InvalidReply {
    /// The id found at bytes 8–15 of the datagram.
    pub request_id: u64,
    /// [`DecodeError::status`].
    pub status: Status,
}

impl InvalidReply {
    /// The Response to send.
    pub fn message(&self) -> Message<'static> {
        Message::Response(Response {
            header: ResponseHeader::new(self.request_id, self.status),
            payload: &[],
        })
    }
}

/// Whether to answer an invalid datagram (`docs/protocol.md` §7): only when it carries the frozen
/// 16-byte prefix with our magic, is not itself a reply, and is at least as long as the
/// 40-byte reply — an answer to a datagram whose source nobody verified must not be larger
/// than the datagram, or the server amplifies a spoofer's traffic. Whether the peer address is
/// usable, and the rate limits, are the caller's checks.
pub fn reply_to_invalid(datagram: &[u8], err: &DecodeError) -> Option<InvalidReply> {
    if datagram.len() < RESPONSE_HEADER_LEN.max(FROZEN_PREFIX_LEN) || datagram[0..2] != MAGIC {
        return None;
    }
    if Kind::from_u8(datagram[3]).is_some_and(Kind::is_reply) {
        return None;
    }
    Some(InvalidReply { request_id: u64_at(datagram, 8), status: err.status() })
}

/// The fuzz target: decodes `data`; a datagram that decodes must re-encode to exactly `data`, and
/// for one that does not, the reply decision is evaluated and, if any, its reply must encode
/// within 40 bytes and be no longer than `data`. Panics only on a violated invariant, i.e. a bug.
pub fn fuzz_decode(data: &[u8]) {
    match decode(data) {
        Ok(msg) => {
            let mut out = Vec::with_capacity(data.len());
            assert_eq!(msg.encode(&mut out), Ok(data.len()), "decoded message must re-encode");
            assert!(out == data, "encoding must be canonical");
            // The fields a response announces, read in the order a client reads them (readiness
            // first, then the stage table: `luge_client`'s `Response::from_wire`), re-encode to
            // the bytes they came from.
            if let Message::Response(r) = msg {
                let mut payload = r.payload;
                if r.header.flags.contains(Flags::READINESS)
                    && let Ok((ns, rest)) = crate::split_readiness(payload)
                {
                    let mut again = Vec::new();
                    crate::encode_readiness(ns, &mut again);
                    assert!(payload.starts_with(&again), "readiness re-encodes to its bytes");
                    assert!(again.len() + rest.len() == payload.len(), "readiness is a prefix");
                    payload = rest;
                }
                if r.header.flags.contains(Flags::STAGES)
                    && let Ok((table, rest)) = crate::split_stage_table(payload)
                {
                    let stages: Vec<_> = table.iter().collect();
                    let mut again = Vec::new();
                    assert!(crate::encode_stage_table(&stages, &mut again).is_ok());
                    assert!(again.len() + rest.len() == payload.len(), "the table is a prefix");
                    assert!(payload.starts_with(&again), "a table re-encodes to its bytes");
                }
            }
        }
        Err(err) => {
            if let Some(reply) = reply_to_invalid(data, &err) {
                let mut buf = [0; RESPONSE_HEADER_LEN];
                assert_eq!(reply.message().encode_into(&mut buf), Ok(RESPONSE_HEADER_LEN));
                assert!(RESPONSE_HEADER_LEN <= data.len(), "a reply must not amplify");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: u64 = 0x0102_0304_0506_0708;

    /// The example of `docs/protocol.md` §9.
    const GOLDEN_REQUEST: [u8; 34] = [
        0x4c, 0x55, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02,
        0x01, 0x02, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x88, 0x13, 0x00, 0x00, 0x64, 0x00,
        0x00, 0x00, 0x68, 0x69,
    ];
    const GOLDEN_RESPONSE: [u8; 42] = [
        0x4c, 0x55, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02,
        0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xdc, 0x05, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0xc4, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x6f, 0x6b,
    ];

    fn golden_request() -> Message<'static> {
        Message::Request(Request {
            header: RequestHeader {
                request_id: ID,
                flags: Flags::NONE,
                function: 7,
                deadline_us: 5_000,
                expected_us: 100,
            },
            payload: b"hi",
        })
    }

    fn golden_response() -> Message<'static> {
        Message::Response(Response {
            header: ResponseHeader {
                request_id: ID,
                flags: Flags::NONE,
                status: Status::Ok,
                execution_ns: 1_500,
                queueing_ns: 2_500,
            },
            payload: b"ok",
        })
    }

    /// The hex dump of `docs/protocol.md` §9, parsed from the doc itself.
    fn doc_examples() -> Vec<Vec<u8>> {
        let doc = include_str!("../../../docs/protocol.md");
        let examples = doc.split("## 9. Examples").nth(1).unwrap_or_default();
        let mut out = Vec::new();
        for block in examples.split("```").skip(1).step_by(2) {
            let bytes = block.lines().flat_map(|line| {
                line.split("   ").next().unwrap_or_default().split_whitespace().map(|h| {
                    u8::from_str_radix(h, 16).unwrap_or_else(|_| panic!("bad hex {h:?} in doc"))
                })
            });
            out.push(bytes.collect());
        }
        out
    }

    #[test]
    fn golden_bytes_match_code_and_doc() {
        let mut out = Vec::new();
        assert_eq!(golden_request().encode(&mut out), Ok(34));
        assert_eq!(out, GOLDEN_REQUEST);
        assert_eq!(decode(&GOLDEN_REQUEST), Ok(golden_request()));
        out.clear();
        assert_eq!(golden_response().encode(&mut out), Ok(42));
        assert_eq!(out, GOLDEN_RESPONSE);
        assert_eq!(decode(&GOLDEN_RESPONSE), Ok(golden_response()));
        assert_eq!(doc_examples(), vec![GOLDEN_REQUEST.to_vec(), GOLDEN_RESPONSE.to_vec()]);
    }

    #[test]
    fn the_load_signal_rides_in_flags_bits_8_to_15() {
        let flags = Flags::REPLAYED.with_load(200);
        assert_eq!(flags.load(), 200);
        assert!(flags.contains(Flags::REPLAYED), "other bits are kept");
        assert_eq!(flags.with_load(7).load(), 7, "setting replaces, not ORs");
        assert_eq!(Flags::NONE.load(), 0, "a node that sends none signals 0");
        let Message::Response(mut r) = golden_response() else { unreachable!() };
        r.header.flags = flags;
        let mut out = Vec::new();
        assert_eq!(Message::Response(r).encode(&mut out), Ok(42));
        assert_eq!(out[5], 200, "byte 5 on the wire (flags are little-endian from byte 4)");
        assert_eq!(decode(&out).map(|m| m.flags().load()), Ok(200));
    }

    #[test]
    fn function_id_sits_ahead_of_the_payload() {
        assert_eq!(u32_at(&GOLDEN_REQUEST, 20), 7);
        assert_eq!(&GOLDEN_REQUEST[REQUEST_HEADER_LEN..], b"hi");
    }

    #[test]
    fn decode_errors_in_order() {
        let mut d = GOLDEN_REQUEST.to_vec();
        assert_eq!(decode(&d[..19]), Err(DecodeError::Truncated { len: 19, needed: 20 }));
        assert_eq!(decode(&d[..25]), Err(DecodeError::Truncated { len: 25, needed: 32 }));
        assert_eq!(decode(&d[..33]), Err(DecodeError::LengthMismatch { declared: 2, actual: 1 }));
        d[3] = 9;
        assert_eq!(decode(&d), Err(DecodeError::UnknownKind(9)));
        d[2] = 2;
        assert_eq!(decode(&d), Err(DecodeError::UnsupportedVersion(2)));
        // A later version is recognised from the frozen prefix alone, however short the rest.
        assert_eq!(decode(&d[..16]), Err(DecodeError::UnsupportedVersion(2)));
        assert_eq!(decode(&d[..15]), Err(DecodeError::Truncated { len: 15, needed: 20 }));
        d[0] = b'X';
        assert_eq!(decode(&d), Err(DecodeError::BadMagic));
        let big = vec![0; MAX_DATAGRAM + 1];
        assert_eq!(decode(&big), Err(DecodeError::TooLarge { len: MAX_DATAGRAM + 1 }));
        let mut zero = GOLDEN_REQUEST;
        zero[8..16].fill(0);
        assert_eq!(decode(&zero), Err(DecodeError::ZeroRequestId));
        let mut reserved = GOLDEN_RESPONSE;
        reserved[23] = 1;
        assert_eq!(decode(&reserved), Err(DecodeError::ReservedNonZero));
    }

    #[test]
    fn invalid_datagrams_get_replies_only_when_attributable() {
        let mut v2 = GOLDEN_REQUEST.to_vec();
        v2[2] = 2;
        v2.resize(RESPONSE_HEADER_LEN, 0);
        let err = decode(&v2).err();
        assert_eq!(err, Some(DecodeError::UnsupportedVersion(2)));
        let reply = err.and_then(|e| reply_to_invalid(&v2, &e));
        assert_eq!(
            reply,
            Some(InvalidReply { request_id: ID, status: Status::UnsupportedVersion })
        );
        let short = DecodeError::Truncated { len: 15, needed: PREFIX_LEN };
        assert_eq!(reply_to_invalid(&GOLDEN_REQUEST[..15], &short), None);
        // Attributable but shorter than the 40-byte reply: answering would amplify.
        let truncated = DecodeError::Truncated { len: 16, needed: PREFIX_LEN };
        assert_eq!(reply_to_invalid(&GOLDEN_REQUEST[..16], &truncated), None);
        assert_eq!(reply_to_invalid(&v2[..16], &DecodeError::UnsupportedVersion(2)), None);
        let mut long = GOLDEN_REQUEST.to_vec();
        long.resize(RESPONSE_HEADER_LEN, 0);
        let mismatch = DecodeError::LengthMismatch { declared: 2, actual: 8 };
        assert_eq!(reply_to_invalid(&long, &mismatch).map(|r| r.status), Some(Status::Malformed));
        // A malformed reply is never answered.
        assert_eq!(reply_to_invalid(&GOLDEN_RESPONSE[..41], &mismatch), None);
        let mut foreign = GOLDEN_REQUEST;
        foreign[1] = 0;
        assert_eq!(reply_to_invalid(&foreign, &DecodeError::BadMagic), None);
    }

    #[test]
    fn encode_errors() {
        let big = vec![0; MAX_DATAGRAM];
        let msg = Message::Ping(Echo { request_id: 1, flags: Flags::NONE, payload: &big });
        let too_large = Err(EncodeError::PayloadTooLarge {
            len: MAX_DATAGRAM,
            max: MAX_DATAGRAM - PING_HEADER_LEN,
        });
        assert_eq!(msg.encode_into(&mut [0; 8]), too_large);
        let mut out = vec![7];
        assert_eq!(msg.encode(&mut out), too_large);
        assert_eq!(out, [7]);
        assert_eq!(
            golden_request().encode_into(&mut [0; 33]),
            Err(EncodeError::BufferTooSmall { needed: 34, available: 33 })
        );
        let zero = Message::Ping(Echo { request_id: 0, flags: Flags::NONE, payload: &[] });
        assert_eq!(zero.encode(&mut out), Err(EncodeError::ZeroRequestId));
        let mut buf = [0; 64];
        assert_eq!(golden_request().encode_header(&mut buf), Ok(REQUEST_HEADER_LEN));
        assert_eq!(buf[..REQUEST_HEADER_LEN], GOLDEN_REQUEST[..REQUEST_HEADER_LEN]);
    }
}
