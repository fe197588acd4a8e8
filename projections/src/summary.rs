//! A session's summary folded from its logged lines, one line at a time: times, counts,
//! the last run, tokens and cost, the highest severity, its event types and the requests
//! still open. The web view's history keeps one per session log and catches up by folding
//! only what was appended; the fold is pure (no clock: times are the events' own), so the
//! same lines always give the same summary.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// Most open requests a summary keeps (the newest); a session rarely has more than one.
const MAX_OPEN: usize = 16;

/// Most distinct event types a summary lists.
const MAX_TYPES: usize = 64;

/// Longest label kept, in bytes.
const MAX_LABEL: usize = 400;

/// Longest line kept as an open request, in bytes (a request is a prompt and its options).
const MAX_REQUEST_LINE: usize = 64 * 1024;

/// Token keys of model-call records (`x.*`) and of runs and tools (AEP-0002 §5.2 `usage`).
const IN_KEYS: [&str; 3] = ["gen_ai.usage.input_tokens", "input_tokens", "input_token_count"];
const OUT_KEYS: [&str; 3] = ["gen_ai.usage.output_tokens", "output_tokens", "output_token_count"];

/// What one session's log says, kept per file.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// The emitting agent.
    pub agent: String,
    /// The session id.
    pub session: String,
    /// `session.started` `data.label`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// First and last event times, Unix ms.
    pub first: u64,
    /// Last event time, Unix ms.
    pub last: u64,
    /// `session.ended` time, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<u64>,
    /// Events read.
    pub events: u64,
    /// The highest `(epoch, seq)` read: a live event at or below it is already counted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pos: Option<(u64, u64)>,
    /// Runs seen, tools called, tool calls that failed.
    pub runs: u32,
    /// Tool calls (`tool.requested`, or an outcome without one).
    pub tools: u32,
    /// Tool calls that failed or were denied.
    pub failed: u32,
    /// The last run: id, status (`running`, `finished`, ...), start and end (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunState>,
    /// Tokens and cost from runs and tools (AEP `usage`/`cost`).
    pub tokens: Tokens,
    /// The highest severity seen.
    pub severity: &'static str,
    /// Distinct event types, sorted (at most 64).
    pub types: Vec<String>,
    /// `attention.requested` events not yet answered, resolved or timed out, as logged.
    pub open: Vec<Box<RawValue>>,
}

/// The last run of a session.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunState {
    /// Run id.
    pub id: String,
    /// `running`, or the closing event's name (`finished`, `failed`, `cancelled`).
    pub status: String,
    /// Start, Unix ms.
    pub start: u64,
    /// End, Unix ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<u64>,
}

/// Tokens and cost: runs' and tools' own `usage`/`cost`, and model-call records' sums
/// (shown instead when a session has any, since a run's usage would count them again).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tokens {
    /// Input tokens of runs and tools.
    pub run_in: u64,
    /// Output tokens of runs and tools.
    pub run_out: u64,
    /// Cost of runs and tools by currency.
    pub run_cost: BTreeMap<String, f64>,
    /// Model-call records counted.
    pub calls: u64,
    /// Input tokens of model calls.
    pub call_in: u64,
    /// Output tokens of model calls.
    pub call_out: u64,
    /// Cost of model calls by currency.
    pub call_cost: BTreeMap<String, f64>,
}

/// The envelope of one logged line, `data` left unparsed.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, rename = "type")]
    ty: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    time: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    agent: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    session: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    run: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    subject: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    severity: Option<std::borrow::Cow<'a, str>>,
    seq: Option<u64>,
    epoch: Option<u64>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

const SEVERITIES: [&str; 6] = ["debug", "info", "notice", "warning", "error", "critical"];

/// The rank of a severity name, `debug` lowest; an unknown name ranks as `info`.
pub fn severity_rank(s: &str) -> usize {
    SEVERITIES.iter().position(|x| *x == s).unwrap_or(1)
}

/// The severity an event carries, or the one the view gives it (a request is `notice`, a
/// failure `warning`).
fn severity_of(l: &Line<'_>) -> usize {
    if let Some(s) = &l.severity {
        return severity_rank(s);
    }
    if l.ty == "attention.requested" {
        2
    } else if l.ty.ends_with(".failed") || l.ty.starts_with("error.") {
        3
    } else {
        1
    }
}

