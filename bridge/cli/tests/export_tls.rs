//! TLS on every outbound path, against real local TLS servers with a CA made at test time
//! (rcgen): OTLP/HTTP and OTLP/gRPC (logs and spans), CloudEvents, mTLS, the relay over
//! `wss://`, a refused certificate, the retry policy over HTTPS, and the CLI clients
//! reaching a bridge behind TLS. Every server checks a credential header and records what
//! arrived.

use aep_testkit as common;

use std::collections::VecDeque;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aep_bridge::export::{self, ExportConfig, Protocol, Stats};
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::Stamped;
use aep_bridge::transport::http::SendError;
use aep_bridge::transport::{HttpClient, HttpOptions, TlsConfig};
use aep_schemas::Event;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use prost::Message as _;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "Bearer s3cret";

// ---------------------------------------------------------------- a CA made at test time

struct Pki {
    _dir: tempfile::TempDir,
    /// The CA certificate (PEM file): what `tls.ca_file` names.
    ca_file: String,
    ca_pem: String,
    server_cert: String,
    server_key: String,
    /// A client certificate signed by the same CA, and its key (PEM files).
    client_cert_file: String,
    client_key_file: String,
}

fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "aep-bridge test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let mut cp = CertificateParams::new(vec!["aep-bridge-client".to_owned()]).unwrap();
    cp.distinguished_name.push(DnType::CommonName, "aep-bridge client");
    let client = cp.signed_by(&client_key, &issuer).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| -> String {
        let p: PathBuf = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    Pki {
        ca_file: write("ca.pem", &ca_cert.pem()),
        ca_pem: ca_cert.pem(),
        server_cert: server.pem(),
        server_key: server_key.serialize_pem(),
        client_cert_file: write("client.pem", &client.pem()),
        client_key_file: write("client-key.pem", &client_key.serialize_pem()),
        _dir: dir,
    }
}

impl Pki {
    fn tls(&self) -> TlsConfig {
        TlsConfig { ca_file: self.ca_file.clone(), ..TlsConfig::default() }
    }

    /// The server side; `client_auth` requires a client certificate from this CA (mTLS).
    fn server_config(&self, client_auth: bool) -> Arc<rustls::ServerConfig> {
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = aep_bridge::transport::tls::provider();
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.server_cert.as_bytes()).collect::<Result<_, _>>().unwrap();
        let key = PrivateKeyDer::from_pem_slice(self.server_key.as_bytes()).unwrap();
        let b = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let b = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(self.ca_pem.as_bytes()) {
                roots.add(c.unwrap()).unwrap();
            }
            let v =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().unwrap();
            b.with_client_cert_verifier(v)
        } else {
            b.with_no_client_auth()
        };
        Arc::new(b.with_single_cert(chain, key).unwrap())
    }
}

// ---------------------------------------------------------------- an HTTPS recorder

#[derive(Debug, Clone)]
struct Got {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// A scripted status with an optional `Retry-After` value.
type Answer = (u16, Option<String>);

#[derive(Clone, Default)]
struct Recorder {
    got: Arc<Mutex<Vec<Got>>>,
    /// Scripted (status, retry-after) answers, then 200.
    script: Arc<Mutex<VecDeque<Answer>>>,
    /// The credential header this server wants, and its value.
    want: Arc<Mutex<(&'static str, &'static str)>>,
    refused: Arc<Mutex<u32>>,
    /// Woken per request and per failed handshake.
    seen: Arc<Notify>,
}

/// Waits until `pred` holds, asking again each time `seen` is woken; panics with `what`
/// after 15 s.
async fn until(seen: &Notify, what: impl Fn() -> String, pred: impl FnMut() -> bool) {
    assert!(common::until_notified(seen, Duration::from_secs(15), pred).await, "{}", what());
}

async fn record(State(rec): State<Recorder>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let (name, value) = *rec.want.lock().unwrap();
    if h(name) != value {
        *rec.refused.lock().unwrap() += 1;
        rec.seen.notify_waiters();
        return (StatusCode::UNAUTHORIZED, "no credential").into_response();
    }
    let body = if h("content-encoding") == "gzip" {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        body.to_vec()
    };
    rec.got.lock().unwrap().push(Got { path: uri.path().to_owned(), content_type: h("content-type"), body });
    rec.seen.notify_waiters();
    match rec.script.lock().unwrap().pop_front() {
        Some((status, ra)) => {
            let mut r = (StatusCode::from_u16(status).unwrap(), "busy").into_response();
            if let Some(ra) = ra {
                r.headers_mut().insert("retry-after", ra.parse().unwrap());
            }
            r
        }
        None => (StatusCode::OK, Vec::new()).into_response(),
    }
}

/// Serves `app` over TLS on 127.0.0.1:0 (HTTP/1.1 and h2). Failed handshakes are counted
/// and wake `seen`.
async fn serve_tls(
    app: axum::Router,
    tls: Arc<rustls::ServerConfig>,
    handshake_failures: Arc<Mutex<u32>>,
    seen: Arc<Notify>,
) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else { return };
            let (acceptor, app, fails, seen) =
                (acceptor.clone(), app.clone(), handshake_failures.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    *fails.lock().unwrap() += 1;
                    seen.notify_waiters();
                    return;
                };
                let svc = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    addr
}

