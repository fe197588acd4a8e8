//! Qwen Code: every captured real payload maps without error onto the Annex A.4 types or the
//! vendor namespace; the per-model-turn UserPromptSubmit re-fires stay inside one run.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::qwen_code;

use common::{check_postures, core, load, replay, types};

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

#[test]
fn every_captured_payload_maps() {
    check_postures(qwen_code::adapter().as_ref(), "qwen-code", CAPTURE, &core(MORE_CORE));
}

#[test]
fn model_turn_refires_stay_in_the_run() {
    let drafts = replay(qwen_code::adapter().as_ref(), &load(CAPTURE), &MapContext::default());
    assert_eq!(drafts.iter().filter(|d| d.r#type == "run.started").count(), 1);
    assert_eq!(drafts.iter().filter(|d| d.r#type == "x.qwen-code.run.model_turn").count(), 4);
    assert!(!types(&drafts).contains(&"run.cancelled"));
    assert!(drafts.iter().skip(1).all(|d| d.run.as_deref() == Some("r1")));
    assert_eq!(drafts.last().map(|d| d.r#type.as_str()), Some("run.finished"));
}
