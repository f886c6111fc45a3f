//! The two planes of the HTTP front end. The function plane (the main listener) serves function
//! calls, `/healthz`, `/readyz` and, unless switched off, `/metrics`. The admin plane (a
//! listener of its own, loopback by default) serves the admin API, `/healthz`, `/readyz` and
//! `/metrics`, and nothing else. A client that can call a function can therefore never
//! register, replace or remove one: it would need to reach the admin listener, and when that
//! listener is reachable beyond loopback, to hold its bearer token.
//!
//! The token is compared in constant time (`subtle`), so the time of a refusal does not tell
//! how much of a guess was right.
//!
//! A loopback listener without a token is still reachable from a browser on the operator's
//! machine: a page of another site can re-point its own name at 127.0.0.1 (DNS rebinding) and
//! then read and write the admin API as its own origin. The browser sends that name as
//! `Host`, so such a listener answers only requests addressed to an IP address or to
//! `localhost` ([`addressed_locally`]); a name of the operator's own needs a token.

use std::net::{IpAddr, SocketAddr};

use subtle::ConstantTimeEq;

use super::*;

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plane {
    /// The main listener: function calls.
    Functions,
    /// The admin listener.
    Admin,
}

/// Shortest bearer token accepted (bytes): shorter ones are guessable.
pub const MIN_TOKEN_LEN: usize = 16;

/// A bearer token for the admin plane. Its `Debug` form does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct AdminToken(String);

