//! [`AdminClient`]: the admin API of a node (`/admin/functions`, `docs/http.md`) — list, show,
//! add and remove functions — answered in the one [`FunctionInfo`] type the server writes.

use std::time::Duration;

use hyper::Method;
use luge_proto::{ChainInfo, ChainSpec, FunctionInfo};

use crate::error::ClientError;
use crate::http::{HttpClient, HttpResponse, url};

/// How long an admin request may take (a `PUT` compiles the module).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(120);

/// Settings of a function added with [`AdminClient::add`] (the server's defaults when `None`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddOptions {
    /// An HTTP route besides `/<name>`, e.g. `/v1/resize`.
    pub route: Option<String>,
    /// Default relative deadline (whole µs; the node refuses 0, as below).
    pub deadline: Option<Duration>,
    /// Expected execution time.
    pub expected: Option<Duration>,
    /// What becomes of a request that can no longer meet its deadline: `kill` or `demote`
    /// (`FunctionInfo::on_overrun`; the server refuses any other value).
    pub on_overrun: Option<String>,
    /// The tenant it belongs to (default 0).
    pub tenant: Option<u32>,
    /// Declared ultra-low-latency (`class = "ull"`: the uLL lane), or not.
    pub ull: Option<bool>,
    /// Execution budget (CPU time) per request.
    pub max_execution: Option<Duration>,
    /// Linear memory per sandbox (at most the node's `max_memory_bytes`).
    pub max_memory_bytes: Option<u64>,
    /// Largest request body.
    pub max_request_bytes: Option<u64>,
    /// Largest response.
    pub max_output_bytes: Option<u64>,
}

/// A blocking client of a node's admin API at `base_url`: the node's admin listener (e.g.
/// `http://127.0.0.1:8082`), with its bearer token if it has one. Do not call it from inside an
/// async context.
pub struct AdminClient {
    base_url: String,
    http: HttpClient,
    token: Option<String>,
}

