//! The `kimi web` channel: the kap-server WebSocket event stream (`/api/v1/ws`), the pure
//! mode policy the pin's `ws_modes` block fixes (the design record's "kimi web channel").
//! Input is one WS envelope as received: `{type, seq, session_id, timestamp, payload,
//! volatile?}`.
//!
//! - Volatile frames never emit in either mode (the vendor's own do-not-persist marker), and
//!   the internal `permission.approval.*` bus echoes are deduped in favor of their
//!   `event.approval.*` wire twins: one moment, one carrier.
//! - **companion** (default; the hook adapter is the sole core-type authority): only the
//!   channel-visible `x.kimi-code.web.<type>` family, empty data.
//! - **primary** (stream-only deployments): the vendor's real turn boundaries carry the run
//!   pair, `tool.call.started` opens the tool pair (`tool.result` names no tool: the
//!   receiver pairs it by call id, so it maps to nothing here), every ask maps to
//!   `attention.requested` WITHOUT options or `respond_via` (the read-only-channel rule). No
//!   session lifecycle is fabricated: kap sessions outlive connections.

use serde_json::{Map, Value, json};

use super::VENDOR;
use crate::common::{self, Builder, attention_key, gate_text, gate_value, run_key, tool_key};
use crate::{EventDraft, MapContext};

/// One of the kap-server's per-session lists of pending asks, which an observer reads to
/// reconcile the asks it tracks with the server's (raised unseen, or settled unseen).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingList {
    /// The collection under the session (`approvals`, `questions`).
    pub collection: &'static str,
    /// The frame type an entry stands for (the ask as it was raised).
    pub frame: &'static str,
    /// The entry's request id field.
    pub id: &'static str,
}

/// The pending approvals and questions.
pub const PENDING_LISTS: &[PendingList] = &[
    PendingList { collection: "approvals", frame: "event.approval.requested", id: "approval_id" },
    PendingList { collection: "questions", frame: "event.question.requested", id: "question_id" },
];

impl PendingList {
    /// The list's path under the server's base URL, for `session` given as an encoded segment.
    pub fn path(&self, session: &str) -> String {
        format!("/api/v1/sessions/{session}/{}?status=pending", self.collection)
    }

    /// The entries of a list's answer body: its `{code: 0, data: {items}}` envelope's items;
    /// `None` when the envelope is not a success (the list is unknown, not empty).
    pub fn items(body: &[u8]) -> Option<Vec<Value>> {
        let v: Value = serde_json::from_slice(body).ok()?;
        if v.get("code").and_then(Value::as_i64) != Some(0) {
            return None;
        }
        Some(v.pointer("/data/items").and_then(Value::as_array).cloned().unwrap_or_default())
    }

    /// The request id of an entry, if it names one.
    pub fn id_of<'a>(&self, entry: &'a Value) -> Option<&'a str> {
        entry.get(self.id).and_then(Value::as_str)
    }

    /// The envelope an entry of `session` stands for, as the stream would have carried it.
    pub fn frame_of(&self, session: &str, mut entry: Value) -> Value {
        entry["type"] = json!(self.frame);
        entry["sessionId"] = json!(session);
        json!({"type": self.frame, "session_id": session, "payload": entry})
    }
}

/// The channel's mode (`[bridges.<name>] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WsMode {
    /// Channel visibility only, beside the hook adapter (the default).
    #[default]
    Companion,
    /// The full wire mapping, read-only.
    Primary,
}

/// `x.kimi-code.web.<type>`, the type sanitized to `[a-z0-9_.]` segments.
pub fn web_type(ty: &str) -> String {
    let clean: String =
        ty.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c.to_ascii_lowercase() } else { '.' }).collect();
    let segs: Vec<&str> = clean.split('.').filter(|s| !s.is_empty()).collect();
    let rest = match segs.len() {
        0 => "unknown.event".to_owned(),
        1 => format!("{}.event", segs[0]),
        _ => segs.join("."),
    };
    format!("x.{VENDOR}.web.{rest}")
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The run id of a vendor turn (`turnId` / `turn_id`, numbered per session).
fn turn_run(p: &Value) -> Option<String> {
    p.get("turnId").or_else(|| p.get("turn_id")).filter(|t| !t.is_null()).map(|t| match t {
        Value::String(s) => format!("turn_{s}"),
        other => format!("turn_{other}"),
    })
}

/// Maps one WS envelope. Drafts carry `session` (the envelope's `session_id`, else the
/// payload's) and, in primary mode, the vendor turn as `run`.
pub fn map_ws(mode: WsMode, frame: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let Some(ty) = s(frame, "type") else { return Vec::new() };
    if frame.get("volatile").and_then(Value::as_bool) == Some(true) || ty.starts_with("permission.approval.") {
        return Vec::new();
    }
    let empty = json!({});
    let p = frame.get("payload").unwrap_or(&empty);
    let session = s(frame, "session_id").or_else(|| s(p, "sessionId")).or_else(|| s(p, "session_id"));
    let mut out = match mode {
        WsMode::Companion => vec![debug(Builder::new(web_type(ty), cx).build())],
        WsMode::Primary => primary(ty, p, session, cx),
    };
    let run = if mode == WsMode::Primary { turn_run(p) } else { None };
    for d in &mut out {
        d.session = session.map(str::to_owned);
        if d.run.is_none() && common::run_scoped(&d.r#type) {
            d.run.clone_from(&run);
        }
    }
    out
}

