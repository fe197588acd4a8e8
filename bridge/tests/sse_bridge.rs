//! The OpenCode SSE bridge end to end against a real local HTTP server (127.0.0.1:0) that
//! serves a stream recorded from the real OpenCode 1.18.33 (`data/opencode-1.18.33-permission.sse`:
//! a session, a bash call asking permission, its reply, the idle boundary), with the
//! server's permission routes: `GET /permission` and `POST /session/{id}/permissions/{id}`,
//! which broadcasts `permission.replied` on the stream as the real server does.

use aep_testkit as common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::bridges::{BridgeConfig, BridgeMode};
use aep_bridge::transport::config::HttpUrl;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use common::*;
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "sse-bridge-token";
const RECORDED: &str = include_str!("data/opencode-1.18.33-permission.sse");

/// The recorded bus events, in order.
fn recorded() -> Vec<Value> {
    RECORDED.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

fn frame(ev: &Value) -> Bytes {
    Bytes::from(format!("data: {ev}\n\n"))
}

/// What the fake OpenCode server saw and holds.
#[derive(Default)]
struct Fake {
    /// The open stream connections (the newest last); `None` ends one.
    conns: Mutex<Vec<mpsc::UnboundedSender<Option<Bytes>>>>,
    /// `Last-Event-ID` of each connection.
    resumed_from: Mutex<Vec<Option<String>>>,
    /// Pending asks (`GET /permission`).
    pending: Mutex<Vec<Value>>,
    /// Reply bodies by path.
    replies: Mutex<Vec<(String, Value)>>,
    /// Frames sent on the stream once a pending ask is replied (the recorded tail).
    after_reply: Mutex<VecDeque<Bytes>>,
    /// The status of the reply route (200 unless a test breaks it).
    reply_status: Mutex<u16>,
    /// The next stream request is taken and never answered (a booting OpenCode does that).
    hang_next: std::sync::atomic::AtomicBool,
}

impl Fake {
    fn send(&self, b: Bytes) {
        if let Some(tx) = self.conns.lock().unwrap().last() {
            let _ = tx.send(Some(b));
        }
    }

    fn close(&self) {
        if let Some(tx) = self.conns.lock().unwrap().pop() {
            let _ = tx.send(None);
        }
    }

    fn connections(&self) -> usize {
        self.resumed_from.lock().unwrap().len()
    }
}

async fn event_stream(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<Option<Bytes>>();
    let last = headers.get("last-event-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.resumed_from.lock().unwrap().push(last);
    if f.hang_next.swap(false, std::sync::atomic::Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    let _ = tx.send(Some(frame(
        &json!({"id": format!("evt_connected_{}", f.connections()), "type": "server.connected", "properties": {}}),
    )));
    f.conns.lock().unwrap().push(tx);
    let body = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Some(Some(b)) => Some((Ok::<Bytes, std::io::Error>(b), rx)),
            _ => None,
        }
    });
    ([("content-type", "text/event-stream"), ("cache-control", "no-cache")], Body::from_stream(body)).into_response()
}

async fn list(State(f): State<Arc<Fake>>) -> Response {
    axum::Json(Value::Array(f.pending.lock().unwrap().clone())).into_response()
}

async fn reply(State(f): State<Arc<Fake>>, Path((sid, pid)): Path<(String, String)>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    f.replies.lock().unwrap().push((format!("/session/{sid}/permissions/{pid}"), body.clone()));
    let status = *f.reply_status.lock().unwrap();
    if status != 200 {
        return (StatusCode::from_u16(status).unwrap(), "broken").into_response();
    }
    let known = {
        let mut p = f.pending.lock().unwrap();
        let before = p.len();
        p.retain(|x| x["id"] != pid.as_str());
        p.len() != before
    };
    if !known {
        let e = json!({"_tag": "PermissionNotFoundError", "requestID": pid, "message": format!("Permission request not found: {pid}")});
        return (StatusCode::NOT_FOUND, axum::Json(e)).into_response();
    }
    // The real server broadcasts the settle before it answers.
    let tail: Vec<Bytes> = f.after_reply.lock().unwrap().drain(..).collect();
    for b in tail {
        f.send(b);
    }
    axum::Json(json!(true)).into_response()
}

