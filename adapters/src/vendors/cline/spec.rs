//! Cline around its mapping: manifest and control (observe-only: its approval loop is a
//! hub surface, not a hook); wiring is manual.

use crate::spec::{ControlSpec, VendorSpec};

/// Cline.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Cline",
    executables: &["cline"],
    hook_channel: "subprocess hook (stdin JSON, .cline/hooks/)",
    families: &["session", "run", "tool", "attention", "error"],
    setup: "a hook script in .cline/hooks/ running `aep-hook cline <hookName>`",
    control: ControlSpec::OBSERVE_ONLY,
    install: None,
    otel: None,
    adapter: super::adapter,
};
