//! Pure vendor mappings: each supported agent's native hook payloads (and, for some,
//! OTel LogRecords) become AEP event drafts, following AEP-0002 Annex A.
//!
//! No I/O, no clock, no randomness. Per-session state that a mapping needs (synthesized
//! runs, pending tool calls) lives in a [`SessionState`] the caller owns and passes in.
//! Drafts lack `id`, `seq`, `epoch`, `source` and `time`: the one [`stamp::Stamper`] stamps
//! them, its time and ids handed in by the caller.

use aep_schemas::{Capture, Severity};
use serde_json::{Map, Value};

pub mod attention;
pub mod common;
pub mod draft;
pub mod drift;
pub mod generic;
pub mod history;
pub mod late;
pub mod observer;
pub mod observers;
pub mod otel;
pub mod protocols;
pub mod session_table;
pub mod spec;
pub mod stamp;
pub mod translate;
pub mod vendors;

pub use draft::EventDraft;

/// Error from a mapping.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    /// The payload is not a JSON object.
    #[error("hook payload must be a JSON object")]
    NotAnObject,
    /// A field the mapping needs is missing or has the wrong JSON type.
    #[error("hook payload field `{field}` is missing or not a {expected}")]
    MissingField {
        /// The payload field.
        field: &'static str,
        /// The JSON type expected.
        expected: &'static str,
    },
    /// No hook name in the URL nor in the payload.
    #[error("cannot tell which hook this is: no event in the URL and no `{field}` in the payload")]
    NoHookName {
        /// The payload field that names the hook for this vendor.
        field: &'static str,
    },
}

/// Capture posture and redaction settings a mapping applies at the source (AEP-0003 §9).
#[derive(Debug, Clone)]
pub struct MapContext {
    /// Ceiling for every event except `attention.*` (default `metadata`, AEP-0003 §9 rule 1).
    pub capture: Capture,
    /// Ceiling for `attention.*` (RECOMMENDED default `redacted`, AEP-0003 §9 rule 1).
    pub attention_capture: Capture,
    /// The §9.4 redaction pipeline settings.
    pub redact: aep_schemas::redact::RedactConfig,
}

impl Default for MapContext {
    fn default() -> Self {
        Self {
            capture: Capture::Metadata,
            attention_capture: Capture::Redacted,
            redact: aep_schemas::redact::RedactConfig::default(),
        }
    }
}

impl MapContext {
    /// The ceiling that applies to events of `ty`.
    pub fn ceiling_for(&self, ty: &str) -> Capture {
        if aep_schemas::event::category_of(ty) == "attention" { self.attention_capture } else { self.capture }
    }
}

/// Per-`(vendor, session)` mapping state the caller keeps between hook calls.
#[derive(Debug, Clone, Default)]
pub struct SessionState {
    /// The run currently open, if any (synthesized or vendor-provided).
    pub current_run: Option<String>,
    /// How many runs this session has synthesized (names `r1`, `r2`, ...).
    pub runs_synthesized: u64,
    /// Vendor-specific scratch (pending tool calls, open attention requests, ...).
    pub extra: Map<String, Value>,
}

/// One hook invocation as received.
#[derive(Debug, Clone, Copy)]
pub struct HookCall<'a> {
    /// The hook or moment name from the URL (`/hooks/{vendor}/{event}`), when given.
    pub event: Option<&'a str>,
    /// The payload the agent sent.
    pub payload: &'a Value,
}

/// The reply a vendor expects on its hook channel when the bridge has nothing to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeutralReply {
    /// Write nothing; exit 0.
    Empty,
    /// Write this exact body (e.g. Antigravity's `{"decision": ""}`).
    Body(&'static str),
}

impl NeutralReply {
    /// The bytes to write.
    pub fn as_bytes(&self) -> &'static [u8] {
        match self {
            NeutralReply::Empty => b"",
            NeutralReply::Body(b) => b.as_bytes(),
        }
    }
}

/// A vendor's hook mapping (AEP-0002 Annex A).
pub trait HookAdapter: Send + Sync {
    /// The stable agent identity, e.g. `claude-code`; also the `x.{vendor}.*` token.
    fn vendor(&self) -> &'static str;

    /// The hook name of a call: from the URL, else from the payload's own name field
    /// (by default the hook family's `hook_event_name`).
    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        vendors::hook_family::hook_name(call)
    }

    /// The AEP session id this payload belongs to (the vendor's session/thread id; by
    /// default the hook family's non-empty `session_id`).
    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        vendors::hook_family::session_id(call)
    }

    /// Maps one hook call to zero or more drafts. Unknown hook names map through the
    /// `x.{vendor}.session.{snake_case(hook)}` fallback rather than being dropped.
    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError>;

    /// The drafts that end `session` when the bridge has heard nothing from it for its idle
    /// window (the bridge owns the clock; the adapter decides whether and how): for a session
    /// the vendor will never end itself. By default none: a session without an end stays
    /// open, which AEP-0002 §4.1 lets consumers handle (recency-based retention).
    fn close_idle(&self, _session: &str, _state: &mut SessionState, _cx: &MapContext) -> Vec<EventDraft> {
        Vec::new()
    }

    /// Whether a call of `hook` heard after its session ended resumes the session (the
    /// bridge opens a continuation `{id}.{n}`) rather than reporting late on the ended one:
    /// session-scoped Events after a terminal stay legal and belong to that session
    /// (AEP-0002 §2 #5). By default every hook resumes.
    fn resumes_session(&self, _hook: &str) -> bool {
        true
    }

    /// Where the vendor keeps its own history, which `aep-bridge import` replays through
    /// this mapping; `None` (the default) for a vendor whose history is not imported.
    fn history(&self) -> Option<&'static history::HistorySpec> {
        None
    }

    /// The reply to give the agent when nothing is decided (fail-open).
    fn neutral_reply(&self, _hook: &str) -> NeutralReply {
        NeutralReply::Empty
    }

    /// The hook events and fields this adapter was written against, when they were recorded
    /// from the agent: what the bridge counts as drift ([`drift`]). `None`: not checked.
    fn vocabulary(&self) -> Option<&'static drift::Vocabulary> {
        None
    }

    /// The vendor of another agent that ran this vendor's hook wiring, when the call is not
    /// this vendor's own: some agents also run other agents' hook files, and such a call
    /// mapped here would log one agent's session as another's. `env` looks a variable of the
    /// hook process's environment up (the shim's; the adapter stays pure). The shim answers
    /// such a call neutrally and forwards nothing. By default every call is the vendor's own.
    fn ran_by_other(&self, _call: &HookCall<'_>, _env: &dyn Fn(&str) -> Option<String>) -> Option<&'static str> {
        None
    }
}

/// `PreToolUse` -> `pre_tool_use`; `session-start` -> `session_start` (the fallback's name rule).
pub fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        } else {
            if !out.ends_with('_') && !out.is_empty() {
                out.push('_');
            }
            prev_lower = false;
        }
    }
    out.trim_end_matches('_').to_owned()
}

/// Default severity for a core type when a mapping does not set one.
pub fn default_severity(ty: &str) -> Option<Severity> {
    match ty {
        "attention.requested" => Some(Severity::Notice),
        "tool.failed" | "run.failed" | "error.raised" => Some(Severity::Error),
        "tool.denied" => Some(Severity::Warning),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_cases_hook_names() {
        assert_eq!(snake_case("PreToolUse"), "pre_tool_use");
        assert_eq!(snake_case("session-start"), "session_start");
        assert_eq!(snake_case("CwdChanged"), "cwd_changed");
        assert_eq!(snake_case("tool.execute.before"), "tool_execute_before");
    }
}
