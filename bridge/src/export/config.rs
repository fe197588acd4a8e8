//! The `[export]` section of `aep-bridge.toml`.

use aep_schemas::Capture;
use serde::Deserialize;

pub use crate::transport::RetryConfig;
use crate::transport::config::{Headers, HttpUrl, TlsConfig, check_headers, off_if_empty};

/// `[export]`: which exporters run. Each is off until it has an endpoint (or a file).
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    /// The exporters read the events back from the JSONL logs (needs `[jsonl] enabled`):
    /// an outage of any length or a restart loses nothing (see [`super::wal`]). Off: they
    /// take events from memory, and drop a batch still failing after the retry budget.
    pub durable: bool,
}

impl Default for ExportConfig {
    fn default() -> Self {
        Self {
            otlp: OtlpConfig::default(),
            cloudevents: CloudEventsConfig::default(),
            ocsf: OcsfConfig::default(),
            retry: RetryConfig::default(),
            durable: true,
        }
    }
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
    #[serde(deserialize_with = "off_if_empty")]
    pub endpoint: Option<HttpUrl>,
    /// `grpc`, `http/protobuf` or `http/json`.
    pub protocol: Protocol,
    /// Export every Event as an OTLP LogRecord (AEP-0005 §3).
    pub logs: bool,
    /// Export synthesized spans (session, run, tool, attention).
    pub spans: bool,
    /// Export the bridge's metrics (the GenAI instruments and its own counters) every
    /// `metrics_interval_ms`.
    pub metrics: bool,
    /// How often the metrics are collected and exported, in milliseconds.
    pub metrics_interval_ms: u64,
    /// `cumulative` (the default) or `delta` aggregation temporality of exported metrics.
    pub metrics_temporality: MetricsTemporality,
    /// Capture ceiling of exported payloads (AEP-0005 §3.3); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers (gRPC metadata), e.g. an authorization header.
    pub headers: Headers,
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
    /// `[export.otlp.resource_attributes]`: added to the resource of every exported request
    /// (logs, spans, the vendors' spans passed through, metrics) where the resource does not
    /// already carry the key, e.g. `"deployment.environment.name" = "prod"`; filled from
    /// `OTEL_RESOURCE_ATTRIBUTES` for keys the file does not set.
    pub resource_attributes: std::collections::BTreeMap<String, String>,
    /// A span with no Event for this long is closed as incomplete, in seconds.
    pub span_idle_timeout_secs: u64,
    /// A session with no run open and no Event for this long, once a run of it has ended,
    /// has its root span exported without waiting for its end, in seconds (AEP-0002 §4.1: a
    /// session may never end, e.g. an agent's headless one-shot run); later Events stay in its
    /// trace, under the same root. 0 = the root waits for the end or the idle timeout.
    pub span_root_idle_secs: u64,
    /// Give every run its own trace, linked to the session span.
    pub trace_per_run: bool,
    /// How long a finished span waits before it is exported, in milliseconds: a run or tool
    /// span for the vendor's own records (token usage, cost, model, tool duration), the
    /// others so a session's spans leave together; `0` exports at once (records arriving
    /// later then miss the span).
    pub span_grace_ms: u64,
    /// Most spans waiting for their vendor records at once (the oldest leaves early).
    pub span_grace_max_spans: usize,
    /// Most bytes of spans waiting at once, ours and the vendors' each (the oldest leave
    /// early): at capture `full` a span carries tool arguments and results.
    pub span_grace_max_bytes: usize,
    /// `[export.otlp.tls]`: extra CA bundle and client certificate for `https://`.
    pub tls: TlsConfig,
    /// `[export.otlp.signals.logs]` / `.traces` / `.metrics`: per-signal overrides.
    pub signals: SignalsConfig,
}

/// Aggregation temporality of exported metrics (OTel metrics data model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricsTemporality {
    /// Totals since the bridge started (what Prometheus-style backends expect).
    #[default]
    Cumulative,
    /// Changes since the last export (what Datadog-style backends expect).
    Delta,
}

