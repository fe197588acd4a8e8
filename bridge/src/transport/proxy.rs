//! A forwarding tee proxy (an observer that listens): its clients point at it instead of
//! their server; every request is forwarded verbatim to the upstream URL (the path and query appended
//! to it, `/` being `url` itself; the body byte for byte, hop-by-hop headers dropped, and
//! `Accept-Encoding` too, so the stream comes uncompressed and can be observed), and the
//! server's answer is streamed back as it arrives, unchanged and unbuffered.
//!
//! The tee is off the client's path: each chunk of a `2xx text/event-stream` answer is handed
//! to a separate task (never awaited by the forwarding) that parses it with the bounded SSE
//! parser and reports each frame over the links' channel ([`super::link::Msg`]), each
//! answer a link of its own. Fail-open: a frame over `max_frame_bytes` is dropped and counted, a tee
//! that falls more than [`MAX_TEE_BYTES`] behind (or a runtime that stopped) stops
//! observing that stream, and beyond [`MAX_TEES`] concurrent streams new ones are forwarded
//! unobserved: the client's stream never waits on, nor breaks with, the bridge's side. A
//! request body over [`MAX_BODY`] is refused with 413; an unreachable server is a 502
//! naming it; a server that breaks mid-stream breaks the client's stream the same way.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use aep_adapters::observer::sse::Parser;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::link::{Down, Msg};
use super::{HttpClient, HttpOptions};

/// Largest request body forwarded (a run's input may carry the conversation so far).
pub const MAX_BODY: usize = 16 << 20;
/// Bytes a stream's tee may hold unprocessed before it stops observing that stream.
pub const MAX_TEE_BYTES: usize = 8 << 20;
/// Streams observed at once; more are forwarded unobserved.
pub const MAX_TEES: usize = 256;
/// The longest SSE line accepted (a frame's data may span several lines up to the frame cap).
const MAX_LINE: usize = 1 << 20;

struct Proxy {
    name: String,
    upstream: String,
    client: HttpClient,
    runtime: mpsc::Sender<Msg>,
    max_frame: usize,
    tees: Arc<Semaphore>,
    streams: AtomicU64,
}

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The HTTP client could not be built.
    #[error("{0}")]
    Client(super::http::ClientError),
    /// The listen address could not be bound.
    #[error("cannot listen on {0}: {1}")]
    Bind(SocketAddr, std::io::Error),
}

/// Binds `listen` (before this returns) and forwards to `upstream` with `http` until
/// `shutdown`, within the listeners' `limits`; the event streams it forwards are reported to
/// `tx`, frames over `max_frame` dropped. `name` labels it in the log. Returns the bound address.
#[allow(clippy::too_many_arguments)]
pub fn spawn(
    name: &str,
    listen: SocketAddr,
    upstream: &str,
    http: &HttpOptions,
    max_frame: usize,
    tx: mpsc::Sender<Msg>,
    (limits, on_refused): (aep_receivers::listener::Limits, aep_receivers::listener::OnRefused),
    shutdown: CancellationToken,
) -> Result<SocketAddr, ProxyError> {
    let client = HttpClient::streaming(http).map_err(ProxyError::Client)?;
    let bind = |e| ProxyError::Bind(listen, e);
    let std = std::net::TcpListener::bind(listen).map_err(bind)?;
    std.set_nonblocking(true).map_err(bind)?;
    let listener = tokio::net::TcpListener::from_std(std).map_err(bind)?;
    let at = listener.local_addr().map_err(bind)?;
    let proxy = Arc::new(Proxy {
        name: name.to_owned(),
        upstream: upstream.to_owned(),
        client,
        runtime: tx,
        max_frame,
        tees: Arc::new(Semaphore::new(MAX_TEES)),
        streams: AtomicU64::new(0),
    });
    tracing::info!(proxy = name, listen = %at, upstream, "Tee proxy listening.");
    let app = Router::new().fallback(forward).with_state(proxy);
    let protocol = aep_receivers::listener::Protocol::Http;
    tokio::spawn(aep_receivers::listener::serve(listener, app, limits, protocol, on_refused, shutdown));
    Ok(at)
}

/// Connection-scoped headers (RFC 9110 §7.6.1) and the ones the forwarding sets itself.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (k, v) in headers.iter().filter(|(k, _)| !hop_by_hop(k)) {
        out.append(k.clone(), v.clone());
    }
    out
}

impl Proxy {
    /// The server URL a request path goes to: `/` is `url` itself, any other path is appended.
    fn target(&self, path: &str, query: Option<&str>) -> String {
        let mut url = if path == "/" || path.is_empty() {
            self.upstream.clone()
        } else {
            format!("{}{path}", self.upstream.trim_end_matches('/'))
        };
        if let Some(q) = query {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(q);
        }
        url
    }
}

