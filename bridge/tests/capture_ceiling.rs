//! The capture ceiling over the agents' own telemetry, on a real session: Claude Code's `s01`
//! recorded with every content switch on (`OTEL_LOG_USER_PROMPTS`, `OTEL_LOG_TOOL_DETAILS`,
//! `OTEL_LOG_TOOL_CONTENT`, `OTEL_LOG_ASSISTANT_RESPONSES`, the beta spans): its hooks, its
//! log exports and its span exports go into a real `serve` that exports every OTLP signal to
//! one receiver and tees to another. At `metadata` no prompt, command, path, output or
//! identity of the recording is in any byte either receiver gets, and what was removed is
//! named in `aep.capture.withheld`; at `full` the same replay carries the content through.
//!
//! Claude Code's metrics were not kept by the recorder: the metrics request is built from the
//! recording's own resource and identity attributes.

use aep_testkit as common;

use std::collections::BTreeSet;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_schemas::Capture;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use prost::Message as _;
use serde_json::{Value, json};

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/otlp-captures");
const HOOKS: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/tests/data/claude-code/s01_tools_bypass_json.jsonl");
const SESSION: &str = "45a2eddb-be16-44a0-9158-5f92e545154f";
const TRACES: [&str; 7] = ["0004", "0007", "0011", "0013", "0016", "0019", "0022"];
/// The recorded prompt (the `claude_code.interaction` span's `user_prompt`, the
/// `user_prompt` record's `prompt`, the hook's `prompt`).
const PROMPT: &str = "Run tools [[plan:bash_ok,read_ok,bash_fail,read_missing,write,edit]]";
/// A recorded shell command (the `claude_code.tool` span's `full_command`).
const COMMAND: &str = "ls /nonexistent_dir_for_hook_test";

/// The keys whose values are content in Claude Code's recording (its content table in
/// `adapters/src/vendors/claude_code/otel/`, identity included).
const CONTENT_KEYS: &[&str] = &[
    "prompt",
    "user_prompt",
    "response",
    "error",
    "tool_parameters",
    "tool_input",
    "full_command",
    "bash_command",
    "file_path",
    "output",
    "content",
    "diff",
    "user.id",
    "user.email",
    "user.account_uuid",
    "organization.id",
];

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn traces() -> Vec<String> {
    TRACES.iter().map(|n| read(Path::new(CAPTURES).join(format!("claude-code/s01_{n}_traces.json")))).collect()
}

/// Every string in a JSON value (nested), and inside strings that are JSON themselves
/// (`tool_parameters`).
fn strings(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            if let Ok(inner @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(s) {
                strings(&inner, out);
            }
            out.insert(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// Every OTLP/JSON attribute list in a body (resources, spans, span events, records).
fn json_attrs(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::Array(a)) = m.get("attributes") {
                out.extend(a.iter().cloned());
            }
            m.values().for_each(|x| json_attrs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| json_attrs(x, out)),
        _ => {}
    }
}

/// The recording's content: every value of a content key in its spans and records, the
/// hooks' prompt, tool inputs and responses, at least 6 bytes long (shorter ones, `hi`,
/// `true`, occur in structural bytes by chance).
fn needles() -> BTreeSet<String> {
    let mut all = BTreeSet::new();
    let bodies = traces().into_iter().chain(common::CLAUDE_S01_LOGS.iter().map(|s| (*s).to_owned()));
    for body in bodies {
        let mut attrs = Vec::new();
        json_attrs(&serde_json::from_str(&body).unwrap(), &mut attrs);
        for a in attrs.iter().filter(|a| CONTENT_KEYS.contains(&a["key"].as_str().unwrap_or_default())) {
            strings(&a["value"], &mut all);
        }
    }
    for line in read(HOOKS).lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        for k in ["prompt", "tool_input", "tool_response"] {
            strings(&r["payload"][k], &mut all);
        }
    }
    all.retain(|s| s.len() >= 6);
    assert!(all.contains(PROMPT) && all.contains(COMMAND), "the recording carries its content: {all:#?}");
    all
}

/// Requests as received: (path, body decompressed).
type Bodies = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// What a receiver got, and a signal per request.
#[derive(Clone, Default)]
struct Got {
    bodies: Bodies,
    arrived: Arc<tokio::sync::Notify>,
}

impl Got {
    fn of(&self, path: &str) -> Vec<Vec<u8>> {
        self.bodies.lock().unwrap().iter().filter(|(p, _)| p == path).map(|(_, b)| b.clone()).collect()
    }

    /// Waits for `n` requests to `path` (bounded: the tee delivers in the background).
    async fn wait(&self, path: &str, n: usize) {
        let wait = async {
            loop {
                let arrived = self.arrived.notified();
                if self.of(path).len() >= n {
                    return;
                }
                arrived.await;
            }
        };
        let waited = tokio::time::timeout(Duration::from_secs(30), wait).await;
        assert!(waited.is_ok(), "{n} requests to {path}: got {}", self.of(path).len());
    }
}

