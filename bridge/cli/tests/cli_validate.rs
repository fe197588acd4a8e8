//! `aep-bridge validate`: completeness warnings are reported apart from spec failures and
//! change the exit code only under `--strict`.

use std::io::Write;
use std::process::{Command, Stdio};

fn line(id: &str, seq: u64, ty: &str, data: &str) -> String {
    format!(
        r#"{{"aep":"0.1","id":"{id}","type":"{ty}","time":"2026-01-01T00:00:0{seq}Z","source":"aep://test","agent":"test","session":"s1","run":"r1","seq":{seq},"data":{data}}}"#
    )
}

fn validate(log: &str, strict: bool) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    cmd.arg("validate").arg("-");
    if strict {
        cmd.arg("--strict");
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(log.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap(), String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn an_unanswered_tool_request_warns_and_fails_only_under_strict() {
    let log = [
        line("e1", 1, "run.started", "{}"),
        line("e2", 2, "tool.requested", r#"{"tool":{"name":"Bash","call_id":"c1"}}"#),
        line("e3", 3, "run.finished", "{}"),
    ]
    .join("\n");
    let (code, out) = validate(&log, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning[completeness]: event 1 (line 2): tool-no-outcome:"), "{out}");
    assert!(out.contains("3 events, valid, 1 completeness warning(s)"), "{out}");
    let (code, out) = validate(&log, true);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn a_complete_log_passes_strict_with_the_plain_verdict() {
    let log = [
        line("e1", 1, "run.started", "{}"),
        line("e2", 2, "tool.requested", r#"{"tool":{"name":"Bash","call_id":"c1"}}"#),
        line("e3", 3, "tool.failed", r#"{"tool":{"name":"Bash","call_id":"c1"},"error":{"type":"tool_error"}}"#),
        line("e4", 4, "run.finished", "{}"),
    ]
    .join("\n");
    let (code, out) = validate(&log, true);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("-: 4 events, valid"), "{out}");
}
