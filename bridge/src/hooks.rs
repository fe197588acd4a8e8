//! The bridge's side of the hook receiver: vendor adapter lookup, per-session mapping
//! state, and admission of the mapped drafts into the pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aep_adapters::session_table::{SessionTable, check_hook_name, check_sessions};
use aep_adapters::{HookAdapter, HookCall, MapContext};
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
    /// A session silent this long, whose vendor never ends it itself (its adapter's
    /// `close_idle`, e.g. a headless mode), is ended as `session.ended` with reason `timeout`; seconds, 0 never.
    pub idle_session_secs: u64,
}

impl Default for HooksConfig {
    fn default() -> Self {
        Self { idle_session_secs: 1800 }
    }
}

/// The clock the handler reads (Unix milliseconds); tests substitute a fake one.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Maps hook calls and admits the drafts.
pub struct BridgeHooks {
    pipeline: Pipeline,
    adapters: HashMap<&'static str, Box<dyn HookAdapter>>,
    /// The mapping states and session lifetimes.
    states: Mutex<SessionTable>,
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
    /// The reply route of the asks of plugins that forward their server's bus (the
    /// vendor's spec names it).
    replies: Option<Arc<crate::bridges::reply::Replies>>,
    /// The sessions each vendor's hook calls delivered (an SSE companion adds nothing for them).
    sessions: Arc<crate::bridges::claims::HookSessions>,
    /// Calls dropped to keep their session's order, and what depends on them.
    late: aep_adapters::late::LateCalls,
    /// What `doctor`'s probe learns of this bridge ([`HookHandler::about`]).
    about: Value,
}

