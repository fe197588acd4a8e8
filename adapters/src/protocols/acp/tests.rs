use serde_json::{Value, json};

use super::*;

fn cx() -> MapContext {
    MapContext::default()
}

fn line(tee: &mut Tee, dir: Direction, v: Value) -> Vec<EventDraft> {
    tee.map_line(dir, v.to_string().as_bytes(), &cx())
}

#[test]
fn a_prompt_turn_is_one_run_keyed_by_the_request_id() {
    let mut tee = Tee::new(7, Options::default());
    let d = line(
        &mut tee,
        Direction::ToAgent,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w"}}),
    );
    assert!(d.is_empty() || d.iter().all(|d| d.session.is_none()));
    let d = line(&mut tee, Direction::FromAgent, json!({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "s9"}}));
    assert_eq!(d.len(), 1);
    assert_eq!((d[0].r#type.as_str(), d[0].session.as_deref()), ("session.started", Some("s9")));
    let d = line(
        &mut tee,
        Direction::ToAgent,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "s9", "prompt": [{"type": "text", "text": "hi"}]}}),
    );
    assert_eq!(d[0].r#type, "run.started");
    assert_eq!(d[0].run.as_deref(), Some("7.2"));
    assert_eq!(d[0].data["message_digest"], json!(digest(&json!([{"type": "text", "text": "hi"}]))));
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s9", "update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "ls", "kind": "execute", "rawInput": {"command": "ls"}}}}),
    );
    assert_eq!((d[0].r#type.as_str(), d[0].run.as_deref()), ("tool.requested", Some("7.2")));
    // A later update omits the kind: the tee joins the one it saw.
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s9", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed", "rawOutput": "a b"}}}),
    );
    assert_eq!(d[0].r#type, "tool.completed");
    assert_eq!(d[0].data["tool"], json!({"name": "execute", "call_id": "t1"}));
    assert_eq!(d[0].cause_key.as_deref(), Some("tool:t1"));
    let d =
        line(&mut tee, Direction::FromAgent, json!({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}));
    assert_eq!(d[0].r#type, "run.finished");
    assert_eq!(d[0].run.as_deref(), Some("7.2"));
    assert_eq!(d[0].cause_key.as_deref(), Some("run:s9:7.2"));
}

#[test]
fn the_permission_pair_joins_by_id_in_the_other_direction() {
    let mut tee = Tee::new(1, Options::default());
    let ask = json!({"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission", "params": {"sessionId": "s", "toolCall": {"toolCallId": "t4", "title": "rm x"}, "options": [{"optionId": "ok", "name": "OK", "kind": "allow_once"}]}});
    let d = line(&mut tee, Direction::FromAgent, ask);
    // The ask is the first the wire says of t4: it requests the call first.
    assert_eq!((d[0].r#type.as_str(), d[1].r#type.as_str()), ("tool.requested", "attention.requested"));
    assert!(d[1].data.get("options").is_none() && d[1].data.get("respond_via").is_none());
    assert_eq!(d[1].data["options_count"], json!(1));
    // The same id travelling the same way is not the answer.
    let echo = json!({"jsonrpc": "2.0", "id": "p1", "result": {"outcome": {"outcome": "selected", "optionId": "ok"}}});
    let d = line(&mut tee, Direction::FromAgent, echo.clone());
    assert!(d.iter().all(|d| !d.r#type.starts_with("attention.")));
    let d = line(&mut tee, Direction::ToAgent, echo);
    let types: Vec<&str> = d.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["attention.answered", "attention.resolved"]);
    // The lifecycle names the request event (its cause), not the tool call.
    assert!(d.iter().all(|d| d.subject.is_none() && d.session.as_deref() == Some("s")));
    assert!(d.iter().all(|d| d.cause_key.as_deref() == Some("attention:acp:s:\"p1\"")));
    assert_eq!(d[0].data["via"], json!("oob"));
}

#[test]
fn not_json_and_not_rpc_map_to_nothing() {
    let mut tee = Tee::new(1, Options::default());
    assert!(tee.map_line(Direction::FromAgent, b"{not json", &cx()).is_empty());
    assert!(tee.map_line(Direction::FromAgent, b"[1,2]", &cx()).is_empty());
    assert!(tee.map_line(Direction::FromAgent, b"", &cx()).is_empty());
}

#[test]
fn a_second_prompt_drains_the_stale_run() {
    let mut tee = Tee::new(3, Options::default());
    let p = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt", "params": {"sessionId": "s", "prompt": []}});
    line(&mut tee, Direction::ToAgent, p(1));
    let d = line(&mut tee, Direction::ToAgent, p(2));
    let types: Vec<(&str, Option<&str>)> = d.iter().map(|d| (d.r#type.as_str(), d.run.as_deref())).collect();
    assert_eq!(types, [("run.cancelled", Some("3.1")), ("run.started", Some("3.2"))]);
}

#[test]
fn deltas_ride_only_under_the_opt_in() {
    let chunk = json!({"kind": "notification", "method": "session/update", "params": {"update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "tok"}}}});
    assert!(map_moment(&chunk, Options::default(), &cx()).is_empty());
    let redacted = MapContext { capture: aep_schemas::Capture::Redacted, ..MapContext::default() };
    let d = map_moment(&chunk, Options { deltas: true }, &redacted);
    assert_eq!(d[0].r#type, "x.acp.agent.message.chunk");
    assert_eq!(d[0].data["delta"], json!("tok"));
    let d = map_moment(&chunk, Options { deltas: true }, &cx());
    assert!(d[0].data.is_empty(), "no text at metadata");
}

#[test]
fn stop_reasons_fork_onto_the_run_terminals() {
    let end = |r: &str| {
        let m = json!({"kind": "response", "method": "session/prompt", "result": {"stopReason": r}});
        map_moment(&m, Options::default(), &cx()).remove(0).r#type
    };
    assert_eq!(end("max_turn_requests"), "run.finished");
    assert_eq!(end("cancelled"), "run.cancelled");
    assert_eq!(end("refusal"), "run.failed");
}

#[test]
fn an_answer_that_overtook_its_request_waits_for_it() {
    let mut tee = Tee::new(1, Options::default());
    let ans = json!({"jsonrpc": "2.0", "id": "p1", "result": {"outcome": {"outcome": "cancelled"}}});
    assert!(line(&mut tee, Direction::ToAgent, ans).is_empty());
    let ask = json!({"jsonrpc": "2.0", "id": "p1", "method": "session/request_permission", "params": {"sessionId": "s", "toolCall": {"toolCallId": "t"}, "options": []}});
    let d = line(&mut tee, Direction::FromAgent, ask);
    let types: Vec<&str> = d.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["tool.requested", "attention.requested", "attention.resolved"]);
}

#[test]
fn a_permission_request_opens_a_call_no_tool_call_announced() {
    // Gemini CLI 0.61 (`gemini --acp`): a tool that needs approval is first named by the
    // permission request; the next word of it is its terminal `tool_call_update`.
    let mut tee = Tee::new(1, Options::default());
    let tc = json!({"toolCallId": "sh_1", "status": "pending", "title": "touch x", "kind": "execute"});
    let ask = json!({"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": {"sessionId": "s", "toolCall": tc, "options": [{"optionId": "proceed_once", "name": "Allow", "kind": "allow_once"}]}});
    let d = line(&mut tee, Direction::FromAgent, ask.clone());
    let types: Vec<&str> = d.iter().map(|d| d.r#type.as_str()).collect();
    assert_eq!(types, ["tool.requested", "attention.requested"]);
    assert_eq!(d[0].data["tool"], json!({"name": "execute", "call_id": "sh_1"}));
    assert_eq!(d[0].data["kind"], json!("execute"));
    assert_eq!(d[0].correlation_key.as_deref(), Some("tool:sh_1"));
    assert_eq!(d[1].cause_key.as_deref(), Some("tool:sh_1"), "the ask points at the call it gates");
    // Asked again for the same open call: no second request.
    let again = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission", "params": {"sessionId": "s", "toolCall": {"toolCallId": "sh_1"}, "options": []}}),
    );
    assert_eq!(again.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.requested"]);
    // A `tool_call` for the open call is an update, not a second request.
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "sh_1", "status": "in_progress"}}}),
    );
    assert_eq!((d[0].r#type.as_str(), &d[0].data["status"]), ("x.acp.tool_call.update", &json!("in_progress")));
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "sh_1", "status": "completed"}}}),
    );
    assert_eq!((d[0].r#type.as_str(), d[0].cause_key.as_deref()), ("tool.completed", Some("tool:sh_1")));
    assert_eq!(d[0].data["tool"]["name"], json!("execute"), "the kind the ask carried");
    // A call announced by `tool_call` first is not requested again by its permission ask.
    line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "t2", "title": "rm"}}}),
    );
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/request_permission", "params": {"sessionId": "s", "toolCall": {"toolCallId": "t2"}, "options": []}}),
    );
    assert_eq!(d.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.requested"]);
}

