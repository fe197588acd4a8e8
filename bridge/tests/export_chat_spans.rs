//! One `chat {model}` span per model call, on real recorded sessions: Claude Code (`s01`,
//! its log records without its beta spans), Codex (`c01`), Gemini CLI (`g01`) and Qwen Code
//! (`q01`) replayed into a real `serve` (their recorded hook payloads through
//! `/hooks/{vendor}/{event}`, then their recorded OTLP/JSON log exports through `/v1/logs`),
//! exporting OTLP/HTTP protobuf to a receiver in this test that decodes what it got.
//!
//! Asserted per capture on the decoded output: as many `chat` spans (kind CLIENT) as the
//! capture has model calls, each a child of a run span of its session in the run's trace,
//! the chat spans' token sums equal to each run's usage and to the capture's, and every log
//! record of the session on a span the receiver got. A session whose agent sends its own
//! model-call spans (Claude Code with its beta spans) gets no synthesized ones.
//!
//! The spans wait out a grace longer than the test, so they leave at shutdown with
//! everything that joined them: no assertion depends on how fast the records arrive.

use aep_testkit as common;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use aep_bridge::export::{Compression, Protocol};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::Uri;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::Value;

const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/otlp-captures");
const HOOKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/tests/data");

/// One recorded session: its hooks, its OTLP log exports, how its model calls are named.
struct Capture {
    vendor: &'static str,
    session: &'static str,
    hooks: &'static str,
    logs: Vec<String>,
    /// The `event.name` of its model-call records.
    call_record: &'static str,
    /// Its input and output token attributes.
    counts: (&'static str, &'static str),
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn captures() -> Vec<Capture> {
    let logs = |files: &[&str]| files.iter().map(|f| read(Path::new(CAPTURES).join(f))).collect();
    vec![
        Capture {
            vendor: "claude-code",
            session: "45a2eddb-be16-44a0-9158-5f92e545154f",
            hooks: "claude-code/s01_tools_bypass_json.jsonl",
            logs: common::CLAUDE_S01_LOGS.iter().map(|s| (*s).to_owned()).collect(),
            call_record: "api_request",
            counts: ("input_tokens", "output_tokens"),
        },
        Capture {
            vendor: "codex",
            session: "01a22a9f-e3e6-71d0-8872-0556d1423eab",
            hooks: "codex/c01_exec_json.jsonl",
            // The last is Codex's own sessionless "flushing OTEL metrics" line.
            logs: logs(&[
                "codex/c01_0001_logs.json",
                "codex/c01_0003_logs.json",
                "codex/c01_0004_logs.json",
                "codex/c01_0007_logs.json",
            ]),
            call_record: "codex.sse_event",
            counts: ("input_token_count", "output_token_count"),
        },
        Capture {
            vendor: "gemini-cli",
            session: "ed93f2bc-8abb-4a4a-aaad-c1b58706087a",
            hooks: "gemini-cli/g01_tools_yolo_http.jsonl",
            logs: logs(&["gemini-cli/g01_0001_logs.json", "gemini-cli/g01_0003_logs.json"]),
            call_record: "gemini_cli.api_response",
            counts: ("input_token_count", "output_token_count"),
        },
        Capture {
            vendor: "qwen-code",
            session: "8a03b421-4c8f-40ab-9b43-04b98fb814c0",
            hooks: "qwen-code/q01_tools_yolo_http.jsonl",
            logs: logs(&["qwen-code/q01_0001_logs.json", "qwen-code/q01_0003_logs.json"]),
            call_record: "qwen-code.api_response",
            counts: ("input_token_count", "output_token_count"),
        },
    ]
}

impl Capture {
    /// The capture's model calls: its call records that carry counts (Codex logs each
    /// `response.completed` twice, the second with the counts).
    fn calls(&self) -> Vec<Value> {
        self.logs
            .iter()
            .flat_map(|b| common::otlp_json_records(b))
            .filter(|r| common::otlp_json_attr(r, "event.name").as_deref() == Some(self.call_record))
            .filter(|r| common::otlp_json_attr(r, self.counts.0).is_some())
            .collect()
    }

