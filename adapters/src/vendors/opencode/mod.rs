#![doc = include_str!("README.md")]

pub mod observer;
pub mod route;
pub mod spec;
pub mod sse;
pub mod todos;

use aep_schemas::Severity;
use serde_json::{Value, json};

use crate::common::{attention_key, tool_key};
use crate::generic::fallback_draft;
use crate::vendors::plugin_common::{
    choices, close_run, content_ok, draft, error_info, gate_text, open_run, ptr_str, put_args, put_result, put_text,
    scratch, stamp, synth_prompt, tool_ref, x_type,
};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, NeutralReply, SessionState};

pub use todos::diff_todos;

/// The moment names of the plugin shim (`/hooks/{vendor}/{moment}`; also the payload's `kind`).
pub mod moment {
    /// A bus event from the plugin's `event` hook: `{kind:"bus", event:{type, properties}}`.
    pub const BUS: &str = "bus";
    /// `tool.execute.before`: `{kind, input:{tool, sessionID, callID}, output:{args}}`.
    pub const TOOL_BEFORE: &str = "tool.before";
    /// `tool.execute.after`: `{kind, input:{tool, sessionID, callID, args}, output:{title, output, metadata}}`.
    pub const TOOL_AFTER: &str = "tool.after";
    /// The hold-open `permission.ask`: `{kind, permission:{id, type, title, sessionID, callID, ...}}`.
    pub const PERMISSION_ASK: &str = "permission.ask";

    /// The canonical moment for a name: the vendor's own hook names are accepted as aliases.
    pub fn canonical(name: &str) -> &str {
        match name {
            "event" => BUS,
            "tool.execute.before" => TOOL_BEFORE,
            "tool.execute.after" => TOOL_AFTER,
            other => other,
        }
    }
}

/// Which fork of the OpenCode plugin surface an adapter speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// The agent identity and `x.{vendor}.*` token.
    pub vendor: &'static str,
    /// The bus asks: `permission.asked` and `question.asked`/`question.replied` (Kilo Code
    /// `>=7.4.6`, OpenCode 1.18.33), answered over the server's reply route.
    pub bus_asks: bool,
}

/// OpenCode's profile. The bus asks are on: the live server (1.18.33) publishes
/// `permission.asked` and never fires the `permission.ask` hook, as Kilo Code does from 7.4.6.
pub const OPENCODE: Profile = Profile { vendor: "opencode", bus_asks: true };

/// The OpenCode-shaped plugin adapter (OpenCode, and Kilo Code on its own profile).
#[derive(Debug, Clone, Copy)]
pub struct PluginAdapter {
    profile: Profile,
}

impl PluginAdapter {
    /// An adapter for `profile`.
    pub const fn new(profile: Profile) -> Self {
        Self { profile }
    }
}

/// The OpenCode adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(PluginAdapter::new(OPENCODE))
}

/// User message ids remembered per session (an update of one of them opens no run).
const USER_MESSAGES: usize = 32;

/// `state.extra` key of the vendor ids whose attention the bridge's own control loop
/// already resolved (the `permission.replied` / `question.replied` dedupe).
pub const RESOLVED_KEY: &str = "resolved_attention";

/// Records that the control loop resolved the vendor request `id`, so the vendor's own
/// settle broadcast for it maps to nothing (one terminal per request, AEP-0002 §7.2).
pub fn mark_resolved(state: &mut SessionState, id: &str) {
    scratch(state, RESOLVED_KEY).insert(id.to_owned(), Value::Bool(true));
}

fn take_resolved(state: &mut SessionState, id: &str) -> bool {
    scratch(state, RESOLVED_KEY).remove(id).is_some()
}

/// The session of a bus event (`{type, properties}`): `properties.sessionID`, else
/// `properties.info.sessionID`, else (for `session.*`) `properties.info.id`.
pub fn bus_session(e: &Value) -> Option<&str> {
    ptr_str(e, "/properties/sessionID").or_else(|| ptr_str(e, "/properties/info/sessionID")).or_else(|| {
        // session.* carry the Session object itself: its id IS the session.
        let ty = e.get("type").and_then(Value::as_str).unwrap_or("");
        if ty.starts_with("session.") { ptr_str(e, "/properties/info/id") } else { None }
    })
}

