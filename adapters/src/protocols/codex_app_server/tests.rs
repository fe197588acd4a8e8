use serde_json::{Value, json};

use super::*;

fn feed(t: &mut Tee, dir: Direction, v: Value) -> Vec<EventDraft> {
    t.map_line(dir, v.to_string().as_bytes(), &MapContext::default())
}

fn types(d: &[EventDraft]) -> Vec<&str> {
    d.iter().map(|d| d.r#type.as_str()).collect()
}

#[test]
fn a_thread_turn_with_a_command_and_its_approval() {
    let mut t = Tee::new(Options::default());
    assert!(feed(&mut t, Direction::ToAgent, json!({"id": 1, "method": "thread/start", "params": {}})).is_empty());
    let d = feed(&mut t, Direction::FromAgent, json!({"id": 1, "result": {"thread": {"id": "th1"}, "model": "gpt-5"}}));
    assert_eq!(types(&d), ["session.started"]);
    assert_eq!((d[0].session.as_deref(), d[0].data["gen_ai.request.model"].as_str()), (Some("th1"), Some("gpt-5")));
    assert!(
        feed(&mut t, Direction::FromAgent, json!({"method": "thread/started", "params": {"thread": {"id": "th1"}}}))
            .is_empty(),
        "once per thread"
    );
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"method": "turn/started", "params": {"threadId": "th1", "turn": {"id": "tu1", "status": "inProgress"}}}),
    );
    assert_eq!((types(&d), d[0].run.as_deref()), (vec!["run.started"], Some("tu1")));
    let item = json!({"type": "commandExecution", "id": "it1", "command": "ls", "cwd": "/w", "status": "inProgress"});
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"method": "item/started", "params": {"threadId": "th1", "turnId": "tu1", "item": item}}),
    );
    assert_eq!(types(&d), ["tool.requested"]);
    assert_eq!(d[0].data["tool"], json!({"name": "shell", "call_id": "it1"}));
    let ask = json!({"id": 7, "method": "item/commandExecution/requestApproval", "params": {"threadId": "th1", "turnId": "tu1", "itemId": "it1", "command": "ls"}});
    let d = feed(&mut t, Direction::FromAgent, ask);
    assert_eq!(types(&d), ["attention.requested"]);
    assert!(d[0].data.get("respond_via").is_none() && d[0].data.get("options").is_none(), "the client answers");
    assert_eq!(d[0].run.as_deref(), Some("tu1"));
    let d = feed(
        &mut t,
        Direction::ToAgent,
        json!({"id": 7, "result": {"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": []}}}}),
    );
    assert_eq!(types(&d), ["attention.answered", "attention.resolved"]);
    assert_eq!(d[0].data["answer"], json!({"option": "acceptWithExecpolicyAmendment"}));
    assert_eq!(d[0].session.as_deref(), Some("th1"));
    let done = json!({"type": "commandExecution", "id": "it1", "command": "ls", "status": "failed", "exitCode": 2, "aggregatedOutput": "no"});
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"method": "item/completed", "params": {"threadId": "th1", "turnId": "tu1", "item": done}}),
    );
    assert_eq!(types(&d), ["tool.failed"]);
    assert_eq!(d[0].data["exit_code"], json!(2));
    let d = feed(
        &mut t,
        Direction::FromAgent,
        json!({"method": "turn/completed", "params": {"threadId": "th1", "turn": {"id": "tu1", "status": "interrupted"}}}),
    );
    assert_eq!((types(&d), d[0].cause_key.as_deref()), (vec!["run.cancelled"], Some("run:th1:tu1")));
}

#[test]
fn messages_are_not_tools_and_deltas_need_the_opt_in() {
    let cx = MapContext::default();
    assert!(map_item(true, &json!({"type": "agentMessage", "id": "m", "text": "hi"}), &cx).is_empty());
    assert_eq!(types(&map_item(false, &json!({"type": "contextCompaction", "id": "c"}), &cx)), ["session.compacted"]);
    let d = map_item(false, &json!({"type": "fileChange", "id": "f", "changes": [], "status": "declined"}), &cx);
    assert_eq!((types(&d), d[0].data["by"].as_str()), (vec!["tool.denied"], Some("runtime")));
    let mut t = Tee::new(Options::default());
    let delta = json!({"method": "item/agentMessage/delta", "params": {"threadId": "th", "delta": "x"}});
    assert!(feed(&mut t, Direction::FromAgent, delta).is_empty());
    assert!(t.map_line(Direction::FromAgent, b"garbage", &cx).is_empty());
}
