//! A request's readiness in a UDP-RPC Response (`docs/protocol.md` §1.6), UDP-RPC's counterpart
//! of HTTP's `Luge-Readiness-Ns` (HORSE §2): a client asks with the Request flag
//! [`Flags::READINESS`]; a server that knows the flag answers a request that ran with the same
//! flag on the Response and the readiness — ns from the datagram's receipt to the request's first
//! guest instruction, a u64 little-endian — at the front of the payload, before a stage table if
//! one was asked for too. As with the stage table, the fixed header does not change: a client
//! that did not ask never gets the field, and a server that does not know the flag answers
//! without it.
//!
//! [`Flags::READINESS`]: crate::Flags::READINESS

/// Bytes of the readiness field.
pub const READINESS_LEN: usize = 8;

/// A payload too short for the readiness field its flag announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the readiness field needs {READINESS_LEN} bytes, the payload holds {0}")]
pub struct ReadinessTruncated(pub usize);

/// Appends the readiness field (`readiness_ns`) to `out`.
pub fn encode_readiness(readiness_ns: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&readiness_ns.to_le_bytes());
}

/// Splits the payload of a Response flagged [`Flags::READINESS`](crate::Flags::READINESS) into
/// the readiness (ns) and the rest.
pub fn split_readiness(payload: &[u8]) -> Result<(u64, &[u8]), ReadinessTruncated> {
    match payload.split_first_chunk::<READINESS_LEN>() {
        Some((field, rest)) => Ok((u64::from_le_bytes(*field), rest)),
        None => Err(ReadinessTruncated(payload.len())),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn the_field_round_trips_and_a_short_payload_is_an_error() {
        for ns in [0, 1, 1_234_567, u64::MAX] {
            let mut payload = Vec::new();
            encode_readiness(ns, &mut payload);
            payload.extend_from_slice(b"stdout");
            assert_eq!(split_readiness(&payload).unwrap(), (ns, &b"stdout"[..]));
        }
        assert_eq!(split_readiness(&[1, 2, 3]), Err(ReadinessTruncated(3)));
        assert_eq!(split_readiness(&[0; 8]).unwrap(), (0, &[][..]));
    }
}
