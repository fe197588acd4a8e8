//! Event ids: ULIDs (AEP-0001 §5.1 #2 recommends them; time-sortable).
//!
//! Pure: the caller supplies the millisecond timestamp and the random bits, so the
//! clock and the RNG stay outside this crate.

/// Builds a ULID string from a Unix-millisecond timestamp and 80 random bits.
pub fn ulid_from_parts(unix_ms: u64, random: u128) -> String {
    ulid_string(ulid::Ulid::from_parts(unix_ms, random).0)
}

/// Crockford's base32 alphabet, as ULIDs spell it.
const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The 26-character canonical text of the ULID `bits`: the `ulid` crate's spelling, five
/// bits a character from the low end, without its general-purpose encoder (an id is minted
/// for every stamped event).
pub fn ulid_string(bits: u128) -> String {
    let mut out = [0u8; 26];
    // In 64-bit pieces (a shift of a u128 is several instructions): the 48-bit time in the
    // first ten characters (the top two bits of the first are zero), then the 80 random
    // bits as two 40-bit halves of eight characters each.
    let (time, hi, lo) = ((bits >> 80) as u64, ((bits >> 40) as u64) & 0xff_ffff_ffff, (bits as u64) & 0xff_ffff_ffff);
    let (head, rest) = out.split_at_mut(10);
    let (mid, tail) = rest.split_at_mut(8);
    for (chunk, mut v) in [(head, time), (mid, hi), (tail, lo)] {
        for c in chunk.iter_mut().rev() {
            *c = CROCKFORD[(v & 0x1f) as usize];
            v >>= 5;
        }
    }
    // ASCII throughout: the check is over 26 bytes, the copy one allocation.
    std::str::from_utf8(&out).unwrap_or_default().to_owned()
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
        ulid_string(id.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulid_text_is_the_ulid_crates_spelling() {
        let mut x: u128 = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210;
        for bits in [0, 1, u128::MAX, 1 << 127, (1 << 80) - 1] {
            assert_eq!(ulid_string(bits), ulid::Ulid(bits).to_string());
        }
        for _ in 0..1000 {
            // xorshift: a spread of bit patterns, no RNG dependency.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(ulid_string(x), ulid::Ulid(x).to_string());
        }
    }

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

/// Percent-encodes `s` for a URI path segment or query value: every byte outside RFC 3986's
/// unreserved set (`A-Z a-z 0-9 - . _ ~`) as `%XX`. Ids are untrusted input (AEP-0003
/// §9.6): the bridge, its CLI and the hook shim put them in URLs with this one encoder.
pub fn percent_encode(s: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 15)] as char);
        }
    }
    out
}

#[cfg(test)]
mod percent_tests {
    #[test]
    fn percent_encode_keeps_the_unreserved_set_and_encodes_the_rest() {
        assert_eq!(super::percent_encode("per_1/../x y~é"), "per_1%2F..%2Fx%20y~%C3%A9");
        assert_eq!(super::percent_encode("a?b=c&d#"), "a%3Fb%3Dc%26d%23");
    }
}
