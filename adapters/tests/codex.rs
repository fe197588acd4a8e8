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

#[test]
fn neutral_reply_is_empty() {
    assert_eq!(codex::adapter().neutral_reply("PermissionRequest"), aep_adapters::NeutralReply::Empty);
}
