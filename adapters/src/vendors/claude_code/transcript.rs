//! Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`, with the
//! subagents' `<session>/subagents/agent-<id>.jsonl`) replayed as the hooks Claude Code
//! fires, through [`super::ClaudeCodeAdapter`] (AEP-0002 Annex A.1), so an imported session
//! reads like a live one:
//!
//! | Transcript record | Hook replayed | AEP |
//! |---|---|---|
//! | the first record | `SessionStart` (`startup`, `cwd`) | `session.started` |
//! | `user` with prompt text (not meta, not a tool result, not an interrupt marker) | `UserPromptSubmit` (`promptId` = run) | `run.started` |
//! | `assistant` `tool_use` block | `PreToolUse` (`name`, `id`, `input`) | `tool.requested` |
//! | `user` `tool_result` block | `PostToolUse` (`toolUseResult`) / `PostToolUseFailure` (`is_error`) | `tool.completed` / `tool.failed` |
//! | the turn's last `assistant` message, when it asks for no tool | `Stop` | `run.finished` with the turn's `gen_ai.usage.*` |
//! | `system` `compact_boundary` | `PostCompact`, `SessionStart` (`compact`) | `session.compacted`, `x.claude-code.session.session_start` |
//! | a subagent file's first / last record | `SubagentStart` / `SubagentStop` (`agentType` from its `.meta.json`) | `delegation.subagent.started` / `.stopped` |
//! | the last record | `SessionEnd` | `session.ended` (`normal`) |
//!
//! A turn the user interrupted has no `Stop`: the next prompt drains it as `run.cancelled`,
//! as live. Usage counts each API message once (Claude Code writes one record per content
//! block, each repeating the message's usage); input tokens include the cache reads and writes.

use serde_json::{Map, Value, json};

use super::ClaudeCodeAdapter;
use crate::MapContext;
use crate::history::{self, Imported, LineIssue, Moment, Record, Transcript};

/// A subagent's transcript with the `agent-<id>.meta.json` beside it (`agentType`,
/// `toolUseId`...), when there is one.
pub type Subagent = history::Companion;

/// Where Claude Code keeps its transcripts: each `<session>.jsonl` under the projects
/// folder, with its subagents' `<session>/subagents/agent-*.jsonl` and their
/// `agent-*.meta.json`.
pub const HISTORY: history::HistorySpec = history::HistorySpec {
    home_dir: ".claude/projects",
    flag: "claude",
    files: history::FileMatch { prefix: "", suffix: ".jsonl", not_in: Some("subagents") },
    companions: Some(history::Companions {
        dir: "subagents",
        files: history::FileMatch { prefix: "agent-", suffix: ".jsonl", not_in: None },
        meta_ext: Some("meta.json"),
    }),
    map: map_sessions,
};

/// Maps every session file read from the projects folder ([`map_session`] each).
pub fn map_sessions(files: &[history::SessionFile], cx: &MapContext) -> Imported {
    let mut all = Imported::default();
    for f in files {
        let got = map_session(&f.transcript, &f.companions, cx);
        all.sessions.extend(got.sessions);
        all.issues.extend(got.issues);
    }
    all
}

/// Maps one session's transcript and its subagents' into one AEP session. A transcript
/// without a `sessionId` or a timestamped record yields no session (nothing to import).
pub fn map_session(main: &Transcript, subagents: &[Subagent], cx: &MapContext) -> Imported {
    let mut issues = Vec::new();
    let records = history::parse_records(main, &mut issues);
    let Some(session) = records.iter().find_map(|r| r.value.get("sessionId").and_then(Value::as_str)) else {
        return Imported { sessions: Vec::new(), issues };
    };
    let session = session.to_owned();
    let mut files = vec![main_moments(&session, main, &records, &mut issues)];
    for sub in subagents {
        let recs = history::parse_records(&sub.transcript, &mut issues);
        files.push(subagent_moments(&session, sub, &recs, &mut issues));
    }
    let moments = history::merge_by_time(files);
    if moments.is_empty() {
        return Imported { sessions: Vec::new(), issues };
    }
    let imported = history::replay(&ClaudeCodeAdapter, &session, moments, cx);
    Imported { sessions: vec![imported], issues }
}

/// The text of a user prompt record, when the record is one the user typed: not meta, not
/// a compaction summary, not a tool result, not the interrupt marker.
fn prompt_text(v: &Value) -> Option<String> {
    if v.get("type").and_then(Value::as_str) != Some("user")
        || v.get("isMeta").and_then(Value::as_bool) == Some(true)
        || v.get("isCompactSummary").and_then(Value::as_bool) == Some(true)
        || v.get("isSidechain").and_then(Value::as_bool) == Some(true)
    {
        return None;
    }
    let text = match v.pointer("/message/content")? {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => {
            if blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")) {
                return None;
            }
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            if texts.is_empty() {
                return None;
            }
            texts.join("\n")
        }
        _ => return None,
    };
    (!text.starts_with("[Request interrupted")).then_some(text)
}

