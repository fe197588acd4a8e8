//! The one retry policy: exponential backoff with jitter, the peer's `Retry-After`
//! (delta-seconds or an HTTP-date) or gRPC `RetryInfo` winning over it, a total time
//! budget per request, and no further retries once shutdown is signalled.
//!
//! The decisions ([`RetryConfig::backoff_jittered`], [`parse_retry_after`],
//! [`retryable_status`], [`classify_grpc`]) are pure; [`with_retry`] is the loop.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::{Duration, SystemTime};

// Tokio's clock: a test that pauses time (`tokio::time::pause`) spends a retry budget of
// hours in a moment, and outside tests it is the monotonic clock like std's.
use tokio::time::Instant;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// `[export.retry]` (and the tee's policy): exponential backoff on retryable failures (the
/// collector's defaults, with a shorter first wait).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// First wait, in milliseconds.
    pub initial_ms: u64,
    /// Longest single wait, in milliseconds (a server hint is capped by it too).
    pub max_ms: u64,
    /// Give a request up after this long, in milliseconds (0 = never retry).
    pub max_elapsed_ms: u64,
    /// Growth factor of the wait.
    pub multiplier: f64,
    /// Fraction of each computed wait randomized either way, 0.0..=1.0 (not server hints).
    pub jitter: f64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self { initial_ms: 1000, max_ms: 30_000, max_elapsed_ms: 300_000, multiplier: 1.5, jitter: 0.2 }
    }
}

impl RetryConfig {
    /// The wait before retry number `n` (0-based), without jitter or a server hint.
    pub fn backoff(&self, n: u32) -> Duration {
        let f = self.multiplier.max(1.0).powi(i32::try_from(n).unwrap_or(i32::MAX));
        let ms = (self.initial_ms as f64 * f).min(self.max_ms as f64);
        Duration::from_millis(ms as u64)
    }

    /// [`Self::backoff`] spread by `jitter` with `rand` in `[0, 1)`: within
    /// `[base * (1 - jitter), base * (1 + jitter)]`, never above `max_ms`.
    pub fn backoff_jittered(&self, n: u32, rand: f64) -> Duration {
        let base = self.backoff(n).as_secs_f64();
        let j = self.jitter.clamp(0.0, 1.0);
        let spread = base * j * (2.0 * rand.clamp(0.0, 1.0) - 1.0);
        let cap = Duration::from_millis(self.max_ms).as_secs_f64();
        Duration::from_secs_f64((base + spread).clamp(0.0, cap.max(base)))
    }

    /// The wait before retry `n`: the server's hint capped at `max_ms`, else the jittered backoff.
    pub fn wait(&self, n: u32, hint: Option<Duration>, rand: f64) -> Duration {
        match hint {
            Some(h) => h.min(Duration::from_millis(self.max_ms)),
            None => self.backoff_jittered(n, rand),
        }
    }

    /// Problems of this policy, as `(key, message)` under `prefix`.
    pub fn check(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            out.push((format!("{prefix}.multiplier"), "must be a number >= 1".into()));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            out.push((format!("{prefix}.jitter"), "must be between 0 and 1".into()));
        }
        if self.max_ms < self.initial_ms {
            out.push((format!("{prefix}.max_ms"), format!("must be >= {prefix}.initial_ms")));
        }
        out
    }
}

/// A number in `[0, 1)` from the std hasher's random keys (no RNG dependency).
pub fn random_unit() -> f64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// What one attempt came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// Delivered (`T` carries what the peer said, e.g. a partial success).
    Done(T),
    /// A retryable failure, with the peer's requested delay if it gave one.
    Retry(Option<Duration>, String),
    /// A permanent failure: retrying would not help (bad data, auth, a bad certificate).
    Fail(String),
}

/// How a request ended after its attempts.
#[derive(Debug)]
pub struct Delivery<T> {
    /// `Ok` with the peer's answer, or the last error.
    pub result: Result<T, String>,
    /// Retries made (attempts - 1).
    pub retries: u32,
    /// The last failure was retryable: the time budget ran out, or shutdown cut the
    /// retries short. A peer that is down or overloaded, not one that refused the request:
    /// a caller that keeps what it sends (the durable exporters) tries again later.
    pub transient: bool,
}

