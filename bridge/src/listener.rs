//! The HTTP accept loop, with the bounds a local daemon needs against broken or hostile
//! clients: a connection cap (over it a connection gets an immediate 503 and is closed), a
//! deadline for the first request, an idle timeout between requests, hyper's header read
//! timeout against slow headers, and a deadline for receiving a request body. A request in
//! flight (a held hook, an SSE stream) is never cut by the idle clocks; an upgraded
//! connection (WebSocket) leaves this loop and is bounded by the collector.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::Service as _;

use crate::metrics::Metrics;

/// Per-listener connection bounds (`[server]` in the config).
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
    /// The connection cap, lowered to what the process's open-file limit allows (after
    /// raising the soft limit to the hard one), keeping room for the data files and sockets
    /// the bridge itself opens.
    pub fn fitted_to_file_limit(mut self) -> Self {
        const RESERVE: u64 = 256;
        let soft = rlimit::increase_nofile_limit(u64::MAX).unwrap_or(1024);
        let room = usize::try_from(soft.saturating_sub(RESERVE)).unwrap_or(usize::MAX).max(16);
        if room < self.max_connections {
            tracing::warn!(
                configured = self.max_connections,
                allowed = room,
                "server.max_connections lowered to fit the open-file limit (ulimit -n)."
            );
            self.max_connections = room;
        }
        self
    }
}

/// Milliseconds since a process-wide origin, for atomics.
fn now_ms() -> u64 {
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
        self.0.idle_since_ms.store(now_ms(), Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Resolves when the connection has had nothing in flight for its idle limit: the header
/// timeout before the first request, the idle timeout after.
async fn idle_watch(a: Arc<Activity>, limits: Limits) {
    loop {
        let limit = if a.served.load(Ordering::Acquire) == 0 { limits.header_timeout } else { limits.idle_timeout };
        let idle_for = Duration::from_millis(now_ms().saturating_sub(a.idle_since_ms.load(Ordering::Acquire)));
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
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, _peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning; the cap should keep
                    // this from happening.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            metrics.rejected.inc(&[("receiver", "http"), ("reason", "connections")]);
            // A fresh socket's send buffer is empty: one non-blocking write goes out whole.
            if let Ok(std) = stream.into_std() {
                let _ = std::io::Write::write(&mut &std, OVER_CAP);
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity { idle_since_ms: AtomicU64::new(now_ms()), ..Activity::default() });
        let a = activity.clone();
        let app = app.clone();
        let body_timeout = limits.body_timeout;
        let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let busy = Busy::enter(&a);
            let req = req.map(|b| {
                let sleep = Box::pin(tokio::time::sleep(body_timeout));
                Body::new(Deadline { inner: Body::new(b), sleep, limit: body_timeout })
            });
            let mut app = app.clone();
            async move {
                let res = app.call(req).await.unwrap_or_else(|never: Infallible| match never {});
                // The connection stays busy until the response body is done (SSE streams).
                Ok::<_, Infallible>(res.map(|b| {
                    Body::new(b.map_frame(move |f| {
                        let _held = &busy;
                        f
                    }))
                }))
            }
        });
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc).into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _permit = permit;
            tokio::select! {
                _ = conn => {}
                // Dropping the connection closes it.
                _ = idle_watch(activity, limits) => {}
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
