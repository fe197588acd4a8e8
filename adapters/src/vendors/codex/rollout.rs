//! Codex rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) replayed as the hooks
//! Codex fires, through [`super::CodexAdapter`] (AEP-0002 Annex A.2), so an imported session
//! reads like a live one. The AEP session is the rollout's `session_meta.session_id`: a
//! subagent's rollout (`thread_source: subagent`) names its parent's session there, as its
//! live hooks do, so it lands in the parent's session as a delegation with a run of its own.
//!
//! | Rollout record | Hook replayed | AEP |
//! |---|---|---|
//! | `session_meta` | `SessionStart` (`startup`, the first `turn_context.model`, `cwd`) | `session.started` |
//! | `session_meta` of a subagent | `SubagentStart` (`agent_id` = its thread, `agent_type` = its role or `default`) | `delegation.subagent.started` |
//! | `event_msg` `task_started` | `UserPromptSubmit` (`turn_id` = run; the turn's user message as prompt) | `run.started` |
//! | `response_item` `function_call` / `custom_tool_call` | `PreToolUse` (the hook's tool name and input, see below) | `tool.requested` |
//! | `response_item` `*_call_output` | `PostToolUse` | `tool.completed`, or `tool.failed` when the turn's `CommandExecution` item failed |
//! | `event_msg` `task_complete` | `Stop` (a subagent: `SubagentStop`) | `run.finished` with the turn's `gen_ai.usage.*` |
//! | `compacted` | `PostCompact` (`auto`), `SessionStart` (`compact`) | `session.compacted`, `x.codex.session.session_start` |
//! | the last record | `SessionEnd` | `session.ended` (`normal`) |
//!
//! Tool names and inputs are the hooks', as Codex 0.171 sends them: the shell tools
//! (`exec_command`, `shell`, `shell_command`, `local_shell_call`) are `Bash` with
//! `{command}`; `multi_agent_v1`'s `wait_agent` is `multi_agent_v1wait_agent`; every other
//! tool keeps its name and its parsed arguments.
//!
//! One deliberate difference from the live hooks: Codex has no failure hook, so live a
//! failed shell call is a `tool.completed`; the rollout records the failure (the item's
//! `status: failed` and `exit_code`), and the import says so with `tool.failed`
//! (`error.type` `tool_error`, the `exit_code` as metadata), as the app-server mapping does.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::CodexAdapter;
use crate::MapContext;
use crate::common;
use crate::history::{self, Imported, LineIssue, Moment, Record, Transcript};

/// Hook names of namespaced tools that differ from the bare tool name (observed, Codex 0.171).
const HOOK_NAMES: &[(&str, &str, &str)] = &[("multi_agent_v1", "wait_agent", "multi_agent_v1wait_agent")];

/// The shell tools, which the hooks report as `Bash` with `{command}`.
const SHELL_TOOLS: &[&str] = &["exec_command", "shell", "shell_command", "local_shell", "local_shell_call"];

/// One parsed rollout file.
struct Rollout {
    label: String,
    records: Vec<Record>,
    /// The AEP session (the meta's `session_id`, else its `id`).
    session: String,
    /// The thread (the meta's `id`).
    thread: String,
    /// Set for a subagent's rollout: its role, `default` when unnamed.
    subagent: Option<String>,
}

/// Where Codex keeps its rollouts: every `rollout-*.jsonl` under the sessions folder.
pub const HISTORY: history::HistorySpec = history::HistorySpec {
    home_dir: ".codex/sessions",
    flag: "codex",
    files: history::FileMatch { prefix: "rollout-", suffix: ".jsonl", not_in: None },
    companions: None,
    map: |files, cx| map_rollouts(&files.iter().map(|f| f.transcript.clone()).collect::<Vec<_>>(), cx),
};

