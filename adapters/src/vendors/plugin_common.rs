//! Helpers shared by the plugin- and shell-hook adapters of OpenCode, Kilo Code, Cline,
//! Hermes, Antigravity and pi: capture gating at the source (AEP-0003 §9), digests,
//! tool references, vendor-namespace type names, run synthesis and form fields.
//!
//! Every gate takes the draft's own ceiling (`draft.capture`, set from
//! [`MapContext::ceiling_for`]) so a field never rides above the level the event honors.

use aep_schemas::Capture;
use aep_schemas::digest::digest;
use aep_schemas::redact::{redact_text, redact_value};
use serde_json::{Map, Value, json};

use crate::{EventDraft, MapContext, SessionState};

/// A draft of `ty` whose `capture` is the ceiling that applies to `ty` (AEP-0003 §9 rules 1, 5).
pub(crate) fn draft(ty: impl Into<String>, cx: &MapContext) -> EventDraft {
    let ty = ty.into();
    let capture = cx.ceiling_for(&ty);
    EventDraft::new(ty, capture)
}

/// True when `redacted`-gated free text may ride on `d` (AEP-0003 §9 rule 1).
pub(crate) fn content_ok(d: &EventDraft) -> bool {
    d.capture >= Capture::Redacted
}

/// Free text at `redacted` (through the §9.4 pipeline) or `full` (verbatim); `None` below.
pub(crate) fn gate_text(d: &EventDraft, cx: &MapContext, text: &str) -> Option<String> {
    match d.capture {
        Capture::Full => Some(text.to_owned()),
        Capture::Redacted => Some(redact_text(text, &cx.redact)),
        _ => None,
    }
}

/// A JSON value at `redacted` (every string through the pipeline) or `full`; `None` below.
pub(crate) fn gate_value(d: &EventDraft, cx: &MapContext, v: &Value) -> Option<Value> {
    match d.capture {
        Capture::Full => Some(v.clone()),
        Capture::Redacted => Some(redact_value(v, &cx.redact)),
        _ => None,
    }
}

/// Sets `key` to gated free text when the draft's ceiling allows it.
pub(crate) fn put_text(d: &mut EventDraft, cx: &MapContext, key: &str, text: Option<&str>) {
    if let Some(t) = text
        && let Some(g) = gate_text(d, cx, t)
    {
        d.data.insert(key.to_owned(), Value::String(g));
    }
}

/// The `{name, call_id?}` tool reference (AEP-0002 §5.2 `tool_ref`).
pub(crate) fn tool_ref(name: &str, call_id: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), Value::String(name.to_owned()));
    if let Some(id) = call_id {
        m.insert("call_id".into(), Value::String(id.to_owned()));
    }
    Value::Object(m)
}

/// Tool arguments: `args_digest` always (over the ORIGINAL value, AEP-0003 §9 rule 3),
/// `args_redacted` at `redacted`, verbatim `args` at `full`.
pub(crate) fn put_args(d: &mut EventDraft, cx: &MapContext, args: &Value) {
    d.data.insert("args_digest".into(), Value::String(digest(args)));
    let Some(args) = crate::common::content_shape("args", args) else { return };
    let args = args.as_ref();
    match d.capture {
        Capture::Full => {
            d.data.insert("args".into(), args.clone());
        }
        Capture::Redacted => {
            d.data.insert("args_redacted".into(), redact_value(args, &cx.redact));
        }
        _ => {}
    }
}

/// Tool results: `result_digest` always, `result_redacted` at `redacted`, `result` at `full`.
pub(crate) fn put_result(d: &mut EventDraft, cx: &MapContext, result: &Value) {
    d.data.insert("result_digest".into(), Value::String(digest(result)));
    let Some(result) = crate::common::content_shape("result", result) else { return };
    let result = result.as_ref();
    match d.capture {
        Capture::Full => {
            d.data.insert("result".into(), result.clone());
        }
        Capture::Redacted => {
            d.data.insert("result_redacted".into(), redact_value(result, &cx.redact));
        }
        _ => {}
    }
}

