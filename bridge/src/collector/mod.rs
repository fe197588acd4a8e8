//! The embedded AEP collector (AEP-0003): ingest over HTTP and WebSocket, attr-match
//! fan-out to SSE and WebSocket subscribers, bounded per-session replay, token auth,
//! and command routing to exactly one live claimant (AEP-0004 §4).
//!
//! Within the relay feature ceiling (`docs/components/relay.md`): nothing here stores
//! history (the JSONL sink does) or interprets payloads beyond the capture ceiling.

mod config;
mod http;
mod ws;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use aep_receivers::access::scope_sees;
use aep_receivers::access::{Access, Principal};
use aep_receivers::resend::HighWater;
use aep_receivers::tenancy::Tenancy;
use aep_schemas::filter::Filter;
use aep_schemas::validate::Violation;
use aep_schemas::{Capture, Severity};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};

pub use aep_schemas::received::{Parsed, Received, one_line};
pub use aep_schemas::replay::{Cursor, Paged, Position, ReplayBuffers};
pub use aep_schemas::subscription::{
    From, MAX_FILTER_BYTES, MAX_FILTER_VALUES, check_filter_size, parse_from, parse_sse_id, sse_id,
};
pub use config::CollectorConfig;
pub use http::{StreamQuery, router, sse_stream};

use crate::commands::Commands;
use crate::metrics::Metrics;
use crate::pipeline::{Stamped, Tap};

/// Sessions held in replay buffers; the least recently written is evicted past it.
const MAX_SESSIONS: usize = 4096;

/// Bytes of lines one replay page reads out of the buffers under the lock (a page of one
/// larger event is read whole, as a shared handle).
const REPLAY_PAGE: usize = 256 * 1024;

/// One delivery toward a subscriber.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// An event, already down-leveled to the subscription's ceiling.
    Event {
        /// Subscription id (WS) or empty (SSE).
        sub: Arc<str>,
        /// The event as delivered.
        event: Arc<Stamped>,
        /// Its SSE frame, shared by every delivery of the same `event`.
        frame: SharedFrame,
    },
    /// The buffer no longer covers a requested position (AEP-0003 §5).
    ReplayExhausted {
        /// Subscription id.
        sub: Arc<str>,
        /// The session.
        session: String,
        /// Earliest held position.
        earliest: Position,
    },
}

/// One delivered event's encoded SSE frame (AEP-0003 §3.3), built by the first SSE
/// subscriber that writes it and shared by every other subscriber of the same event.
#[derive(Debug, Clone, Default)]
pub struct SharedFrame(Arc<OnceLock<Bytes>>);

impl SharedFrame {
    /// The frame, encoded with `encode` on first use.
    pub fn get_or_init(&self, encode: impl FnOnce() -> Bytes) -> &Bytes {
        self.0.get_or_init(encode)
    }
}

/// The bound a consumer overran when it was cut (AEP-0003 §8.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// `collector.subscriber_queue`: events queued.
    Events,
    /// `collector.subscriber_bytes`: bytes of event lines queued.
    Bytes,
}

impl Bound {
    /// The `bound` label of `aep_bridge_subscribers_cut_total`.
    pub fn label(self) -> &'static str {
        match self {
            Bound::Events => "events",
            Bound::Bytes => "bytes",
        }
    }
}

/// One consumer's queue (an SSE stream's, a WebSocket connection's, shared by its
/// subscriptions): the bytes of event lines waiting in it, and whether the consumer was cut
/// for falling behind on `notice`+ events. A cut consumer is sent what it has queued, then
/// disconnected, so its consumer resumes exactly from what it last received (AEP-0003 §8.4).
#[derive(Debug, Default)]
pub struct Backlog {
    queued: AtomicUsize,
    /// 0 while connected, else 1 + the [`Bound`] it overran.
    cut: AtomicU8,
    notify: Notify,
}

impl Backlog {
    /// A fresh, empty backlog.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Notes that `d` left the queue (the consumer took it).
    pub fn taken(&self, d: &Delivery) {
        if let Delivery::Event { event, .. } = d {
            self.queued.fetch_sub(event.line.len(), Ordering::AcqRel);
        }
    }

