//! The standard `OTEL_EXPORTER_OTLP_*` environment variables, read in one place for
//! `[export.otlp]` (the OTel spec's "OTLP Exporter Configuration").
//!
//! [`OtelEnv::read`] takes a lookup closure (tests never touch the process environment);
//! [`OtelEnv::apply`] merges the values into an [`OtlpConfig`] by these rules:
//! - a per-signal variable (`OTEL_EXPORTER_OTLP_LOGS_*`, `..._TRACES_*`) wins over the
//!   generic one; a per-signal endpoint is used as-is, the generic endpoint gets
//!   `/v1/logs` / `/v1/traces` appended for OTLP/HTTP (it is `[export.otlp] endpoint`);
//! - **the config file wins over the environment**: a key written in `[export.otlp]` (or
//!   its `signals.<signal>` / `tls` tables) is never overridden, and a generic key written
//!   in the file also shadows the per-signal variables of that key.

use super::config::{Compression, MetricsTemporality, OtlpConfig, Protocol, SignalConfig};
use crate::transport::config::HttpUrl;
use crate::transport::{Headers, TlsConfig};

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: base URL of every signal.
pub const OTEL_EXPORTER_OTLP_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_HEADERS`: `k=v,k2=v2`, values percent-decoded.
pub const OTEL_EXPORTER_OTLP_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_PROTOCOL`: `grpc`, `http/protobuf` or `http/json`.
pub const OTEL_EXPORTER_OTLP_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
/// `OTEL_EXPORTER_OTLP_COMPRESSION`: `gzip` or `none`.
pub const OTEL_EXPORTER_OTLP_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: per-request timeout in milliseconds.
pub const OTEL_EXPORTER_OTLP_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_CERTIFICATE`: PEM file of CA certificates to trust.
pub const OTEL_EXPORTER_OTLP_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
/// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`: PEM client certificate chain (mTLS).
pub const OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE";
/// `OTEL_EXPORTER_OTLP_CLIENT_KEY`: PEM private key of the client certificate.
pub const OTEL_EXPORTER_OTLP_CLIENT_KEY: &str = "OTEL_EXPORTER_OTLP_CLIENT_KEY";
/// `OTEL_SERVICE_NAME`: the resource `service.name` (the OTel SDK environment spec; it wins
/// over a `service.name` in `OTEL_RESOURCE_ATTRIBUTES`).
pub const OTEL_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_RESOURCE_ATTRIBUTES`: `k=v,k2=v2` resource attributes, values percent-decoded.
pub const OTEL_RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";

/// The variables of one scope (generic, logs or traces), parsed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignalEnv {
    /// `*_ENDPOINT`.
    pub endpoint: Option<HttpUrl>,
    /// `*_HEADERS`, decoded.
    pub headers: Option<Headers>,
    /// `*_PROTOCOL`.
    pub protocol: Option<Protocol>,
    /// `*_COMPRESSION`.
    pub compression: Option<Compression>,
    /// `*_TIMEOUT`, milliseconds.
    pub timeout_ms: Option<u64>,
    /// `*_CERTIFICATE`.
    pub certificate: Option<String>,
    /// `*_CLIENT_CERTIFICATE`.
    pub client_certificate: Option<String>,
    /// `*_CLIENT_KEY`.
    pub client_key: Option<String>,
}

impl SignalEnv {
    fn read(prefix: &str, lookup: &dyn Fn(&str) -> Option<String>, problems: &mut Vec<(String, String)>) -> Self {
        let get = |suffix: &str| -> Option<(String, String)> {
            let name = format!("{prefix}{suffix}");
            let v = lookup(&name)?;
            let v = v.trim().to_owned();
            (!v.is_empty()).then_some((name, v))
        };
        let mut out = SignalEnv::default();
        if let Some((name, v)) = get("ENDPOINT") {
            match HttpUrl::parse(&v) {
                Ok(u) => out.endpoint = Some(u),
                Err(e) => problems.push((name, e)),
            }
        }
        if let Some((name, v)) = get("HEADERS") {
            match parse_headers(&v) {
                Ok(h) => out.headers = Some(h),
                Err(e) => problems.push((name, e)),
            }
        }
        if let Some((name, v)) = get("PROTOCOL") {
            match v.as_str() {
                "grpc" => out.protocol = Some(Protocol::Grpc),
                "http/protobuf" => out.protocol = Some(Protocol::HttpProtobuf),
                "http/json" => out.protocol = Some(Protocol::HttpJson),
                _ => problems.push((name, format!("{v:?} is not grpc, http/protobuf or http/json"))),
            }
        }
        if let Some((name, v)) = get("COMPRESSION") {
            match v.as_str() {
                "gzip" => out.compression = Some(Compression::Gzip),
                "none" => out.compression = Some(Compression::None),
                _ => problems.push((name, format!("{v:?} is not gzip or none"))),
            }
        }
        if let Some((name, v)) = get("TIMEOUT") {
            match v.parse::<u64>() {
                Ok(ms) if ms > 0 => out.timeout_ms = Some(ms),
                _ => problems.push((name, format!("{v:?} is not a timeout in milliseconds"))),
            }
        }
        out.certificate = get("CERTIFICATE").map(|(_, v)| v);
        out.client_certificate = get("CLIENT_CERTIFICATE").map(|(_, v)| v);
        out.client_key = get("CLIENT_KEY").map(|(_, v)| v);
        out
    }

    fn is_empty(&self) -> bool {
        *self == SignalEnv::default()
    }
}

/// Every `OTEL_EXPORTER_OTLP_*` variable the bridge honours.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OtelEnv {
    /// `OTEL_EXPORTER_OTLP_*`.
    pub generic: SignalEnv,
    /// `OTEL_EXPORTER_OTLP_LOGS_*`.
    pub logs: SignalEnv,
    /// `OTEL_EXPORTER_OTLP_TRACES_*`.
    pub traces: SignalEnv,
    /// `OTEL_EXPORTER_OTLP_METRICS_*`.
    pub metrics: SignalEnv,
    /// `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`: `cumulative` or `delta`
    /// (`lowmemory` reads as `delta`: this bridge has only counters and histograms).
    pub temporality: Option<MetricsTemporality>,
    /// `OTEL_SERVICE_NAME`, else the `service.name` of `OTEL_RESOURCE_ATTRIBUTES`.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES` without `service.name`.
    pub resource_attributes: std::collections::BTreeMap<String, String>,
}

