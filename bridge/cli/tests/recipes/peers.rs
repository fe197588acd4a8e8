//! The real Go peers as processes of a test: the project's Collector distribution started
//! from a shipped YAML (only addresses overridden, by a second `--config` file merged over
//! it), Jaeger v2 from `jaeger-v2.yaml`, Prometheus 3 with its OTLP receiver; and the
//! OTLP/gRPC backend stand-in the Collector exports to where the real backend cannot run
//! here (Tempo is AGPL and not used) or where a test must see the request metadata.

use super::*;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceResponse;
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::ResourceMetrics;

/// What the Collector (and Jaeger, built on it) logs once every pipeline is running.
const COLLECTOR_READY: &str = "Everything is ready";

/// Writes `text` as `name` in `dir`; returns its path as a string.
fn file(dir: &Path, name: &str, text: &str) -> String {
    write(dir, name, text).display().to_string()
}

// ---------------------------------------------------------------- the Collector

/// A running `otelcol-aep --config SHIPPED --config OVERLAY`, its internal metrics on a
/// port of its own.
pub(super) struct Otelcol {
    proc: Proc,
    telemetry: u16,
    _dir: tempfile::TempDir,
}

impl Otelcol {
    /// Starts the shipped `collector-config/{yaml}` with `overlay` (YAML) merged over it;
    /// returns once every pipeline runs.
    pub(super) fn start(bin: &Path, yaml: &str, overlay: &str) -> Otelcol {
        let dir = tempfile::tempdir().unwrap();
        let telemetry = free_port();
        let over = file(dir.path(), "overlay.yaml", overlay);
        let tel = file(
            dir.path(),
            "telemetry.yaml",
            &format!(
                "service:\n  telemetry:\n    metrics:\n      level: detailed\n      readers:\n        - pull:\n            \
                 exporter:\n              prometheus:\n                host: 127.0.0.1\n                port: {telemetry}\n"
            ),
        );
        let mut cmd = Command::new(bin);
        cmd.arg("--config").arg(recipe(yaml)).args(["--config", &over, "--config", &tel]);
        let proc = spawn(&mut cmd);
        let up = proc.out.wait_blocking(WAIT, |t| t.contains(COLLECTOR_READY));
        assert!(up, "the Collector did not start with {yaml}: {}", proc.out.text());
        Otelcol { proc, telemetry, _dir: dir }
    }

    /// What it logged so far.
    pub(super) fn log(&self) -> String {
        self.proc.out.text()
    }

