#![doc = include_str!("README.md")]

use std::collections::{HashMap, HashSet};

use aep_schemas::digest::digest;
use serde_json::{Value, json};

use super::{Direction, LineMapper, Options, content_text, debug, dotted};
use crate::common::{self, Builder, attention_key, run_key, tool_key};
use crate::{EventDraft, MapContext};

/// The `wrap` protocol name, the `x.acp.*` token, and the envelope `agent` of an agent whose
/// `initialize` answer names none.
pub const PROTOCOL: &str = "acp";

/// What a JSON-RPC line is (the fixture's moment `kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A request: `method` and `id`.
    Request,
    /// A response: `id` and `result` or `error`, joined to its request's method by the tee.
    Response,
    /// A notification: `method`, no `id`.
    Notification,
}

impl Kind {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "request" => Some(Kind::Request),
            "response" => Some(Kind::Response),
            "notification" => Some(Kind::Notification),
            _ => None,
        }
    }
}

fn x<'a>(rest: &str, cx: &'a MapContext) -> Builder<'a> {
    common::vendor_draft(PROTOCOL, rest, cx)
}

/// Maps one moment `{kind, method, params?, result?, error?}` (the shape `mappings/acp.json`
/// pins) to drafts, without identity: the tee stamps session and run. Unknown kinds map to
/// nothing; unknown methods ride `x.acp.<method>` (AEP-0001 §6).
pub fn map_moment(m: &Value, opts: Options, cx: &MapContext) -> Vec<EventDraft> {
    let Some(kind) = m.get("kind").and_then(Value::as_str).and_then(Kind::parse) else { return Vec::new() };
    let method = m.get("method").and_then(Value::as_str).unwrap_or("");
    let empty = json!({});
    match kind {
        Kind::Request => request(method, m.get("params").unwrap_or(&empty), cx),
        Kind::Response => response(method, m, cx),
        Kind::Notification => notification(method, m.get("params").unwrap_or(&empty), opts, cx),
    }
}

fn request(method: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    match method {
        "session/prompt" => {
            // The digest covers the prompt content blocks as sent (AEP-0003 §9.3); the text
            // rides only at redacted+.
            let prompt = p.get("prompt");
            let text = prompt.and_then(content_text);
            vec![
                Builder::new("run.started", cx)
                    .meta("trigger", "user")
                    .meta_opt("message_digest", prompt.map(digest))
                    .text("prompt", text.as_deref())
                    .build(),
            ]
        }
        "session/request_permission" => vec![permission_request(p, cx)],
        _ => vec![debug(x(&dotted(method), cx).build())],
    }
}

/// The editor's gate, observed READ-ONLY: no `options` claim, no `respond_via` (the
/// read-only-channel rule, AEP-0008); the option list rides as a count.
fn permission_request(p: &Value, cx: &MapContext) -> EventDraft {
    let tc = p.get("toolCall").unwrap_or(&Value::Null);
    let call = tc.get("toolCallId").and_then(Value::as_str);
    let title = tc.get("title").and_then(Value::as_str).filter(|t| !t.is_empty());
    let b = Builder::new("attention.requested", cx);
    // AEP-0003 §9 rule 2: the tool title at redacted+, a structural synthesis below it.
    let prompt = title.and_then(|t| common::gate_text(&format!("Permission requested: {t}"), b.ceiling(), cx));
    let what = tc.get("kind").and_then(Value::as_str).unwrap_or("tool");
    let prompt = prompt.unwrap_or_else(|| common::synthesized_prompt(PROTOCOL, "permission", what));
    let n = p.get("options").and_then(Value::as_array).map(Vec::len);
    let mut d = b.meta("kind", "permission").meta("prompt", prompt).meta_opt("options_count", n).subject(call).build();
    d.cause_key = call.map(tool_key);
    d
}

