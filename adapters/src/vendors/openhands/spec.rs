//! OpenHands around its mapping: the manifest, and the agent server the [`super::observer`]
//! attaches to with its confirmation reply route (`respond_to_confirmation`). OpenHands has
//! no hooks: it is observed only over its server, so the spec names no hook adapter and no
//! install plan.

use crate::spec::{ControlSpec, ServerSpec, VendorSpec};

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

pub use super::route::{DEFAULT_REJECT, ROUTE};

#[cfg(test)]
mod tests {
    use serde_json::json;

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