struct Https {
    addr: SocketAddr,
    rec: Recorder,
    handshake_failures: Arc<Mutex<u32>>,
}

async fn https(pki: &Pki, want: (&'static str, &'static str), client_auth: bool) -> Https {
    let rec = Recorder::default();
    *rec.want.lock().unwrap() = want;
    let app = axum::Router::new().fallback(record).with_state(rec.clone());
    let fails = Arc::new(Mutex::new(0));
    let addr = serve_tls(app, pki.server_config(client_auth), fails.clone(), rec.seen.clone()).await;
    Https { addr, rec, handshake_failures: fails }
}

// ---------------------------------------------------------------- events and the exporters

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

fn fast(mut cfg: ExportConfig) -> ExportConfig {
    cfg.otlp.batch_timeout_ms = 50;
    cfg.retry.initial_ms = 20;
    cfg.retry.max_ms = 3000;
    cfg.retry.max_elapsed_ms = 10_000;
    cfg
}

async fn export_all(cfg: &ExportConfig, events: &[Event]) -> Vec<(&'static str, Arc<Stats>)> {
    let ex = export::start(cfg, 1024, Arc::new(Metrics::default()), Arc::default(), CancellationToken::new());
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
    ex.stats
}

fn stat(stats: &[(&'static str, Arc<Stats>)], name: &str) -> (u64, u64, u64, u64) {
    stats.iter().find(|(n, _)| *n == name).map(|(_, s)| s.snapshot()).unwrap_or_else(|| panic!("no sink {name}"))
}

fn log_bodies(got: &[Got]) -> Vec<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    got.iter()
        .filter(|g| g.path == "/v1/logs")
        .flat_map(|g| ExportLogsServiceRequest::decode(&g.body[..]).unwrap().resource_logs)
        .flat_map(|r| r.scope_logs)
        .flat_map(|s| s.log_records)
        .map(|r| match r.event_name.as_str() {
            "" => match r.body.and_then(|b| b.value) {
                Some(V::StringValue(s)) => s,
                _ => String::new(),
            },
            n => n.to_owned(),
        })
        .collect()
}

fn span_names(reqs: impl IntoIterator<Item = ExportTraceServiceRequest>) -> Vec<String> {
    let mut names: Vec<String> = reqs
        .into_iter()
        .flat_map(|r| r.resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .map(|s| s.name)
        .collect();
    names.sort_unstable();
    names
}

// ---------------------------------------------------------------- OTLP/HTTP over TLS

#[tokio::test]
async fn otlp_logs_and_spans_over_https_with_the_ca_from_config() {
    let pki = pki();
    let srv = https(&pki, ("authorization", TOKEN), false).await;
    let mut cfg = fast(ExportConfig::default());
    cfg.otlp.endpoint = Some(format!("https://localhost:{}", srv.addr.port()).parse().unwrap());
    cfg.otlp.protocol = Protocol::HttpProtobuf;
    cfg.otlp.headers.insert("authorization".into(), TOKEN.into());
    cfg.otlp.tls = pki.tls();
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0));
    let got = srv.rec.got.lock().unwrap().clone();
    assert!(got.iter().all(|g| g.content_type == "application/x-protobuf"));
    let names = log_bodies(&got);
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(names.iter().any(|n| n == "dev.aep.tool.completed"), "{names:?}");
    let traces =
        got.iter().filter(|g| g.path == "/v1/traces").map(|g| ExportTraceServiceRequest::decode(&g.body[..]).unwrap());
    assert_eq!(span_names(traces), ["execute_tool Bash", "invoke_agent codex", "session codex"]);
    assert_eq!(*srv.rec.refused.lock().unwrap(), 0);
    assert_eq!(*srv.handshake_failures.lock().unwrap(), 0);
}

