use aep_schemas::Capture;
use serde_json::{Value, json};

use super::*;
use crate::{EventDraft, HookCall, MapContext, SessionState};

fn run(p: &Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    adapter().map(&HookCall { event: None, payload: p }, st, cx).expect("maps")
}

#[test]
fn carries_the_opencode_table_on_its_own_identity() {
    let a = adapter();
    assert_eq!(a.vendor(), "kilocode");
    let p = json!({"kind": "bus", "event": {"type": "session.created", "properties": {"info": {"id": "k1", "version": "9.9.9"}}}});
    let d = &run(&p, &mut SessionState::default(), &MapContext::default())[0];
    assert_eq!(d.data["client"], json!({"name": "kilocode", "version": "9.9.9"}));
    assert_eq!(d.session.as_deref(), Some("k1"));
    let e = json!({"kind": "bus", "event": {"type": "vcs.branch.updated", "properties": {"branch": "main"}}});
    assert_eq!(
        run(&e, &mut SessionState::default(), &MapContext::default())[0].r#type,
        "x.kilocode.vcs.branch.updated"
    );
}

#[test]
fn bus_permission_ask_offers_the_reply_enum() {
    let p = json!({"kind": "bus", "event": {"type": "permission.asked", "properties": {"id": "per_9", "type": "edit", "title": "edit main.rs", "sessionID": "k1"}}});
    let d = &run(&p, &mut SessionState::default(), &MapContext::default())[0];
    assert_eq!(d.r#type, "attention.requested");
    let ids: Vec<&str> = d.data["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["once", "always", "reject"]);
    assert_eq!(d.subject.as_deref(), Some("edit"));
}

#[test]
fn question_form_labels_degrade_to_indexes_at_metadata() {
    let p = json!({"kind": "bus", "event": {"type": "question.asked", "properties": {"id": "q_1", "sessionID": "k1",
        "questions": [{"question": "Pick a color", "options": [{"label": "red"}, {"label": "blue"}], "custom": false, "multiple": true},
                      {"question": "Why?"}]}}});
    let red = run(&p, &mut SessionState::default(), &MapContext::default());
    let f = &red[0].data["fields"];
    assert_eq!(red[0].data["prompt"], json!("kilocode asks 2 questions"));
    assert_eq!(f[0]["label"], json!("Pick a color"));
    assert_eq!(f[0]["multi"], json!(true));
    assert!(f[0].get("other").is_none());
    assert_eq!(f[0]["choices"][1], json!({"id": "2", "label": "blue"}));
    assert_eq!(f[1]["type"], json!("string"));
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let m = run(&p, &mut SessionState::default(), &meta);
    assert_eq!(m[0].data["fields"][0]["label"], json!("1"));
    assert_eq!(m[0].data["fields"][0]["choices"][1]["label"], json!("2"));
    let replied = json!({"kind": "bus", "event": {"type": "question.replied", "properties": {"sessionID": "k1", "requestID": "q_1"}}});
    let r = run(&replied, &mut SessionState::default(), &MapContext::default());
    assert_eq!((r[0].r#type.as_str(), r[0].subject.as_deref()), ("attention.resolved", Some("q_1")));
}
