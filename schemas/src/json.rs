//! A compact JSON writer for the hot path (one JSONL line per event): byte-for-byte the
//! output of `serde_json::to_writer`, with a string escaper that scans eight bytes at a time
//! instead of one (serde_json looks every byte up in a table; event lines are mostly long
//! runs of plain text).

use serde_json::Value;

/// Writes `s` as a JSON string literal, escaped exactly as serde_json escapes it: `"` and
/// `\`, the short escapes `\b \f \n \r \t`, other control bytes as `\u00xx` (lowercase hex),
/// everything else (DEL and non-ASCII included) as is.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    let b = s.as_bytes();
    // The common case: the whole string is clean. Its clean prefix is found first (a word
    // at a time, nothing written), then copied in one go.
    let clean = clean_prefix(b);
    out.reserve(b.len() + 2);
    out.push(b'"');
    out.extend_from_slice(&b[..clean]);
    if clean < b.len() {
        escape_into(out, &b[clean..]);
    }
    out.push(b'"');
}

/// The length of the longest prefix of `b` that needs no escape.
#[inline]
fn clean_prefix(b: &[u8]) -> usize {
    let mut i = 0;
    while let Some(w) = b.get(i..i + 8) {
        if needs_escape(word(w)) {
            break;
        }
        i += 8;
    }
    while i < b.len() && !NEEDS[usize::from(b[i])] {
        i += 1;
    }
    i
}

/// Writes `b` escaped (no quotes): runs of clean bytes are copied whole.
fn escape_into(out: &mut Vec<u8>, b: &[u8]) {
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        // Skip whole words that need no escape.
        while i + 8 <= b.len() && !needs_escape(word(&b[i..i + 8])) {
            i += 8;
        }
        // The escape is within the next eight bytes (or there is none before the end).
        let stop = (i + 8).min(b.len());
        while i < stop && !NEEDS[usize::from(b[i])] {
            i += 1;
        }
        if i == stop {
            continue;
        }
        let c = b[i];
        out.extend_from_slice(&b[start..i]);
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(c >> 4)]);
                out.push(HEX[usize::from(c & 0xf)]);
            }
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&b[start..]);
}

/// Bytes a JSON string cannot carry raw.
const NEEDS: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\\' as usize] = true;
    t
};

/// Eight bytes as a word.
#[inline]
fn word(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(b);
    u64::from_le_bytes(w)
}

/// Whether any byte of the word is a control byte, `"` or `\` (each test is exact for
/// "some byte is": a borrow may mark the wrong byte, never a clean word).
#[inline]
fn needs_escape(x: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let has_zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH != 0;
    // A byte below 0x20: (x - 0x20 per byte) borrows into its high bit while its own high bit is clear.
    let control = x.wrapping_sub(ONES * 0x20) & !x & HIGH != 0;
    control || has_zero(x ^ (ONES * u64::from(b'"'))) || has_zero(x ^ (ONES * u64::from(b'\\')))
}

/// Writes `v` as compact JSON, as `serde_json::to_writer` does.
pub fn write_value(out: &mut Vec<u8>, v: &Value) {
    write(out, v, false);
}

/// Writes `v` as canonical JSON: compact, object keys sorted by code point (the `*_digest`
/// input, AEP-0003 §9.3).
pub fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    write(out, v, true);
}

fn write(out: &mut Vec<u8>, v: &Value, sort_keys: bool) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                write_u64(out, u);
            } else {
                // Negative integers and floats: serde_json's own formatting (itoa / ryu).
                let _ = serde_json::to_writer(&mut *out, n);
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push(b'[');
            for (i, item) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item, sort_keys);
            }
            out.push(b']');
        }
        Value::Object(m) if sort_keys => {
            let mut sorted: Vec<(&String, &Value)> = m.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            write_members(out, sorted, true);
        }
        Value::Object(m) => write_members(out, m, false),
    }
}

/// Writes an object's members, in the order given.
fn write_members<'a>(out: &mut Vec<u8>, members: impl IntoIterator<Item = (&'a String, &'a Value)>, sort_keys: bool) {
    out.push(b'{');
    for (i, (k, item)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        write(out, item, sort_keys);
    }
    out.push(b'}');
}

/// Writes an unsigned integer in decimal.
pub fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// Parses JSON text into a `Value`, refusing an object with a repeated key at any depth.
///
/// RFC 8259 §4 leaves duplicate names undefined and parsers disagree (serde_json keeps the
/// last value, others the first): an event accepted with `"type"` twice would read as one
/// type here and another downstream, so AEP input with duplicates is refused outright.
pub fn from_str_strict(text: &str) -> serde_json::Result<Value> {
    strict(serde_json::Deserializer::from_str(text))
}

/// [`from_str_strict`] over bytes (UTF-8 is checked string by string, as serde_json does).
pub fn from_slice_strict(bytes: &[u8]) -> serde_json::Result<Value> {
    strict(serde_json::Deserializer::from_slice(bytes))
}

fn strict<'de, R: serde_json::de::Read<'de>>(mut de: serde_json::Deserializer<R>) -> serde_json::Result<Value> {
    let v = serde::de::DeserializeSeed::deserialize(Strict { reserve: TOP_LEVEL_MEMBERS }, &mut de)?;
    de.end()?;
    Ok(v)
}

