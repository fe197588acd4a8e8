//! The OpenHands bridge end to end against a real local agent-server stand-in (127.0.0.1:0)
//! speaking the protocol of `openhands-agent-server` as its source defines it (1.35.0 and
//! 1.58.2): `GET /api/conversations/search`, the events socket `/sockets/events/{id}` with
//! first-message auth (`{"type": "auth", "session_api_key"}`, close 4001 otherwise), the
//! persisted history `GET /api/conversations/{id}/events/search` (log order, `limit`,
//! `page_id`, `timestamp__gte` inclusive; streaming deltas not persisted), close 4004 for
//! an unknown conversation, and `POST /api/conversations/{id}/events/respond_to_confirmation`,
//! which flips the status on the socket before it answers. One session
//! (`data/openhands-1.35.0-confirmation.jsonl`) is written for these tests in the transport
//! shape: a user message, a terminal call under confirmation, its result, the reply. The
//! other (`data/openhands-1.58.2-exit2.jsonl`) is recorded from the real 1.58.2 server,
//! offline against the e2e mock model: the socket frames in their arrival order and the
//! REST history.

use aep_testkit as common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::bridges::BridgeConfig;
use aep_bridge::transport::config::HttpUrl;
use axum::Router;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use common::*;
use futures_util::SinkExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "openhands-bridge-token";
const KEY: &str = "oh-session-key";
const CONV: &str = "4c1f2a9e-7d3b-4e21-9a6f-0b8e5d2c7a10";
/// Listed by the server's search but unknown to its sockets (deleted meanwhile).
const GONE: &str = "9d2e4b1a-0000-4000-8000-00000000dead";
const RECORDED: &str = include_str!("data/openhands-1.35.0-confirmation.jsonl");

