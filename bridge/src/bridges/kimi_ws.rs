//! The Kimi Code `kimi web` observer (the Kimi Code design record's "kimi web channel",
//! AEP-0002 Annex A.6, the pin's `ws_modes`): the kap-server's WebSocket event stream
//! (`/api/v1/ws`), each envelope (`{type, seq, session_id, timestamp, payload, epoch,
//! volatile?}`) mapped by the pure mode policy (`aep_adapters::vendors::kimi_code::web`)
//! and submitted to the pipeline under the bridge's agent identity (default `kimi-code`).
//!
//! Auth: the server's bearer token (`token`, or `token_file` = `<KIMI_CODE_HOME>/server.token`,
//! read at every connect until it exists) rides the upgrade as `Authorization: Bearer` and
//! as the `kimi-code.bearer.<token>` subprotocol, and every REST call as the header.
//!
//! Sessions: the kap-server streams per subscribed session only, so the observer reads the
//! server's session list (`GET /api/v1/sessions`) at connect and every `poll_ms`, and
//! subscribes what it has not; a subscribed connection also hears `event.session.created`
//! and subscribes the new session at once. The sessions of the first listing are observed
//! from the moment of attaching (their history is not re-emitted); a session first seen
//! later is subscribed from its start (cursor `seq` 0: the server replays its journal, at
//! most its 1000-event buffer), so nothing between its creation and the next poll is lost.
//!
//! Reconnect and resume: after an error, a close or a silent stream (a WebSocket ping every
//! third of `idle_timeout_ms`, unanswered for `idle_timeout_ms`) the transport's reconnect
//! supervisor reconnects with jittered exponential backoff and the observer re-subscribes
//! every session with its last `{seq, epoch}`: the server replays what followed. Durable
//! frames are numbered per session, so a replayed one (`seq` at or below the session's
//! last) is dropped; a new `epoch` restarts the numbering; the server's `resync_required`
//! (buffer overflow, a new journal) is logged with the size of the gap and the cursor taken
//! as is. Volatile frames (deltas, status pulses) carry no number of their own and never
//! emit. Memory is bounded: at most 4096 sessions' cursors and 4096 open tool calls and
//! approvals, the least recent dropped.
//!
//! Shutdown: kimi web 0.28 closes its sockets only once its HTTP server has closed, which
//! waits for them, so a SIGTERM'd server would hang on this observer's stream; when the
//! session poll gets no answer at all the stream is closed and reconnected (a resume loses
//! nothing).
//!
//! Frames are bounded in bytes (`max_frame_bytes`, enforced by the WebSocket reader before
//! a frame is buffered): an oversized frame ends the connection. A live one is then either
//! volatile (never replayed: the resume goes on) or durable, and comes back in the resume's
//! replay; one arriving while a subscription's replay is outstanding would come back
//! forever, so those sessions are subscribed without a cursor next time (live from then on,
//! the gap logged).
//!
//! Primary mode (stream-only deployments): the vendor's turns are the runs; `tool.result`
//! names no tool, so the observer pairs it with the `tool.call.started` of its call id
//! (`tool.completed`, or `tool.failed` when `isError`, or `tool.denied` `by: "runtime"` when
//! the call's approval was rejected: Kimi 0.28 still starts the call and answers "was not
//! run because the user rejected the approval request"), an unpairable one degrades to channel
//! visibility; a subagent's frames (payload `agentId` other than `main`: its turns are
//! numbered on their own) ride channel visibility too, but for its asks (run-less). Every
//! ask is raised and tracked (its `attention.requested` id minted, the
//! attention book opened); its outcome carries that id as `subject` (AEP-0002 §7.1): a
//! decision becomes `attention.answered` (`via: "oob"`) then `attention.resolved`
//! (`answered`), a decision-less or `cancelled` resolution `attention.resolved`
//! (`dismissed`); an outcome of an ask this observer never raised degrades to channel
//! visibility. With `control = true` (the design record's `AEP_KIMI_WEB_CONTROL`, primary
//! only) an approval is answerable: its card carries the kap-server's own decisions
//! (`approved` / `rejected`) and `respond_via: ["control"]`, and `control.attention.respond`
//! is delivered as `POST /api/v1/sessions/{session}/approvals/{id}` `{"decision"}` with free
//! text as `feedback` ([`super::reply`], the route in `aep_adapters::vendors::kimi_code::spec`); the outcome is the server's own
//! `event.approval.resolved` broadcast. Questions stay read-only (the design record defers
//! their actuation); `control.cancel` is not accepted by this bridge's control loop.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aep_adapters::vendors::kimi_code::spec::ROUTE;
use aep_adapters::vendors::kimi_code::web::{PENDING_LISTS, PendingList, WsMode, map_ws};
use aep_adapters::{EventDraft, MapContext, common};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::opencode::{Deps, StartError};
use super::reply::{self, Ask, Replies};
use super::{BridgeConfig, BridgeMode, Stop};
use crate::attention::Pending;
use crate::pipeline::Stamped;
use crate::time::now_ms;
use crate::transport::config::Headers;
use crate::transport::reconnect::{Ended, Link, Policy, supervise};
use crate::transport::ws::{self, WsError, WsOptions};
use crate::transport::{HttpClient, HttpOptions};

