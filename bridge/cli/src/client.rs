//! Shared plumbing of the client subcommands (`tail`, `timeline`, `respond`, `cancel`,
//! `pending`, `adapters verify`, `wrap`): the collector endpoint (plain or `https://`, with
//! the exporters' rustls setup), a blocking WebSocket client for `/socket` (AEP-0003 §3.5,
//! `wss://` for an `https://` bridge), an SSE line parser (§3.3), and the one-line event
//! renderer.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::io::IsTerminal;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use aep_schemas::Event;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::stream::MaybeTlsStream;
use tokio_tungstenite::tungstenite::{self, Message};

use aep_bridge::transport::TlsConfig;
use aep_bridge::transport::ws::WsError;

/// The variables naming the CLI clients' TLS files for an `https://` bridge (a TLS proxy in
/// front of it): extra CA bundle, client certificate and key (mTLS).
pub const TLS_ENV: [&str; 3] = ["AEP_CA_FILE", "AEP_CLIENT_CERT_FILE", "AEP_CLIENT_KEY_FILE"];

/// The default collector base URL (the bridge's one HTTP port).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8787";

/// A collector endpoint: base URL and optional bearer token.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `http://host:port` (no trailing slash).
    pub base: String,
    /// Bearer token, when the bridge runs with one.
    pub token: Option<String>,
    /// TLS files for an `https://` base (the exporters' settings; built-in roots by default).
    pub tls: TlsConfig,
}

impl Endpoint {
    /// From the `--url`/`--token` values (their env twins already applied by clap), with
    /// the TLS files of [`TLS_ENV`].
    pub fn new(url: Option<String>, token: Option<String>) -> Self {
        let base = url.filter(|u| !u.is_empty()).unwrap_or_else(|| DEFAULT_URL.into());
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let tls = TlsConfig { ca_file: var(TLS_ENV[0]), cert_file: var(TLS_ENV[1]), key_file: var(TLS_ENV[2]) };
        Self { base: base.trim_end_matches('/').to_owned(), token: token.filter(|t| !t.is_empty()), tls }
    }

    /// A blocking HTTP client for this endpoint (`https://` with the TLS files); its
    /// statuses are answers, not errors.
    pub fn http_agent(&self, timeout: Option<Duration>) -> Result<ureq::Agent, ClientError> {
        let tls = aep_bridge::transport::tls::ureq_tls(&self.tls).map_err(|e| {
            ClientError::Connect(self.base.clone(), format!("TLS settings ({}): {e}", TLS_ENV.join(", ")))
        })?;
        Ok(ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(timeout)
            .tls_config(tls)
            .build()
            .new_agent())
    }

    /// The `ws(s)://` URL of `/socket`.
    pub fn socket_url(&self) -> String {
        format!("{}/socket", aep_bridge::transport::ws::ws_url(&self.base))
    }
}

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The endpoint could not be reached.
    #[error("cannot reach {0}: {1}")]
    Connect(String, String),
    /// HTTP refusal at the upgrade or request (401/403 = unauthorized).
    #[error("{url} answered HTTP {status}{}", if *.status == 401 || *.status == 403 { " (unauthorized: pass --token or AEP_TOKEN)" } else { "" })]
    Http {
        /// The URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The peer broke the protocol.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl ClientError {
    /// `true` for a 401/403 refusal.
    pub fn is_unauthorized(&self) -> bool {
        matches!(self, ClientError::Http { status: 401 | 403, .. })
    }
}

/// A blocking WebSocket connection to the collector's `/socket`, past the `hello` exchange.
pub struct Socket {
    ws: tungstenite::WebSocket<MaybeTlsStream<TcpStream>>,
    /// The peer's `hello` frame.
    pub hello: Value,
}

