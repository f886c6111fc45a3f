//! The few socket calls std does not offer, as safe wrappers over `libc`: `recvmmsg` into a
//! reusable batch of buffers (with each datagram's kernel receive time when `SO_TIMESTAMPNS` is
//! on), a `recvmsg` of a stream socket with the receive time of what it read (the HTTP front
//! end's connections), `sendmmsg` of a batch of replies, a non-blocking `sendto`, an eventfd
//! and a `poll` on a socket and one (the receive thread's wait while it stands by),
//! conversions between [`SocketAddr`] and `sockaddr_storage`, and the local address a datagram
//! was sent to (`IP_PKTINFO`/`IPV6_PKTINFO`), read on receipt and set as the source of its
//! reply. Every `unsafe` block of the UDP front end is here.

use std::io;
use std::mem::{MaybeUninit, size_of, zeroed};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, SystemTime};

/// Room for the control messages of one datagram: a `SCM_TIMESTAMPNS` (a `timespec`) needs
/// `CMSG_SPACE(16)` = 32 bytes on 64-bit Linux, an `IPV6_PKTINFO` `CMSG_SPACE(20)` = 40; 128
/// leaves margin. `u64`s keep it aligned for `cmsghdr`.
const CONTROL_WORDS: usize = 16;

/// The local address a datagram was sent to, on a socket bound to a wildcard address
/// ([`enable_local_addresses`]): its reply leaves from it ([`ReplyTo`]). Without it the kernel
/// picks the source by its route to the client, which on a host with several addresses may not
/// be the one the client sent to, and a client's connected socket drops such a reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Local {
    ip: IpAddr,
    /// The interface it came in on: kept for IPv6 link-local addresses only (they mean nothing
    /// without it); 0 (any) otherwise, so the reply follows the routing table.
    ifindex: u32,
}

/// Where a reply goes: the datagram's source, and the local address it was sent to when the
/// socket learns it ([`Local`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReplyTo {
    /// The client.
    pub peer: SocketAddr,
    /// The reply's source address, if the socket is bound to a wildcard one.
    pub local: Option<Local>,
}

impl From<SocketAddr> for ReplyTo {
    /// A reply whose source the kernel picks (a socket bound to one address).
    fn from(peer: SocketAddr) -> Self {
        Self { peer, local: None }
    }
}

/// A zeroed `sockaddr_storage`.
fn empty_storage() -> libc::sockaddr_storage {
    // SAFETY: `sockaddr_storage` is a plain C struct of integers; all-zero is a valid value
    // (family `AF_UNSPEC`).
    unsafe { zeroed() }
}

