//! The content-bearing attributes of the agents' own telemetry: which keys of their spans,
//! span events, log records, metric data points and resources carry a prompt, a command, a
//! tool's input or output, a response, file content or the user's identity, and the lowest
//! capture ceiling at which each may leave the machine (AEP-0001 §8.2, AEP-0003 §9 rule 1).
//!
//! The bridge forwards the agents' own OTLP (their spans into the session traces, their
//! metrics, everything through the tee) besides mapping their log records to Events; the
//! ceiling gate over those requests (`aep_projections::capture_gate`) reads these tables.
//! Each vendor keeps its table in its own folder (`vendors/<vendor>/otel/content.rs`, reached
//! through [`crate::otel::OtelProfile::content`]); the tables here are the ones every producer
//! shares: the OTel GenAI semantic conventions' content attributes ([`GENAI`]), the general
//! conventions' identity, exception and process-command attributes ([`OTEL`]) and
//! OpenInference's ([`OPENINFERENCE`]).
//!
//! Levels follow the AEP payload schemas where an Event carries the same thing: a prompt,
//! a response or an error text is `redacted` free text (`run.started.prompt`,
//! `error_info.message`); a tool's arguments and result are `full` (`tool.requested.args`,
//! `tool.completed.result`); identity is `full` and never rewritten, as the vendors' log
//! profiles already gate it. A key that is content for one producer is content for all: the
//! gate applies the union of the tables (the highest level wins), since a request does not
//! prove who sent it.

use aep_schemas::Capture;

/// How a table entry matches an attribute key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Exactly this key.
    Exact(&'static str),
    /// This prefix followed by an ASCII digit: a list flattened into indexed keys
    /// (`gen_ai.prompt.0.content`), without catching the prefix's other children
    /// (`gen_ai.prompt.name` is an id).
    Indexed(&'static str),
    /// Any key starting with this prefix.
    Prefix(&'static str),
}

impl Key {
    /// Whether `key` is matched.
    pub fn matches(&self, key: &str) -> bool {
        match *self {
            Key::Exact(k) => key == k,
            Key::Indexed(p) => {
                key.strip_prefix(p).is_some_and(|rest| rest.as_bytes().first().is_some_and(u8::is_ascii_digit))
            }
            Key::Prefix(p) => key.starts_with(p),
        }
    }

    /// The key or prefix as written.
    pub fn as_str(&self) -> &'static str {
        match *self {
            Key::Exact(k) | Key::Indexed(k) | Key::Prefix(k) => k,
        }
    }
}

/// What the gate may do with a content value it lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ContentKind {
    /// Free text: at a `redacted` ceiling it passes the AEP-0003 §9.4 pipeline, at `full` it
    /// leaves verbatim.
    Text,
    /// Leaves verbatim at its level or above and is removed below it, never rewritten:
    /// identity (the redaction rules do not make a user id safe) and values whose redacted
    /// form would still be the content.
    DropOnly,
}

/// What a content attribute carries (the tables' "what" column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// The user's prompt.
    Prompt,
    /// A whole model request or conversation (system prompt, history, tool output).
    Messages,
    /// The model's answer or its reasoning text.
    Response,
    /// The system prompt (it embeds the working directory, file listings, git state).
    SystemPrompt,
    /// Tool definitions sent to the model (MCP servers' descriptions among them).
    ToolDefinitions,
    /// A tool call's arguments.
    ToolInput,
    /// A shell command line.
    Command,
    /// A tool call's result or a command's output.
    ToolOutput,
    /// A file's content or a diff of it.
    FileContent,
    /// A file path (user names and project names ride in paths).
    FilePath,
    /// An error message (it quotes paths, commands, server answers).
    ErrorText,
    /// A hook's stdin payload or reply (prompts, tool input and output).
    HookPayload,
    /// Who the user is: email, account and installation ids, OS user name.
    Identity,
}

impl What {
    /// The word used in the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            What::Prompt => "prompt",
            What::Messages => "messages",
            What::Response => "response",
            What::SystemPrompt => "system prompt",
            What::ToolDefinitions => "tool definitions",
            What::ToolInput => "tool input",
            What::Command => "command",
            What::ToolOutput => "tool output",
            What::FileContent => "file content",
            What::FilePath => "file path",
            What::ErrorText => "error text",
            What::HookPayload => "hook payload",
            What::Identity => "identity",
        }
    }
}

/// Where an attribute rides in a request (documentation: the gate matches keys wherever
/// they are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// Resource attributes.
    Resource,
    /// Span attributes.
    Span,
    /// Span event attributes.
    SpanEvent,
    /// Log record attributes.
    Log,
    /// Metric data point attributes.
    Metric,
}

