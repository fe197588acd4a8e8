//! End to end: real captures of Claude Code (tools, two of them failing, with its
//! beta spans), Codex and Gemini CLI replayed into a real `serve` (hooks through the real
//! `aep-hook` shim, then the agents' own OTLP log and trace bodies as they recorded them),
//! exporting to an OTLP/HTTP receiver in this test that decodes what it got. Asserted on
//! the decoded output: one trace per session with one root named for the agent, statuses,
//! token usage and model on the run spans where the vendor sent them, the vendor's tool
//! durations, Claude Code's own spans inside the session trace under the spans they belong
//! to, log records on the matching trace and span ids, and the GenAI metrics' counts.

use aep_testkit as common;

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use std::time::Duration;
use tokio::sync::Notify;

use aep_bridge::export::{Compression, Protocol};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::Value;

const CLAUDE: &str = "45a2eddb-be16-44a0-9158-5f92e545154f";
const CODEX: &str = "01a22a9f-e3e6-71d0-8872-0556d1423eab";
const GEMINI: &str = "0560a05a-0887-42a7-bad1-ef8b046b7e1d";
const QWEN: &str = "8a03b421-4c8f-40ab-9b43-04b98fb814c0";

const CLAUDE_LOGS: &[&str] = common::CLAUDE_S01_LOGS;
const CLAUDE_TRACES: &[&str] = &[
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0004_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0007_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0011_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0013_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0016_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0019_traces.json"),
    include_str!("../../tests/data/otlp-captures/claude-code/s01_0022_traces.json"),
];
const CODEX_LOGS: &[&str] = &[
    include_str!("../../tests/data/otlp-captures/codex/c01_0001_logs.json"),
    include_str!("../../tests/data/otlp-captures/codex/c01_0003_logs.json"),
    include_str!("../../tests/data/otlp-captures/codex/c01_0004_logs.json"),
    include_str!("../../tests/data/otlp-captures/codex/c01_0007_logs.json"),
];
const GEMINI_LOGS: &[&str] = &[
    include_str!("../../tests/data/otlp-captures/gemini-cli/g02_0001_logs.json"),
    include_str!("../../tests/data/otlp-captures/gemini-cli/g02_0004_logs.json"),
];
/// Gemini CLI's own spans of the same run (`llm_call`, `tool_call`, `schedule_tool_calls`).
const GEMINI_TRACES: &[&str] = &[
    include_str!("../../tests/data/otlp-captures/gemini-cli/g02_0002_traces.json"),
    include_str!("../../tests/data/otlp-captures/gemini-cli/g02_0003_traces.json"),
];
const QWEN_LOGS: &[&str] = &[
    include_str!("../../tests/data/otlp-captures/qwen-code/q01_0001_logs.json"),
    include_str!("../../tests/data/otlp-captures/qwen-code/q01_0003_logs.json"),
];

/// An agent's own OTLP/JSON exports to one path.
type Bodies = (&'static str, &'static [&'static str]);

/// What the OTLP receiver got: (path, protobuf body).
type Got = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

async fn record(State((got, seen)): State<(Got, Arc<Notify>)>, uri: Uri, body: Bytes) -> &'static str {
    got.lock().unwrap().push((uri.path().to_owned(), body.to_vec()));
    seen.notify_waiters();
    ""
}

/// Starts the receiver; `seen` is woken each time it got a request.
async fn start_receiver(got: Got, seen: Arc<Notify>) -> SocketAddr {
    let app = axum::Router::new().fallback(record).with_state((got, seen));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

/// The real shim: one process per hook payload, as the agent runs it.
fn shim(url: &str, vendor: &str, payload: &[u8]) -> i32 {
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-hook"))
        .arg(vendor)
        .env("AEP_HOOK_STATE_DIR", aep_testkit::shim_state_dir())
        .env("AEP_BRIDGE_URL", url)
        .env_remove("AEP_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn aep-hook");
    child.stdin.take().unwrap().write_all(payload).unwrap();
    child.wait().unwrap().code().unwrap_or(-1)
}

/// The recorded hook payloads of one capture, in firing order.
fn hooks(vendor_dir: &str, capture: &str) -> Vec<Value> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let f = match vendor_dir {
        // Recorded with its spans (the adapters' g01 recording kept none).
        "gemini-cli" => root.join("../tests/data/otlp-captures/gemini-cli").join(capture),
        _ => root.join("../../adapters/tests/data").join(vendor_dir).join(capture),
    };
    std::fs::read_to_string(&f)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["payload"].clone())
        .collect()
}

