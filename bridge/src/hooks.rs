//! The bridge's side of the hook receiver: vendor adapter lookup, per-session mapping
//! state, and admission of the mapped drafts into the pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aep_adapters::{HookAdapter, HookCall, MapContext, SessionState};
use aep_receivers::hooks::{HookError, HookHandler, HookReply};
use serde::Deserialize;
use serde_json::Value;

use crate::attention::{AttentionBook, Pending};
use crate::control::ControlLoop;
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;

/// `[hooks]`: the hook receiver's session memory.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HooksConfig {
    /// A session silent this long, whose vendor never ends it itself (Qwen Code's headless
    /// mode), is ended as `session.ended` with reason `timeout`; seconds, 0 never.
    pub idle_session_secs: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self { idle_session_secs: 1800 }
    }
}

/// Most `(vendor, session)` mapping states kept; beyond it the least recently used is dropped
/// (a dropped state only loses synthesized-run memory and, for a session its vendor never
/// ends, the idle close; never an event).
const MAX_SESSIONS: usize = 10_000;

/// The clock the handler reads (Unix milliseconds); tests substitute a fake one.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Maps hook calls and admits the drafts.
pub struct BridgeHooks {
    pipeline: Pipeline,
    adapters: HashMap<&'static str, Box<dyn HookAdapter>>,
    states: Mutex<SessionStates>,
    cx: MapContext,
    token: Option<String>,
    metrics: Arc<Metrics>,
    attention: Arc<AttentionBook>,
    control: Option<Arc<ControlLoop>>,
    hold: bool,
    gates: std::collections::BTreeMap<String, Vec<String>>,
    /// How long a session may be silent before its adapter may end it (`close_idle`).
    idle: Option<std::time::Duration>,
    clock: Clock,
    /// Nonces of MAC-authenticated calls (each taken once).
    nonces: crate::auth::Nonces,
    /// `aep.hook.duration`.
    timer: crate::genai::HookTimer,
    /// The reply route of the plugins' bus asks (OpenCode, Kilo Code).
    replies: Option<Arc<crate::bridges::reply::Replies>>,
    /// The sessions each vendor's hook calls delivered (an SSE companion adds nothing for them).
    sessions: Arc<crate::bridges::claims::HookSessions>,
    /// Calls dropped to keep their session's order, and what depends on them.
    late: crate::late::LateCalls,
    /// What `doctor`'s probe learns of this bridge ([`HookHandler::about`]).
    about: Value,
}

/// One `(vendor, session)` mapping state and when it was last used.
#[derive(Default)]
struct Slot {
    state: SessionState,
    /// The LRU tick of the last call.
    tick: u64,
    /// When the last call came (the handler's clock, Unix ms).
    last_ms: u64,
    /// The event time of the last call's drafts (the vendor's timestamp when it gave one).
    last_time: Option<String>,
}

#[derive(Default)]
struct SessionStates {
    map: HashMap<(String, String), Slot>,
    /// Per vendor session: the AEP session generation and whether it has ended.
    lifetimes: HashMap<(String, String), Lifetime>,
    tick: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Lifetime {
    generation: u32,
    ended: bool,
}

/// The AEP session name of generation `g` of a vendor session: the vendor id itself, then
/// `{id}.{g}` for continuations.
fn generation_name(id: &str, g: u32) -> String {
    if g <= 1 { id.to_owned() } else { format!("{id}.{g}") }
}

/// Applies session lifetimes to a batch. A vendor that resumes a session after it ended
/// (Claude Code `--resume` reuses the session id) would otherwise emit a second
/// `session.ended` for one AEP session (AEP-0002 §2 convention 5); the continuation
/// becomes a new AEP session `{id}.{n}` whose `session.started` names the previous one as
/// `parent` (lineage), so an observer still sees one conversation. A call that does not
/// `resume` (a late completion, e.g. Codex `notify` after `SessionEnd`) stays on the ended
/// session: Events after a terminal are legal there (AEP-0002 §2 #5).
fn apply_lifetime(life: &mut Lifetime, drafts: &mut [aep_adapters::EventDraft], resume: bool) {
    if life.generation == 0 {
        life.generation = 1;
    }
    if life.ended && resume && !drafts.is_empty() {
        life.generation += 1;
        life.ended = false;
    }
    if life.generation > 1 {
        for d in drafts.iter_mut() {
            if let Some(s) = &d.session {
                let prev = generation_name(s, life.generation - 1);
                let name = generation_name(s, life.generation);
                if d.r#type == "session.started" && !d.data.contains_key("parent") {
                    d.data.insert("parent".into(), serde_json::json!({ "session": prev }));
                }
                d.session = Some(name);
            }
        }
    }
    if drafts.iter().any(|d| d.r#type == "session.ended") {
        life.ended = true;
    }
}

