#![doc = include_str!("README.md")]

pub mod otel;
pub mod rollout;
pub mod spec;

use serde_json::{Map, Value, json};

use super::hook_family::{self as hf, Moment};
use crate::common::{self, Builder, close_run, drain_run, fallback, ne, open_vendor_run, run_key, s};
use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The vendor token.
pub const VENDOR: &str = "codex";

/// The Codex hook adapter.
pub fn adapter() -> Box<dyn HookAdapter> {
    Box::new(CodexAdapter)
}

/// Codex hooks (AEP-0002 Annex A.2): thread = session, `turn_id` = run.
/// The neutral reply is the trait's empty one (empty stdout, exit 0): Codex then proceeds
/// on its own (fail-open).
#[derive(Debug, Clone, Copy, Default)]
pub struct CodexAdapter;

/// The stateless per-hook mapping (what `conformance/fixtures/mappings/codex.json` pins):
/// type, data and subject of each hook at the ceilings of `cx`. Identity and the
/// interrupt drain are added by [`CodexAdapter`].
pub fn map_pinned(hook: &str, p: &Value, cx: &MapContext) -> Vec<EventDraft> {
    let tool = || ne(p, "tool_name").unwrap_or("unknown");
    match hook {
        // A `compact` SessionStart re-fires after compaction inside a live session: the
        // compaction is carried by session.compacted, so this is no new session (deviation).
        "SessionStart" if s(p, "source") == Some("compact") => vec![fallback(VENDOR, hook, None, cx)],
        "SessionStart" => {
            vec![common::session_started(VENDOR, s(p, "source"), s(p, "model"), cx).text("cwd", s(p, "cwd")).build()]
        }
        // Newer than the Annex A table: the obvious core type.
        "SessionEnd" => vec![hf::session_ended(p, cx)],
        "UserPromptSubmit" => {
            vec![Builder::new("run.started", cx).meta("trigger", "user").text("prompt", s(p, "prompt")).build()]
        }
        "Stop" => vec![Builder::new("run.finished", cx).build()],
        "PreToolUse" => vec![common::tool_requested(tool(), s(p, "tool_use_id"), p.get("tool_input"), cx)],
        // Codex has no tool-failure hook: a failed call still lands on tool.completed
        // (tool.failed stays reserved for runtime-reported failures; Annex A.2 deviation).
        "PostToolUse" => vec![common::tool_completed(tool(), s(p, "tool_use_id"), p.get("tool_response"), None, cx)],
        "PermissionRequest" => vec![common::permission_request(VENDOR, tool(), p.get("tool_input"), cx)],
        "SubagentStart" => vec![hf::subagent("delegation.subagent.started", p, cx)],
        "SubagentStop" => vec![hf::subagent("delegation.subagent.stopped", p, cx)],
        // Paired concept; emitted once at PostCompact (documented deviation).
        "PreCompact" => Vec::new(),
        "PostCompact" => vec![hf::compacted(p, cx)],
        _ => vec![fallback(VENDOR, hook, None, cx)],
    }
}

/// The correlation key of a subagent's delegation pair, by its `agent_id`.
fn delegation_key(agent: &str) -> String {
    format!("delegation:{agent}")
}

/// The open subagent turns of a session: `agent_id` -> its open turn (the child's run).
fn subagent_runs(state: &mut SessionState) -> &mut Map<String, Value> {
    let v = state.extra.entry("codex_subagent_runs").or_insert_with(|| Value::Object(Map::new()));
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().unwrap_or_else(|| unreachable!("made an object above"))
}

