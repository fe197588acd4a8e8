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
fn non_zero(bytes: &mut [u8]) {
    if bytes.iter().all(|b| *b == 0)
        && let Some(last) = bytes.last_mut()
    {
        *last = 1;
    }
}

/// Parses a W3C `traceparent` (`00-{32 hex}-{16 hex}-{2 hex}`); `None` when malformed,
/// all-zero, or version `ff` (W3C Trace Context §3.2).
pub fn parse_traceparent(tp: &str) -> Option<SpanContext> {
    let parts: Vec<&str> = tp.trim().split('-').collect();
    if parts.len() < 4 {
        return None;
    }
    let (version, trace, span, flags) = (parts[0], parts[1], parts[2], parts[3]);
    if version.len() != 2 || version.eq_ignore_ascii_case("ff") || flags.len() != 2 {
        return None;
    }
    if version == "00" && parts.len() != 4 {
        return None;
    }
    let trace_bytes = hex::decode(trace).ok()?;
    let span_bytes = hex::decode(span).ok()?;
    hex::decode(version).ok()?;
    hex::decode(flags).ok()?;
    let trace_id: TraceId = trace_bytes.try_into().ok()?;
    let span_id: SpanId = span_bytes.try_into().ok()?;
    if trace_id.iter().all(|b| *b == 0) || span_id.iter().all(|b| *b == 0) {
        return None;
    }
    Some(SpanContext { trace_id, span_id })
}

/// Parses an RFC 3339 timestamp (`2026-07-03T10:15:04.221Z`, offsets allowed) to Unix
/// nanoseconds; `None` when malformed or before 1970.
pub fn parse_rfc3339_nanos(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = s.get(from..from + len)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_nanos: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i];
        let mut n: i64 = 0;
        for (k, c) in digits.bytes().enumerate() {
            if k < 9 {
                n = n * 10 + i64::from(c - b'0');
            }
        }
        for _ in digits.len()..9 {
            n *= 10;
        }
        frac_nanos = n;
    }
    let offset_secs: i64 = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
            let off = oh * 3600 + om * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    if secs < 0 {
        return None;
    }
    u64::try_from(secs).ok()?.checked_mul(1_000_000_000)?.checked_add(u64::try_from(frac_nanos).ok()?)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

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
}