impl BridgeHooks {
    /// A handler over these adapters. With `token` set, hook calls must carry it as a bearer token.
    pub fn new(pipeline: Pipeline, adapters: Vec<Box<dyn HookAdapter>>, cx: MapContext, token: Option<String>) -> Self {
        let metrics = pipeline.metrics().clone();
        Self {
            pipeline,
            adapters: adapters.into_iter().map(|a| (a.vendor(), a)).collect(),
            states: Mutex::new(SessionStates::default()),
            cx,
            token,
            attention: Arc::new(AttentionBook::default()),
            control: None,
            hold: false,
            gates: Default::default(),
            idle: None,
            clock: Arc::new(crate::time::now_ms),
            nonces: crate::auth::Nonces::default(),
            timer: crate::genai::HookTimer::new(&metrics.meter("aep-bridge")),
            metrics,
            replies: None,
            sessions: Arc::default(),
            late: Default::default(),
            about: Value::Null,
        }
    }

    /// What `aep-bridge doctor`'s authenticated probe is told about this bridge (its data
    /// dir, so doctor checks where this bridge writes rather than its own default).
    pub fn with_about(mut self, about: Value) -> Self {
        self.about = about;
        self
    }

    /// The sessions the hook calls delivered, per vendor: shared with the SSE observers so a
    /// companion beside a plugin adds nothing twice.
    pub fn hook_sessions(&self) -> &Arc<crate::bridges::claims::HookSessions> {
        &self.sessions
    }

    /// Answers the plugins' bus asks over their server's reply route (only while moments
    /// are held: see [`Self::with_control`]).
    pub fn with_reply_routes(mut self, replies: Arc<crate::bridges::reply::Replies>) -> Self {
        self.replies = Some(replies);
        self
    }

    /// Lets adapters end sessions silent for `idle` ([`BridgeHooks::close_idle`]); `None`
    /// (or zero) never does.
    pub fn with_idle_close(mut self, idle: Option<std::time::Duration>) -> Self {
        self.idle = idle.filter(|d| !d.is_zero());
        self
    }

    /// Replaces the clock (tests).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The idle window, when sessions may be closed for silence.
    pub fn idle_window(&self) -> Option<std::time::Duration> {
        self.idle
    }

    /// What every admitted batch goes through, from a hook call or an idle close: the
    /// attention book and the control loop see it, and the requests it settled are
    /// dismissed. Returns whether moments are held (a held request may be waited on).
    fn admitted(&self, stamped: &[Arc<crate::pipeline::Stamped>], settled: &[String], now: u64) -> bool {
        self.attention.observe(stamped, now);
        let Some(control) = &self.control else { return false };
        control.observe(stamped);
        if !self.hold {
            return false;
        }
        control.dismissed(settled);
        true
    }

    /// Ends the sessions silent for the idle window whose adapter says their vendor never
    /// will (Qwen Code's headless sessions: `session.ended`, reason `timeout`), each once,
    /// stamped at the last moment the session was heard from. Their mapping state is
    /// dropped, so a later call is a first sight: a continuation (`{id}.2`, lineage to the
    /// ended one). Returns how many sessions were ended.
    pub async fn close_idle(&self) -> usize {
        let Some(idle) = self.idle else { return 0 };
        let now = (self.clock)();
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        let batches: Vec<(&'static str, Vec<aep_adapters::EventDraft>)> = {
            let Ok(mut states) = self.states.lock() else { return 0 };
            let due: Vec<_> = states
                .map
                .iter()
                .filter(|(_, slot)| now.saturating_sub(slot.last_ms) >= idle_ms)
                .map(|(k, _)| k.clone())
                .collect();
            let mut out = Vec::new();
            for key in due {
                let Some(adapter) = self.adapters.get(key.0.as_str()) else { continue };
                let Some(slot) = states.map.get_mut(&key) else { continue };
                let mut drafts = adapter.close_idle(&key.1, &mut slot.state, &self.cx);
                if drafts.is_empty() {
                    continue;
                }
                let time = slot.last_time.clone().unwrap_or_else(|| aep_schemas::time::format_rfc3339_ms(slot.last_ms));
                for d in &mut drafts {
                    d.time.get_or_insert_with(|| time.clone());
                }
                states.map.remove(&key);
                apply_lifetime(states.lifetimes.entry(key).or_default(), &mut drafts, true);
                out.push((adapter.vendor(), drafts));
            }
            out
        };
        let closed = batches.len();
        for (vendor, mut drafts) in batches {
            let settled = self.attention.settle(vendor, &mut drafts, now);
            match self.pipeline.submit_drafts("hook", vendor, drafts).await {
                Ok(stamped) => {
                    self.admitted(&stamped, &settled, now);
                    tracing::info!(vendor, "Idle session ended.");
                }
                Err(e) => tracing::warn!(vendor, error = %e, "Idle session end not admitted."),
            }
        }
        closed
    }

