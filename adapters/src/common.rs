//! Shared building blocks of the hook mappings (AEP-0002 Annex A, AEP-0003 §9): capture
//! gating at the adapter, digests before redaction, metadata synthesis of prompts,
//! tool / run / attention helpers and the correlation keys the sequencer resolves.
//!
//! Everything here is pure. Vendor modules call these so every adapter applies the same
//! ceiling rules in the same way.

use aep_schemas::Capture;
use aep_schemas::digest::digest;
use aep_schemas::redact::{redact_text, redact_value};
use serde_json::{Map, Value, json};

use crate::generic::fallback_draft;
use crate::{AdapterError, EventDraft, HookCall, MapContext, SessionState};

/// A tool's content as its payload schema types it (AEP-0002 §5, `tool.requested` /
/// `tool.completed`): `args` an object, else omitted (the digest over the original still
/// stands for it); `result` an object or a string, other JSON as its compact text, `null`
/// omitted. Other prefixes as they are.
pub fn content_shape<'a>(prefix: &str, v: &'a Value) -> Option<std::borrow::Cow<'a, Value>> {
    use std::borrow::Cow;
    match (prefix, v) {
        ("args", Value::Object(_)) | ("result", Value::Object(_) | Value::String(_)) => Some(Cow::Borrowed(v)),
        ("args", _) | ("result", Value::Null) => None,
        ("result", other) => Some(Cow::Owned(Value::String(other.to_string()))),
        _ => Some(Cow::Borrowed(v)),
    }
}

/// Correlation key of a tool call: `tool.requested` sets it, the outcome points at it.
pub fn tool_key(call_id: &str) -> String {
    format!("tool:{call_id}")
}

/// Correlation key of a run: `run.started` sets it, the run's terminal points at it.
/// Synthesized run ids (`r1`) repeat across sessions, so the key names the session too.
pub fn run_key(session: Option<&str>, run: &str) -> String {
    format!("run:{}:{run}", session.unwrap_or(""))
}

/// Correlation key of an attention request (keyed by the vendor's call / request id).
pub fn attention_key(id: &str) -> String {
    format!("attention:{id}")
}

/// The payload as an object, or [`AdapterError::NotAnObject`].
pub fn object(payload: &Value) -> Result<&Map<String, Value>, AdapterError> {
    payload.as_object().ok_or(AdapterError::NotAnObject)
}

/// A string field of the payload, when present and a string.
pub fn s<'a>(payload: &'a Value, field: &str) -> Option<&'a str> {
    payload.get(field).and_then(Value::as_str)
}

/// A non-empty string field of the payload.
pub fn ne<'a>(payload: &'a Value, field: &str) -> Option<&'a str> {
    s(payload, field).filter(|v| !v.is_empty())
}

/// An unsigned integer field of the payload.
pub fn u(payload: &Value, field: &str) -> Option<u64> {
    payload.get(field).and_then(Value::as_u64)
}

/// The hook name: the URL's event when given, else the payload's `field`.
pub fn hook_name(call: &HookCall<'_>, field: &'static str) -> Result<String, AdapterError> {
    if let Some(e) = call.event.filter(|e| !e.is_empty()) {
        return Ok(e.to_owned());
    }
    s(call.payload, field).map(str::to_owned).ok_or(AdapterError::NoHookName { field })
}

/// Applies the ceiling to a `redacted`-gated free-text value (AEP-0003 §9 rules 1 and 4):
/// dropped below `redacted`, passed through the §9.4 pipeline at `redacted`, verbatim at `full`.
pub fn gate_text(text: &str, ceiling: Capture, cx: &MapContext) -> Option<String> {
    match ceiling {
        Capture::None | Capture::Metadata => None,
        Capture::Redacted => Some(redact_text(text, &cx.redact)),
        Capture::Full => Some(text.to_owned()),
    }
}

/// Like [`gate_text`] for a structured `redacted`-gated value (strings inside are redacted).
pub fn gate_value(value: &Value, ceiling: Capture, cx: &MapContext) -> Option<Value> {
    match ceiling {
        Capture::None | Capture::Metadata => None,
        Capture::Redacted => Some(redact_value(value, &cx.redact)),
        Capture::Full => Some(value.clone()),
    }
}

/// An event under construction with its ceiling fixed: fields are added by capture grade.
#[derive(Debug, Clone)]
pub struct Builder<'a> {
    draft: EventDraft,
    cx: &'a MapContext,
}

