//! OTLP inbound end to end over real sockets: the official OpenTelemetry Python SDK (gRPC and
//! HTTP protobuf) and hand-made OTLP/JSON with gzip into a real `serve`; Codex- and VS
//! Code-shaped records land in the per-session JSONL log under the right identity and pass
//! the stream validator; bad requests are refused with the OTLP status codes and write
//! nothing; the tee forwards to a second bridge; rotel (a real collector) sits between the
//! SDK and the bridge.
//!
//! The SDK tests need `pip install -r bridge/tests/requirements-otel.txt`; without the
//! packages they print a SKIP line and pass.

use aep_testkit as common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};

const SDK_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/otlp_sdk.py");

const CODEX_TYPES: [&str; 5] = [
    "x.codex.otel.conversation_starts",
    "x.codex.otel.user_prompt",
    "x.codex.otel.tool_decision",
    "x.codex.otel.tool_result",
    "x.codex.otel.sse_event",
];
const VSCODE_TYPES: [&str; 4] =
    ["x.vscode.otel.session.start", "x.vscode.otel.agent.turn", "x.vscode.otel.tool.call", "x.vscode.otel.tool.call"];

/// Whether the OpenTelemetry Python SDK and its OTLP exporters are importable.
fn sdk_available(test: &str) -> bool {
    let ok = Command::new("python3")
        .args([
            "-c",
            "import opentelemetry.sdk, opentelemetry.exporter.otlp.proto.grpc, opentelemetry.exporter.otlp.proto.http",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "SKIP {test}: the OpenTelemetry Python SDK is not installed (pip install -r bridge/tests/requirements-otel.txt)"
        );
    }
    ok
}

/// Runs the SDK script; returns its JSON summary (panics with its output when it failed).
async fn sdk(args: Vec<String>) -> Value {
    tokio::task::spawn_blocking(move || {
        let out = Command::new("python3").arg(SDK_SCRIPT).args(&args).output().expect("python3 did not start");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "otlp_sdk.py {args:?} failed: {}\nstdout: {stdout}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str(stdout.trim()).expect("otlp_sdk.py printed no JSON")
    })
    .await
    .unwrap()
}

fn sdk_args(endpoint: &str, protocol: &str, agent: &str, session: &str, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["--endpoint", endpoint, "--protocol", protocol, "--agent", agent, "--session", session]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    v.extend(extra.iter().map(|s| (*s).to_owned()));
    v
}

fn log_file(data: &Path, agent: &str, session: &str) -> PathBuf {
    data.join("logs").join(agent).join(format!("{session}.jsonl"))
}

/// Checks a session log: every line parses, carries the agent and session identity, the
/// types are `types` in order, and the stream validator accepts the file.
fn check_log(lines: &[String], path: &Path, agent: &str, session: &str, types: &[&str]) {
    let events: Vec<Value> =
        lines.iter().map(|l| serde_json::from_str(l).expect("torn or invalid JSONL line")).collect();
    let got: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap_or("")).collect();
    assert_eq!(got, types, "{}", path.display());
    for e in &events {
        assert_eq!(e["agent"], agent, "{e}");
        assert_eq!(e["session"], session, "{e}");
        let source = e["source"].as_str().unwrap_or("");
        assert!(source.ends_with(&format!("/agent/{agent}/session/{session}")), "{source}");
    }
    let file = std::fs::File::open(path).unwrap();
    let (n, failures) = aep_schemas::report::validate_stream(std::io::BufReader::new(file)).unwrap();
    assert_eq!(n, types.len());
    assert!(
        failures.is_empty(),
        "{} does not validate:\n{}",
        path.display(),
        failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
    );
}

