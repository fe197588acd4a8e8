//! Kilo Code: the `>=7.4.6` bus-ask surface (permission.asked, question.asked) over a
//! whole session, on Kilo's own identity; no content above the ceiling.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::kilocode;
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, types};

const SESSION: &str = r#"
{"payload": {"kind": "bus", "serverUrl": "http://127.0.0.1:4096", "event": {"type": "session.created", "properties": {"info": {"id": "kses", "title": "zebra-canary-4471", "version": "7.4.11"}}}}}
{"payload": {"kind": "bus", "event": {"type": "message.updated", "properties": {"info": {"id": "m1", "sessionID": "kses", "role": "user"}}}}}
{"payload": {"kind": "bus", "event": {"type": "question.asked", "properties": {"id": "que_9", "sessionID": "kses", "questions": [{"question": "zebra-canary-4471?", "header": "Pick", "options": [{"label": "zebra-canary-4471"}, {"label": "no"}]}]}}}}
{"payload": {"kind": "bus", "event": {"type": "question.replied", "properties": {"sessionID": "kses", "requestID": "que_9", "answers": [["no"]]}}}}
{"payload": {"kind": "bus", "event": {"type": "permission.asked", "properties": {"id": "per_1", "type": "edit", "title": "zebra-canary-4471", "sessionID": "kses"}}}}
{"payload": {"kind": "bus", "event": {"type": "permission.replied", "properties": {"sessionID": "kses", "permissionID": "per_1", "response": "reject"}}}}
{"payload": {"kind": "bus", "event": {"type": "session.idle", "properties": {"sessionID": "kses"}}}}
"#;

#[test]
fn bus_asks_round_trip() {
    let a = kilocode::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "attention.requested",
            "attention.resolved",
            "attention.requested",
            "attention.resolved",
            "run.finished"
        ]
    );
    assert_causal(&ds);
    assert_eq!(ds[0].data["client"]["name"], "kilocode");
    assert_eq!(ds[4].data["options"][2]["id"], "reject");
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let ds = drive(a.as_ref(), SESSION, &meta);
    assert_absent(&ds, MARKER);
    assert_eq!(ds[2].data["fields"][0]["choices"][0]["label"], "1");
}

#[test]
fn malformed_payloads_never_panic() {
    assert_no_panics(kilocode::adapter().as_ref(), &["bus", "tool.before", "tool.after", "permission.ask"]);
}
