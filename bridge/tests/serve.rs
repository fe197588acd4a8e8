//! The daemon end to end over real sockets: hooks in, JSONL out, a second bridge's embedded
//! collector as the upstream relay, restarts, concurrency, hostile ids.

use aep_testkit as common;

use common::*;
use serde_json::Value;

fn parse(lines: &[String]) -> Vec<Value> {
    lines.iter().map(|l| serde_json::from_str(l).expect("torn or invalid JSONL line")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_reach_jsonl_and_the_relay_in_order() {
    let relay_dir = tempfile::tempdir().unwrap();
    let relay = start(config(relay_dir.path())).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.relay.url = Some(relay.url().parse().unwrap());
    let bridge = start(cfg).await;

    for p in codex_session("s-relay") {
        let (status, body) = post(format!("{}/hooks/codex", bridge.url()), p.to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    let local = bridge.wait_lines(&dir.path().join("logs/codex/s-relay.jsonl"), 5).await;
    let events = parse(&local);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    assert!(events.iter().all(|e| e["epoch"] == bridge.epoch));
    assert_eq!(events[0]["type"], "session.started");
    assert_eq!(events[3]["cause"], events[2]["id"], "tool.completed is caused by its tool.requested");

    // The relay (a second bridge's collector) logs exactly what it received, byte for byte.
    let upstream = relay.wait_lines(&relay_dir.path().join("logs/codex/s-relay.jsonl"), 5).await;
    assert_eq!(upstream, local);
    let (_, health) = get(format!("{}/healthz", bridge.url())).await;
    assert_eq!(serde_json::from_str::<Value>(&health).unwrap(), serde_json::json!({"ok": true, "relay": true}));
    bridge.shutdown().await;
    relay.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relay_down_at_start_then_up_then_dies_then_back() {
    // Reserve a port for the relay, then start the bridge while nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.relay.url = Some(format!("http://127.0.0.1:{port}").parse().unwrap());
    let bridge = start(cfg).await;
    let session = codex_session("s-late");
    for p in &session[..3] {
        post(format!("{}/hooks/codex", bridge.url()), p.to_string(), vec![]).await;
    }
    let (_, health) = get(format!("{}/healthz", bridge.url())).await;
    assert!(health.contains("\"relay\":false"), "{health}");

    let relay_dir = tempfile::tempdir().unwrap();
    let mut rcfg = config(relay_dir.path());
    rcfg.server.listen = format!("127.0.0.1:{port}").parse().unwrap();
    let relay = start(rcfg).await;
    let got = relay.wait_lines(&relay_dir.path().join("logs/codex/s-late.jsonl"), 3).await;
    let seqs: Vec<u64> = parse(&got).iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2], "queued events arrive once, in order");

    // The relay dies mid-stream; events keep queuing; a new relay on the same port gets them.
    relay.shutdown().await;
    for p in &session[3..] {
        post(format!("{}/hooks/codex", bridge.url()), p.to_string(), vec![]).await;
    }
    let relay_dir2 = tempfile::tempdir().unwrap();
    let mut rcfg2 = config(relay_dir2.path());
    rcfg2.server.listen = format!("127.0.0.1:{port}").parse().unwrap();
    let relay2 = start(rcfg2).await;
    let got2 = relay2.wait_lines(&relay_dir2.path().join("logs/codex/s-late.jsonl"), 2).await;
    let seqs2: Vec<u64> = parse(&got2).iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs2, [3, 4], "nothing lost or repeated across the reconnect");
    // The relay delivers in order: once an event sent after them arrived, a repeat of the
    // earlier ones would have too.
    post(format!("{}/hooks/codex", bridge.url()), codex_session("s-later")[0].to_string(), vec![]).await;
    relay2.wait_lines(&relay_dir2.path().join("logs/codex/s-later.jsonl"), 1).await;
    assert_eq!(log_lines(&relay_dir2.path().join("logs/codex/s-late.jsonl")).len(), 2);
    bridge.shutdown().await;
    relay2.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_bumps_the_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let first = start(config(dir.path())).await;
    post(format!("{}/hooks/codex", first.url()), codex_session("s-epoch")[0].to_string(), vec![]).await;
    first.wait_lines(&dir.path().join("logs/codex/s-epoch.jsonl"), 1).await;
    let e1 = first.epoch;
    first.shutdown().await;
    let second = start(config(dir.path())).await;
    assert!(second.epoch > e1);
    post(format!("{}/hooks/codex", second.url()), codex_session("s-epoch")[1].to_string(), vec![]).await;
    let lines = parse(&second.wait_lines(&dir.path().join("logs/codex/s-epoch.jsonl"), 2).await);
    assert_eq!((lines[0]["epoch"].as_u64(), lines[0]["seq"].as_u64()), (Some(e1), Some(0)));
    assert_eq!((lines[1]["epoch"].as_u64(), lines[1]["seq"].as_u64()), (Some(second.epoch), Some(0)));
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_writers_never_tear_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let url = format!("{}/hooks/codex", bridge.url());
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                // A large payload field makes each line long (the tool output is digested, not copied).
                let p = serde_json::json!({"hook_event_name": "PostToolUse", "session_id": "s-shared", "turn_id": format!("t{w}"),
                    "tool_name": "Bash", "tool_use_id": format!("c{w}-{i}"), "tool_response": "x".repeat(20_000)});
                let (s, _) = post(url.clone(), p.to_string(), vec![]).await;
                assert_eq!(s, 200);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let lines = bridge.wait_lines(&dir.path().join("logs/codex/s-shared.jsonl"), 200).await;
    let events = parse(&lines);
    assert_eq!(events.len(), 200);
    let mut seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let in_file_order = seqs.clone();
    seqs.sort_unstable();
    assert_eq!(in_file_order, seqs, "lines are written in (epoch, seq) order");
    assert_eq!(seqs, (0..200).collect::<Vec<_>>());
    bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_session_ids_stay_inside_the_log_root() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let p = serde_json::json!({"hook_event_name": "SessionStart", "session_id": "../../etc/x", "source": "startup"});
    let (s, _) = post(format!("{}/hooks/codex", bridge.url()), p.to_string(), vec![]).await;
    assert_eq!(s, 200);
    bridge.shutdown().await;
    let mut files = Vec::new();
    for entry in walk(dir.path()) {
        files.push(entry);
    }
    let logs: Vec<_> = files.iter().filter(|f| f.extension().is_some_and(|e| e == "jsonl")).collect();
    assert_eq!(logs.len(), 1, "{files:?}");
    assert!(logs[0].starts_with(dir.path().join("logs/codex")), "{}", logs[0].display());
    let ev: Value = serde_json::from_str(std::fs::read_to_string(logs[0]).unwrap().trim()).unwrap();
    assert_eq!(ev["session"], "../../etc/x", "the id itself is carried verbatim");
    assert!(!dir.path().parent().unwrap().join("etc/x.jsonl").exists());
}

fn walk(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_names_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.listen = taken.local_addr().unwrap();
    let err = aep_bridge::server::serve(cfg, tokio_util::sync::CancellationToken::new(), |_, _| {}).await.unwrap_err();
    assert!(err.to_string().contains("--listen"), "{err}");
}