impl<'a> Builder<'a> {
    /// A draft of `ty` whose `capture` is the ceiling that applies to `ty` (AEP-0003 §9 rule 5).
    pub fn new(ty: impl Into<String>, cx: &'a MapContext) -> Self {
        let ty = ty.into();
        let ceiling = cx.ceiling_for(&ty);
        Self { draft: EventDraft::new(ty, ceiling), cx }
    }

    /// The ceiling this event is gated at.
    pub fn ceiling(&self) -> Capture {
        self.draft.capture
    }

    /// The mapping context.
    pub fn cx(&self) -> &'a MapContext {
        self.cx
    }

    /// Sets the subject.
    pub fn subject(mut self, subject: Option<&str>) -> Self {
        self.draft.subject = subject.map(str::to_owned);
        self
    }

    /// Adds a `metadata`-gated field (rides at every ceiling above `none`).
    pub fn meta(mut self, key: &str, value: impl Into<Value>) -> Self {
        if self.ceiling() >= Capture::Metadata {
            self.draft.data.insert(key.to_owned(), value.into());
        }
        self
    }

    /// Adds a `metadata`-gated field when present.
    pub fn meta_opt(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.meta(key, v),
            None => self,
        }
    }

    /// Adds a `redacted`-gated free-text field when present (see [`gate_text`]).
    pub fn text(mut self, key: &str, value: Option<&str>) -> Self {
        if let Some(t) = value.and_then(|v| gate_text(v, self.draft.capture, self.cx)) {
            self.draft.data.insert(key.to_owned(), Value::String(t));
        }
        self
    }

    /// Adds a `full`-gated field when present (rides only at ceiling `full`).
    pub fn full(mut self, key: &str, value: Option<&Value>) -> Self {
        if let (Some(v), Capture::Full) = (value, self.ceiling()) {
            self.draft.data.insert(key.to_owned(), v.clone());
        }
        self
    }

    /// Adds a content triple for `prefix` (`args` / `result`): `{prefix}_digest` always over
    /// the original value (AEP-0003 §9.3, before any redaction), `{prefix}_redacted` at
    /// `redacted`, `{prefix}` verbatim at `full`.
    pub fn content(mut self, prefix: &str, value: Option<&Value>) -> Self {
        let Some(v) = value else { return self };
        if self.ceiling() >= Capture::Metadata {
            self.draft.data.insert(format!("{prefix}_digest"), Value::String(digest(v)));
        }
        let Some(v) = content_shape(prefix, v) else { return self };
        let v = v.as_ref();
        match self.ceiling() {
            Capture::Redacted => {
                self.draft.data.insert(format!("{prefix}_redacted"), redact_value(v, &self.cx.redact));
            }
            Capture::Full => {
                self.draft.data.insert(prefix.to_owned(), v.clone());
            }
            _ => {}
        }
        self
    }

    /// Adds `tool: {name, call_id?}` (metadata) and sets the subject to the tool name.
    pub fn tool(self, name: &str, call_id: Option<&str>) -> Self {
        self.meta("tool", tool_obj(name, call_id)).subject(Some(name))
    }

    /// Adds `error: {type, message?}`: the type at metadata, the message `redacted`-gated.
    pub fn error(mut self, ty: &str, message: Option<&str>) -> Self {
        if self.ceiling() < Capture::Metadata {
            return self;
        }
        let mut e = Map::new();
        e.insert("type".into(), Value::String(ty.to_owned()));
        if let Some(m) = message.and_then(|m| gate_text(m, self.draft.capture, self.cx)) {
            e.insert("message".into(), Value::String(m));
        }
        self.draft.data.insert("error".into(), Value::Object(e));
        self
    }

    /// Mutable access to the payload under construction.
    pub fn data_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.draft.data
    }

    /// Finishes the draft. As a backstop the payload is pruned against the registry's
    /// capture annotations at the draft's ceiling (AEP-0003 §9 rule 1, AEP-0002 §5.1).
    pub fn build(mut self) -> EventDraft {
        aep_schemas::downlevel::prune_payload(&self.draft.r#type, &mut self.draft.data, self.draft.capture);
        self.draft
    }
}

/// `{name, call_id?}`, the tool object of `tool.*` payloads.
pub fn tool_obj(name: &str, call_id: Option<&str>) -> Value {
    match call_id {
        Some(id) => json!({ "name": name, "call_id": id }),
        None => json!({ "name": name }),
    }
}

