//! The VS Code agent's (Copilot Chat's) content-bearing telemetry attributes. No recording
//! of it exists here (no VS Code runs headless in this project's harness); the keys are those
//! its documentation and source name: with `github.copilot.chat.otel.captureContent` its
//! `invoke_agent` / `chat` / `execute_tool` spans carry the GenAI messages, system
//! instructions, tool definitions, tool arguments and results (the shared GenAI table), the
//! agent span the user's request (`copilot_chat.user_request`, observed filled even with the
//! switch off) and the reasoning text; the resource names the OS user with identity capture
//! on (`process.user.name`, the shared OTel table). The README's table says the same.

use aep_schemas::Capture;

use crate::otel::content::{ContentTable, Site, What, identity, text};

const R: Capture = Capture::Redacted;

/// The table (see the module doc).
pub const CONTENT: ContentTable = ContentTable {
    source: super::VENDOR,
    attrs: &[
        text("copilot_chat.user_request", R, What::Prompt, &[Site::Span]),
        text("copilot_chat.reasoning_content", R, What::Response, &[Site::Span]),
        text("error.message", R, What::ErrorText, &[Site::Span, Site::Log]),
        identity("user.email"),
    ],
    bodies: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_agrees_with_the_log_profile() {
        let fields: Vec<_> =
            super::super::KNOWN.iter().flat_map(|(_, _, f)| f.iter()).chain(super::super::COMMON).copied().collect();
        assert_eq!(crate::otel::content::disagreements(&CONTENT, &fields), Vec::<String>::new());
    }

    #[test]
    fn the_readme_lists_every_key() {
        let readme = include_str!("README.md");
        for a in CONTENT.attrs {
            assert!(
                readme.contains(&format!("| `{}` |", a.key.as_str())),
                "{} missing from the README",
                a.key.as_str()
            );
        }
    }
}
