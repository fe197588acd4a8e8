//! The OTLP exporter against real peers on loopback: rotel (a Rust OTel collector, from
//! PyPI: `pip install -r bridge/tests/requirements-export.txt`), an in-test OTLP/HTTP
//! server that decodes what it got, a flaky gRPC server, and a whole `aep-bridge serve`.

use aep_testkit as common;

use std::collections::VecDeque;
use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aep_bridge::export::otlp::{logs_from_json, retry_info_details, traces_from_json};
use aep_bridge::export::{self, Compression, ExportConfig, Protocol, Stats};
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::Stamped;
use aep_projections::otlp_logs::{OtlpOptions, logs_request_on_spans};
use aep_projections::spans::LogSpans;
use aep_schemas::Event;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// One session of `agent`: start, run, a paired tool call, a warning, end. Ids are prefixed by `agent`.
fn session(agent: &str) -> Vec<Event> {
    let src = format!("aep://test-host/agent/{agent}/session/s1");
    let rows = [
        ("session.started", None, "2026-01-02T03:04:05Z", json!({"model": "gpt-5"})),
        ("run.started", Some("r1"), "2026-01-02T03:04:06Z", json!({})),
        ("tool.requested", Some("r1"), "2026-01-02T03:04:07Z", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("tool.completed", Some("r1"), "2026-01-02T03:04:08.250Z", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("run.completed", Some("r1"), "2026-01-02T03:04:09Z", json!({})),
        ("session.ended", None, "2026-01-02T03:04:10Z", json!({})),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, (ty, run, time, data))| {
            let mut v = json!({"aep":"0.1","id":format!("{agent}-e{i}"),"type":ty,"time":time,"source":src,
                "agent":agent,"session":"s1","seq":i,"epoch":1,"capture":"metadata","data":data});
            if let Some(r) = run {
                v["run"] = json!(r);
            }
            if ty.starts_with("tool.") {
                v["subject"] = json!("Bash");
            }
            Event::from_value(v).unwrap()
        })
        .collect()
}

fn otlp_cfg(endpoint: String, protocol: Protocol) -> ExportConfig {
    let mut cfg = ExportConfig::default();
    cfg.otlp.endpoint = Some(endpoint.parse().unwrap());
    cfg.otlp.protocol = protocol;
    cfg.otlp.batch_timeout_ms = 50;
    cfg.retry.initial_ms = 20;
    cfg.retry.max_ms = 2000;
    cfg.retry.max_elapsed_ms = 10_000;
    cfg
}

/// Feeds `events` to every configured exporter, closes the queues, waits for the flush.
async fn export_all(cfg: &ExportConfig, events: &[Event]) -> (Vec<(&'static str, Arc<Stats>)>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let ex = export::start(cfg, 1024, metrics.clone(), Arc::default(), CancellationToken::new());
    assert!(!ex.sinks.is_empty(), "no exporter started");
    for s in &ex.sinks {
        for e in events {
            s.tx.send(Arc::new(Stamped::new(e.clone()))).await.unwrap();
        }
    }
    drop(ex.sinks);
    for t in ex.tasks {
        tokio::time::timeout(Duration::from_secs(30), t).await.expect("exporter did not flush").unwrap();
    }
    (ex.stats, metrics)
}

fn stat(stats: &[(&'static str, Arc<Stats>)], name: &str) -> (u64, u64, u64, u64) {
    stats.iter().find(|(n, _)| *n == name).map(|(_, s)| s.snapshot()).unwrap_or_else(|| panic!("no sink {name}"))
}

// ---------------------------------------------------------------- an OTLP/HTTP recorder

#[derive(Debug, Clone)]
struct Got {
    path: String,
    content_type: String,
    gzip: bool,
    body: Vec<u8>,
}

/// A scripted answer: status, headers, body.
type Answer = (u16, Vec<(&'static str, String)>, Vec<u8>);

/// Scripted answers, then 200 with an empty body (full success).
#[derive(Clone, Default)]
struct Recorder {
    got: Arc<Mutex<Vec<Got>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
    /// Woken each time a request is recorded.
    seen: Arc<tokio::sync::Notify>,
}

impl Recorder {
    /// Waits until what was recorded satisfies `pred`; `false` after `timeout`.
    async fn until(&self, timeout: Duration, pred: impl Fn(&[Got]) -> bool) -> bool {
        common::until_notified(&self.seen, timeout, || pred(&self.got.lock().unwrap())).await
    }
}

async fn record(State(rec): State<Recorder>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let gzip = h("content-encoding") == "gzip";
    let body = if gzip {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        body.to_vec()
    };
    let ct = h("content-type");
    rec.got.lock().unwrap().push(Got { path: uri.path().to_owned(), content_type: ct.clone(), gzip, body });
    rec.seen.notify_waiters();
    match rec.script.lock().unwrap().pop_front() {
        Some((status, hs, body)) => {
            let mut r = (StatusCode::from_u16(status).unwrap(), body).into_response();
            for (k, v) in hs {
                r.headers_mut().insert(k, v.parse().unwrap());
            }
            r
        }
        None => (StatusCode::OK, [("content-type", ct)], Vec::new()).into_response(),
    }
}

async fn start_recorder(rec: Recorder) -> SocketAddr {
    let app = axum::Router::new().fallback(record).with_state(rec);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

fn decode_logs(g: &Got) -> ExportLogsServiceRequest {
    if g.content_type == "application/json" {
        logs_from_json(serde_json::from_slice(&g.body).unwrap()).unwrap()
    } else {
        ExportLogsServiceRequest::decode(&g.body[..]).unwrap()
    }
}

fn decode_traces(g: &Got) -> ExportTraceServiceRequest {
    if g.content_type == "application/json" {
        traces_from_json(serde_json::from_slice(&g.body).unwrap()).unwrap()
    } else {
        ExportTraceServiceRequest::decode(&g.body[..]).unwrap()
    }
}

#[tokio::test]
async fn http_protobuf_and_json_deliver_exactly_the_projection() {
    for (protocol, ct, gzip) in
        [(Protocol::HttpProtobuf, "application/x-protobuf", true), (Protocol::HttpJson, "application/json", false)]
    {
        let rec = Recorder::default();
        let addr = start_recorder(rec.clone()).await;
        let mut cfg = otlp_cfg(format!("http://{addr}"), protocol);
        cfg.otlp.compression = if gzip { Compression::Gzip } else { Compression::None };
        cfg.otlp.headers.insert("x-tenant".into(), "t1".into());
        let events = session("codex");
        let (stats, metrics) = export_all(&cfg, &events).await;
        let got = rec.got.lock().unwrap().clone();
        let logs: Vec<&Got> = got.iter().filter(|g| g.path == "/v1/logs").collect();
        let traces: Vec<&Got> = got.iter().filter(|g| g.path == "/v1/traces").collect();
        assert!(got.iter().all(|g| g.content_type == ct && g.gzip == gzip), "{protocol:?}");
        // Exactly the projection's records, once, placed on the spans exported beside them.
        let want = logs_request_on_spans(&events, &OtlpOptions::default(), &mut LogSpans::new(false));
        let mut recs = Vec::new();
        for g in &logs {
            for rl in decode_logs(g).resource_logs {
                recs.extend(rl.scope_logs.into_iter().flat_map(|s| s.log_records));
            }
        }
        let want_recs: Vec<_> = want.resource_logs[0].scope_logs[0].log_records.clone();
        assert_eq!(recs, want_recs, "{protocol:?}");
        let spans: Vec<_> = traces
            .iter()
            .flat_map(|g| decode_traces(g).resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect();
        let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["execute_tool Bash", "invoke_agent codex", "session codex"], "{protocol:?}");
        assert!(spans.iter().all(|s| s.trace_id == spans[0].trace_id));
        // Every log line names the span the receiver got for its Event (a backend
        // jumps from the line to its trace): session lines the root, run lines the run,
        // tool lines the tool call.
        let span_of = |r: &opentelemetry_proto::tonic::logs::v1::LogRecord| {
            spans
                .iter()
                .find(|s| s.trace_id == r.trace_id && s.span_id == r.span_id)
                .map(|s| s.name.as_str())
                .unwrap_or_else(|| panic!("{protocol:?}: record {} names no received span", r.event_name))
        };
        let placed: Vec<&str> = recs.iter().map(span_of).collect();
        assert_eq!(
            placed,
            [
                "session codex",
                "invoke_agent codex",
                "execute_tool Bash",
                "execute_tool Bash",
                "invoke_agent codex",
                "session codex"
            ],
            "{protocol:?}"
        );
        assert!(recs.iter().all(|r| r.flags & 1 == 1), "sampled, as the spans are");
        assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
        assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0));
        assert_eq!(metrics.events_out.get(&[("sink", "otlp_logs")]), 6);
    }
}

/// `[export.otlp.resource_attributes]` (and `OTEL_RESOURCE_ATTRIBUTES`, merged into it by the
/// config loader) reach every resource of both signals; a key the resource already has
/// (`service.name`, the agent) is not overridden.
#[tokio::test]
async fn resource_attributes_reach_every_resource_without_overriding_the_service() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.resource_attributes.insert("deployment.environment.name".into(), "prod".into());
    cfg.otlp.resource_attributes.insert("service.name".into(), "not-the-agent".into());
    export_all(&cfg, &session("codex")).await;
    let got = rec.got.lock().unwrap().clone();
    let mut resources: Vec<_> = got
        .iter()
        .filter(|g| g.path == "/v1/logs")
        .flat_map(|g| decode_logs(g).resource_logs)
        .filter_map(|r| r.resource)
        .collect();
    let n_logs = resources.len();
    resources.extend(
        got.iter()
            .filter(|g| g.path == "/v1/traces")
            .flat_map(|g| decode_traces(g).resource_spans)
            .filter_map(|r| r.resource),
    );
    assert!(n_logs > 0 && resources.len() > n_logs, "logs and spans both arrived: {got:?}");
    for r in &resources {
        let attr =
            |k: &str| r.attributes.iter().filter(|a| a.key == k).map(|a| format!("{:?}", a.value)).collect::<Vec<_>>();
        assert_eq!(attr("service.name").len(), 1, "{r:?}");
        assert!(attr("service.name")[0].contains("\"codex\""), "{r:?}");
        assert!(attr("deployment.environment.name").first().is_some_and(|v| v.contains("\"prod\"")), "{r:?}");
    }
}

#[tokio::test]
async fn http_503_with_retry_after_is_retried_once_and_delivered_once() {
    let rec = Recorder::default();
    rec.script.lock().unwrap().push_back((503, vec![("retry-after", "1".into())], b"busy".to_vec()));
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.spans = false;
    cfg.retry.initial_ms = 10_000; // the server's Retry-After (1 s) must win over our own backoff
    let t0 = Instant::now();
    let (stats, _) = export_all(&cfg, &session("codex")).await;
    let took = t0.elapsed();
    let got = rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one failed attempt, one retry");
    assert_eq!(got[0].body, got[1].body, "the same request is resent");
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 1));
    assert!(took >= Duration::from_millis(950) && took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn http_400_is_not_retried_and_partial_success_is_counted_not_retried() {
    let rec = Recorder::default();
    rec.script.lock().unwrap().push_back((400, vec![], b"bad".to_vec()));
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpJson);
    cfg.otlp.spans = false;
    let (stats, metrics) = export_all(&cfg, &session("codex")).await;
    assert_eq!(rec.got.lock().unwrap().len(), 1);
    assert_eq!(stat(&stats, "otlp_logs"), (0, 6, 0, 0));
    assert_eq!(metrics.dropped.get(&[("sink", "otlp_logs"), ("severity", "info")]), 6);

    let rec = Recorder::default();
    // What the Go collector writes: int64 as a string.
    let body = br#"{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"2 too old"}}"#.to_vec();
    rec.script.lock().unwrap().push_back((200, vec![("content-type", "application/json".into())], body));
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpJson);
    cfg.otlp.spans = false;
    let (stats, metrics) = export_all(&cfg, &session("codex")).await;
    assert_eq!(rec.got.lock().unwrap().len(), 1);
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 2, 0));
    assert_eq!(metrics.sink_errors.get(&[("sink", "otlp_logs")]), 1);
}

