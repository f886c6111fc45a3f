//! The sender loop shared by both protocols: pacing (open loop) or slot refilling (closed loop),
//! the window, the time bounds and the drain.
//!
//! # Open loop
//!
//! Request *i* has an intended send time `start + offset_i` from the workload. The pacer sleeps
//! until `spin` before it and busy-waits the rest (Linux sleeps overshoot by the thread's timer
//! slack, 50 µs by default; the pacer lowers its own slack to 1 µs, after which a sleep overshoots
//! by ~10 µs at the median on the 2-core development box, ~30 µs at p99 under load — hence the
//! 50 µs default spin). The spin yields the CPU (`sched_yield`) on every turn: when sends are
//! closer together than the spin the pacer never sleeps, and a node's thread that shares its
//! CPU would otherwise wait out the pacer's time slice (refusals spent ~110 µs in the node at
//! the median instead of ~13 µs at 5× capacity over UDP-RPC with `--pin worker`). If the window
//! is full it waits for a slot. Latency is always measured from the intended time, so a late
//! wake-up, a full window or a stalled server shows up in the latency of every request it
//! delays, not just the first (no coordinated omission); `send_lag_us` in the report says how
//! much of that was the client's own lateness. A request sent late carries what is left of its
//! relative deadline ([`Planned::deadline_left_us`]), as `luge-client` does: the node is told
//! the time the request really has.
//!
//! Bounds: arrivals at or after `duration` are not planned; the pacer sends nothing after
//! `duration + timeout` — planned requests it has not sent by then are recorded as
//! [`ErrorKind::Unsent`] (a client that cannot keep up must not make the server look good); the
//! drain waits at most `timeout` after the last send; what is still unanswered is a
//! [`ErrorKind::Timeout`]. A run therefore ends within about `duration + 2 × timeout`.
//!
//! # Closed loop
//!
//! `window` requests are kept in flight: whenever one completes (or times out) the next planned
//! request is sent at once, its intended time being its send time. The workload's arrival times
//! are ignored; its executions, classes and deadlines are used. Sending stops at `duration`.

use std::thread;
use std::time::Duration;

use crate::ledger::Ledger;
use crate::plan::{Plan, Planned};
use crate::sample::ErrorKind;
use crate::target::FunctionRef;

/// Sends one request; its answer reaches the [`Ledger`] some other way (a receiver thread). `intended_ns` is its intended send time and `now_ns` the time it is handed over, both
/// on the ledger's clock: the request carries what is left of its deadline when it goes out
/// ([`Planned::deadline_left_us`]).
pub(crate) trait Transport {
    fn send(
        &mut self,
        p: &Planned,
        function: &FunctionRef,
        payload: &[u8],
        intended_ns: u64,
        now_ns: u64,
    ) -> Result<(), ErrorKind>;
}

/// How the sender loop runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// Closed loop (else open loop).
    pub closed: bool,
    /// The run's duration bound (ns).
    pub duration_ns: u64,
    /// Busy-wait this long before an intended send time (ns).
    pub spin_ns: u64,
}

/// Runs the sender loop to the end of the drain.
pub(crate) fn drive(plan: &Plan, ledger: &Ledger, transport: &mut dyn Transport, s: Schedule) {
    lower_timer_slack();
    let timeout = ledger.timeout_ns();
    let mut buf = Vec::with_capacity(64);
    let mut last_send = 0;
    // `intended_ns` is `None` in the closed loop: the send time itself.
    let mut send = |p: &Planned, intended_ns: Option<u64>, buf: &mut Vec<u8>| {
        plan.payload_into(p, buf);
        let now = ledger.now_ns();
        let intended_ns = intended_ns.unwrap_or(now);
        let Some(function) = plan.functions().get(p.function) else {
            ledger.unsent(p, intended_ns);
            return;
        };
        ledger.begin(p, intended_ns, now);
        if let Err(kind) = transport.send(p, function, buf, intended_ns, now) {
            ledger.fail(p.seq, kind);
        }
        last_send = now;
        ledger.maybe_reap(now);
    };
    if s.closed {
        for p in plan.requests() {
            if ledger.now_ns() >= s.duration_ns || !ledger.wait_for_slot(s.duration_ns) {
                break;
            }
            send(&p, None, &mut buf);
        }
    } else {
        let hard_stop = s.duration_ns.saturating_add(timeout);
        let mut behind = false;
        for p in plan.requests() {
            if !behind {
                wait_until(ledger, p.offset_ns, s.spin_ns);
                behind = ledger.now_ns() > hard_stop || !ledger.wait_for_slot(hard_stop);
            }
            if behind {
                ledger.unsent(&p, p.offset_ns);
            } else {
                send(&p, Some(p.offset_ns), &mut buf);
            }
        }
    }
    // Timeouts are looked for every 10 ms: give the last one time to be seen, then expire the
    // rest (normally nothing).
    ledger.wait_drained(last_send.saturating_add(timeout).saturating_add(20_000_000));
    ledger.expire_all();
}

/// Sleeps, then spins, until `target_ns` (ns since the start of the run).
fn wait_until(ledger: &Ledger, target_ns: u64, spin_ns: u64) {
    loop {
        let now = ledger.now_ns();
        if now >= target_ns {
            return;
        }
        let left = target_ns - now;
        if left > spin_ns {
            thread::sleep(Duration::from_nanos(left - spin_ns));
        } else {
            // Not a bare spin: a thread that shares this CPU (the node's receive thread or
            // HTTP front end when both run on one box, the driver's own receiver) runs first
            // when it is ready, instead of waiting out the pacer's time slice. Alone on the
            // CPU, this returns at once.
            thread::yield_now();
        }
    }
}

/// Sets this thread's timer slack to 1 µs so that sleeps end close to when asked (Linux only;
/// elsewhere a no-op). The pacer runs on a thread of its own, so this changes no caller thread.
fn lower_timer_slack() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and only changes the calling
    // thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong);
    }
}