    /// Enables the opt-in permission gates: vendor -> tool names (empty = every tool).
    pub fn with_gates(mut self, gates: std::collections::BTreeMap<String, Vec<String>>) -> Self {
        self.gates = gates;
        self
    }

    /// Attaches the control loop: held moments wait for an answer.
    ///
    /// With `hold` false (nothing can deliver an answer: no token, no relay) the loop only
    /// learns which sessions this process owns (they are roster entries that declare no
    /// accepted commands), and moments are never held.
    pub fn with_control(mut self, attention: Arc<AttentionBook>, control: Arc<ControlLoop>, hold: bool) -> Self {
        self.attention = attention;
        self.control = Some(control);
        self.hold = hold;
        self
    }

    /// The open attention requests of the sessions this handler maps.
    pub fn attention(&self) -> &Arc<AttentionBook> {
        &self.attention
    }

    /// The vendors this handler serves.
    pub fn vendors(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.adapters.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn map(
        &self,
        adapter: &dyn HookAdapter,
        call: &HookCall<'_>,
        hook: &str,
        now_ms: u64,
    ) -> Result<Vec<aep_adapters::EventDraft>, HookError> {
        let session = adapter.session_id(call).unwrap_or_default();
        let key = (adapter.vendor().to_owned(), session);
        let mut states = self.states.lock().map_err(|_| HookError::Unavailable("state lock poisoned".into()))?;
        states.tick += 1;
        let tick = states.tick;
        if !states.map.contains_key(&key)
            && states.map.len() >= MAX_SESSIONS
            && let Some(oldest) = states.map.iter().min_by_key(|(_, slot)| slot.tick).map(|(k, _)| k.clone())
        {
            states.map.remove(&oldest);
        }
        if !states.lifetimes.contains_key(&key) && states.lifetimes.len() >= MAX_SESSIONS * 4 {
            states.lifetimes.clear();
        }
        let slot = states.map.entry(key.clone()).or_default();
        slot.tick = tick;
        slot.last_ms = now_ms;
        let mut drafts =
            adapter.map(call, &mut slot.state, &self.cx).map_err(|e| HookError::Unmappable(e.to_string()))?;
        // What the adapter was not written for: counted, and recorded once per session.
        let drift = aep_adapters::drift::observe(adapter, hook, call.payload, &mut slot.state, &self.cx);
        self.metrics.drift.count(adapter.vendor(), drift.version.as_deref(), &drift.drift);
        if let Some(record) = drift.draft {
            aep_adapters::drift::place(&mut drafts, record);
        }
        if let Some(t) = drafts.iter().rev().find_map(|d| d.time.clone()) {
            slot.last_time = Some(t);
        } else if !drafts.is_empty() {
            slot.last_time = None;
        }
        let life = states.lifetimes.entry(key).or_default();
        apply_lifetime(life, &mut drafts, adapter.resumes_session(hook));
        Ok(drafts)
    }
}

/// Longest a hook answer waits for the log writer (below the shim's 3 s short budget).
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a held reply's budget adds to the attention window: the timeout's or the answer's
/// events written (at most [`ACK_WAIT`]), and a margin.
const HOLD_MARGIN: std::time::Duration = std::time::Duration::from_secs(3);

impl HookHandler for BridgeHooks {
    fn about(&self) -> Value {
        self.about.clone()
    }

    fn authorized(&self, token: Option<&str>) -> bool {
        crate::auth::bearer_ok(self.token.as_deref(), token)
    }

    fn authorized_mac(&self, nonce: &str, mac: &str, body: &[u8]) -> bool {
        match &self.token {
            None => true,
            Some(t) => {
                let want = aep_schemas::digest::request_mac(t, nonce, body);
                // The MAC first, so forged calls cannot fill the nonce memory.
                crate::auth::constant_time_eq(want.as_bytes(), mac.as_bytes())
                    && self.nonces.fresh(nonce, (self.clock)())
            }
        }
    }

    fn reply_proof(&self, nonce: &str, body: &[u8]) -> Option<String> {
        self.token.as_deref().map(|t| aep_schemas::digest::reply_proof(t, nonce, body))
    }

    fn rejected(&self, vendor: &str, err: &HookError) {
        let vendor = if self.adapters.contains_key(vendor) { vendor } else { "(unknown)" };
        self.metrics.rejected.inc(&[("receiver", "hooks"), ("reason", err.reason()), ("vendor", vendor)]);
        // Late calls dropped for order are logged at a bounded rate by `dropped_late`.
        if !matches!(err, HookError::OutOfOrder) {
            tracing::warn!(vendor, reason = err.reason(), "Hook call refused.");
        }
    }

