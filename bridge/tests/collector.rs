//! The embedded collector (AEP-0003) over real sockets: discovery, HTTP emit, SSE and
//! WebSocket consumption, resume and eviction, capture ceilings, hello rules, in-band
//! subscribe refusals, roster, control gating and routing, byte identity, backpressure.
//!
//! The clients are deliberately low level (a raw-socket SSE reader, a bare WebSocket) so
//! the assertions see the exact bytes on the wire.

use aep_testkit as common;

use std::time::{Duration, Instant};

use common::{Running, config, start};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

// ---- clients -------------------------------------------------------------------------

/// How long a test waits for something that should arrive.
pub const WAIT: Duration = Duration::from_secs(10);

/// One event line as an emitter serializes it (member order chosen by the emitter).
pub fn ev(ty: &str, session: &str, seq: u64, data: Option<Value>) -> Value {
    let mut e = json!({
        "aep": "0.1",
        "id": format!("{session}-{seq}"),
        "type": ty,
        "time": "2026-11-30T06:00:00.000Z",
        "source": format!("aep://test/agent/t/session/{session}"),
        "agent": "t",
        "session": session,
        "seq": seq,
        "epoch": 0,
    });
    if let Some(d) = data {
        e["data"] = d;
    }
    e
}

/// `session.started` with a minimal payload.
pub fn started(session: &str, seq: u64) -> Value {
    ev("session.started", session, seq, Some(json!({"client": {"name": "t"}})))
}

/// Serializes like JavaScript's `JSON.stringify` would for these shapes (compact, in order).
pub fn line(v: &Value) -> String {
    v.to_string()
}

/// POSTs `body` to `/events` with a content type and extra headers; status and body.
pub async fn post_raw(base: &str, content_type: &str, body: Vec<u8>, headers: Vec<(&str, String)>) -> (u16, Value) {
    let url = format!("{base}/events");
    let ct = content_type.to_owned();
    let headers: Vec<(String, String)> = headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.post(&url).header("content-type", &ct);
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let mut resp = req.send(&body[..]).expect("request failed");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    })
    .await
    .unwrap()
}

/// POSTs an NDJSON batch with `AEP-Version: 0.1`.
pub async fn post_batch(base: &str, events: &[Value]) -> (u16, Value) {
    let body: String = events.iter().map(|e| line(e) + "\n").collect();
    post_raw(base, "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into())]).await
}

/// POSTs one event as `application/json` with `AEP-Version: 0.1`.
pub async fn post_one(base: &str, e: &Value) -> (u16, Value) {
    post_raw(base, "application/json", line(e).into_bytes(), vec![("aep-version", "0.1".into())]).await
}

/// GETs a path; status and body text.
pub async fn get_text(url: String, headers: Vec<(&str, String)>) -> (u16, String) {
    let headers: Vec<(String, String)> = headers.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.get(&url);
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let mut resp = req.call().expect("request failed");
        (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default())
    })
    .await
    .unwrap()
}

/// Percent-encodes a query value.
pub fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One parsed SSE message.
#[derive(Debug, Clone, Default)]
pub struct SseMsg {
    /// `event:`
    pub event: Option<String>,
    /// `id:`
    pub id: Option<String>,
    /// `data:` (one line)
    pub data: Option<String>,
    /// Comment lines, verbatim including the leading colon.
    pub comments: Vec<String>,
}

/// A raw SSE reader over an HTTP/1.0 connection (close-delimited, no chunking).
pub struct Sse {
    sock: TcpStream,
    /// Everything after the response head.
    pub raw: String,
    /// The response status.
    pub status: u16,
    /// Whether the server ended the stream.
    pub ended: bool,
}

impl Sse {
    /// Opens `GET {path}` on the bridge at `addr` (host:port). Returns once the response
    /// head arrived: the endpoint subscribes before it answers, so the head acknowledges
    /// the subscription and anything published after it is delivered.
    pub async fn open(addr: &str, path: &str, headers: &[(&str, &str)]) -> Sse {
        let sock = TcpStream::connect(addr).await.expect("connect");
        Sse::request(sock, addr, path, headers).await
    }

    /// Opens `GET {path}` over an already connected socket, no extra headers.
    pub async fn over(sock: TcpStream, addr: &str, path: &str) -> Sse {
        Sse::request(sock, addr, path, &[]).await
    }

    async fn request(mut sock: TcpStream, addr: &str, path: &str, headers: &[(&str, &str)]) -> Sse {
        let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        sock.write_all(req.as_bytes()).await.unwrap();
        let mut s = Sse { sock, raw: String::new(), status: 0, ended: false };
        let mut head = Vec::new();
        let deadline = Instant::now() + WAIT;
        while !head.ends_with(b"\r\n\r\n") {
            let mut b = [0u8; 1];
            match tokio::time::timeout_at(deadline.into(), s.sock.read(&mut b)).await {
                Ok(Ok(1)) => head.push(b[0]),
                _ => panic!("no response head: {}", String::from_utf8_lossy(&head)),
            }
        }
        let head = String::from_utf8_lossy(&head).into_owned();
        s.status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        s
    }

    /// Reads until `done(raw)` holds, the stream ends, or `timeout` passes; returns `done`'s verdict.
    pub async fn until(&mut self, timeout: Duration, done: impl Fn(&str) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut buf = vec![0u8; 64 * 1024];
        while !done(&self.raw) && !self.ended {
            match tokio::time::timeout_at(deadline, self.sock.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => self.ended = true,
                Ok(Ok(n)) => self.raw.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(_) => break,
            }
        }
        done(&self.raw)
    }

    /// Reads until `n` data messages arrived (or timeout).
    pub async fn events(&mut self, n: usize) -> Vec<SseMsg> {
        self.until(WAIT, |r| data_count(r) >= n).await;
        self.messages().into_iter().filter(|m| m.data.is_some()).collect()
    }

    /// Reads to the end of the stream.
    pub async fn to_end(&mut self) {
        self.until(WAIT, |_| false).await;
        assert!(self.ended, "the stream did not end: {}", self.raw);
    }

    /// Every complete message received so far.
    pub fn messages(&self) -> Vec<SseMsg> {
        let complete = match self.raw.rfind("\n\n") {
            Some(i) => &self.raw[..i],
            None => "",
        };
        complete
            .split("\n\n")
            .filter(|b| !b.is_empty())
            .map(|block| {
                let mut m = SseMsg::default();
                for l in block.split('\n') {
                    if l.starts_with(':') {
                        m.comments.push(l.to_owned());
                    } else if let Some(v) = l.strip_prefix("data: ") {
                        assert!(m.data.is_none(), "one data line per event (AEP-0003 §3.3 rule 2): {block}");
                        m.data = Some(v.to_owned());
                    } else if let Some(v) = l.strip_prefix("id: ") {
                        m.id = Some(v.to_owned());
                    } else if let Some(v) = l.strip_prefix("event: ") {
                        m.event = Some(v.to_owned());
                    }
                }
                m
            })
            .collect()
    }
}

/// Number of complete `data:` messages in `raw`.
pub fn data_count(raw: &str) -> usize {
    let complete = match raw.rfind("\n\n") {
        Some(i) => &raw[..i],
        None => "",
    };
    complete.split("\n\n").filter(|b| b.split('\n').any(|l| l.starts_with("data: "))).count()
}

/// A WebSocket peer on `/socket`.
pub struct Ws {
    inner: tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<TcpStream>>,
    /// Whether the server closed.
    pub closed: bool,
}

/// A `hello` frame.
pub fn hello(role: &str, agent: &str, caps: Value) -> Value {
    json!({"type": "hello", "versions": ["0.1"], "role": role,
        "identity": {"agent": agent, "instance": format!("{agent}/1")}, "capabilities": caps})
}

