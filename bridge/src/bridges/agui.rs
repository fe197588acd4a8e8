//! The AG-UI tee proxy (`kind = "agui-proxy"`; design record `bridge-agui-design.md`,
//! AEP-0002 Annex A.14): the UI points at `listen` instead of its agent; every request is
//! forwarded verbatim to `url` (the path and query appended to it, `/` being `url` itself;
//! the body byte for byte, hop-by-hop headers dropped, and `Accept-Encoding` too, so the
//! stream comes uncompressed and can be observed), and the agent's answer is streamed back
//! as it arrives, unchanged and unbuffered. One POST is one run stream.
//!
//! The tee is off the client's path: each chunk of a `2xx text/event-stream` answer is handed
//! to a separate task (never awaited by the forwarding) that parses it with the bounded
//! [`super::sse`] parser, maps each AG-UI event by the pure
//! `aep_adapters::protocols::agui::Stream` (`threadId` -> session, `runId` -> run, the
//! tool-name join) and submits the drafts under the bridge's agent identity (`agui` unless
//! `agent` says otherwise). Fail-open: a frame over `max_frame_bytes` is dropped and counted,
//! an event that is not JSON is skipped, a tee that falls more than [`MAX_TEE_BYTES`] behind
//! (or a closed pipeline) stops observing that stream, and beyond [`MAX_TEES`] concurrent
//! streams new ones are forwarded unobserved: the client's stream never waits on, nor breaks
//! with, the bridge's side. A request body over [`MAX_BODY`] is refused with 413; an
//! unreachable agent is a 502 naming it; an agent that breaks mid-stream breaks the client's
//! stream the same way (nothing is synthesized for the run it left open).
//!
//! A read-only channel (the design record): no `attention.*` with a respond path, no
//! command accepted; `control = true` is refused by `config validate`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aep_adapters::protocols::Options;
use aep_adapters::protocols::agui::Stream as RunStream;
use aep_adapters::{EventDraft, MapContext};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::sse::{Frame, Parser};
use super::{BridgeConfig, Deps};
use crate::pipeline::Pipeline;
use crate::transport::{HttpClient, HttpOptions};

/// Largest request body forwarded (a RunAgentInput carries the conversation so far).
pub const MAX_BODY: usize = 16 << 20;
/// Bytes a stream's tee may hold unprocessed before it stops observing that stream.
pub const MAX_TEE_BYTES: usize = 8 << 20;
/// Streams observed at once; more are forwarded unobserved.
pub const MAX_TEES: usize = 256;
/// The longest SSE line accepted (a frame's data may span several lines up to the frame cap).
const MAX_LINE: usize = 1 << 20;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The section is incomplete (`config validate` reports it too).
    #[error("bridges.{0}: listen and url are required")]
    Incomplete(String),
    /// The HTTP client could not be built.
    #[error("bridges.{0}: {1}")]
    Client(String, crate::transport::http::ClientError),
    /// The listen address could not be bound.
    #[error("bridges.{0}: cannot listen on {1}: {2}")]
    Bind(String, SocketAddr, std::io::Error),
}

/// Starts the proxy of `[bridges.<name>]` (bound before this returns); it serves until
/// `shutdown`. Returns the task and the bound address.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: CancellationToken,
) -> Result<(tokio::task::JoinHandle<()>, SocketAddr), StartError> {
    let (Some(listen), Some(url)) = (cfg.listen, &cfg.url) else { return Err(StartError::Incomplete(name.into())) };
    let opts = HttpOptions {
        timeout: Duration::from_millis(cfg.timeout_ms),
        headers: cfg.headers.clone(),
        tls: cfg.tls.clone(),
    };
    let client = HttpClient::streaming(&opts).map_err(|e| StartError::Client(name.into(), e))?;
    let bind = |e| StartError::Bind(name.into(), listen, e);
    let std = std::net::TcpListener::bind(listen).map_err(bind)?;
    std.set_nonblocking(true).map_err(bind)?;
    let listener = tokio::net::TcpListener::from_std(std).map_err(bind)?;
    let at = listener.local_addr().map_err(bind)?;
    let proxy = Arc::new(Proxy {
        name: name.to_owned(),
        agent: cfg.agent(),
        upstream: url.as_str().to_owned(),
        client,
        pipeline: deps.pipeline,
        cx: deps.cx,
        opts: Options { deltas: cfg.deltas },
        max_frame: cfg.max_frame_bytes,
        tees: Arc::new(Semaphore::new(MAX_TEES)),
    });
    tracing::info!(bridge = name, listen = %at, upstream = %proxy.upstream, agent = %proxy.agent, "AG-UI tee proxy listening.");
    let app = Router::new().fallback(forward).with_state(proxy);
    let (limits, on_refused) = deps.listen.clone();
    let task = tokio::spawn(aep_receivers::listener::serve(
        listener,
        app,
        limits,
        aep_receivers::listener::Protocol::Http,
        on_refused,
        shutdown,
    ));
    Ok((task, at))
}

