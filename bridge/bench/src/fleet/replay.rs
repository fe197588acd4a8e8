//! The recorded sessions a fleet's edges replay: `../shared/captures/<cli>/<scenario>/`,
//! the hook payloads (`hooks/hooks.jsonl`) and OTLP exports (`otlp/index.jsonl`, the
//! protobuf ones through their `otlp/decoded/` OTLP/JSON twins) in their recorded order
//! and spacing. Each replay renames the sessions and the trace and span ids, so every
//! edge and every pass is a session of its own and nothing collides at the sink.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::Value;

/// What one recorded step is.
#[derive(Debug, Clone)]
pub(super) enum Step {
    /// A hook: the `aep-hook` argument (`SessionStart`, ...) and whether the bridge holds
    /// it for a human (then it goes through the real shim and is answered at the hub).
    Hook { event: String, held: bool },
    /// An OTLP/HTTP export to this path (`/v1/logs`, `/v1/traces`, `/v1/metrics`), as JSON.
    Otlp { path: String },
}

/// One recorded step, `at` seconds after its capture's first.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) at: f64,
    pub(super) step: Step,
    pub(super) body: String,
}

/// One recorded session (a capture folder).
#[derive(Debug, Clone)]
pub(super) struct Capture {
    /// `<cli>/<scenario>`.
    pub(super) name: String,
    /// The vendor of `/hooks/{vendor}` and `aep-hook {vendor}`.
    pub(super) vendor: &'static str,
    /// The session ids the recording carries (renamed on every replay).
    sessions: Vec<String>,
    pub(super) entries: Vec<Entry>,
}

impl Capture {
    /// Recorded length in seconds.
    pub(super) fn span(&self) -> f64 {
        self.entries.last().map_or(0.0, |e| e.at)
    }

    /// `body` as replay `salt` sends it: its sessions renamed, its trace and span ids too
    /// (OTLP bodies).
    pub(super) fn render(&self, e: &Entry, salt: &str) -> String {
        let mut text = e.body.clone();
        for s in &self.sessions {
            text = text.replace(s.as_str(), &rename(s, salt));
        }
        if matches!(e.step, Step::Otlp { .. })
            && let Ok(mut v) = serde_json::from_str::<Value>(&text)
        {
            remap_ids(&mut v, salt);
            text = v.to_string();
        }
        text
    }

    /// The session ids replay `salt` uses.
    pub(super) fn sessions_as(&self, salt: &str) -> Vec<String> {
        self.sessions.iter().map(|s| rename(s, salt)).collect()
    }
}

/// FNV-1a 64 of `parts`.
fn fnv(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A session id of the same shape for replay `salt`: its last 12 characters replaced by
/// hex digits (a UUID stays a UUID).
fn rename(id: &str, salt: &str) -> String {
    let keep = id.len().saturating_sub(12);
    let keep = (0..=keep).rev().find(|i| id.is_char_boundary(*i)).unwrap_or(0);
    format!("{}{:012x}", &id[..keep], fnv(&[id, salt]) & 0xffff_ffff_ffff)
}

/// Rewrites every `traceId`, `spanId` and `parentSpanId` under `v` to an id derived from
/// it and `salt` (a link keeps pointing at the renamed span), as OTLP/JSON's hex; the
/// `otlp/decoded/` twins of protobuf exports carry them in base64 (protobuf's JSON
/// mapping), and their enums by name: both become OTLP/JSON's form (hex, integers).
fn remap_ids(v: &mut Value, salt: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match (k.as_str(), &mut *x) {
                    ("traceId" | "spanId" | "parentSpanId", Value::String(s)) if !s.is_empty() => {
                        // Hex length: 32 for a trace id, 16 for a span id (base64: 24 and 12).
                        let len = match s.len() {
                            24 => 32,
                            12 => 16,
                            n => n,
                        };
                        let mut out = String::new();
                        let mut n = 0u64;
                        while out.len() < len {
                            out.push_str(&format!("{:016x}", fnv(&[s, salt, &n.to_string()])));
                            n += 1;
                        }
                        out.truncate(len);
                        *s = out;
                    }
                    ("kind" | "code" | "severityNumber" | "aggregationTemporality", Value::String(s)) => {
                        if let Some(n) = enum_number(s) {
                            *x = Value::from(n);
                        }
                    }
                    _ => remap_ids(x, salt),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| remap_ids(x, salt)),
        _ => {}
    }
}

