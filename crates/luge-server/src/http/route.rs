//! Routing: a request's method and path parsed once into the [`Action`] it asks for (in the
//! style of Firecracker's `ParsedRequest`), the route table's lookups, the checks of routes and
//! function names, and the parsing of Luge's request headers.

use luge_proto::Field;

use super::*;

/// What a request asks the server for, decided from its method and path alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// `GET | HEAD /healthz`.
    Health,
    /// `GET | HEAD /readyz`.
    Ready,
    /// `GET | HEAD /metrics`.
    Metrics,
    /// `GET | HEAD /admin/functions`.
    ListFunctions,
    /// `GET | PUT | DELETE /admin/functions/<name>` (the method is checked by the handler).
    Function(String),
    /// `GET | HEAD /admin/chains`.
    ListChains,
    /// `GET | PUT | DELETE /admin/chains/<name>`.
    Chain(String),
    /// `GET | HEAD /admin/status`: the status page (static HTML; no token needed, it holds no
    /// data).
    StatusPage,
    /// `GET | HEAD /admin/status.json`: the snapshot the page polls.
    StatusJson,
    /// Any other path: a function call, routed by the route table.
    Invoke,
    /// A server endpoint called with the wrong method; the methods it allows.
    MethodNotAllowed(&'static str),
    /// A reserved path that is no endpoint.
    NotFound,
}

impl Action {
    /// Parses a request's method and path. The server's read-only endpoints answer `HEAD` as
    /// they answer `GET` (hyper sends the head without the body).
    pub(super) fn parse(method: &Method, path: &str) -> Self {
        let get = method == Method::GET || method == Method::HEAD;
        match path {
            "/healthz" if get => Self::Health,
            "/readyz" if get => Self::Ready,
            "/metrics" if get => Self::Metrics,
            "/admin/functions" if get => Self::ListFunctions,
            "/admin/chains" if get => Self::ListChains,
            "/admin/status" if get => Self::StatusPage,
            "/admin/status.json" if get => Self::StatusJson,
            "/healthz" | "/readyz" | "/metrics" | "/admin/functions" | "/admin/chains"
            | "/admin/status" | "/admin/status.json" => Self::MethodNotAllowed("GET, HEAD"),
            // One prefix off, not every repetition of it (`trim_start_matches`): otherwise
            // `/admin/functions//admin/functions/x` would be another path of `x`.
            p if let Some(name) = p.strip_prefix("/admin/functions/") => {
                Self::Function(name.to_owned())
            }
            p if let Some(name) = p.strip_prefix("/admin/chains/") => Self::Chain(name.to_owned()),
            p if is_reserved(p) => Self::NotFound,
            _ => Self::Invoke,
        }
    }
}

impl Shared {
    pub(super) fn routes_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, String>> {
        self.routes.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The function name a request path routes to.
    pub(super) fn function_for(&self, path: &str) -> Option<String> {
        let routes = self.routes.read().unwrap_or_else(|p| p.into_inner());
        match routes.get(path) {
            Some(function) => Some(function.clone()),
            None => path.strip_prefix('/').filter(|n| !n.is_empty()).map(str::to_owned),
        }
    }

    /// The route the admin API reports for `function`: its first explicit route, else the
    /// default one.
    pub(super) fn route_of(routes: &HashMap<String, String>, function: &str) -> String {
        routes
            .iter()
            .filter(|(_, f)| f.as_str() == function)
            .map(|(r, _)| r)
            .min()
            .cloned()
            .unwrap_or_else(|| format!("/{function}"))
    }
}

/// Checks that `route` is a path the server can route (absolute, printable, not reserved).
pub fn check_route(route: &str) -> Result<(), HttpError> {
    let reason = if !route.starts_with('/') || route.len() < 2 {
        Some("a route is an absolute path with at least one character after `/`")
    } else if route.len() > MAX_ROUTE_LEN {
        Some("longer than 1024 bytes")
    } else if !route.bytes().all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#') {
        Some("only printable ASCII without `?` and `#` is allowed")
    } else if is_reserved(route) {
        Some("reserved for the server (`/metrics`, `/healthz`, `/readyz`, `/admin/…`)")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(HttpError::Route { route: route.to_owned(), reason }),
        None => Ok(()),
    }
}

pub(super) fn is_reserved(path: &str) -> bool {
    matches!(path, "/metrics" | "/healthz" | "/readyz" | "/admin") || path.starts_with("/admin/")
}

/// A function name the admin API accepts (it becomes the path segment of its default route).
pub(super) fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("a function name has 1 to {MAX_NAME_LEN} characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')) {
        return Err("a function name may only contain A-Z a-z 0-9 - _ . ~".into());
    }
    // `/.` and `/..` are no paths a client keeps: such a function could not be called by name.
    if name.bytes().all(|b| b == b'.') {
        return Err("a function name is not dots alone".into());
    }
    if is_reserved(&format!("/{name}")) {
        return Err(format!("`{name}` is reserved for the server"));
    }
    Ok(())
}