struct Proxy {
    name: String,
    agent: String,
    upstream: String,
    client: HttpClient,
    pipeline: Pipeline,
    cx: MapContext,
    opts: Options,
    max_frame: usize,
    tees: Arc<Semaphore>,
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
    for (k, v) in headers {
        if !hop_by_hop(k) {
            out.append(k.clone(), v.clone());
        }
    }
    out
}

impl Proxy {
    /// The agent URL a request path goes to: `/` is `url` itself, any other path is appended.
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
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("aep-bridge agui-proxy: the request body could not be read within {MAX_BODY} bytes: {e}\n"),
            );
        }
    };
    let url = p.target(parts.uri.path(), parts.uri.query());
    let mut headers = end_to_end(&parts.headers);
    // The stream is observed: asked for as it is (identity), never compressed past the tee.
    headers.remove("accept-encoding");
    let up = match p.client.forward(parts.method.as_str(), &url, headers, body).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(bridge = %p.name, error = %e, "AG-UI agent unreachable.");
            return refuse(StatusCode::BAD_GATEWAY, format!("aep-bridge agui-proxy: the agent is unreachable: {e}\n"));
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
            // The agent broke mid-stream: so does the client's stream.
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
            tracing::warn!(bridge = %p.name, max = MAX_TEES, "Too many AG-UI streams at once: this one is forwarded unobserved.");
            return None;
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let behind = Arc::new(AtomicUsize::new(0));
        let task = TeeTask {
            name: p.name.clone(),
            agent: p.agent.clone(),
            pipeline: p.pipeline.clone(),
            cx: p.cx.clone(),
            run: RunStream::new(p.opts),
            parser: Parser::new(MAX_LINE.min(p.max_frame.max(1024)), p.max_frame),
            behind: behind.clone(),
            counts: Counts::default(),
        };
        tokio::spawn(async move {
            task.run(rx).await;
            drop(permit);
        });
        Some(Self { tx, behind, name: p.name.clone() })
    }

    /// Hands a chunk to the tee; `false` when it stopped observing (too far behind, or gone).
    fn feed(&mut self, b: &Bytes) -> bool {
        if self.behind.load(Ordering::Acquire) + b.len() > MAX_TEE_BYTES {
            tracing::warn!(bridge = %self.name, max = MAX_TEE_BYTES, "The AG-UI tee fell behind: this stream is no longer observed.");
            return false;
        }
        self.behind.fetch_add(b.len(), Ordering::AcqRel);
        self.tx.send(b.clone()).is_ok()
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    events: u64,
    unparsable: u64,
    unscoped: u64,
}

/// The observing side of one stream.
struct TeeTask {
    name: String,
    agent: String,
    pipeline: Pipeline,
    cx: MapContext,
    run: RunStream,
    parser: Parser,
    behind: Arc<AtomicUsize>,
    counts: Counts,
}

impl TeeTask {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Bytes>) {
        let mut frames: Vec<Frame> = Vec::new();
        while let Some(b) = rx.recv().await {
            self.behind.fetch_sub(b.len(), Ordering::AcqRel);
            self.parser.push(&b, &mut frames);
            for f in std::mem::take(&mut frames) {
                if !self.frame(&f).await {
                    return;
                }
            }
        }
        let c = self.counts;
        tracing::debug!(bridge = %self.name, events = c.events, unparsable = c.unparsable, unscoped = c.unscoped,
            oversized = self.parser.dropped(), "AG-UI stream ended.");
    }

    /// Maps and submits one frame; `false` once the pipeline is closed.
    async fn frame(&mut self, f: &Frame) -> bool {
        let ev: Value = match serde_json::from_str(&f.data) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.counts.unparsable += 1;
                return true;
            }
        };
        self.counts.events += 1;
        let mut drafts: Vec<EventDraft> = self.run.map(&ev, &self.cx);
        let before = drafts.len();
        // A session-scoped event before `RUN_STARTED` named the thread has no session
        // (AEP-0001 §5.2): skipped, never guessed.
        drafts.retain(|d| d.session.is_some() || aep_schemas::event::is_agent_scoped(&d.r#type));
        self.counts.unscoped += (before - drafts.len()) as u64;
        if drafts.is_empty() {
            return true;
        }
        self.pipeline.submit_drafts("agui", self.agent.clone(), drafts).await.is_ok()
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
