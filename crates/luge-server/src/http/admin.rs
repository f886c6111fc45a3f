//! The admin API (`/admin/functions`): list, show, add (`PUT` with a module) and remove
//! functions, and the JSON they are described in; the `GET | PUT | DELETE` dispatch of both
//! named resources, functions and chains (`admin_chains.rs`), and what they share.

use super::*;
use luge_proto::{FunctionInfo, micros};
use luge_runtime::{Overrun, RegisterError, RegistrationLimit};

/// `GET /admin/functions`.
pub(super) async fn list_functions(shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let worker = Arc::clone(shared);
    let list = tokio::task::spawn_blocking(move || {
        let functions = worker.runtime.functions();
        let routes = worker.routes.read().unwrap_or_else(|p| p.into_inner());
        functions
            .iter()
            .map(|f| function_info(f, Shared::route_of(&routes, &f.config.name)))
            .collect::<Vec<_>>()
    })
    .await;
    match list {
        Ok(list) => shared.json(StatusCode::OK, &list),
        Err(e) => shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// What an admin path under `/admin/functions/` or `/admin/chains/` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resource {
    Function,
    Chain,
}

/// `GET | PUT | DELETE /admin/functions/<name>` and `/admin/chains/<name>`.
pub(super) async fn admin_resource(
    shared: &Arc<Shared>,
    kind: Resource,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let rt = &shared.runtime;
    match (request.method().clone(), kind) {
        (Method::GET, Resource::Function) => {
            shared.show(name, |route| rt.function(name).map(|f| function_info(&f, route)))
        }
        (Method::GET, Resource::Chain) => {
            shared.show(name, |route| rt.chain(name).map(|c| admin_chains::info(&c, route)))
        }
        (Method::PUT, Resource::Function) => put_function(shared, name, request).await,
        (Method::PUT, Resource::Chain) => match check_name(name) {
            Ok(()) => admin_chains::put(shared, name, request).await,
            Err(reason) => shared.bad_put(name, reason),
        },
        (Method::DELETE, Resource::Function) => {
            // On the blocking pool: freeing a module (and trimming the heap) takes a while, and
            // this thread serves function requests. Done there even if the client leaves.
            let (worker, name) = (Arc::clone(shared), name.to_owned());
            match tokio::task::spawn_blocking(move || worker.remove_function(&name)).await {
                Ok(response) => response,
                Err(e) => {
                    shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string())
                }
            }
        }
        (Method::DELETE, Resource::Chain) => {
            let mut routes = shared.routes_mut();
            let removed = rt.unregister_chain(name).is_ok();
            if removed {
                routes.retain(|_, f| f != name);
            }
            drop(routes);
            shared.removed(name, removed)
        }
        _ => shared.method_not_allowed("GET, PUT, DELETE"),
    }
}

impl Shared {
    /// The body of an admin `PUT` (`what`: "module", …), at most `cap` bytes; else the 413 (at
    /// once when its length is declared above `cap`) or the error to answer.
    pub(super) async fn admin_body(
        &self,
        request: Request<Incoming>,
        cap: u64,
        what: &str,
    ) -> Result<Vec<u8>, Box<Response<Full<Bytes>>>> {
        let (parts, body) = request.into_parts();
        let expect = expects_continue(&parts.headers);
        let declared = body.size_hint().lower();
        let too_large = |rest, reason| {
            let meta = self.local_meta("too_large");
            Box::new(self.too_large(&meta, rest, reason))
        };
        if declared > cap {
            let reason = format!("{what} of {declared} bytes exceeds the limit of {cap} bytes");
            return Err(too_large(Rest::Unread { body, expect }, reason));
        }
        match read_body(body, cap, self.body_pace(), (&self.admin_bodies, None)).await {
            Ok((bytes, _unbounded)) => Ok(bytes),
            // The admin budget is unbounded: never full.
            Err(BodyError::TooLarge(rest) | BodyError::BuffersFull(rest)) => Err(too_large(
                Rest::Reading(rest),
                format!("{what} exceeds the limit of {cap} bytes"),
            )),
            Err(BodyError::Unreadable(e)) => Err(Box::new(self.unreadable(e))),
        }
    }