/// The session a moment belongs to (the fixture's `identity.session_from`).
fn session_of(payload: &Value) -> Option<String> {
    let from_bus = payload.get("event").and_then(bus_session);
    from_bus
        .or_else(|| ptr_str(payload, "/permission/sessionID"))
        .or_else(|| ptr_str(payload, "/input/sessionID"))
        .map(str::to_owned)
}

impl HookAdapter for PluginAdapter {
    fn vendor(&self) -> &'static str {
        self.profile.vendor
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        crate::common::hook_name(call, "kind").map(|n| moment::canonical(&n).to_owned())
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        session_of(call.payload)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        crate::common::object(call.payload)?;
        let hook = self.hook_name(call)?;
        let session = session_of(call.payload);
        let mut out = match hook.as_str() {
            moment::BUS => {
                let ev = call
                    .payload
                    .get("event")
                    .filter(|e| e.is_object())
                    .ok_or(AdapterError::MissingField { field: "event", expected: "object" })?;
                self.map_bus(ev, one_shot(call.payload), state, cx)?
            }
            moment::TOOL_BEFORE => self.tool_before(call.payload, state, cx)?.into_iter().collect(),
            moment::TOOL_AFTER => self.tool_after(call.payload, state, cx)?.into_iter().collect(),
            moment::PERMISSION_ASK => {
                let p = call
                    .payload
                    .get("permission")
                    .filter(|p| p.is_object())
                    .ok_or(AdapterError::MissingField { field: "permission", expected: "object" })?;
                vec![self.permission_card(p, cx, PermissionSurface::HoldOpen)]
            }
            other => vec![fallback_draft(self.profile.vendor, other, cx)],
        };
        // server.connected is agent-scope machinery: no session on the event.
        let agent_scoped = self.x("server.connected");
        stamp(&mut out, session.as_deref(), state, |ty| ty == agent_scoped);
        Ok(out)
    }

    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        // The shim treats an empty body as "no decision": permission.ask output stays untouched.
        NeutralReply::Empty
    }
}

/// Which permission surface raised the card (the option set is what that surface can deliver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PermissionSurface {
    /// The held `permission.ask` hook: `output.status` carries allow/deny only.
    HoldOpen,
    /// Kilo Code `>=7.4.6` bus `permission.asked`: the REST reply enum once/always/reject.
    ReplyRoute,
}

impl PluginAdapter {
    fn x(&self, rest: &str) -> String {
        x_type(self.profile.vendor, rest)
    }

