//! Bearer-token checks shared by every authenticated surface (hooks, OTLP, collector).

pub use aep_receivers::access::{bearer_ok, constant_time_eq};

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