impl Ws {
    /// Connects, optionally with a bearer token.
    pub async fn connect(addr: &str, token: Option<&str>) -> Ws {
        let mut req = format!("ws://{addr}/socket").into_client_request().unwrap();
        if let Some(t) = token {
            req.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let (inner, _) = tokio_tungstenite::connect_async(req).await.expect("ws connect");
        Ws { inner, closed: false }
    }

    /// Connects and completes a `hello` exchange; returns the endpoint's hello.
    pub async fn open(addr: &str, token: Option<&str>, role: &str, agent: &str, caps: Value) -> (Ws, Value) {
        let mut ws = Ws::connect(addr, token).await;
        ws.send(&hello(role, agent, caps)).await;
        let h = ws.recv().await.expect("no hello reply");
        assert_eq!(h["type"], "hello", "{h}");
        (ws, h)
    }

    /// Sends one JSON text frame.
    pub async fn send(&mut self, v: &Value) {
        self.send_text(&v.to_string()).await;
    }

    /// Sends raw text.
    pub async fn send_text(&mut self, t: &str) {
        self.inner.send(Message::Text(t.to_owned().into())).await.expect("ws send");
    }

    /// Sends a binary frame.
    pub async fn send_binary(&mut self, b: &[u8]) {
        self.inner.send(Message::Binary(b.to_vec().into())).await.expect("ws send");
    }

    /// The next text frame as raw text, or `None` on close/timeout.
    pub async fn recv_raw_for(&mut self, d: Duration) -> Option<String> {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            match tokio::time::timeout_at(deadline, self.inner.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => return Some(t.to_string()),
                Ok(Some(Ok(Message::Close(_)))) | Ok(Some(Err(_))) | Ok(None) => {
                    self.closed = true;
                    return None;
                }
                Ok(Some(Ok(Message::Binary(_)))) => panic!("the endpoint sent a binary frame"),
                Ok(Some(Ok(_))) => continue,
                Err(_) => return None,
            }
        }
    }

    /// The next text frame, parsed.
    pub async fn recv(&mut self) -> Option<Value> {
        self.recv_raw_for(WAIT).await.map(|t| serde_json::from_str(&t).expect("frame is not JSON"))
    }

    /// Frames until one satisfies `pred` (returned), collecting the ones before it.
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> (Option<Value>, Vec<Value>) {
        let mut before = Vec::new();
        while let Some(f) = self.recv().await {
            if pred(&f) {
                return (Some(f), before);
            }
            before.push(f);
        }
        (None, before)
    }

    /// Raw frames received within `d` (for "nothing arrives" assertions).
    pub async fn drain_for(&mut self, d: Duration) -> Vec<String> {
        let deadline = Instant::now() + d;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.recv_raw_for(left).await {
                Some(t) => out.push(t),
                None => break,
            }
        }
        out
    }

    /// Round-trips a ping: the endpoint handles one connection's frames in order, so the
    /// pong means every frame sent before it (an event, and the claim it makes) was handled.
    pub async fn sync(&mut self) {
        self.send(&json!({"type": "ping", "t": "sync"})).await;
        let (f, _) = self.until(|f| f["type"] == "pong" && f["t"] == "sync").await;
        assert!(f.is_some(), "no pong");
    }

    /// Closes, then reads the socket to its end: the endpoint drops the connection (and so
    /// closes TCP) only after it has forgotten the connection's subscriptions and claims.
    pub async fn close_and_wait(mut self) {
        let _ = self.inner.close(None).await;
        while let Ok(Some(Ok(_))) = tokio::time::timeout(WAIT, self.inner.next()).await {}
        let tcp = self.inner.get_mut();
        let mut buf = [0u8; 256];
        loop {
            match tokio::time::timeout(WAIT, tcp.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) => return,
                Ok(Ok(_)) => continue,
                Err(_) => panic!("the endpoint kept the connection open"),
            }
        }
    }

    /// Subscribes and waits for `subscribed` (panics on an error frame).
    pub async fn subscribe(&mut self, frame: Value) {
        let id = frame["id"].clone();
        self.send(&frame).await;
        let (f, _) = self.until(|f| f["id"] == id && (f["type"] == "subscribed" || f["type"] == "error")).await;
        let f = f.expect("no reply to subscribe");
        assert_eq!(f["type"], "subscribed", "{f}");
    }
}

// ---- the bridge under test -----------------------------------------------------------

/// A bridge with a small replay buffer and the given token ("" for none).
async fn bridge(token: &str, tweak: impl FnOnce(&mut aep_bridge::config::Config)) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = token.into();
    cfg.collector.replay_buffer = 4;
    tweak(&mut cfg);
    (start(cfg).await, dir)
}

fn addr(b: &Running) -> String {
    b.bound.http.to_string()
}

// ---- discovery (AEP-0003 §3.4) -------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_document_states_capabilities_truthfully() {
    let (b, _d) = bridge("", |_| {}).await;
    for path in ["/events", "/.well-known/aep"] {
        let (status, body) = get_text(format!("{}{path}", b.url()), vec![]).await;
        assert_eq!(status, 200, "{path}");
        let doc: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(doc["aep"], json!(["0.1"]));
        assert_eq!(doc["role"], "collector");
        assert_eq!(doc["endpoints"], json!({"events": "/events", "stream": "/stream", "socket": "/socket"}));
        let caps = &doc["capabilities"];
        assert_eq!(caps["filters"], json!(["attr-match"]));
        assert_eq!(caps["replay"], json!({"buffer": 4, "all": true}), "the configured depth, replay-all");
        assert_eq!(caps["roster"], json!({}));
        assert_eq!(caps["control"]["accepts"], json!([]), "watch-only without a token: accepts nothing");
    }
    b.shutdown().await;

    // With a token, control is live and the bridge's own control loop's types are declared.
    let (b, _d) = bridge("sekrit", |_| {}).await;
    let (_, body) = get_text(format!("{}/events", b.url()), vec![]).await;
    let doc: Value = serde_json::from_str(&body).unwrap();
    let accepts = doc["capabilities"]["control"]["accepts"].as_array().unwrap().clone();
    assert!(accepts.iter().any(|t| t == "control.attention.respond"), "{doc}");
    b.shutdown().await;
}

// ---- HTTP emit (AEP-0003 §3.2) -------------------------------------------------------

