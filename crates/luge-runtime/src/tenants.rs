//! Tenant limits: what one tenant may take of a node, so that its burst is not every other
//! tenant's latency.
//!
//! Every function belongs to a tenant ([`FunctionConfig::tenant`](crate::FunctionConfig)). A
//! tenant declared in [`RuntimeConfig::tenants`](crate::RuntimeConfig) has limits, each off
//! when `None`:
//!
//! - **concurrent requests**: admitted and not yet answered;
//! - **request rate**: a token bucket (GCRA form: one "theoretical arrival time" per tenant),
//!   `rate_per_sec` with bursts of `burst`;
//! - **CPU share**: the share of the node's workers its requests may use, averaged over a one
//!   second window. A request's CPU (its [`Timing::executed`](crate::Timing)) is charged when
//!   it ends, as a GCRA whose cost is that CPU ÷ (share × workers); a tenant that used its
//!   share is refused until the window has room again. A tenant can overshoot by what its
//!   requests in flight use — bounded by its concurrency limit;
//! - **memory**: the sum of the linear-memory caps of its requests in flight;
//! - **registered functions** (checked by [`Runtime::register`](crate::Runtime::register)).
//!
//! A request over a limit is refused before it is queued, with
//! [`Rejection::TenantLimit`](crate::Rejection) naming the limit (HTTP 429 + `Retry-After`,
//! RPC `TenantLimit`); it never reaches a dispatcher, so it costs the other tenants nothing but
//! the refusal. Tenant 0 has no limits unless declared; once any tenant is declared, a function
//! of an undeclared one is refused at registration (with none declared, none has limits). The
//! checks are atomics on the submitting thread: no lock on the request path. All times are
//! passed in (ns on the runtime's clock), so the rules are tested without sleeping.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// Length of the CPU-share window (and of a tenant's burst of CPU).
pub const CPU_WINDOW: Duration = Duration::from_secs(1);

/// The fixed point of a CPU share's charge per ns of CPU: 2^32ths, rounded up, so that a
/// tenant is never charged less than its share's due, and at most 2^-32 × share × workers of it
/// more (at 2^10, truncated, 0.9 of 128 workers was charged 8 for 8.89: 11 % more CPU than its
/// share).
const CPU_SCALE_BITS: u32 = 32;

/// The longest GCRA interval or lead kept (ns): a quarter of the clock's range, so that a rate
/// so low that its interval, or its burst's lead, would be longer still admits once and then
/// refuses (an unbounded lead would admit everything).
const MAX_GCRA_NS: u64 = u64::MAX / 4;

/// A tenant and its limits (`None`: no limit).
#[derive(Debug, Clone, PartialEq)]
pub struct TenantConfig {
    /// The id functions name in [`FunctionConfig::tenant`](crate::FunctionConfig).
    pub id: u32,
    /// A name for metrics and errors.
    pub name: String,
    /// Requests admitted and not yet answered.
    pub max_concurrent: Option<u32>,
    /// Requests per second, sustained.
    pub rate_per_sec: Option<f64>,
    /// Requests allowed at once above the rate (with `rate_per_sec`; default: one second's
    /// worth, at least 1).
    pub burst: Option<u32>,
    /// Share of the node's workers' CPU, 0 < share ≤ 1 (of all workers together).
    pub cpu_share: Option<f64>,
    /// Functions registered at once.
    pub max_functions: Option<u32>,
    /// Sum of the linear-memory caps of its requests in flight, in bytes.
    pub max_memory_bytes: Option<u64>,
}

impl TenantConfig {
    /// A tenant without limits.
    pub fn new(id: u32, name: impl Into<String>) -> Self {
        Self {
            id,
            name: name.into(),
            max_concurrent: None,
            rate_per_sec: None,
            burst: None,
            cpu_share: None,
            max_functions: None,
            max_memory_bytes: None,
        }
    }

