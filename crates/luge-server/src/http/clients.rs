//! The per-client connection cap: how many connections one client address may hold open on the
//! function listener, so that one client (a slowloris, a leaking pool) cannot take the
//! connections every other client needs. Clients are counted by `net::client_unit`: IPv4 address
//! or IPv6 /64 prefix.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::net::client_unit;

/// Open connections per client address.
#[derive(Debug)]
pub(super) struct Clients {
    /// Connections one client may hold; 0 = no cap.
    cap: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection of a client, counted until dropped.
#[derive(Debug)]
pub(super) struct ClientSlot {
    clients: Arc<Clients>,
    key: IpAddr,
}

impl Clients {
    pub(super) fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap, open: Mutex::default() })
    }

    /// A slot for a connection from `ip`, or `None` if the client already holds `cap`.
    pub(super) fn admit(self: &Arc<Self>, ip: IpAddr) -> Option<ClientSlot> {
        let key = client_unit(ip);
        if self.cap > 0 {
            let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
            let count = open.entry(key).or_insert(0);
            if *count >= self.cap {
                return None;
            }
            *count += 1;
        }
        Some(ClientSlot { clients: Arc::clone(self), key })
    }

    /// Connections `ip` holds now.
    #[cfg(test)]
    fn held(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&client_unit(ip)).copied().unwrap_or(0)
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if self.clients.cap == 0 {
            return;
        }
        let mut open = self.clients.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_cap_connections() {
        let clients = Clients::new(2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = clients.admit(a).unwrap();
        let _second = clients.admit(a).unwrap();
        assert!(clients.admit(a).is_none(), "a third from the same address");
        let _other = clients.admit(b).unwrap();
        drop(first);
        assert_eq!(clients.held(a), 1);
        assert!(clients.admit(a).is_some(), "a slot is returned when its connection ends");
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(client_unit(mapped), a, "IPv4-mapped IPv6 is the IPv4 client");
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64_prefix() {
        let clients = Clients::new(1);
        let _one = clients.admit("2001:db8:1:2::1".parse().unwrap()).unwrap();
        assert!(clients.admit("2001:db8:1:2:ffff::9".parse().unwrap()).is_none());
        assert!(clients.admit("2001:db8:1:3::1".parse().unwrap()).is_some());
    }

    #[test]
    fn no_cap_counts_nothing() {
        let clients = Clients::new(0);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let slots: Vec<_> = (0..10).map(|_| clients.admit(ip).unwrap()).collect();
        assert_eq!(clients.held(ip), 0);
        drop(slots);
    }
}
