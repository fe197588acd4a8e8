//! Gemini CLI: every captured real payload maps without error onto the Annex A.3 types or
//! the vendor namespace; never attention.* (observe-only).

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::gemini_cli;

use common::{check_postures, core, load, replay};

/// The core types beyond `common::LIFECYCLE` this vendor maps onto.
const MORE_CORE: &[&str] = &["tool.failed", "progress.status"];

const CAPTURE: &str = include_str!("data/gemini-cli/g01_tools_yolo_http.jsonl");

#[test]
fn every_captured_payload_maps() {
    check_postures(gemini_cli::adapter().as_ref(), "gemini-cli", CAPTURE, &core(MORE_CORE));
}

#[test]
fn captured_run_pairs_every_tool_and_stays_in_one_run() {
    let drafts = replay(gemini_cli::adapter().as_ref(), &load(CAPTURE), &MapContext::default());
    let requested: Vec<_> = drafts.iter().filter(|d| d.r#type == "tool.requested").collect();
    let completed: Vec<_> = drafts.iter().filter(|d| d.r#type == "tool.completed").collect();
    assert_eq!(requested.len(), 4);
    assert_eq!(completed.len(), 4);
    for (r, c) in requested.iter().zip(&completed) {
        assert_eq!(r.correlation_key, c.cause_key);
        assert_eq!(r.run.as_deref(), Some("r1"));
        assert_eq!(c.run.as_deref(), Some("r1"));
    }
    let model = drafts.iter().find(|d| d.r#type == "x.gemini-cli.session.before_model").unwrap();
    assert_eq!(model.data["model"], "gemini-2.5-pro");
    assert_eq!(model.data.len(), 1, "only the model id rides");
    assert!(drafts.iter().all(|d| d.time.is_some()), "the vendor timestamp is the event time");
}