    fn order_key(&self, vendor: &str, event: Option<&str>, payload: &Value) -> Option<String> {
        let adapter = self.adapters.get(vendor)?;
        let session = adapter.session_id(&HookCall { event, payload })?;
        Some(format!("{}\n{session}", adapter.vendor()))
    }

    fn dropped_late(&self, vendor: &str, event: Option<&str>, payload: &Value) {
        let Some(adapter) = self.adapters.get(vendor) else { return };
        let call = HookCall { event, payload };
        let Some(session) = adapter.session_id(&call) else { return };
        // What the call would have opened, mapped apart from the session's state (the call
        // did not happen as far as the log and that state are concerned).
        let drafts = adapter.map(&call, &mut SessionState::default(), &self.cx).unwrap_or_default();
        if let Some(n) = self.late.dropped(adapter.vendor(), &session, &drafts) {
            tracing::warn!(
                vendor = adapter.vendor(),
                dropped = n,
                "Late hook calls dropped: a later call of their session was already recorded (logged at most every 10 s; \
                 aep_bridge_requests_rejected_total{{reason=\"out_of_order\"}})."
            );
        }
    }

    fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    async fn handle(&self, vendor: String, event: Option<String>, payload: Value) -> Result<HookReply, HookError> {
        let started = std::time::Instant::now();
        let label = if self.adapters.contains_key(vendor.as_str()) { vendor.clone() } else { "(unknown)".into() };
        let reply = self.answer(vendor, event, payload).await;
        self.timer.record(&label, reply.is_ok(), started.elapsed().as_secs_f64());
        reply
    }
}

impl BridgeHooks {
    /// [`HookHandler::handle`] without its timer.
    async fn answer(&self, vendor: String, event: Option<String>, payload: Value) -> Result<HookReply, HookError> {
        let adapter = self.adapters.get(vendor.as_str()).ok_or_else(|| HookError::UnknownVendor(vendor.clone()))?;
        let call = HookCall { event: event.as_deref(), payload: &payload };
        let hook = adapter.hook_name(&call).map_err(|e| HookError::Unmappable(e.to_string()))?;
        check_hook_name(&hook)?;
        let now = (self.clock)();
        let mut drafts = self.map(adapter.as_ref(), &call, &hook, now)?;
        check_sessions(&drafts)?;
        if let Some(session) = adapter.session_id(&call) {
            let n = self.late.filter(adapter.vendor(), &session, &mut drafts);
            for _ in 0..n {
                self.metrics.dropped.inc(&[("sink", "hook_order"), ("severity", "info")]);
            }
        }
        if let Some(session) = drafts.iter().find_map(|d| d.session.as_deref()) {
            self.sessions.claim(adapter.vendor(), session);
        }
        // What the vendor's folder says about control: looked up once per hook.
        let spec = aep_adapters::vendors::spec(adapter.vendor());
        // The reply route whose asks this moment carries (a plugin's bus moment), if any.
        let route = spec.and_then(|s| s.reply_route()).filter(|r| r.asks_on(&hook));
        // A reply-route ask the vendor settled (bus `permission.replied`): its outcome, after
        // the command's ack when a command answered it; spawned, so a caller giving up does
        // not lose the terminal.
        if let Some(route) = route
            && let (Some(replies), Some(control)) = (&self.replies, &self.control)
            && let Some(ask) = route.settled_by(&hook, &payload).and_then(|id| replies.take(id))
        {
            let (replies, control, pipeline, book) =
                (replies.clone(), control.clone(), self.pipeline.clone(), self.attention.clone());
            let vendor = adapter.vendor();
            drafts.retain(|d| d.r#type != "attention.resolved");
            let task = tokio::spawn(async move {
                drafts.extend(replies.outcome(ask, "answered", &control, &pipeline).await);
                control.claim(vendor, &drafts);
                if let Ok(s) = pipeline.submit_drafts("hook", vendor, drafts).await {
                    book.observe(&s, now);
                    control.observe(&s);
                }
            });
            let _ = task.await;
            return Ok(HookReply::new(adapter.neutral_reply(&hook).as_bytes()));
        }
        // Opt-in gates (`[control.gates]`): the vendor's blockable pre-tool moment becomes
        // an answerable permission request, scoped by tool name.
        if self.hold
            && let Some(gate) = spec.and_then(|s| s.control.gate).filter(|g| g.moment == hook)
            && let Some(tools) = self.gates.get(adapter.vendor())
            && let Some(tool) = aep_adapters::spec::tool_of(&payload)
            && (tools.is_empty() || tools.iter().any(|t| t == tool))
        {
            let mut d = aep_adapters::spec::gate_request(adapter.vendor(), &gate, tool, &payload, &self.cx);
            d.session = drafts.iter().find_map(|d| d.session.clone()).or_else(|| adapter.session_id(&call));
            d.run = drafts.iter().find_map(|d| d.run.clone());
            drafts.push(d);
        }
        if !self.hold {
            // Nothing can deliver an answer (no token, no relay): say so honestly, the
            // request is answered in the agent's own UI (AEP-0008 respond_via).
            for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
                if d.data.get("respond_via").and_then(Value::as_array).is_some_and(|v| v.iter().any(|x| x == "control"))
                {
                    d.data.insert("respond_via".into(), serde_json::json!(["oob"]));
                }
            }
        }
        let vendor = adapter.vendor();
        if self.hold
            && let Some(route) = route
            && let (Some(replies), Some(control)) = (&self.replies, &self.control)
        {
            let at =
                crate::bridges::reply::PluginAsks { control, book: &self.attention, pipeline: &self.pipeline, now };
            replies.raise_plugin_asks(route, vendor, &payload, &mut drafts, &at);
        }
        let settled = self.attention.settle(vendor, &mut drafts, now);
        if let Some(replies) = &self.replies {
            // Closed before their session's end: no longer answerable over a reply route.
            for id in &settled {
                replies.take_request(id);
            }
        }
        // A moment answerable over control is registered before its request is published:
        // the id is minted here, the book opens it and the waiter exists, so a command sent
        // the instant the request is seen is applied (AEP-0004 §2, AEP-0008).
        let held = match &self.control {
            Some(control) if self.hold && spec.is_some_and(|s| s.control.may_hold(&hook)) => {
                drafts.iter_mut().find(|d| answerable(d)).and_then(|d| {
                    let session = d.session.clone()?;
                    let id = self.pipeline.mint_id();
                    d.id = Some(id.clone());
                    let p = Pending::from_request(id, vendor, session, d.run.clone(), d.subject.clone(), &d.data, now);
                    self.attention.open(p.clone());
                    Some(control.register(p))
                })
            }
            _ => None,
        };
        if let Some(control) = &self.control {
            control.claim(vendor, &drafts);
        }
        let stamped = match self.pipeline.submit_drafts("hook", adapter.vendor(), drafts).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(h) = &held {
                    self.attention.take(h.id());
                }
                return Err(HookError::Unavailable(e.to_string()));
            }
        };
        // Answer only once the events are in the log file (written, not yet fsynced), so a
        // kill -9 after the answer loses nothing acknowledged. A stalled
        // writer costs the agent at most ACK_WAIT: hooks fail open.
        if !self.pipeline.written(ACK_WAIT).await {
            tracing::warn!(vendor, "The log writer did not confirm within {ACK_WAIT:?}; answering anyway.");
        }
        let neutral = adapter.neutral_reply(&hook).as_bytes().to_vec();
        if !self.admitted(&stamped, &settled, now) {
            return Ok(HookReply::new(neutral));
        }
        let Some(h) = held else { return Ok(HookReply::new(neutral)) };
        // Held: the reply's headers go out now with the budget, so the shim waits for a human
        // only on a bridge that said it holds; the body follows with the answer.
        let budget = h.budget() + ACK_WAIT + HOLD_MARGIN;
        let pipeline = self.pipeline.clone();
        Ok(HookReply::held(budget, async move {
            let Some(applied) = h.wait().await else { return neutral.into() };
            // The answer's events (the command's ack, `attention.answered`, `resolved`) were
            // handed to the log before the waiter woke: the agent acts on the answer only
            // once the log holds it (AEP-0004 §7, the answer is recorded as it is applied).
            if !pipeline.written(ACK_WAIT).await {
                tracing::warn!(
                    vendor,
                    "The log writer did not confirm the answer within {ACK_WAIT:?}; answering anyway."
                );
            }
            let held = aep_adapters::spec::Held { hook: &hook, payload: &payload };
            spec.map(|s| s.control.reply_bytes(&held, &applied)).unwrap_or_default().into()
        }))
    }
}

