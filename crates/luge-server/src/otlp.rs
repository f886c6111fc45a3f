//! The span export `luge serve --otlp-endpoint` starts: OTLP (protobuf over HTTP) to a collector,
//! behind the OpenTelemetry SDK's batch span processor — its own thread and a bounded queue that
//! drops spans when full — so exporting never waits on a request's path.

use std::time::Duration;

use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::BatchSpanProcessor;

use crate::trace::Tracing;

/// The exporter could not be built.
#[derive(Debug, thiserror::Error)]
#[error("cannot export spans to {endpoint}: {reason}")]
pub struct OtlpError {
    endpoint: String,
    reason: String,
}

/// How long one export to the collector may take before it is abandoned.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The traces URL for `endpoint`: as given when it has a path, else with the OTLP/HTTP default
/// path `/v1/traces` (the specification's rule for `OTEL_EXPORTER_OTLP_ENDPOINT`).
fn traces_url(endpoint: &str) -> String {
    let rest = endpoint.strip_prefix("http://").unwrap_or(endpoint);
    match rest.find('/') {
        Some(i) if i + 1 < rest.len() => endpoint.to_owned(),
        _ => format!("{}/v1/traces", endpoint.trim_end_matches('/')),
    }
}

impl Tracing {
    /// Spans of `sample` of the context-less requests (and of every request whose caller
    /// sampled it) exported to the OTLP/HTTP collector at `endpoint` (`http://host:port`, or
    /// a full traces URL).
    pub fn otlp(endpoint: &str, sample: f64) -> Result<Self, OtlpError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(traces_url(endpoint))
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| OtlpError { endpoint: endpoint.to_owned(), reason: e.to_string() })?;
        Ok(Self::new(BatchSpanProcessor::builder(exporter).build(), sample))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_path_is_added_only_when_none_is_given() {
        assert_eq!(traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/"), "http://c:4318/v1/traces");
        assert_eq!(traces_url("http://c:4318/otlp/traces"), "http://c:4318/otlp/traces");
    }
}