#[tokio::test]
async fn batches_by_size_and_flushes_on_close() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.spans = false;
    cfg.otlp.batch_size = 4;
    cfg.otlp.batch_timeout_ms = 60_000; // only size and the close may flush
    let events: Vec<Event> = ["a", "b", "c"].iter().flat_map(|a| session(a)).collect(); // 18
    let t0 = Instant::now();
    let (stats, _) = export_all(&cfg, &events).await;
    assert!(t0.elapsed() < Duration::from_secs(10));
    let sizes: Vec<usize> = rec
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|g| decode_logs(g).resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum())
        .collect();
    assert_eq!(sizes, [4, 4, 4, 4, 2]);
    assert_eq!(stat(&stats, "otlp_logs").0, 18);
}

// ---------------------------------------------------------------- gRPC

type Received = (Option<String>, ExportLogsServiceRequest);

#[derive(Clone, Default)]
struct Flaky {
    calls: Arc<AtomicU32>,
    /// `x-tenant` metadata and the request, per accepted call.
    got: Arc<Mutex<Vec<Received>>>,
}

#[tonic::async_trait]
impl LogsService for Flaky {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        match n {
            0 => Err(tonic::Status::with_details(
                tonic::Code::Unavailable,
                "busy",
                Bytes::from(retry_info_details(14, Duration::from_millis(200))),
            )),
            1 => Err(tonic::Status::with_details(
                tonic::Code::ResourceExhausted,
                "slow down",
                Bytes::from(retry_info_details(8, Duration::from_millis(100))),
            )),
            _ => {
                let tenant = req.metadata().get("x-tenant").and_then(|v| v.to_str().ok()).map(str::to_owned);
                self.got.lock().unwrap().push((tenant, req.into_inner()));
                Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
            }
        }
    }
}

