#![doc = include_str!("README.md")]

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Direction, LineMapper, Options, content_text, debug, dotted};
use crate::common::{self, Builder, attention_key, run_key, tool_key};
use crate::{EventDraft, MapContext};

/// The `wrap` protocol name.
pub const PROTOCOL: &str = "claude-stream-json";

/// The envelope `agent`: the agent behind the stream is Claude Code itself.
pub const AGENT: &str = "claude-code";

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn x<'a>(rest: &str, cx: &'a MapContext) -> Builder<'a> {
    common::vendor_draft(AGENT, rest, cx)
}

/// The Claude Code stream-json tee (`-p --output-format stream-json`, optionally
/// `--input-format stream-json`): sessions from `session_id`, runs synthesized per prompt
/// (`r1`, `r2`, ... per session: the wire has no turn id), tool pairs by `tool_use` id, the
/// `can_use_tool` permission pair by `request_id`.
#[derive(Debug, Default)]
pub struct Tee {
    opts: Options,
    session: Option<String>,
    runs: u64,
    run: Option<String>,
    /// A prompt written before the agent named its session: its `run.started` waits for
    /// the `system/init` line.
    prompt_waiting: Option<EventDraft>,
    /// tool_use id -> tool name.
    tools: HashMap<String, String>,
    /// request_id -> (tool name, tool_use id) of an open permission request.
    asks: HashMap<String, (String, Option<String>)>,
}

impl Tee {
    /// A fresh tee.
    pub fn new(opts: Options) -> Self {
        Self { opts, ..Self::default() }
    }

    fn open_run(&mut self, cx: &MapContext, prompt: Option<&Value>) -> Vec<EventDraft> {
        let mut out = Vec::new();
        if let Some(stale) = self.run.take() {
            out.push(common::drain_run(&stale, self.session.as_deref(), cx));
        }
        self.runs += 1;
        let run = format!("r{}", self.runs);
        let text = prompt.and_then(content_text);
        let mut d = Builder::new("run.started", cx)
            .meta("trigger", "user")
            .meta_opt("message_digest", prompt.map(aep_schemas::digest::digest))
            .text("prompt", text.as_deref())
            .build();
        d.run = Some(run.clone());
        d.correlation_key = Some(run_key(self.session.as_deref(), &run));
        self.run = Some(run);
        out.push(d);
        out
    }