/// One content-bearing attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentAttr {
    /// Which keys.
    pub key: Key,
    /// The lowest ceiling at which it may leave.
    pub level: Capture,
    /// Redactable text or drop-only.
    pub kind: ContentKind,
    /// What it carries.
    pub what: What,
    /// Where it was recorded (or where its convention puts it).
    pub at: &'static [Site],
}

/// Log records whose body is content whatever its length (the GenAI event model's
/// messages): a body is otherwise judged like an unknown attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentBody {
    /// The record's event name (`event_name` field or `event.name` attribute).
    pub event: &'static str,
    /// The lowest ceiling at which the body may leave.
    pub level: Capture,
    /// Redactable text or drop-only.
    pub kind: ContentKind,
    /// What it carries.
    pub what: What,
}

/// One producer's (or one convention's) content table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentTable {
    /// Whose table: a vendor id or a convention's name.
    pub source: &'static str,
    /// The content-bearing attributes.
    pub attrs: &'static [ContentAttr],
    /// The content-bearing log bodies.
    pub bodies: &'static [ContentBody],
}

impl ContentTable {
    /// A table with nothing in it (a profile that declares none).
    pub const EMPTY: ContentTable = ContentTable { source: "", attrs: &[], bodies: &[] };

    /// The entry matching `key`, the first in table order.
    pub fn find(&self, key: &str) -> Option<&ContentAttr> {
        self.attrs.iter().find(|a| a.key.matches(key))
    }
}

/// Free text gated at `level`, exactly `key`.
pub const fn text(key: &'static str, level: Capture, what: What, at: &'static [Site]) -> ContentAttr {
    ContentAttr { key: Key::Exact(key), level, kind: ContentKind::Text, what, at }
}

/// A drop-only value gated at `level`, exactly `key`.
pub const fn drop_only(key: &'static str, level: Capture, what: What, at: &'static [Site]) -> ContentAttr {
    ContentAttr { key: Key::Exact(key), level, kind: ContentKind::DropOnly, what, at }
}

/// Identity: `full` only, never rewritten, wherever it rides.
pub const fn identity(key: &'static str) -> ContentAttr {
    drop_only(key, Capture::Full, What::Identity, ALL_SITES)
}

/// Every site.
pub const ALL_SITES: &[Site] = &[Site::Resource, Site::Span, Site::SpanEvent, Site::Log, Site::Metric];
/// Span and log attributes.
pub const SPAN_LOG: &[Site] = &[Site::Span, Site::SpanEvent, Site::Log];

const R: Capture = Capture::Redacted;
const F: Capture = Capture::Full;

/// The OTel GenAI semantic conventions' content attributes (all opt-in there, "may contain
/// sensitive information"): messages, instructions and tool definitions as `redacted` free
/// text (as the Gemini CLI and VS Code profiles gate the inference record), tool arguments
/// and results at `full` like `tool.requested.args` / `tool.completed.result`; the deprecated
/// flat `gen_ai.prompt` / `gen_ai.completion` and their indexed forms; and the deprecated
/// event model's message records, whose body is the message.
pub const GENAI: ContentTable = ContentTable {
    source: "gen_ai (OTel GenAI semantic conventions)",
    attrs: &[
        text("gen_ai.input.messages", R, What::Messages, SPAN_LOG),
        text("gen_ai.output.messages", R, What::Response, SPAN_LOG),
        text("gen_ai.system_instructions", R, What::SystemPrompt, SPAN_LOG),
        text("gen_ai.tool.definitions", R, What::ToolDefinitions, SPAN_LOG),
        text("gen_ai.tool.call.arguments", F, What::ToolInput, SPAN_LOG),
        text("gen_ai.tool.call.result", F, What::ToolOutput, SPAN_LOG),
        text("gen_ai.prompt", R, What::Prompt, SPAN_LOG),
        text("gen_ai.completion", R, What::Response, SPAN_LOG),
        ContentAttr {
            key: Key::Indexed("gen_ai.prompt."),
            level: R,
            kind: ContentKind::Text,
            what: What::Messages,
            at: SPAN_LOG,
        },
        ContentAttr {
            key: Key::Indexed("gen_ai.completion."),
            level: R,
            kind: ContentKind::Text,
            what: What::Response,
            at: SPAN_LOG,
        },
    ],
    bodies: &[
        ContentBody { event: "gen_ai.system.message", level: R, kind: ContentKind::Text, what: What::SystemPrompt },
        ContentBody { event: "gen_ai.user.message", level: R, kind: ContentKind::Text, what: What::Prompt },
        ContentBody { event: "gen_ai.assistant.message", level: R, kind: ContentKind::Text, what: What::Response },
        ContentBody { event: "gen_ai.tool.message", level: F, kind: ContentKind::Text, what: What::ToolOutput },
        ContentBody { event: "gen_ai.choice", level: R, kind: ContentKind::Text, what: What::Response },
    ],
};

