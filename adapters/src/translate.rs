//! Naming and content helpers shared by the protocol mappings (`protocols`) and the vendor
//! mappings that read the same shapes (OpenHands'): one home below both, so neither names
//! the other for them.

use serde_json::Value;

use crate::EventDraft;

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
