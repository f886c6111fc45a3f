//! The admin API's chains (`/admin/chains`): the list, a `PUT` with a JSON [`ChainSpec`] and the
//! JSON a chain is described in (show and remove go through `admin.rs`'s dispatch) — chains of
//! registered functions — what a manifest's `[[chain]]` declares
//! (Edge-RT §III). A chain shares the functions' names, routes and ids.

use super::admin::{NotRouted, refusal_status, removed_meanwhile};
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

/// `PUT /admin/chains/<name>` of a well-formed `name`: registers the chain its JSON body
/// declares.
pub(super) async fn put(
    shared: &Arc<Shared>,
    name: &str,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    // A name in use is refused first, as for functions: a PUT never replaces.
    if shared.runtime.function(name).is_some() || shared.runtime.chain(name).is_some() {
        return taken(shared, name);
    }
    let body = match shared.admin_body(request, MAX_SPEC_BYTES, "a chain's declaration").await {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let bad = |reason| shared.bad_put(name, reason);
    let spec: ChainSpec = match serde_json::from_slice(&body) {
        Ok(spec) => spec,
        Err(e) => return bad(format!("bad chain declaration: {e}")),
    };
    if let Some(route) = &spec.route
        && let Err(e) = check_route(route)
    {
        return bad(e.to_string());
    }
    let conflict = {
        let routes = shared.routes.read().unwrap_or_else(|p| p.into_inner());
        admin::route_conflict(shared, &routes, spec.route.as_deref(), name)
    };
    if let Some(reason) = conflict {
        return bad(reason);
    }
    // The bound every deadline has (a function's, a request's header or datagram field).
    if spec.relative_deadline_us > MAX_HEADER_US {
        return bad(format!("`relative_deadline_us`: expected microseconds, 1 to {MAX_HEADER_US}"));
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
        Err(e) => {
            let (status, label) = refusal_status(&e);
            return shared.error(status, label, e.to_string());
        }
    };
    // Checked again under the routes' lock: a route taken meanwhile, or the chain removed.
    let ours = || shared.runtime.chain(name).is_some_and(|c| Arc::ptr_eq(&c, &chain));
    let route = match shared.take_route(spec.route, name, ours) {
        Ok(route) => route,
        Err(NotRouted::Refused(reason)) => {
            let _ = shared.runtime.unregister_chain(name);
            return bad(reason);
        }
        Err(NotRouted::Gone) => return removed_meanwhile(shared, name),
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
pub(super) fn info(c: &Chain, route: String) -> ChainInfo {
    ChainInfo {
        id: c.id.0,
        name: c.config.name.clone(),
        route,
        stages: c.config.stages.clone(),
        relative_deadline_us: micros(c.config.relative_deadline),
    }
}
