//! The hook adapters under random input (a bounded fuzz run, part of `cargo test`): random
//! JSON (nested values, keys the adapters read, odd unicode, huge strings) and mutations of
//! the real captured payloads (fields dropped, replaced, retyped) go through every vendor's
//! hook mapping, as call sequences sharing session state the way the bridge keeps it.
//! Properties: no panic, and every batch the bridge would admit stamps into events that the
//! project's own validator (`aep_schemas::validate`) accepts.
//!
//! Fixed case counts and a fixed seed source (proptest's deterministic runner): the run is
//! reproducible and stays within a few seconds. `AEP_FUZZ_SCALE=N` runs N times the cases
//! (a longer local or scheduled run).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use aep_schemas::{Capture, Event};
use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Map, Value, json};

/// The real captures (copied from real agent runs), with the vendor each belongs to.
const CAPTURES: &[(&str, &str)] = &[
    ("claude-code", include_str!("data/claude-code/s01_tools_bypass_json.jsonl")),
    ("claude-code", include_str!("data/claude-code/i01_interactive_permission.jsonl")),
    ("claude-code", include_str!("data/claude-code/s04_tasks.jsonl")),
    ("claude-code", include_str!("data/claude-code/s14_mcp_elicitation.jsonl")),
    ("codex", include_str!("data/codex/c01_exec_json.jsonl")),
    ("codex", include_str!("data/codex/c10_auto_compact.jsonl")),
    ("gemini-cli", include_str!("data/gemini-cli/g01_tools_yolo_http.jsonl")),
    ("qwen-code", include_str!("data/qwen-code/q01_tools_yolo_http.jsonl")),
];

/// Payload keys the adapters read: random objects draw their keys from here (and from
/// random strings), so random input reaches past the first `get`.
const KEYS: &[&str] = &[
    "hook_event_name",
    "session_id",
    "sessionID",
    "conversationId",
    "taskId",
    "hookName",
    "hook",
    "kind",
    "event",
    "type",
    "properties",
    "session",
    "id",
    "tool_name",
    "tool_input",
    "tool_response",
    "tool_use_id",
    "tool_call",
    "tool_result",
    "toolCall",
    "name",
    "args",
    "stepIdx",
    "invocationNum",
    "terminationReason",
    "error",
    "message",
    "prompt",
    "timestamp",
    "turn_id",
    "model",
    "source",
    "reason",
    "cwd",
    "permission_mode",
    "notification_type",
    "title",
    "todo_id",
    "todo_content",
    "phase",
    "agent_id",
    "agent_type",
    "callID",
    "status",
    "result",
    "output",
    "input",
    "duration_ms",
    "durationMs",
    "is_interrupt",
    "trigger",
    "extra",
    "questions",
    "options",
    "requested_schema",
    "requestedSchema",
    "todos",
    "info",
    "parentID",
    "messages",
    "usage",
    "tokens",
    "llm_request",
    "error_details",
    "last_assistant_message",
    "stop_hook_active",
    "role",
];

/// Hook and moment names the adapters match on (beyond them: the fallback).
const HOOKS: &[&str] = &[
    "SessionStart",
    "SessionEnd",
    "UserPromptSubmit",
    "Stop",
    "StopFailure",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PermissionRequest",
    "PermissionDenied",
    "PermissionResult",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "PostCompact",
    "TaskCreated",
    "TaskCompleted",
    "TeammateIdle",
    "Elicitation",
    "ElicitationResult",
    "AskUserQuestion",
    "MessageDisplay",
    "TodoCreated",
    "TodoCompleted",
    "Interrupt",
    "BeforeTool",
    "AfterTool",
    "BeforeAgent",
    "AfterAgent",
    "BeforeModel",
    "AfterModel",
    "BeforeToolSelection",
    "PreCompress",
    "PreInvocation",
    "PostInvocation",
    "agent_start",
    "agent_end",
    "agent_error",
    "agent_abort",
    "agent_resume",
    "prompt_submit",
    "tool_call",
    "tool_result",
    "pre_compact",
    "session_shutdown",
    "on_session_start",
    "on_session_end",
    "on_session_finalize",
    "on_session_reset",
    "pre_llm_call",
    "pre_tool_call",
    "post_tool_call",
    "pre_approval_request",
    "post_approval_response",
    "subagent_start",
    "subagent_stop",
    "api_request_error",
    "event",
    "tool.execute.before",
    "tool.execute.after",
    "permission.asked",
    "permission.replied",
    "permission.updated",
    "question.asked",
    "question.replied",
    "message.updated",
    "session.created",
    "session.deleted",
    "session.idle",
    "session.error",
    "session.status",
    "session.compacted",
    "todo.updated",
    "file.edited",
    "command.executed",
    "session_start",
    "turn_start",
    "turn_end",
    "message_start",
    "message_update",
    "message_end",
    "tool_execution_start",
    "tool_execution_update",
    "tool_execution_end",
    "session_compact",
    "model_select",
    "agent_settled",
    "SomeFutureHook",
];