fn response(method: &str, m: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let r = m.get("result").unwrap_or(&Value::Null);
    let failed = m.get("error").filter(|e| !e.is_null());
    match (method, failed) {
        ("session/prompt", Some(e)) => {
            let code = e.get("code").map(|c| c.to_string());
            vec![Builder::new("run.failed", cx).meta("reason", "error").meta_opt("code", code).build()]
        }
        ("session/prompt", None) => vec![prompt_end(r.get("stopReason").and_then(Value::as_str), cx)],
        ("session/new" | "session/load", None) => {
            vec![Builder::new("session.started", cx).meta("client", json!({"name": PROTOCOL})).build()]
        }
        ("session/close" | "session/delete", None) => {
            vec![Builder::new("session.ended", cx).meta("reason", "normal").build()]
        }
        ("session/request_permission", None) => permission_outcome(r.get("outcome").unwrap_or(&Value::Null), cx),
        ("session/request_permission", Some(_)) => {
            vec![Builder::new("attention.resolved", cx).meta("resolution", "dismissed").build()]
        }
        // Machinery answers and unmatched responses ride the fallback plane.
        (m, _) if !m.is_empty() => vec![debug(x(&format!("{}.response", dotted(m)), cx).build())],
        _ => vec![debug(x("rpc.response", cx).build())],
    }
}

/// The run terminal of a `session/prompt` response by `stopReason`: bounded terminations
/// are completions (the reason rides as metadata), `cancelled` the client's interrupt,
/// `refusal` the one failing reason.
fn prompt_end(stop: Option<&str>, cx: &MapContext) -> EventDraft {
    match stop {
        Some("cancelled") => Builder::new("run.cancelled", cx).meta("by", "user").build(),
        Some("refusal") => Builder::new("run.failed", cx).meta("reason", "refusal").build(),
        other => Builder::new("run.finished", cx).meta_opt("stop_reason", other).build(),
    }
}

fn permission_outcome(o: &Value, cx: &MapContext) -> Vec<EventDraft> {
    match (o.get("outcome").and_then(Value::as_str), o.get("optionId").and_then(Value::as_str)) {
        (Some("selected"), Some(option)) => vec![
            Builder::new("attention.answered", cx).meta("answer", json!({"option": option})).meta("via", "oob").build(),
        ],
        _ => vec![Builder::new("attention.resolved", cx).meta("resolution", "dismissed").build()],
    }
}

/// The `tool.name` of a tool update: the agent's own tool name where the frames carry it, so
/// a session reads the same through the agent's hooks and under `wrap acp` (the ACP `kind`
/// stays on `tool.requested` as `kind`): `_meta.toolName` (Qwen Code), else the name Gemini
/// CLI builds its call ids from ([`name_in_call_id`]), else the ACP `kind` (`execute`, `read`,
/// `edit`, ...: the schema's closed enum), else `other` (the schema's default kind). Never the
/// `title`: agents put the literal command or file name there, which is content (AEP-0002
/// §5.3 `tool_ref.name` is `metadata`) and an unbounded metric label; the title rides as
/// `title` at `redacted`+. The tee keeps the name a call's first update gave it on every
/// later one, so a call keeps one name.
pub fn tool_name(update: &Value) -> &str {
    fn nonempty(v: Option<&Value>) -> Option<&str> {
        v.and_then(Value::as_str).filter(|t| !t.is_empty())
    }
    nonempty(update.pointer("/_meta/toolName"))
        .or_else(|| update.get("toolCallId").and_then(Value::as_str).and_then(name_in_call_id))
        .or_else(|| nonempty(update.get("kind")))
        .unwrap_or("other")
}

