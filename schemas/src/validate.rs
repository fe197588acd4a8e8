//! Event and stream validation naming the violated rule (in progress).

use serde_json::Value;

use crate::event::Event;

/// One violated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The violated rule, e.g. `AEP-0001 §5.2`.
    pub rule: &'static str,
    /// A readable explanation.
    pub message: String,
    /// The position of the offending Event in a stream, when known.
    pub index: Option<usize>,
}

/// Validates one Event.
pub fn validate_value(v: &Value) -> Result<Event, Violation> {
    Event::from_value(v.clone()).map_err(|e| Violation { rule: e.rule, message: e.message, index: None })
}

/// Stream rules over a sequence of Events.
#[derive(Debug, Default)]
pub struct StreamValidator {}

impl StreamValidator {
    /// A validator that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next Event.
    pub fn push(&mut self, ev: &Event) -> Vec<Violation> {
        let _ = ev;
        Vec::new()
    }

    /// Ends the stream.
    pub fn finish(self) -> Vec<Violation> {
        Vec::new()
    }
}
