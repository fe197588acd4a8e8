//! RFC 3339 timestamps (AEP-0001 §5.1 #5) and W3C `traceparent` (§5.1 #14): one parser and
//! one formatter each, shared by validation, the projections, the OTel profiles and the bridge.

/// Signed nanoseconds since the Unix epoch of an RFC 3339 `date-time`
/// (`YYYY-MM-DD(T|t| )HH:MM:SS[.frac](Z|z|±HH:MM)`, real calendar dates, leap second
/// allowed); `None` when malformed. Fractions beyond nanoseconds are truncated.
pub fn parse_rfc3339(t: &str) -> Option<i128> {
    let b = t.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = b.get(r)?;
        s.iter().all(u8::is_ascii_digit).then(|| s.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, min, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) || hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos: i64 = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        let digits = i - start;
        if digits == 0 {
            return None;
        }
        for _ in digits..9 {
            nanos *= 10;
        }
    }
    let offset_secs = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let d = |c: &u8| c.is_ascii_digit().then(|| i64::from(c - b'0'));
            let (oh, om) = (d(h1)? * 10 + d(h2)?, d(m1)? * 10 + d(m2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let off = oh * 3600 + om * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    let secs = days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec - offset_secs;
    Some(i128::from(secs) * 1_000_000_000 + i128::from(nanos))
}

/// Unix nanoseconds of an RFC 3339 timestamp; `None` when malformed or before 1970.
pub fn parse_rfc3339_nanos(t: &str) -> Option<u64> {
    u64::try_from(parse_rfc3339(t)?).ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month, day)` of days since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u64, u64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u64;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u64;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Formats Unix milliseconds as RFC 3339 UTC with millisecond precision,
/// e.g. `2026-07-03T10:15:04.221Z` (no formatting machinery: this runs once per event).
pub fn format_rfc3339_ms(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let (y, mo, d) = civil_from_days(days);
    // Digits written into their places, two at a time (this runs for every record that
    // carries a time).
    let mut b = *b"0000-00-00T00:00:00.000Z";
    let y = y.clamp(0, 9999) as u64;
    pair(&mut b[0..2], y / 100);
    pair(&mut b[2..4], y % 100);
    pair(&mut b[5..7], mo);
    pair(&mut b[8..10], d);
    pair(&mut b[11..13], rem / 3600);
    pair(&mut b[14..16], (rem % 3600) / 60);
    pair(&mut b[17..19], rem % 60);
    let ms = unix_ms % 1000;
    b[20] = b'0' + (ms / 100) as u8;
    pair(&mut b[21..23], ms % 100);
    // ASCII throughout: the check is over 24 bytes, the copy one allocation.
    std::str::from_utf8(&b).unwrap_or_default().to_owned()
}

/// `00` to `99`, back to back.
const PAIRS: &[u8; 200] = b"00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

/// The two decimal digits of `n` (below 100) into `dst`.
fn pair(dst: &mut [u8], n: u64) {
    let i = (n as usize % 100) * 2;
    dst.copy_from_slice(&PAIRS[i..i + 2]);
}

/// A parsed W3C `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The trace id.
    pub trace_id: [u8; 16],
    /// The parent (span) id.
    pub span_id: [u8; 8],
    /// The trace-flags byte.
    pub flags: u8,
}

/// Parses a W3C `traceparent` (`vv-<32 hex>-<16 hex>-<2 hex>`, lowercase); `None` when
/// malformed, version `ff`, version `00` with extra fields, or an all-zero trace or span id.
pub fn parse_traceparent(s: &str) -> Option<TraceParent> {
    let mut parts = s.split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let rest = parts.next().is_some();
    let lower_hex =
        |p: &str, n: usize| p.len() == n && p.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    if !lower_hex(version, 2) || version == "ff" || (version == "00" && rest) {
        return None;
    }
    if !lower_hex(trace, 32) || !lower_hex(span, 16) || !lower_hex(flags, 2) {
        return None;
    }
    let mut tp = TraceParent { trace_id: [0; 16], span_id: [0; 8], flags: 0 };
    hex::decode_to_slice(trace, &mut tp.trace_id).ok()?;
    hex::decode_to_slice(span, &mut tp.span_id).ok()?;
    let mut f = [0u8; 1];
    hex::decode_to_slice(flags, &mut f).ok()?;
    tp.flags = f[0];
    if tp.trace_id.iter().all(|b| *b == 0) || tp.span_id.iter().all(|b| *b == 0) {
        return None;
    }
    Some(tp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parses_offsets_fractions_and_real_dates() {
        assert_eq!(parse_rfc3339_nanos("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T10:15:04.221Z"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("2026-07-03T12:15:04.221+02:00"), Some(1_783_073_704_221_000_000));
        assert_eq!(parse_rfc3339_nanos("2026-07-03 10:15:04.1234567891Z"), Some(1_783_073_704_123_456_789));
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Some(-1_000_000_000));
        assert_eq!(parse_rfc3339_nanos("1969-12-31T23:59:59Z"), None);
        for bad in [
            "2026-02-30T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-07-03T10:15:04",
            "2026-07-03T10:15:04.Z",
            "yesterday",
            "2026-07-03T10:15:04+2:00",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn formats_what_it_parses() {
        for ms in [0u64, 1_783_073_704_221, 951_782_400_000 /* 2000-02-29 */] {
            assert_eq!(parse_rfc3339_nanos(&format_rfc3339_ms(ms)), Some(ms * 1_000_000));
        }
        assert_eq!(format_rfc3339_ms(1_783_073_704_221), "2026-07-03T10:15:04.221Z");
        // Every field's width, against the formatting machinery, over a spread of instants.
        let mut ms = 1u64;
        while ms < 253_402_300_800_000 {
            let secs = ms / 1000;
            let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
            let rem = secs % 86_400;
            let want = format!(
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60,
                ms % 1000
            );
            assert_eq!(format_rfc3339_ms(ms), want);
            ms = ms * 3 + 7;
        }
    }

    #[test]
    fn traceparent_rules() {
        let tp = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert_eq!((tp.trace_id[0], tp.span_id[7], tp.flags), (0x4b, 0xb7, 1));
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
        assert!(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-future").is_some());
    }
}