fn grpc_config(data: &Path) -> aep_bridge::config::Config {
    let mut cfg = config(data);
    cfg.server.otlp_grpc = Some("127.0.0.1:0".parse().unwrap());
    cfg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_over_grpc_and_http_reaches_the_session_logs() {
    if !sdk_available("python_sdk_over_grpc_and_http_reaches_the_session_logs") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(grpc_config(dir.path())).await;
    let grpc = format!("http://{}", bridge.bound.otlp_grpc.unwrap());
    let http = bridge.url();
    let runs = [
        (&grpc, "grpc", "codex", "sdk-codex-grpc", &["--gzip", "--span"][..], &CODEX_TYPES[..]),
        (&grpc, "grpc", "vscode", "sdk-vscode-grpc", &[][..], &VSCODE_TYPES[..]),
        (&http, "http", "vscode", "sdk-vscode-http", &["--span"][..], &VSCODE_TYPES[..]),
        (&http, "http", "codex", "sdk-codex-http", &["--gzip"][..], &CODEX_TYPES[..]),
    ];
    for (endpoint, proto, agent, session, extra, types) in runs {
        let t0 = Instant::now();
        let out = sdk(sdk_args(endpoint, proto, agent, session, extra)).await;
        assert_eq!(out["records"], types.len(), "{out}");
        let path = log_file(dir.path(), agent, session);
        let lines = bridge.wait_lines(&path, types.len()).await;
        eprintln!("sdk {proto} {agent}: {} records in the log {:?} after the SDK started", lines.len(), t0.elapsed());
        check_log(&lines, &path, agent, session, types);
    }
    // Volume: 1000 records in several SDK batches (512 per export), order kept, nothing lost.
    let t0 = Instant::now();
    sdk(sdk_args(&grpc, "grpc", "codex", "sdk-codex-volume", &["--gzip", "--repeat", "200"])).await;
    let path = log_file(dir.path(), "codex", "sdk-codex-volume");
    let lines = bridge.wait_lines(&path, 1000).await;
    eprintln!("sdk grpc codex volume: {} records in the log after {:?}", lines.len(), t0.elapsed());
    check_log(&lines, &path, "codex", "sdk-codex-volume", &CODEX_TYPES.repeat(200));
    let seqs: Vec<u64> =
        lines.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..1000).collect::<Vec<u64>>());
    // Nothing else was written (the spans are accepted, not logged).
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    assert!(!metrics.contains("reason=\"no_profile\""), "{metrics}");
    bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_in_primary_mode_emits_core_types() {
    if !sdk_available("python_sdk_in_primary_mode_emits_core_types") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = grpc_config(dir.path());
    cfg.otlp_in.mode = aep_adapters::otel::Mode::Primary;
    let bridge = start(cfg).await;
    let grpc = format!("http://{}", bridge.bound.otlp_grpc.unwrap());
    sdk(sdk_args(&grpc, "grpc", "vscode", "sdk-vscode-primary", &["--gzip"])).await;
    let path = log_file(dir.path(), "vscode", "sdk-vscode-primary");
    let lines = bridge.wait_lines(&path, 4).await;
    let types = ["session.started", "x.vscode.otel.agent.turn", "tool.completed", "tool.failed"];
    let events: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events[3]["data"]["error"]["type"], "file_not_found", "{}", events[3]);
    check_log(&lines, &path, "vscode", "sdk-vscode-primary", &types);

    // Codex: a config-approved tool decision emits nothing; `success: "true"` completes the tool.
    sdk(sdk_args(&bridge.url(), "http", "codex", "sdk-codex-primary", &[])).await;
    let path = log_file(dir.path(), "codex", "sdk-codex-primary");
    let lines = bridge.wait_lines(&path, 4).await;
    let types = ["session.started", "x.codex.otel.user_prompt", "tool.completed", "x.codex.otel.sse_event"];
    check_log(&lines, &path, "codex", "sdk-codex-primary", &types);
    bridge.shutdown().await;
}