/// Writes `addr` into a `sockaddr_storage`; returns the length to pass to the kernel.
pub(crate) fn to_storage(
    addr: SocketAddr,
    storage: &mut libc::sockaddr_storage,
) -> libc::socklen_t {
    *storage = empty_storage();
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is larger than and suitably aligned for every
            // `sockaddr_*` type (that is its purpose); we write one whole `sockaddr_in` at its
            // start through a pointer derived from a valid `&mut`.
            unsafe {
                std::ptr::write(std::ptr::from_mut(storage).cast::<libc::sockaddr_in>(), sin)
            };
            size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for `sockaddr_in6`.
            unsafe {
                std::ptr::write(std::ptr::from_mut(storage).cast::<libc::sockaddr_in6>(), sin6)
            };
            size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

/// Reads the address the kernel wrote into `storage` (`len` bytes); `None` for a family other
/// than IPv4/IPv6 or a short length.
pub(crate) fn from_storage(
    storage: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<SocketAddr> {
    let len = len as usize;
    match i32::from(storage.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the kernel wrote a `sockaddr_in`, `len` confirms its size,
            // and `sockaddr_storage` is aligned for it.
            let sin = unsafe { &*std::ptr::from_ref(storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe { &*std::ptr::from_ref(storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(sin6.sin6_port),
                u32::from_be(sin6.sin6_flowinfo),
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// `setsockopt(SOL_SOCKET, opt, value)` for an integer option.
pub fn set_int_option(fd: RawFd, opt: libc::c_int, value: libc::c_int) -> io::Result<()> {
    set_option(fd, libc::SOL_SOCKET, opt, value)
}

/// `setsockopt(level, opt, value)` for an integer option.
fn set_option(
    fd: RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live `c_int` and we pass its exact size; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            std::ptr::from_ref(&value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// A non-blocking eventfd: a wake-up another thread can send to one waiting in [`readable`].
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: `eventfd` takes no pointers; a non-negative result is a new descriptor that
    // nothing else owns, so `OwnedFd` may take it.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: see above.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to eventfd `fd` (never blocks: a full counter is already a wake-up).
pub fn signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live `u64`; the kernel only reads them.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Resets eventfd `fd` (non-blocking: nothing to read is fine).
pub fn drain_event(fd: RawFd) {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live `u64`.
    let _ = unsafe { libc::read(fd, (&raw mut count).cast(), 8) };
}

/// Waits until `socket` or eventfd `event` is readable, or `timeout` passes; which of the two
/// are readable.
pub fn wait_readable(socket: RawFd, event: RawFd, timeout: Duration) -> (bool, bool) {
    let mut polled = [
        libc::pollfd { fd: socket, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: event, events: libc::POLLIN, revents: 0 },
    ];
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: `polled` holds two initialised entries and outlives the call.
    let ready = unsafe { libc::poll(polled.as_mut_ptr(), 2, ms) };
    if ready <= 0 {
        return (false, false);
    }
    (polled[0].revents != 0, polled[1].revents != 0)
}

/// Sends `buf` to `to.peer` (from `to.local` when set) with `sendmsg(flags)`: returns the bytes
/// sent.
pub fn send_to(
    fd: RawFd,
    buf: &[u8],
    to: impl Into<ReplyTo>,
    flags: libc::c_int,
) -> io::Result<usize> {
    let to = to.into();
    let mut storage = empty_storage();
    let len = to_storage(to.peer, &mut storage);
    let mut control = [0u64; CONTROL_WORDS];
    let control_len = to.local.map_or(0, |local| write_local(&mut control, local));
    let mut iov = libc::iovec { iov_base: buf.as_ptr().cast_mut().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero `msghdr` is a valid value (null pointers, zero lengths).
    let mut hdr: libc::msghdr = unsafe { zeroed() };
    hdr.msg_name = std::ptr::from_mut(&mut storage).cast();
    hdr.msg_namelen = len;
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    if control_len > 0 {
        hdr.msg_control = control.as_mut_ptr().cast();
        hdr.msg_controllen = control_len;
    }
    // SAFETY: `hdr` points at `storage`, one iovec over `buf` and `control`, all live for the
    // call with the lengths given; the kernel only reads them (`buf` is never written through
    // the iovec's `*mut`).
    let rc = unsafe { libc::sendmsg(fd, &hdr, flags) };
    if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(rc as usize) }
}

/// Asks the kernel to stamp every datagram (or, on a stream socket, every segment) received on
/// `fd` with its arrival time (`SO_TIMESTAMPNS`, `CLOCK_REALTIME`), read back by
/// [`RecvBatch::kernel_time`] and [`recv_with_time`].
pub fn enable_receive_timestamps(fd: RawFd) -> io::Result<()> {
    set_int_option(fd, libc::SO_TIMESTAMPNS, 1)
}

/// Asks the kernel to tell, with every datagram received on `fd`, the local address it was sent
/// to ([`RecvBatch::local`]), so that its reply can leave from it. For a socket bound to a
/// wildcard address (`0.0.0.0`, `::`); `ipv6`: the socket is `AF_INET6` (IPv4 clients of a
/// dual-stack socket are told with `IP_PKTINFO`, IPv6 ones with `IPV6_PKTINFO`).
pub fn enable_local_addresses(fd: RawFd, ipv6: bool) -> io::Result<()> {
    if ipv6 {
        set_option(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO, 1)?;
    }
    // On an `AF_INET6` socket: for its IPv4 clients (an IPv6-only socket never uses it).
    set_option(fd, libc::IPPROTO_IP, libc::IP_PKTINFO, 1)
}

/// A reusable `recvmmsg` batch: `capacity` buffers of `buf_len` bytes with their source
/// addresses and control messages. Holds raw pointers into its own heap allocations (which
/// never move): `Send` (it moves with them), not `Sync`: one reader thread at a time uses it.
pub struct RecvBatch {
    buf_len: usize,
    bufs: Vec<u8>,
    addrs: Vec<libc::sockaddr_storage>,
    iovecs: Vec<libc::iovec>,
    controls: Vec<[u64; CONTROL_WORDS]>,
    headers: Vec<libc::mmsghdr>,
    received: usize,
}

// SAFETY: every raw pointer in a `RecvBatch` points into a heap buffer the batch itself owns
// and never reallocates; moving the batch to another thread moves those buffers' ownership with
// it, and every use goes through `&mut self`, so no other thread can reach them.
unsafe impl Send for RecvBatch {}

impl RecvBatch {
    /// A batch of `capacity` buffers of `buf_len` bytes each.
    pub fn new(capacity: usize, buf_len: usize) -> Self {
        let capacity = capacity.max(1);
        let mut bufs = vec![0u8; capacity * buf_len];
        let mut addrs = vec![empty_storage(); capacity];
        let mut iovecs: Vec<libc::iovec> = bufs
            .chunks_exact_mut(buf_len)
            .map(|chunk| libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: buf_len })
            .collect();
        let mut controls = vec![[0u64; CONTROL_WORDS]; capacity];
        let headers = iovecs
            .iter_mut()
            .zip(addrs.iter_mut())
            .zip(controls.iter_mut())
            .map(|((iov, addr), control)| {
                // SAFETY: `mmsghdr` is a plain C struct; all-zero is valid (null pointers,
                // zero lengths) and we set the fields we use right after.
                let mut h: libc::mmsghdr = unsafe { zeroed() };
                h.msg_hdr.msg_name = std::ptr::from_mut(addr).cast();
                h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
                h.msg_hdr.msg_iov = std::ptr::from_mut(iov);
                h.msg_hdr.msg_iovlen = 1;
                h.msg_hdr.msg_control = control.as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>();
                h
            })
            .collect();
        Self { buf_len, bufs, addrs, iovecs, controls, headers, received: 0 }
    }

    /// One `recvmmsg(fd, batch, flags)`: returns how many datagrams arrived (at least 1).
    pub fn recv(&mut self, fd: RawFd, flags: libc::c_int) -> io::Result<usize> {
        self.received = 0;
        for h in &mut self.headers {
            h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>();
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // The pointers set in `new` still point into `bufs`, `addrs`, `iovecs` and `controls`:
        // their heap buffers were never reallocated (we never push to or resize them).
        debug_assert_eq!(self.iovecs.len(), self.headers.len());
        debug_assert_eq!(self.controls.len(), self.headers.len());
        // SAFETY: `headers` holds `headers.len()` initialised `mmsghdr`s whose name and iovec
        // pointers point into live buffers owned by `self` (sizes as declared); the kernel
        // writes at most those sizes. The timeout pointer may be null.
        let rc = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                self.headers.len() as libc::c_uint,
                flags,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.received = rc as usize;
        Ok(self.received)
    }

    /// Datagram `i` of the last batch: its bytes, its source (if IPv4/IPv6) and whether the
    /// kernel truncated it (it was larger than the buffer).
    pub fn get(&self, i: usize) -> Option<(&[u8], Option<SocketAddr>, bool)> {
        if i >= self.received {
            return None;
        }
        let h = &self.headers[i];
        let len = (h.msg_len as usize).min(self.buf_len);
        let start = i * self.buf_len;
        let data = &self.bufs[start..start + len];
        let peer = from_storage(&self.addrs[i], h.msg_hdr.msg_namelen);
        let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
        Some((data, peer, truncated))
    }

    /// When the kernel received datagram `i` of the last batch (`CLOCK_REALTIME`), if the
    /// socket stamps datagrams ([`enable_receive_timestamps`]) and the stamp fitted.
    pub fn kernel_time(&self, i: usize) -> Option<SystemTime> {
        self.received_with(i).0
    }

    /// What the kernel told with datagram `i` of the last batch, read in one pass over its
    /// control messages: when it received it (as [`kernel_time`](Self::kernel_time)), and the
    /// local address it was sent to, if the socket is told ([`enable_local_addresses`]).
    pub fn received_with(&self, i: usize) -> (Option<SystemTime>, Option<Local>) {
        if i >= self.received {
            return (None, None);
        }
        // SAFETY: `headers[i]` is a header the kernel just filled: its `msg_control` points into
        // `controls[i]` (live, aligned for `cmsghdr`) and its `msg_controllen` is the length the
        // kernel wrote, at most that buffer's size.
        let found = unsafe { controls(&self.headers[i].msg_hdr) };
        (found.time, found.local)
    }
}

/// What the control messages of a received datagram (or stream read) told.
#[derive(Default)]
struct Controls {
    /// `SCM_TIMESTAMPNS`: when the kernel received it.
    time: Option<SystemTime>,
    /// `IP_PKTINFO` / `IPV6_PKTINFO`: the local address it was sent to.
    local: Option<Local>,
}

/// The receive time (`SCM_TIMESTAMPNS`) and local address (`IP_PKTINFO`, `IPV6_PKTINFO`) among
/// the control messages of `hdr`; nothing if any was cut off (`MSG_CTRUNC`).
///
/// # Safety
///
/// `hdr` must be a header `recvmsg`/`recvmmsg` just filled: `msg_control` points into a live
/// buffer aligned for `cmsghdr` and `msg_controllen` is the length the kernel wrote, at most
/// that buffer's size.
unsafe fn controls(hdr: &libc::msghdr) -> Controls {
    let mut found = Controls::default();
    if hdr.msg_flags & libc::MSG_CTRUNC != 0 {
        return found;
    }
    // SAFETY: by this function's contract `msg_control`/`msg_controllen` describe the control
    // data the kernel wrote; `CMSG_FIRSTHDR`/`CMSG_NXTHDR` stay within it and return null past
    // the end.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(hdr) };
    while !cmsg.is_null() {
        // SAFETY: non-null `cmsg` from the macros above points at a whole `cmsghdr` inside the
        // control buffer.
        let c = unsafe { &*cmsg };
        let len = c.cmsg_len as usize;
        // SAFETY: `CMSG_LEN` only computes a length.
        let fits = |size: usize| len >= unsafe { libc::CMSG_LEN(size as u32) } as usize;
        match (c.cmsg_level, c.cmsg_type) {
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) if fits(size_of::<libc::timespec>()) => {
                // SAFETY: the kernel wrote a `timespec` as this message's data (its type and
                // length say so); it may be unaligned, hence `read_unaligned`.
                let ts: libc::timespec =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                found.time = timespec_time(&ts);
            }
            (libc::IPPROTO_IP, libc::IP_PKTINFO) if fits(size_of::<libc::in_pktinfo>()) => {
                // SAFETY: as above, an `in_pktinfo`.
                let info: libc::in_pktinfo =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                // `ipi_spec_dst`: the local address (for a unicast datagram, its destination).
                let ip = Ipv4Addr::from(info.ipi_spec_dst.s_addr.to_ne_bytes());
                found.local = Some(Local { ip: IpAddr::V4(ip), ifindex: 0 });
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if fits(size_of::<libc::in6_pktinfo>()) => {
                // SAFETY: as above, an `in6_pktinfo`.
                let info: libc::in6_pktinfo =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                let ip = Ipv6Addr::from(info.ipi6_addr.s6_addr);
                let ifindex = if ip.is_unicast_link_local() { info.ipi6_ifindex } else { 0 };
                // A multicast destination is no source the kernel takes: the kernel picks.
                if !ip.is_multicast() {
                    found.local = Some(Local { ip: IpAddr::V6(ip), ifindex });
                }
            }
            _ => {}
        }
        // SAFETY: as for `CMSG_FIRSTHDR`, with `cmsg` a header inside this buffer.
        cmsg = unsafe { libc::CMSG_NXTHDR(hdr, cmsg) };
    }
    found
}

/// A kernel `timespec` as a wall-clock time; `None` if out of range.
fn timespec_time(ts: &libc::timespec) -> Option<SystemTime> {
    let secs = u64::try_from(ts.tv_sec).ok()?;
    let nanos = u32::try_from(ts.tv_nsec).ok().filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
}

/// Writes into `control` the control message that makes a reply leave from `local`; returns
/// its length (`CMSG_SPACE` of the `in_pktinfo` or `in6_pktinfo`). An IPv4 address goes as
/// `IP_PKTINFO`, also on an `AF_INET6` socket answering an IPv4 client (the kernel takes it
/// there), an IPv6 one as `IPV6_PKTINFO`.
fn write_local(control: &mut [u64; CONTROL_WORDS], local: Local) -> usize {
    *control = [0; CONTROL_WORDS];
    // SAFETY: an all-zero `msghdr` is valid; it only describes `control` to the macros below.
    let mut hdr: libc::msghdr = unsafe { zeroed() };
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>();
    // SAFETY: `hdr` describes `control` (live, writable, aligned for `cmsghdr`, 128 bytes);
    // `CMSG_FIRSTHDR` of a buffer that large is its start, and each message written below
    // (`CMSG_SPACE` ≤ 40 bytes) fits in it. `CMSG_DATA` points inside it; the payload is
    // written unaligned.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&hdr);
        match local.ip {
            IpAddr::V4(ip) => {
                let info = libc::in_pktinfo {
                    ipi_ifindex: 0,
                    ipi_spec_dst: libc::in_addr { s_addr: u32::from_ne_bytes(ip.octets()) },
                    ipi_addr: libc::in_addr { s_addr: 0 },
                };
                (*cmsg).cmsg_level = libc::IPPROTO_IP;
                (*cmsg).cmsg_type = libc::IP_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::in_pktinfo>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                libc::CMSG_SPACE(size_of::<libc::in_pktinfo>() as u32) as usize
            }
            IpAddr::V6(ip) => {
                let info = libc::in6_pktinfo {
                    ipi6_addr: libc::in6_addr { s6_addr: ip.octets() },
                    ipi6_ifindex: local.ifindex,
                };
                (*cmsg).cmsg_level = libc::IPPROTO_IPV6;
                (*cmsg).cmsg_type = libc::IPV6_PKTINFO;
                (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::in6_pktinfo>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), info);
                libc::CMSG_SPACE(size_of::<libc::in6_pktinfo>() as u32) as usize
            }
        }
    }
}

/// Reads what a stream socket has (non-blocking: `WouldBlock` when nothing) into `buf`, with the
/// time the kernel received the last of it when the socket stamps what it receives
/// ([`enable_receive_timestamps`]; for TCP, the stamp of the last segment read). The first `n`
/// bytes of `buf` are initialised on return (`n` returned); `buf` need not be initialised before.
pub(crate) fn recv_with_time(
    fd: RawFd,
    buf: &mut [MaybeUninit<u8>],
) -> io::Result<(usize, Option<SystemTime>)> {
    let mut control = [0u64; CONTROL_WORDS];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero `msghdr` is a valid value (null pointers, zero lengths).
    let mut hdr: libc::msghdr = unsafe { zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = size_of::<[u64; CONTROL_WORDS]>() as _;
    // SAFETY: `hdr` points at one iovec over `buf` (live, writable, `buf.len()` bytes; the
    // kernel only writes it, so it need not be initialised) and at `control` (live, writable, its
    // size given), both outliving the call; the kernel writes within them only.
    let rc = unsafe { libc::recvmsg(fd, &mut hdr, libc::MSG_DONTWAIT) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `recvmsg` just filled `hdr`; its control buffer is `control`, live, aligned for
    // `cmsghdr` (`u64`s), and `msg_controllen` is what the kernel wrote, at most its size.
    let time = unsafe { controls(&hdr) }.time;
    Ok((rc as usize, time))
}

/// Replies queued by the receive thread during one batch, sent with one `sendmmsg`. Buffers
/// are reused from batch to batch.
pub struct SendBatch {
    bufs: Vec<Vec<u8>>,
    addrs: Vec<libc::sockaddr_storage>,
    addr_lens: Vec<libc::socklen_t>,
    /// Each reply's source-address control message ([`write_local`]), if it has one.
    controls: Vec<[u64; CONTROL_WORDS]>,
    control_lens: Vec<usize>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    len: usize,
}

impl Default for SendBatch {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: as for `RecvBatch`: its raw pointers point only into buffers it owns, used through
// `&mut self`.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self {
            bufs: Vec::new(),
            addrs: Vec::new(),
            addr_lens: Vec::new(),
            controls: Vec::new(),
            control_lens: Vec::new(),
            iovecs: Vec::new(),
            headers: Vec::new(),
            len: 0,
        }
    }

    /// Queued replies.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no reply is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A cleared buffer for the next reply to `to` (a client's address, or a [`ReplyTo`] that
    /// also names the reply's source); fill it and it is sent on `flush`.
    pub fn push(&mut self, to: impl Into<ReplyTo>) -> &mut Vec<u8> {
        let to = to.into();
        if self.len == self.bufs.len() {
            self.bufs.push(Vec::new());
            self.addrs.push(empty_storage());
            self.addr_lens.push(0);
            self.controls.push([0; CONTROL_WORDS]);
            self.control_lens.push(0);
        }
        let i = self.len;
        self.len += 1;
        self.addr_lens[i] = to_storage(to.peer, &mut self.addrs[i]);
        self.control_lens[i] =
            to.local.map_or(0, |local| write_local(&mut self.controls[i], local));
        let buf = &mut self.bufs[i];
        buf.clear();
        buf
    }

    /// Drops the last pushed reply (e.g. its encoding failed).
    pub fn pop(&mut self) {
        self.len = self.len.saturating_sub(1);
    }

    /// Sends every queued reply with `sendmmsg(flags)`, retrying the rest after a partial send
    /// and dropping a reply the kernel refuses. Returns how many could not be sent.
    pub fn flush(&mut self, fd: RawFd, flags: libc::c_int) -> usize {
        let n = self.len;
        self.len = 0;
        if n == 0 {
            return 0;
        }
        self.iovecs.clear();
        self.headers.clear();
        for buf in &mut self.bufs[..n] {
            self.iovecs.push(libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() });
        }
        for i in 0..n {
            // SAFETY: plain C struct, all-zero is valid; the used fields are set below.
            let mut h: libc::mmsghdr = unsafe { zeroed() };
            h.msg_hdr.msg_name = std::ptr::from_mut(&mut self.addrs[i]).cast();
            h.msg_hdr.msg_namelen = self.addr_lens[i];
            h.msg_hdr.msg_iov = std::ptr::from_mut(&mut self.iovecs[i]);
            h.msg_hdr.msg_iovlen = 1;
            if self.control_lens[i] > 0 {
                h.msg_hdr.msg_control = self.controls[i].as_mut_ptr().cast();
                h.msg_hdr.msg_controllen = self.control_lens[i];
            }
            self.headers.push(h);
        }
        let mut sent = 0;
        let mut failed = 0;
        while sent < n {
            // SAFETY: `headers[sent..n]` are initialised and point into `addrs`, `iovecs`,
            // `bufs` and `controls`, which are not modified until the loop ends; the kernel only
            // reads them.
            let rc = unsafe {
                libc::sendmmsg(
                    fd,
                    self.headers[sent..].as_mut_ptr(),
                    (n - sent) as libc::c_uint,
                    flags,
                )
            };
            if rc > 0 {
                sent += rc as usize;
            } else {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // The first remaining reply cannot be sent (buffer full, unreachable peer, …):
                // drop it and go on with the others.
                crate::log_limit::log_limited!(
                    crate::log_limit::LogKind::UdpSend,
                    tracing::Level::DEBUG,
                    "udp: dropping a reply: {err}"
                );
                sent += 1;
                failed += 1;
            }
        }
        failed
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    use super::*;

    #[test]
    fn a_stamped_socket_reports_when_the_kernel_received_a_datagram() {
        let stamped = UdpSocket::bind("127.0.0.1:0").unwrap();
        let plain = UdpSocket::bind("127.0.0.1:0").unwrap();
        enable_receive_timestamps(stamped.as_raw_fd()).unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut batch = RecvBatch::new(4, 64);
        // On a loaded machine the kernel may process a loopback datagram (and stamp it) late,
        // when its softirq thread gets a core: up to three tries for one that shows the wait. A
        // stamp taken at the read instead of the receipt would never show it.
        let mut waits = Vec::new();
        for _ in 0..3 {
            for to in [&stamped, &plain] {
                client.send_to(b"hello", to.local_addr().unwrap()).unwrap();
            }
            let sent = SystemTime::now();
            // It waits in the socket buffer before anyone reads it.
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(batch.recv(stamped.as_raw_fd(), libc::MSG_WAITFORONE).unwrap(), 1);
            let (data, peer, truncated) = batch.get(0).unwrap();
            assert_eq!((data, peer, truncated), (&b"hello"[..], client.local_addr().ok(), false));
            let stamp = batch.kernel_time(0).expect("a stamp");
            assert!(stamp >= sent - Duration::from_millis(5), "stamped before it was sent");
            assert!(batch.kernel_time(1).is_none(), "one datagram in the batch");
            waits.push(SystemTime::now().duration_since(stamp).unwrap_or_default());
            // Without the option there is no stamp.
            assert_eq!(batch.recv(plain.as_raw_fd(), libc::MSG_WAITFORONE).unwrap(), 1);
            assert_eq!(batch.kernel_time(0), None);
            if waits.last().is_some_and(|w| *w >= Duration::from_millis(45)) {
                return;
            }
        }
        panic!("no stamp showed the 50 ms wait: {waits:?}");
    }
}