/// Runs [`BridgeHooks::close_idle`] until `shutdown`, every tenth of the idle window
/// (between 1 s and 60 s); returns at once when idle sessions are never closed.
pub async fn run_idle_close(hooks: Arc<BridgeHooks>, shutdown: tokio_util::sync::CancellationToken) {
    let Some(idle) = hooks.idle_window() else { return };
    let every = (idle / 10).clamp(std::time::Duration::from_secs(1), std::time::Duration::from_secs(60));
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(every) => {
                hooks.close_idle().await;
            }
        }
    }
}

/// Longest hook name accepted (the longest real one, `UserPromptSubmit`-like names, is ~30).
const MAX_HOOK_NAME: usize = 64;
/// Longest session id accepted (real ones are UUIDs, ULIDs or `ses_...` ids).
const MAX_SESSION_ID: usize = 256;

/// A hook name becomes part of an event type (`x.{vendor}.{category}.{hook}`, AEP-0001 §6):
/// it must be a short token, or the bridge would mint types its own validator rejects.
fn check_hook_name(hook: &str) -> Result<(), HookError> {
    let ok = !hook.is_empty()
        && hook.len() <= MAX_HOOK_NAME
        && hook.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'));
    if ok {
        return Ok(());
    }
    let shown: String = hook.chars().take(MAX_HOOK_NAME).flat_map(char::escape_default).collect();
    Err(HookError::Unmappable(format!(
        "hook name {shown:?} is not a token of at most {MAX_HOOK_NAME} ASCII letters, digits, '_', '.', '-' or ':'"
    )))
}

