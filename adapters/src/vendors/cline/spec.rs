//! Cline around its mapping: manifest and control (observe-only: its approval loop is a
//! hub surface, not a hook); `aep-bridge install cline` writes one hook script per event.

use crate::spec::{ControlSpec, HookScriptsInstall, InstallSpec, VendorSpec};

/// Cline.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "Cline",
    executables: &["cline"],
    hook_channel: "subprocess hook (stdin JSON, .cline/hooks/)",
    families: &["session", "run", "tool", "attention", "error"],
    setup: "`aep-bridge install cline` (hook scripts in .cline/hooks/ running `aep-hook cline`)",
    control: ControlSpec::OBSERVE_ONLY,
    // Cline 3.x runs every file of `.cline/hooks/` (project) or `~/.cline/hooks/` (user,
    // `$CLINE_DIR/hooks` when set) whose base name is an event name, by its shebang; the
    // payload names its hook (`hookName`). `PreCompact` has no subprocess event in 3.0.
    install: Some(InstallSpec::HookScripts(HookScriptsInstall {
        project_dir: ".cline/hooks",
        user_dir: ".cline/hooks",
        user_dir_env: Some("CLINE_DIR"),
        events: &[
            "TaskStart",
            "TaskResume",
            "TaskCancel",
            "TaskComplete",
            "TaskError",
            "PreToolUse",
            "PostToolUse",
            "UserPromptSubmit",
            "SessionShutdown",
        ],
        suffix: ".sh",
    })),
    server: None,
    otel: None,
    adapter: Some(super::adapter),
};
