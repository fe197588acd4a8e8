//! Wall-clock helpers: RFC 3339 timestamps for stamped Events (AEP-0001 §5.1 #5).

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// The wall clock now, in Unix milliseconds: the one reading the observers, the control
/// loop, the CLI clients and the epoch seed take their time from.
pub fn now_ms() -> u64 {
    unix_ms(SystemTime::now())
}

/// Nanoseconds since the Unix epoch.
pub fn unix_nanos(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The wall clock now, in Unix nanoseconds (the span assembler's clock base).
pub fn now_nanos() -> u64 {
    unix_nanos(SystemTime::now())
}

/// Formats Unix milliseconds as RFC 3339 UTC with millisecond precision, e.g. `2026-07-03T10:15:04.221Z`.
pub use aep_schemas::time::format_rfc3339_ms as rfc3339_ms;

/// Parses an RFC 3339 timestamp into Unix nanoseconds.
pub use aep_schemas::time::parse_rfc3339_nanos;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_783_073_704_221), "2026-07-03T10:15:04.221Z");
        assert_eq!(parse_rfc3339_nanos("2026-07-03T10:15:04.221Z"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T12:15:04.221+02:00"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("yesterday"), None);
    }
}
