//! Every route against a hostile web page, through the very app `serve` runs (built by
//! `Daemon::build`, driven with `oneshot`): a rebinding `Host` is refused everywhere, a
//! request a browser marks as another origin's is refused everywhere (a navigation to the
//! page excepted), and the routes that take events refuse the body types a page may send
//! without a preflight; what the shim, the plugins and OTLP exporters send still passes.
//! The real-browser side of the same is `bridge/cli/tests/ui_browser.rs`.

use aep_bridge::server::Daemon;
use aep_testkit as common;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

const HOST: &str = "127.0.0.1:8787";

async fn send(app: &axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Every route the main port serves (the view's, the collector's, hooks, OTLP/HTTP, health
/// and metrics) and one it does not, with a body that route would take.
fn routes() -> Vec<(&'static str, &'static str, &'static str)> {
    let hook = r#"{"session_id":"s-guard","hook_event_name":"SessionStart","source":"startup"}"#;
    vec![
        ("GET", "/", ""),
        ("GET", "/ui/app.js", ""),
        ("GET", "/ui/app.css", ""),
        ("GET", "/favicon.ico", ""),
        ("GET", "/ui/session", ""),
        ("POST", "/ui/login", "token=x"),
        ("POST", "/ui/logout", ""),
        ("GET", "/ui/stream", ""),
        ("POST", "/ui/answer", "{}"),
        ("GET", "/events", ""),
        ("POST", "/events", "{}"),
        ("GET", "/.well-known/aep", ""),
        ("GET", "/stream?live=0", ""),
        ("GET", "/socket", ""),
        ("POST", "/hooks/claude-code", hook),
        ("POST", "/hooks/pi/session_start", "{}"),
        ("POST", "/v1/logs", "{}"),
        ("POST", "/v1/traces", "{}"),
        ("POST", "/v1/metrics", "{}"),
        ("GET", "/healthz", ""),
        ("GET", "/livez", ""),
        ("GET", "/readyz", ""),
        ("GET", "/metrics", ""),
        ("GET", "/no-such-route", ""),
    ]
}

fn request(method: &str, path: &str, body: &'static str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut r = Request::builder().method(method).uri(path);
    if method == "POST" {
        r = r.header("content-type", "application/json");
    }
    if path == "/socket" {
        r = r
            .header("connection", "upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(Body::from(body)).unwrap()
}

fn daemon(token: Option<&str>) -> (Daemon, tempfile::TempDir, CancellationToken) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.server.token = token.unwrap_or_default().into();
    cfg.server.allowed_hosts = vec!["bridge.example".into()];
    let stop = CancellationToken::new();
    (Daemon::build(cfg, stop.clone()).unwrap(), dir, stop)
}

#[tokio::test]
async fn a_rebinding_host_is_refused_on_every_route() {
    for token in [None, Some("t0ken-guard")] {
        let (d, dir, stop) = daemon(token);
        let app = d.app();
        for (method, path, body) in routes() {
            for host in ["evil.example", "evil.example:8787", "127.0.0.1.evil.example:8787", "localhost.evil.example"] {
                let (st, text) = send(&app, request(method, path, body, &[("host", host)])).await;
                assert_eq!(st, StatusCode::MISDIRECTED_REQUEST, "{method} {path} Host: {host} ({token:?}): {text}");
                assert!(text.contains("host-not-allowed"), "{text}");
            }
        }
        // The bridge's own names pass the Host check (whatever the route then answers).
        for host in [HOST, "localhost:8787", "[::1]:8787", "test-host:8787", "Bridge.Example"] {
            let (st, text) = send(&app, request("GET", "/healthz", "", &[("host", host)])).await;
            assert_eq!(st, StatusCode::OK, "Host: {host}: {text}");
        }
        assert!(!dir.path().join("logs").exists(), "nothing refused was logged");
        stop.cancel();
    }
}

#[tokio::test]
async fn another_origins_page_is_refused_on_every_route() {
    let (d, dir, stop) = daemon(None);
    let app = d.app();
    let cross: [&[(&str, &str)]; 5] = [
        &[("origin", "http://127.0.0.1:9999")],
        &[("origin", "http://localhost:8787")],
        &[("origin", "null")],
        &[("sec-fetch-site", "same-site"), ("sec-fetch-mode", "cors")],
        &[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "no-cors")],
    ];
    for (method, path, body) in routes() {
        for headers in cross {
            let mut h = vec![("host", HOST)];
            h.extend_from_slice(headers);
            let (st, text) = send(&app, request(method, path, body, &h)).await;
            assert_eq!(st, StatusCode::FORBIDDEN, "{method} {path} {headers:?}: {text}");
            assert!(text.contains("cross-origin"), "{text}");
        }
    }
    // A form posted to a hook from another site: refused, not logged.
    let form = Request::post("/hooks/claude-code")
        .header("host", HOST)
        .header("origin", "https://evil.example")
        .header("sec-fetch-site", "cross-site")
        .header("sec-fetch-mode", "navigate")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Body::from(r#"{"session_id":"s-form","hook_event_name":"SessionStart","source":"startup"}"#))
        .unwrap();
    assert_eq!(send(&app, form).await.0, StatusCode::FORBIDDEN);
    assert!(!dir.path().join("logs").exists(), "nothing refused was logged");
    // A link followed from another site opens the page (its answer is the user's to see).
    let nav = request(
        "GET",
        "/",
        "",
        &[
            ("host", HOST),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
            ("sec-fetch-dest", "document"),
        ],
    );
    let (st, text) = send(&app, nav).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    // The page's own requests, and the user typing the address, pass.
    for h in [
        vec![("host", HOST), ("sec-fetch-site", "same-origin")],
        vec![("host", HOST), ("sec-fetch-site", "none")],
        vec![("host", HOST), ("origin", "http://127.0.0.1:8787")],
    ] {
        let (st, text) = send(&app, request("GET", "/ui/session", "", &h)).await;
        assert_eq!(st, StatusCode::OK, "{h:?}: {text}");
    }
    stop.cancel();
}

#[tokio::test]
async fn with_a_token_a_request_that_carries_it_passes_from_any_origin() {
    let (d, _dir, stop) = daemon(Some("t0ken-guard"));
    let app = d.app();
    let cross = [("host", HOST), ("origin", "http://dashboard.example")];
    let (st, _) = send(&app, request("GET", "/stream?live=0", "", &cross)).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "without the token");
    let (st, _) = send(&app, request("GET", "/stream?live=0&access_token=wrong", "", &cross)).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "with a wrong one");
    let (st, text) = send(&app, request("GET", "/stream?live=0&access_token=t0ken-guard", "", &cross)).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    let mut h = cross.to_vec();
    h.push(("authorization", "Bearer t0ken-guard"));
    let (st, text) = send(&app, request("GET", "/.well-known/aep", "", &h)).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    stop.cancel();
}

/// What a page may post to any origin without a preflight: refused on every route that
/// takes events, before the body is read; nothing reaches the log.
#[tokio::test]
async fn the_ingest_routes_refuse_what_a_page_may_send_without_a_preflight() {
    let (d, dir, stop) = daemon(None);
    let app = d.app();
    let hook = r#"{"session_id":"s-simple","hook_event_name":"SessionStart","source":"startup"}"#;
    for path in ["/hooks/claude-code", "/hooks/opencode/session.created", "/events", "/v1/logs", "/v1/traces"] {
        for ct in [
            Some("text/plain"),
            Some("text/plain;charset=UTF-8"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("TEXT/PLAIN"),
            None,
        ] {
            let mut r = Request::post(path).header("host", HOST).header("aep-version", "0.1");
            if let Some(ct) = ct {
                r = r.header("content-type", ct);
            }
            let (st, text) = send(&app, r.body(Body::from(hook)).unwrap()).await;
            assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{path} {ct:?}: {text}");
        }
    }
    assert!(!dir.path().join("logs").exists(), "nothing refused was logged");
    stop.cancel();
}

/// The requests real clients send, header for header: the shim (raw HTTP/1.1), the
/// OpenCode/Kilo and pi plugins (`fetch` in Bun or Node: `content-type` plus what undici
/// adds, `sec-fetch-mode: cors`, never `Origin`), an OTLP exporter (protobuf or JSON).
#[tokio::test]
async fn what_real_agents_send_still_passes() {
    let (d, dir, stop) = daemon(None);
    let app = d.app();
    let hook = r#"{"session_id":"s-real","hook_event_name":"SessionStart","source":"startup"}"#;
    let shim = Request::post("/hooks/claude-code")
        .header("host", HOST)
        .header("content-type", "application/json")
        .header("content-length", hook.len())
        .header("connection", "close")
        .body(Body::from(hook))
        .unwrap();
    let (st, text) = send(&app, shim).await;
    assert_eq!(st, StatusCode::OK, "{text}");
    let plugin = Request::post("/hooks/opencode/session.created")
        .header("host", HOST)
        .header("content-type", "application/json")
        .header("accept", "*/*")
        .header("accept-language", "*")
        .header("sec-fetch-mode", "cors")
        .header("user-agent", "node")
        .header("accept-encoding", "gzip, deflate")
        .body(Body::from(r#"{"event":{"type":"session.created","properties":{"info":{"id":"ses_real"}}}}"#))
        .unwrap();
    let (st, text) = send(&app, plugin).await;
    assert_ne!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
    assert_ne!(st, StatusCode::FORBIDDEN, "{text}");
    for (ct, body) in [("application/x-protobuf", Body::empty()), ("application/json", Body::from("{}"))] {
        let otlp = Request::post("/v1/logs")
            .header("host", "localhost:4318")
            .header("content-type", ct)
            .header("user-agent", "OTel-OTLP-Exporter-JavaScript/0.57.0")
            .body(body)
            .unwrap();
        let (st, text) = send(&app, otlp).await;
        assert_eq!(st, StatusCode::OK, "{ct}: {text}");
    }
    assert!(dir.path().join("logs/claude-code/s-real.jsonl").is_file(), "the shim's hook was logged");
    stop.cancel();
}