    /// 400 to a `PUT` of the function or chain `name`, logged.
    pub(super) fn bad_put(&self, name: &str, reason: String) -> Response<Full<Bytes>> {
        tracing::info!(name, status = 400, "registration refused: {reason}");
        self.error(StatusCode::BAD_REQUEST, "bad_request", reason)
    }

    /// `GET` of the function or chain `name`: `describe`d at its route, or 404.
    pub(super) fn show<T: serde::Serialize>(
        &self,
        name: &str,
        describe: impl FnOnce(String) -> Option<T>,
    ) -> Response<Full<Bytes>> {
        let route = {
            let routes = self.routes.read().unwrap_or_else(|p| p.into_inner());
            Shared::route_of(&routes, name)
        };
        match describe(route) {
            Some(info) => self.json(StatusCode::OK, &info),
            None => unknown_function(self, name),
        }
    }

    /// `DELETE /admin/functions/<name>`. The name's routes go under the routes' lock, taken
    /// before the function leaves the registry and let go before its module is freed (every
    /// HTTP call looks its route up under that lock): a `PUT` that registers the name again
    /// meanwhile takes its route only after, so its route stays and none of the old ones do.
    fn remove_function(&self, name: &str) -> Response<Full<Bytes>> {
        let routes = self.routes_mut();
        let removed = self.runtime.unregister_with(name, move || {
            let mut routes = routes;
            routes.retain(|_, f| f != name);
        });
        self.removed(name, removed.is_ok())
    }

    /// The answer to `DELETE` of the function or chain `name` (`removed`: it was, with its
    /// routes): 204, or 404 when nothing was removed.
    pub(super) fn removed(&self, name: &str, removed: bool) -> Response<Full<Bytes>> {
        if !removed {
            return unknown_function(self, name);
        }
        let registered =
            |n: &str| self.runtime.function(n).is_some() || self.runtime.chain(n).is_some();
        self.metrics.unregistered(name, registered);
        tracing::info!(name, "removed");
        self.respond(StatusCode::NO_CONTENT, &self.local_meta("ok"), None, Bytes::new())
    }
}

pub(super) fn unknown_function(shared: &Shared, name: &str) -> Response<Full<Bytes>> {
    let failure = Failure::BadRequest(BadRequest::UnknownFunction(name.to_owned()));
    shared.error(StatusCode::NOT_FOUND, "unknown_function", failure.to_string())
}

/// Settings a `PUT` may give in its query string.
#[derive(Default)]
pub(super) struct PutQuery {
    pub(super) route: Option<String>,
    pub(super) deadline: Option<Duration>,
    pub(super) expected: Option<Duration>,
    pub(super) tenant: Option<u32>,
    pub(super) on_overrun: Option<Overrun>,
    /// `class=ull`: declared ultra-low-latency (the uLL lane).
    pub(super) ull: Option<bool>,
    /// The manifest's `max_execution_us`.
    pub(super) max_execution: Option<Duration>,
    /// The manifest's `max_memory_bytes`, `max_request_bytes`, `max_output_bytes`.
    pub(super) max_memory_bytes: Option<u64>,
    pub(super) max_request_bytes: Option<u64>,
    pub(super) max_output_bytes: Option<u64>,
}

