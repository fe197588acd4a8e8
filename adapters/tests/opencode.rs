//! OpenCode: a whole session through the plugin moments maps onto the Annex A.7 types,
//! with synthesized runs, callID pairing, the permission card, and the todo diff; no
//! content above the ceiling.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::opencode;
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, present, types};

const SESSION: &str = r#"
{"payload": {"kind": "bus", "event": {"type": "server.connected", "properties": {}}}}
{"payload": {"kind": "bus", "event": {"type": "session.created", "properties": {"info": {"id": "ses_x", "directory": "/home/u/zebra-canary-4471", "title": "zebra-canary-4471", "version": "1.20.0"}}}}}
{"payload": {"kind": "bus", "event": {"type": "message.updated", "properties": {"info": {"id": "m1", "sessionID": "ses_x", "role": "user"}}}}}
{"payload": {"kind": "bus", "event": {"type": "todo.updated", "properties": {"sessionID": "ses_x", "todos": [{"id": "t1", "content": "zebra-canary-4471", "status": "in_progress"}]}}}}
{"hook": "tool.execute.before", "payload": {"input": {"tool": "bash", "sessionID": "ses_x", "callID": "c1"}, "output": {"args": {"command": "echo zebra-canary-4471"}}}}
{"hook": "permission.ask", "payload": {"permission": {"id": "p1", "type": "bash", "title": "echo zebra-canary-4471", "sessionID": "ses_x", "callID": "c1"}}}
{"payload": {"kind": "bus", "event": {"type": "permission.updated", "properties": {"id": "p1", "type": "bash", "sessionID": "ses_x"}}}}
{"payload": {"kind": "bus", "event": {"type": "permission.replied", "properties": {"sessionID": "ses_x", "permissionID": "p1", "response": "once"}}}}
{"hook": "tool.execute.after", "payload": {"input": {"tool": "bash", "sessionID": "ses_x", "callID": "c1"}, "output": {"title": "echo", "output": "zebra-canary-4471", "metadata": {}}}}
{"payload": {"kind": "bus", "event": {"type": "message.updated", "properties": {"info": {"id": "m2", "sessionID": "ses_x", "role": "assistant", "tokens": {"input": 10, "output": 2}}}}}}
{"payload": {"kind": "bus", "event": {"type": "todo.updated", "properties": {"sessionID": "ses_x", "todos": [{"id": "t1", "content": "zebra-canary-4471", "status": "completed"}]}}}}
{"payload": {"kind": "bus", "event": {"type": "session.idle", "properties": {"sessionID": "ses_x"}}}}
{"payload": {"kind": "bus", "event": {"type": "session.compacted", "properties": {"sessionID": "ses_x"}}}}
{"payload": {"kind": "bus", "event": {"type": "session.deleted", "properties": {"info": {"id": "ses_x"}}}}}
"#;

#[test]
fn whole_session_at_the_default_posture() {
    let a = opencode::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "x.opencode.server.connected",
            "session.started",
            "run.started",
            "progress.task.planned",
            "tool.requested",
            "attention.requested",
            "attention.resolved",
            "tool.completed",
            "x.opencode.message.updated",
            "progress.task.completed",
            "run.finished",
            "session.compacted",
            "session.ended",
        ]
    );
    assert_causal(&ds);
    assert_eq!(ds[0].session, None);
    assert!(ds[1..].iter().all(|d| d.session.as_deref() == Some("ses_x")));
    assert!(ds[3..11].iter().all(|d| d.run.as_deref() == Some("r1")));
    // the permission card is attention: its ceiling is `redacted`, so the title rides
    // through the pipeline; nothing else carries the content
    let (attention, rest): (Vec<_>, Vec<_>) = ds.into_iter().partition(|d| d.r#type == "attention.requested");
    assert_absent(&rest, MARKER);
    assert_eq!(attention[0].capture, Capture::Redacted);
    assert!(present(&attention, MARKER));
}

#[test]
fn attention_at_metadata_synthesizes_and_content_at_redacted_is_redacted() {
    let a = opencode::adapter();
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    assert_absent(&drive(a.as_ref(), SESSION, &meta), MARKER);
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let ds = drive(a.as_ref(), SESSION, &red);
    assert!(present(&ds, MARKER));
    assert_absent(&ds, "/home/u/");
}

#[test]
fn malformed_payloads_never_panic() {
    assert_no_panics(
        opencode::adapter().as_ref(),
        &["bus", "tool.before", "tool.after", "permission.ask", "event", "x"],
    );
}
