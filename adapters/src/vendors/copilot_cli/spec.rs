//! GitHub Copilot CLI around its mapping: manifest, the opt-in gate on `PreToolUse` and its
//! reply, install plan (the hooks in Copilot's Claude Code-compatible form).

use serde_json::{Value, json};

use crate::spec::{ControlSpec, Decision, Gate, Held, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook};

/// GitHub Copilot CLI.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "GitHub Copilot CLI",
    executables: &["copilot"],
    hook_channel: "command hook (stdin JSON, Claude Code-compatible form)",
    families: &["session", "run", "tool", "attention", "progress", "delegation"],
    setup: "aep-bridge install copilot-cli [--project DIR] (a project's hooks load once Copilot trusts the folder)",
    // A preToolUse hook may allow or deny; a failing one denies and a timed-out one lets the
    // tool go ahead, so the gate's hook gets the long timeout and the shim always exits 0.
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "PreToolUse", extra_options: &[] }),
        reply: Some(reply),
    },
    // `.github/hooks/*.json` is Copilot's own hooks folder: the file is ours alone, so an
    // uninstall takes it away whole (a leftover preToolUse hook whose command is gone would
    // deny every tool). The user level is the `hooks` key of `~/.copilot/settings.json`
    // (`$COPILOT_HOME/settings.json`). PascalCase events in Claude Code's shape get
    // Claude Code-shaped payloads (`hook_event_name`, `session_id`).
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".github/hooks/aep-bridge.json",
        user_file: ".copilot/settings.json",
        user_dir_env: Some("COPILOT_HOME"),
        hooks: &[
            hook("SessionStart", false),
            hook("SessionEnd", false),
            hook("UserPromptSubmit", false),
            hook("PreToolUse", true),
            hook("PostToolUse", true),
            hook("PostToolUseFailure", true),
            hook("Stop", false),
            hook("SubagentStart", false),
            hook("SubagentStop", false),
            hook("PreCompact", false),
            hook("Notification", false),
        ],
        timeout_unit: TimeUnit::Seconds,
        enable_hooks_config: false,
    })),
    server: None,
    otel: None,
    adapter: Some(super::adapter),
};

/// `permissionDecision` allow or deny (a denial with its reason): Copilot tells the model
/// "Denied by preToolUse hook: <reason>".
fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    let mut out =
        json!({"hookEventName": "PreToolUse", "permissionDecision": if d.allows() { "allow" } else { "deny" }});
    if !d.allows() {
        out["permissionDecisionReason"] = json!(d.reason());
    }
    Some(json!({ "hookSpecificOutput": out }))
}