/// The number of an OTLP enum value named as protobuf's JSON mapping names it.
fn enum_number(name: &str) -> Option<i64> {
    const SPAN_KINDS: [&str; 6] = ["UNSPECIFIED", "INTERNAL", "SERVER", "CLIENT", "PRODUCER", "CONSUMER"];
    const SEVERITIES: [&str; 6] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"];
    if let Some(k) = name.strip_prefix("SPAN_KIND_") {
        return SPAN_KINDS.iter().position(|x| *x == k).map(|i| i as i64);
    }
    if let Some(c) = name.strip_prefix("STATUS_CODE_") {
        return ["UNSET", "OK", "ERROR"].iter().position(|x| *x == c).map(|i| i as i64);
    }
    if let Some(t) = name.strip_prefix("AGGREGATION_TEMPORALITY_") {
        return ["UNSPECIFIED", "DELTA", "CUMULATIVE"].iter().position(|x| *x == t).map(|i| i as i64);
    }
    let s = name.strip_prefix("SEVERITY_NUMBER_")?;
    if s == "UNSPECIFIED" {
        return Some(0);
    }
    // TRACE=1..4, DEBUG=5..8, ... : a name with a digit suffix (`INFO2`) is that step.
    let base = s.trim_end_matches(|c: char| c.is_ascii_digit());
    let step: i64 = s[base.len()..].parse().unwrap_or(1);
    SEVERITIES.iter().position(|x| *x == base).map(|i| i as i64 * 4 + step)
}

/// The vendor of a capture's `<cli>` folder.
fn vendor_of(cli: &str) -> Option<&'static str> {
    Some(match cli {
        "claude-code" => "claude-code",
        "codex" => "codex",
        "gemini-cli" => "gemini-cli",
        "qwen-cli" => "qwen-code",
        _ => return None,
    })
}

/// The hooks a bridge holds for a human (the vendors' `held` moments).
fn held(event: &str) -> bool {
    matches!(event, "PermissionRequest" | "Elicitation")
}

/// Where the captures are: `dir`, else `$AEP_CAPTURES`, else `../shared/captures` beside
/// the working directory or the source tree.
pub(super) fn captures_dir(dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    let candidates: Vec<PathBuf> = match dir {
        Some(d) => vec![d.to_owned()],
        None => std::env::var_os("AEP_CAPTURES")
            .map(PathBuf::from)
            .into_iter()
            .chain([
                PathBuf::from("../shared/captures"),
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures"),
            ])
            .collect(),
    };
    candidates.iter().find(|p| p.join("README.md").is_file() || p.is_dir()).cloned().with_context(|| {
        format!(
            "no recorded sessions at {} (the real-agent captures, ../shared/captures; pass --captures DIR or set AEP_CAPTURES)",
            candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(" or ")
        )
    })
}