/// An OTLP/JSON logs request with Codex-shaped records (hex ids as the JSON mapping wants).
fn codex_json(session: &str, trace_id: &str) -> Value {
    let attr = |k: &str, v: Value| json!({"key": k, "value": v});
    let s = |v: &str| json!({"stringValue": v});
    let rec = |name: &str, extra: Vec<Value>| {
        let mut attrs = vec![
            attr("event.name", s(name)),
            attr("conversation.id", s(session)),
            attr("app.version", s("0.171.0")),
            attr("model", s("gpt-5")),
        ];
        attrs.extend(extra);
        json!({
            "timeUnixNano": "0",
            "observedTimeUnixNano": "1796000000000000000",
            "eventName": "event otel/src/events/session_telemetry.rs:737",
            "traceId": trace_id,
            "spanId": "00f067aa0ba902b7",
            "attributes": attrs,
        })
    };
    json!({"resourceLogs": [{
        "resource": {"attributes": [attr("service.name", s("codex_exec")), attr("host.name", s("json-host"))]},
        "scopeLogs": [{
            "scope": {"name": "codex_otel.log_only"},
            "logRecords": [
                rec("codex.conversation_starts", vec![]),
                rec("codex.tool_result", vec![
                    attr("tool_name", s("shell")), attr("call_id", s("c1")),
                    attr("duration_ms", json!({"intValue": "12"})), attr("success", s("true")),
                ]),
            ],
        }],
    }]})
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// Request headers.
type Headers = Vec<(&'static str, &'static str)>;

/// POSTs raw bytes with the given headers; returns status and body.
async fn post_raw(url: String, body: Vec<u8>, headers: Headers) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.post(&url);
        for (k, v) in &headers {
            req = req.header(*k, *v);
        }
        let mut resp = req.send(&body[..]).expect("request failed");
        let status = resp.status().as_u16();
        (status, resp.body_mut().read_to_string().unwrap_or_default())
    })
    .await
    .unwrap()
}

