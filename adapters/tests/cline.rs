//! Cline: a task with a subagent and a failing tool maps onto real run boundaries per
//! agent, the typed tool split and the delegation pair; no content above the ceiling.

mod common;

use aep_adapters::MapContext;
use aep_adapters::vendors::cline;
use aep_schemas::Capture;

use common::{MARKER, assert_absent, assert_causal, assert_no_panics, drive, present, types};

const SESSION: &str = r#"
{"payload": {"hookName": "agent_start", "taskId": "T1", "agent_id": "root", "parent_agent_id": null}}
{"payload": {"hookName": "prompt_submit", "taskId": "T1", "agent_id": "root", "parent_agent_id": null, "prompt": "zebra-canary-4471"}}
{"payload": {"hookName": "tool_call", "taskId": "T1", "agent_id": "root", "iteration": 1, "tool_call": {"id": "a", "name": "read_file", "input": {"path": "zebra-canary-4471"}}}}
{"payload": {"hookName": "agent_start", "taskId": "T1", "agent_id": "sub", "parent_agent_id": "root"}}
{"payload": {"hookName": "tool_call", "taskId": "T1", "agent_id": "sub", "iteration": 1, "tool_call": {"id": "b", "name": "search", "input": {"q": "x"}}}}
{"payload": {"hookName": "tool_result", "taskId": "T1", "agent_id": "sub", "iteration": 1, "tool_result": {"id": "b", "name": "search", "output": "zebra-canary-4471", "durationMs": 9}}}
{"payload": {"hookName": "agent_end", "taskId": "T1", "agent_id": "sub", "parent_agent_id": "root", "iteration": 1}}
{"payload": {"hookName": "tool_result", "taskId": "T1", "agent_id": "root", "iteration": 2, "tool_result": {"id": "a", "name": "read_file", "output": null, "error": "zebra-canary-4471", "durationMs": 1}}}
{"payload": {"hookName": "pre_compact", "taskId": "T1", "agent_id": "root", "preCompact": {"compactionStrategy": "summarize", "tokensIn": 5, "tokensOut": 1, "contextJsonPath": "/tmp/zebra-canary-4471"}}}
{"payload": {"hookName": "agent_abort", "taskId": "T1", "agent_id": "root", "parent_agent_id": null, "reason": "zebra-canary-4471"}}
{"payload": {"hookName": "session_shutdown", "taskId": "T1", "agent_id": "root", "reason": "zebra-canary-4471"}}
"#;

#[test]
fn task_with_a_subagent() {
    let a = cline::adapter();
    let ds = drive(a.as_ref(), SESSION, &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "run.started",
            "x.cline.prompt.submitted",
            "tool.requested",
            "delegation.subagent.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "run.finished",
            "delegation.subagent.stopped",
            "tool.failed",
            "session.compacted",
            "run.cancelled",
            "session.ended",
        ]
    );
    assert_causal(&ds);
    let runs: Vec<Option<&str>> = ds.iter().map(|d| d.run.as_deref()).collect();
    assert_eq!(runs[2], Some("r1"));
    assert_eq!(runs[5], Some("r2"));
    assert_eq!(runs[9], Some("r1"));
    assert_eq!(runs[11], Some("r1"));
    assert_absent(&ds, MARKER);
    let red = MapContext { capture: Capture::Redacted, ..MapContext::default() };
    let ds = drive(a.as_ref(), SESSION, &red);
    assert!(present(&ds, MARKER));
    assert_absent(&ds, "/tmp/zebra");
}

#[test]
fn malformed_payloads_never_panic() {
    let hooks = ["agent_start", "agent_end", "agent_error", "tool_call", "tool_result", "pre_compact", "zzz"];
    assert_no_panics(cline::adapter().as_ref(), &hooks);
}

/// What Cline CLI 3.0.65 (`cline "prompt"`, its `run_commands` tool) delivered to a hook
/// script, verbatim: one command succeeding, one exiting 2.
const REAL_CLI: &str = include_str!("data/cline/cli_3.0.65_run_commands.jsonl");

#[test]
fn real_cli_a_failing_command_is_tool_failed() {
    let ds = drive(cline::adapter().as_ref(), REAL_CLI, &MapContext::default());
    assert_eq!(
        types(&ds),
        ["run.started", "tool.requested", "tool.completed", "tool.requested", "tool.failed", "run.finished"]
    );
    // The record carries no `error`: the command's own result says it failed.
    assert_eq!(ds[4].data["error"]["type"], "command_failed");
    assert!(!ds[4].data["error"].as_object().unwrap().contains_key("message"), "message is redacted+");
    assert_causal(&ds);
    let red =
        drive(cline::adapter().as_ref(), REAL_CLI, &MapContext { capture: Capture::Redacted, ..MapContext::default() });
    assert_eq!(red[4].data["error"]["message"], "Command exited with code 2");
}
