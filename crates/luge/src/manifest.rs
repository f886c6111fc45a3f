//! The operator's manifest (`luge.toml`): server settings and the functions to serve, parsed
//! strictly — unknown keys, bad values and missing modules are reported with file, line and
//! reason before anything starts. `docs/manifest.md` documents every key and its default.
//!
//! Above ~600 lines through its tests (~200 lines): one parser of one file format, whose
//! sections (`[server]`, `[registration]`, `[[tenant]]`, `[[function]]`, `[[chain]]`) check
//! each other.

use std::net::SocketAddr;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use luge_runtime::{
    ChainConfig, FunctionConfig, Layout, Limits, MAX_STAGES, PolicyKind, RegistrationLimits,
    RuntimeConfig, TenantConfig, WaitMode,
};
use luge_sched::QueueKind;
use luge_server::{BadRequestLog, HttpConfig, NodeChain, NodeFunction, RequestLog};
use serde::Deserialize;
use toml::Spanned;

/// A parsed, checked manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// Server settings.
    pub server: ServerSettings,
    /// Functions, in file order.
    pub functions: Vec<FunctionEntry>,
    /// Chains of those functions, in file order.
    pub chains: Vec<NodeChain>,
}

/// Front-end and runtime settings.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    /// HTTP listen address.
    pub http: SocketAddr,
    /// UDP-RPC listen address.
    pub rpc: SocketAddr,
    /// The admin listener's address; `None` = no admin API.
    pub admin: Option<SocketAddr>,
    /// The load-balancer agent's address (HAProxy agent-check); `None` = none.
    pub agent: Option<SocketAddr>,
    /// A file holding the admin listener's bearer token.
    pub admin_token_file: Option<PathBuf>,
    /// Whether the function listener serves `/metrics` too.
    pub expose_metrics: bool,
    /// Connections one client address may hold open on the function listener (0 = no cap).
    pub max_connections_per_client: usize,
    /// Bytes of HTTP request bodies held at once, read or awaiting their answer (0 = no bound).
    pub max_buffered_body_bytes: u64,
    /// Of those, what one client address may hold (0 = no share; default a quarter).
    pub max_buffered_body_bytes_per_client: u64,
    /// Bytes per second an answer waiting on its client must go out at (0 = no minimum).
    pub min_send_rate: u64,
    /// HTTP front-end threads.
    pub http_threads: usize,
    /// Busy-poll the UDP socket.
    pub rpc_busy_poll: bool,
    /// Which answered requests get a request-log line.
    pub request_log: RequestLog,
    /// Where to export request spans (OTLP over HTTP); `None` = no export.
    pub otlp_endpoint: Option<String>,
    /// The share of requests arriving without a trace context that start a sampled trace.
    pub trace_sample: f64,
    /// Runtime configuration.
    pub runtime: RuntimeConfig,
}

/// One function of the manifest.
#[derive(Debug, Clone)]
pub struct FunctionEntry {
    /// Runtime settings.
    pub config: FunctionConfig,
    /// HTTP route (`/name` by default).
    pub route: String,
    /// The module's bytes (Wasm or WAT).
    pub module: Vec<u8>,
    /// Where the module came from (a path, or `builtin:NAME`).
    pub source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    #[serde(default)]
    server: RawServer,
    #[serde(default)]
    registration: RawRegistration,
    #[serde(default, rename = "function")]
    functions: Vec<RawFunction>,
    #[serde(default, rename = "tenant")]
    tenants: Vec<RawTenant>,
    #[serde(default, rename = "chain")]
    chains: Vec<RawChain>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChain {
    name: Spanned<String>,
    route: Option<Spanned<String>>,
    stages: Spanned<Vec<String>>,
    relative_deadline_us: Spanned<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    id: Spanned<u32>,
    name: Option<String>,
    max_concurrent: Option<u32>,
    rate_per_sec: Option<f64>,
    burst: Option<u32>,
    cpu_share: Option<f64>,
    max_functions: Option<u32>,
    max_memory_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    http: Option<Spanned<String>>,
    rpc: Option<Spanned<String>>,
    admin: Option<Spanned<String>>,
    agent: Option<Spanned<String>>,
    admin_token_file: Option<String>,
    expose_metrics: Option<bool>,
    max_connections_per_client: Option<usize>,
    max_buffered_body_bytes: Option<u64>,
    max_buffered_body_bytes_per_client: Option<u64>,
    min_send_rate: Option<u64>,
    http_threads: Option<usize>,
    rpc_busy_poll: Option<bool>,
    request_log: Option<Spanned<String>>,
    otlp_endpoint: Option<Spanned<String>>,
    trace_sample: Option<Spanned<f64>>,
    workers: Option<usize>,
    dispatchers: Option<usize>,
    cpus: Option<Vec<usize>>,
    policy: Option<Spanned<String>>,
    wait: Option<Spanned<String>>,
    layout: Option<Spanned<String>>,
    tick_us: Option<u64>,
    notify_interval_us: Option<u64>,
    worker_queue: Option<Spanned<String>>,
    batch_window_us: Option<u64>,
    delta_window_us: Option<Spanned<u64>>,
    ull_lane: Option<bool>,
    ull_threshold_us: Option<u64>,
    ull_burst: Option<u32>,
    ready_sandboxes: Option<usize>,
    ready_sandboxes_max: Option<usize>,
    max_sandboxes: Option<u32>,
    max_memory_bytes: Option<u64>,
    memory_init: Option<Spanned<String>>,
    cache_dir: Option<String>,
    cache_max_bytes: Option<u64>,
    default_estimate_us: Option<u64>,
    shutdown_grace_ms: Option<u64>,
    reject_infeasible: Option<bool>,
    admit_on_wait: Option<bool>,
    protect_admitted: Option<bool>,
    shed: Option<bool>,
    max_queued: Option<usize>,
}

/// `[registration]`: bounds on the modules the node accepts (`RegistrationLimits`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegistration {
    max_module_bytes: Option<u64>,
    max_functions: Option<u32>,
    max_function_bytes: Option<u64>,
    max_code_bytes: Option<u64>,
    max_imports: Option<u32>,
    max_data_segments: Option<u32>,
    max_element_segments: Option<u32>,
    max_tables: Option<u32>,
    max_globals: Option<u32>,
    max_concurrent_compiles: Option<Spanned<usize>>,
    compile_wait_ms: Option<u64>,
}

