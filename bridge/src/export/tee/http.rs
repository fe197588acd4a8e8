//! The OTLP tee: every OTLP request the bridge receives (logs, traces, metrics; over gRPC or
//! HTTP, protobuf or JSON) is forwarded to an upstream OTLP/HTTP receiver
//! (`[otlp_in] tee = "https://collector:4318"`), as protobuf, gzip-compressed by default,
//! behind the tee's capture ceiling (`[otlp_in] tee_max_capture`, `export::gate`; unchanged
//! only at `full`).
//!
//! The tee never delays the reply to the sender: the receiving task encodes the request and
//! hands the bytes to a bounded queue with a non-blocking send; a full queue drops the
//! request and counts it in `aep_bridge_events_dropped_total{sink="otlp-tee"}` (one per
//! request). Delivery tasks on the runtime drain the queue through the bridge's one
//! transport ([`crate::transport`]: HTTP or HTTPS with `[otlp_in] tee_tls`, extra headers
//! with `tee_headers`) and its retry policy: 429/502/503/504 and transport errors are
//! retried with jittered exponential backoff, honouring `Retry-After` (seconds or an HTTP
//! date), within a total time budget per request; other answers are permanent failures
//! counted in `aep_bridge_sink_errors_total{sink="otlp-tee"}`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aep_receivers::otlp::{ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest};
use bytes::Bytes;
use prost::Message;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_util::sync::CancellationToken;

use super::OtlpTee;
use crate::metrics::Metrics;
use crate::transport::config::HttpUrl;
use crate::transport::http::{ClientError, gzip};
use crate::transport::{Attempt, Headers, HttpClient, HttpOptions, RetryConfig, TlsConfig, with_retry};

/// The label value of the tee in the bridge's metrics.
pub const SINK: &str = "otlp-tee";

/// How the tee delivers.
#[derive(Debug, Clone, PartialEq)]
pub struct TeeOptions {
    /// Upstream OTLP/HTTP base URL (`http(s)://host:4318`); `/v1/logs` etc. are appended.
    pub base_url: String,
    /// Compress bodies with gzip (`Content-Encoding: gzip`), as the collector's exporters do.
    pub gzip: bool,
    /// Requests waiting for delivery at most; beyond it new requests are dropped.
    pub queue: usize,
    /// Delivery tasks (concurrent requests to the upstream).
    pub workers: usize,
    /// Timeout of one attempt (connect, send, answer).
    pub timeout: Duration,
    /// Extra headers on every request (e.g. an API key).
    pub headers: Headers,
    /// TLS options for an `https://` upstream.
    pub tls: TlsConfig,
    /// Retry policy; `max_elapsed_ms` is the total time spent on one request.
    pub retry: RetryConfig,
}

impl TeeOptions {
    /// Defaults for `base_url`: gzip, 1000 queued requests, 2 workers, 10 s per attempt,
    /// backoff 1 s doubling to 30 s (jitter 0.2), 120 s per request.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            gzip: true,
            queue: 1000,
            workers: 2,
            timeout: Duration::from_secs(10),
            headers: Headers::new(),
            tls: TlsConfig::default(),
            retry: RetryConfig {
                initial_ms: 1000,
                max_ms: 30_000,
                max_elapsed_ms: 120_000,
                multiplier: 2.0,
                jitter: 0.2,
            },
        }
    }
}