/// A vendor session-end reason collapsed onto the `session.ended.reason` enum: the vendors'
/// user-driven ends (`exit`, `clear`, `logout`, `prompt_input_exit`, `other`, ...) are `normal`.
pub fn session_end_reason(vendor_reason: Option<&str>) -> &'static str {
    match vendor_reason.map(str::to_ascii_lowercase).as_deref() {
        Some("error") | Some("crash") | Some("failed") => "error",
        Some("timeout") => "timeout",
        Some("killed") | Some("sigkill") | Some("sigterm") => "killed",
        _ => "normal",
    }
}

/// The one-line detail of a tool call for a human prompt: the command, else a path or URL,
/// with the call's own description in parentheses (`rm -rf build (clean build dir)`).
pub fn tool_detail(tool_input: Option<&Value>) -> Option<String> {
    let input = tool_input?;
    if let Some(text) = input.as_str() {
        return Some(text.to_owned()).filter(|t| !t.is_empty());
    }
    let head = ["command", "file_path", "path", "url", "pattern", "query", "prompt"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str).filter(|v| !v.is_empty()));
    let desc = input.get("description").and_then(Value::as_str).filter(|v| !v.is_empty());
    match (head, desc) {
        (Some(h), Some(d)) => Some(format!("{h} ({d})")),
        (Some(h), None) => Some(h.to_owned()),
        (None, Some(d)) => Some(d.to_owned()),
        (None, None) => None,
    }
}

/// The `attention.requested.prompt` of a permission card (AEP-0003 §9 rule 2): at
/// `redacted`+ `Permission requested: {tool} — {detail}` (through the pipeline at
/// `redacted`); below it the structural synthesis `{vendor} requests permission: {tool}`.
pub fn permission_prompt(
    vendor: &str,
    tool: &str,
    tool_input: Option<&Value>,
    ceiling: Capture,
    cx: &MapContext,
) -> String {
    let full = match tool_detail(tool_input) {
        Some(d) => format!("Permission requested: {tool} — {d}"),
        None => format!("Permission requested: {tool}"),
    };
    gate_text(&full, ceiling, cx).unwrap_or_else(|| synthesized_prompt(vendor, "permission", tool))
}

/// The metadata synthesis `"{agent} requests {kind}: {subject}"` (AEP-0003 §9 rule 2).
pub fn synthesized_prompt(vendor: &str, kind: &str, subject: &str) -> String {
    format!("{vendor} requests {kind}: {subject}")
}

/// `[{allow, Allow}, {deny, Deny}]`, the two named options of a held permission card.
pub fn allow_deny_options() -> Value {
    json!([{ "id": "allow", "label": "Allow" }, { "id": "deny", "label": "Deny" }])
}

/// An `attention.requested` of kind `permission` answerable over control (the held-hook
/// card of Claude Code, Codex and Qwen Code): prompt per [`permission_prompt`].
pub fn permission_request(vendor: &str, tool: &str, tool_input: Option<&Value>, cx: &MapContext) -> EventDraft {
    let b = Builder::new("attention.requested", cx);
    let prompt = permission_prompt(vendor, tool, tool_input, b.ceiling(), cx);
    b.meta("kind", "permission")
        .meta("prompt", prompt)
        .meta("options", allow_deny_options())
        .meta("respond_via", json!(["control"]))
        .subject(Some(tool))
        .build()
}

/// Opens a synthesized run `r{n}` (n counts per session), making it the current run.
/// Returns the new id and the run it replaced, if one was still open (stale).
pub fn open_synth_run(state: &mut SessionState) -> (String, Option<String>) {
    state.runs_synthesized += 1;
    let id = format!("r{}", state.runs_synthesized);
    let stale = state.current_run.replace(id.clone());
    (id, stale)
}

/// Opens a vendor-identified run (e.g. Codex `turn_id`); returns the previous open run
/// when it differs (a stale run the vendor never closed).
pub fn open_vendor_run(state: &mut SessionState, run: &str) -> Option<String> {
    let stale = state.current_run.replace(run.to_owned());
    stale.filter(|s| s != run)
}

/// Closes the current run, returning it.
pub fn close_run(state: &mut SessionState) -> Option<String> {
    state.current_run.take()
}

/// A `run.cancelled` draining a run the vendor left open (the interrupt-drain rule:
/// a stale run closes at the next boundary). `by` follows the vendor's cause when known.
pub fn drain_run(stale: &str, session: Option<&str>, cx: &MapContext) -> EventDraft {
    let mut d = Builder::new("run.cancelled", cx).meta("by", "user").build();
    d.session = session.map(str::to_owned);
    d.run = Some(stale.to_owned());
    d.cause_key = Some(run_key(session, stale));
    d
}