impl Socket {
    /// Connects, sends `hello` (AEP-0003 §4) with `role` and `agent`, and reads the reply.
    pub fn connect(ep: &Endpoint, role: &str, agent: &str, capabilities: Value) -> Result<Self, ClientError> {
        let url = ep.socket_url();
        let headers = aep_bridge::transport::Headers::new();
        let req = aep_bridge::transport::ws::request(&url, &headers, ep.token.as_deref()).map_err(|e| {
            let reason = match e {
                WsError::Request { reason, .. } => reason,
                other => other.to_string(),
            };
            ClientError::Connect(url.clone(), reason)
        })?;
        let host = req.uri().host().unwrap_or("127.0.0.1").to_owned();
        let secure = req.uri().scheme_str() == Some("wss");
        let port = req.uri().port_u16().unwrap_or(if secure { 443 } else { 80 });
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| ClientError::Connect(url.clone(), "cannot resolve".into()))?;
        let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| ClientError::Connect(url.clone(), e.to_string()))?;
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let connector = if secure {
            let tls = aep_bridge::transport::tls::client_config(&ep.tls).map_err(|e| {
                ClientError::Connect(url.clone(), format!("TLS settings ({}): {e}", TLS_ENV.join(", ")))
            })?;
            tungstenite::Connector::Rustls(tls)
        } else {
            tungstenite::Connector::Plain
        };
        let (ws, _) = tungstenite::client_tls_with_config(req, stream, None, Some(connector)).map_err(|e| match e {
            tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r)) => {
                ClientError::Http { url: url.clone(), status: r.status().as_u16() }
            }
            other => ClientError::Connect(url.clone(), other.to_string()),
        })?;
        let mut s = Socket { ws, hello: Value::Null };
        let instance = format!("{agent}/{}", std::process::id());
        s.send(&json!({
            "type": "hello", "versions": [aep_schemas::AEP_VERSION], "role": role,
            "identity": {"agent": agent, "instance": instance},
            "capabilities": capabilities,
        }))?;
        match s.recv(Duration::from_secs(10))? {
            Some(h) if h.get("type").and_then(Value::as_str) == Some("hello") => {
                s.hello = h;
                Ok(s)
            }
            Some(other) => Err(ClientError::Protocol(format!("expected hello, got {other}"))),
            None => Err(ClientError::Protocol("no hello from the endpoint".into())),
        }
    }

    /// Sends one JSON frame (or Event).
    pub fn send(&mut self, v: &Value) -> Result<(), ClientError> {
        self.send_text(v.to_string())
    }

    /// Sends one text frame verbatim.
    pub fn send_text(&mut self, t: String) -> Result<(), ClientError> {
        self.ws.send(Message::text(t)).map_err(|e| ClientError::Protocol(e.to_string()))
    }

    /// The next JSON text frame, or `None` when nothing arrives within `wait`.
    pub fn recv(&mut self, wait: Duration) -> Result<Option<Value>, ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let tcp = match self.ws.get_mut() {
                MaybeTlsStream::Rustls(s) => s.get_ref(),
                MaybeTlsStream::Plain(s) => &*s,
                _ => return Err(ClientError::Protocol("unexpected stream".into())),
            };
            let _ = tcp.set_read_timeout(Some(left.max(Duration::from_millis(1))));
            match self.ws.read() {
                Ok(Message::Text(t)) => match serde_json::from_str::<Value>(&t) {
                    Ok(v) => return Ok(Some(v)),
                    Err(_) => continue,
                },
                Ok(Message::Close(_)) => {
                    return Err(ClientError::Protocol("the endpoint closed the connection".into()));
                }
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    return Ok(None);
                }
                Err(e) => return Err(ClientError::Protocol(e.to_string())),
            }
        }
    }

    /// Subscribes (AEP-0003 §6.5) and waits for `subscribed` (frames before it are dropped).
    pub fn subscribe(&mut self, id: &str, filter: Value, from: Option<Value>) -> Result<(), ClientError> {
        let mut f = json!({"type": "subscribe", "id": id, "filter": filter});
        if let Some(from) = from {
            f["from"] = from;
        }
        self.send(&f)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            let Some(v) = self.recv(Duration::from_secs(1))? else { continue };
            let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
            let same = v.get("id").and_then(Value::as_str) == Some(id);
            if ty == "subscribed" && same {
                return Ok(());
            }
            if ty == "error" && same {
                return Err(ClientError::Protocol(format!(
                    "subscribe refused: {} {}",
                    v.get("code").and_then(Value::as_str).unwrap_or("?"),
                    v.get("detail").and_then(Value::as_str).unwrap_or("")
                )));
            }
        }
        Err(ClientError::Protocol("no subscribed reply".into()))
    }
}

/// Longest a replay read lasts when live traffic never lets the stream go idle.
pub const REPLAY_CAP: Duration = Duration::from_secs(15);

/// Replays what the collector holds for `filter` (`from: "all"`), reading until the stream
/// has been idle for `idle` (the replay precedes live delivery, AEP-0003 §5), or for at
/// most [`REPLAY_CAP`] on a stream that live traffic keeps busy.
pub fn replay_all(ep: &Endpoint, filter: Value, idle: Duration) -> Result<Vec<Event>, ClientError> {
    let mut s = Socket::connect(ep, "consumer", "aep-cli", json!({}))?;
    s.subscribe("replay", filter, Some(json!("all")))?;
    let mut out = Vec::new();
    let mut seen = Dedupe::new(100_000);
    let cap = Instant::now() + REPLAY_CAP;
    while Instant::now() < cap
        && let Some(v) = s.recv(idle)?
    {
        if let Some(ev) = as_event(&v)
            && seen.first(&ev)
        {
            out.push(ev);
        }
    }
    Ok(out)
}

