//! The OpenCode-shaped `serve` event stream (`GET /event`, SSE): the pure mode policy the
//! pin's `sse_modes` block fixes (the design record's "SSE bridge" section), shared by Kilo
//! Code on its profile. Two config-level modes, never guessed at runtime:
//!
//! - **companion** (default): a plugin adapter may observe the same agent and is the sole
//!   core-type authority. Every bus event maps to the channel-visible `x.{vendor}.*` family
//!   only: core-mapped and adapter-suppressed moments ride `x.{vendor}.<bus type>` with
//!   empty data; moments the plugin adapter already maps vendor-side keep that shape.
//! - **primary** (SSE-only deployments): the full bus mapping with the read-only-channel
//!   override: every `attention.requested` sheds `options` and `respond_via` (nothing
//!   answers through the stream), `permission.updated` becomes that read-only card (there is
//!   no held hook to carry it), and `todo.updated` maps to nothing here (the receiver drives
//!   [`super::diff_todos`] over its own snapshot).

use serde_json::{Value, json};

use super::{PluginAdapter, Profile, bus_type_segment, session_of};
use crate::common::attention_key;
use crate::vendors::plugin_common::{draft, gate_text, synth_prompt};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The server's event stream, under its base URL.
pub const STREAM_PATH: &str = "/event";

/// The server's list of pending permissions (a JSON array of the asks' `properties`), under
/// its base URL: an observer re-reads it at every connect.
pub const PENDING_PATH: &str = "/permission";

/// The bus type whose snapshot the primary observer diffs over its own state (the policy
/// maps it to nothing: the pin's `todo_updated: null`).
pub const TODO_SNAPSHOT: &str = "todo.updated";

/// The bus type after which a session's stream state can be dropped.
pub const SESSION_GONE: &str = "session.deleted";

/// The vendor request id of an entry of the pending list, if it has one.
pub fn pending_id(entry: &Value) -> Option<&str> {
    entry.get("id").and_then(Value::as_str)
}

/// The bus event an entry of the pending list stands for (the ask as it was raised), if
/// the entry names its request.
pub fn pending_ask(entry: Value) -> Option<Value> {
    pending_id(&entry)?;
    Some(json!({"type": "permission.asked", "properties": entry}))
}

/// The SSE channel's mode (`[bridges.<name>] mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SseMode {
    /// Channel visibility only, beside a plugin adapter (the default).
    #[default]
    Companion,
    /// The full mapping, read-only (SSE-only deployments).
    Primary,
}

/// Maps one bus event off the stream (`{type, properties}`, the SSE `data` of `GET /event`).
/// `state` is the stream's per-session state (runs in primary mode; companion owns none).
pub fn map_sse(
    profile: Profile,
    mode: SseMode,
    event: &Value,
    state: &mut SessionState,
    cx: &MapContext,
) -> Result<Vec<EventDraft>, AdapterError> {
    let ty = event
        .get("type")
        .and_then(Value::as_str)
        .ok_or(AdapterError::MissingField { field: "type", expected: "string" })?;
    let moment = json!({"kind": "bus", "event": event});
    let session = session_of(&moment);
    let adapter = PluginAdapter::new(profile);
    let call = HookCall { event: None, payload: &moment };
    match mode {
        SseMode::Companion => {
            // Companion owns no runs: the adapter maps on a scratch state.
            let drafts = adapter.map(&call, &mut SessionState::default(), cx)?;
            let own = format!("x.{}.", profile.vendor);
            if !drafts.is_empty() && drafts.iter().all(|d| d.r#type.starts_with(&own)) {
                return Ok(drafts
                    .into_iter()
                    .map(|mut d| {
                        d.run = None;
                        d
                    })
                    .collect());
            }
            let mut d = draft(format!("x.{}.{}", profile.vendor, bus_type_segment(ty)), cx);
            d.severity = Some(aep_schemas::Severity::Debug);
            if ty != "server.connected" {
                d.session = session;
            }
            Ok(vec![d])
        }
        SseMode::Primary => match ty {
            "todo.updated" => Ok(Vec::new()),
            "permission.updated" => {
                let props = event.get("properties").unwrap_or(&Value::Null);
                let mut d = read_only_card(profile.vendor, props, cx);
                d.session = session;
                d.run.clone_from(&state.current_run);
                Ok(vec![d])
            }
            _ => {
                let mut drafts = adapter.map(&call, state, cx)?;
                for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
                    // The read-only-channel rule (AEP-0008): no answer affordance is claimed.
                    d.data.remove("options");
                    d.data.remove("respond_via");
                }
                Ok(drafts)
            }
        },
    }
}