    fn on_agent_line(&mut self, m: &Value, cx: &MapContext) -> Vec<EventDraft> {
        if let Some(sid) = s(m, "session_id").filter(|s| !s.is_empty()) {
            self.session = Some(sid.to_owned());
        }
        let mut out = Vec::new();
        match (s(m, "type"), s(m, "subtype")) {
            (Some("system"), Some("init")) => {
                out.push(
                    common::session_started(AGENT, None, s(m, "model"), cx)
                        .meta_opt("client_version", s(m, "claude_code_version"))
                        .build(),
                );
                if let Some(mut d) = self.prompt_waiting.take() {
                    d.correlation_key = self.run.as_deref().map(|r| run_key(self.session.as_deref(), r));
                    out.push(d);
                }
            }
            (Some("system"), Some("compact_boundary")) => out.push(Builder::new("session.compacted", cx).build()),
            (Some("system"), sub) => {
                out.push(debug(x(&format!("stream.system.{}", dotted(sub.unwrap_or("unknown"))), cx).build()))
            }
            (Some("assistant"), _) => {
                let blocks = m.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
                for b in &blocks {
                    if s(b, "type") != Some("tool_use") {
                        continue; // text and thinking: the message plane stays reserved
                    }
                    if self.run.is_none() {
                        out.extend(self.open_run(cx, None));
                    }
                    let name = s(b, "name").unwrap_or("unknown");
                    let id = s(b, "id");
                    if let Some(id) = id {
                        self.tools.insert(id.to_owned(), name.to_owned());
                    }
                    out.push(common::tool_requested(name, id, b.get("input"), cx));
                }
            }
            (Some("user"), _) => {
                let blocks = m.pointer("/message/content").and_then(Value::as_array).cloned().unwrap_or_default();
                for b in blocks.iter().filter(|b| s(b, "type") == Some("tool_result")) {
                    let id = s(b, "tool_use_id");
                    let name = id.and_then(|i| self.tools.remove(i)).unwrap_or_else(|| "unknown".to_owned());
                    if b.get("is_error").and_then(Value::as_bool) == Some(true) {
                        let text = b.get("content").and_then(content_text);
                        out.push(common::tool_failed(&name, id, "tool_error", text.as_deref(), None, cx));
                    } else {
                        out.push(common::tool_completed(&name, id, b.get("content"), None, cx));
                    }
                }
            }
            (Some("result"), sub) => {
                let usage = m.get("usage");
                let tokens = |k: &str| usage.and_then(|u| u.get(k)).and_then(Value::as_u64);
                let is_error = m.get("is_error").and_then(Value::as_bool) == Some(true);
                let b = match sub {
                    Some("success") if !is_error => Builder::new("run.finished", cx).meta("stop_reason", "end_turn"),
                    Some("error_max_turns") => Builder::new("run.finished", cx).meta("stop_reason", "max_turns"),
                    other => Builder::new("run.failed", cx).meta("reason", other.unwrap_or("error")),
                };
                let mut d = b
                    .meta_opt("duration_ms", m.get("duration_ms").and_then(Value::as_u64))
                    .meta_opt("gen_ai.usage.input_tokens", tokens("input_tokens"))
                    .meta_opt("gen_ai.usage.output_tokens", tokens("output_tokens"))
                    .build();
                if self.run.is_none() {
                    out.extend(self.open_run(cx, None));
                }
                if let Some(run) = self.run.take() {
                    d.cause_key = Some(run_key(self.session.as_deref(), &run));
                    d.run = Some(run);
                }
                out.push(d);
            }
            (Some("control_request"), _) => {
                let req = m.get("request").unwrap_or(&Value::Null);
                let rid = s(m, "request_id");
                if s(req, "subtype") == Some("can_use_tool") {
                    let tool = s(req, "tool_name").unwrap_or("unknown");
                    let b = Builder::new("attention.requested", cx);
                    let prompt = common::permission_prompt(AGENT, tool, req.get("input"), b.ceiling(), cx);
                    // Observed READ-ONLY: the driving client answers on the agent's stdin.
                    let mut d = b.meta("kind", "permission").meta("prompt", prompt).subject(Some(tool)).build();
                    let call = s(req, "tool_use_id");
                    d.cause_key = call.map(tool_key);
                    if let Some(rid) = rid {
                        d.correlation_key = Some(attention_key(&format!("csj:{rid}")));
                        self.asks.insert(rid.to_owned(), (tool.to_owned(), call.map(str::to_owned)));
                    }
                    out.push(d);
                } else {
                    let sub = s(req, "subtype").unwrap_or("unknown");
                    out.push(debug(x(&format!("stream.control.{}", dotted(sub)), cx).build()));
                }
            }
            // Partial-message deltas (`--include-partial-messages`): the delta plane.
            (Some("stream_event"), _) if !self.opts.deltas => {}
            (Some(ty), _) => out.push(debug(x(&format!("stream.{}", dotted(ty)), cx).build())),
            (None, _) => {}
        }
        out
    }

    fn on_client_line(&mut self, m: &Value, cx: &MapContext) -> Vec<EventDraft> {
        match s(m, "type") {
            Some("user") => {
                let content = m.pointer("/message/content");
                // A tool_result the client writes back is not a prompt.
                let is_prompt = match content {
                    Some(Value::Array(blocks)) => blocks.iter().any(|b| s(b, "type") != Some("tool_result")),
                    Some(Value::String(_)) => true,
                    _ => false,
                };
                if !is_prompt {
                    return Vec::new();
                }
                let mut out = self.open_run(cx, content);
                if self.session.is_none() {
                    // The agent names the session only at init: the run.started waits for it.
                    self.prompt_waiting = out.pop();
                }
                out
            }
            Some("control_response") => {
                let r = m.get("response").unwrap_or(&Value::Null);
                let Some(rid) = s(r, "request_id") else { return Vec::new() };
                // No subject of their own: they name the request event, their resolved cause
                // (AEP-0002 §7.1).
                if self.asks.remove(rid).is_none() {
                    return Vec::new();
                }
                let key = attention_key(&format!("csj:{rid}"));
                let mut out = Vec::new();
                match r.pointer("/response/behavior").and_then(Value::as_str) {
                    Some(behavior) if s(r, "subtype") == Some("success") => {
                        out.push(
                            Builder::new("attention.answered", cx)
                                .meta("answer", json!({"option": behavior}))
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
                out
            }
            _ => Vec::new(),
        }
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
        let mut out = match dir {
            Direction::FromAgent => self.on_agent_line(&m, cx),
            Direction::ToAgent => self.on_client_line(&m, cx),
        };
        common::stamp_identity(&mut out, self.session.as_deref(), self.run.as_deref());
        out
    }
}

#[cfg(test)]
mod tests;
