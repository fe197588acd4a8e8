//! The capture ceiling over everything that leaves, on real sessions recorded with their
//! content switches on: Claude Code's `s01` (`OTEL_LOG_USER_PROMPTS`, `OTEL_LOG_TOOL_DETAILS`,
//! `OTEL_LOG_TOOL_CONTENT`, `OTEL_LOG_ASSISTANT_RESPONSES`, the beta spans), Gemini CLI's
//! `g02` (`logPrompts`, its spans), Qwen Code's `q01` and Codex's `c01` (`log_user_prompt`):
//! their hooks, log exports and span exports go into a real `serve` that exports every OTLP
//! signal, CloudEvents and OCSF to one receiver and tees to another. At `metadata` no
//! prompt, command, path, output, response or identity of the recordings is in any byte
//! either receiver gets, and what was removed is named in `aep.capture.withheld`; at
//! `redacted` the prompt passes redacted (the home directory as `~`) and the commands do
//! not; at `full` the same replay carries the content through.
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
const ADAPTER_DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/tests/data");
const SESSION: &str = "45a2eddb-be16-44a0-9158-5f92e545154f";
const TRACES: [&str; 7] = ["0004", "0007", "0011", "0013", "0016", "0019", "0022"];
/// The recorded prompt (the `claude_code.interaction` span's `user_prompt`, the
/// `user_prompt` record's `prompt`, the hook's `prompt`).
const PROMPT: &str = "Run tools [[plan:bash_ok,read_ok,bash_fail,read_missing,write,edit]]";
/// A recorded shell command (the `claude_code.tool` span's `full_command`).
const COMMAND: &str = "ls /nonexistent_dir_for_hook_test";