impl AdminToken {
    /// A token of at least [`MIN_TOKEN_LEN`] visible ASCII characters (what an
    /// `Authorization: Bearer` header can carry); surrounding white space (a file's trailing
    /// newline) is trimmed.
    pub fn new(token: &str) -> Result<Self, HttpError> {
        let token = token.trim();
        if token.len() < MIN_TOKEN_LEN {
            return Err(HttpError::Config(format!(
                "the admin token is shorter than {MIN_TOKEN_LEN} characters"
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(HttpError::Config(
                "the admin token may only contain visible ASCII characters".into(),
            ));
        }
        Ok(Self(token.to_owned()))
    }

    /// Whether `headers` carry `Authorization: Bearer <this token>`.
    pub(super) fn admits(&self, headers: &HeaderMap) -> bool {
        let mut values = headers.get_all(header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else { return false };
        let Some(offered) = value.as_bytes().strip_prefix(b"Bearer ") else { return false };
        offered.ct_eq(self.0.as_bytes()).into()
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// Settings of the admin listener.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// Address to listen on (port 0 = any free port; see [`HttpServer::admin_addr`]). A
    /// non-loopback address needs a token.
    pub addr: SocketAddr,
    /// Bearer token every admin request must carry; `None` only on a loopback address.
    pub token: Option<AdminToken>,
    /// Admin connections open at once; more are closed at once. Apart from the function
    /// listener's, so that clients filling that one cannot lock the operator out.
    pub max_connections: usize,
}

impl Default for AdminConfig {
    fn default() -> Self {
        Self { addr: SocketAddr::from(([127, 0, 0, 1], 8082)), token: None, max_connections: 64 }
    }
}

impl AdminConfig {
    /// Refuses an admin listener reachable beyond loopback without a token.
    pub(super) fn check(&self) -> Result<(), HttpError> {
        if self.max_connections == 0 {
            return Err(HttpError::Config("admin max_connections must be at least 1".into()));
        }
        if self.token.is_none() && !self.addr.ip().is_loopback() {
            return Err(HttpError::Config(format!(
                "the admin listener {} is reachable beyond loopback and has no token: set one \
                 (LUGE_ADMIN_TOKEN or admin_token_file) or listen on 127.0.0.1",
                self.addr
            )));
        }
        Ok(())
    }
}

impl Action {
    /// The action as `plane` serves it: what the plane does not serve is no endpoint there.
    pub(super) fn on(self, plane: Plane, metrics_exposed: bool) -> Self {
        match (plane, self) {
            (
                Plane::Functions,
                Self::ListFunctions
                | Self::Function(_)
                | Self::ListChains
                | Self::Chain(_)
                | Self::StatusPage
                | Self::StatusJson,
            ) => Self::NotFound,
            (Plane::Functions, Self::Metrics) if !metrics_exposed => Self::NotFound,
            (Plane::Admin, Self::Invoke) => Self::NotFound,
            (_, action) => action,
        }
    }
}

/// Whether a request names its listener by an IP address or `localhost` (`*.localhost`, which
/// browsers resolve to loopback themselves), in its `Host` header or, without one, its
/// request target; a request with neither is not a browser's (browsers always send `Host`) and
/// passes.
pub(super) fn addressed_locally(headers: &HeaderMap, uri: &hyper::Uri) -> bool {
    let mut hosts = headers.get_all(header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(host), None) => host.to_str().ok(),
        (None, _) => match uri.authority() {
            Some(authority) => Some(authority.as_str()),
            None => return true,
        },
        (Some(_), Some(_)) => None,
    };
    // A `Host` is a host and a port (RFC 9110 §7.2): no user information, whose `@` would hide
    // the name a client connected to behind the one the check reads.
    let Some(Ok(authority)) =
        host.filter(|h| !h.contains('@')).map(str::parse::<hyper::http::uri::Authority>)
    else {
        return false;
    };
    let name = authority.host();
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
    let name = name.to_ascii_lowercase();
    bare.parse::<IpAddr>().is_ok() || name == "localhost" || name.ends_with(".localhost")
}

impl Shared {
    /// 403 for a request to a tokenless admin listener under a name ([`addressed_locally`]),
    /// and the connection closed after it.
    pub(super) fn forbidden_host(&self) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "forbidden_host");
        let response = self.error(
            StatusCode::FORBIDDEN,
            "forbidden_host",
            "forbidden: an admin listener without a token answers only requests addressed to an \
             IP address or localhost (a web page could reach it under a name of its own); set a \
             token (LUGE_ADMIN_TOKEN or admin_token_file) to use other names"
                .into(),
        );
        super::respond::close(response)
    }

    /// 401 with `WWW-Authenticate: Bearer`, and the connection closed after it: a client without
    /// the token cannot keep admin connections open (and the operator's out) by sending
    /// requests on them.
    pub(super) fn unauthorized(&self) -> Response<Full<Bytes>> {
        self.metrics.malformed(Protocol::Http, "unauthorized");
        let mut response = self.error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unauthorized: the admin API needs `Authorization: Bearer <token>`".into(),
        );
        response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        super::respond::close(response)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_exactly() {
        let token = AdminToken::new("  0123456789abcdef\n").unwrap();
        let mut h = HeaderMap::new();
        assert!(!token.admits(&h), "no header");
        for (value, ok) in [
            ("Bearer 0123456789abcdef", true),
            ("Bearer 0123456789abcdeF", false),
            ("Bearer 0123456789abcde", false),
            ("Bearer 0123456789abcdef0", false),
            ("bearer 0123456789abcdef", false),
            ("Basic 0123456789abcdef", false),
            ("0123456789abcdef", false),
        ] {
            h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(token.admits(&h), ok, "{value:?}");
        }
        h.append(header::AUTHORIZATION, HeaderValue::from_static("Bearer 0123456789abcdef"));
        assert!(!token.admits(&h), "two Authorization headers");
        assert!(AdminToken::new("short").is_err());
        assert!(AdminToken::new("0123456789 abcdef").is_err());
        assert_eq!(format!("{token:?}"), "AdminToken(<redacted>)");
    }

    #[test]
    fn only_addresses_and_localhost_address_a_tokenless_listener() {
        let none: hyper::Uri = "/admin/functions".parse().unwrap();
        let with = |host: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
            addressed_locally(&h, &none)
        };
        for host in ["127.0.0.1", "127.0.0.1:8082", "[::1]:8082", "[::1]", "10.1.2.3:80"] {
            assert!(with(host), "{host}");
        }
        for host in ["localhost", "LocalHost:8082", "node.localhost:1"] {
            assert!(with(host), "{host}");
        }
        for host in
            ["evil.example", "evil.example:8082", "127.0.0.1.evil.example", "localhost.evil"]
        {
            assert!(!with(host), "{host}");
        }
        for host in ["", "a b", "[::1", "evil.example@localhost", "u:p@127.0.0.1:8082"] {
            assert!(!with(host), "unparsable {host:?}");
        }
        let mut two = HeaderMap::new();
        two.append(header::HOST, HeaderValue::from_static("127.0.0.1"));
        two.append(header::HOST, HeaderValue::from_static("evil.example"));
        assert!(!addressed_locally(&two, &none), "two Host headers");
        // No Host: the request target's authority, else (HTTP/1.0) nothing to check.
        let empty = HeaderMap::new();
        assert!(addressed_locally(&empty, &none));
        let absolute: hyper::Uri = "http://evil.example/admin/functions".parse().unwrap();
        assert!(!addressed_locally(&empty, &absolute));
    }

    #[test]
    fn exposed_admin_listeners_need_a_token() {
        let open = AdminConfig { addr: SocketAddr::from(([0, 0, 0, 0], 0)), ..Default::default() };
        assert!(open.check().is_err());
        let token = Some(AdminToken::new("0123456789abcdef").unwrap());
        assert!(AdminConfig { token, ..open }.check().is_ok());
        assert!(AdminConfig::default().check().is_ok());
        let v6 = AdminConfig { addr: "[::1]:0".parse().unwrap(), ..Default::default() };
        assert!(v6.check().is_ok());
    }

    #[test]
    fn each_plane_serves_its_own_endpoints() {
        let f = |a: Action| a.on(Plane::Functions, true);
        let a = |a: Action| a.on(Plane::Admin, true);
        assert_eq!(f(Action::ListFunctions), Action::NotFound);
        assert_eq!(f(Action::Function("x".into())), Action::NotFound);
        assert_eq!(f(Action::ListChains), Action::NotFound, "chains are admin too");
        assert_eq!(f(Action::Chain("x".into())), Action::NotFound);
        assert_eq!(f(Action::Invoke), Action::Invoke);
        assert_eq!(f(Action::Metrics), Action::Metrics);
        assert_eq!(Action::Metrics.on(Plane::Functions, false), Action::NotFound);
        assert_eq!(Action::Metrics.on(Plane::Admin, false), Action::Metrics);
        assert_eq!(a(Action::Invoke), Action::NotFound);
        assert_eq!(a(Action::ListFunctions), Action::ListFunctions);
        assert_eq!(a(Action::Chain("x".into())), Action::Chain("x".into()));
        assert_eq!(a(Action::Health), Action::Health);
        assert_eq!(f(Action::StatusPage), Action::NotFound, "the status page is admin");
        assert_eq!(f(Action::StatusJson), Action::NotFound);
        assert_eq!(a(Action::StatusPage), Action::StatusPage);
        assert_eq!(a(Action::StatusJson), Action::StatusJson);
    }
}
