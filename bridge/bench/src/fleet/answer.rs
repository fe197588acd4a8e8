//! The person at the hub: one `/socket` connection to the hub (hello role `both`, the
//! hub's token), subscribed to `attention.requested`; every request an edge holds is
//! answered with `control.attention.respond` (AEP-0004 §5) as `aep-bridge respond`
//! sends it, and the moment the answer left is kept per session, so the edge's replay can
//! time the shim's reply against it.

use std::collections::HashMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::{self, Message, stream::MaybeTlsStream};

/// The answers sent, by session: when the last one left.
#[derive(Default)]
pub(super) struct Answers {
    pub(super) sent: Mutex<HashMap<String, Instant>>,
    pub(super) requests: AtomicU64,
    pub(super) answered: AtomicU64,
    /// Requests the bench found no answer for (no options, no form fields).
    pub(super) unanswerable: AtomicU64,
}

/// The answer to a request and its capture level: an allowing option when offered (else
/// the first); a form (an MCP elicitation) gets a value per field, as a person would type
/// it (`redacted`: typed text, AEP-0004 §5).
fn answer_for(data: Option<&Value>) -> Option<(Value, &'static str)> {
    let data = data?;
    if let Some(opts) = data.get("options").and_then(Value::as_array) {
        let ids: Vec<&str> = opts.iter().filter_map(|o| o.get("id").and_then(Value::as_str)).collect();
        let id =
            ids.iter().find(|i| i.starts_with("allow") || i.starts_with("accept") || **i == "yes").or(ids.first())?;
        return Some((json!({"option": id}), "metadata"));
    }
    let fields = data.get("fields")?.as_array()?;
    let mut values = serde_json::Map::new();
    for f in fields {
        let Some(id) = f.get("id").and_then(Value::as_str) else { continue };
        let v = match f.get("type").and_then(Value::as_str) {
            Some("select") => f.pointer("/choices/0/id").cloned().unwrap_or(Value::Null),
            Some("number") => f.get("min").cloned().unwrap_or(json!(1)),
            Some("boolean") => json!(true),
            _ => json!("blue"),
        };
        values.insert(id.to_owned(), v);
    }
    Some((json!({"values": values}), "redacted"))
}

type Ws = tungstenite::WebSocket<MaybeTlsStream<TcpStream>>;

fn recv(ws: &mut Ws) -> anyhow::Result<Option<Value>> {
    match ws.read() {
        Ok(Message::Text(t)) => Ok(serde_json::from_str(&t).ok()),
        Ok(Message::Close(_)) => anyhow::bail!("the hub closed /socket"),
        Ok(_) => Ok(None),
        Err(tungstenite::Error::Io(e))
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
        {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Connects to the hub at `url` (`http://...`) with `token` and answers every
/// `attention.requested` until `stop`; runs on its own thread.
pub(super) fn spawn(
    url: &str,
    token: &str,
    answers: Arc<Answers>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    let ws_url = format!("{}/socket", url.replacen("http://", "ws://", 1));
    let req = aep_bridge::transport::ws::request(&ws_url, &aep_bridge::transport::Headers::new(), Some(token))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (mut ws, _) = tungstenite::connect(req).with_context(|| format!("cannot open {ws_url}"))?;
    if let MaybeTlsStream::Plain(s) = ws.get_mut() {
        s.set_read_timeout(Some(Duration::from_millis(200)))?;
    }
    let hello = json!({
        "type": "hello", "versions": [aep_schemas::AEP_VERSION], "role": "both",
        "identity": {"agent": "aep-bench", "instance": format!("aep-bench/{}", std::process::id())},
        "capabilities": {"emits": ["control"]},
    });
    ws.send(Message::text(hello.to_string()))?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut phase = 0;
    while phase < 2 {
        anyhow::ensure!(Instant::now() < deadline, "the hub did not answer hello/subscribe on /socket");
        let Some(v) = recv(&mut ws)? else { continue };
        match (phase, v["type"].as_str()) {
            (0, Some("hello")) => {
                let sub = json!({"type": "subscribe", "id": "asks", "filter": {"type": "attention.requested"}});
                ws.send(Message::text(sub.to_string()))?;
                phase = 1;
            }
            (1, Some("subscribed")) => phase = 2,
            (_, Some("error")) => anyhow::bail!("the hub refused the bench's /socket: {v}"),
            _ => {}
        }
    }
    let source = "aep://bench-console/agent/aep-bench".to_owned();
    Ok(std::thread::Builder::new().name("fleet-answers".into()).spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Some(v) = recv(&mut ws)? else { continue };
            if v["type"] != "attention.requested" {
                continue;
            }
            answers.requests.fetch_add(1, Ordering::Relaxed);
            let (Some(id), Some(session)) = (v["id"].as_str(), v["session"].as_str()) else { continue };
            let Some((answer, capture)) = answer_for(v.get("data")) else {
                answers.unanswerable.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let cmd = aep_schemas::command::Command {
                r#type: "control.attention.respond",
                session,
                run: None,
                answers: Some(id),
                capture,
                data: json!({ "answer": answer }),
            };
            let ev = cmd.event(
                aep_schemas::command::Sender { agent: "aep-bench", source: &source },
                &ulid::Ulid::new().to_string(),
                &now_rfc3339(),
            );
            answers
                .sent
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(session.to_owned(), Instant::now());
            ws.send(Message::text(ev.to_string()))?;
            answers.answered.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    })?)
}

/// Now as RFC 3339 with milliseconds, UTC.
fn now_rfc3339() -> String {
    aep_bridge::time::rfc3339_ms(aep_bridge::time::now_ms())
}
