//! The OpenCode / Kilo Code `serve` event stream observer (the OpenCode adapter design
//! record's "SSE bridge" section, AEP-0002 Annex A.7/A.8 SSE channel).
//!
//! One task per `[bridges.<name>]`: `GET {url}/event`, frames parsed by [`super::sse`]
//! (bounded), each bus event (`{id, type, properties}`) mapped by the pure mode policy
//! (`aep_adapters::vendors::opencode::sse::map_sse`) and submitted to the pipeline under
//! the bridge's agent identity. Sessionless machinery (`server.connected`, `plugin.added`,
//! ...) is not a valid session-scoped event and is skipped. Runs are synthesized per session
//! in primary mode; companion owns none. Primary maps the stream's tool parts
//! (`message.part.updated`, type `tool`) to `tool.requested` / `tool.completed` /
//! `tool.failed` by call id, the mapping the plugin route shares. A companion adds nothing
//! for a session the plugin delivers ([`super::claims`]): each bus event naming a session is
//! held a short grace and published only when no plugin call named that session by then.
//!
//! Reconnect and resume: after an error or the end of the stream the transport's reconnect
//! supervisor reconnects with jittered exponential backoff (reset by a connection that
//! delivered frames and stayed up, raised to the server's `retry:` advice), sending
//! `Last-Event-ID` when the server numbers its frames (OpenCode 1.18.33 does not: it
//! replays nothing, so nothing can double). Every bus event carries its own `id`; the last
//! 4096 are remembered and a replayed one is dropped. In primary mode the server's own
//! pending list (`GET {url}/permission`) is read at every connect: an ask raised while
//! disconnected is raised here, one settled meanwhile is closed (`attention.resolved`,
//! `dismissed`: how it was settled was not seen).
//!
//! The permission reply route (the design record's gate, primary mode only): the ask's
//! `attention.requested` carries the server's reply enum as options (`once`, `always`,
//! `reject`) and `respond_via: ["control"]`, and is registered with the control loop as a
//! reply route ([`super::reply`]). A `control.attention.respond` is delivered as
//! `POST {url}/session/{session}/permissions/{id}` `{"response": option}`; the REST answer is
//! the ack (2xx `control.accepted`; another status `refused`; unreachable `busy`; no answer
//! within `reply_guard_ms` `accepted`: the write may still land). The outcome has one
//! source, the vendor's `permission.replied` broadcast: `attention.answered` (`via:
//! "control"`, cause = the command) then `attention.resolved` (cause = the answered event);
//! without a command, `attention.resolved` alone. Free text cannot ride OpenCode's route
//! (its body is `{response}` only) and is refused `invalid`; Kilo Code's takes it as the
//! rejection `message`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aep_adapters::vendors::opencode::sse::{self as bus, SseMode, map_sse};
use aep_adapters::vendors::opencode::{Profile, bus_session};
use aep_adapters::{EventDraft, MapContext, SessionState};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::reply::{Ask, Replies};
use super::sse::{Frame, Parser};
use super::{BridgeConfig, BridgeMode, Stop};
use crate::attention::{AttentionBook, Pending};
use crate::control::ControlLoop;
use crate::pipeline::{Pipeline, Stamped};
use crate::time::now_ms;
use crate::transport::reconnect::{Ended, Link, Policy, supervise};
use crate::transport::{HttpClient, HttpOptions};

