//! Hook calls read late keep their session's order. A bridge that was stopped reads a
//! backlog of calls whose shims already gave up (their `x-aep-deadline` passed), all at once
//! and in any order: it writes them in the order the shims sent them (`x-aep-sent`), or
//! drops one that a later call has overtaken (409, counted), with the outcome that depends
//! on it. Every log passes the completeness rules of `validate --strict`.

use aep_testkit as common;

use common::*;
use serde_json::Value;

fn types(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_owned())
        .collect()
}

/// `validate --strict`'s verdict on a log: its spec failures and completeness warnings.
fn strict_findings(path: &std::path::Path) -> Vec<String> {
    let r = aep_schemas::report::validate_report(std::io::BufReader::new(std::fs::File::open(path).unwrap())).unwrap();
    r.failures.iter().chain(&r.warnings).map(ToString::to_string).collect()
}

fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as u64
}

/// The headers of a call sent at `sent_us` whose shim stopped waiting at `deadline_ms`.
fn timing(sent_us: u64, deadline_ms: u64) -> Vec<(String, String)> {
    vec![("x-aep-sent".into(), sent_us.to_string()), ("x-aep-deadline".into(), deadline_ms.to_string())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_read_in_any_order_is_written_in_send_order() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = format!("{}/hooks/codex", bridge.url());
    // The reference: the same session's calls answered one by one.
    for p in codex_session("s-ref") {
        assert_eq!(post(url.clone(), p.to_string(), vec![]).await.0, 200);
    }
    let reference = dir.path().join("logs/codex/s-ref.jsonl");
    bridge.wait_lines(&reference, 5).await;

    // The backlog of a stopped bridge: five calls sent 1 ms apart a second ago, whose shims
    // all gave up (deadlines passed), read last call first.
    let t0 = now_us() - 1_000_000;
    let calls = codex_session("s-late");
    let mut tasks = Vec::new();
    for (i, p) in calls.iter().enumerate().rev() {
        let sent = t0 + i as u64 * 1000;
        tasks.push(tokio::spawn(post(url.clone(), p.to_string(), timing(sent, sent / 1000 + 250))));
    }
    for t in tasks {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    let late = dir.path().join("logs/codex/s-late.jsonl");
    bridge.wait_lines(&late, 5).await;
    assert_eq!(types(&late), types(&reference), "written in the order the shims sent them");
    assert_eq!(strict_findings(&late), Vec::<String>::new());

    // A call sent before the last one written cannot be placed any more: it is refused and
    // counted, never written after what followed it; the outcome of its request, arriving
    // on time later, is dropped with it (no outcome without its request).
    let pre = serde_json::json!({"hook_event_name": "PreToolUse", "session_id": "s-late", "turn_id": "t1",
        "tool_name": "Bash", "tool_use_id": "c2", "tool_input": {"command": "pwd"}});
    let behind = t0 + 3_500;
    let (status, body) = post(url.clone(), pre.to_string(), timing(behind, behind / 1000 + 250)).await;
    assert_eq!(status, 409, "{body}");
    assert!(body.contains("later hook call of this session is already recorded"), "{body}");
    let post_c2 = serde_json::json!({"hook_event_name": "PostToolUse", "session_id": "s-late", "turn_id": "t1",
        "tool_name": "Bash", "tool_use_id": "c2", "tool_response": "ok"});
    let sent = now_us();
    assert_eq!(post(url.clone(), post_c2.to_string(), timing(sent, sent / 1000 + 3000)).await.0, 200);
    // A marker call after it: once it is in the log, so would the outcome be.
    let marker = serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": "s-late", "turn_id": "t2",
        "prompt": "next"});
    assert_eq!(post(url.clone(), marker.to_string(), vec![]).await.0, 200);
    let lines = bridge.wait_lines(&late, 6).await;
    assert!(!lines.iter().any(|l| l.contains("\"c2\"")), "the dropped call or its outcome was written: {lines:#?}");
    assert_eq!(strict_findings(&late), Vec::<String>::new());
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    assert_eq!(
        metric_sum(&metrics, "aep_bridge_requests_rejected_total", &["reason=\"out_of_order\""]),
        1,
        "{metrics}"
    );
    assert_eq!(metric_sum(&metrics, "aep_bridge_events_dropped_total", &["sink=\"hook_order\""]), 1, "{metrics}");
    bridge.shutdown().await;
}

/// A call whose caller hung up before the bridge read it (its whole request and the end of
/// its connection both waiting in the socket, as a stopped bridge finds its backlog) is
/// still handled and written: the request is read and handled whatever the connection does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_caller_already_hung_up_is_written() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let addr = bridge.bound.http;
    let n = 20;
    tokio::task::spawn_blocking(move || {
        for i in 0..n {
            let body = serde_json::json!({"hook_event_name": "SessionStart", "session_id": format!("gone-{i}"),
                "source": "startup"})
            .to_string();
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let req = format!(
                "POST /hooks/codex HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            // The request and the connection's end at once, then gone without reading.
            c.write_all(req.as_bytes()).unwrap();
            c.shutdown(std::net::Shutdown::Write).unwrap();
        }
    })
    .await
    .unwrap();
    // Each call writes its session's start: all twenty reach the log.
    bridge.logged(n as u64).await;
    let logs = dir.path().join("logs/codex");
    let written = (0..n).filter(|i| logs.join(format!("gone-{i}.jsonl")).is_file()).count();
    assert_eq!(written, n, "abandoned calls written");
    bridge.shutdown().await;
}
