//! Gemini CLI around its mapping: manifest, control (observe-only), install plan.

use crate::spec::{ControlSpec, HooksInstall, InstallSpec, TimeUnit, VendorSpec, hook};

/// Gemini CLI.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Gemini CLI",
    executables: &["gemini"],
    hook_channel: "command hook (settings.json)",
    families: &["session", "run", "tool", "progress"],
    setup: "aep-bridge install gemini-cli [--project DIR]",
    control: ControlSpec::OBSERVE_ONLY,
    install: Some(InstallSpec::Hooks(HooksInstall {
        project_file: ".gemini/settings.json",
        user_file: ".gemini/settings.json",
        user_dir_env: None,
        hooks: &[
            hook("BeforeTool", true),
            hook("AfterTool", true),
            hook("BeforeAgent", false),
            hook("AfterAgent", false),
            hook("BeforeModel", false),
            hook("AfterModel", false),
            hook("BeforeToolSelection", false),
            hook("SessionStart", false),
            hook("SessionEnd", false),
            hook("Notification", false),
            hook("PreCompress", false),
        ],
        timeout_unit: TimeUnit::Millis,
        enable_hooks_config: true,
    })),
    server: None,
    otel: Some(&super::otel::GeminiCliOtel),
    adapter: Some(super::adapter),
};