/// `[export.otlp.signals]`: per-signal overrides (the `OTEL_EXPORTER_OTLP_LOGS_*` /
/// `OTEL_EXPORTER_OTLP_TRACES_*` variables land here).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignalsConfig {
    /// Overrides of the logs exporter.
    pub logs: SignalConfig,
    /// Overrides of the spans (traces) exporter.
    pub traces: SignalConfig,
    /// Overrides of the metrics exporter.
    pub metrics: SignalConfig,
}

/// Overrides of `[export.otlp]` for one signal; unset keys inherit.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignalConfig {
    /// The full URL of this signal, used as-is (no `/v1/...` appended); `""` = inherit.
    #[serde(deserialize_with = "off_if_empty")]
    pub endpoint: Option<HttpUrl>,
    /// Protocol of this signal.
    pub protocol: Option<Protocol>,
    /// Headers of this signal (replace, not merge, the section's).
    pub headers: Option<Headers>,
    /// Compression of this signal.
    pub compression: Option<Compression>,
    /// Per-request timeout of this signal, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// TLS options of this signal.
    pub tls: Option<TlsConfig>,
}

/// Which OTLP signal an exporter carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// `/v1/logs`, `LogsService/Export`.
    Logs,
    /// `/v1/traces`, `TraceService/Export`.
    Traces,
    /// `/v1/metrics`, `MetricsService/Export`.
    Metrics,
}

impl Signal {
    /// The OTLP/HTTP path appended to a base endpoint.
    pub fn path(self) -> &'static str {
        match self {
            Signal::Logs => "/v1/logs",
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }

    /// The signal's OTLP name, for log lines, `/healthz` and metric labels.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Logs => "logs",
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
        }
    }

    /// The config key that switches this signal off, named when a peer refuses it.
    pub fn switch_key(self) -> &'static str {
        match self {
            Signal::Logs => "export.otlp.logs",
            Signal::Traces => "export.otlp.spans",
            Signal::Metrics => "export.otlp.metrics",
        }
    }
}

/// The settings one OTLP exporter runs with, per-signal overrides applied.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalSettings {
    /// gRPC: the endpoint; HTTP: the full URL requests are POSTed to.
    pub url: String,
    /// Transport.
    pub protocol: Protocol,
    /// Extra headers / metadata.
    pub headers: Headers,
    /// Body compression.
    pub compression: Compression,
    /// Per-request timeout, in milliseconds.
    pub timeout_ms: u64,
    /// TLS options.
    pub tls: TlsConfig,
    /// Resource attributes stamped on every request (`[export.otlp.resource_attributes]`).
    pub resource: std::sync::Arc<[(String, String)]>,
}

