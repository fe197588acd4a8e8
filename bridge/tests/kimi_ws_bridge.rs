//! The Kimi Code `kimi web` bridge end to end against a real local kap-server stand-in
//! (127.0.0.1:0, axum's WebSocket on tokio-tungstenite) that speaks the 0.28 wire: the
//! `/api/v1/ws` upgrade (bearer header or `kimi-code.bearer.<token>` subprotocol),
//! `server_hello`, `subscribe` with per-session `{seq, epoch}` cursors answered by a replay
//! then an `ack`, `resync_required`, the session list and the approval route
//! (`{code, msg, data}` envelopes). The frames are recorded from the real
//! `@moonshot-ai/kimi-code` 0.28.0 `kimi web` (`data/kimi-code-0.28.0-web-approval.jsonl`: a
//! prompt whose Bash call asked approval, approved over REST, then ran); the question loop
//! is written from the design record's shapes.

use aep_testkit as common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::bridges::{BridgeConfig, BridgeMode};
use aep_bridge::transport::config::HttpUrl;
use axum::Router;
use axum::extract::ws::{Message as AxMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use common::*;
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "kimi-bridge-token";
const SERVER_TOKEN: &str = "kap-server-token";
const RECORDED: &str = include_str!("data/kimi-code-0.28.0-web-approval.jsonl");
/// The same prompt, the approval rejected with feedback over REST: Kimi still starts the
/// call and answers it with an error ("was not run because the user rejected ...").
const REJECTED: &str = include_str!("data/kimi-code-0.28.0-web-rejected.jsonl");
const SESSION: &str = "session_test_1";

/// The recorded envelopes, moved to `session`.
fn recorded(session: &str) -> Vec<Value> {
    recording(RECORDED, session)
}

fn recording(text: &str, session: &str) -> Vec<Value> {
    text.lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            v["session_id"] = json!(session);
            v["epoch"] = json!("ep_test");
            v["payload"]["sessionId"] = json!(session);
            if v["payload"].get("session_id").is_some() {
                v["payload"]["session_id"] = json!(session);
            }
            v
        })
        .collect()
}

/// What a connection is told to do.
enum Cmd {
    Frame(Value),
    Close,
}

/// The kap-server stand-in.
#[derive(Default)]
struct Fake {
    /// Listed sessions.
    sessions: Mutex<Vec<String>>,
    /// Durable frames per session (the journal), in order.
    journal: Mutex<HashMap<String, Vec<Value>>>,
    epoch: Mutex<String>,
    /// Each connection's command channel (the newest last).
    conns: Mutex<Vec<mpsc::UnboundedSender<Cmd>>>,
    /// Every `subscribe` frame received and answered (replay and `ack` sent).
    subscribes: Mutex<Vec<Value>>,
    /// Upgrade credentials: (authorization header, subprotocol).
    auth: Mutex<Vec<(Option<String>, Option<String>)>>,
    /// Approval route calls: (path, body).
    decisions: Mutex<Vec<(String, Value)>>,
    /// The envelope code the approval route answers (0 unless a test breaks it).
    decision_code: Mutex<i64>,
    /// Pending asks by route (`approvals`, `questions`): (session, wire item), kept as the
    /// server keeps them (raised by `event.*.requested`, dropped when resolved).
    pending: Mutex<Vec<(String, String, Value)>>,
    /// Frames published once an approval is decided (the recorded tail).
    after_decision: Mutex<Vec<Value>>,
    /// The replay starts this many frames before the cursor (a server replaying too much).
    overlap: AtomicUsize,
    upgrades: AtomicUsize,
    /// Session list reads.
    lists: AtomicUsize,
    /// The REST side stops answering (a server shutting down).
    rest_gone: AtomicBool,
    /// Close frames received from the bridge.
    client_closes: AtomicUsize,
    /// Woken whenever a request, a connection or a frame from the bridge changed the above.
    changed: tokio::sync::Notify,
    /// The next connection goes silent right after its hello.
    silent_next: AtomicBool,
}

impl Fake {
    /// Appends a durable frame to its session's journal (numbered `seq` as given) and sends
    /// it (or a volatile one) to every connection.
    fn publish(&self, frame: Value) {
        let p = &frame["payload"];
        let sid = frame["session_id"].as_str().unwrap_or("").to_owned();
        match frame["type"].as_str().unwrap_or("") {
            "event.approval.requested" => self.pending.lock().unwrap().push(("approvals".into(), sid, p.clone())),
            "event.question.requested" => self.pending.lock().unwrap().push(("questions".into(), sid, p.clone())),
            "event.approval.resolved" => self.settle("approval_id", p),
            "event.question.answered" | "event.question.dismissed" => self.settle("question_id", p),
            _ => {}
        }
        if frame.get("volatile").and_then(Value::as_bool) != Some(true) {
            let sid = frame["session_id"].as_str().unwrap().to_owned();
            self.journal.lock().unwrap().entry(sid).or_default().push(frame.clone());
        }
        for tx in self.conns.lock().unwrap().iter() {
            let _ = tx.send(Cmd::Frame(frame.clone()));
        }
    }

