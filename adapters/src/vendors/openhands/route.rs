//! The agent server's confirmation route: apart from the spec, so the observer
//! that answers over it and the spec that lists both name it without naming each other.

use crate::spec::{OutcomeCause, ReplyRoute};
use serde_json::{Value, json};

/// The vendor's own default rejection reason (`ConfirmationResponseRequest.reason`).
pub const DEFAULT_REJECT: &str = "User rejected the action.";

/// The agent server's confirmation route (the design record's gated
/// `control.attention.respond`): `POST {server}/api/conversations/{session}/events/respond_to_confirmation`
/// with `{"accept": true}` or `{"accept": false, "reason": text}` (the vendor's default
/// reason without one); a 2xx is the ack. The server has one confirmation plane per
/// conversation, so the path names no request; the outcome is the observed status flip
/// out of `waiting_for_confirmation`, and both outcomes are caused by the command.
pub const ROUTE: ReplyRoute = ReplyRoute {
    bus: None,
    settled: |_| None,
    options: &[("approve", "Approve"), ("deny", "Deny")],
    path: "/api/conversations/{session}/events/respond_to_confirmation",
    option_field: "accept",
    text_field: Some("reason"),
    verdict: None,
    encode: Some(encode),
    outcome_cause: OutcomeCause::Command,
};

/// `{"accept": true}` for `approve`; `{"accept": false, "reason": ...}` otherwise.
fn encode(option: &str, text: Option<&str>) -> Value {
    if option == "approve" {
        json!({"accept": true})
    } else {
        json!({"accept": false, "reason": text.unwrap_or(DEFAULT_REJECT)})
    }
}