    /// Whether the limits make sense (`Err` says which does not).
    pub fn check(&self) -> Result<(), String> {
        let who = format!("tenant {} (`{}`)", self.id, self.name);
        if let Some(r) = self.rate_per_sec
            && !(r.is_finite() && r > 0.0)
        {
            return Err(format!("{who}: rate_per_sec must be a positive number, not {r}"));
        }
        if let Some(s) = self.cpu_share
            && !(s.is_finite() && s > 0.0 && s <= 1.0)
        {
            return Err(format!("{who}: cpu_share must be in (0, 1], not {s}"));
        }
        if self.burst == Some(0) || self.max_concurrent == Some(0) {
            return Err(format!("{who}: burst and max_concurrent must be at least 1"));
        }
        if self.max_memory_bytes == Some(0) {
            return Err(format!("{who}: max_memory_bytes must be at least 1 (0 admits nothing)"));
        }
        if self.burst.is_some() && self.rate_per_sec.is_none() {
            return Err(format!("{who}: burst needs rate_per_sec"));
        }
        Ok(())
    }
}

/// Which tenant limit refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TenantLimit {
    /// `max_concurrent` requests were in flight.
    Concurrency,
    /// The request rate's bucket was empty.
    Rate,
    /// The tenant used its CPU share.
    Cpu,
    /// Its requests in flight hold `max_memory_bytes` of linear-memory caps.
    Memory,
}

impl TenantLimit {
    /// Every limit, in the order of [`TenantStats::limited`].
    pub const ALL: [TenantLimit; 4] =
        [TenantLimit::Concurrency, TenantLimit::Rate, TenantLimit::Cpu, TenantLimit::Memory];

    /// A stable label (metrics).
    pub fn label(self) -> &'static str {
        match self {
            TenantLimit::Concurrency => "concurrency",
            TenantLimit::Rate => "rate",
            TenantLimit::Cpu => "cpu",
            TenantLimit::Memory => "memory",
        }
    }
}

impl fmt::Display for TenantLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TenantLimit::Concurrency => "tenant limit: too many concurrent requests",
            TenantLimit::Rate => "tenant limit: request rate exceeded",
            TenantLimit::Cpu => "tenant limit: CPU share used",
            TenantLimit::Memory => "tenant limit: memory of requests in flight",
        })
    }
}

/// One tenant's counters, read for metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantStats {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Requests admitted so far.
    pub admitted: u64,
    /// Requests refused, by [`TenantLimit::ALL`] order.
    pub limited: [u64; 4],
    /// Requests in flight now.
    pub in_flight: u32,
    /// CPU its answered requests used, ns.
    pub cpu_ns: u64,
}

/// The live state of one declared tenant.
#[derive(Debug)]
struct Tenant {
    config: TenantConfig,
    /// Rate GCRA: ns between requests and the allowed lead (burst × interval).
    rate: Option<(u64, u64)>,
    /// CPU GCRA: ns of window per ns of CPU, × 2^[`CPU_SCALE_BITS`] (fixed point, rounded).
    cpu_scale: Option<u64>,
    rate_tat: AtomicU64,
    cpu_tat: AtomicU64,
    in_flight: AtomicU32,
    memory: AtomicU64,
    admitted: AtomicU64,
    limited: [AtomicU64; 4],
    cpu_ns: AtomicU64,
}

/// A request admitted for a tenant with limits: give it back with [`Tenants::finish`].
#[derive(Debug)]
#[must_use = "an admission is given back with Tenants::finish"]
pub(crate) struct Admission {
    tenant: Arc<Tenant>,
    memory: u64,
}

/// The declared tenants of a runtime.
#[derive(Debug, Default)]
pub(crate) struct Tenants {
    by_id: HashMap<u32, Arc<Tenant>>,
}

