//! When a request arrived at the node: the kernel's receive stamp of its datagram (UDP-RPC) or
//! of the last segment of its head (HTTP), if it can be believed, else when the front end read
//! it. A request that waited in a socket buffer has spent part of its deadline already, and its
//! deadline and queueing count from here (`docs/protocol.md` §1.2, `docs/http.md` §4).

use std::time::{Duration, Instant, SystemTime};

/// A kernel receive stamp further in the past than this is not believed (a wall clock stepped
/// back): the request counts from when the front end read it.
const MAX_SOCKET_WAIT: Duration = Duration::from_secs(10);

/// When a request read at `received` (`wall` on the wall clock) arrived, from the kernel's
/// stamp if it has one that can be believed: not in the future, at most [`MAX_SOCKET_WAIT`] old.
pub fn arrival(received: Instant, wall: SystemTime, stamp: Option<SystemTime>) -> Instant {
    stamp
        .and_then(|t| wall.duration_since(t).ok())
        .filter(|waited| *waited <= MAX_SOCKET_WAIT)
        .and_then(|waited| received.checked_sub(waited))
        .unwrap_or(received)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_counts_from_its_kernel_stamp_when_it_can_be_believed() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let ms = Duration::from_millis;
        assert_eq!(arrival(now, wall, Some(wall - ms(30))), now - ms(30));
        assert_eq!(arrival(now, wall, None), now, "no stamp: read time");
        assert_eq!(arrival(now, wall, Some(wall + ms(5))), now, "a stamp from the future");
        let stale = Some(wall - MAX_SOCKET_WAIT - ms(1));
        assert_eq!(arrival(now, wall, stale), now, "a wall clock stepped back");
    }
}
