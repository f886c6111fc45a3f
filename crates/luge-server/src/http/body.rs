//! Request bodies under a cap: read through a length limit that fails as soon as the body
//! crosses it, at a minimum rate, and the bounded drain that lets a client read its 413 instead
//! of a reset.
//!
//! The minimum rate keeps a slow client ("slow POST") from holding a connection and its buffers
//! for the whole `body_read_timeout`: after a grace period, a body must have arrived at
//! `min_body_rate` bytes per second on average, checked whenever the server waits for the next
//! part of it.

use std::net::IpAddr;
use std::sync::Mutex;

use super::*;
use crate::net::client_unit;

/// Why a body could not be read.
pub(super) enum BodyError {
    /// It crossed the limit; the rest can still be drained.
    TooLarge(Limited<Incoming>),
    /// The front end holds as many body bytes as `max_buffered_body_bytes` allows, or this
    /// client as many as its share (`max_buffered_body_bytes_per_client`); the rest can still
    /// be drained.
    BuffersFull(Limited<Incoming>),
    /// It could not be read at all.
    Unreadable(Unreadable),
}

/// A body that could not be read, for a reason other than its size.
pub(super) enum Unreadable {
    /// The client did not finish in time.
    Timeout,
    /// The connection failed or the framing was invalid.
    Read(String),
}

/// How fast a body must arrive.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyPace {
    /// The whole body within this.
    pub(super) timeout: Duration,
    /// After [`RATE_GRACE`], at least this many bytes per second on average (0 = no minimum).
    pub(super) min_rate: u64,
}

/// How long a body may arrive slower than the minimum rate (a client's first round trips).
pub(super) const RATE_GRACE: Duration = Duration::from_secs(2);

impl BodyPace {
    /// When the body, `received` bytes so far after starting at `start`, falls below the pace if
    /// nothing more arrives.
    pub(super) fn due(&self, start: Instant, received: u64) -> Instant {
        let end = start + self.timeout;
        if self.min_rate == 0 {
            return end;
        }
        let next = Duration::from_secs_f64((received + 1) as f64 / self.min_rate as f64);
        end.min(start + RATE_GRACE + next)
    }
}

impl Shared {
    /// The pace the configuration asks of request bodies.
    pub(super) fn body_pace(&self) -> BodyPace {
        BodyPace { timeout: self.config.body_read_timeout, min_rate: self.config.min_body_rate }
    }
}

/// The most a body's buffer reserves before its bytes arrive.
const INITIAL_RESERVE: u64 = 64 << 10;

/// The bytes of request bodies a front end holds — being read, or read and waiting for their
/// answer — under one bound for the process (`HttpConfig::max_buffered_body_bytes`), so that
/// many connections, each under its own cap, cannot together take the node's memory; and under
/// a share per client (`HttpConfig::max_buffered_body_bytes_per_client`, counted by
/// `net::client_unit`), so that one client cannot take the whole bound from every other.
#[derive(Debug, Clone)]
pub(super) struct BodyBudget {
    total: Option<(Arc<Semaphore>, usize)>,
    shares: Option<Arc<ClientShares>>,
}

/// Body bytes held per client, each under `cap`.
#[derive(Debug)]
struct ClientShares {
    cap: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
    /// Bodies refused because their client held its share.
    refused: AtomicU64,
}

impl BodyBudget {
    /// A budget of `bytes` (0 = unbounded), of which one client may hold `per_client` (0 = no
    /// share).
    pub(super) fn new(bytes: u64, per_client: u64) -> Self {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS);
        let per_client = usize::try_from(per_client).unwrap_or(usize::MAX);
        Self {
            total: (bytes > 0).then(|| (Arc::new(Semaphore::new(bytes)), bytes)),
            shares: (per_client > 0).then(|| {
                Arc::new(ClientShares {
                    cap: per_client,
                    held: Mutex::default(),
                    refused: AtomicU64::new(0),
                })
            }),
        }
    }

    /// The most one client may hold, if bounded: no one body may be larger.
    pub(super) fn bound(&self) -> Option<u64> {
        let total = self.total.as_ref().map(|(_, bound)| *bound);
        let share = self.shares.as_ref().map(|s| s.cap);
        total.into_iter().chain(share).min().map(|b| b as u64)
    }

    /// Bytes of the budget in use.
    pub(super) fn in_use(&self) -> u64 {
        self.total
            .as_ref()
            .map_or(0, |(s, bound)| bound.saturating_sub(s.available_permits()) as u64)
    }

    /// Bodies refused because their client held its share.
    pub(super) fn refused_per_client(&self) -> u64 {
        self.shares.as_ref().map_or(0, |s| s.refused.load(Ordering::Relaxed))
    }
}

