//! Antigravity around its mapping: manifest and control (observe-only); wiring is manual.

use crate::spec::{ControlSpec, VendorSpec};

/// Antigravity.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Antigravity",
    executables: &["antigravity", "agy"],
    hook_channel: "command hook (hooks.json, event name on argv)",
    families: &["session", "run", "tool"],
    setup: "register `aep-hook antigravity <EventName>` for each of the five hooks in hooks.json",
    control: ControlSpec::OBSERVE_ONLY,
    install: None,
    server: None,
    otel: None,
    adapter: Some(super::adapter),
};