    /// The sum of its internal counter `name` over the series whose labels contain every
    /// `key="value"` of `labels`.
    pub(super) async fn count(&self, name: &str, labels: &[&str]) -> u64 {
        let (status, text) = common::get(format!("http://127.0.0.1:{}/metrics", self.telemetry)).await;
        assert_eq!(status, 200, "{text}");
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .filter(|l| labels.iter().all(|kv| l.contains(kv)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Waits (asking every 100 ms, at most [`WAIT`]) until counter `name` over `labels`
    /// reaches `want`; returns its value then, or the last one seen.
    pub(super) async fn until_count(&self, name: &str, labels: &[&str], want: u64) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let n = self.count(name, labels).await;
            if n >= want || tokio::time::Instant::now() >= deadline {
                return n;
            }
            // The Collector signals nothing outside its metrics: look again shortly.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

// ---------------------------------------------------------------- Jaeger v2

/// A running Jaeger v2 from `collector-config/jaeger-v2.yaml`, every port free.
pub(super) struct Jaeger {
    _proc: Proc,
    /// Its OTLP/gRPC receiver.
    pub(super) otlp_grpc: u16,
    /// Its OTLP/HTTP receiver.
    pub(super) otlp_http: u16,
    /// Its query API (and UI).
    pub(super) query: u16,
    _dir: tempfile::TempDir,
}

impl Jaeger {
    pub(super) fn start(bin: &Path, ui_assets: Option<&Path>) -> Jaeger {
        let dir = tempfile::tempdir().unwrap();
        let (otlp_grpc, otlp_http, query, query_grpc) = (free_port(), free_port(), free_port(), free_port());
        let ui = ui_assets.map(|p| format!("    ui:\n      assets_path: {}\n", p.display())).unwrap_or_default();
        let over = file(
            dir.path(),
            "overlay.yaml",
            &format!(
                "extensions:\n  jaeger_query:\n    http:\n      endpoint: 127.0.0.1:{query}\n    grpc:\n      \
                 endpoint: 127.0.0.1:{query_grpc}\n{ui}receivers:\n  otlp:\n    protocols:\n      grpc:\n        \
                 endpoint: 127.0.0.1:{otlp_grpc}\n      http:\n        endpoint: 127.0.0.1:{otlp_http}\n"
            ),
        );
        let mut cmd = Command::new(bin);
        cmd.arg("--config").arg(recipe("jaeger-v2.yaml")).args(["--config", &over]);
        let proc = spawn(&mut cmd);
        let up = proc.out.wait_blocking(WAIT, |t| t.contains(COLLECTOR_READY));
        assert!(up, "Jaeger did not start: {}", proc.out.text());
        Jaeger { _proc: proc, otlp_grpc, otlp_http, query, _dir: dir }
    }

    /// Every trace Jaeger holds for `service`, over its HTTP query API (`/api/traces`, the
    /// one its UI reads): `{traceID, spans, processes}` each.
    pub(super) async fn traces(&self, service: &str) -> Vec<Value> {
        // Any time: a replayed session keeps the times it was recorded at.
        let end =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() + 86_400_000_000;
        let url = format!("http://127.0.0.1:{}/api/traces?service={service}&limit=10000&start=1&end={end}", self.query);
        let (status, text) = common::get(url).await;
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["data"].as_array().cloned().unwrap_or_default()
    }

    /// The services Jaeger has spans of.
    pub(super) async fn services(&self) -> Vec<String> {
        let (status, text) = common::get(format!("http://127.0.0.1:{}/api/services", self.query)).await;
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["data"].as_array().into_iter().flatten().filter_map(|s| s.as_str().map(str::to_owned)).collect()
    }

    /// Waits (asking every 200 ms, at most [`WAIT`]) until Jaeger holds `want` spans over
    /// `services`; returns the traces then, or the last seen.
    pub(super) async fn until_spans(&self, services: &[&str], want: usize) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let mut all = Vec::new();
            for s in services {
                all.extend(self.traces(s).await);
            }
            let n: usize = all.iter().map(|t| t["spans"].as_array().map_or(0, Vec::len)).sum();
            if n >= want || tokio::time::Instant::now() >= deadline {
                return all;
            }
            // Jaeger stores what it accepted in the background; its API is the only signal.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

// ---------------------------------------------------------------- Prometheus 3

/// A running Prometheus 3 with its OTLP receiver on, storing in a temporary folder.
pub(super) struct Prometheus {
    _proc: Proc,
    pub(super) port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    pub(super) fn start(bin: &Path) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        // The bridges' fleet identity as labels, as collector-config/README.md says to set up.
        let config = file(
            dir.path(),
            "prometheus.yml",
            "global:\n  scrape_interval: 15s\notlp:\n  promote_resource_attributes: [host.name, user.name, aep.team]\n",
        );
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={config}"))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-otlp-receiver");
        let proc = spawn(&mut cmd);
        let up = proc.out.wait_blocking(WAIT, |t| t.contains("Server is ready to receive web requests"));
        assert!(up, "Prometheus did not start: {}", proc.out.text());
        Prometheus { _proc: proc, port, _dir: dir }
    }

    /// Its OTLP metrics receiver.
    pub(super) fn otlp_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1/otlp/v1/metrics", self.port)
    }

    /// An instant PromQL query: the `result` vector (empty when nothing matches).
    pub(super) async fn query(&self, promql: &str) -> Vec<Value> {
        let url = format!("http://127.0.0.1:{}/api/v1/query", self.port);
        let (status, text) = common::peers::get_query(url, vec![("query".into(), promql.into())]).await;
        assert_eq!(status, 200, "{promql}: {text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["status"], "success", "{promql}: {text}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

// ---------------------------------------------------------------- an OTLP/gRPC backend

/// Items a backend got, each with the `x-scope-orgid` (the tenant) of its request.
type Tenanted<T> = Arc<Mutex<Vec<(Option<String>, T)>>>;

/// What an OTLP/gRPC backend stand-in got: its spans and log records with their tenants.
#[derive(Clone, Default)]
pub(super) struct GrpcBackend {
    pub(super) spans: Tenanted<Span>,
    pub(super) logs: Tenanted<LogRecord>,
    /// Each metrics request's resources, with the request's tenant.
    pub(super) metrics: Tenanted<ResourceMetrics>,
    pub(super) seen: Arc<tokio::sync::Notify>,
}

fn tenant<T>(req: &tonic::Request<T>) -> Option<String> {
    req.metadata().get("x-scope-orgid").and_then(|v| v.to_str().ok()).map(str::to_owned)
}

#[tonic::async_trait]
impl TraceService for GrpcBackend {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let t = tenant(&req);
        let spans = req.into_inner().resource_spans.into_iter().flat_map(|r| r.scope_spans).flat_map(|s| s.spans);
        self.spans.lock().unwrap().extend(spans.map(|s| (t.clone(), s)));
        self.seen.notify_waiters();
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl LogsService for GrpcBackend {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let t = tenant(&req);
        let records = req.into_inner().resource_logs.into_iter().flat_map(|r| r.scope_logs).flat_map(|s| s.log_records);
        self.logs.lock().unwrap().extend(records.map(|r| (t.clone(), r)));
        self.seen.notify_waiters();
        Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl MetricsService for GrpcBackend {
    async fn export(
        &self,
        req: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let t = tenant(&req);
        self.metrics.lock().unwrap().extend(req.into_inner().resource_metrics.into_iter().map(|r| (t.clone(), r)));
        self.seen.notify_waiters();
        Ok(tonic::Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}

impl GrpcBackend {
    /// Starts one on 127.0.0.1:0 (gzip accepted, as the Collector's OTLP exporter sends).
    pub(super) async fn start() -> (GrpcBackend, SocketAddr) {
        Self::start_on(0).await
    }

    /// Starts one on 127.0.0.1:`port` (0: any free port): a backend that comes back where
    /// a gateway was told it is.
    pub(super) async fn start_on(port: u16) -> (GrpcBackend, SocketAddr) {
        let backend = GrpcBackend::default();
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap();
        let addr = l.local_addr().unwrap();
        let gz = tonic::codec::CompressionEncoding::Gzip;
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(backend.clone()).accept_compressed(gz))
                .add_service(LogsServiceServer::new(backend.clone()).accept_compressed(gz))
                .add_service(MetricsServiceServer::new(backend.clone()).accept_compressed(gz))
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l)),
        );
        (backend, addr)
    }

    /// Waits until at least `spans` spans and `logs` log records arrived; panics after
    /// [`WAIT`].
    pub(super) async fn until(&self, spans: usize, logs: usize) {
        let counts = || (self.spans.lock().unwrap().len(), self.logs.lock().unwrap().len());
        let ok = common::until_notified(&self.seen, WAIT, || {
            let (s, l) = counts();
            s >= spans && l >= logs
        })
        .await;
        assert!(ok, "the backend got {:?} (spans, logs), wanted ({spans}, {logs})", counts());
    }
}
