//! The load signal a Response carries back to its client (`docs/protocol.md` §3.1): how much of
//! the request's deadline it spent waiting in the node, so that clients can slow down before the
//! node must refuse. Breakwater (OSDI '20) piggybacks credits on responses for the same reason,
//! computed from the server's queueing delay; Luge sends the queueing delay itself, as a share of
//! the deadline it threatens, and leaves the window to the client (`luge-client`'s adaptive
//! window). A client that ignores it loses nothing: refusals stay cheap and explicit.

use std::time::Duration;

/// The signal of a request refused for load (`Overloaded`, `TenantLimit`): the node asks the
/// client to slow down now. Served requests carry at most [`LOAD_WAITED_ALL`].
pub const LOAD_REFUSED: u8 = 255;

/// The signal of a served request that waited its whole deadline (or longer).
pub const LOAD_WAITED_ALL: u8 = 254;

/// The load signal of a served request: its time waiting in the node (`queueing`) as a share of
/// its relative `deadline`, in 254ths, rounded down; `0` = it did not wait. A zero deadline
/// (none known) signals nothing.
pub fn load_signal(queueing: Duration, deadline: Duration) -> u8 {
    let deadline = deadline.as_nanos();
    if deadline == 0 {
        return 0;
    }
    let share = queueing.as_nanos().saturating_mul(u128::from(LOAD_WAITED_ALL)) / deadline;
    u8::try_from(share.min(u128::from(LOAD_WAITED_ALL))).unwrap_or(LOAD_WAITED_ALL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_of_the_deadline_spent_waiting() {
        let ms = Duration::from_millis;
        assert_eq!(load_signal(ms(0), ms(100)), 0);
        assert_eq!(load_signal(ms(50), ms(100)), 127);
        assert_eq!(load_signal(ms(100), ms(100)), LOAD_WAITED_ALL);
        assert_eq!(load_signal(ms(500), ms(100)), LOAD_WAITED_ALL, "late still reads 254");
        assert_eq!(load_signal(Duration::MAX, Duration::from_nanos(1)), LOAD_WAITED_ALL);
        assert_eq!(load_signal(ms(5), Duration::ZERO), 0, "no deadline, no signal");
        assert!(load_signal(Duration::MAX, Duration::MAX) < LOAD_REFUSED);
    }
}