/// The frame as an Event, when it is one (Event `type`s contain a dot; frames never do).
pub fn as_event(v: &Value) -> Option<Event> {
    let ty = v.get("type").and_then(Value::as_str)?;
    if !ty.contains('.') {
        return None;
    }
    Event::from_value(v.clone()).ok()
}

/// Bounded `(source, id)` dedupe (AEP-0001 §7.4).
pub struct Dedupe {
    set: HashSet<(String, String)>,
    order: VecDeque<(String, String)>,
    cap: usize,
}

impl Dedupe {
    /// Remembers at most `cap` keys.
    pub fn new(cap: usize) -> Self {
        Self { set: HashSet::new(), order: VecDeque::new(), cap: cap.max(1) }
    }

    /// `true` the first time an event's `(source, id)` is seen.
    pub fn first(&mut self, ev: &Event) -> bool {
        let k = (ev.source.to_string(), ev.id.clone());
        if self.set.contains(&k) {
            return false;
        }
        if self.order.len() >= self.cap
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        self.set.insert(k.clone());
        self.order.push_back(k);
        true
    }
}

/// One parsed SSE message (AEP-0003 §3.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseMessage {
    /// `event:` field.
    pub event: Option<String>,
    /// `data:` lines joined by `\n`.
    pub data: String,
    /// `id:` field.
    pub id: Option<String>,
}

/// What one SSE line completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A dispatched message.
    Message(SseMessage),
    /// A comment line (`: ping`, `: replay-exhausted ...`).
    Comment(String),
}

/// Incremental SSE parser: feed lines (without the newline), get items.
#[derive(Debug, Default)]
pub struct SseParser {
    cur: SseMessage,
    has_data: bool,
}

impl SseParser {
    /// Feeds one line.
    pub fn line(&mut self, line: &str) -> Option<SseItem> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !self.has_data {
                self.cur = SseMessage::default();
                return None;
            }
            self.has_data = false;
            return Some(SseItem::Message(std::mem::take(&mut self.cur)));
        }
        if let Some(c) = line.strip_prefix(':') {
            return Some(SseItem::Comment(c.trim_start().to_owned()));
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.cur.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.cur.data.push('\n');
                }
                self.cur.data.push_str(value);
                self.has_data = true;
            }
            "id" => self.cur.id = Some(value.to_owned()),
            _ => {}
        }
        None
    }
}

/// `true` when colour should be used on stdout (a TTY and no `NO_COLOR`).
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && !aep_bridge::env::Env::process().is_set(aep_bridge::env::NO_COLOR)
}

/// Plain ANSI styling.
pub fn paint(color: bool, code: &str, s: &str) -> String {
    if color { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_owned() }
}

/// The ANSI colour of an event line: by severity, then category.
pub fn event_color(ev: &Event) -> &'static str {
    use aep_schemas::Severity;
    match ev.severity() {
        Severity::Error | Severity::Critical => return "31",
        Severity::Warning => return "33",
        _ => {}
    }
    match ev.category() {
        "attention" => "35",
        "tool" => "36",
        "run" => "32",
        "session" => "34",
        "control" => "95",
        _ => "0",
    }
}

/// `HH:MM:SS.mmm` of an RFC 3339 time (the input when it has no time part).
pub fn short_time(t: &str) -> String {
    let Some((_, rest)) = t.split_once('T') else { return t.to_owned() };
    let end = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let hms = &rest[..end];
    match hms.split_once('.') {
        Some((a, frac)) => format!("{a}.{:0<3.3}", frac),
        None => format!("{hms}.000"),
    }
}

/// Truncates to `n` chars with an ellipsis, on one line.
pub fn clip(s: &str, n: usize) -> String {
    let one: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if one.chars().count() <= n {
        one
    } else {
        format!("{}…", one.chars().take(n.saturating_sub(1)).collect::<String>())
    }
}

