//! Kimi Code around its mapping: manifest, the opt-in gate on `PreToolUse` and its binary
//! reply; the `kimi web` server (kap-server) the [`super::observer`] attaches to and its
//! approval reply route; wiring is manual (`~/.kimi-code/config.toml`).

use serde_json::Value;

use crate::spec::{ControlSpec, Gate, OutcomeCause, ReplyRoute, ServerSpec, VendorSpec};

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

/// The kap-server's approval route (the design record's opt-in `control.attention.respond`):
/// `POST {server}/api/v1/sessions/{session}/approvals/{id}` `{"decision": option}`, free text
/// as `feedback`; the answer is a `{code, msg, data}` envelope whose code 0 is the ack.
pub const ROUTE: ReplyRoute = ReplyRoute {
    bus: None,
    settled,
    options: &[("approved", "Approve"), ("rejected", "Reject")],
    path: "/api/v1/sessions/{session}/approvals/{id}",
    option_field: "decision",
    text_field: Some("feedback"),
    verdict: Some(verdict),
    encode: None,
    outcome_cause: OutcomeCause::Answered,
};

/// The vendor request id a kap-server frame (`{type, payload}`) settles: an approval's
/// `event.approval.resolved`, a question's `event.question.answered` / `.dismissed`.
pub fn settled(frame: &Value) -> Option<&str> {
    let key = match frame.get("type")?.as_str()? {
        "event.approval.resolved" => "approval_id",
        "event.question.answered" | "event.question.dismissed" => "question_id",
        _ => return None,
    };
    frame.get("payload")?.get(key)?.as_str()
}

/// The ack of a kap-server answer: its envelope's `code` 0 (the server answers HTTP 200 with
/// the error in the envelope, e.g. 40404 not found, 40902 already resolved).
pub fn verdict(body: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match v.get("code").and_then(Value::as_i64) {
        Some(0) => Ok(()),
        code => {
            let msg = v.get("msg").and_then(Value::as_str).unwrap_or("no envelope");
            Err(format!("the server answered code {}: {msg}", code.unwrap_or(-1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

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