async fn fake_server() -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake { reply_status: Mutex::new(200), ..Fake::default() });
    let app = Router::new()
        .route("/event", get(event_stream))
        .route("/permission", get(list))
        .route("/session/{sid}/permissions/{pid}", post(reply))
        .with_state(fake.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (fake, url)
}

fn bridge_cfg(url: &str, mode: BridgeMode, control: bool) -> BridgeConfig {
    BridgeConfig {
        url: Some(HttpUrl::parse(url).unwrap()),
        mode,
        control,
        reconnect_initial_ms: 20,
        reconnect_max_ms: 100,
        ..BridgeConfig::of("opencode", Value::Null)
    }
}

async fn bridge(url: &str, mode: BridgeMode, control: bool) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    cfg.capture.attention = aep_schemas::Capture::Metadata;
    cfg.bridges.insert("oc".into(), bridge_cfg(url, mode, control));
    (start(cfg).await, dir)
}

/// Waits for `pred` over the fake OpenCode server's records and the log file. A poll, not a
/// signal: the fake's request log and the observer's reconnects have no one notification.
async fn until(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !pred() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn log(dir: &std::path::Path, session: &str) -> Vec<Value> {
    aep_testkit::log_events(&dir.join("logs").join("opencode").join(format!("{session}.jsonl")))
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

use aep_testkit::WsStream;

/// A control sender on the collector's authenticated socket.
async fn phone(http: std::net::SocketAddr) -> WsStream {
    let mut req = format!("ws://{http}/socket").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let hello = json!({"type": "hello", "versions": ["0.1"], "role": "both", "identity": {"agent": "phone"}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    next(&mut ws, |v| v["type"] == "hello").await;
    let sub =
        json!({"type": "subscribe", "id": "all", "from": "all", "filter": {"type": ["attention.*", "control.*"]}});
    ws.send(Message::text(sub.to_string())).await.unwrap();
    next(&mut ws, |v| v["type"] == "subscribed").await;
    ws
}

use aep_testkit::ws_next as next;

async fn respond(ws: &mut WsStream, id: &str, req: &Value, answer: Value) {
    let capture = if answer.get("text").is_some() { "redacted" } else { "metadata" };
    let cmd = json!({"aep": "0.1", "id": id, "type": "control.attention.respond", "subject": req["id"], "cause": req["id"],
        "time": "2026-12-02T00:00:00.000Z", "source": "aep://phone/agent/phone", "agent": "phone", "capture": capture,
        "session": req["session"], "data": {"answer": answer}});
    ws.send(Message::text(cmd.to_string())).await.unwrap();
}

/// Splits the recording at the permission reply: (up to the ask, from the reply on).
fn halves() -> (Vec<Value>, Vec<Value>, Value) {
    let all = recorded();
    let at = all.iter().position(|e| e["type"] == "permission.replied").unwrap();
    let ask = all.iter().find(|e| e["type"] == "permission.asked").unwrap().clone();
    (all[..at].to_vec(), all[at..].to_vec(), ask)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_maps_the_recorded_session_and_answers_the_permission_over_the_reply_route() {
    let (fake, url) = fake_server().await;
    let (head, tail, ask) = halves();
    let session = ask["properties"]["sessionID"].as_str().unwrap().to_owned();
    let vendor_id = ask["properties"]["id"].as_str().unwrap().to_owned();
    fake.after_reply.lock().unwrap().extend(tail.iter().map(frame));
    let (b, dir) = bridge(&url, BridgeMode::Primary, true).await;
    let mut ws = phone(b.bound.http).await;
    until("the stream connection", || fake.connections() == 1).await;
    fake.pending.lock().unwrap().push(ask["properties"].clone());
    for ev in &head {
        fake.send(frame(ev));
    }
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!((req["agent"].as_str(), req["session"].as_str()), (Some("opencode"), Some(session.as_str())));
    assert_eq!(req["subject"], "bash");
    assert_eq!(req["data"]["respond_via"], json!(["control"]));
    assert_eq!(
        req["data"]["options"].as_array().unwrap().iter().map(|o| o["id"].clone()).collect::<Vec<_>>(),
        ["once", "always", "reject"]
    );
    // At the metadata ceiling the prompt is synthesized (AEP-0003 §9.2).
    assert_eq!(req["data"]["prompt"], "opencode requests permission: bash");
    assert_eq!(req["run"], "r1");

    // Free text cannot ride OpenCode's reply route: refused, the request stays pending.
    respond(&mut ws, "cmd-text", &req, json!({"text": "use ls instead"})).await;
    let nack = next(&mut ws, |v| v["type"] == "control.rejected").await;
    assert_eq!((nack["cause"].as_str(), nack["data"]["reason"].as_str()), (Some("cmd-text"), Some("invalid")));
    assert!(fake.replies.lock().unwrap().is_empty(), "nothing was written");

    respond(&mut ws, "cmd-once", &req, json!({"option": "once"})).await;
    let ack = next(&mut ws, |v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-once");
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    assert_eq!((answered["subject"].clone(), answered["cause"].as_str()), (req["id"].clone(), Some("cmd-once")));
    assert_eq!(answered["data"]["answer"], json!({"option": "once"}));
    assert_eq!(answered["data"]["via"], "control");
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!((resolved["subject"].clone(), resolved["cause"].clone()), (req["id"].clone(), answered["id"].clone()));
    assert_eq!(resolved["data"]["resolution"], "answered");
    assert_eq!(
        fake.replies.lock().unwrap().clone(),
        [(format!("/session/{session}/permissions/{vendor_id}"), json!({"response": "once"}))]
    );
    // A second answer finds nothing pending.
    respond(&mut ws, "cmd-late", &req, json!({"option": "reject"})).await;
    let late = next(&mut ws, |v| v["type"] == "control.rejected" && v["cause"] == "cmd-late").await;
    assert_eq!(late["data"]["reason"], "invalid");

    until("run.finished and the late nack in the log", || {
        let events = log(&b.data, &session);
        types(&events).contains(&"run.finished") && events.iter().any(|e| e["cause"] == "cmd-late")
    })
    .await;
    // One read for both the order and the validation: the recorded tail's frames after
    // session.idle are still being logged (x.opencode.*), so two reads can differ in length.
    let path = b.data.join("logs/opencode").join(format!("{session}.jsonl"));
    let lines = aep_testkit::log_lines(&path);
    let events = aep_testkit::parse_lines(&path, &lines);
    // The late nack races the recorded tail: everything else is in the stream's order.
    let core: Vec<&str> = events
        .iter()
        .filter(|e| e["cause"] != "cmd-late")
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| !t.starts_with("x."))
        .collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "progress.status",
            "progress.status",
            "tool.requested",
            "attention.requested",
            "control.rejected",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "tool.completed",
            "progress.status",
            "progress.status",
            "progress.status",
            "progress.status",
            "run.finished",
        ]
    );
    let run_started = events.iter().find(|e| e["type"] == "run.started").unwrap();
    let finished = events.iter().find(|e| e["type"] == "run.finished").unwrap();
    assert_eq!((finished["run"].clone(), finished["cause"].clone()), (json!("r1"), run_started["id"].clone()));
    // The stream's tool parts are the tool plane: one request, one outcome caused by it.
    let requested = events.iter().find(|e| e["type"] == "tool.requested").unwrap();
    let completed = events.iter().find(|e| e["type"] == "tool.completed").unwrap();
    assert_eq!(requested["data"]["tool"], json!({"name": "bash", "call_id": ask["properties"]["tool"]["callID"]}));
    assert_eq!(
        (completed["data"]["tool"].clone(), completed["cause"].clone()),
        (requested["data"]["tool"].clone(), requested["id"].clone())
    );
    // The other parts (step start/finish, text) stay machinery at debug.
    assert!(events.iter().any(|e| e["type"] == "x.opencode.message.part.updated" && e["severity"] == "debug"));
    // Every line is a valid event in a valid stream order (what `aep-bridge validate` checks).
    let text = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    let (n, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
    assert_eq!((n, failures.len()), (events.len(), 0), "{failures:?}");
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_reconnects_resumes_and_drops_what_the_server_replays() {
    let (fake, url) = fake_server().await;
    let (head, _, _) = halves();
    let session = head[1]["properties"]["sessionID"].as_str().unwrap().to_owned();
    let (b, dir) = bridge(&url, BridgeMode::Primary, false).await;
    until("the first connection", || fake.connections() == 1).await;
    let user = head.iter().position(|e| e["type"] == "message.updated").unwrap();
    // The frames carry an SSE id here (the OpenCode server sends none): the resume point.
    for (i, ev) in head[..=user].iter().enumerate() {
        fake.send(Bytes::from(format!("id: {i}\ndata: {ev}\n\n")));
    }
    // An oversized frame is dropped whole, the stream goes on.
    fake.send(Bytes::from(format!("data: {{\"pad\":\"{}\"}}\n\n", "x".repeat(5 << 20))));
    until("run.started", || types(&log(&b.data, &session)).contains(&"run.started")).await;
    fake.close();
    until("the second connection", || fake.connections() == 2).await;
    assert_eq!(fake.resumed_from.lock().unwrap()[1].as_deref(), Some(user.to_string().as_str()));
    // The server replays the user message (same bus id) and goes on; nothing doubles.
    for ev in &head[user..] {
        fake.send(frame(ev));
    }
    // Primary drives the todo snapshot diff itself (the policy maps `todo.updated` to nothing).
    let todo = |status: &str| {
        json!({"type": "todo.updated", "properties": {"sessionID": session,
        "todos": [{"id": "t1", "content": "write it", "status": status, "priority": "high"}]}})
    };
    fake.send(frame(&todo("pending")));
    fake.send(frame(&todo("completed")));
    fake.send(frame(&json!({"id": "evt_idle_test", "type": "session.idle", "properties": {"sessionID": session}})));
    until("run.finished", || types(&log(&b.data, &session)).contains(&"run.finished")).await;
    let events = log(&b.data, &session);
    let t = types(&events);
    assert_eq!(t.iter().filter(|t| **t == "session.started").count(), 1);
    assert_eq!(t.iter().filter(|t| **t == "run.started").count(), 1, "{t:?}");
    let tasks: Vec<(&str, &str, &str)> = events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("progress.task."))
        .map(|e| (e["type"].as_str().unwrap(), e["subject"].as_str().unwrap(), e["run"].as_str().unwrap()))
        .collect();
    assert_eq!(tasks, [("progress.task.planned", "t1", "r1"), ("progress.task.completed", "t1", "r1")]);
    // Read-only (no gate): the ask carries no answer affordance (AEP-0008, the fixture's pin).
    let req = events.iter().find(|e| e["type"] == "attention.requested").unwrap();
    assert!(req["data"].get("options").is_none() && req["data"].get("respond_via").is_none(), "{req}");
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn companion_emits_no_core_type_and_a_resync_raises_asks_missed_while_away() {
    let (fake, url) = fake_server().await;
    let (head, _, ask) = halves();
    let session = ask["properties"]["sessionID"].as_str().unwrap().to_owned();
    // Companion: channel visibility only.
    let (b, dir) = bridge(&url, BridgeMode::Companion, false).await;
    until("a connection", || fake.connections() == 1).await;
    for ev in &head {
        fake.send(frame(ev));
    }
    until("the ask", || types(&log(&b.data, &session)).contains(&"x.opencode.permission.asked")).await;
    let events = log(&b.data, &session);
    assert!(events.iter().all(|e| e["type"].as_str().unwrap().starts_with("x.opencode.")), "{:?}", types(&events));
    b.shutdown().await;
    drop(dir);

    // Primary with the gate: an ask pending before the bridge attached is raised from the
    // server's own list at connect; the server refusing the reply is a `refused` nack.
    let (fake, url) = fake_server().await;
    fake.pending.lock().unwrap().push(ask["properties"].clone());
    *fake.reply_status.lock().unwrap() = 500;
    let (b, dir) = bridge(&url, BridgeMode::Primary, true).await;
    let mut ws = phone(b.bound.http).await;
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!(req["session"].as_str(), Some(session.as_str()));
    respond(&mut ws, "cmd-1", &req, json!({"option": "always"})).await;
    let nack = next(&mut ws, |v| v["type"] == "control.rejected").await;
    assert_eq!((nack["cause"].as_str(), nack["data"]["reason"].as_str()), (Some("cmd-1"), Some("refused")));
    // Settled while the bridge was away: the next connect's resync closes it.
    fake.pending.lock().unwrap().clear();
    fake.close();
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!(
        (resolved["subject"].clone(), resolved["data"]["resolution"].as_str()),
        (req["id"].clone(), Some("dismissed"))
    );
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_companion_beside_the_plugin_adds_nothing_twice() {
    // The plugin inside the server forwards every bus event naming a session; the companion
    // on the same server's stream sees them too, whichever channel is first.
    let (fake, url) = fake_server().await;
    let (head, _, ask) = halves();
    let session = ask["properties"]["sessionID"].as_str().unwrap().to_owned();
    let (b, dir) = bridge(&url, BridgeMode::Companion, false).await;
    until("a connection", || fake.connections() == 1).await;
    let to = format!("{}/hooks/opencode/bus", b.url());
    let auth = vec![("authorization".to_owned(), format!("Bearer {TOKEN}"))];
    let named: Vec<&Value> =
        head.iter().filter(|e| aep_adapters::vendors::opencode::bus_session(e).is_some()).collect();
    for (i, ev) in named.iter().enumerate() {
        // The stream first for half of them, the plugin first for the others.
        if i % 2 == 0 {
            fake.send(frame(ev));
        }
        let (st, _) = common::post(to.clone(), json!({"kind": "bus", "event": ev}).to_string(), auth.clone()).await;
        assert_eq!(st, 200);
        if i % 2 == 1 {
            fake.send(frame(ev));
        }
    }
    // A session no plugin call names: the companion's own visibility, after its grace.
    let other = json!({"id": "evt_other", "type": "session.updated", "properties": {"sessionID": "ses_other", "info": {"id": "ses_other"}}});
    fake.send(frame(&other));
    until("the companion's event of the session no plugin names", || !log(&b.data, "ses_other").is_empty()).await;
    let events = log(&b.data, &session);
    let mut by_type: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &events {
        *by_type.entry(e["type"].as_str().unwrap()).or_default() += 1;
    }
    let mut want: std::collections::BTreeMap<&str, usize> = Default::default();
    for ev in &named {
        let ty = match ev["type"].as_str().unwrap() {
            "session.created" => "session.started",
            "permission.asked" => "attention.requested",
            "session.status" => "progress.status",
            "message.updated" if ev["properties"]["info"]["role"] == "user" => "run.started",
            "message.updated" => "x.opencode.message.updated",
            "message.part.updated" if ev["properties"]["part"]["type"] == "tool" => "tool.requested",
            other => Box::leak(format!("x.opencode.{other}").into_boxed_str()),
        };
        *want.entry(ty).or_default() += 1;
    }
    // The user message re-sent after the turn opens nothing; a part update requests once.
    let got: std::collections::BTreeMap<&str, usize> =
        by_type.iter().filter(|(t, _)| t.starts_with("x.")).map(|(t, n)| (*t, *n)).collect();
    let want_x: std::collections::BTreeMap<&str, usize> =
        want.iter().filter(|(t, _)| t.starts_with("x.")).map(|(t, n)| (*t, *n)).collect();
    assert_eq!(got, want_x, "one x.opencode.* per bus event, the plugin's");
    assert_eq!(by_type.get("session.started"), Some(&1));
    assert_eq!(log(&b.data, "ses_other").len(), 1);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_or_goes_silent_is_reconnected() {
    let (fake, url) = fake_server().await;
    fake.hang_next.store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    let mut b = bridge_cfg(&url, BridgeMode::Primary, false);
    (b.timeout_ms, b.idle_timeout_ms) = (300, 400);
    cfg.bridges.insert("oc".into(), b);
    let b = start(cfg).await;
    // The first request hangs: retried after timeout_ms; the second stream then stays silent
    // (the fake sends one frame and nothing after): reconnected after idle_timeout_ms.
    until("a retry after the unanswered request", || fake.connections() >= 2).await;
    until("a reconnect after the silent stream", || fake.connections() >= 3).await;
    b.shutdown().await;
}

/// The plugin channel on the live server: OpenCode 1.18.33 never fires the held
/// `permission.ask`, it asks on the bus; the plugin forwards that (with `serverUrl`) and the
/// bridge answers over the same reply route. This test plays the plugin with the recorded
/// bus events and its tool moments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_plugins_bus_ask_is_answered_over_the_reply_route_between_its_tool_moments() {
    let (fake, url) = fake_server().await;
    let (head, _, ask) = halves();
    let session = ask["properties"]["sessionID"].as_str().unwrap().to_owned();
    let call = ask["properties"]["tool"]["callID"].as_str().unwrap().to_owned();
    fake.pending.lock().unwrap().push(ask["properties"].clone());
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    let b = start(cfg).await;
    let mut ws = phone(b.bound.http).await;
    let hook = |moment: &'static str, body: Value| {
        let to = format!("{}/hooks/opencode/{moment}", b.url());
        async move {
            let auth = vec![("authorization".to_owned(), format!("Bearer {TOKEN}"))];
            common::post(to, body.to_string(), auth).await
        }
    };
    let bus = |ev: &Value, server: Option<&str>| {
        let mut body = json!({"kind": "bus", "event": ev});
        if let Some(s) = server {
            body["serverUrl"] = json!(format!("{s}/"));
        }
        body
    };
    for ev in head.iter().filter(|e| matches!(e["type"].as_str(), Some("session.created" | "message.updated"))) {
        let (st, _) = hook("bus", bus(ev, Some(&url))).await;
        assert_eq!(st, 200);
    }
    let before = json!({"kind": "tool.before", "input": {"tool": "bash", "sessionID": session, "callID": call},
        "output": {"args": {"command": "echo e2e-ok"}}});
    assert_eq!(hook("tool.before", before).await.0, 200);
    assert_eq!(hook("bus", bus(&ask, Some(&url))).await.0, 200);
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!(req["data"]["respond_via"], json!(["control"]));
    respond(&mut ws, "cmd-plugin", &req, json!({"option": "always"})).await;
    let ack = next(&mut ws, |v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-plugin");
    let vendor_id = ask["properties"]["id"].as_str().unwrap();
    assert_eq!(fake.replies.lock().unwrap()[0].1, json!({"response": "always"}));
    // The plugin forwards the server's settle broadcast.
    let replied = json!({"id": "evt_replied", "type": "permission.replied",
        "properties": {"sessionID": session, "requestID": vendor_id, "reply": "always"}});
    assert_eq!(hook("bus", bus(&replied, Some(&url))).await.0, 200);
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    assert_eq!((answered["cause"].as_str(), answered["data"]["via"].as_str()), (Some("cmd-plugin"), Some("control")));
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!((resolved["subject"].clone(), resolved["cause"].clone()), (req["id"].clone(), answered["id"].clone()));
    let after = json!({"kind": "tool.after", "input": {"tool": "bash", "sessionID": session, "callID": call},
        "output": {"title": "echo", "output": "e2e-ok\n", "metadata": {}}});
    assert_eq!(hook("tool.after", after).await.0, 200);

    until("tool.completed", || types(&log(&b.data, &session)).contains(&"tool.completed")).await;
    let events = log(&b.data, &session);
    let core: Vec<&str> = types(&events).into_iter().filter(|t| !t.starts_with("x.")).collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "attention.requested",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "tool.completed"
        ]
    );
    let text = std::fs::read_to_string(b.data.join("logs/opencode").join(format!("{session}.jsonl"))).unwrap();
    let (_, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
    assert!(failures.is_empty(), "{failures:?}");

    // A plugin naming no server (or a non-loopback one): nothing here can answer the ask.
    let mut other = ask.clone();
    other["properties"]["id"] = json!("per_other");
    assert_eq!(hook("bus", bus(&other, Some("http://192.0.2.1:4096"))).await.0, 200);
    let oob = next(&mut ws, |v| v["type"] == "attention.requested" && v["id"] != req["id"]).await;
    assert_eq!(oob["data"]["respond_via"], json!(["oob"]));
    // Raised on the route, then the session ends: both still-open asks are closed before
    // `session.ended` (AEP-0002 §7.2), and the routed one takes no command any more.
    let mut third = ask.clone();
    third["properties"]["id"] = json!("per_third");
    assert_eq!(hook("bus", bus(&third, Some(&url))).await.0, 200);
    let routed = next(&mut ws, |v| {
        v["type"] == "attention.requested" && v["data"]["respond_via"] == json!(["control"]) && v["id"] != req["id"]
    })
    .await;
    let deleted = json!({"type": "session.deleted", "properties": {"sessionID": session, "info": {"id": session}}});
    assert_eq!(hook("bus", bus(&deleted, Some(&url))).await.0, 200);
    for _ in 0..2 {
        let r = next(&mut ws, |v| v["type"] == "attention.resolved" && v["data"]["resolution"] == "dismissed").await;
        assert!(r["subject"] == oob["id"] || r["subject"] == routed["id"], "{r}");
    }
    until("session.ended", || types(&log(&b.data, &session)).last() == Some(&"session.ended")).await;
    assert_eq!(fake.replies.lock().unwrap().len(), 1, "nothing more was written");
    b.shutdown().await;
    drop(dir);
}