    /// The capture's `(input, output)` token sums.
    fn tokens(&self) -> (i64, i64) {
        let n = |r: &Value, k: &str| common::otlp_json_attr(r, k).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        let calls = self.calls();
        (calls.iter().map(|r| n(r, self.counts.0)).sum(), calls.iter().map(|r| n(r, self.counts.1)).sum())
    }
}

/// What the OTLP receiver got: (path, protobuf body).
type Got = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

async fn record(State(got): State<Got>, uri: Uri, body: Bytes) -> &'static str {
    got.lock().unwrap().push((uri.path().to_owned(), body.to_vec()));
    ""
}

async fn start_receiver(got: Got) -> SocketAddr {
    let app = axum::Router::new().fallback(record).with_state(got);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

fn decode(got: &Got) -> (Vec<Span>, Vec<LogRecord>) {
    let (mut spans, mut logs) = (Vec::new(), Vec::new());
    for (path, body) in got.lock().unwrap().iter() {
        match path.as_str() {
            "/v1/traces" => spans.extend(
                ExportTraceServiceRequest::decode(&body[..])
                    .unwrap()
                    .resource_spans
                    .into_iter()
                    .flat_map(|r| r.scope_spans)
                    .flat_map(|s| s.spans),
            ),
            "/v1/logs" => logs.extend(
                ExportLogsServiceRequest::decode(&body[..])
                    .unwrap()
                    .resource_logs
                    .into_iter()
                    .flat_map(|r| r.scope_logs)
                    .flat_map(|s| s.log_records),
            ),
            _ => {}
        }
    }
    (spans, logs)
}

fn attr_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.as_str()),
        _ => None,
    })
}

fn attr_int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::IntValue(n) => Some(*n),
        _ => None,
    })
}

/// A bridge exporting to a fresh receiver; spans wait out a grace longer than the test, so
/// they leave only at shutdown, with every record that joined them.
async fn bridge() -> (common::Running, Got, tempfile::TempDir) {
    let got: Got = Arc::default();
    let addr = start_receiver(got.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    let o = &mut cfg.export.otlp;
    o.endpoint = Some(format!("http://{addr}").parse().unwrap());
    o.protocol = Protocol::HttpProtobuf;
    o.compression = Compression::None;
    o.metrics = false;
    o.span_grace_ms = 600_000;
    cfg.server.shutdown_grace_ms = 20_000; // a loaded machine must not cut the final flush short
    (common::start(cfg).await, got, dir)
}

/// Posts a capture's hooks, then its log exports, as the agent sent them. Every record is
/// taken (the answer is `{}`) but those that name no session, which the answer reports
/// rejected.
async fn replay(url: &str, c: &Capture) {
    for line in read(Path::new(HOOKS).join(c.hooks)).lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        let hook = r["hook"].as_str().unwrap();
        let (status, text) =
            common::post(format!("{url}/hooks/{}/{hook}", c.vendor), r["payload"].to_string(), vec![]).await;
        assert_eq!(status, 200, "{} {hook}: {text}", c.vendor);
    }
    for body in &c.logs {
        let (status, text) = common::post(format!("{url}/v1/logs"), body.clone(), vec![]).await;
        assert_eq!(status, 200, "{}: {text}", c.vendor);
        let records = common::otlp_json_records(body);
        let sessionless = records
            .iter()
            .filter(|r| ["session.id", "conversation.id"].iter().all(|k| common::otlp_json_attr(r, k).is_none()))
            .count();
        let answer: Value = serde_json::from_str(&text).unwrap();
        match sessionless {
            0 => assert_eq!(answer, serde_json::json!({}), "{}: every record taken", c.vendor),
            n => {
                assert_eq!(answer["partialSuccess"]["rejectedLogRecords"], n.to_string(), "{}: {text}", c.vendor);
                let why = answer["partialSuccess"]["errorMessage"].as_str().unwrap_or_default();
                assert!(why.contains("no session"), "{}: {text}", c.vendor);
            }
        }
    }
}

