use aep_schemas::Capture;
use serde_json::json;

use super::*;

/// A real `pi --mode rpc` session (pi 0.80.6 against the e2e mock model, paths rewritten):
/// get_state, a prompt running `bash` (ok) and `read` (a missing file), a prompt answered
/// with text.
const CAPTURE: &str = include_str!("../../../../bridge/tests/data/wrap/pi_rpc.jsonl");
const SID: &str = "01a237c2-e6e7-714e-8bfa-92c9cc80500e";

fn cx() -> MapContext {
    MapContext::default()
}

fn feed(tee: &mut Tee, lines: &[&str]) -> Vec<EventDraft> {
    lines.iter().flat_map(|l| tee.map_line(Direction::FromAgent, l.as_bytes(), &cx())).collect()
}

fn types(d: &[EventDraft]) -> Vec<&str> {
    d.iter().map(|d| d.r#type.as_str()).collect()
}

#[test]
fn the_recorded_session_maps_to_a_session_two_runs_and_a_tool_pair_each_way() {
    let mut tee = Tee::new(5, Options::default());
    let lines: Vec<&str> = CAPTURE.lines().collect();
    let d = feed(&mut tee, &lines);
    assert_eq!(
        types(&d),
        [
            "session.started",
            "run.started",
            "run.step.started",
            "x.pi.message.submitted",
            "x.pi.message.replied",
            "tool.requested",
            "tool.completed",
            "run.step.finished",
            "run.step.started",
            "x.pi.message.replied",
            "tool.requested",
            "tool.failed",
            "run.step.finished",
            "run.step.started",
            "x.pi.message.replied",
            "run.step.finished",
            "run.finished",
            "x.pi.agent.settled",
            "run.started",
            "run.step.started",
            "x.pi.message.submitted",
            "x.pi.message.replied",
            "run.step.finished",
            "run.finished",
            "x.pi.agent.settled",
        ]
    );
    for d in &d {
        let scoped = d.r#type == "x.pi.agent.settled";
        assert_eq!(d.session.as_deref(), (!scoped).then_some(SID), "{}: agent-scoped, or in the session", d.r#type);
    }
    assert!(d[17].run.is_none() && d[24].run.is_none());
    assert_eq!(d[0].data, json!({"client": {"name": "pi"}}).as_object().cloned().unwrap(), "no arrival reason claimed");
    assert!(d[0].run.is_none());
    // Runs: the shared mapping's r1/r2, qualified by the tee's epoch, keyed for the cause link.
    assert_eq!(
        (d[1].run.as_deref(), d[16].run.as_deref(), d[18].run.as_deref()),
        (Some("5.r1"), Some("5.r1"), Some("5.r2"))
    );
    assert_eq!(d[1].correlation_key.as_deref(), Some(format!("run:{SID}:5.r1").as_str()));
    assert_eq!(d[16].cause_key, d[1].correlation_key);
    assert_eq!(d[16].data["stop_reason"], json!("stop"));
    assert!(d[5..16].iter().all(|d| d.run.as_deref() == Some("5.r1")));
    // Tool pairs by the vendor's toolCallId; the split is its typed isError.
    assert_eq!(d[5].data["tool"], json!({"name": "bash", "call_id": "call_e2e42f412fe31e34bfb"}));
    assert_eq!(d[6].cause_key, d[5].correlation_key);
    assert_eq!(d[11].data["tool"]["name"], json!("read"));
    assert_eq!(d[11].cause_key, d[10].correlation_key);
    assert_eq!(d[11].data["error"], json!({"type": "error"}), "the message stays behind the redacted gate");
    // The stream's turn boundaries carry no turnIndex: no step is invented.
    assert!(d.iter().all(|d| d.step.is_none()));
}

#[test]
fn events_before_the_session_is_named_wait_for_it() {
    let mut tee = Tee::new(1, Options::default());
    let early = feed(&mut tee, &[r#"{"type":"agent_start"}"#, r#"{"type":"turn_start"}"#]);
    assert!(early.is_empty());
    // A failed response and one without a session teach nothing.
    let none = feed(
        &mut tee,
        &[
            r#"{"id":"x","type":"response","command":"get_state","success":false,"error":"busy"}"#,
            r#"{"id":"p","type":"response","command":"prompt","success":true}"#,
        ],
    );
    assert!(none.is_empty());
    // Nor does an id that is no session id (empty, oversized, control characters).
    let long = format!(
        r#"{{"type":"response","command":"get_state","success":true,"data":{{"sessionId":"{}"}}}}"#,
        "s".repeat(300)
    );
    let odd = [
        r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":""}}"#,
        long.as_str(),
        r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"a\u0007b"}}"#,
    ];
    assert!(feed(&mut tee, &odd).is_empty());
    let d = feed(
        &mut tee,
        &[
            r#"{"type":"response","command":"get_session_stats","success":true,"data":{"sessionId":"s1","toolCalls":0}}"#,
        ],
    );
    assert_eq!(types(&d), ["session.started", "run.started", "run.step.started"]);
    assert!(d.iter().all(|d| d.session.as_deref() == Some("s1")));
    // Named again: no second session.started.
    let d = feed(&mut tee, &[r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"s1"}}"#]);
    assert!(d.is_empty());
}

#[test]
fn a_replaced_session_is_unknown_until_named_again() {
    let mut tee = Tee::new(1, Options::default());
    feed(&mut tee, &[r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"a"}}"#]);
    // A cancelled new_session keeps the session.
    feed(&mut tee, &[r#"{"type":"response","command":"new_session","success":true,"data":{"cancelled":true}}"#]);
    assert_eq!(feed(&mut tee, &[r#"{"type":"agent_start"}"#])[0].session.as_deref(), Some("a"));
    feed(&mut tee, &[r#"{"type":"response","command":"new_session","success":true,"data":{"cancelled":false}}"#]);
    assert!(feed(&mut tee, &[r#"{"type":"agent_start"}"#]).is_empty(), "held: not session a's");
    let d = feed(&mut tee, &[r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"b"}}"#]);
    assert_eq!(types(&d), ["session.started", "run.started"]);
    assert!(d.iter().all(|d| d.session.as_deref() == Some("b")));
    assert_eq!(d[1].run.as_deref(), Some("1.r1"), "runs count per session");
}

#[test]
fn commands_stream_only_members_and_non_json_map_to_nothing() {
    let mut tee = Tee::new(1, Options::default());
    feed(&mut tee, &[r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"s"}}"#]);
    for cmd in [r#"{"id":"1","type":"prompt","message":"hi"}"#, r#"{"type":"abort"}"#, r#"{"type":"get_state"}"#] {
        assert!(tee.map_line(Direction::ToAgent, cmd.as_bytes(), &cx()).is_empty());
    }
    assert!(feed(&mut tee, &[r#"{"type":"entry_appended","entry":{"id":"e"}}"#, "not json", "[1]", "{}"]).is_empty());
    // Other stream members ride the shared mapping's fallback plane.
    let d = feed(
        &mut tee,
        &[
            r#"{"type":"queue_update","steering":[],"followUp":[]}"#,
            r#"{"type":"extension_ui_request","id":"u1","method":"confirm","title":"ok?"}"#,
        ],
    );
    assert_eq!(types(&d), ["x.pi.event.queue_update", "x.pi.event.extension_ui_request"]);
    assert!(d.iter().all(|d| d.severity == Some(aep_schemas::Severity::Debug)));
}

#[test]
fn compaction_end_is_the_post_compaction_moment() {
    let mut tee = Tee::new(1, Options::default());
    feed(&mut tee, &[r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"s"}}"#]);
    let d = feed(
        &mut tee,
        &[
            r#"{"type":"compaction_start","reason":"threshold"}"#,
            r#"{"type":"compaction_end","reason":"threshold","result":{"summary":"x"},"aborted":false,"willRetry":false}"#,
            r#"{"type":"compaction_end","reason":"manual","result":null,"aborted":true,"willRetry":false}"#,
        ],
    );
    assert_eq!(types(&d), ["x.pi.event.compaction_start", "session.compacted"]);
    assert_eq!(d[1].data, json!({"reason": "threshold", "will_retry": false}).as_object().cloned().unwrap());
}

#[test]
fn deltas_and_capture_follow_the_shared_mapping() {
    let on = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let mut tee = Tee::new(1, Options { deltas: true });
    let lines = [
        r#"{"type":"response","command":"get_state","success":true,"data":{"sessionId":"s"}}"#,
        r#"{"type":"tool_execution_update","toolCallId":"t","toolName":"bash","args":{},"partialResult":{"content":[]}}"#,
        r#"{"type":"tool_execution_end","toolCallId":"t","toolName":"bash","result":{"content":[{"type":"text","text":"boom"}]},"isError":true}"#,
    ];
    let d: Vec<EventDraft> = lines.iter().flat_map(|l| tee.map_line(Direction::FromAgent, l.as_bytes(), &on)).collect();
    assert_eq!(types(&d), ["session.started", "x.pi.tool.update", "tool.failed"]);
    assert_eq!(d[2].data["error"]["message"], json!("boom"));
}

#[test]
fn what_waits_for_the_session_is_bounded_in_bytes() {
    let mut tee = Tee::new(1, Options::default());
    let big = format!(r#"{{"type":"x_big","pad":"{}"}}"#, "a".repeat(MAX_WAITING_BYTES / 3));
    for _ in 0..10 {
        feed(&mut tee, &[big.as_str()]);
    }
    assert_eq!(tee.waiting.len(), 2, "three of them are over the byte bound");
    assert_eq!(tee.waiting_bytes, 2 * big.len());
    for _ in 0..(MAX_WAITING + 10) {
        feed(&mut tee, &[r#"{"type":"turn_start"}"#]);
    }
    assert_eq!(tee.waiting.len(), MAX_WAITING);
}

/// A client that never asks `get_state`: nothing names the session while pi runs; at the end
/// the held events map under the tee's own session name instead of being lost.
#[test]
fn events_no_response_named_go_out_at_the_end_under_the_tees_session() {
    let mut tee = Tee::new(5, Options::default());
    let cx = MapContext::default();
    let mut held = Vec::new();
    for ev in
        [json!({"type": "agent_start"}), json!({"type": "turn_start"}), json!({"type": "agent_end", "messages": []})]
    {
        held.extend(tee.map_line(Direction::FromAgent, ev.to_string().as_bytes(), &cx));
    }
    assert!(held.is_empty(), "nothing while the session is unknown");
    let out = tee.finish(&cx);
    let types: Vec<&str> = out.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["session.started", "run.started", "run.step.started", "run.finished"]);
    assert!(out.iter().all(|d| d.session.as_deref() == Some("rpc-5")));
    assert!(tee.finish(&cx).is_empty(), "once");
    // A named session leaves nothing to finish.
    let mut named = Tee::new(5, Options::default());
    let state = json!({"type": "response", "command": "get_state", "success": true, "data": {"sessionId": "abc"}});
    named.map_line(Direction::FromAgent, state.to_string().as_bytes(), &cx);
    named.map_line(Direction::FromAgent, br#"{"type":"agent_start"}"#, &cx);
    assert!(named.finish(&cx).is_empty());
}