/// Members an event object commonly has at its top level (AEP-0001 §5.1): its map is sized
/// for them up front instead of regrowing member by member.
const TOP_LEVEL_MEMBERS: usize = 24;

/// Builds a `Value` as serde_json's own visitor does, but fails on a repeated object key.
#[derive(Clone, Copy)]
pub(crate) struct Strict {
    pub(crate) reserve: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element_seed(Strict { reserve: 0 })? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = serde_json::Map::with_capacity(self.reserve);
        while let Some(key) = access.next_key::<String>()? {
            let value = access.next_value_seed(Strict { reserve: 0 })?;
            match map.entry(key) {
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                serde_json::map::Entry::Occupied(seen) => {
                    return Err(serde::de::Error::custom(format!("duplicate object key {:?}", seen.key())));
                }
            }
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_as_serde(v: &Value) {
        let mut ours = Vec::new();
        write_value(&mut ours, v);
        assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(v).unwrap());
    }

    #[test]
    fn every_byte_class_escapes_like_serde_json() {
        // Each ASCII byte alone, and at every offset of a word, between plain text.
        for c in 0u8..0x80 {
            for pad in 0..17 {
                let s = format!("{}{}{}", "a".repeat(pad), c as char, "b".repeat(17 - pad));
                same_as_serde(&Value::String(s));
            }
        }
        for s in ["", "é", "naïve ✓ 日本語", "\u{7f}\u{80}\u{10ffff}", "\"\\\"\\", "x\u{1}\u{1f} \u{20}"] {
            same_as_serde(&Value::String(s.into()));
            same_as_serde(&Value::String(s.repeat(9)));
        }
    }

    #[test]
    fn pseudo_random_strings_match() {
        // A fixed xorshift stream over a skewed alphabet (plain text, escapes, multi-byte).
        let alphabet: Vec<char> = "abc \"\\\n\t\r\u{8}\u{c}\u{0}\u{1f}\u{7f}é✓😀/".chars().collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..200 {
            let s: String = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    alphabet[(x % alphabet.len() as u64) as usize]
                })
                .collect();
            same_as_serde(&Value::String(s));
        }
    }

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        let mut out = Vec::new();
        write_canonical(&mut out, &json!({"b": [{"z": 1, "y": "\n"}], "a": {"d": null, "c": -1.5}}));
        assert_eq!(String::from_utf8(out).unwrap(), r#"{"a":{"c":-1.5,"d":null},"b":[{"y":"\n","z":1}]}"#);
    }

    #[test]
    fn values_match() {
        same_as_serde(&json!({
            "n": null, "t": true, "f": false, "u": 0, "big": u64::MAX, "neg": -3, "min": i64::MIN,
            "f64": 1.5, "exp": 1e300, "tiny": -2.5e-8, "whole": 3.0,
            "s": "line\nbreak", "a": [1, "x", [], {}, [null]], "o": {"k\"ey": {"deep": [true]}}
        }));
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            same_as_serde(&json!(n));
        }
    }

    #[test]
    fn strict_parsing_refuses_repeated_keys_at_any_depth() {
        let ok = r#"{"a":1,"b":[{"c":-2,"d":1.5}],"e":null,"f":true,"g":"\u00e9"}"#;
        assert_eq!(super::from_str_strict(ok).unwrap(), serde_json::from_str::<Value>(ok).unwrap());
        assert_eq!(super::from_slice_strict(ok.as_bytes()).unwrap(), serde_json::from_str::<Value>(ok).unwrap());
        for bad in [
            r#"{"type":"control.cancel","type":"run.started"}"#,
            r#"{"data":{"x":1,"x":2}}"#,
            r#"[{"a":{"b":[{"k":1,"k":1}]}}]"#,
        ] {
            let e = super::from_str_strict(bad).unwrap_err().to_string();
            assert!(e.contains("duplicate object key"), "{bad}: {e}");
            assert!(super::from_slice_strict(bad.as_bytes()).is_err());
        }
        assert!(super::from_str_strict("{} x").is_err(), "trailing characters");
        assert!(super::from_slice_strict(b"{\"a\":\"\xff\"}").is_err(), "invalid UTF-8");
    }

    #[test]
    fn strict_parsing_matches_serde_json_without_duplicates() {
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(200), "]".repeat(200));
        let cases = [
            r#"{"b":1,"a":{"y":2,"x":[1,{"q":null}]},"c":"é\n"}"#,
            "{}",
            r#"{"a":1} x"#,
            r#"{"a":1,}"#,
            r#"{1:2}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":1"#,
            "[1,2]",
            "\"s\"",
            "\u{a0}{\"a\":1}",
            "",
            &deep,
        ];
        for c in cases {
            let ours = super::from_str_strict(c).map(|v| v.to_string()).map_err(|e| e.to_string());
            let theirs = serde_json::from_str::<Value>(c).map(|v| v.to_string()).map_err(|e| e.to_string());
            assert_eq!(ours, theirs, "{c:?}");
        }
    }
}