/// Why a tee cannot start.
#[derive(Debug, thiserror::Error)]
pub enum TeeError {
    /// The upstream URL is unusable.
    #[error("otlp_in.tee {url:?}: {reason}")]
    BadUrl {
        /// The configured URL.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The HTTP client could not be built (TLS files, headers).
    #[error("otlp_in.tee: {0}")]
    Client(#[from] ClientError),
    /// There is no tokio runtime to run the delivery tasks on.
    #[error("the OTLP tee needs a tokio runtime")]
    NoRuntime,
}

/// Checks an upstream base URL: `http(s)://host[:port][/prefix]` without `/v1/...`.
pub fn check_url(url: &str) -> Result<HttpUrl, TeeError> {
    let bad = |reason: String| TeeError::BadUrl { url: url.to_owned(), reason };
    let parsed = HttpUrl::parse(url).map_err(bad)?;
    let mut out = Vec::new();
    crate::transport::config::check_otlp_base_url("otlp_in.tee", &parsed, &mut out);
    match out.into_iter().next() {
        Some((_, reason)) => Err(bad(reason)),
        None => Ok(parsed),
    }
}

/// Delivery counters (requests, not records).
#[derive(Debug, Default)]
pub struct TeeStats {
    /// Requests taken into the queue.
    pub queued: AtomicU64,
    /// Requests the upstream accepted (2xx).
    pub delivered: AtomicU64,
    /// Retries made (attempts after the first).
    pub retries: AtomicU64,
    /// Requests given up (permanent answer, or retries exhausted).
    pub failed: AtomicU64,
    /// Requests dropped because the queue was full.
    pub dropped: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
enum Signal {
    Logs,
    Traces,
    Metrics,
}

impl Signal {
    fn path(self) -> &'static str {
        match self {
            Signal::Logs => "/v1/logs",
            Signal::Traces => "/v1/traces",
            Signal::Metrics => "/v1/metrics",
        }
    }
}

struct Job {
    signal: Signal,
    body: Vec<u8>,
}

struct Shared {
    opts: TeeOptions,
    base: String,
    client: HttpClient,
    metrics: Arc<Metrics>,
    stats: Arc<TeeStats>,
    depth: AtomicUsize,
    /// Cancelled when the tee is dropped: queued requests get one attempt, no retries.
    closing: CancellationToken,
    last_warn: Mutex<Option<Instant>>,
}

/// The tee: an [`OtlpTee`] forwarding to an upstream OTLP/HTTP receiver.
pub struct HttpTee {
    tx: mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

impl HttpTee {
    /// Starts the delivery tasks on the current tokio runtime. They end once the tee is
    /// dropped and the queue is drained (after the drop, each queued request gets one
    /// attempt, no retries).
    pub fn start(opts: TeeOptions, metrics: Arc<Metrics>) -> Result<Arc<Self>, TeeError> {
        check_url(&opts.base_url)?;
        let rt = tokio::runtime::Handle::try_current().map_err(|_| TeeError::NoRuntime)?;
        let client = HttpClient::new(&HttpOptions {
            timeout: opts.timeout,
            headers: opts.headers.clone(),
            tls: opts.tls.clone(),
        })?;
        let (tx, rx) = mpsc::channel::<Job>(opts.queue.max(1));
        let rx = Arc::new(tokio::sync::Mutex::new(rx));
        let shared = Arc::new(Shared {
            base: opts.base_url.trim_end_matches('/').to_owned(),
            opts,
            client,
            metrics,
            stats: Arc::new(TeeStats::default()),
            depth: AtomicUsize::new(0),
            closing: CancellationToken::new(),
            last_warn: Mutex::new(None),
        });
        for _ in 0..shared.opts.workers.max(1) {
            rt.spawn(worker(rx.clone(), shared.clone()));
        }
        Ok(Arc::new(Self { tx, shared }))
    }

    /// The delivery counters.
    pub fn stats(&self) -> Arc<TeeStats> {
        self.shared.stats.clone()
    }

    fn enqueue<M: Message>(&self, signal: Signal, req: &M) {
        let sh = &self.shared;
        // Cheap check before encoding: a full queue drops without work.
        if sh.depth.load(Ordering::Relaxed) >= sh.opts.queue.max(1) {
            self.drop_one();
            return;
        }
        let body = req.encode_to_vec();
        // Counted before the send: a worker may take the job (and decrement) at once.
        sh.depth.fetch_add(1, Ordering::Relaxed);
        match self.tx.try_send(Job { signal, body }) {
            Ok(()) => {
                sh.stats.queued.fetch_add(1, Ordering::Relaxed);
                sh.metrics.queue_depth.set(SINK, sh.depth.load(Ordering::Relaxed) as i64);
            }
            Err(TrySendError::Full(_) | TrySendError::Closed(_)) => {
                sh.depth.fetch_sub(1, Ordering::Relaxed);
                self.drop_one();
            }
        }
    }

    fn drop_one(&self) {
        self.shared.stats.dropped.fetch_add(1, Ordering::Relaxed);
        self.shared.metrics.dropped.inc(&[("sink", SINK)]);
    }
}

impl Drop for HttpTee {
    fn drop(&mut self) {
        self.shared.closing.cancel();
    }
}

impl OtlpTee for HttpTee {
    fn logs(&self, req: &ExportLogsServiceRequest) {
        self.enqueue(Signal::Logs, req);
    }

    fn traces(&self, req: &ExportTraceServiceRequest) {
        self.enqueue(Signal::Traces, req);
    }

    fn metrics(&self, req: &ExportMetricsServiceRequest) {
        self.enqueue(Signal::Metrics, req);
    }
}

/// The tee configured by `[otlp_in] tee` (with `tee_headers` and `tee_tls`), or `None` when
/// it is empty. An unusable setting is logged and leaves the tee off (the receivers still run).
/// Call it inside the runtime.
pub fn from_config(
    tee: Option<&HttpUrl>,
    headers: &Headers,
    tls: &TlsConfig,
    metrics: &Arc<Metrics>,
) -> Option<Arc<dyn OtlpTee>> {
    let tee = tee?;
    let opts = TeeOptions { headers: headers.clone(), tls: tls.clone(), ..TeeOptions::new(tee.as_str().to_owned()) };
    match HttpTee::start(opts, metrics.clone()) {
        Ok(t) => {
            tracing::info!(upstream = %tee, "OTLP tee on.");
            Some(t)
        }
        Err(e) => {
            tracing::error!(error = %e, "OTLP tee off.");
            eprintln!("aep-bridge: error: {e}; the OTLP tee is off");
            None
        }
    }
}

async fn worker(rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Job>>>, sh: Arc<Shared>) {
    loop {
        // The lock is held only while waiting for the next job, not while delivering it.
        let job = { rx.lock().await.recv().await };
        let Some(job) = job else { return };
        sh.depth.fetch_sub(1, Ordering::Relaxed);
        sh.metrics.queue_depth.set(SINK, sh.depth.load(Ordering::Relaxed) as i64);
        deliver(&sh, job).await;
    }
}

async fn deliver(sh: &Shared, job: Job) {
    let url = format!("{}{}", sh.base, job.signal.path());
    let body = Bytes::from(if sh.opts.gzip { gzip(&job.body) } else { job.body });
    let start = Instant::now();
    let d = with_retry(&sh.opts.retry, &sh.closing, || async {
        match sh.client.attempt(&url, "application/x-protobuf", body.clone(), sh.opts.gzip).await {
            Attempt::Done(_) => Attempt::Done(()),
            Attempt::Retry(after, why) => Attempt::Retry(after, why),
            Attempt::Fail(why) => Attempt::Fail(why),
        }
    })
    .await;
    sh.stats.retries.fetch_add(u64::from(d.retries), Ordering::Relaxed);
    match d.result {
        Ok(()) => {
            tracing::trace!(url = %url, bytes = body.len(), "OTLP tee: delivered.");
            sh.stats.delivered.fetch_add(1, Ordering::Relaxed);
        }
        Err(why) => {
            sh.stats.failed.fetch_add(1, Ordering::Relaxed);
            sh.metrics.sink_errors.inc(&[("sink", SINK)]);
            warn_sometimes(sh, &url, &format!("{why} after {:?}", start.elapsed()));
        }
    }
}

/// At most one warning every 10 s: a dead upstream must not flood the log.
fn warn_sometimes(sh: &Shared, url: &str, why: &str) {
    let Ok(mut last) = sh.last_warn.lock() else { return };
    if last.is_some_and(|t| t.elapsed() < Duration::from_secs(10)) {
        return;
    }
    *last = Some(Instant::now());
    tracing::warn!(url, reason = why, "OTLP tee: request not delivered.");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write as _};
    use std::net::TcpListener;

    #[test]
    fn urls() {
        assert!(check_url("http://127.0.0.1:4318").is_ok());
        assert!(check_url("http://collector/otlp/").is_ok());
        assert!(check_url("https://x:4318").is_ok());
        assert!(check_url("127.0.0.1:4318").is_err());
        assert!(check_url("http://").is_err());
        assert!(check_url("http://x:4318/v1/logs").is_err());
    }

    /// One request as seen by the fake upstream.
    struct Seen {
        path: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        at: Instant,
    }

    /// A scripted HTTP/1.1 upstream: answers the given (status, extra header) in turn, then 200.
    fn upstream(script: Vec<(u16, Option<&'static str>)>) -> (String, Arc<Mutex<Vec<Seen>>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            let mut script = script.into_iter();
            for conn in l.incoming() {
                let Ok(conn) = conn else { return };
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
                    let mut headers = Vec::new();
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                    }
                    let len: usize =
                                                // No content-length on a request means an empty body (RFC 9112 §6.3).
                        headers.iter().find(|(k, _)| k == "content-length").map_or(0, |(_, v)| v.parse().unwrap());
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).unwrap();
                    s.lock().unwrap().push(Seen { path, headers, body, at: Instant::now() });
                    let (code, extra) = script.next().unwrap_or((200, None));
                    let extra = extra.map(|e| format!("{e}\r\n")).unwrap_or_default();
                    let _ = write!(w, "HTTP/1.1 {code} X\r\ncontent-length: 0\r\n{extra}\r\n");
                }
            }
        });
        (url, seen)
    }

    fn opts(url: &str) -> TeeOptions {
        TeeOptions {
            retry: RetryConfig {
                initial_ms: 100,
                max_ms: 30_000,
                max_elapsed_ms: 10_000,
                multiplier: 2.0,
                jitter: 0.0,
            },
            workers: 1,
            ..TeeOptions::new(url)
        }
    }

    async fn wait<F: Fn() -> bool>(f: F) {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "timed out");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn logs_req(body: &str) -> ExportLogsServiceRequest {
        use opentelemetry_proto::tonic::common::v1::{AnyValue, any_value};
        use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
        ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: vec![LogRecord {
                        body: Some(AnyValue { value: Some(any_value::Value::StringValue(body.into())) }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[tokio::test]
    async fn forwards_unchanged_with_gzip_and_retries_honouring_retry_after() {
        let (url, seen) = upstream(vec![(503, Some("retry-after: 1")), (429, None), (502, None)]);
        let tee = HttpTee::start(opts(&url), Arc::new(Metrics::default())).unwrap();
        let req = logs_req("hello");
        tee.logs(&req);
        let stats = tee.stats();
        wait(|| stats.delivered.load(Ordering::Relaxed) == 1).await;
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 4);
        assert!(seen.iter().all(|s| s.path == "/v1/logs"));
        let h = |s: &Seen, k: &str| s.headers.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(h(&seen[0], "content-type").as_deref(), Some("application/x-protobuf"));
        assert_eq!(h(&seen[0], "content-encoding").as_deref(), Some("gzip"));
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(&seen[3].body[..]).read_to_end(&mut raw).unwrap();
        assert_eq!(ExportLogsServiceRequest::decode(&raw[..]).unwrap(), req);
        // Retry-After: 1 s was honoured (not the 100 ms backoff); then 100 ms, 200 ms.
        let gap = |i: usize| seen[i + 1].at - seen[i].at;
        assert!(gap(0) >= Duration::from_millis(950), "{:?}", gap(0));
        assert!(gap(1) >= Duration::from_millis(90) && gap(1) < Duration::from_millis(900), "{:?}", gap(1));
        assert!(gap(2) >= Duration::from_millis(190), "{:?}", gap(2));
        assert_eq!(stats.retries.load(Ordering::Relaxed), 3);
        assert_eq!(stats.failed.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn permanent_errors_are_not_retried() {
        let (url, seen) = upstream(vec![(400, None)]);
        let metrics = Arc::new(Metrics::default());
        let tee = HttpTee::start(TeeOptions { gzip: false, ..opts(&url) }, metrics.clone()).unwrap();
        tee.traces(&ExportTraceServiceRequest::default());
        tee.metrics(&ExportMetricsServiceRequest::default());
        let stats = tee.stats();
        wait(|| stats.delivered.load(Ordering::Relaxed) + stats.failed.load(Ordering::Relaxed) == 2).await;
        assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.retries.load(Ordering::Relaxed), 0);
        assert_eq!(metrics.sink_errors.get(&[("sink", SINK)]), 1);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/v1/traces", "/v1/metrics"]);
        assert!(seen[0].headers.iter().all(|(k, _)| k != "content-encoding"));
    }

    #[tokio::test]
    async fn full_queue_drops_and_counts_without_blocking() {
        // An upstream that never answers: the worker blocks on the first request.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let metrics = Arc::new(Metrics::default());
        let tee =
            HttpTee::start(TeeOptions { queue: 4, timeout: Duration::from_secs(30), ..opts(&url) }, metrics.clone())
                .unwrap();
        let req = logs_req("x");
        let t0 = Instant::now();
        for _ in 0..100 {
            tee.logs(&req);
        }
        assert!(t0.elapsed() < Duration::from_millis(500), "{:?}", t0.elapsed());
        let stats = tee.stats();
        let dropped = stats.dropped.load(Ordering::Relaxed);
        // 4 queued plus at most one taken by the worker.
        assert!((95..=96).contains(&dropped), "{dropped}");
        assert_eq!(metrics.dropped.get(&[("sink", SINK)]), dropped);
        drop(l);
    }
}
