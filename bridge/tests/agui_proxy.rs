//! The AG-UI tee proxy end to end: a real AG-UI agent stand-in (an HTTP server on
//! 127.0.0.1:0 answering a run POST with its event stream as `text/event-stream`, fed piece
//! by piece by the test) and a real HTTP client posting its `RunAgentInput` through the
//! proxy. The stream the client reads is the agent's, byte for byte and as it is sent; the
//! events reach the session log mapped by the pinned AG-UI table; a broken agent breaks
//! nothing but its own stream.

use aep_testkit as common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::bridges::BridgeConfig;
use aep_bridge::transport::config::HttpUrl;
use aep_bridge::transport::{HttpClient, HttpOptions};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use common::*;
use serde_json::{Value, json};
use tokio::sync::mpsc;

const THREAD: &str = "thread-agui-1";

/// What the agent stand-in saw, and the pipe feeding its current answer.
#[derive(Default)]
struct Agent {
    requests: Mutex<Vec<(String, HeaderMap, Bytes)>>,
    pipe: Mutex<Option<mpsc::UnboundedSender<Result<Bytes, std::io::Error>>>>,
    /// The next run is refused with this status and JSON body.
    refuse: Mutex<Option<(u16, Value)>>,
    /// Holds a permit once a run is being answered.
    answering: tokio::sync::Notify,
}

impl Agent {
    fn send(&self, b: impl Into<Bytes>) {
        let _ = self.pipe.lock().unwrap().as_ref().unwrap().send(Ok(b.into()));
    }

    /// Ends the answer cleanly.
    fn end(&self) {
        self.pipe.lock().unwrap().take();
    }

    /// Breaks the answer mid-stream (the connection is cut).
    fn break_off(&self) {
        if let Some(tx) = self.pipe.lock().unwrap().take() {
            let _ = tx.send(Err(std::io::Error::other("agent crashed")));
        }
    }
}