fn recorded() -> Vec<Value> {
    RECORDED.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

enum Push {
    Text(String),
    Close(u16),
}

/// What the stand-in server holds and saw.
#[derive(Default)]
struct Fake {
    /// The configured session API key (`None`: an unsecured server).
    key: Option<String>,
    /// The persisted event log (what a replay resends).
    log: Mutex<Vec<Value>>,
    /// The open sockets' senders.
    live: Mutex<Vec<mpsc::UnboundedSender<Push>>>,
    /// Every socket request: (conversation, query).
    attaches: Mutex<Vec<(String, HashMap<String, String>)>>,
    /// Every text frame a client wrote on a socket.
    inbound: Mutex<Vec<String>>,
    /// Every history search: (conversation, query).
    searches: Mutex<Vec<(String, HashMap<String, String>)>>,
    /// A recorded socket script: (via, frame) in arrival order, sent on every attach in
    /// place of the state push (via `live`: to every socket; `replay`: only when a replay
    /// was asked).
    script: Mutex<Vec<(String, Value)>>,
    /// Live frames published between a socket's subscription and its state push (the
    /// server takes the push in a worker thread), and the status that push then carries.
    before_push: Mutex<Vec<Value>>,
    push_status: Mutex<Option<String>>,
    /// `X-Session-API-Key` of each REST request, by path.
    rest_keys: Mutex<Vec<(String, Option<String>)>>,
    /// `respond_to_confirmation` bodies.
    responds: Mutex<Vec<Value>>,
    respond_status: Mutex<u16>,
    /// Events the server emits when a confirmation is accepted / rejected.
    on_accept: Mutex<Vec<Value>>,
    on_reject: Mutex<Vec<Value>>,
    /// Conversations deleted: unlisted, 404 on lookup, their open sockets left open (as
    /// the real 1.58.2 server leaves them).
    deleted: Mutex<Vec<String>>,
}

impl Fake {
    /// The server emits `ev`: persisted (unless a streaming delta) and fanned out.
    fn emit(&self, ev: &Value) {
        if ev["kind"] != "StreamingDeltaEvent" {
            self.log.lock().unwrap().push(ev.clone());
        }
        self.send_raw(ev.to_string());
    }

    fn send_raw(&self, text: String) {
        for tx in self.live.lock().unwrap().iter() {
            let _ = tx.send(Push::Text(text.clone()));
        }
    }

    fn close_all(&self, code: u16) {
        for tx in self.live.lock().unwrap().drain(..) {
            let _ = tx.send(Push::Close(code));
        }
    }

    fn attaches_of(&self, id: &str) -> Vec<HashMap<String, String>> {
        self.attaches.lock().unwrap().iter().filter(|(c, _)| c == id).map(|(_, q)| q.clone()).collect()
    }

    fn sockets(&self) -> usize {
        self.live.lock().unwrap().iter().filter(|t| !t.is_closed()).count()
    }
}

async fn search(State(f): State<Arc<Fake>>, headers: HeaderMap) -> Response {
    let key = headers.get("x-session-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.rest_keys.lock().unwrap().push(("search".into(), key.clone()));
    if f.key.is_some() && key != f.key {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    let deleted = f.deleted.lock().unwrap().clone();
    let items: Vec<Value> = [CONV, GONE]
        .into_iter()
        .filter(|id| !deleted.iter().any(|d| d == id))
        .map(|id| json!({"id": id, "execution_status": "idle"}))
        .collect();
    axum::Json(json!({"items": items})).into_response()
}

/// `GET /api/conversations/{id}`: the conversation's info, 404 once deleted (or unknown).
async fn conversation(State(f): State<Arc<Fake>>, Path(id): Path<String>) -> Response {
    if id != CONV || f.deleted.lock().unwrap().contains(&id) {
        return (StatusCode::NOT_FOUND, "Not Found").into_response();
    }
    axum::Json(json!({"id": id, "execution_status": "idle"})).into_response()
}

async fn socket(
    State(f): State<Arc<Fake>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    f.attaches.lock().unwrap().push((id.clone(), q.clone()));
    ws.on_upgrade(move |sock| session(f, id, q, sock))
}

async fn close(sock: &mut WebSocket, code: u16, reason: &str) {
    let _ = sock.send(WsMessage::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
}

/// One socket, as `sockets.py` runs it: auth, subscribe, replay, then live.
async fn session(f: Arc<Fake>, id: String, q: HashMap<String, String>, mut sock: WebSocket) {
    if let Some(key) = &f.key {
        let first = tokio::time::timeout(Duration::from_secs(10), sock.recv()).await;
        let Ok(Some(Ok(WsMessage::Text(t)))) = first else {
            return close(&mut sock, 4001, "Authentication failed").await;
        };
        f.inbound.lock().unwrap().push(t.to_string());
        let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
        if v["type"] != "auth" || v["session_api_key"] != key.as_str() {
            return close(&mut sock, 4001, "Authentication failed").await;
        }
    }
    if id != CONV {
        return close(&mut sock, 4004, "Conversation not found").await;
    }
    let (tx, rx) = mpsc::unbounded_channel();
    f.live.lock().unwrap().push(tx);
    let script = f.script.lock().unwrap().clone();
    if !script.is_empty() {
        // What the real server sent on a socket, frame by frame, as it sent it.
        let replay = q.contains_key("resend_mode");
        for (via, frame) in script {
            if (via == "live" || replay) && sock.send(WsMessage::text(frame.to_string())).await.is_err() {
                return;
            }
        }
        return live(f, sock, rx).await;
    }
    // Subscribing pushes the conversation's current state first (not persisted), stamped
    // with the server's "now" (here the latest time in its log).
    let state = {
        let log = f.log.lock().unwrap();
        let status = match f.push_status.lock().unwrap().clone() {
            Some(s) => json!(s),
            None => {
                log.iter().rev().find(|e| e["key"] == "execution_status").map_or(json!("idle"), |e| e["value"].clone())
            }
        };
        let now = log.last().and_then(|e| e["timestamp"].as_str()).unwrap_or("2026-12-02T09:29:59.000000").to_owned();
        let n = f.attaches.lock().unwrap().len();
        json!({"kind": "ConversationStateUpdateEvent", "id": format!("state-push-{n}"), "timestamp": now,
            "source": "environment", "key": "full_state", "value": {"id": CONV, "execution_status": status}})
    };
    let early = f.before_push.lock().unwrap().clone();
    for ev in early {
        if sock.send(WsMessage::text(ev.to_string())).await.is_err() {
            return;
        }
    }
    if sock.send(WsMessage::text(state.to_string())).await.is_err() {
        return;
    }
    let replay: Vec<Value> = match q.get("resend_mode").map(String::as_str) {
        Some("all") => f.log.lock().unwrap().clone(),
        Some("since") => {
            let after = q.get("after_timestamp").cloned().unwrap_or_default();
            f.log
                .lock()
                .unwrap()
                .iter()
                .filter(|e| e["timestamp"].as_str().unwrap_or("") >= after.as_str())
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    for ev in replay {
        if sock.send(WsMessage::text(ev.to_string())).await.is_err() {
            return;
        }
    }
    live(f, sock, rx).await
}

/// The socket's live phase: what the server emits, until it closes.
async fn live(f: Arc<Fake>, mut sock: WebSocket, mut rx: mpsc::UnboundedReceiver<Push>) {
    loop {
        tokio::select! {
            p = rx.recv() => match p {
                Some(Push::Text(t)) => if sock.send(WsMessage::text(t)).await.is_err() { return },
                Some(Push::Close(code)) => return close(&mut sock, code, "").await,
                None => return,
            },
            m = sock.recv() => match m {
                Some(Ok(WsMessage::Text(t))) => f.inbound.lock().unwrap().push(t.to_string()),
                Some(Ok(_)) => {}
                _ => return,
            },
        }
    }
}

/// `GET /api/conversations/{id}/events/search`, as `event_router.py` serves it: the log in
/// its order, `timestamp__gte` inclusive, `limit` a page, `page_id` the first id of the next.
async fn events_search(
    State(f): State<Arc<Fake>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let key = headers.get("x-session-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.rest_keys.lock().unwrap().push((format!("events {id}"), key.clone()));
    if f.key.is_some() && key != f.key {
        return (StatusCode::UNAUTHORIZED, "Unauthorized").into_response();
    }
    f.searches.lock().unwrap().push((id.clone(), q.clone()));
    if id != CONV {
        return (StatusCode::NOT_FOUND, "Conversation not found").into_response();
    }
    let log = f.log.lock().unwrap().clone();
    let start = q.get("page_id").and_then(|p| log.iter().position(|e| e["id"] == p.as_str())).unwrap_or(0);
    let gte = q.get("timestamp__gte").cloned().unwrap_or_default();
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(100);
    let mut items = Vec::new();
    let mut next = None;
    for e in &log[start..] {
        if e["timestamp"].as_str().unwrap_or("") < gte.as_str() {
            continue;
        }
        if items.len() == limit {
            next = e["id"].as_str().map(str::to_owned);
            break;
        }
        items.push(e.clone());
    }
    axum::Json(json!({"items": items, "next_page_id": next})).into_response()
}

async fn respond(
    State(f): State<Arc<Fake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let key = headers.get("x-session-api-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
    f.rest_keys.lock().unwrap().push((format!("respond {id}"), key));
    f.responds.lock().unwrap().push(body.clone());
    let status = *f.respond_status.lock().unwrap();
    if status != 200 {
        return (StatusCode::from_u16(status).unwrap(), "broken").into_response();
    }
    // The server publishes the status flip (and any rejections) before it answers.
    let emitted: Vec<Value> = if body["accept"] == true {
        f.on_accept.lock().unwrap().drain(..).collect()
    } else {
        f.on_reject.lock().unwrap().drain(..).collect()
    };
    for ev in emitted {
        f.emit(&ev);
    }
    axum::Json(json!({"success": true})).into_response()
}

async fn fake_server(key: Option<&str>) -> (Arc<Fake>, String) {
    let fake = Arc::new(Fake { key: key.map(str::to_owned), respond_status: Mutex::new(200), ..Fake::default() });
    let app = Router::new()
        .route("/api/conversations/search", get(search))
        .route("/api/conversations/{id}", get(conversation))
        .route("/sockets/events/{id}", any(socket))
        .route("/api/conversations/{id}/events/search", get(events_search))
        .route("/api/conversations/{id}/events/respond_to_confirmation", post(respond))
        .with_state(fake.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (fake, url)
}

fn bridge_cfg(url: &str, control: bool, key: Option<&str>) -> BridgeConfig {
    BridgeConfig {
        url: Some(HttpUrl::parse(url).unwrap()),
        control,
        reconnect_initial_ms: 20,
        reconnect_max_ms: 100,
        ..BridgeConfig::of("openhands", json!({"api_key": key.unwrap_or_default(), "poll_ms": 50}))
    }
}

async fn bridge(b: BridgeConfig) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (bridge_in(dir.path(), b).await, dir)
}

/// A bridge on data folder `dir` (a restart reuses it).
async fn bridge_in(dir: &std::path::Path, b: BridgeConfig) -> Running {
    let mut cfg = config(dir);
    cfg.server.token = TOKEN.into();
    cfg.capture.attention = aep_schemas::Capture::Metadata;
    cfg.bridges.insert("oh".into(), b);
    start(cfg).await
}

const RECORDED_EXIT_2: &str = include_str!("data/openhands-1.58.2-exit2.jsonl");

/// A real session of `openhands-agent-server` 1.58.2 (offline against the e2e mock model;
/// `NeverConfirm`; `echo e2e-ok`, then `ls` of a missing folder, exit code 2), recorded as
/// `(via, frame)`: the frames of a `resend_mode=all` socket attached while the conversation
/// ran, in arrival order (`live` or `replay`), then the persisted history (`history`) as
/// `GET .../events/search` answered it afterwards.
fn recorded_exit_2() -> Vec<(String, Value)> {
    RECORDED_EXIT_2
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["via"].as_str().unwrap().to_owned(), v["frame"].clone())
        })
        .collect()
}

/// The completeness of a session log: every tool outcome answers exactly one earlier
/// request of its call (its `cause`) inside that request's run, every request is answered
/// at most once, no vendor event is mapped twice, and no run or session has two starts or
/// two terminals.
fn complete(events: &[Value]) {
    let mut requested: HashMap<String, (String, Value)> = HashMap::new();
    let mut answered = std::collections::HashSet::new();
    let mut vendor_ids = std::collections::HashSet::new();
    let mut lifecycle = std::collections::HashSet::new();
    for e in events {
        let t = e["type"].as_str().unwrap();
        if let Some(v) = e["data"]["vendor_event_id"].as_str() {
            // One vendor event may map to several drafts (a status flip and its delta).
            let key = format!("{t} {v}");
            assert!(vendor_ids.insert(key), "mapped twice: {t} of vendor event {v}");
        }
        match t {
            "tool.requested" => {
                requested.insert(
                    e["id"].as_str().unwrap().to_owned(),
                    (e["data"]["tool"]["call_id"].to_string(), e["run"].clone()),
                );
            }
            "tool.completed" | "tool.failed" | "tool.denied" => {
                let cause = e["cause"].as_str().unwrap_or_else(|| panic!("an outcome with no cause: {e}"));
                let (call, run) = requested.get(cause).unwrap_or_else(|| panic!("an outcome before its request: {e}"));
                assert_eq!((call, run), (&e["data"]["tool"]["call_id"].to_string(), &e["run"]), "{e}");
                assert!(!run.is_null(), "an outcome outside any run: {e}");
                assert!(answered.insert(cause.to_owned()), "a request answered twice: {e}");
            }
            "session.started" | "session.ended" | "run.started" => {
                assert!(lifecycle.insert(format!("{t} {}", e["run"])), "twice: {t} {}", e["run"]);
            }
            "run.finished" | "run.failed" | "run.cancelled" => {
                assert!(lifecycle.insert(format!("end {}", e["run"])), "a second terminal of {}", e["run"]);
            }
            _ => {}
        }
    }
}

/// Waits for `pred` over the fake server's records and the log file. A poll, not a signal:
/// what it waits on is spread over the fake's request log and the observer's reconnects,
/// which no single notification covers.
async fn until(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !pred() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// [`until`] for work whose length depends on the machine (megabytes parsed in a debug
/// build): the 20 s bound counts from the last sign of progress (`progress` changing: a
/// request to the fake, a line logged), so only a stall fails, not a slow machine.
async fn until_progressing(what: &str, mut progress: impl FnMut() -> usize, mut pred: impl FnMut() -> bool) {
    let mut seen = progress();
    let mut deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !pred() {
        let now = progress();
        if now != seen {
            (seen, deadline) = (now, std::time::Instant::now() + Duration::from_secs(20));
        }
        assert!(std::time::Instant::now() < deadline, "no progress for 20 s waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn log(dir: &std::path::Path) -> Vec<Value> {
    aep_testkit::log_events(&dir.join("logs").join("openhands").join(format!("{CONV}.jsonl")))
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn validate(dir: &std::path::Path) {
    let text = std::fs::read_to_string(dir.join("logs/openhands").join(format!("{CONV}.jsonl"))).unwrap();
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

async fn answer(ws: &mut WsStream, id: &str, req: &Value, answer: Value) {
    let capture = if answer.get("text").is_some() { "redacted" } else { "metadata" };
    let cmd = json!({"aep": "0.1", "id": id, "type": "control.attention.respond", "subject": req["id"], "cause": req["id"],
        "time": "2026-12-02T00:00:00.000Z", "source": "aep://phone/agent/phone", "agent": "phone", "capture": capture,
        "session": req["session"], "data": {"answer": answer}});
    ws.send(Message::text(cmd.to_string())).await.unwrap();
}

fn status_event(id: &str, ts: &str, status: &str) -> Value {
    json!({"kind": "ConversationStateUpdateEvent", "id": id, "timestamp": ts, "source": "environment",
        "key": "execution_status", "value": status})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gated_bridge_maps_the_session_and_answers_the_confirmation_over_rest() {
    let (fake, url) = fake_server(Some(KEY)).await;
    let rec = recorded();
    // Persisted before the bridge attaches: the first attach reads it (the history search).
    fake.log.lock().unwrap().extend(rec[..2].iter().cloned());
    fake.on_accept.lock().unwrap().push(rec[5].clone());
    let (b, dir) = bridge(bridge_cfg(&url, true, Some(KEY))).await;
    let mut ws = phone(b.bound.http).await;
    until("the conversation's socket", || fake.sockets() == 1).await;
    for ev in &rec[2..5] {
        fake.emit(ev);
    }
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!((req["agent"].as_str(), req["session"].as_str()), (Some("openhands"), Some(CONV)));
    assert_eq!(req["run"], format!("run:{CONV}:1"));
    assert_eq!(req["data"]["kind"], "permission");
    assert_eq!(req["data"]["respond_via"], json!(["control"]));
    let options: Vec<Value> = req["data"]["options"].as_array().unwrap().iter().map(|o| o["id"].clone()).collect();
    assert_eq!(options, [json!("approve"), json!("deny")]);

    answer(&mut ws, "cmd-approve", &req, json!({"option": "approve"})).await;
    let ack = next(&mut ws, |v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-approve");
    let answered = next(&mut ws, |v| v["type"] == "attention.answered").await;
    assert_eq!((answered["subject"].clone(), answered["cause"].as_str()), (req["id"].clone(), Some("cmd-approve")));
    assert_eq!(answered["data"]["answer"], json!({"option": "approve"}));
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!((resolved["subject"].clone(), resolved["cause"].as_str()), (req["id"].clone(), Some("cmd-approve")));
    assert_eq!(resolved["data"]["resolution"], "answered");
    assert_eq!(fake.responds.lock().unwrap().clone(), [json!({"accept": true})]);
    // A second answer finds nothing pending.
    answer(&mut ws, "cmd-late", &req, json!({"option": "deny"})).await;
    let late = next(&mut ws, |v| v["type"] == "control.rejected" && v["cause"] == "cmd-late").await;
    assert_eq!(late["data"]["reason"], "invalid");
    for ev in &rec[6..] {
        fake.emit(ev);
    }
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;

    // A second confirmation, denied with free text: the text is the vendor's reason; the
    // server rejects (status -> idle, then the typed rejection).
    let act = json!({"kind": "ActionEvent", "id": "0b7e1c2d-0010-4a00-8000-000000000010", "timestamp": "2026-12-02T09:31:00.000000",
        "source": "agent", "thought": [], "action": {"kind": "TerminalAction", "command": "rm -rf src", "is_input": false, "reset": false},
        "tool_name": "terminal", "tool_call_id": "call_0002", "tool_call": {"id": "call_0002", "name": "terminal",
        "arguments": "{\"command\": \"rm -rf src\"}", "origin": "completion"}, "llm_response_id": "chatcmpl-0003", "security_risk": "HIGH"});
    fake.on_reject.lock().unwrap().extend([
        status_event("0b7e1c2d-0012-4a00-8000-000000000012", "2026-12-02T09:31:02.000000", "idle"),
        json!({"kind": "UserRejectObservation", "id": "0b7e1c2d-0013-4a00-8000-000000000013", "timestamp": "2026-12-02T09:31:02.100000",
            "source": "user", "tool_name": "terminal", "tool_call_id": "call_0002", "rejection_reason": "keep src",
            "rejection_source": "user", "action_id": "0b7e1c2d-0010-4a00-8000-000000000010"}),
    ]);
    fake.emit(&status_event("0b7e1c2d-0009-4a00-8000-00000000000a", "2026-12-02T09:30:59.000000", "running"));
    fake.emit(&act);
    fake.emit(&status_event(
        "0b7e1c2d-0011-4a00-8000-000000000011",
        "2026-12-02T09:31:01.000000",
        "waiting_for_confirmation",
    ));
    let req2 = next(&mut ws, |v| v["type"] == "attention.requested" && v["id"] != req["id"]).await;
    answer(&mut ws, "cmd-deny", &req2, json!({"text": "keep src"})).await;
    next(&mut ws, |v| v["type"] == "control.accepted" && v["cause"] == "cmd-deny").await;
    let answered = next(&mut ws, |v| v["type"] == "attention.answered" && v["cause"] == "cmd-deny").await;
    assert_eq!(answered["data"]["answer"]["option"], "deny");
    next(&mut ws, |v| v["type"] == "attention.resolved" && v["cause"] == "cmd-deny").await;
    assert_eq!(fake.responds.lock().unwrap()[1], json!({"accept": false, "reason": "keep src"}));
    until("the rejection", || types(&log(&b.data)).contains(&"x.openhands.user_reject.observation")).await;

    let events = log(&b.data);
    // The persisted full state, and the state the socket opened with: that push is mapped
    // once the history read meanwhile is, so where it lands depends on the timing.
    assert_eq!(types(&events).iter().filter(|t| **t == "state.snapshot").count(), 2);
    let core: Vec<&str> = events
        .iter()
        .filter(|e| e["cause"] != "cmd-late")
        .map(|e| e["type"].as_str().unwrap())
        .filter(|t| !t.starts_with("x.") && *t != "state.snapshot")
        .collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "state.delta",
            "tool.requested",
            "attention.requested",
            "state.delta",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "state.delta",
            "tool.completed",
            "run.finished",
            "state.delta",
            "run.started",
            "state.delta",
            "tool.requested",
            "attention.requested",
            "state.delta",
            "control.accepted",
            "attention.answered",
            "attention.resolved",
            "state.delta",
        ]
    );
    let started = &events[0];
    assert_eq!(started["data"]["client"], json!({"name": "openhands-agent-server"}));
    let call = events.iter().find(|e| e["type"] == "tool.requested").unwrap();
    assert_eq!((call["step"].as_str(), call["data"]["risk"].as_str()), (Some("chatcmpl-0001"), Some("LOW")));
    assert_eq!(call["data"]["vendor_event_id"], rec[3]["id"]);
    assert_eq!(call["data"]["vendor_ts"], rec[3]["timestamp"]);
    let done = events.iter().find(|e| e["type"] == "tool.completed").unwrap();
    assert_eq!(done["cause"], call["id"]);
    // The vendor plane rides x.openhands.* at debug.
    assert!(events.iter().any(|e| e["type"] == "x.openhands.message.event" && e["severity"] == "debug"));
    validate(&b.data);

    // The never-send posture: the auth frame is the only frame written on each socket.
    let inbound = fake.inbound.lock().unwrap().clone();
    assert_eq!(inbound.len(), fake.attaches.lock().unwrap().len());
    let auth = json!({"type": "auth", "session_api_key": KEY}).to_string();
    assert!(inbound.iter().all(|t| *t == auth), "{inbound:?}");
    // The socket asks no replay (the server's own replay is overtaken by its live frames):
    // the history came over REST, in the log's order.
    assert!(fake.attaches_of(CONV).iter().all(|q| !q.contains_key("resend_mode")));
    assert!(fake.searches.lock().unwrap().iter().any(|(c, q)| c == CONV && !q.contains_key("timestamp__gte")));
    // Every REST call carried the key.
    assert!(fake.rest_keys.lock().unwrap().iter().all(|(_, k)| k.as_deref() == Some(KEY)));
    // The conversation the sockets do not know (4004) is not attached again.
    let gone = fake.attaches_of(GONE).len();
    // A bound, not a signal: "never attached again" has no event to wait for.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.attaches_of(GONE).len(), gone);
    assert_eq!(gone, 1);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_by_default_reconnects_reads_the_history_since_and_drops_the_overlap() {
    let (fake, url) = fake_server(None).await;
    let rec = recorded();
    // The conversation already waits for a confirmation when the bridge attaches: the socket
    // opens with that state, then replays the history that led there.
    fake.log.lock().unwrap().extend(rec[..5].iter().cloned());
    let (b, dir) = bridge(bridge_cfg(&url, false, None)).await;
    let mut ws = phone(b.bound.http).await;
    let req = next(&mut ws, |v| v["type"] == "attention.requested").await;
    assert_eq!(req["run"], format!("run:{CONV}:1"), "raised by the replayed transition, inside its run");
    // Read-only: no options, no respond path (the fixture's pin).
    assert!(req["data"].get("options").is_none() && req["data"].get("respond_via").is_none(), "{req}");
    // Nothing can answer it here: the read-only bridge claims no session for commands, so
    // the collector refuses the command in-band and nothing is written anywhere.
    answer(&mut ws, "cmd-1", &req, json!({"option": "approve"})).await;
    let nack = next(&mut ws, |v| v["cause"] == "cmd-1").await;
    assert_eq!((nack["type"].as_str(), nack["code"].as_str()), (Some("error"), Some("no-route")));
    assert!(fake.responds.lock().unwrap().is_empty());

    // The socket drops: the history is read again since a recent vendor time; the overlap
    // is dropped.
    fake.close_all(1012);
    until("the second attach", || fake.attaches_of(CONV).len() == 2 && fake.sockets() == 1).await;
    until("the second history search", || fake.searches.lock().unwrap().len() == 2).await;
    let q = fake.searches.lock().unwrap()[1].1.clone();
    // The earliest vendor time among the last persisted events delivered (a state push is
    // stamped "now" and is no resume point).
    assert_eq!(q.get("timestamp__gte"), rec[1]["timestamp"].as_str().map(str::to_owned).as_ref());
    for ev in &rec[5..] {
        fake.emit(ev);
    }
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;
    let events = log(&b.data);
    let t = types(&events);
    let core: Vec<&str> = t.iter().copied().filter(|t| !t.starts_with("x.") && !t.starts_with("state.")).collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "attention.requested",
            "attention.resolved",
            "tool.completed",
            "run.finished"
        ]
    );
    for once in ["session.started", "run.started", "attention.requested", "tool.requested", "attention.resolved"] {
        assert_eq!(t.iter().filter(|x| **x == once).count(), 1, "{once} in {t:?}");
    }
    let resolved = events.iter().find(|e| e["type"] == "attention.resolved").unwrap();
    assert_eq!(
        (resolved["subject"].clone(), resolved["data"]["resolution"].as_str()),
        (req["id"].clone(), Some("answered"))
    );
    assert!(events.iter().all(|e| e["type"] != "attention.answered"), "the bridge answered nothing");
    validate(&b.data);
    // An unsecured server: not even an auth frame was written.
    assert!(fake.inbound.lock().unwrap().is_empty());
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_events_are_dropped_live_and_skipped_in_the_history() {
    let (fake, url) = fake_server(Some(KEY)).await;
    let rec = recorded();
    let mut cfg = bridge_cfg(&url, false, Some(KEY));
    cfg.max_frame_bytes = 64 << 10;
    let (b, dir) = bridge(cfg).await;
    until("the conversation's socket", || fake.sockets() == 1).await;
    for ev in &rec[..3] {
        fake.emit(ev);
    }
    until("run.started", || types(&log(&b.data)).contains(&"run.started")).await;
    // A streaming delta over the bound (not persisted): the socket ends, the resume reads
    // nothing oversized and the stream goes on.
    let big = "x".repeat(100 << 10);
    fake.emit(&json!({"kind": "StreamingDeltaEvent", "id": "big-delta", "timestamp": "2026-12-02T09:30:03.000000",
        "source": "agent", "content": big}));
    until("the second attach", || fake.attaches_of(CONV).len() == 2 && fake.sockets() == 1).await;
    fake.emit(&rec[3]);
    until("tool.requested", || types(&log(&b.data)).contains(&"tool.requested")).await;
    // A persisted oversized event: the socket drops it and ends; the history read after the
    // reconnect skips it by size, and the stream goes on.
    fake.emit(
        &json!({"kind": "CondensationSummaryEvent", "id": "big-summary", "timestamp": "2026-12-02T09:30:03.550000",
        "source": "environment", "summary": big}),
    );
    until("the third attach", || fake.attaches_of(CONV).len() == 3 && fake.sockets() == 1).await;
    until("the third history search", || fake.searches.lock().unwrap().len() == 3).await;
    for ev in &rec[4..] {
        fake.emit(ev);
    }
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;
    let events = log(&b.data);
    assert!(events.iter().all(|e| !e.to_string().contains("big-")), "nothing oversized was mapped");
    assert_eq!(types(&events).iter().filter(|t| **t == "tool.requested").count(), 1);
    complete(&events);
    validate(&b.data);
    drop(dir);
    b.shutdown().await;
}

/// A history page over the bridge's reply bound: its answer was cut at 4 MiB, failed to
/// parse, and the socket was retried with it forever. Now a page too big is asked again with
/// half the `limit`, an event too big alone is skipped by size, and the rest of the session
/// is mapped once, on the one socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_page_over_the_bound_is_read_in_smaller_pages_and_a_lone_giant_is_skipped() {
    let (fake, url) = fake_server(None).await;
    let rec = recorded();
    let filler = |id: &str, at: usize, len: usize| {
        json!({"kind": "CondensationSummaryEvent", "id": id, "timestamp": format!("2026-12-02T09:30:02.2{at:02}000"),
            "source": "environment", "summary": "x".repeat(len)})
    };
    {
        let mut log = fake.log.lock().unwrap();
        log.extend(rec[..3].iter().cloned());
        // Six events under max_frame_bytes (4 MiB) whose page of 100 is 6 MiB.
        log.extend((0..6).map(|i| filler(&format!("filler-{i}"), i, 1 << 20)));
        // One event over the page bound alone.
        log.push(filler("giant", 6, 5 << 20));
        log.extend(rec[3..].iter().cloned());
    }
    let (b, dir) = bridge(bridge_cfg(&url, false, None)).await;
    // Pages of megabytes asked again at half the limit: slow on a loaded machine, never still.
    let progress = || fake.searches.lock().unwrap().len() + log(&b.data).len();
    until_progressing("run.finished", progress, || types(&log(&b.data)).contains(&"run.finished")).await;
    let events = log(&b.data);
    let mapped = |id: &str| events.iter().filter(|e| e["data"]["vendor_event_id"] == id).count();
    for i in 0..6 {
        assert_eq!(mapped(&format!("filler-{i}")), 1, "filler-{i} in {:?}", types(&events));
    }
    assert_eq!(mapped("giant"), 0, "the lone giant is skipped");
    assert_eq!(types(&events).iter().filter(|t| **t == "tool.completed").count(), 1);
    complete(&events);
    validate(&b.data);
    assert_eq!(fake.attaches_of(CONV).len(), 1, "no socket was retried");
    let limits: Vec<String> =
        fake.searches.lock().unwrap().iter().filter_map(|(_, q)| q.get("limit").cloned()).collect();
    assert!(limits.iter().any(|l| l != "100") && limits.len() < 40, "{limits:?}");
    drop(dir);
    b.shutdown().await;
}

/// Cursors do not pile up in the data folder: a conversation the server reports gone
/// (close 4004) loses its cursor at once, and at start the cursor of a conversation the
/// server no longer lists, untouched for longer than `cursor_ttl_hours` (30 days), goes;
/// an unlisted one written recently stays (its conversation may be listed again). A
/// watched conversation deleted on the server (unlisted, 404, its socket left open and
/// silent) ends its watch and loses its cursor too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_of_gone_and_long_unlisted_conversations_are_removed() {
    let (fake, url) = fake_server(None).await;
    let dir = tempfile::tempdir().unwrap();
    let cursors = dir.path().join("state/openhands/oh");
    std::fs::create_dir_all(&cursors).unwrap();
    let old = "00000000-0000-4000-8000-0000000000a1";
    let fresh = "00000000-0000-4000-8000-0000000000a2";
    let now = std::time::SystemTime::now();
    for (id, days) in [(GONE, 0), (old, 40), (fresh, 1)] {
        let f = std::fs::File::create(cursors.join(format!("{id}.json"))).unwrap();
        f.set_modified(now - Duration::from_secs(86_400 * days)).unwrap();
    }
    let b = bridge_in(dir.path(), bridge_cfg(&url, false, None)).await;
    until("the long-unlisted cursor's removal", || !cursors.join(format!("{old}.json")).exists()).await;
    assert!(cursors.join(format!("{fresh}.json")).exists(), "a recent cursor stays");
    until("the gone conversation's cursor removal", || !cursors.join(format!("{GONE}.json")).exists()).await;
    until("the listed conversation's socket", || fake.sockets() == 1).await;
    assert!(fake.attaches_of(GONE).len() == 1, "a gone conversation is not attached again");
    let rec = recorded();
    for ev in &rec[..3] {
        fake.emit(ev);
    }
    let mine = cursors.join(format!("{CONV}.json"));
    until("the watched conversation's cursor", || mine.exists()).await;
    fake.deleted.lock().unwrap().push(CONV.into());
    until("the deleted conversation's cursor removal", || !mine.exists()).await;
    until("its socket closed by the bridge", || fake.sockets() == 0).await;
    assert_eq!(fake.attaches_of(CONV).len(), 1, "a deleted conversation is not attached again");
    b.shutdown().await;
}

/// The real server's live fan-out overtakes its own replay: on a socket attached while the
/// conversation ran, a tool's outcome arrived ahead of the replayed request (recorded on
/// 1.58.2). The bridge maps the history first, in the log's order, then the held live
/// frames, deduped: every outcome follows its request inside its run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_frames_ahead_of_the_replay_wait_until_the_history_is_mapped() {
    let (fake, url) = fake_server(Some(KEY)).await;
    let rec = recorded_exit_2();
    // The recording shows the defect: an outcome ahead of its request on the socket.
    let on_socket: Vec<&str> =
        rec.iter().filter(|(v, _)| v != "history").map(|(_, f)| f["kind"].as_str().unwrap()).collect();
    assert_eq!(on_socket[1], "ObservationEvent");
    assert!(on_socket.iter().position(|k| *k == "ActionEvent").unwrap() > 1);
    *fake.script.lock().unwrap() = rec.iter().filter(|(v, _)| v != "history").cloned().collect();
    *fake.log.lock().unwrap() = rec.iter().filter(|(v, _)| v == "history").map(|(_, f)| f.clone()).collect();
    let (b, dir) = bridge(bridge_cfg(&url, false, Some(KEY))).await;
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;
    let events = log(&b.data);
    let core: Vec<&str> =
        types(&events).into_iter().filter(|t| ["session.", "run.", "tool."].iter().any(|p| t.starts_with(p))).collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    complete(&events);
    let outcomes: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool.completed").collect();
    assert_eq!(outcomes[0]["data"]["exit_code"], 0);
    assert_eq!(outcomes[1]["data"]["exit_code"], 2, "the exit code the terminal reported");
    validate(&b.data);
    drop(dir);
    b.shutdown().await;
}

/// A restart of the bridge mid-conversation: the second process resumes after the durable
/// cursor the first one wrote. No second `session.started`, no event mapped twice, one
/// terminal per run, and the log validates across both epochs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_bridge_resumes_after_its_cursor_and_appends_nothing_twice() {
    let (fake, url) = fake_server(None).await;
    let history: Vec<Value> = recorded_exit_2().into_iter().filter(|(v, _)| v == "history").map(|(_, f)| f).collect();
    // The first call and its outcome, observed by the first process.
    let cut = history.iter().position(|e| e["kind"] == "ObservationEvent").unwrap() + 1;
    let dir = tempfile::tempdir().unwrap();
    let b = bridge_in(dir.path(), bridge_cfg(&url, false, None)).await;
    let first_epoch = b.epoch;
    until("the conversation's socket", || fake.sockets() == 1).await;
    for ev in &history[..cut] {
        fake.emit(ev);
    }
    until("tool.completed", || types(&log(&b.data)).contains(&"tool.completed")).await;
    b.shutdown().await;
    // The conversation goes on while the bridge is down.
    for ev in &history[cut..] {
        fake.emit(ev);
    }
    let b = bridge_in(dir.path(), bridge_cfg(&url, false, None)).await;
    assert!(b.epoch > first_epoch);
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;
    // A second restart with nothing new appends no history either.
    b.shutdown().await;
    let before = log(dir.path()).len();
    let b = bridge_in(dir.path(), bridge_cfg(&url, false, None)).await;
    until("the third process's socket", || fake.sockets() == 1 && log(dir.path()).len() > before).await;
    // A bound, not a signal: "appends nothing more" has no event to wait for.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let events = log(&b.data);
    // Only the state each new socket opens with.
    assert!(events[before..].iter().all(|e| e["type"] == "state.snapshot"), "{:?}", types(&events[before..]));
    let core: Vec<&str> =
        types(&events).into_iter().filter(|t| ["session.", "run.", "tool."].iter().any(|p| t.starts_with(p))).collect();
    assert_eq!(
        core,
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "run.finished"
        ]
    );
    complete(&events);
    validate(&b.data);
    let cursor = dir.path().join("state/openhands/oh").join(format!("{CONV}.json"));
    assert!(cursor.is_file(), "the cursor is kept under the data folder");
    let searches = fake.searches.lock().unwrap().clone();
    assert!(searches[1..].iter().all(|(_, q)| q.contains_key("timestamp__gte")), "restarts read from the cursor on");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_keeps_discovery_retrying_and_a_silent_socket_is_reconnected() {
    let (fake, url) = fake_server(Some(KEY)).await;
    let (b, dir) = bridge(bridge_cfg(&url, false, Some("not-the-key"))).await;
    // The server refuses the key on REST too (401): discovery retries at its pace and no
    // socket is attached.
    until("discovery retries", || fake.rest_keys.lock().unwrap().len() >= 3).await;
    assert!(fake.attaches.lock().unwrap().is_empty());
    b.shutdown().await;
    drop(dir);
    // The right key, then silence: the server sends nothing (no pings), reconnected.
    let (fake, url) = fake_server(Some(KEY)).await;
    let mut cfg = bridge_cfg(&url, false, Some(KEY));
    cfg.idle_timeout_ms = 300;
    let (b, dir) = bridge(cfg).await;
    until("reconnects after silence", || fake.attaches_of(CONV).len() >= 3).await;
    // Nothing was mapped but the session's start and the state each socket opens with.
    let events = log(&b.data);
    let t = types(&events);
    assert_eq!(t[0], "session.started");
    assert!(t.len() >= 3 && t[1..].iter().all(|t| *t == "state.snapshot"), "{t:?}");
    // The conversation the sockets do not know (4004) never started a session.
    assert!(!b.data.join("logs/openhands").join(format!("{GONE}.jsonl")).exists());
    drop(dir);
    b.shutdown().await;
}

/// A restart while a run waits for its confirmation: the restarted bridge re-opens the ask
/// its predecessor raised (kept in the cursor), so a command answers it and the status flip
/// resolves that very request, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmation_pending_across_a_restart_is_answered_by_the_restarted_bridge() {
    let (fake, url) = fake_server(Some(KEY)).await;
    let rec = recorded();
    fake.on_accept.lock().unwrap().push(rec[5].clone());
    let dir = tempfile::tempdir().unwrap();
    let b = bridge_in(dir.path(), bridge_cfg(&url, true, Some(KEY))).await;
    until("the conversation's socket", || fake.sockets() == 1).await;
    for ev in &rec[..5] {
        fake.emit(ev);
    }
    until("attention.requested", || types(&log(dir.path())).contains(&"attention.requested")).await;
    let req = log(dir.path()).into_iter().find(|e| e["type"] == "attention.requested").unwrap();
    b.shutdown().await;
    let b = bridge_in(dir.path(), bridge_cfg(&url, true, Some(KEY))).await;
    let mut ws = phone(b.bound.http).await;
    until("the second socket", || fake.sockets() == 1 && fake.attaches_of(CONV).len() == 2).await;
    until("its state push", || types(&log(dir.path())).iter().filter(|t| **t == "state.snapshot").count() >= 3).await;
    answer(&mut ws, "cmd-after-restart", &req, json!({"option": "approve"})).await;
    let ack = next(&mut ws, |v| v["cause"] == "cmd-after-restart").await;
    assert_eq!(ack["type"], "control.accepted", "{ack}");
    let resolved = next(&mut ws, |v| v["type"] == "attention.resolved").await;
    assert_eq!(
        (resolved["subject"].clone(), resolved["cause"].as_str()),
        (req["id"].clone(), Some("cmd-after-restart"))
    );
    assert_eq!(fake.responds.lock().unwrap().clone(), [json!({"accept": true})]);
    for ev in &rec[6..] {
        fake.emit(ev);
    }
    until("run.finished", || types(&log(dir.path())).contains(&"run.finished")).await;
    let events = log(dir.path());
    let t = types(&events);
    for once in ["session.started", "run.started", "attention.requested", "attention.answered", "attention.resolved"] {
        assert_eq!(t.iter().filter(|x| **x == once).count(), 1, "{once} in {t:?}");
    }
    complete(&events);
    validate(dir.path());
    b.shutdown().await;
}

/// The server takes a socket's state push after it subscribed the socket, so a live frame
/// may come first and the push may predate the history read next (a status `idle` taken
/// just before the run started, seen on 1.58.2 in the e2e suite). The connection's first
/// `full_state` is still the opening push: not a transition, no run closed by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_frame_ahead_of_the_state_push_does_not_make_the_push_a_transition() {
    let (fake, url) = fake_server(None).await;
    let rec = recorded();
    fake.log.lock().unwrap().extend(rec[1..4].iter().cloned());
    *fake.before_push.lock().unwrap() = vec![rec[3].clone()];
    *fake.push_status.lock().unwrap() = Some("idle".into());
    let (b, dir) = bridge(bridge_cfg(&url, false, None)).await;
    until("the state push", || types(&log(&b.data)).contains(&"state.snapshot")).await;
    fake.emit(&rec[4]);
    until("attention.requested", || types(&log(&b.data)).contains(&"attention.requested")).await;
    let events = log(&b.data);
    let core: Vec<&str> = types(&events)
        .into_iter()
        .filter(|t| ["run.", "tool.", "attention."].iter().any(|p| t.starts_with(p)))
        .collect();
    assert_eq!(core, ["run.started", "tool.requested", "attention.requested"]);
    assert!(events.iter().find(|e| e["type"] == "attention.requested").unwrap()["run"] == format!("run:{CONV}:1"));
    complete(&events);
    validate(&b.data);
    drop(dir);
    b.shutdown().await;
}