/// One recorded session: its vendor, its hook payloads, its OTLP exports (path, body).
struct Run {
    vendor: &'static str,
    hooks: String,
    exports: Vec<(&'static str, String)>,
}

fn claude() -> Run {
    Run {
        vendor: "claude-code",
        hooks: read(Path::new(ADAPTER_DATA).join("claude-code/s01_tools_bypass_json.jsonl")),
        exports: common::CLAUDE_S01_LOGS
            .iter()
            .map(|b| ("/v1/logs", (*b).to_owned()))
            .chain(traces().into_iter().map(|b| ("/v1/traces", b)))
            .chain([("/v1/metrics", metrics_body())])
            .collect(),
    }
}

/// The other recorded sessions: Gemini CLI (logs and spans), Qwen Code, Codex.
fn others() -> Vec<Run> {
    let export = |f: &str| {
        let path = if f.contains("_traces") { "/v1/traces" } else { "/v1/logs" };
        (path, read(Path::new(CAPTURES).join(f)))
    };
    vec![
        Run {
            vendor: "gemini-cli",
            hooks: read(Path::new(CAPTURES).join("gemini-cli/g02_hooks.jsonl")),
            exports: ["0001_logs", "0002_traces", "0003_traces", "0004_logs"]
                .iter()
                .map(|n| export(&format!("gemini-cli/g02_{n}.json")))
                .collect(),
        },
        Run {
            vendor: "qwen-code",
            hooks: read(Path::new(ADAPTER_DATA).join("qwen-code/q01_tools_yolo_http.jsonl")),
            exports: ["q01_0001_logs", "q01_0003_logs"]
                .iter()
                .map(|n| export(&format!("qwen-code/{n}.json")))
                .collect(),
        },
        Run {
            vendor: "codex",
            hooks: read(Path::new(ADAPTER_DATA).join("codex/c01_exec_json.jsonl")),
            exports: ["0001", "0003", "0004", "0007"]
                .iter()
                .map(|n| export(&format!("codex/c01_{n}_logs.json")))
                .collect(),
        },
    ]
}

fn hook_payloads(run: &Run) -> Vec<Value> {
    run.hooks.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The keys whose values are content in Claude Code's recording, written out here (its
/// content table in `adapters/src/vendors/claude_code/otel/`, identity included); every
/// other table's keys are added from the tables themselves.
const CLAUDE_KEYS: &[&str] = &[
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

/// The recordings' content: every value of a content key in their spans and records (and
/// the strings inside those that are JSON), the hooks' prompts, tool inputs and responses;
/// text (at least 6 bytes with a space or a slash, or longer than 40), not ids.
fn needles(runs: &[Run]) -> BTreeSet<String> {
    let tables = aep_adapters::vendors::content_tables().flat_map(|t| t.attrs.iter());
    let keys: Vec<aep_adapters::otel::content::Key> =
        CLAUDE_KEYS.iter().map(|k| aep_adapters::otel::content::Key::Exact(k)).chain(tables.map(|a| a.key)).collect();
    let mut all = BTreeSet::new();
    for run in runs {
        for (_, body) in &run.exports {
            let mut attrs = Vec::new();
            json_attrs(&serde_json::from_str(body).unwrap(), &mut attrs);
            for a in attrs {
                let key = a["key"].as_str().unwrap_or_default();
                if keys.iter().any(|k| k.matches(key)) {
                    strings(&a["value"], &mut all);
                }
            }
        }
        for r in hook_payloads(run) {
            for k in ["prompt", "tool_input", "tool_response", "last_assistant_message", "prompt_response"] {
                strings(&r["payload"][k], &mut all);
            }
        }
    }
    // Content, not ids: the drop-only JSON values (`hook_input`, `tool_parameters`) also
    // hold the session id, the tool's name and the like, which every exit carries anyway.
    let id_like = |s: &str| s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let token = |s: &str| s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.:-".contains(&b));
    let text_like = |s: &str| s.contains(|c: char| c.is_whitespace() || c == '/') || (s.len() > 40 && !token(s));
    all.retain(|s| s.len() >= 6 && text_like(s) && !id_like(s));
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

/// The receivers of a replay at `ceiling` (`[capture] max` and every exporter's
/// `max_capture`), and the bridge's `/metrics` after it.
struct Replay {
    export: Got,
    tee: Got,
    metrics: String,
}

async fn replay(ceiling: Capture, runs: &[Run]) -> Replay {
    let (export, export_addr) = receiver().await;
    let (tee, tee_addr) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.capture.max = ceiling;
    cfg.capture.home = "/home/dev".into();
    cfg.otlp_in.tee = Some(format!("http://{tee_addr}").parse().unwrap());
    let o = &mut cfg.export.otlp;
    o.endpoint = Some(format!("http://{export_addr}").parse().unwrap());
    o.protocol = aep_bridge::export::Protocol::HttpProtobuf;
    o.compression = aep_bridge::export::Compression::None;
    o.max_capture = ceiling;
    cfg.export.cloudevents.endpoint = Some(format!("http://{export_addr}/cloudevents").parse().unwrap());
    cfg.export.cloudevents.max_capture = ceiling;
    cfg.export.ocsf.endpoint = Some(format!("http://{export_addr}/ocsf").parse().unwrap());
    cfg.export.ocsf.max_capture = ceiling;
    cfg.server.shutdown_grace_ms = 20_000; // a loaded machine must not cut the final flush short
    let bridge = common::start(cfg).await;
    let url = bridge.url();
    let mut sent = std::collections::HashMap::<&str, usize>::new();
    for run in runs {
        for r in hook_payloads(run) {
            let hook = r["hook"].as_str().unwrap();
            let (status, text) =
                common::post(format!("{url}/hooks/{}/{hook}", run.vendor), r["payload"].to_string(), vec![]).await;
            assert_eq!(status, 200, "{} {hook}: {text}", run.vendor);
        }
        for (path, body) in &run.exports {
            let (status, text) = common::post(format!("{url}{path}"), body.clone(), vec![]).await;
            assert_eq!(status, 200, "{} {path}: {text}", run.vendor);
            *sent.entry(path).or_default() += 1;
        }
    }
    for (path, n) in &sent {
        tee.wait(path, *n).await;
    }
    let (_, metrics) = common::get(format!("{url}/metrics")).await;
    // Spans, CloudEvents, OCSF and the forwarded metrics leave at the latest with the final flush.
    bridge.shutdown().await;
    for path in ["/v1/metrics", "/cloudevents", "/ocsf"] {
        export.wait(path, 1).await;
    }
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
    let runs: Vec<Run> = std::iter::once(claude()).chain(others()).collect();
    let needles = needles(&runs);
    let r = replay(Capture::Metadata, &runs).await;
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let leaks = leaks(got, &needles);
        assert!(leaks.is_empty(), "{name} received content above metadata:\n{}", leaks.join("\n"));
        let bodies = got.bodies.lock().unwrap();
        let bytes: usize = bodies.iter().map(|(_, b)| b.len()).sum();
        let paths: Vec<&str> = bodies.iter().map(|(p, _)| p.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
        eprintln!(
            "{name}: {} requests ({}), {bytes} bytes, none of {} content strings",
            bodies.len(),
            paths.join(" "),
            needles.len()
        );
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
    let r = replay(Capture::Full, &[claude()]).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_redacted_the_prompt_passes_redacted_and_the_commands_do_not() {
    let r = replay(Capture::Redacted, &[claude()]).await;
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let traces = got.of("/v1/traces");
        assert!(contains(&traces, PROMPT), "{name}: the prompt passed the pipeline (nothing in it to redact)");
        // The agent's command leaves its spans only at `full` (its table: drop-only); the
        // bridge's own tool span carries the call's `args_redacted`, which AEP-0002 puts at
        // `redacted` (the pipeline ran over it at the source).
        let own: Vec<Vec<u8>> = vendor_spans(&traces).iter().map(|(s, _)| s.encode_to_vec()).collect();
        assert!(!contains(&own, COMMAND), "{name}: the agent's command leaves its spans only at full");
        let path = "~/agents/work/cc/project/hello.txt";
        assert!(contains(&traces, path), "{name}: the path, its home directory as ~");
        let home = leaks(got, &BTreeSet::from(["/home/dev/".to_owned()]));
        assert!(home.is_empty(), "{name}: the home directory left:\n{}", home.join("\n"));
        let spans = vendor_spans(&traces);
        assert!(spans.iter().all(|(_, c)| c.as_deref() == Some("redacted")), "{name}");
    }
    let line = "aep_bridge_capture_gated_total{action=\"redacted\",sink=\"otlp_vendor_spans\"}";
    assert!(r.metrics.lines().any(|l| l.starts_with(line)), "{line} in:\n{}", r.metrics);
}

/// Secrets planted in the recorded prompt (an AWS key id and a GitHub token, AEP-0002 §9.4's
/// secret rules) leave nowhere at `redacted`, in the bridge's events nor in the agent's own
/// telemetry, while the rest of the prompt passes (so the test can tell redaction from removal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_redacted_secrets_planted_in_the_recording_are_redacted_everywhere() {
    const SECRETS: [&str; 2] = ["AKIAABCDEFGHIJKLMNOP", "ghp_0123456789abcdefghijABCDEFGHIJ"];
    let planted = format!("{PROMPT} with key {} and token {}", SECRETS[0], SECRETS[1]);
    let mut run = claude();
    run.hooks = run.hooks.replace(PROMPT, &planted);
    for (_, body) in &mut run.exports {
        *body = body.replace(PROMPT, &planted);
    }
    assert!(run.exports.iter().any(|(_, b)| b.contains(SECRETS[0])), "the recording carries the prompt");
    let r = replay(Capture::Redacted, &[run]).await;
    let needles: BTreeSet<String> = SECRETS.iter().map(|s| (*s).to_owned()).collect();
    for (name, got) in [("export", &r.export), ("tee", &r.tee)] {
        let left = leaks(got, &needles);
        assert!(left.is_empty(), "{name}: a planted secret left:\n{}", left.join("\n"));
        assert!(contains(&got.of("/v1/traces"), PROMPT), "{name}: the rest of the prompt passed");
    }
}