async fn run(State(a): State<Arc<Agent>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    a.requests.lock().unwrap().push((uri.to_string(), headers, body));
    if let Some((status, body)) = a.refuse.lock().unwrap().take() {
        return (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
    }
    let (tx, rx) = mpsc::unbounded_channel();
    *a.pipe.lock().unwrap() = Some(tx);
    a.answering.notify_one();
    let body = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    (
        [("content-type", "text/event-stream"), ("cache-control", "no-cache"), ("x-agent", "stand-in")],
        Body::from_stream(body),
    )
        .into_response()
}

async fn agent() -> (Arc<Agent>, String) {
    let a = Arc::new(Agent::default());
    let app = Router::new().route("/agent", post(run)).route("/agent/info", post(run)).with_state(a.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/agent", l.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (a, url)
}

async fn proxy(upstream: &str, max_frame: usize) -> (Running, std::net::SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.bridges.insert(
        "ui".into(),
        BridgeConfig {
            url: Some(HttpUrl::parse(upstream).unwrap()),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            max_frame_bytes: max_frame,
            ..BridgeConfig::of("agui", serde_json::Value::Null)
        },
    );
    let b = start(cfg).await;
    let at = b.bound.bridges["ui"];
    (b, at, dir)
}

fn client() -> HttpClient {
    HttpClient::streaming(&HttpOptions::default()).unwrap()
}

fn input() -> Value {
    json!({"threadId": THREAD, "runId": "run-1", "state": {}, "messages": [{"id": "m0", "role": "user",
        "content": "What is the weather in Lisbon?"}], "tools": [], "context": [], "forwardedProps": {}})
}

fn log(dir: &std::path::Path) -> Vec<Value> {
    aep_testkit::log_events(&dir.join("logs").join("agui").join(format!("{THREAD}.jsonl")))
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn frame(ev: &Value) -> String {
    format!("data: {ev}\n\n")
}

/// Reads the answer until it holds `want` bytes (or ends).
async fn read_until(s: &mut aep_bridge::transport::http::Stream, got: &mut Vec<u8>, want: usize) {
    tokio::time::timeout(Duration::from_secs(20), async {
        while got.len() < want {
            match s.chunk().await.unwrap() {
                Some(c) => got.extend_from_slice(&c),
                None => break,
            }
        }
    })
    .await
    .expect("the proxy held the stream back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_reads_the_agents_stream_byte_for_byte_as_it_is_sent_and_the_run_is_logged() {
    let (agent, upstream) = agent().await;
    let (b, at, dir) = proxy(&upstream, 4096).await;
    let body = serde_json::to_vec_pretty(&input()).unwrap();
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    headers.insert("accept", "text/event-stream".parse().unwrap());
    headers.insert("authorization", "Bearer ui-token".parse().unwrap());
    headers.insert("accept-encoding", "gzip, br".parse().unwrap());
    let mut s =
        client().forward("POST", &format!("http://{at}/?x=1"), headers, Bytes::from(body.clone())).await.unwrap();
    // The run went to the agent verbatim: the body's bytes, its headers, the query.
    let (uri, seen, sent) = agent.requests.lock().unwrap()[0].clone();
    assert_eq!((uri.as_str(), sent.as_ref()), ("/agent?x=1", body.as_slice()));
    assert_eq!(seen["authorization"], "Bearer ui-token");
    // The stream is asked for uncompressed: the tee reads what the client reads.
    assert!(seen.get("accept-encoding").is_none());
    assert_eq!((s.status, s.content_type.as_str()), (200, "text/event-stream"));
    assert_eq!(s.headers()["x-agent"], "stand-in");

    let events = [
        json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-1"}),
        json!({"type": "STEP_STARTED", "stepName": "plan"}),
        json!({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Checking "}),
        json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "the weather."}),
        json!({"type": "TEXT_MESSAGE_END", "messageId": "m1"}),
        json!({"type": "TOOL_CALL_START", "toolCallId": "tc1", "toolCallName": "get_weather", "parentMessageId": "m1"}),
        json!({"type": "TOOL_CALL_ARGS", "toolCallId": "tc1", "delta": "{\"city\":\"Lisbon\"}"}),
        json!({"type": "TOOL_CALL_END", "toolCallId": "tc1"}),
        json!({"type": "TOOL_CALL_RESULT", "messageId": "m2", "toolCallId": "tc1", "content": "21C, sunny", "role": "tool"}),
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"city": "Lisbon"}}),
        json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/temp", "value": 21}]}),
        json!({"type": "STEP_FINISHED", "stepName": "plan"}),
        json!({"type": "RUN_FINISHED", "threadId": THREAD, "runId": "run-1", "result": "done"}),
    ];
    let mut expected: Vec<u8> = Vec::new();
    let mut got: Vec<u8> = Vec::new();
    // Each piece reaches the client before the agent sends the next: nothing is held back.
    let first = frame(&events[0]);
    agent.send(first.clone());
    expected.extend_from_slice(first.as_bytes());
    read_until(&mut s, &mut got, expected.len()).await;
    assert_eq!(got, expected);
    // A frame split mid-line and mid-CRLF, a comment, garbage, and an oversized frame: all
    // passed through untouched; only the well-formed events are mapped.
    let step = format!("data: {}\r\n\r\n", events[1]);
    let (a, b2) = step.split_at(17);
    for piece in [a.to_owned(), b2.to_owned(), ": keep-alive\n\n".to_owned(), "data: {not json\n\n".to_owned()] {
        agent.send(piece.clone());
        expected.extend_from_slice(piece.as_bytes());
        read_until(&mut s, &mut got, expected.len()).await;
    }
    let huge = frame(&json!({"type": "CUSTOM", "name": "huge", "value": "v".repeat(8192)}));
    for ev in &events[2..] {
        let f = frame(ev);
        agent.send(f.clone());
        expected.extend_from_slice(f.as_bytes());
        if ev["type"] == "TOOL_CALL_RESULT" {
            agent.send(huge.clone());
            expected.extend_from_slice(huge.as_bytes());
        }
    }
    agent.end();
    read_until(&mut s, &mut got, usize::MAX).await;
    assert_eq!(got, expected, "the client's bytes are the agent's");

    b.until_logged(|| types(&log(&b.data)).contains(&"run.finished"), || "run.finished".into()).await;
    let logged = log(&b.data);
    assert_eq!(
        types(&logged),
        [
            "run.started",
            "run.step.started",
            "x.agui.text_message.start",
            "x.agui.text_message.end",
            "tool.requested",
            "tool.completed",
            "state.snapshot",
            "state.delta",
            "run.step.finished",
            "run.finished",
        ]
    );
    assert!(logged.iter().all(|e| e["agent"] == "agui" && e["session"] == THREAD && e["run"] == "run-1"));
    let done = &logged[5];
    assert_eq!(done["data"]["tool"], json!({"name": "get_weather", "call_id": "tc1"}));
    assert_eq!((done["cause"].clone(), done["step"].as_str()), (logged[4]["id"].clone(), Some("plan")));
    assert_eq!(logged[7]["data"]["ops"], 1);
    assert_eq!(logged[9]["cause"], logged[0]["id"]);
    let text = std::fs::read_to_string(b.data.join("logs/agui").join(format!("{THREAD}.jsonl"))).unwrap();
    let (_, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
    assert!(failures.is_empty(), "{failures:?}");
    drop(dir);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_agent_or_a_departed_client_breaks_only_its_own_stream() {
    // Nothing listens there: a 502 naming the agent, nothing mapped.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let (b, at, dir) = proxy(&format!("http://{closed}/agent"), 4096).await;
    let r = client().forward("POST", &format!("http://{at}/"), Default::default(), Bytes::from("{}")).await.unwrap();
    assert_eq!(r.status, 502);
    assert!(r.text(1000).await.contains("the agent is unreachable"));
    b.shutdown().await;
    drop(dir);

    let (agent, upstream) = agent().await;
    let (b, at, dir) = proxy(&upstream, 1 << 20).await;
    // The agent refuses the run: its answer passes through as it is, nothing is mapped.
    *agent.refuse.lock().unwrap() = Some((422, json!({"detail": "threadId is required"})));
    let r = client().forward("POST", &format!("http://{at}/"), Default::default(), Bytes::from("{}")).await.unwrap();
    assert_eq!((r.status, r.content_type.as_str()), (422, "application/json"));
    assert_eq!(r.text(1000).await, json!({"detail": "threadId is required"}).to_string());

    // The agent dies mid-run: the client gets every byte sent before, then the break.
    let mut s = client()
        .forward("POST", &format!("http://{at}/"), Default::default(), Bytes::from(input().to_string()))
        .await
        .unwrap();
    let started = frame(&json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-2"}));
    agent.send(started.clone());
    let mut got = Vec::new();
    read_until(&mut s, &mut got, started.len()).await;
    assert_eq!(got, started.as_bytes());
    agent.break_off();
    let broke = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            match s.chunk().await {
                Ok(Some(_)) => {}
                Ok(None) => return false,
                Err(_) => return true,
            }
        }
    })
    .await
    .unwrap();
    assert!(broke, "the break reaches the client as a broken stream, not a clean end");
    b.until_logged(|| types(&log(&b.data)).contains(&"run.started"), || "run.started".into()).await;

    // The client walks away mid-run: the agent's stream is let go too (its sender sees the
    // receiving side gone), and what was observed stays.
    let mut s = client()
        .forward("POST", &format!("http://{at}/"), Default::default(), Bytes::from(input().to_string()))
        .await
        .unwrap();
    let started = frame(&json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-2b"}));
    agent.send(started.clone());
    read_until(&mut s, &mut Vec::new(), started.len()).await;
    drop(s);
    let pipe = agent.pipe.lock().unwrap().clone().expect("the agent's stream");
    let let_go = tokio::time::timeout(Duration::from_secs(20), pipe.closed()).await;
    assert!(let_go.is_ok(), "the agent's stream was not let go");
    agent.end();
    // Each stream is teed by its own task: the abandoned stream's run.started is in the log
    // before the next run starts, or the two streams' events may interleave either way.
    let started = || types(&log(&b.data)).iter().filter(|t| **t == "run.started").count();
    b.until_logged(|| started() == 2, || format!("run-2b's run.started ({} run.started)", started())).await;

    // The proxy goes on serving: a later run streams and is observed.
    let mut s = client()
        .forward("POST", &format!("http://{at}/"), Default::default(), Bytes::from(input().to_string()))
        .await
        .unwrap();
    agent.send(frame(&json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-3"})));
    agent.send(frame(&json!({"type": "RUN_ERROR", "message": "model overloaded", "code": "overloaded"})));
    agent.end();
    read_until(&mut s, &mut Vec::new(), usize::MAX).await;
    b.until_logged(|| types(&log(&b.data)).contains(&"run.failed"), || "run.failed".into()).await;
    let logged = log(&b.data);
    // Nothing is synthesized for the runs the broken and the abandoned streams left open.
    assert_eq!(types(&logged), ["run.started", "run.started", "run.started", "run.failed"]);
    assert_eq!((logged[3]["run"].as_str(), logged[3]["data"]["reason"].as_str()), (Some("run-3"), Some("overloaded")));
    drop(dir);
    b.shutdown().await;
}

/// The AG-UI proxy's identity takes no command (bridge-agui-design: `control: { accepts: [] }`):
/// its `hello` to the relay declares none, so the relay lists its session read-only and
/// refuses a command for it on its behalf (AEP-0004 §4.2), where before it was declared
/// answerable and the command went nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_declares_no_command_to_its_relay_and_the_relay_refuses_one() {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    const TOKEN: &str = "relay-token";
    let relay_dir = tempfile::tempdir().unwrap();
    let mut rcfg = config(relay_dir.path());
    rcfg.server.token = TOKEN.into();
    let relay = start(rcfg).await;
    let (agent, upstream) = agent().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.relay.url = Some(relay.url().parse().unwrap());
    cfg.relay.token = TOKEN.into();
    cfg.bridges.insert(
        "ui".into(),
        BridgeConfig {
            url: Some(HttpUrl::parse(&upstream).unwrap()),
            listen: Some("127.0.0.1:0".parse().unwrap()),
            ..BridgeConfig::of("agui", serde_json::Value::Null)
        },
    );
    let b = start(cfg).await;
    let at = b.bound.bridges["ui"];
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    let mut s =
        client().forward("POST", &format!("http://{at}/"), headers, Bytes::from(input().to_string())).await.unwrap();
    let answering = tokio::time::timeout(Duration::from_secs(20), agent.answering.notified()).await;
    assert!(answering.is_ok(), "the agent was not asked");
    agent.send(frame(&json!({"type": "RUN_STARTED", "threadId": THREAD, "runId": "run-1"})));
    let mut got = Vec::new();
    read_until(&mut s, &mut got, 1).await;
    let upstream_log = relay_dir.path().join("logs").join("agui").join(format!("{THREAD}.jsonl"));
    let copied = || std::fs::read_to_string(&upstream_log).is_ok_and(|t| t.contains("run.started"));
    relay.until_logged(copied, || "the relay's copy".into()).await;

    let mut req = format!("ws://{}/socket", relay.bound.http).into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let hello = json!({"type": "hello", "versions": ["0.1"], "role": "both", "identity": {"agent": "phone"}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    next_frame(&mut ws, |v| v["type"] == "hello").await;
    ws.send(Message::text(json!({"type": "roster", "id": "r1"}).to_string())).await.unwrap();
    let roster = next_frame(&mut ws, |v| v["type"] == "roster").await;
    let entry = roster["entries"].as_array().unwrap().iter().find(|e| e["session"] == THREAD).expect("claim listed");
    assert_eq!((entry["agent"].as_str(), &entry["control"]["accepts"]), (Some("agui"), &json!([])), "{entry}");
    let cmd = json!({"aep": "0.1", "id": "c-agui", "type": "control.attention.respond", "subject": "r", "cause": "r",
        "time": "2026-12-02T00:00:00.000Z", "source": "aep://phone/agent/phone", "agent": "phone",
        "session": THREAD, "data": {"answer": {"option": "allow"}}});
    ws.send(Message::text(cmd.to_string())).await.unwrap();
    let nack = next_frame(&mut ws, |v| v["cause"] == "c-agui").await;
    assert_eq!(nack["code"], "unsupported", "{nack}");
    agent.end();
    b.shutdown().await;
    relay.shutdown().await;
}

/// The next text frame on `ws` that `pred` accepts.
async fn next_frame(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    use futures_util::StreamExt;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(m)) = ws.next().await {
            if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
                let v: Value = serde_json::from_str(&t).unwrap();
                if pred(&v) {
                    return v;
                }
            }
        }
        panic!("socket closed")
    })
    .await
    .expect("timed out waiting for a frame")
}
