//! The one retrying HTTP client every HTTP exporter uses, and the retry loop the gRPC
//! exporter shares: exponential backoff on retryable failures, honoring the peer's
//! `Retry-After` / `RetryInfo`, bounded by `[export.retry] max_elapsed_ms`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::config::RetryConfig;

/// What one attempt came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Delivered (`T` carries what the peer said, e.g. a partial success).
    Done(T),
    /// A retryable failure, with the peer's requested delay if it gave one.
    Retry(Option<Duration>, String),
    /// A permanent failure: retrying would not help (bad data, auth, ...).
    Fail(String),
}

/// How a batch ended after its attempts.
#[derive(Debug)]
pub struct Delivery<T> {
    /// `Ok` with the peer's answer, or the last error.
    pub result: Result<T, String>,
    /// Retries made (attempts - 1).
    pub retries: u32,
}

/// Runs `attempt` until it is done, fails permanently, or the retry budget is spent.
/// Once `shutdown` is cancelled, a failing batch is given up after its current attempt
/// (flushing must not hang on a dead peer).
pub async fn with_retry<T, F, Fut>(policy: &RetryConfig, shutdown: &CancellationToken, mut attempt: F) -> Delivery<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Attempt<T>>,
{
    let start = Instant::now();
    let budget = Duration::from_millis(policy.max_elapsed_ms);
    let mut retries = 0u32;
    loop {
        match attempt().await {
            Attempt::Done(t) => return Delivery { result: Ok(t), retries },
            Attempt::Fail(e) => return Delivery { result: Err(e), retries },
            Attempt::Retry(hint, e) => {
                // A server hint wins over our own backoff, capped by the policy's longest wait.
                let wait =
                    hint.map_or_else(|| policy.backoff(retries), |h| h.min(Duration::from_millis(policy.max_ms)));
                if shutdown.is_cancelled() || start.elapsed() + wait > budget {
                    return Delivery { result: Err(format!("{e} (gave up after {} retries)", retries)), retries };
                }
                tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "Export attempt failed; retrying.");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => {}
                }
                retries += 1;
            }
        }
    }
}

/// Whether an HTTP status is worth retrying (the OTLP/HTTP rules: 429, 502, 503, 504).
pub fn retryable_status(status: u16) -> bool {
    matches!(status, 429 | 502 | 503 | 504)
}

/// Parses a `Retry-After` of delta-seconds (an HTTP-date is ignored: the backoff applies).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Retry-After`, parsed.
    pub retry_after: Option<Duration>,
    /// `Content-Type`.
    pub content_type: String,
    /// Body (capped at 4 MiB).
    pub body: Vec<u8>,
}

/// A small blocking HTTP/1.1 client run on the blocking pool (plain `http://` only).
#[derive(Clone)]
pub struct HttpClient {
    agent: ureq::Agent,
    headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

/// Gzips `body`.
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4 + 64), flate2::Compression::fast());
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

impl HttpClient {
    /// A client with a per-request `timeout` and extra `headers` on every request.
    pub fn new(timeout: Duration, headers: BTreeMap<String, String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .user_agent(concat!("aep-bridge/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Self { agent, headers }
    }

    /// POSTs `body` once; `Err` is a transport failure (connection refused, timeout).
    pub async fn post(&self, url: &str, content_type: &str, body: Bytes, gzipped: bool) -> Result<Reply, String> {
        let agent = self.agent.clone();
        let headers = self.headers.clone();
        let url = url.to_owned();
        let content_type = content_type.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut req = agent.post(&url).header("content-type", &content_type);
            if gzipped {
                req = req.header("content-encoding", "gzip");
            }
            for (k, v) in &headers {
                req = req.header(k, v);
            }
            let mut resp = req.send(&body[..]).map_err(|e| format!("POST {url}: {e}"))?;
            let status = resp.status().as_u16();
            let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
            let retry_after = header("retry-after").as_deref().and_then(parse_retry_after);
            let content_type = header("content-type").unwrap_or_default();
            let body = resp.body_mut().with_config().limit(4 << 20).read_to_vec().unwrap_or_default();
            Ok(Reply { status, retry_after, content_type, body })
        })
        .await
        .map_err(|e| format!("HTTP worker: {e}"))?
    }

    /// POSTs once and classifies the answer: 2xx done, 429/502/503/504 and transport
    /// errors retried, anything else a permanent failure.
    pub async fn attempt(&self, url: &str, content_type: &str, body: Bytes, gzipped: bool) -> Attempt<Reply> {
        match self.post(url, content_type, body, gzipped).await {
            Err(e) => Attempt::Retry(None, e),
            Ok(r) if (200..300).contains(&r.status) => Attempt::Done(r),
            Ok(r) => {
                let snippet = String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned();
                let msg = format!("POST {url}: HTTP {} {snippet}", r.status);
                if retryable_status(r.status) { Attempt::Retry(r.retry_after, msg) } else { Attempt::Fail(msg) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_statuses_and_hints() {
        assert!(retryable_status(503) && retryable_status(429) && !retryable_status(400) && !retryable_status(500));
        assert_eq!(parse_retry_after(" 2 "), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[tokio::test]
    async fn gives_up_after_the_budget_and_stops_on_fail() {
        let policy = RetryConfig { initial_ms: 1, max_ms: 2, max_elapsed_ms: 30, multiplier: 2.0 };
        let stop = CancellationToken::new();
        let mut n = 0;
        let d: Delivery<()> = with_retry(&policy, &stop, || {
            n += 1;
            async { Attempt::Retry(None, "busy".into()) }
        })
        .await;
        assert!(d.result.is_err());
        assert!(d.retries >= 5, "{}", d.retries);
        let mut m = 0;
        let d: Delivery<()> = with_retry(&policy, &stop, || {
            m += 1;
            async { Attempt::Fail("bad".into()) }
        })
        .await;
        assert_eq!((d.retries, m), (0, 1));
        stop.cancel();
        let d: Delivery<()> = with_retry(&policy, &stop, || async { Attempt::Retry(None, "busy".into()) }).await;
        assert_eq!(d.retries, 0);
    }
}
