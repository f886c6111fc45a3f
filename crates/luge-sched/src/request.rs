//! The request model shared by every queue and policy: identities, deadlines, expected and
//! executed work, and the derived quantities (remaining execution, slack) (`docs/scheduling.md`).

use std::fmt;
use std::str::FromStr;

/// Time in nanoseconds. The scheduling core never reads a clock: every instant is passed in.
pub type Nanos = u64;

/// Remaining execution is never reported below this floor (1 µs), even when a request has run
/// longer than its estimate. An overrunning request still occupies its worker, so it must still
/// count as work in `work_before` and in a worker's total load.
pub const MIN_REMAINING: Nanos = 1_000;

/// Identity of one request (one invocation). Unique within a scheduler; drivers allocate them in
/// arrival order so that, among equal deadlines, the smaller id is the earlier arrival.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct RequestId(pub u64);

/// Identity of a registered function (a Wasm module and its settings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FunctionId(pub u32);

/// One invocation as the scheduler sees it.
///
/// All times are nanoseconds on the driver's clock. `expected` is the estimate the driver chose
/// (an oracle in the simulator, the [`Estimator`](crate::Estimator) in the runtime); `executed` is
/// the CPU time the request has received so far (non-zero only after a preemption).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Unique id; ties between equal deadlines are broken by it (smaller first).
    pub id: RequestId,
    /// Which function this invokes.
    pub function: FunctionId,
    /// When the request arrived at the scheduler.
    pub arrival: Nanos,
    /// Deadline relative to `arrival`.
    pub relative_deadline: Nanos,
    /// `arrival + relative_deadline`; the EDF key.
    pub absolute_deadline: Nanos,
    /// Expected (estimated) execution time.
    pub expected: Nanos,
    /// Execution received so far.
    pub executed: Nanos,
    /// Free-form class tag (e.g. "short"/"long" of a bimodal mix) for per-class metrics and DARC.
    pub class: u16,
    /// Tenant that owns the function.
    pub tenant: u32,
    /// Whether `expected` rests on knowledge (an oracle, a manifest seed, a trusted client
    /// estimate or measured runs) rather than a default guess. Admission refuses and sheds a
    /// request on its own estimate only when it is known: refusing a never-run function on a
    /// guess would refuse it forever, since its estimate could never improve.
    pub estimate_known: bool,
    /// Whether `expected` is a client's figure (a function that trusts its clients'
    /// estimates). Admission and ordering use it like any other; the uLL lane does not: a
    /// client cannot put a request in the lane by claiming it is short (`docs/security.md`).
    pub client_estimate: bool,
    /// What becomes of it once it can no longer meet its deadline (with shedding on).
    pub on_overrun: Overrun,
    /// Its function is declared ultra-low-latency (HORSE §4.1.3): with the uLL lane
    /// ([`UllLane`](crate::UllLane)) it runs ahead of every other request. The lane also counts
    /// a request as uLL when its known estimate is within the lane's threshold.
    pub ull: bool,
}

/// What becomes of a request whose deadline cannot be met: refused at arrival on its deadline
/// (infeasible, unreachable), shed while it waits, or preempted past its deadline (late).
/// A full queue is always a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Overrun {
    /// It is answered at once: refused or shed before it ran, late once preempted past its
    /// deadline.
    #[default]
    Kill,
    /// It is demoted to the group's best-effort lane (Edge-RT §IV-C): it runs, round robin
    /// with the other demoted requests, only on a worker with no on-time work, and completes late.
    Demote,
}

impl Overrun {
    /// Its name in manifests and the admin API: `kill` or `demote`.
    pub fn name(self) -> &'static str {
        match self {
            Overrun::Kill => "kill",
            Overrun::Demote => "demote",
        }
    }
}

impl fmt::Display for Overrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is neither `kill` nor `demote`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown on_overrun `{0}` (expected kill or demote)")]
pub struct UnknownOverrun(pub String);

impl FromStr for Overrun {
    type Err = UnknownOverrun;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Overrun::Kill, Overrun::Demote]
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownOverrun(s.to_owned()))
    }
}

impl Request {
    /// A fresh request with no execution yet; `absolute_deadline` saturates at `u64::MAX`.
    pub fn new(
        id: RequestId,
        function: FunctionId,
        arrival: Nanos,
        relative_deadline: Nanos,
        expected: Nanos,
    ) -> Self {
        Self {
            id,
            function,
            arrival,
            relative_deadline,
            absolute_deadline: arrival.saturating_add(relative_deadline),
            expected,
            executed: 0,
            class: 0,
            tenant: 0,
            estimate_known: true,
            client_estimate: false,
            on_overrun: Overrun::Kill,
            ull: false,
        }
    }