#[tokio::test]
async fn without_the_ca_https_export_fails_with_a_certificate_error() {
    let pki = pki();
    let srv = https(&pki, ("authorization", TOKEN), false).await;
    let url = format!("https://127.0.0.1:{}/v1/logs", srv.addr.port());
    // The client on its own: the error names the certificate problem.
    let client = HttpClient::new(&HttpOptions { timeout: Duration::from_secs(5), ..HttpOptions::default() }).unwrap();
    let err = client.post(&url, "application/x-protobuf", Bytes::from_static(b""), false).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, SendError::Certificate { .. }), "{err:?}");
    assert!(msg.contains("certificate refused") && msg.contains("UnknownIssuer"), "{msg}");
    // The exporter: the batch fails at once (a refused certificate is not retried).
    let mut cfg = fast(ExportConfig::default());
    cfg.otlp.endpoint = Some(format!("https://127.0.0.1:{}", srv.addr.port()).parse().unwrap());
    cfg.otlp.protocol = Protocol::HttpProtobuf;
    cfg.otlp.spans = false;
    cfg.otlp.headers.insert("authorization".into(), TOKEN.into());
    let t0 = Instant::now();
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (0, 6, 0, 0));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert!(srv.rec.got.lock().unwrap().is_empty());
    let refused = || *srv.handshake_failures.lock().unwrap() >= 2;
    until(&srv.rec.seen, || "the server saw no refused handshakes".into(), refused).await;
}

#[tokio::test]
async fn mtls_client_certificate_is_presented_when_configured() {
    let pki = pki();
    let srv = https(&pki, ("x-api-key", "k1"), true).await;
    let mut cfg = fast(ExportConfig::default());
    cfg.otlp.endpoint = Some(format!("https://127.0.0.1:{}", srv.addr.port()).parse().unwrap());
    cfg.otlp.protocol = Protocol::HttpProtobuf;
    cfg.otlp.spans = false;
    cfg.otlp.headers.insert("x-api-key".into(), "k1".into());
    cfg.otlp.tls = pki.tls();
    cfg.retry.max_elapsed_ms = 300; // without a client certificate the server hangs up: retried, then given up
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs").0, 0, "delivered without a client certificate");
    cfg.otlp.tls.cert_file = pki.client_cert_file.clone();
    cfg.otlp.tls.key_file = pki.client_key_file.clone();
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(log_bodies(&srv.rec.got.lock().unwrap()).len(), 6);
}

#[tokio::test]
async fn http_429_then_503_with_an_http_date_then_success_delivers_once() {
    let pki = pki();
    let srv = https(&pki, ("authorization", TOKEN), false).await;
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    srv.rec.script.lock().unwrap().extend([(429, Some("0".to_owned())), (503, Some(at))]);
    let mut cfg = fast(ExportConfig::default());
    cfg.otlp.endpoint = Some(format!("https://127.0.0.1:{}", srv.addr.port()).parse().unwrap());
    cfg.otlp.protocol = Protocol::HttpProtobuf;
    cfg.otlp.spans = false;
    cfg.otlp.headers.insert("authorization".into(), TOKEN.into());
    cfg.otlp.tls = pki.tls();
    cfg.retry.initial_ms = 5; // the HTTP date, not our backoff, sets the second wait
    let t0 = Instant::now();
    let stats = export_all(&cfg, &session("codex")).await;
    let took = t0.elapsed();
    let got = srv.rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 3, "429, 503, then the delivery");
    assert!(got.iter().all(|g| g.body == got[0].body), "the same request is resent");
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 2));
    // The date has one-second resolution: the wait is between 1 and 2 s.
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(6), "{took:?}");
}

// ---------------------------------------------------------------- CloudEvents over TLS

