//! OTLP/HTTP receiver over a real socket: protobuf, JSON, gzip, zstd, the error statuses, and
//! captured agent exports (receivers/tests/data, copied from the real-agent captures).

mod otlp_common;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use aep_adapters::MapContext;
use aep_adapters::otel::Mode;
use aep_adapters::vendors::OtelVendor;
use aep_receivers::otlp::{self, HttpConfig, OtlpHandler};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use otlp_common::{Answer, Entry, Recorder, RecordsRecorder, codex_request};
use prost::Message;
use serde_json::{Value, json};

/// `google.rpc.Status`, declared here so the test reads the wire independently of the crate.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

struct Reply {
    status: u16,
    content_type: String,
    retry_after: Option<String>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
}

async fn start(handler: Arc<dyn OtlpHandler>, cfg: HttpConfig) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = otlp::router_with(handler, cfg);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn post(url: String, headers: Vec<(&'static str, &'static str)>, body: Vec<u8>) -> Reply {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut req = agent.post(&url);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let resp = req.send(&body[..]).unwrap();
        let h = |name: &str| resp.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
        let (status, content_type, retry_after) =
            (resp.status().as_u16(), h("content-type").unwrap_or_default(), h("retry-after"));
        let body = resp.into_body().read_to_vec().unwrap();
        Reply { status, content_type, retry_after, body }
    })
    .await
    .unwrap()
}

const PB: (&str, &str) = ("content-type", "application/x-protobuf");
const JSON: (&str, &str) = ("content-type", "application/json");

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

