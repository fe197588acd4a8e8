//! The `[export]` section of `aep-bridge.toml`.

use std::collections::BTreeMap;
use std::time::Duration;

use aep_schemas::Capture;
use serde::Deserialize;

/// `[export]`: which exporters run. Each is off until it has an endpoint (or a file).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExportConfig {
    /// `[export.otlp]`: OTLP logs and synthesized spans.
    pub otlp: OtlpConfig,
    /// `[export.cloudevents]`: CloudEvents over HTTP.
    pub cloudevents: CloudEventsConfig,
    /// `[export.ocsf]`: OCSF records to a JSONL file and/or HTTP.
    pub ocsf: OcsfConfig,
    /// `[export.retry]`: the retry policy every HTTP/gRPC exporter uses.
    pub retry: RetryConfig,
}

/// OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Protocol {
    /// OTLP/gRPC (default port 4317).
    #[default]
    #[serde(rename = "grpc")]
    Grpc,
    /// OTLP/HTTP with protobuf bodies (default port 4318).
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/HTTP with OTLP/JSON bodies.
    #[serde(rename = "http/json")]
    HttpJson,
}

/// Request body compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// gzip (the OTLP exporters' default).
    #[default]
    Gzip,
    /// Uncompressed.
    None,
}

/// `[export.otlp]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpConfig {
    /// Base URL of the OTLP peer (`http://127.0.0.1:4317` for gRPC, `http://127.0.0.1:4318`
    /// for HTTP, where `/v1/logs` and `/v1/traces` are appended); `""` = off.
    pub endpoint: String,
    /// `grpc`, `http/protobuf` or `http/json`.
    pub protocol: Protocol,
    /// Export every Event as an OTLP LogRecord (AEP-0005 §3).
    pub logs: bool,
    /// Export synthesized spans (session, run, tool, attention).
    pub spans: bool,
    /// Capture ceiling of exported payloads (AEP-0005 §3.3); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers (gRPC metadata), e.g. an authorization header.
    pub headers: BTreeMap<String, String>,
    /// Most records (or spans) per request.
    pub batch_size: usize,
    /// Longest a record waits for its batch to fill, in milliseconds.
    pub batch_timeout_ms: u64,
    /// `gzip` or `none`.
    pub compression: Compression,
    /// Per-request timeout, in milliseconds.
    pub timeout_ms: u64,
    /// Resource `service.name` of every record; `""` = each Event's agent.
    pub service_name: String,
    /// A span with no Event for this long is closed as incomplete, in seconds.
    pub span_idle_timeout_secs: u64,
    /// Give every run its own trace, linked to the session span.
    pub trace_per_run: bool,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            protocol: Protocol::Grpc,
            logs: true,
            spans: true,
            max_capture: Capture::Metadata,
            headers: BTreeMap::new(),
            batch_size: 512,
            batch_timeout_ms: 1000,
            compression: Compression::Gzip,
            timeout_ms: 10_000,
            service_name: String::new(),
            span_idle_timeout_secs: 1800,
            trace_per_run: false,
        }
    }
}

/// CloudEvents HTTP content mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CeMode {
    /// One event per POST, `application/cloudevents+json`.
    #[default]
    Structured,
    /// One JSON array per POST, `application/cloudevents-batch+json`.
    Batch,
}

/// `[export.cloudevents]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CloudEventsConfig {
    /// URL every CloudEvent is POSTed to; `""` = off.
    pub endpoint: String,
    /// `structured` or `batch`.
    pub mode: CeMode,
    /// Capture ceiling: Events above it are down-levelled first (AEP-0001 §8.2); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Most events per batch (batch mode) or per burst of POSTs.
    pub batch_size: usize,
    /// Longest an event waits for its batch, in milliseconds.
    pub batch_timeout_ms: u64,
    /// Per-request timeout, in milliseconds.
    pub timeout_ms: u64,
}

impl Default for CloudEventsConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            mode: CeMode::Structured,
            max_capture: Capture::Metadata,
            headers: BTreeMap::new(),
            batch_size: 100,
            batch_timeout_ms: 1000,
            timeout_ms: 10_000,
        }
    }
}

/// `[export.ocsf]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OcsfConfig {
    /// JSONL file the OCSF records are appended to; `""` = none.
    pub file: String,
    /// URL a JSON array of OCSF records is POSTed to per batch; `""` = none.
    pub endpoint: String,
    /// Capture ceiling of projected payloads (AEP-0005 §4.6); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// Most records per batch.
    pub batch_size: usize,
    /// Longest a record waits for its batch, in milliseconds.
    pub batch_timeout_ms: u64,
    /// Per-request timeout, in milliseconds.
    pub timeout_ms: u64,
}

impl Default for OcsfConfig {
    fn default() -> Self {
        Self {
            file: String::new(),
            endpoint: String::new(),
            max_capture: Capture::Metadata,
            headers: BTreeMap::new(),
            batch_size: 256,
            batch_timeout_ms: 1000,
            timeout_ms: 10_000,
        }
    }
}

