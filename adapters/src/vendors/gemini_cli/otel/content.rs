//! Gemini CLI's content-bearing telemetry attributes, as recorded (`gemini -p` with
//! `telemetry.logPrompts` on, OTLP over HTTP JSON, its spans included): the log records' keys
//! the profile gates (the prompt, the whole model request and answer, tool arguments, the
//! hooks' command lines, payloads and output, the router's reasoning), the GenAI inference
//! record's messages (the shared GenAI table), and the `llm_call` span's system
//! instructions and tool definitions (shared too). The resource's `process.command_args`
//! holds `gemini -p "<prompt>"` (the shared OTel table). The README's table says the same.

use aep_schemas::Capture;

use crate::otel::content::{ContentTable, Site, What, drop_only, identity, text};

const R: Capture = Capture::Redacted;
const F: Capture = Capture::Full;
const LOG: &[Site] = &[Site::Log];

/// The table (see the module doc).
pub const CONTENT: ContentTable = ContentTable {
    source: super::VENDOR,
    attrs: &[
        // `gemini_cli.user_prompt`.
        text("prompt", R, What::Prompt, LOG),
        // `gemini_cli.api_request` / `api_response`: the request as sent, the answer.
        drop_only("request_text", F, What::Messages, LOG),
        text("response_text", R, What::Response, LOG),
        // `gemini_cli.tool_call`.
        drop_only("function_args", F, What::ToolInput, LOG),
        // `gemini_cli.hook_call`: the hook's command line, its stdin payload, reply and output.
        text("hook_name", R, What::Command, LOG),
        drop_only("hook_input", F, What::HookPayload, LOG),
        drop_only("hook_output", F, What::HookPayload, LOG),
        text("stdout", R, What::ToolOutput, LOG),
        text("stderr", R, What::ToolOutput, LOG),
        // `gemini_cli.model_routing`.
        text("reasoning", R, What::Response, LOG),
        text("error", R, What::ErrorText, LOG),
        text("error.message", R, What::ErrorText, LOG),
        text("error_message", R, What::ErrorText, LOG),
        // On every record: a stable per-installation pseudonym, and the account's email.
        identity("installation.id"),
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