/// Every complete line of every file under `{data}/logs`.
fn all_log_lines(data: &Path) -> Vec<String> {
    aep_testkit::tree_lines(&data.join("logs"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn otlp_json_with_gzip_and_refused_requests_over_real_sockets() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = format!("{}/v1/logs", bridge.url());
    let good_trace = "4BF92F3577B34DA6A3CE929D0E0E4736";
    let json_ct = ("content-type", "application/json");
    let pb_ct = ("content-type", "application/x-protobuf");

    let refusals: Vec<(&str, Vec<u8>, Headers, u16)> = vec![
        // Field 1 (resource_logs) as a length-delimited field claiming 100 bytes, with 2.
        ("malformed protobuf", vec![0x0a, 0x64, 0x01, 0x02], vec![pb_ct], 400),
        ("bad hex id", codex_json("s-bad-hex", "zz").to_string().into_bytes(), vec![json_ct], 400),
        ("short trace id", codex_json("s-short", &good_trace[..30]).to_string().into_bytes(), vec![json_ct], 400),
        (
            "snake_case keys",
            codex_json("s-snake", good_trace).to_string().replace("resourceLogs", "resource_logs").into_bytes(),
            vec![json_ct],
            400,
        ),
        (
            "wrong content type",
            codex_json("s-ct", good_trace).to_string().into_bytes(),
            vec![("content-type", "text/plain")],
            415,
        ),
        (
            "unknown content encoding",
            codex_json("s-ce", good_trace).to_string().into_bytes(),
            vec![json_ct, ("content-encoding", "br")],
            415,
        ),
        // 21 MiB of zeros compress to ~21 KiB: over the 20 MiB cap once decompressed.
        ("gzip bomb", gzip(&vec![b' '; 21 * 1024 * 1024]), vec![json_ct, ("content-encoding", "gzip")], 413),
        (
            "corrupt gzip",
            vec![0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0xff, 1, 2, 3],
            vec![json_ct, ("content-encoding", "gzip")],
            400,
        ),
    ];
    // Each refused request names its own session: one wrongly written shows which.
    for (name, body, headers, want) in refusals {
        let (status, text) = post_raw(url.clone(), body, headers).await;
        assert_eq!(status, want, "{name}: {text}");
    }

    // A declared oversize body is refused from the headers alone (raw socket: no body sent).
    let mut s = TcpStream::connect(bridge.bound.http).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "POST /v1/logs HTTP/1.1\r\nhost: {}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
        bridge.bound.http,
        21 * 1024 * 1024
    )
    .unwrap();
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap();
    let head = String::from_utf8_lossy(&head[..n]);
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    drop(s);

    // Every refusal is counted by reason (5 invalid, 2 content type, 2 too large).
    let (_, m) = get(format!("{}/metrics", bridge.url())).await;
    for (reason, n) in [("invalid", 5), ("content_type", 2), ("too_large", 2)] {
        let want = format!("aep_bridge_requests_rejected_total{{reason=\"{reason}\",receiver=\"otlp\"}} {n}");
        assert!(m.contains(&want), "{want} missing:\n{m}");
    }

    // OTLP/JSON, gzip, uppercase hex ids: accepted; the answer is `{}` in JSON.
    let body = gzip(codex_json("s-json-gzip", good_trace).to_string().as_bytes());
    let (status, text) = post_raw(url.clone(), body, vec![json_ct, ("content-encoding", "gzip")]).await;
    assert_eq!((status, text.as_str()), (200, "{}"));
    let path = log_file(dir.path(), "codex", "s-json-gzip");
    let lines = bridge.wait_lines(&path, 2).await;
    // Requests reach the log in the order they were taken: had a refused one been written,
    // it would be there by now.
    let all = all_log_lines(dir.path());
    assert_eq!(all.len(), 2, "a refused request was written: {all:#?}");
    check_log(&lines, &path, "codex", "s-json-gzip", &["x.codex.otel.conversation_starts", "x.codex.otel.tool_result"]);
    let first: Value = serde_json::from_str(&lines[0]).unwrap();
    let tp = first["traceparent"].as_str().unwrap_or("");
    assert!(tp.contains(&good_trace.to_ascii_lowercase()), "{first}");

    // A record of an unknown service: 200 with partial_success naming it, nothing written.
    let foreign = codex_json("s-foreign", good_trace).to_string().replace("codex_exec", "some-other-app");
    let (status, text) = post_raw(url.clone(), foreign.into_bytes(), vec![json_ct]).await;
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedLogRecords"], "2", "{text}");
    // A request accepted after it is the barrier: once it is written, so would the foreign one be.
    let (status, _) =
        post_raw(url.clone(), codex_json("s-after", good_trace).to_string().into_bytes(), vec![json_ct]).await;
    assert_eq!(status, 200);
    bridge.wait_lines(&log_file(dir.path(), "codex", "s-after"), 2).await;
    let all = all_log_lines(dir.path());
    assert_eq!(all.len(), 4, "only the accepted requests were written: {all:#?}");
    bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tee_forwards_every_request_to_a_second_bridge() {
    let up_dir = tempfile::tempdir().unwrap();
    let upstream = start(config(up_dir.path())).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.otlp_in.tee = Some(upstream.url().parse().unwrap());
    let bridge = start(cfg).await;
    let url = format!("{}/v1/logs", bridge.url());

    // OTLP/JSON in, protobuf + gzip out: the upstream maps the same records the same way.
    let n = 200usize;
    let t0 = Instant::now();
    for i in 0..n {
        let body = codex_json(&format!("s-tee-{}", i % 4), "4bf92f3577b34da6a3ce929d0e0e4736").to_string();
        let (status, text) = post(url.clone(), body, vec![]).await;
        assert_eq!(status, 200, "{text}");
    }
    let sent = t0.elapsed();
    for s in 0..4 {
        let session = format!("s-tee-{s}");
        let local = bridge.wait_lines(&log_file(dir.path(), "codex", &session), 2 * n / 4).await;
        let up_path = log_file(up_dir.path(), "codex", &session);
        let remote = upstream.wait_lines(&up_path, 2 * n / 4).await;
        assert_eq!(remote.len(), local.len());
        let types = |ls: &[String]| -> Vec<String> {
            ls.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_owned()).collect()
        };
        assert_eq!(types(&remote), types(&local));
        let both: Vec<&str> = ["x.codex.otel.conversation_starts", "x.codex.otel.tool_result"].repeat(n / 4);
        check_log(&remote, &up_path, "codex", &session, &both);
    }
    eprintln!(
        "tee: {n} OTLP/JSON requests ({} records) answered in {sent:?}; all in the upstream's logs after {:?}",
        2 * n,
        t0.elapsed()
    );
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    for name in ["aep_bridge_events_dropped_total", "aep_bridge_sink_errors_total"] {
        assert!(!metrics.contains(&format!("{name}{{sink=\"otlp-tee\"}}")), "{name}: {metrics}");
    }

    // Upstream gone: the sender still gets its answer at once; the tee retries in the background.
    upstream.shutdown().await;
    let t1 = Instant::now();
    let (status, _) = post(url.clone(), codex_json("s-tee-down", "").to_string(), vec![]).await;
    assert_eq!(status, 200);
    assert!(t1.elapsed() < Duration::from_millis(500), "the tee delayed the reply: {:?}", t1.elapsed());
    bridge.wait_lines(&log_file(dir.path(), "codex", "s-tee-down"), 2).await;
    bridge.shutdown().await;
}

/// `text` without ANSI colour sequences (`ESC [ ... m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A child process killed on drop, and what it printed.
struct Guard(Child, common::Output);

impl Guard {
    /// SIGTERM, then up to 5 s for a graceful exit (SIGKILL on drop otherwise): its output
    /// closes when it has exited, after flushing.
    fn terminate(&mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        self.1.wait_closed(Duration::from_secs(5));
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Starts rotel-agent with OTLP receivers on fresh ports and the given exporter arguments;
/// returns the guard and its (gRPC, HTTP) receiver ports once both accept connections.
fn start_rotel(bin: &Path, dir: &Path, name: &str, exporter: &[String], env: &[(&str, &str)]) -> (Guard, u16, u16) {
    let (g, h) = (free_port(), free_port());
    let mut child = Command::new(bin)
        .arg("start")
        .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{g}")])
        .args(["--otlp-http-endpoint", &format!("127.0.0.1:{h}")])
        .arg("--pid-file")
        .arg(dir.join(format!("{name}.pid")))
        .args(["--batch-timeout", "100ms"])
        .args(exporter)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rotel-agent did not start");
    let out = common::Output::follow(&mut child);
    let guard = Guard(child, out.clone());
    let started = out.wait_blocking(Duration::from_secs(10), |t| t.contains(common::ROTEL_STARTED));
    assert!(started, "rotel-agent {name} did not start: {}", out.text());
    (guard, g, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_to_rotel_collector_to_bridge_and_tee_to_rotel() {
    let test = "agent_to_rotel_collector_to_bridge_and_tee_to_rotel";
    if !sdk_available(test) {
        return;
    }
    let Some(rotel) = common::rotel_agent() else {
        eprintln!("SKIP {test}: rotel-agent is not installed (pip install --pre rotel==0.0.1a15)");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    // The tee's upstream: a rotel that prints what it receives.
    let sink_args: Vec<String> = [
        "--exporter",
        "blackhole",
        "--debug-log",
        "logs",
        "--debug-log",
        "traces",
        "--debug-log-verbosity",
        "detailed",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let (mut sink, _, sink_http) = start_rotel(&rotel, work.path(), "sink", &sink_args, &[("RUST_LOG", "debug")]);

    let dir = tempfile::tempdir().unwrap();
    let mut cfg = grpc_config(dir.path());
    cfg.otlp_in.tee = Some(format!("http://127.0.0.1:{sink_http}").parse().unwrap());
    let bridge = start(cfg).await;
    let bridge_grpc = bridge.bound.otlp_grpc.unwrap();

    // The agent's collector: receives from the SDK, forwards to the bridge over gRPC with gzip.
    let fwd_args: Vec<String> = [
        "--exporter".to_owned(),
        "otlp".to_owned(),
        "--otlp-exporter-endpoint".to_owned(),
        format!("http://{bridge_grpc}"),
        "--otlp-exporter-protocol".to_owned(),
        "grpc".to_owned(),
        "--otlp-exporter-compression".to_owned(),
        "gzip".to_owned(),
    ]
    .to_vec();
    let (_collector, col_grpc, col_http) = start_rotel(&rotel, work.path(), "collector", &fwd_args, &[]);

    let t0 = Instant::now();
    sdk(sdk_args(&format!("http://127.0.0.1:{col_grpc}"), "grpc", "codex", "via-rotel-codex", &["--span", "--metric"]))
        .await;
    sdk(sdk_args(&format!("http://127.0.0.1:{col_http}"), "http", "vscode", "via-rotel-vscode", &["--gzip"])).await;
    for (agent, session, types) in
        [("codex", "via-rotel-codex", &CODEX_TYPES[..]), ("vscode", "via-rotel-vscode", &VSCODE_TYPES[..])]
    {
        let path = log_file(dir.path(), agent, session);
        let lines = bridge.wait_lines(&path, types.len()).await;
        check_log(&lines, &path, agent, session, types);
    }
    eprintln!("rotel: SDK -> rotel -> bridge, both sessions logged after {:?}", t0.elapsed());

    // A metric straight to the bridge over gRPC.
    let direct = format!("http://{bridge_grpc}");
    sdk(sdk_args(&direct, "grpc", "vscode", "direct-metric", &["--metric", "--gzip"])).await;
    bridge.wait_lines(&log_file(dir.path(), "vscode", "direct-metric"), 4).await;

    // The tee forwarded the logs, the span and the metric to the sink rotel: it prints the logs
    // and spans it receives, and (at debug level) each request it answered. Its metrics printer
    // has been seen to print nothing under this harness, so metrics are checked by the request
    // log. Its output may be buffered: stop it gracefully to flush the rest.
    let printed = |text: &str| {
        let text = strip_ansi(text);
        let answered = |path: &str| {
            text.lines()
                .any(|l| l.contains("finished processing request") && l.contains(path) && l.contains("status=200"))
        };
        ["codex.tool_result", "copilot_chat.tool.call", "execute_tool shell"].iter().all(|m| text.contains(m))
            && ["uri=/v1/logs", "uri=/v1/traces", "uri=/v1/metrics"].iter().all(|p| answered(p))
    };
    sink.1.wait(Duration::from_secs(5), printed).await;
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    sink.terminate();
    let text = sink.1.text();
    assert!(printed(&text), "the tee's upstream did not get every signal:\n{text}\nbridge:\n{metrics}");
    bridge.shutdown().await;
}

/// Throughput through the tee (run by hand: `cargo test -p aep-bridge --test otlp_inbound
/// tee_throughput -- --ignored --nocapture`): 4 senders post OTLP/JSON requests of 100 Codex
/// records to a bridge that tees to a second bridge; both must log every record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement"]
async fn tee_throughput() {
    let up_dir = tempfile::tempdir().unwrap();
    let upstream = start(config(up_dir.path())).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.otlp_in.tee = Some(upstream.url().parse().unwrap());
    let bridge = start(cfg).await;
    let (senders, requests, per) = (4usize, 50usize, 100usize);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for s in 0..senders {
        let url = format!("{}/v1/logs", bridge.url());
        let mut body = codex_json(&format!("s-tp-{s}"), "");
        let recs = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"].as_array().unwrap().clone();
        body["resourceLogs"][0]["scopeLogs"][0]["logRecords"] =
            Value::Array((0..per / 2).flat_map(|_| recs.clone()).collect());
        let body = body.to_string();
        tasks.push(tokio::task::spawn_blocking(move || {
            let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
            for _ in 0..requests {
                let r = agent.post(&url).header("content-type", "application/json").send(body.as_bytes()).unwrap();
                assert_eq!(r.status().as_u16(), 200);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let answered = t0.elapsed();
    let total = senders * requests * per;
    for s in 0..senders {
        upstream.wait_lines(&log_file(up_dir.path(), "codex", &format!("s-tp-{s}")), requests * per).await;
    }
    let all = t0.elapsed();
    eprintln!(
        "tee throughput: {total} records in {} requests answered in {answered:?} ({:.0} records/s); \
         all in the upstream's logs after {all:?} ({:.0} records/s end to end)",
        senders * requests,
        total as f64 / answered.as_secs_f64(),
        total as f64 / all.as_secs_f64()
    );
    let (_, metrics) = get(format!("{}/metrics", bridge.url())).await;
    for name in ["aep_bridge_events_dropped_total", "aep_bridge_sink_errors_total"] {
        assert!(!metrics.contains(&format!("{name}{{sink=\"otlp-tee\"}}")), "{name}: {metrics}");
    }
    bridge.shutdown().await;
    upstream.shutdown().await;
}