    /// The bound this consumer overran, once it was cut.
    pub fn cut_by(&self) -> Option<Bound> {
        match self.cut.load(Ordering::Acquire) {
            0 => None,
            1 => Some(Bound::Events),
            _ => Some(Bound::Bytes),
        }
    }

    /// Cuts the consumer; `false` if it already was.
    fn cut(&self, bound: Bound) -> bool {
        let v = 1 + bound as u8;
        let first = self.cut.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if first {
            self.notify.notify_one();
        }
        first
    }

    /// Resolves once the consumer has been cut.
    pub async fn was_cut(&self) {
        while self.cut_by().is_none() {
            self.notify.notified().await;
        }
    }
}

/// A replay in progress, paged out of the shared buffers: each page is read under the lock
/// (at most [`REPLAY_PAGE`] bytes of lines, large ones as shared handles) and the next
/// resumes after the last event sent, so a consumer that stops reading holds one page,
/// never a copy of the buffer. Lines are parsed, filtered and down-leveled one at a time,
/// as they are sent.
pub struct Replay {
    sub: Arc<str>,
    filter: Filter,
    scope: Scope,
    ceiling: Option<Capture>,
    cursors: VecDeque<Cursor>,
    page: std::vec::IntoIter<Paged>,
}

impl Replay {
    fn new(sub: Arc<str>, filter: Filter, scope: Scope, ceiling: Option<Capture>, cursors: Vec<Cursor>) -> Self {
        Self { sub, filter, scope, ceiling, cursors: cursors.into(), page: Vec::new().into_iter() }
    }

    /// The next delivery owed, or `None` once the replay is over.
    pub fn next(&mut self, c: &Collector) -> Option<Delivery> {
        loop {
            let step = match self.page.next() {
                Some(step) => step,
                None => {
                    self.read_page(c)?;
                    continue;
                }
            };
            match step {
                Paged::Exhausted { session, earliest } => {
                    return Some(Delivery::ReplayExhausted { sub: self.sub.clone(), session, earliest });
                }
                Paged::Line(line) => {
                    let Some(ev) = aep_schemas::replay::parse(line) else { continue };
                    if self.filter.matches(&ev.event) && c.sees(&self.scope, &ev.event) {
                        let event = down(&Arc::new(ev), self.ceiling);
                        return Some(Delivery::Event { sub: self.sub.clone(), event, frame: SharedFrame::default() });
                    }
                }
            }
        }
    }

    /// Deliveries left in the page at hand, at most (a hint for sizing what is sent).
    pub fn pending(&self) -> usize {
        self.page.len()
    }

    /// Reads the next page under the lock; `None` when no cursor is left.
    fn read_page(&mut self, c: &Collector) -> Option<()> {
        if self.cursors.is_empty() {
            return None;
        }
        let st = c.state.lock().ok()?;
        let (mut out, mut budget) = (Vec::new(), REPLAY_PAGE);
        while budget > 0
            && let Some(cur) = self.cursors.front_mut()
        {
            if st.buffers.page(cur, &mut budget, &mut out) {
                self.cursors.pop_front();
            }
        }
        drop(st);
        self.page = out.into_iter();
        Some(())
    }
}

/// The one tenant a reader is limited to (its token's), or `None`: every tenant.
pub type Scope = Option<Arc<str>>;

/// A live subscription.
struct Subscriber {
    id: u64,
    sub: Arc<str>,
    filter: Filter,
    scope: Scope,
    ceiling: Option<Capture>,
    tx: mpsc::Sender<Delivery>,
    backlog: Arc<Backlog>,
}

/// A live emitter claim on a session: a WebSocket emitter that sent events of that session.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The connection.
    pub conn: u64,
    /// The claimed session.
    pub session: String,
    /// `hello.identity.agent`.
    pub agent: Option<String>,
    /// `hello.identity.instance`.
    pub instance: Option<String>,
    /// `hello.capabilities.control`, verbatim.
    pub control: Option<Value>,
    /// `hello.capabilities.emits`, verbatim.
    pub emits: Option<Value>,
    /// Where to send commands for this claim.
    pub tx: mpsc::Sender<Arc<Stamped>>,
}

