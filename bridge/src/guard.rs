//! What keeps a web page in the user's browser out of the bridge, with or without a token.
//!
//! The threat model (the README's "Who can reach the bridge" says the same for users):
//!
//! - **A web page in the user's browser** can make requests to `127.0.0.1` from its own
//!   origin. The browser lets it *send* simple requests anywhere (a form post, a `no-cors`
//!   `fetch` with a `text/plain` body, a WebSocket) but tells the server where they come
//!   from (`Origin`, `Sec-Fetch-Site`). [`guard`] refuses every request a browser marks as
//!   coming from another origin, on every route, unless it carries the bridge's token (a
//!   page cannot know it); a top-level navigation (`GET`, `Sec-Fetch-Mode: navigate`) is let
//!   through, its answer being shown to the user only. [`ingest`] refuses, on the routes that
//!   take events or change state, a body type a page may send without a preflight
//!   (`text/plain`, form types, none at all), for browsers that send neither header.
//! - **DNS rebinding**: a page whose own name is made to resolve to `127.0.0.1` is
//!   same-origin in the browser's eyes; its requests carry its name in `Host`. Every route
//!   answers only a `Host` that is an IP address, `localhost` or a configured name.
//! - **Other local users and processes** reach loopback like the user's own tools: without a
//!   token they can read and add events; a token closes every ingress (hooks, OTLP, the
//!   collector) to them. Not a browser, they are out of this module's reach.
//! - **The LAN**: listening beyond loopback needs a token (refused at start otherwise).
//!
//! Real agents are never refused: the hook shim and the plugins post `application/json`
//! without `Origin`, OTLP exporters post `application/x-protobuf` or `application/json`,
//! and none of them is a browser.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::metrics::Metrics;

/// The guard's configuration: which `Host` names are this bridge's, and its token.
#[derive(Debug)]
pub struct Guard {
    /// Names accepted in `Host` besides IP addresses and `localhost`, lowercase.
    hosts: Vec<String>,
    /// The bridge's token: a request carrying it is not a web page's, whatever its origin.
    token: Option<String>,
    metrics: Arc<Metrics>,
}

impl Guard {
    /// A guard answering to IP addresses, `localhost` and `hosts` (any case), letting a
    /// request that carries `token` through from any origin.
    pub fn new(hosts: &[String], token: Option<String>, metrics: Arc<Metrics>) -> Arc<Self> {
        let mut names: Vec<String> = hosts.iter().filter(|h| !h.is_empty()).map(|h| h.to_ascii_lowercase()).collect();
        names.sort();
        names.dedup();
        Arc::new(Self { hosts: names, token: token.filter(|t| !t.is_empty()), metrics })
    }

    /// The request's `Host` (HTTP/1) or its URI authority (HTTP/2).
    fn host(req: &Request) -> Option<&str> {
        match req.headers().get(header::HOST) {
            Some(h) => h.to_str().ok(),
            None => req.uri().authority().map(|a| a.as_str()),
        }
    }

    /// Whether `host` (`name[:port]`) names this bridge: an IP address, `localhost` or a
    /// configured name. A rebinding page's `Host` is its own DNS name, never one of these.
    pub fn host_ok(&self, host: &str) -> bool {
        let name = match host.strip_prefix('[') {
            Some(v6) => {
                let Some((addr, rest)) = v6.split_once(']') else { return false };
                return addr.parse::<std::net::Ipv6Addr>().is_ok() && (rest.is_empty() || port_ok(rest));
            }
            None => match host.rsplit_once(':') {
                Some((n, port)) if port_ok(&format!(":{port}")) => n,
                Some(_) => return false,
                None => host,
            },
        };
        let name = name.to_ascii_lowercase();
        name == "localhost" || name.parse::<std::net::Ipv4Addr>().is_ok() || self.hosts.contains(&name)
    }

