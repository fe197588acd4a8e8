//! Config types shared by every outbound section: [`TlsConfig`] and [`Headers`], and the
//! checks `aep-bridge config validate` runs on URLs and headers.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Extra request headers (gRPC metadata for OTLP/gRPC), name -> value.
pub type Headers = BTreeMap<String, String>;

/// TLS options of an outbound connection (`tls = { ... }` in a section). The server's
/// certificate is always verified: against the built-in Mozilla roots plus `ca_file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM file of extra CA certificates trusted besides the built-in roots; `""` = none.
    pub ca_file: String,
    /// PEM client certificate chain for mTLS; `""` = none (needs `key_file`).
    pub cert_file: String,
    /// PEM private key of `cert_file` (PKCS#8, PKCS#1 or SEC1); `""` = none.
    pub key_file: String,
}

impl TlsConfig {
    /// Whether nothing is set (the built-in roots, no client certificate).
    pub fn is_default(&self) -> bool {
        self.ca_file.is_empty() && self.cert_file.is_empty() && self.key_file.is_empty()
    }
}

/// Checks an outbound HTTP URL: `http://` or `https://` with a host; `""` is fine (off).
pub fn check_http_url(key: &str, url: &str, out: &mut Vec<(String, String)>) {
    if url.is_empty() {
        return;
    }
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    match rest {
        None => out.push((key.into(), format!("{url:?} is not an http:// or https:// URL"))),
        Some(r) => {
            let host = r.split('/').next().unwrap_or("");
            if host.is_empty() || host.contains(char::is_whitespace) {
                out.push((key.into(), format!("{url:?} has no host")));
            }
        }
    }
}

/// Checks an OTLP/HTTP base URL (the tee's upstream): an HTTP URL without `/v1/...`.
pub fn check_otlp_base_url(key: &str, url: &str, out: &mut Vec<(String, String)>) {
    let before = out.len();
    check_http_url(key, url, out);
    if out.len() == before && url.contains("/v1/") {
        out.push((key.into(), "give the base URL; /v1/logs, /v1/traces and /v1/metrics are appended".into()));
    }
}

/// Checks header names (token characters) and values (no CR, LF or NUL).
pub fn check_headers(key: &str, h: &Headers, out: &mut Vec<(String, String)>) {
    for (k, v) in h {
        let name_ok = !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if !name_ok || v.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            out.push((key.into(), format!("bad header {k:?}")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_headers() {
        let mut out = Vec::new();
        check_http_url("a", "http://127.0.0.1:4318", &mut out);
        check_http_url("b", "https://collector/otlp/", &mut out);
        check_http_url("c", "", &mut out);
        assert!(out.is_empty(), "{out:?}");
        check_http_url("d", "ftp://x", &mut out);
        check_http_url("e", "http://", &mut out);
        check_otlp_base_url("f", "https://x:4318/v1/logs", &mut out);
        check_otlp_base_url("g", "127.0.0.1:4318", &mut out);
        let h: Headers = [("ok".to_owned(), "v".to_owned()), ("bad name".to_owned(), "v".to_owned())].into();
        check_headers("h", &h, &mut out);
        let keys: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["d", "e", "f", "g", "h"]);
    }

    #[test]
    fn tls_checks_pairs_and_files() {
        assert!(TlsConfig::default().check("t").is_empty());
        let half = TlsConfig { cert_file: "c.pem".into(), ..TlsConfig::default() };
        assert_eq!(half.check("t")[0].0, "t.cert_file");
        let missing = TlsConfig { ca_file: "/nonexistent/ca.pem".into(), ..TlsConfig::default() };
        let p = missing.check("t");
        assert_eq!(p[0].0, "t.ca_file");
        assert!(p[0].1.contains("/nonexistent/ca.pem"), "{p:?}");
        assert!(toml::from_str::<TlsConfig>("insecure_skip_verify = true").is_err());
    }
}