/// One body's share of a [`BodyBudget`], returned when dropped.
#[derive(Debug)]
pub(super) struct Buffered {
    budget: BodyBudget,
    held: Option<OwnedSemaphorePermit>,
    bytes: usize,
    /// The client unit its bytes count against, if any.
    client: Option<IpAddr>,
}

impl Buffered {
    fn new(budget: &BodyBudget, client: Option<IpAddr>) -> Self {
        Self { budget: budget.clone(), held: None, bytes: 0, client: client.map(client_unit) }
    }

    /// Holds `bytes` in all (never fewer than already held); false if the budget, or the
    /// client's share of it, has not that many left.
    fn hold(&mut self, bytes: usize) -> bool {
        let Some(more) = bytes.checked_sub(self.bytes).filter(|&more| more > 0) else {
            return true;
        };
        // The client's share is checked and taken under its lock, with the budget's permits
        // taken (or not) in between, so two bodies of one client cannot both pass the check.
        let shares = self.budget.shares.as_ref().zip(self.client);
        let mut held = shares.map(|(s, _)| s.held.lock().unwrap_or_else(|p| p.into_inner()));
        if let (Some(held), Some((shares, client))) = (&held, shares)
            && held.get(&client).copied().unwrap_or(0).saturating_add(more) > shares.cap
        {
            shares.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        if let Some((semaphore, _)) = &self.budget.total {
            let Ok(more_u32) = u32::try_from(more) else { return false };
            let Ok(permit) = Arc::clone(semaphore).try_acquire_many_owned(more_u32) else {
                return false;
            };
            match &mut self.held {
                Some(held) => held.merge(permit),
                None => self.held = Some(permit),
            }
        }
        if let (Some(held), Some((_, client))) = (&mut held, shares) {
            *held.entry(client).or_insert(0) += more;
        }
        self.bytes = bytes;
        true
    }
}

impl Drop for Buffered {
    fn drop(&mut self) {
        let (Some(shares), Some(client)) = (&self.budget.shares, self.client) else { return };
        if self.bytes == 0 {
            return;
        }
        let mut held = shares.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(h) = held.get_mut(&client) {
            *h = h.saturating_sub(self.bytes);
            if *h == 0 {
                held.remove(&client);
            }
        }
    }
}

/// Reads a body of at most `cap` bytes, failing as soon as it crosses the cap, falls below
/// `pace`, or would take more of `budget` (or of `client`'s share of it) than is left. The
/// body's buffer is counted in `budget` until the returned [`Buffered`] is dropped.
pub(super) async fn read_body(
    body: Incoming,
    cap: u64,
    pace: BodyPace,
    (budget, client): (&BodyBudget, Option<IpAddr>),
) -> Result<(Vec<u8>, Buffered), BodyError> {
    let start = Instant::now();
    let hint = body.size_hint().lower();
    // Reserved from the declared length only up to what one read brings at a time: the length is
    // the client's word, and a body declared at the cap and trickled would otherwise hold the
    // whole cap from its first byte, per connection.
    let reserve = usize::try_from(hint.min(cap).min(INITIAL_RESERVE)).unwrap_or(0);
    // A body with a declared length never grows past it (hyper ends the body there).
    let most = usize::try_from(if hint > 0 { hint.min(cap) } else { cap }).unwrap_or(usize::MAX);
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut limited = Limited::new(body, cap);
    let mut buffered = Buffered::new(budget, client);
    let mut buf = Vec::new();
    loop {
        let due = tokio::time::Instant::from_std(pace.due(start, buf.len() as u64));
        match tokio::time::timeout_at(due, limited.frame()).await {
            Err(_) => return Err(BodyError::Unreadable(Unreadable::Timeout)),
            Ok(None) => return Ok((buf, buffered)),
            Ok(Some(Ok(frame))) => {
                let Ok(data) = frame.into_data() else { continue };
                let wanted = buf.len() + data.len();
                if wanted > buf.capacity() {
                    // Counted by what the buffer will hold, before it grows: the first read
                    // reserves the declared length (bounded above), later ones double, never
                    // past the declared length or the cap.
                    let grown = wanted.max(reserve).max(buf.capacity().saturating_mul(2).min(most));
                    if !buffered.hold(grown) {
                        return Err(BodyError::BuffersFull(limited));
                    }
                    buf.reserve_exact(grown - buf.len());
                }
                buf.extend_from_slice(&data);
            }
            Ok(Some(Err(e))) if e.is::<LengthLimitError>() => {
                return Err(BodyError::TooLarge(limited));
            }
            Ok(Some(Err(e))) => return Err(BodyError::Unreadable(Unreadable::Read(e.to_string()))),
        }
    }
}

/// Whether the client waits for `100 Continue` before it sends its body (`Expect: 100-continue`,
/// case-insensitive; another expectation does not hold the body back).
pub(super) fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::EXPECT)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// What is left of a body over the cap when it is refused.
pub(super) enum Rest {
    /// Its declared length was over the cap, so none of it was read: the client sends it unless
    /// it asked to wait for `100 Continue` (`expect`), which it is then never sent.
    Unread { body: Incoming, expect: bool },
    /// It crossed the cap while being read (a `100 Continue` asked for has gone out).
    Reading(Limited<Incoming>),
}

