//! Factory Droid around its mapping: manifest, the opt-in gate on `PreToolUse` and its
//! reply, install plan (Claude Code's hooks shape in Droid's `settings.json`).

use crate::spec::{ControlSpec, Gate, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook};

/// Factory Droid.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Factory Droid",
    executables: &["droid"],
    hook_channel: "command hook (stdin JSON, Claude Code contract)",
    families: &["session", "run", "tool", "attention", "progress", "delegation"],
    setup: "aep-bridge install droid [--project DIR]",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "PreToolUse", extra_options: &[] }),
        reply: Some(super::super::hook_family::pre_tool_deny_reply),
    },
    // Droid reads `hooks` from `.factory/settings.json` (project) and `~/.factory/settings.json`
    // beside its own keys (`customModels`, ...), which the merge keeps.
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".factory/settings.json",
        user_file: ".factory/settings.json",
        user_dir_env: None,
        hooks: &[
            hook("SessionStart", false),
            hook("SessionEnd", false),
            hook("UserPromptSubmit", false),
            hook("PreToolUse", true),
            hook("PostToolUse", true),
            hook("Stop", false),
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