#[tokio::test]
async fn grpc_honours_retry_info_and_sends_gzip() {
    let flaky = Flaky::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    // Without accept_compressed the server would answer UNIMPLEMENTED to a gzip request.
    let svc = LogsServiceServer::new(flaky.clone()).accept_compressed(tonic::codec::CompressionEncoding::Gzip);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l)),
    );
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::Grpc);
    cfg.otlp.spans = false;
    cfg.otlp.headers.insert("x-tenant".into(), "t1".into());
    let t0 = Instant::now();
    let (stats, _) = export_all(&cfg, &session("codex")).await;
    assert!(t0.elapsed() >= Duration::from_millis(280), "RetryInfo delays were not honoured: {:?}", t0.elapsed());
    assert_eq!(flaky.calls.load(Ordering::SeqCst), 3);
    let got = flaky.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.as_deref(), Some("t1"));
    assert_eq!(got[0].1.resource_logs[0].scope_logs[0].log_records.len(), 6);
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 2));
}

/// Takes every logs request it can decode (no gzip: the tonic default).
#[derive(Clone, Default)]
struct Plain {
    got: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
}

#[tonic::async_trait]
impl LogsService for Plain {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.got.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
    }
}

/// A gRPC peer without gzip answers a gzip request `UNIMPLEMENTED` (with
/// `grpc-accept-encoding`): that refuses the compression, not the signal. The exporter asks
/// again uncompressed and keeps the signal on.
#[tokio::test]
async fn grpc_without_gzip_is_sent_uncompressed_not_turned_off() {
    let plain = Plain::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(LogsServiceServer::new(plain.clone()))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l)),
    );
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::Grpc);
    cfg.otlp.spans = false;
    cfg.otlp.batch_size = 3;
    let (stats, metrics) = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(plain.got.lock().unwrap().len(), 2, "both batches, uncompressed");
    assert_eq!(metrics.export_disabled.get(&[("sink", "otlp_logs"), ("signal", "logs")]), 0);
}

