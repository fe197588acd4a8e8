//! Codex's content-bearing telemetry attributes, as recorded (`codex exec` with
//! `[otel] log_user_prompt = true`, OTLP logs over HTTP JSON and protobuf): the
//! `codex.user_prompt` record's prompt, the `codex.tool_result` record's arguments (the shell
//! command and its working directory) and output, error texts, and the account identity.
//! The README's table says the same.

use aep_schemas::Capture;

use crate::otel::content::{ContentTable, Site, What, drop_only, identity, text};

const LOG: &[Site] = &[Site::Log];

/// The table (see the module doc).
pub const CONTENT: ContentTable = ContentTable {
    source: super::VENDOR,
    attrs: &[
        text("prompt", Capture::Redacted, What::Prompt, LOG),
        drop_only("arguments", Capture::Full, What::ToolInput, LOG),
        drop_only("output", Capture::Full, What::ToolOutput, LOG),
        text("error", Capture::Redacted, What::ErrorText, LOG),
        text("error.message", Capture::Redacted, What::ErrorText, LOG),
        identity("user.email"),
        identity("user.account_id"),
    ],
    bodies: &[],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_agrees_with_the_log_profile() {
        let fields: Vec<_> =
            super::super::KNOWN.iter().flat_map(|(_, f)| f.iter()).chain(super::super::COMMON).copied().collect();
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