fn refuse(status: StatusCode, text: String) -> Response {
    (status, [("content-type", "text/plain; charset=utf-8")], text).into_response()
}

/// Forwards one request and streams the answer back, teeing an event stream.
async fn forward(State(p): State<Arc<Proxy>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(e) => {
            let why = format!("aep-bridge proxy: the request body could not be read within {MAX_BODY} bytes: {e}\n");
            return refuse(StatusCode::PAYLOAD_TOO_LARGE, why);
        }
    };
    let url = p.target(parts.uri.path(), parts.uri.query());
    let mut headers = end_to_end(&parts.headers);
    // The stream is observed: asked for as it is (identity), never compressed past the tee.
    headers.remove("accept-encoding");
    let up = match p.client.forward(parts.method.as_str(), &url, headers, body).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(proxy = %p.name, error = %e, "The proxied agent is unreachable.");
            return refuse(StatusCode::BAD_GATEWAY, format!("aep-bridge proxy: the agent is unreachable: {e}\n"));
        }
    };
    let status = StatusCode::from_u16(up.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let headers = end_to_end(up.headers());
    let encoded = headers.get("content-encoding").is_some_and(|v| v.as_bytes() != b"identity");
    let sse = (200..300).contains(&up.status) && up.content_type.starts_with("text/event-stream") && !encoded;
    let tee = if sse { Tee::start(&p) } else { None };
    let stream = futures_util::stream::unfold(Some((up, tee)), |state| async move {
        let (mut up, mut tee) = state?;
        match up.chunk().await {
            Ok(Some(b)) => {
                if let Some(t) = tee.as_mut()
                    && !t.feed(&b)
                {
                    tee = None;
                }
                Some((Ok::<Bytes, std::io::Error>(b), Some((up, tee))))
            }
            Ok(None) => None,
            // The server broke mid-stream: so does the client's stream.
            Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    *resp.status_mut() = status;
    *resp.headers_mut() = headers;
    resp
}

/// The sending side of one stream's tee.
struct Tee {
    tx: mpsc::UnboundedSender<Bytes>,
    behind: Arc<AtomicUsize>,
    name: String,
}

impl Tee {
    /// A tee task for one stream, unless [`MAX_TEES`] are running.
    fn start(p: &Arc<Proxy>) -> Option<Self> {
        let Ok(permit) = p.tees.clone().try_acquire_owned() else {
            tracing::warn!(proxy = %p.name, max = MAX_TEES, "Too many streams at once: this one is forwarded unobserved.");
            return None;
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
        let behind = Arc::new(AtomicUsize::new(0));
        let (runtime, held) = (p.runtime.clone(), behind.clone());
        let link = p.streams.fetch_add(1, Ordering::Relaxed).to_string();
        let mut parser = Parser::new(MAX_LINE.min(p.max_frame.max(1024)), p.max_frame);
        let name = p.name.clone();
        tokio::spawn(async move {
            let _permit = permit;
            if runtime.send(Msg::Up(link.clone(), None)).await.is_err() {
                return;
            }
            let mut frames = Vec::new();
            while let Some(b) = rx.recv().await {
                held.fetch_sub(b.len(), Ordering::AcqRel);
                parser.push(&b, &mut frames);
                for f in frames.drain(..) {
                    if runtime.send(Msg::Frame(link.clone(), f.data)).await.is_err() {
                        return;
                    }
                }
            }
            tracing::debug!(proxy = %name, oversized = parser.dropped(), "A proxied stream ended.");
            let _ = runtime.send(Msg::Down(link, Down::Closed(None))).await;
        });
        Some(Self { tx, behind, name: p.name.clone() })
    }

    /// Hands a chunk to the tee; `false` when it stopped observing (too far behind, or gone).
    fn feed(&mut self, b: &Bytes) -> bool {
        if self.behind.load(Ordering::Acquire) + b.len() > MAX_TEE_BYTES {
            tracing::warn!(proxy = %self.name, max = MAX_TEE_BYTES, "The tee fell behind: this stream is no longer observed.");
            return false;
        }
        self.behind.fetch_add(b.len(), Ordering::AcqRel);
        self.tx.send(b.clone()).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_not_forwarded() {
        let mut h = HeaderMap::new();
        for (k, v) in [("connection", "close"), ("content-type", "application/json"), ("host", "x"), ("accept", "a")] {
            h.append(HeaderName::from_static(k), v.parse().unwrap());
        }
        let out = end_to_end(&h);
        let names: Vec<&str> = out.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "accept"]);
    }
}
