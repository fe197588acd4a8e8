//! `aep-bridge import` as a process, on the real Claude Code transcript (with a subagent)
//! and the real Codex rollout the e2e suite recorded (`adapters/tests/import-data/`), each
//! beside the log the bridge wrote from the live hooks of the same run.

use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../adapters/tests/import-data");
const CLAUDE_SESSION: &str = "80825f98-6f6e-42fb-8712-4deb0e618052";
const CODEX_SESSION: &str = "01a246b3-2ef5-7723-b1b6-7c4a495a05b0";

fn claude_dir() -> PathBuf {
    Path::new(DATA).join("claude-code/projects")
}

fn codex_dir() -> PathBuf {
    Path::new(DATA).join("codex/codex-user/sessions")
}

/// Runs `aep-bridge import` with `args` into `data`; returns (exit code, stdout, stderr).
fn import(data: &Path, cfg: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .arg("import")
        .arg("--data-dir")
        .arg(data)
        .arg("--config")
        .arg(cfg)
        .args(args)
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env("HOME", data.join("no-home"))
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

/// A config naming the host as the e2e bridge did (`vm`), plus `extra`.
fn config(dir: &Path, extra: &str) -> PathBuf {
    let p = dir.join("aep-bridge.toml");
    std::fs::write(&p, format!("[server]\nhost = \"vm\"\n{extra}")).unwrap();
    p
}

fn both(claude: &Path, codex: &Path) -> Vec<String> {
    vec!["--claude".into(), claude.display().to_string(), "--codex".into(), codex.display().to_string()]
}

fn log(data: &Path, agent: &str, session: &str) -> PathBuf {
    data.join("logs").join(agent).join(format!("{session}.jsonl"))
}

fn events(p: &Path) -> Vec<Value> {
    std::fs::read_to_string(p).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `(tool name, call id)` pairs, in order.
type Calls = Vec<(String, String)>;

/// `(tool name, call id)` of every `tool.requested`, and of every outcome, in order.
fn tool_calls(events: &[Value]) -> (Calls, Calls) {
    let pick = |pred: &dyn Fn(&str) -> bool| {
        events
            .iter()
            .filter(|e| pred(e["type"].as_str().unwrap()))
            .map(|e| {
                (
                    e["data"]["tool"]["name"].as_str().unwrap().to_owned(),
                    e["data"]["tool"]["call_id"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    (pick(&|t| t == "tool.requested"), pick(&|t| matches!(t, "tool.completed" | "tool.failed" | "tool.denied")))
}

fn validate_strict(p: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge")).arg("validate").arg("--strict").arg(p).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap())
}

#[test]
fn imports_real_history_that_validates_and_matches_the_live_hooks() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "");
    let args = both(&claude_dir(), &codex_dir());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out, err) = import(&data, &cfg, &args);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("claude-code") && out.contains("imported 1 session(s), 14 event(s)"), "{out}");
    assert!(out.contains("codex") && out.contains("imported 1 session(s), 8 event(s)"), "{out}");
    assert!(err.is_empty(), "{err}");
    for (agent, session) in [("claude-code", CLAUDE_SESSION), ("codex", CODEX_SESSION)] {
        let p = log(&data, agent, session);
        // Valid AEP, and complete: runs closed, every tool request answered, in order.
        let (code, report) = validate_strict(&p);
        assert_eq!(code, 0, "{report}");
        assert!(!report.contains("warning"), "{report}");
        // The tool calls the live hooks produced for the same run, in the same order.
        let live_log = match agent {
            "codex" => Path::new(DATA).join(format!("codex/codex-user/live/{session}.jsonl")),
            _ => Path::new(DATA).join(format!("claude-code/live/{session}.jsonl")),
        };
        let (got, live) = (events(&p), events(&live_log));
        assert_eq!(tool_calls(&got), tool_calls(&live), "{agent}");
        assert!(!tool_calls(&got).0.is_empty());
        // The records' own times, never the import's clock.
        assert!(got.iter().all(|e| e["time"].as_str().unwrap().starts_with("2026-12-05T14:54:")));
        assert_eq!(got[0]["source"], live[0]["source"]);
    }

    // Twice: nothing added, byte for byte; and the epoch state is not bumped for nothing.
    let before: Vec<Vec<u8>> = [log(&data, "claude-code", CLAUDE_SESSION), log(&data, "codex", CODEX_SESSION)]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let epoch = std::fs::read_to_string(data.join("state/epoch")).unwrap();
    let (code, out, _) = import(&data, &cfg, &args);
    assert_eq!(code, 0);
    assert_eq!(out.matches("imported 0 session(s), 0 event(s); skipped 1 already logged").count(), 2, "{out}");
    let after: Vec<Vec<u8>> = [log(&data, "claude-code", CLAUDE_SESSION), log(&data, "codex", CODEX_SESSION)]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    assert_eq!(before, after);
    assert_eq!(epoch, std::fs::read_to_string(data.join("state/epoch")).unwrap());
}

#[test]
fn a_session_logged_live_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "");
    let live = log(&data, "claude-code", CLAUDE_SESSION);
    std::fs::create_dir_all(live.parent().unwrap()).unwrap();
    std::fs::copy(Path::new(DATA).join(format!("claude-code/live/{CLAUDE_SESSION}.jsonl")), &live).unwrap();
    let before = std::fs::read(&live).unwrap();
    let claude = claude_dir().display().to_string();
    let (code, out, err) = import(&data, &cfg, &["--claude", &claude, "--codex", "/nonexistent"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported 0 session(s), 0 event(s); skipped 1 already logged"), "{out}");
    assert!(out.contains("codex: no history folder"), "{out}");
    assert_eq!(std::fs::read(&live).unwrap(), before);
}

#[test]
fn since_filters_and_dry_run_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(dir.path(), "");
    let args = both(&claude_dir(), &codex_dir());
    let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
    a.extend(["--since", "2026-12-06"]);
    let (code, out, _) = import(&data, &cfg, &a);
    assert_eq!(code, 0);
    assert_eq!(
        out.matches("imported 0 session(s), 0 event(s); skipped 0 already logged, 1 before --since").count(),
        2,
        "{out}"
    );
    assert!(!data.join("logs").exists());
    a.pop();
    a.push("2026-12-05T14:54:30Z");
    a.push("--dry-run");
    let (code, out, _) = import(&data, &cfg, &a);
    assert_eq!(code, 0);
    assert!(out.contains("codex") && out.contains("would import 1 session(s), 8 event(s)"), "{out}");
    assert!(out.contains("would import 0 session(s), 0 event(s); skipped 0 already logged, 1 before --since"), "{out}");
    assert!(!data.join("logs").exists());
    let (code, _, err) = import(&data, &cfg, &["--since", "yesterday"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("neither YYYY-MM-DD"), "{err}");
}

#[test]
fn malformed_lines_warn_per_file_a_torn_last_line_waits_and_nothing_else_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    // The clean import, for reference.
    let clean = dir.path().join("clean");
    let (code, _, _) =
        import(&clean, &cfg, &["--claude", "/nonexistent", "--codex", &codex_dir().display().to_string()]);
    assert_eq!(code, 0);
    // The same rollout with a junk line in the middle and a record cut short at the end.
    let sessions = dir.path().join("sessions/2026/12/05");
    std::fs::create_dir_all(&sessions).unwrap();
    let name = format!("rollout-2026-12-05T14-54-37-{CODEX_SESSION}.jsonl");
    let text = std::fs::read_to_string(codex_dir().join("2026/12/05").join(&name)).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(10, "{\"timestamp\": \"2026-12-05T14:54:37.915Z\", \"type\": \"event_msg\", \"payl");
    let mut broken = lines.join("\n");
    broken.push_str("\n{\"timestamp\": \"2026-12-05T14:54:39.000Z\", \"ordinal\": 99, \"type\": \"event_m");
    let broken_file = sessions.join(&name);
    std::fs::write(&broken_file, broken).unwrap();
    let data = dir.path().join("data");
    let (code, out, err) = import(
        &data,
        &cfg,
        &["--claude", "/nonexistent", "--codex", &dir.path().join("sessions").display().to_string()],
    );
    assert_eq!(code, 0, "{err}");
    // The junk line is skipped with a warning; the record cut short at the end is one the
    // agent is still writing: not yet a record, a note, never a warning.
    let warning =
        format!("aep-bridge import: warning: {}: 1 line(s) skipped (line 11: not JSON", broken_file.display());
    assert!(err.contains(&warning), "{err}");
    assert_eq!(err.lines().count(), 1, "one warning line per file: {err}");
    assert!(out.contains("1 file(s) with skipped lines"), "{out}");
    let note = format!("note: {}: its last line is still being written", broken_file.display());
    assert!(out.contains(&note), "{out}");
    // Every other record made it: the log is the clean import's, byte for byte.
    assert_eq!(
        std::fs::read(log(&data, "codex", CODEX_SESSION)).unwrap(),
        std::fs::read(log(&clean, "codex", CODEX_SESSION)).unwrap()
    );
}

/// What the test receiver took: OTLP log record times and spans `(name, start, end)`.
#[derive(Default)]
struct Seen {
    log_times: Mutex<Vec<u64>>,
    spans: Mutex<Vec<(String, u64, u64)>>,
}

fn body(headers: &HeaderMap, body: &Bytes) -> Vec<u8> {
    let mut raw = Vec::new();
    if headers.get("content-encoding").is_some_and(|v| v == "gzip") {
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut raw).unwrap();
    } else {
        raw = body.to_vec();
    }
    raw
}

async fn receiver(seen: Arc<Seen>) -> SocketAddr {
    let app = axum::Router::new()
        .route(
            "/v1/logs",
            axum::routing::post(|State(seen): State<Arc<Seen>>, h: HeaderMap, b: Bytes| async move {
                let req = ExportLogsServiceRequest::decode(&body(&h, &b)[..]).unwrap();
                let times = req.resource_logs.into_iter().flat_map(|r| r.scope_logs).flat_map(|s| s.log_records);
                seen.log_times.lock().unwrap().extend(times.map(|r| r.time_unix_nano));
                ([("content-type", "application/x-protobuf")], Vec::new())
            }),
        )
        .route(
            "/v1/traces",
            axum::routing::post(|State(seen): State<Arc<Seen>>, h: HeaderMap, b: Bytes| async move {
                let req = ExportTraceServiceRequest::decode(&body(&h, &b)[..]).unwrap();
                let spans = req.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
                seen.spans
                    .lock()
                    .unwrap()
                    .extend(spans.map(|s| (s.name, s.start_time_unix_nano, s.end_time_unix_nano)));
                ([("content-type", "application/x-protobuf")], Vec::new())
            }),
        )
        .with_state(seen);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

fn nanos(t: &str) -> u64 {
    aep_schemas::time::parse_rfc3339_nanos(t).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_sends_spans_and_logs_with_the_original_timestamps() {
    let seen = Arc::new(Seen::default());
    let addr = receiver(seen.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let cfg = config(
        dir.path(),
        &format!(
            "[export.otlp]\nendpoint = \"http://{addr}\"\nprotocol = \"http/protobuf\"\nbatch_timeout_ms = 50\nspan_grace_ms = 0\nmetrics = false\n\
             "
        ),
    );
    let codex = codex_dir().display().to_string();
    let (code, out, err, times) = tokio::task::spawn_blocking(move || {
        let (code, out, err) = import(&data, &cfg, &["--claude", "/nonexistent", "--codex", &codex]);
        let times: Vec<u64> =
            events(&log(&data, "codex", CODEX_SESSION)).iter().map(|e| nanos(e["time"].as_str().unwrap())).collect();
        (code, out, err, times)
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("export otlp_logs: 8 delivered, 0 failed"), "{out}");
    // Every event went out as a log record at its own time.
    let mut logs = seen.log_times.lock().unwrap().clone();
    logs.sort_unstable();
    let mut want = times.clone();
    want.sort_unstable();
    assert_eq!(logs, want);
    // The spans sit at the session's original times: the session span from its first to
    // its last record, the tool spans inside it.
    let spans = seen.spans.lock().unwrap().clone();
    assert!(!spans.is_empty(), "{out}");
    let (first, last) = (*want.first().unwrap(), *want.last().unwrap());
    assert!(spans.iter().all(|(_, s, e)| *s >= first && *e <= last && s <= e), "{spans:?}");
    let tool = spans.iter().find(|(n, _, _)| n.contains("Bash")).expect("a tool span");
    assert_eq!(tool.1, nanos("2026-12-05T14:54:37.913Z"), "{spans:?}");
    assert!(spans.iter().any(|(_, s, e)| *s == first && *e == last), "the session span: {spans:?}");
}

#[test]
fn one_vendor_session_in_two_files_is_imported_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let src = claude_dir().join("-root--cache-aep-e2e-work-claude-project").join(format!("{CLAUDE_SESSION}.jsonl"));
    for project in ["a", "b"] {
        let d = dir.path().join("projects").join(project);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(&src, d.join(format!("{CLAUDE_SESSION}.jsonl"))).unwrap();
    }
    let data = dir.path().join("data");
    let projects = dir.path().join("projects").display().to_string();
    let (code, out, err) = import(&data, &cfg, &["--claude", &projects, "--codex", "/nonexistent"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("imported 1 session(s), 12 event(s); skipped 1 already logged"), "{out}");
    assert!(err.contains("is in more than one file; the first is imported"), "{err}");
    let (code, report) = validate_strict(&log(&data, "claude-code", CLAUDE_SESSION));
    assert_eq!(code, 0, "{report}");
}