pub(super) fn parse_put_query(query: &str) -> Result<PutQuery, String> {
    let mut q = PutQuery::default();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let value =
            percent_decode(value).ok_or_else(|| format!("`{key}`: bad percent-encoding"))?;
        let micros = |v: &str| match v.parse::<u64>() {
            Ok(us) if us > 0 && us <= MAX_HEADER_US && v.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(Duration::from_micros(us))
            }
            _ => Err(format!("`{key}`: expected microseconds, 1 to {MAX_HEADER_US}")),
        };
        let bytes = |v: &str| match v.parse::<u64>() {
            Ok(n) if n > 0 && v.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
            _ => Err(format!("`{key}`: expected a number of bytes, 1 to {}", u64::MAX)),
        };
        match key {
            "max_execution_us" => q.max_execution = Some(micros(&value)?),
            "max_memory_bytes" => q.max_memory_bytes = Some(bytes(&value)?),
            "max_request_bytes" => q.max_request_bytes = Some(bytes(&value)?),
            "max_output_bytes" => q.max_output_bytes = Some(bytes(&value)?),
            "route" => {
                check_route(&value).map_err(|e| e.to_string())?;
                q.route = Some(value);
            }
            "deadline_us" => q.deadline = Some(micros(&value)?),
            "expected_us" => q.expected = Some(micros(&value)?),
            "tenant" => {
                let id = value
                    .parse::<u32>()
                    .ok()
                    .filter(|_| !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()));
                q.tenant =
                    Some(id.ok_or_else(|| {
                        format!("`{key}`: expected a tenant id, 0 to {}", u32::MAX)
                    })?);
            }
            "on_overrun" => {
                q.on_overrun = Some(value.parse().map_err(|e| format!("`{key}`: {e}"))?);
            }
            "class" => {
                q.ull = Some(match value.as_str() {
                    "ull" => true,
                    "standard" => false,
                    _ => return Err(format!("`{key}`: expected `ull` or `standard`")),
                });
            }
            _ => {
                return Err(format!(
                    "unknown parameter `{key}` (known: route, deadline_us, expected_us, tenant, \
                     on_overrun, class, max_execution_us, max_memory_bytes, max_request_bytes, \
                     max_output_bytes)"
                ));
            }
        }
    }
    Ok(q)
}