/// The tool name a Gemini CLI call id starts with. Gemini CLI 0.61 prefixes every scheduled
/// call's id with its tool name and a double underscore: `{name}__{name}_{epoch ms}_{n}` for
/// the ids it makes (`run_shell_command__run_shell_command_1796660017704_0`), `{name}__{id}`
/// when the model gave one; calls its ACP session makes itself are `{name}-{epoch ms}-{n}`.
/// A tool name here is an ASCII identifier (letters, digits, `_`, `-`; an MCP tool's may hold
/// `__`), at most 64 bytes; any other id names nothing.
pub fn name_in_call_id(id: &str) -> Option<&str> {
    fn is_name(s: &str) -> bool {
        s.len() <= 64
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }
    fn stamp(s: &str, sep: char) -> bool {
        let ms = s.split(sep).next().unwrap_or("");
        ms.len() >= 10 && ms.bytes().all(|b| b.is_ascii_digit())
    }
    let seps: Vec<usize> = id.match_indices("__").map(|(i, _)| i).collect();
    // The repeated form first: an MCP tool's name may itself hold `__`.
    for &i in &seps {
        let (name, rest) = (&id[..i], &id[i + 2..]);
        if is_name(name) && rest.strip_prefix(name).and_then(|r| r.strip_prefix('_')).is_some_and(|r| stamp(r, '_')) {
            return Some(name);
        }
    }
    if let Some(&i) = seps.last() {
        let name = &id[..i];
        return (is_name(name) && i + 2 < id.len()).then_some(name);
    }
    let (name, rest) = id.split_once('-')?;
    (is_name(name) && stamp(rest, '-')).then_some(name)
}

fn notification(method: &str, p: &Value, opts: Options, cx: &MapContext) -> Vec<EventDraft> {
    if method != "session/update" {
        return vec![debug(x(&dotted(method), cx).build())];
    }
    let empty = json!({});
    let u = p.get("update").unwrap_or(&empty);
    let kind = u.get("sessionUpdate").and_then(Value::as_str).unwrap_or("");
    let call = u.get("toolCallId").and_then(Value::as_str);
    let name = tool_name(u);
    let title = u.get("title").and_then(Value::as_str).filter(|t| !t.is_empty());
    let with_subject = |mut d: EventDraft| {
        d.subject = call.map(str::to_owned);
        d
    };
    match kind {
        "tool_call" => {
            let mut d = Builder::new("tool.requested", cx)
                .meta("tool", common::tool_obj(name, call))
                .meta_opt("kind", u.get("kind").and_then(Value::as_str))
                .text("title", title)
                .content("args", u.get("rawInput"))
                .build();
            d.correlation_key = call.map(tool_key);
            vec![with_subject(d)]
        }
        "tool_call_update" => match u.get("status").and_then(Value::as_str) {
            Some("completed") => {
                let mut d = Builder::new("tool.completed", cx)
                    .meta("tool", common::tool_obj(name, call))
                    .content("result", u.get("rawOutput"))
                    .build();
                d.cause_key = call.map(tool_key);
                vec![with_subject(d)]
            }
            Some("failed") => {
                let mut d = Builder::new("tool.failed", cx)
                    .meta("tool", common::tool_obj(name, call))
                    .error("tool_error", None)
                    .build();
                d.cause_key = call.map(tool_key);
                vec![with_subject(d)]
            }
            status => vec![with_subject(debug(x("tool_call.update", cx).meta_opt("status", status).build()))],
        },
        "plan" => {
            // Plan entries carry no id: counts by status only, never invented task transitions.
            let entries = u.get("entries").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]);
            let count = |s: &str| entries.iter().filter(|e| e.get("status").and_then(Value::as_str) == Some(s)).count();
            let in_progress = count("in_progress");
            vec![debug(
                x("plan.updated", cx)
                    .meta("entries_pending", count("pending"))
                    .meta("entries_completed", count("completed"))
                    .meta_opt("entries_in_progress", (in_progress > 0).then_some(in_progress))
                    .build(),
            )]
        }
        "agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk" if !opts.deltas => Vec::new(),
        "agent_message_chunk" | "agent_thought_chunk" | "user_message_chunk" => {
            let text = u.get("content").and_then(content_text);
            vec![debug(x(&dotted(kind), cx).text("delta", text.as_deref()).build())]
        }
        "usage_update" => vec![debug(
            x("usage.updated", cx)
                .meta_opt("gen_ai.usage.input_tokens", u.get("usedTokens").and_then(Value::as_u64))
                .meta_opt("gen_ai.usage.output_tokens", u.get("outputTokens").and_then(Value::as_u64))
                .build(),
        )],
        "" => vec![debug(x("session.update", cx).build())],
        other => vec![debug(x(&dotted(other), cx).build())],
    }
}

/// A request the tee saw, waiting for its response.
#[derive(Debug, Clone)]
struct Pending {
    method: String,
    session: Option<String>,
    /// The run a `session/prompt` opened.
    run: Option<String>,
}