/// Maps rollout files into AEP sessions, one per Codex session id; files without a
/// `session_meta` are reported and skipped.
pub fn map_rollouts(files: &[Transcript], cx: &MapContext) -> Imported {
    let mut issues = Vec::new();
    let mut by_session: Vec<(String, Vec<Rollout>)> = Vec::new();
    for t in files {
        let records = history::parse_records(t, &mut issues);
        let Some(meta) = records.iter().find(|r| r.value.get("type").and_then(Value::as_str) == Some("session_meta"))
        else {
            issues.push(LineIssue { label: t.label.clone(), line: 1, message: "no session_meta record".into() });
            continue;
        };
        let p = &meta.value["payload"];
        let thread = p.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
        let session = p.get("session_id").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| thread.clone());
        if session.is_empty() {
            issues.push(LineIssue {
                label: t.label.clone(),
                line: meta.line,
                message: "session_meta without an id".into(),
            });
            continue;
        }
        let subagent =
            (p.get("thread_source").and_then(Value::as_str) == Some("subagent") || thread != session).then(|| {
                p.pointer("/source/subagent/thread_spawn/agent_role")
                    .and_then(Value::as_str)
                    .or_else(|| p.get("agent_role").and_then(Value::as_str))
                    .unwrap_or("default")
                    .to_owned()
            });
        let r = Rollout { label: t.label.clone(), records, session: session.clone(), thread, subagent };
        match by_session.iter_mut().find(|(s, _)| *s == session) {
            Some((_, v)) => v.push(r),
            None => by_session.push((session, vec![r])),
        }
    }
    let mut sessions = Vec::new();
    for (session, mut rollouts) in by_session {
        // The parent's rollout first: it owns the session's start and end.
        rollouts.sort_by_key(|r| r.subagent.is_some());
        if rollouts[0].subagent.is_some() {
            // Only subagents of a session whose own rollout is not among the files: imported
            // as they are, the parent's lifecycle missing (the live log would have it).
            issues.push(LineIssue {
                label: rollouts[0].label.clone(),
                line: 1,
                message: format!("subagent rollout without its parent session {session}'s rollout"),
            });
        }
        let files = rollouts.iter().map(|r| moments(r, &mut issues)).collect();
        let moments = history::merge_by_time(files);
        if !moments.is_empty() {
            sessions.push(history::replay(&CodexAdapter, &session, moments, cx));
        }
    }
    let mut imported = Imported { sessions, issues };
    mark_failures(&mut imported, files, cx);
    imported
}

/// The hook's tool name and input for a rollout tool call.
fn hook_tool(p: &Value) -> (String, Value) {
    let name = p.get("name").and_then(Value::as_str).unwrap_or("unknown");
    let ns = p.get("namespace").and_then(Value::as_str).unwrap_or("");
    let args = match p.get("arguments").or_else(|| p.get("input")) {
        Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())),
        Some(v) => v.clone(),
        None => p.get("action").cloned().unwrap_or(Value::Null),
    };
    if SHELL_TOOLS.contains(&name) || p.get("type").and_then(Value::as_str) == Some("local_shell_call") {
        let command = match args.get("cmd").or_else(|| args.get("command")) {
            Some(Value::Array(parts)) => {
                let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
                // `["bash", "-lc", "<script>"]`: the hook reports the script.
                match parts.as_slice() {
                    [_, flag, script] if flag.starts_with('-') => (*script).to_owned(),
                    _ => parts.join(" "),
                }
            }
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        return ("Bash".into(), json!({ "command": command }));
    }
    let hook = HOOK_NAMES.iter().find(|(n, t, _)| *n == ns && *t == name).map_or(name, |(_, _, h)| *h);
    (hook.to_owned(), args)
}

