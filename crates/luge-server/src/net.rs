//! The socket primitives of the front ends, public so that the baseline servers of
//! `luge-bench` run the very same code (a baseline that copied it would measure the copy): UDP
//! `recvmmsg`/`sendmmsg` batches, the send and socket-option helpers, the kernel's receive stamps
//! and when they say a request arrived, the receive thread's wake-up and reply-address check, and
//! the HTTP front end's accept step.
//!
//! They are plumbing, not the product: a stable API is not promised. [`raise_fd_limit`] is for
//! processes that hold many connections (`luge serve`, load generators); `client_unit`, the unit
//! both front ends count a client by, is the crate's own.

pub use crate::arrival::arrival;
pub use crate::http::accept_next;
pub use crate::udp::sys::{
    Local, RecvBatch, ReplyTo, SendBatch, enable_receive_timestamps, send_to, set_int_option,
};
pub use crate::udp::{usable, wake};

/// The unit a client is counted by, for the per-client connection cap and body share (HTTP) and
/// the reply budgets (UDP-RPC) alike: its IPv4 address (also when mapped into IPv6), or its IPv6 /64
/// prefix — the unit one subscriber gets, so a client rotating addresses inside it gains nothing.
pub(crate) fn client_unit(ip: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv6Addr};
    match ip.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
    }
}

/// Raises the soft limit on open files to the hard limit (one descriptor per connection: the
/// common soft default of 1024 would cap a node far below its `max_connections`). Returns the
/// soft limit now in force.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `limit` is a valid, writable rlimit for getrlimit to fill.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit { rlim_cur: limit.rlim_max, rlim_max: limit.rlim_max };
        // SAFETY: `raised` is a valid rlimit; raising the soft limit up to the hard one needs no
        // privilege and only affects this process.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit = raised;
    }
    Ok(limit.rlim_cur)
}
