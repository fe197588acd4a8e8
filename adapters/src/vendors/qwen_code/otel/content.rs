//! Qwen Code's content-bearing telemetry attributes, as recorded (`qwen -p` with
//! `telemetry.logPrompts` on, OTLP logs over HTTP JSON) and read from its loggers: the
//! prompt, the whole model request and its answer, tool arguments, a subagent's answer,
//! error texts and the account's email. The README's table says the same.

use aep_schemas::Capture;

use crate::otel::content::{ContentTable, Site, What, drop_only, identity, text};

const R: Capture = Capture::Redacted;
const F: Capture = Capture::Full;
const LOG: &[Site] = &[Site::Log];

/// The table (see the module doc).
pub const CONTENT: ContentTable = ContentTable {
    source: super::VENDOR,
    attrs: &[
        text("prompt", R, What::Prompt, LOG),
        drop_only("request_text", F, What::Messages, LOG),
        text("response_text", R, What::Response, LOG),
        drop_only("function_args", F, What::ToolInput, LOG),
        // `qwen-code.subagent_execution`: the subagent's answer.
        drop_only("result", F, What::Response, LOG),
        drop_only("execution_summary", F, What::Response, LOG),
        text("error", R, What::ErrorText, LOG),
        text("error_message", R, What::ErrorText, LOG),
        text("error.message", R, What::ErrorText, LOG),
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
