//! The OpenCode / Kilo Code `serve` event stream observer (the OpenCode adapter design
//! record's "SSE bridge" section, AEP-0002 Annex A.7/A.8 SSE channel).
//!
//! One task per `[bridges.<name>]`: `GET {url}/event`, frames parsed by [`super::sse`]
//! (bounded), each bus event (`{id, type, properties}`) mapped by the pure mode policy
//! (`aep_adapters::vendors::opencode::sse::map_sse`) and submitted to the pipeline under
//! the bridge's agent identity. Sessionless machinery (`server.connected`, `plugin.added`,
//! ...) is not a valid session-scoped event and is skipped. Runs are synthesized per session
//! in primary mode; companion owns none.
//!
//! Reconnect and resume: after an error or the end of the stream the task reconnects with
//! jittered exponential backoff (reset by a connection that delivered frames), sending
//! `Last-Event-ID` when the server numbers its frames (OpenCode 1.18.33 does not: it
//! replays nothing, so nothing can double). Every bus event carries its own `id`; the last
//! 4096 are remembered and a replayed one is dropped. With the control gate on, the server's
//! own pending list (`GET {url}/permission`) is read at every connect: an ask raised while
//! disconnected is raised here, one settled meanwhile is closed (`attention.resolved`,
//! `dismissed`: how it was settled was not seen).
//!
//! The permission reply route (the design record's gate, primary mode only): the ask's
//! `attention.requested` carries the server's reply enum as options (`once`, `always`,
//! `reject`) and `respond_via: ["control"]`, and is registered with the control loop as a
//! [`ReplyRoute`]. A `control.attention.respond` is delivered as
//! `POST {url}/session/{session}/permissions/{id}` `{"response": option}`; the REST answer is
//! the ack (2xx `control.accepted`; another status `refused`; unreachable `busy`; no answer
//! within `reply_guard_ms` `accepted`: the write may still land). The outcome has one
//! source, the vendor's `permission.replied` broadcast: `attention.answered` (`via:
//! "control"`, cause = the command) then `attention.resolved` (cause = the answered event);
//! without a command, `attention.resolved` alone. Free text cannot ride OpenCode's route
//! (its body is `{response}` only) and is refused `invalid`; Kilo Code's takes it as the
//! rejection `message`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aep_adapters::vendors::opencode::sse::{SseMode, map_sse};
use aep_adapters::vendors::opencode::{Profile, bus_session};
use aep_adapters::{EventDraft, MapContext, SessionState};
use aep_schemas::Event;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::sse::{Frame, Parser};
use super::{BridgeConfig, BridgeMode};
use crate::attention::{AttentionBook, Pending};
use crate::control::{Applied, ControlLoop, ReplyRoute, RouteVerdict};
use crate::pipeline::{Pipeline, Stamped};
use crate::transport::retry::random_unit;
use crate::transport::{HttpClient, HttpOptions, RetryConfig};

/// The longest SSE line accepted (a frame's data may span several lines up to the frame cap).
const MAX_LINE: usize = 1 << 20;
/// Bus event ids remembered for dedupe.
const SEEN: usize = 4096;
/// Sessions whose run state is kept (the least recently seen is dropped beyond).
const MAX_SESSIONS: usize = 4096;
/// Asks tracked at most (an ask never settled is dropped oldest first beyond).
const MAX_ASKS: usize = 4096;

/// What an observer needs from the running bridge.
#[derive(Clone)]
pub struct Deps {
    /// Where the drafts go.
    pub pipeline: Pipeline,
    /// The control loop (routes and session claims).
    pub control: Arc<ControlLoop>,
    /// The attention book (open requests, closed before `session.ended`).
    pub book: Arc<AttentionBook>,
    /// The capture posture of the mapping.
    pub cx: MapContext,
    /// Whether an answer can reach this bridge at all (a token or a relay, AEP-0004 §4.1).
    pub can_answer: bool,
}

/// Why an observer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The section is incomplete (`config validate` reports it too).
    #[error("bridges.{0}: kind and url are required")]
    Incomplete(String),
    /// The HTTP client could not be built.
    #[error("bridges.{0}: {1}")]
    Client(String, crate::transport::http::ClientError),
}

/// Starts the observer of `[bridges.<name>]`; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    let observer = Observer::new(name, cfg, deps)?;
    Ok(tokio::spawn(observer.run(shutdown)))
}

/// A pending ask raised on the stream.
struct Ask {
    vendor_id: String,
    session: String,
    pending: Pending,
    settling: Option<Settling>,
}

