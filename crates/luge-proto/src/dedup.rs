//! The server's duplicate-suppression cache (`docs/protocol.md` §6): a bounded map from
//! `(peer, request id)` to *in flight* or *done with these response bytes*, so that a
//! retransmitted request is answered from the cache and never executed twice.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use crate::wire::{Flags, MAGIC, MAX_DATAGRAM, PREFIX_LEN};

/// What the cache knows about a `(peer, request id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen<'a> {
    /// Not recorded. From [`DedupCache::mark_in_flight`]: now recorded in flight — execute it.
    New,
    /// Queued or running: drop the retransmit; the one response comes when it finishes.
    InFlight,
    /// Finished: send these bytes (an encoded Response with [`Flags::REPLAYED`] set).
    Done(&'a [u8]),
    /// From [`DedupCache::mark_in_flight`] only: every entry is in flight and none can be
    /// evicted; answer `Overloaded`.
    Full,
}

#[derive(Debug)]
enum Entry {
    InFlight,
    Done(Box<[u8]>),
}

/// Bounded cache of recent responses keyed by `(peer, request id)`; pure (no clocks).
///
/// Bounds: at most `max_entries` entries and `max_bytes` bytes of cached responses. When a bound
/// is hit the oldest *completed* entry is evicted (FIFO by completion); in-flight entries are
/// never evicted, since a retransmit of a running request must not run it twice. All operations
/// are O(1) amortised (two hash look-ups at most).
///
/// Protocol: on a Request call [`mark_in_flight`](Self::mark_in_flight); on [`Seen::New`] admit
/// it; if admission refuses it, [`abandon`](Self::abandon) it (refusals are not cached); once it
/// has run, send the response and hand its bytes to [`complete`](Self::complete).
#[derive(Debug)]
pub struct DedupCache {
    entries: HashMap<(SocketAddr, u64), Entry>,
    /// Exactly the keys whose entry is `Done`, oldest completion first.
    done_order: VecDeque<(SocketAddr, u64)>,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    in_flight: usize,
    evictions: u64,
}

impl DedupCache {
    /// An empty cache. `max_entries` is raised to at least 1 and `max_bytes` to at least
    /// [`MAX_DATAGRAM`], so that any one response fits.
    pub fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: HashMap::new(),
            done_order: VecDeque::new(),
            max_entries: max_entries.max(1),
            max_bytes: max_bytes.max(MAX_DATAGRAM),
            bytes: 0,
            in_flight: 0,
            evictions: 0,
        }
    }

    /// What is recorded for this request; never [`Seen::Full`]. Changes nothing.
    pub fn lookup(&self, peer: SocketAddr, request_id: u64) -> Seen<'_> {
        match self.entries.get(&(peer, request_id)) {
            None => Seen::New,
            Some(Entry::InFlight) => Seen::InFlight,
            Some(Entry::Done(bytes)) => Seen::Done(bytes),
        }
    }

    /// Records the request as in flight if it is not recorded yet (evicting the oldest completed
    /// entry if the cache is full) and returns what was recorded *before*: [`Seen::New`] means
    /// "execute it". Returns [`Seen::Full`], recording nothing, if every entry is in flight.
    pub fn mark_in_flight(&mut self, peer: SocketAddr, request_id: u64) -> Seen<'_> {
        let key = (peer, request_id);
        if !self.entries.contains_key(&key) {
            if self.entries.len() >= self.max_entries && !self.evict_oldest() {
                return Seen::Full;
            }
            self.entries.insert(key, Entry::InFlight);
            self.in_flight += 1;
            return Seen::New;
        }
        self.lookup(peer, request_id)
    }

    /// Stores the encoded response of a request that ran, setting [`Flags::REPLAYED`] in it (the
    /// caller has already sent the original). Works whether or not the request was marked; a
    /// request already done keeps its first response. Returns whether the response is now cached
    /// (false: already done, or no room because every entry is in flight).
    pub fn complete(&mut self, peer: SocketAddr, request_id: u64, response: Vec<u8>) -> bool {
        let key = (peer, request_id);
        if response.len() > self.max_bytes {
            // Not a datagram at all (`max_bytes ≥ MAX_DATAGRAM`): never cacheable.
            self.abandon(peer, request_id);
            return false;
        }
        match self.entries.get(&key) {
            Some(Entry::Done(_)) => return false,
            Some(Entry::InFlight) => {}
            None => {
                if self.entries.len() >= self.max_entries && !self.evict_oldest() {
                    return false;
                }
            }
        }
        let mut response = response.into_boxed_slice();
        if response.len() >= PREFIX_LEN && response[0..2] == MAGIC {
            let mut flags = [0; 4];
            flags.copy_from_slice(&response[4..8]);
            let flags = Flags(u32::from_le_bytes(flags)).with(Flags::REPLAYED);
            response[4..8].copy_from_slice(&flags.0.to_le_bytes());
        }
        // Terminates with room: `response.len() ≤ max_bytes` and in-flight entries hold no bytes.
        while self.bytes + response.len() > self.max_bytes && self.evict_oldest() {}
        self.bytes += response.len();
        if let Some(Entry::InFlight) = self.entries.insert(key, Entry::Done(response)) {
            self.in_flight -= 1;
        }
        self.done_order.push_back(key);
        true
    }

    /// Forgets an in-flight request (e.g. refused by admission, so a retransmit is re-evaluated).
    /// Completed entries are left alone. Returns whether an entry was removed.
    pub fn abandon(&mut self, peer: SocketAddr, request_id: u64) -> bool {
        let key = (peer, request_id);
        if let Some(Entry::InFlight) = self.entries.get(&key) {
            self.entries.remove(&key);
            self.in_flight -= 1;
            return true;
        }
        false
    }

    /// Evicts the oldest completed entry; false if there is none.
    fn evict_oldest(&mut self) -> bool {
        let Some(key) = self.done_order.pop_front() else { return false };
        if let Some(Entry::Done(bytes)) = self.entries.remove(&key) {
            self.bytes -= bytes.len();
        }
        self.evictions += 1;
        true
    }

    /// Entries recorded (in flight and done).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Bytes of cached responses.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Completed entries evicted so far (a metric: a high rate shortens the duplicate window).
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// The entry bound.
    pub fn max_entries(&self) -> usize {
        self.max_entries
    }
}
