use serde_json::json;

use super::*;

#[test]
fn kinds_become_two_segment_vendor_types() {
    assert_eq!(kind_type("MessageEvent"), "message.event");
    assert_eq!(kind_type("ACPToolCallEvent"), "acp_tool.call");
    assert_eq!(kind_type("CondensationSummaryEvent"), "condensation.summary");
    assert_eq!(kind_type("PauseEvent"), "pause.event");
    assert_eq!(kind_type("Event"), "event.event");
}

#[test]
fn a_conversation_synthesizes_runs_from_status_and_dedupes_replays() {
    let cx = MapContext::default();
    let mut c = Conversation::new("conv1", Options::default());
    let st = |id: &str, v: &str| json!({"kind": "ConversationStateUpdateEvent", "id": id, "key": "execution_status", "value": v});
    let d = c.map(&st("e1", "running"), &cx);
    assert_eq!(d[0].r#type, "run.started");
    assert_eq!(d[0].run.as_deref(), Some("run:conv1:1"));
    assert_eq!(d[1].r#type, "state.delta");
    assert_eq!(d[1].run.as_deref(), Some("run:conv1:1"));
    assert!(c.map(&st("e1", "running"), &cx).is_empty(), "replayed id");
    let act = json!({"kind": "ActionEvent", "id": "e2", "tool_name": "bash", "tool_call_id": "c1", "action": {"command": "ls"}, "llm_response_id": "r"});
    let d = c.map(&act, &cx);
    assert_eq!(
        (d[0].r#type.as_str(), d[0].run.as_deref(), d[0].step.as_deref()),
        ("tool.requested", Some("run:conv1:1"), Some("r"))
    );
    let d = c.map(&st("e3", "waiting_for_confirmation"), &cx);
    assert_eq!(d[0].r#type, "attention.requested");
    assert!(d[0].data.get("options").is_none() && d[0].data.get("respond_via").is_none());
    let d = c.map(&st("e4", "finished"), &cx);
    let types: Vec<&str> = d.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["attention.resolved", "run.finished", "state.delta"]);
    assert_eq!(d[1].run.as_deref(), Some("run:conv1:1"));
    let d = c.map(&st("e5", "running"), &cx);
    assert_eq!(d[0].run.as_deref(), Some("run:conv1:2"));
}

#[test]
fn full_state_carries_the_status_too() {
    let cx = MapContext::default();
    let mut c = Conversation::new("c", Options::default());
    let d = c.map(
        &json!({"kind": "ConversationStateUpdateEvent", "key": "full_state", "value": {"execution_status": "running"}}),
        &cx,
    );
    assert_eq!(d[0].r#type, "run.started");
    assert_eq!(d[1].r#type, "state.snapshot");
}

#[test]
fn token_events_never_map_and_deltas_need_the_opt_in() {
    let cx = MapContext::default();
    let tok = json!({"kind": "TokenEvent", "prompt_token_ids": [1]});
    assert!(map_event(&tok, Options { deltas: true }, &cx).is_empty());
    let delta = json!({"kind": "StreamingDeltaEvent", "content": "x"});
    assert!(map_event(&delta, Options::default(), &cx).is_empty());
    assert_eq!(map_event(&delta, Options { deltas: true }, &cx)[0].r#type, "x.openhands.streaming.delta");
    assert!(map_event(&json!({"no": "kind"}), Options::default(), &cx).is_empty());
}

#[test]
fn the_auth_frame_is_typed_as_the_server_expects() {
    assert_eq!(auth_frame("k"), json!({"type": "auth", "session_api_key": "k"}));
    let mut c = Conversation::new("c", Options::default());
    assert!(!c.seen("e1") && c.status().is_none());
    c.map(
        &json!({"kind": "ConversationStateUpdateEvent", "id": "e1", "key": "execution_status", "value": "idle"}),
        &MapContext::default(),
    );
    assert!(c.seen("e1") && c.status() == Some("idle") && c.id() == "c");
}

#[test]
fn the_opening_state_is_a_snapshot_not_a_transition() {
    let cx = MapContext::default();
    let mut c = Conversation::new("c", Options::default());
    let push = json!({"kind": "ConversationStateUpdateEvent", "id": "p1", "key": "full_state",
        "value": {"execution_status": "waiting_for_confirmation"}});
    let d = c.map_opening_state(&push, &cx);
    assert_eq!(d.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["state.snapshot"]);
    assert!(c.status().is_none() && c.seen("p1"));
    // The replayed history then drives the runs in order.
    let st = json!({"kind": "ConversationStateUpdateEvent", "id": "e1", "key": "execution_status", "value": "running"});
    assert_eq!(c.map(&st, &cx)[0].r#type, "run.started");
}

/// An observer that attached after the conversation's `running` update (the server's replay
/// holds no state updates) meets the run at its first ask or pause: the run opens there, and
/// the ask is inside it. A pause with a run open opens nothing.
#[test]
fn a_run_missed_at_its_start_opens_at_its_first_ask() {
    let cx = MapContext::default();
    let st = |id: &str, v: &str| json!({"kind": "ConversationStateUpdateEvent", "id": id, "key": "execution_status", "value": v});
    let mut c = Conversation::new("late", Options::default());
    let d = c.map(&st("e1", "waiting_for_confirmation"), &cx);
    let types: Vec<&str> = d.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["run.started", "attention.requested", "state.delta"]);
    assert!(d.iter().all(|d| d.run.as_deref() == Some("run:late:1")), "{d:?}");
    let d = c.map(&st("e2", "running"), &cx);
    assert_eq!(d.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.resolved", "state.delta"]);
    assert_eq!(c.map(&st("e3", "paused"), &cx)[0].r#type, "state.delta", "a pause inside the run opens nothing");
    let mut p = Conversation::new("p", Options::default());
    assert_eq!(p.map(&st("e1", "paused"), &cx)[0].r#type, "run.started");
    assert_eq!(status_moments(Some("idle"), "waiting_for_confirmation", &cx)[0].r#type, "run.started");
}

/// A real `ObservationEvent` of `openhands-agent-server` 1.58.2 (recorded offline against the
/// e2e mock): `ls` of a missing folder, exit code 2, `is_error: false`.
const EXIT_2: &str = r#"{"id": "b63ebcb1-bc3b-455a-8cc6-6e14132da4d0", "timestamp": "2026-12-04T16:37:50.478739", "source": "environment", "parent_id": "25daf7c4-abd4-4369-9339-fa3f7b7cac7e", "tool_name": "terminal", "tool_call_id": "call_e2e032dee8847894b53", "observation": {"content": [{"cache_prompt": false, "type": "text", "text": "ls: cannot access '/e2e_missing_dir': No such file or directory"}], "is_error": false, "command": "ls /e2e_missing_dir", "exit_code": 2, "timeout": false, "metadata": {"exit_code": 2, "pid": -1, "username": "root", "hostname": "vm", "working_dir": "/tmp/ohrec/run1/root/proj", "py_interpreter_path": "/root/.pyenv/shims/python", "prefix": "", "suffix": "\n[The command completed with exit code 2.]"}, "full_output_save_dir": "/tmp/ohrec/run1/root/conv/dc0f58ff99404eafa38083b967ab2d8c/observations", "kind": "TerminalObservation"}, "action_id": "25daf7c4-abd4-4369-9339-fa3f7b7cac7e", "extended_content": [], "kind": "ObservationEvent"}"#;

#[test]
fn a_command_exiting_non_zero_is_completed_with_its_exit_code() {
    let cx = MapContext::default();
    let ev: Value = serde_json::from_str(EXIT_2).unwrap();
    let d = map_event(&ev, Options::default(), &cx);
    assert_eq!(d.len(), 1);
    // The server's verdict (`is_error: false`) stands: the call completed; the code rides along.
    assert_eq!(d[0].r#type, "tool.completed");
    assert_eq!(d[0].data["exit_code"], json!(2));
    assert_eq!(d[0].data["tool"], json!({"name": "terminal", "call_id": "call_e2e032dee8847894b53"}));
    // A failed observation keeps its code too.
    let mut failed = ev.clone();
    failed["observation"]["is_error"] = json!(true);
    let d = map_event(&failed, Options::default(), &cx);
    assert_eq!((d[0].r#type.as_str(), &d[0].data["exit_code"]), ("tool.failed", &json!(2)));
}

#[test]
fn a_resumed_conversation_goes_on_where_its_checkpoint_left_it() {
    let cx = MapContext::default();
    let st = |id: &str, v: &str| json!({"kind": "ConversationStateUpdateEvent", "id": id, "key": "execution_status", "value": v});
    let mut c = Conversation::new("conv1", Options::default());
    c.map(&st("e1", "running"), &cx);
    c.map(&st("e2", "finished"), &cx);
    c.map(&st("e3", "running"), &cx);
    let cp = c.checkpoint(8);
    assert_eq!(cp.run.as_deref(), Some("run:conv1:2"));
    let text = serde_json::to_string(&cp).unwrap();
    let mut r = Conversation::resume("conv1", Options::default(), serde_json::from_str(&text).unwrap());
    assert!(r.map(&st("e3", "running"), &cx).is_empty(), "an id mapped before the restart");
    let d = r.map(&st("e4", "finished"), &cx);
    assert_eq!((d[0].r#type.as_str(), d[0].run.as_deref()), ("run.finished", Some("run:conv1:2")));
    let d = r.map(&st("e5", "running"), &cx);
    assert_eq!(d[0].run.as_deref(), Some("run:conv1:3"), "the run counter goes on");
    assert_eq!(r.checkpoint(2).seen, ["e4", "e5"]);
}