    fn map_bus(
        &self,
        ev: &Value,
        one_shot: bool,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let ty = ev
            .get("type")
            .and_then(Value::as_str)
            .ok_or(AdapterError::MissingField { field: "event.type", expected: "string" })?;
        let empty = json!({});
        let props = ev.get("properties").unwrap_or(&empty);
        let info = props.get("info").unwrap_or(&empty);
        let vendor = self.profile.vendor;
        let out = match ty {
            "session.created" => {
                let mut d = draft("session.started", cx);
                let mut client = serde_json::Map::new();
                client.insert("name".into(), json!(vendor));
                if let Some(v) = info.get("version").and_then(Value::as_str) {
                    client.insert("version".into(), json!(v));
                }
                d.data.insert("client".into(), Value::Object(client));
                if let Some(p) = info.get("parentID").and_then(Value::as_str) {
                    d.data.insert("parent".into(), json!({"session": p}));
                }
                // title and directory are user content: redacted-gated (AEP-0003 §9 rule 1)
                put_text(&mut d, cx, "label", info.get("title").and_then(Value::as_str));
                put_text(&mut d, cx, "cwd", info.get("directory").and_then(Value::as_str));
                vec![d]
            }
            "session.deleted" => {
                let mut d = draft("session.ended", cx);
                d.data.insert("reason".into(), json!("normal"));
                vec![d]
            }
            "session.idle" => match close_run(state) {
                Some(run) => {
                    let mut d = draft("run.finished", cx);
                    d.run = Some(run.clone());
                    vec![d]
                }
                None => Vec::new(), // no run open: nothing to close (runtime state decides)
            },
            "session.compacted" => vec![draft("session.compacted", cx)],
            "session.status" => {
                let status = ptr_str(props, "/status/type");
                let mut d = draft("progress.status", cx);
                d.subject = status.map(str::to_owned);
                put_text(&mut d, cx, "message", ptr_str(props, "/status/message"));
                let mut out = vec![d];
                // `{type:"idle"}` is the turn's end: the one-shot `run` exits on it, before
                // its `session.idle` is ever delivered, so it closes the run (once: the later
                // `session.idle` finds nothing open).
                if status == Some("idle")
                    && let Some(run) = close_run(state)
                {
                    let mut f = draft("run.finished", cx);
                    f.run = Some(run);
                    out.push(f);
                }
                out
            }
            "session.error" => {
                let mut d = draft(self.x("session.error"), cx);
                d.severity = Some(Severity::Error);
                if let Some(name) = ptr_str(props, "/error/name") {
                    d.data.insert("type".into(), json!(name));
                }
                put_text(&mut d, cx, "message", ptr_str(props, "/error/data/message"));
                vec![d]
            }
            "message.updated" => self.message_updated(info, state, cx),
            // The held permission.ask hook is the first-class carrier (Annex A.7).
            "permission.updated" => Vec::new(),
            "permission.asked" if self.profile.bus_asks => {
                let mut d = self.permission_card(props, cx, PermissionSurface::ReplyRoute);
                if one_shot {
                    // The one-shot `run` answers every ask itself, at once: nothing can
                    // answer over control, the decision is the agent's own (AEP-0008 §2).
                    d.data.insert("respond_via".into(), json!(["oob"]));
                }
                vec![d]
            }
            "permission.replied" => {
                let id =
                    props.get("permissionID").or_else(|| props.get("requestID")).and_then(Value::as_str).unwrap_or("");
                // Under the one-shot `run` the agent decided (auto-reject), not a person:
                // `auto`, not `answered` (AEP-0002 §5.3 `attention.resolved`).
                self.settled(id, if one_shot { "auto" } else { "answered" }, state, cx)
            }
            "message.part.updated" if ptr_str(props, "/part/type") == Some("tool") => {
                let part = props.get("part").unwrap_or(&empty);
                self.tool_part(part, state, cx)
            }
            "question.asked" if self.profile.bus_asks => vec![self.question_card(props, cx)],
            "question.replied" if self.profile.bus_asks => {
                let id = props.get("requestID").and_then(Value::as_str).unwrap_or("");
                self.settled(id, "answered", state, cx)
            }
            "todo.updated" => {
                let next = props.get("todos").cloned().unwrap_or(Value::Array(Vec::new()));
                let slot = scratch(state, "todos");
                let prev = slot.insert("snapshot".into(), next.clone()).unwrap_or(Value::Array(Vec::new()));
                diff_todos(&prev, &next, cx)
            }
            "file.edited" => {
                let mut d = draft(self.x("file.edited"), cx);
                d.severity = Some(Severity::Debug);
                put_text(&mut d, cx, "file", props.get("file").and_then(Value::as_str));
                vec![d]
            }
            "command.executed" => {
                let mut d = draft(self.x("command.executed"), cx);
                d.severity = Some(Severity::Debug);
                if let Some(n) = props.get("name").and_then(Value::as_str) {
                    d.data.insert("name".into(), json!(n));
                }
                put_text(&mut d, cx, "arguments", props.get("arguments").and_then(Value::as_str));
                vec![d]
            }
            other => {
                // Machinery and future members: x.{vendor}.<bus type>, empty data (the
                // payload's sensitivity is unknown, so nothing rides at any ceiling).
                let mut d = draft(self.x(&bus_type_segment(other)), cx);
                d.severity = Some(Severity::Debug);
                vec![d]
            }
        };
        Ok(out)
    }

