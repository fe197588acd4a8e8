//! The bridge's side of the hook receiver: vendor adapter lookup, per-session mapping
//! state, and admission of the mapped drafts into the pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aep_adapters::{HookAdapter, HookCall, MapContext, SessionState};
use aep_receivers::hooks::{HookError, HookHandler, HookReply};
use serde_json::Value;

use crate::attention::{AttentionBook, Pending};
use crate::control::ControlLoop;
use crate::metrics::Metrics;
use crate::pipeline::Pipeline;

/// Most `(vendor, session)` mapping states kept; beyond it the least recently used is dropped
/// (a dropped state only loses synthesized-run memory, never an event).
const MAX_SESSIONS: usize = 10_000;

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
}

#[derive(Default)]
struct SessionStates {
    map: HashMap<(String, String), (SessionState, u64)>,
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
/// `parent` (lineage), so an observer still sees one conversation.
fn apply_lifetime(life: &mut Lifetime, drafts: &mut [aep_adapters::EventDraft]) {
    if life.generation == 0 {
        life.generation = 1;
    }
    if life.ended && !drafts.is_empty() {
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
            metrics,
            attention: Arc::new(AttentionBook::default()),
            control: None,
            hold: false,
            gates: Default::default(),
        }
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

    fn map(&self, adapter: &dyn HookAdapter, call: &HookCall<'_>) -> Result<Vec<aep_adapters::EventDraft>, HookError> {
        let session = adapter.session_id(call).unwrap_or_default();
        let key = (adapter.vendor().to_owned(), session);
        let mut states = self.states.lock().map_err(|_| HookError::Unavailable("state lock poisoned".into()))?;
        states.tick += 1;
        let tick = states.tick;
        if !states.map.contains_key(&key)
            && states.map.len() >= MAX_SESSIONS
            && let Some(oldest) = states.map.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| k.clone())
        {
            states.map.remove(&oldest);
        }
        if !states.lifetimes.contains_key(&key) && states.lifetimes.len() >= MAX_SESSIONS * 4 {
            states.lifetimes.clear();
        }
        let (state, last) = states.map.entry(key.clone()).or_default();
        *last = tick;
        let mut drafts = adapter.map(call, state, &self.cx).map_err(|e| HookError::Unmappable(e.to_string()))?;
        let life = states.lifetimes.entry(key).or_default();
        apply_lifetime(life, &mut drafts);
        Ok(drafts)
    }
}

/// Longest a hook answer waits for the log writer (below the shim's 3 s short budget).
const ACK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl HookHandler for BridgeHooks {
    fn authorized(&self, token: Option<&str>) -> bool {
        crate::auth::bearer_ok(self.token.as_deref(), token)
    }

    fn reply_proof(&self, nonce: &str, body: &[u8]) -> Option<String> {
        self.token.as_deref().map(|t| aep_schemas::digest::reply_proof(t, nonce, body))
    }

    async fn handle(&self, vendor: String, event: Option<String>, payload: Value) -> Result<HookReply, HookError> {
        let adapter = self.adapters.get(vendor.as_str()).ok_or_else(|| HookError::UnknownVendor(vendor.clone()))?;
        let call = HookCall { event: event.as_deref(), payload: &payload };
        let hook = adapter.hook_name(&call).map_err(|e| HookError::Unmappable(e.to_string()))?;
        check_hook_name(&hook)?;
        let mut drafts = self.map(adapter.as_ref(), &call)?;
        check_sessions(&drafts)?;
        // Opt-in gates (`[control.gates]`): the vendor's blockable pre-tool moment becomes
        // an answerable permission request, scoped by tool name.
        if self.hold
            && crate::control::gate_moment(adapter.vendor()) == Some(hook.as_str())
            && let Some(tools) = self.gates.get(adapter.vendor())
            && let Some(tool) = crate::control::tool_of(&payload)
            && (tools.is_empty() || tools.iter().any(|t| t == tool))
        {
            let session = drafts.iter().find_map(|d| d.session.clone()).or_else(|| adapter.session_id(&call));
            let run = drafts.iter().find_map(|d| d.run.clone());
            drafts.extend(crate::control::gate_request(adapter.vendor(), tool, &payload, session, run, &self.cx));
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
        let now = crate::time::unix_ms(std::time::SystemTime::now());
        let settled = self.attention.settle(vendor, &mut drafts, now);
        // A moment answerable over control is registered before its request is published:
        // the id is minted here, the book opens it and the waiter exists, so a command sent
        // the instant the request is seen is applied (AEP-0004 §2, AEP-0008).
        let held = match &self.control {
            Some(control) if self.hold && crate::control::holdable(vendor, &hook) => {
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
        let stamped = match self.pipeline.submit_drafts("hook", vendor, drafts).await {
            Ok(s) => s,
            Err(e) => {
                if let Some(h) = &held {
                    self.attention.take(h.id());
                }
                return Err(HookError::Unavailable(e.to_string()));
            }
        };
        // Answer only once the events are in the log file (written, not yet fsynced), so a
        // kill -9 after the answer loses nothing acknowledged (issue 15 #13). A stalled
        // writer costs the agent at most ACK_WAIT: hooks fail open.
        if !self.pipeline.written(ACK_WAIT).await {
            tracing::warn!(vendor, "The log writer did not confirm within {ACK_WAIT:?}; answering anyway.");
        }
        self.attention.observe(&stamped, now);
        let neutral = HookReply::new(adapter.neutral_reply(&hook).as_bytes());
        let Some(control) = &self.control else { return Ok(neutral) };
        control.observe(&stamped);
        if !self.hold {
            return Ok(neutral);
        }
        control.dismissed(&settled);
        if let Some(h) = held
            && let Some(applied) = h.wait().await
        {
            return Ok(HookReply::new(crate::control::vendor_reply(vendor, &hook, &payload, &applied)));
        }
        Ok(neutral)
    }

    fn rejected(&self, vendor: &str, err: &HookError) {
        let vendor = if self.adapters.contains_key(vendor) { vendor } else { "(unknown)" };
        self.metrics.rejected.inc(&[("receiver", "hooks"), ("reason", err.reason()), ("vendor", vendor)]);
        tracing::warn!(vendor, reason = err.reason(), "Hook call refused.");
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
        fn admit(&self, ev: &Arc<crate::pipeline::Stamped>) {
            let ev = &ev.event;
            let Some((control, commands)) = self.control.get() else { return };
            if ev.r#type != "attention.requested" {
                return;
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
        let reply: Value = serde_json::from_slice(&reply.body).unwrap();
        assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow");
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

    #[test]
    fn a_resumed_session_becomes_a_linked_continuation() {
        let mut life = Lifetime::default();
        let mut a = vec![d("session.started"), d("session.ended")];
        apply_lifetime(&mut life, &mut a);
        assert_eq!(a[1].session.as_deref(), Some("s"));
        let mut b = vec![d("session.started")];
        apply_lifetime(&mut life, &mut b);
        assert_eq!(b[0].session.as_deref(), Some("s.2"));
        assert_eq!(b[0].data["parent"]["session"], "s");
        let mut c = vec![d("run.started")];
        apply_lifetime(&mut life, &mut c);
        assert_eq!(c[0].session.as_deref(), Some("s.2"));
    }
}
