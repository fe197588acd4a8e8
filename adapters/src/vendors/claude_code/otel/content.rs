//! Claude Code's content-bearing telemetry attributes, as recorded with every content switch
//! on (`OTEL_LOG_USER_PROMPTS`, `OTEL_LOG_TOOL_DETAILS`, `OTEL_LOG_TOOL_CONTENT`,
//! `OTEL_LOG_ASSISTANT_RESPONSES`, and the enhanced-telemetry beta spans): the log records'
//! keys the profile gates, the spans' (`claude_code.interaction` carries the prompt,
//! `claude_code.tool` the command and the path), and the `tool.output` span events' (the
//! command's output, the written file's content, the edit's diff). The README's table says
//! the same.

use aep_schemas::Capture;

use crate::otel::content::{ContentTable, SPAN_LOG, Site, What, drop_only, identity, text};

const R: Capture = Capture::Redacted;
const F: Capture = Capture::Full;
const LOG: &[Site] = &[Site::Log];
const SPAN: &[Site] = &[Site::Span];
const EVENT: &[Site] = &[Site::SpanEvent];

/// The table (see the module doc).
pub const CONTENT: ContentTable = ContentTable {
    source: super::VENDOR,
    attrs: &[
        // `user_prompt` record and `claude_code.interaction` span.
        text("prompt", R, What::Prompt, LOG),
        text("user_prompt", R, What::Prompt, SPAN),
        // `assistant_response` record.
        text("response", R, What::Response, LOG),
        // `tool_result` / `api_error` records, `llm_request` / `tool.execution` spans.
        text("error", R, What::ErrorText, &[Site::Log, Site::Span]),
        // `tool_result` / `tool_decision` records: the call's input as JSON (its
        // `full_command`, `file_path`, `new_string`).
        drop_only("tool_parameters", F, What::ToolInput, LOG),
        drop_only("tool_input", F, What::ToolInput, LOG),
        // `claude_code.tool` span and its `tool.output` event.
        drop_only("full_command", F, What::Command, SPAN),
        drop_only("bash_command", F, What::Command, &[Site::Span, Site::SpanEvent]),
        text("file_path", R, What::FilePath, SPAN_LOG),
        drop_only("output", F, What::ToolOutput, EVENT),
        drop_only("content", F, What::FileContent, EVENT),
        drop_only("diff", F, What::FileContent, EVENT),
        // On every record, span and metric data point.
        identity("user.email"),
        identity("user.id"),
        identity("user.account_uuid"),
        identity("organization.id"),
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