/// Sessions whose cursor is kept (the least recently seen is dropped beyond).
const MAX_SESSIONS: usize = 4096;
/// Open tool calls remembered for the `tool.result` pairing (the oldest dropped beyond).
const MAX_CALLS: usize = 4096;
/// Sessions read from one listing (the newest; the kap-server takes at most 100).
const LIST_PAGE: usize = 100;
/// Session ids in one `subscribe` frame.
const SUBSCRIBE_BATCH: usize = 256;

/// Starts the observer of a `kind = "kimi-ws"` section; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    let observer = Observer::new(name, cfg, deps)?;
    Ok(tokio::spawn(observer.run(shutdown)))
}

/// `ws(s)://{host}{path}/api/v1/ws` for an `http(s)://` base URL.
pub fn socket_url(base: &str) -> String {
    format!("{}/api/v1/ws", ws::ws_url(base))
}

/// A map forgetting its oldest entries beyond [`MAX_CALLS`].
struct Recent<V> {
    map: HashMap<String, V>,
    order: VecDeque<String>,
}

impl<V> Default for Recent<V> {
    fn default() -> Self {
        Self { map: HashMap::new(), order: VecDeque::new() }
    }
}

impl<V> Recent<V> {
    fn insert(&mut self, key: String, value: V) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.map.len() > MAX_CALLS {
            let Some(old) = self.order.pop_front() else { break };
            self.map.remove(&old);
        }
    }

    fn take(&mut self, key: &str) -> Option<V> {
        let v = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(v)
    }
}

/// A session's stream position: the last durable `seq` seen and its journal's `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    seq: u64,
    epoch: Option<String>,
    tick: u64,
}

/// What the observer counted (logged when a connection ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    frames: u64,
    replayed: u64,
    volatile: u64,
    unparsable: u64,
    oversized: u64,
    /// Durable frames the server could not replay (its `resync_required`) or skipped.
    missed: u64,
}

/// The REST client and the reply book, built once the token is known.
struct Auth {
    token: Option<String>,
    rest: HttpClient,
    replies: Arc<Replies>,
}

struct Observer {
    name: String,
    agent: String,
    mode: WsMode,
    /// The control gate is honoured (primary, `control = true`, an answer can arrive).
    gated: bool,
    base: String,
    ws_url: String,
    headers: Headers,
    token: Option<String>,
    token_file: Option<PathBuf>,
    tls: crate::transport::TlsConfig,
    wss: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    guard: Duration,
    deps: Deps,
    auth: Option<Auth>,
    /// Per-session cursors (bounded).
    cursors: HashMap<String, Cursor>,
    tick: u64,
    /// The sessions of the first listing (observed from the moment of attaching); `None`
    /// until a listing succeeded.
    initial: Option<HashSet<String>>,
    /// Sessions accepted on the current connection.
    subscribed: HashSet<String>,
    /// Sessions in a `subscribe` not yet acknowledged.
    offered: HashSet<String>,
    /// Sessions to subscribe with the next frame.
    want: Vec<String>,
    /// Sessions whose asks are reconciled with the server's pending lists (primary, after
    /// each subscription's replay).
    reconcile: Vec<String>,
    /// Open tool calls: `session \0 call` -> (tool name, run).
    calls: Recent<(String, Option<String>)>,
    /// Raised approvals: `session \0 approval` -> their tool call.
    approval_calls: Recent<String>,
    /// Calls whose approval was rejected (`session \0 call`): their error result is the denial.
    denied: Recent<()>,
    reconnect: Policy,
    max_frame: usize,
    idle: Option<Duration>,
    poll: Duration,
    counts: Counts,
    next_id: u64,
    /// Sessions whose replay brought an oversized frame: subscribed without a cursor next.
    fresh_next: HashSet<String>,
}

/// `~/x` as `$HOME/x` (the token file's usual spelling).
fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn strings(v: Option<&Value>) -> impl Iterator<Item = &str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

