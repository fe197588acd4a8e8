#![doc = include_str!("README.md")]

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::{Direction, LineMapper, Options, debug, dotted};
use crate::common::{self, Builder, attention_key, run_key, tool_key};
use crate::{EventDraft, MapContext};

/// The `wrap` protocol name.
pub const PROTOCOL: &str = "codex-app-server";

/// The envelope `agent`: the agent behind the wire is Codex (sessions are its thread ids,
/// the same ids its hooks and OTLP export name).
pub const AGENT: &str = "codex";

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The server requests that ask the client to approve an action (v2 and the legacy v1 pair).
const APPROVALS: &[&str] = &[
    "item/commandExecution/requestApproval",
    "item/fileChange/requestApproval",
    "item/permissions/requestApproval",
    "execCommandApproval",
    "applyPatchApproval",
];

/// The tool name and arguments of a tool-like thread item; `None` for the message plane
/// (user/agent messages, reasoning, plans) and machinery.
fn tool_of(item: &Value) -> Option<(String, Option<Value>)> {
    let ty = s(item, "type")?;
    Some(match ty {
        "commandExecution" => {
            ("shell".to_owned(), Some(json!({"command": item.get("command"), "cwd": item.get("cwd")})))
        }
        "fileChange" => ("apply_patch".to_owned(), item.get("changes").map(|c| json!({"changes": c}))),
        "mcpToolCall" => {
            let name = match (s(item, "server"), s(item, "tool")) {
                (Some(srv), Some(t)) => format!("mcp__{srv}__{t}"),
                (_, Some(t)) => t.to_owned(),
                _ => "mcp".to_owned(),
            };
            (name, item.get("arguments").cloned())
        }
        "dynamicToolCall" => (s(item, "tool").unwrap_or("dynamic_tool").to_owned(), item.get("arguments").cloned()),
        "webSearch" => ("web_search".to_owned(), item.get("query").map(|q| json!({"query": q}))),
        "imageView" => ("view_image".to_owned(), item.get("path").map(|p| json!({"path": p}))),
        _ => return None,
    })
}

/// The result of a completed tool item, as its schema types it.
fn result_of(item: &Value) -> Option<Value> {
    match s(item, "type")? {
        "commandExecution" => item.get("aggregatedOutput").filter(|v| !v.is_null()).cloned(),
        "mcpToolCall" => item.get("result").filter(|v| !v.is_null()).cloned(),
        "dynamicToolCall" => item.get("contentItems").filter(|v| !v.is_null()).cloned(),
        _ => None,
    }
}

/// Maps one thread item's `item/started` / `item/completed` (v2) to drafts: the tool pair by
/// item id, `contextCompaction` to `session.compacted`; the message plane maps to nothing.
pub fn map_item(started: bool, item: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let id = s(item, "id");
    if s(item, "type") == Some("contextCompaction") {
        return if started { Vec::new() } else { vec![Builder::new("session.compacted", cx).build()] };
    }
    let Some((name, args)) = tool_of(item) else { return Vec::new() };
    if started {
        return vec![common::tool_requested(&name, id, args.as_ref(), cx)];
    }
    let duration = item.get("durationMs").and_then(Value::as_u64);
    let exit = item.get("exitCode").and_then(Value::as_i64);
    match s(item, "status") {
        Some("failed") => {
            let msg = item.pointer("/error/message").and_then(Value::as_str);
            let mut d = common::tool_failed(&name, id, "tool_error", msg, duration, cx);
            if let Some(code) = exit {
                d.data.insert("exit_code".into(), json!(code));
            }
            vec![d]
        }
        // The user (or the approval policy acting for them) declined it: a runtime enforcement.
        Some("declined") => {
            let mut d = Builder::new("tool.denied", cx).tool(&name, id).meta("by", "runtime").build();
            d.cause_key = id.map(tool_key);
            vec![d]
        }
        _ => {
            let mut d = common::tool_completed(&name, id, result_of(item).as_ref(), duration, cx);
            if let Some(code) = exit {
                d.data.insert("exit_code".into(), json!(code));
            }
            vec![d]
        }
    }
}