/// Strings that break naive code: empty, control and bidi characters, combining marks,
/// astral planes, lone surrogate escapes as text, path and JSON syntax, a huge one.
fn odd_string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "\\PC{0,12}",
        2 => prop::sample::select(HOOKS).prop_map(str::to_owned),
        1 => prop::sample::select(vec![
            "", " ", "\u{0}", "a\u{0}b", "\n", "\r\n", "\u{202e}evil", "e\u{301}\u{301}\u{301}", "🦀🦀",
            "\u{10ffff}", "\\ud800", "\u{feff}", "../../etc/passwd", "{\"a\":1}", "%00", "null", "1e999",
            "2026-11-30T04:04:13.812Z", "not a time", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ])
        .prop_map(str::to_owned),
        1 => (0usize..3).prop_map(|i| ["x", "é", "🦀"][i].repeat(70_000 / (i + 1))),
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        odd_string().prop_map(Value::String),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![4 => prop::sample::select(KEYS).prop_map(str::to_owned), 1 => odd_string()]
}

/// Arbitrary nested JSON, at most four levels deep.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..8).prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A payload: mostly an object (the shape every adapter wants), sometimes anything. Most
/// objects name one of two sessions under every vendor's session key, so that calls share
/// state and the bridge would admit what they map to.
fn payload() -> impl Strategy<Value = Value> {
    let object = || prop::collection::vec((key(), value()), 0..12).prop_map(|kv| kv.into_iter().collect::<Map<_, _>>());
    let named = (object(), prop::sample::select(vec!["s1", "s2"])).prop_map(|(mut o, id)| {
        for k in ["session_id", "conversationId", "taskId", "sessionID"] {
            o.entry(k).or_insert(json!(id));
        }
        o.entry("session").or_insert(json!({"id": id}));
        Value::Object(o)
    });
    prop_oneof![4 => named, 2 => object().prop_map(Value::Object), 1 => value()]
}

/// One change to a captured payload, applied at a random path.
#[derive(Debug, Clone)]
enum Mutation {
    Drop,
    Replace(Value),
    /// The same field as another JSON type (string <-> number, object -> array, ...).
    Retype,
    HugeString,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::Drop),
        3 => value().prop_map(Mutation::Replace),
        3 => Just(Mutation::Retype),
        1 => Just(Mutation::HugeString),
    ]
}

/// Every (parent path, key) of a value's object members, depth first.
fn object_paths(v: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    if let Value::Object(m) = v {
        for (k, child) in m {
            out.push((path.clone(), k.clone()));
            path.push(k.clone());
            object_paths(child, path, out);
            path.pop();
        }
    }
}

fn mutate(mut p: Value, pick: usize, m: &Mutation) -> Value {
    let mut paths = Vec::new();
    object_paths(&p, &mut Vec::new(), &mut paths);
    let Some((parent, key)) = paths.get(pick % paths.len().max(1)).cloned() else { return p };
    let mut node = &mut p;
    for k in &parent {
        node = &mut node[k.as_str()];
    }
    let Value::Object(obj) = node else { return p };
    match m {
        Mutation::Drop => {
            obj.remove(&key);
        }
        Mutation::Replace(v) => {
            obj.insert(key, v.clone());
        }
        Mutation::Retype => {
            let old = obj.get(&key).cloned().unwrap_or(Value::Null);
            let new = match old {
                Value::String(s) => s.parse::<f64>().map(|f| json!(f)).unwrap_or(json!(s.len())),
                Value::Number(n) => Value::String(n.to_string()),
                Value::Bool(b) => Value::String(b.to_string()),
                Value::Object(o) => Value::Array(o.into_iter().map(|(_, v)| v).collect()),
                Value::Array(a) => Value::Object(a.into_iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect()),
                Value::Null => json!({}),
            };
            obj.insert(key, new);
        }
        Mutation::HugeString => {
            obj.insert(key, Value::String("\u{202e}🦀x".repeat(40_000)));
        }
    }
    p
}