/// The turn's user prompt, by turn id: the first `UserMessage` item (or `user_message` event).
fn prompts(records: &[Record]) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for r in records {
        let p = &r.value["payload"];
        let (turn, text) = match p.get("type").and_then(Value::as_str) {
            Some("item_completed") if p.pointer("/item/type").and_then(Value::as_str) == Some("UserMessage") => {
                let text: Vec<&str> = p
                    .pointer("/item/content")
                    .and_then(Value::as_array)
                    .map(|b| b.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect())
                    .unwrap_or_default();
                (p.get("turn_id").and_then(Value::as_str), text.join("\n"))
            }
            _ => continue,
        };
        if let Some(t) = turn {
            out.entry(t.to_owned()).or_insert(text);
        }
    }
    out
}

/// One rollout file's moments.
fn moments(r: &Rollout, issues: &mut Vec<LineIssue>) -> Vec<Moment> {
    let session = r.session.as_str();
    let prompts = prompts(&r.records);
    let model = r.records.iter().find_map(|x| {
        (x.value.get("type").and_then(Value::as_str) == Some("turn_context"))
            .then(|| x.value.pointer("/payload/model").cloned())
            .flatten()
    });
    let agent = r.subagent.as_ref().map(|_| r.thread.as_str());
    let with_agent = |mut p: Value| {
        p["session_id"] = json!(session);
        if let Some(a) = agent {
            p["agent_id"] = json!(a);
        }
        p
    };
    let mut out = Vec::new();
    let mut turn: Option<String> = None;
    let mut usage: HashMap<String, Map<String, Value>> = HashMap::new();
    let mut last = None;
    for rec in &r.records {
        let Some(time) = history::timestamp(&rec.value) else {
            issues.push(LineIssue {
                label: r.label.clone(),
                line: rec.line,
                message: "record without a timestamp".into(),
            });
            continue;
        };
        last = Some(time.to_owned());
        let key =
            format!("{}:{}", r.thread, rec.value.get("ordinal").map_or_else(|| rec.line.to_string(), Value::to_string));
        let p = &rec.value["payload"];
        let ptype = p.get("type").and_then(Value::as_str);
        match (rec.value.get("type").and_then(Value::as_str), ptype) {
            (Some("session_meta"), _) => {
                let payload = match &r.subagent {
                    None => json!({"hook_event_name": "SessionStart", "source": "startup", "model": model,
                        "cwd": p.get("cwd")}),
                    Some(role) => json!({"hook_event_name": "SubagentStart", "agent_type": role}),
                };
                out.push(Moment::new(time, key, with_agent(payload)));
            }
            (Some("event_msg"), Some("task_started")) => {
                let Some(t) = p.get("turn_id").and_then(Value::as_str) else { continue };
                turn = Some(t.to_owned());
                let prompt = prompts.get(t).cloned();
                out.push(Moment::new(
                    time,
                    key,
                    with_agent(json!({"hook_event_name": "UserPromptSubmit", "turn_id": t, "prompt": prompt})),
                ));
            }
            (Some("response_item"), Some("function_call" | "custom_tool_call" | "local_shell_call")) => {
                let (name, input) = hook_tool(p);
                let call = p.get("call_id").and_then(Value::as_str);
                out.push(Moment::new(
                    time,
                    key,
                    with_agent(json!({"hook_event_name": "PreToolUse", "turn_id": turn, "tool_name": name,
                        "tool_use_id": call, "tool_input": input})),
                ));
            }
            (Some("response_item"), Some("function_call_output" | "custom_tool_call_output")) => {
                let call = p.get("call_id").and_then(Value::as_str);
                let name = r.records.iter().find_map(|x| {
                    let q = &x.value["payload"];
                    let is_call = matches!(
                        q.get("type").and_then(Value::as_str),
                        Some("function_call" | "custom_tool_call" | "local_shell_call")
                    );
                    (is_call && q.get("call_id").and_then(Value::as_str) == call).then(|| hook_tool(q).0)
                });
                let output = match p.get("output") {
                    Some(Value::String(s)) => Value::String(s.clone()),
                    Some(v) => v.get("content").cloned().unwrap_or_else(|| v.clone()),
                    None => Value::Null,
                };
                out.push(Moment::new(
                    time,
                    key,
                    with_agent(json!({"hook_event_name": "PostToolUse", "turn_id": turn,
                        "tool_name": name.unwrap_or_else(|| "unknown".into()), "tool_use_id": call,
                        "tool_response": output})),
                ));
            }
            (Some("token_usage_record"), _) => {
                let (Some(t), Some(u)) = (p.get("turn_id").and_then(Value::as_str), p.get("turn_token_usage")) else {
                    continue;
                };
                let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
                usage.insert(t.to_owned(), history::usage_fields(n("input_tokens"), n("output_tokens")));
            }
            (Some("event_msg"), Some("task_complete")) => {
                let t = p.get("turn_id").and_then(Value::as_str).map(str::to_owned).or_else(|| turn.clone());
                let payload = match &r.subagent {
                    None => json!({"hook_event_name": "Stop", "turn_id": t}),
                    Some(role) => json!({"hook_event_name": "SubagentStop", "agent_type": role}),
                };
                let mut m = Moment::new(time, key, with_agent(payload));
                m.finish_extra = t.as_deref().and_then(|t| usage.remove(t)).unwrap_or_default();
                out.push(m);
                turn = None;
            }
            (Some("compacted"), _) => {
                out.push(Moment::new(
                    time,
                    format!("{key}#compact"),
                    with_agent(json!({"hook_event_name": "PostCompact", "trigger": "auto", "turn_id": turn})),
                ));
                out.push(Moment::new(
                    time,
                    format!("{key}#restart"),
                    with_agent(json!({"hook_event_name": "SessionStart", "source": "compact", "turn_id": turn})),
                ));
            }
            _ => {}
        }
    }
    if let (Some(time), None) = (last, &r.subagent) {
        out.push(Moment::new(
            &time,
            format!("{}#end", r.thread),
            json!({"hook_event_name": "SessionEnd", "session_id": session, "reason": "other"}),
        ));
    }
    out
}

