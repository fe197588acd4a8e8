//! Qwen Code around its mapping: manifest, held moments and reply shapes, install plan.

use crate::spec::{ControlSpec, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook};

/// Qwen Code.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Qwen Code",
    executables: &["qwen"],
    hook_channel: "command hook (settings.json)",
    families: &["session", "run", "tool", "attention", "error", "progress", "delegation"],
    setup: "aep-bridge install qwen-code [--project DIR]",
    control: ControlSpec {
        held: &["PermissionRequest"],
        gate: None,
        reply: Some(super::super::hook_family::permission_reply),
    },
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".qwen/settings.json",
        user_file: ".qwen/settings.json",
        user_dir_env: None,
        hooks: &[
            hook("PreToolUse", true),
            hook("PostToolUse", true),
            hook("PostToolUseFailure", true),
            hook("UserPromptSubmit", false),
            hook("SessionStart", false),
            hook("SessionEnd", false),
            hook("Stop", false),
            hook("StopFailure", false),
            hook("SubagentStart", false),
            hook("SubagentStop", false),
            hook("PreCompact", false),
            hook("PostCompact", false),
            hook("Notification", false),
            hook("PermissionRequest", true),
        ],
        timeout_unit: TimeUnit::Millis,
        enable_hooks_config: false,
    })),
    server: None,
    otel: Some(&super::otel::QwenCodeOtel),
    adapter: Some(super::adapter),
};
