//! `aep-bridge project {ce|otlp-logs|otlp-spans|ocsf}` as a process: JSONL in, JSON out.

use std::io::Write as _;
use std::process::{Command, Stdio};

use aep_bridge::export::otlp::{logs_from_json, traces_from_json};
use serde_json::{Value, json};

fn jsonl() -> String {
    let src = "aep://test-host/agent/codex/session/s1";
    let rows = [
        ("session.started", json!({"model": "gpt-5"})),
        ("run.started", json!({})),
        ("tool.requested", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("tool.completed", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("run.completed", json!({})),
        ("session.ended", json!({})),
    ];
    let mut out = String::new();
    for (i, (ty, data)) in rows.iter().enumerate() {
        let ev = json!({"aep":"0.1","id":format!("e{i}"),"type":ty,"time":format!("2026-01-02T03:04:0{i}Z"),
            "source":src,"agent":"codex","session":"s1","run":"r1","seq":i,"epoch":1,"capture":"metadata","data":data});
        out.push_str(&ev.to_string());
        out.push('\n');
    }
    out
}

/// Runs the binary with `args`, `stdin` piped in; returns (exit code, stdout, stderr).
fn project(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .arg("project")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn every_target_from_stdin_and_from_a_file() {
    let input = jsonl();
    let (code, out, err) = project(&["ce"], &input);
    assert_eq!(code, 0, "{err}");
    let ces: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(ces.len(), 6);
    assert_eq!(ces[3]["type"], "dev.aep.tool.completed");
    for ce in &ces {
        let _: cloudevents::Event = serde_json::from_value(ce.clone()).expect("the CloudEvents SDK rejects it");
    }
    let (_, out, _) = project(&["ce", "--batch"], &input);
    let batch: Vec<cloudevents::Event> = serde_json::from_str(&out).unwrap();
    assert_eq!(batch.len(), 6);

    let (code, out, _) = project(&["otlp-logs"], &input);
    assert_eq!(code, 0);
    let req = logs_from_json(serde_json::from_str(&out).unwrap()).unwrap();
    let recs = &req.resource_logs[0].scope_logs[0].log_records;
    assert_eq!(recs.len(), 6);
    assert_eq!(recs[0].event_name, "dev.aep.session.started");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.jsonl");
    std::fs::write(&file, &input).unwrap();
    let (code, out, _) = project(&["otlp-spans", file.to_str().unwrap(), "--pretty"], "");
    assert_eq!(code, 0);
    assert!(out.contains("\n  "), "not pretty-printed");
    let req = traces_from_json(serde_json::from_str(&out).unwrap()).unwrap();
    let mut names: Vec<String> =
        req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).map(|s| s.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["execute_tool Bash", "invoke_agent codex", "session codex"]);

    let (code, out, _) = project(&["ocsf", "--max-capture", "none", "-"], &input);
    assert_eq!(code, 0);
    let classes: Vec<i64> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["class_uid"].as_i64().unwrap()).collect();
    assert_eq!(classes, [3002, 1007, 1007, 3002]);
}

#[test]
fn bad_lines_are_reported_and_bad_args_refused() {
    let input = format!("{}not json\n\n", jsonl());
    let (code, out, err) = project(&["ocsf"], &input);
    assert_eq!(code, 1);
    assert!(err.contains("-:7: not an AEP Event"), "{err}");
    assert_eq!(out.lines().count(), 4, "good lines are still projected");
    let (code, _, _) = project(&["ocsf", "--max-capture", "secret"], "");
    assert_eq!(code, 2);
    let (code, _, _) = project(&["protobuf"], "");
    assert_eq!(code, 2);
    let (code, _, err) = project(&["ce", "/nonexistent/x.jsonl"], "");
    assert_eq!(code, 2, "{err}");
}
