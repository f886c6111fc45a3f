//! HTTP/1.1 clients of the HTTP front end (`docs/http.md`): `POST <base>/<route>` with the payload as
//! body, the deadline and expected execution in headers, and the request id, timing and outcome
//! read back from headers.
//!
//! [`AsyncHttpClient`] is hyper-util's legacy client (keep-alive connection pool);
//! [`HttpClient`] drives the same client on a private current-thread tokio runtime, so it must
//! not be called from inside an async context.

use std::str::FromStr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Uri;
use hyper::header::{HeaderMap, RETRY_AFTER};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use luge_proto::{
    DEADLINE_HEADER, EXECUTION_HEADER, EXPECTED_HEADER, LOAD_HEADER, OUTCOME_HEADER,
    QUEUEING_HEADER, READINESS_HEADER, REQUEST_ID_HEADER, STAGE_HEADER, STAGES_HEADER,
};

use crate::error::ClientError;
use crate::rpc::CallOptions;

/// The answer of the HTTP front end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// HTTP status code (200, 400, 404, 413, 429, 500, 503, 504, …).
    pub status: u16,
    /// Stdout on 200; otherwise the server's message.
    pub body: Vec<u8>,
    /// `Luge-Request-Id`, if present and numeric.
    pub request_id: Option<u64>,
    /// `Luge-Execution-Ns`, if present.
    pub execution: Option<Duration>,
    /// `Luge-Queueing-Ns`, if present.
    pub queueing: Option<Duration>,
    /// `Luge-Readiness-Ns` (receipt to the first guest instruction), if present.
    pub readiness: Option<Duration>,
    /// `Luge-Outcome`, if present.
    pub outcome: Option<String>,
    /// `Retry-After` in seconds (503, 429), if present.
    pub retry_after: Option<Duration>,
    /// `Luge-Load`, the node's load signal (`docs/protocol.md` §3.1), on answers to calls.
    pub load: Option<u8>,
    /// `Luge-Stages`, on a chain's answer: each stage that ran, `name;q=<ns>;e=<ns>`.
    pub stages: Option<String>,
    /// `Luge-Stage`, on a chain's failure: the stage that answered.
    pub stage: Option<String>,
}

impl HttpResponse {
    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    fn from_parts(status: u16, headers: &HeaderMap, body: Vec<u8>) -> Self {
        fn parse<T: FromStr>(headers: &HeaderMap, name: &str) -> Option<T> {
            headers.get(name)?.to_str().ok()?.trim().parse().ok()
        }
        fn text(headers: &HeaderMap, name: &str) -> Option<String> {
            headers.get(name).and_then(|v| v.to_str().ok()).map(|s| s.trim().to_owned())
        }
        Self {
            status,
            body,
            request_id: parse(headers, REQUEST_ID_HEADER),
            execution: parse(headers, EXECUTION_HEADER).map(Duration::from_nanos),
            queueing: parse(headers, QUEUEING_HEADER).map(Duration::from_nanos),
            readiness: parse(headers, READINESS_HEADER).map(Duration::from_nanos),
            outcome: text(headers, OUTCOME_HEADER),
            retry_after: parse(headers, RETRY_AFTER.as_str()).map(Duration::from_secs),
            load: parse(headers, LOAD_HEADER),
            stages: text(headers, STAGES_HEADER),
            stage: text(headers, STAGE_HEADER),
        }
    }
}

/// `base_url` + `/` + `route`, as an `http://` URI.
pub(crate) fn url(base_url: &str, route: &str) -> Result<Uri, ClientError> {
    let url = format!("{}/{}", base_url.trim_end_matches('/'), route.trim_start_matches('/'));
    let invalid = |reason: String| ClientError::InvalidUrl { url: url.clone(), reason };
    let uri: Uri = url.parse().map_err(|e: hyper::http::uri::InvalidUri| invalid(e.to_string()))?;
    if uri.scheme_str() != Some("http") {
        return Err(invalid("only http:// URLs are supported".into()));
    }
    if uri.host().is_none() {
        return Err(invalid("no host".into()));
    }
    Ok(uri)
}

