//! A backend that takes one OTLP signal and refuses the others (Phoenix takes traces only),
//! against the real `aep-bridge serve` binary: a tonic server whose logs and metrics
//! services answer `UNIMPLEMENTED`, and an axum server that answers 404 on `/v1/logs` and
//! 405 on `/v1/metrics`, both taking traces. The bridge logs one WARN per refused signal
//! naming the key that turns it off, sends that signal no more, counts it, names it on
//! `/healthz` (503), and keeps delivering traces.

use aep_testkit as common;

use std::io::BufRead as _;
use std::io::Read as _;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message as _;
use serde_json::Value;
use tokio::sync::Notify;

const WAIT: Duration = Duration::from_secs(20);

/// What the peer saw: calls per signal and the span names it took.
#[derive(Default)]
struct Seen {
    logs: AtomicU32,
    metrics: AtomicU32,
    spans: Mutex<Vec<String>>,
    /// Woken on every request.
    any: Notify,
}

impl Seen {
    fn took_traces(&self, req: ExportTraceServiceRequest) {
        let names = req.resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans).map(|s| s.name);
        self.spans.lock().unwrap().extend(names);
        self.any.notify_waiters();
    }

    /// Whether the spans of `n` runs arrived (the sessions never end: their roots wait).
    fn runs_done(&self, n: usize) -> bool {
        self.spans.lock().unwrap().iter().filter(|s| *s == "invoke_agent codex").count() >= n
    }
}

#[derive(Clone, Default)]
struct Peer(Arc<Seen>);

#[tonic::async_trait]
impl LogsService for Peer {
    async fn export(
        &self,
        _: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.0.logs.fetch_add(1, Ordering::SeqCst);
        self.0.any.notify_waiters();
        Err(tonic::Status::unimplemented("logs are not supported"))
    }
}

#[tonic::async_trait]
impl MetricsService for Peer {
    async fn export(
        &self,
        _: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        self.0.metrics.fetch_add(1, Ordering::SeqCst);
        self.0.any.notify_waiters();
        Err(tonic::Status::unimplemented("metrics are not supported"))
    }
}

#[tonic::async_trait]
impl TraceService for Peer {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.0.took_traces(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

async fn grpc_peer(seen: Arc<Seen>) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let gz = tonic::codec::CompressionEncoding::Gzip;
    let peer = Peer(seen);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(LogsServiceServer::new(peer.clone()).accept_compressed(gz))
            .add_service(MetricsServiceServer::new(peer.clone()).accept_compressed(gz))
            .add_service(TraceServiceServer::new(peer).accept_compressed(gz))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l)),
    );
    addr
}

async fn http_traces(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: Bytes) -> impl IntoResponse {
    let mut raw = Vec::new();
    if headers.get("content-encoding").is_some_and(|v| v == "gzip") {
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut raw).unwrap();
    } else {
        raw = body.to_vec();
    }
    seen.took_traces(ExportTraceServiceRequest::decode(&raw[..]).unwrap());
    ([("content-type", "application/x-protobuf")], Vec::new())
}