// ---------------------------------------------------------------- rotel

struct Rotel {
    child: Child,
    out: common::Output,
    grpc: SocketAddr,
    http: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn start_rotel(exporter: &[&str], env: &[(&str, &str)]) -> Option<Rotel> {
    let Some(bin) = common::rotel_agent() else {
        eprintln!("SKIP: rotel-agent not installed (pip install -r bridge/tests/requirements-export.txt)");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let (grpc, http) = (free_addr(), free_addr());
    let mut child = Command::new(bin)
        .arg("start")
        .args(exporter)
        .args(["--debug-log", "logs", "--debug-log", "traces"])
        .args(["--debug-log-verbosity", "detailed"])
        .args(["--otlp-grpc-endpoint", &grpc.to_string(), "--otlp-http-endpoint", &http.to_string()])
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::Output::follow(&mut child);
    let started = out.wait_blocking(Duration::from_secs(10), |t| t.contains(common::ROTEL_STARTED));
    assert!(started, "rotel did not start: {}", out.text());
    Some(Rotel { child, out, grpc, http, _dir: dir })
}

/// Rotel's debug output split into per-resource blocks: (is_logs, service.name, text).
fn blocks(text: &str) -> Vec<(bool, String, String)> {
    let mut out: Vec<(bool, String, String)> = Vec::new();
    for line in text.lines() {
        if line.starts_with("ResourceLog #") || line.starts_with("ResourceSpans #") {
            out.push((line.starts_with("ResourceLog"), String::new(), String::new()));
        }
        if let Some(b) = out.last_mut() {
            if let Some(s) = line.trim().strip_prefix("-> service.name: Str(") {
                b.1 = s.trim_end_matches(')').to_owned();
            }
            b.2.push_str(line);
            b.2.push('\n');
        }
    }
    out
}

#[tokio::test]
async fn rotel_receives_logs_and_spans_over_grpc_and_http() {
    let Some(rotel) = start_rotel(&["--exporter", "blackhole"], &[]) else { return };
    let cases = [
        ("agent-grpc", format!("http://{}", rotel.grpc), Protocol::Grpc),
        ("agent-httppb", format!("http://{}", rotel.http), Protocol::HttpProtobuf),
        ("agent-httpjson", format!("http://{}", rotel.http), Protocol::HttpJson),
    ];
    for (agent, endpoint, protocol) in &cases {
        let (stats, _) = export_all(&otlp_cfg(endpoint.clone(), *protocol), &session(agent)).await;
        assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0), "{agent}");
        assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0), "{agent}");
    }
    let agents: Vec<&'static str> = cases.iter().map(|c| c.0).collect();
    let printed = rotel
        .out
        .wait(Duration::from_secs(15), move |text| {
            let bl = blocks(text);
            agents.iter().all(|agent| {
                let logs: String = bl.iter().filter(|b| b.0 && b.1 == *agent).map(|b| b.2.as_str()).collect();
                let spans: String = bl.iter().filter(|b| !b.0 && b.1 == *agent).map(|b| b.2.as_str()).collect();
                (0..6).all(|i| logs.contains(&format!(": Str({agent}-e{i})\n")))
                    && logs.matches("LogRecord #").count() == 6
                    && logs.contains("EventName: dev.aep.tool.completed")
                    && spans.contains("execute_tool Bash")
                    && spans.contains(&format!("invoke_agent {agent}"))
                    && spans.contains(&format!("session {agent}"))
            })
        })
        .await;
    assert!(printed, "rotel did not print every record and span:\n{}", rotel.out.text());
}

// ---------------------------------------------------------------- the whole daemon