#[tokio::test]
async fn cloudevents_over_https_arrive_with_the_header() {
    let pki = pki();
    let srv = https(&pki, ("x-api-key", "ce-key"), false).await;
    let mut cfg = fast(ExportConfig::default());
    cfg.cloudevents.endpoint = Some(format!("https://localhost:{}/ce", srv.addr.port()).parse().unwrap());
    cfg.cloudevents.headers.insert("x-api-key".into(), "ce-key".into());
    cfg.cloudevents.tls = pki.tls();
    let events = session("codex");
    let stats = export_all(&cfg, &events).await;
    assert_eq!(stat(&stats, "cloudevents").0, 6);
    let got = srv.rec.got.lock().unwrap().clone();
    let ids: Vec<String> = got
        .iter()
        .map(|g| {
            assert_eq!(g.content_type, "application/cloudevents+json");
            serde_json::from_slice::<Value>(&g.body).unwrap()["id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids, events.iter().map(|e| e.id.clone()).collect::<Vec<_>>());
    assert_eq!(*srv.rec.refused.lock().unwrap(), 0);
}

// ---------------------------------------------------------------- OTLP/gRPC over TLS

#[derive(Clone, Default)]
struct Grpc {
    logs: Arc<Mutex<Vec<ExportLogsServiceRequest>>>,
    traces: Arc<Mutex<Vec<ExportTraceServiceRequest>>>,
    refused: Arc<AtomicBool>,
}

impl Grpc {
    fn check<T>(&self, req: &tonic::Request<T>) -> Result<(), tonic::Status> {
        match req.metadata().get("authorization").and_then(|v| v.to_str().ok()) {
            Some(TOKEN) => Ok(()),
            _ => {
                self.refused.store(true, Ordering::SeqCst);
                Err(tonic::Status::unauthenticated("no credential"))
            }
        }
    }
}

#[tonic::async_trait]
impl LogsService for Grpc {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        self.check(&req)?;
        self.logs.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.check(&req)?;
        self.traces.lock().unwrap().push(req.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tokio::test]
async fn otlp_logs_and_spans_over_grpc_tls_with_metadata() {
    use tonic::codec::CompressionEncoding::Gzip;
    use tonic::transport::{Identity, Server, ServerTlsConfig};
    let pki = pki();
    let grpc = Grpc::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let tls = ServerTlsConfig::new().identity(Identity::from_pem(&pki.server_cert, &pki.server_key));
    let server = Server::builder()
        .tls_config(tls)
        .unwrap()
        .add_service(LogsServiceServer::new(grpc.clone()).accept_compressed(Gzip))
        .add_service(TraceServiceServer::new(grpc.clone()).accept_compressed(Gzip))
        .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l));
    tokio::spawn(server);
    let mut cfg = fast(ExportConfig::default());
    cfg.otlp.endpoint = Some(format!("https://localhost:{}", addr.port()).parse().unwrap());
    cfg.otlp.protocol = Protocol::Grpc;
    cfg.otlp.headers.insert("authorization".into(), TOKEN.into());
    cfg.otlp.tls = pki.tls();
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0));
    let n: usize = grpc
        .logs
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_logs)
        .flat_map(|r| &r.scope_logs)
        .map(|s| s.log_records.len())
        .sum();
    assert_eq!(n, 6);
    assert_eq!(
        span_names(grpc.traces.lock().unwrap().clone()),
        ["execute_tool Bash", "invoke_agent codex", "session codex"]
    );
    assert!(!grpc.refused.load(Ordering::SeqCst));

    // Without the CA the channel refuses the server: nothing is delivered, nothing retried.
    cfg.otlp.tls = TlsConfig::default();
    cfg.otlp.spans = false;
    let stats = export_all(&cfg, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (0, 6, 0, 0));
}

// ---------------------------------------------------------------- the relay over wss://

#[derive(Default)]
struct RelayPeer {
    auth: Mutex<Vec<String>>,
    frames: Mutex<Vec<Value>>,
    tls_failures: Mutex<u32>,
    /// Woken per upgrade request, frame and failed handshake.
    seen: Notify,
}

