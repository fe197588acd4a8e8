//! Bearer-token checks shared by every authenticated surface (hooks, OTLP, collector).

/// Compares secrets without an early exit on the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a request carrying `got` passes a surface that wants `want` (none: open).
pub fn bearer_ok(want: Option<&str>, got: Option<&str>) -> bool {
    match want {
        None => true,
        Some(want) => got.is_some_and(|t| constant_time_eq(t.as_bytes(), want.as_bytes())),
    }
}
