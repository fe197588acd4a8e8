//! The hostile suite: a broken or hostile local client against a real `serve` on
//! 127.0.0.1:0: nothing stalls the agent, memory and connections stay bounded, the token
//! covers every ingress, and nothing acknowledged is lost.
//!
//! Tested here: connections and timeouts, the token on OTLP, the decode budget, a full
//! disk, acknowledged after written. The other hostile cases live beside their components,
//! against the same real parts:
//!
//! | case | test |
//! |---|---|
//! | shim hold budget without an answer channel | `shim::without_a_token_a_permission_moment_is_not_held` |
//! | shim budget over a whole exchange | `shim::a_large_payload_to_a_mute_listener_fails_open_within_one_budget` |
//! | replay buffer in bytes | `collector::buffer::tests::the_byte_bound_evicts_oldest_first_here_then_from_idle_sessions` |
//! | stalled readers and subscribers | `collector_memory` |
//! | filter size | `collector::oversized_subscription_filters_are_refused` |
//! | duplicate JSON keys | `collector::duplicate_json_keys_are_refused_on_every_binding` |
//! | reply size, fake listener | `shim::an_oversized_reply_is_refused_and_answered_neutrally`, `shim::a_listener_that_cannot_prove_its_reply_is_not_relayed` |
//! | off-host without a token, token out of argv | `cli_config::serve_refuses_an_off_host_listener_without_a_token`, `cli_config::serve_takes_its_token_from_the_environment_or_a_file` |
//! | descriptors: idle gRPC connections under `ulimit -n` 1,024 | `cli_hostile::idle_grpc_connections_leave_room_for_hooks_and_health` |
//! | gRPC exports multiplexed on one connection, malformed protobuf | `otlp_grpc::concurrent_exports_on_one_connection_all_complete`, `otlp_grpc::malformed_protobuf_is_invalid_argument` |
//! | hook names and session ids | `hooks::tests::hostile_hook_names_and_session_ids_are_refused`, `serve::hostile_session_ids_stay_inside_the_log_root` |
//! | WebSocket message size | `collector::an_oversized_websocket_message_closes_only_its_connection` |
//! | Codex records without a session | `export_otlp::a_second_bridge_receives_the_logs_and_reports_partial_success` (`no_session` counted and rejected in `partial_success`) |
//! | Qwen headless sessions | `adapters/tests/qwen_code.rs`, `hooks::tests::a_silent_headless_session_ends_once_as_timeout` |
//! | Gemini concurrent tools | `adapters/tests/gemini_cli.rs::concurrent_tool_calls_pair_by_their_input_in_every_order` |
//! | JSONC settings | `cli_install::jsonc_settings_with_comments_and_trailing_commas_install_and_keep_the_comments` |
//! | effective `aep.capture` | `projections::otlp_logs::tests::ceiling_strips_payload_before_projection` |
//!
//! The load figures (idle connections on every port, stalled subscribers and replays, an
//! HTTP flood, exports multiplexed on one gRPC connection) come from `aep-bench hostile`,
//! not from a test: no wall-clock assertion here.

use aep_testkit as common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{config, get, log_lines, post, start, tree_lines};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use serde_json::{Value, json};

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.into())) }),
        ..Default::default()
    }
}

/// A Codex-shaped OTLP logs export of `n` records for conversation `session`.
fn codex_export(session: &str, n: usize, pad: usize) -> ExportLogsServiceRequest {
    let rec = |i: usize| LogRecord {
        observed_time_unix_nano: 1_796_000_000_000_000_000 + i as u64,
        attributes: vec![
            kv("event.name", "codex.tool_result"),
            kv("conversation.id", session),
            kv("tool_name", "shell"),
            kv("call_id", &format!("c{i}")),
            kv("arguments", &"x".repeat(pad)),
        ],
        ..Default::default()
    };
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![kv("service.name", "codex_exec")], ..Default::default() }),
            scope_logs: vec![ScopeLogs { log_records: (0..n).map(rec).collect(), ..Default::default() }],
            ..Default::default()
        }],
    }
}

/// POSTs raw bytes; status, headers as text, body.
async fn post_bytes(url: String, body: Vec<u8>, headers: Vec<(&'static str, String)>) -> (u16, String, String) {
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.post(&url);
        for (k, v) in &headers {
            req = req.header(*k, v);
        }
        let mut resp = req.send(&body[..]).expect("request failed");
        let status = resp.status().as_u16();
        let hdrs = format!("{:?}", resp.headers());
        (status, hdrs, resp.body_mut().read_to_string().unwrap_or_default())
    })
    .await
    .unwrap()
}

