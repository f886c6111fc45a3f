//! Property tests of the wire format (`docs/protocol.md`) and the duplicate cache.
//!
//! - encode ∘ decode is the identity for every kind, through all three encoders;
//! - [`fuzz_decode`] (decode; re-encode what decodes; evaluate the reply rule for what does not)
//!   never panics on random bytes, on near-valid datagrams, on every truncation of a valid message
//!   or on bit flips of one — and the near-valid generator really reaches successful decodes;
//! - [`DedupCache`] under random operations: an in-flight request is never forgotten (so never
//!   executed twice), a done one answers with its own bytes, eviction is FIFO by completion and
//!   both bounds hold — and evictions and `Full` really happen.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;

use luge_proto::{
    DecodeError, DedupCache, Echo, Flags, MAX_DATAGRAM, Message, RESPONSE_HEADER_LEN, Request,
    RequestHeader, Response, ResponseHeader, Seen, Status, decode, fuzz_decode, reply_to_invalid,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

fn cases(default: u32) -> u32 {
    std::env::var("LUGE_PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// An owned message, viewed as a [`Message`].
#[derive(Debug, Clone)]
enum Owned {
    Request(RequestHeader, Vec<u8>),
    Response(ResponseHeader, Vec<u8>),
    Ping(u64, Flags, Vec<u8>),
    Pong(u64, Flags, Vec<u8>),
}

impl Owned {
    fn view(&self) -> Message<'_> {
        match self {
            Owned::Request(header, p) => Message::Request(Request { header: *header, payload: p }),
            Owned::Response(header, p) => {
                Message::Response(Response { header: *header, payload: p })
            }
            &Owned::Ping(request_id, flags, ref payload) => {
                Message::Ping(Echo { request_id, flags, payload })
            }
            &Owned::Pong(request_id, flags, ref payload) => {
                Message::Pong(Echo { request_id, flags, payload })
            }
        }
    }

    fn encoded(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.view().encode(&mut out).unwrap();
        out
    }
}

/// Mostly small payloads, sometimes up to the largest one a datagram can carry.
fn payload(header_len: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => vec(any::<u8>(), 0..300),
        1 => (0..=MAX_DATAGRAM - header_len, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
    ]
}

fn message() -> impl Strategy<Value = Owned> {
    let flags = any::<u32>().prop_map(Flags);
    let id = 1..=u64::MAX;
    prop_oneof![
        (id.clone(), flags.clone(), any::<[u32; 3]>(), payload(32)).prop_map(
            |(request_id, flags, [function, deadline_us, expected_us], p)| {
                let h = RequestHeader { request_id, flags, function, deadline_us, expected_us };
                Owned::Request(h, p)
            }
        ),
        (any::<u64>(), flags.clone(), any::<(u16, u64, u64)>(), payload(40)).prop_map(
            |(request_id, flags, (status, execution_ns, queueing_ns), p)| {
                let status = Status::from_u16(status);
                let h = ResponseHeader { request_id, flags, status, execution_ns, queueing_ns };
                Owned::Response(h, p)
            }
        ),
        (id.clone(), flags.clone(), payload(20)).prop_map(|(i, f, p)| Owned::Ping(i, f, p)),
        (any::<u64>(), flags, payload(20)).prop_map(|(i, f, p)| Owned::Pong(i, f, p)),
    ]
}

/// The edge `every_truncation_fails_cleanly` once found by chance: a datagram of the largest
/// size plus one byte is refused as too large, not as a length mismatch.
#[test]
fn the_largest_datagram_plus_one_byte_is_too_large() {
    let largest = Owned::Pong(0, Flags(0), vec![0; MAX_DATAGRAM - 20]).encoded();
    assert_eq!(largest.len(), MAX_DATAGRAM);
    assert!(decode(&largest).is_ok());
    let mut longer = largest;
    longer.push(0);
    assert!(matches!(decode(&longer), Err(DecodeError::TooLarge { .. })), "{:?}", decode(&longer));
}

proptest! {
    #![proptest_config(Config::with_cases(cases(2_000)))]

    #[test]
    fn round_trip_every_kind(m in message()) {
        let msg = m.view();
        let bytes = m.encoded();
        prop_assert_eq!(bytes.len(), msg.encoded_len());
        prop_assert_eq!(decode(&bytes), Ok(msg));
        // The zero-allocation path and the vectored (header + payload) path agree.
        let mut buf = vec![0; bytes.len() + 3];
        prop_assert_eq!(msg.encode_into(&mut buf), Ok(bytes.len()));
        prop_assert_eq!(&buf[..bytes.len()], &bytes[..]);
        let header_len = msg.encode_header(&mut buf).unwrap();
        prop_assert_eq!(&buf[..header_len], &bytes[..header_len]);
        prop_assert_eq!(&bytes[header_len..], msg.payload());
        fuzz_decode(&bytes);
    }

    #[test]
    fn random_bytes_never_panic(data in vec(any::<u8>(), 0..2048)) {
        fuzz_decode(&data);
    }

    #[test]
    fn every_truncation_fails_cleanly(m in message()) {
        let bytes = m.encoded();
        let is_reply = matches!(m, Owned::Response(..) | Owned::Pong(..));
        // Large payloads: every length near the header and the end, a stride in between.
        let lengths = (0..bytes.len()).filter(|&n| n < 64 || bytes.len() - n < 64 || n % 509 == 0);
        for n in lengths {
            let cut = &bytes[..n];
            let err = decode(cut).unwrap_err();
            prop_assert!(matches!(
                err,
                DecodeError::Truncated { .. } | DecodeError::LengthMismatch { .. }
            ), "{err:?}");
            let reply = reply_to_invalid(cut, &err);
            // Answered only when attributable, not a reply, and no shorter than the answer.
            prop_assert_eq!(reply.is_some(), n >= RESPONSE_HEADER_LEN && !is_reply);
            if let Some(reply) = reply {
                prop_assert_eq!(reply.request_id, m.view().request_id());
                prop_assert_eq!(reply.status, Status::Malformed);
            }
            fuzz_decode(cut);
        }
        // One byte more: a length mismatch, or — for a datagram already at the largest size —
        // too large.
        let mut longer = bytes.clone();
        longer.push(0);
        let refused = decode(&longer);
        if bytes.len() < MAX_DATAGRAM {
            prop_assert!(matches!(refused, Err(DecodeError::LengthMismatch { .. })), "{refused:?}");
        } else {
            prop_assert!(matches!(refused, Err(DecodeError::TooLarge { .. })), "{refused:?}");
        }
    }

    #[test]
    fn bit_flips_never_panic(m in message(), flips in vec(any::<(usize, u8)>(), 1..4)) {
        let mut bytes = m.encoded();
        let len = bytes.len();
        for (at, bit) in flips {
            // Mostly in the header, where the structure is.
            let at = if at % 4 == 0 { at % len } else { at % len.min(40) };
            bytes[at] ^= 1 << (bit % 8);
        }
        fuzz_decode(&bytes);
    }
}

/// Near-valid datagrams (right magic, version and length field; random kind byte 0–5 and
/// contents) reach past the framing checks; count that they really decode sometimes.
#[test]
fn near_valid_datagrams_reach_deep_paths() {
    let decoded = Cell::new(0u32);
    let strategy = (0u8..6, 20usize..80, vec(any::<u8>(), 80), any::<bool>());
    TestRunner::new(Config::with_cases(cases(5_000)))
        .run(&strategy, |(kind, len, mut bytes, zero_tail)| {
            bytes.truncate(len);
            bytes[..4].copy_from_slice(&[b'L', b'U', 1, kind]);
            let header_len = match kind {
                1 => 32,
                2 => 40,
                _ => 20,
            };
            let declared = len.saturating_sub(header_len) as u32;
            bytes[16..20].copy_from_slice(&declared.to_le_bytes());
            if zero_tail && len >= 24 {
                bytes[22..24].fill(0);
            }
            if decode(&bytes).is_ok() {
                decoded.set(decoded.get() + 1);
            }
            fuzz_decode(&bytes);
            Ok(())
        })
        .unwrap();
    assert!(decoded.get() > 100, "only {} near-valid datagrams decoded", decoded.get());
}

#[test]
fn oversized_datagrams_are_answered_too_large() {
    let mut big = vec![0; MAX_DATAGRAM + 20];
    big[..16].copy_from_slice(&[b'L', b'U', 1, 1, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
    let err = decode(&big).unwrap_err();
    let reply = reply_to_invalid(&big, &err).unwrap();
    assert_eq!((reply.request_id, reply.status), (9, Status::TooLarge));
    fuzz_decode(&big);
}

// ---------------------------------------------------------------------------------------------
// Duplicate cache
// ---------------------------------------------------------------------------------------------

fn peer(i: u8) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, i % 3], 4000 + u16::from(i % 2)))
}

