//! Drift at run time: a recorded GitHub Copilot CLI session (1.0.102, its hooks as the CLI
//! delivered them) replayed into a real `serve`, with one invented hook event and one invented
//! field on a known event, as a newer release might send them. The bridge counts both per
//! vendor, version and kind at `/metrics`, and the session keeps one `x.copilot-cli.session.drift`
//! record per new name (the second call carrying the same field adds a count, not a record);
//! the rest of the session maps as before.

use aep_testkit as common;

use common::*;
use serde_json::{Value, json};

const RECORDED: &str = include_str!("data/copilot-cli-1.0.102-hooks.jsonl");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invented_event_and_field_are_counted_and_recorded_once() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let mut records: Vec<(String, Value)> = RECORDED
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (r["hook"].as_str().unwrap().to_owned(), r["payload"].clone())
        })
        .collect();
    let sid = records[0].1["session_id"].as_str().unwrap().to_owned();
    // A field no recorded PreToolUse has, on both shell calls; an event Copilot never sent.
    for (hook, p) in records.iter_mut().filter(|(h, _)| h == "PreToolUse").take(2) {
        p["sandbox_profile"] = json!("strict");
        assert_eq!(hook, "PreToolUse");
    }
    let mut invented = records[1].1.clone();
    invented["hook_event_name"] = json!("PlanApproved");
    records.insert(2, ("PlanApproved".to_owned(), invented));
    for (hook, p) in &records {
        let (status, body) = post(format!("{}/hooks/copilot-cli/{hook}", bridge.url()), p.to_string(), vec![]).await;
        assert_eq!(status, 200, "{hook}: {body}");
    }
    let log = dir.path().join(format!("logs/copilot-cli/{sid}.jsonl"));
    let lines = bridge.wait_lines(&log, 15).await;
    let events: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let drift: Vec<&Value> = events.iter().filter(|e| e["type"] == "x.copilot-cli.session.drift").collect();
    assert_eq!(drift.len(), 2, "one record per new name: {drift:?}");
    assert_eq!(drift[0]["data"], json!({"kind": "hook_event", "hook": "PlanApproved", "names": ["PlanApproved"]}));
    assert_eq!(
        drift[1]["data"],
        json!({"kind": "hook_field", "hook": "PreToolUse", "names": ["PreToolUse.sandbox_profile"]})
    );
    assert_eq!(drift[0]["severity"], "debug");
    // The invented event still maps through the fallback; the known ones as before.
    assert!(events.iter().any(|e| e["type"] == "x.copilot-cli.session.plan_approved"));
    let core: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).filter(|t| !t.starts_with("x.")).collect();
    assert_eq!(core.first(), Some(&"session.started"));
    assert_eq!(core.last(), Some(&"session.ended"));
    assert_eq!(core.iter().filter(|t| **t == "tool.requested").count(), 4);
    // Counted per vendor, version and kind: the field twice (two calls), the event once.
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    assert!(
        metrics.contains(r#"aep_bridge_drift_total{kind="hook_field",vendor="copilot-cli",version="unknown"} 2"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"aep_bridge_drift_total{kind="hook_event",vendor="copilot-cli",version="unknown"} 1"#));
    // The recorded session alone drifts nowhere.
    assert!(!metrics.contains(r#"kind="hook_field",vendor="copilot-cli",version="unknown"} 3"#));
    bridge.shutdown().await;
}