/// Runs `attempt` until it is done, fails permanently, or the time budget is spent.
/// Once `shutdown` is cancelled, a failing request is given up after its current attempt
/// and a pending wait is cut short (flushing must not hang on a dead peer).
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
            Attempt::Done(t) => return Delivery { result: Ok(t), retries, transient: false },
            Attempt::Fail(e) => return Delivery { result: Err(e), retries, transient: false },
            Attempt::Retry(hint, e) => {
                let wait = policy.wait(retries, hint, random_unit());
                if shutdown.is_cancelled() || start.elapsed() + wait > budget {
                    let result = Err(format!("{e} (gave up after {retries} retries)"));
                    return Delivery { result, retries, transient: true };
                }
                tracing::debug!(error = %e, wait_ms = wait.as_millis() as u64, "Outbound attempt failed; retrying.");
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shutdown.cancelled() => {
                        return Delivery { result: Err(format!("{e} (shutting down)")), retries, transient: true };
                    }
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

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date (IMF-fixdate, or the
/// obsolete RFC 850 and asctime forms), relative to `now`; a past date is zero.
pub fn parse_retry_after(v: &str, now: SystemTime) -> Option<Duration> {
    let v = v.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Classifies a gRPC failure by the OTLP/gRPC rules, with the `RetryInfo` delay read by
/// tonic-types: CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE and
/// DATA_LOSS are retried; RESOURCE_EXHAUSTED only with a `RetryInfo`.
pub fn classify_grpc<T>(s: &tonic::Status) -> Attempt<T> {
    use tonic::Code;
    use tonic_types::StatusExt as _;
    let hint = s.get_details_retry_info().and_then(|r| r.retry_delay);
    let msg = format!("gRPC {:?}: {}", s.code(), s.message());
    match s.code() {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => Attempt::Retry(hint, msg),
        Code::ResourceExhausted if hint.is_some() => Attempt::Retry(hint, msg),
        _ => Attempt::Fail(msg),
    }
}

/// A gRPC status with a `RetryInfo` detail (what a server under backpressure sends).
pub fn status_with_retry_info(code: tonic::Code, message: &str, delay: Duration) -> tonic::Status {
    use tonic_types::{ErrorDetails, StatusExt as _};
    tonic::Status::with_error_details(code, message, ErrorDetails::with_retry_info(Some(delay)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_the_cap() {
        let r = RetryConfig { initial_ms: 100, max_ms: 300, max_elapsed_ms: 1000, multiplier: 2.0, jitter: 0.0 };
        assert_eq!((0..4).map(|n| r.backoff(n).as_millis()).collect::<Vec<_>>(), [100, 200, 300, 300]);
        assert_eq!(r.backoff_jittered(1, 0.9), Duration::from_millis(200));
    }

    #[test]
    fn jitter_stays_in_its_bounds() {
        let r = RetryConfig { initial_ms: 1000, max_ms: 10_000, max_elapsed_ms: 0, multiplier: 2.0, jitter: 0.25 };
        assert_eq!(r.backoff_jittered(0, 0.0), Duration::from_millis(750));
        assert_eq!(r.backoff_jittered(0, 0.5), Duration::from_millis(1000));
        for i in 0..1000 {
            let rand = f64::from(i) / 1000.0;
            for n in 0..6 {
                let base = r.backoff(n).as_secs_f64();
                let w = r.backoff_jittered(n, rand).as_secs_f64();
                assert!(w >= base * 0.75 - 1e-9 && w <= (base * 1.25).min(10.0) + 1e-9, "n={n} rand={rand} w={w}");
            }
            let u = random_unit();
            assert!((0.0..1.0).contains(&u));
        }
        // Near the cap the upward spread is cut at max_ms.
        assert!(r.backoff_jittered(10, 0.999) <= Duration::from_millis(10_000));
        // A server hint is not jittered, only capped.
        assert_eq!(r.wait(0, Some(Duration::from_secs(3)), 0.0), Duration::from_secs(3));
        assert_eq!(r.wait(0, Some(Duration::from_secs(99)), 0.0), Duration::from_secs(10));
        let bad = RetryConfig { jitter: 1.5, multiplier: 0.5, ..RetryConfig::default() };
        assert_eq!(bad.check("retry").len(), 2);
    }

    #[test]
    fn retry_after_both_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        // 1994-11-06T08:49:37Z is 784_111_777.
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun Nov  6 08:49:37 1994", now), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:49:00 GMT", now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-1", now), None);
        assert!(retryable_status(503) && retryable_status(429) && !retryable_status(400) && !retryable_status(500));
    }

    #[test]
    fn grpc_rules_read_retry_info() {
        let with = status_with_retry_info(tonic::Code::ResourceExhausted, "slow", Duration::from_millis(1500));
        assert!(matches!(classify_grpc::<()>(&with), Attempt::Retry(Some(d), _) if d == Duration::from_millis(1500)));
        assert!(matches!(classify_grpc::<()>(&tonic::Status::resource_exhausted("q")), Attempt::Fail(_)));
        assert!(matches!(classify_grpc::<()>(&tonic::Status::unavailable("x")), Attempt::Retry(None, _)));
        assert!(matches!(classify_grpc::<()>(&tonic::Status::invalid_argument("x")), Attempt::Fail(_)));
    }

    // Tokio's paused clock: the budget and the waits are counted in virtual time, so the
    // number of retries does not depend on how fast a loaded machine wakes a 1 ms sleep.
    #[tokio::test(start_paused = true)]
    async fn gives_up_after_the_budget_stops_on_fail_and_on_shutdown() {
        let policy = RetryConfig { initial_ms: 1, max_ms: 2, max_elapsed_ms: 30, multiplier: 2.0, jitter: 0.0 };
        let stop = CancellationToken::new();
        let t0 = Instant::now();
        let d: Delivery<()> = with_retry(&policy, &stop, || async { Attempt::Retry(None, "busy".into()) }).await;
        assert!(d.result.is_err() && d.transient);
        // Waits of 1, 2, 2, ... ms: the 15th retry ends at 29 ms, a 16th would end past 30.
        assert_eq!((d.retries, t0.elapsed()), (15, Duration::from_millis(29)));
        let mut m = 0;
        let d: Delivery<()> = with_retry(&policy, &stop, || {
            m += 1;
            async { Attempt::Fail("bad".into()) }
        })
        .await;
        assert_eq!((d.retries, m, d.transient), (0, 1, false));
        // A minute's wait is cut short by shutdown, at the moment it is signalled.
        let slow = RetryConfig { initial_ms: 60_000, max_ms: 60_000, max_elapsed_ms: 600_000, ..policy };
        let s2 = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            s2.cancel();
        });
        let t0 = Instant::now();
        let d: Delivery<()> = with_retry(&slow, &stop, || async { Attempt::Retry(None, "busy".into()) }).await;
        assert!(d.result.is_err() && d.transient);
        assert_eq!(t0.elapsed(), Duration::from_millis(50));
        let d: Delivery<()> = with_retry(&policy, &stop, || async { Attempt::Retry(None, "busy".into()) }).await;
        assert_eq!(d.retries, 0);
    }
}
