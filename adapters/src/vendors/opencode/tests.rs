use aep_schemas::{Capture, Severity};
use serde_json::{Value, json};

use super::*;

fn run(a: &dyn HookAdapter, event: Option<&str>, p: &Value, st: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    a.map(&HookCall { event, payload: p }, st, cx).expect("maps")
}

fn bus(ty: &str, props: Value) -> Value {
    json!({"kind": "bus", "event": {"type": ty, "properties": props}})
}

#[test]
fn moment_name_from_url_or_kind() {
    let a = adapter();
    let p = json!({"kind": "tool.before", "input": {"tool": "read", "sessionID": "ses_a", "callID": "c9"}, "output": {"args": {"path": "x"}}});
    assert_eq!(a.hook_name(&HookCall { event: None, payload: &p }).unwrap(), "tool.before");
    assert_eq!(a.hook_name(&HookCall { event: Some("tool.execute.after"), payload: &p }).unwrap(), "tool.after");
    assert_eq!(a.hook_name(&HookCall { event: Some("event"), payload: &p }).unwrap(), "bus");
    let none = json!({});
    assert!(matches!(a.hook_name(&HookCall { event: None, payload: &none }), Err(AdapterError::NoHookName { .. })));
}

#[test]
fn runs_open_on_user_message_and_close_on_idle() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let user = bus("message.updated", json!({"info": {"id": "m1", "sessionID": "ses_a", "role": "user"}}));
    let out = run(a.as_ref(), None, &user, &mut st, &cx);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].r#type, "run.started");
    assert_eq!(out[0].run.as_deref(), Some("r1"));
    assert_eq!(out[0].session.as_deref(), Some("ses_a"));
    // steering never double-opens
    assert!(run(a.as_ref(), None, &user, &mut st, &cx).is_empty());
    let idle = bus("session.idle", json!({"sessionID": "ses_a"}));
    let out = run(a.as_ref(), Some("bus"), &idle, &mut st, &cx);
    assert_eq!(out[0].r#type, "run.finished");
    assert_eq!(out[0].run.as_deref(), Some("r1"));
    assert_eq!(out[0].cause_key, Some(crate::common::run_key(Some("ses_a"), "r1")));
    // idle with nothing open emits nothing
    assert!(run(a.as_ref(), None, &idle, &mut st, &cx).is_empty());
    // The live server re-sends the finished turn's user message after idle: no new run.
    assert!(run(a.as_ref(), None, &user, &mut st, &cx).is_empty());
    let next = bus("message.updated", json!({"info": {"id": "m2", "sessionID": "ses_a", "role": "user"}}));
    assert_eq!(run(a.as_ref(), None, &next, &mut st, &cx)[0].run.as_deref(), Some("r2"));
}