    fn message_updated(&self, info: &Value, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
        let role = info.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "user" {
            // The live server re-sends a turn's user message after its `session.idle`
            // (OpenCode 1.18.33 adds the diff summary): an update of a message that already
            // opened a run opens nothing.
            if let Some(id) = info.get("id").and_then(Value::as_str) {
                let seen = scratch(state, "user_messages");
                let ids = seen.entry("ids").or_insert_with(|| json!([]));
                let Some(ids) = ids.as_array_mut() else { return Vec::new() };
                if ids.iter().any(|x| x == id) {
                    return Vec::new();
                }
                if ids.len() >= USER_MESSAGES {
                    ids.remove(0);
                }
                ids.push(json!(id));
            }
            // A user message opens a run unless one is open (steering never double-opens).
            return match open_run(state) {
                Some(run) => {
                    let mut d = draft("run.started", cx);
                    d.data.insert("trigger".into(), json!("user"));
                    d.run = Some(run.clone());
                    vec![d]
                }
                None => Vec::new(),
            };
        }
        // The model plane stays vendor-namespaced at debug; token counts are metadata.
        let mut d = draft(self.x("message.updated"), cx);
        d.severity = Some(Severity::Debug);
        if !role.is_empty() {
            d.data.insert("role".into(), json!(role));
        }
        if let Some(n) = info.pointer("/tokens/input").and_then(Value::as_u64) {
            d.data.insert("gen_ai.usage.input_tokens".into(), json!(n));
        }
        if let Some(n) = info.pointer("/tokens/output").and_then(Value::as_u64) {
            d.data.insert("gen_ai.usage.output_tokens".into(), json!(n));
        }
        vec![d]
    }

    fn settled(&self, id: &str, resolution: &str, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
        if id.is_empty() || take_resolved(state, id) {
            return Vec::new(); // the bridge's own loop already resolved it
        }
        let mut d = draft("attention.resolved", cx);
        d.data.insert("resolution".into(), json!(resolution));
        d.subject = Some(id.to_owned());
        d.cause_key = Some(attention_key(id));
        vec![d]
    }

