//! Factory Droid: what the real `droid exec` 0.225.2 (offline against the e2e mock model)
//! delivered to a hook command maps onto one session and one synthesized run (exec fires no
//! prompt hook), the calls Droid reports no outcome for (a failing one) ending tool.failed.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::droid;
use serde_json::json;

use common::{assert_causal, check_postures, core, load, replay, types};

/// `Execute` ok, `Execute` exiting 2, `Read` ok, `Read` of a missing file, verbatim (paths moved).
const REAL_CLI: &str = include_str!("data/droid/cli_0.225.2_exec.jsonl");

#[test]
fn every_recorded_payload_maps() {
    check_postures(droid::adapter().as_ref(), "droid", REAL_CLI, &core(&["tool.failed"]));
}

#[test]
fn the_recorded_exec_is_one_run_and_every_call_ends_once() {
    let ds = replay(droid::adapter().as_ref(), &load(REAL_CLI), &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "tool.failed",
            "run.finished",
            "session.ended"
        ]
    );
    assert_causal(&ds);
    assert_eq!(ds[3].data["exit_code"], json!(0));
    let failed: Vec<_> = ds.iter().filter(|d| d.r#type == "tool.failed").map(|d| &d.data["tool"]["name"]).collect();
    assert_eq!(failed, [&json!("Execute"), &json!("Read")], "oldest first");
    assert!(
        ds.iter()
            .filter(|d| d.r#type != "session.started" && d.r#type != "session.ended")
            .all(|d| d.run.as_deref() == Some("r1"))
    );
}
