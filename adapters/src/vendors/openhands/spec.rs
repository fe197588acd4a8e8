//! OpenHands around its mapping: the manifest, and the agent server the [`super::observer`]
//! attaches to with its confirmation reply route (`respond_to_confirmation`). OpenHands has
//! no hooks: it is observed only over its server, so the spec names no hook adapter and no
//! install plan.

use serde_json::{Value, json};

use crate::spec::{ControlSpec, OutcomeCause, ReplyRoute, ServerSpec, VendorSpec};

/// OpenHands (its agent server, `openhands-agent-server`).
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "OpenHands",
    executables: &["openhands-agent-server"],
    hook_channel: "none: observed over its agent server ([bridges.<name>] vendor = \"openhands\")",
    families: &["session", "run", "tool", "attention", "state", "error"],
    setup: "add a [bridges.<name>] section with vendor = \"openhands\" and the agent server's url",
    control: ControlSpec::OBSERVE_ONLY,
    install: None,
    server: Some(ServerSpec { observer: Some(&super::observer::OBSERVER), reply_route: Some(ROUTE) }),
    otel: None,
    adapter: None,
};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_confirmation_is_accepted_or_rejected_with_a_reason() {
        assert_eq!(ROUTE.body("approve", Some("ignored")), json!({"accept": true}));
        assert_eq!(ROUTE.body("deny", Some("keep src")), json!({"accept": false, "reason": "keep src"}));
        assert_eq!(ROUTE.body("deny", None), json!({"accept": false, "reason": DEFAULT_REJECT}));
        assert_eq!(ROUTE.path_for("c%201", "ignored"), "/api/conversations/c%201/events/respond_to_confirmation");
        assert_eq!(ROUTE.option_list(), "approve or deny");
        assert!(ROUTE.takes_text() && (ROUTE.settled)(&json!({"kind": "x"})).is_none());
        assert!(SPEC.adapter.is_none() && std::ptr::eq(SPEC.observer().unwrap(), &super::super::observer::OBSERVER));
    }
}