const TRACE: [u8; 16] =
    [0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_logs_reach_the_handler_and_map() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let r = post(format!("{url}/v1/logs"), vec![PB], codex_request(TRACE.to_vec()).encode_to_vec()).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.content_type, "application/x-protobuf");
    let resp = ExportLogsServiceResponse::decode(r.body.as_slice()).unwrap();
    assert_eq!(resp.partial_success, None, "unset on full success");
    let got = rec.logs.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    let records = otlp::to_otel_records(&got[0]);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].trace_id.as_deref(), Some("5b8efff798038103d269b633813fc60c"));
    let profile = OtelVendor::detect(&records[0]).unwrap().profile();
    let drafts = profile.map_record(&records[0], &MapContext::default(), Mode::Primary);
    assert_eq!(drafts[0].r#type, "tool.completed");
    assert_eq!(drafts[0].session.as_deref(), Some("conv-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_with_hex_ids_and_string_int64() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let body = json!({"resourceLogs": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "copilot-chat"}}]},
        "scopeLogs": [{"logRecords": [{"timeUnixNano": "1796011452165000000", "observedTimeUnixNano": 1796011452165000001u64,
            "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "eee19b7ec3c1b174", "someFutureField": {"x": 1},
            "attributes": [{"key": "event.name", "value": {"stringValue": "copilot_chat.agent.turn"}},
                           {"key": "turn.index", "value": {"intValue": "2"}}]}]}]}]});
    let r = post(
        format!("{url}/v1/logs"),
        vec![("content-type", "application/json; charset=utf-8")],
        body.to_string().into_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.content_type, "application/json");
    assert_eq!(r.json(), json!({}));
    let got = rec.logs.lock().unwrap().clone();
    let rec0 = &got[0].resource_logs[0].scope_logs[0].log_records[0];
    assert_eq!(rec0.trace_id, TRACE.to_vec());
    assert_eq!(rec0.time_unix_nano, 1_796_011_452_165_000_000);
    assert_eq!(rec0.observed_time_unix_nano, 1_796_011_452_165_000_001);
    let records = otlp::to_otel_records(&got[0]);
    assert_eq!(records[0].attributes["turn.index"], json!(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_and_zstd_bodies() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let pb = codex_request(Vec::new()).encode_to_vec();
    let r = post(format!("{url}/v1/logs"), vec![PB, ("content-encoding", "gzip")], gzip(&pb)).await;
    assert_eq!(r.status, 200);
    let z = zstd::encode_all(&pb[..], 3).unwrap();
    let r = post(format!("{url}/v1/logs"), vec![PB, ("content-encoding", "zstd")], z).await;
    assert_eq!(r.status, 200);
    let js = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"hi"}}]}]}]}"#;
    let r = post(format!("{url}/v1/logs"), vec![JSON, ("content-encoding", "gzip")], gzip(js)).await;
    assert_eq!(r.status, 200);
    assert_eq!(rec.log_count(), 3);
    // A gzip header over garbage is bad data, not a server error.
    let r =
        post(format!("{url}/v1/logs"), vec![PB, ("content-encoding", "gzip")], b"\x1f\x8b\x08garbage".to_vec()).await;
    assert_eq!(r.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_data_is_400_in_the_request_format() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    // Malformed protobuf: a field header announcing 100 bytes that are not there.
    let r = post(format!("{url}/v1/logs"), vec![PB], vec![0x0a, 0x64, 0x01]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.content_type, "application/x-protobuf");
    let st = RpcStatus::decode(r.body.as_slice()).unwrap();
    assert_eq!(st.code, 3);
    assert!(st.message.contains("protobuf"), "{}", st.message);
    // A 15-byte trace id (which the JSON decoder alone would accept).
    let bad = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"5b8efff798038103d269b633813fc6"}]}]}]}"#;
    let r = post(format!("{url}/v1/logs"), vec![JSON], bad.to_vec()).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("traceId"));
    // A 9-byte span id in protobuf is refused the same way.
    let mut req = codex_request(TRACE.to_vec());
    req.resource_logs[0].scope_logs[0].log_records[0].span_id = vec![1; 9];
    let r = post(format!("{url}/v1/logs"), vec![PB], req.encode_to_vec()).await;
    assert_eq!(r.status, 400);
    // snake_case keys: rejected deliberately rather than read as an empty request.
    let snake = br#"{"resource_logs":[{"scope_logs":[{"log_records":[{}]}]}]}"#;
    let r = post(format!("{url}/v1/logs"), vec![JSON], snake.to_vec()).await;
    assert_eq!(r.status, 400);
    assert!(r.json()["message"].as_str().unwrap().contains("lowerCamelCase"));
    // Not JSON at all.
    let r = post(format!("{url}/v1/logs"), vec![JSON], b"{oops".to_vec()).await;
    assert_eq!(r.status, 400);
    assert_eq!(rec.log_count(), 0, "nothing bad reached the handler");
    // The handler's own refusal of bad data.
    rec.set(Answer::Invalid("no session"));
    let r = post(format!("{url}/v1/logs"), vec![PB], codex_request(Vec::new()).encode_to_vec()).await;
    assert_eq!(r.status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_and_bombs_are_413() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig { max_request_bytes: 1024, max_decoded_bytes: 64 * 1024 }).await;
    let r = post(format!("{url}/v1/logs"), vec![PB], vec![0u8; 2000]).await;
    assert_eq!(r.status, 413);
    assert_eq!(r.content_type, "application/x-protobuf");
    // 8 MiB of zeros compresses to a few KiB: under the wire limit, over the decoded limit.
    let bomb = gzip(&vec![0u8; 8 << 20]);
    assert!(bomb.len() < 1024 * 10);
    let small_bomb = gzip(&vec![0u8; 128 * 1024]);
    assert!(small_bomb.len() <= 1024, "{}", small_bomb.len());
    let r = post(format!("{url}/v1/logs"), vec![PB, ("content-encoding", "gzip")], small_bomb).await;
    assert_eq!(r.status, 413);
    assert_eq!(rec.log_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsupported_media_is_415() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let pb = codex_request(Vec::new()).encode_to_vec();
    let r = post(format!("{url}/v1/logs"), vec![("content-type", "text/plain")], pb.clone()).await;
    assert_eq!(r.status, 415);
    let r = post(format!("{url}/v1/logs"), vec![PB, ("content-encoding", "br")], pb).await;
    assert_eq!(r.status, 415);
    assert_eq!(rec.log_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_pipeline_is_503_with_retry_after() {
    let rec = Recorder::new();
    rec.set(Answer::Full(Duration::from_millis(2500)));
    let url = start(rec.clone(), HttpConfig::default()).await;
    let r = post(format!("{url}/v1/logs"), vec![JSON], br#"{"resourceLogs":[]}"#.to_vec()).await;
    assert_eq!(r.status, 503);
    assert_eq!(r.retry_after.as_deref(), Some("3"), "rounded up to whole seconds");
    let v = r.json();
    assert_eq!(v["code"], json!(14));
    assert_eq!(v["details"][0]["retryDelay"], json!("2.500000000s"));
    let r = post(format!("{url}/v1/traces"), vec![PB], Vec::new()).await;
    assert_eq!(r.status, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_success_in_both_formats() {
    let rec = Recorder::new();
    rec.set(Answer::Partial(2, "2 records had no session"));
    let url = start(rec.clone(), HttpConfig::default()).await;
    let r = post(format!("{url}/v1/logs"), vec![JSON], br#"{"resourceLogs":[]}"#.to_vec()).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"partialSuccess": {"rejectedLogRecords": "2", "errorMessage": "2 records had no session"}})
    );
    let r = post(format!("{url}/v1/logs"), vec![PB], Vec::new()).await;
    let resp = ExportLogsServiceResponse::decode(r.body.as_slice()).unwrap();
    assert_eq!(resp.partial_success.unwrap().rejected_log_records, 2);
    let r = post(format!("{url}/v1/metrics"), vec![JSON], b"{}".to_vec()).await;
    assert_eq!(r.json()["partialSuccess"]["rejectedDataPoints"], json!("2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_and_metrics_endpoints() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let spans = json!({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174", "name": "invoke_agent", "startTimeUnixNano": "1", "endTimeUnixNano": "2"}]}]}]});
    let r = post(format!("{url}/v1/traces"), vec![JSON], spans.to_string().into_bytes()).await;
    assert_eq!(r.status, 200);
    assert_eq!(rec.traces.lock().unwrap()[0].resource_spans[0].scope_spans[0].spans[0].name, "invoke_agent");
    let bad = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"ee"}]}]}]}"#;
    let r = post(format!("{url}/v1/traces"), vec![JSON], bad.to_vec()).await;
    assert_eq!(r.status, 400);
    let r = post(format!("{url}/v1/metrics"), vec![PB], Vec::new()).await;
    assert_eq!(r.status, 200);
    assert_eq!(rec.metrics.lock().unwrap().len(), 1);
}