/// The approval request a server request raises, observed READ-ONLY (the client answers).
fn approval(method: &str, p: &Value, cx: &MapContext) -> EventDraft {
    let (tool, detail) = match method {
        "item/commandExecution/requestApproval" | "execCommandApproval" => {
            let cmd = match p.get("command") {
                Some(Value::String(c)) => Some(c.clone()),
                Some(Value::Array(parts)) => Some(parts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" ")),
                _ => None,
            };
            ("shell", cmd)
        }
        "item/fileChange/requestApproval" | "applyPatchApproval" => ("apply_patch", s(p, "reason").map(str::to_owned)),
        _ => ("permissions", s(p, "reason").map(str::to_owned)),
    };
    let b = Builder::new("attention.requested", cx);
    let input = detail.map(|d| json!({"command": d}));
    let prompt = common::permission_prompt(AGENT, tool, input.as_ref(), b.ceiling(), cx);
    let mut d = b.meta("kind", "permission").meta("prompt", prompt).subject(Some(tool)).build();
    d.cause_key = s(p, "itemId").or_else(|| s(p, "callId")).map(tool_key);
    d
}

/// The decision of an approval response, as its option id: a string decision verbatim, an
/// object decision by its one key (`acceptWithExecpolicyAmendment`, ...).
fn decision(r: &Value) -> Option<String> {
    match r.get("decision")? {
        Value::String(d) => Some(d.clone()),
        Value::Object(m) => m.keys().next().cloned(),
        _ => None,
    }
}

/// The Codex `app-server` tee (JSON-RPC over stdio, v2 thread/turn/item protocol as
/// `codex app-server generate-ts` types it at 0.171.0): sessions are thread ids, runs are the
/// real turn ids, tool pairs are item ids, approvals pair by JSON-RPC id.
#[derive(Debug, Default)]
pub struct Tee {
    opts: Options,
    /// (direction the request travelled, id) -> (method, thread).
    pending: HashMap<(Direction, String), (String, Option<String>)>,
    /// Threads whose `session.started` was emitted.
    started: HashSet<String>,
    /// thread -> open turn.
    turns: HashMap<String, String>,
    last_thread: Option<String>,
}

impl Tee {
    /// A fresh tee.
    pub fn new(opts: Options) -> Self {
        Self { opts, ..Self::default() }
    }

    fn thread_of(&mut self, p: Option<&Value>) -> Option<String> {
        let t = p.and_then(|p| s(p, "threadId").or_else(|| p.pointer("/thread/id").and_then(Value::as_str)));
        if let Some(t) = t {
            self.last_thread = Some(t.to_owned());
        }
        t.map(str::to_owned).or_else(|| self.last_thread.clone())
    }

    fn session_started(&mut self, thread: &str, model: Option<&str>, cx: &MapContext) -> Vec<EventDraft> {
        if !self.started.insert(thread.to_owned()) {
            return Vec::new();
        }
        vec![common::session_started(AGENT, None, model, cx).build()]
    }

    /// Maps one parsed JSON-RPC message seen travelling `dir`; returns drafts and their thread.
    fn map_message(&mut self, dir: Direction, m: &Value, cx: &MapContext) -> (Vec<EventDraft>, Option<String>) {
        let method = s(m, "method");
        let id = m.get("id").filter(|i| !i.is_null()).map(Value::to_string);
        let params = m.get("params");
        match (method, id) {
            (Some(method), Some(id)) => {
                let thread = self.thread_of(params);
                self.pending.insert((dir, id), (method.to_owned(), thread.clone()));
                let mut out = Vec::new();
                if dir == Direction::FromAgent && APPROVALS.contains(&method) {
                    let mut d = approval(method, params.unwrap_or(&Value::Null), cx);
                    d.correlation_key = Some(attention_key(&format!("cas:{}", m["id"])));
                    out.push(d);
                }
                (out, thread)
            }
            (Some(method), None) => self.notification(method, params.unwrap_or(&Value::Null), cx),
            (None, Some(id)) => {
                let Some((method, thread)) = self.pending.remove(&(dir.flip(), id)) else { return (Vec::new(), None) };
                let r = m.get("result").unwrap_or(&Value::Null);
                let mut out = Vec::new();
                if method == "thread/start" || method == "thread/resume" || method == "thread/fork" {
                    if let Some(t) = r.pointer("/thread/id").and_then(Value::as_str) {
                        self.last_thread = Some(t.to_owned());
                        out = self.session_started(t, s(r, "model"), cx);
                        return (out, Some(t.to_owned()));
                    }
                } else if APPROVALS.contains(&method.as_str()) {
                    let key = attention_key(&format!("cas:{}", m["id"]));
                    match decision(r).filter(|_| m.get("error").is_none()) {
                        Some(d) if d != "cancel" && d != "abort" => {
                            out.push(
                                Builder::new("attention.answered", cx)
                                    .meta("answer", json!({"option": d}))
                                    .meta("via", "oob")
                                    .build(),
                            );
                            out.push(Builder::new("attention.resolved", cx).meta("resolution", "answered").build());
                        }
                        _ => out.push(Builder::new("attention.resolved", cx).meta("resolution", "dismissed").build()),
                    }
                    for d in &mut out {
                        d.cause_key = Some(key.clone());
                    }
                }
                (out, thread)
            }
            _ => (Vec::new(), None),
        }
    }