impl BridgeHooks {
    /// A handler over these adapters. With `token` set, hook calls must carry it as a bearer token.
    pub fn new(pipeline: Pipeline, adapters: Vec<Box<dyn HookAdapter>>, cx: MapContext, token: Option<String>) -> Self {
        let metrics = pipeline.metrics().clone();
        Self {
            pipeline,
            adapters: adapters.into_iter().map(|a| (a.vendor(), a)).collect(),
            states: Mutex::new(SessionTable::default()),
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

    /// Notes that the bridge runs now: its runtime calls this every [`crate::auth::BEAT_MS`],
    /// so a stall (the process stopped, or starved) stretches the nonce window of the hook
    /// calls that waited in the socket through it.
    pub fn beat(&self) {
        self.nonces.stalls().beat((self.clock)());
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
    /// will (a headless mode's sessions: `session.ended`, reason `timeout`), each once,
    /// stamped at the last moment the session was heard from. Their mapping state is
    /// dropped, so a later call is a first sight: a continuation (`{id}.2`, lineage to the
    /// ended one). Returns how many sessions were ended.
    pub async fn close_idle(&self) -> usize {
        let Some(idle) = self.idle else { return 0 };
        let now = (self.clock)();
        let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
        let batches = {
            let Ok(mut states) = self.states.lock() else { return 0 };
            states.close_idle(|vendor| self.adapters.get(vendor).map(|a| a.as_ref()), now, idle_ms, &self.cx)
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

    /// Maps a call through its session's state ([`SessionTable::map`]).
    fn map(
        &self,
        adapter: &dyn HookAdapter,
        call: &HookCall<'_>,
        hook: &str,
        now_ms: u64,
    ) -> Result<Vec<aep_adapters::EventDraft>, HookError> {
        let mut states = self.states.lock().map_err(|_| HookError::Unavailable("state lock poisoned".into()))?;
        let (drafts, drift) =
            states.map(adapter, call, hook, now_ms, &self.cx).map_err(|e| HookError::Unmappable(e.to_string()))?;
        self.metrics.drift.count(adapter.vendor(), drift.version.as_deref(), &drift.drift);
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
        let drafts = adapter.map(&call, &mut aep_adapters::SessionState::default(), &self.cx).unwrap_or_default();
        if let Some(n) = self.late.dropped(adapter.vendor(), &session, &drafts, (self.clock)()) {
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
    /// [`HookHandler::handle`] without its timer: the call mapped (a late call of its
    /// session dropped), then the steps below in order, each on the batch of drafts the call
    /// made. A moment this call settled over a
    /// reply route ends there; otherwise the gate, the answer channel, the route's asks and
    /// the attention book rewrite the batch, a moment answerable over control is held, the
    /// batch is published, and the reply is the vendor's neutral one or the applied answer.
    async fn answer(&self, vendor: String, event: Option<String>, payload: Value) -> Result<HookReply, HookError> {
        let adapter = self.adapters.get(vendor.as_str()).ok_or_else(|| HookError::UnknownVendor(vendor.clone()))?;
        let call = HookCall { event: event.as_deref(), payload: &payload };
        let hook = adapter.hook_name(&call).map_err(|e| HookError::Unmappable(e.to_string()))?;
        check_hook_name(&hook).map_err(HookError::Unmappable)?;
        let now = (self.clock)();
        let mut drafts = self.map(adapter.as_ref(), &call, &hook, now)?;
        check_sessions(&drafts).map_err(HookError::Unmappable)?;
        let vendor = adapter.vendor();
        self.keep_session_order(adapter.as_ref(), &call, &mut drafts);
        if let Some(session) = drafts.iter().find_map(|d| d.session.as_deref()) {
            self.sessions.claim(vendor, session);
        }
        let neutral = || HookReply::new(adapter.neutral_reply(&hook).as_bytes());
        // What the vendor's folder says about control: looked up once per hook.
        let spec = aep_adapters::vendors::spec(vendor);
        // The reply route whose asks this moment carries (a plugin's bus moment), if any.
        let route = spec.and_then(|s| s.reply_route()).filter(|r| r.asks_on(&hook));
        if let Some(route) = route
            && let Some(ask) = self.settled_over_route(route, &hook, &payload)
        {
            self.publish_route_outcome(vendor, ask, drafts, now).await;
            return Ok(neutral());
        }
        if let Some(gate) = spec.and_then(|s| s.control.gate) {
            self.gate(adapter.as_ref(), &gate, &hook, &call, &mut drafts);
        }
        self.declare_answer_channel(&mut drafts);
        if let Some(route) = route {
            self.raise_route_asks(route, vendor, &payload, &mut drafts, now);
        }
        let settled = self.settle_attention(vendor, &mut drafts, now);
        let held = match spec {
            Some(spec) if spec.control.may_hold(&hook) => self.hold_request(vendor, &mut drafts, now),
            _ => None,
        };
        let stamped = self.publish(vendor, drafts, held.as_ref()).await?;
        if !self.admitted(&stamped, &settled, now) {
            return Ok(neutral());
        }
        let Some((spec, held)) = spec.zip(held) else { return Ok(neutral()) };
        let neutral = adapter.neutral_reply(&hook).as_bytes().to_vec();
        Ok(self.reply_when_answered(vendor, spec, held, hook, payload, neutral))
    }

    /// Keeps the session's order: drops the calls of a session that arrive after a later
    /// call of it was already recorded (and what depends on them), counted as shed.
    fn keep_session_order(
        &self,
        adapter: &dyn HookAdapter,
        call: &HookCall<'_>,
        drafts: &mut Vec<aep_adapters::EventDraft>,
    ) {
        let Some(session) = adapter.session_id(call) else { return };
        let n = self.late.filter(adapter.vendor(), &session, drafts);
        for _ in 0..n {
            self.metrics.dropped.inc(&[("sink", "hook_order"), ("severity", "info")]);
        }
    }

    /// The reply to a held moment: its headers go out now with the budget, so the shim
    /// waits for a human only on a bridge that said it holds; the body follows with the
    /// applied answer, or the vendor's neutral reply when none came.
    fn reply_when_answered(
        &self,
        vendor: &'static str,
        spec: &'static aep_adapters::spec::VendorSpec,
        held: crate::control::Held,
        hook: String,
        payload: Value,
        neutral: Vec<u8>,
    ) -> HookReply {
        let budget = held.budget() + ACK_WAIT + HOLD_MARGIN;
        let pipeline = self.pipeline.clone();
        HookReply::held(budget, async move {
            let Some(applied) = held.wait().await else { return neutral.into() };
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
            spec.control.reply_bytes(&held, &applied).into()
        })
    }

    /// The ask a reply route tracks that this moment settles (a bus `permission.replied`),
    /// taken from the route's memory.
    fn settled_over_route(
        &self,
        route: &aep_adapters::spec::ReplyRoute,
        hook: &str,
        payload: &Value,
    ) -> Option<crate::bridges::reply::Ask> {
        let (replies, _) = self.replies.as_ref().zip(self.control.as_ref())?;
        route.settled_by(hook, payload).and_then(|id| replies.take(id))
    }

    /// A reply-route ask the vendor settled: its outcome (after the command's ack when a
    /// command answered it) in place of the mapping's own `attention.resolved`. Spawned, so
    /// a caller giving up does not lose the terminal.
    async fn publish_route_outcome(
        &self,
        vendor: &'static str,
        ask: crate::bridges::reply::Ask,
        mut drafts: Vec<aep_adapters::EventDraft>,
        now: u64,
    ) {
        let (Some(replies), Some(control)) = (&self.replies, &self.control) else { return };
        let (replies, control, pipeline, book) =
            (replies.clone(), control.clone(), self.pipeline.clone(), self.attention.clone());
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
    }

    /// Opt-in gates (`[control.gates]`): the vendor's blockable pre-tool moment becomes an
    /// answerable permission request, scoped by tool name; only while moments are held.
    fn gate(
        &self,
        adapter: &dyn HookAdapter,
        gate: &aep_adapters::spec::Gate,
        hook: &str,
        call: &HookCall<'_>,
        drafts: &mut Vec<aep_adapters::EventDraft>,
    ) {
        if !self.hold || gate.moment != hook {
            return;
        }
        let vendor = adapter.vendor();
        let Some(tools) = self.gates.get(vendor) else { return };
        let Some(tool) = aep_adapters::spec::tool_of(call.payload) else { return };
        if !(tools.is_empty() || tools.iter().any(|t| t == tool)) {
            return;
        }
        let mut d = aep_adapters::spec::gate_request(vendor, gate, tool, call.payload, &self.cx);
        d.session = drafts.iter().find_map(|d| d.session.clone()).or_else(|| adapter.session_id(call));
        d.run = drafts.iter().find_map(|d| d.run.clone());
        drafts.push(d);
    }

    /// When nothing can deliver an answer (no token, no relay) the requests say so honestly:
    /// answered in the agent's own UI (AEP-0008 `respond_via`), not over control.
    fn declare_answer_channel(&self, drafts: &mut [aep_adapters::EventDraft]) {
        if self.hold {
            return;
        }
        for d in drafts.iter_mut().filter(|d| answerable(d)) {
            d.data.insert("respond_via".into(), serde_json::json!(["oob"]));
        }
    }

    /// A plugin's bus asks, raised as requests answerable over the server's reply route;
    /// only while moments are held.
    fn raise_route_asks(
        &self,
        route: &'static aep_adapters::spec::ReplyRoute,
        vendor: &str,
        payload: &Value,
        drafts: &mut [aep_adapters::EventDraft],
        now: u64,
    ) {
        if !self.hold {
            return;
        }
        let (Some(replies), Some(control)) = (&self.replies, &self.control) else { return };
        let at = crate::bus_asks::PluginAsks { control, book: &self.attention, pipeline: &self.pipeline, now };
        replies.raise_plugin_asks(route, vendor, payload, drafts, &at);
    }

    /// The attention book's rewrite of the batch (requests the agent's own surface settled,
    /// those still open before a session ends); the settled requests are no longer
    /// answerable over a reply route. Returns their ids.
    fn settle_attention(&self, vendor: &str, drafts: &mut Vec<aep_adapters::EventDraft>, now: u64) -> Vec<String> {
        let settled = self.attention.settle(vendor, drafts, now);
        if let Some(replies) = &self.replies {
            for id in &settled {
                replies.take_request(id);
            }
        }
        settled
    }

    /// Holds the batch's request answerable over control (on a moment the vendor lets us
    /// hold): its id is minted here, the book opens it and the waiter exists before the
    /// request is published, so a command sent the instant the request is seen is applied
    /// (AEP-0004 §2, AEP-0008).
    fn hold_request(
        &self,
        vendor: &str,
        drafts: &mut [aep_adapters::EventDraft],
        now: u64,
    ) -> Option<crate::control::Held> {
        let control = self.control.as_ref().filter(|_| self.hold)?;
        let d = drafts.iter_mut().find(|d| answerable(d))?;
        let session = d.session.clone()?;
        let id = self.pipeline.mint_id();
        d.id = Some(id.clone());
        let p = Pending::from_request(id, vendor, session, d.run.clone(), d.subject.clone(), &d.data, now);
        self.attention.open(p.clone());
        Some(control.register(p))
    }

    /// Publishes the batch and waits until the log holds it: the answer goes only once the
    /// events are in the log file (written, not yet fsynced), so a kill -9 after the answer
    /// loses nothing acknowledged. A stalled writer costs the agent at most [`ACK_WAIT`]:
    /// hooks fail open. A batch the pipeline refuses closes its held request.
    async fn publish(
        &self,
        vendor: &'static str,
        drafts: Vec<aep_adapters::EventDraft>,
        held: Option<&crate::control::Held>,
    ) -> Result<Vec<Arc<crate::pipeline::Stamped>>, HookError> {
        if let Some(control) = &self.control {
            control.claim(vendor, &drafts);
        }
        let stamped = match self.pipeline.submit_drafts("hook", vendor, drafts).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(h) = held {
                    self.attention.take(h.id());
                }
                return Err(HookError::Unavailable(e.to_string()));
            }
        };
        if !self.pipeline.written(ACK_WAIT).await {
            tracing::warn!(vendor, "The log writer did not confirm within {ACK_WAIT:?}; answering anyway.");
        }
        Ok(stamped)
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

/// An `attention.requested` that declares it can be answered over control (AEP-0008 `respond_via`).
fn answerable(d: &aep_adapters::EventDraft) -> bool {
    d.r#type == "attention.requested"
        && d.data.get("respond_via").and_then(Value::as_array).is_some_and(|v| v.iter().any(|x| x == "control"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
