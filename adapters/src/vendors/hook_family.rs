//! What the adapters of the Claude Code hook family (Claude Code, Codex, Gemini CLI, Qwen
//! Code, VS Code, Kimi Code) share: the hook named by `hook_event_name`, the session by
//! `session_id`, a stateless per-hook layer (each vendor's `map_pinned`, what the Annex A
//! fixture pins) amended by a stateful layer (runs, pairing), and the per-hook drafts whose
//! mapping is the same on every vendor that has the hook. Vendor-specific decisions stay in
//! the vendor modules.

use serde_json::{Value, json};

use crate::common::{self, Builder, ne, s, u};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The payload field naming the hook.
pub(crate) const HOOK_FIELD: &str = "hook_event_name";

/// The hook name: the URL's event, else the payload's `hook_event_name`.
pub(crate) fn hook_name(call: &HookCall<'_>) -> Result<String, AdapterError> {
    common::hook_name(call, HOOK_FIELD)
}

/// The session: the payload's non-empty `session_id`.
pub(crate) fn session_id(call: &HookCall<'_>) -> Option<String> {
    ne(call.payload, "session_id").map(str::to_owned)
}

/// The stateless per-hook layer of a vendor (`map_pinned`).
pub(crate) type Pinned = fn(&str, &Value, &MapContext) -> Vec<EventDraft>;

/// One hook call going through the stateful layer: the vendor amends `drafts` (the pinned
/// drafts of the hook) and `before` (drafts emitted ahead of them, e.g. a drained run).
pub(crate) struct Moment<'a> {
    /// The payload.
    pub p: &'a Value,
    /// The hook name.
    pub hook: String,
    /// The session, as the adapter names it.
    pub session: Option<String>,
    /// Drafts that precede the hook's own.
    pub before: Vec<EventDraft>,
    /// The hook's own drafts, from the pinned layer.
    pub drafts: Vec<EventDraft>,
}

impl<'a> Moment<'a> {
    /// Rejects a non-object payload, names the hook and the session through `adapter`, and
    /// runs the pinned layer.
    pub(crate) fn open(
        adapter: &dyn HookAdapter,
        call: &HookCall<'a>,
        cx: &MapContext,
        pinned: Pinned,
    ) -> Result<Self, AdapterError> {
        let p = call.payload;
        common::object(p)?;
        let hook = adapter.hook_name(call)?;
        let session = adapter.session_id(call);
        let drafts = pinned(&hook, p, cx);
        Ok(Self { p, hook, session, before: Vec::new(), drafts })
    }

    /// At a session end, a run still open drains as `run.cancelled` ahead of the hook's drafts.
    pub(crate) fn drain_open_run(&mut self, state: &mut SessionState, cx: &MapContext) {
        if let Some(stale) = common::close_run(state) {
            self.before.push(common::drain_run(&stale, self.session.as_deref(), cx));
        }
    }

    /// Every draft in order, stamped with the session and the run open after this hook.
    pub(crate) fn finish(self, state: &SessionState) -> Vec<EventDraft> {
        let mut out = self.before;
        out.extend(self.drafts);
        common::stamp_identity(&mut out, self.session.as_deref(), state.current_run.as_deref());
        out
    }

    /// [`Moment::finish`], plus the vendor's own timestamp as the event time.
    pub(crate) fn finish_timed(self, state: &SessionState) -> Vec<EventDraft> {
        let p = self.p;
        let mut out = self.finish(state);
        common::stamp_time(&mut out, p);
        out
    }
}

/// `SessionEnd`: `session.ended` with the vendor reason collapsed (AEP-0002 Annex A).
pub(crate) fn session_ended(p: &Value, cx: &MapContext) -> EventDraft {
    Builder::new("session.ended", cx).meta("reason", common::session_end_reason(s(p, "reason"))).build()
}

/// The user's prompt opens a run: `run.started`, trigger `user`, the prompt gated as text.
pub(crate) fn run_started(prompt: Option<&str>, cx: &MapContext) -> EventDraft {
    Builder::new("run.started", cx).meta("trigger", "user").text("prompt", prompt).build()
}

/// `StopFailure`: `run.failed` with the `error` as reason; `error_details` ride as the error
/// only at a `redacted` ceiling or above.
pub(crate) fn run_failed(p: &Value, cx: &MapContext) -> EventDraft {
    let reason = ne(p, "error").unwrap_or("unknown");
    let mut b = Builder::new("run.failed", cx).meta("reason", reason);
    if let Some(details) = ne(p, "error_details").filter(|_| b.ceiling() >= aep_schemas::Capture::Redacted) {
        b = b.error(reason, Some(details));
    }
    b.build()
}

/// The error text of a failure payload (a string, or an object's `message`).
pub(crate) fn error_text(p: &Value) -> Option<&str> {
    match p.get("error") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Object(o)) => o.get("message").and_then(Value::as_str),
        _ => None,
    }
}

/// `PostToolUseFailure`: `tool.failed`, typed `interrupt` when the user interrupted the call.
pub(crate) fn tool_failure(tool: &str, call: Option<&str>, p: &Value, cx: &MapContext) -> EventDraft {
    let ty = if p.get("is_interrupt").and_then(Value::as_bool) == Some(true) { "interrupt" } else { "tool_error" };
    common::tool_failed(tool, call, ty, error_text(p), u(p, "duration_ms"), cx)
}