/// The failed command executions of the rollouts, by call id: `(exit_code, output)`.
fn failed_calls(files: &[Transcript]) -> HashMap<String, (Option<i64>, Option<String>)> {
    let mut out = HashMap::new();
    for t in files {
        for line in t.text.lines() {
            if !line.contains("\"failed\"") {
                continue;
            }
            let Ok(v) = serde_json::from_str::<Value>(line) else { continue };
            let Some(item) = v.pointer("/payload/item") else { continue };
            if item.get("status").and_then(Value::as_str) == Some("failed")
                && let Some(id) = item.get("id").and_then(Value::as_str)
            {
                let code = item.get("exit_code").and_then(Value::as_i64);
                let output = item.get("aggregated_output").and_then(Value::as_str).map(str::to_owned);
                out.insert(id.to_owned(), (code, output));
            }
        }
    }
    out
}

/// Turns the `tool.completed` of every call whose execution failed into a `tool.failed`
/// (same id, time, run and cause link; the live hook cannot tell, the rollout can).
fn mark_failures(imported: &mut Imported, files: &[Transcript], cx: &MapContext) {
    let failed = failed_calls(files);
    if failed.is_empty() {
        return;
    }
    for s in &mut imported.sessions {
        for d in &mut s.drafts {
            if d.r#type != "tool.completed" {
                continue;
            }
            let call = d.data.get("tool").and_then(|t| t.get("call_id")).and_then(Value::as_str).map(str::to_owned);
            let Some((code, output)) = call.as_deref().and_then(|c| failed.get(c)) else { continue };
            let name = d.subject.clone().unwrap_or_else(|| "unknown".into());
            let mut f = common::tool_failed(&name, call.as_deref(), "tool_error", output.as_deref(), None, cx);
            if let Some(c) = code {
                f.data.insert("exit_code".into(), json!(c));
            }
            f.id = d.id.take();
            f.time = d.time.take();
            f.session = d.session.take();
            f.run = d.run.take();
            f.cause_key = d.cause_key.take();
            *d = f;
        }
    }
}