/// `[export.retry]`: exponential backoff on retryable failures (the collector's defaults,
/// with a shorter first wait).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// First wait, in milliseconds.
    pub initial_ms: u64,
    /// Longest single wait, in milliseconds.
    pub max_ms: u64,
    /// Give a batch up after this long, in milliseconds (0 = never retry).
    pub max_elapsed_ms: u64,
    /// Growth factor of the wait.
    pub multiplier: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self { initial_ms: 1000, max_ms: 30_000, max_elapsed_ms: 300_000, multiplier: 1.5 }
    }
}

impl RetryConfig {
    /// The wait before retry number `n` (0-based), without a server hint.
    pub fn backoff(&self, n: u32) -> Duration {
        let f = self.multiplier.max(1.0).powi(i32::try_from(n).unwrap_or(i32::MAX));
        let ms = (self.initial_ms as f64 * f).min(self.max_ms as f64);
        Duration::from_millis(ms as u64)
    }
}

fn check_url(key: &str, url: &str, out: &mut Vec<(String, String)>) {
    if url.is_empty() {
        return;
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        out.push((key.into(), format!("{url:?} is not an http:// or https:// URL")));
    } else if url.starts_with("https://") {
        // The exporters speak plain HTTP/2 and HTTP/1.1; put a local collector in front for TLS.
        out.push((key.into(), "https is not supported: export to a local OTel Collector for TLS".into()));
    }
}

fn check_headers(key: &str, h: &BTreeMap<String, String>, out: &mut Vec<(String, String)>) {
    for (k, v) in h {
        let name_ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            out.push((key.into(), format!("bad header {k:?}")));
        }
    }
}

impl ExportConfig {
    /// Problems in this section, as `(key, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        check_url("otlp.endpoint", &self.otlp.endpoint, &mut out);
        check_url("cloudevents.endpoint", &self.cloudevents.endpoint, &mut out);
        check_url("ocsf.endpoint", &self.ocsf.endpoint, &mut out);
        check_headers("otlp.headers", &self.otlp.headers, &mut out);
        if let Some(k) = self.otlp.headers.keys().find(|k| k.to_ascii_lowercase().ends_with("-bin")) {
            // gRPC metadata named `*-bin` carries binary values; these headers are text.
            out.push(("otlp.headers".into(), format!("{k:?}: binary (-bin) metadata is not supported")));
        }
        check_headers("cloudevents.headers", &self.cloudevents.headers, &mut out);
        check_headers("ocsf.headers", &self.ocsf.headers, &mut out);
        for (key, n) in [
            ("otlp.batch_size", self.otlp.batch_size),
            ("cloudevents.batch_size", self.cloudevents.batch_size),
            ("ocsf.batch_size", self.ocsf.batch_size),
        ] {
            if n == 0 {
                out.push((key.into(), "must be at least 1".into()));
            }
        }
        if self.otlp.span_idle_timeout_secs == 0 {
            out.push(("otlp.span_idle_timeout_secs".into(), "must be at least 1".into()));
        }
        if !(self.retry.multiplier.is_finite() && self.retry.multiplier >= 1.0) {
            out.push(("retry.multiplier".into(), "must be a number >= 1".into()));
        }
        if self.retry.max_ms < self.retry.initial_ms {
            out.push(("retry.max_ms".into(), "must be >= retry.initial_ms".into()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks() {
        let cfg: ExportConfig = toml::from_str(
            r#"
            [otlp]
            endpoint = "http://127.0.0.1:4318"
            protocol = "http/protobuf"
            compression = "none"
            headers = { authorization = "Bearer x", "x-trace-bin" = "AAA" }
            [cloudevents]
            endpoint = "ftp://x"
            mode = "batch"
            [retry]
            multiplier = 0.5
            "#,
        )
        .unwrap();
        assert_eq!(cfg.otlp.protocol, Protocol::HttpProtobuf);
        assert_eq!(cfg.otlp.compression, Compression::None);
        assert_eq!(cfg.cloudevents.mode, CeMode::Batch);
        let keys: Vec<String> = cfg.check().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["cloudevents.endpoint", "otlp.headers", "retry.multiplier"]);
        assert!(toml::from_str::<ExportConfig>("[otlp]\nprotocol = \"udp\"").is_err());
        assert!(toml::from_str::<ExportConfig>("[otlp]\nendpont = \"x\"").is_err());
    }

    #[test]
    fn the_example_documents_the_defaults() {
        let table: toml::Table = toml::from_str(include_str!("../../aep-bridge.example.toml")).unwrap();
        let export: ExportConfig = table["export"].clone().try_into().unwrap();
        assert_eq!(export, ExportConfig::default());
        let snippet: toml::Table =
            toml::from_str(include_str!("../../../collector-config/aep-bridge.export.toml")).unwrap();
        let export: ExportConfig = snippet["export"].clone().try_into().unwrap();
        assert!(export.check().is_empty() && export.otlp.trace_per_run);
    }

    #[test]
    fn backoff_grows_to_the_cap() {
        let r = RetryConfig { initial_ms: 100, max_ms: 300, max_elapsed_ms: 1000, multiplier: 2.0 };
        assert_eq!((0..4).map(|n| r.backoff(n).as_millis()).collect::<Vec<_>>(), [100, 200, 300, 300]);
    }
}
