//! [`EventDraft`]: an event as a mapping produces it, before the sequencer stamps it.

use aep_schemas::{Capture, Severity};
use serde_json::{Map, Value};

/// An AEP event without `id`, `seq`, `epoch`, `source`, `time` (and `agent`, which the
/// bridge knows from the adapter). Mappings set `capture` to the level actually honored
/// (AEP-0003 §9 rule 5).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventDraft {
    /// The event id, when the caller minted it before publication (the bridge does so for
    /// a held attention request, so its waiter exists before anyone can answer); else the
    /// stamper mints one.
    pub id: Option<String>,
    /// The AEP type.
    pub r#type: String,
    /// The acted-upon entity.
    pub subject: Option<String>,
    /// The session (absent for `agent.*`).
    pub session: Option<String>,
    /// The run.
    pub run: Option<String>,
    /// The step.
    pub step: Option<String>,
    /// Severity, when not the default.
    pub severity: Option<Severity>,
    /// The capture level the payload honors.
    pub capture: Capture,
    /// W3C traceparent, when the vendor supplied one.
    pub traceparent: Option<String>,
    /// A vendor timestamp (RFC 3339), when the vendor supplied one; else the bridge's clock.
    pub time: Option<String>,
    /// An explicit `cause` (an event id), when the caller knows it; wins over `cause_key`.
    pub cause: Option<String>,
    /// A correlation key this draft's `cause` should resolve to (for example the
    /// `tool.requested` of the same call id): the sequencer keeps the ids it minted per key.
    pub cause_key: Option<String>,
    /// The key under which the sequencer remembers this draft's minted id for later `cause_key` lookups.
    pub correlation_key: Option<String>,
    /// The payload.
    pub data: Map<String, Value>,
}

impl EventDraft {
    /// A draft of `ty` at `capture` with an empty payload.
    pub fn new(ty: impl Into<String>, capture: Capture) -> Self {
        let r#type = ty.into();
        let severity = crate::default_severity(&r#type);
        Self { r#type, capture, severity, ..Default::default() }
    }
}
