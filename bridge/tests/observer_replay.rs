//! The observers' recordings replayed through a running `serve`: each recording is served by a
//! small local stand-in of its server (127.0.0.1:0) and the bridge's logs, normalized (ids
//! and clock readings replaced by what does not depend on the run), are compared with
//! `adapters/tests/golden/observers/<scenario>.json`. The same files are what the vendors' pure
//! observers produce when `adapters/tests/observers.rs` feeds them the same recordings, so a
//! change of behaviour on either side shows here. `UPDATE_GOLDEN=1` writes the files
//! instead (they were first written by the observers as they were before they moved into
//! the adapters crate).

use aep_testkit as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ws::{Message as WsMessage, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use common::*;
use serde_json::{Value, json};

const TOKEN: &str = "replay-token";

/// The expected logs of `scenario`.
fn expected_path(scenario: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/tests/golden/observers").join(format!("{scenario}.json"))
}

/// Every log file of a data folder, normalized: per `{agent}/{session}.jsonl`, its events
/// without `id`, `seq`, `epoch`, `source`, `time` and `aep`, an id another event of the file
/// refers to (`cause`, `subject`) as `#<index>`, and `data.latency_ms` (a clock reading) as 0.
fn normalized(data: &Path) -> BTreeMap<String, Vec<Value>> {
    let mut out = BTreeMap::new();
    let root = data.join("logs");
    let Ok(agents) = std::fs::read_dir(&root) else { return out };
    for agent in agents.flatten() {
        for file in std::fs::read_dir(agent.path()).into_iter().flatten().flatten() {
            let name = format!("{}/{}", agent.file_name().to_string_lossy(), file.file_name().to_string_lossy());
            // The log may still be written: its complete lines only.
            let events = aep_testkit::log_events(&file.path());
            out.insert(name, normalize(&events));
        }
    }
    out
}

fn normalize(events: &[Value]) -> Vec<Value> {
    let index: BTreeMap<String, usize> =
        events.iter().enumerate().filter_map(|(i, e)| Some((e["id"].as_str()?.to_owned(), i))).collect();
    let refer = |v: &Value| match v.as_str().and_then(|s| index.get(s)) {
        Some(i) => json!(format!("#{i}")),
        None => v.clone(),
    };
    events
        .iter()
        .map(|e| {
            let mut n = serde_json::Map::new();
            for k in ["agent", "type", "session", "run", "step", "subject", "cause", "severity", "capture", "data"] {
                let Some(v) = e.get(k) else { continue };
                let v = if matches!(k, "cause" | "subject") { refer(v) } else { v.clone() };
                n.insert(k.into(), v);
            }
            if let Some(l) = n.get_mut("data").and_then(|d| d.get_mut("latency_ms")) {
                *l = json!(0);
            }
            Value::Object(n)
        })
        .collect()
}

/// Runs a bridge with `section` (one `[bridges.replay]`) until its logs match the scenario's
/// file (or, writing, until they stop growing), and compares.
async fn replay(scenario: &str, section: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    cfg.capture.attention = aep_schemas::Capture::Metadata;
    cfg.bridges.insert("replay".into(), toml::from_str(section).unwrap());
    let b = start(cfg).await;
    let path = expected_path(scenario);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        // A bound, not a signal: "nothing more is coming" has no event to wait for.
        let mut last = (0, std::time::Instant::now());
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let n: usize = normalized(&b.data).values().map(Vec::len).sum();
            if n != last.0 {
                last = (n, std::time::Instant::now());
            } else if n > 0 && last.1.elapsed() > Duration::from_secs(5) {
                break;
            }
        }
        let text = serde_json::to_string_pretty(&normalized(&b.data)).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text + "\n").unwrap();
    } else {
        let want: BTreeMap<String, Vec<Value>> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let n: usize = want.values().map(Vec::len).sum();
        b.until_logged(
            || normalized(&b.data).values().map(Vec::len).sum::<usize>() >= n,
            || format!("{scenario}: {} of {n} events", normalized(&b.data).values().map(Vec::len).sum::<usize>()),
        )
        .await;
        assert_eq!(normalized(&b.data), want, "{scenario}");
    }
    b.shutdown().await;
}

