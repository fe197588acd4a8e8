//! Deterministic OTLP ids, W3C `traceparent` parsing and RFC 3339 time parsing.
//!
//! Ids are SHA-256 digests of length-prefixed identity parts, so a replayed or late Event
//! lands on the same trace and span wherever and whenever it is assembled.

use sha2::{Digest, Sha256};

/// A 16-byte OTLP trace id.
pub type TraceId = [u8; 16];
/// An 8-byte OTLP span id.
pub type SpanId = [u8; 8];

/// A trace position: the trace id and the span id inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanContext {
    /// The trace.
    pub trace_id: TraceId,
    /// The span.
    pub span_id: SpanId,
}

fn digest(domain: &str, parts: &[&str]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"aep-bridge.spans.v1\0");
    h.update((domain.len() as u64).to_be_bytes());
    h.update(domain.as_bytes());
    for p in parts {
        // Length prefixes keep ("ab","c") and ("a","bc") apart.
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    h.finalize().into()
}

/// The trace id of a session keyed by `(source, session)` (AEP-0001 §5.2).
pub fn session_trace_id(source: &str, session: &str) -> TraceId {
    let d = digest("trace", &[source, session]);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    non_zero(&mut out);
    out
}

/// The trace id of one run when runs get their own traces ([`super::SpanConfig::trace_per_run`]).
pub fn run_trace_id(source: &str, session: &str, run: &str) -> TraceId {
    let d = digest("trace-run", &[source, session, run]);
    let mut out = [0u8; 16];
    out.copy_from_slice(&d[..16]);
    non_zero(&mut out);
    out
}

/// A span id from a kind (`session`, `run`, `tool`...) and identity parts.
pub fn span_id(kind: &str, parts: &[&str]) -> SpanId {
    let d = digest(kind, parts);
    let mut out = [0u8; 8];
    out.copy_from_slice(&d[..8]);
    non_zero(&mut out);
    out
}

/// All-zero ids are invalid in OTLP; a digest is all zeros with negligible odds.
/// The root span context of a session's first generation, as derived (no `traceparent`).
pub fn session_root_context(source: &str, session: &str) -> SpanContext {
    SpanContext { trace_id: session_trace_id(source, session), span_id: span_id("session", &[source, session, "0"]) }
}

/// The span context of a run of a session's first generation, as derived (no
/// `traceparent`): in the session's trace, or in its own with `trace_per_run`.
pub fn run_context(source: &str, session: &str, run: &str, trace_per_run: bool) -> SpanContext {
    let trace_id = if trace_per_run { run_trace_id(source, session, run) } else { session_trace_id(source, session) };
    SpanContext { trace_id, span_id: span_id("run", &[source, session, "0", run]) }
}

/// The source of a sibling session of the same emitter: the RECOMMENDED source form
/// `aep://{host}/agent/{agent}/session/{session}` (AEP-0001 §5.1 #6) with the agent and
/// session swapped; a source of another form is shared by its sessions and kept as is.
pub fn sibling_source(source: &str, agent: &str, session: &str) -> String {
    if let Some(at) = source.rfind("/session/") {
        let head = &source[..at];
        if let Some(a) = head.rfind("/agent/") {
            return format!("{}/agent/{agent}/session/{session}", &head[..a]);
        }
        return format!("{head}/session/{session}");
    }
    source.to_owned()
}

fn non_zero(bytes: &mut [u8]) {
    if bytes.iter().all(|b| *b == 0)
        && let Some(last) = bytes.last_mut()
    {
        *last = 1;
    }
}

/// Parses a W3C `traceparent` (the shared parser, [`aep_schemas::time::parse_traceparent`]).
pub fn parse_traceparent(tp: &str) -> Option<SpanContext> {
    let t = aep_schemas::time::parse_traceparent(tp.trim())?;
    Some(SpanContext { trace_id: t.trace_id, span_id: t.span_id })
}

/// Parses an RFC 3339 timestamp to Unix nanoseconds; `None` when malformed or before 1970.
pub use aep_schemas::time::parse_rfc3339_nanos;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339() {
        assert_eq!(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T10:15:04.221Z"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T12:15:04.221+02:00"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T10:15:04.123456789123Z"), Some(1_783_073_704_123_456_789));
        assert_eq!(parse_rfc3339_nanos("2000-02-29T00:00:00Z"), Some(951_782_400_000_000_000));
        for bad in [
            "",
            "t",
            "2026-07-03 10:15:04",
            "2026-13-03T10:15:04Z",
            "2026-07-03T10:15:04.Z",
            "1969-12-31T23:59:59Z",
            "2026-07-03T10:15:04+0200",
        ] {
            assert_eq!(parse_rfc3339_nanos(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_traceparent() {
        let c = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!(hex::encode(c.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex::encode(c.span_id), "00f067aa0ba902b7");
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e47-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "garbage",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn ids_are_stable_and_distinct() {
        assert_eq!(session_trace_id("a", "b"), session_trace_id("a", "b"));
        assert_ne!(session_trace_id("ab", "c"), session_trace_id("a", "bc"));
        assert_ne!(span_id("run", &["s", "r"]), span_id("tool", &["s", "r"]));
    }

    #[test]
    fn sibling_sources() {
        assert_eq!(
            sibling_source("aep://h/agent/claude-code/session/s1", "codex", "s2"),
            "aep://h/agent/codex/session/s2"
        );
        assert_eq!(sibling_source("aep://h/session/s1", "a", "s2"), "aep://h/session/s2");
        assert_eq!(sibling_source("aep://relay", "a", "s2"), "aep://relay");
    }
}