fn micros(d: Duration) -> String {
    d.as_micros().max(1).to_string()
}

/// An async HTTP/1.1 client with a keep-alive connection pool. Cheap to clone (clones share
/// the pool). Must be used inside a tokio runtime.
#[derive(Debug, Clone)]
pub struct AsyncHttpClient {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for AsyncHttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl AsyncHttpClient {
    /// A client with hyper-util's default pool settings (idle connections kept 90 s).
    pub fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Self { client: Client::builder(TokioExecutor::new()).build(connector) }
    }

    /// `POST {base_url}/{route}` with `payload` as body; returns the response whatever its
    /// status, or an error if none arrived within `opts.timeout` (`opts.backoff` is unused:
    /// TCP retransmits for us).
    pub async fn call(
        &self,
        base_url: &str,
        route: &str,
        payload: &[u8],
        opts: CallOptions,
    ) -> Result<HttpResponse, ClientError> {
        let mut headers = Vec::new();
        if let Some(d) = opts.deadline {
            headers.push((DEADLINE_HEADER, micros(d)));
        }
        if let Some(e) = opts.expected {
            headers.push((EXPECTED_HEADER, micros(e)));
        }
        let uri = url(base_url, route)?;
        self.exchange(hyper::Method::POST, uri, &headers, payload, opts.timeout).await
    }

    /// One request with any method, `headers` and `body`; the response whatever its status.
    pub(crate) async fn exchange(
        &self,
        method: hyper::Method,
        uri: Uri,
        headers: &[(&str, String)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<HttpResponse, ClientError> {
        let mut request = hyper::Request::builder().method(method).uri(uri);
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        let request = request
            .body(Full::new(Bytes::copy_from_slice(body)))
            .map_err(|e| ClientError::Http(Box::new(e)))?;
        let start = Instant::now();
        let exchange = async {
            let response =
                self.client.request(request).await.map_err(|e| ClientError::Http(Box::new(e)))?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await.map_err(|e| ClientError::Http(Box::new(e)))?;
            Ok(HttpResponse::from_parts(
                parts.status.as_u16(),
                &parts.headers,
                body.to_bytes().to_vec(),
            ))
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ClientError::Timeout { attempts: 1, elapsed: start.elapsed() }),
        }
    }
}

/// A blocking HTTP/1.1 client: [`AsyncHttpClient`] on a private current-thread runtime.
/// Do not call it from inside an async context (the runtime would refuse to nest).
#[derive(Debug)]
pub struct HttpClient {
    runtime: tokio::runtime::Runtime,
    client: AsyncHttpClient,
}

impl HttpClient {
    /// The private runtime and the async client it drives (for the admin client).
    pub(crate) fn parts(&self) -> (&tokio::runtime::Runtime, &AsyncHttpClient) {
        (&self.runtime, &self.client)
    }

    /// A client with its own single-thread runtime.
    pub fn new() -> Result<Self, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let client = {
            // The pool spawns its connection tasks on the runtime of the caller.
            let _enter = runtime.enter();
            AsyncHttpClient::new()
        };
        Ok(Self { runtime, client })
    }

    /// As [`AsyncHttpClient::call`], blocking.
    pub fn call(
        &self,
        base_url: &str,
        route: &str,
        payload: &[u8],
        opts: CallOptions,
    ) -> Result<HttpResponse, ClientError> {
        self.runtime.block_on(self.client.call(base_url, route, payload, opts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_joined_and_checked() {
        let ok = |b, r| url(b, r).map(|u| u.to_string()).ok();
        assert_eq!(ok("http://127.0.0.1:8080", "echo"), Some("http://127.0.0.1:8080/echo".into()));
        assert_eq!(ok("http://h:1/", "/a/b"), Some("http://h:1/a/b".into()));
        assert!(matches!(url("https://h", "x"), Err(ClientError::InvalidUrl { .. })));
        assert!(matches!(url("h:1", "x"), Err(ClientError::InvalidUrl { .. })));
        assert!(matches!(url("http://h", "a b"), Err(ClientError::InvalidUrl { .. })));
    }
}