/// `tool.requested` for a call: `tool`, `args_digest` (+ `args_redacted` / `args` by
/// ceiling), subject the tool name, correlation key [`tool_key`] when the call id is known.
pub fn tool_requested(name: &str, call_id: Option<&str>, args: Option<&Value>, cx: &MapContext) -> EventDraft {
    let mut d = Builder::new("tool.requested", cx).tool(name, call_id).content("args", args).build();
    d.correlation_key = call_id.map(tool_key);
    d
}

/// `tool.completed` for a call: `tool`, `result_digest` (+ gated result), `duration_ms`
/// when known, caused by the call's `tool.requested`.
pub fn tool_completed(
    name: &str,
    call_id: Option<&str>,
    result: Option<&Value>,
    duration_ms: Option<u64>,
    cx: &MapContext,
) -> EventDraft {
    let mut d = Builder::new("tool.completed", cx)
        .tool(name, call_id)
        .meta_opt("duration_ms", duration_ms)
        .content("result", result)
        .build();
    d.cause_key = call_id.map(tool_key);
    d
}

/// `tool.failed` for a call: `tool`, `error: {type, message?}` (message `redacted`-gated),
/// caused by the call's `tool.requested`.
pub fn tool_failed(
    name: &str,
    call_id: Option<&str>,
    error_type: &str,
    message: Option<&str>,
    duration_ms: Option<u64>,
    cx: &MapContext,
) -> EventDraft {
    let mut d = Builder::new("tool.failed", cx)
        .tool(name, call_id)
        .error(error_type, message)
        .meta_opt("duration_ms", duration_ms)
        .build();
    d.cause_key = call_id.map(tool_key);
    d
}

/// `session.started` with `client.name` = the vendor, `trigger` from the vendor's `source`
/// and `gen_ai.request.model` when given (all metadata).
pub fn session_started<'a>(vendor: &str, source: Option<&str>, model: Option<&str>, cx: &'a MapContext) -> Builder<'a> {
    Builder::new("session.started", cx)
        .meta("client", json!({ "name": vendor }))
        .meta_opt("trigger", source)
        .meta_opt("gen_ai.request.model", model)
}

/// Sets the vendor timestamp (`timestamp`) on every draft that has none, when it is an
/// RFC 3339 timestamp (AEP-0001 §5.1 #5); anything else leaves the bridge's clock to it.
pub fn stamp_time(drafts: &mut [EventDraft], payload: &Value) {
    if let Some(t) = ne(payload, "timestamp").filter(|t| aep_schemas::validate::is_rfc3339(t)) {
        for d in drafts.iter_mut().filter(|d| d.time.is_none()) {
            d.time = Some(t.to_owned());
        }
    }
}

/// Stamps identity on drafts that lack it: `session` on every draft, `run` where unset.
pub fn stamp(drafts: &mut [EventDraft], session: Option<&str>, run: Option<&str>) {
    for d in drafts {
        if d.session.is_none() {
            d.session = session.map(str::to_owned);
        }
        if d.run.is_none() {
            d.run = run.map(str::to_owned);
        }
    }
}

/// Whether drafts of `ty` belong to a run: everything but `session.*`, `agent.*` and the
/// session-category vendor fallback `x.{vendor}.session.*`.
pub fn run_scoped(ty: &str) -> bool {
    let mut parts = ty.split('.');
    match parts.next() {
        Some("session") | Some("agent") => false,
        Some("x") => parts.nth(1) != Some("session"),
        _ => true,
    }
}

/// Stamps identity the way the hook vendors need it: `session` on every draft except the
/// agent-scoped ones (`agent.*` and `x.{vendor}.agent.*`, AEP-0001 §5.2), `run` on
/// run-scoped drafts that have none.
pub fn stamp_identity(drafts: &mut [EventDraft], session: Option<&str>, run: Option<&str>) {
    for d in drafts {
        if aep_schemas::event::is_agent_scoped(&d.r#type) {
            d.session = None;
            continue;
        }
        if d.session.is_none() {
            d.session = session.map(str::to_owned);
        }
        if d.run.is_none() && run_scoped(&d.r#type) {
            d.run = run.map(str::to_owned);
        }
    }
}

