//! The UDP-RPC target: `luge_proto`'s decoder and encoder, both ways round.
//!
//! 1. The input as a datagram: [`luge_proto::fuzz_decode`] (what decodes re-encodes to the same
//!    bytes; what does not gets a reply only when attributable and never larger than it).
//! 2. The input as a message: its first bytes choose the kind and every header field, the rest
//!    is the payload. Encoding fails only for a reserved request id 0 or a payload beyond
//!    [`MAX_DATAGRAM`]; otherwise
//!    [`Message::encode`], [`Message::encode_into`] and [`Message::encode_header`] agree, and
//!    the bytes decode to the same message.

use luge_proto::{
    Echo, EncodeError, Flags, MAX_DATAGRAM, Message, Request, RequestHeader, Response,
    ResponseHeader, Status, decode, fuzz_decode,
};

use crate::Bytes;

/// Runs both directions on `data`.
pub fn run(data: &[u8]) {
    fuzz_decode(data);
    encode_round_trip(data);
}

fn encode_round_trip(data: &[u8]) {
    let mut b = Bytes::new(data);
    let kind = b.u8() % 4;
    let (request_id, flags) = (b.u64(), Flags(b.u32()));
    let (word, deadline_us, expected_us) = (b.u32(), b.u32(), b.u32());
    let (execution_ns, queueing_ns, status) = (b.u64(), b.u64(), Status::from_u16(b.u16()));
    let payload = b.rest();
    let message = match kind {
        0 => Message::Request(Request {
            header: RequestHeader { request_id, flags, function: word, deadline_us, expected_us },
            payload,
        }),
        1 => Message::Response(Response {
            header: ResponseHeader { request_id, flags, status, execution_ns, queueing_ns },
            payload,
        }),
        2 => Message::Ping(Echo { request_id, flags, payload }),
        _ => Message::Pong(Echo { request_id, flags, payload }),
    };
    let mut out = Vec::new();
    match message.encode(&mut out) {
        Ok(len) => {
            assert_eq!(len, out.len(), "encode's length");
            assert_eq!(len, message.encoded_len(), "encoded_len");
            assert_eq!(decode(&out), Ok(message), "encode → decode");
            let mut exact = vec![0; len];
            assert_eq!(message.encode_into(&mut exact), Ok(len), "encode_into");
            assert_eq!(exact, out, "encode_into's bytes");
            let header_len = message.kind().header_len();
            assert_eq!(message.encode_header(&mut exact), Ok(header_len), "encode_header");
            assert_eq!(exact, out, "encode_header's bytes");
            if len > 0 {
                let short = message.encode_into(&mut exact[..len - 1]);
                assert!(matches!(short, Err(EncodeError::BufferTooSmall { .. })), "short buffer");
            }
        }
        Err(EncodeError::ZeroRequestId) => {
            assert_eq!(request_id, 0, "only id 0 is reserved");
            assert!(matches!(message, Message::Request(_) | Message::Ping(_)), "reserved kinds");
            assert!(out.is_empty(), "a failed encode leaves the buffer alone");
        }
        Err(EncodeError::PayloadTooLarge { len, max }) => {
            assert_eq!(len, payload.len(), "the payload's length");
            assert_eq!(max, MAX_DATAGRAM - message.kind().header_len(), "the largest payload");
            assert!(len > max, "refused a payload that fits");
        }
        Err(e) => panic!("encoding a {}-byte payload failed: {e}", payload.len()),
    }
}
