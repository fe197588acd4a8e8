//! GitHub Copilot CLI: what the real CLI 1.0.102 (`copilot -p`, offline against the e2e
//! mock model, hooks in its Claude Code-compatible form) delivered to a hook command maps onto
//! one session, one run and paired tools, with no content above the ceiling.

mod common;

use aep_adapters::vendors::copilot_cli;
use aep_adapters::{HookCall, MapContext, SessionState};
use aep_schemas::Capture;
use serde_json::json;

use common::{assert_causal, check_postures, core, load, replay, types};

/// `bash` ok, `bash` exiting 2, `view` ok, `view` of a missing file, verbatim (paths moved).
const REAL_CLI: &str = include_str!("data/copilot-cli/cli_1.0.102_hooks.jsonl");

#[test]
fn every_recorded_payload_maps() {
    check_postures(copilot_cli::adapter().as_ref(), "copilot-cli", REAL_CLI, &core(&["tool.failed"]));
}

#[test]
fn the_recorded_session_is_one_run_with_paired_tools() {
    let ds = replay(copilot_cli::adapter().as_ref(), &load(REAL_CLI), &MapContext::default());
    assert_eq!(
        types(&ds),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.completed",
            "tool.requested",
            "tool.failed",
            "run.finished",
            "session.ended"
        ]
    );
    assert_causal(&ds);
    assert!(ds.iter().all(|d| d.time.is_some()), "the vendor's timestamp is the event time");
    let codes: Vec<_> = ds.iter().filter(|d| d.r#type == "tool.completed").map(|d| d.data.get("exit_code")).collect();
    assert_eq!(codes, [Some(&json!(0)), Some(&json!(2)), None], "a shell's exit code rides; Copilot says success");
    assert_eq!(ds[9].data["error"], json!({"type": "tool_error"}), "the message is redacted+");
    let red = replay(
        copilot_cli::adapter().as_ref(),
        &load(REAL_CLI),
        &MapContext { capture: Capture::Redacted, ..MapContext::default() },
    );
    assert_eq!(red[9].data["error"]["message"], "Path does not exist");
}

/// Copilot runs the sessionStart and userPromptSubmitted hooks concurrently: a prompt that
/// reaches the bridge first opens the session, and the late start stays in the vendor namespace.
#[test]
fn a_prompt_before_the_session_start_opens_the_session() {
    let records = load(REAL_CLI);
    let (mut st, cx) = (SessionState::default(), MapContext::default());
    let a = copilot_cli::adapter();
    let mut map = |i: usize| {
        let (hook, p) = &records[i];
        a.map(&HookCall { event: Some(hook), payload: p }, &mut st, &cx).unwrap()
    };
    let prompt = map(1);
    assert_eq!(types(&prompt), ["session.started", "run.started"]);
    let start = map(0);
    assert_eq!(types(&start), ["x.copilot-cli.session.session_start"]);
}
