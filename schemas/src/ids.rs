//! Event ids: ULIDs (AEP-0001 §5.1 #2 recommends them; time-sortable).
//!
//! Pure: the caller supplies the millisecond timestamp and the random bits, so the
//! clock and the RNG stay outside this crate.

/// Builds a ULID string from a Unix-millisecond timestamp and 80 random bits.
pub fn ulid_from_parts(unix_ms: u64, random: u128) -> String {
    ulid::Ulid::from_parts(unix_ms, random).to_string()
}

/// A monotonic ULID generator: ids minted in the same millisecond stay strictly increasing.
#[derive(Debug, Default, Clone)]
pub struct UlidGenerator {
    last: Option<ulid::Ulid>,
}

impl UlidGenerator {
    /// A generator that has minted nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mints the next id. `random` seeds a fresh id when the millisecond moved on; within
    /// one millisecond (or if the clock went back) the previous id is incremented instead.
    pub fn next(&mut self, unix_ms: u64, random: u128) -> String {
        let fresh = ulid::Ulid::from_parts(unix_ms, random);
        let id = match self.last {
            Some(last) if fresh <= last => last.increment().unwrap_or(fresh),
            _ => fresh,
        };
        self.last = Some(id);
        id.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_within_a_millisecond() {
        let mut g = UlidGenerator::new();
        let a = g.next(1_700_000_000_000, 5);
        let b = g.next(1_700_000_000_000, 1);
        let c = g.next(1_699_999_999_999, 9);
        assert!(a < b && b < c, "{a} {b} {c}");
        assert_eq!(a.len(), 26);
    }
}