/// Where a command goes (AEP-0004 §4).
#[derive(Debug)]
pub enum Route {
    /// Exactly one remote claimant.
    Remote(mpsc::Sender<Arc<Stamped>>),
    /// This process's own control loop (deliver with [`Collector::deliver_local`]).
    Local,
    /// Refused with an `error` frame code (`no-route`, `ambiguous`, `unsupported`).
    Refused(&'static str, String),
}

struct State {
    buffers: ReplayBuffers,
    subscribers: Vec<Subscriber>,
    claims: Vec<Claim>,
}

/// Who may use a collector, whose each session is, and which events are resends: the
/// parts a hub adds to one bridge's endpoint (see [`aep_receivers::access`],
/// [`aep_receivers::tenancy`], [`aep_receivers::resend`]).
pub struct Gate {
    /// The tokens accepted and whom each names.
    pub access: Arc<Access>,
    /// Whose each session is.
    pub tenancy: Arc<Tenancy>,
    /// The highest position taken per emitter session, to drop an edge's resends.
    pub resends: HighWater,
}

impl Gate {
    /// One bridge's endpoint: the operator's token alone (or none), no tenants, resends
    /// recognised within this run.
    pub fn token(token: Option<String>) -> Self {
        Self {
            access: Arc::new(Access::token(token)),
            tenancy: Arc::new(Tenancy::memory(None)),
            resends: HighWater::new(None),
        }
    }
}

/// The collector, shared by the HTTP handlers and the pipeline tap.
pub struct Collector {
    cfg: CollectorConfig,
    access: Arc<Access>,
    tenancy: Arc<Tenancy>,
    resends: HighWater,
    metrics: Arc<Metrics>,
    state: Mutex<State>,
    next_id: AtomicU64,
    /// This process's own control loop, for the sessions its hook adapters own.
    local: Option<Commands>,
    closing: tokio_util::sync::CancellationToken,
}

impl Collector {
    /// A collector with these settings. With a token in the gate's access list, every
    /// binding requires one and control is enabled for those that may answer; without, the
    /// endpoint is watch-only (control refused in-band). The gate's tenancy says whose each
    /// session is, for the tokens limited to one tenant. `local` sends commands to this
    /// process's own control loop (a claimant for the sessions it owns).
    pub fn new(cfg: CollectorConfig, gate: Gate, metrics: Arc<Metrics>, local: Option<Commands>) -> Arc<Self> {
        let Gate { access, tenancy, resends } = gate;
        Arc::new(Self {
            state: Mutex::new(State {
                buffers: ReplayBuffers::with_bytes(cfg.replay_buffer, MAX_SESSIONS, cfg.replay_bytes),
                subscribers: Vec::new(),
                claims: Vec::new(),
            }),
            cfg,
            access,
            tenancy,
            resends,
            metrics,
            next_id: AtomicU64::new(1),
            local,
            closing: tokio_util::sync::CancellationToken::new(),
        })
    }