/// An answer being delivered: the command and its answer, and whether its ack is out.
struct Settling {
    command: String,
    applied: Applied,
    acked: watch::Receiver<bool>,
}

/// The asks of one observer, shared with its reply route.
#[derive(Default)]
struct Asks {
    by_vendor: HashMap<String, Ask>,
    /// Request event id -> vendor id.
    by_event: HashMap<String, String>,
    order: VecDeque<String>,
}

impl Asks {
    fn insert(&mut self, ask: Ask) -> Option<Ask> {
        self.by_event.insert(ask.pending.id.clone(), ask.vendor_id.clone());
        self.order.push_back(ask.vendor_id.clone());
        self.by_vendor.insert(ask.vendor_id.clone(), ask);
        while self.by_vendor.len() > MAX_ASKS {
            let Some(old) = self.order.pop_front() else { break };
            if let Some(a) = self.by_vendor.remove(&old) {
                self.by_event.remove(&a.pending.id);
                return Some(a);
            }
        }
        None
    }

    fn take(&mut self, vendor_id: &str) -> Option<Ask> {
        let a = self.by_vendor.remove(vendor_id)?;
        self.by_event.remove(&a.pending.id);
        self.order.retain(|v| v != vendor_id);
        Some(a)
    }
}

/// The permission reply route of one server.
struct Route {
    asks: Arc<Mutex<Asks>>,
    /// Command id -> its "ack published" signal, until the ack is out (or the command refused).
    acks: Mutex<HashMap<String, watch::Sender<bool>>>,
    rest: HttpClient,
    base: String,
    /// Whether the route's body takes a `message` (Kilo Code's does, OpenCode 1.18's not).
    message: bool,
    guard: Duration,
}

impl ReplyRoute for Route {
    fn deliver<'a>(
        &'a self,
        request: &'a Pending,
        answer: &'a Applied,
        cmd: &'a Event,
    ) -> futures_util::future::BoxFuture<'a, RouteVerdict> {
        Box::pin(self.deliver_now(request, answer, cmd))
    }

    fn acked(&self, _request: &str, cmd: &str) {
        if let Some(tx) = self.acks.lock().ok().and_then(|mut a| a.remove(cmd)) {
            let _ = tx.send(true);
        }
    }
}

impl Route {
    async fn deliver_now(&self, request: &Pending, answer: &Applied, cmd: &Event) -> RouteVerdict {
        let invalid = |why: &str| RouteVerdict::Rejected("invalid", why.to_owned());
        if answer.values.is_some() {
            return invalid("a permission is answered with an option, not values");
        }
        let Some(option) = answer.option.clone() else {
            return invalid("answer with an option: once, always or reject");
        };
        if answer.text.is_some() && !self.message {
            // The design record: nothing on OpenCode's reply route carries free text.
            return invalid("free text cannot be delivered on this reply route: answer once, always or reject");
        }
        // Marked settling before the write: the broadcast may overtake the REST answer.
        let (vendor_id, session) = {
            let Ok(mut asks) = self.asks.lock() else { return RouteVerdict::Rejected("busy", "state lock".into()) };
            let Some(vendor_id) = asks.by_event.get(&request.id).cloned() else {
                return invalid("the request was settled meanwhile");
            };
            let Some(ask) = asks.by_vendor.get_mut(&vendor_id) else {
                return invalid("the request was settled meanwhile");
            };
            if ask.settling.is_some() {
                return invalid("another answer to this request is being delivered");
            }
            let (tx, acked) = watch::channel(false);
            if let Ok(mut a) = self.acks.lock() {
                a.insert(cmd.id.clone(), tx);
            }
            ask.settling = Some(Settling { command: cmd.id.clone(), applied: answer.clone(), acked });
            (vendor_id, ask.session.clone())
        };
        let url = format!("{}/session/{}/permissions/{}", self.base, segment(&session), segment(&vendor_id));
        let mut body = json!({"response": option});
        if let (true, Some(t)) = (self.message, &answer.text) {
            body["message"] = json!(t);
        }
        let verdict = match tokio::time::timeout(self.guard, self.rest.post_json(&url, &body)).await {
            Ok(Ok(r)) if (200..300).contains(&r.status) => RouteVerdict::Accepted,
            Ok(Ok(r)) => {
                let snippet = String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned();
                RouteVerdict::Rejected("refused", format!("the server answered HTTP {}: {snippet}", r.status))
            }
            Ok(Err(e)) => RouteVerdict::Rejected("busy", format!("the server is unreachable: {e}")),
            // Will-try: the write may still land; the settling mark stays for its broadcast.
            Err(_) => RouteVerdict::Accepted,
        };
        if verdict != RouteVerdict::Accepted
            && let Ok(mut a) = self.acks.lock()
        {
            a.remove(&cmd.id);
        }
        if verdict != RouteVerdict::Accepted
            && let Ok(mut asks) = self.asks.lock()
            && let Some(ask) = asks.by_vendor.get_mut(&vendor_id)
            && ask.settling.as_ref().is_some_and(|s| s.command == cmd.id)
        {
            ask.settling = None;
        }
        verdict
    }
}