#[tokio::test]
async fn serve_exports_hook_events_as_otlp_logs() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.export = otlp_cfg(format!("http://{addr}"), Protocol::HttpJson);
    // Nothing leaves on time or size: only the shutdown flush can deliver.
    cfg.export.otlp.batch_timeout_ms = 600_000;
    cfg.server.shutdown_grace_ms = 15_000; // a loaded CI machine must not cut the flush short
    let bridge = common::start(cfg).await;
    for p in common::codex_session("s-export") {
        let (status, body) = common::post(format!("{}/hooks/codex", bridge.url()), p.to_string(), Vec::new()).await;
        assert!(status < 300, "{status} {body}");
    }
    // A bound, not a signal: nothing marks a batch as held, so "not exported early" is
    // checked over a short window.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(rec.got.lock().unwrap().is_empty(), "exported before the batch timeout or shutdown");
    bridge.stop.cancel();
    // serve returns only after the exporters flushed (or the grace ran out, which fails below).
    tokio::time::timeout(Duration::from_secs(20), bridge.task).await.expect("serve did not stop").unwrap();
    let got = rec.got.lock().unwrap().clone();
    let recs: Vec<Value> = got
        .iter()
        .filter(|g| g.path == "/v1/logs")
        .flat_map(|g| {
            let v: Value = serde_json::from_slice(&g.body).unwrap();
            v["resourceLogs"].as_array().cloned().unwrap_or_default()
        })
        .flat_map(|rl| rl["scopeLogs"].as_array().cloned().unwrap_or_default())
        .flat_map(|sl| sl["logRecords"].as_array().cloned().unwrap_or_default())
        .collect();
    let names: Vec<&str> = recs.iter().filter_map(|r| r["eventName"].as_str()).collect();
    assert!(names.contains(&"dev.aep.session.started"), "{names:?}");
    assert!(names.contains(&"dev.aep.tool.completed"), "{names:?}");
    assert!(got.iter().any(|g| g.path == "/v1/traces"), "no spans exported");
}

/// A second `aep-bridge serve` is a real OTLP logs receiver: records of a known vendor
/// (`service.name` = `codex`) that name a session become events there; the others (here
/// all 12: an unknown service, and records the Codex profile finds no session in) come
/// back as a partial success, which the exporter counts and does not retry.
#[tokio::test]
async fn a_second_bridge_receives_the_logs_and_reports_partial_success() {
    let dir = tempfile::tempdir().unwrap();
    let mut peer_cfg = common::config(dir.path());
    peer_cfg.server.otlp_grpc = Some("127.0.0.1:0".parse().unwrap());
    let peer = common::start(peer_cfg).await;
    let grpc = peer.bound.otlp_grpc.expect("no gRPC listener");
    for (n, (endpoint, protocol)) in [
        (format!("http://{grpc}"), Protocol::Grpc),
        (peer.url(), Protocol::HttpProtobuf),
        (peer.url(), Protocol::HttpJson),
    ]
    .into_iter()
    .enumerate()
    {
        let mut cfg = otlp_cfg(endpoint, protocol);
        cfg.otlp.spans = false;
        let events: Vec<Event> = session("codex").into_iter().chain(session("nobody")).collect();
        let (stats, metrics) = export_all(&cfg, &events).await;
        assert_eq!(stat(&stats, "otlp_logs"), (12, 0, 12, 0), "{protocol:?}");
        assert_eq!(metrics.sink_errors.get(&[("sink", "otlp_logs")]), 1, "{protocol:?}");
        // The peer counts while it maps, before it answers: the exports are answered, so
        // the count is final.
        let (_, text) = common::get(format!("{}/metrics", peer.url())).await;
        // The bridge's own LogRecords name their session as `aep.session_id`, not as a
        // vendor's `conversation.id`: the receiving bridge maps them through the Codex
        // profile, finds no session and drops them (counted, and rejected in the answer)
        // instead of emitting sessionless events.
        let want =
            format!("aep_bridge_requests_rejected_total{{reason=\"no_session\",receiver=\"otlp\"}} {}", 6 * (n + 1));
        assert!(text.contains(&want), "{protocol:?}: wanted {want}:\n{text}");
    }
    peer.shutdown().await;
}