async fn record(State(got): State<Got>, uri: Uri, headers: HeaderMap, body: Bytes) -> &'static str {
    let gzip = headers.get("content-encoding").is_some_and(|v| v == "gzip");
    let body = if gzip {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        body.to_vec()
    };
    got.bodies.lock().unwrap().push((uri.path().to_owned(), body));
    got.arrived.notify_waiters();
    ""
}

async fn receiver() -> (Got, SocketAddr) {
    let got = Got::default();
    let app = axum::Router::new().fallback(record).with_state(got.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (got, addr)
}

/// A metrics export in Claude Code's shape on the recording's resource, its data point with
/// the recording's identity and session.
fn metrics_body() -> String {
    let t: Value = serde_json::from_str(&traces()[0]).unwrap();
    let resource = t["resourceSpans"][0]["resource"].clone();
    let span = &common::otlp_json_spans(&traces()[0])[0];
    let user = common::otlp_json_attr(span, "user.id").expect("the recording's user.id");
    let s = |k: &str, v: &str| json!({"key": k, "value": {"stringValue": v}});
    json!({"resourceMetrics": [{"resource": resource, "scopeMetrics": [{
        "scope": {"name": "com.anthropic.claude_code", "version": "2.1.197"},
        "metrics": [{"name": "claude_code.token.usage", "unit": "tokens", "sum": {
            "aggregationTemporality": 2, "isMonotonic": true,
            "dataPoints": [{"asInt": "1225", "timeUnixNano": "1796011453035541800",
                "attributes": [s("user.id", &user), s("session.id", SESSION), s("type", "input"),
                    s("model", "claude-sonnet-4-5")]}]}}]}]}]})
    .to_string()
}

/// The receivers of a replay at `ceiling` (`[capture] max` and `[export.otlp] max_capture`).
struct Replay {
    export: Got,
    tee: Got,
    metrics: String,
}

async fn replay(ceiling: Capture) -> Replay {
    let (export, export_addr) = receiver().await;
    let (tee, tee_addr) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.capture.max = ceiling;
    cfg.otlp_in.tee = Some(format!("http://{tee_addr}").parse().unwrap());
    let o = &mut cfg.export.otlp;
    o.endpoint = Some(format!("http://{export_addr}").parse().unwrap());
    o.protocol = aep_bridge::export::Protocol::HttpProtobuf;
    o.compression = aep_bridge::export::Compression::None;
    o.max_capture = ceiling;
    cfg.server.shutdown_grace_ms = 20_000; // a loaded machine must not cut the final flush short
    let bridge = common::start(cfg).await;
    let url = bridge.url();
    for line in read(HOOKS).lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let hook = r["hook"].as_str().unwrap();
        let (status, text) =
            common::post(format!("{url}/hooks/claude-code/{hook}"), r["payload"].to_string(), vec![]).await;
        assert_eq!(status, 200, "{hook}: {text}");
    }
    let sends = common::CLAUDE_S01_LOGS
        .iter()
        .map(|b| ("/v1/logs", (*b).to_owned()))
        .chain(traces().into_iter().map(|b| ("/v1/traces", b)))
        .chain([("/v1/metrics", metrics_body())]);
    let mut sent = std::collections::HashMap::<&str, usize>::new();
    for (path, body) in sends {
        let (status, text) = common::post(format!("{url}{path}"), body, vec![]).await;
        assert_eq!(status, 200, "{path}: {text}");
        *sent.entry(path).or_default() += 1;
    }
    for (path, n) in &sent {
        tee.wait(path, *n).await;
    }
    let (_, metrics) = common::get(format!("{url}/metrics")).await;
    // Spans and the forwarded metrics leave at the latest with the final flush.
    bridge.shutdown().await;
    export.wait("/v1/metrics", 1).await;
    Replay { export, tee, metrics }
}

fn kv_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    })
}