/// A path segment, percent-encoded outside the unreserved set.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Remembered ids, oldest forgotten first.
#[derive(Default)]
struct Seen {
    set: HashSet<String>,
    order: VecDeque<String>,
}

impl Seen {
    /// `false` when `id` was seen already.
    fn first(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        self.set.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        if self.order.len() > SEEN
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }
}

/// What the observer counted (logged when a connection ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    frames: u64,
    replayed: u64,
    unparsable: u64,
    sessionless: u64,
}

struct Observer {
    name: String,
    profile: Profile,
    agent: String,
    mode: SseMode,
    /// The control gate is honoured (primary, `control = true`, an answer can arrive).
    gated: bool,
    base: String,
    stream: HttpClient,
    rest: HttpClient,
    deps: Deps,
    route: Arc<Route>,
    asks: Arc<Mutex<Asks>>,
    states: HashMap<String, (u64, SessionState)>,
    tick: u64,
    seen: Seen,
    reconnect: RetryConfig,
    max_frame: usize,
    guard: Duration,
    /// Longest wait for the stream's answer head.
    timeout: Duration,
    /// Longest silence on an open stream before it is taken for dead.
    idle: Option<Duration>,
    counts: Counts,
}

impl Observer {
    fn new(name: &str, cfg: &BridgeConfig, deps: Deps) -> Result<Self, StartError> {
        let (Some(kind), Some(url)) = (cfg.kind, &cfg.url) else { return Err(StartError::Incomplete(name.into())) };
        let opts = HttpOptions {
            timeout: Duration::from_millis(cfg.timeout_ms),
            headers: cfg.request_headers(),
            tls: cfg.tls.clone(),
        };
        let client = |streaming: bool| {
            if streaming { HttpClient::streaming(&opts) } else { HttpClient::new(&opts) }
                .map_err(|e| StartError::Client(name.into(), e))
        };
        let (stream, rest) = (client(true)?, client(false)?);
        let base = url.as_str().trim_end_matches('/').to_owned();
        let profile = kind.profile();
        let asks = Arc::new(Mutex::new(Asks::default()));
        let guard = Duration::from_millis(cfg.reply_guard_ms);
        let route = Arc::new(Route {
            asks: asks.clone(),
            acks: Mutex::new(HashMap::new()),
            rest: rest.clone(),
            base: base.clone(),
            message: profile.bus_asks,
            guard,
        });
        let mode = match cfg.mode {
            BridgeMode::Companion => SseMode::Companion,
            BridgeMode::Primary => SseMode::Primary,
        };
        let gated = cfg.control && mode == SseMode::Primary && deps.can_answer;
        if cfg.control && !gated {
            tracing::warn!(
                bridge = name,
                "control = true is not honoured: it needs mode = \"primary\" and a token or a relay for answers to arrive."
            );
        }
        Ok(Self {
            name: name.to_owned(),
            profile,
            agent: cfg.agent(),
            mode,
            gated,
            base,
            stream,
            rest,
            deps,
            route,
            asks,
            states: HashMap::new(),
            tick: 0,
            seen: Seen::default(),
            reconnect: RetryConfig {
                initial_ms: cfg.reconnect_initial_ms,
                max_ms: cfg.reconnect_max_ms,
                max_elapsed_ms: 0,
                multiplier: 2.0,
                jitter: 0.2,
            },
            max_frame: cfg.max_frame_bytes,
            guard,
            timeout: Duration::from_millis(cfg.timeout_ms),
            idle: (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms)),
            counts: Counts::default(),
        })
    }

    async fn run(mut self, shutdown: CancellationToken) {
        let mut parser = Parser::new(MAX_LINE.min(self.max_frame.max(1024)), self.max_frame);
        let mut failures = 0u32;
        tracing::info!(bridge = %self.name, url = %self.base, agent = %self.agent, mode = ?self.mode, control = self.gated, "SSE bridge starting.");
        loop {
            let before = self.counts.frames;
            let ended = tokio::select! {
                _ = shutdown.cancelled() => return,
                r = self.connection(&mut parser) => r,
            };
            match ended {
                Ok(()) => tracing::info!(bridge = %self.name, "The event stream ended; reconnecting."),
                Err(Stop::Pipeline) => {
                    tracing::info!(bridge = %self.name, "The pipeline closed; the SSE bridge stops.");
                    return;
                }
                Err(Stop::Retry(e)) => {
                    tracing::warn!(bridge = %self.name, error = %e, "Event stream unavailable; reconnecting.")
                }
            }
            let c = self.counts;
            tracing::debug!(bridge = %self.name, frames = c.frames, replayed = c.replayed, unparsable = c.unparsable,
                sessionless = c.sessionless, dropped = parser.dropped(), "SSE bridge counts.");
            parser.reset();
            failures = if self.counts.frames > before { 0 } else { failures.saturating_add(1) };
            let mut wait = self.reconnect.backoff_jittered(failures, random_unit());
            if let Some(ms) = parser.retry_ms() {
                // The server's `retry:` advice, within the configured bounds.
                wait = wait.max(Duration::from_millis(ms)).min(Duration::from_millis(self.reconnect.max_ms));
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One connection: open, resync, read until the stream ends.
    async fn connection(&mut self, parser: &mut Parser) -> Result<(), Stop> {
        let url = format!("{}/event", self.base);
        // A server that takes the connection but never answers (OpenCode 1.18.33 does so to
        // a request arriving while it boots) is retried, not waited on forever.
        let mut stream = match tokio::time::timeout(self.timeout, self.stream.open_stream(&url, parser.last_id())).await
        {
            Ok(r) => r.map_err(|e| Stop::Retry(e.to_string()))?,
            Err(_) => return Err(Stop::Retry(format!("GET {url}: no answer within {:?}", self.timeout))),
        };
        if stream.status != 200 {
            let status = stream.status;
            let text = stream.text(300).await;
            return Err(Stop::Retry(format!("GET {url}: HTTP {status}: {}", text.trim())));
        }
        if !stream.content_type.starts_with("text/event-stream") {
            return Err(Stop::Retry(format!("GET {url}: not an event stream ({:?})", stream.content_type)));
        }
        tracing::info!(bridge = %self.name, "Event stream connected.");
        if self.gated {
            self.resync().await?;
        }
        let mut frames = Vec::new();
        let mut warned = false;
        loop {
            let next = stream.chunk();
            let read = match self.idle {
                Some(idle) => match tokio::time::timeout(idle, next).await {
                    Ok(r) => r,
                    // The server's heartbeat (`server.heartbeat`, every 10 s at 1.18.33) stopped.
                    Err(_) => return Err(Stop::Retry(format!("GET {url}: silent for {idle:?}"))),
                },
                None => next.await,
            };
            let chunk = match read {
                Ok(Some(c)) => c,
                Ok(None) => return Ok(()),
                Err(e) => return Err(Stop::Retry(e.to_string())),
            };
            let dropped = parser.dropped();
            parser.push(&chunk, &mut frames);
            if parser.dropped() > dropped && !warned {
                warned = true;
                tracing::warn!(bridge = %self.name, max_frame_bytes = self.max_frame, "An oversized SSE frame was dropped.");
            }
            for f in frames.drain(..) {
                self.frame(f).await?;
            }
        }
    }

    async fn frame(&mut self, f: Frame) -> Result<(), Stop> {
        self.counts.frames += 1;
        let ev: Value = match serde_json::from_str(&f.data) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.counts.unparsable += 1;
                return Ok(());
            }
        };
        if let Some(id) = ev.get("id").and_then(Value::as_str)
            && !self.seen.first(id)
        {
            self.counts.replayed += 1;
            return Ok(());
        }
        self.event(&ev).await
    }

    /// The run state of `session` (bounded: the least recently used is dropped).
    fn state(&mut self, session: &str) -> &mut SessionState {
        self.tick += 1;
        if !self.states.contains_key(session)
            && self.states.len() >= MAX_SESSIONS
            && let Some(old) = self.states.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone())
        {
            self.states.remove(&old);
        }
        let slot = self.states.entry(session.to_owned()).or_default();
        slot.0 = self.tick;
        &mut slot.1
    }

    /// Maps and submits one bus event.
    async fn event(&mut self, ev: &Value) -> Result<(), Stop> {
        let Some(ty) = ev.get("type").and_then(Value::as_str) else {
            self.counts.unparsable += 1;
            return Ok(());
        };
        let session = bus_session(ev).map(str::to_owned);
        if self.mode == SseMode::Primary
            && matches!(ty, "permission.replied" | "question.replied")
            && let Some(id) = ev
                .pointer("/properties/permissionID")
                .or_else(|| ev.pointer("/properties/requestID"))
                .and_then(Value::as_str)
        {
            return self.settled(id).await;
        }
        let (cx, profile, mode) = (self.deps.cx.clone(), self.profile, self.mode);
        let state = self.state(session.as_deref().unwrap_or(""));
        let mapped = if mode == SseMode::Primary && ty == "todo.updated" {
            // The policy leaves the snapshot diff to the receiver (the pin's `todo_updated: null`).
            Ok(todos(ev, session.as_deref(), state, &cx))
        } else {
            map_sse(profile, mode, ev, state, &cx)
        };
        let mut drafts = match mapped {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(bridge = %self.name, error = %e, "Unmappable bus event.");
                self.counts.unparsable += 1;
                return Ok(());
            }
        };
        let before = drafts.len();
        // A session-scoped event without its session is not an event (AEP-0001 §5.2).
        drafts.retain(|d| d.session.is_some() || aep_schemas::event::is_agent_scoped(&d.r#type));
        self.counts.sessionless += (before - drafts.len()) as u64;
        if ty == "session.deleted"
            && let Some(s) = &session
        {
            self.states.remove(s);
        }
        if drafts.is_empty() {
            return Ok(());
        }
        let now = now_ms();
        if mode == SseMode::Primary {
            self.raise(&mut drafts, now);
        }
        self.submit(drafts, now).await
    }

    /// Registers the asks among `drafts` before they are published: their ids minted, the
    /// book opened, and (gated, permission kind) the reply route attached.
    fn raise(&mut self, drafts: &mut [EventDraft], now: u64) {
        for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
            let (Some(session), Some(vendor_id)) =
                (d.session.clone(), d.correlation_key.as_deref().and_then(|k| k.strip_prefix("attention:")))
            else {
                continue;
            };
            let vendor_id = vendor_id.to_owned();
            if self.asks.lock().is_ok_and(|a| a.by_vendor.contains_key(&vendor_id)) {
                continue;
            }
            let answerable = self.gated && d.data.get("kind").and_then(Value::as_str) == Some("permission");
            if answerable {
                // The design record's gated-on decoration: the vendor's own reply vocabulary.
                d.data.insert(
                    "options".into(),
                    json!([
                        {"id": "once", "label": "Allow once"},
                        {"id": "always", "label": "Always allow"},
                        {"id": "reject", "label": "Reject"}
                    ]),
                );
                d.data.insert("respond_via".into(), json!(["control"]));
            }
            let id = self.deps.pipeline.mint_id();
            d.id = Some(id.clone());
            let p =
                Pending::from_request(id, &self.agent, session.clone(), d.run.clone(), d.subject.clone(), &d.data, now);
            self.deps.book.open(p.clone());
            if answerable {
                self.deps.control.register_route(p.clone(), self.route.clone());
            }
            let dropped = self
                .asks
                .lock()
                .ok()
                .and_then(|mut a| a.insert(Ask { vendor_id, session, pending: p, settling: None }));
            if let Some(old) = dropped {
                self.deps.control.forget(&old.pending.id);
                self.deps.book.take(&old.pending.id);
            }
        }
    }

    /// The vendor settled ask `vendor_id` (`permission.replied` / `question.replied`): the
    /// outcome, from this broadcast only. An ask this stream never raised is not ours to close.
    async fn settled(&mut self, vendor_id: &str) -> Result<(), Stop> {
        let Some(mut ask) = self.asks.lock().ok().and_then(|mut a| a.take(vendor_id)) else {
            tracing::debug!(bridge = %self.name, "A reply to an ask this stream did not raise.");
            return Ok(());
        };
        self.deps.control.forget(&ask.pending.id);
        let drafts = self.outcome(&mut ask, "answered").await;
        self.submit(drafts, now_ms()).await
    }

    /// `attention.answered` + `attention.resolved` for a command's answer (after its ack is
    /// out), else `attention.resolved` with `resolution`.
    async fn outcome(&self, ask: &mut Ask, resolution: &str) -> Vec<EventDraft> {
        let now = now_ms();
        let Some(s) = ask.settling.take() else {
            return vec![ask.pending.resolved(now, resolution)];
        };
        // The ack precedes the outcome on the wire (AEP-0004 §1): wait for it, bounded.
        let mut acked = s.acked;
        let _ = tokio::time::timeout(self.guard + Duration::from_secs(2), acked.wait_for(|a| *a)).await;
        let mut answered = self.deps.control.answered(&ask.pending, &s.applied, &s.command);
        answered.data.insert("via".into(), json!("control"));
        let answered_id = self.deps.pipeline.mint_id();
        answered.id = Some(answered_id.clone());
        let mut resolved = ask.pending.resolved(now, "answered");
        resolved.cause = Some(answered_id);
        vec![answered, resolved]
    }

    /// Re-reads the server's pending permissions (at connect): asks raised while away are
    /// raised, asks gone meanwhile are closed.
    async fn resync(&mut self) -> Result<(), Stop> {
        let url = format!("{}/permission", self.base);
        let list = match self.rest.get(&url).await {
            Ok(r) if r.status == 200 => match serde_json::from_slice::<Value>(&r.body) {
                Ok(Value::Array(l)) => l,
                _ => return Ok(()),
            },
            Ok(r) => {
                tracing::debug!(bridge = %self.name, status = r.status, "No pending-permission list to resync from.");
                return Ok(());
            }
            Err(e) => {
                tracing::debug!(bridge = %self.name, error = %e, "Pending-permission resync failed.");
                return Ok(());
            }
        };
        let live: HashSet<&str> = list.iter().filter_map(|p| p.get("id").and_then(Value::as_str)).collect();
        let gone: Vec<String> = self.asks.lock().map_or_else(
            |_| Vec::new(),
            |a| {
                a.by_vendor
                    .values()
                    .filter(|x| x.pending.kind == "permission" && !live.contains(x.vendor_id.as_str()))
                    .map(|x| x.vendor_id.clone())
                    .collect()
            },
        );
        for vendor_id in gone {
            let Some(mut ask) = self.asks.lock().ok().and_then(|mut a| a.take(&vendor_id)) else { continue };
            self.deps.control.forget(&ask.pending.id);
            let resolution = if ask.settling.is_some() { "answered" } else { "dismissed" };
            let drafts = self.outcome(&mut ask, resolution).await;
            self.submit(drafts, now_ms()).await?;
        }
        for p in list {
            if p.get("id").and_then(Value::as_str).is_none() {
                continue;
            }
            self.event(&json!({"type": "permission.asked", "properties": p})).await?;
        }
        Ok(())
    }

    /// Publishes drafts: claims their sessions (gated), settles what a session end closes,
    /// and lets the book and the control loop see what was stamped.
    async fn submit(&mut self, mut drafts: Vec<EventDraft>, now: u64) -> Result<(), Stop> {
        if drafts.is_empty() {
            return Ok(());
        }
        let settled = self.deps.book.settle(&self.agent, &mut drafts, now);
        for id in &settled {
            self.deps.control.forget(id);
            if let Ok(mut a) = self.asks.lock()
                && let Some(v) = a.by_event.get(id).cloned()
            {
                a.take(&v);
            }
        }
        if self.gated {
            self.deps.control.claim(&self.agent, &drafts);
        }
        let stamped: Vec<Arc<Stamped>> =
            self.deps.pipeline.submit_drafts("sse", &self.agent, drafts).await.map_err(|_| Stop::Pipeline)?;
        self.deps.book.observe(&stamped, now);
        self.deps.control.observe(&stamped);
        Ok(())
    }
}

/// `progress.task.*` transitions of a `todo.updated` snapshot against the session's last one.
fn todos(ev: &Value, session: Option<&str>, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    let next = ev.pointer("/properties/todos").cloned().unwrap_or_else(|| json!([]));
    let prev = state.extra.insert("sse_todos".into(), next.clone()).unwrap_or_else(|| json!([]));
    let mut drafts = aep_adapters::vendors::opencode::diff_todos(&prev, &next, cx);
    for d in &mut drafts {
        d.session = session.map(str::to_owned);
        d.run.clone_from(&state.current_run);
    }
    drafts
}

/// Why a connection ended without the stream's own end.
enum Stop {
    /// Reconnect after a wait.
    Retry(String),
    /// The pipeline is closed: the bridge is shutting down.
    Pipeline,
}

fn now_ms() -> u64 {
    crate::time::unix_ms(SystemTime::now())
}