fn of_session<'a>(spans: &'a [Span], session: &str) -> Vec<&'a Span> {
    spans.iter().filter(|s| attr_str(&s.attributes, "aep.session_id") == Some(session)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_model_call_is_a_chat_span_under_its_run_with_the_runs_tokens() {
    let (bridge, got, _dir) = bridge().await;
    let caps = captures();
    for c in &caps {
        replay(&bridge.url(), c).await;
    }
    bridge.shutdown().await;
    let (spans, logs) = decode(&got);
    let received: HashSet<(&[u8], &[u8])> = spans.iter().map(|s| (&s.trace_id[..], &s.span_id[..])).collect();
    let mut counts = Vec::new();
    for c in &caps {
        let mine = of_session(&spans, c.session);
        let by_id: HashMap<&[u8], &Span> = mine.iter().map(|s| (&s.span_id[..], *s)).collect();
        let chats: Vec<&&Span> = mine.iter().filter(|s| s.name.starts_with("chat")).collect();
        let calls = c.calls();
        assert!(calls.len() > 1, "{}: the capture has model calls", c.vendor);
        counts.push(format!("{} {}/{}", c.vendor, chats.len(), calls.len()));
        assert_eq!(chats.len(), calls.len(), "{}: one chat span per model call", c.vendor);
        let mut per_run: HashMap<&[u8], (i64, i64)> = HashMap::new();
        for s in &chats {
            assert_eq!(s.kind, SpanKind::Client as i32, "{}", s.name);
            assert_eq!(attr_str(&s.attributes, "gen_ai.operation.name"), Some("chat"));
            assert_eq!(attr_str(&s.attributes, "openinference.span.kind"), Some("LLM"));
            let model = attr_str(&s.attributes, "gen_ai.request.model").unwrap();
            assert_eq!(
                (s.name.as_str(), attr_str(&s.attributes, "llm.model_name")),
                (&*format!("chat {model}"), Some(model))
            );
            let parent =
                by_id.get(&s.parent_span_id[..]).unwrap_or_else(|| panic!("{}: {} has no parent", c.vendor, s.name));
            assert!(parent.name.starts_with("invoke_agent "), "{}: under {}", c.vendor, parent.name);
            assert_eq!(parent.trace_id, s.trace_id, "{}: in its run's trace", c.vendor);
            let (i, o) = (
                attr_int(&s.attributes, "gen_ai.usage.input_tokens"),
                attr_int(&s.attributes, "gen_ai.usage.output_tokens"),
            );
            assert_eq!(attr_int(&s.attributes, "llm.token_count.total"), Some(i.unwrap_or(0) + o.unwrap_or(0)));
            let e = per_run.entry(&parent.span_id[..]).or_default();
            *e = (e.0 + i.unwrap_or(0), e.1 + o.unwrap_or(0));
            assert!(s.start_time_unix_nano <= s.end_time_unix_nano);
        }
        for (run, sums) in &per_run {
            let r = by_id[run];
            let usage = (
                attr_int(&r.attributes, "gen_ai.usage.input_tokens").unwrap_or(0),
                attr_int(&r.attributes, "gen_ai.usage.output_tokens").unwrap_or(0),
            );
            assert_eq!(*sums, usage, "{}: the chat spans sum to their run's usage", c.vendor);
        }
        let total = per_run.values().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert_eq!(total, c.tokens(), "{}: the chat spans sum to the capture's tokens", c.vendor);
        // The root names the model once a run knew it.
        let root = mine.iter().find(|s| s.parent_span_id.is_empty()).unwrap();
        assert!(attr_str(&root.attributes, "gen_ai.request.model").is_some(), "{}: the root's model", c.vendor);
        // Every log record of the session names a span the receiver got.
        let lines: Vec<&LogRecord> =
            logs.iter().filter(|r| attr_str(&r.attributes, "aep.session_id") == Some(c.session)).collect();
        assert!(!lines.is_empty());
        for r in lines {
            assert!(
                received.contains(&(&r.trace_id[..], &r.span_id[..])),
                "{}: {} names no received span",
                c.vendor,
                r.event_name
            );
        }
    }
    eprintln!("chat spans / model calls: {}", counts.join(", "));
}

/// Claude Code with its beta spans: its own `llm_request` spans are the calls in the trace;
/// the bridge adds none of its own, and the run still carries the calls' usage. A session
/// beside it that sends none (Codex) still gets its chat spans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_chat_spans_for_a_session_that_sends_its_own_model_call_spans() {
    let (bridge, got, _dir) = bridge().await;
    let mut caps = captures().into_iter();
    let (c, codex) = (caps.next().unwrap(), caps.next().unwrap());
    replay(&bridge.url(), &c).await;
    replay(&bridge.url(), &codex).await;
    let traces: Vec<String> = ["0004", "0007", "0011", "0013", "0016", "0019", "0022"]
        .iter()
        .map(|n| read(Path::new(CAPTURES).join(format!("claude-code/s01_{n}_traces.json"))))
        .collect();
    for body in &traces {
        let (status, text) = common::post(format!("{}/v1/traces", bridge.url()), body.clone(), vec![]).await;
        assert_eq!(status, 200, "{text}");
    }
    bridge.shutdown().await;
    let (spans, _) = decode(&got);
    let mine = of_session(&spans, c.session);
    let llm: Vec<&&Span> = mine.iter().filter(|s| s.name == "claude_code.llm_request").collect();
    assert_eq!(llm.len(), c.calls().len(), "the vendor's own model-call spans, placed in the session");
    assert!(mine.iter().all(|s| !s.name.starts_with("chat")), "no synthesized chat span");
    let run = mine.iter().find(|s| s.name.starts_with("invoke_agent")).unwrap();
    assert_eq!(attr_int(&run.attributes, "gen_ai.usage.input_tokens"), Some(c.tokens().0));
    let codex_chats = of_session(&spans, codex.session).iter().filter(|s| s.name.starts_with("chat")).count();
    assert_eq!(codex_chats, codex.calls().len(), "the session beside it keeps its own");
}