/// The longest SSE line accepted (a frame's data may span several lines up to the frame cap).
const MAX_LINE: usize = 1 << 20;
/// Bus event ids remembered for dedupe.
const SEEN: usize = 4096;
/// Sessions whose run state is kept (the least recently seen is dropped beyond).
const MAX_SESSIONS: usize = 4096;
/// How long a companion holds a bus event of a session no plugin call has named yet: the
/// plugin posts the same event within its own hook timeout (1.5 s by default).
const COMPANION_GRACE: Duration = Duration::from_secs(3);
/// Bus events a companion holds at most (the oldest is decided early beyond).
const MAX_HELD: usize = 4096;

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
    /// The sessions the hook receiver's plugin calls delivered (a companion adds nothing for them).
    pub hook_sessions: Arc<super::claims::HookSessions>,
    /// The bridge's data folder, where an observer keeps what a restart resumes from (the
    /// OpenHands conversations' cursors); `None` keeps nothing.
    pub data_dir: Option<std::path::PathBuf>,
    /// The connection bounds of a listening observer (the AG-UI proxy), shared with the
    /// bridge's other listeners, and who hears of a connection refused over them.
    pub listen: (aep_receivers::listener::Limits, aep_receivers::listener::OnRefused),
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
    /// Companion events dropped because the plugin delivered their session.
    plugin: u64,
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
    replies: Arc<Replies>,
    /// The server's reply route (the vendor's spec): its vocabulary, body and settle.
    route: &'static aep_adapters::spec::ReplyRoute,
    states: HashMap<String, (u64, SessionState)>,
    tick: u64,
    seen: Seen,
    reconnect: Policy,
    max_frame: usize,
    /// Longest wait for the stream's answer head.
    timeout: Duration,
    /// Longest silence on an open stream before it is taken for dead.
    idle: Option<Duration>,
    counts: Counts,
    /// Companion mode: bus events held until their grace ends, with their session.
    held: VecDeque<(Instant, String, Value)>,
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
        // Reached through `bridges::spawn` for the SSE kinds only.
        let (Some(profile), Some(route)) = (kind.profile(), kind.reply_route()) else {
            return Err(StartError::Incomplete(name.into()));
        };
        let guard = Duration::from_millis(cfg.reply_guard_ms);
        let replies = Replies::new(rest.clone(), guard);
        let mode = match cfg.mode {
            BridgeMode::Companion => SseMode::Companion,
            BridgeMode::Primary => SseMode::Primary,
        };
        if mode == SseMode::Companion {
            deps.hook_sessions.watch(&cfg.agent());
        }
        let gated = cfg.answerable(deps.can_answer);
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
            replies,
            route,
            states: HashMap::new(),
            tick: 0,
            seen: Seen::default(),
            reconnect: cfg.reconnect_policy(),
            max_frame: cfg.max_frame_bytes,
            timeout: Duration::from_millis(cfg.timeout_ms),
            idle: (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms)),
            counts: Counts::default(),
            held: VecDeque::new(),
        })
    }

    async fn run(self, shutdown: CancellationToken) {
        tracing::info!(bridge = %self.name, url = %self.base, agent = %self.agent, mode = ?self.mode, control = self.gated, "SSE bridge starting.");
        let (name, policy) = (format!("bridges.{}", self.name), self.reconnect.clone());
        let parser = Parser::new(MAX_LINE.min(self.max_frame.max(1024)), self.max_frame);
        supervise(&name, &policy, Some(&shutdown), &mut SseLink { observer: self, parser }).await;
    }

    /// One connection: open, resync, read until the stream ends.
    async fn connection(&mut self, parser: &mut Parser) -> Result<(), Stop> {
        let url = format!("{}{}", self.base, bus::STREAM_PATH);
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
        if self.mode == SseMode::Primary {
            // Asks raised or settled while away (read-only ones need their terminal too).
            self.resync().await?;
        }
        let mut frames = Vec::new();
        let mut warned = false;
        loop {
            // A companion's held events are decided when their grace ends, frames or not.
            let held_due = self.held.front().map(|(due, _, _)| *due);
            let next = stream.chunk();
            let read = match (self.idle, held_due) {
                (idle, Some(due)) => {
                    let silent_at = idle.map(|i| Instant::now() + i);
                    let wake = silent_at.map_or(due, |s| s.min(due));
                    match tokio::time::timeout_at(wake.into(), next).await {
                        Ok(r) => r,
                        Err(_) if silent_at.is_some_and(|s| s <= due) => {
                            return Err(Stop::Retry(format!(
                                "GET {url}: silent for {:?}",
                                self.idle.unwrap_or_default()
                            )));
                        }
                        Err(_) => {
                            self.companion(None).await?;
                            continue;
                        }
                    }
                }
                (Some(idle), None) => match tokio::time::timeout(idle, next).await {
                    Ok(r) => r,
                    // The server's heartbeat (`server.heartbeat`, every 10 s at 1.18.33) stopped.
                    Err(_) => return Err(Stop::Retry(format!("GET {url}: silent for {idle:?}"))),
                },
                (None, None) => next.await,
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
        if self.mode == SseMode::Companion {
            return self.companion(Some(ev)).await;
        }
        self.event(&ev).await
    }

    /// Companion mode: the plugin (when one runs in this server) forwards every bus event that
    /// names a session, so such an event is held for [`COMPANION_GRACE`] and published only
    /// when no plugin call delivered its session by then; sessionless machinery maps to no
    /// event either way. `None` only decides the held events whose grace ended.
    async fn companion(&mut self, ev: Option<Value>) -> Result<(), Stop> {
        let now = Instant::now();
        if let Some(ev) = ev {
            match bus_session(&ev).map(str::to_owned) {
                Some(session) if self.deps.hook_sessions.claimed(&self.agent, &session) => self.counts.plugin += 1,
                Some(session) => self.held.push_back((now + COMPANION_GRACE, session, ev)),
                None => self.event(&ev).await?,
            }
        }
        while let Some((due, session, _)) = self.held.front() {
            if *due > now && self.held.len() <= MAX_HELD {
                break;
            }
            let claimed = self.deps.hook_sessions.claimed(&self.agent, session);
            let Some((_, _, ev)) = self.held.pop_front() else { break };
            if claimed {
                self.counts.plugin += 1;
            } else {
                self.event(&ev).await?;
            }
        }
        Ok(())
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
            && let Some(id) = (self.route.settled)(ev)
        {
            return self.settled(id).await;
        }
        let (cx, profile, mode) = (self.deps.cx.clone(), self.profile, self.mode);
        let state = self.state(session.as_deref().unwrap_or(""));
        let mapped = if mode == SseMode::Primary && ty == bus::TODO_SNAPSHOT {
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
        if ty == bus::SESSION_GONE
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
            if self.replies.knows(vendor_id) {
                continue;
            }
            let vendor_id = vendor_id.to_owned();
            let answerable = self.gated && d.data.get("kind").and_then(Value::as_str) == Some("permission");
            if answerable {
                // The design record's gated-on decoration: the vendor's own reply vocabulary.
                self.route.decorate(d);
            }
            let id = self.deps.pipeline.mint_id();
            d.id = Some(id.clone());
            let p =
                Pending::from_request(id, &self.agent, session.clone(), d.run.clone(), d.subject.clone(), &d.data, now);
            self.deps.book.open(p.clone());
            let base = answerable.then(|| self.base.clone());
            self.replies.raise(Ask::new(vendor_id, session, p, base, self.route), &self.deps.control, &self.deps.book);
        }
    }

    /// The vendor settled ask `vendor_id` (`permission.replied` / `question.replied`): the
    /// outcome, from this broadcast only. An ask this stream never raised is not ours to close.
    async fn settled(&mut self, vendor_id: &str) -> Result<(), Stop> {
        let Some(ask) = self.replies.take(vendor_id) else {
            tracing::debug!(bridge = %self.name, "A reply to an ask this stream did not raise.");
            return Ok(());
        };
        let drafts = self.replies.outcome(ask, "answered", &self.deps.control, &self.deps.pipeline).await;
        self.submit(drafts, now_ms()).await
    }

    /// Re-reads the server's pending permissions (at connect): asks raised while away are
    /// raised, asks gone meanwhile are closed.
    async fn resync(&mut self) -> Result<(), Stop> {
        let url = format!("{}{}", self.base, bus::PENDING_PATH);
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
        let live: HashSet<&str> = list.iter().filter_map(bus::pending_id).collect();
        let gone: Vec<String> = self.replies.permissions().into_iter().filter(|v| !live.contains(v.as_str())).collect();
        for vendor_id in gone {
            let Some(ask) = self.replies.take(&vendor_id) else { continue };
            // Settled while away: how was not seen, unless this bridge delivered the answer.
            let resolution = if ask.settling() { "answered" } else { "dismissed" };
            let drafts = self.replies.outcome(ask, resolution, &self.deps.control, &self.deps.pipeline).await;
            self.submit(drafts, now_ms()).await?;
        }
        for ask in list.into_iter().filter_map(bus::pending_ask) {
            self.event(&ask).await?;
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
            self.replies.take_request(id);
        }
        if self.gated {
            self.deps.control.claim(&self.agent, &drafts);
        }
        let stamped: Vec<Arc<Stamped>> =
            self.deps.pipeline.submit_drafts("sse", self.agent.clone(), drafts).await.map_err(|_| Stop::Pipeline)?;
        self.deps.book.observe(&stamped, now);
        self.deps.control.observe(&stamped);
        Ok(())
    }
}

/// The observer with its stream parser (whose last event id resumes the next connection),
/// as the reconnect supervisor runs it.
struct SseLink {
    observer: Observer,
    parser: Parser,
}

impl Link for SseLink {
    type Output = ();

    async fn session(&mut self) -> Ended<()> {
        let (o, parser) = (&mut self.observer, &mut self.parser);
        let before = o.counts.frames;
        let ended = o.connection(parser).await;
        let c = o.counts;
        tracing::debug!(bridge = %o.name, frames = c.frames, replayed = c.replayed, unparsable = c.unparsable,
            sessionless = c.sessionless, plugin = c.plugin, dropped = parser.dropped(), "SSE bridge counts.");
        parser.reset();
        let Some(retry) = super::retry_after(ended, &o.name, "SSE") else { return Ended::Stop(()) };
        // A connection that delivered frames was up; the server's `retry:` advice holds.
        Ended::Retry(
            retry.was_established(o.counts.frames > before).wait_at_least(parser.retry_ms().map(Duration::from_millis)),
        )
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