    fn settle(&self, key: &str, p: &Value) {
        self.pending.lock().unwrap().retain(|(_, _, item)| item[key] != p[key]);
    }

    fn tell(&self, cmd: Cmd) {
        if let Some(tx) = self.conns.lock().unwrap().last() {
            let _ = tx.send(cmd);
        }
    }

    fn upgrades(&self) -> usize {
        self.upgrades.load(Ordering::SeqCst)
    }

    fn subscribes(&self) -> Vec<Value> {
        self.subscribes.lock().unwrap().clone()
    }
}

fn envelope(code: i64, msg: &str, data: Value) -> Response {
    axum::Json(json!({"code": code, "msg": msg, "data": data, "request_id": "req_test"})).into_response()
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&format!("Bearer {SERVER_TOKEN}"))
}

async fn upgrade(State(f): State<Arc<Fake>>, headers: HeaderMap, ws: WebSocketUpgrade) -> Response {
    let header = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let proto = headers.get("sec-websocket-protocol").and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.auth.lock().unwrap().push((header.clone(), proto.clone()));
    f.changed.notify_waiters();
    let bearer = format!("kimi-code.bearer.{SERVER_TOKEN}");
    if !authorized(&headers) && proto.as_deref() != Some(bearer.as_str()) {
        return (StatusCode::UNAUTHORIZED, "").into_response();
    }
    f.upgrades.fetch_add(1, Ordering::SeqCst);
    f.changed.notify_waiters();
    let silent = f.silent_next.swap(false, Ordering::SeqCst);
    ws.protocols([bearer]).on_upgrade(move |socket| connection(f, socket, silent))
}

/// One connection: hello, then subscribe/replay/ack and the frames the test publishes.
async fn connection(f: Arc<Fake>, mut socket: WebSocket, silent: bool) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    f.conns.lock().unwrap().push(tx);
    let hello = json!({"type": "server_hello", "timestamp": "2026-12-02T17:35:03.288Z",
        "payload": {"ws_connection_id": "conn_test", "protocol_version": 2, "max_event_buffer_size": 1000,
        "capabilities": {"event_batching": false, "compression": false}}});
    if socket.send(AxMessage::text(hello.to_string())).await.is_err() {
        return;
    }
    if silent {
        // Holds the connection: reads nothing (no pong), writes nothing.
        std::future::pending::<()>().await;
    }
    let mut subscribed: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            m = socket.recv() => {
                let Some(Ok(AxMessage::Text(t))) = m else {
                    match m {
                        Some(Ok(AxMessage::Close(_))) => {
                            f.client_closes.fetch_add(1, Ordering::SeqCst);
                            f.changed.notify_waiters();
                            return;
                        }
                        Some(Ok(_)) => continue,
                        _ => return,
                    }
                };
                let frame: Value = serde_json::from_str(t.as_str()).unwrap();
                if frame["type"] != "subscribe" {
                    continue;
                }
                for out in subscribe(&f, &frame, &mut subscribed) {
                    if socket.send(AxMessage::text(out.to_string())).await.is_err() {
                        return;
                    }
                }
                // Kept once answered: a test that sees it may publish, and the frame goes out live.
                f.subscribes.lock().unwrap().push(frame.clone());
                f.changed.notify_waiters();
            }
            c = rx.recv() => match c {
                Some(Cmd::Frame(v)) => {
                    let sid = v["session_id"].as_str().unwrap_or("");
                    let global = v["type"].as_str().is_some_and(|t| t.starts_with("event.session.") || t == "session.meta.updated");
                    let to_us = subscribed.contains(sid) || (global && !subscribed.is_empty());
                    if to_us && socket.send(AxMessage::text(v.to_string())).await.is_err() {
                        return;
                    }
                }
                Some(Cmd::Close) | None => return,
            }
        }
    }
}

