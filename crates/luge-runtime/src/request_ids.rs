//! Request ids that say nothing about other requests.
//!
//! Every request gets a node-wide id, shown to its client (`Luge-Request-Id`) and its guest
//! (`LUGE_REQUEST_ID`) and written in logs. A plain counter would let any tenant read the node's
//! total request rate — other tenants' traffic — from the gap between two of its own ids. So the
//! id is a keyed permutation of the counter: a four-round Feistel network over 62 bits whose
//! round function is SipHash under a key drawn at start (after Luby and Rackoff's construction;
//! with 31-bit halves its proven bound is modest, about q² / 2³¹ for q ids seen, which is
//! enough to keep a tenant from reading the counter off the ids it is shown, not a cipher to
//! rely on beyond that). Being a permutation, it
//! never repeats an id (until 2⁶² requests); ids stay below 2⁶², clear of the HTTP front end's
//! local ids (bit 63), and are never 0.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of each Feistel half.
const HALF: u32 = 31;
const HALF_MASK: u64 = (1 << HALF) - 1;

/// The counter and the key of its permutation.
#[derive(Debug)]
pub(crate) struct RequestIds {
    next: AtomicU64,
    /// SipHash under a random key (std's `RandomState` draws one per instance).
    key: RandomState,
}

impl RequestIds {
    /// A counter from 0 under a fresh random key.
    pub(crate) fn new() -> Self {
        Self { next: AtomicU64::new(0), key: RandomState::new() }
    }

    /// The next id: unique, non-zero, below 2⁶².
    pub(crate) fn next(&self) -> u64 {
        loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let id = self.permute(n & ((1 << (2 * HALF)) - 1));
            if id != 0 {
                return id;
            }
        }
    }

    /// The permutation of `x` (< 2⁶²).
    fn permute(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> HALF, x & HALF_MASK);
        for round in 0..4_u8 {
            let f = self.key.hash_one((round, right)) & HALF_MASK;
            (left, right) = (right, left ^ f);
        }
        (left << HALF) | right
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_unique_nonzero_below_2_62_and_not_a_counter() {
        let ids = RequestIds::new();
        let taken: Vec<u64> = (0..200_000).map(|_| ids.next()).collect();
        assert!(taken.iter().all(|&id| id != 0 && id < 1 << 62));
        assert_eq!(taken.iter().collect::<HashSet<_>>().len(), taken.len(), "an id repeated");
        // Consecutive requests' ids differ by no fixed step, nor mostly by small ones.
        let steps: HashSet<u64> = taken.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
        assert!(steps.len() > taken.len() / 2, "{} distinct steps", steps.len());
        let close = taken.windows(2).filter(|w| w[1].abs_diff(w[0]) < 1 << 40).count();
        assert!(close < 100, "{close} consecutive ids within 2^40 of each other");
    }

    #[test]
    fn two_nodes_number_their_requests_differently() {
        let (a, b) = (RequestIds::new(), RequestIds::new());
        let a: Vec<u64> = (0..8).map(|_| a.next()).collect();
        let b: Vec<u64> = (0..8).map(|_| b.next()).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn the_permutation_is_one_to_one_on_a_small_domain() {
        // Every Feistel network is a bijection; check it on the 2^16 values whose high half is
        // fixed and whose low half varies within 16 bits.
        let ids = RequestIds::new();
        let images: HashSet<u64> = (0..1 << 16).map(|x| ids.permute(x)).collect();
        assert_eq!(images.len(), 1 << 16);
    }
}