    /// Whether the request presents the token (`Authorization: Bearer`, or `access_token`
    /// in the query as an `EventSource` or WebSocket client in a browser may, AEP-0003 §8.1).
    fn has_token(&self, req: &Request) -> bool {
        let Some(want) = self.token.as_deref() else { return false };
        let bearer = aep_receivers::hooks::bearer(req.headers()).map(str::to_owned);
        let query = || {
            url::form_urlencoded::parse(req.uri().query()?.as_bytes())
                .find(|(k, _)| k == "access_token")
                .map(|(_, v)| v.into_owned())
        };
        bearer.or_else(query).is_some_and(|t| crate::auth::bearer_ok(Some(want), Some(&t)))
    }

    fn refuse(&self, status: StatusCode, code: &'static str, detail: String) -> Response {
        self.metrics.rejected.inc(&[("receiver", "http"), ("reason", code)]);
        tracing::debug!(code, detail, "Request refused by the web guard.");
        let mut res = (status, axum::Json(serde_json::json!({ "error": code, "detail": detail }))).into_response();
        res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        res
    }
}

/// `true` for `:` followed by 1 to 5 digits.
fn port_ok(s: &str) -> bool {
    s.strip_prefix(':').is_some_and(|p| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Where a browser says a request comes from, when it says so.
#[derive(Debug, PartialEq, Eq)]
pub enum Provenance {
    /// No browser header, or the browser says this origin (or the user typed the URL).
    SameOrigin,
    /// A browser says another origin: the named `Origin` or `Sec-Fetch-Site` value.
    CrossOrigin(String),
}

/// Reads `Origin` and `Sec-Fetch-Site` against `host`: the browser sends `Origin` on every
/// request but a same-origin `GET`/`HEAD` and a navigation, and on every WebSocket
/// handshake; `Sec-Fetch-Site` on every request to a trustworthy origin (loopback is one).
/// Neither header comes from the shim, the plugins' `fetch` or an OTLP exporter.
pub fn provenance(headers: &HeaderMap, host: &str) -> Provenance {
    let get = |h: &str| headers.get(h).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(origin) = get("origin") {
        let ours = origin.split_once("://").is_some_and(|(scheme, rest)| {
            matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https") && rest.eq_ignore_ascii_case(host)
        });
        if !ours {
            return Provenance::CrossOrigin(format!("Origin: {origin}"));
        }
    }
    match get("sec-fetch-site") {
        None | Some("same-origin" | "none") => Provenance::SameOrigin,
        Some(site) => Provenance::CrossOrigin(format!("Sec-Fetch-Site: {site}")),
    }
}

/// Every route: a `Host` that is not this bridge's is refused (421, DNS rebinding), and so
/// is a request a browser marks as coming from another origin (403) unless it is a
/// top-level navigation or carries the token. Every answer gets `nosniff` and
/// `Cross-Origin-Resource-Policy: same-origin` (no other page embeds or reads it).
pub async fn guard(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let mut res = match check(&g, &req) {
        Ok(()) => next.run(req).await,
        Err(r) => r,
    };
    let h = res.headers_mut();
    h.entry(header::X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry("cross-origin-resource-policy").or_insert(HeaderValue::from_static("same-origin"));
    res
}

#[allow(clippy::result_large_err)] // the error is the response itself, built once per refusal
fn check(g: &Guard, req: &Request) -> Result<(), Response> {
    // Browsers always name the host; a request without one is a tool's (or a test's).
    let host = Guard::host(req).unwrap_or("");
    if !host.is_empty() && !g.host_ok(host) {
        return Err(g.refuse(
            StatusCode::MISDIRECTED_REQUEST,
            "host-not-allowed",
            "this Host is not one the bridge answers to (an IP address, localhost, server.host or \
             server.allowed_hosts)"
                .into(),
        ));
    }
    if let Provenance::CrossOrigin(from) = provenance(req.headers(), host) {
        let navigation = matches!(*req.method(), Method::GET | Method::HEAD)
            && req.headers().get("sec-fetch-mode").is_some_and(|m| m == "navigate");
        if !navigation && !g.has_token(req) {
            return Err(g.refuse(
                StatusCode::FORBIDDEN,
                "cross-origin",
                format!("requests from another origin's web page are refused ({from})"),
            ));
        }
    }
    Ok(())
}

/// Body types a web page may send to any origin without a preflight (the Fetch standard's
/// CORS-safelisted `Content-Type` values).
const SIMPLE_TYPES: &[&str] = &["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"];

/// A route that takes events: a `POST` (any method but `GET`/`HEAD`/`OPTIONS`) whose body
/// type a page could send cross-origin without a preflight, or that names none, is refused
/// (415). Every client of the hook routes names its JSON body. (OTLP/HTTP and the
/// collector's `POST /events` accept nothing but JSON or protobuf of their own accord, and
/// the web view's posts need this origin, a session and, to act, a nonce header.)
pub async fn ingest(State(g): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    let ct = req.headers().get(header::CONTENT_TYPE).map(|v| v.to_str().unwrap_or(""));
    let essence = ct.map(|c| c.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
    match essence.as_deref() {
        None | Some("") => g.refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type-required",
            "name the body's type: Content-Type: application/json".into(),
        ),
        Some(e) if SIMPLE_TYPES.contains(&e) => g.refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type-refused",
            format!("Content-Type {e} is one any web page may send here: send application/json"),
        ),
        Some(_) => next.run(req).await,
    }
}

/// `router` behind the [`ingest`] check.
pub fn ingest_layer(router: axum::Router, g: &Arc<Guard>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(g.clone(), ingest))
}

/// `router` (every route and its fallback) behind the [`guard`].
pub fn guard_layer(router: axum::Router, g: &Arc<Guard>) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(g.clone(), guard))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(hosts: &[&str]) -> Arc<Guard> {
        Guard::new(&hosts.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>(), None, Arc::default())
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn hosts_are_addresses_localhost_or_configured_names() {
        let g = g(&["Bridge.Example"]);
        for ok in [
            "127.0.0.1",
            "127.0.0.1:8787",
            "10.1.2.3:1",
            "localhost",
            "LOCALHOST:8787",
            "[::1]",
            "[::1]:8787",
            "bridge.example:443",
        ] {
            assert!(g.host_ok(ok), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:8787",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "[::1",
            "[::1]x",
            "[evil]:80",
            "localhost:80:80",
            "localhost:",
            "localhost:123456",
            "",
        ] {
            assert!(!g.host_ok(bad), "{bad}");
        }
    }

    #[test]
    fn provenance_reads_origin_then_fetch_site() {
        let host = "127.0.0.1:8787";
        let same = Provenance::SameOrigin;
        assert_eq!(provenance(&headers(&[]), host), same, "no browser header: a tool");
        assert_eq!(provenance(&headers(&[("sec-fetch-mode", "cors")]), host), same, "Node's fetch says only this");
        assert_eq!(provenance(&headers(&[("origin", "http://127.0.0.1:8787")]), host), same);
        assert_eq!(provenance(&headers(&[("origin", "HTTPS://127.0.0.1:8787")]), host), same);
        assert_eq!(provenance(&headers(&[("sec-fetch-site", "same-origin")]), host), same);
        assert_eq!(provenance(&headers(&[("sec-fetch-site", "none")]), host), same, "typed by the user");
        for cross in [
            vec![("origin", "http://127.0.0.1:9999")],
            vec![("origin", "null")],
            vec![("origin", "http://localhost:8787")],
            vec![("origin", "ws://127.0.0.1:8787")],
            vec![("sec-fetch-site", "same-site")],
            vec![("sec-fetch-site", "cross-site")],
            vec![("origin", "http://127.0.0.1:8787"), ("sec-fetch-site", "cross-site")],
        ] {
            assert!(matches!(provenance(&headers(&cross), host), Provenance::CrossOrigin(_)), "{cross:?}");
        }
    }
}