impl Rest {
    /// The rest of the body if the client is sending it.
    pub(super) fn in_flight(self) -> Option<Limited<Incoming>> {
        match self {
            Rest::Unread { expect: true, .. } => None,
            Rest::Unread { body, expect: false } => Some(Limited::new(body, 0)),
            Rest::Reading(rest) => Some(rest),
        }
    }
}

/// Keeps reading (and discarding) the rest of a refused body for a bounded while, so that the
/// client, still sending, reads the response instead of a connection reset.
pub(super) fn drain(mut body: Limited<Incoming>) {
    tokio::spawn(async move {
        let discard = async {
            for _ in 0..DRAIN_FRAMES {
                match body.frame().await {
                    None => break,
                    Some(Ok(_)) => {}
                    Some(Err(e)) if e.is::<LengthLimitError>() => {}
                    Some(Err(_)) => break,
                }
            }
        };
        let _ = tokio::time::timeout(DRAIN_TIME, discard).await;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's share is taken only with the budget's bytes, and both return on drop.
    #[test]
    fn a_clients_share_is_taken_only_with_the_budget() {
        let budget = BodyBudget::new(100, 60);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let mut one = Buffered::new(&budget, Some(a));
        assert!(one.hold(50));
        let mut two = Buffered::new(&budget, Some(a));
        assert!(!two.hold(20), "past a's share of 60");
        assert_eq!(budget.refused_per_client(), 1);
        let mut three = Buffered::new(&budget, Some(b));
        assert!(three.hold(50));
        let mut four = Buffered::new(&budget, Some(b));
        assert!(!four.hold(10), "the budget of 100 is spent");
        assert_eq!(budget.refused_per_client(), 1, "refused for the budget, not the share");
        drop(one);
        assert!(four.hold(10), "b's failed attempt took nothing of its share");
        assert!(two.hold(20), "a's bytes came back");
        assert_eq!(budget.in_use(), 80);
        assert_eq!(budget.bound(), Some(60), "no body larger than a share");
    }

    #[test]
    fn only_100_continue_holds_a_body_back() {
        let with = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::EXPECT, HeaderValue::from_static(value));
            expects_continue(&headers)
        };
        assert!(with("100-continue") && with("100-Continue"));
        assert!(!with("something-else"), "another expectation: the body comes anyway");
        assert!(!expects_continue(&HeaderMap::new()));
    }

    #[test]
    fn the_pace_allows_a_grace_then_the_minimum_rate() {
        let start = Instant::now();
        let pace = BodyPace { timeout: Duration::from_secs(30), min_rate: 1000 };
        let after = |received| pace.due(start, received) - start;
        assert_eq!(after(0), RATE_GRACE + Duration::from_millis(1));
        assert_eq!(after(999), RATE_GRACE + Duration::from_secs(1));
        assert_eq!(after(10_000_000), Duration::from_secs(30), "never past the timeout");
        let off = BodyPace { min_rate: 0, ..pace };
        assert_eq!(off.due(start, 0) - start, Duration::from_secs(30));
    }
}