    fn tool_before(
        &self,
        p: &Value,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Option<EventDraft>, AdapterError> {
        let name =
            ptr_str(p, "/input/tool").ok_or(AdapterError::MissingField { field: "input.tool", expected: "string" })?;
        let call_id = ptr_str(p, "/input/callID");
        let args = p.pointer("/output/args").cloned().unwrap_or(Value::Object(Default::default()));
        Ok(self.request(name, call_id, &args, state, cx))
    }

    fn tool_after(
        &self,
        p: &Value,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Option<EventDraft>, AdapterError> {
        let name =
            ptr_str(p, "/input/tool").ok_or(AdapterError::MissingField { field: "input.tool", expected: "string" })?;
        let call_id = ptr_str(p, "/input/callID");
        // The typed hook has no error surface: tool.completed (Annex A.7); a failed call
        // never reaches it and ends on its tool part (`state.status: "error"`).
        Ok(self.outcome(name, call_id, Ok(p.pointer("/output/output")), state, cx))
    }

    /// A tool part of `message.part.updated` (`{type:"tool", tool, callID, state:{status,
    /// input, output?, error?}}`): the tool plane of the bus, shared by the plugin route and
    /// the SSE stream. `running` requests (its input is complete; `pending` may still be
    /// streaming it), `completed` / `error` end the call; a call no earlier moment
    /// requested is requested first, so every outcome follows its request.
    fn tool_part(&self, part: &Value, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
        let (Some(name), Some(status)) = (ptr_str(part, "/tool"), ptr_str(part, "/state/status")) else {
            return Vec::new();
        };
        let call_id = ptr_str(part, "/callID");
        let input = part.pointer("/state/input").cloned().unwrap_or_else(|| json!({}));
        let mut out = Vec::new();
        match status {
            "running" => out.extend(self.request(name, call_id, &input, state, cx)),
            "completed" | "error" => {
                out.extend(self.request(name, call_id, &input, state, cx));
                let result = if status == "completed" {
                    Ok(part.pointer("/state/output"))
                } else {
                    Err(ptr_str(part, "/state/error"))
                };
                out.extend(self.outcome(name, call_id, result, state, cx));
            }
            _ => {} // pending: the input may still be streaming
        }
        out
    }

    /// `tool.requested` for `call_id`, unless this call was requested already (the plugin's
    /// `tool.execute.before` and the bus tool part both carry it).
    fn request(
        &self,
        name: &str,
        call_id: Option<&str>,
        args: &Value,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Option<EventDraft> {
        if let Some(id) = call_id {
            if call_seen(state, id).is_some() {
                return None;
            }
            mark_call(state, id, CALL_REQUESTED);
        }
        let mut d = draft("tool.requested", cx);
        d.subject = Some(name.to_owned());
        d.data.insert("tool".into(), tool_ref(name, call_id));
        put_args(&mut d, cx, args);
        d.correlation_key = call_id.map(tool_key);
        Some(d)
    }

    /// The one outcome of `call_id`: `tool.completed` with its result, or `tool.failed`
    /// with the error (severity error); nothing when the call already ended.
    fn outcome(
        &self,
        name: &str,
        call_id: Option<&str>,
        result: Result<Option<&Value>, Option<&str>>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Option<EventDraft> {
        if let Some(id) = call_id {
            if call_seen(state, id) == Some(CALL_ENDED) {
                return None;
            }
            mark_call(state, id, CALL_ENDED);
        }
        let mut d = match result {
            Ok(output) => {
                let mut d = draft("tool.completed", cx);
                if let Some(r) = output {
                    put_result(&mut d, cx, r);
                }
                d
            }
            Err(message) => {
                let mut d = draft("tool.failed", cx);
                d.severity = Some(Severity::Error);
                let err = error_info(&d, cx, "tool_error", message);
                d.data.insert("error".into(), err);
                d
            }
        };
        d.subject = Some(name.to_owned());
        d.data.insert("tool".into(), tool_ref(name, call_id));
        d.cause_key = call_id.map(tool_key);
        Some(d)
    }

    fn permission_card(&self, perm: &Value, cx: &MapContext, surface: PermissionSurface) -> EventDraft {
        let kind = permission_kind(perm);
        let mut d = draft("attention.requested", cx);
        d.subject = Some(kind.to_owned());
        d.data.insert("kind".into(), json!("permission"));
        // AEP-0003 §9 rule 2: the vendor title rides only at redacted+; metadata synthesizes.
        let prompt = match perm.get("title").and_then(Value::as_str).and_then(|t| gate_text(&d, cx, t)) {
            Some(title) => format!("Permission requested: {kind} \u{2014} {title}"),
            None => synth_prompt(self.profile.vendor, "permission", kind),
        };
        d.data.insert("prompt".into(), json!(prompt));
        let options = match surface {
            PermissionSurface::HoldOpen => json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]),
            // The server's reply enum: the vocabulary its reply route takes.
            PermissionSurface::ReplyRoute => spec::ROUTE.options_value(),
        };
        d.data.insert("options".into(), options);
        d.data.insert("respond_via".into(), json!(["control"]));
        d.correlation_key = perm.get("id").and_then(Value::as_str).map(attention_key);
        d
    }

    fn question_card(&self, props: &Value, cx: &MapContext) -> EventDraft {
        let mut d = draft("attention.requested", cx);
        let id = props.get("id").and_then(Value::as_str);
        d.subject = id.map(str::to_owned);
        d.correlation_key = id.map(attention_key);
        let questions = props.get("questions").and_then(Value::as_array).cloned().unwrap_or_default();
        let n = questions.len();
        d.data.insert("kind".into(), json!("form"));
        let plural = if n == 1 { "question" } else { "questions" };
        d.data.insert("prompt".into(), json!(format!("{} asks {n} {plural}", self.profile.vendor)));
        let mut fields = Vec::with_capacity(n);
        for (i, q) in questions.iter().enumerate() {
            let text = q.get("question").and_then(Value::as_str).unwrap_or("");
            let label = match q.get("header").and_then(Value::as_str).filter(|h| !h.is_empty()) {
                Some(h) => format!("{h}: {text}"),
                None => text.to_owned(),
            };
            let mut f = serde_json::Map::new();
            f.insert("id".into(), json!((i + 1).to_string()));
            let labels: Vec<String> = q
                .get("options")
                .and_then(Value::as_array)
                .map(|os| os.iter().filter_map(|o| o.get("label").and_then(Value::as_str)).map(str::to_owned).collect())
                .unwrap_or_default();
            let custom = q.get("custom").and_then(Value::as_bool).unwrap_or(true);
            f.insert("type".into(), json!(if labels.is_empty() { "string" } else { "select" }));
            // [metadata*] (AEP-0006): the 1-based index at metadata, the real label at redacted+.
            let shown = if content_ok(&d) { gate_text(&d, cx, &label) } else { None };
            f.insert("label".into(), json!(shown.unwrap_or_else(|| (i + 1).to_string())));
            f.insert("required".into(), json!(true));
            if !labels.is_empty() {
                if custom {
                    f.insert("other".into(), json!(true));
                }
                if q.get("multiple").and_then(Value::as_bool) == Some(true) {
                    f.insert("multi".into(), json!(true));
                }
                f.insert("choices".into(), choices(&d, cx, &labels));
            }
            fields.push(Value::Object(f));
        }
        d.data.insert("fields".into(), Value::Array(fields));
        d.data.insert("respond_via".into(), json!(["control"]));
        d
    }
}

/// Whether the moment comes from a one-shot `opencode run` / `kilo run` process (the
/// plugin's `oneShot`): that CLI answers every permission ask itself, at once.
fn one_shot(payload: &Value) -> bool {
    payload.get("oneShot").and_then(Value::as_bool) == Some(true)
}

/// `state.extra` key of the calls seen per session (`callID` -> requested / ended).
const CALLS_KEY: &str = "tool_calls";
/// Calls remembered per session (the oldest is forgotten beyond).
const CALLS: usize = 256;
const CALL_REQUESTED: &str = "requested";
const CALL_ENDED: &str = "ended";

fn call_seen(state: &mut SessionState, id: &str) -> Option<&'static str> {
    match scratch(state, CALLS_KEY).get(id).and_then(Value::as_str) {
        Some(CALL_ENDED) => Some(CALL_ENDED),
        Some(_) => Some(CALL_REQUESTED),
        None => None,
    }
}

fn mark_call(state: &mut SessionState, id: &str, what: &str) {
    let calls = scratch(state, CALLS_KEY);
    if !calls.contains_key(id) && calls.len() >= CALLS {
        // the workspace's serde_json keeps insertion order: the oldest call goes
        if let Some(old) = calls.keys().next().cloned() {
            calls.shift_remove(&old);
        }
    }
    calls.insert(id.to_owned(), json!(what));
}

/// The kind of a permission request: `type` in the published types, `permission` on the
/// live `permission.asked` member (OpenCode 1.18.33: `{id, sessionID, permission, patterns, ...}`).
fn permission_kind(perm: &Value) -> &str {
    perm.get("type").or_else(|| perm.get("permission")).and_then(Value::as_str).unwrap_or("permission")
}

/// A bus type as type segments: lowercase `[a-z0-9_.]`, other characters `_`; a one-word
/// type gains a `bus.` family so the fallback stays two segments deep.
fn bus_type_segment(ty: &str) -> String {
    let mut s: String = ty
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '_' { c.to_ascii_lowercase() } else { '_' })
        .collect();
    s = s.split('.').filter(|p| !p.is_empty()).collect::<Vec<_>>().join(".");
    if s.is_empty() {
        return "bus.unknown".into();
    }
    if !s.contains('.') {
        s = format!("bus.{s}");
    }
    s
}

#[cfg(test)]
mod tests;
