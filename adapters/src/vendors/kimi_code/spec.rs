//! Kimi Code around its mapping: manifest, the opt-in gate on `PreToolUse` and its binary
//! reply; the `kimi web` server (kap-server) the [`super::observer`] attaches to and its
//! approval reply route; wiring is manual (`~/.kimi-code/config.toml`).

use crate::spec::{ControlSpec, Gate, ServerSpec, VendorSpec};

/// Kimi Code CLI.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Kimi Code CLI",
    executables: &["kimi"],
    hook_channel: "command hook (~/.kimi-code/config.toml)",
    families: &["session", "run", "tool", "attention", "error", "progress", "delegation"],
    setup: "add `aep-hook kimi-code` hooks to ~/.kimi-code/config.toml",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "PreToolUse", extra_options: &[] }),
        reply: Some(super::super::hook_family::pre_tool_deny_reply),
    },
    install: None,
    server: Some(ServerSpec { observer: Some(&super::observer::OBSERVER), reply_route: Some(ROUTE) }),
    otel: None,
    adapter: Some(super::adapter),
};

pub use super::route::{ROUTE, settled, verdict};

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn resolutions_settle_their_ask_by_its_own_id() {
        let frame = |ty: &str, p: Value| json!({"type": ty, "session_id": "s", "payload": p});
        let resolved = frame("event.approval.resolved", json!({"approval_id": "a1", "question_id": "q9"}));
        assert_eq!(settled(&resolved), Some("a1"));
        assert_eq!(settled(&frame("event.question.answered", json!({"question_id": "q1"}))), Some("q1"));
        assert_eq!(settled(&frame("event.question.dismissed", json!({"question_id": "q2"}))), Some("q2"));
        assert_eq!(settled(&frame("event.approval.requested", json!({"approval_id": "a1"}))), None);
        assert_eq!(settled(&frame("event.question.answered", json!({"approval_id": "a1"}))), None);
        // No plugin forwards the kap-server's frames: nothing settles through a hook.
        assert_eq!(ROUTE.settled_by("PreToolUse", &resolved), None);
        assert!(!ROUTE.asks_on("PreToolUse"));
    }

    #[test]
    fn the_decision_rides_with_feedback_and_the_envelope_is_the_verdict() {
        assert_eq!(ROUTE.path_for("s%201", "a1"), "/api/v1/sessions/s%201/approvals/a1");
        assert_eq!(ROUTE.body("rejected", Some("why")), json!({"decision": "rejected", "feedback": "why"}));
        assert_eq!(ROUTE.option_list(), "approved or rejected");
        assert_eq!(ROUTE.accepted(br#"{"code":0,"msg":"ok","data":{}}"#), Ok(()));
        assert_eq!(
            ROUTE.accepted(br#"{"code":40902,"msg":"already resolved"}"#),
            Err("the server answered code 40902: already resolved".into())
        );
        assert_eq!(ROUTE.accepted(b"<html>"), Err("the server answered code -1: no envelope".into()));
    }
}
