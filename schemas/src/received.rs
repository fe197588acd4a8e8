//! Events received in one request: each line parsed, validated (AEP-0001 §8) and kept
//! with its line, the emitter's own bytes when they are one line (AEP-0001 §4.2: the event
//! exactly as received), else the value compacted. An emit endpoint hands the batch on as
//! one submit.

use serde_json::Value;

use crate::validate::Violation;

/// One received event as parsed: a JSON value, or read straight into an [`crate::Event`]
/// ([`crate::event::event_from_str_strict`]: what it could not represent is the error).
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // built once per line and moved on: a box would be an allocation per event
pub enum Parsed {
    /// A JSON value.
    Value(Value),
    /// An event, or why the object is not one.
    Event(Result<crate::Event, crate::event::EnvelopeError>),
}

/// Events received in one request, validated, with their lines back to back in one buffer
/// (each `(event, start, len)` a slice of it): the batch reaches the pipeline, and the JSONL
/// log, as one submit instead of one per event, and no line is allocated on its own.
#[derive(Debug, Default)]
pub struct Received {
    /// The events with their lines' place in `buf`.
    pub events: Vec<(crate::Event, usize, usize)>,
    /// The lines, each ending in `\n`.
    pub buf: Vec<u8>,
}

impl Received {
    /// An empty batch with room for `n` events of about `bytes` of lines in all.
    pub fn with_capacity(n: usize, bytes: usize) -> Self {
        Self { events: Vec::with_capacity(n), buf: Vec::with_capacity(bytes + n) }
    }

    /// Validates `parsed` (received as `raw`) and appends it with its line: the emitter's
    /// own bytes when they are one line (AEP-0001 §4.2), else the value compacted.
    pub fn push(&mut self, parsed: Parsed, raw: &[u8]) -> Result<&crate::Event, Violation> {
        let start = self.buf.len();
        let event = match (one_line(raw), parsed) {
            (Some(line), Parsed::Value(value)) => {
                let event = crate::validate::validate_owned(value)?;
                self.buf.extend_from_slice(line);
                event
            }
            (Some(line), Parsed::Event(event)) => {
                let event = crate::validate::validate_parsed(event)?;
                self.buf.extend_from_slice(line);
                event
            }
            (None, parsed) => {
                let value = match parsed {
                    Parsed::Value(v) => v,
                    // Not one line (a CR inside): compacted from the value, read again. It was
                    // read once, so this cannot fail; were it to, `null` is refused as no object.
                    Parsed::Event(_) => crate::json::from_slice_strict(raw).unwrap_or(Value::Null),
                };
                let event = crate::validate::validate_value(&value)?;
                // Writing a `Value` into a `Vec` cannot fail.
                let _ = serde_json::to_writer(&mut self.buf, &value);
                event
            }
        };
        self.buf.push(b'\n');
        self.events.push((event, start, self.buf.len() - start));
        Ok(&self.events[self.events.len() - 1].0)
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

/// `raw` without surrounding whitespace when that is one non-empty line.
pub fn one_line(raw: &[u8]) -> Option<&[u8]> {
    let trimmed = raw.trim_ascii();
    (!trimmed.is_empty() && !trimmed.iter().any(|b| matches!(b, b'\n' | b'\r'))).then_some(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    const EV: &str = r#"{"aep":"0.1","id":"01J00000000000000000000000","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0}"#;

    /// A one-line event keeps its own bytes; one with a CR inside is compacted; a refused
    /// one adds nothing to the batch.
    #[test]
    fn lines_are_kept_as_received_or_compacted() {
        let mut r = Received::with_capacity(3, 512);
        let raw = format!("  {EV}  ");
        r.push(Parsed::Value(serde_json::from_str(EV).unwrap()), raw.as_bytes()).unwrap();
        let spaced = EV.replace(",\"agent\"", ",\r\"agent\"");
        let parsed = crate::event::event_from_str_strict(&spaced).unwrap();
        r.push(Parsed::Event(parsed), spaced.as_bytes()).unwrap();
        let bad = Parsed::Value(serde_json::json!({"aep": "0.1"}));
        assert!(r.push(bad, b"{}").is_err());
        assert_eq!(r.len(), 2);
        let lines: Vec<&[u8]> = r.events.iter().map(|(_, at, len)| &r.buf[*at..at + len]).collect();
        assert_eq!(lines[0], format!("{EV}\n").as_bytes(), "the emitter's own bytes");
        assert!(!lines[1][..lines[1].len() - 1].contains(&b'\r'), "compacted to one line");
        assert_eq!(one_line(b" \n "), None);
    }
}
