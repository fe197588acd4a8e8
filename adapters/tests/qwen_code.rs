//! Qwen Code: every captured real payload maps without error onto the Annex A.4 types or the
//! vendor namespace; the per-model-turn UserPromptSubmit re-fires stay inside one run.

mod common;

use aep_adapters::vendors::qwen_code;
use aep_adapters::{HookCall, MapContext, SessionState};

use common::{assert_causal, check_postures, core, load, replay, types};
use serde_json::json;

/// The core types beyond `common::LIFECYCLE` this vendor maps onto.
const MORE_CORE: &[&str] = &[
    "run.failed",
    "tool.failed",
    "attention.requested",
    "delegation.subagent.started",
    "delegation.subagent.stopped",
    "progress.status",
    "progress.task.planned",
    "progress.task.completed",
];

const CAPTURE: &str = include_str!("data/qwen-code/q01_tools_yolo_http.jsonl");
/// Qwen Code 0.24.4 `qwen -p` (yolo) against the e2e mock: a shell call, a read, a shell call
/// exiting 2; every hook it fired, verbatim (paths moved).
const CAPTURE_0_24: &str = include_str!("data/qwen-code/q02_0.24.4_tools_yolo.jsonl");

#[test]
fn every_captured_payload_maps() {
    check_postures(qwen_code::adapter().as_ref(), "qwen-code", CAPTURE, &core(MORE_CORE));
    check_postures(qwen_code::adapter().as_ref(), "qwen-code", CAPTURE_0_24, &core(MORE_CORE));
}

/// Qwen Code 0.24 fires `SessionStart` in `-p` mode too (0.15 did not): the session opens
/// with its trigger and model, one run holds the three calls (the model-turn re-fires inside
/// it), the calls pair by `tool_use_id`, and the shell exiting 2 is the `PostToolUseFailure`.
#[test]
fn a_0_24_headless_session_reads_as_one_run_of_paired_tools() {
    let ds = replay(qwen_code::adapter().as_ref(), &load(CAPTURE_0_24), &MapContext::default());
    let core: Vec<&str> = types(&ds).into_iter().filter(|t| !t.starts_with("x.")).collect();
    assert_eq!(
        core,
        [
            "session.started",
            "progress.status",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "run.finished"
        ]
    );
    assert_causal(&ds);
    assert_eq!(
        (ds[0].data["trigger"].as_str(), ds[0].data["gen_ai.request.model"].as_str()),
        (Some("startup"), Some("qwen3-coder-plus"))
    );
    let calls: Vec<_> =
        ds.iter().filter(|d| d.r#type.starts_with("tool.")).map(|d| d.data["tool"]["call_id"].clone()).collect();
    assert!(calls.iter().all(|c| c.as_str().is_some_and(|c| c.starts_with("toolu_"))), "{calls:?}");
    assert_eq!((&calls[0], &calls[2], &calls[4]), (&calls[1], &calls[3], &calls[5]));
    assert_eq!(ds.iter().filter(|d| d.r#type == "x.qwen-code.run.model_turn").count(), 3);
    let last = ds.iter().rfind(|d| d.r#type == "run.finished").unwrap();
    assert_eq!(last.data["gen_ai.usage.input_tokens"], 100);
}

#[test]
fn model_turn_refires_stay_in_the_run() {
    let drafts = replay(qwen_code::adapter().as_ref(), &load(CAPTURE), &MapContext::default());
    assert_eq!(drafts.iter().filter(|d| d.r#type == "run.started").count(), 1);
    assert_eq!(drafts.iter().filter(|d| d.r#type == "x.qwen-code.run.model_turn").count(), 4);
    assert!(!types(&drafts).contains(&"run.cancelled"));
    // The synthesized start and the auth notification precede the run.
    assert!(drafts.iter().skip(2).all(|d| d.run.as_deref() == Some("r1")));
    assert_eq!(drafts.last().map(|d| d.r#type.as_str()), Some("run.finished"));
}

/// Headless Qwen (`qwen -p`) fires no SessionStart: the captured log starts at the auth
/// notification. The session starts on first sight (as Annex A.11 does for Antigravity),
/// once, with nothing the vendor did not say (no trigger, no model).
#[test]
fn a_headless_session_starts_on_first_sight_once() {
    let records = load(CAPTURE);
    assert_eq!(records[0].0, "Notification", "the capture is headless: no SessionStart");
    let drafts = replay(qwen_code::adapter().as_ref(), &records, &MapContext::default());
    assert_eq!(types(&drafts)[..2], ["session.started", "progress.status"]);
    let start = &drafts[0];
    assert_eq!(start.data["client"]["name"], "qwen-code");
    assert!(start.data.get("trigger").is_none() && start.data.get("gen_ai.request.model").is_none());
    assert_eq!(start.session.as_deref(), records[0].1["session_id"].as_str());
    assert_eq!(start.time.as_deref(), records[0].1["timestamp"].as_str());
    assert_eq!(start.run, None);
    assert_eq!(types(&drafts).iter().filter(|t| **t == "session.started").count(), 1);
}

/// A session that announces itself (interactive mode) keeps its one real start, and only a
/// session the vendor never started is one it will never end: only that one closes when idle.
#[test]
fn only_a_headless_session_closes_when_idle_and_once() {
    let a = qwen_code::adapter();
    let cx = MapContext::default();
    let mut headless = SessionState::default();
    let records = load(CAPTURE);
    for (hook, p) in &records {
        a.map(&HookCall { event: Some(hook), payload: p }, &mut headless, &cx).unwrap();
    }
    let session = records[0].1["session_id"].as_str().unwrap();
    let end = a.close_idle(session, &mut headless, &cx);
    assert_eq!(types(&end), ["session.ended"]);
    assert_eq!(end[0].data["reason"], "timeout", "an inferred end is a timeout, never normal");
    assert_eq!(end[0].data["runs"], 1);
    assert_eq!(end[0].session.as_deref(), Some(session));
    assert!(a.close_idle(session, &mut headless, &cx).is_empty(), "one end per session");

    let mut interactive = SessionState::default();
    let mut map = |p: serde_json::Value| a.map(&HookCall { event: None, payload: &p }, &mut interactive, &cx).unwrap();
    let start = map(json!({"hook_event_name": "SessionStart", "session_id": "i", "source": "startup"}));
    assert_eq!(types(&start), ["session.started"]);
    assert_eq!(start[0].data["trigger"], "startup");
    assert_eq!(types(&map(json!({"hook_event_name": "Notification", "session_id": "i"}))), ["progress.status"]);
    assert!(a.close_idle("i", &mut interactive, &cx).is_empty(), "the vendor ends it");

    // A headless session the vendor did end is not ended again.
    let mut ended = SessionState::default();
    for hook in ["UserPromptSubmit", "SessionEnd"] {
        let p = json!({"hook_event_name": hook, "session_id": "e", "prompt": "go"});
        a.map(&HookCall { event: None, payload: &p }, &mut ended, &cx).unwrap();
    }
    assert!(a.close_idle("e", &mut ended, &cx).is_empty());
}
