//! A whole JSONL stream checked (what `aep-bridge validate` and the import run): envelope,
//! payload schema, ordering, lifecycle and capture honesty ([`crate::validate`]), each
//! failure with its event index, line and rule; beside them, the agent-completeness
//! warnings ([`crate::completeness`]): runs and tool calls whose story the log leaves
//! unfinished or tells out of order.

use std::io::BufRead;

use crate::completeness::{CompletenessChecker, Warning};
use crate::validate::{StreamValidator, Violation};

/// One failure: the 0-based event index (line order, blank lines skipped), the rule, the message.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Index of the offending event, when known.
    pub index: Option<usize>,
    /// The 1-based line number, when known.
    pub line: Option<usize>,
    /// The violated rule.
    pub rule: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.index, self.line) {
            (Some(i), Some(l)) => write!(f, "event {i} (line {l}): {}: {}", self.rule, self.message),
            (Some(i), None) => write!(f, "event {i}: {}: {}", self.rule, self.message),
            _ => write!(f, "stream: {}: {}", self.rule, self.message),
        }
    }
}

/// What [`validate_report`] found in one stream.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Events read (blank lines skipped).
    pub events: usize,
    /// Spec violations: the stream is not valid AEP when there is any.
    pub failures: Vec<Failure>,
    /// Completeness warnings (rule = the completeness rule's name): valid AEP, but a run or
    /// tool call's story is unfinished or out of order.
    pub warnings: Vec<Failure>,
    /// The stream ended inside a line (no newline, not JSON): a log read while its writer
    /// is appending, not checked until it is whole ([`crate::jsonl`]).
    pub unfinished: bool,
}

/// Validates a JSONL stream; returns the number of events read and every failure.
pub fn validate_stream(reader: impl BufRead) -> std::io::Result<(usize, Vec<Failure>)> {
    validate_report(reader).map(|r| (r.events, r.failures))
}

/// Validates a JSONL stream and checks it for agent completeness. Only events that pass
/// the per-event checks are fed to the completeness rules (a malformed one is a failure).
/// A last line still being written is left out ([`Report::unfinished`]), not a failure.
pub fn validate_report(reader: impl BufRead) -> std::io::Result<Report> {
    let mut stream = StreamValidator::new();
    let mut complete = CompletenessChecker::new();
    let mut failures = Vec::new();
    let mut warnings = Vec::new();
    let mut lines_of = Vec::new();
    let mut index = 0usize;
    let push = |failures: &mut Vec<Failure>, lines_of: &[usize], v: Violation| {
        let line = v.index.and_then(|i| lines_of.get(i).copied());
        failures.push(Failure { index: v.index, line, rule: v.rule.to_string(), message: v.message });
    };
    let warn = |warnings: &mut Vec<Failure>, lines_of: &[usize], w: Warning| {
        let line = w.index.and_then(|i| lines_of.get(i).copied());
        warnings.push(Failure { index: w.index, line, rule: w.rule.to_string(), message: w.message });
    };
    let mut lines = crate::jsonl::LiveLines::new(reader);
    for (n, line) in lines.by_ref().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        lines_of.push(n + 1);
        let value: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                failures.push(Failure {
                    index: Some(index),
                    line: Some(n + 1),
                    rule: "AEP-0003 §3.1".into(),
                    message: format!("not JSON: {e}"),
                });
                index += 1;
                continue;
            }
        };
        match crate::validate::validate_value(&value) {
            Ok(ev) => {
                for mut v in stream.push(&ev) {
                    v.index = v.index.or(Some(index));
                    push(&mut failures, &lines_of, v);
                }
                for w in complete.push_at(Some(index), &ev) {
                    warn(&mut warnings, &lines_of, w);
                }
            }
            Err(mut v) => {
                v.index = Some(index);
                push(&mut failures, &lines_of, v);
            }
        }
        index += 1;
    }
    for v in stream.finish() {
        push(&mut failures, &lines_of, v);
    }
    for w in complete.finish() {
        warn(&mut warnings, &lines_of, w);
    }
    Ok(Report { events: index, failures, warnings, unfinished: lines.unfinished() })
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVENT: &str = r#"{"aep":"0.1","id":"e1","type":"progress.status","time":"2026-01-01T00:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s","seq":1}"#;

    #[test]
    fn a_last_line_still_being_written_is_left_for_later_not_a_failure() {
        let whole = format!("{EVENT}\n{}\n", EVENT.replace("e1", "e2").replace("\"seq\":1", "\"seq\":2"));
        let r = validate_report(whole.as_bytes()).unwrap();
        assert_eq!((r.events, r.failures.len(), r.unfinished), (2, 0, false), "{:?}", r.failures);
        let torn = &whole[..whole.len() - 20];
        let r = validate_report(torn.as_bytes()).unwrap();
        assert_eq!((r.events, r.failures.len(), r.unfinished), (1, 0, true), "{:?}", r.failures);
        // A whole line that is not JSON still fails.
        let r = validate_report(format!("{EVENT}\nnot json\n").as_bytes()).unwrap();
        assert_eq!((r.failures.len(), r.unfinished), (1, false));
    }
}
