//! The admin API's chains (`/admin/chains`): list, show, add (`PUT` with a JSON [`ChainSpec`])
//! and remove chains of registered functions — what a manifest's `[[chain]]` declares
//! (Edge-RT §III). A chain shares the functions' names, routes and ids.

use super::*;
use luge_proto::{ChainInfo, ChainSpec, micros};
use luge_runtime::{Chain, ChainConfig, RegisterError};

/// The largest `PUT /admin/chains/<name>` body: a declaration, not a module.
const MAX_SPEC_BYTES: u64 = 64 << 10;

/// `GET /admin/chains`.
pub(super) fn list(shared: &Arc<Shared>) -> Response<Full<Bytes>> {
    let chains = shared.runtime.chains();
    let routes = shared.routes.read().unwrap_or_else(|p| p.into_inner());
    let list: Vec<_> =
        chains.iter().map(|c| info(c, Shared::route_of(&routes, &c.config.name))).collect();
    drop(routes);
    shared.json(StatusCode::OK, &list)
}

/// `GET | PUT | DELETE /admin/chains/<name>`.
pub(super) async fn chain(
    shared: &Arc<Shared>,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    match *request.method() {
        Method::GET => match shared.runtime.chain(name) {
            Some(c) => {
                let route = {
                    let routes = shared.routes.read().unwrap_or_else(|p| p.into_inner());
                    Shared::route_of(&routes, name)
                };
                shared.json(StatusCode::OK, &info(&c, route))
            }
            None => unknown_function(shared, name),
        },
        Method::PUT => put(shared, name, request).await,
        Method::DELETE => match shared.runtime.unregister_chain(name) {
            Ok(()) => {
                shared.routes_mut().retain(|_, f| f != name);
                tracing::info!(chain = name, "chain removed");
                shared.respond(StatusCode::NO_CONTENT, &shared.local_meta("ok"), None, Bytes::new())
            }
            Err(_) => unknown_function(shared, name),
        },
        _ => shared.method_not_allowed("GET, PUT, DELETE"),
    }
}

/// `PUT /admin/chains/<name>`: registers the chain its JSON body declares.
async fn put(
    shared: &Arc<Shared>,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let bad = |reason: String| {
        tracing::info!(chain = name, status = 400, "chain refused: {reason}");
        shared.error(StatusCode::BAD_REQUEST, "bad_request", reason)
    };
    if let Err(reason) = check_name(name) {
        return bad(reason);
    }
    // A name in use is refused first, as for functions: a PUT never replaces.
    if shared.runtime.function(name).is_some() || shared.runtime.chain(name).is_some() {
        return taken(shared, name);
    }
    let (parts, body) = request.into_parts();
    let expect = parts.headers.contains_key(header::EXPECT);
    let body = match read_body(body, MAX_SPEC_BYTES, shared.body_pace()).await {
        Ok(body) => body,
        Err(BodyError::TooLarge(rest)) => {
            let meta = shared.local_meta("too_large");
            let reason = format!("a chain's declaration exceeds {MAX_SPEC_BYTES} bytes");
            return shared.too_large(&meta, expect, rest, reason);
        }
        Err(BodyError::Unreadable(e)) => return shared.unreadable(e),
    };
    let spec: ChainSpec = match serde_json::from_slice(&body) {
        Ok(spec) => spec,
        Err(e) => return bad(format!("bad chain declaration: {e}")),
    };
    if let Some(route) = &spec.route {
        if let Err(e) = check_route(route) {
            return bad(e.to_string());
        }
        let owner = shared.routes.read().unwrap_or_else(|p| p.into_inner()).get(route).cloned();
        if let Some(other) = owner.filter(|o| o != name) {
            return bad(format!("route `{route}` already belongs to `{other}`"));
        }
    }
    let config = ChainConfig {
        name: name.to_owned(),
        stages: spec.stages,
        relative_deadline: Duration::from_micros(spec.relative_deadline_us),
    };
    let chain = match shared.runtime.register_chain(config) {
        Ok(chain) => chain,
        Err(luge_runtime::Error::Register { reason: RegisterError::Duplicate, .. }) => {
            return taken(shared, name);
        }
        Err(e) => return bad(e.to_string()),
    };
    let route = match spec.route {
        Some(route) => {
            shared.routes_mut().insert(route.clone(), name.to_owned());
            route
        }
        None => format!("/{name}"),
    };
    tracing::info!(chain = name, id = chain.id.0, route, "chain registered");
    let mut response = shared.json(StatusCode::CREATED, &info(&chain, route));
    if let Ok(location) = HeaderValue::from_str(&format!("/admin/chains/{name}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// 409: `name` is taken.
fn taken(shared: &Shared, name: &str) -> Response<Full<Bytes>> {
    let reason = format!("`{name}` names a function or chain already; DELETE it first");
    shared.error(StatusCode::CONFLICT, "conflict", reason)
}

/// The admin API's description of `c`, reached at `route`.
fn info(c: &Chain, route: String) -> ChainInfo {
    ChainInfo {
        id: c.id.0,
        name: c.config.name.clone(),
        route,
        stages: c.config.stages.clone(),
        relative_deadline_us: micros(c.config.relative_deadline),
    }
}
