//! Codex around its mapping: manifest, held moments and reply shapes, install plan.

use crate::spec::{ControlSpec, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook, hook_capped};

/// Codex.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Codex",
    executables: &["codex"],
    hook_channel: "command hook (hooks.json) and notify",
    families: &["session", "run", "tool", "attention", "error", "delegation"],
    setup: "aep-bridge install codex [--project DIR]",
    control: ControlSpec {
        held: &["PermissionRequest"],
        gate: None,
        reply: Some(super::super::hook_family::permission_reply),
    },
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".codex/hooks.json",
        user_file: ".codex/hooks.json",
        user_dir_env: Some("CODEX_HOME"),
        hooks: &[
            hook("PreToolUse", true),
            hook("PermissionRequest", true),
            hook("PostToolUse", true),
            hook("PreCompact", false),
            hook("PostCompact", false),
            hook("SessionStart", false),
            // Codex 0.171 clamps a SessionEnd hook to 3 s and warns on stderr at every run.
            hook_capped("SessionEnd", false, 3),
            hook("UserPromptSubmit", false),
            hook("SubagentStart", false),
            hook("SubagentStop", false),
            hook("Stop", false),
        ],
        timeout_unit: TimeUnit::Seconds,
        enable_hooks_config: false,
    })),
    server: None,
    otel: Some(&super::otel::CodexOtel),
    adapter: Some(super::adapter),
};
