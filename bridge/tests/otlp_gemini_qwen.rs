//! Gemini CLI and Qwen Code OTLP profiles over real sockets, on their real exports: the
//! recorded hook payloads of a run through `/hooks/{vendor}/{event}` and the same run's
//! recorded OTLP/JSON log exports through `/v1/logs` into a real `serve`. Every record is
//! taken (no `partialSuccess`), lands in the hook session's one log and the log validates;
//! primary mode opens the session and ends the tools from OTLP alone; an unknown service
//! is refused unless `[otlp_in.generic]` names a vendor for it.

use aep_testkit as common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/otlp-captures");
const HOOKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/tests/data");

/// One recorded run: its hook capture, its OTLP exports, its vendor and session.
struct Run {
    vendor: &'static str,
    hooks: &'static str,
    exports: [&'static str; 2],
    session: &'static str,
}

const GEMINI: Run = Run {
    vendor: "gemini-cli",
    hooks: "gemini-cli/g01_tools_yolo_http.jsonl",
    exports: ["gemini-cli/g01_0001_logs.json", "gemini-cli/g01_0003_logs.json"],
    session: "ed93f2bc-8abb-4a4a-aaad-c1b58706087a",
};

const QWEN: Run = Run {
    vendor: "qwen-code",
    hooks: "qwen-code/q01_tools_yolo_http.jsonl",
    exports: ["qwen-code/q01_0001_logs.json", "qwen-code/q01_0003_logs.json"],
    session: "8a03b421-4c8f-40ab-9b43-04b98fb814c0",
};

fn read(dir: &str, file: &str) -> String {
    std::fs::read_to_string(Path::new(dir).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// The number of log records in an OTLP/JSON logs export.
fn records_in(body: &str) -> usize {
    let v: Value = serde_json::from_str(body).unwrap();
    v["resourceLogs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["scopeLogs"].as_array().unwrap())
        .map(|s| s["logRecords"].as_array().unwrap().len())
        .sum()
}

fn log_file(data: &Path, agent: &str, session: &str) -> PathBuf {
    data.join("logs").join(agent).join(format!("{session}.jsonl"))
}

/// Posts the run's hooks (when asked) then its exports; checks every export is taken whole
/// (`{}`: no partial success) and returns the number of records sent.
async fn replay(url: &str, run: &Run, hooks: bool) -> usize {
    if hooks {
        for line in read(HOOKS, run.hooks).lines().filter(|l| !l.trim().is_empty()) {
            let r: Value = serde_json::from_str(line).unwrap();
            let hook = r["hook"].as_str().unwrap();
            let (status, text) =
                post(format!("{url}/hooks/{}/{hook}", run.vendor), r["payload"].to_string(), vec![]).await;
            assert_eq!(status, 200, "{hook}: {text}");
        }
    }
    let mut sent = 0;
    for file in run.exports {
        let body = read(DATA, file);
        sent += records_in(&body);
        let (status, text) = post(format!("{url}/v1/logs"), body, vec![]).await;
        assert_eq!((status, text.as_str()), (200, "{}"), "{file}: every record is taken");
    }
    sent
}

/// The events of a session log once it holds `otel` events of the vendor's OTel family
/// (and at least `min` lines); checks the log validates and names one session.
async fn events(bridge: &Running, data: &Path, run: &Run, agent: &str, min: usize) -> Vec<Value> {
    let path = log_file(data, agent, run.session);
    let lines = bridge.wait_lines(&path, min).await;
    let events = aep_testkit::parse_lines(&path, &lines);
    for e in &events {
        assert_eq!((e["agent"].as_str(), e["session"].as_str()), (Some(agent), Some(run.session)), "{e}");
    }
    // The lines read (the file may grow meanwhile), through the stream validator.
    let text = lines.join("\n");
    let (n, failures) = aep_schemas::report::validate_stream(std::io::Cursor::new(text)).unwrap();
    assert_eq!(n, events.len());
    assert!(
        failures.is_empty(),
        "{}:\n{}",
        path.display(),
        failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
    events
}

fn count(events: &[Value], ty: &str) -> usize {
    events.iter().filter(|e| e["type"] == ty).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn companion_records_join_the_hook_session_and_none_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    for (run, hook_lines, tools) in [(&GEMINI, 32usize, 4usize), (&QWEN, 15, 4)] {
        let sent = replay(&bridge.url(), run, true).await;
        let prefix = format!("x.{}.otel.", run.vendor);
        let path = log_file(dir.path(), run.vendor, run.session);
        // Wait for every OTLP record (each maps to one companion event) after the hook events.
        let companions = || {
            let events = aep_testkit::log_events(&path);
            events.iter().filter(|e| e["type"].as_str().is_some_and(|t| t.starts_with(&prefix))).count()
        };
        bridge.until_logged(|| companions() >= sent, || format!("{}: OTLP events missing", path.display())).await;
        let evs = events(&bridge, dir.path(), run, run.vendor, hook_lines).await;
        let otel: Vec<&Value> = evs.iter().filter(|e| e["type"].as_str().unwrap().starts_with(&prefix)).collect();
        assert_eq!(otel.len(), sent, "one companion event per record");
        assert_eq!(count(&evs, &format!("{prefix}unknown")), 0, "every recorded event name is known");
        assert_eq!(count(&evs, &format!("{prefix}tool_call")), tools);
        assert!(otel.iter().all(|e| !e["type"].as_str().unwrap()[prefix.len()..].is_empty()));
        // Companion mode: the hooks stay the only source of core types.
        assert_eq!(count(&evs, "tool.requested"), tools, "{}", run.vendor);
        assert_eq!(count(&evs, "session.started"), 1);
        // The tool records carry their metadata, and no content at the default ceiling.
        let call = otel.iter().find(|e| e["type"] == format!("{prefix}tool_call").as_str()).unwrap();
        assert_eq!(call["data"]["function_name"], "run_shell_command", "{call}");
        assert!(call["data"]["duration_ms"].as_u64().is_some(), "{call}");
        assert!(call["data"].get("function_args").is_none(), "{call}");
        let prompt = otel.iter().find(|e| e["type"] == format!("{prefix}user_prompt").as_str()).unwrap();
        assert!(prompt["data"].get("prompt").is_none() && prompt["data"]["prompt_length"] == 52, "{prompt}");
        let files = std::fs::read_dir(dir.path().join("logs").join(run.vendor)).unwrap().count();
        assert_eq!(files, 1, "{}: hooks and OTLP in one session log", run.vendor);
    }
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    assert!(!metrics.contains("reason=\"no_profile\""), "{metrics}");
    bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_mode_opens_the_session_and_ends_the_tools_from_otlp_alone() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.otlp_in.mode = aep_adapters::otel::Mode::Primary;
    let bridge = start(cfg).await;
    for run in [&GEMINI, &QWEN] {
        let sent = replay(&bridge.url(), run, false).await;
        let evs = events(&bridge, dir.path(), run, run.vendor, sent).await;
        assert_eq!(evs.len(), sent, "one event per record");
        // The config record opens the session; Qwen logs its auth record before it.
        let core: Vec<&Value> = evs.iter().filter(|e| !e["type"].as_str().unwrap().starts_with("x.")).collect();
        assert_eq!(core[0]["type"], "session.started", "{}: the first core event", run.vendor);
        assert_eq!(count(&evs, "session.started"), 1);
        let first_core = evs.iter().position(|e| e["type"] == "session.started").unwrap();
        assert!(first_core <= 1, "{}: {first_core} events before the config record", run.vendor);
        assert_eq!(core[0]["data"]["client"]["name"], run.vendor);
        assert!(core[0]["data"]["gen_ai.request.model"].is_string(), "{}", core[0]);
        // The recorded failing shell command exits 2, which both CLIs report as success.
        assert_eq!(count(&evs, "tool.completed"), 4, "{}", run.vendor);
        assert_eq!(count(&evs, "tool.failed"), 0);
        let done = evs.iter().find(|e| e["type"] == "tool.completed").unwrap();
        assert_eq!(done["data"]["tool"]["name"], "run_shell_command");
        assert!(done["data"]["duration_ms"].as_u64().is_some_and(|ms| ms > 0), "{done}");
    }
    bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_service_is_refused_unless_opted_in_under_a_vendor_name() {
    let body = read(DATA, QWEN.exports[0]).replace("\"qwen-code\"", "\"acme-agent\"");
    let n = records_in(&body);
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let (status, text) = post(format!("{}/v1/logs", bridge.url()), body.clone(), vec![]).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedLogRecords"], n.to_string(), "{text}");
    assert!(v["partialSuccess"]["errorMessage"].as_str().unwrap().contains("[otlp_in.generic]"), "{text}");
    bridge.shutdown().await;

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.otlp_in.generic.insert("acme-agent".into(), aep_adapters::otel::generic::VendorName::new("acme").unwrap());
    let bridge = start(cfg).await;
    let (status, text) = post(format!("{}/v1/logs", bridge.url()), body, vec![]).await;
    assert_eq!((status, text.as_str()), (200, "{}"));
    let evs = events(&bridge, dir.path(), &QWEN, "acme", n).await;
    assert_eq!(evs.len(), n);
    let types: Vec<&str> = evs.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"x.acme.otel.qwen_code.tool_call"), "{types:?}");
    assert!(types.iter().all(|t| t.starts_with("x.acme.otel.")), "{types:?}");
    // Only the event name rides at the default ceiling: the attributes are of unknown sensitivity.
    assert!(evs.iter().all(|e| e["data"].as_object().unwrap().keys().eq(["event.name"].iter())), "{evs:?}");
    bridge.shutdown().await;
}