/// `[export.otlp]` as written in the file (to know which keys it sets).
type Written<'a> = Option<&'a toml::Table>;

fn has(t: Written<'_>, path: &[&str]) -> bool {
    let Some((last, parents)) = path.split_last() else { return false };
    let mut cur = t;
    for p in parents {
        cur = cur.and_then(|t| t.get(*p)).and_then(toml::Value::as_table);
    }
    cur.is_some_and(|t| t.contains_key(*last))
}

impl OtelEnv {
    /// Reads and parses the variables through `lookup`; unparsable values come back as
    /// `(variable, message)` problems (and are ignored).
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> (Self, Vec<(String, String)>) {
        let mut problems = Vec::new();
        let env = OtelEnv {
            generic: SignalEnv::read("OTEL_EXPORTER_OTLP_", &lookup, &mut problems),
            logs: SignalEnv::read("OTEL_EXPORTER_OTLP_LOGS_", &lookup, &mut problems),
            traces: SignalEnv::read("OTEL_EXPORTER_OTLP_TRACES_", &lookup, &mut problems),
            metrics: SignalEnv::read("OTEL_EXPORTER_OTLP_METRICS_", &lookup, &mut problems),
            temporality: None,
            service_name: None,
            resource_attributes: Default::default(),
        };
        let mut env = env;
        let name = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE";
        if let Some(v) = lookup(name).map(|v| v.trim().to_ascii_lowercase()).filter(|v| !v.is_empty()) {
            match v.as_str() {
                "cumulative" => env.temporality = Some(MetricsTemporality::Cumulative),
                "delta" | "lowmemory" => env.temporality = Some(MetricsTemporality::Delta),
                _ => problems.push((name.into(), format!("{v:?} is not cumulative, delta or lowmemory"))),
            }
        }
        let nonempty = |name: &str| lookup(name).map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        if let Some(v) = nonempty(OTEL_RESOURCE_ATTRIBUTES) {
            match parse_resource_attributes(&v) {
                Ok(mut attrs) => {
                    env.service_name = attrs.remove("service.name");
                    env.resource_attributes = attrs;
                }
                Err(e) => problems.push((OTEL_RESOURCE_ATTRIBUTES.into(), e)),
            }
        }
        if let Some(v) = nonempty(OTEL_SERVICE_NAME) {
            env.service_name = Some(v);
        }
        (env, problems)
    }