/// Moves every non-zero `timeUnixNano` / `observedTimeUnixNano` of an OTLP/JSON export by
/// `shift`: the agent's clock disagreeing with the hooks' (a VM, a container, a drifted
/// laptop clock).
fn skewed(body: &str, shift: i128) -> String {
    fn walk(v: &mut Value, shift: i128) {
        match v {
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match x {
                        Value::String(t) if k == "timeUnixNano" || k == "observedTimeUnixNano" => {
                            let n: i128 = t.parse().unwrap();
                            if n != 0 {
                                *t = (n + shift).to_string();
                            }
                        }
                        _ => walk(x, shift),
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| walk(x, shift)),
            _ => {}
        }
    }
    let mut v: Value = serde_json::from_str(body).unwrap();
    walk(&mut v, shift);
    v.to_string()
}

/// The recorded sessions again, their OTLP records moved three days ahead and then three days
/// behind (their hooks are stamped as they are replayed, so the two clocks disagree by days
/// either way): every span of each session still lies inside its parent (trace UIs would
/// otherwise stretch the trace by the skew), each moved model-call span says by how much,
/// and no model call is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skewed_agent_clocks_keep_every_child_inside_its_parent() {
    const DAY: i128 = 86_400 * 1_000_000_000;
    for shift in [3 * DAY, -3 * DAY] {
        let (bridge, got, _dir) = bridge().await;
        let caps: Vec<Capture> = captures()
            .into_iter()
            .map(|c| Capture { logs: c.logs.iter().map(|b| skewed(b, shift)).collect(), ..c })
            .collect();
        for c in &caps {
            replay(&bridge.url(), c).await;
        }
        bridge.shutdown().await;
        let (spans, _) = decode(&got);
        for c in &caps {
            let mine = of_session(&spans, c.session);
            let by_id: HashMap<&[u8], &Span> = mine.iter().map(|s| (&s.span_id[..], *s)).collect();
            let mut children = 0;
            for s in mine.iter().filter(|s| !s.parent_span_id.is_empty()) {
                let p =
                    by_id.get(&s.parent_span_id[..]).unwrap_or_else(|| panic!("{}: {} unparented", c.vendor, s.name));
                assert!(
                    p.start_time_unix_nano <= s.start_time_unix_nano && s.end_time_unix_nano <= p.end_time_unix_nano,
                    "{} (shift {shift}): {} [{}, {}] outside {} [{}, {}]",
                    c.vendor,
                    s.name,
                    s.start_time_unix_nano,
                    s.end_time_unix_nano,
                    p.name,
                    p.start_time_unix_nano,
                    p.end_time_unix_nano
                );
                children += 1;
            }
            let chats: Vec<&&Span> = mine.iter().filter(|s| s.name.starts_with("chat")).collect();
            assert_eq!(chats.len(), c.calls().len(), "{}: every model call kept", c.vendor);
            // The hooks are stamped as they are replayed, now; the records keep their
            // recorded clock, days before it: every call was moved.
            assert!(
                chats.iter().all(|s| attr_int(&s.attributes, "aep.clock.shift_ns").is_some_and(|n| n != 0)),
                "{}: each moved call says by how much",
                c.vendor
            );
            assert!(children > chats.len(), "{}: runs and tools were checked too", c.vendor);
        }
    }
}