pub(super) fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                // Exactly two hex digits: `from_str_radix` alone takes a sign, so `%+5` was 0x05.
                let hex =
                    bytes.get(i + 1..i + 3).filter(|h| h.iter().all(u8::is_ascii_hexdigit))?;
                let hex = std::str::from_utf8(hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

/// `PUT /admin/functions/<name>`: registers a module with default settings.
pub(super) async fn put_function(
    shared: &Arc<Shared>,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let bad = |reason| shared.bad_put(name, reason);
    if let Err(reason) = check_name(name) {
        return bad(reason);
    }
    let query = match parse_put_query(request.uri().query().unwrap_or("")) {
        Ok(query) => query,
        Err(reason) => return bad(reason),
    };
    // A name in use is refused before the module is read: a PUT never replaces (a replaced
    // function would get a new id under its clients' feet); DELETE it first.
    if shared.runtime.function(name).is_some() || shared.runtime.chain(name).is_some() {
        return already_registered(shared, name);
    }
    let module = match shared.admin_body(request, shared.config.max_module_bytes, "module").await {
        Ok(module) => module,
        Err(refused) => return *refused,
    };
    let mut config = FunctionConfig::new(name);
    if let Some(deadline) = query.deadline {
        config.relative_deadline = deadline;
    }
    config.expected_execution = query.expected;
    config.tenant = query.tenant.unwrap_or(0);
    config.on_overrun = query.on_overrun.unwrap_or_default();
    config.ull = query.ull.unwrap_or(false);
    // Above the node's memory per sandbox, the registry refuses it (400, as the manifest does);
    // without a cap of its own it takes the smallest of the default, the node's and its
    // tenant's, as a manifest function does.
    let default_memory = shared.runtime.config().default_memory_cap(config.tenant);
    let limits = &mut config.limits;
    limits.max_execution = query.max_execution.unwrap_or(limits.max_execution);
    limits.max_memory_bytes = query.max_memory_bytes.unwrap_or(default_memory);
    limits.max_request_bytes = query.max_request_bytes.unwrap_or(limits.max_request_bytes);
    limits.max_output_bytes = query.max_output_bytes.unwrap_or(limits.max_output_bytes);
    // A route taken already is refused before the module is compiled and registered: the
    // function would be callable by name until the check after registration undid it. (That
    // check stays, for a route taken meanwhile.)
    let conflict = {
        let routes = shared.routes.read().unwrap_or_else(|p| p.into_inner());
        route_conflict(shared, &routes, query.route.as_deref(), name)
    };
    if let Some(reason) = conflict {
        return bad(reason);
    }
    // Compiling, registering and taking the route are one task on the blocking pool, finished
    // even if the client leaves meanwhile: else a function could stay registered without the
    // route it was given, unanswered and unlogged.
    let (worker, wanted) = (Arc::clone(shared), query.route);
    let registered = tokio::task::spawn_blocking(move || {
        let function = worker.runtime.register(config, &module)?;
        let name = &function.config.name;
        let ours = || worker.runtime.function(name).is_some_and(|f| Arc::ptr_eq(&f, &function));
        match worker.take_route(wanted, name, ours) {
            Ok(route) => {
                tracing::info!(function = %name, id = function.id.0, route, "function registered");
                Ok(Ok((function, route)))
            }
            Err(not) => {
                // Only this PUT's function: one registered under the name since is another's.
                worker.runtime.unregister_exact(&function);
                Ok(Err(not))
            }
        }
    })
    .await;
    let (function, route) = match registered {
        Ok(Ok(Ok(registered))) => registered,
        Ok(Ok(Err(NotRouted::Refused(reason)))) => return bad(reason),
        Ok(Ok(Err(NotRouted::Gone))) => return removed_meanwhile(shared, name),
        Ok(Err(luge_runtime::Error::Register { reason: RegisterError::Duplicate, .. })) => {
            return already_registered(shared, name);
        }
        Ok(Err(e)) => {
            let (status, label) = refusal_status(&e);
            tracing::info!(function = name, status = status.as_u16(), "registration refused: {e}");
            return shared.error(status, label, e.to_string());
        }
        Err(e) => {
            return shared.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string());
        }
    };
    let mut response = shared.json(StatusCode::CREATED, &function_info(&function, route));
    if let Ok(location) = HeaderValue::from_str(&format!("/admin/functions/{name}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Why `name` may not be reached at `route` (its explicit route, if it asks for one) given
/// `routes` — the same rules as a manifest's: the route is another function's or chain's
/// explicit route, or another's default path `/<other>` (which it would shadow); or `name`'s
/// own default path `/<name>` is another's explicit route (it would never reach `name`).
/// `None`: no conflict.
pub(super) fn route_conflict(
    shared: &Shared,
    routes: &HashMap<String, String>,
    route: Option<&str>,
    name: &str,
) -> Option<String> {
    let registered = |other: &str| {
        shared.runtime.function(other).is_some() || shared.runtime.chain(other).is_some()
    };
    if let Some(route) = route {
        if let Some(other) = owner_of(shared, routes.get(route), name) {
            return Some(format!("route `{route}` already belongs to `{other}`"));
        }
        if let Some(other) = route.strip_prefix('/').filter(|o| *o != name && registered(o)) {
            return Some(format!("route `{route}` is the path of `{other}`"));
        }
    }
    let own = format!("/{name}");
    owner_of(shared, routes.get(&own), name)
        .map(|other| format!("`{own}` is already the route of `{other}`"))
}

/// Why a just-registered function or chain did not get its route.
pub(super) enum NotRouted {
    /// It was removed (and perhaps registered again by another client) meanwhile: nothing of
    /// it is left to undo.
    Gone,
    /// The route cannot be its (the caller unregisters it).
    Refused(String),
}

impl Shared {
    /// Gives the just-registered `name` its explicit `route` (if any) under the routes' lock,
    /// checked again there ([`route_conflict`]: taken meanwhile) — if it is still `ours`, not
    /// removed by a `DELETE` (and registered again by another `PUT`) since; the route it is
    /// reported at, or why not.
    pub(super) fn take_route(
        &self,
        route: Option<String>,
        name: &str,
        ours: impl FnOnce() -> bool,
    ) -> Result<String, NotRouted> {
        let mut routes = self.routes_mut();
        if !ours() {
            return Err(NotRouted::Gone);
        }
        if let Some(reason) = route_conflict(self, &routes, route.as_deref(), name) {
            return Err(NotRouted::Refused(reason));
        }
        Ok(match route {
            Some(route) => {
                routes.insert(route.clone(), name.to_owned());
                route
            }
            None => Self::route_of(&routes, name),
        })
    }
}

/// The owner `holder` of a route, if it is not `name` and still registered — a function or a
/// chain (a route left by one that is gone is free).
fn owner_of(shared: &Shared, holder: Option<&String>, name: &str) -> Option<String> {
    holder
        .filter(|other| {
            other.as_str() != name
                && (shared.runtime.function(other).is_some()
                    || shared.runtime.chain(other).is_some())
        })
        .cloned()
}

/// The status and `Luge-Outcome` of a refused registration (`docs/http.md` §6): `413
/// too_large` for a module over `registration.max_module_bytes` (the registry's bound, which
/// may be below the upload limit); `422 over_limit` for one over another registration limit
/// (a well-formed request whose content the node will not take on; the message names the
/// manifest key); `503 busy` (with `Retry-After`, as on every 503) while every compile slot
/// stayed taken; `400 bad_request` for a module that is not valid or cannot run here. What is
/// the node's doing, not the request's, is not a 400: `500 internal` when the artifact cache
/// could not be read or written, `507 exhausted` once every function id is spent (no retry
/// helps until a restart). Every reason is listed, so a new one is mapped on purpose.
pub(super) fn refusal_status(error: &luge_runtime::Error) -> (StatusCode, &'static str) {
    let luge_runtime::Error::Register { reason, .. } = error else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "internal");
    };
    match reason {
        RegisterError::OverLimit { limit: RegistrationLimit::ModuleBytes, .. } => {
            (StatusCode::PAYLOAD_TOO_LARGE, "too_large")
        }
        RegisterError::OverLimit { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "over_limit"),
        RegisterError::Busy { .. } => (StatusCode::SERVICE_UNAVAILABLE, "busy"),
        RegisterError::TenantFunctions { .. } => (StatusCode::TOO_MANY_REQUESTS, "tenant_limit"),
        RegisterError::Duplicate => (StatusCode::CONFLICT, "conflict"),
        RegisterError::Cache(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        RegisterError::IdsExhausted => (StatusCode::INSUFFICIENT_STORAGE, "exhausted"),
        RegisterError::Invalid(_)
        | RegisterError::UnsupportedImports(_)
        | RegisterError::Link(_)
        | RegisterError::MissingExport(_)
        | RegisterError::MemoryTooLarge { .. }
        | RegisterError::Limit(_)
        | RegisterError::Chain(_)
        | RegisterError::UnknownTenant(_) => (StatusCode::BAD_REQUEST, "bad_request"),
    }
}

/// 409: what a `PUT` registered was removed before it got its route.
pub(super) fn removed_meanwhile(shared: &Shared, name: &str) -> Response<Full<Bytes>> {
    shared.error(
        StatusCode::CONFLICT,
        "conflict",
        format!("`{name}` was removed while it was being registered; PUT it again"),
    )
}

/// 409: `name` is taken.
fn already_registered(shared: &Shared, name: &str) -> Response<Full<Bytes>> {
    tracing::info!(function = name, status = 409, "registration refused: name in use");
    shared.error(
        StatusCode::CONFLICT,
        "conflict",
        format!(
            "`{name}` is already registered (a function or chain); DELETE it first to replace it"
        ),
    )
}

/// The admin API's description of `f`, reached at `route`.
pub(super) fn function_info(f: &Function, route: String) -> FunctionInfo {
    let c = &f.config;
    FunctionInfo {
        id: f.id.0,
        name: c.name.clone(),
        route,
        relative_deadline_us: micros(c.relative_deadline),
        expected_execution_us: c.expected_execution.map(micros),
        max_execution_us: micros(c.limits.max_execution),
        max_memory_bytes: c.limits.max_memory_bytes,
        max_request_bytes: c.limits.max_request_bytes,
        max_output_bytes: c.limits.max_output_bytes,
        tenant: c.tenant,
        on_overrun: c.on_overrun.to_string(),
        class: if c.ull { "ull" } else { "standard" }.into(),
        module_sha256: f.module_hash.clone(),
    }
}

impl Shared {
    /// A JSON response of `value`.
    pub(super) fn json(
        &self,
        status: StatusCode,
        value: &impl serde::Serialize,
    ) -> Response<Full<Bytes>> {
        match serde_json::to_vec(value) {
            Ok(json) => self.respond(status, &self.local_meta("ok"), Some(JSON), json.into()),
            Err(e) => self.error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn put_queries_parse() {
        let q = parse_put_query("route=%2Fx&deadline_us=2000&expected_us=10&tenant=7").unwrap();
        assert_eq!(q.tenant, Some(7));
        assert_eq!(q.route.as_deref(), Some("/x"));
        assert_eq!(q.deadline, Some(Duration::from_millis(2)));
        assert_eq!(q.expected, Some(Duration::from_micros(10)));
        assert_eq!(q.on_overrun, None);
        assert_eq!(parse_put_query("on_overrun=demote").unwrap().on_overrun, Some(Overrun::Demote));
        assert_eq!(parse_put_query("class=ull").unwrap().ull, Some(true));
        assert!(parse_put_query("class=fast").is_err());
        assert!(parse_put_query("").is_ok());
        for bad in [
            "nope=1",
            "deadline_us=x",
            "deadline_us=0",
            "route=/metrics",
            "route=%zz",
            "tenant=-1",
            "on_overrun=pause",
        ] {
            assert!(parse_put_query(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn percent_escapes_are_two_hex_digits() {
        assert_eq!(percent_decode("%2Fa+b%7e").as_deref(), Some("/a b~"));
        for bad in ["%+5", "%-1", "%5", "%", "%g0", "%\u{e9}"] {
            assert_eq!(percent_decode(bad), None, "{bad:?} decoded");
        }
    }

    #[test]
    fn registration_refusals_map_to_their_statuses() {
        let status = |reason| {
            let (status, label) =
                refusal_status(&luge_runtime::Error::Register { name: "f".into(), reason });
            (status.as_u16(), label)
        };
        let over = |limit| RegisterError::OverLimit { limit, had: 2, max: 1 };
        assert_eq!(status(over(RegistrationLimit::ModuleBytes)), (413, "too_large"));
        for limit in [RegistrationLimit::Functions, RegistrationLimit::CodeBytes] {
            assert_eq!(status(over(limit)), (422, "over_limit"));
        }
        let busy = RegisterError::Busy { max_concurrent: 2, waited: Duration::from_secs(30) };
        assert_eq!(status(busy), (503, "busy"));
        assert_eq!(status(RegisterError::Duplicate), (409, "conflict"));
        assert_eq!(status(RegisterError::Invalid("x".into())), (400, "bad_request"));
        assert_eq!(status(RegisterError::Cache("disk full".into())), (500, "internal"));
        assert_eq!(status(RegisterError::IdsExhausted), (507, "exhausted"));
    }
}