    fn notification(&mut self, method: &str, p: &Value, cx: &MapContext) -> (Vec<EventDraft>, Option<String>) {
        let thread = self.thread_of(Some(p));
        let turn = p.pointer("/turn/id").and_then(Value::as_str).or_else(|| s(p, "turnId")).map(str::to_owned);
        let mut out = Vec::new();
        match method {
            "thread/started" => {
                if let Some(t) = &thread {
                    out = self.session_started(t, None, cx);
                }
            }
            "turn/started" => {
                if let (Some(t), Some(turn)) = (&thread, &turn) {
                    if let Some(stale) = self.turns.insert(t.clone(), turn.clone()).filter(|s| s != turn) {
                        out.push(common::drain_run(&stale, Some(t), cx));
                    }
                    let mut d = Builder::new("run.started", cx).meta("trigger", "user").build();
                    d.run = Some(turn.clone());
                    d.correlation_key = Some(run_key(Some(t), turn));
                    out.push(d);
                }
            }
            "turn/completed" => {
                let status = p.pointer("/turn/status").and_then(Value::as_str);
                let mut d = match status {
                    Some("interrupted") => Builder::new("run.cancelled", cx).build(),
                    Some("failed") => {
                        let msg = p.pointer("/turn/error/message").and_then(Value::as_str);
                        let mut b = Builder::new("run.failed", cx).meta("reason", "failed");
                        if b.ceiling() >= aep_schemas::Capture::Redacted {
                            b = b.error("turn_failed", msg);
                        }
                        b.build()
                    }
                    _ => Builder::new("run.finished", cx).build(),
                };
                if let Some(ms) = p.pointer("/turn/durationMs").and_then(Value::as_u64) {
                    d.data.insert("duration_ms".into(), json!(ms));
                }
                if let (Some(t), Some(turn)) = (&thread, &turn) {
                    if self.turns.get(t) == Some(turn) {
                        self.turns.remove(t);
                    }
                    d.run = Some(turn.clone());
                    d.cause_key = Some(run_key(Some(t), turn));
                }
                out.push(d);
            }
            "item/started" | "item/completed" => {
                if let Some(item) = p.get("item") {
                    out = map_item(method == "item/started", item, cx);
                    for d in &mut out {
                        d.run.clone_from(&turn);
                    }
                }
            }
            m if m.ends_with("Delta") || m.ends_with("/delta") || m.contains("outputDelta") => {
                if self.opts.deltas {
                    out.push(debug(common::vendor_draft(AGENT, &format!("app.{}", dotted(m)), cx).build()));
                }
            }
            m => out.push(debug(common::vendor_draft(AGENT, &format!("app.{}", dotted(m)), cx).build())),
        }
        (out, thread)
    }
}

impl LineMapper for Tee {
    fn agent(&self) -> &'static str {
        AGENT
    }

    fn map_line(&mut self, dir: Direction, line: &[u8], cx: &MapContext) -> Vec<EventDraft> {
        let Ok(m) = serde_json::from_slice::<Value>(line) else { return Vec::new() };
        if !m.is_object() {
            return Vec::new();
        }
        let (mut out, thread) = self.map_message(dir, &m, cx);
        let run = thread.as_deref().and_then(|t| self.turns.get(t)).cloned();
        common::stamp_identity(&mut out, thread.as_deref(), run.as_deref());
        out
    }
}

#[cfg(test)]
mod tests;