/// Opens a synthesized run at a prompt boundary: drains a run left open as
/// `run.cancelled` (pushed to `out`), then marks `started` drafts (the `run.started`) with
/// the new run and its correlation key. Returns the new run id.
pub fn begin_synth_run(
    state: &mut SessionState,
    session: Option<&str>,
    started: &mut [EventDraft],
    out: &mut Vec<EventDraft>,
    cx: &MapContext,
) -> String {
    let (id, stale) = open_synth_run(state);
    if let Some(stale) = stale {
        out.push(drain_run(&stale, session, cx));
    }
    for d in started.iter_mut().filter(|d| d.r#type == "run.started") {
        d.run = Some(id.clone());
        d.correlation_key = Some(run_key(session, &id));
    }
    id
}

/// Closes the current run at a terminal hook: `run.*` drafts get the closed run and a cause
/// pointing at its `run.started`. Returns the closed run, if one was open.
pub fn end_run(state: &mut SessionState, session: Option<&str>, terminals: &mut [EventDraft]) -> Option<String> {
    let closed = close_run(state)?;
    for d in terminals.iter_mut().filter(|d| d.r#type.starts_with("run.")) {
        d.run = Some(closed.clone());
        d.cause_key = Some(run_key(session, &closed));
    }
    Some(closed)
}

/// Remembers a value in the vendor scratch of `state` under `bucket.key`.
pub fn remember(state: &mut SessionState, bucket: &str, key: &str, value: Value) {
    let slot = state.extra.entry(bucket.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(m) = slot {
        m.insert(key.to_owned(), value);
    }
}

/// Takes (removes) a remembered value.
pub fn take(state: &mut SessionState, bucket: &str, key: &str) -> Option<Value> {
    state.extra.get_mut(bucket).and_then(Value::as_object_mut).and_then(|m| m.remove(key))
}

/// Reads a remembered value.
pub fn recall<'s>(state: &'s SessionState, bucket: &str, key: &str) -> Option<&'s Value> {
    state.extra.get(bucket).and_then(|b| b.get(key))
}