impl Tenants {
    /// The tenants of `configs`, their CPU shares of `workers` workers.
    pub(crate) fn new(configs: &[TenantConfig], workers: usize) -> Result<Self, String> {
        let mut by_id = HashMap::new();
        for c in configs {
            c.check()?;
            let rate = c.rate_per_sec.map(|r| {
                let interval = ((1e9 / r).max(1.0) as u64).min(MAX_GCRA_NS);
                let burst = c.burst.map_or_else(|| r.ceil().max(1.0) as u64, u64::from);
                (interval, interval.saturating_mul(burst.saturating_sub(1)).min(MAX_GCRA_NS))
            });
            let cpu_scale = c.cpu_share.map(|s| {
                let one = (1u64 << CPU_SCALE_BITS) as f64;
                (one / (s * workers.max(1) as f64)).ceil().max(1.0) as u64
            });
            let tenant = Tenant {
                config: c.clone(),
                rate,
                cpu_scale,
                rate_tat: AtomicU64::new(0),
                cpu_tat: AtomicU64::new(0),
                in_flight: AtomicU32::new(0),
                memory: AtomicU64::new(0),
                admitted: AtomicU64::new(0),
                limited: Default::default(),
                cpu_ns: AtomicU64::new(0),
            };
            if by_id.insert(c.id, Arc::new(tenant)).is_some() {
                return Err(format!("tenant {} is declared twice", c.id));
            }
        }
        Ok(Self { by_id })
    }

    /// The declared tenant `id`'s config.
    pub(crate) fn config(&self, id: u32) -> Option<&TenantConfig> {
        self.by_id.get(&id).map(|t| &t.config)
    }