    /// Declares its function ultra-low-latency (builder style); see [`Request::ull`].
    pub fn with_ull(mut self, ull: bool) -> Self {
        self.ull = ull;
        self
    }

    /// Sets what becomes of it once it can no longer meet its deadline (builder style).
    pub fn with_overrun(mut self, on_overrun: Overrun) -> Self {
        self.on_overrun = on_overrun;
        self
    }

    /// Marks `expected` as a client's figure (builder style); see [`Request::client_estimate`].
    pub fn with_client_estimate(mut self) -> Self {
        self.client_estimate = true;
        self
    }

    /// Marks `expected` as a default guess (builder style); see [`Request::estimate_known`].
    pub fn with_guessed_estimate(mut self) -> Self {
        self.estimate_known = false;
        self
    }

    /// The work admission counts for this request itself: its remaining work when the estimate
    /// is known, the [`MIN_REMAINING`] floor when it is a guess.
    pub fn own_work(&self) -> Nanos {
        if self.estimate_known { self.remaining() } else { MIN_REMAINING }
    }

    /// Sets the class tag (builder style).
    pub fn with_class(mut self, class: u16) -> Self {
        self.class = class;
        self
    }

    /// Sets the tenant tag (builder style).
    pub fn with_tenant(mut self, tenant: u32) -> Self {
        self.tenant = tenant;
        self
    }

    /// Remaining execution: `expected − executed`, floored at [`MIN_REMAINING`].
    pub fn remaining(&self) -> Nanos {
        self.expected.saturating_sub(self.executed).max(MIN_REMAINING)
    }

    /// Remaining execution if the request has additionally run for `running_for` since it was
    /// last accounted (used for the request currently on a core).
    pub fn remaining_after(&self, running_for: Nanos) -> Nanos {
        self.expected.saturating_sub(self.executed.saturating_add(running_for)).max(MIN_REMAINING)
    }

    /// Slack at `now`: `absolute_deadline − now − remaining`. Negative once the request can no
    /// longer meet its deadline. While the request runs, `now` and `remaining` move together, so
    /// slack stays constant (SledgeScale §3.2).
    pub fn slack(&self, now: Nanos) -> i128 {
        self.absolute_deadline as i128 - now as i128 - self.remaining() as i128
    }

    /// The key of this request in a deadline-ordered queue.
    pub fn key(&self) -> QueueKey {
        QueueKey { deadline: self.absolute_deadline, id: self.id }
    }
}

/// Total order used by every EDF structure: earlier absolute deadline first, then smaller id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QueueKey {
    /// Absolute deadline.
    pub deadline: Nanos,
    /// Tie breaker.
    pub id: RequestId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_is_floored_and_slack_is_signed() {
        let mut r = Request::new(RequestId(1), FunctionId(0), 100, 1_000_000, 50_000);
        assert_eq!(r.absolute_deadline, 1_000_100);
        assert_eq!(r.remaining(), 50_000);
        r.executed = 80_000;
        assert_eq!(r.remaining(), MIN_REMAINING);
        assert_eq!(r.slack(2_000_000), 1_000_100 - 2_000_000 - MIN_REMAINING as i128);
        assert!(r.slack(2_000_000) < 0);
        assert_eq!(r.remaining_after(u64::MAX), MIN_REMAINING);
    }

    #[test]
    fn keys_order_by_deadline_then_id() {
        let a = Request::new(RequestId(2), FunctionId(0), 0, 10, 1).key();
        let b = Request::new(RequestId(1), FunctionId(0), 0, 20, 1).key();
        let c = Request::new(RequestId(3), FunctionId(0), 0, 10, 1).key();
        assert!(a < b && a < c && c < b);
    }

    #[test]
    fn overrun_names_round_trip() {
        for o in [Overrun::Kill, Overrun::Demote] {
            assert_eq!(o.to_string().parse(), Ok(o));
        }
        assert_eq!("Demote".parse::<Overrun>(), Err(UnknownOverrun("Demote".into())));
        assert_eq!(Overrun::default(), Overrun::Kill);
    }

    #[test]
    fn deadline_saturates() {
        let r = Request::new(RequestId(1), FunctionId(0), u64::MAX - 1, 10, 1);
        assert_eq!(r.absolute_deadline, u64::MAX);
    }
}