/// Every capture under `root` with hooks or OTLP exports, in name order.
pub(super) fn load(root: &Path) -> anyhow::Result<Vec<Capture>> {
    let mut out = Vec::new();
    let mut clis: Vec<_> = std::fs::read_dir(root)
        .with_context(|| format!("cannot read {}", root.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    clis.sort();
    for cli in clis {
        let Some(vendor) = cli.file_name().and_then(|n| vendor_of(&n.to_string_lossy())) else { continue };
        let mut scenarios: Vec<_> =
            std::fs::read_dir(&cli)?.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect();
        scenarios.sort();
        for dir in scenarios {
            if let Some(c) = load_one(&dir, vendor)? {
                out.push(c);
            }
        }
    }
    anyhow::ensure!(!out.is_empty(), "no capture with hooks under {}", root.display());
    Ok(out)
}

fn load_one(dir: &Path, vendor: &'static str) -> anyhow::Result<Option<Capture>> {
    let mut raw: Vec<(f64, Step, String)> = Vec::new();
    let mut sessions: Vec<String> = Vec::new();
    let hooks = dir.join("hooks/hooks.jsonl");
    if let Ok(text) = std::fs::read_to_string(&hooks) {
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(l).with_context(|| format!("{}: not JSON", hooks.display()))?;
            let t = v["t"].as_f64().unwrap_or(0.0);
            let event = v["argv"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(Value::as_str)
                .or_else(|| v["hook"].as_str())
                .unwrap_or_default()
                .to_owned();
            if let Some(s) = v["payload"]["session_id"].as_str()
                && !s.is_empty()
                && !sessions.iter().any(|x| x == s)
            {
                sessions.push(s.to_owned());
            }
            let held = held(&event);
            raw.push((t, Step::Hook { event, held }, v["payload"].to_string()));
        }
    }
    if sessions.is_empty() {
        return Ok(None);
    }
    let index = dir.join("otlp/index.jsonl");
    if let Ok(text) = std::fs::read_to_string(&index) {
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(l).with_context(|| format!("{}: not JSON", index.display()))?;
            let (Some(file), Some(path)) = (v["file"].as_str(), v["path"].as_str()) else { continue };
            let json = if file.ends_with(".json") {
                dir.join("otlp").join(file)
            } else {
                dir.join("otlp/decoded").join(Path::new(file).with_extension("json"))
            };
            // The index lists every export; a few bodies were not kept (the README says which).
            let Ok(body) = std::fs::read_to_string(&json) else { continue };
            raw.push((v["t"].as_f64().unwrap_or(0.0), Step::Otlp { path: path.to_owned() }, body));
        }
    }
    raw.sort_by(|a, b| a.0.total_cmp(&b.0));
    let t0 = raw.first().map_or(0.0, |r| r.0);
    let entries = raw.into_iter().map(|(t, step, body)| Entry { at: (t - t0).max(0.0), step, body }).collect();
    let name = format!(
        "{}/{}",
        dir.parent().and_then(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    );
    Ok(Some(Capture { name, vendor, sessions, entries }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_keep_the_shape_and_differ_per_salt() {
        let id = "0d6cf5b8-1c92-46ad-b85f-ff0843039b04";
        let (a, b) = (rename(id, "e1/p0"), rename(id, "e2/p0"));
        assert_eq!(a.len(), id.len());
        assert!(a.starts_with("0d6cf5b8-1c92-46ad-b85f-"));
        assert_ne!(a, b);
        assert_eq!(a, rename(id, "e1/p0"));
        let mut v = serde_json::json!({"spans": [{"traceId": "00112233445566778899aabbccddeeff", "spanId": "0011223344556677", "parentSpanId": ""}]});
        remap_ids(&mut v, "x");
        let s = &v["spans"][0];
        assert_eq!(s["traceId"].as_str().unwrap().len(), 32);
        assert_ne!(s["spanId"], "0011223344556677");
        assert_eq!(s["parentSpanId"], "");
        let mut b = serde_json::json!({"traceId": "cHW4B1Yg/FbrPbTKeOS5pQ==", "spanId": "UT6HlYm+370=", "kind": "SPAN_KIND_INTERNAL", "severityNumber": "SEVERITY_NUMBER_INFO"});
        remap_ids(&mut b, "x");
        assert_eq!(b["traceId"].as_str().unwrap().len(), 32);
        assert_eq!(b["spanId"].as_str().unwrap().len(), 16);
        assert_eq!(b["kind"], 1);
        assert_eq!(b["severityNumber"], 9);
    }
}
