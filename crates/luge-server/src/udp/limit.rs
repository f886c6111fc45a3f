//! Budgets for the replies the front end produces on its own — answers to invalid datagrams and
//! refusals of requests that never reach the runtime (`docs/protocol.md` §7, §11.1).
//!
//! UDP sources are unverified: anyone can send a datagram with a victim's address as its
//! source, and every reply then goes to the victim. So each such reply takes a token from the
//! bucket of its source *and* from one global bucket; a reply without tokens is not sent (and
//! counted). Memory is bounded whatever the spoofer does: sources share a fixed table of
//! [`SOURCE_BUCKETS`] buckets, indexed by a randomly keyed hash of the source's IPv4 address or
//! IPv6 /64 prefix (one host's or one site's addresses share one bucket, so rotating through
//! them buys no extra replies; two sources may collide into a bucket and then share it).
//!
//! Each bucket is a GCRA (the virtual-scheduling form of a token bucket: one "theoretical
//! arrival time" per bucket), which allows `burst` replies at once and then one every
//! `1 / rate`. One budget serves every socket of a front end, behind one mutex (its receive
//! threads and its workers' readers share it).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::time::Instant;

use crate::net::client_unit;

/// Buckets in the per-source table (a power of two): 32 KiB.
pub(super) const SOURCE_BUCKETS: usize = 4096;

/// Why a reply was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Denied {
    /// Its source's bucket was empty.
    Source,
    /// The global bucket was empty.
    Global,
}

/// One token bucket in GCRA form.
#[derive(Debug, Clone, Copy)]
struct Gcra {
    /// Time between tokens, ns; `None`: a rate of 0, nothing is ever allowed.
    interval: Option<u64>,
    /// How far ahead of now the theoretical arrival time may run: `burst × interval`.
    tolerance: u64,
}

impl Gcra {
    fn new(per_sec: u32, burst: u32) -> Self {
        let interval = (per_sec > 0).then(|| 1_000_000_000 / u64::from(per_sec));
        let tolerance = interval.map_or(0, |i| i.saturating_mul(u64::from(burst.max(1))));
        Self { interval, tolerance }
    }

    /// The bucket's theoretical arrival time after taking a token from it, whose time is now
    /// `tat`, at `now` (ns); `None` if it has no token.
    fn after_take(&self, tat: u64, now: u64) -> Option<u64> {
        let interval = self.interval?;
        let next = tat.max(now).saturating_add(interval);
        (next - now <= self.tolerance).then_some(next)
    }
}

/// The per-source table and the global bucket.
pub(super) struct ReplyBudget {
    source: Gcra,
    global: Gcra,
    buckets: Box<[u64]>,
    global_tat: u64,
    hasher: RandomState,
    epoch: Instant,
}

impl ReplyBudget {
    /// `per_source` replies a second to one source (bursts of as many), `global` a second in
    /// all (bursts of as many).
    pub(super) fn new(per_source: u32, global: u32) -> Self {
        Self {
            source: Gcra::new(per_source, per_source),
            global: Gcra::new(global, global),
            buckets: vec![0; SOURCE_BUCKETS].into_boxed_slice(),
            global_tat: 0,
            hasher: RandomState::new(),
            epoch: Instant::now(),
        }
    }

    /// Takes a token for a reply to `source` at `now` from its bucket and from the global one,
    /// or from neither: a reply the global bucket denies costs its source nothing.
    pub(super) fn take(&mut self, source: IpAddr, now: Instant) -> Result<(), Denied> {
        let ns =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let slot = self.slot(source);
        let own = self.source.after_take(self.buckets[slot], ns).ok_or(Denied::Source)?;
        let global = self.global.after_take(self.global_tat, ns).ok_or(Denied::Global)?;
        self.buckets[slot] = own;
        self.global_tat = global;
        Ok(())
    }