/// Appends to a FIFO queue in the vendor scratch (pairing without vendor call ids).
pub fn push_queue(state: &mut SessionState, bucket: &str, key: &str, value: Value) {
    let slot = state.extra.entry(bucket.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(m) = slot {
        let q = m.entry(key.to_owned()).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(a) = q {
            a.push(value);
        } else {
            *q = Value::Array(vec![value]);
        }
    }
}

/// Pops the oldest entry of a FIFO queue in the vendor scratch.
pub fn pop_queue(state: &mut SessionState, bucket: &str, key: &str) -> Option<Value> {
    let a = state.extra.get_mut(bucket)?.as_object_mut()?.get_mut(key)?.as_array_mut()?;
    if a.is_empty() { None } else { Some(a.remove(0)) }
}

/// The `x.{vendor}.session.{snake_case(hook)}` fallback (AEP-0001 §6), with session set.
pub fn fallback(vendor: &str, hook: &str, session: Option<&str>, cx: &MapContext) -> EventDraft {
    let mut d = fallback_draft(vendor, hook, cx);
    d.session = session.map(str::to_owned);
    d
}

/// A vendor-namespaced draft `x.{vendor}.{rest}` gated at the general ceiling.
pub fn vendor_draft<'a>(vendor: &str, rest: &str, cx: &'a MapContext) -> Builder<'a> {
    Builder::new(format!("x.{vendor}.{rest}"), cx)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx(c: Capture) -> MapContext {
        MapContext { capture: c, attention_capture: c, ..MapContext::default() }
    }

    #[test]
    fn content_triple_follows_the_ceiling() {
        let v = json!({"command": "ls -la"});
        let m = Builder::new("tool.requested", &cx(Capture::Metadata)).content("args", Some(&v)).build();
        assert_eq!(m.data.get("args_digest"), Some(&json!("1df8bccaec747dc615b50678f35bf5b5")));
        assert!(!m.data.contains_key("args") && !m.data.contains_key("args_redacted"));
        let r = Builder::new("tool.requested", &cx(Capture::Redacted)).content("args", Some(&v)).build();
        assert!(r.data.contains_key("args_redacted") && !r.data.contains_key("args"));
        let f = Builder::new("tool.requested", &cx(Capture::Full)).content("args", Some(&v)).build();
        assert_eq!(f.data.get("args"), Some(&v));
        let n = Builder::new("tool.requested", &cx(Capture::None)).content("args", Some(&v)).build();
        assert!(n.data.is_empty());
    }

    #[test]
    fn only_an_rfc3339_vendor_timestamp_becomes_the_event_time() {
        let mut ds = vec![EventDraft::new("run.started", Capture::Metadata)];
        stamp_time(&mut ds, &json!({"timestamp": "yesterday"}));
        assert_eq!(ds[0].time, None);
        stamp_time(&mut ds, &json!({"timestamp": "2026-11-30T04:04:13.812Z"}));
        assert_eq!(ds[0].time.as_deref(), Some("2026-11-30T04:04:13.812Z"));
    }

    #[test]
    fn tool_content_takes_the_shape_its_schema_types() {
        let full = cx(Capture::Full);
        let args = Builder::new("tool.requested", &full).content("args", Some(&json!(["a", 1]))).build();
        assert!(args.data.contains_key("args_digest") && !args.data.contains_key("args"));
        let r = Builder::new("tool.completed", &full).content("result", Some(&json!([1, "x"]))).build();
        assert_eq!(r.data["result"], json!("[1,\"x\"]"));
        let n = Builder::new("tool.completed", &full).content("result", Some(&Value::Null)).build();
        assert!(n.data.contains_key("result_digest") && !n.data.contains_key("result"));
        let o = Builder::new("tool.completed", &full).content("result", Some(&json!({"k": 1}))).build();
        assert_eq!(o.data["result"], json!({"k": 1}));
    }

    #[test]
    fn permission_prompt_synthesizes_at_metadata() {
        let input = json!({"command": "rm -rf build", "description": "clean build dir"});
        assert_eq!(
            permission_prompt("codex", "shell", Some(&input), Capture::Redacted, &MapContext::default()),
            "Permission requested: shell — rm -rf build (clean build dir)"
        );
        assert_eq!(
            permission_prompt("codex", "shell", Some(&input), Capture::Metadata, &MapContext::default()),
            "codex requests permission: shell"
        );
    }

    #[test]
    fn runs_synthesize_and_report_stale() {
        let mut st = SessionState::default();
        assert_eq!(open_synth_run(&mut st), ("r1".to_owned(), None));
        assert_eq!(open_synth_run(&mut st), ("r2".to_owned(), Some("r1".to_owned())));
        assert_eq!(close_run(&mut st).as_deref(), Some("r2"));
        assert_eq!(open_vendor_run(&mut st, "t1"), None);
        assert_eq!(open_vendor_run(&mut st, "t1"), None);
        assert_eq!(open_vendor_run(&mut st, "t2").as_deref(), Some("t1"));
    }

    #[test]
    fn scratch_queues_are_fifo() {
        let mut st = SessionState::default();
        push_queue(&mut st, "q", "k", json!(1));
        push_queue(&mut st, "q", "k", json!(2));
        assert_eq!(pop_queue(&mut st, "q", "k"), Some(json!(1)));
        assert_eq!(pop_queue(&mut st, "q", "k"), Some(json!(2)));
        assert_eq!(pop_queue(&mut st, "q", "k"), None);
        remember(&mut st, "b", "x", json!("v"));
        assert_eq!(recall(&st, "b", "x"), Some(&json!("v")));
        assert_eq!(take(&mut st, "b", "x"), Some(json!("v")));
        assert_eq!(take(&mut st, "b", "x"), None);
    }

    #[test]
    fn build_prunes_fields_above_the_ceiling() {
        // A mistaken metadata-graded `cwd` (annotated redacted) never rides at metadata.
        let d = Builder::new("session.started", &cx(Capture::Metadata)).meta("cwd", "/home/u").build();
        assert!(d.data.is_empty());
        let d = Builder::new("session.started", &cx(Capture::Redacted)).meta("cwd", "/home/u").build();
        assert_eq!(d.data.get("cwd"), Some(&json!("/home/u")));
    }

    #[test]
    fn run_scope_excludes_session_and_agent() {
        assert!(run_scoped("tool.requested"));
        assert!(run_scoped("x.qwen-code.run.model_turn"));
        assert!(!run_scoped("x.codex.session.notify"));
        assert!(!run_scoped("session.compacted"));
        assert!(!run_scoped("agent.idle"));
    }

    #[test]
    fn session_end_reasons_collapse() {
        assert_eq!(session_end_reason(Some("prompt_input_exit")), "normal");
        assert_eq!(session_end_reason(Some("logout")), "normal");
        assert_eq!(session_end_reason(None), "normal");
        assert_eq!(session_end_reason(Some("timeout")), "timeout");
    }
}