/// The keys `aep.capture.withheld` names on an attribute list.
fn withheld(attrs: &[KeyValue]) -> Vec<String> {
    let Some(kv) = attrs.iter().find(|kv| kv.key == "aep.capture.withheld") else { return Vec::new() };
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::ArrayValue(a)) => a
            .values
            .iter()
            .filter_map(|v| match v.value.as_ref()? {
                any_value::Value::StringValue(s) => Some(s.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The agent's own spans in traces requests (`claude_code.*`), with their resources'
/// `aep.capture`.
fn vendor_spans(bodies: &[Vec<u8>]) -> Vec<(opentelemetry_proto::tonic::trace::v1::Span, Option<String>)> {
    let mut out = Vec::new();
    for b in bodies {
        for rs in ExportTraceServiceRequest::decode(&b[..]).unwrap().resource_spans {
            let capture = rs.resource.as_ref().and_then(|r| kv_str(&r.attributes, "aep.capture")).map(str::to_owned);
            for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                if s.name.starts_with("claude_code.") {
                    out.push((s, capture.clone()));
                }
            }
        }
    }
    out
}

/// Every needle found in any byte of a receiver's requests, with the path it was found on.
fn leaks(got: &Got, needles: &BTreeSet<String>) -> Vec<String> {
    let bodies = got.bodies.lock().unwrap();
    let mut out = Vec::new();
    for n in needles {
        for (path, b) in bodies.iter() {
            if b.windows(n.len()).any(|w| w == n.as_bytes()) {
                out.push(format!("{path}: {n:?}"));
            }
        }
    }
    out
}

fn contains(bodies: &[Vec<u8>], needle: &str) -> bool {
    bodies.iter().any(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_metadata_nothing_of_the_recordings_content_leaves_and_what_was_removed_is_named() {
    let needles = needles();
    let r = replay(Capture::Metadata).await;
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let leaks = leaks(got, &needles);
        assert!(leaks.is_empty(), "{name} received content above metadata:\n{}", leaks.join("\n"));
        let bodies = got.bodies.lock().unwrap();
        let bytes: usize = bodies.iter().map(|(_, b)| b.len()).sum();
        eprintln!("{name}: {} requests, {bytes} bytes, none of {} content strings", bodies.len(), needles.len());
    }

    // The agent's spans went out (placed in the session's trace), marked with what they lost.
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let spans = vendor_spans(&got.of("/v1/traces"));
        assert_eq!(spans.iter().filter(|(s, _)| s.name == "claude_code.interaction").count(), 1, "{name}");
        for (s, capture) in &spans {
            assert_eq!(capture.as_deref(), Some("metadata"), "{name}: {} gated", s.name);
            assert_eq!(kv_str(&s.attributes, "session.id"), Some(SESSION), "{name}: structure stays");
        }
        let interaction = spans.iter().find(|(s, _)| s.name == "claude_code.interaction").unwrap();
        assert!(withheld(&interaction.0.attributes).contains(&"user_prompt".to_owned()), "{name}");
        let commands = spans.iter().filter(|(s, _)| withheld(&s.attributes).contains(&"full_command".to_owned()));
        assert_eq!(commands.count(), 2, "{name}: both recorded commands named as withheld");
    }
    let exported = vendor_spans(&r.export.of("/v1/traces"));
    assert!(
        exported.iter().all(|(s, _)| kv_str(&s.attributes, "aep.session_id") == Some(SESSION)),
        "the exported spans are the ones placed in the session's trace"
    );
    assert_eq!(exported.len(), vendor_spans(&r.tee.of("/v1/traces")).len(), "every span of the recording");

    // The tee's logs: the prompt record lost its prompt and says so.
    let records: Vec<_> = r
        .tee
        .of("/v1/logs")
        .iter()
        .flat_map(|b| ExportLogsServiceRequest::decode(&b[..]).unwrap().resource_logs)
        .flat_map(|r| r.scope_logs)
        .flat_map(|s| s.log_records)
        .collect();
    let prompt = records.iter().find(|r| kv_str(&r.attributes, "event.name") == Some("user_prompt")).unwrap();
    assert!(withheld(&prompt.attributes).contains(&"prompt".to_owned()), "{:?}", prompt.attributes);

    // The agent's metrics, forwarded to the export's peer and teed: identity withheld.
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let point = got
            .of("/v1/metrics")
            .iter()
            .flat_map(|b| ExportMetricsServiceRequest::decode(&b[..]).unwrap().resource_metrics)
            .filter(|rm| {
                rm.resource.as_ref().and_then(|r| kv_str(&r.attributes, "service.name")) == Some("claude-code")
            })
            .flat_map(|rm| rm.scope_metrics)
            .flat_map(|s| s.metrics)
            .find_map(|m| match m.data {
                Some(Data::Sum(s)) if m.name == "claude_code.token.usage" => s.data_points.into_iter().next(),
                _ => None,
            })
            .unwrap_or_else(|| panic!("{name}: the agent's metric"));
        assert_eq!(withheld(&point.attributes), ["user.id"], "{name}");
        assert_eq!(kv_str(&point.attributes, "session.id"), Some(SESSION), "{name}");
    }
    for sink in ["otlp-tee", "otlp_vendor_spans", "otlp_vendor_metrics"] {
        let line = format!("aep_bridge_capture_gated_total{{action=\"withheld\",sink=\"{sink}\"}}");
        assert!(r.metrics.lines().any(|l| l.starts_with(&line)), "{line} in:\n{}", r.metrics);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_full_the_same_replay_carries_the_content_through() {
    let r = replay(Capture::Full).await;
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let traces = got.of("/v1/traces");
        assert!(contains(&traces, PROMPT) && contains(&traces, COMMAND), "{name}: the agent's spans verbatim");
        let spans = vendor_spans(&traces);
        assert!(!spans.is_empty(), "{name}");
        assert!(spans.iter().all(|(s, c)| withheld(&s.attributes).is_empty() && c.is_none()), "{name}: ungated");
    }
    assert!(contains(&r.tee.of("/v1/logs"), PROMPT), "the tee's logs verbatim");
    assert!(!r.metrics.contains("aep_bridge_capture_gated_total"), "nothing gated at full");
}