/// `SubagentStart` / `SubagentStop` (`ty` is the delegation type): the agent type as
/// metadata, the agent id as subject.
pub(crate) fn subagent(ty: &str, p: &Value, cx: &MapContext) -> EventDraft {
    Builder::new(ty, cx).meta_opt("agent_type", ne(p, "agent_type")).subject(s(p, "agent_id")).build()
}

/// The compaction moment: `session.compacted` with its `trigger`.
pub(crate) fn compacted(p: &Value, cx: &MapContext) -> EventDraft {
    Builder::new("session.compacted", cx).meta_opt("trigger", s(p, "trigger")).build()
}

/// `Notification`: `progress.status`, the message gated as text, the notification type as subject.
pub(crate) fn status(p: &Value, cx: &MapContext) -> EventDraft {
    Builder::new("progress.status", cx).text("message", ne(p, "message")).subject(ne(p, "notification_type")).build()
}

/// A task moment (`progress.task.*`): the task id as subject, its title gated as text.
pub(crate) fn task(ty: &str, id: Option<&str>, title: Option<&str>, cx: &MapContext) -> EventDraft {
    let mut b = Builder::new(ty, cx).subject(id);
    if let Some(title) = title.and_then(|t| common::gate_text(t, b.ceiling(), cx)) {
        b = b.meta("task", json!({ "title": title }));
    }
    b.build()
}

/// The `PermissionRequest` reply of the hook family (Claude Code, Codex, Qwen Code):
/// `hookSpecificOutput.decision` allows, or denies with the guidance text as its message.
pub(crate) fn permission_reply(_held: &crate::spec::Held<'_>, d: &crate::spec::Decision) -> Option<Value> {
    let decision =
        if d.allows() { json!({"behavior": "allow"}) } else { json!({"behavior": "deny", "message": d.reason()}) };
    Some(json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}))
}

/// The `PreToolUse` denial of the hook family's binary decision surface (Kimi Code):
/// allow is "no hook objection" (`{}`), anything else denies with the reason.
pub(crate) fn pre_tool_deny_reply(_held: &crate::spec::Held<'_>, d: &crate::spec::Decision) -> Option<Value> {
    Some(if d.allows() {
        json!({})
    } else {
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
            "permissionDecisionReason": d.reason()}})
    })
}

/// Pairing for vendors whose tool hooks carry no call id (GitHub Copilot CLI, Factory
/// Droid): each `PreToolUse` is numbered per session and remembered under its tool name
/// with the digest of its `tool_input`, which the outcome hook repeats.
pub(crate) mod unpaired {
    use serde_json::{Value, json};

    use crate::SessionState;
    use crate::common;

    /// Remembers a call of `tool` with input `input` in `bucket`; returns its correlation key.
    pub(crate) fn push(state: &mut SessionState, bucket: &str, tool: &str, input: Option<&Value>) -> String {
        let seq = format!("{bucket}_seq");
        let n = state.extra.get(&seq).and_then(Value::as_u64).unwrap_or(0) + 1;
        state.extra.insert(seq, json!(n));
        let key = format!("{}:{n}", common::tool_key(tool));
        let digest = input.map(aep_schemas::digest::digest);
        common::push_queue(state, bucket, tool, json!({"key": key, "input": digest}));
        key
    }

    /// Takes the pending call of `tool` an outcome with input `input` ends: the earliest with
    /// the same input digest, else the earliest of that tool. Returns its correlation key.
    pub(crate) fn take(state: &mut SessionState, bucket: &str, tool: &str, input: Option<&Value>) -> Option<String> {
        let queue = state.extra.get_mut(bucket)?.as_object_mut()?.get_mut(tool)?.as_array_mut()?;
        let digest = input.map(aep_schemas::digest::digest);
        let by_input = digest
            .as_deref()
            .and_then(|d| queue.iter().position(|e| e.get("input").and_then(Value::as_str) == Some(d)));
        let i = by_input.or_else(|| (!queue.is_empty()).then_some(0))?;
        queue.remove(i).get("key").and_then(Value::as_str).map(str::to_owned)
    }

    /// Every call still pending, oldest first per tool, as `(tool, key)`; the bucket is emptied.
    pub(crate) fn drain(state: &mut SessionState, bucket: &str) -> Vec<(String, String)> {
        let Some(Value::Object(m)) = state.extra.remove(bucket) else { return Vec::new() };
        let mut out = Vec::new();
        for (tool, q) in m {
            for e in q.as_array().into_iter().flatten() {
                if let Some(k) = e.get("key").and_then(Value::as_str) {
                    out.push((tool.clone(), k.to_owned()));
                }
            }
        }
        // Oldest first overall: the keys end in the per-session call number.
        out.sort_by_key(|(_, k)| k.rsplit(':').next().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0));
        out
    }
}

/// The exit code a shell tool's result text ends with, when it reports one (Copilot CLI's
/// `<shellId: 0 completed with exit code 2>`, Droid's `[Process exited with code 2]`).
pub(crate) fn trailing_exit_code(text: &str) -> Option<i64> {
    let t = text.trim_end().trim_end_matches(['>', ']']);
    let digits = t.rsplit(' ').next()?;
    let head = t[..t.len() - digits.len()].trim_end();
    (head.ends_with("exit code") || head.ends_with("exited with code")).then(|| digits.parse().ok()).flatten()
}
