//! History import: what the per-vendor transcript mappings
//! (`vendors::claude_code::transcript`, `vendors::codex::rollout`) share.
//!
//! A transcript is replayed as the hook calls the live agent would have fired, at the
//! records' own times, through the vendor's own [`crate::HookAdapter`]: the imported events
//! carry the tool names, call ids, runs and capture gating the live hooks produce, with no
//! parallel vocabulary to drift. Every draft leaves with its `time` (the record's timestamp:
//! no clock) and a deterministic `id` derived from the vendor session id and the record's
//! own key (its uuid, else its position), so mapping the same file twice gives the same
//! events (AEP-0001 §5.1 #2: the id is the idempotency key).
//!
//! Pure: the caller reads the files and hands their text in. Which files, where, is the
//! vendor's [`HistorySpec`] (through [`crate::HookAdapter::history`]): `aep-bridge import`
//! offers one folder flag per vendor that has one, read from the vendor list.

use serde_json::{Map, Value};

use crate::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// One transcript file as read: a label for warnings (its path) and its text.
#[derive(Debug, Clone)]
pub struct Transcript {
    /// Names the file in warnings (the path, as the caller prints it).
    pub label: String,
    /// The JSONL text.
    pub text: String,
}

/// One AEP session mapped from one vendor session's transcript files.
#[derive(Debug, Clone, Default)]
pub struct ImportedSession {
    /// The vendor (agent identity), e.g. `claude-code`.
    pub vendor: &'static str,
    /// The AEP session id: the vendor's own session id, as the live hooks name it.
    pub session: String,
    /// The first record's time (RFC 3339), for `--since` style filters.
    pub first_time: Option<String>,
    /// The last record's time (RFC 3339).
    pub last_time: Option<String>,
    /// The drafts in order, each with `id`, `time`, `session` (and `run` where it has one).
    pub drafts: Vec<EventDraft>,
}

/// A line a transcript could not use: malformed or truncated JSON, or a record without a
/// timestamp. The rest of the file is still mapped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineIssue {
    /// The file's label.
    pub label: String,
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// What mapping a set of transcripts gave: the sessions and the lines skipped.
#[derive(Debug, Clone, Default)]
pub struct Imported {
    /// The sessions, one per vendor session id.
    pub sessions: Vec<ImportedSession>,
    /// Every line that was skipped, in file order.
    pub issues: Vec<LineIssue>,
}

/// Where a vendor keeps its own history and how it maps: the files the caller finds and
/// reads (a folder under the user's home by default, searched recursively), and the
/// vendor's mapping of what was read.
#[derive(Debug, Clone, Copy)]
pub struct HistorySpec {
    /// The folder under the user's home read by default (`.codex/sessions`).
    pub home_dir: &'static str,
    /// The `aep-bridge import` flag naming another folder (`--{flag} DIR`).
    pub flag: &'static str,
    /// The session files in the folder.
    pub files: FileMatch,
    /// Files kept beside each session file (its subagents' transcripts), if any.
    pub companions: Option<Companions>,
    /// Maps the session files read, in path order.
    pub map: fn(&[SessionFile], &MapContext) -> Imported,
}

/// Which file names are wanted.
#[derive(Debug, Clone, Copy)]
pub struct FileMatch {
    /// The name's start (`""` for any).
    pub prefix: &'static str,
    /// The name's end (`.jsonl`).
    pub suffix: &'static str,
    /// A file directly in a folder of this name is not one (that folder holds companions).
    pub not_in: Option<&'static str>,
}

impl FileMatch {
    /// Whether a file `name` in a folder named `parent` is wanted.
    pub fn matches(&self, name: &str, parent: Option<&str>) -> bool {
        name.starts_with(self.prefix)
            && name.ends_with(self.suffix)
            && !(self.not_in.is_some() && parent.is_some() && self.not_in == parent)
    }
}