/// Parses a `*-Us` header: absent, or exactly one decimal u64 of at most [`MAX_HEADER_US`],
/// checked by `luge_proto::validate_us` as UDP-RPC checks its fields: `0` is "not given", like
/// an absent header (the function's default deadline; no estimate).
pub(super) fn micros_header(
    headers: &HeaderMap,
    name: &HeaderName,
) -> Result<Option<Duration>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else { return Ok(None) };
    let bad = || {
        format!(
            "bad request: invalid `{name}` header (expected one decimal number of microseconds, \
             at most {MAX_HEADER_US})"
        )
    };
    if values.next().is_some() {
        return Err(bad());
    }
    let text = value.to_str().map_err(|_| bad())?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let field = if *name == DEADLINE_US { Field::Deadline } else { Field::Expected };
    let us = text.parse::<u64>().map_err(|_| bad())?;
    luge_proto::validate_us(field, us).map_err(|_| bad())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn requests_parse_into_actions() {
        let (get, post, put, head) = (Method::GET, Method::POST, Method::PUT, Method::HEAD);
        assert_eq!(Action::parse(&get, "/healthz"), Action::Health);
        assert_eq!(Action::parse(&head, "/healthz"), Action::Health);
        assert_eq!(Action::parse(&head, "/metrics"), Action::Metrics);
        assert_eq!(Action::parse(&head, "/echo"), Action::Invoke);
        assert_eq!(Action::parse(&get, "/metrics"), Action::Metrics);
        assert_eq!(Action::parse(&get, "/readyz"), Action::Ready);
        assert_eq!(Action::parse(&post, "/readyz"), Action::MethodNotAllowed("GET, HEAD"));
        assert_eq!(Action::parse(&get, "/admin/functions"), Action::ListFunctions);
        assert_eq!(Action::parse(&post, "/metrics"), Action::MethodNotAllowed("GET, HEAD"));
        assert_eq!(Action::parse(&put, "/admin/functions"), Action::MethodNotAllowed("GET, HEAD"));
        assert_eq!(Action::parse(&put, "/admin/functions/f"), Action::Function("f".into()));
        assert_eq!(Action::parse(&get, "/admin/chains"), Action::ListChains);
        assert_eq!(Action::parse(&put, "/admin/chains"), Action::MethodNotAllowed("GET, HEAD"));
        assert_eq!(Action::parse(&put, "/admin/chains/c"), Action::Chain("c".into()));
        // Fuzz finding `admin-path-repeated-prefix`: the prefix comes off once.
        let twice = Action::parse(&put, "/admin/functions//admin/functions/f");
        assert_eq!(twice, Action::Function("/admin/functions/f".into()));
        let twice = Action::parse(&get, "/admin/chains//admin/chains/c");
        assert_eq!(twice, Action::Chain("/admin/chains/c".into()));
        assert_eq!(Action::parse(&get, "/admin/status"), Action::StatusPage);
        assert_eq!(Action::parse(&head, "/admin/status.json"), Action::StatusJson);
        assert_eq!(Action::parse(&post, "/admin/status"), Action::MethodNotAllowed("GET, HEAD"));
        assert_eq!(Action::parse(&get, "/admin/x"), Action::NotFound);
        assert_eq!(Action::parse(&get, "/admin"), Action::NotFound);
        assert_eq!(Action::parse(&post, "/echo"), Action::Invoke);
        assert_eq!(Action::parse(&get, "/v1/healthz"), Action::Invoke);
    }

    #[test]
    fn deadline_headers_are_strict() {
        let mut h = HeaderMap::new();
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(None));
        // 0 is "not given", as in UDP-RPC.
        h.insert(DEADLINE_US, HeaderValue::from_static("0"));
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(None));
        h.insert(DEADLINE_US, HeaderValue::from_static("3600000000"));
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(Some(Duration::from_secs(3600))));
        h.insert(DEADLINE_US, HeaderValue::from_static(" 1500 "));
        assert_eq!(micros_header(&h, &DEADLINE_US), Ok(Some(Duration::from_micros(1500))));
        for bad in ["", "-1", "+5", "1.5", "1e3", "abc", "99999999999999999999", "3600000001"] {
            h.insert(DEADLINE_US, HeaderValue::from_static(bad));
            assert!(micros_header(&h, &DEADLINE_US).is_err(), "{bad:?} accepted");
        }
        h.insert(DEADLINE_US, HeaderValue::from_static("5"));
        h.append(DEADLINE_US, HeaderValue::from_static("6"));
        assert!(micros_header(&h, &DEADLINE_US).is_err(), "two values accepted");
    }

    #[test]
    fn routes_and_names_are_checked() {
        assert!(check_route("/x").is_ok());
        assert!(check_route("/a/b-c").is_ok());
        for bad in ["", "/", "x", "/metrics", "/healthz", "/admin", "/admin/x", "/a b", "/a?b"] {
            assert!(check_route(bad).is_err(), "{bad:?} accepted");
        }
        assert!(check_name("echo-2.v_1").is_ok());
        for bad in ["", "a/b", "a b", "metrics", "healthz", "readyz", "admin", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