impl std::fmt::Debug for AdminClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdminClient")
            .field("base_url", &self.base_url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl AdminClient {
    /// A client of the admin API at `base_url` (only `http://` URLs).
    pub fn new(base_url: &str) -> Result<Self, ClientError> {
        url(base_url, "/admin/functions")?;
        Ok(Self { base_url: base_url.to_owned(), http: HttpClient::new()?, token: None })
    }

    /// Sends `Authorization: Bearer <token>` with every request (surrounding white space, such
    /// as a token file's newline, is trimmed).
    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.trim().to_owned());
        self
    }

    /// Every registered function.
    pub fn list(&self) -> Result<Vec<FunctionInfo>, ClientError> {
        let response = self.send(Method::GET, "/admin/functions", &[])?;
        json(expect(response, 200)?)
    }

    /// The function `name`, or `None` if there is none.
    pub fn get(&self, name: &str) -> Result<Option<FunctionInfo>, ClientError> {
        self.get_json(&format!("/admin/functions/{}", segment(name)))
    }

    /// The JSON object at `path`, or `None` on 404.
    fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> Result<Option<T>, ClientError> {
        let response = self.send(Method::GET, path, &[])?;
        if response.status == 404 {
            return Ok(None);
        }
        json(expect(response, 200)?).map(Some)
    }

    /// The numeric id of function or chain `name` (what UDP-RPC requests name it by).
    pub fn id_of(&self, name: &str) -> Result<u32, ClientError> {
        if let Some(info) = self.get(name)? {
            return Ok(info.id);
        }
        match self.chain(name)? {
            Some(info) => Ok(info.id),
            None => Err(ClientError::Refused {
                status: 404,
                message: format!("no function or chain `{name}`"),
            }),
        }
    }

    /// Every registered chain.
    pub fn chains(&self) -> Result<Vec<ChainInfo>, ClientError> {
        let response = self.send(Method::GET, "/admin/chains", &[])?;
        json(expect(response, 200)?)
    }

    /// The chain `name`, or `None` if there is none.
    pub fn chain(&self, name: &str) -> Result<Option<ChainInfo>, ClientError> {
        self.get_json(&format!("/admin/chains/{}", segment(name)))
    }

    /// Registers chain `name` of registered functions. A name in use is refused (409).
    pub fn add_chain(&self, name: &str, spec: &ChainSpec) -> Result<ChainInfo, ClientError> {
        let body = serde_json::to_vec(spec).map_err(|e| ClientError::Http(Box::new(e)))?;
        let response =
            self.send(Method::PUT, &format!("/admin/chains/{}", segment(name)), &body)?;
        json(expect(response, 201)?)
    }

    /// Removes chain `name`.
    pub fn remove_chain(&self, name: &str) -> Result<(), ClientError> {
        let response =
            self.send(Method::DELETE, &format!("/admin/chains/{}", segment(name)), &[])?;
        expect(response, 204).map(drop)
    }

    /// Registers function `name` with `module` (Wasm bytes or text). A name in use is refused
    /// (409): remove the function first to replace it.
    pub fn add(
        &self,
        name: &str,
        module: &[u8],
        options: &AddOptions,
    ) -> Result<FunctionInfo, ClientError> {
        let mut query = Vec::new();
        if let Some(route) = &options.route {
            query.push(format!("route={}", percent_encode(route)));
        }
        if let Some(d) = options.deadline {
            query.push(format!("deadline_us={}", d.as_micros()));
        }
        if let Some(e) = options.expected {
            query.push(format!("expected_us={}", e.as_micros()));
        }
        if let Some(o) = &options.on_overrun {
            query.push(format!("on_overrun={}", percent_encode(o)));
        }
        if let Some(t) = options.tenant {
            query.push(format!("tenant={t}"));
        }
        if let Some(ull) = options.ull {
            query.push(format!("class={}", if ull { "ull" } else { "standard" }));
        }
        if let Some(e) = options.max_execution {
            query.push(format!("max_execution_us={}", e.as_micros()));
        }
        for (key, value) in [
            ("max_memory_bytes", options.max_memory_bytes),
            ("max_request_bytes", options.max_request_bytes),
            ("max_output_bytes", options.max_output_bytes),
        ] {
            if let Some(n) = value {
                query.push(format!("{key}={n}"));
            }
        }
        let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
        let path = format!("/admin/functions/{}{query}", segment(name));
        let response = self.send(Method::PUT, &path, module)?;
        json(expect(response, 201)?)
    }

    /// Removes function `name`.
    pub fn remove(&self, name: &str) -> Result<(), ClientError> {
        let response =
            self.send(Method::DELETE, &format!("/admin/functions/{}", segment(name)), &[])?;
        expect(response, 204).map(drop)
    }

    fn send(&self, method: Method, path: &str, body: &[u8]) -> Result<HttpResponse, ClientError> {
        let uri = url(&self.base_url, path)?;
        let (runtime, client) = self.http.parts();
        let auth = self.token.as_ref().map(|t| ("authorization", format!("Bearer {t}")));
        let headers = auth.as_slice();
        runtime.block_on(client.exchange(method, uri, headers, body, ADMIN_TIMEOUT))
    }
}

/// The response if it has status `want`, else the server's refusal.
fn expect(response: HttpResponse, want: u16) -> Result<HttpResponse, ClientError> {
    if response.status == want {
        return Ok(response);
    }
    let message = String::from_utf8_lossy(&response.body).trim_end().to_owned();
    Err(ClientError::Refused { status: response.status, message })
}

fn json<T: serde::de::DeserializeOwned>(response: HttpResponse) -> Result<T, ClientError> {
    serde_json::from_slice(&response.body).map_err(|e| ClientError::Http(Box::new(e)))
}

/// `s` with every byte outside RFC 3986's unreserved set and `/` percent-encoded.
fn percent_encode(s: &str) -> String {
    encode(s, b"/")
}

/// `name` as one path segment: a name the node would refuse (with `?`, `/`, `#`, …) reaches it
/// as written and is refused, instead of naming another function (`f?x` would be `f`).
fn segment(name: &str) -> String {
    encode(name, b"")
}

/// `s` with every byte but the unreserved ones (RFC 3986) and `keep` percent-encoded.
fn encode(s: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') || keep.contains(&b)
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_percent_encoded() {
        assert_eq!(percent_encode("/v1/a b&c=d"), "/v1/a%20b%26c%3Dd");
        assert_eq!(percent_encode("/plain-path_1.x~"), "/plain-path_1.x~");
    }

    #[test]
    fn names_are_one_path_segment() {
        assert_eq!(segment("f?x/y#z"), "f%3Fx%2Fy%23z");
        assert_eq!(segment("plain-name_1.x~"), "plain-name_1.x~");
    }

    #[test]
    fn only_http_urls() {
        assert!(AdminClient::new("https://h").is_err());
    }
}