/// The per-record key: its `uuid`, else its position in the file.
fn key_of(label: &str, r: &Record) -> String {
    match r.value.get("uuid").and_then(Value::as_str) {
        Some(u) => u.to_owned(),
        None => format!("{label}:{}", r.line),
    }
}

/// The text of a tool result's `content` (a string, or its text blocks joined).
fn result_text(content: Option<&Value>) -> Option<String> {
    match content? {
        Value::String(s) => Some(s.clone()),
        Value::Array(blocks) => {
            Some(blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n"))
        }
        _ => None,
    }
}

/// Token usage of the turn, counted once per API message id.
#[derive(Default)]
struct Usage {
    seen: std::collections::HashSet<String>,
    input: u64,
    output: u64,
    any: bool,
}

impl Usage {
    fn add(&mut self, msg: &Value) {
        let Some(u) = msg.get("usage") else { return };
        if let Some(id) = msg.get("id").and_then(Value::as_str)
            && !self.seen.insert(id.to_owned())
        {
            return;
        }
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        self.input += n("input_tokens") + n("cache_read_input_tokens") + n("cache_creation_input_tokens");
        self.output += n("output_tokens");
        self.any = true;
    }

    fn take(&mut self) -> Map<String, Value> {
        let m = if self.any { history::usage_fields(self.input, self.output) } else { Map::new() };
        *self = Usage::default();
        m
    }
}

/// The tool-call moments of one record (`tool_use` blocks of an assistant message,
/// `tool_result` blocks of a user message); `agent` marks a subagent's calls.
fn tool_moments(
    session: &str,
    r: &Record,
    time: &str,
    key: &str,
    names: &mut std::collections::HashMap<String, String>,
    agent: Option<&str>,
    out: &mut Vec<Moment>,
) {
    let Some(Value::Array(blocks)) = r.value.pointer("/message/content") else { return };
    let single = blocks.len() == 1;
    for (i, b) in blocks.iter().enumerate() {
        let mut p = match b.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                let (Some(name), Some(id)) =
                    (b.get("name").and_then(Value::as_str), b.get("id").and_then(Value::as_str))
                else {
                    continue;
                };
                names.insert(id.to_owned(), name.to_owned());
                json!({"hook_event_name": "PreToolUse", "tool_name": name, "tool_use_id": id,
                    "tool_input": b.get("input").cloned().unwrap_or(Value::Null)})
            }
            Some("tool_result") => {
                let Some(id) = b.get("tool_use_id").and_then(Value::as_str) else { continue };
                let name = names.get(id).cloned().unwrap_or_else(|| "unknown".into());
                if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                    let text = result_text(b.get("content"));
                    let interrupt = text.as_deref().is_some_and(|t| t.contains("interrupted by user"));
                    json!({"hook_event_name": "PostToolUseFailure", "tool_name": name, "tool_use_id": id,
                        "error": text, "is_interrupt": interrupt})
                } else {
                    // The hook's `tool_response` is the record's `toolUseResult` (one result a record).
                    let response = match r.value.get("toolUseResult") {
                        Some(v) if single => v.clone(),
                        _ => b.get("content").cloned().unwrap_or(Value::Null),
                    };
                    json!({"hook_event_name": "PostToolUse", "tool_name": name, "tool_use_id": id,
                        "tool_response": response})
                }
            }
            _ => continue,
        };
        p["session_id"] = json!(session);
        if let Some(a) = agent {
            p["agent_id"] = json!(a);
        }
        out.push(Moment::new(time, format!("{key}#{i}"), p));
    }
}