/// Sessions held in the buffer, read back through replay-all without live delivery.
async fn held(b: &Running, session: &str) -> Vec<Value> {
    let filter = enc(&json!({"session": session}).to_string());
    let mut s = Sse::open(&addr(b), &format!("/stream?from=all&live=0&filter={filter}"), &[]).await;
    assert_eq!(s.status, 200);
    s.to_end().await;
    s.messages().iter().filter_map(|m| m.data.as_deref()).map(|d| serde_json::from_str(d).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_events_status_codes() {
    let (b, _d) = bridge("", |c| c.collector.max_body = 64 * 1024).await;
    let base = b.url();

    // 202 for one event and for a batch.
    let (st, _) = post_one(&base, &started("p1", 0)).await;
    assert_eq!(st, 202);
    let batch = [ev("progress.status", "p1", 1, None), ev("progress.status", "p1", 2, None)];
    let (st, body) = post_batch(&base, &batch).await;
    assert_eq!(st, 202, "{body}");
    assert_eq!(held(&b, "p1").await.len(), 3);

    // 400 names the first failing line; the batch is rejected whole, nothing ingested.
    let mut bad = ev("progress.status", "p2", 1, None);
    bad.as_object_mut().unwrap().remove("id");
    let (st, body) =
        post_batch(&base, &[ev("progress.status", "p2", 0, None), bad, ev("progress.status", "p2", 2, None)]).await;
    assert_eq!(st, 400, "{body}");
    assert_eq!(body["error"], "invalid-event");
    assert_eq!(body["line"], 1, "{body}");
    let body = format!("{}\nnot json\n", line(&ev("progress.status", "p2", 0, None)));
    let (st, resp) =
        post_raw(&base, "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!((st, resp["line"].clone()), (400, json!(1)), "{resp}");
    // A command in a batch: commands flow only on the authenticated duplex (AEP-0004 §4.1).
    let cmd = json!({"aep": "0.1", "id": "c1", "type": "control.pause", "time": "2026-11-30T06:00:00Z",
        "source": "aep://test/agent/s", "agent": "s", "session": "p2", "data": {}});
    let (st, resp) = post_batch(&base, &[ev("progress.status", "p2", 0, None), cmd]).await;
    assert_eq!((st, resp["line"].clone()), (400, json!(1)), "{resp}");
    assert!(held(&b, "p2").await.is_empty(), "a rejected batch ingests nothing");

    // 426 + versions for a missing or unsupported AEP-Version.
    for v in [None, Some("9.9"), Some("0.2"), Some("1.0")] {
        let h = v.map(|v| vec![("aep-version", v.to_owned())]).unwrap_or_default();
        let (st, body) = post_raw(&base, "application/json", line(&started("p3", 0)).into_bytes(), h).await;
        assert_eq!(st, 426, "AEP-Version {v:?}");
        assert_eq!(body["versions"], json!(["0.1"]));
    }
    // 415 for a wrong content type, 413 for an oversize body.
    let (st, _) =
        post_raw(&base, "text/plain", line(&started("p3", 0)).into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!(st, 415);
    let big = ev("progress.status", "p3", 0, Some(json!({"message": "x".repeat(100 * 1024)})));
    let (st, body) =
        post_raw(&base, "application/json", line(&big).into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!((st, body["error"].as_str()), (413, Some("payload-too-large")), "{body}");
    assert!(held(&b, "p3").await.is_empty());
    b.shutdown().await;

    // With a token: 401 without credentials, 403 with wrong ones, 202 with the right one.
    let (b, _d) = bridge("sekrit", |_| {}).await;
    let body = || line(&started("p4", 0)).into_bytes();
    let v = || ("aep-version", "0.1".to_owned());
    let (st, _) = post_raw(&b.url(), "application/json", body(), vec![v()]).await;
    assert_eq!(st, 401);
    let (st, _) =
        post_raw(&b.url(), "application/json", body(), vec![v(), ("authorization", "Bearer nope".into())]).await;
    assert_eq!(st, 403);
    let (st, _) =
        post_raw(&b.url(), "application/json", body(), vec![v(), ("authorization", "Bearer sekrit".into())]).await;
    assert_eq!(st, 202);
    // The consuming bindings need it too.
    let s = Sse::open(&addr(&b), "/stream", &[]).await;
    assert_eq!(s.status, 401);
    let s = Sse::open(&addr(&b), "/stream?access_token=sekrit&live=0", &[]).await;
    assert_eq!(s.status, 200, "the EventSource query-token fallback (AEP-0003 §8.1)");
    b.shutdown().await;
}

/// A repeated key (`"type"` twice: a control command to a first-wins reader, a run event
/// to serde_json) is refused on every input binding, and nothing of it is stored or streamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_json_keys_are_refused_on_every_binding() {
    let (b, _d) = bridge("", |_| {}).await;
    let base = b.url();
    let v = || vec![("aep-version", "0.1".to_owned())];
    let twice = |session: &str| {
        let one = line(&ev("run.started", session, 0, None));
        one.replacen("\"type\":\"run.started\"", "\"type\":\"control.cancel\",\"type\":\"run.started\"", 1)
    };
    assert!(twice("d1").contains("control.cancel"), "the fixture really repeats the key");
    let (st, body) = post_raw(&base, "application/json", twice("d1").into_bytes(), v()).await;
    assert_eq!(st, 400, "{body}");
    assert!(body.to_string().contains("duplicate object key"), "{body}");
    let nested =
        line(&ev("progress.status", "d1", 1, None)).replacen("\"aep\":", "\"data\":{\"x\":1,\"x\":2},\"aep\":", 1);
    let ndjson = format!("{}\n{nested}\n", line(&started("d1", 0)));
    let (st, body) = post_raw(&base, "application/x-ndjson", ndjson.into_bytes(), v()).await;
    assert_eq!((st, body["line"].clone()), (400, json!(1)), "{body}");
    assert!(held(&b, "d1").await.is_empty(), "nothing of either body was ingested");

    let (mut ws, _) = Ws::open(&addr(&b), None, "emitter", "t", json!({})).await;
    ws.send_text(&twice("d2")).await;
    let f = ws.recv().await.unwrap();
    assert_eq!((f["type"].as_str(), f["code"].as_str()), (Some("error"), Some("invalid-frame")), "{f}");
    assert!(f["detail"].as_str().unwrap_or("").contains("duplicate object key"), "{f}");
    assert!(held(&b, "d2").await.is_empty());

    let hook = r#"{"session_id":"d3","hook_event_name":"SessionStart","hook_event_name":"PreToolUse"}"#;
    let (st, body) = common::post(format!("{base}/hooks/claude-code"), hook.into(), Vec::new()).await;
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("duplicate object key"), "{body}");
    b.shutdown().await;
}

/// A WebSocket message is bounded like one POST body: a larger one closes that connection
/// (nothing of it is buffered beyond the bound) and the endpoint carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_websocket_message_closes_only_its_connection() {
    let (b, _d) = bridge("", |c| c.collector.max_body = 64 * 1024).await;
    let (mut big, _) = Ws::open(&addr(&b), None, "emitter", "t", json!({})).await;
    let (mut other, _) = Ws::open(&addr(&b), None, "emitter", "t", json!({})).await;
    let e = ev("session.started", "w1", 0, Some(json!({"client": {"name": "x".repeat(65 * 1024)}})));
    big.send(&e).await;
    assert!(big.drain_for(Duration::from_secs(2)).await.is_empty() && big.closed, "closed on the oversized message");
    other.send(&started("w1", 0)).await;
    other.send(&json!({"type": "ping", "t": 1})).await;
    assert_eq!(other.recv().await.unwrap(), json!({"type": "pong", "t": 1}));
    assert_eq!(held(&b, "w1").await.len(), 1, "only the small event was ingested");
    b.shutdown().await;
}

/// A subscription filter is bounded (values and bytes): a 10,000-value filter is refused
/// `limit-exceeded` on both consuming bindings, and the connection carries on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_subscription_filters_are_refused() {
    let (b, _d) = bridge("", |_| {}).await;
    let sessions: Vec<String> = (0..10_000).map(|i| format!("s{i}")).collect();
    let (mut ws, _) = Ws::open(&addr(&b), None, "consumer", "c", json!({})).await;
    ws.send(&json!({"type": "subscribe", "id": "big", "filter": {"session": sessions}})).await;
    let f = ws.recv().await.unwrap();
    assert_eq!(f["code"], "limit-exceeded", "{f}");
    ws.send(&json!({"type": "ping", "t": 7})).await;
    assert_eq!(ws.recv().await.unwrap(), json!({"type": "pong", "t": 7}), "the connection carries on");
    let filter = json!({"session": &sessions[..2000]}).to_string();
    let s = Sse::open(&addr(&b), &format!("/stream?live=0&filter={}", urlencode(&filter)), &[]).await;
    assert_eq!(s.status, 400);
    // A filter within the bound is taken.
    ws.subscribe(json!({"type": "subscribe", "id": "ok", "filter": {"session": &sessions[..100]}})).await;
    b.shutdown().await;
}

fn urlencode(s: &str) -> String {
    s.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect()
}

// ---- SSE (AEP-0003 §3.3) -------------------------------------------------------------

/// A batch reaches the JSONL log as it was posted: each event's line, byte for byte (the
/// emitter's member order, spacing, escapes, CRLF framing stripped), in order, in its own
/// agent's and session's file, whatever the batch interleaves; a rejected batch writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_is_logged_byte_for_byte_per_session() {
    let (b, d) = bridge("", |_| {}).await;
    let odd = r#"{"type": "progress.status", "aep":"0.1", "id":"j1-odd", "time":"2026-11-30T06:00:00Z", "source":"aep://test/agent/t", "agent":"t", "seq":2, "session":"j1", "data":{"phase":"\u0062\/c", "percent":5.0}}"#;
    let mut other = started("j2", 0);
    other["agent"] = json!("u");
    other["source"] = json!("aep://test/agent/u/session/j2");
    let posted = [line(&started("j1", 0)), line(&other), line(&ev("progress.status", "j1", 1, None)), odd.to_owned()];
    // CRLF framing and a blank line between events: framing, not content.
    let body = format!("{}\r\n{}\n\n{}\n{}", posted[0], posted[1], posted[2], posted[3]);
    let (st, reply) =
        post_raw(&b.url(), "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!((st, reply["accepted"].as_u64()), (202, Some(4)), "{reply}");
    let bad = format!("{}\n{{\"aep\":\"0.1\"}}\n", line(&ev("progress.status", "j1", 3, None)));
    let (st, _) =
        post_raw(&b.url(), "application/x-ndjson", bad.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!(st, 400);
    b.shutdown().await;
    let read = |agent: &str, session: &str| {
        std::fs::read_to_string(d.path().join("logs").join(agent).join(format!("{session}.jsonl"))).unwrap()
    };
    assert_eq!(read("t", "j1"), format!("{}\n{}\n{}\n", posted[0], posted[2], posted[3]));
    assert_eq!(read("u", "j2"), format!("{}\n", posted[1]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_fanout_filter_ids_and_byte_identity() {
    let (b, _d) = bridge("", |_| {}).await;
    let filter = enc(&json!({"session": "f1"}).to_string());
    let mut s = Sse::open(&addr(&b), &format!("/stream?filter={filter}"), &[]).await;
    assert_eq!(s.status, 200);
    // Member order differs from the bridge's own serialization: delivery keeps the emitter's.
    // An emitter's own serialization (member order, spacing, escapes, number spelling) is
    // what every consumer receives, never a re-serialization of it.
    let odd = r#"{"type": "progress.status", "aep":"0.1", "id":"f1-odd", "time":"2026-11-30T06:00:00Z", "source":"aep://test/agent/t", "agent":"t", "seq":3, "session":"f1", "data":{"phase":"\u0062\/c", "percent":5.0}}"#;
    let posted = [
        line(&started("f1", 0)),
        line(&ev("progress.status", "other", 0, None)),
        line(&ev("tool.completed", "f1", 1, Some(json!({"tool": {"name": "demo"}, "status": "success"})))),
        line(&ev("progress.status", "f1", 2, None)),
        odd.to_owned(),
    ];
    let body: String = posted.iter().map(|l| format!("{l}\n")).collect();
    let (st, _) =
        post_raw(&b.url(), "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!(st, 202);
    let got = s.events(4).await;
    assert_eq!(got.len(), 4, "{}", s.raw);
    let want: Vec<&String> = posted.iter().filter(|l| !l.contains("\"other\"")).collect();
    for (m, l) in got.iter().zip(&want) {
        let e: Value = serde_json::from_str(l).unwrap();
        assert_eq!(m.data.as_deref(), Some(l.as_str()), "data: is the posted line byte for byte");
        assert_eq!(m.event.as_deref(), e["type"].as_str());
        assert_eq!(m.id.as_deref(), Some(format!("f1:0:{}", e["seq"]).as_str()));
    }
    // A pretty-printed single event is compacted (SSE data is one line), member order kept.
    let pretty = serde_json::to_string_pretty(&ev("progress.status", "f1", 4, None)).unwrap();
    let (st, _) =
        post_raw(&b.url(), "application/json", pretty.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!(st, 202);
    let got = s.events(5).await;
    assert_eq!(got[4].data.as_deref(), Some(line(&ev("progress.status", "f1", 4, None)).as_str()));
    // Agent-scoped events are live-only and carry no `id:` (not a resumable position).
    let filter = enc(&json!({"type": "agent.*"}).to_string());
    let mut a = Sse::open(&addr(&b), &format!("/stream?filter={filter}"), &[]).await;
    let presence = json!({"aep": "0.1", "id": "pres-1", "type": "agent.presence", "time": "2026-11-30T06:00:00Z",
        "source": "aep://test/agent/t", "agent": "t", "data": {"state": "online"}});
    assert_eq!(post_one(&b.url(), &presence).await.0, 202);
    let got = a.events(1).await;
    assert_eq!(got[0].data.as_deref(), Some(line(&presence).as_str()));
    assert_eq!(got[0].id, None);
    let mut r = Sse::open(&addr(&b), &format!("/stream?from=all&live=0&filter={filter}"), &[]).await;
    r.to_end().await;
    assert_eq!(data_count(&r.raw), 0, "agent-scoped events are never buffered: {}", r.raw);
    // A malformed filter, ceiling, `from`, or `live` is refused before the stream starts.
    for q in ["filter=%7B%22nope%20key%22%3A1%7D", "capture=most", "from=%7B%7D", "from=nope", "live=maybe"] {
        let s = Sse::open(&addr(&b), &format!("/stream?{q}"), &[]).await;
        assert_eq!(s.status, 400, "{q}");
    }
    b.shutdown().await;
}

fn seqs(msgs: &[SseMsg]) -> Vec<u64> {
    msgs.iter()
        .filter_map(|m| m.data.as_deref())
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["seq"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_resume_from_and_last_event_id_strictly_after() {
    let (b, _d) = bridge("", |c| c.collector.replay_buffer = 64).await;
    let evs: Vec<Value> = (0..4).map(|i| ev("progress.status", "r1", i, None)).collect();
    assert_eq!(post_batch(&b.url(), &evs).await.0, 202);
    let from = |s: u64| enc(&json!([{"session": "r1", "epoch": 0, "seq": s}]).to_string());

    // `from` replays strictly after, then goes live; a grace period shows no duplicates.
    let mut s = Sse::open(&addr(&b), &format!("/stream?from={}", from(1)), &[]).await;
    s.until(Duration::from_millis(800), |_| false).await;
    assert_eq!(seqs(&s.messages()), [2, 3]);
    assert_eq!(post_one(&b.url(), &ev("progress.status", "r1", 4, None)).await.0, 202);
    s.until(WAIT, |r| data_count(r) >= 3).await;
    s.until(Duration::from_millis(300), |_| false).await;
    assert_eq!(seqs(&s.messages()), [2, 3, 4], "replay, then live, no gap, no duplicate");

    // Last-Event-ID resumes the session it names; `from` takes precedence over it.
    let mut s = Sse::open(&addr(&b), "/stream?live=0", &[("Last-Event-ID", "r1:0:2")]).await;
    s.to_end().await;
    assert_eq!(seqs(&s.messages()), [3, 4]);
    let mut s = Sse::open(&addr(&b), &format!("/stream?live=0&from={}", from(3)), &[("Last-Event-ID", "r1:0:0")]).await;
    s.to_end().await;
    assert_eq!(seqs(&s.messages()), [4]);
    // Gap tolerance: a position past the tail replays nothing.
    let mut s = Sse::open(&addr(&b), &format!("/stream?live=0&from={}", from(99)), &[]).await;
    s.to_end().await;
    assert!(seqs(&s.messages()).is_empty());

    // Dedupe at buffer admission only: a re-POSTed event is forwarded live again, replayed once.
    let filter = enc(&json!({"session": "r1"}).to_string());
    let mut live = Sse::open(&addr(&b), &format!("/stream?filter={filter}"), &[]).await;
    assert_eq!(post_one(&b.url(), &evs[1]).await.0, 202);
    assert_eq!(post_one(&b.url(), &evs[1]).await.0, 202);
    assert_eq!(seqs(&live.events(2).await), [1, 1], "live fan-out forwards redelivery (AEP-0003 §5)");
    let mut s = Sse::open(&addr(&b), &format!("/stream?live=0&from={}", from(0)), &[]).await;
    s.to_end().await;
    assert_eq!(seqs(&s.messages()), [1, 2, 3, 4], "the buffer holds one copy");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_heartbeat_is_a_ping_comment_line() {
    let (b, _d) = bridge("", |c| c.collector.heartbeat_secs = 1).await;
    let mut s = Sse::open(&addr(&b), "/stream", &[]).await;
    assert!(s.until(Duration::from_secs(4), |r| r.contains("\n\n")).await);
    let first = s.raw.split("\n\n").next().unwrap();
    assert_eq!(first, ": ping", "AEP-0003 §3.3 rule 4: the comment line `: ping`");
    b.shutdown().await;
}

// ---- eviction (AEP-0003 §5, §3.3.3, §10) -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_marks_replay_exhausted_on_both_bindings_and_keeps_bytes() {
    let (b, _d) = bridge("", |_| {}).await; // replay_buffer = 4
    let posted: Vec<Value> = (0..12)
        .map(|i| {
            let mut e = ev("progress.status", "ev1", i, None);
            e["epoch"] = json!(1);
            e
        })
        .collect();
    assert_eq!(post_batch(&b.url(), &posted).await.0, 202);
    let from = enc(&json!([{"session": "ev1", "epoch": 1, "seq": 0}]).to_string());

    let mut s = Sse::open(&addr(&b), &format!("/stream?live=0&from={from}"), &[]).await;
    s.to_end().await;
    let msgs = s.messages();
    assert_eq!(msgs[0].comments, [": replay-exhausted ev1 1:8"], "the marker precedes delivery: {}", s.raw);
    let data: Vec<&str> = msgs.iter().filter_map(|m| m.data.as_deref()).collect();
    let want: Vec<String> = posted[8..].iter().map(line).collect();
    assert_eq!(data, want, "earliest held through the last posted, byte-identical");

    let (mut ws, _) = Ws::open(&addr(&b), None, "consumer", "c", json!({})).await;
    ws.send(&json!({"type": "subscribe", "id": "sub-ev", "filter": {"session": "ev1"},
        "from": [{"session": "ev1", "epoch": 1, "seq": 0}]}))
        .await;
    assert_eq!(ws.recv().await.unwrap(), json!({"type": "subscribed", "id": "sub-ev"}));
    let marker = ws.recv().await.unwrap();
    assert_eq!(
        marker,
        json!({"type": "replay-exhausted", "sub": "sub-ev", "session": "ev1", "earliest": {"epoch": 1, "seq": 8}})
    );
    for w in &want {
        assert_eq!(ws.recv_raw_for(WAIT).await.as_deref(), Some(w.as_str()), "WS frame is the posted line");
    }

    // Replay-all over WS: every held event of the session, earliest first, no marker.
    ws.subscribe(json!({"type": "subscribe", "id": "sub-all", "filter": {"session": "ev1"}, "from": "all"})).await;
    for w in &want {
        assert_eq!(ws.recv_raw_for(WAIT).await.as_deref(), Some(w.as_str()), "replay-all, no replay-exhausted first");
    }

    // Not exhausted when nothing after the position was evicted; replay-all never marks.
    let from = enc(&json!([{"session": "ev1", "epoch": 1, "seq": 7}]).to_string());
    let mut s = Sse::open(&addr(&b), &format!("/stream?live=0&from={from}"), &[]).await;
    s.to_end().await;
    assert!(!s.raw.contains("replay-exhausted"), "{}", s.raw);
    assert_eq!(seqs(&s.messages()), [8, 9, 10, 11]);
    assert_eq!(post_one(&b.url(), &started("ev2", 0)).await.0, 202);
    let mut s = Sse::open(&addr(&b), "/stream?live=0&from=all", &[]).await;
    s.to_end().await;
    assert!(!s.raw.contains("replay-exhausted"), "{}", s.raw);
    let all: Vec<Value> =
        s.messages().iter().filter_map(|m| m.data.as_deref()).map(|d| serde_json::from_str(d).unwrap()).collect();
    let of = |sess: &str| {
        all.iter().filter(|e| e["session"] == sess).map(|e| e["seq"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    assert_eq!(of("ev1"), [8, 9, 10, 11]);
    assert_eq!(of("ev2"), [0]);
    b.shutdown().await;
}

// ---- capture ceiling at subscribe (AEP-0003 §6.4, AEP-0001 §8.2) ------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_ceilings_down_level_and_never_up_level() {
    let (b, _d) = bridge("", |_| {}).await;
    let mut redacted = ev("run.started", "cap1", 0, Some(json!({"trigger": "user", "prompt": "CANARY-R"})));
    redacted["capture"] = json!("redacted");
    redacted["run"] = json!("r1");
    let mut full = ev("run.started", "cap1", 1, Some(json!({"trigger": "user", "prompt": "CANARY-F"})));
    full["capture"] = json!("full");
    full["run"] = json!("r2");
    let f = enc(&json!({"session": "cap1"}).to_string());
    let mut meta = Sse::open(&addr(&b), &format!("/stream?filter={f}&capture=metadata"), &[]).await;
    let mut red = Sse::open(&addr(&b), &format!("/stream?filter={f}&capture=redacted"), &[]).await;
    let mut asis = Sse::open(&addr(&b), &format!("/stream?filter={f}"), &[]).await;
    let (mut ws, _) = Ws::open(&addr(&b), None, "consumer", "c", json!({})).await;
    ws.subscribe(json!({"type": "subscribe", "id": "m", "filter": {"session": "cap1"}, "capture": "metadata"})).await;
    assert_eq!(post_batch(&b.url(), &[redacted.clone(), full.clone()]).await.0, 202);

    let parse = |m: &SseMsg| serde_json::from_str::<Value>(m.data.as_deref().unwrap()).unwrap();
    let got = meta.events(2).await;
    for m in &got {
        let e = parse(m);
        assert!(!m.data.as_deref().unwrap().contains("CANARY"), "content leaked past a metadata ceiling");
        assert_eq!(e["capture"], "metadata");
        assert_eq!(e["data"]["trigger"], "user", "metadata members are kept");
    }
    // §8.2(e): mechanical fan-out never mints `redacted`: a full event lands on metadata.
    let got = red.events(2).await;
    assert_eq!(parse(&got[0]), redacted, "at or below the ceiling: untouched");
    assert_eq!(got[0].data.as_deref(), Some(line(&redacted).as_str()));
    let e = parse(&got[1]);
    assert_eq!(e["capture"], "metadata");
    assert!(e["data"].get("prompt").is_none());
    let got = asis.events(2).await;
    assert_eq!(got[1].data.as_deref(), Some(line(&full).as_str()), "no ceiling: as received");
    for _ in 0..2 {
        let e = ws.recv().await.unwrap();
        assert_eq!(e["capture"], "metadata");
        assert!(!e.to_string().contains("CANARY"));
    }
    b.shutdown().await;
}

// ---- WebSocket: hello (AEP-0003 §3.5, §4) -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_hello_first_version_selection_and_frame_rules() {
    let (b, _d) = bridge("", |_| {}).await;
    let a = addr(&b);

    // Anything but hello first: `hello-required`, then close.
    let mut ws = Ws::connect(&a, None).await;
    ws.send(&started("h1", 0)).await;
    let f = ws.recv().await.unwrap();
    assert_eq!((f["type"].as_str(), f["code"].as_str()), (Some("error"), Some("hello-required")), "{f}");
    assert!(ws.drain_for(Duration::from_secs(2)).await.is_empty() && ws.closed, "closed after hello-required");
    // Nothing of that event was ingested.
    assert!(held(&b, "h1").await.is_empty());

    // No version intersection: `version-unsupported` listing ours, then close.
    let mut ws = Ws::connect(&a, None).await;
    ws.send(&json!({"type": "hello", "versions": ["9.9", "1.0"], "role": "consumer"})).await;
    let f = ws.recv().await.unwrap();
    assert_eq!(f["code"], "version-unsupported");
    assert_eq!(f["versions"], json!(["0.1"]));
    assert!(ws.drain_for(Duration::from_secs(2)).await.is_empty() && ws.closed);

    // Exactly one version selected from the intersection; unknown capability keys ignored.
    let mut ws = Ws::connect(&a, None).await;
    let mut h = hello("consumer", "c", json!({"futurecap": {"enabled": true}, "filters": ["attr-match", "cesql"]}));
    h["versions"] = json!(["9.9", "0.1"]);
    ws.send(&h).await;
    let reply = ws.recv().await.unwrap();
    assert_eq!(reply["type"], "hello");
    assert_eq!(reply["versions"], json!(["0.1"]));
    assert_eq!(reply["capabilities"]["replay"], json!({"buffer": 4, "all": true}));
    assert_eq!(reply["capabilities"]["roster"], json!({}));
    // Unknown frame types are ignored; the connection carries on.
    ws.send(&json!({"type": "zigzag", "note": "from the future"})).await;
    ws.send(&json!({"note": "no type at all"})).await;
    ws.send(&json!({"type": "ping", "t": 42})).await;
    assert_eq!(ws.recv().await.unwrap(), json!({"type": "pong", "t": 42}), "ping echoed, nothing for the unknowns");
    ws.subscribe(json!({"type": "subscribe", "id": "s1", "filter": {"session": "h2"}})).await;
    ws.send(&json!({"type": "unsubscribe", "id": "s1"})).await;
    assert_eq!(ws.recv().await.unwrap(), json!({"type": "unsubscribed", "id": "s1"}));
    assert_eq!(post_one(&b.url(), &started("h2", 0)).await.0, 202);
    assert!(ws.drain_for(Duration::from_millis(500)).await.is_empty(), "nothing after unsubscribe");
    // Binary frames are reserved in 0.1: rejected.
    ws.send_binary(b"\x00\x01").await;
    let f = ws.recv().await.unwrap();
    assert_eq!(f["type"], "error");
    assert!(ws.drain_for(Duration::from_secs(2)).await.is_empty() && ws.closed);
    b.shutdown().await;
}

// ---- WebSocket: subscriptions (AEP-0003 §6.5) -------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_subscribe_refusals_are_in_band_and_disturb_nothing() {
    let (b, _d) = bridge("", |c| c.collector.replay_buffer = 64).await;
    let a = addr(&b);
    assert_eq!(post_batch(&b.url(), &[started("w1", 0), ev("progress.status", "w1", 1, None)]).await.0, 202);
    let (mut ws, _) = Ws::open(&a, None, "consumer", "c", json!({})).await;
    // A standing subscription with replay; everything below must leave it alone.
    ws.send(&json!({"type": "subscribe", "id": "keep", "filter": {"session": "w1"},
        "from": [{"session": "w1", "epoch": 0, "seq": 0}]}))
        .await;
    assert_eq!(ws.recv().await.unwrap(), json!({"type": "subscribed", "id": "keep"}));
    assert_eq!(ws.recv().await.unwrap()["seq"], 1, "replay follows `subscribed`");

    let big: Vec<Value> = (0..5000).map(|i| json!({"session": format!("x{i}"), "epoch": 0, "seq": 0})).collect();
    let cases = [
        (json!({"type": "subscribe", "id": "bad-key", "filter": {"nope key": 1}}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "bad-data", "filter": {"data": "x"}}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "bad-star", "filter": {"type": "*"}}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "bad-filter", "filter": []}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "from-obj", "from": {}}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "from-str", "from": "everything"}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "from-item", "from": [{"session": "w1", "seq": "x"}]}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "from-nosess", "from": [{"epoch": 0, "seq": 1}]}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "bad-cap", "capture": "most"}), "invalid-filter"),
        (json!({"type": "subscribe", "id": "from-big", "from": big}), "limit-exceeded"),
    ];
    for (frame, code) in &cases {
        ws.send(frame).await;
        let f = ws.recv().await.unwrap();
        assert_eq!(f["type"], "error", "{frame}");
        assert_eq!(f["id"], frame["id"], "the refusal names the request");
        assert_eq!(f["code"], *code, "{frame}: {f}");
    }
    // Still alive, still subscribed: live delivery continues on `keep`.
    assert_eq!(post_one(&b.url(), &ev("progress.status", "w1", 2, None)).await.0, 202);
    assert_eq!(ws.recv().await.unwrap()["seq"], 2);
    // Concurrent subscriptions are multiplexed: two matching subscriptions, two deliveries.
    ws.subscribe(json!({"type": "subscribe", "id": "also", "filter": {"type": "progress.*"}})).await;
    assert_eq!(post_one(&b.url(), &ev("progress.status", "w1", 3, None)).await.0, 202);
    let (x, y) = (ws.recv().await.unwrap(), ws.recv().await.unwrap());
    assert_eq!((x["seq"].clone(), y["seq"].clone()), (json!(3), json!(3)));

    // An emitter-role connection may not subscribe: `unauthorized`, in-band, connection kept.
    let (mut em, _) = Ws::open(&a, None, "emitter", "e", json!({})).await;
    em.send(&json!({"type": "subscribe", "id": "nope"})).await;
    let f = em.recv().await.unwrap();
    assert_eq!((f["code"].as_str(), f["id"].as_str()), (Some("unauthorized"), Some("nope")), "{f}");
    em.send(&json!({"type": "ping", "t": 1})).await;
    assert_eq!(em.recv().await.unwrap()["type"], "pong");

    // Orderly close: `closing` carries the last delivered position per subscription.
    b.stop.cancel();
    let (f, _) = ws.until(|f| f["type"] == "closing").await;
    let mut delivered = f.expect("no closing frame")["delivered"].as_array().unwrap().clone();
    delivered.sort_by_key(|d| d["sub"].as_str().unwrap_or("").to_owned());
    assert_eq!(
        delivered,
        [
            json!({"sub": "also", "session": "w1", "epoch": 0, "seq": 3}),
            json!({"sub": "keep", "session": "w1", "epoch": 0, "seq": 3})
        ]
    );
    b.shutdown().await;
}

/// An edge's resend over the WebSocket binding (the same event again, as after a
/// reconnect): the log holds it once (AEP-0001 §7 rule 4: the hub's log is a terminal
/// consumer), the replay buffer once, while a live subscriber gets the redelivery
/// (AEP-0003 §5: live fan-out forwards it as received).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_redelivery_is_forwarded_live_and_logged_once() {
    let (b, d) = bridge("", |c| c.collector.replay_buffer = 64).await;
    let a = addr(&b);
    let (mut sub, _) = Ws::open(&a, None, "consumer", "c", json!({})).await;
    sub.subscribe(json!({"type": "subscribe", "id": "live", "filter": {"session": "rd1"}})).await;
    let (mut em, _) = Ws::open(&a, None, "emitter", "t", json!({})).await;
    let evs = [started("rd1", 0), ev("progress.status", "rd1", 1, None)];
    for e in evs.iter().chain([&evs[1]]) {
        em.send(e).await;
    }
    em.sync().await;
    let mut seqs = Vec::new();
    while seqs.len() < 3 {
        let f = sub.recv().await.expect("a live delivery");
        if f.get("seq").is_some() {
            seqs.push(f["seq"].as_u64().unwrap());
        }
    }
    assert_eq!(seqs, [0, 1, 1], "the redelivery forwarded live");
    let mut s = Sse::open(&a, "/stream?live=0&from=all", &[]).await;
    s.to_end().await;
    assert_eq!(s.messages().len(), 2, "the buffer holds one copy");
    let metrics = get_text(format!("{}/metrics", b.url()), vec![]).await.1;
    assert_eq!(
        common::metric_sum(&metrics, "aep_bridge_requests_rejected_total", &["reason=\"resent\""]),
        1,
        "{metrics}"
    );
    b.shutdown().await;
    let log = std::fs::read_to_string(d.path().join("logs/t/rd1.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 2, "logged once: {log}");
}

// ---- WebSocket: roster (AEP-0003 §4.1) --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_roster_reports_every_live_claim_verbatim() {
    let (b, _d) = bridge("", |_| {}).await;
    let a = addr(&b);
    let control = json!({"accepts": ["control.attention.respond"], "ack_window_ms": 10000, "x_future": [1, 2]});
    let (mut e1, _) =
        Ws::open(&a, None, "emitter", "agent-one", json!({"emits": ["session"], "control": control.clone()})).await;
    e1.send(&started("ro1", 0)).await;
    let (mut e2, _) = Ws::open(&a, None, "emitter", "agent-two", json!({})).await;
    e2.send(&started("ro1", 0)).await;
    e1.sync().await;
    e2.sync().await;

    // Events emitted over the socket fan out exactly as sent.
    let f = enc(&json!({"session": "ro1"}).to_string());
    let mut sse = Sse::open(&a, &format!("/stream?filter={f}"), &[]).await;
    let spaced = r#"{"aep": "0.1", "id": "ro1-1", "type": "progress.status", "time": "2026-11-30T06:00:00Z", "source": "aep://test/agent/agent-one", "agent": "agent-one", "session": "ro1", "seq": 1}"#;
    e1.send_text(spaced).await;
    assert_eq!(sse.events(1).await[0].data.as_deref(), Some(spaced));

    let (mut c, _) = Ws::open(&a, None, "consumer", "c", json!({})).await;
    c.send(&json!({"type": "roster", "id": "r-1"})).await;
    let r = c.recv().await.unwrap();
    assert_eq!(r["type"], "roster");
    assert_eq!(r["id"], "r-1");
    let entries: Vec<&Value> = r["entries"].as_array().unwrap().iter().filter(|e| e["session"] == "ro1").collect();
    assert_eq!(entries.len(), 2, "one entry per live claim, never merged: {r}");
    let one = entries.iter().find(|e| e["agent"] == "agent-one").unwrap();
    assert_eq!(one["control"], control, "declared control relayed verbatim");
    assert_eq!(one["emits"], json!(["session"]));
    assert_eq!(one["instance"], "agent-one/1");
    let two = entries.iter().find(|e| e["agent"] == "agent-two").unwrap();
    assert!(two.get("control").is_none() && two.get("emits").is_none(), "nothing synthesized: {two}");

    // An emitter-role request is refused in-band with the same id; the connection survives.
    e1.send(&json!({"type": "roster", "id": "r-e"})).await;
    let f = e1.recv().await.unwrap();
    assert_eq!(
        (f["type"].as_str(), f["code"].as_str(), f["id"].as_str()),
        (Some("error"), Some("unauthorized"), Some("r-e"))
    );
    e1.send(&json!({"type": "ping", "t": 2})).await;
    assert_eq!(e1.recv().await.unwrap()["type"], "pong");

    // The sessions the bridge's own hook adapters emit are live claims too (they route
    // locally), declaring what the endpoint's hello declares: nothing, without a token.
    let hook = &common::codex_session("ro-local")[0];
    let (st, body) = common::post(format!("{}/hooks/codex", b.url()), hook.to_string(), vec![]).await;
    assert_eq!(st, 200, "{body}");
    c.send(&json!({"type": "roster", "id": "r-l"})).await;
    let r = c.recv().await.unwrap();
    let local: Vec<&Value> = r["entries"].as_array().unwrap().iter().filter(|e| e["session"] == "ro-local").collect();
    assert_eq!(local.len(), 1, "{r}");
    assert_eq!(local[0]["agent"], "codex");
    assert_eq!(local[0]["control"], json!({"accepts": []}));

    // A claimant that goes away leaves the roster.
    e2.close_and_wait().await;
    c.send(&json!({"type": "roster", "id": "r-2"})).await;
    let r = c.recv().await.unwrap();
    let n = r["entries"].as_array().unwrap().iter().filter(|e| e["session"] == "ro1").count();
    assert_eq!(n, 1, "{r}");
    b.shutdown().await;
}

// ---- control gating and routing (AEP-0004 §4) -------------------------------------------

fn command(ty: &str, id: &str, session: &str) -> Value {
    json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-11-30T06:00:00.000Z",
        "source": "aep://test/agent/sender", "agent": "sender", "session": session, "capture": "metadata",
        "subject": "01JAAAAAAAAAAAAAAAAAAAAAAA", "data": {"answer": {"option": "yes"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_never_flows_without_a_token() {
    let (b, _d) = bridge("", |_| {}).await;
    let a = addr(&b);
    let caps = json!({"control": {"accepts": ["control.attention.respond"]}});
    let (mut target, _) = Ws::open(&a, None, "emitter", "tgt", caps).await;
    target.send(&started("cg1", 0)).await;
    target.sync().await;
    let f = enc(&json!({"session": "cg1"}).to_string());
    let mut watch = Sse::open(&a, &format!("/stream?filter={f}"), &[]).await;

    let (mut sender, _) = Ws::open(&a, None, "consumer", "sender", json!({})).await;
    let cmd = command("control.attention.respond", "cmd-unauth", "cg1");
    sender.send(&cmd).await;
    let f = sender.recv().await.unwrap();
    assert_eq!(f, json!({"type": "error", "cause": "cmd-unauth", "code": "unauthorized", "detail": f["detail"]}));
    assert!(target.drain_for(Duration::from_millis(800)).await.is_empty(), "the command never reached the target");
    watch.until(Duration::from_millis(300), |_| false).await;
    assert!(!watch.raw.contains("cmd-unauth"), "nor the stream: {}", watch.raw);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_routes_to_exactly_one_claimant_with_a_token() {
    let (b, _d) = bridge("sekrit", |_| {}).await;
    let a = addr(&b);
    let t = Some("sekrit");
    // Unauthenticated upgrades are refused outright when a token is configured.
    let req = format!("ws://{a}/socket").into_client_request().unwrap();
    assert!(tokio_tungstenite::connect_async(req).await.is_err());

    let caps = json!({"control": {"accepts": ["control.attention.respond"]}});
    let (mut one, _) = Ws::open(&a, t, "emitter", "tgt", caps.clone()).await;
    one.send(&started("rt1", 0)).await;
    let (mut sender, _) = Ws::open(&a, t, "consumer", "sender", json!({})).await;
    one.sync().await;

    // No claimant: `no-route`, also for a session with history but no live claimant.
    sender.send(&command("control.attention.respond", "c-none", "rt-nobody")).await;
    let f = sender.recv().await.unwrap();
    assert_eq!((f["code"].as_str(), f["cause"].as_str()), (Some("no-route"), Some("c-none")), "{f}");
    let seeded = [started("rt-hist", 0), ev("run.started", "rt-hist", 1, Some(json!({"trigger": "user"})))];
    let auth = ("authorization", "Bearer sekrit".to_owned());
    let body: String = seeded.iter().map(|e| line(e) + "\n").collect();
    let (st, _) =
        post_raw(&b.url(), "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into()), auth]).await;
    assert_eq!(st, 202);
    let mut pause = command("control.pause", "c-hist", "rt-hist");
    pause["data"] = json!({"reason": "probe"});
    pause.as_object_mut().unwrap().remove("subject");
    sender.send(&pause).await;
    let f = sender.recv().await.unwrap();
    assert_eq!((f["code"].as_str(), f["cause"].as_str()), (Some("no-route"), Some("c-hist")), "{f}");
    let from = enc(&json!([{"session": "rt-hist", "epoch": 0, "seq": 0}]).to_string());
    let mut s = Sse::open(&a, &format!("/stream?live=0&access_token=sekrit&from={from}"), &[]).await;
    s.to_end().await;
    assert_eq!(seqs(&s.messages()), [1], "the session's replay is untouched by the refusal");
    // A type the target did not declare: `unsupported`, on its behalf.
    let mut pause = command("control.pause", "c-pause", "rt1");
    pause["data"] = json!({});
    pause.as_object_mut().unwrap().remove("subject");
    sender.send(&pause).await;
    let f = sender.recv().await.unwrap();
    assert_eq!((f["code"].as_str(), f["cause"].as_str()), (Some("unsupported"), Some("c-pause")), "{f}");
    // Declared and unambiguous: delivered to the one claimant, byte-identical.
    let cmd = command("control.attention.respond", "c-ok", "rt1");
    sender.send_text(&line(&cmd)).await;
    assert_eq!(one.recv_raw_for(WAIT).await.as_deref(), Some(line(&cmd).as_str()));
    assert!(sender.drain_for(Duration::from_millis(300)).await.is_empty(), "no refusal for a routed command");
    // A second live claimant makes the session ambiguous: refused, delivered to no one.
    let (mut two, _) = Ws::open(&a, t, "emitter", "tgt2", caps).await;
    two.send(&started("rt1", 0)).await;
    two.sync().await;
    sender.send(&command("control.attention.respond", "c-amb", "rt1")).await;
    let f = sender.recv().await.unwrap();
    assert_eq!((f["code"].as_str(), f["cause"].as_str()), (Some("ambiguous"), Some("c-amb")), "{f}");
    assert!(one.drain_for(Duration::from_millis(500)).await.is_empty());
    assert!(two.drain_for(Duration::from_millis(100)).await.is_empty());
    // Refusals never enter the session's history.
    let f = enc(&json!({"session": "rt1"}).to_string());
    let mut s = Sse::open(&a, &format!("/stream?live=0&from=all&access_token=sekrit&filter={f}"), &[]).await;
    s.to_end().await;
    assert!(data_count(&s.raw) > 0 && !s.raw.contains("c-amb") && !s.raw.contains("c-pause"), "{}", s.raw);
    b.shutdown().await;
}

// ---- backpressure (AEP-0003 §8.4) ------------------------------------------------------

/// A raw SSE consumer with a tiny receive window that reads nothing until told to.
/// Sends one keep-alive request on a fresh connection, reads the answer, and waits for the
/// listener to cut the connection for idling.
async fn cut_when_idle(a: &str) {
    let mut sock = TcpStream::connect(a).await.unwrap();
    sock.write_all(format!("GET /healthz HTTP/1.1\r\nHost: {a}\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(WAIT, sock.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return,
            Ok(Ok(_)) => continue,
            Err(_) => panic!("an idle connection was not cut"),
        }
    }
}

async fn stalled_sse(a: &str, path: &str) -> Sse {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let stream = sock.connect(a.parse().unwrap()).await.unwrap();
    Sse::over(stream, a, path).await
}

fn flood(session: &str, severity: &str, n: u64) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let mut e = ev("progress.status", session, i, Some(json!({"phase": "p".repeat(4096)})));
            e["severity"] = json!(severity);
            e
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_sse_consumer_loses_info_but_is_disconnected_on_notice() {
    let (b, _d) = bridge("", |c| {
        c.collector.subscriber_queue = 4;
        c.collector.replay_buffer = 8;
    })
    .await;
    let a = addr(&b);
    const N: u64 = 400;

    // notice+: never dropped silently. The stream ends, and what it delivered has no hole.
    let f = enc(&json!({"session": "bp-n"}).to_string());
    let mut s = stalled_sse(&a, &format!("/stream?filter={f}")).await;
    for chunk in flood("bp-n", "notice", N).chunks(100) {
        assert_eq!(post_batch(&b.url(), chunk).await.0, 202);
    }
    s.to_end().await;
    let got = seqs(&s.messages());
    assert!((got.len() as u64) < N, "the consumer was not slow enough to test anything");
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>(), "a delivered prefix, then disconnect");

    // debug/info: may be dropped toward the slow consumer, which stays connected.
    let f = enc(&json!({"session": "bp-i"}).to_string());
    let mut s = stalled_sse(&a, &format!("/stream?filter={f}")).await;
    for chunk in flood("bp-i", "info", N).chunks(100) {
        assert_eq!(post_batch(&b.url(), chunk).await.0, 202);
    }
    s.until(Duration::from_secs(3), |_| false).await;
    assert!(!s.ended, "info overflow does not end the stream");
    let got = seqs(&s.messages());
    assert!((got.len() as u64) < N, "some info events were dropped");
    // Every delivery shed is counted, exactly, and recorded by the pipeline after its lock.
    let (status, text) = get_text(format!("{}/metrics", b.url()), vec![]).await;
    assert_eq!(status, 200);
    let dropped = |sev: &str| -> u64 {
        let want = format!("severity=\"{sev}\",sink=\"subscriber\"");
        text.lines()
            .filter(|l| l.starts_with("aep_bridge_events_dropped_total{") && l.contains(&want))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    assert_eq!(dropped("info") + got.len() as u64, N, "delivered + counted drops = sent\n{text}");
    assert_eq!(dropped("notice"), 1, "one notice drop, then the consumer was disconnected");
    let tail = ev("progress.status", "bp-i", N, None);
    assert_eq!(post_one(&b.url(), &tail).await.0, 202);
    s.until(WAIT, |r| r.contains(&line(&tail))).await;
    assert!(s.raw.contains(&line(&tail)) && !s.ended, "still live after the drops");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_ws_consumer_gets_closing_with_positions_on_notice_overflow() {
    let (b, _d) = bridge("", |c| {
        c.collector.subscriber_queue = 4;
        c.collector.replay_buffer = 8;
    })
    .await;
    let a = addr(&b);
    const N: u64 = 400;
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(2048).unwrap();
    let stream = sock.connect(a.parse().unwrap()).await.unwrap();
    let (inner, _) =
        tokio_tungstenite::client_async(format!("ws://{a}/socket"), tokio_tungstenite::MaybeTlsStream::Plain(stream))
            .await
            .unwrap();
    let mut ws = Ws { inner, closed: false };
    ws.send(&hello("consumer", "slow", json!({}))).await;
    assert_eq!(ws.recv().await.unwrap()["type"], "hello");
    ws.subscribe(json!({"type": "subscribe", "id": "slow", "filter": {"session": "bp-w"}})).await;
    for chunk in flood("bp-w", "warning", N).chunks(100) {
        assert_eq!(post_batch(&b.url(), chunk).await.0, 202);
    }
    let mut got = Vec::new();
    let mut closing = None;
    while let Some(f) = ws.recv().await {
        if f["type"] == "closing" {
            closing = Some(f);
            break;
        }
        got.push(f["seq"].as_u64().unwrap());
    }
    assert!((got.len() as u64) < N, "the consumer was not slow enough to test anything");
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>(), "a delivered prefix, nothing skipped");
    let closing = closing.expect("overflow on notice+ ends in a closing frame (AEP-0003 §8.4)");
    let last = *got.last().unwrap();
    assert_eq!(closing["delivered"], json!([{"sub": "slow", "session": "bp-w", "epoch": 0, "seq": last}]));
    assert!(ws.drain_for(Duration::from_secs(2)).await.is_empty() && ws.closed, "then the close");
    b.shutdown().await;
}

/// The listener's idle clock cuts only connections with nothing in flight:
/// an SSE stream (a response in progress) and a WebSocket (upgraded, out of the HTTP loop)
/// outlive it many times over and still deliver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_lived_subscribers_outlive_the_idle_timeout() {
    let (b, _d) = bridge("", |c| {
        c.server.idle_timeout_ms = 100;
        c.server.header_timeout_ms = 100;
    })
    .await;
    let mut sse = Sse::open(&addr(&b), "/stream", &[]).await;
    assert_eq!(sse.status, 200);
    let (mut ws, _) = Ws::open(&addr(&b), None, "consumer", "idle-test", json!({})).await;
    ws.subscribe(json!({"type": "subscribe", "id": "all", "filter": {}})).await;
    // Two idle periods pass for certain once two plain keep-alive connections, opened one
    // after the other, have each been cut for idling.
    for _ in 0..2 {
        cut_when_idle(&addr(&b)).await;
    }
    let body = format!("{}\n", line(&started("idle-1", 0)));
    let (st, _) =
        post_raw(&b.url(), "application/x-ndjson", body.into_bytes(), vec![("aep-version", "0.1".into())]).await;
    assert_eq!(st, 202);
    assert_eq!(sse.events(1).await.len(), 1, "the SSE stream was cut: {}", sse.raw);
    let (got, _) = ws.until(|v| v["type"] == "session.started").await;
    assert!(got.is_some(), "the WebSocket was cut");
}