/// A TLS WebSocket relay peer: checks the bearer token, answers hello, records frames.
async fn wss_relay(pki: &Pki) -> (SocketAddr, Arc<RelayPeer>) {
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(false));
    let peer = Arc::new(RelayPeer::default());
    let p = peer.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else { return };
            let (acceptor, p) = (acceptor.clone(), p.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    *p.tls_failures.lock().unwrap() += 1;
                    p.seen.notify_waiters();
                    return;
                };
                let p2 = p.clone();
                // tungstenite's callback signature returns its (large) error response by value.
                #[allow(clippy::result_large_err)]
                let check = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
                    let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
                    p2.auth.lock().unwrap().push(auth.to_owned());
                    p2.seen.notify_waiters();
                    if auth == TOKEN && req.uri().path() == "/socket" {
                        Ok(resp)
                    } else {
                        let mut r = ErrorResponse::new(Some("no".into()));
                        *r.status_mut() = axum::http::StatusCode::UNAUTHORIZED;
                        Err(r)
                    }
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(tls, check).await else { return };
                while let Some(Ok(m)) = ws.next().await {
                    let Message::Text(t) = m else { continue };
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v["type"] == "hello" {
                        let hello = json!({"type": "hello", "versions": ["0.1"], "role": "relay"});
                        ws.send(Message::text(hello.to_string())).await.unwrap();
                    }
                    p.frames.lock().unwrap().push(v);
                    p.seen.notify_waiters();
                }
            });
        }
    });
    (addr, peer)
}

#[tokio::test]
async fn the_relay_connects_over_wss_with_the_ca_from_config_and_delivers() {
    use aep_bridge::relay::{RelayOptions, RelayStatus, run};
    let pki = pki();
    let (addr, peer) = wss_relay(&pki).await;
    let mut opts = RelayOptions::new(&format!("https://localhost:{}", addr.port()), Some("s3cret".into()));
    assert!(opts.url.starts_with("wss://"), "{}", opts.url);
    opts.tls = Some(aep_bridge::transport::tls::client_config(&pki.tls()).unwrap());
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let status = Arc::new(RelayStatus::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(rx, opts, status.clone(), Arc::new(Metrics::default()), stop.clone()));
    let ev = session("codex").remove(0);
    tx.send(Arc::new(Stamped::new(ev.clone()))).await.unwrap();
    let arrived = || peer.frames.lock().unwrap().iter().any(|f| f["id"].as_str() == Some(ev.id.as_str()));
    until(&peer.seen, || format!("the event did not arrive over wss: {:?}", peer.frames.lock().unwrap()), arrived)
        .await;
    assert!(status.all_live());
    assert_eq!(peer.frames.lock().unwrap()[0]["type"], "hello");
    assert_eq!(peer.auth.lock().unwrap()[0], TOKEN);
    drop(tx);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task).await.expect("relay did not stop").unwrap();
}

#[tokio::test]
async fn the_relay_refuses_a_wss_server_it_cannot_verify() {
    use aep_bridge::relay::{RelayOptions, RelayStatus, run};
    let pki = pki();
    let (addr, peer) = wss_relay(&pki).await;
    let mut opts = RelayOptions::new(&format!("wss://127.0.0.1:{}", addr.port()), Some("s3cret".into()));
    opts.tls = Some(aep_bridge::transport::tls::client_config(&TlsConfig::default()).unwrap());
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let status = Arc::new(RelayStatus::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(run(rx, opts, status.clone(), Arc::new(Metrics::default()), stop.clone()));
    tx.send(Arc::new(Stamped::new(session("codex").remove(0)))).await.unwrap();
    let failed = || *peer.tls_failures.lock().unwrap() >= 1;
    until(&peer.seen, || "the relay did not try the server".into(), failed).await;
    assert!(!status.all_live());
    assert!(peer.auth.lock().unwrap().is_empty(), "the handshake must fail before any HTTP");
    drop(tx);
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(10), task).await.expect("relay did not stop").unwrap();
}

// ---------------------------------------------------------------- OTEL_EXPORTER_OTLP_* variables

