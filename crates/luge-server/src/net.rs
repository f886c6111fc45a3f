//! The socket primitives of the front ends, public so that the baseline servers of
//! `luge-bench` run the very same code (a baseline that copied it would measure the copy): UDP
//! `recvmmsg`/`sendmmsg` batches, the send and socket-option helpers, the receive thread's wake-up
//! and reply-address check, and the HTTP front end's accept step.
//!
//! They are plumbing, not the product: a stable API is not promised.

pub use crate::http::accept_next;
pub use crate::udp::sys::{RecvBatch, SendBatch, send_to, set_int_option};
pub use crate::udp::{usable, wake};