/// The bridge's admission gates (bridge/src/hooks.rs `check_hook_name`, `check_sessions`):
/// a batch it refuses (400) is never emitted, so only admitted batches must validate.
fn admitted(hook: &str, drafts: &[EventDraft]) -> bool {
    let token = !hook.is_empty()
        && hook.len() <= 64
        && hook.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'));
    token
        && drafts.iter().all(|d| {
            aep_schemas::event::is_agent_scoped(&d.r#type)
                || d.session
                    .as_deref()
                    .is_some_and(|s| !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control))
        })
}

/// What the sequencer remembers: the next `seq` and the ids minted per correlation key, per session.
#[derive(Default)]
struct Sequencer {
    seq: HashMap<String, u64>,
    keys: HashMap<(String, String), String>,
}

/// Stamps a draft the way the bridge's sequencer does (bridge/src/pipeline.rs `stamp`):
/// id, source, agent, `(epoch, seq)` per session, `cause` from the cause key, the subject
/// of an attention lifecycle event from its resolved cause, the bridge's clock when the
/// draft has no time, the capture level it honored.
fn stamp(agent: &str, d: EventDraft, st: &mut Sequencer, n: u64) -> Event {
    let agent_scoped = aep_schemas::event::is_agent_scoped(&d.r#type);
    let session = if agent_scoped { None } else { d.session };
    let id = d.id.unwrap_or_else(|| aep_schemas::ids::ulid_from_parts(1_800_000_000_000, u128::from(n)));
    let mut cause = d.cause;
    if let Some(s) = &session {
        if let (None, Some(k)) = (&cause, &d.cause_key) {
            cause = st.keys.get(&(s.clone(), k.clone())).cloned();
        }
        if let Some(k) = d.correlation_key {
            st.keys.insert((s.clone(), k), id.clone());
        }
    }
    let subject = match d.subject {
        None if matches!(d.r#type.as_str(), "attention.answered" | "attention.resolved" | "attention.timeout") => {
            cause.clone()
        }
        s => s,
    };
    let source = match &session {
        Some(s) => format!(
            "aep://fuzz/agent/{agent}/session/{}",
            aep_schemas::ids::ulid_from_parts(0, u128::from(s.len() as u64))
        ),
        None => format!("aep://fuzz/agent/{agent}"),
    };
    let seq = session.as_ref().map(|s| {
        let next = st.seq.entry(s.clone()).or_insert(0);
        *next += 1;
        *next - 1
    });
    Event {
        aep: "0.1".into(),
        id,
        r#type: d.r#type,
        subject,
        time: d.time.unwrap_or_else(|| "2026-12-02T00:00:00.000Z".into()),
        source: source.into(),
        agent: agent.to_owned().into(),
        run: if agent_scoped { None } else { d.run },
        step: if agent_scoped { None } else { d.step },
        seq,
        epoch: session.as_ref().map(|_| 0),
        session,
        cause,
        traceparent: d.traceparent,
        severity: d.severity,
        capture: Some(d.capture),
        extensions: Default::default(),
        data: Some(Value::Object(d.data)),
    }
}

/// Maps `calls` through `adapter` with one state per session (as the bridge keys them) and
/// checks every admitted batch: each event, serialized and read back, validates.
/// Returns how many events it validated.
fn check_sequence(
    adapter: &dyn HookAdapter,
    calls: &[(Option<&str>, Value)],
    cx: &MapContext,
) -> Result<u64, TestCaseError> {
    let mut states: HashMap<Option<String>, SessionState> = HashMap::new();
    let mut seq = Sequencer::default();
    let mut n = 0;
    for (event, p) in calls {
        let call = HookCall { event: *event, payload: p };
        let session = adapter.session_id(&call);
        let state = states.entry(session.clone()).or_default();
        let Ok(drafts) = adapter.map(&call, state, cx) else { continue };
        let Ok(hook) = adapter.hook_name(&call) else { continue };
        if !admitted(&hook, &drafts) {
            continue;
        }
        for d in drafts {
            n += 1;
            let ty = d.r#type.clone();
            let ev = stamp(adapter.vendor(), d, &mut seq, n);
            let wire = serde_json::to_value(&ev).map_err(|e| TestCaseError::fail(e.to_string()))?;
            if let Err(v) = aep_schemas::validate::validate_owned(wire.clone()) {
                let short = |s: String| s.chars().take(400).collect::<String>();
                return Err(TestCaseError::fail(format!(
                    "{}: {hook} -> {ty} is invalid: {}\nevent: {}",
                    adapter.vendor(),
                    short(v.to_string()),
                    short(wire.to_string())
                )));
            }
        }
        // Close idle sessions too: what the bridge emits for silence must be valid as well.
        if let Some(s) = session.filter(|_| n % 3 == 0) {
            let state = states.entry(Some(s.clone())).or_default();
            for d in adapter.close_idle(&s, state, cx) {
                n += 1;
                let wire = serde_json::to_value(stamp(adapter.vendor(), d, &mut seq, n)).unwrap();
                let shown: String = wire.to_string().chars().take(400).collect();
                prop_assert!(aep_schemas::validate::validate_owned(wire).is_ok(), "idle close: {shown}");
            }
        }
    }
    Ok(n)
}

/// The three postures the adapters are pinned at: default, everything at metadata, full.
fn contexts() -> [MapContext; 3] {
    let at = |c: Capture| MapContext { capture: c, attention_capture: c, ..MapContext::default() };
    [MapContext::default(), at(Capture::Metadata), at(Capture::Full)]
}

/// A runner of `cases` cases (`AEP_FUZZ_SCALE` multiplies them for a longer local run).
fn runner(cases: u32) -> TestRunner {
    let scale = std::env::var("AEP_FUZZ_SCALE").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(1).max(1);
    let config = Config { cases: cases.saturating_mul(scale), failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// Random call sequences (hook named by the URL or left to the payload) through every
/// vendor's adapter at every posture.
#[test]
fn random_json_never_panics_and_every_admitted_event_validates() {
    let adapters = aep_adapters::vendors::all();
    let n = adapters.len();
    let call = (prop::option::weighted(0.8, prop::sample::select(HOOKS)), payload());
    let strategy = (0..n, 0usize..3, prop::collection::vec(call, 1..8));
    let validated = AtomicU64::new(0);
    runner(1500)
        .run(&strategy, |(a, posture, calls)| {
            let n = check_sequence(adapters[a].as_ref(), &calls, &contexts()[posture])?;
            validated.fetch_add(n, Ordering::Relaxed);
            Ok(())
        })
        .unwrap();
    // Not vacuous: random input reaches the mappings and is admitted often.
    let validated = validated.into_inner();
    assert!(validated > 1500, "only {validated} events validated");
}

/// A captured session: its vendor's adapter and its `(hook, payload)` records.
type Session = (Box<dyn HookAdapter>, Vec<(String, Value)>);

/// The captured sessions replayed with up to three fields of each of a few payloads dropped,
/// replaced, retyped or made huge, through the vendor that produced them.
#[test]
fn mutated_real_payloads_never_panic_and_every_admitted_event_validates() {
    let sessions: Vec<Session> = CAPTURES
        .iter()
        .map(|(vendor, jsonl)| {
            let records = jsonl
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| {
                    let r: Value = serde_json::from_str(l).unwrap();
                    (r["hook"].as_str().unwrap().to_owned(), r["payload"].clone())
                })
                .collect();
            (aep_adapters::vendors::by_vendor(vendor).unwrap(), records)
        })
        .collect();
    let edits = prop::collection::vec((any::<usize>(), any::<usize>(), mutation()), 1..6);
    let strategy = (0..sessions.len(), 0usize..3, edits, any::<bool>());
    runner(400)
        .run(&strategy, |(s, posture, edits, by_url)| {
            let (adapter, records) = &sessions[s];
            let mut payloads: Vec<Value> = records.iter().map(|(_, p)| p.clone()).collect();
            for (which, pick, m) in &edits {
                let i = which % payloads.len();
                payloads[i] = mutate(payloads[i].take(), *pick, m);
            }
            let calls: Vec<(Option<&str>, Value)> =
                records.iter().zip(payloads).map(|((h, _), p)| (by_url.then_some(h.as_str()), p)).collect();
            check_sequence(adapter.as_ref(), &calls, &contexts()[posture]).map(|_| ())
        })
        .unwrap();
}

/// The strategies produce what they claim (the fuzz is not vacuous): objects keyed by the
/// adapters' own keys, and mutations that change the payload.
#[test]
fn the_generators_reach_the_adapters_keys_and_mutate() {
    let mut r = runner(1);
    let mut keyed = 0;
    for _ in 0..200 {
        let v = payload().new_tree(&mut r).unwrap().current();
        if v.as_object().is_some_and(|o| o.keys().any(|k| KEYS.contains(&k.as_str()))) {
            keyed += 1;
        }
    }
    assert!(keyed > 100, "only {keyed} of 200 payloads use the adapters' keys");
    let p = json!({"a": {"b": 1}, "c": "x"});
    assert_eq!(mutate(p.clone(), 0, &Mutation::Drop), json!({"c": "x"}));
    assert_eq!(mutate(p.clone(), 1, &Mutation::Retype), json!({"a": {"b": "1"}, "c": "x"}));
    assert_eq!(mutate(p, 2, &Mutation::Replace(json!([]))), json!({"a": {"b": 1}, "c": []}));
}
