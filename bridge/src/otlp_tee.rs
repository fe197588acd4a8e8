//! The OTLP tee: every OTLP request the bridge receives (logs, traces, metrics; over gRPC or
//! HTTP, protobuf or JSON) is forwarded unchanged to an upstream OTLP/HTTP receiver
//! (`[otlp_in] tee = "http://collector:4318"`), as protobuf, gzip-compressed by default.
//!
//! The tee never delays the reply to the sender: the receiving task encodes the request and
//! hands the bytes to a bounded queue with a non-blocking send; a full queue drops the
//! request and counts it in `aep_bridge_events_dropped_total{sink="otlp-tee"}` (one per
//! request). Worker threads (the bridge's blocking `ureq` client) drain the queue and retry
//! 429/502/503/504 and transport errors with exponential backoff, honouring `Retry-After`
//! (seconds or an HTTP date), within a total time budget per request; other answers are
//! permanent failures counted in `aep_bridge_sink_errors_total{sink="otlp-tee"}`.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aep_receivers::otlp::{ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest};
use prost::Message;

use crate::metrics::Metrics;
use crate::otlp_in::OtlpTee;

/// The label value of the tee in the bridge's metrics.
pub const SINK: &str = "otlp-tee";

/// How the tee delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeeOptions {
    /// Upstream OTLP/HTTP base URL (`http://host:4318`); `/v1/logs` etc. are appended.
    pub base_url: String,
    /// Compress bodies with gzip (`Content-Encoding: gzip`), as the collector's exporters do.
    pub gzip: bool,
    /// Requests waiting for delivery at most; beyond it new requests are dropped.
    pub queue: usize,
    /// Delivery threads (concurrent requests to the upstream).
    pub workers: usize,
    /// Timeout of one attempt (connect, send, answer).
    pub timeout: Duration,
    /// First retry delay when the upstream gives none.
    pub initial_backoff: Duration,
    /// Largest retry delay computed by the backoff (a `Retry-After` may be longer).
    pub max_backoff: Duration,
    /// Total time spent on one request, retries included, before it is given up.
    pub max_elapsed: Duration,
}

impl TeeOptions {
    /// Defaults for `base_url`: gzip, 1000 queued requests, 2 workers, 10 s per attempt,
    /// backoff 1 s doubling to 30 s, 120 s per request.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            gzip: true,
            queue: 1000,
            workers: 2,
            timeout: Duration::from_secs(10),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(30),
            max_elapsed: Duration::from_secs(120),
        }
    }
}

/// Why a tee cannot start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TeeError {
    /// The upstream URL is unusable.
    #[error("otlp_in.tee {url:?}: {reason}")]
    BadUrl {
        /// The configured URL.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A worker thread could not be started.
    #[error("cannot start the OTLP tee worker: {0}")]
    Spawn(String),
}

/// Checks an upstream base URL: plain `http://host[:port][/prefix]` (this build has no TLS).
pub fn check_url(url: &str) -> Result<(), TeeError> {
    let bad = |reason| Err(TeeError::BadUrl { url: url.to_owned(), reason });
    if url.starts_with("https://") {
        return bad("https is not supported by this build (no TLS); use http:// or a local collector");
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return bad("not an http:// URL");
    };
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains(char::is_whitespace) {
        return bad("no host");
    }
    if rest.contains("/v1/") {
        return bad("give the base URL; /v1/logs, /v1/traces and /v1/metrics are appended");
    }
    Ok(())
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
    metrics: Arc<Metrics>,
    stats: Arc<TeeStats>,
    depth: AtomicUsize,
    closing: AtomicBool,
    last_warn: Mutex<Option<Instant>>,
}

/// The tee: an [`OtlpTee`] forwarding to an upstream OTLP/HTTP receiver.
pub struct HttpTee {
    tx: SyncSender<Job>,
    shared: Arc<Shared>,
}