/// A Response datagram of exactly `len` bytes (≥ 40) with `flags`.
fn response_bytes(id: u64, len: usize, flags: Flags) -> Vec<u8> {
    let payload = vec![id as u8; len - 40];
    let header = ResponseHeader { flags, ..ResponseHeader::new(id, Status::Ok) };
    let mut out = Vec::new();
    Message::Response(Response { header, payload: &payload }).encode(&mut out).unwrap();
    out
}

#[test]
fn dedup_scenario() {
    let mut cache = DedupCache::new(2, 0);
    let (a, b) = (peer(0), peer(1));
    assert_eq!(cache.mark_in_flight(a, 1), Seen::New);
    // A retransmit of a running request is not executed again.
    assert_eq!(cache.mark_in_flight(a, 1), Seen::InFlight);
    // Same id from another peer is another request.
    assert_eq!(cache.mark_in_flight(b, 1), Seen::New);
    // Full of in-flight requests: nothing can be evicted.
    assert_eq!(cache.mark_in_flight(a, 2), Seen::Full);
    assert!(cache.complete(a, 1, response_bytes(1, 50, Flags::NONE)));
    let replay = response_bytes(1, 50, Flags::REPLAYED);
    assert_eq!(cache.mark_in_flight(a, 1), Seen::Done(&replay));
    // The completed entry is evicted to make room; the in-flight one is kept.
    assert_eq!(cache.mark_in_flight(a, 2), Seen::New);
    assert_eq!(cache.lookup(a, 1), Seen::New);
    assert_eq!(cache.lookup(b, 1), Seen::InFlight);
    assert_eq!((cache.len(), cache.in_flight(), cache.evictions()), (2, 2, 1));
    // A refusal is abandoned, not cached; abandoning leaves done entries alone.
    assert!(cache.abandon(a, 2));
    assert!(cache.complete(b, 1, response_bytes(1, 40, Flags::NONE)));
    assert!(!cache.abandon(b, 1));
    assert!(!cache.complete(b, 1, response_bytes(1, 60, Flags::NONE)), "first response wins");
    assert_eq!((cache.len(), cache.in_flight(), cache.bytes()), (1, 0, 40));
}