/// Throughput into rotel (`cargo test -p aep-bridge --test export_otlp -- --ignored --nocapture`).
#[tokio::test]
#[ignore = "measurement"]
async fn throughput_into_rotel() {
    let Some(bin) = common::rotel_agent() else { return };
    let (grpc, http) = (free_addr(), free_addr());
    let mut child = Command::new(bin)
        .args(["start", "--exporter", "blackhole", "--otlp-grpc-endpoint", &grpc.to_string()])
        .args(["--otlp-http-endpoint", &http.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = common::Output::follow(&mut child);
    assert!(out.wait_blocking(Duration::from_secs(10), |t| t.contains(common::ROTEL_STARTED)), "{}", out.text());
    let events: Vec<Event> = (0..5000).flat_map(|i| session(&format!("codex-{i}"))).collect();
    for (endpoint, protocol) in [
        (format!("http://{grpc}"), Protocol::Grpc),
        (format!("http://{http}"), Protocol::HttpProtobuf),
        (format!("http://{http}"), Protocol::HttpJson),
    ] {
        for spans in [false, true] {
            let mut cfg = otlp_cfg(endpoint.clone(), protocol);
            cfg.otlp.logs = !spans;
            cfg.otlp.spans = spans;
            let t0 = Instant::now();
            let (stats, _) = export_all(&cfg, &events).await;
            let dt = t0.elapsed().as_secs_f64();
            let name = if spans { "otlp_spans" } else { "otlp_logs" };
            let s = stat(&stats, name);
            assert_eq!(s.0 as usize, if spans { 3 * 5000 } else { events.len() }, "{protocol:?} {name}");
            println!(
                "{protocol:?} {name}: {} events -> {} items in {dt:.2}s = {:.0} events/s",
                events.len(),
                s.0,
                events.len() as f64 / dt
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The `agent-collector-bridge` topology with a real collector in the middle: OTLP logs
/// into rotel, which forwards them (gRPC, gzip) to a bridge's OTLP receiver.
#[tokio::test]
async fn a_collector_forwards_to_the_bridge() {
    let dir = tempfile::tempdir().unwrap();
    let mut peer_cfg = common::config(dir.path());
    peer_cfg.server.otlp_grpc = Some("127.0.0.1:0".parse().unwrap());
    let peer = common::start(peer_cfg).await;
    let grpc = peer.bound.otlp_grpc.expect("no gRPC listener");
    let upstream = format!("http://{grpc}");
    let exporter = [
        "--exporter",
        "otlp",
        "--otlp-exporter-endpoint",
        &upstream,
        "--otlp-exporter-protocol",
        "grpc",
        "--otlp-exporter-compression",
        "gzip",
    ];
    // At debug level rotel says when the bridge answered one of its exports.
    let Some(rotel) = start_rotel(&exporter, &[("RUST_LOG", "debug")]) else {
        peer.shutdown().await;
        return;
    };
    let mut cfg = otlp_cfg(format!("http://{}", rotel.http), Protocol::HttpProtobuf);
    cfg.otlp.spans = false;
    let (stats, _) = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    // The bridge counts while it maps, before it answers: look each time rotel reports an
    // answered export.
    let answered =
        |t: &str| t.lines().filter(|l| l.contains("OTLPExporter sent response.") && l.contains("otlp_logs")).count();
    let mut seen = 0;
    loop {
        let (_, text) = common::get(format!("{}/metrics", peer.url())).await;
        // Counted, not emitted: the records name no vendor session (see the test above).
        if text.contains("aep_bridge_requests_rejected_total{reason=\"no_session\",receiver=\"otlp\"} 6") {
            break;
        }
        let more = rotel.out.wait(Duration::from_secs(15), move |t| answered(t) > seen).await;
        assert!(more, "the bridge did not get 6 records via rotel:\n{text}\n{}", rotel.out.text());
        seen = answered(&rotel.out.text());
    }
    peer.shutdown().await;
}

/// Open spans idle past `span_idle_timeout_secs` are closed by the sink's tick and exported
/// as incomplete while the stream is still open.
#[tokio::test]
async fn idle_spans_are_flushed_by_the_tick() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.logs = false;
    cfg.otlp.span_idle_timeout_secs = 1;
    cfg.otlp.span_grace_ms = 0; // no wait for vendor records on top of the idle timeout
    let ex = export::start(&cfg, 64, Arc::new(Metrics::default()), Arc::default(), CancellationToken::new());
    for e in &session("codex")[..3] {
        ex.sinks[0].tx.send(Arc::new(Stamped::new(e.clone()))).await.unwrap();
    }
    let all_spans = |got: &[Got]| -> Vec<_> {
        got.iter()
            .flat_map(|g| decode_traces(g).resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    };
    let flushed = rec.until(Duration::from_secs(10), |got| all_spans(got).len() >= 3).await;
    let spans = all_spans(&rec.got.lock().unwrap());
    assert!(flushed, "idle spans were not flushed: {spans:?}");
    assert_eq!(spans.len(), 3);
    for s in &spans {
        let incomplete = s.attributes.iter().any(|kv| {
            kv.key == "aep.incomplete"
                && kv.value.as_ref().and_then(|v| v.value.as_ref())
                    == Some(&opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(true))
        });
        assert!(incomplete, "{} is not marked incomplete", s.name);
    }
    assert!(!ex.sinks[0].tx.is_closed(), "the sink ended early");
    drop(ex.sinks);
    for t in ex.tasks {
        t.await.unwrap();
    }
}

/// Idle and reorder clocks are per session. A session whose timestamps lag a
/// live session's by months (here: the fixture's January 2026 times beside Events stamped
/// now) is not idle-flushed by the live one's timeline: nothing is cut off while both are
/// open, and at close each is one trace with one root and no continuation.
#[tokio::test]
async fn a_lagging_session_is_not_cut_by_another_sessions_clock() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.logs = false;
    cfg.otlp.span_idle_timeout_secs = 600;
    let ex = export::start(&cfg, 64, Arc::new(Metrics::default()), Arc::default(), CancellationToken::new());
    let now_ms = aep_bridge::time::now_ms();
    let live: Vec<Event> = session("claude-code")[..3]
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let mut e = e.clone();
            e.time = aep_schemas::time::format_rfc3339_ms(now_ms + i as u64);
            e
        })
        .collect();
    for e in live.iter().chain(&session("codex")[..3]) {
        ex.sinks[0].tx.send(Arc::new(Stamped::new(e.clone()))).await.unwrap();
    }
    // Two idle ticks (one a second) pass with both sessions open and recent on their own
    // clocks: on paused time, so they pass at once and for certain.
    tokio::time::pause();
    for _ in 0..5 {
        tokio::time::advance(Duration::from_millis(500)).await;
    }
    tokio::time::resume();
    assert!(rec.got.lock().unwrap().is_empty(), "a session was flushed by another session's clock");
    drop(ex.sinks);
    for t in ex.tasks {
        t.await.unwrap();
    }
    let got = rec.got.lock().unwrap().clone();
    // An early flush would have been a request of its own, before the close's one (it may
    // still have been in flight when the check above looked).
    assert_eq!(got.len(), 1, "a session was flushed before the close");
    let spans: Vec<_> = got
        .iter()
        .flat_map(|g| decode_traces(g).resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    let roots: Vec<_> = spans.iter().filter(|s| s.parent_span_id.is_empty()).collect();
    assert_eq!(roots.len(), 2, "one root per session: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    assert!(spans.iter().all(|s| !s.attributes.iter().any(|kv| kv.key == "aep.continuation")));
}

/// AEP-0002 §4.1: a session may never end (Qwen Code's headless `-p` sends no SessionEnd).
/// Once its run ended and it idles `span_root_idle_secs` (default 60 s), its root span is
/// exported while the sink runs, not after the 30-minute idle timeout or at shutdown as
/// incomplete; a run that comes later is a child of that same root, and the close sends
/// one extension of the root, never the root again. Paused time drives the sink's clock.
#[tokio::test]
async fn an_idle_session_root_is_exported_within_the_root_idle_delay() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.logs = false;
    cfg.otlp.span_grace_ms = 0;
    // Paused time jumps by seconds: no request may time out while it does.
    cfg.otlp.timeout_ms = 600_000;
    assert_eq!(cfg.otlp.span_root_idle_secs, 60, "the default");
    let ex = export::start(&cfg, 64, Arc::new(Metrics::default()), Arc::default(), CancellationToken::new());
    let mk = |i: usize, ty: &str, run: Option<&str>, time: &str| {
        let src = "aep://test-host/agent/qwen-code/session/q1";
        let mut v = json!({"aep":"0.1","id":format!("q-e{i}"),"type":ty,"time":time,"source":src,"agent":"qwen-code",
            "session":"q1","seq":i,"epoch":1,"capture":"metadata"});
        if let Some(r) = run {
            v["run"] = json!(r);
        }
        Arc::new(Stamped::new(Event::from_value(v).unwrap()))
    };
    let tx = &ex.sinks[0].tx;
    tx.send(mk(0, "session.started", None, "2026-01-02T03:04:05Z")).await.unwrap();
    tx.send(mk(1, "run.started", Some("r1"), "2026-01-02T03:04:06Z")).await.unwrap();
    tx.send(mk(2, "run.finished", Some("r1"), "2026-01-02T03:04:09Z")).await.unwrap();
    let spans = |got: &[Got]| -> Vec<opentelemetry_proto::tonic::trace::v1::Span> {
        got.iter()
            .flat_map(|g| decode_traces(g).resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    };
    let named = |got: &[Got], name: &str| spans(got).into_iter().filter(|s| s.name == name).count();
    assert!(rec.until(Duration::from_secs(10), |g| named(g, "invoke_agent qwen-code") == 1).await, "no run span");
    assert_eq!(named(&rec.got.lock().unwrap(), "session qwen-code"), 0, "the root waits while the session may go on");
    // 70 s of silence, a second at a time (the sink looks for idle sessions every second).
    tokio::time::pause();
    for _ in 0..70 {
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    tokio::time::resume();
    assert!(rec.until(Duration::from_secs(10), |g| named(g, "session qwen-code") == 1).await, "no root while idle");
    let got = spans(&rec.got.lock().unwrap());
    let root = got.iter().find(|s| s.name == "session qwen-code").unwrap().clone();
    let run1 = got.iter().find(|s| s.name == "invoke_agent qwen-code").unwrap().clone();
    assert!(root.parent_span_id.is_empty());
    assert_eq!((&run1.trace_id, &run1.parent_span_id), (&root.trace_id, &root.span_id));
    let flag = |s: &opentelemetry_proto::tonic::trace::v1::Span, k: &str| s.attributes.iter().any(|kv| kv.key == k);
    assert!(flag(&root, "aep.session.idle") && !flag(&root, "aep.incomplete"), "{root:?}");
    assert!(!tx.is_closed(), "the sink ended early");
    // The session goes on: its next run joins the same trace under the same root.
    tx.send(mk(3, "run.started", Some("r2"), "2026-01-02T03:10:00Z")).await.unwrap();
    tx.send(mk(4, "run.finished", Some("r2"), "2026-01-02T03:10:05Z")).await.unwrap();
    drop(ex.sinks);
    for t in ex.tasks {
        t.await.unwrap();
    }
    let got = spans(&rec.got.lock().unwrap());
    let runs: Vec<_> = got.iter().filter(|s| s.name == "invoke_agent qwen-code").collect();
    assert_eq!(runs.len(), 2);
    assert!(runs.iter().all(|r| r.trace_id == root.trace_id && r.parent_span_id == root.span_id));
    let sessions: Vec<_> = got.iter().filter(|s| s.name == "session qwen-code").collect();
    assert_eq!(sessions.len(), 2, "the root and its extension");
    let ext = sessions.iter().find(|s| s.span_id != root.span_id).expect("the root was sent twice");
    assert_eq!((&ext.trace_id, &ext.parent_span_id), (&root.trace_id, &root.span_id));
    assert!(flag(ext, "aep.root.extension"));
}

/// A session the bridge knows only from the agent's own telemetry (Codex pointed at the
/// OTLP port, no hooks) has no run to wait for: its root, which its log records point at,
/// goes out once it idled `span_root_idle_secs`, while the sink runs, not after the 30-minute
/// idle timeout. Paused time drives the sink's clock.
#[tokio::test]
async fn a_telemetry_only_session_root_is_exported_within_the_root_idle_delay() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.logs = false;
    cfg.otlp.span_grace_ms = 0;
    cfg.otlp.timeout_ms = 600_000;
    let ex = export::start(&cfg, 64, Arc::new(Metrics::default()), Arc::default(), CancellationToken::new());
    let tx = &ex.sinks[0].tx;
    for (i, name) in ["conversation_starts", "api_request", "sse_event", "tool_result"].iter().enumerate() {
        let v = json!({"aep":"0.1","id":format!("c-e{i}"),"type":format!("x.codex.otel.{name}"),
            "time":format!("2026-01-02T03:04:0{i}Z"),"source":"aep://test-host/agent/codex/session/c1",
            "agent":"codex","session":"c1","seq":i,"epoch":1,"capture":"metadata"});
        tx.send(Arc::new(Stamped::new(Event::from_value(v).unwrap()))).await.unwrap();
    }
    let roots = |got: &[Got]| {
        got.iter()
            .flat_map(|g| decode_traces(g).resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .filter(|s| s.name == "session codex")
            .collect::<Vec<_>>()
    };
    tokio::time::pause();
    for _ in 0..70 {
        tokio::time::advance(Duration::from_secs(1)).await;
    }
    tokio::time::resume();
    assert!(rec.until(Duration::from_secs(10), |g| roots(g).len() == 1).await, "no root while the session idled");
    let root = roots(&rec.got.lock().unwrap()).remove(0);
    assert!(root.parent_span_id.is_empty());
    assert!(root.attributes.iter().any(|kv| kv.key == "aep.session.idle"), "{root:?}");
    assert!(!tx.is_closed(), "the sink ended early");
    drop(ex.sinks);
    for t in ex.tasks {
        t.await.unwrap();
    }
    assert_eq!(roots(&rec.got.lock().unwrap()).len(), 1, "the root is sent once");
}

/// A logs-only receiver (404 on `/v1/traces`): the spans exporter turns itself off after
/// the first refusal (one request, counted once, everything after it dropped unsent) while
/// the logs go on.
#[tokio::test]
async fn a_refused_traces_signal_stops_the_spans_exporter_and_logs_go_on() {
    let traces = Arc::new(AtomicU32::new(0));
    let logs = Arc::new(AtomicU32::new(0));
    let (t, l) = (traces.clone(), logs.clone());
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(move || {
                t.fetch_add(1, Ordering::SeqCst);
                async { StatusCode::NOT_FOUND }
            }),
        )
        .route(
            "/v1/logs",
            axum::routing::post(move || {
                l.fetch_add(1, Ordering::SeqCst);
                async { ([("content-type", "application/x-protobuf")], Vec::<u8>::new()) }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut cfg = otlp_cfg(format!("http://{addr}"), Protocol::HttpProtobuf);
    cfg.otlp.span_grace_ms = 0;
    // One span batch per session: the first is refused, the second never leaves.
    cfg.otlp.batch_size = 3;
    let events: Vec<Event> = session("a").into_iter().chain(session("b")).collect();
    let (stats, metrics) = export_all(&cfg, &events).await;
    assert_eq!(traces.load(Ordering::SeqCst), 1, "traces were sent again after the refusal");
    assert!(logs.load(Ordering::SeqCst) >= 4, "the logs went on");
    assert_eq!(stat(&stats, "otlp_logs"), (12, 0, 0, 0));
    // Session a's 3 spans refused; session b's 6 events are not even assembled, only counted.
    assert_eq!(stat(&stats, "otlp_spans"), (0, 3, 0, 0));
    assert_eq!(metrics.dropped.get(&[("sink", "otlp_spans"), ("severity", "info")]), 6);
    assert_eq!(metrics.export_disabled.get(&[("sink", "otlp_spans"), ("signal", "traces")]), 1);
    assert_eq!(metrics.export_disabled.get(&[("sink", "otlp_logs"), ("signal", "logs")]), 0);
}
