//! One module per vendor: its README (mapping table, deviations, honest gaps) is the module doc.

use crate::HookAdapter;

pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod gemini_cli;
pub mod hermes;
pub(crate) mod hook_family;
pub mod kilocode;
pub mod kimi_code;
pub mod opencode;
pub mod pi;
pub(crate) mod plugin_common;
pub mod qwen_code;
pub mod vscode;

/// Every built-in hook adapter.
pub fn all() -> Vec<Box<dyn HookAdapter>> {
    vec![
        antigravity::adapter(),
        claude_code::adapter(),
        cline::adapter(),
        codex::adapter(),
        gemini_cli::adapter(),
        hermes::adapter(),
        kilocode::adapter(),
        kimi_code::adapter(),
        opencode::adapter(),
        pi::adapter(),
        qwen_code::adapter(),
        vscode::adapter(),
    ]
}

/// The built-in adapter for `vendor`, if any.
pub fn by_vendor(vendor: &str) -> Option<Box<dyn HookAdapter>> {
    all().into_iter().find(|a| a.vendor() == vendor)
}
