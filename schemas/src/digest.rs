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

/// HMAC-SHA256 (RFC 2104) of `msg` under `key`.
pub fn hmac_sha256(key: &[u8], msg: &[&[u8]]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let mut inner = Sha256::new();
    inner.update(pad(0x36));
    for part in msg {
        inner.update(part);
    }
    let mut outer = Sha256::new();
    outer.update(pad(0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The proof a hook reply carries for a shim that holds the token (`x-aep-proof`): hex
/// HMAC-SHA256 under the token of the shim's nonce, a newline, and the reply body. A
/// listener that does not know the token cannot make a decision the shim will relay.
pub fn reply_proof(token: &str, nonce: &str, body: &[u8]) -> String {
    hex::encode(hmac_sha256(token.as_bytes(), &[nonce.as_bytes(), b"\n", body]))
}

/// What the proof of a held reply's hold budget (`x-aep-hold-proof`) is computed over with
/// [`reply_proof`], in place of a body: not JSON, so never equal to a reply's body.
pub fn hold_proof_body(hold_ms: u64) -> String {
    format!("aep-hold {hold_ms}")
}

/// The credential a shim sends instead of its token (`Authorization: AEP-HMAC <mac>`): hex
/// HMAC-SHA256 under the token of a request label, the nonce and the body. Distinct from
/// [`reply_proof`] by its label, so a reply can never be replayed as a request.
pub fn request_mac(token: &str, nonce: &str, body: &[u8]) -> String {
    hex::encode(hmac_sha256(token.as_bytes(), &[b"aep-hook request\n", nonce.as_bytes(), b"\n", body]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 4231 test cases 1 and 6 (a key longer than the block).
    #[test]
    fn hmac_matches_rfc_4231() {
        let tc1 = hmac_sha256(&[0x0b; 20], &[b"Hi There"]);
        assert_eq!(hex::encode(tc1), "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
        let tc6 = hmac_sha256(&[0xaa; 131], &[b"Test Using Larger Than Block-Size Key - Hash Key First"]);
        assert_eq!(hex::encode(tc6), "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
        assert_eq!(hmac_sha256(b"k", &[b"ab", b"c"]), hmac_sha256(b"k", &[b"abc"]), "parts are concatenated");
    }

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