/// An `error_info` object: the type at metadata, the message gated at `redacted`.
pub(crate) fn error_info(d: &EventDraft, cx: &MapContext, ty: &str, message: Option<&str>) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.to_owned()));
    if let Some(msg) = message
        && !msg.is_empty()
        && let Some(g) = gate_text(d, cx, msg)
    {
        m.insert("message".into(), Value::String(g));
    }
    Value::Object(m)
}

/// `x.{vendor}.{rest}`.
pub(crate) fn x_type(vendor: &str, rest: &str) -> String {
    format!("x.{vendor}.{rest}")
}

/// The dotted fallback of the hook vendors whose pins split the hook's words into
/// segments (`some_future_hook` -> `x.cline.some.future.hook`, `pre_verify` ->
/// `x.hermes.pre.verify`). Characters outside `[a-z0-9]` separate segments. A one-word hook
/// has no segment left after its category, so it lands in `session`
/// (`notification` -> `x.cline.session.notification`): AEP-0001 §6 wants
/// `x.{vendor}.{category}.{rest}`.
pub(crate) fn dotted_fallback(vendor: &str, hook: &str) -> String {
    let snake = crate::snake_case(hook);
    let segs: Vec<&str> = snake.split(|c: char| !c.is_ascii_alphanumeric()).filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        [] => x_type(vendor, "session.unknown"),
        [one] => x_type(vendor, &format!("session.{one}")),
        _ => x_type(vendor, &segs.join(".")),
    }
}

/// Opens a synthesized run (`r1`, `r2`, ...) unless one is open; returns it when newly opened.
pub(crate) fn open_run(state: &mut SessionState) -> Option<String> {
    if state.current_run.is_some() {
        return None;
    }
    state.runs_synthesized += 1;
    let id = format!("r{}", state.runs_synthesized);
    state.current_run = Some(id.clone());
    Some(id)
}

/// The `run.started` of the run [`open_run`] opens, when it opens one.
pub(crate) fn start_run(state: &mut SessionState, cx: &MapContext) -> Option<EventDraft> {
    let run = open_run(state)?;
    let mut d = draft("run.started", cx);
    d.run = Some(run);
    Some(d)
}