fn ms_of(time: Option<&str>) -> Option<u64> {
    time.and_then(aep_schemas::time::parse_rfc3339_nanos).map(|n| n / 1_000_000)
}

fn num(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_f64().unwrap_or(0.0),
        Value::String(s) => s.parse().unwrap_or(0.0),
        _ => 0.0,
    }
    .max(0.0)
}

fn pick(d: &serde_json::Map<String, Value>, keys: &[&str]) -> u64 {
    let usage = d.get("usage").and_then(Value::as_object);
    keys.iter().find_map(|k| usage.and_then(|u| u.get(*k)).or_else(|| d.get(*k))).map(num).unwrap_or(0.0) as u64
}

fn add_cost(into: &mut BTreeMap<String, f64>, cost: Option<&Value>) {
    let Some(c) = cost.and_then(Value::as_object) else { return };
    let (Some(cur), Some(total)) = (c.get("currency").and_then(Value::as_str), c.get("total").map(num)) else {
        return;
    };
    if total > 0.0 && cur.len() <= 16 && into.len() < 8 {
        *into.entry(cur.to_owned()).or_default() += total;
    }
}

impl Summary {
    /// Whether anything in this file is a session's own event (a file of commands only,
    /// the log of a sender such as the view, is not a session).
    pub fn is_session(&self) -> bool {
        self.events > 0
    }

    /// Folds one logged line in. `raw` is the whole line (kept for open requests); `false`
    /// when it is not an AEP line.
    pub fn add(&mut self, raw: &[u8]) -> bool {
        let Ok(l) = serde_json::from_slice::<Line<'_>>(raw) else { return false };
        let ty = l.ty.as_ref();
        // Commands carry no position and belong to their sender's log.
        if ty.starts_with("control.") && l.seq.is_none() && ty != "control.accepted" && ty != "control.rejected" {
            return true;
        }
        let t = ms_of(l.time.as_deref()).unwrap_or(self.last);
        if self.events == 0 {
            self.agent = l.agent.as_deref().unwrap_or_default().to_owned();
            self.session = l.session.as_deref().unwrap_or_default().to_owned();
            self.first = t;
            self.severity = SEVERITIES[1];
        }
        self.events += 1;
        self.first = self.first.min(t);
        self.last = self.last.max(t);
        if let Some(seq) = l.seq {
            let p = (l.epoch.unwrap_or(0), seq);
            if self.pos.is_none_or(|q| p > q) {
                self.pos = Some(p);
            }
        }
        if severity_of(&l) > severity_rank(self.severity) {
            self.severity = SEVERITIES[severity_of(&l)];
        }
        if self.types.len() < MAX_TYPES
            && let Err(i) = self.types.binary_search_by(|x| x.as_str().cmp(ty))
        {
            self.types.insert(i, ty.to_owned());
        }
        let needs_data = matches!(ty, "session.started" | "run.finished" | "run.failed" | "attention.requested")
            || (ty.starts_with("x.") || ty.starts_with("tool.") || ty == "run.cancelled")
                && l.data.is_some_and(|d| {
                    let s = d.get();
                    s.contains("token") || s.contains("cost") || s.contains("duration_ms")
                });
        let data: serde_json::Map<String, Value> = match (needs_data, l.data) {
            (true, Some(d)) => serde_json::from_str(d.get()).unwrap_or_default(),
            _ => serde_json::Map::new(),
        };
        match ty {
            "session.started" => {
                if let Some(label) = data.get("label").and_then(Value::as_str) {
                    self.label = clip(label, MAX_LABEL);
                }
            }
            "session.ended" => self.ended = Some(t),
            "run.started" => {
                self.runs += 1;
                self.run = Some(RunState {
                    id: l.run.as_deref().unwrap_or_default().to_owned(),
                    status: "running".into(),
                    start: t,
                    end: None,
                });
            }
            "run.finished" | "run.failed" | "run.cancelled" => {
                let id = l.run.as_deref().unwrap_or_default();
                let status = ty.trim_start_matches("run.").to_owned();
                let start = match data.get("duration_ms").map(num) {
                    Some(d) if d > 0.0 => t.saturating_sub(d as u64),
                    _ => self.run.as_ref().filter(|r| r.id == id).map_or(t, |r| r.start),
                };
                if self.run.as_ref().is_none_or(|r| r.id != id) {
                    self.runs += 1;
                }
                self.run = Some(RunState { id: id.to_owned(), status, start, end: Some(t) });
            }
            "tool.requested" => self.tools += 1,
            "tool.failed" | "tool.denied" => self.failed += 1,
            "attention.requested" => {
                if raw.len() <= MAX_REQUEST_LINE
                    && let Ok(r) = serde_json::from_slice::<Box<RawValue>>(raw)
                {
                    if self.open.len() >= MAX_OPEN {
                        self.open.remove(0);
                    }
                    self.open.push(r);
                }
            }
            "attention.resolved" | "attention.timeout" => {
                if let Some(subject) = l.subject.as_deref() {
                    self.open.retain(|r| request_id(r).as_deref() != Some(subject));
                }
            }
            _ => {}
        }
        if ty.starts_with("x.") {
            let (i, o) = (pick(&data, &IN_KEYS), pick(&data, &OUT_KEYS));
            if i > 0 || o > 0 {
                self.tokens.calls += 1;
                self.tokens.call_in += i;
                self.tokens.call_out += o;
            }
            let usd = data.get("cost_usd").map(num).unwrap_or(0.0);
            if usd > 0.0 {
                *self.tokens.call_cost.entry("USD".into()).or_default() += usd;
            }
            add_cost(&mut self.tokens.call_cost, data.get("cost"));
        } else if matches!(ty, "run.finished" | "run.failed") || ty.starts_with("tool.") {
            self.tokens.run_in += pick(&data, &IN_KEYS[..1]);
            self.tokens.run_out += pick(&data, &OUT_KEYS[..1]);
            add_cost(&mut self.tokens.run_cost, data.get("cost"));
        }
        true
    }

