//! Where an AEP-0003 subscription starts and what it may ask: the resume position within
//! a session, the `from` of a subscribe (AEP-0003 §5), the SSE `id:` that names a position
//! (§3.3) and the bounds on a subscription filter's size (§6.5 `limit-exceeded`). The
//! collector's bindings (SSE, WebSocket) and its replay buffer share these rules.

use serde_json::Value;

/// A resume position within a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// Restart generation.
    pub epoch: u64,
    /// Sequence within the epoch.
    pub seq: u64,
}

/// Where a subscription starts.
#[derive(Debug, Clone)]
pub enum From {
    /// Replay every held session from its earliest position (AEP-0003 §5 replay-all).
    All,
    /// Replay strictly after each position.
    Positions(Vec<(String, Position)>),
}

/// Parses `from`: `all` or a JSON array of `{session, epoch, seq}`.
pub fn parse_from(v: &Value, max: usize) -> Result<From, (&'static str, String)> {
    if v.as_str() == Some("all") {
        return Ok(From::All);
    }
    let Some(items) = v.as_array() else {
        return Err(("invalid-filter", "`from` must be \"all\" or an array of {session, epoch, seq}".into()));
    };
    if items.len() > max {
        return Err((
            "limit-exceeded",
            format!("`from` has {} positions; this endpoint replays at most {max}", items.len()),
        ));
    }
    let mut out = Vec::new();
    for it in items {
        let session = it.get("session").and_then(Value::as_str).filter(|s| !s.is_empty());
        let epoch = it.get("epoch").map_or(Some(0), Value::as_u64);
        let seq = it.get("seq").and_then(Value::as_u64);
        match (session, epoch, seq) {
            (Some(s), Some(epoch), Some(seq)) => out.push((s.to_owned(), Position { epoch, seq })),
            _ => return Err(("invalid-filter", format!("malformed `from` position {it}"))),
        }
    }
    Ok(From::Positions(out))
}

/// Renders `session:epoch:seq` (the SSE `id:` field, AEP-0003 §3.3).
pub fn sse_id(ev: &crate::Event) -> Option<String> {
    Some(format!("{}:{}:{}", ev.session.as_deref()?, ev.epoch(), ev.seq?))
}

/// Parses a `Last-Event-ID` value `session:epoch:seq` (the session may itself contain `:`).
pub fn parse_sse_id(s: &str) -> Option<(String, Position)> {
    let mut it = s.rsplitn(3, ':');
    let seq = it.next()?.parse().ok()?;
    let epoch = it.next()?.parse().ok()?;
    let session = it.next()?;
    (!session.is_empty()).then(|| (session.to_owned(), Position { epoch, seq }))
}

/// Most values one subscription filter may list, over all its members: matching runs for
/// every admitted event, so a filter's cost is bounded, not its sender's to choose.
pub const MAX_FILTER_VALUES: usize = 1024;
/// Most bytes of strings one subscription filter may hold.
pub const MAX_FILTER_BYTES: usize = 64 * 1024;

/// Refuses a filter above [`MAX_FILTER_VALUES`] values or [`MAX_FILTER_BYTES`] bytes of
/// strings, before it is parsed (AEP-0003 §6.5 `limit-exceeded`).
pub fn check_filter_size(v: &Value) -> Result<(), String> {
    let (mut values, mut bytes) = (0usize, 0usize);
    let mut stack = vec![v];
    while let Some(x) = stack.pop() {
        match x {
            Value::Array(a) => stack.extend(a),
            Value::Object(m) => {
                bytes += m.keys().map(String::len).sum::<usize>();
                stack.extend(m.values());
            }
            Value::String(s) => {
                values += 1;
                bytes += s.len();
            }
            _ => values += 1,
        }
        if values > MAX_FILTER_VALUES || bytes > MAX_FILTER_BYTES {
            return Err(format!(
                "the filter lists more than {MAX_FILTER_VALUES} values or {MAX_FILTER_BYTES} bytes; this endpoint matches at most that"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sse_ids_round_trip_with_colons_in_the_session() {
        assert_eq!(parse_sse_id("a:b:3:17"), Some(("a:b".into(), Position { epoch: 3, seq: 17 })));
        assert_eq!(parse_sse_id("s:x:1"), None);
        assert_eq!(parse_sse_id(":1:2"), None);
    }

    /// `from` is `all` or positions (epoch 0 when absent), bounded in count; anything else
    /// is refused with the code the binding sends.
    #[test]
    fn from_is_all_or_bounded_positions() {
        assert!(matches!(parse_from(&json!("all"), 2), Ok(From::All)));
        let Ok(From::Positions(p)) = parse_from(&json!([{"session": "s", "seq": 4}]), 2) else { panic!() };
        assert_eq!(p, [("s".to_owned(), Position { epoch: 0, seq: 4 })]);
        assert_eq!(parse_from(&json!([{}, {}, {}]), 2).unwrap_err().0, "limit-exceeded");
        assert_eq!(parse_from(&json!([{"session": "", "seq": 1}]), 2).unwrap_err().0, "invalid-filter");
        assert_eq!(parse_from(&json!("some"), 2).unwrap_err().0, "invalid-filter");
    }

    #[test]
    fn a_filter_is_bounded_in_values_and_bytes() {
        assert!(check_filter_size(&json!({"type": ["a", "b"]})).is_ok());
        let many: Vec<u32> = (0..=MAX_FILTER_VALUES as u32).collect();
        assert!(check_filter_size(&json!({ "seq": many })).is_err());
        assert!(check_filter_size(&json!({ "agent": "x".repeat(MAX_FILTER_BYTES + 1) })).is_err());
    }
}