fn attr_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    })
}

fn attr_num(attrs: &[KeyValue], key: &str) -> Option<f64> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::IntValue(n) => Some(*n as f64),
        any_value::Value::DoubleValue(d) => Some(*d),
        any_value::Value::StringValue(s) => s.parse().ok(),
        _ => None,
    })
}

/// The log records of recorded OTLP/JSON bodies whose `event.name` is `name`.
fn records_named(bodies: &[&str], name: &str) -> Vec<Value> {
    bodies
        .iter()
        .flat_map(|b| common::otlp_json_records(b))
        .filter(|r| common::otlp_json_attr(r, "event.name").as_deref() == Some(name))
        .collect()
}

/// A number attribute of a recorded record: a string, an int64 or (Claude Code's cost) a double.
fn num(r: &Value, key: &str) -> f64 {
    let double = || r["attributes"].as_array()?.iter().find(|a| a["key"] == key)?["value"]["doubleValue"].as_f64();
    common::otlp_json_attr(r, key)
        .and_then(|s| s.parse().ok())
        .or_else(double)
        .unwrap_or_else(|| panic!("{key} missing"))
}

struct Decoded {
    spans: Vec<Span>,
    logs: Vec<LogRecord>,
    metrics: Vec<ExportMetricsServiceRequest>,
}

fn decode(got: &Got) -> Decoded {
    let got = got.lock().unwrap().clone();
    let mut d = Decoded { spans: Vec::new(), logs: Vec::new(), metrics: Vec::new() };
    for (path, body) in got {
        match path.as_str() {
            "/v1/traces" => d.spans.extend(
                ExportTraceServiceRequest::decode(&body[..])
                    .unwrap()
                    .resource_spans
                    .into_iter()
                    .flat_map(|r| r.scope_spans)
                    .flat_map(|s| s.spans),
            ),
            "/v1/logs" => d.logs.extend(
                ExportLogsServiceRequest::decode(&body[..])
                    .unwrap()
                    .resource_logs
                    .into_iter()
                    .flat_map(|r| r.scope_logs)
                    .flat_map(|s| s.log_records),
            ),
            "/v1/metrics" => d.metrics.push(ExportMetricsServiceRequest::decode(&body[..]).unwrap()),
            other => panic!("unexpected path {other}"),
        }
    }
    d
}

/// `(count, sum)` of the newest cumulative `gen_ai.client.token.usage` points of `agent`
/// for `token_type`.
fn token_usage(metrics: &[ExportMetricsServiceRequest], agent: &str, token_type: &str) -> (u64, f64) {
    for req in metrics.iter().rev() {
        let points: Vec<_> = req
            .resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .filter(|m| m.name == "gen_ai.client.token.usage")
            .filter_map(|m| match &m.data {
                Some(metric::Data::Histogram(h)) => Some(&h.data_points),
                _ => None,
            })
            .flatten()
            .filter(|p| {
                attr_str(&p.attributes, "gen_ai.agent.name") == Some(agent)
                    && attr_str(&p.attributes, "gen_ai.token.type") == Some(token_type)
            })
            .collect();
        if !points.is_empty() {
            return (points.iter().map(|p| p.count).sum(), points.iter().map(|p| p.sum.unwrap_or(0.0)).sum());
        }
    }
    (0, 0.0)
}

fn ours<'a>(spans: &'a [Span], session: &str) -> Vec<&'a Span> {
    spans
        .iter()
        .filter(|s| {
            attr_str(&s.attributes, "aep.session_id") == Some(session)
                && attr_str(&s.attributes, "aep.vendor.placement").is_none()
        })
        .collect()
}

fn named<'a>(spans: &[&'a Span], prefix: &str) -> Vec<&'a Span> {
    spans.iter().copied().filter(|s| s.name.starts_with(prefix)).collect()
}

