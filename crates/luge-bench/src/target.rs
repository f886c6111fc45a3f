//! What a run drives: one node address and the functions on it.
//!
//! Safety: a run sends only to the one address of its [`Target`]. Targets are IP literals (or
//! `localhost`, which means `127.0.0.1`); there is deliberately no DNS resolution, so the address
//! printed in the report is exactly the one that received the load, and the default is loopback.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

use crate::error::BenchError;

/// The node under test and the protocol to speak to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// UDP-RPC (`docs/protocol.md`) at this address.
    Rpc(SocketAddr),
    /// HTTP/1.1 at this address; functions are `POST {base_path}{route}`.
    Http {
        /// Where the HTTP front end listens.
        addr: SocketAddr,
        /// Prefix of every route (`""` or a path starting with `/`, no trailing `/`).
        base_path: String,
    },
}

impl Target {
    /// `luge serve`'s default UDP-RPC address.
    pub const DEFAULT_RPC: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8081);
    /// `luge serve`'s default HTTP address.
    pub const DEFAULT_HTTP: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

    /// An HTTP target without a base path.
    pub fn http(addr: SocketAddr) -> Self {
        Target::Http { addr, base_path: String::new() }
    }

    /// The one address the run sends to.
    pub fn addr(&self) -> SocketAddr {
        match self {
            Target::Rpc(a) | Target::Http { addr: a, .. } => *a,
        }
    }

    /// `"udp"` or `"http"`.
    pub fn protocol(&self) -> &'static str {
        match self {
            Target::Rpc(_) => "udp",
            Target::Http { .. } => "http",
        }
    }
}

impl Default for Target {
    /// UDP-RPC on loopback, `luge serve`'s default port.
    fn default() -> Self {
        Target::Rpc(Self::DEFAULT_RPC)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Rpc(a) => write!(f, "udp://{a}"),
            Target::Http { addr, base_path } => write!(f, "http://{addr}{base_path}"),
        }
    }
}

impl FromStr for Target {
    type Err = BenchError;

    /// `udp://HOST[:PORT]` (also `rpc://`), `http://HOST[:PORT][/BASE]`, or a bare `HOST[:PORT]`
    /// (UDP-RPC). HOST is an IPv4 literal, a bracketed IPv6 literal or `localhost`; the port
    /// defaults to `luge serve`'s (8081 for UDP-RPC, 8080 for HTTP).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| BenchError::Target { target: s.to_owned(), reason: reason.into() };
        let (scheme, rest) = match s.split_once("://") {
            Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
            None => ("udp".to_owned(), s),
        };
        let http = match scheme.as_str() {
            "udp" | "rpc" => false,
            "http" => true,
            "https" => return Err(bad("https is not supported (Luge serves plain HTTP/1.1)")),
            _ => return Err(bad("expected udp://, rpc:// or http://")),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if !http && !path.is_empty() {
            return Err(bad("a UDP-RPC target has no path"));
        }
        if path.contains(['?', '#']) {
            return Err(bad("no query or fragment in a target"));
        }
        let default_port = if http { Self::DEFAULT_HTTP.port() } else { Self::DEFAULT_RPC.port() };
        let addr = parse_authority(authority, default_port).map_err(|r| bad(&r))?;
        Ok(if http {
            Target::Http { addr, base_path: path.trim_end_matches('/').to_owned() }
        } else {
            Target::Rpc(addr)
        })
    }
}

/// `IP[:PORT]`, `[IPv6][:PORT]` or `localhost[:PORT]`.
fn parse_authority(a: &str, default_port: u16) -> Result<SocketAddr, String> {
    if let Ok(addr) = a.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = if let Some(inner) = a.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or("unclosed `[`")?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("expected `:PORT` after `]`")?),
        };
        (host, port)
    } else {
        match a.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            _ => (a, None),
        }
    };
    let port = match port {
        Some(p) => p.parse::<u16>().map_err(|_| format!("`{p}` is not a port"))?,
        None => default_port,
    };
    let ip = if host.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        host.parse::<IpAddr>()
            .map_err(|_| format!("`{host}` is not an IP address (no DNS: give an IP literal)"))?
    };
    Ok(SocketAddr::new(ip, port))
}

/// How one function is addressed on each protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FunctionRef {
    /// Numeric function id for UDP-RPC.
    pub rpc_id: u32,
    /// HTTP route, starting with `/` (e.g. `/spin`).
    pub http_route: String,
}

impl FunctionRef {
    /// A function with this RPC id and HTTP route (a missing leading `/` is added).
    pub fn new(rpc_id: u32, http_route: impl Into<String>) -> Self {
        let mut http_route = http_route.into();
        if !http_route.starts_with('/') {
            http_route.insert(0, '/');
        }
        Self { rpc_id, http_route }
    }

    /// How the report names it on a protocol.
    pub fn label(&self, target: &Target) -> String {
        match target {
            Target::Rpc(_) => format!("#{}", self.rpc_id),
            Target::Http { .. } => self.http_route.clone(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_print() {
        let cases = [
            ("udp://127.0.0.1:9000", "udp://127.0.0.1:9000"),
            ("rpc://localhost", "udp://127.0.0.1:8081"),
            ("127.0.0.1", "udp://127.0.0.1:8081"),
            ("[::1]:7", "udp://[::1]:7"),
            ("http://localhost", "http://127.0.0.1:8080"),
            ("http://10.0.0.2:80/api/", "http://10.0.0.2:80/api"),
            ("http://[::1]/x", "http://[::1]:8080/x"),
        ];
        for (text, shown) in cases {
            let t: Target = text.parse().unwrap();
            assert_eq!(t.to_string(), shown, "{text}");
            assert_eq!(t.to_string().parse::<Target>().unwrap(), t);
        }
        for bad in ["example.com:80", "https://127.0.0.1", "udp://127.0.0.1/x", "ftp://1.2.3.4"] {
            assert!(bad.parse::<Target>().is_err(), "{bad}");
        }
        assert_eq!(Target::default().addr(), Target::DEFAULT_RPC);
        assert_eq!(FunctionRef::new(3, "spin").http_route, "/spin");
    }
}