/// The files kept beside a session file.
#[derive(Debug, Clone, Copy)]
pub struct Companions {
    /// Their folder, inside the one named like the session file without its extension.
    pub dir: &'static str,
    /// Which files in it.
    pub files: FileMatch,
    /// The extension that replaces a companion's own to name its metadata file (JSON), if
    /// it has one.
    pub meta_ext: Option<&'static str>,
}

/// A session file as read, with its companions.
#[derive(Debug, Clone)]
pub struct SessionFile {
    /// The session's transcript.
    pub transcript: Transcript,
    /// The companions' transcripts, in path order.
    pub companions: Vec<Companion>,
}

/// A companion's transcript with its metadata file, when there is one.
#[derive(Debug, Clone)]
pub struct Companion {
    /// The companion's transcript.
    pub transcript: Transcript,
    /// The parsed metadata file.
    pub meta: Option<Value>,
}

/// One parsed record: its line number and JSON object.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// The 1-based line number.
    pub line: usize,
    /// The record.
    pub value: Value,
}

/// Parses a JSONL text into its object records; every other non-blank line (malformed or
/// truncated JSON, a non-object) becomes a [`LineIssue`] and the rest goes on.
pub(crate) fn parse_records(t: &Transcript, issues: &mut Vec<LineIssue>) -> Vec<Record> {
    let mut out = Vec::new();
    for (i, line) in t.text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Value>(line) {
            Ok(v) if v.is_object() => out.push(Record { line: i + 1, value: v }),
            Ok(_) => {
                issues.push(LineIssue { label: t.label.clone(), line: i + 1, message: "not a JSON object".into() })
            }
            Err(e) => issues.push(LineIssue { label: t.label.clone(), line: i + 1, message: format!("not JSON: {e}") }),
        }
    }
    out
}

/// The record's RFC 3339 `timestamp`, when it has a valid one.
pub(crate) fn timestamp(v: &Value) -> Option<&str> {
    v.get("timestamp").and_then(Value::as_str).filter(|t| aep_schemas::validate::is_rfc3339(t))
}

/// One hook call the agent would have fired, at a record's time.
#[derive(Debug, Clone)]
pub(crate) struct Moment {
    /// The record's time (RFC 3339).
    pub time: String,
    /// Milliseconds since the Unix epoch of `time` (the merge order and the id's time part).
    pub ms: u64,
    /// A key unique within the vendor session: the record's uuid or `{file}:{line}`, plus
    /// a suffix when one record yields several moments.
    pub key: String,
    /// The synthesized hook payload.
    pub payload: Value,
    /// Fields to add to the `run.finished` this moment yields (the turn's token usage).
    pub finish_extra: Map<String, Value>,
}

impl Moment {
    /// A moment at `time` (an RFC 3339 string already checked by [`timestamp`]).
    pub fn new(time: &str, key: String, payload: Value) -> Self {
        let ms = aep_schemas::time::parse_rfc3339(time).map(|n| (n / 1_000_000).max(0) as u64).unwrap_or(0);
        Self { time: time.to_owned(), ms, key, payload, finish_extra: Map::new() }
    }
}

/// Merges per-file moment lists by time, keeping each file's own order (a record written
/// later in a file never moves ahead of an earlier one); ties go to the earlier file.
pub(crate) fn merge_by_time(files: Vec<Vec<Moment>>) -> Vec<Moment> {
    let mut iters: Vec<std::iter::Peekable<std::vec::IntoIter<Moment>>> =
        files.into_iter().map(|f| f.into_iter().peekable()).collect();
    let mut out = Vec::new();
    loop {
        let mut best: Option<(usize, u64)> = None;
        for (i, it) in iters.iter_mut().enumerate() {
            if let Some(m) = it.peek()
                && best.is_none_or(|(_, ms)| m.ms < ms)
            {
                best = Some((i, m.ms));
            }
        }
        let Some((i, _)) = best else { break };
        if let Some(m) = iters[i].next() {
            out.push(m);
        }
    }
    out
}