#[test]
fn delta_chunks_are_agent_scoped_by_their_pinned_type() {
    // The pin names them `x.acp.agent.*`: the `agent` category, which carries no session
    // (AEP-0001 §5.2), so the tee stamps none (a stamped one would fail validation).
    let mut tee = Tee::new(1, Options { deltas: true });
    let d = line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}}}),
    );
    assert_eq!(
        (d[0].r#type.as_str(), d[0].session.as_deref(), d[0].run.as_deref()),
        ("x.acp.agent.thought.chunk", None, None)
    );
}

/// Gemini CLI titles a shell call with the literal command, Qwen Code a read with the file:
/// content, and an unbounded label. The name is the agent's tool id (else the ACP kind); the
/// title rides only at `redacted`+.
#[test]
fn the_tool_name_is_the_tool_id_or_kind_never_the_title() {
    let gemini = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "run_shell_command-1", "status": "in_progress", "title": "python3 -c 'print(6*7)'", "kind": "execute", "content": [], "locations": []}}});
    let qwen = json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "call_1", "status": "pending", "title": "ReadFile: hello.txt", "kind": "read", "_meta": {"toolName": "read_file"}, "rawInput": {"absolute_path": "/w/hello.txt"}}}});
    let done = |id: &str| json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "completed"}}});
    let mut tee = Tee::new(1, Options::default());
    let mut d = line(&mut tee, Direction::FromAgent, gemini.clone());
    d.extend(line(&mut tee, Direction::FromAgent, done("run_shell_command-1")));
    d.extend(line(&mut tee, Direction::FromAgent, qwen.clone()));
    d.extend(line(&mut tee, Direction::FromAgent, done("call_1")));
    let names: Vec<(&str, &Value)> = d.iter().map(|d| (d.r#type.as_str(), &d.data["tool"]["name"])).collect();
    assert_eq!(
        names,
        [
            ("tool.requested", &json!("execute")),
            ("tool.completed", &json!("execute")),
            ("tool.requested", &json!("read_file")),
            ("tool.completed", &json!("read_file")),
        ]
    );
    for d in &d {
        let text = Value::Object(d.data.clone()).to_string();
        assert!(!text.contains("print(6*7)") && !text.contains("hello.txt"), "content at metadata: {text}");
    }
    // At redacted the title is carried, as `title`.
    let redacted = MapContext { capture: aep_schemas::Capture::Redacted, ..MapContext::default() };
    let mut tee = Tee::new(1, Options::default());
    let d = tee.map_line(Direction::FromAgent, qwen.to_string().as_bytes(), &redacted);
    assert_eq!((&d[0].data["tool"]["name"], &d[0].data["title"]), (&json!("read_file"), &json!("ReadFile: hello.txt")));
    // No kind: the agent's tool id; neither: the schema's default kind.
    let no_kind = json!({"kind": "notification", "method": "session/update", "params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "y", "title": "ls", "_meta": {"toolName": "list_directory"}}}});
    assert_eq!(map_moment(&no_kind, Options::default(), &cx())[0].data["tool"]["name"], json!("list_directory"));
    let bare = json!({"kind": "notification", "method": "session/update", "params": {"update": {"sessionUpdate": "tool_call", "toolCallId": "x", "title": "rm -rf /tmp/x"}}});
    assert_eq!(map_moment(&bare, Options::default(), &cx())[0].data["tool"]["name"], json!("other"));
}

/// The agent names itself in its `initialize` answer; that name is the envelope `agent`.
#[test]
fn the_agent_is_the_initialize_answers_agent_info_name() {
    let mut tee = Tee::new(1, Options::default());
    assert_eq!(tee.agent(), "acp", "no name yet");
    line(
        &mut tee,
        Direction::ToAgent,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}),
    );
    line(
        &mut tee,
        Direction::FromAgent,
        json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1, "agentInfo": {"name": "qwen-code", "title": "Qwen Code", "version": "0.15.10"}}}),
    );
    assert_eq!(tee.agent(), "qwen-code");
    // An agent that gives no name stays `acp`; a name that is not a token is made one.
    let mut anon = Tee::new(1, Options::default());
    line(&mut anon, Direction::ToAgent, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}));
    line(&mut anon, Direction::FromAgent, json!({"jsonrpc": "2.0", "id": 0, "result": {"protocolVersion": 1}}));
    assert_eq!(anon.agent(), "acp");
    assert_eq!(agent_token("@Google/Gemini CLI "), Some("google-gemini-cli".into()));
    assert_eq!(agent_token(" ../ "), None);
    assert_eq!(agent_token(&"a".repeat(500)).map(|s| s.len()), Some(64));
}