impl HttpTee {
    /// Starts the worker threads. They end once the tee is dropped and the queue is drained
    /// (after the drop, each queued request gets one attempt, no retries).
    pub fn start(opts: TeeOptions, metrics: Arc<Metrics>) -> Result<Arc<Self>, TeeError> {
        check_url(&opts.base_url)?;
        let (tx, rx) = sync_channel::<Job>(opts.queue.max(1));
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(Shared {
            base: opts.base_url.trim_end_matches('/').to_owned(),
            opts,
            metrics,
            stats: Arc::new(TeeStats::default()),
            depth: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            last_warn: Mutex::new(None),
        });
        for i in 0..shared.opts.workers.max(1) {
            let (rx, sh) = (rx.clone(), shared.clone());
            std::thread::Builder::new()
                .name(format!("otlp-tee-{i}"))
                .spawn(move || worker(&rx, &sh))
                .map_err(|e| TeeError::Spawn(e.to_string()))?;
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
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
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
        self.shared.closing.store(true, Ordering::Relaxed);
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

/// The tee configured by `[otlp_in] tee`, or `None` when it is empty. An unusable URL is
/// logged and leaves the tee off (the receivers still run).
pub fn from_config(cfg: &crate::config::Config, metrics: &Arc<Metrics>) -> Option<Arc<dyn OtlpTee>> {
    if cfg.otlp_in.tee.is_empty() {
        return None;
    }
    match HttpTee::start(TeeOptions::new(cfg.otlp_in.tee.clone()), metrics.clone()) {
        Ok(t) => {
            tracing::info!(upstream = %cfg.otlp_in.tee, "OTLP tee on.");
            Some(t)
        }
        Err(e) => {
            tracing::error!(error = %e, "OTLP tee off.");
            eprintln!("aep-bridge: error: {e}; the OTLP tee is off");
            None
        }
    }
}

fn worker(rx: &Mutex<Receiver<Job>>, sh: &Shared) {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(sh.opts.timeout))
        .build()
        .new_agent();
    loop {
        let job = {
            let Ok(r) = rx.lock() else { return };
            match r.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        sh.depth.fetch_sub(1, Ordering::Relaxed);
        sh.metrics.queue_depth.set(SINK, sh.depth.load(Ordering::Relaxed) as i64);
        deliver(&agent, sh, job);
    }
}

enum Outcome {
    Done,
    Retry { after: Option<Duration>, why: String },
    Permanent(String),
}

fn deliver(agent: &ureq::Agent, sh: &Shared, job: Job) {
    let url = format!("{}{}", sh.base, job.signal.path());
    let body = if sh.opts.gzip { gzip(&job.body) } else { job.body };
    let start = Instant::now();
    let mut backoff = sh.opts.initial_backoff;
    loop {
        let why = match attempt(agent, &url, &body, sh.opts.gzip) {
            Outcome::Done => {
                tracing::trace!(url = %url, bytes = body.len(), "OTLP tee: delivered.");
                sh.stats.delivered.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Outcome::Permanent(why) => why,
            Outcome::Retry { after, why } => {
                let wait = after.unwrap_or(backoff);
                backoff = (backoff * 2).min(sh.opts.max_backoff);
                let over_budget = start.elapsed() + wait > sh.opts.max_elapsed;
                tracing::debug!(url = %url, reason = %why, wait_ms = wait.as_millis() as u64, "OTLP tee: retrying.");
                if !over_budget && !sh.closing.load(Ordering::Relaxed) && sleep_unless_closing(sh, wait) {
                    sh.stats.retries.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                format!("{why} (gave up after {:?})", start.elapsed())
            }
        };
        sh.stats.failed.fetch_add(1, Ordering::Relaxed);
        sh.metrics.sink_errors.inc(&[("sink", SINK)]);
        warn_sometimes(sh, &url, &why);
        return;
    }
}

fn attempt(agent: &ureq::Agent, url: &str, body: &[u8], gzip: bool) -> Outcome {
    let mut req = agent.post(url).header("content-type", "application/x-protobuf");
    if gzip {
        req = req.header("content-encoding", "gzip");
    }
    match req.send(body) {
        Ok(mut resp) => {
            let status = resp.status().as_u16();
            // Read the (small) answer so the connection can be reused.
            let _ = resp.body_mut().with_config().limit(64 * 1024).read_to_vec();
            match status {
                200..=299 => Outcome::Done,
                429 | 502 | 503 | 504 => {
                    let after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| parse_retry_after(v, SystemTime::now()));
                    Outcome::Retry { after, why: format!("upstream answered {status}") }
                }
                s => Outcome::Permanent(format!("upstream answered {s}")),
            }
        }
        Err(e) => Outcome::Retry { after: None, why: format!("cannot reach the upstream: {e}") },
    }
}

/// Sleeps `d` in short slices; false if the tee closed meanwhile.
fn sleep_unless_closing(sh: &Shared, d: Duration) -> bool {
    let end = Instant::now() + d;
    loop {
        if sh.closing.load(Ordering::Relaxed) {
            return false;
        }
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
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

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 4 + 64), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an IMF-fixdate
/// (`Sun, 06 Nov 1994 08:49:37 GMT`), relative to `now`.
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    // IMF-fixdate: "Day, DD Mon YYYY HH:MM:SS GMT".
    let parts: Vec<&str> = v.split_whitespace().collect();
    let [_, day, mon, year, hms, "GMT"] = parts.as_slice() else { return None };
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let m = MONTHS.iter().position(|x| x == mon)? + 1;
    let rfc = format!("{year:0>4}-{m:02}-{day:0>2}T{hms}Z");
    let at = crate::time::parse_rfc3339_nanos(&rfc)?;
    let now = crate::time::unix_nanos(now);
    Some(Duration::from_nanos(at.saturating_sub(now)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpListener;

    #[test]
    fn urls() {
        assert!(check_url("http://127.0.0.1:4318").is_ok());
        assert!(check_url("http://collector/otlp/").is_ok());
        assert!(check_url("https://x:4318").is_err());
        assert!(check_url("127.0.0.1:4318").is_err());
        assert!(check_url("http://").is_err());
        assert!(check_url("http://x:4318/v1/logs").is_err());
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        // 1994-11-06T08:49:37Z is 784_111_777.
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
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
                        headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse().unwrap()).unwrap();
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
            initial_backoff: Duration::from_millis(100),
            max_elapsed: Duration::from_secs(10),
            workers: 1,
            ..TeeOptions::new(url)
        }
    }

    fn wait<F: Fn() -> bool>(f: F) {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "timed out");
            std::thread::sleep(Duration::from_millis(10));
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

    #[test]
    fn forwards_unchanged_with_gzip_and_retries_honouring_retry_after() {
        let (url, seen) = upstream(vec![(503, Some("retry-after: 1")), (429, None), (502, None)]);
        let tee = HttpTee::start(opts(&url), Arc::new(Metrics::default())).unwrap();
        let req = logs_req("hello");
        tee.logs(&req);
        let stats = tee.stats();
        wait(|| stats.delivered.load(Ordering::Relaxed) == 1);
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

    #[test]
    fn permanent_errors_are_not_retried() {
        let (url, seen) = upstream(vec![(400, None)]);
        let metrics = Arc::new(Metrics::default());
        let tee = HttpTee::start(TeeOptions { gzip: false, ..opts(&url) }, metrics.clone()).unwrap();
        tee.traces(&ExportTraceServiceRequest::default());
        tee.metrics(&ExportMetricsServiceRequest::default());
        let stats = tee.stats();
        wait(|| stats.delivered.load(Ordering::Relaxed) + stats.failed.load(Ordering::Relaxed) == 2);
        assert_eq!(stats.failed.load(Ordering::Relaxed), 1);
        assert_eq!(stats.retries.load(Ordering::Relaxed), 0);
        assert_eq!(metrics.sink_errors.get(&[("sink", SINK)]), 1);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/v1/traces", "/v1/metrics"]);
        assert!(seen[0].headers.iter().all(|(k, _)| k != "content-encoding"));
    }

    #[test]
    fn full_queue_drops_and_counts_without_blocking() {
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