/// A short `k=v` summary of `data`: whatever the capture ceiling delivered, nothing more.
pub fn summary(data: Option<&Value>, width: usize) -> String {
    let Some(Value::Object(m)) = data else { return String::new() };
    let mut parts = Vec::new();
    // The most telling members first.
    const FIRST: [&str; 10] =
        ["tool", "kind", "prompt", "answer", "resolution", "reason", "status", "scope", "duration_ms", "message"];
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort_by_key(|k| FIRST.iter().position(|f| f == k).unwrap_or(FIRST.len()));
    for k in keys {
        let v = &m[k];
        let r = match v {
            Value::Null => continue,
            Value::String(s) => format!("{k}={}", clip(s, 48)),
            Value::Number(n) => format!("{k}={n}"),
            Value::Bool(b) => format!("{k}={b}"),
            Value::Object(o) => {
                if let Some(n) = o.get("name").and_then(Value::as_str) {
                    format!("{k}={}", clip(n, 32))
                } else if let Some((ik, iv)) = o.iter().find(|(_, v)| v.is_string() || v.is_number()) {
                    format!("{k}.{ik}={}", clip(iv.to_string().trim_matches('"'), 32))
                } else {
                    format!("{k}={{…}}")
                }
            }
            Value::Array(a) => format!("{k}=[{}]", a.len()),
        };
        parts.push(r);
    }
    clip(&parts.join(" "), width)
}

/// One readable line: time, agent, session, type, subject, data summary.
pub fn event_line(ev: &Event, color: bool) -> String {
    let mut out = format!(
        "{} {} {} {}",
        paint(color, "2", &short_time(&ev.time)),
        paint(color, "1", &ev.agent),
        ev.session.as_deref().map_or_else(|| "-".to_owned(), |s| clip(s, 24)),
        paint(color, event_color(ev), &ev.r#type),
    );
    if let Some(s) = &ev.subject {
        out.push_str(&format!(" @{}", clip(s, 28)));
    }
    let sum = summary(ev.data.as_ref(), 100);
    if !sum.is_empty() {
        out.push(' ');
        out.push_str(&sum);
    }
    // The one thing a watcher needs to answer it: the request's id (AEP-0004 §7).
    if ev.r#type == "attention.requested" {
        out.push_str(&format!(" → aep-bridge respond {}", ev.id));
    }
    out
}

/// The host part of this sender's `source` (`aep://{host}/agent/aep-cli`).
pub fn host_name() -> String {
    aep_bridge::env::Env::process()
        .var(aep_bridge::env::AEP_HOST)
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b)))
        .unwrap_or_else(|| "localhost".into())
}

/// Now as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    aep_bridge::time::rfc3339_ms(aep_bridge::time::now_ms())
}

/// An open (or settled) attention request seen in a replay.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The `attention.requested` Event.
    pub request: Event,
    /// Its terminal Event (`attention.resolved` / `attention.timeout`), when seen.
    pub closed_by: Option<String>,
}

/// Folds a replay into the attention requests it shows, keyed by request id
/// (AEP-0002 §7.1: lifecycle Events carry `subject` = the request id).
pub fn attention_book(events: &[Event]) -> BTreeMap<String, Pending> {
    let mut book: BTreeMap<String, Pending> = BTreeMap::new();
    let mut closed: BTreeMap<String, String> = BTreeMap::new();
    for ev in events {
        match ev.r#type.as_str() {
            "attention.requested" => {
                book.insert(ev.id.clone(), Pending { request: ev.clone(), closed_by: None });
            }
            "attention.resolved" | "attention.timeout" => {
                if let Some(s) = &ev.subject {
                    closed.insert(s.clone(), ev.r#type.clone());
                }
            }
            _ => {}
        }
    }
    for (id, ty) in closed {
        if let Some(p) = book.get_mut(&id) {
            p.closed_by = Some(ty);
        }
    }
    book
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_parser_dispatches_on_blank_lines() {
        let mut p = SseParser::default();
        assert_eq!(p.line("event: tool.completed"), None);
        assert_eq!(p.line("id: s:0:3"), None);
        assert_eq!(p.line("data: {\"a\":1}"), None);
        let got = p.line("");
        assert_eq!(
            got,
            Some(SseItem::Message(SseMessage {
                event: Some("tool.completed".into()),
                data: "{\"a\":1}".into(),
                id: Some("s:0:3".into())
            }))
        );
        assert_eq!(p.line(": ping"), Some(SseItem::Comment("ping".into())));
        assert_eq!(p.line(""), None);
    }

    #[test]
    fn short_time_and_clip() {
        assert_eq!(short_time("2026-01-02T03:04:05.123456Z"), "03:04:05.123");
        assert_eq!(short_time("2026-01-02T03:04:05+02:00"), "03:04:05.000");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(summary(Some(&json!({"tool": {"name": "Bash"}, "duration_ms": 5})), 80), "tool=Bash duration_ms=5");
    }

    #[test]
    fn endpoint_socket_url() {
        assert_eq!(Endpoint::new(Some("http://h:1/".into()), None).socket_url(), "ws://h:1/socket");
        assert_eq!(Endpoint::new(None, Some(String::new())).token, None);
    }
}