    /// Whether no variable is set.
    pub fn is_empty(&self) -> bool {
        self.generic.is_empty()
            && self.logs.is_empty()
            && self.traces.is_empty()
            && self.metrics.is_empty()
            && self.temporality.is_none()
            && self.service_name.is_none()
            && self.resource_attributes.is_empty()
    }

    /// Merges the variables into `cfg`; `written` is `[export.otlp]` as the file has it
    /// (`None` without a file or section): what it sets wins.
    pub fn apply(&self, cfg: &mut OtlpConfig, written: Written<'_>) {
        let g = &self.generic;
        let set = |key: &str| !has(written, &[key]);
        if let Some(v) = g.endpoint.as_ref().filter(|_| set("endpoint")) {
            cfg.endpoint = Some(v.clone());
        }
        if let Some(v) = g.headers.as_ref().filter(|_| set("headers")) {
            cfg.headers = v.clone();
        }
        if let Some(v) = g.protocol.filter(|_| set("protocol")) {
            cfg.protocol = v;
        }
        if let Some(v) = g.compression.filter(|_| set("compression")) {
            cfg.compression = v;
        }
        if let Some(v) = g.timeout_ms.filter(|_| set("timeout_ms")) {
            cfg.timeout_ms = v;
        }
        if let Some(v) = self.temporality.filter(|_| set("metrics_temporality")) {
            cfg.metrics_temporality = v;
        }
        if let Some(v) = self.service_name.as_ref().filter(|_| set("service_name")) {
            cfg.service_name = v.clone();
        }
        for (k, v) in &self.resource_attributes {
            if !has(written, &["resource_attributes", k]) {
                cfg.resource_attributes.insert(k.clone(), v.clone());
            }
        }
        apply_tls(g, &mut cfg.tls, |k| has(written, &["tls", k]));
        let base_tls = cfg.tls.clone();
        for (name, env, sig) in [
            ("logs", &self.logs, &mut cfg.signals.logs),
            ("traces", &self.traces, &mut cfg.signals.traces),
            ("metrics", &self.metrics, &mut cfg.signals.metrics),
        ] {
            // A per-signal variable fills its key unless the file sets it, per signal or generic.
            let free = |key: &str| !has(written, &["signals", name, key]) && !has(written, &[key]);
            apply_signal(env, sig, &free, &base_tls, |k| {
                has(written, &["signals", name, "tls", k]) || has(written, &["tls", k])
            });
        }
    }
}

fn apply_signal(
    env: &SignalEnv,
    sig: &mut SignalConfig,
    free: &dyn Fn(&str) -> bool,
    base_tls: &TlsConfig,
    tls_written: impl Fn(&str) -> bool,
) {
    if let Some(v) = env.endpoint.as_ref().filter(|_| free("endpoint")) {
        sig.endpoint = Some(v.clone());
    }
    if let Some(v) = env.headers.as_ref().filter(|_| free("headers")) {
        sig.headers = Some(v.clone());
    }
    if let Some(v) = env.protocol.filter(|_| free("protocol")) {
        sig.protocol = Some(v);
    }
    if let Some(v) = env.compression.filter(|_| free("compression")) {
        sig.compression = Some(v);
    }
    if let Some(v) = env.timeout_ms.filter(|_| free("timeout_ms")) {
        sig.timeout_ms = Some(v);
    }
    if env.certificate.is_some() || env.client_certificate.is_some() || env.client_key.is_some() {
        let mut tls = sig.tls.clone().unwrap_or_else(|| base_tls.clone());
        apply_tls(env, &mut tls, tls_written);
        sig.tls = Some(tls);
    }
}

fn apply_tls(env: &SignalEnv, tls: &mut TlsConfig, written: impl Fn(&str) -> bool) {
    for (v, key, field) in [
        (&env.certificate, "ca_file", &mut tls.ca_file),
        (&env.client_certificate, "cert_file", &mut tls.cert_file),
        (&env.client_key, "key_file", &mut tls.key_file),
    ] {
        if let Some(v) = v.as_ref().filter(|_| !written(key)) {
            *field = v.clone();
        }
    }
}

/// Parses `OTEL_EXPORTER_OTLP_HEADERS`: comma-separated `key=value` pairs (W3C baggage
/// style), keys and values trimmed, values percent-decoded; keys are lowercased.
pub fn parse_headers(s: &str) -> Result<Headers, String> {
    let mut out = Headers::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else { return Err(format!("{pair:?} is not key=value")) };
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("{pair:?} has an empty key"));
        }
        out.insert(k.to_ascii_lowercase(), percent_decode(v.trim())?);
    }
    Ok(out)
}