/// Every event but `agent.*` belongs to a session (AEP-0001 §5.1): a payload whose session id
/// is missing, empty, oversized or carries control characters is refused, not emitted sessionless.
fn check_sessions(drafts: &[aep_adapters::EventDraft]) -> Result<(), HookError> {
    for d in drafts {
        if aep_schemas::event::is_agent_scoped(&d.r#type) {
            continue;
        }
        match d.session.as_deref() {
            None | Some("") => {
                return Err(HookError::Unmappable(
                    "the hook payload names no session (session id missing or empty)".into(),
                ));
            }
            Some(s) if s.len() > MAX_SESSION_ID || s.chars().any(char::is_control) => {
                return Err(HookError::Unmappable(format!(
                    "session id is longer than {MAX_SESSION_ID} bytes or contains control characters"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// An `attention.requested` that declares it can be answered over control (AEP-0008 `respond_via`).
fn answerable(d: &aep_adapters::EventDraft) -> bool {
    d.r#type == "attention.requested"
        && d.data.get("respond_via").and_then(Value::as_array).is_some_and(|v| v.iter().any(|x| x == "control"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_adapters::EventDraft;
    use aep_schemas::Capture;

    fn d(ty: &str) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some("s".into());
        d
    }

    /// What a subscriber could do the moment the request is admitted: is it answerable yet?
    #[derive(Default)]
    struct Answerer {
        control: std::sync::OnceLock<(Arc<ControlLoop>, crate::commands::Commands)>,
        seen: Mutex<Vec<(bool, bool)>>,
    }

    impl crate::pipeline::Tap for Answerer {
        fn admit(&self, ev: &Arc<crate::pipeline::Stamped>) -> u64 {
            let ev = &ev.event;
            let Some((control, commands)) = self.control.get() else { return 0 };
            if ev.r#type != "attention.requested" {
                return 0;
            }
            let session = ev.session.clone().unwrap_or_default();
            self.seen.lock().unwrap().push((control.is_waiting(&ev.id), commands.owns(&session)));
            // Answer from inside the admission, before the hook handler has run another line.
            let cmd = aep_schemas::Event {
                aep: "0.1".into(),
                id: "cmd-1".into(),
                r#type: "control.attention.respond".into(),
                source: "aep://phone/agent/phone".into(),
                agent: "phone".into(),
                session: Some(session),
                subject: Some(ev.id.clone()),
                data: Some(serde_json::json!({"answer": {"option": "allow"}})),
                ..Default::default()
            };
            commands.send(cmd).unwrap();
            0
        }
    }

    #[tokio::test]
    async fn a_request_is_answerable_before_anyone_can_see_it() {
        let tap = Arc::new(Answerer::default());
        let metrics = Arc::new(Metrics::default());
        let pipeline = crate::pipeline::PipelineBuilder::new(1, "h", metrics).tap(tap.clone()).build();
        let (commands, inbox) = crate::commands::channel();
        let book = Arc::new(AttentionBook::default());
        let (control, _task) = ControlLoop::start(
            pipeline.clone(),
            book.clone(),
            MapContext::default(),
            std::time::Duration::from_secs(30),
            inbox,
        );
        let _ = tap.control.set((control.clone(), commands));
        let hooks = BridgeHooks::new(pipeline, aep_adapters::vendors::all(), MapContext::default(), None)
            .with_control(book, control, true);
        let payload = serde_json::json!({"session_id": "fresh", "hook_event_name": "PermissionRequest",
            "tool_name": "Bash", "tool_input": {"command": "ls"}});
        let reply = hooks.handle("claude-code".into(), None, payload).await.unwrap();
        assert_eq!(*tap.seen.lock().unwrap(), [(true, true)], "waiter and session claim exist at admission");
        assert!(reply.hold_budget().is_some(), "a held reply announces its hold");
        let reply: Value = serde_json::from_slice(&reply.into_body().await).unwrap();
        assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow");
    }

    /// The shim's credential is a MAC, not the token. It passes once, for its
    /// body, under the right token, with a nonce minted within the window; a bearer token
    /// still works for other clients.
    #[test]
    fn a_request_mac_passes_once_for_its_body_and_token_only() {
        use aep_schemas::digest::request_mac;
        let pipeline = crate::pipeline::PipelineBuilder::new(1, "h", Arc::new(Metrics::default())).build();
        let now = 1_800_000_000_000u64;
        let hooks = BridgeHooks::new(pipeline, aep_adapters::vendors::all(), MapContext::default(), Some("tok".into()))
            .with_clock(Arc::new(move || now));
        let nonce = |ms: u64, r: u128| ulid::Ulid::from_parts(ms, r).to_string();
        let (n1, body) = (nonce(now - 5, 1), br#"{"a":1}"#);
        assert!(hooks.authorized_mac(&n1, &request_mac("tok", &n1, body), body));
        assert!(!hooks.authorized_mac(&n1, &request_mac("tok", &n1, body), body), "a replay is refused");
        let n2 = nonce(now, 2);
        assert!(!hooks.authorized_mac(&n2, &request_mac("tok", &n2, body), br#"{"a":2}"#), "another body");
        assert!(!hooks.authorized_mac(&n2, &request_mac("other", &n2, body), body), "another token");
        let stale = nonce(now - crate::auth::NONCE_WINDOW_MS - 1, 3);
        assert!(!hooks.authorized_mac(&stale, &request_mac("tok", &stale, body), body), "a stale nonce");
        assert!(!hooks.authorized_mac("not-a-ulid", &request_mac("tok", "not-a-ulid", body), body));
        assert!(hooks.authorized_mac(&n2, &request_mac("tok", &n2, body), body), "refusals took no nonce");
        assert!(hooks.authorized(Some("tok")) && !hooks.authorized(Some("nope")), "bearer tokens still work");
    }

    #[tokio::test]
    async fn hostile_hook_names_and_session_ids_are_refused() {
        let pipeline = crate::pipeline::PipelineBuilder::new(1, "h", Arc::new(Metrics::default())).build();
        let hooks = BridgeHooks::new(pipeline, aep_adapters::vendors::all(), MapContext::default(), None);
        let call = |name: &str, session: Value| serde_json::json!({"session_id": session, "hook_event_name": name, "tool_name": "Bash"});
        let long = "X".repeat(1 << 20);
        for (name, session, why) in [
            ("Pre\u{0}ToolUse", serde_json::json!("s"), "not a token"),
            (long.as_str(), serde_json::json!("s"), "not a token"),
            ("", serde_json::json!("s"), "not a token"),
            ("PreToolUse", serde_json::json!(""), "names no session"),
            ("PreToolUse", Value::Null, "names no session"),
            ("PreToolUse", serde_json::json!("a\nb"), "control characters"),
            ("PreToolUse", serde_json::json!("s".repeat(300)), "longer than"),
        ] {
            let err = hooks.handle("claude-code".into(), None, call(name, session)).await.unwrap_err();
            assert!(matches!(&err, HookError::Unmappable(m) if m.contains(why)), "{why}: {err}");
        }
        let ok = hooks.handle("claude-code".into(), None, call("PreToolUse", serde_json::json!("s-1"))).await;
        assert!(ok.is_ok(), "{ok:?}");
    }

    /// Every admitted event, in order.
    #[derive(Default)]
    struct Seen(Mutex<Vec<aep_schemas::Event>>);

    impl crate::pipeline::Tap for Seen {
        fn admit(&self, ev: &Arc<crate::pipeline::Stamped>) -> u64 {
            self.0.lock().unwrap().push(ev.event.clone());
            0
        }
    }

    /// A headless Qwen Code run (`qwen -p`, recorded: no SessionStart, no SessionEnd) starts
    /// on first sight and, once silent for the idle window, ends once as `timeout`, stamped
    /// at the last moment it was heard from; a later hook continues it as `{id}.2`. A
    /// session that announced itself is never ended for silence.
    #[tokio::test]
    async fn a_silent_headless_session_ends_once_as_timeout() {
        let seen = Arc::new(Seen::default());
        let pipeline =
            crate::pipeline::PipelineBuilder::new(1, "h", Arc::new(Metrics::default())).tap(seen.clone()).build();
        let clock = Arc::new(std::sync::atomic::AtomicU64::new(1_000_000));
        let c = clock.clone();
        let hooks = BridgeHooks::new(pipeline, aep_adapters::vendors::all(), MapContext::default(), None)
            .with_idle_close(Some(std::time::Duration::from_secs(60)))
            .with_clock(Arc::new(move || c.load(std::sync::atomic::Ordering::SeqCst)));
        let records: Vec<Value> = include_str!("../tests/data/qwen-code-headless.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        for r in &records {
            let hook = r["hook"].as_str().map(str::to_owned);
            hooks.handle("qwen-code".into(), hook, r["payload"].clone()).await.unwrap();
        }
        let claude = serde_json::json!({"session_id": "cc", "hook_event_name": "SessionStart", "source": "startup"});
        hooks.handle("claude-code".into(), None, claude).await.unwrap();
        let session = records[0]["payload"]["session_id"].as_str().unwrap();
        let types = || seen.0.lock().unwrap().iter().map(|e| e.r#type.clone()).collect::<Vec<_>>();
        assert_eq!(types()[..2], ["session.started", "progress.status"]);

        clock.fetch_add(59_999, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(hooks.close_idle().await, 0, "not silent for the window yet");
        clock.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(hooks.close_idle().await, 1, "the headless session only");
        let last = seen.0.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last.r#type, "session.ended");
        assert_eq!(last.session.as_deref(), Some(session));
        assert_eq!(last.data.as_ref().unwrap()["reason"], "timeout");
        assert_eq!(last.time, records.last().unwrap()["payload"]["timestamp"].as_str().unwrap(), "last heard from");
        clock.fetch_add(3_600_000, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(hooks.close_idle().await, 0, "one end per session");
        assert_eq!(types().iter().filter(|t| *t == "session.ended").count(), 1);

        // The same session heard from again: a continuation, linked to the ended one.
        hooks.handle("qwen-code".into(), Some("UserPromptSubmit".into()), records[1]["payload"].clone()).await.unwrap();
        let evs = seen.0.lock().unwrap().clone();
        let again = &evs[evs.len() - 2];
        assert_eq!(again.r#type, "session.started");
        assert_eq!(again.session.as_deref(), Some(format!("{session}.2").as_str()));
        assert_eq!(again.data.as_ref().unwrap()["parent"]["session"], session);
    }

    /// The recorded `codex exec` run (hooks then `notify` after `SessionEnd`, as
    /// Codex sends them on exit) is one AEP session; the notify lands on it, late, and
    /// opens no `{id}.2` continuation that would stay open until shutdown.
    #[tokio::test]
    async fn codex_notify_after_session_end_opens_no_continuation() {
        let seen = Arc::new(Seen::default());
        let pipeline =
            crate::pipeline::PipelineBuilder::new(1, "h", Arc::new(Metrics::default())).tap(seen.clone()).build();
        let hooks = BridgeHooks::new(pipeline, aep_adapters::vendors::all(), MapContext::default(), None);
        let records: Vec<Value> = include_str!("../tests/data/codex-exec-notify.jsonl")
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(records.last().unwrap()["hook"], "notify");
        for r in &records {
            let hook = r["hook"].as_str().map(str::to_owned);
            hooks.handle("codex".into(), hook, r["payload"].clone()).await.unwrap();
        }
        let evs = seen.0.lock().unwrap().clone();
        let thread = records[0]["payload"]["session_id"].as_str().unwrap();
        let sessions: std::collections::BTreeSet<_> = evs.iter().filter_map(|e| e.session.as_deref()).collect();
        assert_eq!(sessions.into_iter().collect::<Vec<_>>(), [thread], "one session, no continuation");
        let last = evs.last().unwrap();
        assert_eq!(last.r#type, "x.codex.session.notify");
        assert_eq!(evs.iter().filter(|e| e.r#type == "session.started").count(), 1);
        // A real resumption after the end still continues as `{id}.2`.
        let resume = serde_json::json!({"session_id": thread, "hook_event_name": "SessionStart", "source": "resume"});
        hooks.handle("codex".into(), None, resume).await.unwrap();
        let again = seen.0.lock().unwrap().last().cloned().unwrap();
        assert_eq!(again.session.as_deref(), Some(format!("{thread}.2").as_str()));
    }

    #[test]
    fn a_resumed_session_becomes_a_linked_continuation() {
        let mut life = Lifetime::default();
        let mut a = vec![d("session.started"), d("session.ended")];
        apply_lifetime(&mut life, &mut a, true);
        assert_eq!(a[1].session.as_deref(), Some("s"));
        let mut b = vec![d("session.started")];
        apply_lifetime(&mut life, &mut b, true);
        assert_eq!(b[0].session.as_deref(), Some("s.2"));
        assert_eq!(b[0].data["parent"]["session"], "s");
        let mut c = vec![d("run.started")];
        apply_lifetime(&mut life, &mut c, true);
        assert_eq!(c[0].session.as_deref(), Some("s.2"));
    }
}