/// Every complete line of every file under `{data}/logs`.
fn all_log_lines(data: &Path) -> Vec<String> {
    tree_lines(&data.join("logs"))
}

/// With a token, OTLP over HTTP (main and extra port) and gRPC needs it too;
/// refused records never reach a session log.
#[tokio::test]
async fn the_token_covers_otlp_over_http_on_both_ports_and_grpc() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = "s3cret-token".into();
    cfg.server.otlp_http = Some("127.0.0.1:0".parse().unwrap());
    cfg.server.otlp_grpc = Some("127.0.0.1:0".parse().unwrap());
    let bridge = start(cfg).await;
    let body = codex_export("tok-sess", 2, 0).encode_to_vec();
    let pb = ("content-type", "application/x-protobuf".to_owned());
    let auth = ("authorization", "Bearer s3cret-token".to_owned());
    let wrong = ("authorization", "Bearer nope".to_owned());
    let main = format!("{}/v1/logs", bridge.url());
    let extra = format!("http://{}/v1/logs", bridge.bound.otlp_http.unwrap());
    for url in [&main, &extra] {
        let (st, hdrs, text) = post_bytes(url.clone(), body.clone(), vec![pb.clone()]).await;
        assert_eq!(st, 401, "{url}: {text}");
        assert!(hdrs.to_lowercase().contains("www-authenticate"), "{hdrs}");
        let (st, _, _) = post_bytes(url.clone(), body.clone(), vec![pb.clone(), wrong.clone()]).await;
        assert_eq!(st, 401, "{url}: a wrong token");
    }
    let grpc = format!("http://{}", bridge.bound.otlp_grpc.unwrap());
    let mut client = LogsServiceClient::connect(grpc).await.unwrap();
    let err = client.export(codex_export("tok-sess", 2, 0)).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unauthenticated, "{err:?}");

    let (st, _, text) = post_bytes(main.clone(), body.clone(), vec![pb.clone(), auth.clone()]).await;
    assert_eq!(st, 200, "{text}");
    let mut req = tonic::Request::new(codex_export("tok-sess-grpc", 2, 0));
    req.metadata_mut().insert("authorization", "Bearer s3cret-token".parse().unwrap());
    client.export(req).await.unwrap();
    // Exports reach the log in the order they were taken: once the last one is written, a
    // refused one taken before it would be there too.
    bridge.wait_lines(&bridge.data.join("logs/codex/tok-sess-grpc.jsonl"), 2).await;
    let lines = all_log_lines(&bridge.data);
    assert_eq!(lines.len(), 4, "nothing unauthenticated was written: {lines:?}");
    bridge.shutdown().await;
}

/// Idle connections are closed after the header timeout, a connection over the
/// cap is answered 503 at once, and `/healthz` answers again as soon as room is back.
// Blocking socket reads below: the bridge runs on the other workers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_bounded_and_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.max_connections = 16;
    cfg.server.header_timeout_ms = 400;
    let bridge = start(cfg).await;
    let addr = bridge.bound.http;
    // The kernel queues connections in connect order and the listener takes its slots in
    // accept order: the next one is over the cap.
    let idle: Vec<TcpStream> = (0..16).map(|_| TcpStream::connect(addr).unwrap()).collect();
    // Over the cap: an immediate 503 and a close, not a hang.
    let mut over = TcpStream::connect(addr).unwrap();
    over.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut text = String::new();
    let _ = over.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 503"), "{text:?}");
    assert!(text.to_lowercase().contains("retry-after: 1"), "{text}");
    // The idle ones are closed by the bridge after the header timeout.
    let t0 = Instant::now();
    for mut s in idle {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "closed by the bridge");
    }
    assert!(t0.elapsed() < Duration::from_secs(5));
    let (st, _) = get(format!("{}/healthz", bridge.url())).await;
    assert_eq!(st, 200);
    let (_, m) = get(format!("{}/metrics", bridge.url())).await;
    assert!(aep_testkit::metric_sum(&m, "aep_bridge_requests_rejected_total", &["reason=\"connections\""]) >= 1, "{m}");
    bridge.shutdown().await;
}

/// A body that trickles is cut at the body deadline; a held request in flight is
/// not cut by the idle clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickled_body_is_cut_at_its_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.body_timeout_ms = 300;
    cfg.server.idle_timeout_ms = 200;
    let bridge = start(cfg).await;
    let mut s = TcpStream::connect(bridge.bound.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "POST /hooks/claude-code HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{{\"a\":",
        bridge.bound.http
    )
    .unwrap();
    let t0 = Instant::now();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(4), "cut after {waited:?}: {text:?}");
    assert!(text.is_empty() || text.starts_with("HTTP/1.1 4"), "{text}");
    bridge.shutdown().await;
}