/// The general OTel conventions' content: who the user is (`user.*`, `enduser.id`, the
/// process owner, which Node's and Python's resource detectors fill), the agent's own
/// command line (`gemini -p "<prompt>"` puts the prompt in `process.command_args`), the
/// paths it was started from (Node's detector puts the agent's script, under the user's
/// home directory, in `process.command`), and exception texts.
pub const OTEL: ContentTable = ContentTable {
    source: "OTel general semantic conventions",
    attrs: &[
        identity("user.email"),
        identity("user.id"),
        identity("user.name"),
        identity("user.full_name"),
        identity("enduser.id"),
        identity("process.owner"),
        identity("process.user.name"),
        text("process.command_args", R, What::Command, &[Site::Resource]),
        text("process.command_line", R, What::Command, &[Site::Resource]),
        text("process.command", R, What::FilePath, &[Site::Resource]),
        text("process.executable.path", R, What::FilePath, &[Site::Resource]),
        text("exception.message", R, What::ErrorText, SPAN_LOG),
        text("exception.stacktrace", R, What::ErrorText, SPAN_LOG),
    ],
    bodies: &[],
};

/// OpenInference's content attributes (Phoenix, Arize; the bridge's own spans carry its
/// token counts): input and output values and the flattened message lists.
pub const OPENINFERENCE: ContentTable = ContentTable {
    source: "OpenInference",
    attrs: &[
        text("input.value", R, What::Messages, &[Site::Span]),
        text("output.value", R, What::Response, &[Site::Span]),
        text("llm.prompts", R, What::Prompt, &[Site::Span]),
        ContentAttr {
            key: Key::Prefix("llm.input_messages."),
            level: R,
            kind: ContentKind::Text,
            what: What::Messages,
            at: &[Site::Span],
        },
        ContentAttr {
            key: Key::Prefix("llm.output_messages."),
            level: R,
            kind: ContentKind::Text,
            what: What::Response,
            at: &[Site::Span],
        },
    ],
    bodies: &[],
};

/// The shared tables, in the order the gate reads them.
pub const SHARED: &[&ContentTable] = &[&GENAI, &OTEL, &OPENINFERENCE];

/// Checks a vendor's tables (its own and the shared ones) against its log profile's field
/// list: every field the profile gates above `metadata` is in a table at the same level, so
/// the forwarded telemetry and the Events never disagree on what a key may carry. Returns
/// the disagreements.
#[cfg(test)]
pub(crate) fn disagreements(own: &ContentTable, fields: &[super::Field]) -> Vec<String> {
    let tables: Vec<&ContentTable> = std::iter::once(own).chain(SHARED.iter().copied()).collect();
    fields
        .iter()
        .filter(|(_, level, _)| *level > Capture::Metadata)
        .filter_map(|(key, level, kind)| {
            let Some(entry) = tables.iter().find_map(|t| t.find(key)) else {
                return Some(format!("{key}: not in the table"));
            };
            let kind_ok = match kind {
                super::Kind::Text => entry.kind == ContentKind::Text,
                // A plain field leaves verbatim at its level, never rewritten: drop-only.
                super::Kind::Plain => entry.kind == ContentKind::DropOnly,
            };
            (entry.level != *level || !kind_ok)
                .then(|| format!("{key}: profile {level} {kind:?}, table {} {:?}", entry.level, entry.kind))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_match_as_written() {
        assert!(Key::Exact("prompt").matches("prompt"));
        assert!(!Key::Exact("prompt").matches("prompt_length"));
        assert!(Key::Indexed("gen_ai.prompt.").matches("gen_ai.prompt.0.content"));
        assert!(!Key::Indexed("gen_ai.prompt.").matches("gen_ai.prompt.name"), "an id, not a message");
        assert!(!Key::Indexed("gen_ai.prompt.").matches("gen_ai.prompt."));
        assert!(Key::Prefix("llm.input_messages.").matches("llm.input_messages.0.message.content"));
        assert!(!Key::Prefix("llm.input_messages.").matches("llm.input_messages"));
    }

    #[test]
    fn shared_tables_name_each_key_once_and_identity_is_full_drop_only() {
        for t in SHARED {
            let mut keys: Vec<_> = t.attrs.iter().map(|a| a.key.as_str()).collect();
            keys.sort_unstable();
            let n = keys.len();
            keys.dedup();
            assert_eq!(keys.len(), n, "{}: a key twice", t.source);
            for a in t.attrs.iter().filter(|a| a.what == What::Identity) {
                assert_eq!((a.level, a.kind), (Capture::Full, ContentKind::DropOnly), "{}", a.key.as_str());
            }
            assert!(t.attrs.iter().all(|a| a.level > Capture::Metadata), "{}: a table lists content only", t.source);
        }
    }
}