    /// Tells every subscriber the endpoint is going away.
    pub fn close(&self) {
        self.closing.cancel();
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Most resume positions one `from` may name (`limit-exceeded` beyond, AEP-0003 §6.5):
    /// each costs a buffer scan, and no more sessions than this are ever held.
    pub fn max_from(&self) -> usize {
        MAX_SESSIONS
    }

    /// Whether some token may send commands (control enabled).
    pub fn control_enabled(&self) -> bool {
        self.access.control()
    }

    /// Whom a bearer token names: `None` when it names no one and one is required.
    pub fn principal(&self, presented: Option<&str>) -> Option<Principal> {
        self.access.principal(presented)
    }

    /// The tokens this endpoint accepts.
    pub fn access(&self) -> &Arc<Access> {
        &self.access
    }

    /// Whether a reader limited to `scope` may see `ev`: its session's tenant (or, without a
    /// session, its source's) is the reader's.
    pub fn sees(&self, scope: &Scope, ev: &aep_schemas::Event) -> bool {
        // The owner is looked up only for a limited reader (the operator's path stays free).
        scope.is_none()
            || scope_sees(scope.as_deref(), self.tenancy.tenant_of(ev.session.as_deref(), &ev.source).as_deref())
    }

    /// Whether a reader limited to `scope` may see `session`.
    pub fn sees_session(&self, scope: &Scope, session: &str) -> bool {
        scope.is_none() || scope_sees(scope.as_deref(), self.tenancy.tenant_of(Some(session), "").as_deref())
    }

    /// Whether a sequenced event from a WebSocket emitter is new: an edge resends what its
    /// hub had not confirmed when the link dropped, and a repeat is dropped here (counted)
    /// rather than written twice; backfill is kept ([`aep_receivers::resend`]).
    pub fn fresh(&self, ev: &aep_schemas::Event) -> bool {
        let (Some(session), Some(seq)) = (ev.session.as_deref(), ev.seq) else { return true };
        let fresh = self.resends.fresh(&ev.agent, &ev.source, session, (ev.epoch(), seq), &ev.id);
        if !fresh {
            self.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "resent")]);
        }
        fresh
    }

    /// Admits an event from `p` onto this endpoint: `p` may emit, and the event's session
    /// (or source) is its tenant's, or new and from now on its tenant's (AEP-0004 §4.2
    /// item 3: a policy refusal is `unauthorized`). The refusal's text names no owner.
    pub fn may_emit(&self, p: &Principal, ev: &aep_schemas::Event) -> Result<(), String> {
        if !p.emit {
            return Err(format!("{} may not emit events here", p.name));
        }
        match &p.tenant {
            None => Ok(()),
            Some(t) => self
                .tenancy
                .claim(ev.session.as_deref(), &ev.source, t)
                .map_err(|_| format!("{} may not write to this session: it belongs to another tenant", p.name)),
        }
    }

    /// The discovery document (AEP-0003 §3.4), capabilities stated truthfully.
    pub fn discovery(&self) -> Value {
        let accepts = if self.control_enabled() { self.local_accepts() } else { Vec::new() };
        json!({
            "aep": [aep_schemas::AEP_VERSION],
            "role": "collector",
            "endpoints": { "events": "/events", "stream": "/stream", "socket": "/socket" },
            "capabilities": self.capabilities(accepts),
        })
    }

    fn local_accepts(&self) -> Vec<String> {
        self.local.as_ref().map(Commands::accepts).unwrap_or_default()
    }

    fn capabilities(&self, accepts: Vec<String>) -> Value {
        json!({
            "filters": ["attr-match"],
            "replay": { "buffer": self.cfg.replay_buffer, "all": true },
            "capture": ["none", "metadata", "redacted", "full"],
            "control": { "accepts": accepts },
            "roster": {},
            "experimental": {}
        })
    }

    /// The replay a subscription starting at `from` is owed, filtered and down-leveled when
    /// it is read, each exhausted position's marker ahead of its session's events
    /// (AEP-0003 §5). Only the cursors are made here: events admitted from now on are not
    /// owed (they are live).
    fn replay_of(
        st: &State,
        sub: Arc<str>,
        filter: Filter,
        scope: Scope,
        ceiling: Option<Capture>,
        from: Option<From>,
    ) -> Replay {
        let cursors = match from {
            None => Vec::new(),
            // Replay-all: every held session from its earliest held position; no
            // replay-exhausted marker, since the ask names no position (AEP-0003 §5 rule 2),
            // unless events held now are evicted before the replay reaches them.
            Some(From::All) => st.buffers.replay_all(),
            Some(From::Positions(ps)) => {
                ps.iter().filter_map(|(session, pos)| st.buffers.replay_after(session, *pos)).collect()
            }
        };
        Replay::new(sub, filter, scope, ceiling, cursors)
    }

    /// The replay alone, for a consumer that asked for no live delivery (`live=0`).
    pub fn replay(&self, filter: Filter, scope: Scope, ceiling: Option<Capture>, from: Option<From>) -> Replay {
        match self.state.lock() {
            Ok(st) => Self::replay_of(&st, Arc::from(""), filter, scope, ceiling, from),
            Err(_) => Replay::new(Arc::from(""), filter, scope, ceiling, Vec::new()),
        }
    }

    /// Subscribes: registers a live subscriber and, under the same lock, begins the replay
    /// it is owed, so replay and live delivery neither overlap nor leave a gap. The caller
    /// delivers the replay before anything it receives on `tx`. `backlog` counts what waits
    /// in `tx` and is cut if the subscription falls behind (AEP-0003 §8.4).
    #[allow(clippy::too_many_arguments)] // one subscription's parts, each from its own request field
    pub fn subscribe(
        &self,
        sub: Arc<str>,
        filter: Filter,
        scope: Scope,
        ceiling: Option<Capture>,
        from: Option<From>,
        tx: mpsc::Sender<Delivery>,
        backlog: Arc<Backlog>,
    ) -> (u64, Replay) {
        let id = self.next_id();
        let Ok(mut st) = self.state.lock() else {
            return (id, Replay::new(sub, filter, scope, ceiling, Vec::new()));
        };
        let replay = Self::replay_of(&st, sub.clone(), filter.clone(), scope.clone(), ceiling, from);
        st.subscribers.push(Subscriber { id, sub, filter, scope, ceiling, tx, backlog });
        self.metrics.subscribers.fetch_add(1, Ordering::Relaxed);
        (id, replay)
    }

    /// Removes a subscriber.
    pub fn unsubscribe(&self, id: u64) {
        if let Ok(mut st) = self.state.lock() {
            let before = st.subscribers.len();
            st.subscribers.retain(|s| s.id != id);
            let removed = before - st.subscribers.len();
            self.metrics.subscribers.fetch_sub(removed as i64, Ordering::Relaxed);
        }
    }

    /// Records a session claim by a WebSocket emitter connection.
    pub fn claim(&self, c: Claim) {
        if let Ok(mut st) = self.state.lock()
            && !st.claims.iter().any(|x| x.conn == c.conn && x.session == c.session)
        {
            st.claims.push(c);
        }
    }

    /// Drops every claim of a connection.
    pub fn drop_claims(&self, conn: u64) {
        if let Ok(mut st) = self.state.lock() {
            st.claims.retain(|c| c.conn != conn);
        }
    }

    /// This endpoint's `hello.identity.instance`.
    fn instance() -> String {
        format!("aep-bridge/{}", std::process::id())
    }

    /// The roster snapshot (AEP-0003 §4.1): one entry per live claim, declarations verbatim.
    /// The sessions this process's own control loop owns are claims too (they route, so
    /// they are listed), declaring what this endpoint's `hello` declares for control.
    /// A reader limited to `scope` is listed its tenant's claims only.
    pub fn roster(&self, scope: &Scope) -> Vec<Value> {
        let mut entries = Vec::new();
        if let Some(l) = &self.local {
            for (session, agent) in l.claims() {
                if !self.sees_session(scope, &session) {
                    continue;
                }
                let accepts = if self.control_enabled() { l.accepts_for(&agent) } else { Vec::new() };
                entries.push(json!({
                    "session": session, "agent": agent, "instance": Self::instance(),
                    "control": { "accepts": accepts },
                }));
            }
        }
        let claims: Vec<Claim> = self.state.lock().map(|st| st.claims.clone()).unwrap_or_default();
        {
            for c in claims.iter().filter(|c| self.sees_session(scope, &c.session)) {
                let mut e = json!({ "session": c.session });
                for (k, v) in
                    [("agent", c.agent.clone().map(Value::String)), ("instance", c.instance.clone().map(Value::String))]
                {
                    if let Some(v) = v {
                        e[k] = v;
                    }
                }
                if let Some(ctl) = &c.control {
                    e["control"] = ctl.clone();
                }
                if let Some(em) = &c.emits {
                    e["emits"] = em.clone();
                }
                entries.push(e);
            }
        }
        entries
    }

    /// Routes a command to exactly one live claimant (AEP-0004 §4.2, §4.5).
    pub fn route(&self, cmd: &aep_schemas::Event) -> Route {
        let Some(session) = cmd.session.as_deref() else {
            return Route::Refused("no-route", "the command names no session".into());
        };
        let remote: Vec<Claim> = self
            .state
            .lock()
            .map(|st| st.claims.iter().filter(|c| c.session == session).cloned().collect())
            .unwrap_or_default();
        let local = self.local.as_ref().filter(|l| l.owns(session));
        let n = remote.len() + usize::from(local.is_some());
        if n == 0 {
            return Route::Refused("no-route", format!("no connected emitter owns session {session:?}"));
        }
        if n > 1 {
            return Route::Refused("ambiguous", format!("{n} live claimants for session {session:?}"));
        }
        if let Some(l) = local {
            // AEP-0004 §4.2: the declared accepts are authoritative.
            let agent = l.agent_of(session).unwrap_or_default();
            if !l.accepts_for(&agent).contains(&cmd.r#type) {
                return Route::Refused("unsupported", format!("the target does not accept {}", cmd.r#type));
            }
            return Route::Local;
        }
        let c = &remote[0];
        if let Some(accepts) = c.control.as_ref().and_then(|c| c.get("accepts")).and_then(Value::as_array)
            && !accepts.iter().any(|t| t.as_str() == Some(cmd.r#type.as_str()))
        {
            return Route::Refused("unsupported", format!("the target does not accept {}", cmd.r#type));
        }
        Route::Remote(c.tx.clone())
    }

    /// Hands a command [`Route::Local`] to this process's control loop.
    pub fn deliver_local(&self, cmd: aep_schemas::Event) -> Result<(), crate::commands::SendError> {
        match &self.local {
            Some(l) => l.send(cmd),
            None => Err(crate::commands::SendError::Closed),
        }
    }
}

/// The event as received, keeping the exact bytes it arrived as when they are one line, so
/// SSE, WebSocket, the JSONL log, and a forwarded command carry the emitter's own
/// serialization (AEP-0001 §4.2; AEP-0004 §4.4). A multi-line body (pretty-printed JSON)
/// is compacted from the parsed value, member order kept.
pub fn received(value: &Value, event: aep_schemas::Event, raw: &[u8]) -> Stamped {
    match one_line(raw) {
        Some(line) => with_line(event, line),
        None => {
            let mut line = serde_json::to_vec(value).unwrap_or_default();
            line.push(b'\n');
            Stamped::with_line(event, Bytes::from(line))
        }
    }
}

/// Validates `value` (received as `raw`) and keeps it as [`received`] does: the same
/// checks and the same first violation as `validate_value`, but a one-line event is moved
/// into the Event, never copied (the emit hot path).
pub fn validate_received(value: Value, raw: &[u8]) -> Result<Stamped, Violation> {
    match one_line(raw) {
        Some(line) => Ok(with_line(aep_schemas::validate::validate_owned(value)?, line)),
        None => {
            let event = aep_schemas::validate::validate_value(&value)?;
            Ok(received(&value, event, raw))
        }
    }
}

fn with_line(event: aep_schemas::Event, line: &[u8]) -> Stamped {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line);
    buf.push(b'\n');
    Stamped::with_line(event, Bytes::from(buf))
}

/// The event as a subscriber with `ceiling` sees it: the shared line when no down-level
/// is needed (byte-identical), else a down-leveled copy (AEP-0003 §6.4, AEP-0001 §8.2(e)).
fn down(ev: &Arc<Stamped>, ceiling: Option<Capture>) -> Arc<Stamped> {
    match ceiling {
        Some(c) if ev.event.capture() > c => Arc::new(Stamped::new(aep_schemas::downlevel::downlevel(&ev.event, c))),
        _ => ev.clone(),
    }
}

impl Tap for Collector {
    fn admit(&self, ev: &Arc<Stamped>) -> u64 {
        let Ok(mut st) = self.state.lock() else { return 0 };
        // AEP-0003 §5: buffer sequenced session events (admission dedupes on (source, id));
        // agent-scoped and seq-less foreign-emitter events are live-only.
        if ev.event.seq.is_some() && ev.event.session.is_some() && st.buffers.admit(ev) {
            self.metrics.collector_admitted.fetch_add(1, Ordering::Relaxed);
        }
        let sev = ev.event.severity();
        let mut dead = Vec::new();
        // Drops are counted here and recorded by the pipeline once its lock is released: a
        // stalled subscriber costs each event one capacity check, not a delivery built and
        // a metric update. Cuts are logged and counted after the lock too.
        let mut shed = 0u64;
        let mut cuts = Vec::new();
        // One SSE frame per event, shared by every subscriber that gets it unchanged.
        let mut shared: Option<SharedFrame> = None;
        let max_bytes = self.cfg.subscriber_bytes;
        for s in &st.subscribers {
            if s.backlog.cut_by().is_some() {
                // Another subscription of the same consumer was cut: it is going away.
                dead.push(s.id);
                continue;
            }
            if !s.filter.matches(&ev.event) || !self.sees(&s.scope, &ev.event) {
                continue;
            }
            if sev < Severity::Notice && s.tx.capacity() == 0 {
                shed += 1;
                continue;
            }
            let event = down(ev, s.ceiling);
            // AEP-0003 §8.4: past either bound, debug/info are dropped for this subscriber;
            // notice+ are delivered or the subscriber is cut, never dropped silently. An
            // empty queue takes any one event, so a large one is not refused outright.
            let cost = event.line.len();
            let queued = s.backlog.queued.fetch_add(cost, Ordering::AcqRel);
            let over = if queued > 0 && queued + cost > max_bytes {
                Some(Bound::Bytes)
            } else {
                let frame = if Arc::ptr_eq(&event, ev) {
                    shared.get_or_insert_with(SharedFrame::default).clone()
                } else {
                    SharedFrame::default()
                };
                match s.tx.try_send(Delivery::Event { sub: s.sub.clone(), event, frame }) {
                    Ok(()) => continue,
                    Err(mpsc::error::TrySendError::Full(_)) => Some(Bound::Events),
                    Err(mpsc::error::TrySendError::Closed(_)) => None,
                }
            };
            s.backlog.queued.fetch_sub(cost, Ordering::AcqRel);
            match over {
                Some(_) if sev < Severity::Notice => shed += 1,
                Some(bound) => {
                    shed += 1;
                    if s.backlog.cut(bound) {
                        cuts.push(bound);
                    }
                    dead.push(s.id);
                }
                None => dead.push(s.id),
            }
        }
        if !dead.is_empty() {
            let before = st.subscribers.len();
            st.subscribers.retain(|s| !dead.contains(&s.id));
            self.metrics.subscribers.fetch_sub((before - st.subscribers.len()) as i64, Ordering::Relaxed);
        }
        drop(st);
        for bound in cuts {
            let limit = match bound {
                Bound::Events => self.cfg.subscriber_queue,
                Bound::Bytes => self.cfg.subscriber_bytes,
            };
            tracing::warn!(
                bound = bound.label(),
                limit,
                "Subscriber cut: it fell behind on notice+ events; its consumer resumes from its last id."
            );
            self.metrics.subscribers_cut.inc(&[("bound", bound.label())]);
        }
        shed
    }
}

/// What every collector binding (HTTP, SSE, WebSocket) is served with.
#[derive(Clone)]
pub(crate) struct Ctx {
    pub(crate) collector: Arc<Collector>,
    pub(crate) pipeline: crate::pipeline::Pipeline,
}

/// Why a command was not delivered: an `error` frame's code and detail, connection-scoped
/// and never in session history (AEP-0004 §4.2, §8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {detail}")]
pub struct CommandRefused {
    /// The command's `id` (the frame's `cause`).
    pub cause: String,
    /// `no-route`, `ambiguous`, `unsupported` or `unavailable`.
    pub code: &'static str,
    /// What went wrong.
    pub detail: String,
}

impl CommandRefused {
    /// The `error` frame a WebSocket sender gets.
    pub fn frame(&self) -> Value {
        json!({"type": "error", "cause": self.cause, "code": self.code, "detail": self.detail})
    }
}

/// Routes a validated command from an authenticated sender to its session's one live
/// claimant (AEP-0004 §4.2, §4.5): kept in the history this endpoint serves (§4.4), then
/// handed to the remote claimant's connection or this process's control loop. The one path
/// every control binding takes (the `/socket` WebSocket, the web view's answers); the
/// caller has checked the binding is authenticated (§4.1).
pub async fn submit_command(
    collector: &Collector,
    pipeline: &crate::pipeline::Pipeline,
    stamped: Arc<Stamped>,
    sender: &Principal,
) -> Result<(), CommandRefused> {
    let cause = stamped.event.id.clone();
    let refused = |code: &'static str, detail: String| CommandRefused { cause: cause.clone(), code, detail };
    // AEP-0004 §4.2 item 3: who may command whom is this endpoint's policy, refused as
    // `unauthorized`: a token that may not answer, or a session of another tenant (told
    // apart from a session nobody holds only by a token that sees it).
    if !sender.answer {
        return Err(refused("unauthorized", format!("{} may not send commands", sender.name)));
    }
    if let Some(session) = stamped.event.session.as_deref()
        && !collector.sees_session(&sender.tenant, session)
    {
        return Err(refused("unauthorized", format!("{} may not command this session", sender.name)));
    }
    let route = collector.route(&stamped.event);
    if let Route::Refused(code, detail) = route {
        return Err(refused(code, detail));
    }
    let cmd = stamped.event.clone();
    let stamped = match pipeline.submit_stamped("collector", stamped).await {
        Ok(s) => s,
        Err(_) => return Err(refused("unavailable", "shutting down".into())),
    };
    match route {
        Route::Remote(tx) => tx
            .send(stamped)
            .await
            .map_err(|_| refused("no-route", "the claimant disconnected before the command could be delivered".into())),
        Route::Local => collector.deliver_local(cmd).map_err(|e| refused("unavailable", e.to_string())),
        Route::Refused(..) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64, severity: Severity, pad: usize) -> Arc<Stamped> {
        Arc::new(Stamped::new(aep_schemas::Event {
            aep: "0.1".into(),
            id: format!("e{seq}"),
            r#type: "progress.status".into(),
            time: "2026-01-01T00:00:00Z".into(),
            source: "aep://h/agent/a".into(),
            agent: "a".into(),
            session: Some("s".into()),
            seq: Some(seq),
            severity: Some(severity),
            data: Some(json!({ "phase": "x".repeat(pad) })),
            ..Default::default()
        }))
    }

    /// A stalled consumer's queue is bounded in bytes, not only in events: past the bound
    /// debug/info are dropped for it, a notice+ event cuts it (once, counted by bound), and
    /// what it takes off the queue frees room again.
    #[test]
    fn the_byte_bound_drops_info_then_cuts_on_notice() {
        let cfg = CollectorConfig { subscriber_bytes: 10_000, ..CollectorConfig::default() };
        let metrics = Arc::new(Metrics::new());
        let c = Collector::new(cfg, Gate::token(None), metrics.clone(), None);
        let (tx, mut rx) = mpsc::channel(100);
        let backlog = Backlog::new();
        c.subscribe(Arc::from(""), Filter::all(), None, None, None, tx, backlog.clone());
        // Three lines of ~4 KB: the third is over 10 KB queued and, being info, dropped.
        let shed: Vec<u64> = (0..3).map(|i| c.admit(&event(i, Severity::Info, 4_000))).collect();
        assert_eq!(shed, [0, 0, 1]);
        // The consumer takes one: room for one more.
        let d = rx.try_recv().unwrap();
        backlog.taken(&d);
        assert_eq!(c.admit(&event(3, Severity::Info, 4_000)), 0);
        assert_eq!(backlog.cut_by(), None);
        // A notice event past the bound cuts it; it is dropped from the collector.
        assert_eq!(c.admit(&event(4, Severity::Notice, 4_000)), 1);
        assert_eq!(backlog.cut_by(), Some(Bound::Bytes));
        assert_eq!(metrics.subscribers_cut.get(&[("bound", "bytes")]), 1);
        assert_eq!(c.admit(&event(5, Severity::Notice, 4_000)), 0, "no longer subscribed");
        let queued: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|d| match d {
                Delivery::Event { event, .. } => event.event.seq,
                Delivery::ReplayExhausted { .. } => None,
            })
            .collect();
        assert_eq!(queued, [1, 3], "what it had queued is still delivered before it ends");
        // One event larger than the bound still reaches an empty queue.
        let (tx, _rx) = mpsc::channel(100);
        c.subscribe(Arc::from(""), Filter::all(), None, None, None, tx, Backlog::new());
        assert_eq!(c.admit(&event(6, Severity::Notice, 20_000)), 0);
    }
}