/// The kap-server's subscribe: per session a replay after the cursor (or
/// `resync_required` for another epoch), then one `ack`.
fn subscribe(f: &Fake, frame: &Value, subscribed: &mut HashSet<String>) -> Vec<Value> {
    let listed: Vec<String> = f.sessions.lock().unwrap().clone();
    let epoch = f.epoch.lock().unwrap().clone();
    let journal = f.journal.lock().unwrap();
    let (mut out, mut accepted, mut not_found, mut resync, mut cursors) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), serde_json::Map::new());
    for sid in frame["payload"]["session_ids"].as_array().unwrap() {
        let sid = sid.as_str().unwrap().to_owned();
        if !listed.contains(&sid) {
            not_found.push(sid);
            continue;
        }
        let frames = journal.get(&sid).cloned().unwrap_or_default();
        let current = frames.last().and_then(|v| v["seq"].as_u64()).unwrap_or(0);
        if let Some(c) = frame["payload"]["cursors"].get(&sid) {
            if c.get("epoch").is_some_and(|e| e != epoch.as_str()) {
                out.push(json!({"type": "resync_required", "timestamp": "2026-12-02T17:40:00.000Z",
                    "payload": {"session_id": sid, "reason": "epoch_changed", "current_seq": current, "epoch": epoch}}));
                resync.push(sid.clone());
            } else {
                let from = c["seq"].as_u64().unwrap();
                let start = frames.iter().position(|v| v["seq"].as_u64().unwrap() > from).unwrap_or(frames.len());
                let start = start.saturating_sub(f.overlap.load(Ordering::SeqCst));
                out.extend(frames[start..].iter().cloned());
            }
        }
        cursors.insert(sid.clone(), json!({"seq": current, "epoch": epoch}));
        subscribed.insert(sid.clone());
        accepted.push(sid);
    }
    out.push(json!({"type": "ack", "id": frame["id"], "code": 0, "msg": "success",
        "payload": {"accepted": accepted, "not_found": not_found, "resync_required": resync, "cursors": cursors}}));
    out
}

async fn list(State(f): State<Arc<Fake>>, headers: HeaderMap, Query(q): Query<HashMap<String, String>>) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "").into_response();
    }
    // As the 0.28 schema: 1..=100, a validation envelope otherwise.
    if q.get("page_size").and_then(|p| p.parse::<u32>().ok()).is_some_and(|p| !(1..=100).contains(&p)) {
        return envelope(40001, "page_size: Too big", Value::Null);
    }
    // Read before counting: a test that saw the count may change the list for the next one.
    let items: Vec<Value> = f.sessions.lock().unwrap().iter().map(|id| json!({"id": id, "title": ""})).collect();
    f.lists.fetch_add(1, Ordering::SeqCst);
    f.changed.notify_waiters();
    if f.rest_gone.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    envelope(0, "success", json!({"items": items, "has_more": false}))
}

async fn decide(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path((sid, aid)): Path<(String, String)>,
    body: String,
) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "").into_response();
    }
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    f.decisions.lock().unwrap().push((format!("/api/v1/sessions/{sid}/approvals/{aid}"), body));
    f.changed.notify_waiters();
    let code = *f.decision_code.lock().unwrap();
    if code != 0 {
        return envelope(code, &format!("approval {aid} already resolved"), json!({"resolved": false}));
    }
    // The real server broadcasts the resolution as the decision lands.
    let tail: Vec<Value> = f.after_decision.lock().unwrap().drain(..).collect();
    for v in tail {
        f.publish(v);
    }
    envelope(0, "success", json!({"resolved": true, "resolved_at": "2026-12-02T17:35:43.134Z"}))
}

async fn pending_list(
    State(f): State<Arc<Fake>>,
    headers: HeaderMap,
    Path((sid, route)): Path<(String, String)>,
) -> Response {
    if !authorized(&headers) {
        return (StatusCode::UNAUTHORIZED, "").into_response();
    }
    let items: Vec<Value> = f
        .pending
        .lock()
        .unwrap()
        .iter()
        .filter(|(r, s, _)| *r == route && *s == sid)
        .map(|(_, _, i)| i.clone())
        .collect();
    envelope(0, "success", json!({"items": items}))
}

async fn fake_server() -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake::default());
    *fake.epoch.lock().unwrap() = "ep_test".into();
    let app = Router::new()
        .route("/api/v1/ws", get(upgrade))
        .route("/api/v1/sessions", get(list))
        .route("/api/v1/sessions/{sid}/{route}", get(pending_list))
        .route("/api/v1/sessions/{sid}/approvals/{aid}", post(decide))
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
        ..BridgeConfig::of("kimi-code", json!({"token": SERVER_TOKEN, "poll_ms": 100}))
    }
}

async fn bridge(b: BridgeConfig) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    cfg.capture.attention = aep_schemas::Capture::Metadata;
    cfg.bridges.insert("kimi".into(), b);
    (start(cfg).await, dir)
}

/// Waits until `pred` holds, asking again each time the fake server saw something or the
/// bridge's log moved on.
async fn until(fake: &Fake, b: &Running, what: &str, mut pred: impl FnMut() -> bool) {
    let mut logged = b.bound.progress.get("jsonl").expect("the JSONL log is off").subscribe();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Both registered before looking, so a change made while looking still wakes.
        let changed = fake.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        logged.borrow_and_update();
        if pred() {
            return;
        }
        let woke = tokio::time::timeout_at(deadline, async {
            tokio::select! {
                () = &mut changed => {}
                Ok(()) = logged.changed() => {}
            }
        })
        .await;
        assert!(woke.is_ok(), "timed out waiting for {what}");
    }
}

