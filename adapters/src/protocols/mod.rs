//! Structured agent protocols observed without hooks (AEP-0002 Annex A.13, A.14): one folder
//! per protocol, each with its README (mapping table, deviations, honest gaps) as the module
//! doc. Each folder holds the pure moment -> drafts mapping the Annex A fixture pins and,
//! for the stdio protocols, a [`LineMapper`]: the stateful tee side (request/response joins,
//! run and session identity) that `aep-bridge wrap` drives line by line; AG-UI, spoken over
//! HTTP, has an observer the bridge's tee proxy drives. (OpenHands' agent server speaks its
//! vendor's own protocol: its mapping and observer are its vendor folder's.)
//!
//! Everything here is pure: no I/O, no clock, no randomness. The tee's restart generation
//! (which qualifies run ids) is handed in by the caller.

use serde_json::Value;

use crate::{EventDraft, MapContext};

pub mod acp;
pub mod agui;
pub mod claude_stream_json;
pub mod codex_app_server;
pub mod pi_rpc;

/// The protocols' observers (after the vendors' in [`crate::observer::observers`]): a
/// protocol any agent may speak over its own server, observed the same way whatever the agent.
pub static OBSERVERS: &[&crate::observer::ObserverSpec] = &[&agui::observer::OBSERVER];

/// Which way a teed line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client (editor, driver) -> agent: the agent's stdin.
    ToAgent,
    /// Agent -> client: the agent's stdout.
    FromAgent,
}

impl Direction {
    /// The other way.
    pub fn flip(self) -> Self {
        match self {
            Direction::ToAgent => Direction::FromAgent,
            Direction::FromAgent => Direction::ToAgent,
        }
    }
}

/// Who may answer an approval this protocol raises (AEP-0008 `respond_via`), as the tee
/// declares it in `aep-bridge wrap --help` and its README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerable {
    /// The client owns the gate: the bridge observes it and never answers (`respond_via`
    /// absent, outcomes `via: "oob"`).
    ObserveOnly,
    /// The protocol lets the driver answer, but a tee is not the driver: observed, the
    /// answer comes from the wrapped client (`respond_via: ["oob"]`).
    DriverOwned,
}

/// The stateful side of a stdio protocol: maps one complete teed line (without its newline)
/// to drafts carrying their `session` and `run`. A line that is not JSON, or not a shape the
/// protocol defines, maps to nothing: the pass-through never depends on it.
pub trait LineMapper: Send {
    /// The envelope `agent` of the drafts mapped so far: the protocol's vendor, or (ACP) the
    /// agent's own name once the wire gave it. The caller reads it after each line.
    fn agent(&self) -> &str;
    /// Maps one line seen travelling `dir`.
    fn map_line(&mut self, dir: Direction, line: &[u8], cx: &MapContext) -> Vec<EventDraft>;
    /// The agent's output ended: drafts the mapper still holds, if it can place them now
    /// (pi's events that waited for a session no response named). Nothing by default.
    fn finish(&mut self, _cx: &MapContext) -> Vec<EventDraft> {
        Vec::new()
    }
}

/// The stdio protocols `aep-bridge wrap` speaks, by CLI name.
pub const STDIO_PROTOCOLS: &[&str] =
    &[acp::PROTOCOL, claude_stream_json::PROTOCOL, codex_app_server::PROTOCOL, pi_rpc::PROTOCOL];

/// A fresh tee for `protocol` (see [`STDIO_PROTOCOLS`]); `epoch` is the tee's restart
/// generation, qualifying the run ids it mints from wire ids.
pub fn line_mapper(protocol: &str, epoch: u64, opts: Options) -> Option<Box<dyn LineMapper>> {
    match protocol {
        acp::PROTOCOL => Some(Box::new(acp::Tee::new(epoch, opts))),
        claude_stream_json::PROTOCOL => Some(Box::new(claude_stream_json::Tee::new(opts))),
        codex_app_server::PROTOCOL => Some(Box::new(codex_app_server::Tee::new(opts))),
        pi_rpc::PROTOCOL => Some(Box::new(pi_rpc::Tee::new(epoch, opts))),
        _ => None,
    }
}

/// Opt-ins shared by the protocol mappings (and OpenHands').
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Emit the token/argument delta planes (`AEP_ACP_DELTAS`, `AEP_AGUI_DELTAS`,
    /// `AEP_OPENHANDS_DELTAS`, `AEP_PI_DELTAS`): off by default, a fleet console does not want every token twice.
    pub deltas: bool,
}

/// `fs/read_text_file` -> `fs.read.text.file`: every run of `/`, `_`, `-`, `.` or space
/// becomes one `.`, letters are lowercased; a single-segment name gains `.event` so the
/// envelope's two-segments-after-the-vendor rule holds (AEP-0001 §6).
pub fn dotted(name: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            cur.push(c.to_ascii_lowercase());
        } else if !cur.is_empty() {
            parts.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    match parts.len() {
        0 => "unknown.event".to_owned(),
        1 => format!("{}.event", parts[0]),
        _ => parts.join("."),
    }
}

/// `TEXT_MESSAGE_CONTENT` -> `text_message.content`, `ExecuteBashAction`'s snake form
/// `execute_bash_action` -> `execute_bash.action`: the family/leaf split at the last
/// underscore; a one-word name gains `.event`.
pub fn family_leaf(snake: &str) -> String {
    let s: String = snake
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .collect::<String>()
        .split('_')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("_");
    match s.rsplit_once('_') {
        Some((family, leaf)) => format!("{family}.{leaf}"),
        None if s.is_empty() => "unknown.event".to_owned(),
        None => format!("{s}.event"),
    }
}

/// `ACPToolCallEvent` -> `acp_tool_call_event`: snake case that keeps an acronym one word.
pub fn snake_acronyms(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1).copied();
            let boundary = match prev {
                Some(p) if p.is_ascii_lowercase() || p.is_ascii_digit() => true,
                Some(p) if p.is_ascii_uppercase() => next.is_some_and(|n| n.is_ascii_lowercase()),
                _ => false,
            };
            if boundary && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_owned()
}

/// The text of an ACP / OpenHands content list: `[{type: "text", text}, ...]` joined by
/// newlines, or a plain string.
pub fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter(|p| p.get("type").and_then(Value::as_str).is_none_or(|t| t == "text"))
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        Value::Object(_) => v.get("text").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// Sets `severity: debug` (the vendor plane of every protocol rides at debug).
pub(crate) fn debug(mut d: EventDraft) -> EventDraft {
    d.severity = Some(aep_schemas::Severity::Debug);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_two_segment_types() {
        assert_eq!(dotted("fs/read_text_file"), "fs.read.text.file");
        assert_eq!(dotted("initialize"), "initialize.event");
        assert_eq!(dotted("current_mode_update"), "current.mode.update");
        assert_eq!(dotted("//"), "unknown.event");
        assert_eq!(family_leaf("TEXT_MESSAGE_CONTENT"), "text_message.content");
        assert_eq!(family_leaf("RAW"), "raw.event");
        assert_eq!(family_leaf("user_reject_observation"), "user_reject.observation");
        assert_eq!(snake_acronyms("ACPToolCallEvent"), "acp_tool_call_event");
        assert_eq!(snake_acronyms("MessageEvent"), "message_event");
        assert_eq!(snake_acronyms("HTTPError2Event"), "http_error2_event");
    }

    #[test]
    fn content_lists_join_their_text_parts() {
        let v = serde_json::json!([{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}]);
        assert_eq!(content_text(&v).as_deref(), Some("a\nb"));
        assert_eq!(content_text(&serde_json::json!(3)), None);
    }
}