impl Observer {
    fn new(name: &str, cfg: &BridgeConfig, deps: Deps) -> Result<Self, StartError> {
        let Some(url) = &cfg.url else { return Err(StartError::Incomplete(name.into())) };
        let base = url.as_str().trim_end_matches('/').to_owned();
        let ws_url = socket_url(&base);
        let wss = ws::tls_for(&ws_url, &cfg.tls)
            .map_err(|e| StartError::Client(name.into(), crate::transport::http::ClientError::Tls(e)))?;
        let mode = match cfg.mode {
            BridgeMode::Companion => WsMode::Companion,
            BridgeMode::Primary => WsMode::Primary,
        };
        let gated = cfg.answerable(deps.can_answer);
        if cfg.control && !gated {
            tracing::warn!(
                bridge = name,
                "control = true is not honoured: it needs mode = \"primary\" and a token or a relay for answers to arrive."
            );
        }
        let mut observer = Self {
            name: name.to_owned(),
            agent: cfg.agent(),
            mode,
            gated,
            base,
            ws_url,
            headers: cfg.headers.clone(),
            token: (!cfg.token.trim().is_empty()).then(|| cfg.token.trim().to_owned()),
            token_file: (!cfg.token_file.is_empty()).then(|| expand_home(&cfg.token_file)),
            tls: cfg.tls.clone(),
            wss,
            timeout: Duration::from_millis(cfg.timeout_ms),
            guard: Duration::from_millis(cfg.reply_guard_ms),
            deps,
            auth: None,
            cursors: HashMap::new(),
            tick: 0,
            initial: None,
            subscribed: HashSet::new(),
            offered: HashSet::new(),
            want: Vec::new(),
            reconcile: Vec::new(),
            calls: Recent::default(),
            approval_calls: Recent::default(),
            denied: Recent::default(),
            reconnect: cfg.reconnect_policy(),
            max_frame: cfg.max_frame_bytes,
            idle: (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms)),
            poll: Duration::from_millis(cfg.poll_ms().max(100)),
            counts: Counts::default(),
            next_id: 0,
            fresh_next: HashSet::new(),
        };
        // A bad header or TLS file is a start error, not a retry loop.
        let token = observer.token.clone();
        observer.authorize(token).map_err(|e| StartError::Client(name.into(), e))?;
        Ok(observer)
    }

    async fn run(mut self, shutdown: CancellationToken) {
        tracing::info!(bridge = %self.name, url = %self.ws_url, agent = %self.agent, mode = ?self.mode, control = self.gated, "Kimi web bridge starting.");
        let (name, policy) = (format!("bridges.{}", self.name), self.reconnect.clone());
        supervise(&name, &policy, Some(&shutdown), &mut self).await;
    }

    /// The bearer token now: the configured one, else `token_file`'s content.
    fn resolve_token(&self) -> Result<Option<String>, String> {
        if let Some(t) = &self.token {
            return Ok(Some(t.clone()));
        }
        let Some(path) = &self.token_file else { return Ok(None) };
        let text = std::fs::read_to_string(path).map_err(|e| format!("token_file {}: {e}", path.display()))?;
        match text.trim() {
            "" => Err(format!("token_file {} is empty", path.display())),
            t => Ok(Some(t.to_owned())),
        }
    }

    /// (Re)builds the REST client and the reply book for `token` when it changed.
    fn authorize(&mut self, token: Option<String>) -> Result<(), crate::transport::http::ClientError> {
        if self.auth.as_ref().is_some_and(|a| a.token == token) {
            return Ok(());
        }
        let mut headers = self.headers.clone();
        if let Some(t) = &token {
            headers.insert("authorization".into(), format!("Bearer {t}"));
        }
        let rest = HttpClient::new(&HttpOptions { timeout: self.timeout, headers, tls: self.tls.clone() })?;
        if self.auth.as_ref().is_some_and(|a| a.token.is_some()) {
            // Asks raised under the old token keep their (now refused) route: answers to
            // them are nacked `refused`; new asks use the new token.
            tracing::warn!(bridge = %self.name, "The server token changed; REST calls use the new one.");
        }
        let replies = Replies::new(rest.clone(), self.guard);
        self.auth = Some(Auth { token, rest, replies });
        Ok(())
    }

    /// One connection: open, subscribe (resuming), read until it ends.
    async fn connection(&mut self) -> Result<(), Stop> {
        let token = self.resolve_token().map_err(Stop::Retry)?;
        self.authorize(token.clone()).map_err(|e| Stop::Retry(e.to_string()))?;
        let mut headers = self.headers.clone();
        if let Some(t) = &token {
            // Both forms the kap-server takes: the bearer header, and the browser's subprotocol.
            headers.insert("sec-websocket-protocol".into(), format!("kimi-code.bearer.{t}"));
        }
        let opts = WsOptions {
            headers,
            bearer: token,
            tls: self.wss.clone(),
            max_message: Some(self.max_frame),
            timeout: self.timeout,
        };
        let ws = match ws::connect(&self.ws_url, &opts).await {
            Ok(ws) => ws,
            Err(e) => {
                if let WsError::Certificate { reason, .. } = &e {
                    tracing::error!(bridge = %self.name, reason, "Kimi web TLS certificate refused (tls.ca_file?).");
                }
                return Err(Stop::Retry(e.to_string()));
            }
        };
        let (mut sink, mut stream) = ws.split();
        tracing::info!(bridge = %self.name, url = %self.ws_url, "Kimi web stream connected.");
        self.subscribed.clear();
        self.offered.clear();
        // Resume every session this observer follows from its cursor.
        self.want = self.cursors.keys().cloned().collect();
        self.reconcile.clear();
        let ping_every = self.idle.map_or(Duration::from_secs(3600), |i| (i / 3).max(Duration::from_millis(50)));
        let mut ping = tokio::time::interval(ping_every);
        ping.tick().await;
        let mut poll = tokio::time::interval(self.poll);
        let mut last_rx = Instant::now();
        loop {
            if !self.want.is_empty() {
                let frame = self.subscribe_frame();
                if let Some(f) = frame
                    && sink.send(Message::text(f.to_string())).await.is_err()
                {
                    return Err(Stop::Retry("the stream closed while subscribing".into()));
                }
                continue;
            }
            if let Some(sid) = self.reconcile.pop() {
                self.reconcile_asks(&sid).await?;
                continue;
            }
            tokio::select! {
                _ = poll.tick() => {
                    if let Err(e) = self.list().await {
                        // kimi web 0.28 closes its sockets only once its HTTP server has
                        // closed, which waits for them: a SIGTERM'd server would hang on
                        // this connection. Its REST side gone, the stream is let go (the
                        // resume loses nothing).
                        let _ = sink.send(Message::Close(None)).await;
                        return Err(Stop::Retry(format!("the server's REST side is gone ({e}); letting the stream go")));
                    }
                }
                _ = ping.tick() => {
                    if let Some(idle) = self.idle {
                        if last_rx.elapsed() >= idle {
                            return Err(Stop::Retry(format!("{}: silent for {idle:?}", self.ws_url)));
                        }
                        if sink.send(Message::Ping(Default::default())).await.is_err() {
                            return Err(Stop::Retry("the stream closed".into()));
                        }
                    }
                }
                m = stream.next() => {
                    last_rx = Instant::now();
                    let text = match m {
                        None | Some(Ok(Message::Close(_))) => return Ok(()),
                        Some(Err(tungstenite::Error::Capacity(e))) => {
                            self.counts.oversized += 1;
                            // Within a replay (its ack outstanding) the frame would come back
                            // on every resume: those sessions skip ahead next time.
                            self.fresh_next.extend(self.offered.iter().cloned());
                            tracing::warn!(bridge = %self.name, max_frame_bytes = self.max_frame, error = %e,
                                replaying = ?self.offered, "An oversized Kimi web frame ended the connection.");
                            return Err(Stop::Retry(e.to_string()));
                        }
                        Some(Err(e)) => return Err(Stop::Retry(e.to_string())),
                        Some(Ok(Message::Text(t))) => serde_json::from_str::<Value>(t.as_str()),
                        Some(Ok(Message::Binary(b))) => serde_json::from_slice::<Value>(&b),
                        Some(Ok(_)) => continue,
                    };
                    match text {
                        Ok(v @ Value::Object(_)) => self.frame(v).await?,
                        _ => self.counts.unparsable += 1,
                    }
                }
            }
        }
    }

    /// The next `subscribe` frame for the sessions in `want` (at most a batch), each with its
    /// resume cursor (none for one whose replay brought an oversized frame).
    fn subscribe_frame(&mut self) -> Option<Value> {
        let mut ids = Vec::new();
        let mut cursors = Map::new();
        while ids.len() < SUBSCRIBE_BATCH {
            let Some(sid) = self.want.pop() else { break };
            if self.subscribed.contains(&sid) || self.offered.contains(&sid) || ids.contains(&sid) {
                continue;
            }
            if self.fresh_next.remove(&sid) {
                tracing::warn!(bridge = %self.name, session = %sid,
                    "An oversized frame came back in the replay: following the session live from here (a gap).");
            } else if let Some(c) = self.cursor_of(&sid) {
                cursors.insert(sid.clone(), c);
            }
            ids.push(sid);
        }
        if ids.is_empty() {
            return None;
        }
        self.offered.extend(ids.iter().cloned());
        self.next_id += 1;
        Some(json!({"type": "subscribe", "id": format!("aep-sub-{}", self.next_id),
            "payload": {"session_ids": ids, "cursors": cursors}}))
    }

    /// Where `sid`'s stream resumes: its cursor; none for a session of the first listing
    /// (observed from now); its start for a session first seen later.
    fn cursor_of(&self, sid: &str) -> Option<Value> {
        if let Some(c) = self.cursors.get(sid) {
            let mut v = json!({"seq": c.seq});
            if let Some(e) = &c.epoch {
                v["epoch"] = json!(e);
            }
            return Some(v);
        }
        if self.initial.as_ref().is_some_and(|i| i.contains(sid)) { None } else { Some(json!({"seq": 0})) }
    }

    /// Reads the server's session list and queues the sessions not subscribed. `Err` when
    /// the server did not answer at all (it refuses connections while shutting down).
    async fn list(&mut self) -> Result<(), String> {
        let Some(auth) = &self.auth else { return Ok(()) };
        let url = format!("{}/api/v1/sessions?page_size={LIST_PAGE}", self.base);
        let items = match auth.rest.get(&url).await {
            Ok(r) if r.status == 200 => match serde_json::from_slice::<Value>(&r.body) {
                Ok(v) if v.get("code").and_then(Value::as_i64) == Some(0) => {
                    v.pointer("/data/items").and_then(Value::as_array).cloned().unwrap_or_default()
                }
                _ => {
                    tracing::debug!(bridge = %self.name, "The session list is not a kap-server envelope.");
                    return Ok(());
                }
            },
            Ok(r) => {
                tracing::debug!(bridge = %self.name, status = r.status, "The session list was refused.");
                return Ok(());
            }
            Err(e) => return Err(e.to_string()),
        };
        let ids: Vec<String> = items.iter().filter_map(|i| s(i, "id")).map(str::to_owned).collect();
        if self.initial.is_none() {
            self.initial = Some(ids.iter().take(MAX_SESSIONS).cloned().collect());
        }
        for id in ids {
            if !self.subscribed.contains(&id) && !self.offered.contains(&id) {
                self.want.push(id);
            }
        }
        Ok(())
    }

    /// Handles one frame off the socket.
    async fn frame(&mut self, v: Value) -> Result<(), Stop> {
        self.counts.frames += 1;
        let Some(ty) = s(&v, "type").map(str::to_owned) else {
            self.counts.unparsable += 1;
            return Ok(());
        };
        match ty.as_str() {
            "server_hello" => return Ok(()),
            "ack" => {
                self.ack(&v);
                return Ok(());
            }
            "resync_required" => {
                let p = v.get("payload").unwrap_or(&Value::Null);
                if let Some(sid) = s(p, "session_id") {
                    let seq = p.get("current_seq").and_then(Value::as_u64).unwrap_or(0);
                    self.resynced(sid, seq, s(p, "epoch"), s(p, "reason").unwrap_or("unknown"));
                }
                return Ok(());
            }
            _ => {}
        }
        // Volatile frames never emit (the vendor's do-not-persist marker) and carry no
        // number of their own (`seq` is the last durable one's).
        if v.get("volatile").and_then(Value::as_bool) == Some(true) {
            self.counts.volatile += 1;
            return Ok(());
        }
        let Some(session) = s(&v, "session_id").filter(|x| !x.is_empty()).map(str::to_owned) else {
            self.counts.unparsable += 1;
            return Ok(());
        };
        if let Some(seq) = v.get("seq").and_then(Value::as_u64)
            && !self.fresh(&session, seq, s(&v, "epoch"))
        {
            self.counts.replayed += 1;
            return Ok(());
        }
        // A session this connection hears of but does not follow (the server fans
        // `event.session.*` out to every subscriber): follow it from here.
        if !self.subscribed.contains(&session) && !self.offered.contains(&session) {
            self.want.push(session.clone());
        }
        let drafts = self.map(&ty, &v, &session).await;
        self.submit(drafts, now_ms()).await
    }

    /// `false` when frame `seq` of `session` was seen already (a replay).
    fn fresh(&mut self, session: &str, seq: u64, epoch: Option<&str>) -> bool {
        self.tick += 1;
        let tick = self.tick;
        if let Some(c) = self.cursors.get_mut(session) {
            c.tick = tick;
            if let (Some(known), Some(e)) = (&c.epoch, epoch)
                && known != e
            {
                // A new journal: its numbering restarted.
                c.epoch = Some(e.to_owned());
                c.seq = seq;
                return true;
            }
            if seq <= c.seq {
                return false;
            }
            c.seq = seq;
            if c.epoch.is_none() {
                c.epoch = epoch.map(str::to_owned);
            }
            return true;
        }
        self.insert_cursor(session, Cursor { seq, epoch: epoch.map(str::to_owned), tick });
        true
    }

    fn insert_cursor(&mut self, session: &str, c: Cursor) {
        if !self.cursors.contains_key(session)
            && self.cursors.len() >= MAX_SESSIONS
            && let Some(old) = self.cursors.iter().min_by_key(|(_, c)| c.tick).map(|(k, _)| k.clone())
        {
            self.cursors.remove(&old);
        }
        self.cursors.insert(session.to_owned(), c);
    }

    /// A `subscribe` acknowledgement: sessions accepted, cursors taken where this observer
    /// has none (or the server could not replay).
    fn ack(&mut self, v: &Value) {
        let p = v.get("payload").unwrap_or(&Value::Null);
        let accepted: Vec<String> =
            strings(p.get("accepted").or_else(|| p.get("accepted_subscriptions"))).map(str::to_owned).collect();
        for sid in strings(p.get("not_found")) {
            self.offered.remove(sid);
        }
        let resync: HashSet<&str> = strings(p.get("resync_required")).collect();
        for sid in &accepted {
            self.offered.remove(sid);
            if self.subscribed.len() < MAX_SESSIONS {
                self.subscribed.insert(sid.clone());
            }
            if self.mode == WsMode::Primary {
                self.reconcile.push(sid.clone());
            }
        }
        let Some(cursors) = p.get("cursors").and_then(Value::as_object) else { return };
        for (sid, c) in cursors {
            let seq = c.get("seq").and_then(Value::as_u64).unwrap_or(0);
            let epoch = s(c, "epoch").filter(|e| !e.is_empty());
            if resync.contains(sid.as_str()) {
                self.resynced(sid, seq, epoch, "resync_required");
                continue;
            }
            self.tick += 1;
            let tick = self.tick;
            match self.cursors.get_mut(sid) {
                // The replay came before this ack: the cursor is where it ended.
                Some(known) if known.epoch.is_none() || known.epoch.as_deref() == epoch => {
                    known.seq = known.seq.max(seq);
                    known.epoch = epoch.map(str::to_owned);
                }
                _ => self.insert_cursor(sid, Cursor { seq, epoch: epoch.map(str::to_owned), tick }),
            }
        }
    }

    /// The server could not replay `sid` from its cursor: the gap is logged, its cursor taken.
    fn resynced(&mut self, sid: &str, seq: u64, epoch: Option<&str>, reason: &str) {
        if self.cursors.get(sid).is_some_and(|c| c.seq == seq && c.epoch.as_deref() == epoch) {
            // Told already (the `resync_required` frame precedes its ack).
            return;
        }
        let had = self.cursors.get(sid).map(|c| c.seq);
        if let Some(h) = had {
            self.counts.missed += seq.saturating_sub(h);
        }
        tracing::warn!(bridge = %self.name, session = sid, reason, from = ?had, to = seq,
            "The Kimi web server could not replay a session; frames in between are missed.");
        self.tick += 1;
        let tick = self.tick;
        self.insert_cursor(sid, Cursor { seq, epoch: epoch.map(str::to_owned), tick });
    }

    /// Primary: the asks of `sid` against the server's own pending lists, once its replay is
    /// in: one pending but never seen (raised before the bridge attached, or lost in a gap)
    /// is raised; one tracked but no longer pending (settled unseen, or lost with a server
    /// restart) is closed (`dismissed`, or `answered` when this bridge delivered the answer).
    async fn reconcile_asks(&mut self, sid: &str) -> Result<(), Stop> {
        let Some(auth) = &self.auth else { return Ok(()) };
        let (rest, replies) = (auth.rest.clone(), auth.replies.clone());
        let mut live = Vec::new();
        for list in PENDING_LISTS {
            let url = format!("{}{}", self.base, list.path(&reply::segment(sid)));
            let items = match rest.get(&url).await {
                Ok(r) if r.status == 200 => match PendingList::items(&r.body) {
                    Some(items) => items,
                    None => return Ok(()),
                },
                // Unknown now: nothing is closed on a guess.
                _ => {
                    tracing::debug!(bridge = %self.name, session = sid, "No pending list to reconcile asks with.");
                    return Ok(());
                }
            };
            live.extend(items.into_iter().map(|i| (list, i)));
        }
        let ids: HashSet<String> = live.iter().filter_map(|(l, i)| l.id_of(i)).map(str::to_owned).collect();
        for vendor_id in replies.asks_of(sid) {
            if ids.contains(&vendor_id) {
                continue;
            }
            let Some(ask) = replies.take(&vendor_id) else { continue };
            let resolution = if ask.settling() { "answered" } else { "dismissed" };
            let drafts = replies.outcome(ask, resolution, &self.deps.control, &self.deps.pipeline).await;
            self.submit(drafts, now_ms()).await?;
        }
        for (list, item) in live {
            if list.id_of(&item).is_none_or(|id| replies.knows(id)) {
                continue;
            }
            let frame = list.frame_of(sid, item);
            let drafts = self.map(list.frame, &frame, sid).await;
            self.submit(drafts, now_ms()).await?;
        }
        Ok(())
    }

    /// Maps one durable envelope in the configured mode.
    async fn map(&mut self, ty: &str, v: &Value, session: &str) -> Vec<EventDraft> {
        let cx = self.deps.cx.clone();
        if self.mode == WsMode::Companion {
            return map_ws(WsMode::Companion, v, &cx);
        }
        let p = v.get("payload").unwrap_or(&Value::Null);
        let interaction = ty.starts_with("event.approval.") || ty.starts_with("event.question.");
        if !interaction && s(p, "agentId").is_some_and(|a| a != "main") {
            // A subagent's turns are numbered on their own: they are not the session's runs.
            return map_ws(WsMode::Companion, v, &cx);
        }
        match ty {
            "tool.call.started" => {
                let drafts = map_ws(WsMode::Primary, v, &cx);
                if let (Some(call), Some(d)) = (s(p, "toolCallId"), drafts.first()) {
                    let name = s(p, "name").unwrap_or("unknown").to_owned();
                    self.remember_call(session, call, name, d.run.clone());
                }
                drafts
            }
            "tool.result" => self.tool_result(v, p, session, &cx),
            "event.approval.requested" | "event.question.requested" => {
                if let (Some(id), Some(call)) = (s(p, "approval_id"), s(p, "tool_call_id")) {
                    self.approval_calls.insert(format!("{session}\u{0}{id}"), call.to_owned());
                }
                let mut drafts = map_ws(WsMode::Primary, v, &cx);
                if s(p, "agentId").is_some_and(|a| a != "main") {
                    // A subagent's ask: its turn is not one of the session's runs.
                    for d in &mut drafts {
                        d.run = None;
                    }
                }
                self.raise(&mut drafts, now_ms());
                drafts
            }
            "event.approval.resolved" | "event.question.answered" | "event.question.dismissed" => {
                self.settled(ty, v, p, session, &cx).await
            }
            _ => map_ws(WsMode::Primary, v, &cx),
        }
    }

    fn remember_call(&mut self, session: &str, call: &str, name: String, run: Option<String>) {
        self.calls.insert(format!("{session}\u{0}{call}"), (name, run));
    }

    /// `tool.result` paired with its call's `tool.call.started` (the design record: the
    /// receiver re-attaches the name); unpairable, it degrades to channel visibility.
    fn tool_result(&mut self, v: &Value, p: &Value, session: &str, cx: &MapContext) -> Vec<EventDraft> {
        let Some(call) = s(p, "toolCallId") else { return map_ws(WsMode::Companion, v, cx) };
        let key = format!("{session}\u{0}{call}");
        let Some((name, run)) = self.calls.take(&key) else { return map_ws(WsMode::Companion, v, cx) };
        let failed = p.get("isError").and_then(Value::as_bool) == Some(true);
        let mut d = if failed && self.denied.take(&key).is_some() {
            // The approval was rejected: the call was not run (the runtime enforces the
            // human's answer, as the hook mapping's PermissionResult "rejected" says).
            let mut d = common::Builder::new("tool.denied", cx).tool(&name, Some(call)).meta("by", "runtime").build();
            d.cause_key = Some(common::tool_key(call));
            d
        } else if failed {
            common::tool_failed(&name, Some(call), "tool_error", s(p, "output"), None, cx)
        } else {
            common::tool_completed(&name, Some(call), p.get("output"), None, cx)
        };
        d.session = Some(session.to_owned());
        d.run = run;
        vec![d]
    }

    /// Registers the asks among `drafts` before they are published: ids minted, the book
    /// opened, and (gated, approvals) the reply route attached. An ask already raised (a
    /// replay past the dedupe, e.g. after a new epoch) is not raised twice.
    fn raise(&mut self, drafts: &mut Vec<EventDraft>, now: u64) {
        let Some(replies) = self.auth.as_ref().map(|a| a.replies.clone()) else { return };
        drafts.retain(|d| {
            d.r#type != "attention.requested"
                || !d
                    .correlation_key
                    .as_deref()
                    .and_then(|k| k.strip_prefix("attention:"))
                    .is_some_and(|id| replies.knows(id))
        });
        for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
            let (Some(session), Some(vendor_id)) =
                (d.session.clone(), d.correlation_key.as_deref().and_then(|k| k.strip_prefix("attention:")))
            else {
                continue;
            };
            let vendor_id = vendor_id.to_owned();
            let answerable = self.gated && d.data.get("kind").and_then(Value::as_str) == Some("permission");
            if answerable {
                ROUTE.decorate(d);
            }
            let id = self.deps.pipeline.mint_id();
            d.id = Some(id.clone());
            let p =
                Pending::from_request(id, &self.agent, session.clone(), d.run.clone(), d.subject.clone(), &d.data, now);
            self.deps.book.open(p.clone());
            let base = answerable.then(|| self.base.clone());
            replies.raise(Ask::new(vendor_id, session, p, base, &ROUTE), &self.deps.control, &self.deps.book);
        }
    }

    /// An ask's outcome, about the request this observer raised (AEP-0002 §7.1: `subject` =
    /// the request's id): a command's answer (`via: "control"`), else the vendor's decision
    /// (`via: "oob"`) then `attention.resolved`; decision-less or `cancelled`: dismissed.
    async fn settled(&mut self, ty: &str, v: &Value, p: &Value, session: &str, cx: &MapContext) -> Vec<EventDraft> {
        let key = if ty == "event.approval.resolved" { "approval_id" } else { "question_id" };
        if ty == "event.approval.resolved"
            && let Some(call) = s(p, key).and_then(|id| self.approval_calls.take(&format!("{session}\u{0}{id}")))
            && s(p, "decision") == Some("rejected")
        {
            self.denied.insert(format!("{session}\u{0}{call}"), ());
        }
        let Some(replies) = self.auth.as_ref().map(|a| a.replies.clone()) else { return Vec::new() };
        let Some(ask) = (ROUTE.settled)(v).and_then(|id| replies.take(id)) else {
            // Not an ask this observer raised: channel visibility only.
            return map_ws(WsMode::Companion, v, cx);
        };
        let (control, pipeline) = (self.deps.control.clone(), self.deps.pipeline.clone());
        if ask.settling() {
            return replies.outcome(ask, "answered", &control, &pipeline).await;
        }
        let cancelled = s(p, "decision") == Some("cancelled");
        let answered = map_ws(WsMode::Primary, v, cx).into_iter().find(|d| d.r#type == "attention.answered");
        match answered {
            Some(mut answered) if !cancelled => {
                control.forget(&ask.pending.id);
                let id = pipeline.mint_id();
                answered.id = Some(id.clone());
                answered.subject = Some(ask.pending.id.clone());
                answered.cause = Some(ask.pending.id.clone());
                answered.cause_key = None;
                answered.run.clone_from(&ask.pending.run);
                let mut resolved = ask.pending.resolved(now_ms(), "answered");
                resolved.cause = Some(id);
                vec![answered, resolved]
            }
            _ => replies.outcome(ask, "dismissed", &control, &pipeline).await,
        }
    }

    /// Publishes drafts: claims their sessions (gated) and lets the book and the control
    /// loop see what was stamped.
    async fn submit(&mut self, mut drafts: Vec<EventDraft>, now: u64) -> Result<(), Stop> {
        drafts.retain(|d| d.session.is_some() || aep_schemas::event::is_agent_scoped(&d.r#type));
        if drafts.is_empty() {
            return Ok(());
        }
        let settled = self.deps.book.settle(&self.agent, &mut drafts, now);
        if let Some(a) = &self.auth {
            for id in &settled {
                self.deps.control.forget(id);
                a.replies.take_request(id);
            }
        }
        if self.gated {
            self.deps.control.claim(&self.agent, &drafts);
        }
        let stamped: Vec<Arc<Stamped>> = self
            .deps
            .pipeline
            .submit_drafts("kimi-ws", self.agent.clone(), drafts)
            .await
            .map_err(|_| Stop::Pipeline)?;
        self.deps.book.observe(&stamped, now);
        self.deps.control.observe(&stamped);
        Ok(())
    }
}

impl Link for Observer {
    type Output = ();

    async fn session(&mut self) -> Ended<()> {
        let before = self.counts.frames;
        let ended = self.connection().await;
        let c = self.counts;
        tracing::debug!(bridge = %self.name, frames = c.frames, replayed = c.replayed, volatile = c.volatile,
            unparsable = c.unparsable, oversized = c.oversized, missed = c.missed, "Kimi web bridge counts.");
        let Some(retry) = super::retry_after(ended, &self.name, "Kimi web") else { return Ended::Stop(()) };
        // A connection that delivered frames was up.
        Ended::Retry(retry.was_established(self.counts.frames > before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_url_follows_the_base_url_scheme() {
        assert_eq!(socket_url("http://127.0.0.1:58627"), "ws://127.0.0.1:58627/api/v1/ws");
        assert_eq!(socket_url("https://kimi.example/"), "wss://kimi.example/api/v1/ws");
        assert_eq!(socket_url("http://h:1/prefix/"), "ws://h:1/prefix/api/v1/ws");
    }
}
