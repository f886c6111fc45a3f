//! The UDP front end's counters: the live atomics every reader and completion bumps
//! ([`UdpCounters`]), and the snapshot a caller and `/metrics` read ([`UdpStats`]), each counter
//! with its metric name and help text in one list.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of the UDP front end (a snapshot; see [`UdpServer::stats`](super::UdpServer::stats)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    /// Datagrams received.
    pub datagrams: u64,
    /// Of those, datagrams a worker read itself when idle (run-to-completion, `ingress`).
    pub worker_datagrams: u64,
    /// Requests submitted to the runtime.
    pub submitted: u64,
    /// Pings answered.
    pub pings: u64,
    /// Datagrams that did not decode.
    pub malformed: u64,
    /// Replies sent to invalid datagrams.
    pub invalid_replies: u64,
    /// Replies to invalid datagrams suppressed by the rate limits (per source or global).
    pub invalid_replies_limited: u64,
    /// Well-formed replies (Response, Pong) received, which are never answered.
    pub stray_replies: u64,
    /// Requests carrying the `RETRANSMIT` flag.
    pub retransmits: u64,
    /// Retransmits of requests still in flight, dropped.
    pub duplicates_dropped: u64,
    /// Retransmits of finished requests, answered from the cache.
    pub replayed: u64,
    /// Retransmits of finished requests whose cached answer, larger than the retransmit, was not
    /// sent because of the rate limits (per source or global).
    pub replays_limited: u64,
    /// Requests for an unknown function id.
    pub unknown_function: u64,
    /// Requests refused `BadRequest` (a field out of range).
    pub bad_request: u64,
    /// Refusals before the runtime (unknown function, bad request, cache full, draining) not
    /// sent because of the rate limits (per source or global).
    pub refusals_limited: u64,
    /// Refusals before the runtime not sent because the request was shorter than the 40-byte
    /// reply (a reply must never be larger than the datagram that caused it).
    pub refusals_too_short: u64,
    /// Requests refused because every cache entry was in flight.
    pub overloaded: u64,
    /// Requests refused while draining.
    pub shutting_down: u64,
    /// Replies the kernel refused to send.
    pub send_errors: u64,
}

impl UdpStats {
    /// Every counter with its metric name (`luge_udp_<name>_total`) and help text.
    pub(crate) fn series(&self) -> [(&'static str, &'static str, u64); 19] {
        [
            ("datagrams", "Datagrams received.", self.datagrams),
            (
                "worker_datagrams",
                "Datagrams an idle worker read itself (received, run and answered on one thread).",
                self.worker_datagrams,
            ),
            ("submitted", "Requests submitted to the runtime.", self.submitted),
            ("pings", "Pings answered.", self.pings),
            ("malformed", "Datagrams that did not decode.", self.malformed),
            ("invalid_replies", "Replies sent to invalid datagrams.", self.invalid_replies),
            (
                "invalid_replies_limited",
                "Replies to invalid datagrams suppressed by the per-source or global rate limit.",
                self.invalid_replies_limited,
            ),
            ("stray_replies", "Responses and Pongs received (never answered).", self.stray_replies),
            ("retransmits", "Requests carrying the RETRANSMIT flag.", self.retransmits),
            (
                "duplicates_dropped",
                "Retransmits of requests in flight, dropped.",
                self.duplicates_dropped,
            ),
            (
                "replayed",
                "Retransmits of finished requests answered from the cache.",
                self.replayed,
            ),
            (
                "replays_limited",
                "Cached answers larger than their retransmit suppressed by the rate limits.",
                self.replays_limited,
            ),
            ("unknown_function", "Requests for an unknown function id.", self.unknown_function),
            (
                "bad_request",
                "Requests refused BadRequest (a field out of range).",
                self.bad_request,
            ),
            (
                "refusals_limited",
                "Refusals before the runtime suppressed by the per-source or global rate limit.",
                self.refusals_limited,
            ),
            (
                "refusals_too_short",
                "Refusals before the runtime not sent: the request was shorter than the reply.",
                self.refusals_too_short,
            ),
            (
                "overloaded",
                "Requests refused because the duplicate cache was full.",
                self.overloaded,
            ),
            ("shutting_down", "Requests refused while draining.", self.shutting_down),
            ("send_errors", "Replies the kernel refused to send.", self.send_errors),
        ]
    }

