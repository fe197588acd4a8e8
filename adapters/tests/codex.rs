//! Codex: every captured real payload (exec mode) maps without error onto the Annex A.2
//! types or the vendor namespace, with turns as runs and tools paired by call id.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::codex;

use common::{check_postures, core, load, replay, types};

/// The core types beyond `common::LIFECYCLE` this vendor maps onto.
const MORE_CORE: &[&str] = &["attention.requested", "delegation.subagent.started", "delegation.subagent.stopped"];

const CAPTURES: &[&str] = &[
    include_str!("data/codex/c01_exec_json.jsonl"),
    include_str!("data/codex/c03_otlp_binary.jsonl"),
    include_str!("data/codex/c10_auto_compact.jsonl"),
    include_str!("data/codex/c09_subagent.jsonl"),
    include_str!("data/codex/c11_0.171.0_subagent_tools.jsonl"),
];

#[test]
fn every_captured_payload_maps() {
    for capture in CAPTURES {
        let drafts = check_postures(codex::adapter().as_ref(), "codex", capture, &core(MORE_CORE));
        // No tool.failed from the hook surface, even for the failing shell call.
        assert!(!drafts.iter().any(|d| d.r#type == "tool.failed"));
    }
}

#[test]
fn exec_session_reads_as_expected() {
    let drafts = replay(codex::adapter().as_ref(), &load(CAPTURES[0]), &MapContext::default());
    assert_eq!(
        types(&drafts),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "session.ended",
            "x.codex.session.notify",
        ]
    );
    let turn = "01a22a9f-e445-70e0-99b4-84a7ed83220d";
    assert!(drafts[1..9].iter().all(|d| d.run.as_deref() == Some(turn)));
    assert_eq!(drafts[2].data["tool"]["name"], "Bash");
    assert_eq!(drafts[10].session.as_deref(), Some("01a22a9f-e3e6-71d0-8872-0556d1423eab"));
}

#[test]
fn compaction_once_and_the_compact_restart_is_no_new_session() {
    let drafts = replay(codex::adapter().as_ref(), &load(CAPTURES[2]), &MapContext::default());
    assert_eq!(drafts.iter().filter(|d| d.r#type == "session.compacted").count(), 1);
    assert_eq!(drafts.iter().filter(|d| d.r#type == "session.started").count(), 1);
    assert!(drafts.iter().any(|d| d.r#type == "x.codex.session.session_start"));
}

/// The real 0.171 subagent session (`spawn_agent`, then `wait_agent`): the subagent's hooks
/// ride the parent's thread with their own `turn_id` and an `agent_id`, it ends with
/// `SubagentStop` (no `Stop`), and the parent's `PostToolUse` and `Stop` arrive after it.
#[test]
fn a_subagent_turn_is_its_own_run_and_never_ends_the_parent() {
    let drafts = replay(codex::adapter().as_ref(), &load(CAPTURES[3]), &MapContext::default());
    let parent = "01a241e9-1c88-79c1-8afe-8178fcb83407";
    let child = "01a241e9-222f-7853-a3f0-a19f7de8cefb";
    let main: Vec<_> =
        drafts.iter().filter(|d| d.session.as_deref() == Some("01a241e9-1c1f-7f10-bf0c-74075bc81a17")).collect();
    let seen: Vec<(&str, Option<&str>)> =
        main.iter().filter(|d| !d.r#type.starts_with("x.")).map(|d| (d.r#type.as_str(), d.run.as_deref())).collect();
    assert_eq!(
        seen,
        [
            ("session.started", None),
            ("run.started", Some(parent)),
            ("tool.requested", Some(parent)),
            ("tool.completed", Some(parent)),
            ("delegation.subagent.started", Some(parent)),
            ("run.started", Some(child)),
            ("tool.requested", Some(parent)),
            ("run.finished", Some(child)),
            ("delegation.subagent.stopped", Some(parent)),
            ("tool.completed", Some(parent)),
            ("run.finished", Some(parent)),
            ("session.ended", None),
        ]
    );
    assert!(!drafts.iter().any(|d| d.r#type == "run.cancelled"), "no run is cancelled");
    let child_start = main.iter().find(|d| d.r#type == "run.started" && d.run.as_deref() == Some(child)).unwrap();
    assert_eq!(child_start.data["trigger"], "agent");
    let started = main.iter().find(|d| d.r#type == "delegation.subagent.started").unwrap();
    assert_eq!(child_start.cause_key, started.correlation_key, "the child run is caused by its delegation");
    common::assert_causal(&drafts);
}

/// The real 0.171.0 subagent that runs a tool of its own (recorded from the e2e
/// `codex-subagent` run): its `PreToolUse` and `PostToolUse` carry the child's `agent_id` and
/// `agent_type` beside the parent's `session_id`. The pair rides the child's turn, never the
/// parent's, and both fields are inside the adapter's vocabulary (no drift counted).
#[test]
fn a_subagents_own_tool_call_rides_its_turn_and_is_no_drift() {
    let records = load(CAPTURES[4]);
    let child_agent = "01a25249-9dc2-73d1-8db3-bf2da6e27c52";
    let (parent, child) = ("01a25249-9c68-7ba3-9c5c-bcf80991424f", "01a25249-9dce-7bf1-8463-db73a0ffd2da");
    // The recording is what this test is about: the subagent's tool hooks name it.
    let sub_tools: Vec<_> = records
        .iter()
        .filter(|(h, p)| (h == "PreToolUse" || h == "PostToolUse") && p["agent_id"] == child_agent)
        .collect();
    assert_eq!(sub_tools.len(), 2, "the subagent's PreToolUse and PostToolUse");
    assert!(sub_tools.iter().all(|(_, p)| p["agent_type"] == "default" && p["turn_id"] == child));

    let vocab = codex::adapter().vocabulary().expect("codex has a vocabulary");
    for (hook, payload) in &records {
        let drift = aep_adapters::drift::check(vocab, hook, payload);
        assert!(drift.is_empty(), "{hook}: {:?}", drift.iter().map(|d| &d.name).collect::<Vec<_>>());
    }

    let drafts = replay(codex::adapter().as_ref(), &records, &MapContext::default());
    let tools: Vec<(&str, &str, Option<&str>)> = drafts
        .iter()
        .filter(|d| d.r#type.starts_with("tool."))
        .map(|d| (d.r#type.as_str(), d.data["tool"]["name"].as_str().unwrap(), d.run.as_deref()))
        .collect();
    assert_eq!(
        tools,
        [
            ("tool.requested", "spawn_agent", Some(parent)),
            ("tool.completed", "spawn_agent", Some(parent)),
            ("tool.requested", "multi_agent_v1wait_agent", Some(parent)),
            ("tool.requested", "Bash", Some(child)),
            ("tool.completed", "Bash", Some(child)),
            ("tool.completed", "multi_agent_v1wait_agent", Some(parent)),
        ]
    );
    let started = drafts.iter().find(|d| d.r#type == "run.started" && d.run.as_deref() == Some(child)).unwrap();
    assert_eq!(started.data["trigger"], "agent");
    common::assert_causal(&drafts);
}

#[test]
fn neutral_reply_is_empty() {
    assert_eq!(codex::adapter().neutral_reply("PermissionRequest"), aep_adapters::NeutralReply::Empty);
}