/// Real exports recorded from the agents (Codex 0.171.0 protobuf and JSON, Claude Code
/// 2.1.197 protobuf) decode and map through the right profile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_agent_exports_decode_and_map() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let cases = [
        ("codex_logs.pb", PB, "codex"),
        ("codex_logs.json", JSON, "codex"),
        ("claude_code_logs.pb", PB, "claude-code"),
    ];
    for (i, (file, ct, vendor)) in cases.into_iter().enumerate() {
        let vendor = OtelVendor::named(vendor).unwrap();
        let body = std::fs::read(data.join(file)).unwrap();
        let r = post(format!("{url}/v1/logs"), vec![ct, ("content-encoding", "gzip")], gzip(&body)).await;
        assert_eq!(r.status, 200, "{file}: {}", String::from_utf8_lossy(&r.body));
        let req = rec.logs.lock().unwrap()[i].clone();
        let records = otlp::to_otel_records(&req);
        assert!(records.len() > 5, "{file}: {} records", records.len());
        let mut types = Vec::new();
        for r in &records {
            assert_eq!(OtelVendor::detect(r), Some(vendor), "{file}");
            let p = vendor.profile();
            for d in p.map_record(r, &MapContext::default(), Mode::Companion) {
                assert!(d.session.is_some(), "{file}: {} has no session", d.r#type);
                assert!(d.time.is_some(), "{file}: {} has no time", d.r#type);
                types.push(d.r#type);
            }
        }
        let prefix = format!("x.{}.otel.", vendor.as_str());
        assert!(types.iter().all(|t| t.starts_with(&prefix)), "{file}: {types:?}");
        assert!(!types.iter().any(|t| t.ends_with(".unknown")), "{file}: {types:?}");
        match vendor {
            v if v.as_str() == "codex" => assert!(types.contains(&"x.codex.otel.tool_result".to_owned()), "{types:?}"),
            _ => assert!(types.iter().any(|t| t.ends_with(".tool_result") || t.ends_with(".api_request")), "{types:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_post_is_routed() {
    let rec = Recorder::new();
    let url = start(rec, HttpConfig::default()).await;
    let status = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        agent.get(format!("{url}/v1/logs")).call().unwrap().status().as_u16()
    })
    .await
    .unwrap();
    assert_eq!(status, 405);
}

/// A JSON logs body of `n` `codex.turn_ttft` records, each observed a nanosecond later.
fn json_logs(n: usize) -> Vec<u8> {
    let one = |i: usize| json!({"observedTimeUnixNano": (i + 1).to_string(), "attributes": [{"key": "event.name", "value": {"stringValue": "codex.turn_ttft"}}]});
    let records: Vec<Value> = (0..n).map(one).collect();
    json!({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}).to_string().into_bytes()
}

/// A body past the blocking-decode threshold takes the blocking-pool path and still
/// arrives whole, compressed or not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_decode_whole() {
    let rec = Recorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let body = json_logs(3000);
    let r = post(format!("{url}/v1/logs"), vec![JSON], body.clone()).await;
    assert_eq!(r.status, 200);
    let r = post(format!("{url}/v1/logs"), vec![JSON, ("content-encoding", "gzip")], gzip(&body)).await;
    assert_eq!(r.status, 200);
    let got = rec.logs.lock().unwrap().clone();
    assert_eq!(got.iter().map(|r| otlp::to_otel_records(r).len()).collect::<Vec<_>>(), [3000, 3000]);
}

/// A handler that takes records gets an SDK-sized export (under the blocking threshold)
/// through `log_records_async` on the receiving task, protobuf or JSON, and a larger or
/// compressed one through `log_records_blocking` on the pool; every record arrives, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_take_the_async_entry_unless_the_body_is_large() {
    let rec = RecordsRecorder::new();
    let url = start(rec.clone(), HttpConfig::default()).await;
    let pb = codex_request(TRACE.to_vec()).encode_to_vec();
    assert_eq!(post(format!("{url}/v1/logs"), vec![PB], pb).await.status, 200);
    let small = json_logs(10);
    assert_eq!(post(format!("{url}/v1/logs"), vec![JSON], small.clone()).await.status, 200);
    let zipped = gzip(&json_logs(3000));
    assert!(zipped.len() >= 1024, "a compressed body past 1 KiB goes to the pool");
    assert_eq!(post(format!("{url}/v1/logs"), vec![JSON, ("content-encoding", "gzip")], zipped).await.status, 200);
    let mut n = 10;
    let big = loop {
        let b = json_logs(n);
        if b.len() >= otlp::http::BLOCKING_DECODE_BYTES {
            break b;
        }
        n *= 2;
    };
    assert_eq!(post(format!("{url}/v1/logs"), vec![JSON], big).await.status, 200);
    assert_eq!(rec.entries(), [(Entry::Async, 1), (Entry::Async, 10), (Entry::Blocking, 3000), (Entry::Blocking, n)]);
    let exports = rec.exports.lock().unwrap();
    assert_eq!(exports[0].1, ["codex.tool_result"]);
    assert!(exports[3].1.iter().all(|name| name == "codex.turn_ttft"));
}
