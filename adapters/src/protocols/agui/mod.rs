#![doc = include_str!("README.md")]

pub mod observer;

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Options, debug, family_leaf};
use crate::common::{self, Builder, run_key, tool_key};
use crate::{EventDraft, MapContext};

/// The envelope `agent` (a proxy cannot know the agent's own name) and the `x.agui.*` token.
pub const PROTOCOL: &str = "agui";

fn s<'a>(ev: &'a Value, k: &str) -> Option<&'a str> {
    ev.get(k).and_then(Value::as_str)
}

/// The deprecated `THINKING_*` aliases as their `REASONING_*` replacements (@ag-ui/core 0.0.57).
pub fn canonical_type(ty: &str) -> String {
    if let Some(rest) = ty.strip_prefix("THINKING_TEXT_MESSAGE_") {
        return format!("REASONING_MESSAGE_{rest}");
    }
    if let Some(rest) = ty.strip_prefix("THINKING_") {
        return format!("REASONING_{rest}");
    }
    ty.to_owned()
}

fn vendor<'a>(ty: &str, cx: &'a MapContext) -> Builder<'a> {
    common::vendor_draft(PROTOCOL, &family_leaf(ty), cx)
}

/// Maps one AG-UI event (the `@ag-ui/core` union member as streamed) to drafts: `subject`
/// and `step` set where the pin states them, no session or run (the stream is the scope;
/// [`Stream`] stamps them). `TOOL_CALL_RESULT` takes `toolCallName` when the receiver joined
/// one, else the honest `unknown`.
pub fn map_event(ev: &Value, opts: Options, cx: &MapContext) -> Vec<EventDraft> {
    let Some(raw_ty) = s(ev, "type") else { return Vec::new() };
    let ty = canonical_type(raw_ty);
    let one = |d: EventDraft| vec![d];
    match ty.as_str() {
        "RUN_STARTED" => one(Builder::new("run.started", cx)
            .meta("trigger", "user")
            .meta_opt("parent_run", s(ev, "parentRunId"))
            .build()),
        "RUN_FINISHED" => {
            let summary = ev.get("result").filter(|r| !r.is_null()).map(|r| match r {
                Value::String(t) => t.clone(),
                other => other.to_string(),
            });
            one(Builder::new("run.finished", cx).text("summary", summary.as_deref()).build())
        }
        "RUN_ERROR" => {
            let reason = s(ev, "code").filter(|c| !c.is_empty()).unwrap_or("error");
            let mut b = Builder::new("run.failed", cx).meta("reason", reason);
            if b.ceiling() >= aep_schemas::Capture::Redacted {
                b = b.error(reason, s(ev, "message"));
            }
            one(b.build())
        }
        "STEP_STARTED" | "STEP_FINISHED" => {
            let t = if ty == "STEP_STARTED" { "run.step.started" } else { "run.step.finished" };
            let name = s(ev, "stepName");
            let mut d = Builder::new(t, cx).subject(name).build();
            d.step = name.map(str::to_owned);
            one(d)
        }
        "TOOL_CALL_START" => {
            let name = s(ev, "toolCallName").unwrap_or("unknown");
            let mut d = common::tool_requested(name, s(ev, "toolCallId"), None, cx);
            d.subject = Some(name.to_owned());
            one(d)
        }
        "TOOL_CALL_RESULT" => {
            let call = s(ev, "toolCallId");
            let name = s(ev, "toolCallName").unwrap_or("unknown");
            let mut d = common::tool_completed(name, call, ev.get("content"), None, cx);
            d.subject = call.map(str::to_owned);
            one(d)
        }
        "TOOL_CALL_ARGS"
        | "TOOL_CALL_END"
        | "TOOL_CALL_CHUNK"
        | "TEXT_MESSAGE_CONTENT"
        | "TEXT_MESSAGE_CHUNK"
        | "REASONING_MESSAGE_CONTENT"
        | "REASONING_MESSAGE_CHUNK" => {
            if opts.deltas {
                one(debug(vendor(&ty, cx).build()))
            } else {
                Vec::new()
            }
        }
        // Opaque ciphertext is not observability: nothing, ever, no opt-in.
        "REASONING_ENCRYPTED_VALUE" => Vec::new(),
        "TEXT_MESSAGE_START" => {
            one(debug(vendor(&ty, cx).meta_opt("role", s(ev, "role")).subject(s(ev, "messageId")).build()))
        }
        "TEXT_MESSAGE_END" => match s(ev, "role") {
            // The agent's replies are the observable; the user side is the UI's own doing.
            Some("assistant") | None => one(debug(vendor(&ty, cx).subject(s(ev, "messageId")).build())),
            Some(_) => Vec::new(),
        },
        "STATE_SNAPSHOT" => {
            let mut b = Builder::new("state.snapshot", cx);
            if let Some(v) = ev.get("snapshot").and_then(|v| common::gate_value(v, b.ceiling(), cx)) {
                b.data_mut().insert("snapshot".into(), v);
            }
            one(b.build())
        }
        "STATE_DELTA" => {
            let ops = ev.get("delta").and_then(Value::as_array).map(Vec::len);
            let mut b = Builder::new("state.delta", cx).meta_opt("ops", ops);
            if let Some(v) = ev.get("delta").and_then(|v| common::gate_value(v, b.ceiling(), cx)) {
                b.data_mut().insert("patch".into(), v);
            }
            one(b.build())
        }
        "RAW" => one(debug(vendor(&ty, cx).full("event", ev.get("event")).build())),
        "CUSTOM" => {
            let mut b = vendor(&ty, cx).meta_opt("name", s(ev, "name"));
            if let Some(v) = ev.get("value").and_then(|v| common::gate_value(v, b.ceiling(), cx)) {
                b.data_mut().insert("value".into(), v);
            }
            one(debug(b.build()))
        }
        // Everything else (REASONING_START/END, MESSAGES_SNAPSHOT, ACTIVITY_*, future members)
        // falls mechanically into the vendor namespace, never guessed.
        _ => one(debug(vendor(&ty, cx).build())),
    }
}

