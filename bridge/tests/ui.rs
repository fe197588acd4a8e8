//! The web view's endpoints through the app `serve` runs (`Daemon::build`, `oneshot`): the
//! page and its headers, the login, the cookie session, the same-origin and nonce checks on
//! answers, the body caps, and an answer from the page releasing a held Claude Code hook
//! recorded with the page's sender identity.

use aep_bridge::server::Daemon;
use aep_testkit as common;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

const TOKEN: &str = "ui-test-token-4f9a";
const HOST: &str = "127.0.0.1:8787";
const ORIGIN: &str = "http://127.0.0.1:8787";
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

struct View {
    app: axum::Router,
    dir: tempfile::TempDir,
    stop: CancellationToken,
}

impl Drop for View {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn view(token: Option<&str>) -> View {
    view_with(token, true)
}

fn view_with(token: Option<&str>, enabled: bool) -> View {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.ui.enabled = enabled;
    if let Some(t) = token {
        cfg.server.token = t.into();
    }
    let stop = CancellationToken::new();
    let daemon = Daemon::build(cfg, stop.clone()).unwrap();
    View { app: daemon.app(), dir, stop }
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The cookie session's value from `Set-Cookie`.
    fn cookie(&self) -> Option<String> {
        let c = self.headers.get("set-cookie")?.to_str().ok()?;
        Some(c.split(';').next()?.trim().to_owned())
    }
}

async fn send(app: &axum::Router, req: Request<Body>) -> Reply {
    let res = app.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    Reply { status, headers, body: String::from_utf8_lossy(&body).into_owned() }
}

fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut r = Request::get(path).header("host", HOST);
    if let Some(c) = cookie {
        r = r.header("cookie", c);
    }
    r.body(Body::empty()).unwrap()
}

fn post(path: &str, headers: &[(&str, &str)], body: impl Into<Body>) -> Request<Body> {
    let mut r = Request::post(path).header("host", HOST);
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    r.body(body.into()).unwrap()
}