/// The ACP tee: classifies each newline-framed JSON-RPC line, joins responses to their
/// request by id per direction, and keeps the identity the fixture leaves to runtime:
/// `sessionId` verbatim, the run = the `session/prompt` request id qualified by the tee's
/// epoch, tool titles by `toolCallId`, the permission pair by request id.
#[derive(Debug)]
pub struct Tee {
    epoch: u64,
    opts: Options,
    /// (direction the request travelled, JSON-RPC id as compact JSON) -> request.
    pending: HashMap<(Direction, String), Pending>,
    /// session -> open run.
    runs: HashMap<String, String>,
    /// toolCallId -> what names the call (`title`, `kind`, `_meta.toolName` of its first
    /// update; later updates usually omit them).
    titles: HashMap<String, Value>,
    /// The agent's name from the `initialize` response (`agentInfo.name`), as an AEP `agent`.
    agent: Option<String>,
    /// toolCallIds whose `tool.requested` was emitted and whose outcome was not seen yet.
    open_calls: HashSet<String>,
    /// The session of lines that name none (a single-session agent's machinery).
    last_session: Option<String>,
    /// Responses seen before their request: (direction, id, message).
    orphans: Vec<(Direction, String, Value)>,
}

/// At most this many requests wait for a response (a peer that never answers cannot grow
/// the tee without bound; the oldest are forgotten).
const MAX_PENDING: usize = 4096;

/// At most this many responses wait for a request they may have overtaken.
const MAX_ORPHANS: usize = 64;

impl Tee {
    /// A tee for restart generation `epoch`.
    pub fn new(epoch: u64, opts: Options) -> Self {
        Self {
            epoch,
            opts,
            pending: HashMap::new(),
            runs: HashMap::new(),
            titles: HashMap::new(),
            open_calls: HashSet::new(),
            agent: None,
            last_session: None,
            orphans: Vec::new(),
        }
    }

    /// Maps one parsed JSON-RPC message seen travelling `dir`.
    pub fn map_message(&mut self, dir: Direction, msg: &Value, cx: &MapContext) -> Vec<EventDraft> {
        let method = msg.get("method").and_then(Value::as_str);
        let id = msg.get("id").filter(|i| !i.is_null()).map(Value::to_string);
        match (method, id) {
            (Some(method), Some(id)) => self.on_request(dir, method, id, msg, cx),
            (Some(method), None) => self.on_notification(method, msg, cx),
            (None, Some(id)) if msg.get("result").is_some() || msg.get("error").is_some() => {
                self.on_response(dir, id, msg, cx)
            }
            _ => Vec::new(),
        }
    }

    fn session_of(&mut self, params: Option<&Value>) -> Option<String> {
        let s = params.and_then(|p| p.get("sessionId")).and_then(Value::as_str).map(str::to_owned);
        if s.is_some() {
            self.last_session.clone_from(&s);
        }
        s.or_else(|| self.last_session.clone())
    }

