//! `*_digest` fields: SHA-256 over canonical JSON, hex of the first 16 bytes (AEP-0003 §9.3).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` as canonical JSON: object keys sorted by code point, no insignificant
/// whitespace, strings as `serde_json` escapes them (UTF-8 kept raw, as RFC 8785 does).
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::new();
    crate::json::write_canonical(&mut out, value);
    // The writer copies `str`s and ASCII punctuation only: always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// The `*_digest` of an original value (computed before any redaction, AEP-0003 §9.3).
pub fn digest(value: &Value) -> String {
    let hash = Sha256::digest(canonical_json(value).as_bytes());
    hex::encode(&hash[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn digest_is_over_sorted_compact_json() {
        // Pinned by the Codex Annex A fixture (PreToolUse / PostToolUse).
        assert_eq!(digest(&json!({"command": "ls -la"})), "1df8bccaec747dc615b50678f35bf5b5");
        assert_eq!(digest(&json!({"output": "total 0", "exit_code": 0})), "23b8f930346a70ec5e43f5c98cc78c5e");
        assert_eq!(
            canonical_json(&json!({"b": [1, {"d": 1, "c": 2}], "a": "é"})),
            r#"{"a":"é","b":[1,{"c":2,"d":1}]}"#
        );
    }
}
