//! Kilo Code's `serve` event stream: the OpenCode SSE mode policy
//! ([`crate::vendors::opencode::sse`]) on Kilo's profile (its `>=7.4.6` bus asks included:
//! in primary mode `permission.asked` and `question.asked` shed their answer affordances too).

use serde_json::Value;

pub use crate::vendors::opencode::sse::SseMode;
use crate::{AdapterError, EventDraft, MapContext, SessionState};

/// [`crate::vendors::opencode::sse::map_sse`] on the [`super::KILOCODE`] profile.
pub fn map_sse(
    mode: SseMode,
    event: &Value,
    state: &mut SessionState,
    cx: &MapContext,
) -> Result<Vec<EventDraft>, AdapterError> {
    crate::vendors::opencode::sse::map_sse(super::KILOCODE, mode, event, state, cx)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn primary_asks_are_read_only_and_companion_is_vendor_only() {
        let cx = MapContext::default();
        let mut st = SessionState::default();
        let q = json!({"type": "question.asked", "properties": {"id": "q", "sessionID": "s", "questions": [{"question": "Which?", "options": [{"label": "a"}]}]}});
        let d = map_sse(SseMode::Primary, &q, &mut st, &cx).unwrap();
        assert_eq!((d[0].r#type.as_str(), d[0].data["kind"].as_str()), ("attention.requested", Some("form")));
        assert!(d[0].data.get("respond_via").is_none());
        let d = map_sse(SseMode::Companion, &q, &mut st, &cx).unwrap();
        assert_eq!(d[0].r#type, "x.kilocode.question.asked");
    }
}