impl OtlpConfig {
    /// The settings of `signal`, or `None` when it has no endpoint (or is switched off).
    pub fn for_signal(&self, signal: Signal) -> Option<SignalSettings> {
        let (on, o) = match signal {
            Signal::Logs => (self.logs, &self.signals.logs),
            Signal::Traces => (self.spans, &self.signals.traces),
            Signal::Metrics => (self.metrics, &self.signals.metrics),
        };
        let protocol = o.protocol.unwrap_or(self.protocol);
        let url = match (&o.endpoint, &self.endpoint) {
            (Some(own), _) => own.as_str().to_owned(),
            (None, None) => return None,
            (None, Some(base)) if protocol == Protocol::Grpc => base.as_str().to_owned(),
            (None, Some(base)) => format!("{}{}", base.as_str().trim_end_matches('/'), signal.path()),
        };
        on.then(|| SignalSettings {
            url,
            protocol,
            headers: o.headers.clone().unwrap_or_else(|| self.headers.clone()),
            compression: o.compression.unwrap_or(self.compression),
            timeout_ms: o.timeout_ms.unwrap_or(self.timeout_ms),
            tls: o.tls.clone().unwrap_or_else(|| self.tls.clone()),
            resource: self.resource_attributes.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
    }
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            protocol: Protocol::Grpc,
            logs: true,
            spans: true,
            metrics: true,
            metrics_interval_ms: 60_000,
            metrics_temporality: MetricsTemporality::Cumulative,
            max_capture: Capture::Metadata,
            headers: Headers::new(),
            batch_size: 512,
            batch_timeout_ms: 1000,
            compression: Compression::Gzip,
            timeout_ms: 10_000,
            service_name: String::new(),
            resource_attributes: Default::default(),
            span_idle_timeout_secs: 1800,
            span_root_idle_secs: 60,
            trace_per_run: false,
            span_grace_ms: 10_000,
            span_grace_max_spans: 10_000,
            span_grace_max_bytes: 64 << 20,
            tls: TlsConfig::default(),
            signals: SignalsConfig::default(),
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
    #[serde(deserialize_with = "off_if_empty")]
    pub endpoint: Option<HttpUrl>,
    /// `[export.cloudevents.tls]`: extra CA bundle and client certificate for `https://`.
    pub tls: TlsConfig,
    /// `structured` or `batch`.
    pub mode: CeMode,
    /// Capture ceiling: Events above it are down-levelled first (AEP-0001 §8.2); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers.
    pub headers: Headers,
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
            endpoint: None,
            tls: TlsConfig::default(),
            mode: CeMode::Structured,
            max_capture: Capture::Metadata,
            headers: Headers::new(),
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
    #[serde(deserialize_with = "off_if_empty")]
    pub endpoint: Option<HttpUrl>,
    /// `[export.ocsf.tls]`: extra CA bundle and client certificate for `https://`.
    pub tls: TlsConfig,
    /// Capture ceiling of projected payloads (AEP-0005 §4.6); default `metadata`.
    pub max_capture: Capture,
    /// Extra request headers.
    pub headers: Headers,
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
            endpoint: None,
            tls: TlsConfig::default(),
            max_capture: Capture::Metadata,
            headers: Headers::new(),
            batch_size: 256,
            batch_timeout_ms: 1000,
            timeout_ms: 10_000,
        }
    }
}

impl ExportConfig {
    /// Problems in this section, as `(key, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        check_headers("otlp.headers", &self.otlp.headers, &mut out);
        let signal_headers = [&self.otlp.signals.logs.headers, &self.otlp.signals.traces.headers];
        for h in std::iter::once(&self.otlp.headers).chain(signal_headers.into_iter().flatten()) {
            if let Some(k) = h.keys().find(|k| k.to_ascii_lowercase().ends_with("-bin")) {
                // gRPC metadata named `*-bin` carries binary values; these headers are text.
                out.push(("otlp.headers".into(), format!("{k:?}: binary (-bin) metadata is not supported")));
            }
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
        out.extend(self.retry.check("retry"));
        for (key, tls) in [
            ("otlp.tls", Some(&self.otlp.tls)),
            ("otlp.signals.logs.tls", self.otlp.signals.logs.tls.as_ref()),
            ("otlp.signals.traces.tls", self.otlp.signals.traces.tls.as_ref()),
            ("otlp.signals.metrics.tls", self.otlp.signals.metrics.tls.as_ref()),
            ("cloudevents.tls", Some(&self.cloudevents.tls)),
            ("ocsf.tls", Some(&self.ocsf.tls)),
        ] {
            if let Some(t) = tls {
                out.extend(t.check(key));
            }
        }
        if self.otlp.metrics_interval_ms < 100 {
            out.push(("otlp.metrics_interval_ms".into(), "must be at least 100".into()));
        }
        for (key, sig) in [
            ("otlp.signals.logs", &self.otlp.signals.logs),
            ("otlp.signals.traces", &self.otlp.signals.traces),
            ("otlp.signals.metrics", &self.otlp.signals.metrics),
        ] {
            if let Some(h) = &sig.headers {
                check_headers(&format!("{key}.headers"), h, &mut out);
            }
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
            endpoint = "https://ce.example/ingest"
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
        assert_eq!(keys, ["otlp.headers", "retry.multiplier"]);
        let bad = toml::from_str::<ExportConfig>("[cloudevents]\nendpoint = \"ftp://x\"").unwrap_err();
        assert!(bad.message().contains("must start with http://, https://"), "{bad}");
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
        // The shipped snippet uses the default, one trace per session.
        assert!(export.check().is_empty() && !export.otlp.trace_per_run);
    }
}