async fn login(app: &axum::Router) -> String {
    let r = send(
        app,
        post(
            "/ui/login",
            &[("origin", ORIGIN), ("content-type", "application/x-www-form-urlencoded")],
            format!("token={TOKEN}"),
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    r.cookie().expect("a session cookie")
}

async fn nonce(app: &axum::Router, cookie: &str) -> String {
    let r = send(app, get("/ui/session", Some(cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.json()["nonce"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_the_csp_and_nosniff() {
    let v = view(Some(TOKEN));
    for (path, ty) in [
        ("/", "text/html; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
        ("/ui/app.css", "text/css; charset=utf-8"),
        ("/ui/session", "application/json"),
    ] {
        let r = send(&v.app, get(path, None)).await;
        assert_eq!(r.headers["content-security-policy"], CSP, "{path}");
        assert_eq!(r.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(r.headers["x-frame-options"], "DENY", "{path}");
        assert_eq!(r.headers["content-type"], ty, "{path}");
    }
    let page = send(&v.app, get("/", None)).await.body;
    assert!(!page.contains(TOKEN), "the page holds no token");
    assert!(!page.contains("<script>") && !page.contains(" style="), "no inline script or style: {page}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_token_nothing_but_the_page_and_login_answers_without_the_cookie() {
    let v = view(Some(TOKEN));
    for path in ["/ui/session", "/ui/stream?from=all&live=0"] {
        let r = send(&v.app, get(path, None)).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{path}: {}", r.body);
        let r = send(&v.app, get(path, Some("aep_ui=0123456789abcdef"))).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "a made-up cookie: {path}");
    }
    let answer = json!({"request": "r", "session": "s", "answer": {"option": "allow"}}).to_string();
    let r = send(&v.app, post("/ui/answer", &[("origin", ORIGIN)], answer)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // The token is never accepted in the URL on the view's stream.
    let r = send(&v.app, get(&format!("/ui/stream?live=0&access_token={TOKEN}"), None)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_needs_the_right_token_from_this_origin_and_sets_a_strict_cookie() {
    let v = view(Some(TOKEN));
    let form = [("origin", ORIGIN), ("content-type", "application/x-www-form-urlencoded")];
    for wrong in ["token=nope", "token=", "", "tok=ui-test-token-4f9a"] {
        let r = send(&v.app, post("/ui/login", &form, wrong)).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{wrong:?}: {}", r.body);
        assert!(r.headers.get("set-cookie").is_none(), "no session for {wrong:?}");
    }
    let body = format!("token={TOKEN}");
    let r = send(&v.app, post("/ui/login", &[("origin", "http://evil.example")], body.clone())).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "a foreign origin's login is refused");
    let r = send(&v.app, post("/ui/login", &[], body.clone())).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "neither Origin nor Sec-Fetch-Site: refused");
    let r = send(&v.app, post("/ui/login", &[("sec-fetch-site", "same-origin")], body)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    let set = r.headers["set-cookie"].to_str().unwrap();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    assert!(!set.contains(TOKEN), "the cookie holds a session secret, not the token: {set}");
    let cookie = r.cookie().unwrap();
    let s = send(&v.app, get("/ui/session", Some(&cookie))).await;
    assert_eq!(s.status, StatusCode::OK, "{}", s.body);
    assert_eq!(s.json()["control"], true);
    // The session is kept in the data folder, not readable by others.
    let file = v.dir.path().join("ui-sessions.json");
    assert!(file.is_file());
    assert!(!std::fs::read_to_string(&file).unwrap().contains(TOKEN));
    // Logging out ends it.
    let n = s.json()["nonce"].as_str().unwrap().to_owned();
    let out =
        send(&v.app, post("/ui/logout", &[("origin", ORIGIN), ("cookie", &cookie), ("x-aep-nonce", &n)], "")).await;
    assert_eq!(out.status, StatusCode::NO_CONTENT, "{}", out.body);
    assert_eq!(send(&v.app, get("/ui/session", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_need_this_origin_and_the_pages_nonce() {
    let v = view(Some(TOKEN));
    let cookie = login(&v.app).await;
    let n = nonce(&v.app, &cookie).await;
    let other = login(&v.app).await;
    let foreign = nonce(&v.app, &other).await;
    let body = json!({"request": "01J00000000000000000000000", "session": "nobody", "answer": {"option": "allow"}})
        .to_string();
    let cases: [(&str, Vec<(&str, &str)>); 5] = [
        ("no nonce", vec![("origin", ORIGIN)]),
        ("a wrong nonce", vec![("origin", ORIGIN), ("x-aep-nonce", "00")]),
        ("another session's nonce", vec![("origin", ORIGIN), ("x-aep-nonce", &foreign)]),
        ("a foreign Origin", vec![("origin", "http://evil.example"), ("x-aep-nonce", &n)]),
        ("a cross-site fetch", vec![("sec-fetch-site", "cross-site"), ("x-aep-nonce", &n)]),
    ];
    for (what, headers) in cases {
        let mut h = headers.clone();
        h.push(("cookie", &cookie));
        let r = send(&v.app, post("/ui/answer", &h, body.clone())).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{what}: {}", r.body);
    }
    // With both, the answer reaches the command routing, which finds no claimant.
    let h = [("origin", ORIGIN), ("x-aep-nonce", n.as_str()), ("cookie", cookie.as_str())];
    let r = send(&v.app, post("/ui/answer", &h, body)).await;
    assert_eq!((r.status, r.json()["error"].clone()), (StatusCode::CONFLICT, json!("no-route")), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_capped_and_foreign_hosts_refused() {
    let v = view(Some(TOKEN));
    let cookie = login(&v.app).await;
    let n = nonce(&v.app, &cookie).await;
    let big = format!(
        r#"{{"request":"r","session":"s","answer":{{"text":"{}"}}}}"#,
        "x".repeat(aep_bridge::ui::MAX_BODY + 1)
    );
    let h = [("origin", ORIGIN), ("x-aep-nonce", n.as_str()), ("cookie", cookie.as_str())];
    let r = send(&v.app, post("/ui/answer", &h, big.clone())).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.body);
    let r = send(&v.app, post("/ui/login", &[("origin", ORIGIN)], format!("token={big}"))).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    // A page whose own name was rebound to this address is refused.
    let r = v
        .app
        .clone()
        .oneshot(Request::get("/").header("host", "evil.example:8787").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    for ok in ["localhost:8787", "[::1]:8787", "127.0.0.1"] {
        let r = v.app.clone().oneshot(Request::get("/").header("host", ok).body(Body::empty()).unwrap()).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{ok}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_view_is_open_and_read_only() {
    let v = view(None);
    let s = send(&v.app, get("/ui/session", None)).await;
    assert_eq!(s.status, StatusCode::OK, "{}", s.body);
    assert_eq!((s.json()["token"].clone(), s.json()["control"].clone()), (json!(false), json!(false)));
    let cookie = s.cookie().expect("an open view still gets a cookie session for its nonce");
    let hook = r#"{"session_id":"s-open","hook_event_name":"SessionStart","source":"startup"}"#;
    let r = send(&v.app, post("/hooks/claude-code", &[("content-type", "application/json")], hook)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = send(&v.app, get("/ui/stream?from=all&live=0", Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "text/event-stream");
    assert!(r.body.contains("event: session.started") && r.body.contains("s-open"), "{}", r.body);
    // AEP-0004 §4.1: no token, no authenticated binding, no answers.
    let n = s.json()["nonce"].as_str().unwrap().to_owned();
    let body = json!({"request": "r", "session": "s-open", "answer": {"option": "allow"}}).to_string();
    let h = [("origin", ORIGIN), ("x-aep-nonce", n.as_str()), ("cookie", cookie.as_str())];
    let r = send(&v.app, post("/ui/answer", &h, body)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(r.body.contains("token"), "{}", r.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_view_can_be_turned_off() {
    let v = view_with(None, false);
    assert_eq!(send(&v.app, get("/", None)).await.status, StatusCode::NOT_FOUND);
    assert_eq!(send(&v.app, get("/ui/session", None)).await.status, StatusCode::NOT_FOUND);
}

/// The page's answer takes the `/socket` senders' path: the held hook gets the decision,
/// and the history records the command from `aep-web` with the answer cause-linked to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_from_the_page_releases_the_held_hook_and_names_its_sender() {
    let v = view(Some(TOKEN));
    let cookie = login(&v.app).await;
    let n = nonce(&v.app, &cookie).await;
    let live = v.app.clone().oneshot(get("/ui/stream?from=all", Some(&cookie))).await.unwrap();
    let mut frames = live.into_body().into_data_stream();
    let payload = include_str!("data/claude-code-permission-request.json").to_owned();
    let app = v.app.clone();
    let hook = tokio::spawn(async move {
        let h = [("content-type", "application/json"), ("authorization", "Bearer ui-test-token-4f9a")];
        send(&app, post("/hooks/claude-code", &h, payload)).await
    });
    let mut buf = String::new();
    let request = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let chunk = frames.next().await.expect("stream ended").unwrap();
            buf.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(line) = buf.lines().find(|l| l.starts_with("data: ") && l.contains("attention.requested")) {
                return serde_json::from_str::<Value>(&line[6..]).unwrap();
            }
        }
    })
    .await
    .expect("the request reached the stream");
    let body = json!({"request": request["id"], "session": request["session"], "answer": {"option": "allow"}});
    let h = [("origin", ORIGIN), ("x-aep-nonce", n.as_str()), ("cookie", cookie.as_str())];
    let r = send(&v.app, post("/ui/answer", &h, body.to_string())).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let cmd = r.json()["command"].as_str().unwrap().to_owned();
    let reply = tokio::time::timeout(std::time::Duration::from_secs(20), hook).await.unwrap().unwrap();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body).unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
    );
    // The hook is answered only once the answer and the command are in the logs.
    let session = request["session"].as_str().unwrap();
    let log = v.dir.path().join(format!("logs/claude-code/{session}.jsonl"));
    let events = aep_testkit::log_events(&log);
    // The command is kept in history under its sender's name (AEP-0004 §4.4).
    let sent = v.dir.path().join(format!("logs/aep-web/{session}.jsonl"));
    let sent = aep_testkit::log_events(&sent);
    let command = sent.iter().find(|e| e["id"] == cmd.as_str()).expect("the command is in the history");
    assert_eq!(command["type"], "control.attention.respond");
    assert_eq!(command["agent"], "aep-web");
    assert_eq!(command["subject"], request["id"]);
    let answered = events.iter().find(|e| e["type"] == "attention.answered").unwrap();
    assert_eq!(
        (answered["cause"].as_str(), &answered["data"]["answer"]),
        (Some(cmd.as_str()), &json!({"option": "allow"}))
    );
    assert!(events.iter().any(|e| e["type"] == "control.accepted" && e["cause"] == cmd.as_str()));
}