/// Qwen Code 0.15.10 `--acp` as recorded by the e2e suite (paths rewritten): its shell call is
/// opened by the permission ask (a kind, no `_meta.toolName`), completed by an update with
/// `_meta.toolName` and no kind: it keeps the kind it was opened with. Its read opens with
/// `_meta.toolName`: named `read_file`, as Qwen Code's hooks name it. No title rides at metadata.
#[test]
fn a_real_qwen_code_call_keeps_one_name_from_ask_to_outcome() {
    let mut tee = Tee::new(1, Options::default());
    let d: Vec<EventDraft> = include_str!("testdata/qwen_code_0.15.10_tools.jsonl")
        .lines()
        .flat_map(|l| tee.map_line(Direction::FromAgent, l.as_bytes(), &cx()))
        .filter(|d| d.r#type.starts_with("tool."))
        .collect();
    let seen: Vec<(&str, &Value)> = d.iter().map(|d| (d.r#type.as_str(), &d.data["tool"]["name"])).collect();
    assert_eq!(
        seen,
        [
            ("tool.requested", &json!("execute")),
            ("tool.completed", &json!("execute")),
            ("tool.requested", &json!("read_file")),
            ("tool.failed", &json!("read_file")),
        ]
    );
    for d in &d {
        let text = Value::Object(d.data.clone()).to_string();
        assert!(!text.contains("touch") && !text.contains("e2e_missing"), "content at metadata: {text}");
    }
}

/// Qwen Code 0.24.4 `--acp` as recorded by the e2e suite (paths rewritten): both calls open
/// with a `tool_call` carrying `_meta.toolName` (the shell before its permission ask), so they
/// are named as Qwen Code's hooks name them, and keep that name to their outcome.
#[test]
fn a_real_qwen_code_0_24_session_names_its_tools_as_its_hooks_do() {
    let mut tee = Tee::new(1, Options::default());
    let d: Vec<EventDraft> = include_str!("testdata/qwen_code_0.24.4_tools.jsonl")
        .lines()
        .flat_map(|l| tee.map_line(Direction::FromAgent, l.as_bytes(), &cx()))
        .filter(|d| d.r#type.starts_with("tool."))
        .collect();
    let seen: Vec<(&str, &Value, &Value)> = d
        .iter()
        .map(|d| (d.r#type.as_str(), &d.data["tool"]["name"], d.data.get("kind").unwrap_or(&Value::Null)))
        .collect();
    assert_eq!(
        seen,
        [
            ("tool.requested", &json!("run_shell_command"), &json!("execute")),
            ("tool.completed", &json!("run_shell_command"), &Value::Null),
            ("tool.requested", &json!("read_file"), &json!("read")),
            ("tool.failed", &json!("read_file"), &Value::Null),
        ]
    );
}

/// Gemini CLI 0.61 prefixes its call ids with the tool name: the tee logs Gemini's own tool
/// name (`run_shell_command`, `read_file`, as its hooks do), the ACP kind beside it; the
/// recorded session (paths rewritten) and the id forms its source builds.
#[test]
fn gemini_call_ids_name_the_tool_as_its_hooks_do() {
    for (id, name) in [
        ("run_shell_command__run_shell_command_1796660017704_0", "run_shell_command"),
        ("read_file__call_8f2a", "read_file"),
        ("srv__lookup__srv__lookup_1796660017704_3", "srv__lookup"),
        ("srv__lookup__call_8f2a", "srv__lookup"),
        ("read_many_files-1796653288859-2", "read_many_files"),
    ] {
        assert_eq!(name_in_call_id(id), Some(name), "{id}");
    }
    for id in [
        "call_e2e066e02398cf942f2",
        "toolu_e2e1239889d6",
        "t1",
        "x-12",
        "a b-1796653288859",
        "-1796653288859",
        "__x",
        "x__",
        "9x__y",
    ] {
        assert_eq!(name_in_call_id(id), None, "{id}");
    }
    let mut tee = Tee::new(1, Options::default());
    let d: Vec<EventDraft> = include_str!("testdata/gemini_cli_0.61.0_tools.jsonl")
        .lines()
        .flat_map(|l| tee.map_line(Direction::FromAgent, l.as_bytes(), &cx()))
        .filter(|d| d.r#type.starts_with("tool."))
        .collect();
    let seen: Vec<(&str, &Value, &Value)> = d
        .iter()
        .map(|d| (d.r#type.as_str(), &d.data["tool"]["name"], d.data.get("kind").unwrap_or(&Value::Null)))
        .collect();
    assert_eq!(
        seen,
        [
            ("tool.requested", &json!("run_shell_command"), &json!("execute")),
            ("tool.completed", &json!("run_shell_command"), &Value::Null),
            ("tool.requested", &json!("read_file"), &json!("read")),
            ("tool.failed", &json!("read_file"), &Value::Null),
        ]
    );
    for d in &d {
        let text = Value::Object(d.data.clone()).to_string();
        assert!(!text.contains("touch") && !text.contains("e2e_missing"), "content at metadata: {text}");
    }
    // A call keeps the name of its first update even when a later one names it otherwise.
    let mut tee = Tee::new(1, Options::default());
    let lines = [
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "q1", "status": "pending", "kind": "read"}}}),
        json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call_update", "toolCallId": "q1", "status": "failed", "_meta": {"toolName": "read_file"}}}}),
    ];
    let names: Vec<Value> = lines
        .iter()
        .flat_map(|l| tee.map_line(Direction::FromAgent, l.to_string().as_bytes(), &cx()))
        .filter(|d| d.r#type.starts_with("tool."))
        .map(|d| d.data["tool"]["name"].clone())
        .collect();
    assert_eq!(names, [json!("read"), json!("read")]);
}