/// Traces at `/v1/traces`; `/v1/logs` unrouted (404); `/v1/metrics` takes only GET (405).
async fn http_peer(seen: Arc<Seen>) -> SocketAddr {
    let logs = seen.clone();
    let metrics = seen.clone();
    let app = axum::Router::new()
        .route("/v1/traces", axum::routing::post(http_traces))
        .route(
            "/v1/metrics",
            axum::routing::get(|| async { "metrics are read here, not written" }).fallback(move || {
                metrics.metrics.fetch_add(1, Ordering::SeqCst);
                metrics.any.notify_waiters();
                async { StatusCode::METHOD_NOT_ALLOWED }
            }),
        )
        .fallback(move || {
            logs.logs.fetch_add(1, Ordering::SeqCst);
            logs.any.notify_waiters();
            async { StatusCode::NOT_FOUND }
        })
        .with_state(seen);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

struct Bridge {
    child: Child,
    url: String,
    stderr: common::Output,
    _dir: tempfile::TempDir,
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(endpoint: &str, protocol: &str) -> Bridge {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("aep-bridge.toml");
    std::fs::write(
        &cfg,
        format!(
            "[export.otlp]\nendpoint = \"{endpoint}\"\nprotocol = \"{protocol}\"\nbatch_timeout_ms = 50\n\
             span_grace_ms = 0\nmetrics_interval_ms = 100\n[export.retry]\ninitial_ms = 20\nmax_ms = 200\n"
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", "", "--otlp-http", ""])
        .arg("--config")
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("AEP_BRIDGE_TOKEN")
        .env("AEP_BRIDGE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = common::Output::read(vec![Box::new(child.stderr.take().unwrap())]);
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = l.split_whitespace().find_map(|w| w.strip_prefix("http=")) {
                let _ = tx.send(a.to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(WAIT).unwrap_or_else(|_| panic!("the bridge did not start: {}", stderr.text()));
    Bridge { child, url: format!("http://{addr}"), stderr, _dir: dir }
}

/// The value of the series of `/metrics` whose line starts with `series` (name and labels).
fn series(text: &str, series: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0.0)
}

async fn metrics(bridge: &Bridge) -> String {
    common::get(format!("{}/metrics", bridge.url)).await.1
}

/// Polls `/metrics` until `pred` holds on it: the bridge runs as a child process here and
/// its exporters report only there, so there is no in-process signal to wait on.
async fn until_metrics(bridge: &Bridge, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let text = metrics(bridge).await;
        if pred(&text) {
            return text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}:\n{text}\n{}", bridge.stderr.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn post_session(bridge: &Bridge, session: &str) {
    for p in common::codex_session(session) {
        let (status, body) = common::post(format!("{}/hooks/codex", bridge.url), p.to_string(), Vec::new()).await;
        assert!(status < 300, "{status} {body}");
    }
}

/// The scenario both transports share.
async fn refused_signals_are_turned_off(bridge: Bridge, seen: Arc<Seen>, refusal: &str) {
    // Session 1: its log batch is refused, its spans are taken.
    post_session(&bridge, "s-one").await;
    let traced = common::until_notified(&seen.any, WAIT, || seen.runs_done(1)).await;
    assert!(traced, "no spans of session 1: {:?}\n{}", seen.spans.lock().unwrap(), bridge.stderr.text());
    until_metrics(&bridge, "the refusals were not counted", |t| {
        series(t, "aep_bridge_export_disabled_total{signal=\"logs\",sink=\"otlp_logs\"}") == 1.0
            && series(t, "aep_bridge_export_disabled_total{signal=\"metrics\",sink=\"otlp_metrics\"}") == 1.0
    })
    .await;
    // Session 2: its events reach the logs sink, which no longer sends them.
    post_session(&bridge, "s-two").await;
    // Session 1's events were dropped with the refused batch; session 2's are dropped unsent.
    let text = until_metrics(&bridge, "session 2's log records were not dropped", |t| {
        let dropped: f64 = t
            .lines()
            .filter(|l| l.starts_with("aep_bridge_events_dropped_total{") && l.contains("sink=\"otlp_logs\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        let taken = series(t, "aep_bridge_events_in_total{gen_ai_agent_name=\"codex\",input=\"hook\"}");
        taken > 0.0 && dropped == taken
    })
    .await;
    let traced = common::until_notified(&seen.any, WAIT, || seen.runs_done(2)).await;
    assert!(traced, "no spans of session 2 after the refusals: {:?}", seen.spans.lock().unwrap());
    assert_eq!(seen.logs.load(Ordering::SeqCst), 1, "logs were sent again after the refusal");
    assert_eq!(seen.metrics.load(Ordering::SeqCst), 1, "metrics were sent again after the refusal");
    assert_eq!(series(&text, "aep_bridge_export_disabled_total{signal=\"traces\",sink=\"otlp_spans\"}"), 0.0);
    let spans = seen.spans.lock().unwrap().clone();
    assert_eq!(spans.iter().filter(|s| *s == "execute_tool Bash").count(), 2, "{spans:?}");

    // Off until restart, not failing: everything else flows, so every probe says so and
    // `/healthz` lists what is off.
    for probe in ["livez", "readyz"] {
        let (status, body) = common::get(format!("{}/{probe}", bridge.url)).await;
        assert_eq!(status, 200, "/{probe}: {body}");
    }
    let (status, body) = common::get(format!("{}/healthz", bridge.url)).await;
    assert_eq!(status, 200, "{body}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((&health["ok"], &health["failing"]), (&Value::Bool(true), &Value::Null), "{body}");
    let failing = health["disabled"].as_object().unwrap();
    let mut parts: Vec<&str> = failing.keys().map(String::as_str).collect();
    parts.sort_unstable();
    assert_eq!(parts, ["otlp_logs", "otlp_metrics"], "{body}");
    let logs = failing["otlp_logs"].as_str().unwrap();
    assert!(logs.contains("does not take logs") && logs.contains(refusal), "{logs}");
    assert!(logs.contains("export.otlp.logs = false"), "{logs}");
    assert!(failing["otlp_metrics"].as_str().unwrap().contains("export.otlp.metrics = false"), "{body}");

    let log = bridge.stderr.text();
    let warned = |signal: &str| log.lines().filter(|l| l.contains(&format!("does not take {signal}:"))).count();
    assert_eq!((warned("logs"), warned("metrics"), warned("traces")), (1, 1, 0), "{log}");
    let line = log.lines().find(|l| l.contains("does not take logs:")).unwrap();
    assert!(line.contains("WARN") && line.contains("export.otlp.logs = false"), "{line}");
    assert!(!log.contains("ERROR"), "a refusal is no error line per batch:\n{log}");
}

#[tokio::test]
async fn grpc_unimplemented_turns_the_signal_off_and_traces_still_flow() {
    let seen = Arc::new(Seen::default());
    let addr = grpc_peer(seen.clone()).await;
    let bridge = serve(&format!("http://{addr}"), "grpc");
    refused_signals_are_turned_off(bridge, seen, "gRPC Unimplemented").await;
}

#[tokio::test]
async fn http_404_and_405_turn_the_signal_off_and_traces_still_flow() {
    let seen = Arc::new(Seen::default());
    let addr = http_peer(seen.clone()).await;
    let bridge = serve(&format!("http://{addr}"), "http/protobuf");
    refused_signals_are_turned_off(bridge, seen, "HTTP 404").await;
}