    fn on_request(
        &mut self,
        dir: Direction,
        method: &str,
        id: String,
        msg: &Value,
        cx: &MapContext,
    ) -> Vec<EventDraft> {
        let params = msg.get("params");
        let session = self.session_of(params);
        // A permission request can be the first the wire says of a tool call (Gemini CLI 0.61
        // sends no `tool_call` update before asking): its `toolCall` is the call's first update,
        // so it opens the call (the design record's "first update for a toolCallId").
        let mut first = Vec::new();
        if method == "session/request_permission"
            && let Some(tc) = params.and_then(|p| p.get("toolCall")).and_then(Value::as_object)
            && tc.get("toolCallId").and_then(Value::as_str).is_some_and(|c| !self.open_calls.contains(c))
        {
            let mut update = tc.clone();
            update.insert("sessionUpdate".into(), json!("tool_call"));
            let note = json!({"params": {"sessionId": session, "update": update}});
            first = self.on_notification("session/update", &note, cx);
        }
        let moment = json!({"kind": "request", "method": method, "params": params.cloned().unwrap_or(json!({}))});
        let mut drafts = map_moment(&moment, self.opts, cx);
        let mut pending = Pending { method: method.to_owned(), session: session.clone(), run: None };
        match method {
            "session/prompt" => {
                let run = format!("{}.{}", self.epoch, id.trim_matches('"'));
                if let Some(s) = &session
                    && let Some(stale) = self.runs.insert(s.clone(), run.clone())
                {
                    // A prompt while one is open: the stale run drains (the interrupt-drain rule).
                    drafts.insert(0, common::drain_run(&stale, Some(s), cx));
                }
                for d in drafts.iter_mut().filter(|d| d.r#type == "run.started") {
                    d.run = Some(run.clone());
                    d.correlation_key = Some(run_key(session.as_deref(), &run));
                }
                pending.run = Some(run);
            }
            "session/request_permission" => {
                let key = attention_key(&format!("acp:{}:{}", session.as_deref().unwrap_or(""), id));
                for d in &mut drafts {
                    d.correlation_key = Some(key.clone());
                }
            }
            _ => {}
        }
        if self.pending.len() >= MAX_PENDING
            && let Some(k) = self.pending.keys().next().cloned()
        {
            self.pending.remove(&k);
        }
        self.pending.insert((dir, id.clone()), pending);
        let mut out = first;
        out.extend(self.stamp(drafts, session.as_deref()));
        if let Some(i) = self.orphans.iter().position(|(d, i, _)| *d == dir.flip() && *i == id) {
            let (d, i, msg) = self.orphans.remove(i);
            out.extend(self.on_response(d, i, &msg, cx));
        }
        out
    }

    fn on_response(&mut self, dir: Direction, id: String, msg: &Value, cx: &MapContext) -> Vec<EventDraft> {
        // A response travels opposite to its request.
        let Some(req) = self.pending.remove(&(dir.flip(), id.clone())) else {
            // The two directions are teed by two pumps: an answer can be queued before the
            // request it answers. It waits (bounded) for that request.
            if self.orphans.len() >= MAX_ORPHANS {
                self.orphans.remove(0);
            }
            self.orphans.push((dir, id, msg.clone()));
            return Vec::new();
        };
        let mut moment = json!({"kind": "response", "method": req.method});
        for k in ["result", "error"] {
            if let Some(v) = msg.get(k) {
                moment[k] = v.clone();
            }
        }
        if req.method == "initialize"
            && self.agent.is_none()
            && let Some(name) = msg.pointer("/result/agentInfo/name").and_then(Value::as_str).and_then(agent_token)
        {
            self.agent = Some(name);
        }
        let session = match req.method.as_str() {
            "session/new" => {
                let s = msg.pointer("/result/sessionId").and_then(Value::as_str).map(str::to_owned);
                if s.is_some() {
                    self.last_session.clone_from(&s);
                }
                s
            }
            _ => req.session.clone(),
        };
        let mut drafts = map_moment(&moment, self.opts, cx);
        match req.method.as_str() {
            "session/prompt" => {
                if let (Some(s), Some(run)) = (&session, &req.run) {
                    if self.runs.get(s) == Some(run) {
                        self.runs.remove(s);
                    }
                    for d in drafts.iter_mut().filter(|d| d.r#type.starts_with("run.")) {
                        d.run = Some(run.clone());
                        d.cause_key = Some(run_key(Some(s), run));
                    }
                }
            }
            "session/request_permission" => {
                let key = attention_key(&format!("acp:{}:{}", session.as_deref().unwrap_or(""), id));
                // The answered outcome is followed by its resolution (AEP-0002 §7.2).
                if drafts.iter().any(|d| d.r#type == "attention.answered") {
                    drafts.push(Builder::new("attention.resolved", cx).meta("resolution", "answered").build());
                }
                // No subject of their own: the lifecycle events name the request event
                // (AEP-0002 §7.1), which the stamper takes from the resolved cause.
                for d in &mut drafts {
                    d.cause_key = Some(key.clone());
                }
            }
            "session/close" | "session/delete" => {
                if let Some(s) = &session
                    && let Some(stale) = self.runs.remove(s)
                {
                    drafts.insert(0, common::drain_run(&stale, Some(s), cx));
                }
            }
            _ => {}
        }
        self.stamp(drafts, session.as_deref())
    }