impl RawRegistration {
    /// The limits, each key overriding its default.
    fn limits(self, text: &str, file: &str) -> Result<RegistrationLimits, ManifestError> {
        let d = RegistrationLimits::default();
        let max_concurrent_compiles = match self.max_concurrent_compiles {
            Some(n) if *n.get_ref() == 0 => {
                return Err(ManifestError {
                    file: file.to_owned(),
                    line: line_of(text, n.span().start),
                    reason: "max_concurrent_compiles must be at least 1".to_owned(),
                });
            }
            Some(n) => n.into_inner(),
            None => d.max_concurrent_compiles,
        };
        Ok(RegistrationLimits {
            max_module_bytes: self.max_module_bytes.unwrap_or(d.max_module_bytes),
            max_functions: self.max_functions.unwrap_or(d.max_functions),
            max_function_bytes: self.max_function_bytes.unwrap_or(d.max_function_bytes),
            max_code_bytes: self.max_code_bytes.unwrap_or(d.max_code_bytes),
            max_imports: self.max_imports.unwrap_or(d.max_imports),
            max_data_segments: self.max_data_segments.unwrap_or(d.max_data_segments),
            max_element_segments: self.max_element_segments.unwrap_or(d.max_element_segments),
            max_tables: self.max_tables.unwrap_or(d.max_tables),
            max_globals: self.max_globals.unwrap_or(d.max_globals),
            max_concurrent_compiles,
            compile_wait: self.compile_wait_ms.map_or(d.compile_wait, Duration::from_millis),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFunction {
    name: Spanned<String>,
    module: Spanned<String>,
    route: Option<Spanned<String>>,
    relative_deadline_us: Option<u64>,
    expected_execution_us: Option<u64>,
    tenant: Option<u32>,
    trust_client_estimate: Option<bool>,
    on_overrun: Option<Spanned<String>>,
    class: Option<Spanned<String>>,
    max_execution_us: Option<u64>,
    max_memory_bytes: Option<u64>,
    max_request_bytes: Option<u64>,
    max_output_bytes: Option<u64>,
}

/// A manifest problem, located in its file.
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct ManifestError {
    /// The manifest file.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// The built-in example functions `luge serve` runs without a manifest.
pub const BUILTINS: &[(&str, &str, &str)] = &[
    ("noop", include_str!("../../../functions/builtin/noop.wat"), "does nothing (latency floor)"),
    ("echo", include_str!("../../../functions/builtin/echo.wat"), "returns the request body"),
    ("hello", include_str!("../../../functions/builtin/hello.wat"), "greets the name in the body"),
    ("fib", include_str!("../../../functions/builtin/fib.wat"), "naive fib(n), n in the body"),
    ("spin", include_str!("../../../functions/builtin/spin.wat"), "busy loop of n iterations"),
];

/// Settings of a built-in function: defaults, except that `spin` — the load generator's
/// synthetic function, whose execution is whatever the client asks — trusts the expected
/// execution a request carries (the papers' oracle estimates; one function serves every class).
fn builtin_config(name: &str) -> FunctionConfig {
    let mut config = FunctionConfig::new(name);
    config.trust_client_estimate = name == "spin";
    config
}

impl Manifest {
    /// The functions as a node serves them (settings, module, route).
    pub fn node_functions(&self) -> Vec<NodeFunction> {
        self.functions
            .iter()
            .map(|f| NodeFunction {
                config: f.config.clone(),
                module: f.module.clone(),
                route: f.route.clone(),
            })
            .collect()
    }

    /// The chains as a node serves them.
    pub fn node_chains(&self) -> Vec<NodeChain> {
        self.chains.clone()
    }

    /// The built-in functions with default settings.
    pub fn builtin() -> Self {
        let functions = BUILTINS
            .iter()
            .map(|(name, wat, _)| FunctionEntry {
                config: builtin_config(name),
                route: format!("/{name}"),
                module: wat.as_bytes().to_vec(),
                source: format!("builtin:{name}"),
            })
            .collect();
        let mut server = default_settings();
        server.runtime.cache_dir = default_cache_dir();
        Self { server, functions, chains: Vec::new() }
    }

    /// Reads and checks the manifest at `path` (module paths are relative to its directory).
    pub fn load(path: &Path) -> Result<Self, ManifestError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ManifestError {
            file: file.clone(),
            line: 0,
            reason: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, &file, dir)
    }

    /// Parses manifest `text` named `file`, resolving modules against `dir`.
    pub fn parse(text: &str, file: &str, dir: &Path) -> Result<Self, ManifestError> {
        Self::parse_with(text, file, dir, &|path| std::fs::read(path))
    }

    /// [`Manifest::parse`] with the modules' bytes from `read_module` (given `dir` joined with
    /// each `module` path) instead of the file system: the fuzzer parses manifests that name
    /// any path without opening it.
    pub fn parse_with(
        text: &str,
        file: &str,
        dir: &Path,
        read_module: &dyn Fn(&Path) -> std::io::Result<Vec<u8>>,
    ) -> Result<Self, ManifestError> {
        let raw: RawManifest = toml::from_str(text).map_err(|e| ManifestError {
            file: file.to_owned(),
            line: e.span().map_or(1, |s| line_of(text, s.start)),
            reason: e.message().to_owned(),
        })?;
        let mut server = settings(raw.server, text, dir, file)?;
        for t in raw.tenants {
            let at = |reason: String| ManifestError {
                file: file.to_owned(),
                line: line_of(text, t.id.span().start),
                reason,
            };
            let id = *t.id.get_ref();
            let tenant = TenantConfig {
                max_concurrent: t.max_concurrent,
                rate_per_sec: t.rate_per_sec,
                burst: t.burst,
                cpu_share: t.cpu_share,
                max_functions: t.max_functions,
                max_memory_bytes: t.max_memory_bytes,
                ..TenantConfig::new(id, t.name.unwrap_or_else(|| id.to_string()))
            };
            tenant.check().map_err(at)?;
            if server.runtime.tenants.iter().any(|u| u.id == id) {
                return Err(at(format!("tenant {id} is declared twice")));
            }
            server.runtime.tenants.push(tenant);
        }
        server.runtime.registration = raw.registration.limits(text, file)?;
        let mut functions: Vec<FunctionEntry> = Vec::new();
        for f in raw.functions {
            let at = |span: Range<usize>, reason: String| ManifestError {
                file: file.to_owned(),
                line: line_of(text, span.start),
                reason,
            };
            let name = checked_name(&f.name, "function").map_err(|(s, r)| at(s, r))?;
            if functions.iter().any(|g| g.config.name == name) {
                return Err(at(f.name.span(), format!("function `{name}` is defined twice")));
            }
            let route = route_or_default(f.route.as_ref(), &f.name).map_err(|(s, r)| at(s, r))?;
            if functions.iter().any(|g| g.route == route) {
                return Err(at(f.name.span(), format!("route `{route}` is used twice")));
            }
            let (module, source) = match f.module.get_ref().strip_prefix("builtin:") {
                Some(b) => match BUILTINS.iter().find(|(n, _, _)| *n == b) {
                    // (Settings come from this entry; only the module is the built-in's.)
                    Some((_, wat, _)) => (wat.as_bytes().to_vec(), f.module.get_ref().clone()),
                    None => return Err(at(f.module.span(), format!("no built-in function `{b}`"))),
                },
                None => {
                    let path = dir.join(f.module.get_ref());
                    let bytes = read_module(&path).map_err(|e| {
                        at(f.module.span(), format!("cannot read module {}: {e}", path.display()))
                    })?;
                    (bytes, path.display().to_string())
                }
            };
            for (value, key) in [
                (f.relative_deadline_us, "relative_deadline_us"),
                (f.max_execution_us, "max_execution_us"),
            ] {
                if value == Some(0) {
                    // 0 would refuse (or kill) every request that brings no deadline of its own.
                    return Err(at(f.name.span(), format!("{key} must be above 0")));
                }
            }
            let defaults = Limits::default();
            let us = Duration::from_micros;
            let limits = Limits {
                max_execution: f.max_execution_us.map_or(defaults.max_execution, us),
                // Without its own cap, the smallest of the default, the server's and its
                // tenant's.
                max_memory_bytes: f
                    .max_memory_bytes
                    .unwrap_or_else(|| server.runtime.default_memory_cap(f.tenant.unwrap_or(0))),
                max_request_bytes: f.max_request_bytes.unwrap_or(defaults.max_request_bytes),
                max_output_bytes: f.max_output_bytes.unwrap_or(defaults.max_output_bytes),
            };
            if limits.max_memory_bytes > server.runtime.max_memory_bytes {
                return Err(at(
                    f.name.span(),
                    format!(
                        "max_memory_bytes = {} exceeds [server] max_memory_bytes = {}",
                        limits.max_memory_bytes, server.runtime.max_memory_bytes
                    ),
                ));
            }
            let mut config = FunctionConfig::new(name);
            config.limits = limits;
            if let Some(d) = f.relative_deadline_us {
                config.relative_deadline = us(d);
            }
            config.expected_execution = f.expected_execution_us.map(us);
            config.check().map_err(|bad| at(f.name.span(), bad.reason))?;
            config.tenant = f.tenant.unwrap_or(0);
            // Once tenants are declared, a function's tenant must be one of them (or 0, the
            // operator's own): a mistyped id must not escape every limit.
            let tenants = &server.runtime.tenants;
            if !tenants.is_empty()
                && config.tenant != 0
                && !tenants.iter().any(|t| t.id == config.tenant)
            {
                return Err(at(
                    f.name.span(),
                    format!("tenant {} is not declared in a [[tenant]] table", config.tenant),
                ));
            }
            config.trust_client_estimate = f.trust_client_estimate.unwrap_or(false);
            if let Some(overrun) = &f.on_overrun {
                config.on_overrun =
                    overrun.get_ref().parse().map_err(|e| at(overrun.span(), format!("{e}")))?;
            }
            if let Some(class) = &f.class {
                config.ull = match class.get_ref().as_str() {
                    "ull" => true,
                    "standard" => false,
                    other => {
                        let why = format!("expected `ull` or `standard`, not `{other}`");
                        return Err(at(class.span(), why));
                    }
                };
            }
            functions.push(FunctionEntry { config, route, module, source });
        }
        let chains = chains(raw.chains, &functions, text, file)?;
        shadowed_names(&functions, &chains).map_err(|(route, reason)| ManifestError {
            file: file.to_owned(),
            // The route's line (the first that writes it).
            line: text
                .lines()
                .position(|l| {
                    l.contains(&format!("\"{route}\"")) || l.contains(&format!("'{route}'"))
                })
                .map_or(1, |i| i + 1),
            reason,
        })?;
        Ok(Self { server, functions, chains })
    }
}

/// Refuses a route that is another function's or chain's default path `/<name>`: the HTTP front
/// end looks a path up in the routes first, so that one would answer the other's name (and
/// `luge invoke <name>`, which posts to `/<name>`, would run it).
fn shadowed_names(
    functions: &[FunctionEntry],
    chains: &[NodeChain],
) -> Result<(), (String, String)> {
    let named = functions
        .iter()
        .map(|f| (f.config.name.as_str(), f.route.as_str()))
        .chain(chains.iter().map(|c| (c.config.name.as_str(), c.route.as_str())));
    let all: Vec<(&str, &str)> = named.collect();
    let names: std::collections::HashSet<&str> = all.iter().map(|&(name, _)| name).collect();
    for &(name, route) in &all {
        if let Some(other) = route.strip_prefix('/').filter(|o| *o != name && names.contains(o)) {
            return Err((
                route.to_owned(),
                format!(
                    "`{name}`'s route `{route}` is the path of `{other}`: it would answer requests \
                 for `{other}`; give `{name}` another route"
                ),
            ));
        }
    }
    Ok(())
}

/// A function's or chain's name, if it is `[A-Za-z0-9._-]+`; else where and why not.
fn checked_name(name: &Spanned<String>, kind: &str) -> Result<String, (Range<usize>, String)> {
    let text = name.get_ref();
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err((name.span(), format!("bad {kind} name `{text}` (use [A-Za-z0-9._-])")));
    }
    // As the admin API has them: at most 128 characters, and not dots alone (`/..` is no path a
    // client keeps).
    if text.len() > MAX_NAME_LEN || text.chars().all(|c| c == '.') {
        let why =
            format!("bad {kind} name `{text}` (1 to {MAX_NAME_LEN} characters, not only dots)");
        return Err((name.span(), why));
    }
    Ok(text.clone())
}

/// The longest function or chain name (the admin API's bound too).
const MAX_NAME_LEN: usize = 128;

/// The route given (it must start with `/`), else `/<name>`; either must be one the HTTP front
/// end can serve (`luge_server::check_route`: printable, no `?` or `#`, not one of the server's
/// own paths — a function named `metrics` needs a route of its own), checked here so that the
/// error names its line rather than failing the start after every module compiled.
fn route_or_default(
    route: Option<&Spanned<String>>,
    name: &Spanned<String>,
) -> Result<String, (Range<usize>, String)> {
    let (text, span) = match route {
        Some(r) if !r.get_ref().starts_with('/') || r.get_ref().len() < 2 => {
            return Err((r.span(), format!("route `{}` must start with `/`", r.get_ref())));
        }
        Some(r) => (r.get_ref().clone(), r.span()),
        None => (format!("/{}", name.get_ref()), name.span()),
    };
    match luge_server::check_route(&text) {
        Ok(()) => Ok(text),
        Err(e) if route.is_none() => Err((
            span,
            format!("{e} (the default route of `{}`: give it a `route`)", name.get_ref()),
        )),
        Err(e) => Err((span, e.to_string())),
    }
}

/// The `[[chain]]` tables, checked against the functions: a name of their namespace, a route
/// of its own, stages among them (1 to `MAX_STAGES`), a deadline above zero.
fn chains(
    raw: Vec<RawChain>,
    functions: &[FunctionEntry],
    text: &str,
    file: &str,
) -> Result<Vec<NodeChain>, ManifestError> {
    let mut out: Vec<NodeChain> = Vec::new();
    for c in raw {
        let at = |span: Range<usize>, reason: String| ManifestError {
            file: file.to_owned(),
            line: line_of(text, span.start),
            reason,
        };
        let name = checked_name(&c.name, "chain").map_err(|(s, r)| at(s, r))?;
        let taken = functions.iter().any(|f| f.config.name == name)
            || out.iter().any(|o| o.config.name == name);
        if taken {
            return Err(at(c.name.span(), format!("`{name}` names a function or chain already")));
        }
        let route = route_or_default(c.route.as_ref(), &c.name).map_err(|(s, r)| at(s, r))?;
        if functions.iter().any(|f| f.route == route) || out.iter().any(|o| o.route == route) {
            return Err(at(c.name.span(), format!("route `{route}` is used twice")));
        }
        let stages = c.stages.get_ref().clone();
        if stages.is_empty() || stages.len() > MAX_STAGES {
            return Err(at(
                c.stages.span(),
                format!("a chain has 1 to {MAX_STAGES} stages (got {})", stages.len()),
            ));
        }
        if let Some(missing) =
            stages.iter().find(|s| !functions.iter().any(|f| f.config.name == **s))
        {
            return Err(at(
                c.stages.span(),
                format!("stage `{missing}` is not a [[function]] of this manifest"),
            ));
        }
        let deadline = *c.relative_deadline_us.get_ref();
        if deadline == 0 {
            return Err(at(
                c.relative_deadline_us.span(),
                "relative_deadline_us must be above 0".into(),
            ));
        }
        let relative_deadline = Duration::from_micros(deadline);
        out.push(NodeChain { config: ChainConfig { name, stages, relative_deadline }, route });
    }
    Ok(out)
}

/// Every setting at its default (HTTP on 127.0.0.1:8080, UDP-RPC on 127.0.0.1:8081, the admin
/// API on 127.0.0.1:8082).
fn default_settings() -> ServerSettings {
    ServerSettings {
        http: SocketAddr::from(([127, 0, 0, 1], 8080)),
        rpc: SocketAddr::from(([127, 0, 0, 1], 8081)),
        admin: Some(SocketAddr::from(([127, 0, 0, 1], 8082))),
        agent: None,
        admin_token_file: None,
        expose_metrics: true,
        max_connections_per_client: 1024,
        max_buffered_body_bytes: HttpConfig::default().max_buffered_body_bytes,
        max_buffered_body_bytes_per_client: HttpConfig::default()
            .max_buffered_body_bytes_per_client,
        min_send_rate: HttpConfig::default().min_send_rate,
        http_threads: 1,
        rpc_busy_poll: false,
        request_log: RequestLog::Off,
        otlp_endpoint: None,
        trace_sample: DEFAULT_TRACE_SAMPLE,
        runtime: RuntimeConfig::default(),
    }
}

fn settings(
    raw: RawServer,
    text: &str,
    dir: &Path,
    file: &str,
) -> Result<ServerSettings, ManifestError> {
    let at = |span: Range<usize>, reason: String| ManifestError {
        file: file.to_owned(),
        line: line_of(text, span.start),
        reason,
    };
    let addr = |v: Option<Spanned<String>>, default: SocketAddr| match v {
        None => Ok(default),
        Some(s) => s
            .get_ref()
            .parse::<SocketAddr>()
            .map_err(|e| at(s.span(), format!("bad address `{}`: {e}", s.get_ref()))),
    };
    let defaults = default_settings();
    let mut runtime = RuntimeConfig::default();
    if let Some(p) = raw.policy {
        runtime.policy =
            p.get_ref().parse::<PolicyKind>().map_err(|e| at(p.span(), e.to_string()))?;
    }
    if let Some(w) = raw.wait {
        runtime.wait = match w.get_ref().as_str() {
            "sleep" => WaitMode::Sleep,
            "spin" => WaitMode::Spin,
            other => {
                return Err(at(w.span(), format!("wait must be `sleep` or `spin`, not `{other}`")));
            }
        };
    }
    runtime.workers = raw.workers.unwrap_or(runtime.workers);
    runtime.dispatchers = raw.dispatchers.unwrap_or(runtime.dispatchers);
    if let Some(l) = raw.layout {
        runtime.layout = l.get_ref().parse::<Layout>().map_err(|reason| at(l.span(), reason))?;
        if runtime.layout == Layout::Inline {
            // Each worker's thread runs its own dispatcher.
            if raw.dispatchers.is_some_and(|d| d != runtime.workers) {
                let reason = "the inline layout runs a dispatcher on each worker's thread: \
                              leave `dispatchers` out or set it to `workers`";
                return Err(at(l.span(), reason.to_owned()));
            }
            runtime.dispatchers = runtime.workers;
        }
    }
    // A key's line, for the settings read without a span: the first that writes it (or, for
    // `workers`, `dispatchers`), else the `[server]` table's, else the first.
    let refuse = |key: &str, reason: String| {
        let writes = |l: &str, key: &str| {
            l.trim_start().strip_prefix(key).is_some_and(|r| r.trim_start().starts_with('='))
        };
        let line_of_key = |key: &str| text.lines().position(|l| writes(l, key));
        let line = line_of_key(key)
            .or_else(|| (key == "workers").then(|| line_of_key("dispatchers")).flatten())
            .or_else(|| text.lines().position(|l| l.trim() == "[server]"))
            .map_or(1, |i| i + 1);
        ManifestError { file: file.to_owned(), line, reason }
    };
    runtime.cpus = raw.cpus.unwrap_or_default();
    if let Some(&cpu) = runtime.cpus.iter().find(|&&c| c >= MAX_CPU) {
        return Err(refuse(
            "cpus",
            format!("cpu {cpu} is beyond what Linux can pin to (< {MAX_CPU})"),
        ));
    }
    if let Some(t) = raw.tick_us {
        if t == 0 {
            return Err(refuse(
                "tick_us",
                "tick_us must be at least 1 (below 10 counts as 10)".into(),
            ));
        }
        runtime.tick = Duration::from_micros(t.max(10));
    }
    if let Some(t) = raw.notify_interval_us {
        // 0 = off; otherwise at least the ticker's floor.
        runtime.notify_interval = Duration::from_micros(if t == 0 { 0 } else { t.max(10) });
    }
    if let Some(q) = raw.worker_queue {
        runtime.policy_config.worker_queue =
            q.get_ref().parse::<QueueKind>().map_err(|e| at(q.span(), e.to_string()))?;
    }
    if let Some(d) = raw.delta_window_us {
        let QueueKind::Timeline(c) = &mut runtime.policy_config.worker_queue else {
            let reason = "`delta_window_us` sets the timeline's quantum: it needs \
                          `worker_queue = \"timeline\"`";
            return Err(at(d.span(), reason.to_owned()));
        };
        if *d.get_ref() == 0 {
            return Err(at(d.span(), "`delta_window_us` must be at least 1".to_owned()));
        }
        c.delta_window = d.get_ref().saturating_mul(1_000);
    }
    if let Some(b) = raw.batch_window_us {
        runtime.policy_config.batch_window = b.saturating_mul(1_000);
    }
    runtime.ull_lane = raw.ull_lane.unwrap_or(runtime.ull_lane);
    if let Some(t) = raw.ull_threshold_us {
        runtime.ull_threshold = Duration::from_micros(t);
    }
    runtime.ull_burst = raw.ull_burst.unwrap_or(runtime.ull_burst);
    runtime.ready_sandboxes = raw.ready_sandboxes.unwrap_or(runtime.ready_sandboxes);
    runtime.ready_sandboxes_max = raw.ready_sandboxes_max.unwrap_or(runtime.ready_sandboxes_max);
    if let Some(n) = raw.max_sandboxes {
        if n == 0 {
            return Err(refuse("max_sandboxes", "max_sandboxes must be at least 1".into()));
        }
        runtime.max_sandboxes = n;
    }
    if let Some(m) = raw.max_memory_bytes {
        runtime.max_memory_bytes = m;
    }
    if let Some(m) = raw.memory_init {
        runtime.memory_init_cow = match m.get_ref().as_str() {
            "cow" => true,
            "copy" => false,
            other => {
                return Err(at(
                    m.span(),
                    format!("memory_init must be `cow` or `copy`, not `{other}`"),
                ));
            }
        };
    }
    runtime.cache_dir = raw.cache_dir.map(|d| dir.join(d)).or_else(default_cache_dir);
    if let Some(c) = raw.cache_max_bytes {
        runtime.cache_max_bytes = c;
    }
    if let Some(e) = raw.default_estimate_us {
        runtime.default_estimate = Duration::from_micros(e);
    }
    if let Some(g) = raw.shutdown_grace_ms {
        runtime.shutdown_grace = Duration::from_millis(g);
    }
    if let Some(r) = raw.reject_infeasible {
        runtime.policy_config.admission.reject_infeasible = r;
    }
    if let Some(w) = raw.admit_on_wait {
        runtime.policy_config.admission.on_wait = w;
    }
    if let Some(p) = raw.protect_admitted {
        runtime.policy_config.admission.protect_admitted = p;
    }
    if let Some(d) = raw.shed {
        runtime.policy_config.admission.shed = d;
    }
    if let Some(q) = raw.max_queued {
        if q == 0 {
            // Every arrival would find the queue full.
            return Err(refuse("max_queued", "max_queued must be at least 1".into()));
        }
        runtime.policy_config.admission.max_queued = Some(q);
    }
    // What the runtime would refuse at start, refused here with the key's line.
    runtime.check().map_err(|bad| refuse(bad.key, bad.reason))?;
    if raw.http_threads == Some(0) {
        return Err(refuse("http_threads", "http_threads must be at least 1".into()));
    }
    let request_log = match raw.request_log {
        None => defaults.request_log,
        Some(r) => r.get_ref().parse().map_err(|e: BadRequestLog| at(r.span(), e.to_string()))?,
    };
    let otlp_endpoint = match raw.otlp_endpoint {
        None => None,
        Some(e) => {
            check_otlp_endpoint(e.get_ref()).map_err(|why| at(e.span(), why))?;
            Some(e.into_inner())
        }
    };
    let trace_sample = match raw.trace_sample {
        None => DEFAULT_TRACE_SAMPLE,
        Some(s) => {
            check_trace_sample(*s.get_ref()).map_err(|why| at(s.span(), why))?;
            *s.get_ref()
        }
    };
    let max_buffered_body_bytes =
        raw.max_buffered_body_bytes.unwrap_or(defaults.max_buffered_body_bytes);
    Ok(ServerSettings {
        otlp_endpoint,
        trace_sample,
        http: addr(raw.http, defaults.http)?,
        rpc: addr(raw.rpc, defaults.rpc)?,
        agent: match raw.agent {
            Some(a) => Some(addr(Some(a), SocketAddr::from(([127, 0, 0, 1], 0)))?),
            None => None,
        },
        admin: match raw.admin {
            Some(a) if a.get_ref() == "off" => None,
            a => Some(addr(a, SocketAddr::from(([127, 0, 0, 1], 8082)))?),
        },
        admin_token_file: raw.admin_token_file.map(|f| dir.join(f)),
        expose_metrics: raw.expose_metrics.unwrap_or(defaults.expose_metrics),
        max_connections_per_client: raw
            .max_connections_per_client
            .unwrap_or(defaults.max_connections_per_client),
        max_buffered_body_bytes,
        // A quarter of the whole, unless given: a node that lowers the whole keeps a share.
        max_buffered_body_bytes_per_client: raw
            .max_buffered_body_bytes_per_client
            .unwrap_or(max_buffered_body_bytes / 4),
        min_send_rate: raw.min_send_rate.unwrap_or(defaults.min_send_rate),
        http_threads: raw.http_threads.unwrap_or(1),
        rpc_busy_poll: raw.rpc_busy_poll.unwrap_or(false),
        request_log,
        runtime,
    })
}

/// CPUs a worker can be pinned to are numbered below this (`CPU_SETSIZE`).
const MAX_CPU: usize = 1024;

/// The share of context-less requests traced when spans are exported and no share is given.
pub const DEFAULT_TRACE_SAMPLE: f64 = 0.01;

/// An OTLP/HTTP endpoint: `http://host:port` (spans go to `/v1/traces` under it) or the full
/// traces URL. Only plain HTTP: the exporter is built without TLS (a collector runs beside the
/// node, or a sidecar terminates TLS).
pub fn check_otlp_endpoint(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        format!("otlp_endpoint `{url}`: expected http://host:port (TLS is not built in)")
    })?;
    if rest.is_empty() || rest.starts_with('/') || url.chars().any(char::is_whitespace) {
        return Err(format!("otlp_endpoint `{url}`: expected http://host:port"));
    }
    Ok(())
}

/// A sampling share: 0 … 1.
pub fn check_trace_sample(share: f64) -> Result<(), String> {
    if (0.0..=1.0).contains(&share) {
        Ok(())
    } else {
        Err(format!("trace_sample {share}: expected a share between 0 and 1"))
    }
}

/// `$XDG_CACHE_HOME/luge` or `~/.cache/luge`.
fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("luge"))
}

fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).map_or(1, |t| t.matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(text, "luge.toml", Path::new("/nonexistent"))
    }

    fn error(text: &str) -> (usize, String) {
        let e = parse(text).unwrap_err();
        assert_eq!(e.file, "luge.toml");
        (e.line, e.reason)
    }

    #[test]
    fn a_full_manifest_parses() {
        let m = parse(
            r#"
[server]
http = "0.0.0.0:9000"
rpc = "127.0.0.1:9001"
workers = 2
dispatchers = 1
policy = "fifo"
"#,
        )
        .unwrap();
        assert_eq!(m.server.http.port(), 9000);
        assert_eq!(m.server.runtime.workers, 2);
        assert_eq!(m.server.runtime.policy, PolicyKind::Fifo);
        // Deadline-aware admission is the default, and each part can be turned off.
        assert_eq!(m.server.runtime.policy_config.admission, luge_sched::Admission::DEADLINE);
        let m = parse("[server]\nadmit_on_wait = false\nshed = false\nmax_queued = 7\n").unwrap();
        let a = m.server.runtime.policy_config.admission;
        assert!(!a.on_wait && !a.shed && a.reject_infeasible);
        assert_eq!(a.max_queued, Some(7));
        // The admin listener: loopback by default, movable, or off; its token from a file.
        assert_eq!(parse("").unwrap().server.admin, Some("127.0.0.1:8082".parse().unwrap()));
        let m = parse("[server]\nadmin = \"off\"\nexpose_metrics = false\n").unwrap();
        assert_eq!((m.server.admin, m.server.expose_metrics), (None, false));
        let m = parse("[server]\nmax_connections_per_client = 0\n").unwrap();
        assert_eq!(m.server.max_connections_per_client, 0);
        assert_eq!(m.server.max_buffered_body_bytes, 256 << 20, "the front end's default");
        let m = parse("[server]\nmax_buffered_body_bytes = 1048576\n").unwrap();
        assert_eq!(m.server.max_buffered_body_bytes, 1 << 20);
        assert_eq!(m.server.max_buffered_body_bytes_per_client, 256 << 10, "a quarter");
        let m = parse("").unwrap();
        assert_eq!(m.server.max_buffered_body_bytes_per_client, 64 << 20, "a quarter of 256 MiB");
        let m = parse("[server]\nmax_buffered_body_bytes_per_client = 0\n").unwrap();
        assert_eq!(m.server.max_buffered_body_bytes_per_client, 0);
        assert_eq!(m.server.min_send_rate, 1024, "the front end's default");
        let m = parse("[server]\nmin_send_rate = 0\n").unwrap();
        assert_eq!(m.server.min_send_rate, 0);
        let m = parse("[server]\nadmin = \"10.0.0.1:9\"\nadmin_token_file = \"t\"\n").unwrap();
        assert_eq!(m.server.admin, Some("10.0.0.1:9".parse().unwrap()));
        assert_eq!(m.server.admin_token_file, Some(PathBuf::from("/nonexistent/t")));
        let (line, reason) = error("[server]\n\nadmin = \"on\"\n");
        assert!(line == 3 && reason.contains("bad address"), "{line}: {reason}");
        // The inline layout gives every worker its own dispatcher.
        let m = parse("[server]\nworkers = 2\nlayout = \"inline\"\n").unwrap();
        assert_eq!(m.server.runtime.layout, Layout::Inline);
        assert_eq!(m.server.runtime.dispatchers, 2);
        let m = parse("[server]\nlayout = \"threads\"\n").unwrap();
        assert_eq!(m.server.runtime.layout, Layout::Threads);
        // Left out, the layout is `auto`: inline with one worker, a dispatcher thread with more.
        let m = parse("[server]\n").unwrap();
        assert_eq!(m.server.runtime.layout, Layout::Auto);
        assert_eq!(m.server.runtime.effective_layout(), Layout::Inline);
        let m = parse("[server]\nworkers = 2\n").unwrap();
        assert_eq!(m.server.runtime.effective_layout(), Layout::Threads);
        assert_eq!(m.server.runtime.notify_interval, Duration::ZERO);
        assert_eq!(m.server.runtime.policy_config.worker_queue, QueueKind::Tree);
        let m = parse("[server]\nworker_queue = \"timeline\"\ndelta_window_us = 50\n").unwrap();
        let timeline = QueueKind::Timeline(luge_sched::CtEdfConfig { delta_window: 50_000 });
        assert_eq!(m.server.runtime.policy_config.worker_queue, timeline);
        let e = parse("[server]\ndelta_window_us = 50\n").unwrap_err().to_string();
        assert!(e.contains("needs `worker_queue"), "{e}");
        let e = parse("[server]\nworker_queue = \"list\"\n").unwrap_err().to_string();
        assert!(e.contains("unknown worker queue `list`"), "{e}");
        assert_eq!(m.server.runtime.policy_config.batch_window, 0);
        let m = parse("[server]\nbatch_window_us = 8000\n").unwrap();
        assert_eq!(m.server.runtime.policy_config.batch_window, 8_000_000);
        let m = parse("[server]\nnotify_interval_us = 250\n").unwrap();
        assert_eq!(m.server.runtime.notify_interval, Duration::from_micros(250));
        assert!(m.server.runtime.ull_lane);
        assert_eq!(m.server.runtime.ull_threshold, Duration::from_micros(20));
        assert_eq!(m.server.runtime.ull_burst, 16);
        let m = parse("[server]\null_lane = false\null_threshold_us = 5\null_burst = 0\n").unwrap();
        assert_eq!(m.server.runtime.ull_burst, 0);
        assert!(!m.server.runtime.ull_lane);
        assert_eq!(m.server.runtime.ull_threshold, Duration::from_micros(5));
        assert_eq!(
            (m.server.runtime.ready_sandboxes, m.server.runtime.ready_sandboxes_max),
            (2, 16)
        );
        assert!(m.server.runtime.memory_init_cow, "the copy-on-write image by default");
        let m = parse("[server]\nmemory_init = \"copy\"\n").unwrap();
        assert!(!m.server.runtime.memory_init_cow);
        let Err(e) = parse("[server]\nmemory_init = \"lazy\"\n") else { panic!("accepted") };
        assert!(e.to_string().contains("memory_init must be `cow` or `copy`"), "{e}");
        let m = parse("[server]\nready_sandboxes = 0\nready_sandboxes_max = 4\n").unwrap();
        assert_eq!(
            (m.server.runtime.ready_sandboxes, m.server.runtime.ready_sandboxes_max),
            (0, 4)
        );
        let m = parse("[server]\nworkers = 2\nlayout = \"auto\"\n").unwrap();
        assert_eq!(m.server.runtime.effective_layout(), Layout::Threads);
        let m = parse("[server]\nrequest_log = \"100\"\n").unwrap();
        assert_eq!(m.server.request_log.to_string(), "100");
        assert_eq!((m.server.otlp_endpoint, m.server.trace_sample), (None, DEFAULT_TRACE_SAMPLE));
        let traced = "[server]\notlp_endpoint = \"http://collector:4318\"\ntrace_sample = 0.5\n";
        let m = parse(traced).unwrap();
        assert_eq!(m.server.otlp_endpoint.as_deref(), Some("http://collector:4318"));
        assert_eq!(m.server.trace_sample, 0.5);
        assert_eq!(m.server.agent, None);
        let m = parse("[server]\nagent = \"0.0.0.0:8083\"\n").unwrap();
        assert_eq!(m.server.agent, Some("0.0.0.0:8083".parse().unwrap()));
        let m = parse(
            r#"
[[function]]
name = "hi"
module = "builtin:hello"
route = "/greet"
relative_deadline_us = 5000
expected_execution_us = 20
max_execution_us = 100000
max_memory_bytes = 1048576
tenant = 3
on_overrun = "demote"
class = "ull"
"#,
        )
        .unwrap();
        let f = &m.functions[0];
        assert_eq!(f.config.on_overrun, luge_runtime::Overrun::Demote);
        assert!(f.config.ull);
        assert_eq!(f.route, "/greet");
        assert_eq!(f.config.relative_deadline, Duration::from_millis(5));
        assert_eq!(f.config.expected_execution, Some(Duration::from_micros(20)));
        assert_eq!(f.config.limits.max_execution, Duration::from_millis(100));
        assert_eq!(f.config.limits.max_memory_bytes, 1 << 20);
        assert_eq!(f.config.tenant, 3);
        assert!(!f.module.is_empty());
    }

    /// `text` is refused at line `want_line` with a reason containing `want_reason`.
    fn fails_at(text: &str, want_line: usize, want_reason: &str) {
        let (line, reason) = error(text);
        assert_eq!(line, want_line, "{text}: {reason}");
        assert!(reason.contains(want_reason), "{text}: {reason}");
    }

    #[test]
    fn errors_name_the_line_and_the_reason() {
        fails_at("[server]\nworkers = 1\nwokers = 2\n", 3, "unknown field `wokers`");
        fails_at("[server]\n\npolicy = \"nope\"\n", 3, "unknown policy");
        fails_at("[server]\nhttp = \"localhost\"\n", 2, "bad address");
        fails_at("[server]\nlayout = \"flat\"\n", 2, "`threads` or `inline`");
        fails_at("[server]\nrequest_log = \"some\"\n", 2, "invalid request log");
        fails_at("[server]\notlp_endpoint = \"https://c:4318\"\n", 2, "TLS is not built in");
        fails_at("[server]\notlp_endpoint = \"http://\"\n", 2, "expected http://host:port");
        fails_at("[server]\ntrace_sample = 1.5\n", 2, "between 0 and 1");
        let split = "[server]\nworkers = 2\ndispatchers = 1\nlayout = \"inline\"\n";
        fails_at(split, 4, "leave `dispatchers` out");
        let function = "[[function]]\nname = \"a\"\n";
        fails_at(&format!("{function}module = \"missing.wasm\"\n"), 3, "cannot read module");
        fails_at(&format!("{function}module = \"builtin:nope\"\n"), 3, "no built-in");
        let noop = format!("{function}module = \"builtin:noop\"\n");
        fails_at(&format!("{noop}on_overrun = \"pause\"\n"), 4, "expected kill or demote");
        fails_at(&format!("{noop}class = \"fast\"\n"), 4, "expected `ull` or `standard`");
        fails_at(&format!("{noop}route = \"x\"\n"), 4, "must start with `/`");
        fails_at(&format!("{noop}{function}module = \"builtin:echo\"\n"), 5, "defined twice");
        fails_at(&format!("{noop}max_execution_us = \"soon\"\n"), 4, "invalid type");
        let (line, reason) = error("[server]\nworkers = 1\ndispatchers = 2\n");
        assert!(reason.contains("dispatchers"), "{reason}");
        assert_eq!(line, 2);
        // Without a `workers` line, the `dispatchers` one.
        fails_at("[server]\ndispatchers = 2\n", 2, "need 1 ≤ dispatchers ≤ workers");
    }

    /// Values that parse but would make the node refuse or kill everything, or panic a worker,
    /// are refused with their line instead of clamped or accepted.
    #[test]
    fn nonsense_values_are_refused() {
        fails_at("[server]\nmax_queued = 0\n", 2, "max_queued must be at least 1");
        fails_at("[server]\n\nmax_sandboxes = 0\n", 3, "max_sandboxes must be at least 1");
        fails_at("[server]\nhttp_threads = 0\n", 2, "http_threads must be at least 1");
        fails_at("[server]\ntick_us = 0\n", 2, "tick_us must be at least 1");
        fails_at("[server]\ncpus = [0, 1024]\n", 2, "cpu 1024");
        // What the runtime would refuse at start (`RuntimeConfig::check`), with the key's line.
        fails_at("[server]\ntick_us = 30000000\n", 2, "the epoch tick must be within");
        fails_at("[server]\nworkers = 4\nmax_sandboxes = 2\n", 3, "some workers could never");
        fails_at("[server]\nmax_memory_bytes = 8589934592\n", 2, "4 GiB");
        fails_at("[server]\nmax_memory_bytes = 1000\n", 2, "one Wasm page");
        fails_at("[server]\null_threshold_us = 1000\n", 2, "above the uLL lane's slice");
        // Settings the chosen policy would ignore.
        let fifo = "[server]\npolicy = \"fifo\"\n";
        fails_at(&format!("{fifo}worker_queue = \"timeline\"\n"), 3, "`fifo` has none");
        fails_at(&format!("{fifo}batch_window_us = 50\n"), 3, "`fifo` takes none");
        let steal = "[server]\npolicy = \"sledgescale-steal\"\nbatch_window_us = 50\n";
        fails_at(steal, 3, "`sledgescale-steal` takes none");
        let protect = "[server]\nadmit_on_wait = false\nprotect_admitted = true\n";
        fails_at(protect, 3, "protect_admitted refines admission on the wait");
        // Off, the lane has no slice to overrun.
        parse("[server]\null_lane = false\null_threshold_us = 1000\n").unwrap();
        let noop = "[[function]]\nname = \"a\"\nmodule = \"builtin:noop\"\n";
        fails_at(
            &format!("{noop}relative_deadline_us = 0\n"),
            2,
            "relative_deadline_us must be above 0",
        );
        fails_at(&format!("{noop}max_execution_us = 0\n"), 2, "max_execution_us must be above 0");
        // The same bounds as the admin API's (`FunctionConfig::check`).
        for (value, why) in [
            ("max_output_bytes = 0", "max_output_bytes must be at least 1"),
            ("max_request_bytes = 0", "max_request_bytes must be at least 1"),
            ("expected_execution_us = 0", "expected_execution_us must be within 1 µs"),
            ("relative_deadline_us = 7200000000", "relative_deadline_us must be within 1 µs"),
        ] {
            fails_at(&format!("{noop}{value}\n"), 2, why);
        }
        // Without a cap of its own, a function takes the server's when that is the smaller.
        let small = parse(&format!("[server]\nmax_memory_bytes = 16777216\n{noop}")).unwrap();
        assert_eq!(small.functions[0].config.limits.max_memory_bytes, 16 << 20);
        // A route that is another function's path would answer for it.
        let shadow = "[[function]]\nname = \"hello\"\nmodule = \"builtin:hello\"\nroute = \"/greet\"\n\
                      [[function]]\nname = \"greet\"\nmodule = \"builtin:hello\"\nroute = \"/g2\"\n";
        let (line, reason) = error(shadow);
        assert!(reason.contains("`hello`'s route `/greet` is the path of `greet`"), "{reason}");
        assert_eq!(line, 4, "the route's line");
        // Routes the HTTP front end could not serve, and names it would not keep.
        let named =
            |name: &str| format!("[[function]]\nname = \"{name}\"\nmodule = \"builtin:noop\"\n");
        fails_at(&format!("{}route = \"/a b\"\n", named("a")), 4, "only printable ASCII");
        fails_at(&format!("{}route = \"/admin/x\"\n", named("a")), 4, "reserved");
        fails_at(&named("metrics"), 2, "give it a `route`");
        fails_at(&named(".."), 2, "not only dots");
        fails_at(&named(&"n".repeat(129)), 2, "1 to 128 characters");
        assert!(parse(&format!("{}route = \"/m\"\n", named("metrics"))).is_ok());
        // Each alone, or with routes of their own, is fine.
        assert!(parse("[server]\nmax_queued = 1\ncpus = [1023]\ntick_us = 10\n").is_ok());
        let fine = "[[function]]\nname = \"hello\"\nmodule = \"builtin:hello\"\nroute = \"/v1/greet\"\n\
                    [[function]]\nname = \"greet\"\nmodule = \"builtin:hello\"\n";
        assert!(parse(fine).is_ok());
    }

    #[test]
    fn tenants_are_declared_with_their_limits() {
        let m = parse(
            r#"
[[tenant]]
id = 1
name = "acme"
max_concurrent = 8
rate_per_sec = 100.5
burst = 20
cpu_share = 0.25
max_functions = 3
max_memory_bytes = 1048576

[[tenant]]
id = 2

[[function]]
name = "a"
module = "builtin:noop"
tenant = 1
"#,
        )
        .unwrap();
        let t = &m.server.runtime.tenants;
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].id, t[0].name.as_str()), (1, "acme"));
        assert_eq!(
            (t[0].max_concurrent, t[0].rate_per_sec, t[0].burst),
            (Some(8), Some(100.5), Some(20))
        );
        assert_eq!((t[0].cpu_share, t[0].max_functions), (Some(0.25), Some(3)));
        assert_eq!(t[0].max_memory_bytes, Some(1 << 20));
        assert_eq!((t[1].name.as_str(), t[1].max_concurrent), ("2", None));
        assert_eq!(m.functions[0].config.tenant, 1);
        // Without a memory cap of its own, a function takes its tenant's bound when smaller.
        assert_eq!(m.functions[0].config.limits.max_memory_bytes, 1 << 20);
        // A function of an undeclared tenant, a tenant declared twice, a bad limit.
        let (line, reason) = error(
            "[[tenant]]\nid = 1\n\n[[function]]\nname = \"a\"\nmodule = \"builtin:noop\"\ntenant = 7\n",
        );
        assert!(line == 5 && reason.contains("tenant 7 is not declared"), "{line}: {reason}");
        let (line, reason) = error("[[tenant]]\nid = 1\n[[tenant]]\nid = 1\n");
        assert!(line == 4 && reason.contains("declared twice"), "{line}: {reason}");
        let (line, reason) = error("[[tenant]]\nid = 1\ncpu_share = 2.0\n");
        assert!(line == 2 && reason.contains("cpu_share"), "{line}: {reason}");
        // Without [[tenant]] tables any tenant id is accepted, without limits.
        assert!(
            parse("[[function]]\nname = \"a\"\nmodule = \"builtin:noop\"\ntenant = 7\n").is_ok()
        );
    }

    #[test]
    fn registration_limits_and_the_cache_bound_are_settings() {
        let m = parse(
            "[server]\ncache_max_bytes = 1000\n[registration]\nmax_module_bytes = 1\n\
             max_functions = 2\nmax_function_bytes = 3\nmax_code_bytes = 4\nmax_imports = 5\n\
             max_data_segments = 6\nmax_element_segments = 7\nmax_tables = 8\n\
             max_globals = 9\nmax_concurrent_compiles = 10\ncompile_wait_ms = 11\n",
        )
        .unwrap();
        assert_eq!(m.server.runtime.cache_max_bytes, 1000);
        let want = RegistrationLimits {
            max_module_bytes: 1,
            max_functions: 2,
            max_function_bytes: 3,
            max_code_bytes: 4,
            max_imports: 5,
            max_data_segments: 6,
            max_element_segments: 7,
            max_tables: 8,
            max_globals: 9,
            max_concurrent_compiles: 10,
            compile_wait: Duration::from_millis(11),
        };
        assert_eq!(m.server.runtime.registration, want);
        let defaults = parse("").unwrap().server.runtime;
        assert_eq!(defaults.registration, RegistrationLimits::default());
        assert_eq!(defaults.cache_max_bytes, RuntimeConfig::default().cache_max_bytes);
        let (line, reason) = error("[registration]\n\nmax_concurrent_compiles = 0\n");
        assert!(line == 3 && reason.contains("at least 1"), "{line}: {reason}");
        let (line, reason) = error("[registration]\nmax_funcs = 1\n");
        assert!(line == 2 && reason.contains("unknown field `max_funcs`"), "{line}: {reason}");
    }

    #[test]
    fn chains_name_functions_of_the_manifest() {
        let functions = "[[function]]\nname = \"a\"\nmodule = \"builtin:echo\"\n\n\
                         [[function]]\nname = \"b\"\nmodule = \"builtin:spin\"\n\n";
        let chain = |body: &str| format!("{functions}[[chain]]\n{body}");
        let m = parse(&chain(
            "name = \"ab\"\nroute = \"/x/ab\"\nstages = [\"a\", \"b\", \"a\"]\n\
             relative_deadline_us = 5000\n",
        ))
        .unwrap();
        let c = &m.node_chains()[0];
        assert_eq!((c.config.name.as_str(), c.route.as_str()), ("ab", "/x/ab"));
        assert_eq!(c.config.stages, ["a", "b", "a"]);
        assert_eq!(c.config.relative_deadline, Duration::from_micros(5000));
        let bad = [
            ("name = \"a\"\nstages = [\"a\"]\nrelative_deadline_us = 1\n", "names a function"),
            ("name = \"c\"\nstages = [\"z\"]\nrelative_deadline_us = 1\n", "stage `z` is not"),
            ("name = \"c\"\nstages = []\nrelative_deadline_us = 1\n", "1 to 16 stages"),
            ("name = \"c\"\nstages = [\"a\"]\nrelative_deadline_us = 0\n", "above 0"),
            (
                "name = \"c\"\nroute = \"/a\"\nstages = [\"a\"]\nrelative_deadline_us = 1\n",
                "used twice",
            ),
            ("name = \"c\"\nstages = [\"a\"]\n", "missing field `relative_deadline_us`"),
        ];
        for (body, why) in bad {
            let (line, reason) = error(&chain(body));
            assert!(reason.contains(why), "{body}: {reason}");
            assert!(line >= 9, "located at the chain: line {line} ({reason})");
        }
    }

    #[test]
    fn the_builtin_set_is_complete() {
        let m = Manifest::builtin();
        let names: Vec<_> = m.functions.iter().map(|f| f.config.name.as_str()).collect();
        assert_eq!(names, ["noop", "echo", "hello", "fib", "spin"]);
        assert_eq!(m.server.http, SocketAddr::from(([127, 0, 0, 1], 8080)));
        assert_eq!(m.server.rpc, SocketAddr::from(([127, 0, 0, 1], 8081)));
    }
}
