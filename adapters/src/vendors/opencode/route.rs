//! OpenCode's reply route and the plugin bus moment that carries its asks: apart from the spec, so the observer
//! that answers over it and the spec that lists both name it without naming each other.

use crate::spec::{BusMoment, OutcomeCause, ReplyRoute};
use serde_json::Value;

/// The plugin's `bus` moment (`{kind: "bus", event: {type, properties}, serverUrl}`): the
/// server's bus asks arrive there, and so do their settling broadcasts.
pub const BUS: BusMoment = BusMoment { hook: super::moment::BUS, event: "/event", server: "/serverUrl" };

/// The server's permission reply enum, offered verbatim on a bus ask's card.
pub const REPLY_OPTIONS: &[(&str, &str)] = &[("once", "Allow once"), ("always", "Always allow"), ("reject", "Reject")];

/// OpenCode's reply route: `POST {server}/session/{session}/permissions/{id}`
/// `{"response": option}`, a 2xx the ack. Its body has no room for free text.
pub const ROUTE: ReplyRoute = ReplyRoute {
    bus: Some(BUS),
    settled,
    options: REPLY_OPTIONS,
    path: "/session/{session}/permissions/{id}",
    option_field: "response",
    text_field: None,
    verdict: None,
    encode: None,
    outcome_cause: OutcomeCause::Answered,
};

/// The vendor request id a bus event settles: `permission.replied` (`permissionID`, or
/// `requestID` as the newer bus names it) and `question.replied` (`requestID`).
pub fn settled(ev: &Value) -> Option<&str> {
    let ty = ev.get("type")?.as_str()?;
    if !matches!(ty, "permission.replied" | "question.replied") {
        return None;
    }
    ev.pointer("/properties/permissionID").or_else(|| ev.pointer("/properties/requestID"))?.as_str()
}