/// A config built from the environment alone (through a lookup closure, as `serve` does)
/// exports over HTTPS to the endpoint, with the headers and CA named only there; a value
/// written in the file wins over the environment.
#[tokio::test]
async fn otel_env_variables_configure_the_exporter_and_the_file_wins() {
    use aep_bridge::config::Config;
    let pki = pki();
    let env_srv = https(&pki, ("authorization", TOKEN), false).await;
    let file_srv = https(&pki, ("authorization", TOKEN), false).await;
    let vars: Vec<(&str, String)> = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", format!("https://localhost:{}", env_srv.addr.port())),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".into()),
        ("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20s3cret".into()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.ca_file.clone()),
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", format!("https://localhost:{}/v1/traces", env_srv.addr.port())),
    ];
    let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let env = aep_bridge::env::Env::from_pairs(&pairs);
    let cfg = Config::from_toml_with_env("[export.otlp]\nbatch_timeout_ms = 50\n", &env).unwrap();
    assert!(Config::from_toml("").unwrap().export.otlp.endpoint.is_none(), "from_toml reads no OTEL_* variable");
    let stats = export_all(&cfg.export, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0));
    let got = env_srv.rec.got.lock().unwrap().clone();
    assert_eq!(log_bodies(&got).len(), 6);
    assert!(got.iter().any(|g| g.path == "/v1/traces"));

    // The file names another endpoint (and the per-signal traces variable is shadowed by it).
    let file =
        format!("[export.otlp]\nendpoint = \"https://127.0.0.1:{}\"\nbatch_timeout_ms = 50\n", file_srv.addr.port());
    let cfg = Config::from_toml_with_env(&file, &env).unwrap();
    let before = env_srv.rec.got.lock().unwrap().len();
    let stats = export_all(&cfg.export, &session("codex")).await;
    assert_eq!(stat(&stats, "otlp_logs"), (6, 0, 0, 0));
    assert_eq!(stat(&stats, "otlp_spans"), (3, 0, 0, 0));
    assert_eq!(env_srv.rec.got.lock().unwrap().len(), before, "the environment's endpoint was used");
    let got = file_srv.rec.got.lock().unwrap().clone();
    assert_eq!(log_bodies(&got).len(), 6);
    assert!(got.iter().any(|g| g.path == "/v1/traces"));

    // A bad value is a config problem named by its variable.
    let udp = aep_bridge::env::Env::from_pairs(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")]);
    let err = Config::from_toml_with_env("", &udp).unwrap_err();
    assert!(err.to_string().contains("OTEL_EXPORTER_OTLP_PROTOCOL"), "{err}");
}

// ---------------------------------------------------------------- the OTLP tee over TLS

#[tokio::test]
async fn the_otlp_tee_forwards_over_https_with_its_headers_and_ca() {
    use aep_bridge::export::tee::OtlpTee as _;
    use aep_bridge::export::tee::http::{HttpTee, TeeOptions};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    let pki = pki();
    let srv = https(&pki, ("x-api-key", "tee-key"), false).await;
    let mut opts = TeeOptions::new(format!("https://localhost:{}", srv.addr.port()));
    opts.headers.insert("x-api-key".into(), "tee-key".into());
    opts.tls = pki.tls();
    let tee = HttpTee::start(opts, Arc::new(Metrics::default())).unwrap();
    let req = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord { event_name: "tee.test".into(), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let t0 = Instant::now();
    tee.logs(&req);
    assert!(t0.elapsed() < Duration::from_millis(50), "the tee delayed the sender: {:?}", t0.elapsed());
    let stats = tee.stats();
    let what = || format!("the tee did not deliver (failed: {})", stats.failed.load(Ordering::Relaxed));
    until(&srv.rec.seen, what, || !srv.rec.got.lock().unwrap().is_empty()).await;
    let got = srv.rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].path, "/v1/logs");
    assert_eq!(ExportLogsServiceRequest::decode(&got[0].body[..]).unwrap(), req);
    assert_eq!(log_bodies(&got), ["tee.test"]);
}

/// The whole daemon: `[relay] url = "wss://..."` with `[relay.tls] ca_file` delivers hook
/// events to a TLS relay peer.
#[tokio::test]
async fn serve_relays_hook_events_over_wss_with_relay_tls_from_config() {
    let pki = pki();
    let (addr, peer) = wss_relay(&pki).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.relay.url = Some(format!("wss://localhost:{}", addr.port()).parse().unwrap());
    cfg.relay.token = "s3cret".into();
    cfg.relay.tls = pki.tls();
    let bridge = common::start(cfg).await;
    for p in common::codex_session("s-wss") {
        let (status, body) = common::post(format!("{}/hooks/codex", bridge.url()), p.to_string(), Vec::new()).await;
        assert!(status < 300, "{status} {body}");
    }
    let n = || peer.frames.lock().unwrap().iter().filter(|f| f["session"] == "s-wss").count();
    until(&peer.seen, || format!("{} events over wss: {:?}", n(), peer.frames.lock().unwrap()), || n() >= 5).await;
    assert!(peer.auth.lock().unwrap().iter().all(|a| a == TOKEN));
    bridge.shutdown().await;
}