fn log(dir: &std::path::Path, session: &str) -> Vec<Value> {
    aep_testkit::log_events(&dir.join("logs").join("kimi-code").join(format!("{session}.jsonl")))
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn core(events: &[Value]) -> Vec<&str> {
    types(events).into_iter().filter(|t| !t.starts_with("x.")).collect()
}

fn validate(dir: &std::path::Path, session: &str) {
    let path = dir.join("logs/kimi-code").join(format!("{session}.jsonl"));
    let text = std::fs::read_to_string(path).unwrap();
    let (_, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
    assert!(failures.is_empty(), "{failures:?}");
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

/// The recording split after the approval request: (up to it, the rest).
fn halves(session: &str) -> (Vec<Value>, Vec<Value>) {
    let all = recorded(session);
    let at = all.iter().position(|e| e["type"] == "event.approval.requested").unwrap() + 1;
    (all[..at].to_vec(), all[at..].to_vec())
}

/// A frame of `session` numbered after its journal (the question loop's shapes).
fn numbered(fake: &Fake, session: &str, ty: &str, payload: Value) -> Value {
    let seq = fake.journal.lock().unwrap().get(session).and_then(|j| j.last()).and_then(|v| v["seq"].as_u64());
    let mut p = payload;
    p["type"] = json!(ty);
    p["sessionId"] = json!(session);
    p["agentId"] = json!("main");
    json!({"type": ty, "seq": seq.unwrap_or(0) + 1, "session_id": session, "timestamp": "2026-12-02T17:36:00.000Z",
        "payload": p, "epoch": "ep_test"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_maps_the_recorded_session_and_answers_the_approval_over_rest() {
    let (fake, url) = fake_server().await;
    let (head, tail) = halves(SESSION);
    fake.after_decision.lock().unwrap().extend(tail);
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Primary, true)).await;
    let mut ws = phone(b.bound.http).await;
    until(&fake, &b, "the first listing", || fake.lists.load(Ordering::SeqCst) >= 1).await;
    // Both credentials the kap-server takes ride the upgrade.
    let (header, proto) = fake.auth.lock().unwrap()[0].clone();
    assert_eq!(header.as_deref(), Some(format!("Bearer {SERVER_TOKEN}").as_str()));
    assert_eq!(proto.as_deref(), Some(format!("kimi-code.bearer.{SERVER_TOKEN}").as_str()));
    // The session appears after the first listing: it is followed from its start (a replay).
    for f in head {
        fake.publish(f);
    }
    fake.sessions.lock().unwrap().push(SESSION.into());
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    let sub = fake.subscribes().into_iter().find(|s| s["payload"]["session_ids"] == json!([SESSION])).unwrap();
    assert_eq!(sub["payload"]["cursors"][SESSION], json!({"seq": 0}));
    assert_eq!((req["agent"].as_str(), req["session"].as_str()), (Some("kimi-code"), Some(SESSION)));
    assert_eq!(req["data"]["kind"], "permission");
    assert_eq!(req["data"]["respond_via"], json!(["control"]));
    assert_eq!(
        req["data"]["options"].as_array().unwrap().iter().map(|o| o["id"].clone()).collect::<Vec<_>>(),
        ["approved", "rejected"]
    );
    assert_eq!(req["run"], "turn_0");
    // At the metadata ceiling the prompt is synthesized (AEP-0003 §9.2).
    assert_eq!(req["data"]["prompt"], "kimi-code requests permission: Bash");

    // An option the request does not offer is refused; nothing is written.
    respond(&mut ws, "cmd-bad", &req, json!({"option": "once"})).await;
    let nack = next(&mut ws, |v| v["type"] == "control.rejected").await;
    assert_eq!((nack["cause"].as_str(), nack["data"]["reason"].as_str()), (Some("cmd-bad"), Some("invalid")));
    assert!(fake.decisions.lock().unwrap().is_empty());

    respond(&mut ws, "cmd-ok", &req, json!({"option": "approved"})).await;
    let ack = next(&mut ws, |v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-ok");
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    assert_eq!((answered["subject"].clone(), answered["cause"].as_str()), (req["id"].clone(), Some("cmd-ok")));
    assert_eq!(
        (answered["data"]["answer"].clone(), answered["data"]["via"].as_str()),
        (json!({"option": "approved"}), Some("control"))
    );
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!((resolved["subject"].clone(), resolved["cause"].clone()), (req["id"].clone(), answered["id"].clone()));
    let approval = "call_e2e5c3eeb7755814af2";
    assert_eq!(
        fake.decisions.lock().unwrap().clone(),
        [(format!("/api/v1/sessions/{SESSION}/approvals/{approval}"), json!({"decision": "approved"}))]
    );
    // A second answer finds nothing pending.
    respond(&mut ws, "cmd-late", &req, json!({"option": "rejected"})).await;
    let late = next(&mut ws, |v| v["type"] == "control.rejected" && v["cause"] == "cmd-late").await;
    assert_eq!(late["data"]["reason"], "invalid");

    // The recording goes on after turn.ended (a work_changed, then prompt.completed): its
    // last frame logged means every earlier one is (one connection, mapped in order).
    until(&fake, &b, "the recording's last frame", || {
        types(&log(&b.data, SESSION)).contains(&"x.kimi-code.web.prompt.completed")
    })
    .await;
    until(&fake, &b, "the late nack", || log(&b.data, SESSION).iter().any(|e| e["cause"] == "cmd-late")).await;
    let events = log(&b.data, SESSION);
    let c: Vec<&str> = events
        .iter()
        .filter(|e| e["cause"] != "cmd-late")
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| !t.starts_with("x."))
        .collect();
    assert_eq!(
        c,
        [
            "run.started",
            "attention.requested",
            "control.rejected",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "tool.requested",
            "tool.completed",
            "run.finished",
        ]
    );
    // The run is the vendor's turn; the tool pair is joined by call id (tool.result names no tool).
    let started = events.iter().find(|e| e["type"] == "run.started").unwrap();
    let finished = events.iter().find(|e| e["type"] == "run.finished").unwrap();
    assert_eq!((finished["run"].clone(), finished["cause"].clone()), (json!("turn_0"), started["id"].clone()));
    let requested = events.iter().find(|e| e["type"] == "tool.requested").unwrap();
    let completed = events.iter().find(|e| e["type"] == "tool.completed").unwrap();
    assert_eq!(completed["data"]["tool"], json!({"name": "Bash", "call_id": approval}));
    assert_eq!((completed["cause"].clone(), completed["run"].as_str()), (requested["id"].clone(), Some("turn_0")));
    // Volatile frames and the permission.approval.* bus echoes never emit; the rest rides
    // x.kimi-code.web.* at debug.
    let t = types(&events);
    assert!(
        !t.iter().any(|t| t.contains("agent.status") || t.contains("permission.approval") || t.contains("delta")),
        "{t:?}"
    );
    assert!(events.iter().any(|e| e["type"] == "x.kimi-code.web.context.spliced" && e["severity"] == "debug"));
    assert_eq!(t.iter().filter(|t| **t == "x.kimi-code.web.event.session.work_changed").count(), 4);
    validate(&b.data, SESSION);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_resumes_from_its_cursor_and_drops_what_the_server_replays() {
    let (fake, url) = fake_server().await;
    fake.sessions.lock().unwrap().push(SESSION.into());
    let all = recorded(SESSION);
    // A server replaying three frames more than asked for.
    fake.overlap.store(3, Ordering::SeqCst);
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Primary, false)).await;
    // A session of the first listing is followed from the moment of attaching: no cursor.
    until(&fake, &b, "the first subscription", || !fake.subscribes().is_empty()).await;
    let first = fake.subscribes()[0].clone();
    assert_eq!(first["payload"]["session_ids"], json!([SESSION]));
    assert_eq!(first["payload"]["cursors"], json!({}));
    let cut = all.iter().position(|e| e["type"] == "tool.call.started").unwrap() + 1;
    for f in &all[..cut] {
        fake.publish(f.clone());
    }
    until(&fake, &b, "tool.requested", || types(&log(&b.data, SESSION)).contains(&"tool.requested")).await;
    fake.tell(Cmd::Close);
    // Published while the bridge is away: replayed on resume.
    for f in &all[cut..] {
        fake.publish(f.clone());
    }
    until(&fake, &b, "run.finished", || types(&log(&b.data, SESSION)).contains(&"run.finished")).await;
    assert_eq!(fake.upgrades(), 2);
    let last_before = all[..cut].iter().rfind(|f| f.get("volatile").is_none()).unwrap()["seq"].clone();
    let resumed = fake.subscribes().into_iter().find(|s| s["payload"]["cursors"].get(SESSION).is_some()).unwrap();
    assert_eq!(resumed["payload"]["cursors"][SESSION], json!({"seq": last_before, "epoch": "ep_test"}));
    let events = log(&b.data, SESSION);
    assert_eq!(
        core(&events),
        [
            "run.started",
            "attention.requested",
            "attention.answered",
            "attention.resolved",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    // Read-only (no gate): the ask carries no answer affordance (the pin's ws_modes), and the
    // observed decision is the vendor's, about the request (AEP-0002 §7.1).
    let req = events.iter().find(|e| e["type"] == "attention.requested").unwrap();
    assert!(req["data"].get("options").is_none() && req["data"].get("respond_via").is_none(), "{req}");
    let answered = events.iter().find(|e| e["type"] == "attention.answered").unwrap();
    assert_eq!((answered["subject"].clone(), answered["data"]["via"].as_str()), (req["id"].clone(), Some("oob")));
    assert_eq!(answered["data"]["answer"], json!({"option": "approved"}));
    let resolved = events.iter().find(|e| e["type"] == "attention.resolved").unwrap();
    assert_eq!((resolved["subject"].clone(), resolved["cause"].clone()), (req["id"].clone(), answered["id"].clone()));
    validate(&b.data, SESSION);

    // A new journal (another epoch) is not replayable: the server says so and the bridge
    // takes its cursor; frames of the new epoch are not mistaken for replays.
    *fake.epoch.lock().unwrap() = "ep_second".into();
    fake.journal.lock().unwrap().clear();
    fake.tell(Cmd::Close);
    until(&fake, &b, "the third connection", || fake.upgrades() >= 3).await;
    until(&fake, &b, "its subscription", || fake.subscribes().len() >= 3).await;
    let next_turn = json!({"type": "turn.started", "seq": 1, "session_id": SESSION, "timestamp": "2026-12-02T17:40:00.000Z",
        "payload": {"type": "turn.started", "turnId": 1, "origin": {"kind": "user"}, "agentId": "main", "sessionId": SESSION},
        "epoch": "ep_second"});
    fake.publish(next_turn);
    until(&fake, &b, "the second run", || {
        types(&log(&b.data, SESSION)).iter().filter(|t| **t == "run.started").count() == 2
    })
    .await;
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frames_end_the_connection_and_a_durable_one_is_skipped_on_the_second_try() {
    let (fake, url) = fake_server().await;
    fake.sessions.lock().unwrap().push(SESSION.into());
    let all = recorded(SESSION);
    let mut cfg = bridge_cfg(&url, BridgeMode::Primary, false);
    cfg.max_frame_bytes = 16 * 1024;
    let (b, dir) = bridge(cfg).await;
    until(&fake, &b, "the first subscription", || !fake.subscribes().is_empty()).await;
    let turn = all.iter().position(|e| e["type"] == "turn.started").unwrap() + 1;
    for f in &all[..turn] {
        fake.publish(f.clone());
    }
    until(&fake, &b, "run.started", || types(&log(&b.data, SESSION)).contains(&"run.started")).await;
    // A volatile delta over the cap: refused before it is buffered, the connection ends, the
    // resume goes on from the cursor (a volatile frame is never replayed).
    let big = "x".repeat(64 * 1024);
    fake.publish(
        json!({"type": "assistant.delta", "seq": 4, "session_id": SESSION, "volatile": true, "epoch": "ep_test",
        "payload": {"type": "assistant.delta", "turnId": 0, "delta": big, "agentId": "main", "sessionId": SESSION}}),
    );
    until(&fake, &b, "the resume after the volatile frame", || fake.upgrades() == 2 && fake.subscribes().len() >= 2)
        .await;
    assert_eq!(fake.subscribes()[1]["payload"]["cursors"][SESSION]["seq"], json!(4));
    // A durable frame over the cap is journaled and replayed: the first resume fails again,
    // the next one skips ahead (no cursor) and the stream goes on.
    let mut huge = all.iter().find(|e| e["type"] == "context.spliced").unwrap().clone();
    huge["seq"] = json!(5);
    huge["payload"]["messages"][0]["content"][0]["text"] = json!(big);
    fake.publish(huge);
    until(&fake, &b, "the skip-ahead subscription", || {
        fake.subscribes().iter().skip(2).any(|s| s["payload"]["cursors"].get(SESSION).is_none())
    })
    .await;
    assert_eq!(fake.upgrades(), 4, "one resume replayed the frame, the next skipped it");
    let mut ended = all.iter().find(|e| e["type"] == "turn.ended").unwrap().clone();
    ended["seq"] = json!(6);
    fake.publish(ended);
    until(&fake, &b, "run.finished", || types(&log(&b.data, SESSION)).contains(&"run.finished")).await;
    assert_eq!(core(&log(&b.data, SESSION)), ["run.started", "run.finished"]);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn companion_emits_channel_visibility_only() {
    let (fake, url) = fake_server().await;
    fake.sessions.lock().unwrap().push(SESSION.into());
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Companion, false)).await;
    until(&fake, &b, "the first subscription", || !fake.subscribes().is_empty()).await;
    let all = recorded(SESSION);
    for f in &all {
        fake.publish(f.clone());
    }
    let last = all.last().unwrap()["type"].as_str().unwrap();
    let want = format!("x.kimi-code.web.{last}");
    until(&fake, &b, "the last frame", || types(&log(&b.data, SESSION)).contains(&want.as_str())).await;
    let events = log(&b.data, SESSION);
    // One event per durable frame but the bus echoes; volatile frames never.
    let durable: Vec<String> = all
        .iter()
        .filter(|f| f.get("volatile").is_none() && !f["type"].as_str().unwrap().starts_with("permission.approval."))
        .map(|f| format!("x.kimi-code.web.{}", f["type"].as_str().unwrap()))
        .collect();
    assert_eq!(types(&events), durable.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        events.iter().all(|e| e["severity"] == "debug" && e["data"].as_object().is_none_or(|d| d.is_empty())),
        "{events:?}"
    );
    validate(&b.data, SESSION);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_questions_and_unraised_outcomes_stay_read_only() {
    let (fake, url) = fake_server().await;
    fake.sessions.lock().unwrap().push(SESSION.into());
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Primary, true)).await;
    let mut ws = phone(b.bound.http).await;
    until(&fake, &b, "the first subscription", || !fake.subscribes().is_empty()).await;
    let q = numbered(
        &fake,
        SESSION,
        "event.question.requested",
        json!({"question_id": "q_1", "session_id": SESSION, "turn_id": 0,
        "questions": [{"id": "q_0", "question": "Which env?", "options": [{"id": "opt_0_0", "label": "dev"}, {"id": "opt_0_1", "label": "prod"}]}]}),
    );
    fake.publish(q);
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!(req["data"]["kind"], "form");
    assert_eq!(
        req["data"]["fields"][0]["choices"],
        json!([{"id": "opt_0_0", "label": "1"}, {"id": "opt_0_1", "label": "2"}])
    );
    // Questions are not actuated (the design record): read-only even with the gate on.
    assert!(req["data"].get("respond_via").is_none(), "{req}");
    let a = numbered(
        &fake,
        SESSION,
        "event.question.answered",
        json!({"question_id": "q_1",
        "answers": {"q_0": {"kind": "single", "option_id": "opt_0_0"}}}),
    );
    fake.publish(a);
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    assert_eq!((answered["subject"].clone(), answered["data"]["via"].as_str()), (req["id"].clone(), Some("oob")));
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!(
        (resolved["subject"].clone(), resolved["data"]["resolution"].as_str()),
        (req["id"].clone(), Some("answered"))
    );
    // A second question dismissed; an approval this bridge never saw raised is resolved:
    // the dismissal closes its request, the stray outcome degrades to channel visibility.
    fake.publish(numbered(
        &fake,
        SESSION,
        "event.question.requested",
        json!({"question_id": "q_2",
        "questions": [{"id": "q_0", "question": "Go on?", "options": [{"id": "opt_0_0", "label": "yes"}]}]}),
    ));
    let req2 = next(&mut ws, |v| v["type"] == "attention.requested" && v["id"] != req["id"]).await;
    fake.publish(numbered(&fake, SESSION, "event.question.dismissed", json!({"question_id": "q_2"})));
    let dismissed = next(&mut ws, |v| v["type"] == "attention.resolved" && v["subject"] == req2["id"]).await;
    assert_eq!(dismissed["data"]["resolution"], "dismissed");
    fake.publish(numbered(
        &fake,
        SESSION,
        "event.approval.resolved",
        json!({"approval_id": "call_unknown", "decision": "rejected"}),
    ));
    until(&fake, &b, "the stray outcome", || {
        types(&log(&b.data, SESSION)).contains(&"x.kimi-code.web.event.approval.resolved")
    })
    .await;
    // A subagent's turn is not one of the session's runs: channel visibility only.
    let mut sub = numbered(&fake, SESSION, "turn.started", json!({"turnId": 0, "origin": {"kind": "agent"}}));
    sub["payload"]["agentId"] = json!("agent_sub_1");
    fake.publish(sub);
    until(&fake, &b, "the subagent's turn", || types(&log(&b.data, SESSION)).contains(&"x.kimi-code.web.turn.started"))
        .await;
    assert_eq!(
        core(&log(&b.data, SESSION)),
        [
            "attention.requested",
            "attention.answered",
            "attention.resolved",
            "attention.requested",
            "attention.resolved"
        ]
    );
    // Refused by the server (already resolved elsewhere): a `refused` nack.
    *fake.decision_code.lock().unwrap() = 40902;
    let (head, _) = halves(SESSION);
    let ask = head.last().unwrap().clone();
    let mut ask = ask;
    ask["seq"] = json!(numbered(&fake, SESSION, "x", json!({}))["seq"]);
    fake.publish(ask);
    let req3 = next(&mut ws, |v| v["type"] == "attention.requested" && v["data"]["kind"] == "permission").await;
    respond(&mut ws, "cmd-1", &req3, json!({"text": "not now"})).await;
    let nack = next(&mut ws, |v| v["type"] == "control.rejected").await;
    assert_eq!((nack["cause"].as_str(), nack["data"]["reason"].as_str()), (Some("cmd-1"), Some("refused")));
    // Free text on the permission applies the refusing decision with the text as feedback.
    assert_eq!(fake.decisions.lock().unwrap()[0].1, json!({"decision": "rejected", "feedback": "not now"}));
    validate(&b.data, SESSION);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_file_is_waited_for_and_a_silent_server_is_reconnected() {
    let (fake, url) = fake_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let token_file = tmp.path().join("server.token");
    let mut cfg = bridge_cfg(&url, BridgeMode::Companion, false);
    cfg.own.0.insert("token".into(), json!(""));
    cfg.own.0.insert("token_file".into(), json!(token_file.display().to_string()));
    (cfg.timeout_ms, cfg.idle_timeout_ms) = (500, 400);
    fake.silent_next.store(true, Ordering::SeqCst);
    let (b, dir) = bridge(cfg).await;
    // No token yet (kimi web writes it when it starts): nothing is attempted with none. A
    // bound, not a signal: nothing marks a look for the file that found none.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.auth.lock().unwrap().len(), 0);
    std::fs::write(&token_file, format!("{SERVER_TOKEN}\n")).unwrap();
    // The first connection goes silent after its hello (no pong): reconnected.
    until(&fake, &b, "a connection", || fake.upgrades() >= 1).await;
    until(&fake, &b, "a reconnect after the silent stream", || fake.upgrades() >= 2).await;
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asks_pending_at_attach_are_raised_and_asks_gone_meanwhile_are_closed() {
    let (fake, url) = fake_server().await;
    fake.sessions.lock().unwrap().push(SESSION.into());
    // An approval the server holds from before the bridge attached (never seen on the stream).
    let (head, _) = halves(SESSION);
    let item = head.last().unwrap()["payload"].clone();
    fake.pending.lock().unwrap().push(("approvals".into(), SESSION.into(), item));
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Primary, true)).await;
    let mut ws = phone(b.bound.http).await;
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!((req["session"].as_str(), req["data"]["respond_via"].clone()), (Some(SESSION), json!(["control"])));
    // Settled while the bridge was away (or lost with a server restart): closed at the next
    // connect, once the replay is in.
    fake.pending.lock().unwrap().clear();
    fake.tell(Cmd::Close);
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!(
        (resolved["subject"].clone(), resolved["data"]["resolution"].as_str()),
        (req["id"].clone(), Some("dismissed"))
    );
    assert_eq!(fake.upgrades(), 2);
    until(&fake, &b, "the log", || core(&log(&b.data, SESSION)).len() == 2).await;
    assert_eq!(core(&log(&b.data, SESSION)), ["attention.requested", "attention.resolved"]);
    validate(&b.data, SESSION);
    drop(dir);
    b.shutdown().await;
}

/// kimi web 0.28 closes its sockets only after its HTTP server closed, which waits for them:
/// a SIGTERM'd server hangs while the bridge holds its stream. Its REST side gone (here: no
/// answer within timeout_ms), the bridge closes the stream and reconnects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_is_let_go_when_the_servers_rest_side_is_gone() {
    let (fake, url) = fake_server().await;
    let mut cfg = bridge_cfg(&url, BridgeMode::Companion, false);
    cfg.timeout_ms = 300;
    let (b, dir) = bridge(cfg).await;
    until(&fake, &b, "a listing", || fake.lists.load(Ordering::SeqCst) >= 1).await;
    fake.rest_gone.store(true, Ordering::SeqCst);
    until(&fake, &b, "the bridge's close frame", || fake.client_closes.load(Ordering::SeqCst) == 1).await;
    until(&fake, &b, "a reconnect", || fake.upgrades() >= 2).await;
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_with_feedback_is_delivered_and_the_call_is_denied() {
    let (fake, url) = fake_server().await;
    let all = recording(REJECTED, SESSION);
    let at = all.iter().position(|e| e["type"] == "event.approval.requested").unwrap() + 1;
    fake.after_decision.lock().unwrap().extend(all[at..].iter().cloned());
    let (b, dir) = bridge(bridge_cfg(&url, BridgeMode::Primary, true)).await;
    let mut ws = phone(b.bound.http).await;
    until(&fake, &b, "the first listing", || fake.lists.load(Ordering::SeqCst) >= 1).await;
    for f in &all[..at] {
        fake.publish(f.clone());
    }
    fake.sessions.lock().unwrap().push(SESSION.into());
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    // Free text on a permission applies the refusing decision, the text as the reason.
    respond(&mut ws, "cmd-no", &req, json!({"text": "use ls instead"})).await;
    let ack = next(&mut ws, |v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-no");
    let call = all[at - 1]["payload"]["tool_call_id"].as_str().unwrap().to_owned();
    assert_eq!(
        fake.decisions.lock().unwrap().clone(),
        [(
            format!("/api/v1/sessions/{SESSION}/approvals/{call}"),
            json!({"decision": "rejected", "feedback": "use ls instead"})
        )]
    );
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    // The text is gated at the metadata attention ceiling (AEP-0002 §5.3).
    assert_eq!(answered["data"]["answer"], json!({"option": "rejected"}));
    until(&fake, &b, "run.finished", || types(&log(&b.data, SESSION)).contains(&"run.finished")).await;
    let events = log(&b.data, SESSION);
    assert_eq!(
        core(&events),
        [
            "run.started",
            "attention.requested",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "tool.requested",
            "tool.denied",
            "run.finished"
        ]
    );
    let requested = events.iter().find(|e| e["type"] == "tool.requested").unwrap();
    let denied = events.iter().find(|e| e["type"] == "tool.denied").unwrap();
    assert_eq!(
        (denied["data"].clone(), denied["cause"].clone()),
        (json!({"tool": {"name": "Bash", "call_id": call}, "by": "runtime"}), requested["id"].clone())
    );
    validate(&b.data, SESSION);
    drop(dir);
    b.shutdown().await;
}