/// One trace, one root named for the agent, status OK (the session ended, no run failed).
fn one_trace<'a>(spans: &'a [Span], session: &str, agent: &str) -> (Vec<&'a Span>, Vec<u8>) {
    let mine = ours(spans, session);
    assert!(!mine.is_empty(), "{agent}: no spans");
    let trace = mine[0].trace_id.clone();
    assert!(mine.iter().all(|s| s.trace_id == trace), "{agent}: one trace per session");
    let roots: Vec<&&Span> = mine.iter().filter(|s| s.parent_span_id.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{agent}: one root");
    assert_eq!(roots[0].name, format!("session {agent}"));
    assert_eq!(roots[0].status.as_ref().unwrap().code, 1, "{agent}: the session ended OK");
    assert_eq!(attr_str(&roots[0].attributes, "gen_ai.operation.name"), None, "{agent}: the runs are the operations");
    (mine, trace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_sessions_join_the_vendors_telemetry_into_one_trace_each() {
    let got: Got = Arc::default();
    let seen = Arc::new(Notify::new());
    let addr = start_receiver(got.clone(), seen.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    let o = &mut cfg.export.otlp;
    o.endpoint = Some(format!("http://{addr}").parse().unwrap());
    o.protocol = Protocol::HttpProtobuf;
    o.compression = Compression::None;
    o.batch_timeout_ms = 100;
    o.metrics_interval_ms = 300;
    // The product's default grace (10 s): each agent's OTLP bodies are posted right after its
    // own hooks, so a run span waits for them only as long as a shim or two and a few posts
    // take. A 3 s grace with every agent's hooks in between missed Claude Code's usage at a
    // load average of 20 (its run span left first).
    o.span_grace_ms = 10_000;
    let bridge = common::start(cfg).await;
    let url = bridge.url();

    // Each agent's hooks first, through the shim; its own exports after, as they lag in reality.
    let exports: [(&str, &str, &str, &[Bodies]); 4] = [
        (
            "claude-code",
            "claude-code",
            "s01_tools_bypass_json.jsonl",
            &[("/v1/logs", CLAUDE_LOGS), ("/v1/traces", CLAUDE_TRACES)],
        ),
        ("codex", "codex", "c01_exec_json.jsonl", &[("/v1/logs", CODEX_LOGS)]),
        ("gemini-cli", "gemini-cli", "g02_hooks.jsonl", &[("/v1/logs", GEMINI_LOGS), ("/v1/traces", GEMINI_TRACES)]),
        ("qwen-code", "qwen-code", "q01_tools_yolo_http.jsonl", &[("/v1/logs", QWEN_LOGS)]),
    ];
    for (vendor, vdir, capture, bodies) in exports {
        let payloads = hooks(vdir, capture);
        let u = url.clone();
        let codes = tokio::task::spawn_blocking(move || {
            payloads.iter().map(|p| shim(&u, vendor, p.to_string().as_bytes())).collect::<Vec<_>>()
        })
        .await
        .unwrap();
        assert!(codes.iter().all(|c| *c == 0), "{vendor}: {codes:?}");
        for (path, bodies) in bodies {
            for body in *bodies {
                let (status, text) = common::post(format!("{url}{path}"), (*body).to_owned(), vec![]).await;
                assert_eq!(status, 200, "{path}: {text}");
            }
        }
    }

    // What the captures imply.
    let cc_calls = records_named(CLAUDE_LOGS, "api_request");
    let cc_in: f64 = cc_calls.iter().map(|r| num(r, "input_tokens")).sum();
    let cc_out: f64 = cc_calls.iter().map(|r| num(r, "output_tokens")).sum();
    let cc_cost: f64 = cc_calls.iter().map(|r| num(r, "cost_usd")).sum();
    let cc_tools: HashMap<String, f64> = records_named(CLAUDE_LOGS, "tool_result")
        .iter()
        .map(|r| (common::otlp_json_attr(r, "tool_use_id").unwrap(), num(r, "duration_ms")))
        .collect();
    let cx_calls: Vec<Value> = records_named(CODEX_LOGS, "codex.sse_event")
        .into_iter()
        .filter(|r| common::otlp_json_attr(r, "event.kind").as_deref() == Some("response.completed"))
        // Codex logs each completion twice; the second record carries the counts.
        .filter(|r| common::otlp_json_attr(r, "input_token_count").is_some())
        .collect();
    let cx_in: f64 = cx_calls.iter().map(|r| num(r, "input_token_count")).sum();
    let cx_tools: HashMap<String, f64> = records_named(CODEX_LOGS, "codex.tool_result")
        .iter()
        .map(|r| (common::otlp_json_attr(r, "call_id").unwrap(), num(r, "duration_ms")))
        .collect();
    let gm_calls = records_named(GEMINI_LOGS, "gemini_cli.api_response");
    let gm_in: f64 = gm_calls.iter().map(|r| num(r, "input_token_count")).sum();
    let gm_out: f64 = gm_calls.iter().map(|r| num(r, "output_token_count")).sum();
    let qw_calls = records_named(QWEN_LOGS, "qwen-code.api_response");
    let qw_in: f64 = qw_calls.iter().map(|r| num(r, "input_token_count")).sum();
    let vendor_spans: usize = CLAUDE_TRACES
        .iter()
        .map(|b| {
            let v: Value = serde_json::from_str(b).unwrap();
            v["resourceSpans"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r["scopeSpans"].as_array().unwrap().iter())
                .map(|s| s["spans"].as_array().unwrap().len())
                .sum::<usize>()
        })
        .sum();
    assert!(cc_calls.len() > 1 && cx_calls.len() > 1 && gm_calls.len() > 1 && vendor_spans > 10, "the captures");

    // Wait for every run span (they leave after the grace) and the metrics, then stop. The
    // bound only ends a hang: the wait ends on the receiver's own signal.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let next = seen.notified();
        tokio::pin!(next);
        // Registered before looking, so a request that lands in between still wakes it.
        next.as_mut().enable();
        let d = decode(&got);
        let runs = |s: &str| named(&ours(&d.spans, s), "invoke_agent").len();
        let placed = d.spans.iter().filter(|s| attr_str(&s.attributes, "aep.vendor.placement").is_some()).count();
        let metrics_in = token_usage(&d.metrics, "gemini-cli", "input").0 as usize == gm_calls.len()
            && token_usage(&d.metrics, "codex", "input").0 as usize == cx_calls.len()
            && token_usage(&d.metrics, "claude-code", "input").0 as usize == cc_calls.len();
        if runs(CLAUDE) >= 1
            && runs(CODEX) >= 1
            && runs(GEMINI) >= 1
            && runs(QWEN) >= 1
            && placed >= vendor_spans
            && metrics_in
        {
            break;
        }
        assert!(
            tokio::time::timeout_at(deadline, next).await.is_ok(),
            "not all arrived: runs {} {} {}, vendor spans {placed}/{vendor_spans}, metrics {metrics_in}",
            runs(CLAUDE),
            runs(CODEX),
            runs(GEMINI)
        );
    }
    bridge.shutdown().await;
    let d = decode(&got);

    // Claude Code: its hooks, its log records and its own spans, one trace.
    let (cc, trace) = one_trace(&d.spans, CLAUDE, "claude-code");
    let runs = named(&cc, "invoke_agent claude-code");
    assert_eq!(runs.len(), 1, "one prompt, one run");
    let run = runs[0];
    assert_eq!(run.status.as_ref().unwrap().code, 1);
    assert_eq!(attr_num(&run.attributes, "gen_ai.usage.input_tokens"), Some(cc_in));
    assert_eq!(attr_num(&run.attributes, "gen_ai.usage.output_tokens"), Some(cc_out));
    assert_eq!(attr_num(&run.attributes, "aep.usage.model_calls"), Some(cc_calls.len() as f64));
    assert_eq!(attr_str(&run.attributes, "aep.usage.join"), Some("run_id"), "prompt.id is the run");
    assert_eq!(attr_str(&run.attributes, "gen_ai.request.model"), Some("claude-opus-4-8"), "the model the calls name");
    let cost = attr_num(&run.attributes, "aep.cost.total").unwrap();
    assert!((cost - cc_cost).abs() < 1e-9, "{cost} vs {cc_cost}");
    let tools = named(&cc, "execute_tool");
    let failed: Vec<&&Span> = tools.iter().filter(|s| s.status.as_ref().unwrap().code == 2).collect();
    let failures = hooks("claude-code", "s01_tools_bypass_json.jsonl")
        .iter()
        .filter(|p| p["hook_event_name"] == "PostToolUseFailure")
        .count();
    assert_eq!(failed.len(), failures, "the failing tools are ERROR");
    assert_eq!(tools.len(), cc_tools.len(), "one span per tool call");
    for t in &tools {
        assert_eq!(t.parent_span_id, run.span_id, "{}", t.name);
        let id = attr_str(&t.attributes, "gen_ai.tool.call.id").unwrap();
        assert_eq!(attr_num(&t.attributes, "aep.vendor.tool_duration_ms"), Some(cc_tools[id]), "{id}");
    }
    // Claude Code's own spans: every one forwarded, inside the session trace.
    let vendor: Vec<&Span> = d.spans.iter().filter(|s| s.name.starts_with("claude_code.")).collect();
    assert_eq!(vendor.len(), vendor_spans, "every vendor span once");
    assert!(vendor.iter().all(|s| s.trace_id == trace), "the vendor spans are in the session trace");
    let by_id: HashMap<&[u8], &Span> = d.spans.iter().map(|s| (s.span_id.as_slice(), s)).collect();
    for v in &vendor {
        assert!(by_id.contains_key(v.parent_span_id.as_slice()), "{}: its parent is in the trace", v.name);
    }
    for v in vendor.iter().filter(|s| s.name == "claude_code.tool") {
        let id = attr_str(&v.attributes, "tool_use_id").unwrap();
        let parent = by_id[v.parent_span_id.as_slice()];
        assert_eq!(attr_str(&parent.attributes, "gen_ai.tool.call.id"), Some(id), "under its execute_tool span");
    }
    let interactions: Vec<&&Span> = vendor.iter().filter(|s| s.name == "claude_code.interaction").collect();
    assert_eq!(interactions.len(), 1);
    assert_eq!(interactions[0].parent_span_id, run.span_id, "the interaction under its run");
    assert!(
        vendor
            .iter()
            .filter(|s| s.name == "claude_code.llm_request")
            .all(|s| s.parent_span_id == interactions[0].span_id),
        "the vendor's model calls stay under its interaction"
    );
    // Every GenAI span names its operation: ours (the session root is no operation), and
    // the vendor's model calls (their own counts under the GenAI names).
    for s in cc.iter().filter(|s| !s.name.starts_with("attention") && !s.parent_span_id.is_empty()) {
        assert!(attr_str(&s.attributes, "gen_ai.operation.name").is_some(), "{}", s.name);
    }
    for v in vendor.iter().filter(|s| s.name == "claude_code.llm_request") {
        assert_eq!(attr_str(&v.attributes, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(attr_num(&v.attributes, "gen_ai.usage.input_tokens"), attr_num(&v.attributes, "input_tokens"));
    }
    // Log records: on the session trace, each on a span of it; model-call records on the run.
    let cc_ids: std::collections::HashSet<&[u8]> = cc.iter().map(|s| s.span_id.as_slice()).collect();
    let cc_logs: Vec<&LogRecord> =
        d.logs.iter().filter(|r| attr_str(&r.attributes, "aep.session_id") == Some(CLAUDE)).collect();
    assert!(cc_logs.len() > 20, "{}", cc_logs.len());
    for r in &cc_logs {
        assert_eq!(r.trace_id, trace, "{}", r.event_name);
        assert!(cc_ids.contains(r.span_id.as_slice()), "{}: on a span of the session", r.event_name);
    }
    let api: Vec<&&LogRecord> = cc_logs.iter().filter(|r| r.event_name.ends_with("otel.api_request")).collect();
    assert_eq!(api.len(), cc_calls.len());
    assert!(api.iter().all(|r| r.span_id == run.span_id), "model-call records on the run span");
    for r in cc_logs.iter().filter(|r| r.event_name.starts_with("dev.aep.tool.")) {
        assert!(tools.iter().any(|t| t.span_id == r.span_id), "{}: on its tool span", r.event_name);
    }

    // Codex: its hooks stamped now, its records from the capture's clock: the sole run.
    let (cx, _) = one_trace(&d.spans, CODEX, "codex");
    let runs = named(&cx, "invoke_agent codex");
    assert_eq!(runs.len(), 1);
    assert_eq!(attr_num(&runs[0].attributes, "gen_ai.usage.input_tokens"), Some(cx_in));
    assert_eq!(attr_num(&runs[0].attributes, "aep.usage.model_calls"), Some(cx_calls.len() as f64));
    assert_eq!(attr_str(&runs[0].attributes, "aep.usage.join"), Some("sole_run"));
    assert!(attr_str(&runs[0].attributes, "gen_ai.request.model").is_some());
    let tools = named(&cx, "execute_tool");
    assert_eq!(tools.len(), cx_tools.len());
    for t in &tools {
        let id = attr_str(&t.attributes, "gen_ai.tool.call.id").unwrap();
        assert_eq!(attr_num(&t.attributes, "aep.vendor.tool_duration_ms"), Some(cx_tools[id]), "{id}");
    }

    // Gemini CLI: hook timestamps and records share the capture's clock: joined by time.
    let (gm, gm_trace) = one_trace(&d.spans, GEMINI, "gemini-cli");
    let runs = named(&gm, "invoke_agent gemini-cli");
    assert_eq!(runs.len(), 1);
    assert_eq!(attr_num(&runs[0].attributes, "gen_ai.usage.input_tokens"), Some(gm_in));
    assert_eq!(attr_num(&runs[0].attributes, "gen_ai.usage.output_tokens"), Some(gm_out));
    assert_eq!(attr_str(&runs[0].attributes, "aep.usage.join"), Some("time"));
    assert_eq!(attr_str(&runs[0].attributes, "llm.model_name"), Some("gemini-2.5-pro"));
    // Its own spans, each the root of its own vendor trace as recorded: every one in the
    // session's trace, parented inside it, saying how it was placed; its model calls (no call
    // id names a run) under the session root.
    let recorded: usize = GEMINI_TRACES.iter().map(|b| common::otlp_json_spans(b).len()).sum();
    let gm_vendor: Vec<&Span> = d
        .spans
        .iter()
        .filter(|s| ["llm_call", "tool_call", "schedule_tool_calls"].contains(&s.name.as_str()))
        .collect();
    assert_eq!(gm_vendor.len(), recorded, "every recorded Gemini span, once");
    let gm_ids: std::collections::HashSet<&[u8]> =
        d.spans.iter().filter(|s| s.trace_id == gm_trace).map(|s| s.span_id.as_slice()).collect();
    let gm_root = gm.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
    for v in &gm_vendor {
        assert_eq!(v.trace_id, gm_trace, "{}: in the session trace", v.name);
        assert!(gm_ids.contains(v.parent_span_id.as_slice()), "{}: parented inside the trace", v.name);
        assert!(attr_str(&v.attributes, "aep.vendor.placement").is_some(), "{}", v.name);
    }
    let llm: Vec<&&Span> = gm_vendor.iter().filter(|s| s.name == "llm_call").collect();
    assert!(!llm.is_empty() && llm.iter().all(|s| s.parent_span_id == gm_root.span_id), "model calls under the root");
    // Classed for OpenInference UIs (they name their GenAI operation in their own words).
    assert!(llm.iter().all(|s| attr_str(&s.attributes, "openinference.span.kind") == Some("LLM")));
    // Each model call carries the counts of its own `api_response` record (joined by time),
    // so a trace UI's token total is the run's: the calls' sums are the recorded sums.
    assert_eq!(llm.len(), gm_calls.len(), "one span per recorded call");
    assert!(llm.iter().all(|s| attr_str(&s.attributes, "aep.usage.join") == Some("time")));
    let llm_sum = |k: &str| llm.iter().map(|s| attr_num(&s.attributes, k).unwrap_or(f64::NAN)).sum::<f64>();
    assert_eq!((llm_sum("gen_ai.usage.input_tokens"), llm_sum("gen_ai.usage.output_tokens")), (gm_in, gm_out));
    assert_eq!(llm_sum("llm.token_count.total"), gm_in + gm_out);
    assert!(
        gm_vendor
            .iter()
            .filter(|s| s.name == "tool_call")
            .all(|s| attr_str(&s.attributes, "openinference.span.kind") == Some("TOOL"))
    );

    // Qwen Code: UserPromptSubmit on every model turn, one run; no SessionEnd in the
    // capture (its root closes at shutdown), the run's records joined by time.
    let qw = ours(&d.spans, QWEN);
    let runs = named(&qw, "invoke_agent qwen-code");
    assert_eq!(runs.len(), 1);
    assert!(qw_calls.len() > 1);
    assert_eq!(attr_num(&runs[0].attributes, "gen_ai.usage.input_tokens"), Some(qw_in));
    assert_eq!(attr_num(&runs[0].attributes, "aep.usage.model_calls"), Some(qw_calls.len() as f64));
    assert_eq!(attr_str(&runs[0].attributes, "aep.usage.join"), Some("time"));

    // GenAI metrics, as exported over OTLP: one token point per model call, the same sums.
    for (agent, calls, input) in [
        ("claude-code", cc_calls.len(), cc_in),
        ("codex", cx_calls.len(), cx_in),
        ("gemini-cli", gm_calls.len(), gm_in),
    ] {
        assert_eq!(token_usage(&d.metrics, agent, "input"), (calls as u64, input), "{agent}");
    }
    let mut names = BTreeMap::<&str, usize>::new();
    for s in &d.spans {
        *names.entry(s.name.as_str()).or_default() += 1;
    }
    if std::env::var_os("JOIN_DUMP").is_some() {
        eprintln!("{names:#?}");
    }
}