    /// Admits a request of tenant `id` whose function may use `memory` bytes, at `now` (ns):
    /// `Ok(None)` for a tenant without limits, `Ok(Some(_))` to be given back when it is
    /// answered, `Err` naming the limit it hit (counted).
    pub(crate) fn admit(
        &self,
        id: u32,
        memory: u64,
        now: u64,
    ) -> Result<Option<Admission>, TenantLimit> {
        let Some(tenant) = self.by_id.get(&id) else { return Ok(None) };
        let refuse = |limit: TenantLimit| {
            tenant.limited[limit as usize].fetch_add(1, Ordering::Relaxed);
            Err(limit)
        };
        let c = &tenant.config;
        if tenant.cpu_scale.is_some() {
            // A GCRA with a window of CPU_WINDOW: refused while the charged CPU runs more than
            // one window ahead of now.
            let window = CPU_WINDOW.as_nanos() as u64;
            if tenant.cpu_tat.load(Ordering::Relaxed) > now.saturating_add(window) {
                return refuse(TenantLimit::Cpu);
            }
        }
        if let Some(max) = c.max_concurrent {
            let before = tenant.in_flight.fetch_add(1, Ordering::AcqRel);
            if before >= max {
                tenant.in_flight.fetch_sub(1, Ordering::AcqRel);
                return refuse(TenantLimit::Concurrency);
            }
        } else {
            tenant.in_flight.fetch_add(1, Ordering::AcqRel);
        }
        let undo_flight = || {
            tenant.in_flight.fetch_sub(1, Ordering::AcqRel);
        };
        if let Some(max) = c.max_memory_bytes {
            let before = tenant.memory.fetch_add(memory, Ordering::AcqRel);
            if before.saturating_add(memory) > max {
                tenant.memory.fetch_sub(memory, Ordering::AcqRel);
                undo_flight();
                return refuse(TenantLimit::Memory);
            }
        }
        let undo_memory = || {
            if c.max_memory_bytes.is_some() {
                tenant.memory.fetch_sub(memory, Ordering::AcqRel);
            }
        };
        if let Some((interval, lead)) = tenant.rate {
            let taken = tenant.rate_tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
                let start = tat.max(now);
                // Saturating: a rate so low that its interval is ~u64::MAX ns admits once.
                (start - now <= lead).then(|| start.saturating_add(interval))
            });
            if taken.is_err() {
                undo_memory();
                undo_flight();
                return refuse(TenantLimit::Rate);
            }
        }
        tenant.admitted.fetch_add(1, Ordering::Relaxed);
        let memory = if c.max_memory_bytes.is_some() { memory } else { 0 };
        Ok(Some(Admission { tenant: Arc::clone(tenant), memory }))
    }

    /// Gives back an admission when its request was answered at `now` (ns), having used `cpu`.
    pub(crate) fn finish(admission: Admission, cpu: Duration, now: u64) {
        let Admission { tenant, memory } = admission;
        let cpu_ns = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
        tenant.cpu_ns.fetch_add(cpu_ns, Ordering::Relaxed);
        if let Some(scale) = tenant.cpu_scale {
            let cost = (u128::from(cpu_ns) * u128::from(scale)) >> CPU_SCALE_BITS;
            let cost = u64::try_from(cost).unwrap_or(u64::MAX);
            let _ = tenant.cpu_tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
                Some(tat.max(now).saturating_add(cost))
            });
        }
        if memory > 0 {
            tenant.memory.fetch_sub(memory, Ordering::AcqRel);
        }
        tenant.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    /// Every declared tenant's counters, by id.
    pub(crate) fn stats(&self) -> Vec<TenantStats> {
        let mut out: Vec<TenantStats> = self
            .by_id
            .values()
            .map(|t| TenantStats {
                id: t.config.id,
                name: t.config.name.clone(),
                admitted: t.admitted.load(Ordering::Relaxed),
                limited: std::array::from_fn(|i| t.limited[i].load(Ordering::Relaxed)),
                in_flight: t.in_flight.load(Ordering::Relaxed),
                cpu_ns: t.cpu_ns.load(Ordering::Relaxed),
            })
            .collect();
        out.sort_by_key(|s| s.id);
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn one(config: TenantConfig) -> Tenants {
        Tenants::new(&[config], 2).unwrap()
    }

    #[test]
    fn undeclared_tenants_have_no_limits() {
        let t = one(TenantConfig { max_concurrent: Some(1), ..TenantConfig::new(1, "a") });
        assert!((0..100).all(|_| matches!(t.admit(7, 1 << 30, 0), Ok(None))));
        assert!(t.stats()[0].admitted == 0);
    }

    #[test]
    fn concurrency_is_bounded_and_given_back() {
        let t = one(TenantConfig { max_concurrent: Some(2), ..TenantConfig::new(1, "a") });
        let a = t.admit(1, 0, 0).unwrap().unwrap();
        let b = t.admit(1, 0, 0).unwrap().unwrap();
        assert_eq!(t.admit(1, 0, 0).unwrap_err(), TenantLimit::Concurrency);
        Tenants::finish(a, Duration::ZERO, 1);
        let c = t.admit(1, 0, 1).unwrap().unwrap();
        Tenants::finish(b, Duration::ZERO, 2);
        Tenants::finish(c, Duration::ZERO, 2);
        let s = &t.stats()[0];
        assert_eq!((s.admitted, s.limited, s.in_flight), (3, [1, 0, 0, 0], 0));
    }

    #[test]
    fn the_rate_is_a_token_bucket() {
        let t = one(TenantConfig {
            rate_per_sec: Some(100.0),
            burst: Some(5),
            ..TenantConfig::new(1, "a")
        });
        // A burst of 5 at once, then one per 10 ms.
        let admitted = (0..20).filter(|_| t.admit(1, 0, S).is_ok_and(|a| a.is_some())).count();
        assert_eq!(admitted, 5);
        assert_eq!(t.admit(1, 0, S + 5 * MS).unwrap_err(), TenantLimit::Rate);
        assert!(t.admit(1, 0, S + 10 * MS).is_ok());
        // Over a long run, the rate: 1 s at 1 000 tries/s admits ~100 (+ the burst refilled).
        let mut ok = 0;
        for i in 0..1000 {
            if t.admit(1, 0, 2 * S + i * MS).is_ok() {
                ok += 1;
            }
        }
        assert!((100..=106).contains(&ok), "{ok}");
    }

    #[test]
    fn a_tenant_that_used_its_cpu_share_waits_for_the_window() {
        // Half of two workers: one CPU-second per second.
        let t = one(TenantConfig { cpu_share: Some(0.5), ..TenantConfig::new(1, "a") });
        let a = t.admit(1, 0, 0).unwrap().unwrap();
        // 2.5 CPU-seconds charged at time 0 are covered by the share at 2.5 s: refused until
        // only one window of them is left ahead, at 1.5 s.
        Tenants::finish(a, Duration::from_millis(2500), 0);
        assert_eq!(t.admit(1, 0, 0).unwrap_err(), TenantLimit::Cpu);
        assert_eq!(t.admit(1, 0, 1400 * MS).unwrap_err(), TenantLimit::Cpu);
        assert!(t.admit(1, 0, 1600 * MS).is_ok());
        assert_eq!(t.stats()[0].cpu_ns, 2_500 * MS);
    }

    /// A share of many workers is charged what it uses, not a truncated fraction of it.
    #[test]
    fn a_share_of_many_workers_is_charged_in_full() {
        // 0.9 of 128 workers: 115.2 CPU-seconds per second; 121 CPU-seconds (1.05 windows'
        // worth) at once are more than one window ahead, so the next request waits.
        let t = Tenants::new(
            &[TenantConfig { cpu_share: Some(0.9), ..TenantConfig::new(1, "a") }],
            128,
        )
        .unwrap();
        let a = t.admit(1, 0, 0).unwrap().unwrap();
        Tenants::finish(a, Duration::from_millis(120_960), 0);
        assert_eq!(t.admit(1, 0, 0).unwrap_err(), TenantLimit::Cpu);
        assert!(t.admit(1, 0, 60 * MS).is_ok(), "1.05 windows less 0.06 s is under one");
    }

    /// A rate so low that its interval (or its burst's lead) overflows admits at most its burst
    /// (its lead capped at a quarter of the clock's range), then refuses: it never wraps, or
    /// saturates, to no limit.
    #[test]
    fn a_vanishing_rate_admits_its_burst_then_refuses() {
        let cases = [(1e-11, None, 1), (1e-11, Some(2), 2), (5e-5, Some(1_000_000), 230_585)];
        for (rate, burst, most) in cases {
            let config =
                TenantConfig { rate_per_sec: Some(rate), burst, ..TenantConfig::new(1, "a") };
            let t = one(config);
            let admitted = (0..300_000).take_while(|_| t.admit(1, 0, S).is_ok()).count();
            assert_eq!(admitted, most, "{rate} {burst:?}");
            for later in [S, 2 * S, 1_000 * S] {
                assert_eq!(
                    t.admit(1, 0, later).unwrap_err(),
                    TenantLimit::Rate,
                    "{rate} {burst:?}"
                );
            }
        }
    }

    #[test]
    fn memory_of_requests_in_flight_is_bounded() {
        let t = one(TenantConfig { max_memory_bytes: Some(100), ..TenantConfig::new(1, "a") });
        let a = t.admit(1, 60, 0).unwrap().unwrap();
        assert_eq!(t.admit(1, 60, 0).unwrap_err(), TenantLimit::Memory);
        let b = t.admit(1, 40, 0).unwrap().unwrap();
        Tenants::finish(a, Duration::ZERO, 0);
        Tenants::finish(b, Duration::ZERO, 0);
        assert!(t.admit(1, 100, 0).is_ok());
        assert_eq!(t.stats()[0].in_flight, 1);
    }

    #[test]
    fn a_refusal_by_one_limit_takes_nothing_of_the_others() {
        let t = one(TenantConfig {
            max_concurrent: Some(10),
            max_memory_bytes: Some(1000),
            rate_per_sec: Some(1.0),
            burst: Some(1),
            ..TenantConfig::new(1, "a")
        });
        let _a = t.admit(1, 10, 0).unwrap().unwrap();
        for _ in 0..50 {
            assert_eq!(t.admit(1, 10, 0).unwrap_err(), TenantLimit::Rate);
        }
        let s = &t.stats()[0];
        assert_eq!((s.in_flight, s.limited[TenantLimit::Rate as usize]), (1, 50));
        assert!(t.admit(1, 990, S).is_ok(), "memory was given back by every refusal");
    }

    #[test]
    fn bad_limits_are_refused() {
        for bad in [
            TenantConfig { cpu_share: Some(1.5), ..TenantConfig::new(1, "a") },
            TenantConfig { rate_per_sec: Some(0.0), ..TenantConfig::new(1, "a") },
            TenantConfig { burst: Some(3), ..TenantConfig::new(1, "a") },
            TenantConfig { max_concurrent: Some(0), ..TenantConfig::new(1, "a") },
        ] {
            assert!(Tenants::new(std::slice::from_ref(&bad), 1).is_err(), "{bad:?}");
        }
        let a = TenantConfig::new(1, "a");
        assert!(Tenants::new(&[a.clone(), a], 1).is_err(), "declared twice");
    }
}
