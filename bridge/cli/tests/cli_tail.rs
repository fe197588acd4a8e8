//! `tail`, `timeline` and `adapters` against a real bridge fed through its hook receiver.

use aep_testkit as common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(15);

async fn cli(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
            .args(&args)
            .env_remove("AEP_URL")
            .env_remove("AEP_TOKEN")
            .env_remove("AEP_BRIDGE_DATA_DIR")
            .env("NO_COLOR", "1")
            .output()
            .expect("run aep-bridge");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

async fn feed(b: &Running, session: &str) {
    for p in codex_session(session) {
        let (status, body) = post(format!("{}/hooks/codex", b.url()), p.to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    b.wait_lines(&b.data.join(format!("logs/codex/{session}.jsonl")), 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_replays_filters_groups_and_stops_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    feed(&b, "s-tail").await;
    let url = b.url();

    let (code, out, err) = cli(s(&["tail", "--url", &url, "--from", "all", "--limit", "5"])).await;
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[0].contains(" codex s-tail session.started"), "{out}");
    assert!(lines[2].contains("tool.requested") && lines[2].contains("tool=Bash"), "{out}");
    assert!(!out.contains('\x1b'), "no colour when stdout is not a TTY");

    let (code, out, _) =
        cli(s(&["tail", "--url", &url, "--from", "all", "--limit", "2", "--filter", r#"{"type":"tool.*"}"#])).await;
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.lines().all(|l| l.contains(" tool.")), "{out}");

    let (code, out, _) = cli(s(&["tail", "--url", &url, "--from", "all", "--limit", "5", "--timeline"])).await;
    assert_eq!(code, 0);
    assert!(out.starts_with("── session s-tail (codex)"), "{out}");
    assert!(out.contains("  ▸ run t1"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("    ") && l.contains("tool.completed")), "{out}");

    let (code, out, _) = cli(s(&["tail", "--url", &url, "--from", "all", "--limit", "1", "--json"])).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["type"], "session.started");

    // A bad filter is a refusal, not a retry loop.
    let (code, _, err) = cli(s(&["tail", "--url", &url, "--filter", r#"{"seq":1}"#])).await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("400"), "{err}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeline_from_the_log_and_from_the_collector() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    feed(&b, "s-tl").await;
    let data = dir.path().to_str().unwrap().to_owned();

    let (code, out, err) = cli(s(&["timeline", "s-tl", "--data-dir", &data])).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("session s-tl (codex) 5 events"), "{out}");
    assert!(out.contains("▸ run t1"), "{out}");
    assert!(out.contains("tool Bash (c1) completed"), "{out}");

    let (code, out2, err) = cli(s(&["timeline", "s-tl", "--url", &b.url()])).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, out2, "the log and the replay tell the same story");

    let file = dir.path().join("logs/codex/s-tl.jsonl");
    let (code, out, _) = cli(s(&["timeline", "s-tl", "--dag", "--file", file.to_str().unwrap()])).await;
    assert_eq!(code, 0);
    let done = out.lines().find(|l| l.contains("tool.completed")).unwrap();
    assert!(done.contains("─ "), "tool.completed nests under its tool.requested:\n{out}");

    let (code, _, err) = cli(s(&["timeline", "nosuch", "--data-dir", &data, "--url", &b.url()])).await;
    assert_eq!(code, 1, "{err}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adapters_list_and_verify_through_the_real_shim() {
    let (code, out, _) = cli(s(&["adapters", "--json", "--dir", "/nonexistent"])).await;
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = v.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    for id in ["claude-code", "codex", "gemini-cli", "qwen-code", "opencode", "pi"] {
        assert!(ids.contains(&id), "{ids:?}");
    }
    assert!(v.as_array().unwrap().iter().all(|m| m["status"] == "detected" || m["status"] == "not-found"));
    // An observed server's reply route is listed with its vendor, read from the vendor's spec.
    let by_id = |id: &str| v.as_array().unwrap().iter().find(|m| m["id"] == id).unwrap().clone();
    let (oc, kilo, kimi) = (by_id("opencode"), by_id("kilocode"), by_id("kimi-code"));
    assert_eq!(oc["observer"], "opencode");
    let route = oc["reply_route"].as_str().unwrap();
    assert!(route.starts_with("POST /session/{session}/permissions/{id} {response: once|always|reject}"), "{route}");
    assert!(route.contains("hook `bus`") && !route.contains("message"), "{route}");
    assert!(kilo["reply_route"].as_str().unwrap().contains("message: text"), "{kilo}");
    assert_eq!(kimi["observer"], "kimi-code");
    assert_eq!(by_id("openhands")["observer"], "openhands");
    assert!(kimi["reply_route"].as_str().unwrap().contains("/approvals/{id} {decision: approved|rejected"), "{kimi}");
    assert!(by_id("claude-code")["reply_route"].is_null() && by_id("codex")["observer"].is_null());
    let (code, text, _) = cli(s(&["adapters", "--dir", "/nonexistent"])).await;
    assert_eq!(code, 0);
    assert!(text.contains("    reply:    POST /session/{session}/permissions/{id}"), "{text}");
    assert!(text.contains("    observer: [bridges.<name>] vendor = \"kimi-code\""), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let (code, out, err) = cli(s(&["adapters", "verify", "codex", "--url", &b.url()])).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("ok codex:"), "{out}");
    let (code, out, _) =
        cli(s(&["adapters", "verify", "codex", "--url", &b.url(), "--shim", "/bin/true", "--timeout-ms", "800"])).await;
    assert_eq!(code, 1, "a shim that forwards nothing fails verification: {out}");
    b.shutdown().await;

    let m = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(m.path(), "id = \"codex\"\ndisplay_name = \"X\"\n").unwrap();
    let (code, _, err) = cli(s(&["adapters", "check", m.path().to_str().unwrap()])).await;
    assert_eq!(code, 64);
    assert!(err.contains("built-in"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_reconnects_with_backoff_after_the_bridge_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let b1 = start(config(dir.path())).await;
    feed(&b1, "s-one").await;
    let addr = b1.bound.http;
    let url = b1.url();
    // Five replayed events from the first bridge, then two from its successor.
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .args(["tail", "--url", &url, "--from", "all", "--limit", "7"])
        .env("NO_COLOR", "1")
        .env_remove("AEP_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tail");
    let stdout = Output::read(vec![Box::new(child.stdout.take().unwrap())]);
    let stderr = Output::read(vec![Box::new(child.stderr.take().unwrap())]);
    // Once the tail printed the replay, take the bridge away; once it noticed, bring the
    // successor up on the same port and data directory (a new epoch).
    let replayed = stdout.wait(WAIT, |t| t.lines().count() >= 5).await;
    assert!(replayed, "{}{}", stdout.text(), stderr.text());
    b1.shutdown().await;
    assert!(stderr.wait(WAIT, |t| t.contains("stream ended; resuming")).await, "{}", stderr.text());
    let mut cfg = config(dir.path());
    cfg.server.listen = addr;
    let b2 = start(cfg).await;
    // The tail resumes the session after its last position: whether it reconnects before or
    // after these are posted, it gets them (live, or replayed as after the old epoch).
    for p in &codex_session("s-one")[..2] {
        let (status, body) = post(format!("{}/hooks/codex", b2.url()), p.to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    let status = tokio::task::spawn_blocking(move || child.wait()).await.unwrap().unwrap();
    assert!(stdout.wait_closed(WAIT) && stderr.wait_closed(WAIT));
    let (stdout, stderr) = (stdout.text(), stderr.text());
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{stdout}");
    assert!(lines.iter().all(|l| l.contains("s-one")), "{stdout}");
    assert!(lines[5].contains("session.started"), "the successor's events: {stdout}");
    assert!(stderr.contains("resuming"), "{stderr}");
    b2.shutdown().await;
}