fn debug(mut d: EventDraft) -> EventDraft {
    d.severity = Some(aep_schemas::Severity::Debug);
    d
}

fn primary(ty: &str, p: &Value, session: Option<&str>, cx: &MapContext) -> Vec<EventDraft> {
    let run = turn_run(p);
    let key = run.as_deref().map(|r| run_key(session, r));
    match ty {
        "turn.started" => {
            let user = p.pointer("/origin/kind").and_then(Value::as_str) == Some("user");
            let mut d = Builder::new("run.started", cx)
                .meta_opt("trigger", user.then_some("user"))
                .text("prompt", s(p, "prompt"))
                .build();
            d.correlation_key = key;
            vec![d]
        }
        "turn.ended" => {
            let mut d = match s(p, "reason") {
                Some("completed") => Builder::new("run.finished", cx).build(),
                // The channel does not know who cancelled: no `by` claim.
                Some("cancelled") => Builder::new("run.cancelled", cx).build(),
                other => Builder::new("run.failed", cx).meta("reason", other.unwrap_or("unknown")).build(),
            };
            d.cause_key = key;
            vec![d]
        }
        "tool.call.started" => {
            let name = s(p, "name").unwrap_or("unknown");
            vec![common::tool_requested(name, s(p, "toolCallId"), p.get("args"), cx)]
        }
        // The result names no tool and `tool.*` requires one: the receiver pairs it.
        "tool.result" => Vec::new(),
        "event.approval.requested" => {
            let id = s(p, "approval_id");
            let tool = s(p, "tool_name").unwrap_or("unknown");
            let b = Builder::new("attention.requested", cx);
            let prompt = s(p, "action")
                .and_then(|a| gate_text(a, b.ceiling(), cx))
                .unwrap_or_else(|| common::synthesized_prompt(VENDOR, "permission", tool));
            let mut d = b.meta("kind", "permission").meta("prompt", prompt).subject(id).build();
            d.correlation_key = id.map(attention_key);
            d.cause_key = s(p, "tool_call_id").map(tool_key);
            vec![d]
        }
        "event.approval.resolved" => {
            let id = s(p, "approval_id");
            let mut d = match s(p, "decision").filter(|d| !d.is_empty()) {
                Some(decision) => {
                    let b = Builder::new("attention.answered", cx);
                    let mut answer = Map::new();
                    answer.insert("option".into(), json!(decision));
                    if let Some(t) =
                        s(p, "feedback").filter(|f| !f.is_empty()).and_then(|f| gate_text(f, b.ceiling(), cx))
                    {
                        answer.insert("text".into(), json!(t));
                    }
                    b.meta("answer", Value::Object(answer)).meta("via", "oob").subject(id).build()
                }
                None => Builder::new("attention.resolved", cx).meta("resolution", "dismissed").subject(id).build(),
            };
            d.cause_key = id.map(attention_key);
            vec![d]
        }
        "event.question.requested" => vec![question_card(p, cx)],
        "event.question.answered" => {
            let id = s(p, "question_id");
            let b = Builder::new("attention.answered", cx);
            let mut answer = Map::new();
            if let Some(v) = p.get("answers").and_then(|a| gate_value(a, b.ceiling(), cx)) {
                answer.insert("values".into(), v);
            }
            let mut d = b.meta("answer", Value::Object(answer)).meta("via", "oob").subject(id).build();
            d.cause_key = id.map(attention_key);
            vec![d]
        }
        "event.question.dismissed" => {
            let id = s(p, "question_id");
            let mut d = Builder::new("attention.resolved", cx).meta("resolution", "dismissed").subject(id).build();
            d.cause_key = id.map(attention_key);
            vec![d]
        }
        "event.session.work_changed" => vec![debug(
            Builder::new(web_type(ty), cx)
                .meta_opt("busy", p.get("busy").and_then(Value::as_bool))
                .meta_opt("pending_interaction", s(p, "pending_interaction"))
                .build(),
        )],
        _ => vec![debug(Builder::new(web_type(ty), cx).build())],
    }
}

