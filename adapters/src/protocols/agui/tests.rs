use serde_json::json;

use super::*;

#[test]
fn a_stream_scopes_its_run_and_joins_tool_names() {
    let cx = MapContext::default();
    let mut st = Stream::new(Options::default());
    let d = st.map(&json!({"type": "RUN_STARTED", "threadId": "th", "runId": "ru"}), &cx);
    assert_eq!((d[0].session.as_deref(), d[0].run.as_deref()), (Some("th"), Some("ru")));
    st.map(&json!({"type": "STEP_STARTED", "stepName": "look"}), &cx);
    st.map(&json!({"type": "TOOL_CALL_START", "toolCallId": "k", "toolCallName": "grep"}), &cx);
    assert!(st.map(&json!({"type": "TOOL_CALL_ARGS", "toolCallId": "k", "delta": "{}"}), &cx).is_empty());
    let d = st.map(&json!({"type": "TOOL_CALL_RESULT", "toolCallId": "k", "messageId": "m", "content": "x"}), &cx);
    assert_eq!(d[0].data["tool"], json!({"name": "grep", "call_id": "k"}));
    assert_eq!((d[0].step.as_deref(), d[0].run.as_deref()), (Some("look"), Some("ru")));
    assert_eq!(d[0].cause_key.as_deref(), Some("tool:k"));
    st.map(&json!({"type": "TEXT_MESSAGE_START", "messageId": "u1", "role": "user"}), &cx);
    assert!(st.map(&json!({"type": "TEXT_MESSAGE_END", "messageId": "u1"}), &cx).is_empty(), "user end joined");
    let d = st.map(&json!({"type": "RUN_FINISHED", "threadId": "th", "runId": "ru"}), &cx);
    assert_eq!(d[0].cause_key.as_deref(), Some("run:th:ru"));
}

#[test]
fn thinking_aliases_map_like_reasoning() {
    let cx = MapContext::default();
    let a = map_event(&json!({"type": "THINKING_TEXT_MESSAGE_START"}), Options::default(), &cx);
    let b = map_event(&json!({"type": "REASONING_MESSAGE_START"}), Options::default(), &cx);
    assert_eq!(a, b);
    assert_eq!(a[0].r#type, "x.agui.reasoning_message.start");
    assert!(
        map_event(&json!({"type": "REASONING_ENCRYPTED_VALUE", "value": "z"}), Options { deltas: true }, &cx)
            .is_empty()
    );
    assert!(map_event(&json!({"no": "type"}), Options::default(), &cx).is_empty());
}

#[test]
fn the_raw_payload_rides_only_at_full() {
    let full = MapContext { capture: aep_schemas::Capture::Full, ..MapContext::default() };
    let ev = json!({"type": "RAW", "event": {"k": 1}});
    assert_eq!(map_event(&ev, Options::default(), &full)[0].data["event"], json!({"k": 1}));
    let red = MapContext { capture: aep_schemas::Capture::Redacted, ..MapContext::default() };
    assert!(map_event(&ev, Options::default(), &red)[0].data.is_empty());
}

#[test]
fn a_replys_streamed_text_rides_its_end_at_redacted_only_bounded() {
    let run = |cx: &MapContext, deltas: &[&str]| {
        let mut st = Stream::new(Options::default());
        st.map(&json!({"type": "RUN_STARTED", "threadId": "th", "runId": "ru"}), cx);
        st.map(&json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}), cx);
        for d in deltas {
            assert!(st.map(&json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d}), cx).is_empty());
        }
        let end = st.map(&json!({"type": "TEXT_MESSAGE_END", "messageId": "m"}), cx);
        assert!(st.texts.is_empty(), "released at the end");
        end[0].data.clone()
    };
    let red = MapContext { capture: aep_schemas::Capture::Redacted, ..MapContext::default() };
    assert_eq!(run(&red, &["Hello ", "there."])["content"], "Hello there.");
    assert!(run(&MapContext::default(), &["Hello"]).get("content").is_none(), "metadata: nothing");
    let big = "é".repeat(MAX_ASSEMBLED);
    let d = run(&red, &[&big, "more"]);
    assert_eq!((d["content"].as_str().unwrap().len(), d["content_truncated"].as_bool()), (MAX_ASSEMBLED, Some(true)));
}