#[test]
fn tool_pair_links_by_call_id_and_digests_at_metadata() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let before = json!({"kind": "tool.before", "input": {"tool": "edit", "sessionID": "ses_b", "callID": "k1"}, "output": {"args": {"file": "/home/me/a.rs", "token": "sk-live-xyz"}}});
    let r = run(a.as_ref(), None, &before, &mut st, &cx);
    assert_eq!(r[0].r#type, "tool.requested");
    assert_eq!(r[0].correlation_key.as_deref(), Some("tool:k1"));
    assert_eq!(
        r[0].data["args_digest"],
        json!(aep_schemas::digest::digest(&json!({"file": "/home/me/a.rs", "token": "sk-live-xyz"})))
    );
    assert!(!r[0].data.contains_key("args_redacted"));
    let after = json!({"kind": "tool.after", "input": {"tool": "edit", "sessionID": "ses_b", "callID": "k1"}, "output": {"title": "t", "output": "done", "metadata": {}}});
    let c = run(a.as_ref(), None, &after, &mut st, &cx);
    assert_eq!(c[0].r#type, "tool.completed");
    assert_eq!(c[0].cause_key.as_deref(), Some("tool:k1"));
    assert_eq!(c[0].data["result_digest"], json!(aep_schemas::digest::digest(&json!("done"))));
    // at redacted the args ride through the pipeline
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let r = run(a.as_ref(), None, &before, &mut SessionState::default(), &red);
    assert_eq!(r[0].capture, Capture::Redacted);
    let shown = r[0].data["args_redacted"].to_string();
    assert!(shown.contains("a.rs") && !shown.contains("sk-live-xyz"), "{shown}");
}

#[test]
fn permission_card_synthesizes_at_metadata_and_carries_title_at_redacted() {
    let a = adapter();
    let p = json!({"kind": "permission.ask", "permission": {"id": "p7", "type": "webfetch", "title": "fetch example.org", "sessionID": "ses_c"}});
    let mut st = SessionState::default();
    let d = &run(a.as_ref(), None, &p, &mut st, &MapContext::default())[0];
    assert_eq!(d.r#type, "attention.requested");
    assert_eq!(d.capture, Capture::Redacted);
    assert_eq!(d.data["prompt"], json!("Permission requested: webfetch \u{2014} fetch example.org"));
    assert_eq!(d.data["options"][1]["id"], json!("deny"));
    assert_eq!(d.correlation_key.as_deref(), Some("attention:p7"));
    let meta = MapContext { attention_capture: Capture::Metadata, ..MapContext::default() };
    let d = &run(a.as_ref(), None, &p, &mut st, &meta)[0];
    assert_eq!(d.data["prompt"], json!("opencode requests permission: webfetch"));
    assert_eq!(d.severity, Some(Severity::Notice));
}

#[test]
fn replied_is_suppressed_when_the_loop_resolved_it() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let replied = bus("permission.replied", json!({"sessionID": "ses_d", "permissionID": "p1", "response": "once"}));
    assert_eq!(run(a.as_ref(), None, &replied, &mut st, &cx)[0].r#type, "attention.resolved");
    mark_resolved(&mut st, "p1");
    assert!(run(a.as_ref(), None, &replied, &mut st, &cx).is_empty());
    // the mark is consumed: a later reply for the same id is reported again
    assert_eq!(run(a.as_ref(), None, &replied, &mut st, &cx).len(), 1);
    assert!(run(a.as_ref(), None, &bus("permission.updated", json!({"id": "p2"})), &mut st, &cx).is_empty());
}

#[test]
fn todo_snapshots_become_transitions() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let snap = |todos: Value| bus("todo.updated", json!({"sessionID": "ses_e", "todos": todos}));
    let first = run(a.as_ref(), None, &snap(json!([{"id": "a", "content": "x", "status": "pending"}])), &mut st, &cx);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].r#type, "progress.task.planned");
    assert!(first[0].data.is_empty());
    let same =
        run(a.as_ref(), None, &snap(json!([{"id": "a", "content": "x", "status": "in_progress"}])), &mut st, &cx);
    assert!(same.is_empty());
    let done = run(a.as_ref(), None, &snap(json!([{"id": "a", "content": "x", "status": "completed"}])), &mut st, &cx);
    assert_eq!(done.len(), 1);
    assert_eq!((done[0].r#type.as_str(), done[0].subject.as_deref()), ("progress.task.completed", Some("a")));
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let d = diff_todos(&json!([]), &json!([{"id": "b", "content": "mail bob@example.com", "status": "pending"}]), &red);
    assert_eq!(d[0].data["task"]["id"], json!("b"));
    assert!(!d[0].data["task"]["title"].as_str().unwrap().contains("bob@example.com"));
}

#[test]
fn machinery_and_unknown_bus_types_ride_the_vendor_namespace() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let d = &run(a.as_ref(), None, &bus("lsp.client.diagnostics", json!({"path": "/secret"})), &mut st, &cx)[0];
    assert_eq!(d.r#type, "x.opencode.lsp.client.diagnostics");
    assert!(d.data.is_empty());
    assert_eq!(d.severity, Some(Severity::Debug));
    let d = &run(a.as_ref(), None, &bus("Weird Type", json!({})), &mut st, &cx)[0];
    assert_eq!(d.r#type, "x.opencode.bus.weird_type");
    let d = &run(a.as_ref(), None, &bus("server.connected", json!({})), &mut st, &cx)[0];
    assert_eq!(d.session, None);
    let d = &run(
        a.as_ref(),
        None,
        &bus("session.error", json!({"sessionID": "s", "error": {"name": "Boom"}})),
        &mut st,
        &cx,
    )[0];
    assert_eq!((d.r#type.as_str(), d.severity), ("x.opencode.session.error", Some(Severity::Error)));
    // an unknown moment kind takes the generic session fallback
    let d = &run(a.as_ref(), Some("shell.env"), &json!({}), &mut st, &cx)[0];
    assert_eq!(d.r#type, "x.opencode.session.shell_env");
    // The live server (1.18.33) asks on the bus (its permission.ask hook never fires): the
    // Kilo >=7.4.6 surface, answered over the reply route.
    let asked = bus(
        "permission.asked",
        json!({"id": "per_1", "sessionID": "s", "permission": "bash", "patterns": ["ls"], "tool": {"callID": "c"}}),
    );
    let d = &run(a.as_ref(), None, &asked, &mut st, &cx)[0];
    assert_eq!((d.r#type.as_str(), d.subject.as_deref()), ("attention.requested", Some("bash")));
    let ids: Vec<&str> = d.data["options"].as_array().unwrap().iter().map(|o| o["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["once", "always", "reject"]);
    assert_eq!(d.data["respond_via"], json!(["control"]));
}

#[test]
fn bad_payloads_are_errors_not_panics() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    assert_eq!(a.map(&HookCall { event: None, payload: &json!("x") }, &mut st, &cx), Err(AdapterError::NotAnObject));
    assert!(a.map(&HookCall { event: Some("bus"), payload: &json!({"event": 3}) }, &mut st, &cx).is_err());
    assert!(a.map(&HookCall { event: Some("tool.before"), payload: &json!({"input": {}}) }, &mut st, &cx).is_err());
    assert_eq!(a.neutral_reply("permission.ask").as_bytes(), b"");
}

#[test]
fn session_status_idle_closes_the_run_once() {
    // `opencode run` exits on `session.status {type:"idle"}`, before `session.idle` arrives.
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let user = bus("message.updated", json!({"info": {"id": "m1", "sessionID": "ses_a", "role": "user"}}));
    run(a.as_ref(), None, &user, &mut st, &cx);
    let busy = bus("session.status", json!({"sessionID": "ses_a", "status": {"type": "busy"}}));
    let out = run(a.as_ref(), None, &busy, &mut st, &cx);
    assert_eq!(out.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["progress.status"]);
    let idle = bus("session.status", json!({"sessionID": "ses_a", "status": {"type": "idle"}}));
    let out = run(a.as_ref(), None, &idle, &mut st, &cx);
    assert_eq!(out.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["progress.status", "run.finished"]);
    assert_eq!(out[1].run.as_deref(), Some("r1"));
    assert_eq!(out[1].cause_key, Some(crate::common::run_key(Some("ses_a"), "r1")));
    // the late session.idle closes nothing more
    assert!(run(a.as_ref(), None, &bus("session.idle", json!({"sessionID": "ses_a"})), &mut st, &cx).is_empty());
}

fn part(call: &str, tool: &str, state: Value) -> Value {
    bus(
        "message.part.updated",
        json!({"sessionID": "ses_t", "part": {"type": "tool", "tool": tool, "callID": call, "state": state}}),
    )
}

fn types(ds: &[EventDraft]) -> Vec<&str> {
    ds.iter().map(|d| d.r#type.as_str()).collect()
}

#[test]
fn tool_parts_request_and_end_calls_failures_fail() {
    // The SSE stream's (and the plugin's bus) tool plane, without any tool hook.
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let input = json!({"filePath": "/p/missing.txt"});
    assert!(
        run(a.as_ref(), None, &part("c1", "read", json!({"status": "pending", "input": {}})), &mut st, &cx).is_empty()
    );
    let r = run(a.as_ref(), None, &part("c1", "read", json!({"status": "running", "input": input})), &mut st, &cx);
    assert_eq!(types(&r), ["tool.requested"]);
    assert_eq!(r[0].correlation_key.as_deref(), Some("tool:c1"));
    assert_eq!(r[0].data["args_digest"], json!(aep_schemas::digest::digest(&input)));
    let e = json!({"status": "error", "input": input, "error": "File not found: /p/missing.txt"});
    let f = run(a.as_ref(), None, &part("c1", "read", e.clone()), &mut st, &cx);
    assert_eq!(types(&f), ["tool.failed"]);
    assert_eq!(f[0].severity, Some(Severity::Error));
    assert_eq!(f[0].cause_key.as_deref(), Some("tool:c1"));
    assert_eq!(f[0].data["error"], json!({"type": "tool_error"}), "the message is content: redacted+ only");
    // a repeated terminal part ends nothing twice
    assert!(run(a.as_ref(), None, &part("c1", "read", e), &mut st, &cx).is_empty());
    // a call first seen completed is requested, then completed
    let done = json!({"status": "completed", "input": {"command": "ls"}, "output": "a\nb"});
    let c = run(a.as_ref(), None, &part("c2", "bash", done), &mut st, &cx);
    assert_eq!(types(&c), ["tool.requested", "tool.completed"]);
    assert!(c[1].data.contains_key("result_digest"));
    // non-tool parts stay machinery
    let text = bus("message.part.updated", json!({"sessionID": "ses_t", "part": {"type": "text", "text": "hi"}}));
    assert_eq!(types(&run(a.as_ref(), None, &text, &mut st, &cx)), ["x.opencode.message.part.updated"]);
}

#[test]
fn tool_hooks_and_tool_parts_make_one_request_and_one_outcome() {
    // The plugin route carries both, in the order OpenCode 1.18.33 fires them.
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let input = json!({"filePath": "/p/hello.txt"});
    let before = json!({"kind": "tool.before", "input": {"tool": "read", "sessionID": "ses_t", "callID": "c1"}, "output": {"args": input}});
    let after = json!({"kind": "tool.after", "input": {"tool": "read", "sessionID": "ses_t", "callID": "c1"}, "output": {"title": "t", "output": "hello", "metadata": {}}});
    let mut all = Vec::new();
    all.extend(run(a.as_ref(), None, &part("c1", "read", json!({"status": "pending", "input": {}})), &mut st, &cx));
    all.extend(run(a.as_ref(), None, &before, &mut st, &cx));
    all.extend(run(a.as_ref(), None, &part("c1", "read", json!({"status": "running", "input": input})), &mut st, &cx));
    all.extend(run(a.as_ref(), None, &after, &mut st, &cx));
    let done = json!({"status": "completed", "input": input, "output": "hello"});
    all.extend(run(a.as_ref(), None, &part("c1", "read", done), &mut st, &cx));
    assert_eq!(types(&all), ["tool.requested", "tool.completed"]);
    // a failing call: tool.before, then the error part (tool.execute.after never fires)
    let before2 = json!({"kind": "tool.before", "input": {"tool": "read", "sessionID": "ses_t", "callID": "c2"}, "output": {"args": input}});
    let mut all = run(a.as_ref(), None, &before2, &mut st, &cx);
    let e = json!({"status": "error", "input": input, "error": "File not found"});
    all.extend(run(a.as_ref(), None, &part("c2", "read", e), &mut st, &cx));
    assert_eq!(types(&all), ["tool.requested", "tool.failed"]);
}

#[test]
fn asks_under_the_one_shot_run_are_the_agents_own_decisions() {
    let a = adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let asked = json!({"id": "per_1", "sessionID": "ses_r", "permission": "bash", "patterns": ["echo hi"], "tool": {"callID": "c"}});
    let replied = json!({"sessionID": "ses_r", "requestID": "per_1", "reply": "reject"});
    let one_shot = |mut v: Value| {
        v["oneShot"] = json!(true);
        v
    };
    let card = run(a.as_ref(), None, &one_shot(bus("permission.asked", asked.clone())), &mut st, &cx);
    assert_eq!(card[0].r#type, "attention.requested");
    assert_eq!(card[0].data["respond_via"], json!(["oob"]), "nothing answers it over control");
    let r = run(a.as_ref(), None, &one_shot(bus("permission.replied", replied.clone())), &mut st, &cx);
    assert_eq!((r[0].r#type.as_str(), &r[0].data["resolution"]), ("attention.resolved", &json!("auto")));
    // a served session's ask is answerable and its reply an answer
    let card = run(a.as_ref(), None, &bus("permission.asked", asked), &mut st, &cx);
    assert_eq!(card[0].data["respond_via"], json!(["control"]));
    let r = run(a.as_ref(), None, &bus("permission.replied", replied), &mut st, &cx);
    assert_eq!(r[0].data["resolution"], json!("answered"));
}