/// `attention.requested` for a bus `permission.updated`: no options, no `respond_via`;
/// the vendor title rides only at redacted+ (AEP-0003 §9 rule 2).
fn read_only_card(vendor: &str, perm: &Value, cx: &MapContext) -> EventDraft {
    let kind = super::permission_kind(perm);
    let mut d = draft("attention.requested", cx);
    d.subject = Some(kind.to_owned());
    d.data.insert("kind".into(), json!("permission"));
    let prompt = match perm.get("title").and_then(Value::as_str).and_then(|t| gate_text(&d, cx, t)) {
        Some(title) => format!("Permission requested: {kind} \u{2014} {title}"),
        None => synth_prompt(vendor, "permission", kind),
    };
    d.data.insert("prompt".into(), json!(prompt));
    d.correlation_key = perm.get("id").and_then(Value::as_str).map(attention_key);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vendors::opencode::OPENCODE;

    fn ev(ty: &str, props: Value) -> Value {
        json!({"type": ty, "properties": props})
    }

    #[test]
    fn companion_emits_no_core_type() {
        let cx = MapContext::default();
        let mut st = SessionState::default();
        for (ty, props) in [
            ("session.created", json!({"info": {"id": "a"}})),
            ("message.updated", json!({"info": {"id": "m", "sessionID": "a", "role": "user"}})),
            ("permission.updated", json!({"id": "p", "type": "bash", "sessionID": "a"})),
            ("todo.updated", json!({"sessionID": "a", "todos": [{"id": "1", "content": "x", "status": "pending"}]})),
            ("session.idle", json!({"sessionID": "a"})),
        ] {
            let d = map_sse(OPENCODE, SseMode::Companion, &ev(ty, props), &mut st, &cx).unwrap();
            assert_eq!(d.len(), 1, "{ty}");
            assert!(d[0].r#type.starts_with("x.opencode."), "{ty}: {}", d[0].r#type);
            assert!(d[0].data.is_empty() && d[0].run.is_none());
            assert_eq!(d[0].session.as_deref(), Some("a"), "{ty}");
        }
        assert_eq!(st.current_run, None, "companion owns no runs");
    }

    #[test]
    fn primary_runs_a_turn_and_sheds_answer_affordances() {
        let cx = MapContext::default();
        let mut st = SessionState::default();
        let user = ev("message.updated", json!({"info": {"id": "m", "sessionID": "a", "role": "user"}}));
        let d = map_sse(OPENCODE, SseMode::Primary, &user, &mut st, &cx).unwrap();
        assert_eq!((d[0].r#type.as_str(), d[0].run.as_deref()), ("run.started", Some("r1")));
        let perm = ev("permission.updated", json!({"id": "p", "type": "bash", "sessionID": "a", "title": "ls"}));
        let d = map_sse(OPENCODE, SseMode::Primary, &perm, &mut st, &cx).unwrap();
        assert_eq!(d[0].r#type, "attention.requested");
        assert!(d[0].data.get("options").is_none() && d[0].data.get("respond_via").is_none());
        assert_eq!(d[0].run.as_deref(), Some("r1"));
        let d =
            map_sse(OPENCODE, SseMode::Primary, &ev("session.idle", json!({"sessionID": "a"})), &mut st, &cx).unwrap();
        assert_eq!((d[0].r#type.as_str(), d[0].run.as_deref()), ("run.finished", Some("r1")));
        assert!(map_sse(OPENCODE, SseMode::Primary, &json!({"properties": {}}), &mut st, &cx).is_err());
    }

    #[test]
    fn the_live_permission_asked_member_is_the_same_read_only_card() {
        // OpenCode 1.18.33's shape: the kind rides `permission`, there is no title.
        let cx = MapContext::default();
        let mut st = SessionState::default();
        let asked = ev(
            "permission.asked",
            json!({"id": "per_1", "sessionID": "a", "permission": "bash", "patterns": ["echo hi"],
                   "metadata": {"command": "echo hi"}, "always": ["echo *"], "tool": {"messageID": "m", "callID": "c"}}),
        );
        let d = map_sse(OPENCODE, SseMode::Primary, &asked, &mut st, &cx).unwrap();
        assert_eq!((d[0].r#type.as_str(), d[0].subject.as_deref()), ("attention.requested", Some("bash")));
        assert_eq!(d[0].data["prompt"], "opencode requests permission: bash");
        assert!(d[0].data.get("options").is_none() && d[0].data.get("respond_via").is_none());
        assert_eq!(d[0].correlation_key.as_deref(), Some("attention:per_1"));
        let d = map_sse(OPENCODE, SseMode::Companion, &asked, &mut st, &cx).unwrap();
        assert_eq!(d[0].r#type, "x.opencode.permission.asked");
    }

    #[test]
    fn a_pending_entry_is_the_ask_that_raised_it() {
        let entry = json!({"id": "per_1", "sessionID": "s", "permission": "bash"});
        assert_eq!(pending_id(&entry), Some("per_1"));
        assert_eq!(pending_ask(entry.clone()), Some(json!({"type": "permission.asked", "properties": entry})));
        assert_eq!(pending_ask(json!({"sessionID": "s"})), None);
        assert_eq!(pending_ask(json!({"id": 1})), None);
    }
}