    fn on_notification(&mut self, method: &str, msg: &Value, cx: &MapContext) -> Vec<EventDraft> {
        let params = msg.get("params");
        let session = self.session_of(params);
        let mut params = params.cloned().unwrap_or(json!({}));
        // Join what named the call on its first updates (title, kind, `_meta.toolName`) onto
        // later updates that omit it.
        if method == "session/update"
            && let Some(u) = params.get_mut("update").and_then(Value::as_object_mut)
            && let Some(call) = u.get("toolCallId").and_then(Value::as_str).map(str::to_owned)
        {
            if self.titles.len() >= MAX_PENDING && !self.titles.contains_key(&call) {
                self.titles.clear();
            }
            let known = self.titles.entry(call.clone()).or_insert_with(|| json!({}));
            for key in ["title", "kind"] {
                match u.get(key).and_then(Value::as_str) {
                    Some(v) if !v.is_empty() => known[key] = json!(v),
                    _ => {
                        if let Some(v) = known.get(key).filter(|v| v.is_string()) {
                            u.insert(key.into(), v.clone());
                        }
                    }
                }
            }
            // The call keeps the name its first update gave it (Qwen Code adds `_meta.toolName`
            // only to later updates: a name first read from the kind stays the kind).
            let name = match known.get("name").and_then(Value::as_str) {
                Some(n) => n.to_owned(),
                None => {
                    let n = tool_name(&Value::Object(u.clone())).to_owned();
                    known["name"] = json!(n);
                    n
                }
            };
            let meta = u.entry("_meta").or_insert_with(|| json!({}));
            if let Some(m) = meta.as_object_mut() {
                m.insert("toolName".into(), json!(name));
            }
            // Only the first update of a call requests it; a repeated `tool_call` is an update.
            if u.get("sessionUpdate").and_then(Value::as_str) == Some("tool_call") {
                if self.open_calls.contains(&call) {
                    u.insert("sessionUpdate".into(), json!("tool_call_update"));
                } else {
                    if self.open_calls.len() >= MAX_PENDING {
                        self.open_calls.clear();
                    }
                    self.open_calls.insert(call.clone());
                }
            }
            if matches!(u.get("status").and_then(Value::as_str), Some("completed" | "failed")) {
                self.titles.remove(&call);
                self.open_calls.remove(&call);
            }
        }
        let moment = json!({"kind": "notification", "method": method, "params": params});
        let drafts = map_moment(&moment, self.opts, cx);
        self.stamp(drafts, session.as_deref())
    }

    fn stamp(&self, mut drafts: Vec<EventDraft>, session: Option<&str>) -> Vec<EventDraft> {
        let run = session.and_then(|s| self.runs.get(s)).map(String::as_str);
        common::stamp_identity(&mut drafts, session, run);
        drafts
    }
}

/// The AEP `agent` of an ACP agent's self-declared `agentInfo.name` (`gemini-cli`,
/// `qwen-code`, ...): the stable logical identity AEP-0001 §5.1 #7 asks for, which also names
/// the log folder and rides `source` and metric labels. Lowercased; every run of characters
/// outside `[a-z0-9._-]` becomes one `-`; at most 64 characters; `None` when nothing is left.
pub fn agent_token(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.trim().chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 64 {
            break;
        }
    }
    let out = out.trim_matches(|c| matches!(c, '-' | '.' | '_')).to_owned();
    (!out.is_empty()).then_some(out)
}

impl LineMapper for Tee {
    /// The agent's `agentInfo.name` once `initialize` answered with one (first answer wins:
    /// an ACP connection initializes once), else the protocol, `acp`.
    fn agent(&self) -> &str {
        self.agent.as_deref().unwrap_or(PROTOCOL)
    }

    fn map_line(&mut self, dir: Direction, line: &[u8], cx: &MapContext) -> Vec<EventDraft> {
        match serde_json::from_slice::<Value>(line) {
            Ok(v) => self.map_message(dir, &v, cx),
            Err(_) => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