#[derive(Debug, Clone)]
enum Op {
    Mark(u8, u64),
    Complete(u8, u64, usize),
    Abandon(u8, u64),
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![3 => 40usize..100, 1 => 15_000usize..30_000];
    prop_oneof![
        4 => (any::<u8>(), 1..12u64).prop_map(|(p, id)| Op::Mark(p, id)),
        3 => (any::<u8>(), 1..12u64, size).prop_map(|(p, id, n)| Op::Complete(p, id, n)),
        1 => (any::<u8>(), 1..12u64).prop_map(|(p, id)| Op::Abandon(p, id)),
    ]
}

#[test]
fn dedup_cache_properties() {
    let (evictions, fulls) = (Cell::new(0u64), Cell::new(0u32));
    let strategy = (1usize..8, vec(op(), 1..200));
    TestRunner::new(Config::with_cases(cases(2_000)))
        .run(&strategy, |(max_entries, ops)| {
            let mut cache = DedupCache::new(max_entries, 0);
            let mut in_flight = HashSet::new();
            // key → (completion sequence, expected cached bytes)
            let mut done: HashMap<(SocketAddr, u64), (u64, Vec<u8>)> = HashMap::new();
            let mut seq = 0;
            for op in ops {
                match op {
                    Op::Mark(p, id) => {
                        let key = (peer(p), id);
                        match cache.mark_in_flight(key.0, id) {
                            Seen::New => {
                                prop_assert!(!in_flight.contains(&key), "executed twice");
                                in_flight.insert(key);
                            }
                            Seen::InFlight => prop_assert!(in_flight.contains(&key)),
                            Seen::Done(bytes) => prop_assert_eq!(bytes, &done[&key].1[..]),
                            Seen::Full => {
                                fulls.set(fulls.get() + 1);
                                prop_assert_eq!(cache.in_flight(), max_entries);
                            }
                        }
                    }
                    Op::Complete(p, id, len) => {
                        let key = (peer(p), id);
                        let was_done = matches!(cache.lookup(key.0, id), Seen::Done(_));
                        // Room: its own in-flight slot, a free slot, or a done entry to evict.
                        let room = in_flight.contains(&key)
                            || cache.len() < max_entries
                            || cache.len() > cache.in_flight();
                        let response = response_bytes(id, len, Flags::NONE);
                        let stored = cache.complete(key.0, id, response);
                        prop_assert_eq!(stored, !was_done && room);
                        if stored {
                            in_flight.remove(&key);
                            seq += 1;
                            done.insert(key, (seq, response_bytes(id, len, Flags::REPLAYED)));
                        }
                    }
                    Op::Abandon(p, id) => {
                        let key = (peer(p), id);
                        prop_assert_eq!(cache.abandon(key.0, id), in_flight.remove(&key));
                    }
                }
                // Bounds, and in-flight entries are never lost.
                prop_assert!(cache.len() <= max_entries);
                prop_assert!(cache.bytes() <= MAX_DATAGRAM);
                prop_assert_eq!(cache.in_flight(), in_flight.len());
                for &(p, id) in &in_flight {
                    prop_assert_eq!(cache.lookup(p, id), Seen::InFlight);
                }
                // Done entries answer with their own bytes or are gone; eviction is FIFO.
                let mut evicted = Vec::new();
                for (&(p, id), (s, bytes)) in &done {
                    match cache.lookup(p, id) {
                        Seen::Done(cached) => prop_assert_eq!(cached, &bytes[..]),
                        Seen::New => evicted.push(*s),
                        other => prop_assert!(false, "done entry became {other:?}"),
                    }
                }
                let oldest_kept = done.values().map(|v| v.0).filter(|s| !evicted.contains(s)).min();
                if let Some(kept) = oldest_kept {
                    prop_assert!(evicted.iter().all(|&s| s < kept), "eviction not FIFO");
                }
                done.retain(|_, (s, _)| !evicted.contains(s));
            }
            evictions.set(evictions.get() + cache.evictions());
            Ok(())
        })
        .unwrap();
    assert!(evictions.get() > 100 && fulls.get() > 10, "premise: bounds really hit");
}