    /// Whether `needle` (lowercase) is in the summary's own words: agent, session, label.
    pub fn names(&self, needle: &str) -> bool {
        [&self.agent, &self.session, &self.label].iter().any(|s| s.to_lowercase().contains(needle))
    }
}

fn request_id(r: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Id {
        id: String,
    }
    serde_json::from_str::<Id>(r.get()).ok().map(|i| i.id)
}

fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line(ty: &str, seq: Option<u64>, t: &str, data: Value) -> Vec<u8> {
        let mut e = json!({"aep": "0.1", "id": format!("E{}", seq.unwrap_or(0)), "type": ty, "time": t,
            "source": "aep://h/agent/a/session/s", "agent": "a", "session": "s", "data": data});
        if let Some(seq) = seq {
            e["seq"] = json!(seq);
        }
        e.to_string().into_bytes()
    }

    /// The fold alone, no files: model-call records are summed apart from runs' own usage,
    /// a command (no position) is its sender's and not counted, a line that is not AEP
    /// says so, and the times are the events' own.
    #[test]
    fn model_calls_sum_apart_and_commands_are_not_counted() {
        let mut s = Summary::default();
        assert!(s.add(&line("session.started", Some(0), "2026-07-03T10:00:00Z", json!({"label": "l"}))));
        assert!(s.add(&line(
            "x.model.call",
            Some(1),
            "2026-07-03T10:00:02Z",
            json!({"input_tokens": 10, "output_tokens": 4, "cost_usd": 0.25})
        )));
        assert!(s.add(&line(
            "x.model.call",
            Some(2),
            "2026-07-03T10:00:03Z",
            json!({"usage": {"gen_ai.usage.input_tokens": 5}, "cost": {"currency": "EUR", "total": 1.5}})
        )));
        assert!(s.add(&line("control.attention.respond", None, "2026-07-03T10:00:04Z", json!({}))));
        assert!(!s.add(b"{not json"));
        assert_eq!((s.events, s.pos, s.tokens.calls), (3, Some((0, 2)), 2));
        assert_eq!((s.tokens.call_in, s.tokens.call_out), (15, 4));
        assert_eq!(s.tokens.call_cost, BTreeMap::from([("EUR".to_owned(), 1.5), ("USD".to_owned(), 0.25)]));
        assert_eq!((s.tokens.run_in, s.first, s.last), (0, 1_783_072_800_000, 1_783_072_803_000));
        assert!(!s.types.iter().any(|t| t.starts_with("control.")));
        assert!(s.names("l") && s.names("a") && !s.names("zz"));
    }
}