fn as_run(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

/// The hook events and payload fields this adapter was written against: the install plan's
/// events and every field of the recorded payloads (`adapters/tests/data/codex/`).
pub static VOCABULARY: crate::drift::Vocabulary = crate::drift::Vocabulary {
    events: &[
        "PermissionRequest",
        "PostCompact",
        "PostToolUse",
        "PreCompact",
        "PreToolUse",
        "SessionEnd",
        "SessionStart",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "UserPromptSubmit",
        "notify",
    ],
    common: &["cwd"],
    fields: &[
        ("PostCompact", &["hook_event_name", "model", "session_id", "transcript_path", "trigger", "turn_id"]),
        (
            "PostToolUse",
            &[
                // A subagent's own tool calls name it (`spawn_agent`; recorded from the e2e
                // codex-subagent run, Codex 0.171.0: `c11_0.171.0_subagent_tools.jsonl`).
                "agent_id",
                "agent_type",
                "hook_event_name",
                "model",
                "permission_mode",
                "session_id",
                "tool_input",
                "tool_name",
                "tool_response",
                "tool_use_id",
                "transcript_path",
                "turn_id",
            ],
        ),
        ("PreCompact", &["hook_event_name", "model", "session_id", "transcript_path", "trigger", "turn_id"]),
        (
            "PreToolUse",
            &[
                // A subagent's own tool calls name it (`spawn_agent`; recorded from the e2e
                // codex-subagent run, Codex 0.171.0: `c11_0.171.0_subagent_tools.jsonl`).
                "agent_id",
                "agent_type",
                "hook_event_name",
                "model",
                "permission_mode",
                "session_id",
                "tool_input",
                "tool_name",
                "tool_use_id",
                "transcript_path",
                "turn_id",
            ],
        ),
        ("SessionEnd", &["hook_event_name", "reason", "session_id", "transcript_path"]),
        ("SessionStart", &["hook_event_name", "model", "permission_mode", "session_id", "source", "transcript_path"]),
        (
            "Stop",
            &[
                "hook_event_name",
                "last_assistant_message",
                "model",
                "permission_mode",
                "session_id",
                "stop_hook_active",
                "transcript_path",
                "turn_id",
            ],
        ),
        (
            "SubagentStart",
            &[
                "agent_id",
                "agent_type",
                "hook_event_name",
                "model",
                "permission_mode",
                "session_id",
                "transcript_path",
                "turn_id",
            ],
        ),
        (
            "SubagentStop",
            &[
                "agent_id",
                "agent_transcript_path",
                "agent_type",
                "hook_event_name",
                "last_assistant_message",
                "model",
                "permission_mode",
                "session_id",
                "stop_hook_active",
                "transcript_path",
                "turn_id",
            ],
        ),
        (
            "UserPromptSubmit",
            &[
                "agent_id",
                "agent_type",
                "hook_event_name",
                "model",
                "permission_mode",
                "prompt",
                "session_id",
                "transcript_path",
                "turn_id",
            ],
        ),
        ("notify", &["client", "input-messages", "last-assistant-message", "thread-id", "turn-id", "type"]),
    ],
    version: None,
};

impl HookAdapter for CodexAdapter {
    fn history(&self) -> Option<&'static crate::history::HistorySpec> {
        Some(&rollout::HISTORY)
    }

    fn vendor(&self) -> &'static str {
        VENDOR
    }

    fn vocabulary(&self) -> Option<&'static crate::drift::Vocabulary> {
        Some(&VOCABULARY)
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        match hf::hook_name(call) {
            Ok(h) => Ok(h),
            // `notify` passes its JSON (no hook name, a `type`) as the last argv element.
            Err(_) if s(call.payload, "type").is_some() => Ok("notify".to_owned()),
            Err(e) => Err(e),
        }
    }

    /// `notify` (`agent-turn-complete`) reports a turn that already ended, and Codex sends
    /// it after `SessionEnd` on exit: a late completion of the ended session (AEP-0002 §2
    /// #5), never a resumption.
    fn resumes_session(&self, hook: &str) -> bool {
        hook != "notify"
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        ne(call.payload, "session_id").or_else(|| ne(call.payload, "thread-id")).map(str::to_owned)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        let mut m = Moment::open(self, call, cx, map_pinned)?;
        let (p, sess) = (m.p, m.session.as_deref());
        let turn = ne(p, "turn_id").or_else(|| ne(p, "turn-id"));
        // A subagent (`spawn_agent`) fires its hooks on the parent's thread with its own
        // `turn_id` and an `agent_id`: its turns are runs of their own beside the parent's open
        // run, never the parent's (AEP-0002 §4.2 delegation; Annex A.2 turn = run).
        let agent = ne(p, "agent_id");
        match (m.hook.as_str(), agent) {
            ("SubagentStart", Some(a)) => {
                let parent = state.current_run.clone().or_else(|| turn.map(str::to_owned));
                // The child's run is linked by cause (its `run.started` points here): the pinned
                // data of the pair stays as `mappings/codex.json` states it.
                for d in &mut m.drafts {
                    d.run.clone_from(&parent);
                    d.correlation_key = Some(delegation_key(a));
                }
            }
            ("UserPromptSubmit", Some(a)) => {
                if let Some(t) = turn {
                    // A second message to the same subagent while its turn is open drains it.
                    if let Some(stale) = subagent_runs(state).insert(a.to_owned(), json!(t)).and_then(|v| as_run(&v))
                        && stale != t
                    {
                        m.before.push(drain_run(&stale, sess, cx));
                    }
                    for d in &mut m.drafts {
                        d.data.insert("trigger".into(), json!("agent"));
                        d.correlation_key = Some(run_key(sess, t));
                        d.cause_key = Some(delegation_key(a));
                    }
                }
            }
            // Codex ends a subagent turn with `SubagentStop` (no `Stop` of its own); a `Stop`
            // naming an agent closes that agent's turn only.
            ("SubagentStop" | "Stop", Some(a)) => {
                let child = subagent_runs(state).remove(a).and_then(|v| as_run(&v));
                let parent = state.current_run.clone();
                if let Some(c) = child.as_deref() {
                    let mut fin = Builder::new("run.finished", cx).build();
                    fin.run = Some(c.to_owned());
                    fin.cause_key = Some(run_key(sess, c));
                    m.before.push(fin);
                }
                if m.hook == "Stop" {
                    m.drafts.clear();
                }
                for d in &mut m.drafts {
                    d.run = parent.clone().or_else(|| turn.map(str::to_owned));
                    d.cause_key = Some(delegation_key(a));
                }
            }
            ("UserPromptSubmit", None) => {
                // Codex turn = AEP run (Annex A.2). A turn left open (interrupted) drains
                // as run.cancelled at the next prompt.
                if let Some(t) = turn {
                    if let Some(stale) = open_vendor_run(state, t) {
                        m.before.push(drain_run(&stale, sess, cx));
                    }
                    for d in &mut m.drafts {
                        d.correlation_key = Some(run_key(sess, t));
                    }
                }
            }
            ("Stop", None) => {
                let closed = close_run(state);
                if let Some(t) = turn.map(str::to_owned).or(closed) {
                    for d in &mut m.drafts {
                        d.run = Some(t.clone());
                        d.cause_key = Some(run_key(sess, &t));
                    }
                }
            }
            ("SessionEnd", _) => {
                // Subagent turns left open drain first, then the parent's.
                let open: Vec<String> = std::mem::take(subagent_runs(state)).values().filter_map(as_run).collect();
                for stale in open {
                    m.before.push(drain_run(&stale, sess, cx));
                }
                m.drain_open_run(state, cx);
            }
            _ => {}
        }
        // The turn (else the open run) on every draft but session.* and the vendor namespace.
        let run = turn.map(str::to_owned).or_else(|| state.current_run.clone());
        for d in &mut m.drafts {
            if d.run.is_none() && !d.r#type.starts_with("session.") && !d.r#type.starts_with("x.") {
                d.run = run.clone();
            }
        }
        let mut out = m.before;
        out.extend(m.drafts);
        common::stamp(&mut out, m.session.as_deref(), None);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(state: &mut SessionState, p: Value) -> Vec<EventDraft> {
        CodexAdapter.map(&HookCall { event: None, payload: &p }, state, &MapContext::default()).unwrap()
    }

    #[test]
    fn turn_is_the_run_and_tools_pair_by_call_id() {
        let mut st = SessionState::default();
        let a = run(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "turn_id": "t1"}));
        assert_eq!(a[0].run.as_deref(), Some("t1"));
        let req = run(
            &mut st,
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "turn_id": "t1", "tool_name": "Bash", "tool_use_id": "c1", "tool_input": {"command": "ls"}}),
        );
        let done = run(
            &mut st,
            json!({"hook_event_name": "PostToolUse", "session_id": "s", "turn_id": "t1", "tool_name": "Bash", "tool_use_id": "c1", "tool_response": "x"}),
        );
        assert_eq!(req[0].correlation_key, done[0].cause_key);
        assert!(req[0].correlation_key.is_some());
        assert_eq!(done[0].r#type, "tool.completed");
        // An interrupted turn drains at the next prompt.
        let b = run(&mut st, json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "turn_id": "t2"}));
        assert_eq!(b.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["run.cancelled", "run.started"]);
        assert_eq!(b[0].run.as_deref(), Some("t1"));
    }

    #[test]
    fn notify_argv_payload_lands_in_the_vendor_namespace() {
        let mut st = SessionState::default();
        let out = run(&mut st, json!({"type": "agent-turn-complete", "thread-id": "th", "turn-id": "t"}));
        assert_eq!(out[0].r#type, "x.codex.session.notify");
        assert_eq!(out[0].session.as_deref(), Some("th"));
    }
}
