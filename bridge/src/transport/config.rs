//! Config types shared by every outbound section: [`TlsConfig`] and [`Headers`], and the
//! checks `aep-bridge config validate` runs on URLs and headers.

use std::collections::BTreeMap;

use serde::Deserialize;
use url::Url;

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

/// An outbound URL checked when the config is read: its scheme is one `S` allows and it
/// has a host. It keeps the text as written ([`Url`] would add a trailing `/`), so a
/// per-signal endpoint is used exactly as given.
#[derive(Clone, PartialEq, Eq)]
pub struct CheckedUrl<S> {
    text: String,
    url: Url,
    schemes: std::marker::PhantomData<S>,
}

/// The schemes a [`CheckedUrl`] accepts.
pub trait Schemes {
    /// Accepted schemes, in the order error messages list them.
    const SCHEMES: &'static [&'static str];
}

/// `http://` and `https://`: every exporter and the tee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Http;
impl Schemes for Http {
    const SCHEMES: &'static [&'static str] = &["http", "https"];
}

/// `ws://`, `wss://`, `http://` and `https://`: the relay binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relay;
impl Schemes for Relay {
    const SCHEMES: &'static [&'static str] = &["ws", "wss", "http", "https"];
}

/// An `http(s)://` URL.
pub type HttpUrl = CheckedUrl<Http>;
/// A relay URL: `ws(s)://` or `http(s)://`.
pub type RelayUrl = CheckedUrl<Relay>;

impl<S: Schemes> CheckedUrl<S> {
    /// Parses and checks `text` (surrounding whitespace is dropped).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let want = || S::SCHEMES.iter().map(|s| format!("{s}://")).collect::<Vec<_>>().join(", ");
        let url = Url::parse(text).map_err(|e| format!("{text:?} is not a URL ({e}); expected {}", want()))?;
        if !S::SCHEMES.contains(&url.scheme()) {
            return Err(format!("{text:?} must start with {}", want()));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(format!("{text:?} has no host"));
        }
        Ok(Self { text: text.to_owned(), url, schemes: std::marker::PhantomData })
    }

    /// The URL as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed URL.
    pub fn url(&self) -> &Url {
        &self.url
    }
}

impl<S> std::fmt::Debug for CheckedUrl<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.text, f)
    }
}

impl<S> std::fmt::Display for CheckedUrl<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl<S: Schemes> std::str::FromStr for CheckedUrl<S> {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

impl<'de, S: Schemes> Deserialize<'de> for CheckedUrl<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Serde helper for an optional value written as a string where `""` means off:
/// `#[serde(deserialize_with = "off_if_empty")]` on an `Option<T: FromStr>` field.
pub fn off_if_empty<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    let text = String::deserialize(d)?;
    parse_off_if_empty(&text).map_err(serde::de::Error::custom)
}

/// `""` (after trimming) is `None`, anything else must parse.
pub fn parse_off_if_empty<T: std::str::FromStr>(text: &str) -> Result<Option<T>, String>
where
    T::Err: std::fmt::Display,
{
    let text = text.trim();
    if text.is_empty() { Ok(None) } else { text.parse::<T>().map(Some).map_err(|e| e.to_string()) }
}

/// Checks an OTLP/HTTP base URL (the tee's upstream): no `/v1/...`, which is appended.
pub fn check_otlp_base_url(key: &str, url: &HttpUrl, out: &mut Vec<(String, String)>) {
    if url.url().path().contains("/v1/") {
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
        for ok in ["http://127.0.0.1:4318", "https://collector/otlp/", " http://[::1]:4318 "] {
            let u = HttpUrl::parse(ok).unwrap();
            assert_eq!(u.as_str(), ok.trim(), "kept as written");
        }
        for (bad, says) in [
            ("ftp://x", "must start with http://, https://"),
            ("http://", "not a URL"),
            ("127.0.0.1:4318", "expected http://, https://"),
            ("collector:4318", "must start with"),
            ("wss://relay", "must start with"),
        ] {
            let e = HttpUrl::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(RelayUrl::parse("wss://relay.example/aep").is_ok());
        assert!(RelayUrl::parse("ftp://relay").unwrap_err().contains("ws://, wss://, http://, https://"));
        assert_eq!(parse_off_if_empty::<HttpUrl>("  ").unwrap(), None);
        let mut out = Vec::new();
        check_otlp_base_url("f", &HttpUrl::parse("https://x:4318/v1/logs").unwrap(), &mut out);
        check_otlp_base_url("g", &HttpUrl::parse("https://x:4318/otlp").unwrap(), &mut out);
        let h: Headers = [("ok".to_owned(), "v".to_owned()), ("bad name".to_owned(), "v".to_owned())].into();
        check_headers("h", &h, &mut out);
        let keys: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["f", "h"]);
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