/// The deterministic event id of the `n`th draft of the moment `key` in `vendor`'s
/// `session`: a ULID whose time part is the record's millisecond and whose 80 other bits
/// come from a SHA-256 of the names (AEP-0001 §5.1 #2 recommends ULIDs; these stay
/// time-sortable and are the same on every import of the same record).
pub fn event_id(vendor: &str, session: &str, key: &str, n: usize, ms: u64) -> String {
    let n = n.to_string();
    let mac = aep_schemas::digest::hmac_sha256(
        b"aep-bridge import",
        &[vendor.as_bytes(), b"\0", session.as_bytes(), b"\0", key.as_bytes(), b"\0", n.as_bytes()],
    );
    let mut bits = [0u8; 16];
    bits[6..].copy_from_slice(&mac[..10]);
    aep_schemas::ids::ulid_from_parts(ms, u128::from_be_bytes(bits))
}

/// Replays `moments` of `session` through `adapter` (the live hook mapping): each draft
/// gets the moment's time and a deterministic id; a moment's `finish_extra` lands on the
/// `run.finished` it yields. A moment the adapter refuses yields nothing.
pub(crate) fn replay(
    adapter: &dyn HookAdapter,
    session: &str,
    moments: Vec<Moment>,
    cx: &MapContext,
) -> ImportedSession {
    let vendor = adapter.vendor();
    let mut state = SessionState::default();
    let mut drafts = Vec::new();
    let first_time = moments.first().map(|m| m.time.clone());
    let last_time = moments.last().map(|m| m.time.clone());
    for m in moments {
        let Ok(out) = adapter.map(&HookCall { event: None, payload: &m.payload }, &mut state, cx) else { continue };
        for (n, mut d) in out.into_iter().enumerate() {
            d.time = Some(m.time.clone());
            d.id = Some(event_id(vendor, session, &m.key, n, m.ms));
            if d.r#type == "run.finished" {
                for (k, v) in &m.finish_extra {
                    d.data.insert(k.clone(), v.clone());
                }
            }
            drafts.push(d);
        }
    }
    ImportedSession { vendor, session: session.to_owned(), first_time, last_time, drafts }
}

/// The flat `usage` fields (AEP-0002 §5.2, named as OTel GenAI names them) of a token count.
pub(crate) fn usage_fields(input: u64, output: u64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("gen_ai.usage.input_tokens".into(), Value::from(input));
    m.insert("gen_ai.usage.output_tokens".into(), Value::from(output));
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_deterministic_time_sortable_ulids() {
        let a = event_id("codex", "s", "k", 0, 1_796_482_477_000);
        assert_eq!(a, event_id("codex", "s", "k", 0, 1_796_482_477_000));
        assert_ne!(a, event_id("codex", "s", "k", 1, 1_796_482_477_000));
        assert_ne!(a, event_id("codex", "s2", "k", 0, 1_796_482_477_000));
        assert_eq!(a.len(), 26);
        assert!(a < event_id("codex", "s", "k", 0, 1_796_482_477_001));
    }

    #[test]
    fn bad_lines_are_issues_and_the_rest_is_kept() {
        let t = Transcript { label: "f".into(), text: "{\"a\":1}\n\n[1]\n{\"b\":2}\n{\"trunc".into() };
        let mut issues = Vec::new();
        let r = parse_records(&t, &mut issues);
        assert_eq!(r.iter().map(|r| r.line).collect::<Vec<_>>(), [1, 4]);
        assert_eq!(issues.iter().map(|i| i.line).collect::<Vec<_>>(), [3, 5]);
    }

    #[test]
    fn merge_keeps_file_order_and_interleaves_by_time() {
        let m = |t: &str, k: &str| Moment::new(t, k.into(), Value::Null);
        let a = vec![m("2026-01-01T00:00:01Z", "a1"), m("2026-01-01T00:00:05Z", "a2")];
        let b = vec![m("2026-01-01T00:00:03Z", "b1"), m("2026-01-01T00:00:02Z", "b2")];
        let keys: Vec<String> = merge_by_time(vec![a, b]).into_iter().map(|m| m.key).collect();
        assert_eq!(keys, ["a1", "b1", "b2", "a2"]);
    }
}
