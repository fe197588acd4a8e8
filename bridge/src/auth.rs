//! Bearer-token checks shared by every authenticated surface (hooks, OTLP, collector).

/// Compares a presented secret with the expected one in a time that depends on the
/// presented length only: not on where they differ, nor on the expected secret's length
/// (a shorter or longer guess takes the same walk, so it learns neither).
pub fn constant_time_eq(presented: &[u8], expected: &[u8]) -> bool {
    let mut diff = u8::from(presented.len() != expected.len());
    let n = expected.len().max(1);
    for (i, x) in presented.iter().enumerate() {
        diff |= x ^ expected.get(i % n).copied().unwrap_or(0);
    }
    std::hint::black_box(diff) == 0
}

/// Whether a request carrying `got` passes a surface that wants `want` (none: open),
/// compared in constant time.
pub fn bearer_ok(want: Option<&str>, got: Option<&str>) -> bool {
    match want {
        None => true,
        Some(want) => got.is_some_and(|t| constant_time_eq(t.as_bytes(), want.as_bytes())),
    }
}

/// How far a MAC-authenticated request's nonce (a ULID) may be from the bridge's clock.
pub const NONCE_WINDOW_MS: u64 = 60_000;

/// Most nonces remembered; past it the oldest are forgotten first.
const MAX_NONCES: usize = 100_000;

/// Nonces of MAC-authenticated hook calls seen within [`NONCE_WINDOW_MS`]: each is taken
/// once, so a captured request cannot be replayed.
#[derive(Debug, Default)]
pub struct Nonces {
    seen: std::sync::Mutex<Seen>,
}

/// Nonces in the order they were taken (with their mint time), and as a set.
type Seen = (std::collections::VecDeque<(u64, String)>, std::collections::HashSet<String>);

impl Nonces {
    /// `true` the first time `nonce`, a ULID minted within the window of `now_ms`, is seen.
    pub fn fresh(&self, nonce: &str, now_ms: u64) -> bool {
        let Ok(id) = ulid::Ulid::from_string(nonce) else { return false };
        let minted = id.timestamp_ms();
        if minted.saturating_add(NONCE_WINDOW_MS) < now_ms || minted > now_ms.saturating_add(NONCE_WINDOW_MS) {
            return false;
        }
        let mut g = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (order, set) = &mut *g;
        while let Some((t, _)) = order.front() {
            if t.saturating_add(NONCE_WINDOW_MS) >= now_ms && order.len() < MAX_NONCES {
                break;
            }
            if let Some((_, old)) = order.pop_front() {
                set.remove(&old);
            }
        }
        if !set.insert(nonce.to_owned()) {
            return false;
        }
        order.push_back((minted, nonce.to_owned()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_equal_whatever_the_lengths() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(constant_time_eq(b"", b""));
        for (a, b) in [
            (&b"s3cret"[..], &b"s3creT"[..]),
            (b"s3cre", b"s3cret"),
            (b"s3crets3cret", b"s3cret"),
            (b"", b"x"),
            (b"x", b""),
        ] {
            assert!(!constant_time_eq(a, b), "{a:?} {b:?}");
        }
        assert!(bearer_ok(None, None));
        assert!(!bearer_ok(Some("t"), None));
        assert!(bearer_ok(Some("t"), Some("t")));
    }
}