    /// The counters of `self` and `other` added (several front ends on one registry).
    pub(crate) fn plus(self, other: UdpStats) -> UdpStats {
        UdpStats {
            datagrams: self.datagrams + other.datagrams,
            worker_datagrams: self.worker_datagrams + other.worker_datagrams,
            submitted: self.submitted + other.submitted,
            pings: self.pings + other.pings,
            malformed: self.malformed + other.malformed,
            invalid_replies: self.invalid_replies + other.invalid_replies,
            invalid_replies_limited: self.invalid_replies_limited + other.invalid_replies_limited,
            stray_replies: self.stray_replies + other.stray_replies,
            retransmits: self.retransmits + other.retransmits,
            duplicates_dropped: self.duplicates_dropped + other.duplicates_dropped,
            replayed: self.replayed + other.replayed,
            replays_limited: self.replays_limited + other.replays_limited,
            unknown_function: self.unknown_function + other.unknown_function,
            bad_request: self.bad_request + other.bad_request,
            refusals_limited: self.refusals_limited + other.refusals_limited,
            refusals_too_short: self.refusals_too_short + other.refusals_too_short,
            overloaded: self.overloaded + other.overloaded,
            shutting_down: self.shutting_down + other.shutting_down,
            send_errors: self.send_errors + other.send_errors,
        }
    }
}

/// The live counters of one UDP front end, shared with the [`Metrics`](crate::Metrics) registry it reports to.
#[derive(Debug, Default)]
pub(crate) struct UdpCounters {
    pub(super) datagrams: AtomicU64,
    pub(super) worker_datagrams: AtomicU64,
    pub(super) submitted: AtomicU64,
    pub(super) pings: AtomicU64,
    pub(super) malformed: AtomicU64,
    pub(super) invalid_replies: AtomicU64,
    pub(super) invalid_replies_limited: AtomicU64,
    pub(super) stray_replies: AtomicU64,
    pub(super) retransmits: AtomicU64,
    pub(super) duplicates_dropped: AtomicU64,
    pub(super) replayed: AtomicU64,
    pub(super) replays_limited: AtomicU64,
    pub(super) unknown_function: AtomicU64,
    pub(super) bad_request: AtomicU64,
    pub(super) refusals_limited: AtomicU64,
    pub(super) refusals_too_short: AtomicU64,
    pub(super) overloaded: AtomicU64,
    pub(super) shutting_down: AtomicU64,
    pub(super) send_errors: AtomicU64,
}

pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

impl UdpCounters {
    pub(crate) fn snapshot(&self) -> UdpStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        UdpStats {
            datagrams: get(&self.datagrams),
            worker_datagrams: get(&self.worker_datagrams),
            submitted: get(&self.submitted),
            pings: get(&self.pings),
            malformed: get(&self.malformed),
            invalid_replies: get(&self.invalid_replies),
            invalid_replies_limited: get(&self.invalid_replies_limited),
            stray_replies: get(&self.stray_replies),
            retransmits: get(&self.retransmits),
            duplicates_dropped: get(&self.duplicates_dropped),
            replayed: get(&self.replayed),
            replays_limited: get(&self.replays_limited),
            unknown_function: get(&self.unknown_function),
            bad_request: get(&self.bad_request),
            refusals_limited: get(&self.refusals_limited),
            refusals_too_short: get(&self.refusals_too_short),
            overloaded: get(&self.overloaded),
            shutting_down: get(&self.shutting_down),
            send_errors: get(&self.send_errors),
        }
    }
}
