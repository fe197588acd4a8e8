//! The OpenHands bridge end to end against a real local agent-server stand-in (127.0.0.1:0)
//! speaking the protocol of `openhands-agent-server` 1.35.0 as its source defines it:
//! `GET /api/conversations/search`, the events socket `/sockets/events/{id}` with
//! first-message auth (`{"type": "auth", "session_api_key"}`, close 4001 otherwise),
//! `resend_mode=all|since` replay of the persisted log (`timestamp >= after_timestamp`,
//! streaming deltas not persisted), close 4004 for an unknown conversation, and
//! `POST /api/conversations/{id}/events/respond_to_confirmation`, which flips the status
//! on the socket before it answers. The session (`data/openhands-1.35.0-confirmation.jsonl`)
//! is written for this test in the transport shape (`event_transport_dump`: no `parent_id`,
//! no nulls): a user message, a terminal call under confirmation, its result, the reply.

use aep_testkit as common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::bridges::{BridgeConfig, BridgeKind};
use aep_bridge::transport::config::HttpUrl;
use axum::Router;
use axum::extract::ws::{CloseFrame, Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use common::*;
use futures_util::{SinkExt, StreamExt};
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
    /// `X-Session-API-Key` of each REST request, by path.
    rest_keys: Mutex<Vec<(String, Option<String>)>>,
    /// `respond_to_confirmation` bodies.
    responds: Mutex<Vec<Value>>,
    respond_status: Mutex<u16>,
    /// Events the server emits when a confirmation is accepted / rejected.
    on_accept: Mutex<Vec<Value>>,
    on_reject: Mutex<Vec<Value>>,
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
    axum::Json(json!({"items": [{"id": CONV, "execution_status": "idle"}, {"id": GONE, "execution_status": "idle"}]}))
        .into_response()
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
    let (tx, mut rx) = mpsc::unbounded_channel();
    f.live.lock().unwrap().push(tx);
    // Subscribing pushes the conversation's current state first (not persisted), stamped
    // with the server's "now" (here the latest time in its log).
    let state = {
        let log = f.log.lock().unwrap();
        let status =
            log.iter().rev().find(|e| e["key"] == "execution_status").map_or(json!("idle"), |e| e["value"].clone());
        let now = log.last().and_then(|e| e["timestamp"].as_str()).unwrap_or("2026-12-02T09:29:59.000000").to_owned();
        let n = f.attaches.lock().unwrap().len();
        json!({"kind": "ConversationStateUpdateEvent", "id": format!("state-push-{n}"), "timestamp": now,
            "source": "environment", "key": "full_state", "value": {"id": CONV, "execution_status": status}})
    };
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
        .route("/sockets/events/{id}", any(socket))
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
        kind: Some(BridgeKind::Openhands),
        url: Some(HttpUrl::parse(url).unwrap()),
        control,
        api_key: key.unwrap_or_default().to_owned(),
        poll_ms: Some(50),
        reconnect_initial_ms: 20,
        reconnect_max_ms: 100,
        ..BridgeConfig::default()
    }
}

async fn bridge(b: BridgeConfig) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    cfg.capture.attention = aep_schemas::Capture::Metadata;
    cfg.bridges.insert("oh".into(), b);
    (start(cfg).await, dir)
}

async fn until(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !pred() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn log(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("logs").join("openhands").join(format!("{CONV}.jsonl")))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn validate(dir: &std::path::Path) {
    let text = std::fs::read_to_string(dir.join("logs/openhands").join(format!("{CONV}.jsonl"))).unwrap();
    let (_, failures) = aep_bridge::validate::validate_stream(text.as_bytes()).unwrap();
    assert!(failures.is_empty(), "{failures:?}");
}

type WsStream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

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

async fn next(ws: &mut WsStream, pred: impl Fn(&Value) -> bool) -> Value {
    let fut = async {
        while let Some(Ok(m)) = ws.next().await {
            if let Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).unwrap();
                if pred(&v) {
                    return v;
                }
            }
        }
        panic!("socket closed");
    };
    tokio::time::timeout(Duration::from_secs(20), fut).await.expect("timed out waiting for a frame")
}

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
    // Persisted before the bridge attaches: the first attach replays it (`resend_mode=all`).
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
            "state.snapshot",
            "state.snapshot",
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
    assert_eq!(fake.attaches_of(CONV)[0].get("resend_mode").map(String::as_str), Some("all"));
    // Every REST call carried the key.
    assert!(fake.rest_keys.lock().unwrap().iter().all(|(_, k)| k.as_deref() == Some(KEY)));
    // The conversation the sockets do not know (4004) is not attached again.
    let gone = fake.attaches_of(GONE).len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.attaches_of(GONE).len(), gone);
    assert_eq!(gone, 1);
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_by_default_reconnects_resumes_since_and_drops_the_replayed_overlap() {
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

    // The socket drops: resumed since a recent vendor time; the replayed overlap is dropped.
    fake.close_all(1012);
    until("the second attach", || fake.attaches_of(CONV).len() == 2 && fake.sockets() == 1).await;
    let q = &fake.attaches_of(CONV)[1];
    assert_eq!(q.get("resend_mode").map(String::as_str), Some("since"));
    // The earliest vendor time among the last events delivered.
    assert_eq!(q.get("after_timestamp"), rec[0]["timestamp"].as_str().map(str::to_owned).as_ref());
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
async fn oversized_events_are_dropped_and_a_persisted_one_is_skipped_by_resuming_live() {
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
    // A streaming delta over the bound (not persisted): the socket ends, the resume replays
    // nothing oversized and the stream goes on.
    let big = "x".repeat(100 << 10);
    fake.emit(&json!({"kind": "StreamingDeltaEvent", "id": "big-delta", "timestamp": "2026-12-02T09:30:03.000000",
        "source": "agent", "content": big}));
    until("the second attach", || fake.attaches_of(CONV).len() == 2 && fake.sockets() == 1).await;
    fake.emit(&rec[3]);
    until("tool.requested", || types(&log(&b.data)).contains(&"tool.requested")).await;
    // A persisted oversized event: the replay brings it back, so the watch resumes live.
    fake.emit(
        &json!({"kind": "CondensationSummaryEvent", "id": "big-summary", "timestamp": "2026-12-02T09:30:03.550000",
        "source": "environment", "summary": big}),
    );
    until("a live attach", || {
        fake.attaches_of(CONV).iter().any(|q| q.get("resend_mode").is_none()) && fake.sockets() == 1
    })
    .await;
    let modes: Vec<Option<String>> = fake.attaches_of(CONV).iter().map(|q| q.get("resend_mode").cloned()).collect();
    // all; since (after the delta); since (after the persisted one, which it replays); live.
    assert_eq!(modes, [Some("all".into()), Some("since".into()), Some("since".into()), None]);
    for ev in &rec[4..] {
        fake.emit(ev);
    }
    until("run.finished", || types(&log(&b.data)).contains(&"run.finished")).await;
    let events = log(&b.data);
    assert!(events.iter().all(|e| !e.to_string().contains("big-")), "nothing oversized was mapped");
    assert_eq!(types(&events).iter().filter(|t| **t == "tool.requested").count(), 1);
    validate(&b.data);
    drop(dir);
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
