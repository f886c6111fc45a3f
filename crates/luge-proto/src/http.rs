//! The HTTP front end's vocabulary (`docs/http.md`), defined once for the server, the clients
//! and the CLI: the `Luge-*` header names (lower case, as HTTP/1.1 compares them
//! case-insensitively and hyper sends them so) and [`FunctionInfo`], the JSON object the admin
//! API (`/admin/functions`) describes a function with.

use std::time::{Duration, Instant};

/// Request header: the request's relative deadline in µs.
pub const DEADLINE_HEADER: &str = "luge-deadline-us";
/// Request header: the client's expected execution in µs.
pub const EXPECTED_HEADER: &str = "luge-expected-us";
/// Response header: the node's request id (decimal).
pub const REQUEST_ID_HEADER: &str = "luge-request-id";
/// Response header: guest execution in ns.
pub const EXECUTION_HEADER: &str = "luge-execution-ns";
/// Response header: time in the node not executing, in ns (receipt to answer − execution).
pub const QUEUEING_HEADER: &str = "luge-queueing-ns";
/// Response header: the outcome label (`ok`, `trap`, `killed`, …).
pub const OUTCOME_HEADER: &str = "luge-outcome";
/// Response header: readiness in ns, receipt to the first guest instruction (HORSE §2).
pub const READINESS_HEADER: &str = "luge-readiness-ns";
/// Response header, on answers to function calls: the load signal (0–255,
/// [`load_signal`](crate::load_signal)), as UDP-RPC's flags bits 8–15 carry it.
pub const LOAD_HEADER: &str = "luge-load";
/// Response header, on answers of a chain: each stage that ran, `name;q=<ns>;e=<ns>`,
/// comma-separated (queueing and execution, as `Luge-Queueing-Ns` / `Luge-Execution-Ns`).
pub const STAGES_HEADER: &str = "luge-stages";
/// Response header, on a chain's failure: the stage that answered.
pub const STAGE_HEADER: &str = "luge-stage";

/// A registered function as the admin API reports it (`GET /admin/functions`,
/// `GET|PUT /admin/functions/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FunctionInfo {
    /// The numeric id UDP-RPC requests name it by.
    pub id: u32,
    /// Its name (and default route `/<name>`).
    pub name: String,
    /// The HTTP path that reaches it: its first explicit route, else `/<name>`.
    pub route: String,
    /// Default relative deadline, µs.
    pub relative_deadline_us: u64,
    /// The operator's expected execution, µs (`null`: learnt from runs).
    pub expected_execution_us: Option<u64>,
    /// Execution budget, µs.
    pub max_execution_us: u64,
    /// Linear memory cap, bytes.
    pub max_memory_bytes: u64,
    /// Largest request body, bytes.
    pub max_request_bytes: u64,
    /// Largest output, bytes.
    pub max_output_bytes: u64,
    /// The tenant it is accounted to.
    pub tenant: u32,
    /// What becomes of a request that can no longer meet its deadline: `kill` (answered at
    /// once) or `demote` (run late, in the best-effort lane).
    #[serde(default = "kill")]
    pub on_overrun: String,
    /// `ull` (declared ultra-low-latency: its requests take the uLL lane) or `standard`.
    #[serde(default = "standard")]
    pub class: String,
    /// SHA-256 of the module, hex.
    pub module_sha256: String,
}

/// The default of [`FunctionInfo::on_overrun`], for answers of nodes that predate it.
fn kill() -> String {
    "kill".to_owned()
}

fn standard() -> String {
    "standard".to_owned()
}

/// A chain as the admin API reports it (`GET /admin/chains`, `GET|PUT /admin/chains/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChainInfo {
    /// The numeric id UDP-RPC requests name it by (the functions' id space).
    pub id: u32,
    /// Its name (and default route `/<name>`).
    pub name: String,
    /// The HTTP path that reaches it.
    pub route: String,
    /// Its stages' functions, in order.
    pub stages: Vec<String>,
    /// The chain's relative deadline, µs.
    pub relative_deadline_us: u64,
}

/// The body of `PUT /admin/chains/<name>`: a chain of registered functions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainSpec {
    /// Its stages' functions, in order (1 to 16).
    pub stages: Vec<String>,
    /// The chain's relative deadline, µs (above 0).
    pub relative_deadline_us: u64,
    /// An HTTP route besides `/<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
}

/// A duration in whole µs, saturating: the unit of every `*_us` field and header.
pub fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A duration in whole ns, saturating: the unit of every `*_ns` field and header.
pub fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `now + wait`, saturating: where that is past what an `Instant` holds (a caller's timeout,
/// deadline or grace of `Duration::MAX`), a year from `now` — as good as never.
pub fn instant_after(now: Instant, wait: Duration) -> Instant {
    now.checked_add(wait).unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;

    #[test]
    fn a_wait_of_any_length_has_an_end() {
        let now = Instant::now();
        assert_eq!(instant_after(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        assert!(instant_after(now, Duration::MAX) > now + Duration::from_secs(3600));
    }

    #[test]
    fn function_info_round_trips_through_json() {
        let info = FunctionInfo {
            id: 3,
            name: "a\"b".into(),
            route: "/v1/x".into(),
            relative_deadline_us: 2000,
            expected_execution_us: None,
            max_execution_us: 1_000_000,
            max_memory_bytes: 1 << 20,
            max_request_bytes: 1 << 16,
            max_output_bytes: 1 << 16,
            tenant: 7,
            on_overrun: "demote".into(),
            class: "ull".into(),
            module_sha256: "00ff".into(),
        };
        let json = serde_json::to_string(&info).unwrap();
        assert!(json.contains(r#""expected_execution_us":null"#), "{json}");
        assert!(json.contains(r#""name":"a\"b""#), "{json}");
        assert_eq!(serde_json::from_str::<FunctionInfo>(&json).unwrap(), info);
        // An answer without the field (an older node) reads as `kill`.
        let old = json.replace(r#""on_overrun":"demote","#, "");
        assert_eq!(serde_json::from_str::<FunctionInfo>(&old).unwrap().on_overrun, "kill");
    }

    #[test]
    fn units_saturate() {
        assert_eq!(micros(Duration::from_nanos(1999)), 1);
        assert_eq!(nanos(Duration::MAX), u64::MAX);
        assert_eq!(micros(Duration::MAX), u64::MAX);
    }
}
