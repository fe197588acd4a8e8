//! The kap-server's approval route: apart from the spec, so the observer
//! that answers over it and the spec that lists both name it without naming each other.

use crate::spec::{OutcomeCause, ReplyRoute};
use serde_json::Value;

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
