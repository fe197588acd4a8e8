use serde_json::{Value, json};

use super::*;

fn feed(tee: &mut Tee, dir: Direction, v: Value) -> Vec<EventDraft> {
    tee.map_line(dir, v.to_string().as_bytes(), &MapContext::default())
}

fn types(d: &[EventDraft]) -> Vec<&str> {
    d.iter().map(|d| d.r#type.as_str()).collect()
}

#[test]
fn a_print_mode_stream_is_a_session_a_run_and_a_tool_pair() {
    let mut t = Tee::new(Options::default());
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"type": "system", "subtype": "init", "session_id": "S", "model": "m1", "tools": ["Bash"]}),
    );
    assert_eq!(types(&d), ["session.started"]);
    assert_eq!(d[0].data["gen_ai.request.model"], json!("m1"));
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"type": "assistant", "session_id": "S", "message": {"content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "tu1", "name": "Bash", "input": {"command": "ls"}}]}}),
    );
    assert_eq!(types(&d), ["run.started", "tool.requested"]);
    assert!(d.iter().all(|d| d.session.as_deref() == Some("S") && d.run.as_deref() == Some("r1")));
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"type": "user", "session_id": "S", "message": {"content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "a\nb", "is_error": false}]}}),
    );
    assert_eq!(types(&d), ["tool.completed"]);
    assert_eq!(d[0].data["tool"], json!({"name": "Bash", "call_id": "tu1"}));
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"type": "result", "subtype": "success", "is_error": false, "session_id": "S", "duration_ms": 12, "usage": {"input_tokens": 5, "output_tokens": 2}}),
    );
    assert_eq!(types(&d), ["run.finished"]);
    assert_eq!(d[0].run.as_deref(), Some("r1"));
    assert_eq!(d[0].data["gen_ai.usage.output_tokens"], json!(2));
    assert_eq!(d[0].cause_key.as_deref(), Some("run:S:r1"));
}

#[test]
fn a_streamed_prompt_waits_for_the_session_the_agent_names() {
    let mut t = Tee::new(Options::default());
    let d = feed(&mut t, Direction::ToAgent, json!({"type": "user", "message": {"role": "user", "content": "hi"}}));
    assert!(d.is_empty());
    let d = feed(&mut t, Direction::FromAgent, json!({"type": "system", "subtype": "init", "session_id": "S2"}));
    assert_eq!(types(&d), ["session.started", "run.started"]);
    assert_eq!((d[1].session.as_deref(), d[1].run.as_deref()), (Some("S2"), Some("r1")));
    assert_eq!(d[1].correlation_key.as_deref(), Some("run:S2:r1"));
    // A second prompt: the first run never closed, so it drains.
    let d = feed(
        &mut t,
        Direction::ToAgent,
        json!({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "more"}]}}),
    );
    assert_eq!(types(&d), ["run.cancelled", "run.started"]);
}

#[test]
fn the_permission_prompt_is_observed_and_its_answer_paired() {
    let mut t = Tee::new(Options::default());
    feed(&mut t, Direction::FromAgent, json!({"type": "system", "subtype": "init", "session_id": "S"}));
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"type": "control_request", "request_id": "q1", "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "rm -rf x"}, "tool_use_id": "tu9"}}),
    );
    assert_eq!(types(&d), ["attention.requested"]);
    assert!(d[0].data.get("respond_via").is_none() && d[0].data.get("options").is_none());
    assert_eq!(d[0].data["prompt"], json!("Permission requested: Bash — rm -rf x"));
    let d = feed(
        &mut t,
        Direction::ToAgent,
        json!({"type": "control_response", "response": {"subtype": "success", "request_id": "q1", "response": {"behavior": "deny", "message": "no"}}}),
    );
    assert_eq!(types(&d), ["attention.answered", "attention.resolved"]);
    assert_eq!(d[0].data["answer"], json!({"option": "deny"}));
    assert!(d.iter().all(|d| d.cause_key.as_deref() == Some("attention:csj:q1")));
    // An unknown request id answers nothing.
    let again = json!({"type": "control_response", "response": {"subtype": "success", "request_id": "q1", "response": {"behavior": "allow"}}});
    assert!(feed(&mut t, Direction::ToAgent, again).is_empty());
}

#[test]
fn noise_maps_to_nothing() {
    let mut t = Tee::new(Options::default());
    assert!(t.map_line(Direction::FromAgent, b"plain text", &MapContext::default()).is_empty());
    assert!(t.map_line(Direction::FromAgent, b"\"str\"", &MapContext::default()).is_empty());
    assert!(feed(&mut t, Direction::FromAgent, json!({"type": "stream_event", "event": {}})).is_empty());
}
