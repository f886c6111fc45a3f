//! The two planes of the HTTP front end. The function plane (the main listener) serves function
//! calls, `/healthz`, `/readyz` and, unless switched off, `/metrics`. The admin plane (a
//! listener of its own, loopback by default) serves the admin API, `/healthz`, `/readyz` and
//! `/metrics`, and nothing else. A client that can call a function can therefore never
//! register, replace or remove one: it would need to reach the admin listener, and when that
//! listener is reachable beyond loopback, to hold its bearer token.
//!
//! The token is compared in constant time (`subtle`), so the time of a refusal does not tell
//! how much of a guess was right.

use std::net::SocketAddr;

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

impl Shared {
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
