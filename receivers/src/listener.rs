//! The accept loop every listener of the bridge runs (the main HTTP port, the extra
//! OTLP/HTTP port, OTLP/gRPC, the AG-UI proxy), with the bounds a local daemon needs against
//! broken or hostile clients: a connection cap (over it an HTTP connection gets an immediate
//! 503, a gRPC one is closed), a deadline for the first request, an idle timeout between
//! requests, hyper's header read timeout against slow headers, a deadline for receiving a
//! request body, and HTTP/2 flow-control windows sized so that streams waiting for admission
//! cannot starve the ones admitted. A request in flight (a held hook, an SSE stream, a gRPC
//! export) is never cut by the idle clocks; an upgraded connection (WebSocket) leaves this
//! loop and is bounded by the collector.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::response::{IntoResponse as _, Response};
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::Service as _;

/// Streams one HTTP/2 connection may have open at once (an OTel Collector exporter with
/// several queue consumers multiplexes its exports on one connection).
pub const H2_MAX_STREAMS: u32 = 16;
/// Unread bytes one HTTP/2 stream may have in flight before the client must wait.
pub const H2_STREAM_WINDOW: u32 = 128 * 1024;
/// Unread bytes one HTTP/2 connection may have in flight: room for every stream's window, so
/// the data of streams still waiting for admission never fills the window the admitted
/// streams need (which would stall them all until their deadline). This is also what one
/// connection can make the bridge hold unread.
pub const H2_CONNECTION_WINDOW: u32 = H2_MAX_STREAMS * H2_STREAM_WINDOW;

/// Descriptors kept free of client connections for the bridge's own files and sockets.
const FD_RESERVE: u64 = 256;
/// The connection cap never goes below this, whatever the file limit.
const MIN_CONNECTIONS: usize = 16;
/// Accept failures are logged at most once per this interval, with a count.
const ACCEPT_LOG_EVERY: Duration = Duration::from_secs(10);
/// How long a connection being closed for idleness may take to say goodbye (HTTP/2 GOAWAY).
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// What a listener speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 and HTTP/2 (prior knowledge), with upgrades.
    Http,
    /// HTTP/2 only (OTLP/gRPC).
    Grpc,
}

impl Protocol {
    /// The `receiver` label of the listener's counters.
    pub fn label(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Grpc => "grpc",
        }
    }
}

/// Called for each connection refused over the cap (the daemon counts them).
pub type OnRefused = Arc<dyn Fn(Protocol) + Send + Sync>;

/// Per-listener connection bounds (`[server]` in the config, the same for every listener).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; past it a new connection is answered 503 and closed.
    pub max_connections: usize,
    /// A new connection must have sent a complete request head within this time.
    pub header_timeout: Duration,
    /// A connection with no request in flight is closed after this long.
    pub idle_timeout: Duration,
    /// A request body must have arrived in full within this time of its head.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_connections: 4096,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
        }
    }
}

impl Limits {
    /// The connection cap of each of `listeners` listeners, lowered so that all of them full
    /// still fit the process's open-file limit (after raising the soft limit to the hard
    /// one) with room left for the data files and sockets the bridge itself opens: one
    /// flooded port must not take the descriptors the others need.
    pub fn fitted_to_file_limit(self, listeners: usize) -> Self {
        let soft = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
        let fitted = self.fitted_to(soft, listeners);
        if fitted.max_connections < self.max_connections {
            tracing::warn!(
                configured = self.max_connections,
                allowed = fitted.max_connections,
                listeners,
                open_files = soft,
                "server.max_connections lowered so every listener fits the open-file limit (ulimit -n)."
            );
        }
        fitted
    }

    /// [`Self::fitted_to_file_limit`] for a given open-file limit.
    pub fn fitted_to(mut self, open_files: u64, listeners: usize) -> Self {
        let room = open_files.saturating_sub(FD_RESERVE) / u64::try_from(listeners.max(1)).unwrap_or(u64::MAX);
        let room = usize::try_from(room).unwrap_or(usize::MAX).max(MIN_CONNECTIONS);
        self.max_connections = self.max_connections.min(room);
        self
    }
}