/// The real binary: `aep-bridge serve` with no config file exports hook events over HTTPS
/// to the endpoint, headers and CA named only in `OTEL_EXPORTER_OTLP_*`.
#[tokio::test]
async fn the_serve_binary_honours_otel_exporter_variables() {
    use std::io::BufRead as _;
    let pki = pki();
    let srv = https(&pki, ("authorization", TOKEN), false).await;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", "", "--otlp-http", ""])
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("AEP_BRIDGE_CONFIG")
        .env_remove("AEP_BRIDGE_TOKEN")
        .env("AEP_BRIDGE_LOG", "warn")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("https://localhost:{}", srv.addr.port()))
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret")
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", &pki.ca_file)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(a) = l.split_whitespace().find_map(|w| w.strip_prefix("http=")) {
                let _ = tx.send(a.to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(15)).expect("the bridge did not start");
    for p in common::codex_session("s-env") {
        let (status, body) = common::post(format!("http://{addr}/hooks/codex"), p.to_string(), Vec::new()).await;
        assert!(status < 300, "{status} {body}");
    }
    // Batches leave after batch_timeout_ms (1 s by default).
    let names = || log_bodies(&srv.rec.got.lock().unwrap());
    let started = || names().iter().any(|n| n == "dev.aep.session.started");
    until(&srv.rec.seen, || format!("no OTLP logs over HTTPS from serve: {:?}", names()), started).await;
    assert_eq!(*srv.rec.refused.lock().unwrap(), 0);
    let _ = child.kill();
    let _ = child.wait();
}

// ---------------------------------------------------------------- the CLI clients over https

/// A TLS proxy in front of `upstream` (how a bridge is reached as `https://`): terminates
/// TLS with the test CA's server certificate and pipes the bytes through.
async fn tls_proxy(pki: &Pki, upstream: SocketAddr) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pki.server_config(false));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let (Ok(mut tls), Ok(mut up)) =
                    (acceptor.accept(tcp).await, tokio::net::TcpStream::connect(upstream).await)
                else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    addr
}

/// Runs the `aep-bridge` CLI with the test CA in `AEP_CA_FILE` (or none); exit code,
/// stdout, stderr.
async fn cli_with_ca(args: Vec<String>, ca_file: Option<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
        cmd.args(&args).env("NO_COLOR", "1").env_remove("AEP_TOKEN").env_remove("AEP_URL");
        match ca_file {
            Some(f) => cmd.env("AEP_CA_FILE", f),
            None => cmd.env_remove("AEP_CA_FILE"),
        };
        let out = cmd.output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
    })
    .await
    .unwrap()
}

/// The CLI clients reach a bridge behind TLS with the exporters' rustls setup: `tail` over
/// HTTPS (SSE) and `timeline` over `wss://` (the WebSocket replay), trusting the CA named by
/// `AEP_CA_FILE`; without it the certificate is refused and said so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_clients_reach_an_https_bridge() {
    let pki = pki();
    let dir = tempfile::tempdir().unwrap();
    let bridge = common::start(common::config(dir.path())).await;
    for p in common::codex_session("tls-s") {
        let (status, body) = common::post(format!("{}/hooks/codex", bridge.url()), p.to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    bridge.wait_lines(&bridge.data.join("logs/codex/tls-s.jsonl"), 5).await;
    let url = format!("https://localhost:{}", tls_proxy(&pki, bridge.bound.http).await.port());
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();

    let (code, out, err) = cli_with_ca(
        args(&["tail", "--url", &url, "--from", "all", "--limit", "5", "--once"]),
        Some(pki.ca_file.clone()),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains(" codex tls-s ")).count(), 5, "{out}");
    let (code, out, err) = cli_with_ca(args(&["timeline", "tls-s", "--url", &url]), Some(pki.ca_file.clone())).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("tool Bash (c1) completed"), "{out}");

    let (code, _, err) = cli_with_ca(args(&["tail", "--url", &url, "--from", "all", "--once"]), None).await;
    assert_eq!(code, 1);
    assert!(err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"), "{err}");
    let (code, _, err) = cli_with_ca(args(&["timeline", "tls-s", "--url", &url]), None).await;
    assert_eq!(code, 1);
    assert!(err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"), "{err}");
    bridge.shutdown().await;
}