/// A stand-in server on 127.0.0.1:0 running `app`; its base URL.
async fn serve_app(app: Router) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    url
}

/// An OpenCode-shaped `serve`: `GET /event` streams the recording and stays open; nothing
/// is pending (`GET /permission`).
async fn opencode() -> String {
    const RECORDED: &str = include_str!("data/opencode-1.18.33-permission.sse");
    let stream = || async {
        let frames: Vec<Result<Bytes, std::io::Error>> =
            RECORDED.lines().filter(|l| l.starts_with("data: ")).map(|l| Ok(Bytes::from(format!("{l}\n\n")))).collect();
        let body = futures_util::StreamExt::chain(futures_util::stream::iter(frames), futures_util::stream::pending());
        ([("content-type", "text/event-stream")], Body::from_stream(body)).into_response()
    };
    serve_app(
        Router::new()
            .route("/event", get(stream))
            .route("/permission", get(|| async { axum::Json(json!([])).into_response() })),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_primary() {
    let url = opencode().await;
    replay("opencode-primary", &format!("vendor = \"opencode\"\nurl = \"{url}\"\nmode = \"primary\"")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_companion() {
    let url = opencode().await;
    replay("opencode-companion", &format!("vendor = \"opencode\"\nurl = \"{url}\"")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kilocode_primary() {
    let url = opencode().await;
    replay("kilocode-primary", &format!("vendor = \"kilocode\"\nurl = \"{url}\"\nmode = \"primary\"")).await;
}

/// A kap-server: one session listed, nothing pending; a subscription is acknowledged from
/// the recording's epoch at seq 0 and then hears the recording, frame by frame.
async fn kimi(recording: &'static str) -> String {
    let frames: Arc<Vec<Value>> = Arc::new(recording.lines().map(|l| serde_json::from_str(l).unwrap()).collect());
    let session = frames[0]["session_id"].as_str().unwrap().to_owned();
    let epoch = frames[0]["epoch"].clone();
    let envelope = |data: Value| axum::Json(json!({"code": 0, "msg": "success", "data": data})).into_response();
    let listed = json!({"items": [{"id": session, "title": ""}], "has_more": false});
    let socket = move |ws: WebSocketUpgrade, State(frames): State<Arc<Vec<Value>>>| {
        let epoch = epoch.clone();
        async move {
            // The bearer's subprotocol is chosen, as the kap-server does.
            ws.protocols(["kimi-code.bearer.t"]).on_upgrade(move |mut sock: WebSocket| async move {
                while let Some(Ok(m)) = sock.recv().await {
                    let WsMessage::Text(t) = m else { continue };
                    let sub: Value = serde_json::from_str(t.as_str()).unwrap();
                    let ids = sub["payload"]["session_ids"].clone();
                    let cursors: serde_json::Map<String, Value> = ids
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|s| Some((s.as_str()?.to_owned(), json!({"seq": 0, "epoch": epoch}))))
                        .collect();
                    let ack = json!({"type": "ack", "id": sub["id"], "code": 0, "msg": "success",
                        "payload": {"accepted": ids, "not_found": [], "resync_required": [], "cursors": cursors}});
                    let _ = sock.send(WsMessage::text(ack.to_string())).await;
                    for f in frames.iter() {
                        let _ = sock.send(WsMessage::text(f.to_string())).await;
                    }
                }
            })
        }
    };
    serve_app(
        Router::new()
            .route("/api/v1/ws", get(socket))
            .route("/api/v1/sessions", get(move || async move { envelope(listed) }))
            .route("/api/v1/sessions/{sid}/{list}", get(move || async move { envelope(json!({"items": []})) }))
            .with_state(frames),
    )
    .await
}

fn kimi_section(url: &str, mode: &str) -> String {
    format!("vendor = \"kimi-code\"\nurl = \"{url}\"\nmode = \"{mode}\"\ntoken = \"t\"\npoll_ms = 100")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kimi_primary_approval() {
    let url = kimi(include_str!("data/kimi-code-0.28.0-web-approval.jsonl")).await;
    replay("kimi-primary-approval", &kimi_section(&url, "primary")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kimi_primary_rejected() {
    let url = kimi(include_str!("data/kimi-code-0.28.0-web-rejected.jsonl")).await;
    replay("kimi-primary-rejected", &kimi_section(&url, "primary")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kimi_companion_approval() {
    let url = kimi(include_str!("data/kimi-code-0.28.0-web-approval.jsonl")).await;
    replay("kimi-companion-approval", &kimi_section(&url, "companion")).await;
}

/// An OpenHands agent server with one conversation whose persisted history is the
/// recording: its socket pushes the conversation's state (as of the history's last status
/// and time) and then stays silent; the history comes over `events/search` in one page.
async fn openhands(history: Vec<Value>) -> String {
    let conv = history
        .iter()
        .find_map(|e| e.pointer("/value/id").and_then(Value::as_str))
        .unwrap_or("4c1f2a9e-7d3b-4e21-9a6f-0b8e5d2c7a10")
        .to_owned();
    let status =
        history.iter().rev().find(|e| e["key"] == "execution_status").map_or(json!("idle"), |e| e["value"].clone());
    let now = history.last().and_then(|e| e["timestamp"].as_str()).unwrap_or_default().to_owned();
    let push = json!({"kind": "ConversationStateUpdateEvent", "id": "state-push-0", "timestamp": now,
        "source": "environment", "key": "full_state", "value": {"id": conv, "execution_status": status}});
    let history = Arc::new(history);
    let listed = json!({"items": [{"id": conv}], "next_page_id": null});
    let socket = move |ws: WebSocketUpgrade| {
        let push = push.clone();
        async move {
            ws.on_upgrade(move |mut sock: WebSocket| async move {
                let _ = sock.send(WsMessage::text(push.to_string())).await;
                while let Some(Ok(_)) = sock.recv().await {}
            })
        }
    };
    let search = |State(h): State<Arc<Vec<Value>>>, UrlPath(_id): UrlPath<String>| async move {
        axum::Json(json!({"items": *h, "next_page_id": null})).into_response()
    };
    serve_app(
        Router::new()
            .route("/api/conversations/search", get(move || async move { axum::Json(listed).into_response() }))
            .route("/api/conversations/{id}", get(|| async { axum::Json(json!({})).into_response() }))
            .route("/sockets/events/{id}", any(socket))
            .route("/api/conversations/{id}/events/search", get(search))
            .with_state(history),
    )
    .await
}

fn openhands_section(url: &str, control: bool) -> String {
    format!("vendor = \"openhands\"\nurl = \"{url}\"\ncontrol = {control}")
}

/// The 1.35.0 confirmation session (written in the transport shape).
fn confirmation() -> Vec<Value> {
    include_str!("data/openhands-1.35.0-confirmation.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The 1.58.2 session's persisted history (its `history` lines).
fn exit_2() -> Vec<Value> {
    include_str!("data/openhands-1.58.2-exit2.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["via"] == "history")
        .map(|v| v["frame"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openhands_confirmation_read_only() {
    let url = openhands(confirmation()).await;
    replay("openhands-confirmation", &openhands_section(&url, false)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openhands_confirmation_gated() {
    let url = openhands(confirmation()).await;
    replay("openhands-confirmation-gated", &openhands_section(&url, true)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openhands_exit_2() {
    let url = openhands(exit_2()).await;
    replay("openhands-exit2", &openhands_section(&url, false)).await;
}