/// Stamps identity and run cause links on a mapping's drafts, after pruning each payload
/// to its ceiling: `session` where unset
/// (unless `agent_scoped` says the type has none), `run` = the open run where unset
/// (session-scoped lifecycle types excepted), and the `run:` correlation keys the
/// sequencer resolves (`run.started` sets one, run terminals point at it).
pub(crate) fn stamp(
    drafts: &mut [EventDraft],
    session: Option<&str>,
    state: &SessionState,
    agent_scoped: impl Fn(&str) -> bool,
) {
    for d in drafts {
        // Safety net over the mapping's own gates: drop any registry-annotated member
        // above the draft's ceiling (AEP-0003 §9 rule 1); at `none` the payload empties
        // (AEP-0001 §8.2).
        aep_schemas::downlevel::prune_payload(&d.r#type, &mut d.data, d.capture);
        if agent_scoped(&d.r#type) {
            continue;
        }
        if d.session.is_none() {
            d.session = session.map(str::to_owned);
        }
        let session_level = matches!(d.r#type.as_str(), "session.started" | "session.ended");
        if d.run.is_none() && !session_level {
            d.run = state.current_run.clone();
        }
        let Some(run) = d.run.clone() else { continue };
        let key = crate::common::run_key(d.session.as_deref(), &run);
        match d.r#type.as_str() {
            "run.started" if d.correlation_key.is_none() => d.correlation_key = Some(key),
            "run.finished" | "run.failed" | "run.cancelled" if d.cause_key.is_none() => d.cause_key = Some(key),
            _ => {}
        }
    }
}

/// Closes the open run, returning it.
pub(crate) fn close_run(state: &mut SessionState) -> Option<String> {
    state.current_run.take()
}

/// The structural label a `[metadata*]` field degrades to at `metadata` (AEP-0006: the
/// 1-based index), else the label through the gate.
pub(crate) fn star_label(d: &EventDraft, cx: &MapContext, index: usize, label: &str) -> String {
    gate_text(d, cx, label).unwrap_or_else(|| index.to_string())
}

/// `{id, label}` choices with 1-based structural ids and `[metadata*]`-gated labels.
pub(crate) fn choices(d: &EventDraft, cx: &MapContext, labels: &[String]) -> Value {
    Value::Array(
        labels
            .iter()
            .enumerate()
            .map(|(i, l)| json!({"id": (i + 1).to_string(), "label": star_label(d, cx, i + 1, l)}))
            .collect(),
    )
}

/// The prompt synthesized from structure at `metadata` (AEP-0003 §9 rule 2).
pub(crate) fn synth_prompt(vendor: &str, kind: &str, subject: &str) -> String {
    format!("{vendor} requests {kind}: {subject}")
}

/// Reads a string at a `/`-separated JSON pointer.
pub(crate) fn ptr_str<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// A vendor scratch map inside `state.extra` (created on first use).
pub(crate) fn scratch<'a>(state: &'a mut SessionState, key: &str) -> &'a mut Map<String, Value> {
    let slot = state.extra.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("slot was just made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_follow_the_draft_ceiling() {
        let cx = MapContext::default();
        let d = draft("tool.requested", &cx);
        assert_eq!(d.capture, Capture::Metadata);
        assert_eq!(gate_text(&d, &cx, "x"), None);
        let a = draft("attention.requested", &cx);
        assert_eq!(a.capture, Capture::Redacted);
        let g = gate_text(&a, &cx, "token=abc123secret").unwrap();
        assert!(!g.contains("abc123secret"), "{g}");
    }

    #[test]
    fn dotted_fallback_splits_words() {
        assert_eq!(dotted_fallback("cline", "some_future_hook"), "x.cline.some.future.hook");
        assert_eq!(dotted_fallback("hermes", "PreVerify"), "x.hermes.pre.verify");
        assert_eq!(dotted_fallback("hermes", "--"), "x.hermes.session.unknown");
    }

    #[test]
    fn dotted_fallbacks_are_vendor_types() {
        assert_eq!(dotted_fallback("cline", "some_future_hook"), "x.cline.some.future.hook");
        assert_eq!(dotted_fallback("cline", "Notification"), "x.cline.session.notification");
        assert_eq!(dotted_fallback("hermes", "%%"), "x.hermes.session.unknown");
        for hook in ["Notification", "a", "x_y", "🦀", "PreToolUse"] {
            let ty = dotted_fallback("cline", hook);
            assert!(aep_schemas::validate::check_type(&ty).is_ok(), "{hook} -> {ty}");
        }
    }

    #[test]
    fn stamp_fills_identity_and_empties_payloads_at_none() {
        let cx = MapContext { capture: Capture::None, ..MapContext::default() };
        let mut st = SessionState::default();
        open_run(&mut st);
        let mut ds = vec![draft("run.finished", &cx), draft("session.started", &MapContext::default())];
        ds[0].data.insert("summary".into(), json!("x"));
        ds[1].data.insert("client".into(), json!({"name": "v"}));
        stamp(&mut ds, Some("s"), &st, |_| false);
        assert!(ds[0].data.is_empty());
        assert_eq!((ds[0].run.as_deref(), ds[0].session.as_deref()), (Some("r1"), Some("s")));
        assert_eq!(ds[0].cause_key, Some(crate::common::run_key(Some("s"), "r1")));
        assert_eq!((ds[1].run.as_deref(), ds[1].data.len()), (None, 1));
    }

    #[test]
    fn runs_open_once_and_close() {
        let mut s = SessionState::default();
        assert_eq!(open_run(&mut s).as_deref(), Some("r1"));
        assert_eq!(open_run(&mut s), None);
        assert_eq!(close_run(&mut s).as_deref(), Some("r1"));
        assert_eq!(open_run(&mut s).as_deref(), Some("r2"));
    }
}
