//! Hermes Agent around its mapping: manifest, the opt-in gate on `pre_tool_call` and its
//! reply shape; `aep-bridge install hermes` appends the shell-hook block to its config.

use serde_json::{Value, json};

use crate::spec::{ControlSpec, Decision, Gate, Held, InstallSpec, VendorSpec, YamlHooksInstall};

/// Hermes Agent.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Hermes Agent",
    executables: &["hermes"],
    hook_channel: "shell hook (stdin envelope)",
    families: &["session", "run", "tool", "attention", "error"],
    setup: "`aep-bridge install hermes` (a `hooks:` block in ~/.hermes/config.yaml running `aep-hook hermes`)",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "pre_tool_call", extra_options: &[] }),
        reply: Some(reply),
    },
    // Hermes reads shell hooks from its home's `config.yaml` only (`$HERMES_HOME` when set);
    // the payload names its hook (`hook_event_name`). The mapped events of the adapter.
    install: Some(InstallSpec::YamlHooks(YamlHooksInstall {
        user_file: ".hermes/config.yaml",
        user_dir_env: Some("HERMES_HOME"),
        events: &[
            "on_session_start",
            "pre_llm_call",
            "pre_tool_call",
            "post_tool_call",
            "pre_approval_request",
            "post_approval_response",
            "on_session_end",
            "subagent_start",
            "subagent_stop",
            "api_request_error",
            "on_session_finalize",
            "on_session_reset",
        ],
        note: Some(
            "Hermes asks once per hook before running it: approve on the first interactive start, or pass \
             `--accept-hooks` (or HERMES_ACCEPT_HOOKS=1) to a headless `hermes -z`",
        ),
    })),
    server: None,
    otel: None,
    adapter: Some(super::adapter),
};

/// Allow is "no objection" (`{}`); a denial blocks the call with the reason.
fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    Some(if d.allows() { json!({}) } else { json!({"action": "block", "message": d.reason()}) })
}