/// Parses `OTEL_RESOURCE_ATTRIBUTES` (`k=v,k2=v2`; keys kept as written, values
/// percent-decoded, the OTel resource SDK's environment format).
pub fn parse_resource_attributes(s: &str) -> Result<std::collections::BTreeMap<String, String>, String> {
    let mut out = std::collections::BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else { return Err(format!("{pair:?} is not key=value")) };
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("{pair:?} has an empty key"));
        }
        out.insert(k.to_owned(), percent_decode(v.trim())?);
    }
    Ok(out)
}

/// Decodes `%XX` escapes (UTF-8); a stray `%` is an error.
fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            let byte =
                hex.and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or_else(|| format!("bad escape in {s:?}"))?;
            out.push(byte);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(vars: &[(&str, &str)]) -> (OtelEnv, Vec<(String, String)>) {
        let m: HashMap<String, String> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        OtelEnv::read(move |k| m.get(k).cloned())
    }

    fn written(toml_text: &str) -> toml::Table {
        toml_text.parse().unwrap()
    }

    #[test]
    fn headers_are_baggage_style_and_percent_decoded() {
        let h = parse_headers(" Authorization=Bearer%20abc%3D%3D , x-tenant = t1,,").unwrap();
        assert_eq!(h.get("authorization").map(String::as_str), Some("Bearer abc=="));
        assert_eq!(h.get("x-tenant").map(String::as_str), Some("t1"));
        assert!(parse_headers("novalue").is_err());
        assert!(parse_headers("k=%zz").is_err());
        assert!(parse_headers("=v").is_err());
    }

    #[test]
    fn reads_every_variable_and_reports_bad_values() {
        let (e, problems) = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=k1"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/etc/ca.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", "/etc/c.pem"),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", "/etc/k.pem"),
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "https://logs.example/ingest"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "udp"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "soon"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318"),
        ]);
        assert_eq!(e.generic.endpoint.as_ref().map(HttpUrl::as_str), Some("https://collector:4318"));
        assert_eq!(e.generic.protocol, Some(Protocol::HttpProtobuf));
        assert_eq!(e.generic.compression, Some(Compression::None));
        assert_eq!(e.generic.timeout_ms, Some(2500));
        assert_eq!(e.generic.client_key.as_deref(), Some("/etc/k.pem"));
        assert_eq!(e.logs.endpoint.as_ref().map(HttpUrl::as_str), Some("https://logs.example/ingest"));
        let vars: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            vars,
            [
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
            ]
        );
        assert!(e.traces.endpoint.is_none(), "a bad endpoint is ignored");
        assert!(env(&[]).0.is_empty());
    }

    #[test]
    fn generic_endpoint_gets_paths_and_per_signal_is_used_as_is_and_wins() {
        let (e, _) = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "a=1"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://traces.example/custom"),
            ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=2"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", "/t/ca.pem"),
        ]);
        let mut cfg = OtlpConfig::default();
        e.apply(&mut cfg, None);
        let logs = cfg.for_signal(crate::export::Signal::Logs).unwrap();
        assert_eq!(logs.url, "http://collector:4318/v1/logs");
        assert_eq!(logs.protocol, Protocol::HttpProtobuf);
        assert_eq!(logs.headers.get("a").map(String::as_str), Some("1"));
        let traces = cfg.for_signal(crate::export::Signal::Traces).unwrap();
        assert_eq!(traces.url, "https://traces.example/custom");
        assert_eq!(traces.protocol, Protocol::HttpJson);
        assert_eq!(traces.headers.get("b").map(String::as_str), Some("2"));
        assert!(!traces.headers.contains_key("a"), "per-signal headers replace the generic ones");
        assert_eq!(traces.tls.ca_file, "/t/ca.pem");
        assert_eq!(logs.tls.ca_file, "");
        // gRPC: the generic endpoint is used as-is.
        let (e, _) = env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4317")]);
        let mut cfg = OtlpConfig::default();
        e.apply(&mut cfg, None);
        assert_eq!(cfg.for_signal(crate::export::Signal::Logs).unwrap().url, "https://collector:4317");
        // Only a per-signal endpoint: that signal runs, the other stays off.
        let (e, _) = env(&[("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://l:4318/v1/logs")]);
        let mut cfg = OtlpConfig::default();
        e.apply(&mut cfg, None);
        assert!(cfg.for_signal(crate::export::Signal::Logs).is_some());
        assert!(cfg.for_signal(crate::export::Signal::Traces).is_none());
    }

    #[test]
    fn metrics_have_their_own_endpoint_and_temporality_preference() {
        let (e, problems) = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://metrics.example/v1/metrics"),
            ("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "Delta"),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        let mut cfg = OtlpConfig::default();
        e.apply(&mut cfg, None);
        assert_eq!(cfg.metrics_temporality, MetricsTemporality::Delta);
        let m = cfg.for_signal(crate::export::Signal::Metrics).unwrap();
        assert_eq!(m.url, "http://metrics.example/v1/metrics");
        let logs = cfg.for_signal(crate::export::Signal::Logs).unwrap();
        assert_eq!(logs.url, "http://collector:4318/v1/logs");
        // The file's temporality wins; a bad preference is a problem named by its variable.
        let file = written("metrics_temporality = \"cumulative\"\n");
        let mut cfg: OtlpConfig = file.clone().try_into().unwrap();
        e.apply(&mut cfg, Some(&file));
        assert_eq!(cfg.metrics_temporality, MetricsTemporality::Cumulative);
        let (_, problems) = env(&[("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE", "weekly")]);
        assert_eq!(problems[0].0, "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE");
    }

    #[test]
    fn the_file_wins_over_the_environment() {
        let (e, _) = env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://from-env:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "123"),
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/env/ca.pem"),
            ("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "http://logs-env/v1/logs"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "456"),
        ]);
        let file = written(
            "endpoint = \"http://from-file:4318\"\nprotocol = \"http/protobuf\"\ncompression = \"gzip\"\n\
             [tls]\nca_file = \"/file/ca.pem\"\n",
        );
        let mut cfg: OtlpConfig = file.clone().try_into().unwrap();
        e.apply(&mut cfg, Some(&file));
        assert_eq!(cfg.endpoint.as_ref().map(HttpUrl::as_str), Some("http://from-file:4318"));
        assert_eq!(cfg.protocol, Protocol::HttpProtobuf);
        assert_eq!(cfg.timeout_ms, 123, "not in the file: the environment applies");
        assert_eq!(cfg.tls.ca_file, "/file/ca.pem");
        // The file's generic endpoint and compression shadow the per-signal variables too.
        assert_eq!(cfg.signals.logs.endpoint, None);
        assert_eq!(cfg.signals.traces.compression, None);
        assert_eq!(cfg.signals.traces.timeout_ms, Some(456));
        let traces = cfg.for_signal(crate::export::Signal::Traces).unwrap();
        assert_eq!((traces.url.as_str(), traces.timeout_ms), ("http://from-file:4318/v1/traces", 456));
    }

    #[test]
    fn resource_attributes_and_service_name_from_the_environment_under_the_file() {
        let (e, problems) = env(&[
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod, team=agents%2Cplatform,service.name=ra"),
            ("OTEL_SERVICE_NAME", "agents"),
        ]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(e.service_name.as_deref(), Some("agents"), "OTEL_SERVICE_NAME wins over service.name");
        assert_eq!(e.resource_attributes.get("team").map(String::as_str), Some("agents,platform"));
        assert!(!e.resource_attributes.contains_key("service.name"));
        let file = written("[resource_attributes]\nteam = \"from-file\"\n");
        let mut cfg: OtlpConfig = file.clone().try_into().unwrap();
        e.apply(&mut cfg, Some(&file));
        assert_eq!(cfg.service_name, "agents");
        let got: Vec<(&str, &str)> = cfg.resource_attributes.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, [("deployment.environment.name", "prod"), ("team", "from-file")]);
        // Only service.name in the attributes still names the service; the file's name wins.
        let (e, _) = env(&[("OTEL_RESOURCE_ATTRIBUTES", "service.name=ra")]);
        assert_eq!(e.service_name.as_deref(), Some("ra"));
        let file = written("service_name = \"relay\"\n");
        let mut cfg: OtlpConfig = file.clone().try_into().unwrap();
        e.apply(&mut cfg, Some(&file));
        assert_eq!(cfg.service_name, "relay");
        let (_, problems) = env(&[("OTEL_RESOURCE_ATTRIBUTES", "novalue,=x")]);
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
}