/// The question loop on the AEP-0002 §5.2 field shape: every item a `select` with the
/// vendor option ids preserved, `allow_other` -> `other`; the texts at redacted+, the
/// structural 1-based index below.
fn question_card(p: &Value, cx: &MapContext) -> EventDraft {
    let id = s(p, "question_id");
    let b = Builder::new("attention.requested", cx);
    let ceiling = b.ceiling();
    let shown = |t: &str, i: usize| gate_text(t, ceiling, cx).unwrap_or_else(|| i.to_string());
    let qs = p.get("questions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
    let fields: Vec<Value> = qs
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let mut f = Map::new();
            f.insert("id".into(), json!(s(q, "id").map(str::to_owned).unwrap_or_else(|| (i + 1).to_string())));
            f.insert("type".into(), json!("select"));
            f.insert("label".into(), json!(shown(s(q, "question").unwrap_or(""), i + 1)));
            if q.get("allow_other").and_then(Value::as_bool) == Some(true) {
                f.insert("other".into(), json!(true));
            }
            let opts = q.get("options").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
            let choices: Vec<Value> = opts
                .iter()
                .enumerate()
                .map(|(j, o)| {
                    let oid = s(o, "id").map(str::to_owned).unwrap_or_else(|| (j + 1).to_string());
                    json!({"id": oid, "label": shown(s(o, "label").unwrap_or(""), j + 1)})
                })
                .collect();
            f.insert("choices".into(), Value::Array(choices));
            Value::Object(f)
        })
        .collect();
    let prompt = match qs {
        [one] => s(one, "question").and_then(|t| gate_text(t, ceiling, cx)),
        _ => None,
    };
    let n = qs.len();
    let prompt = prompt.unwrap_or_else(|| format!("{VENDOR} asks {n} question{}", if n == 1 { "" } else { "s" }));
    let mut d = b.meta("kind", "form").meta("prompt", prompt).meta("fields", Value::Array(fields)).subject(id).build();
    d.correlation_key = id.map(attention_key);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ty: &str, payload: Value) -> Value {
        json!({"type": ty, "seq": 3, "session_id": "ks", "payload": payload})
    }

    #[test]
    fn primary_turns_are_the_run_pair() {
        let cx = MapContext::default();
        let d = map_ws(WsMode::Primary, &frame("turn.started", json!({"turnId": 4, "origin": {"kind": "user"}})), &cx);
        assert_eq!(
            (d[0].r#type.as_str(), d[0].run.as_deref(), d[0].session.as_deref()),
            ("run.started", Some("turn_4"), Some("ks"))
        );
        let d = map_ws(WsMode::Primary, &frame("turn.ended", json!({"turnId": 4, "reason": "max_steps"})), &cx);
        assert_eq!(d[0].r#type, "run.failed");
        assert_eq!(d[0].data["reason"], json!("max_steps"));
        assert_eq!(d[0].cause_key.as_deref(), Some("run:ks:turn_4"));
    }

    #[test]
    fn volatile_and_bus_echoes_never_emit() {
        let cx = MapContext::default();
        for mode in [WsMode::Companion, WsMode::Primary] {
            let mut v = frame("assistant.delta", json!({}));
            v["volatile"] = json!(true);
            assert!(map_ws(mode, &v, &cx).is_empty());
            assert!(map_ws(mode, &frame("permission.approval.resolved", json!({})), &cx).is_empty());
            assert!(map_ws(mode, &json!({"no": "type"}), &cx).is_empty());
        }
        let d = map_ws(WsMode::Companion, &frame("turn.started", json!({"turnId": 1})), &cx);
        assert_eq!(d[0].r#type, "x.kimi-code.web.turn.started");
        assert!(d[0].run.is_none() && d[0].data.is_empty());
        assert_eq!(web_type("Ping"), "x.kimi-code.web.ping.event");
    }

    #[test]
    fn questions_degrade_to_indexes_at_metadata() {
        let cx = MapContext { attention_capture: aep_schemas::Capture::Metadata, ..MapContext::default() };
        let q = json!({"question_id": "q", "questions": [{"id": "a", "question": "Secret?", "options": [{"id": "o1", "label": "x"}], "allow_other": true}]});
        let d = map_ws(WsMode::Primary, &frame("event.question.requested", q), &cx);
        assert_eq!(d[0].data["prompt"], json!("kimi-code asks 1 question"));
        assert_eq!(d[0].data["fields"][0]["label"], json!("1"));
        assert_eq!(d[0].data["fields"][0]["choices"][0], json!({"id": "o1", "label": "1"}));
        assert_eq!(d[0].data["fields"][0]["other"], json!(true));
    }

    #[test]
    fn pending_entries_are_the_frames_that_raised_them() {
        let [approvals, questions] = PENDING_LISTS else { panic!("two lists") };
        assert_eq!(approvals.path("s%201"), "/api/v1/sessions/s%201/approvals?status=pending");
        assert_eq!(questions.path("s"), "/api/v1/sessions/s/questions?status=pending");
        let entry = json!({"approval_id": "a1", "tool_call_id": "c1"});
        assert_eq!((approvals.id_of(&entry), questions.id_of(&entry)), (Some("a1"), None));
        assert_eq!(
            approvals.frame_of("s", entry),
            json!({"type": "event.approval.requested", "session_id": "s", "payload":
                {"approval_id": "a1", "tool_call_id": "c1", "type": "event.approval.requested", "sessionId": "s"}})
        );
        assert_eq!(
            PendingList::items(br#"{"code":0,"data":{"items":[{"approval_id":"a1"}]}}"#).map(|v| v.len()),
            Some(1)
        );
        assert_eq!(PendingList::items(br#"{"code":0,"data":{}}"#), Some(vec![]));
        assert_eq!(PendingList::items(br#"{"code":40404,"msg":"no session"}"#), None);
        assert_eq!(PendingList::items(b"<html>"), None);
    }
}