/// Bytes of one message's streamed text assembled for its end (beyond: cut, marked).
pub const MAX_ASSEMBLED: usize = 64 << 10;
/// Messages assembled at once (beyond, a new message's text is not assembled).
pub const MAX_OPEN_MESSAGES: usize = 256;

/// One message's streamed text (`TEXT_MESSAGE_CONTENT` / `_CHUNK` deltas), bounded.
#[derive(Debug, Default)]
struct Assembled {
    text: String,
    cut: bool,
}

/// One tee stream (one run POST): `threadId` -> session and `runId` -> run from
/// `RUN_STARTED`, the `toolCallId` -> name join for results, the role of a message for its
/// end, and (at capture `redacted`+) the message's streamed text assembled for its end.
#[derive(Debug, Default)]
pub struct Stream {
    opts: Options,
    session: Option<String>,
    run: Option<String>,
    step: Option<String>,
    tools: HashMap<String, String>,
    roles: HashMap<String, String>,
    texts: HashMap<String, Assembled>,
}

impl Stream {
    /// A fresh stream.
    pub fn new(opts: Options) -> Self {
        Self { opts, ..Self::default() }
    }

    fn assemble(&mut self, id: &str, delta: &str) {
        if !self.texts.contains_key(id) && self.texts.len() >= MAX_OPEN_MESSAGES {
            return;
        }
        let a = self.texts.entry(id.to_owned()).or_default();
        if a.cut {
            return;
        }
        let room = MAX_ASSEMBLED.saturating_sub(a.text.len());
        if delta.len() <= room {
            a.text.push_str(delta);
        } else {
            let mut end = room;
            while !delta.is_char_boundary(end) {
                end -= 1;
            }
            a.text.push_str(&delta[..end]);
            a.cut = true;
        }
    }

    /// Maps one event of this stream, stamped with the stream's identity.
    pub fn map(&mut self, ev: &Value, cx: &MapContext) -> Vec<EventDraft> {
        let ty = s(ev, "type").map(canonical_type).unwrap_or_default();
        let mut ev = ev.clone();
        match ty.as_str() {
            "RUN_STARTED" => {
                self.session = s(&ev, "threadId").map(str::to_owned).or(self.session.take());
                self.run = s(&ev, "runId").map(str::to_owned);
            }
            "TOOL_CALL_START" => {
                if let (Some(id), Some(name)) = (s(&ev, "toolCallId"), s(&ev, "toolCallName")) {
                    self.tools.insert(id.to_owned(), name.to_owned());
                }
            }
            "TOOL_CALL_RESULT" if s(&ev, "toolCallName").is_none() => {
                if let Some(name) = s(&ev, "toolCallId").and_then(|id| self.tools.get(id)) {
                    ev["toolCallName"] = json!(name);
                }
            }
            "TEXT_MESSAGE_START" => {
                if let (Some(id), Some(role)) = (s(&ev, "messageId"), s(&ev, "role")) {
                    self.roles.insert(id.to_owned(), role.to_owned());
                }
            }
            "TEXT_MESSAGE_END" if s(&ev, "role").is_none() => {
                if let Some(role) = s(&ev, "messageId").and_then(|id| self.roles.remove(id)) {
                    ev["role"] = json!(role);
                }
            }
            "STEP_STARTED" => self.step = s(&ev, "stepName").map(str::to_owned),
            // The text rides the reply terminal at redacted+ only: below, nothing is kept.
            "TEXT_MESSAGE_CONTENT" | "TEXT_MESSAGE_CHUNK" if cx.capture >= aep_schemas::Capture::Redacted => {
                if let (Some(id), Some(delta)) = (s(&ev, "messageId"), s(&ev, "delta")) {
                    self.assemble(id, delta);
                }
            }
            _ => {}
        }
        let mut out = map_event(&ev, self.opts, cx);
        if ty == "TEXT_MESSAGE_END"
            && let Some(a) = s(&ev, "messageId").and_then(|id| self.texts.remove(id))
            && let Some(d) = out.first_mut()
            && let Some(text) = common::gate_text(&a.text, d.capture, cx)
        {
            d.data.insert("content".into(), json!(text));
            if a.cut {
                d.data.insert("content_truncated".into(), json!(true));
            }
        }
        let session = self.session.as_deref();
        let run = self.run.clone();
        for d in &mut out {
            if d.step.is_none() {
                d.step.clone_from(&self.step);
            }
            match d.r#type.as_str() {
                "run.started" => d.correlation_key = run.as_deref().map(|r| run_key(session, r)),
                "run.finished" | "run.failed" => d.cause_key = run.as_deref().map(|r| run_key(session, r)),
                "tool.completed" => d.cause_key = s(&ev, "toolCallId").map(tool_key),
                _ => {}
            }
        }
        common::stamp_identity(&mut out, session, run.as_deref());
        match ty.as_str() {
            "RUN_FINISHED" | "RUN_ERROR" => self.run = None,
            "STEP_FINISHED" => self.step = None,
            "TOOL_CALL_RESULT" => {
                if let Some(id) = s(&ev, "toolCallId") {
                    self.tools.remove(id);
                }
            }
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests;