/// OTLP/HTTP exports are admitted by decompressed bytes in flight: with one
/// export's worth of budget taken, the next is refused with 503 + Retry-After (retried by
/// exporters), and taken once the budget is back. Nothing is lost across the retry.
#[tokio::test]
async fn concurrent_large_exports_are_admitted_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.otlp_in.max_decode_bytes = 2 * 1024 * 1024;
    let bridge = start(cfg).await;
    let url = format!("{}/v1/logs", bridge.url());
    // Eight concurrent 1.5 MB exports: at most one fits the budget at a time.
    let mut tasks = Vec::new();
    for i in 0..8 {
        let body = codex_export(&format!("flood-{i}"), 100, 15_000).encode_to_vec();
        let url = url.clone();
        // As an exporter does: 503 and a connection cut mid-body (the bridge does not read
        // a large refused body to the end) are both retried.
        tasks.push(tokio::task::spawn_blocking(move || {
            let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
            let mut refused = 0;
            loop {
                match agent.post(&url).header("content-type", "application/x-protobuf").send(&body[..]) {
                    Ok(r) if r.status() == 200 => return refused,
                    Ok(r) if r.status() == 503 => {
                        assert!(r.headers().contains_key("retry-after"), "{:?}", r.headers());
                        refused += 1;
                    }
                    Ok(mut r) => panic!("{}: {}", r.status(), r.body_mut().read_to_string().unwrap_or_default()),
                    Err(_) => refused += 1,
                }
                // An exporter's backoff before a retry: part of the client being modelled.
                std::thread::sleep(Duration::from_millis(20));
            }
        }));
    }
    let mut refused = 0;
    for t in tasks {
        refused += t.await.unwrap();
    }
    eprintln!("8 concurrent 1.5 MB exports: {refused} refusals (503 or cut) before all were taken");
    bridge.logged(800).await;
    assert_eq!(all_log_lines(&bridge.data).len(), 800);
    bridge.shutdown().await;
}

/// A full disk (the log file is `/dev/full`, the state folder cannot take a new
/// file): the bridge still starts, hooks are still answered, `/healthz` names the failing
/// sink with 503, and every lost event is counted.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_full_disk_is_reported_counted_and_survived() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    std::fs::create_dir_all(data.join("state")).unwrap();
    std::fs::write(data.join("state/epoch"), "7\n").unwrap();
    std::os::unix::fs::symlink("/dev/full", data.join("state/epoch.tmp")).unwrap();
    let log = aep_bridge::sinks::jsonl::log_path(data, "codex", Some("full-1"));
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    let bridge = start(config(data)).await;
    assert_eq!(bridge.epoch, 8, "the epoch was bumped in place");
    let hooks = common::codex_session("full-1");
    for h in &hooks {
        let (st, body) = post(format!("{}/hooks/codex", bridge.url()), h.to_string(), vec![]).await;
        assert_eq!(st, 200, "hooks fail open: {body}");
    }
    let (st, body) = get(format!("{}/healthz", bridge.url())).await;
    assert_eq!(st, 503, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["failing"]["jsonl"].as_str().is_some_and(|m| m.contains("No space left")), "{body}");
    let (_, m) = get(format!("{}/metrics", bridge.url())).await;
    let events = aep_testkit::metric_sum(&m, "aep_bridge_events_in_total", &["gen_ai_agent_name=\"codex\""]);
    assert!(events >= hooks.len() as u64, "{m}");
    assert_eq!(
        aep_testkit::metric_sum(&m, "aep_bridge_events_dropped_total", &["sink=\"jsonl\""]),
        events,
        "every lost event counted: {m}"
    );
    bridge.shutdown().await;
}

/// A hook is answered only once its events are in the log file: each line is
/// there the moment its answer arrives (before, the writer's linger made this a race).
#[tokio::test]
async fn a_hook_is_answered_after_its_event_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let log = aep_bridge::sinks::jsonl::log_path(&bridge.data, "claude-code", Some("ack-1"));
    for i in 0..60 {
        let hook = json!({"session_id": "ack-1", "hook_event_name": "Notification", "message": format!("n{i}")});
        let (st, body) = post(format!("{}/hooks/claude-code", bridge.url()), hook.to_string(), vec![]).await;
        assert_eq!(st, 200, "{body}");
        let lines = log_lines(&log).len();
        assert!(lines > i, "answer {i} arrived before its line was written ({lines} lines)");
    }
    bridge.shutdown().await;
}
