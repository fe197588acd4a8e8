//! History import on real recordings: the Claude Code transcript (with a subagent) and the
//! Codex rollouts (plain, with a subagent, with a compaction) that the e2e suite recorded,
//! each beside the JSONL log the bridge wrote from the live hooks of the same run
//! (`data/claude-code/`, `data/codex/`). The imported tool calls must be the live ones (name and call id, in
//! order), runs the live runs, and mapping twice must give the same drafts.

use std::path::{Path, PathBuf};

use aep_adapters::history::{Imported, Transcript};
use aep_adapters::vendors::{claude_code::transcript, codex::rollout};
use aep_adapters::{EventDraft, MapContext};
use serde_json::Value;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/import-data").join(rel)
}

fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn transcript(p: &Path) -> Transcript {
    Transcript { label: p.display().to_string(), text: std::fs::read_to_string(p).unwrap() }
}

const CLAUDE_SESSION: &str = "80825f98-6f6e-42fb-8712-4deb0e618052";

fn claude(cx: &MapContext) -> Imported {
    let dir = data("claude-code/projects/-root--cache-aep-e2e-work-claude-project");
    let main = transcript(&dir.join(format!("{CLAUDE_SESSION}.jsonl")));
    let subs = files_under(&dir.join(CLAUDE_SESSION).join("subagents"), ".jsonl")
        .iter()
        .map(|p| transcript::Subagent {
            transcript: transcript(p),
            meta: std::fs::read_to_string(p.with_extension("meta.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok()),
        })
        .collect::<Vec<_>>();
    transcript::map_session(&main, &subs, cx)
}

fn codex(scenario: &str, cx: &MapContext) -> Imported {
    let files: Vec<Transcript> =
        files_under(&data(&format!("codex/{scenario}/sessions")), ".jsonl").iter().map(|p| transcript(p)).collect();
    rollout::map_rollouts(&files, cx)
}

/// The live log's events, parsed.
fn live(rel: &str) -> Vec<Value> {
    std::fs::read_to_string(data(rel)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `(type, tool name, call id)` of every tool event.
fn tool_calls_live(events: &[Value]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with("tool.")))
        .map(|e| {
            (
                e["type"].as_str().unwrap().to_owned(),
                e["data"]["tool"]["name"].as_str().unwrap().to_owned(),
                e["data"]["tool"]["call_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn tool_calls(drafts: &[EventDraft]) -> Vec<(String, String, String)> {
    drafts
        .iter()
        .filter(|d| d.r#type.starts_with("tool."))
        .map(|d| {
            (
                d.r#type.clone(),
                d.data["tool"]["name"].as_str().unwrap().to_owned(),
                d.data["tool"]["call_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The core (non-`x.`) types of the live log, in order.
fn core_types_live(events: &[Value]) -> Vec<String> {
    events.iter().filter_map(|e| e["type"].as_str()).filter(|t| !t.starts_with("x.")).map(str::to_owned).collect()
}

fn core_types(drafts: &[EventDraft]) -> Vec<String> {
    drafts.iter().map(|d| d.r#type.clone()).filter(|t| !t.starts_with("x.")).collect()
}

fn runs_of(drafts: &[EventDraft]) -> Vec<String> {
    let mut v: Vec<String> = drafts.iter().filter_map(|d| d.run.clone()).collect();
    v.dedup();
    v
}

#[test]
fn claude_code_transcript_replays_the_live_hooks() {
    let cx = MapContext::default();
    let got = claude(&cx);
    assert!(got.issues.is_empty(), "{:?}", got.issues);
    assert_eq!(got.sessions.len(), 1);
    let s = &got.sessions[0];
    assert_eq!(s.session, CLAUDE_SESSION);
    let live = live(&format!("claude-code/live/{CLAUDE_SESSION}.jsonl"));
    // Same tool calls, same outcomes, same order; same lifecycle, same run (the prompt id).
    assert_eq!(tool_calls(&s.drafts), tool_calls_live(&live));
    assert_eq!(core_types(&s.drafts), core_types_live(&live));
    assert_eq!(runs_of(&s.drafts), ["559bd606-0e59-4325-b21f-2f51de060203"]);
    // The transcript's tool input and result are the hook's: the digests agree too.
    let digests = |ds: Vec<Option<String>>| ds.into_iter().flatten().collect::<Vec<_>>();
    assert_eq!(
        digests(
            s.drafts.iter().map(|d| d.data.get("args_digest").and_then(Value::as_str).map(str::to_owned)).collect()
        ),
        digests(live.iter().map(|e| e["data"]["args_digest"].as_str().map(str::to_owned)).collect()),
    );
    // The subagent, by its id, inside the Agent call.
    let sub = s.drafts.iter().find(|d| d.r#type == "delegation.subagent.started").unwrap();
    assert_eq!(sub.subject.as_deref(), Some("a83e86436ff134120"));
    assert_eq!(sub.data["agent_type"], "general-purpose");
    // The turn's usage: the main agent's five API calls at 100 in / 10 out (the subagent's
    // own call is in its tool's result, not in the turn's messages).
    let fin = s.drafts.iter().find(|d| d.r#type == "run.finished").unwrap();
    assert_eq!(fin.data["gen_ai.usage.input_tokens"], 500);
    assert_eq!(fin.data["gen_ai.usage.output_tokens"], 50);
    // Every draft carries its record's time and an id; nothing at metadata leaks the prompt.
    assert!(s.drafts.iter().all(|d| d.time.is_some() && d.id.is_some()));
    assert!(!s.drafts.iter().any(|d| d.data.contains_key("prompt")));
    assert_eq!(s.drafts.first().unwrap().time.as_deref(), Some("2026-12-05T14:54:02.397Z"));
}

#[test]
fn mapping_twice_gives_the_same_ids() {
    let cx = MapContext::default();
    let (a, b) = (claude(&cx), claude(&cx));
    assert_eq!(a.sessions[0].drafts, b.sessions[0].drafts);
    let ids: std::collections::HashSet<_> = a.sessions[0].drafts.iter().map(|d| d.id.clone()).collect();
    assert_eq!(ids.len(), a.sessions[0].drafts.len(), "ids are unique");
    let (a, b) = (codex("codex-subagent", &cx), codex("codex-subagent", &cx));
    assert_eq!(a.sessions[0].drafts, b.sessions[0].drafts);
}

#[test]
fn capture_ceiling_gates_the_replayed_content() {
    let cx = MapContext { capture: aep_schemas::Capture::Full, ..MapContext::default() };
    let s = &claude(&cx).sessions[0];
    let started = s.drafts.iter().find(|d| d.r#type == "run.started").unwrap();
    assert_eq!(started.data["prompt"], "Run the e2e script {{e2e:bash_ok,read_ok,bash_fail,agent}}");
    let req = s.drafts.iter().find(|d| d.r#type == "tool.requested").unwrap();
    assert_eq!(req.data["args"]["command"], "echo e2e-ok");
}

#[test]
fn codex_rollout_replays_the_live_hooks() {
    let cx = MapContext::default();
    let got = codex("codex-user", &cx);
    assert!(got.issues.is_empty(), "{:?}", got.issues);
    let s = &got.sessions[0];
    assert_eq!(s.session, "01a246b3-2ef5-7723-b1b6-7c4a495a05b0");
    let live = live("codex/codex-user/live/01a246b3-2ef5-7723-b1b6-7c4a495a05b0.jsonl");
    let names = |v: Vec<(String, String, String)>| v.into_iter().map(|(_, n, c)| (n, c)).collect::<Vec<_>>();
    assert_eq!(names(tool_calls(&s.drafts)), names(tool_calls_live(&live)));
    // The one difference: the failing `ls` is a tool.failed (the rollout knows, the hook does not).
    let types: Vec<String> = tool_calls(&s.drafts).into_iter().map(|(t, _, _)| t).collect();
    assert_eq!(types, ["tool.requested", "tool.completed", "tool.requested", "tool.failed"]);
    let failed = s.drafts.iter().find(|d| d.r#type == "tool.failed").unwrap();
    assert_eq!(failed.data["exit_code"], 2);
    assert_eq!(failed.cause_key.as_deref(), Some("tool:call_28c6f5cd38d44476"));
    let mut expected = core_types_live(&live);
    assert_eq!(expected[5], "tool.completed");
    expected[5] = "tool.failed".into();
    assert_eq!(core_types(&s.drafts), expected);
    assert_eq!(runs_of(&s.drafts), ["01a246b3-2f0c-7f11-a771-59e9c0458c4d"]);
    let started = &s.drafts[0];
    assert_eq!(started.data["gen_ai.request.model"], "gpt-5-codex");
    let fin = s.drafts.iter().find(|d| d.r#type == "run.finished").unwrap();
    assert_eq!(fin.data["gen_ai.usage.input_tokens"], 300);
}

#[test]
fn codex_subagent_rollout_joins_its_parents_session() {
    let got = codex("codex-subagent", &MapContext::default());
    assert!(got.issues.is_empty(), "{:?}", got.issues);
    assert_eq!(got.sessions.len(), 1, "the child rollout names its parent's session");
    let s = &got.sessions[0];
    let live = live("codex/codex-subagent/live/01a246b3-349c-77e2-87d1-c86a71e5e273.jsonl");
    assert_eq!(tool_calls(&s.drafts), tool_calls_live(&live));
    let child_run = s.drafts.iter().find(|d| d.r#type == "run.started" && d.data["trigger"] == "agent").unwrap();
    assert_eq!(child_run.run.as_deref(), Some("01a246b3-3517-7552-af72-04147f809753"));
    let sub = s.drafts.iter().find(|d| d.r#type == "delegation.subagent.started").unwrap();
    assert_eq!(sub.subject.as_deref(), Some("01a246b3-3505-7dd1-a6bc-521c460a0eec"));
    let mut want = core_types_live(&live);
    let mut got_types = core_types(&s.drafts);
    want.sort();
    got_types.sort();
    assert_eq!(got_types, want, "the same events, the delegation start placed by its own time");
}

#[test]
fn codex_compaction_is_one_session_compacted_inside_the_turn() {
    let got = codex("codex-compact", &MapContext::default());
    let s = &got.sessions[0];
    let live = live("codex/codex-compact/live/01a246b3-3795-7ca2-8ed6-ae8bc7f48c5c.jsonl");
    assert_eq!(core_types(&s.drafts), core_types_live(&live));
    assert_eq!(tool_calls(&s.drafts), tool_calls_live(&live));
}

#[test]
fn malformed_and_truncated_lines_are_reported_and_skipped() {
    let dir = data("claude-code/projects/-root--cache-aep-e2e-work-claude-project");
    let mut main = transcript(&dir.join(format!("{CLAUDE_SESSION}.jsonl")));
    let whole = claude(&MapContext::default()).sessions[0].drafts.len();
    let mut lines: Vec<&str> = main.text.lines().collect();
    lines.insert(3, "{not json");
    // The last line (the `last-prompt` record) cut short, as by a crash mid-write.
    let last = lines.pop().unwrap();
    main.text = format!("{}\n{}", lines.join("\n"), &last[..20]);
    let got = transcript::map_session(&main, &[], &MapContext::default());
    assert_eq!(got.issues.iter().map(|i| i.line).collect::<Vec<_>>(), [4, 16]);
    // Without the subagent file, the delegation pair is gone; everything else is there.
    assert_eq!(got.sessions[0].drafts.len(), whole - 2);
}
