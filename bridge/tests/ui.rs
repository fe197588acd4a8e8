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
use std::io::Write as _;
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

/// A view over `dir` (kept by the caller, so a second view is the same bridge restarted).
fn view_in(dir: &std::path::Path, token: &str, name: &str) -> (axum::Router, CancellationToken) {
    let mut cfg = common::config(dir);
    cfg.server.token = token.into();
    cfg.ui.name = name.into();
    let stop = CancellationToken::new();
    let daemon = Daemon::build(cfg, stop.clone()).unwrap();
    (daemon.app(), stop)
}

/// The first `attention.requested` on the page's live stream, once `payload` is held.
async fn held(app: &axum::Router, cookie: &str, payload: Value) -> (Value, tokio::task::JoinHandle<Reply>) {
    let live = app.clone().oneshot(get("/ui/stream", Some(cookie))).await.unwrap();
    let mut frames = live.into_body().into_data_stream();
    let app2 = app.clone();
    let hook = tokio::spawn(async move {
        let h = [("content-type", "application/json"), ("authorization", "Bearer ui-test-token-4f9a")];
        send(&app2, post("/hooks/claude-code", &h, payload.to_string())).await
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
    (request, hook)
}

async fn answer(app: &axum::Router, cookie: &str, request: &Value, answer: Value) -> Reply {
    let n = nonce(app, cookie).await;
    let body = json!({"request": request["id"], "session": request["session"], "answer": answer});
    let h = [("origin", ORIGIN), ("x-aep-nonce", n.as_str()), ("cookie", cookie)];
    send(app, post("/ui/answer", &h, body.to_string())).await
}

fn log_of(dir: &std::path::Path, agent: &str, session: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join(format!("logs/{agent}/{session}.jsonl")))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Words on a permission card go with the choice the page names (here the refusing one, as
/// its reason): the agent gets exactly that, the reply says so, and history records who
/// answered by the login's name. A standing-permission suggestion answers in the agent's
/// own shape (Claude Code's `updatedPermissions`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_choice_carries_the_words_and_the_answerers_name() {
    let dir = tempfile::tempdir().unwrap();
    let (app, _stop) = view_in(dir.path(), TOKEN, "alice");
    let cookie = login(&app).await;
    let s = send(&app, get("/ui/session", Some(&cookie))).await.json();
    assert_eq!(
        (s["name"].as_str(), s["sender"].as_str(), s["history"].as_bool()),
        (Some("alice"), Some("aep-web"), Some(true))
    );
    let payload: Value = serde_json::from_str(include_str!("data/claude-code-permission-request.json")).unwrap();

    let (request, hook) = held(&app, &cookie, payload.clone()).await;
    let options: Vec<&str> =
        request["data"]["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(options, ["allow", "deny", "always-1"], "the recorded suggestion is offered");
    let r = answer(&app, &cookie, &request, json!({"option": "deny", "text": "use the staging registry"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    assert_eq!(
        r.json()["sent"],
        json!({"answer": {"option": "deny", "text": "use the staging registry"}, "by": "alice"}),
        "the page is told exactly what was sent"
    );
    let reply = tokio::time::timeout(std::time::Duration::from_secs(20), hook).await.unwrap().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body).unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "use the staging registry"}}})
    );
    let session = request["session"].as_str().unwrap();
    let events = log_of(dir.path(), "claude-code", session);
    let answered = events.iter().find(|e| e["type"] == "attention.answered").unwrap();
    assert_eq!(answered["data"]["by"], "alice");
    assert_eq!(answered["data"]["answer"], json!({"option": "deny", "text": "use the staging registry"}));
    let cmd =
        log_of(dir.path(), "aep-web", session).into_iter().find(|e| e["type"] == "control.attention.respond").unwrap();
    assert_eq!((cmd["agent"].as_str(), cmd["data"]["by"].as_str()), (Some("aep-web"), Some("alice")));

    // "Always allow": the suggestion Claude Code sent, echoed back as it sent it.
    let (request, hook) = held(&app, &cookie, payload.clone()).await;
    let r = answer(&app, &cookie, &request, json!({"option": "always-1"})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    let reply = tokio::time::timeout(std::time::Duration::from_secs(20), hook).await.unwrap().unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&reply.body).unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow",
            "updatedPermissions": [payload["permission_suggestions"][0]]}}})
    );
}