/// The main transcript's moments.
fn main_moments(session: &str, t: &Transcript, records: &[Record], issues: &mut Vec<LineIssue>) -> Vec<Moment> {
    let mut out = Vec::new();
    let mut names = std::collections::HashMap::new();
    let mut usage = Usage::default();
    // The turn's open state: whether a run is open, and its last final assistant record.
    let mut open = false;
    let mut done_at: Option<(String, String)> = None;
    let mut last: Option<(String, String)> = None;
    let stop = |out: &mut Vec<Moment>, done_at: &mut Option<(String, String)>, usage: &mut Usage| {
        if let Some((time, key)) = done_at.take() {
            let mut m =
                Moment::new(&time, format!("{key}#stop"), json!({"hook_event_name": "Stop", "session_id": session}));
            m.finish_extra = usage.take();
            out.push(m);
        }
    };
    for r in records {
        let Some(time) = history::timestamp(&r.value) else {
            // Records without a time (`summary`, `last-prompt`...) carry no moment.
            if r.value.get("uuid").is_some() {
                issues.push(LineIssue {
                    label: t.label.clone(),
                    line: r.line,
                    message: "record without a timestamp".into(),
                });
            }
            continue;
        };
        let key = key_of(&t.label, r);
        if out.is_empty() {
            let cwd = r.value.get("cwd").cloned().unwrap_or(Value::Null);
            out.push(Moment::new(
                time,
                format!("{session}#start"),
                json!({"hook_event_name": "SessionStart", "session_id": session, "source": "startup", "cwd": cwd}),
            ));
        }
        last = Some((time.to_owned(), key.clone()));
        let ty = r.value.get("type").and_then(Value::as_str);
        if let Some(prompt) = prompt_text(&r.value) {
            if open {
                stop(&mut out, &mut done_at, &mut usage);
            }
            usage = Usage::default();
            let mut p = json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "prompt": prompt});
            if let Some(id) = r.value.get("promptId").and_then(Value::as_str) {
                p["prompt_id"] = json!(id);
            }
            out.push(Moment::new(time, key, p));
            open = true;
            done_at = None;
            continue;
        }
        match ty {
            Some("assistant") => {
                let msg = r.value.get("message").cloned().unwrap_or(Value::Null);
                usage.add(&msg);
                let asks_tool = msg
                    .get("content")
                    .and_then(Value::as_array)
                    .is_some_and(|b| b.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use")));
                done_at = (!asks_tool && msg.get("stop_reason").and_then(Value::as_str) != Some("tool_use"))
                    .then(|| (time.to_owned(), key.clone()));
                tool_moments(session, r, time, &key, &mut names, None, &mut out);
            }
            Some("user") => {
                if prompt_text_is_interrupt(&r.value) {
                    done_at = None;
                }
                tool_moments(session, r, time, &key, &mut names, None, &mut out);
            }
            Some("system") if r.value.get("subtype").and_then(Value::as_str) == Some("compact_boundary") => {
                let trigger = r.value.pointer("/compactMetadata/trigger").cloned().unwrap_or(json!("auto"));
                out.push(Moment::new(
                    time,
                    format!("{key}#compact"),
                    json!({"hook_event_name": "PostCompact", "session_id": session, "trigger": trigger}),
                ));
                out.push(Moment::new(
                    time,
                    format!("{key}#restart"),
                    json!({"hook_event_name": "SessionStart", "session_id": session, "source": "compact"}),
                ));
            }
            _ => {}
        }
    }
    if open {
        stop(&mut out, &mut done_at, &mut usage);
    }
    if let Some((time, _)) = last {
        out.push(Moment::new(
            &time,
            format!("{session}#end"),
            json!({"hook_event_name": "SessionEnd", "session_id": session, "reason": "other"}),
        ));
    }
    out
}

/// Whether a user record is Claude Code's interrupt marker (the turn ends without `Stop`).
fn prompt_text_is_interrupt(v: &Value) -> bool {
    let text = match v.pointer("/message/content") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(b)) => b.iter().find_map(|b| b.get("text").and_then(Value::as_str)).unwrap_or(""),
        _ => "",
    };
    text.starts_with("[Request interrupted")
}

/// A subagent transcript's moments: its start and stop around its own tool calls, which
/// Claude Code reports on the parent's session (the live hooks carry the parent's `session_id`).
fn subagent_moments(session: &str, sub: &Subagent, records: &[Record], issues: &mut Vec<LineIssue>) -> Vec<Moment> {
    let label = &sub.transcript.label;
    let agent = records.iter().find_map(|r| r.value.get("agentId").and_then(Value::as_str)).map(str::to_owned);
    let Some(agent) = agent else { return Vec::new() };
    let agent_type = sub.meta.as_ref().and_then(|m| m.get("agentType")).cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    let mut names = std::collections::HashMap::new();
    let mut last = None;
    for r in records {
        let Some(time) = history::timestamp(&r.value) else {
            issues.push(LineIssue { label: label.clone(), line: r.line, message: "record without a timestamp".into() });
            continue;
        };
        let key = format!("{agent}/{}", key_of(label, r));
        if out.is_empty() {
            out.push(Moment::new(
                time,
                format!("{agent}#start"),
                json!({"hook_event_name": "SubagentStart", "session_id": session, "agent_id": agent, "agent_type": agent_type}),
            ));
        }
        tool_moments(session, r, time, &key, &mut names, Some(&agent), &mut out);
        last = Some(time.to_owned());
    }
    if let Some(time) = last {
        out.push(Moment::new(
            &time,
            format!("{agent}#stop"),
            json!({"hook_event_name": "SubagentStop", "session_id": session, "agent_id": agent, "agent_type": agent_type}),
        ));
    }
    out
}