    /// The bucket of `source`'s client unit (`net::client_unit`: its IPv4 address, or the /64
    /// prefix of its IPv6 address; an IPv4-mapped IPv6 address counts as the IPv4 address).
    fn slot(&self, source: IpAddr) -> usize {
        (self.hasher.hash_one(client_unit(source)) as usize) & (SOURCE_BUCKETS - 1)
    }

    /// When the bucket of `source` has a token again (tests).
    #[cfg(test)]
    fn refill_in(&self, source: IpAddr, now: Instant) -> std::time::Duration {
        let ns =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let tat = self.buckets[self.slot(source)];
        let interval = self.source.interval.unwrap_or(u64::MAX);
        let free_at = tat.saturating_add(interval).saturating_sub(self.source.tolerance);
        std::time::Duration::from_nanos(free_at.saturating_sub(ns))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    #[test]
    fn a_source_gets_its_burst_then_its_rate() {
        let mut b = ReplyBudget::new(10, 1_000);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        for _ in 0..10 {
            assert_eq!(b.take(a, t0), Ok(()));
        }
        assert_eq!(b.take(a, t0), Err(Denied::Source));
        // Another source has its own bucket (unless it collides: try a few).
        let others = ["198.51.100.7", "203.0.113.9", "2001:db8::1", "10.1.2.3"];
        assert!(others.iter().any(|o| b.take(ip(o), t0).is_ok()));
        // One token every 100 ms.
        assert!(b.refill_in(a, t0) <= Duration::from_millis(100));
        assert_eq!(b.take(a, t0 + Duration::from_millis(99)), Err(Denied::Source));
        assert_eq!(b.take(a, t0 + Duration::from_millis(100)), Ok(()));
        assert_eq!(b.take(a, t0 + Duration::from_millis(100)), Err(Denied::Source));
    }

    #[test]
    fn the_global_bucket_caps_all_sources() {
        let mut b = ReplyBudget::new(100, 3);
        let t0 = Instant::now();
        assert_eq!(b.take(ip("192.0.2.1"), t0), Ok(()));
        assert_eq!(b.take(ip("192.0.2.1"), t0), Ok(()));
        assert_eq!(b.take(ip("2001:db8::1"), t0), Ok(()));
        assert_eq!(b.take(ip("2001:db8::2"), t0), Err(Denied::Global));
        let mut none = ReplyBudget::new(0, 10);
        assert_eq!(none.take(ip("192.0.2.1"), t0), Err(Denied::Source));
    }

    #[test]
    fn a_reply_the_global_bucket_denies_costs_its_source_nothing() {
        // One token a second per source, one in all: A takes the global one, so B is denied
        // globally — and B's own token is still there once the global bucket refills.
        let mut b = ReplyBudget::new(1, 1);
        let t0 = Instant::now();
        let a = ip("192.0.2.1");
        // Another bucket than A's (the hash key is random: two may collide).
        let others = ["198.51.100.7", "203.0.113.9", "2001:db8::1", "10.1.2.3"].map(ip);
        let Some(c) = others.into_iter().find(|&o| b.slot(o) != b.slot(a)) else {
            panic!("five sources in one bucket of {SOURCE_BUCKETS}");
        };
        assert_eq!(b.take(a, t0), Ok(()));
        assert_eq!(b.take(c, t0), Err(Denied::Global));
        assert_eq!(b.refill_in(c, t0), Duration::ZERO, "B's token was not spent");
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(b.take(c, t1), Ok(()));
    }

    #[test]
    fn addresses_of_one_ipv6_prefix_or_mapped_ipv4_share_a_bucket() {
        let b = ReplyBudget::new(1, 1);
        assert_eq!(b.slot(ip("2001:db8:1:2::1")), b.slot(ip("2001:db8:1:2:ffff::9")));
        assert_eq!(b.slot(ip("::ffff:192.0.2.1")), b.slot(ip("192.0.2.1")));
    }
}