/// The history endpoints read the JSONL logs: after a restart a new page finds the
/// sessions of the earlier run, pages back through them, searches their events' text and
/// reads one session's events; a line still being written is not yet there, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_outlives_a_restart_and_pages_back_through_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let ingest = |app: axum::Router, body: String| async move {
        let h = [
            ("content-type", "application/x-ndjson"),
            ("authorization", "Bearer ui-test-token-4f9a"),
            ("aep-version", "0.1"),
        ];
        let r = send(&app, post("/events", &h, body)).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    };
    {
        let (app, stop) = view_in(dir.path(), TOKEN, "");
        let mut body = String::new();
        for i in 0..12u64 {
            for (seq, ty, data) in [
                (1, "session.started", json!({"label": format!("task {i}")})),
                (2, "progress.status", json!({"message": if i == 5 { "the zebra crossing" } else { "plain" }})),
            ] {
                let e = json!({"aep": "0.1", "id": ulid::Ulid::new().to_string(), "type": ty,
                    "time": format!("2026-07-03T10:{i:02}:0{seq}Z"), "source": "aep://t/agent/bot",
                    "agent": if i % 2 == 0 { "bot-a" } else { "bot-b" }, "session": format!("s{i:02}"), "seq": seq,
                    "capture": "redacted", "data": data});
                body.push_str(&format!("{e}\n"));
            }
        }
        ingest(app.clone(), body).await;
        // The collector's 202 says accepted, not written: wait (bounded) for the last log.
        let last = dir.path().join("logs/bot-b/s11.jsonl");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::fs::read_to_string(&last).map_or(0, |t| t.lines().count()) < 2 {
            assert!(std::time::Instant::now() < deadline, "the events never reached the log");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        stop.cancel();
    }
    // The bridge restarted: a new page, no live event since.
    let (app, _stop) = view_in(dir.path(), TOKEN, "");
    let cookie = login(&app).await;
    let page = |q: &str| {
        let (app, cookie) = (app.clone(), cookie.clone());
        let q = q.to_owned();
        async move {
            let r = send(&app, get(&format!("/ui/history?{q}"), Some(&cookie))).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.body);
            r.json()
        }
    };
    // Right after a start the bridge may still be reading its logs (newest first): the page
    // says so, and asks again.
    let mut first = page("limit=5").await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while first["indexing"] == true {
        assert!(std::time::Instant::now() < deadline, "the logs were never read");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        first = page("limit=5").await;
    }
    let ids = |p: &Value| -> Vec<String> {
        p["sessions"].as_array().unwrap().iter().map(|s| s["session"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids(&first), ["s11", "s10", "s09", "s08", "s07"]);
    assert_eq!(first["sessions"][0]["label"], "task 11");
    assert_eq!(first["sessions"][0]["events"], 2);
    let next = first["next"].as_str().unwrap();
    let second = page(&format!("limit=5&before={}", urlencode(next))).await;
    assert_eq!(ids(&second), ["s06", "s05", "s04", "s03", "s02"]);
    assert_eq!(ids(&page("agent=bot-a&limit=3").await), ["s10", "s08", "s06"]);
    let zebra = page("text=ZEBRA").await;
    assert_eq!(ids(&zebra), ["s05"], "found by the text of an event, not its name");
    // One session's events, newest first; a torn last line is "not yet".
    let path = dir.path().join("logs/bot-b/s05.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(b"{\"aep\":\"0.1\",\"id\":\"X\",\"ty")
        .unwrap();
    let r = send(&app, get("/ui/events?agent=bot-b&session=s05", Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let types: Vec<String> =
        r.json()["events"].as_array().unwrap().iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(types, ["progress.status", "session.started"]);
    assert_eq!(ids(&page("session=s05").await), ["s05"], "the summary still reads");
    // Behind the same login as the view; a wrong cursor or session is a clear error.
    assert_eq!(send(&app, get("/ui/history", None)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&app, get("/ui/events?agent=bot-b&session=s05", None)).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        send(&app, get("/ui/events?agent=bot-b&session=nope", Some(&cookie))).await.status,
        StatusCode::NOT_FOUND
    );
    let bad = send(&app, get("/ui/events?agent=bot-b&session=s05&before=zz", Some(&cookie))).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.body);
    let bad = send(&app, get("/ui/history?since=yesterday", Some(&cookie))).await;
    assert_eq!((bad.status, bad.json()["error"].as_str()), (StatusCode::BAD_REQUEST, Some("invalid")), "{}", bad.body);
    let long = format!("/ui/history?text={}", "x".repeat(300));
    assert_eq!(send(&app, get(&long, Some(&cookie))).await.status, StatusCode::BAD_REQUEST);
}

fn urlencode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A hub's web view with an access list: each login sees its own tenant's sessions in the
/// history and their events, is told whose view it is, answers only its tenant's sessions
/// (and only with the answer role), and an edge's token cannot log in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_login_sees_and_answers_its_own_sessions_only() {
    use aep_receivers::access::{AccessEntry, Role};
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.server.token = TOKEN.into();
    let entry = |name: &str, tenant: &str, roles: &[Role]| AccessEntry {
        name: name.into(),
        tenant: tenant.into(),
        token: format!("{name}-token-0123456789"),
        roles: roles.to_vec(),
    };
    cfg.access = vec![
        entry("lap-a", "team-a", &[Role::Emit]),
        entry("lap-b", "team-b", &[Role::Emit]),
        entry("alice", "team-a", &[Role::View, Role::Answer]),
        entry("carol", "team-a", &[Role::View]),
        entry("bob", "team-b", &[Role::View, Role::Answer]),
    ];
    let stop = CancellationToken::new();
    let app = Daemon::build(cfg, stop.clone()).unwrap().app();
    let _stop = stop.drop_guard();
    // Each edge emits one session (its events claim it for the edge's tenant).
    for (edge, session) in [("lap-a", "sa"), ("lap-b", "sb")] {
        let e = json!({"aep": "0.1", "id": ulid::Ulid::new().to_string(), "type": "session.started",
            "time": "2026-12-07T10:00:00Z", "source": format!("aep://{edge}/agent/bot"), "agent": "bot",
            "session": session, "seq": 0, "data": {}});
        let auth = format!("Bearer {edge}-token-0123456789");
        let h = [("content-type", "application/json"), ("authorization", auth.as_str()), ("aep-version", "0.1")];
        let r = send(&app, post("/events", &h, e.to_string())).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.body);
    }
    // lap-b cannot write into team A's session.
    let e = json!({"aep": "0.1", "id": ulid::Ulid::new().to_string(), "type": "progress.status",
        "time": "2026-12-07T10:00:01Z", "source": "aep://lap-b/agent/bot", "agent": "bot", "session": "sa", "seq": 1,
        "data": {}});
    let h = [
        ("content-type", "application/json"),
        ("authorization", "Bearer lap-b-token-0123456789"),
        ("aep-version", "0.1"),
    ];
    let r = send(&app, post("/events", &h, e.to_string())).await;
    assert_eq!((r.status, r.json()["error"].as_str()), (StatusCode::FORBIDDEN, Some("unauthorized")), "{}", r.body);
    for session in ["sa", "sb"] {
        let log = dir.path().join(format!("logs/bot/{session}.jsonl"));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while common::log_lines(&log).is_empty() {
            assert!(std::time::Instant::now() < deadline, "the events never reached the log");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let login_as = |name: &'static str| {
        let app = app.clone();
        async move {
            let h = [("origin", ORIGIN), ("content-type", "application/x-www-form-urlencoded")];
            send(&app, post("/ui/login", &h, format!("token={name}-token-0123456789"))).await
        }
    };
    assert_eq!(login_as("lap-a").await.status, StatusCode::FORBIDDEN, "an edge's token is not a login");
    let bob = login_as("bob").await.cookie().expect("bob's session");
    let carol = login_as("carol").await.cookie().expect("carol's session");

    let me = send(&app, get("/ui/session", Some(&bob))).await.json();
    assert_eq!(
        (me["tenant"].as_str(), me["who"].as_str(), me["control"].as_bool()),
        (Some("team-b"), Some("bob"), Some(true))
    );
    let sessions = |r: Reply| -> Vec<String> {
        r.json()["sessions"].as_array().unwrap().iter().map(|s| s["session"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(sessions(send(&app, get("/ui/history", Some(&bob))).await), ["sb"]);
    assert_eq!(sessions(send(&app, get("/ui/history", Some(&carol))).await), ["sa"]);
    let other = send(&app, get("/ui/events?agent=bot&session=sa", Some(&bob))).await;
    assert_eq!(other.status, StatusCode::NOT_FOUND, "another tenant's session is not found: {}", other.body);
    assert_eq!(send(&app, get("/ui/events?agent=bot&session=sb", Some(&bob))).await.status, StatusCode::OK);

    // Bob answering in team A's session, or Carol (view only) anywhere: refused.
    let answer = |cookie: String, session: &'static str| {
        let app = app.clone();
        async move {
            let n = nonce(&app, &cookie).await;
            let h = [
                ("origin", ORIGIN),
                ("content-type", "application/json"),
                ("cookie", cookie.as_str()),
                ("x-aep-nonce", n.as_str()),
            ];
            let body =
                json!({"request": "01JREQ00000000000000000000", "session": session, "answer": {"option": "allow"}});
            send(&app, post("/ui/answer", &h, body.to_string())).await
        }
    };
    let r = answer(bob.clone(), "sa").await;
    assert_eq!((r.status, r.json()["error"].as_str()), (StatusCode::FORBIDDEN, Some("unauthorized")), "{}", r.body);
    let r = answer(carol.clone(), "sa").await;
    assert_eq!((r.status, r.json()["error"].as_str()), (StatusCode::FORBIDDEN, Some("unauthorized")), "{}", r.body);
    assert_eq!(send(&app, get("/ui/session", Some(&carol))).await.json()["control"], false);
}