/// Monotonic milliseconds since a process-wide origin, for atomics (not a wall clock).
fn mono_ms() -> u64 {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    u64::try_from(ORIGIN.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// What one connection is doing: requests in flight, and since when it has been idle.
#[derive(Default)]
struct Activity {
    busy: AtomicUsize,
    idle_since_ms: AtomicU64,
    served: AtomicU64,
}

/// Held while a request (and its response body) is in flight.
struct Busy(Arc<Activity>);

impl Busy {
    fn enter(a: &Arc<Activity>) -> Self {
        a.busy.fetch_add(1, Ordering::AcqRel);
        a.served.fetch_add(1, Ordering::AcqRel);
        Self(a.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle_since_ms.store(mono_ms(), Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Resolves when the connection has had nothing in flight for its idle limit: the header
/// timeout before the first request, the idle timeout after.
async fn idle_watch(a: Arc<Activity>, limits: Limits) {
    loop {
        let limit = if a.served.load(Ordering::Acquire) == 0 { limits.header_timeout } else { limits.idle_timeout };
        let idle_for = Duration::from_millis(mono_ms().saturating_sub(a.idle_since_ms.load(Ordering::Acquire)));
        if a.busy.load(Ordering::Acquire) == 0 && idle_for >= limit {
            return;
        }
        let wait = if a.busy.load(Ordering::Acquire) > 0 { limit } else { limit.saturating_sub(idle_for) };
        tokio::time::sleep(wait.max(Duration::from_millis(10))).await;
    }
}

/// A request body that fails once its deadline passes (a trickled body cannot hold a
/// connection and a handler forever).
struct Deadline {
    inner: Body,
    sleep: Pin<Box<tokio::time::Sleep>>,
    limit: Duration,
}

impl http_body::Body for Deadline {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            let msg = format!("request body not received within {} ms", self.limit.as_millis());
            return Poll::Ready(Some(Err(axum::Error::new(std::io::Error::new(std::io::ErrorKind::TimedOut, msg)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Accept failures (descriptor exhaustion above all), logged once per interval with how many
/// there were instead of once per attempt.
#[derive(Default)]
struct AcceptErrors {
    last_logged: Option<Instant>,
    unlogged: u64,
}

impl AcceptErrors {
    fn failed(&mut self, protocol: Protocol, e: &std::io::Error) {
        self.unlogged += 1;
        let due = self.last_logged.is_none_or(|t| t.elapsed() >= ACCEPT_LOG_EVERY);
        if due {
            tracing::warn!(
                receiver = protocol.label(),
                error = %e,
                failures = self.unlogged,
                "Cannot accept connections (logged at most every 10 s); lower server.max_connections or raise ulimit -n."
            );
            self.last_logged = Some(Instant::now());
            self.unlogged = 0;
        }
    }
}

/// The answer to a connection over the cap, written without waiting (a full socket buffer
/// just loses it; the close still tells the client).
const OVER_CAP: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
connection: close\r\ncontent-length: 62\r\n\r\n{\"error\":\"too many connections to aep-bridge, retry shortly\"}\n";

/// Serves `app` on `listener` within `limits` until `shutdown`; then stops accepting, lets
/// requests in flight finish, and returns once every connection has closed.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    protocol: Protocol,
    on_refused: OnRefused,
    shutdown: CancellationToken,
) {
    let cap = limits.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(cap));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONNECTION_WINDOW)
        .adaptive_window(false);
    let builder = Arc::new(if protocol == Protocol::Grpc { builder.http2_only() } else { builder });
    let mut accept_errors = AcceptErrors::default();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning; the caps should keep
                    // this from happening.
                    accept_errors.failed(protocol, &e);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            on_refused(protocol);
            if protocol == Protocol::Http {
                // A fresh socket's send buffer is empty: one non-blocking write goes out whole.
                if let Ok(std) = stream.into_std() {
                    let _ = std::io::Write::write(&mut &std, OVER_CAP);
                }
            }
            // A gRPC client sees the connection close and retries (UNAVAILABLE).
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity { idle_since_ms: AtomicU64::new(mono_ms()), ..Activity::default() });
        let a = activity.clone();
        let app = app.clone();
        let body_timeout = limits.body_timeout;
        let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
            let busy = Busy::enter(&a);
            // The peer, for what is kept per client (`ConnectInfo`: the web view's login throttle).
            req.extensions_mut().insert(axum::extract::ConnectInfo(peer));
            let req = req.map(|b| {
                let sleep = Box::pin(tokio::time::sleep(body_timeout));
                Body::new(Deadline { inner: Body::new(b), sleep, limit: body_timeout })
            });
            let mut app = app.clone();
            let detach = req.uri().path().starts_with(crate::hooks::PATH_PREFIX);
            let call = async move { app.call(req).await.unwrap_or_else(|never: Infallible| match never {}) };
            // A hook call runs in a task of its own from here, the moment hyper has read its
            // head: a caller that hung up (its request and its connection's end both in the
            // socket: a shim that gave up on a stopped bridge) has its connection, and with it
            // this future, dropped before any layer of the app is polled. The call is a fact
            // of the session: it is handled whatever the connection does.
            let call: Pin<Box<dyn Future<Output = Response> + Send>> = if detach {
                let task = tokio::spawn(call);
                Box::pin(async move {
                    task.await.unwrap_or_else(|e| {
                        crate::hooks::HookError::Unavailable(format!("the hook handler failed: {e}")).into_response()
                    })
                })
            } else {
                Box::pin(call)
            };
            async move {
                let res = call.await;
                // The connection stays busy until the response body is done (SSE streams).
                Ok::<_, Infallible>(res.map(|b| {
                    Body::new(b.map_frame(move |f| {
                        let _held = &busy;
                        f
                    }))
                }))
            }
        });
        let builder = builder.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
            let mut conn = std::pin::pin!(conn);
            let stopping = tokio::select! {
                _ = conn.as_mut() => return,
                _ = idle_watch(activity, limits) => false,
                _ = shutdown.cancelled() => true,
            };
            // HTTP/1: close once the request in flight is answered; HTTP/2: GOAWAY, then
            // the streams in flight finish.
            conn.as_mut().graceful_shutdown();
            if stopping {
                let _ = conn.await;
            } else {
                let _ = tokio::time::timeout(CLOSE_GRACE, conn).await;
            }
        });
    }
    drop(listener);
    // Every connection holds a slot until it is gone.
    let _ = slots.acquire_many(u32::try_from(cap).unwrap_or(u32::MAX)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listener_full_fits_the_file_limit() {
        let l = Limits::default();
        // 1,024 descriptors, 3 listeners: 256 each, the reserve kept.
        assert_eq!(l.fitted_to(1024, 3).max_connections, 256);
        assert_eq!(l.fitted_to(1024, 1).max_connections, 768);
        // A generous limit keeps the configured cap; a tiny one keeps a floor.
        assert_eq!(l.fitted_to(1 << 20, 4).max_connections, 4096);
        assert_eq!(l.fitted_to(100, 4).max_connections, MIN_CONNECTIONS);
    }
}
