//! The collector's HTTP bindings: `POST /events` (emit), `GET /events` and
//! `/.well-known/aep` (discovery), `GET /stream` (SSE), and the `/socket` upgrade.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use aep_schemas::filter::Filter;
use aep_schemas::{AEP_VERSION, Capture};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Query, State, WebSocketUpgrade};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::BytesMut;
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    Backlog, Bound, Collector, Ctx, Delivery, From, Parsed, Position, Replay, parse_from, parse_sse_id, sse_id,
};
use crate::pipeline::{Pipeline, Stamped};
use aep_receivers::access::Principal;

/// The collector routes.
pub fn router(collector: Arc<Collector>, pipeline: Pipeline) -> Router {
    let max_body = collector.cfg.max_body;
    Router::new()
        .route("/events", get(discovery).post(post_events))
        .route("/.well-known/aep", get(discovery))
        .route("/stream", get(stream))
        .route("/socket", get(socket))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(Ctx { collector, pipeline })
}

fn error(status: StatusCode, code: &str, detail: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": code, "detail": detail.into() }))).into_response()
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    aep_receivers::hooks::bearer(headers)
}

/// Whom the request's token names; 401 without credentials, 403 with wrong ones
/// (AEP-0003 §3.2, §8.1).
#[allow(clippy::result_large_err)] // the error is the response itself, built once per refusal
fn check_auth(c: &Collector, presented: Option<&str>) -> Result<Principal, Response> {
    if let Some(p) = c.principal(presented) {
        return Ok(p);
    }
    Err(match presented {
        None => error(StatusCode::UNAUTHORIZED, "unauthorized", "a bearer token is required"),
        Some(_) => error(StatusCode::FORBIDDEN, "forbidden", "the bearer token is not valid here"),
    })
}

async fn discovery(State(ctx): State<Ctx>) -> Response {
    axum::Json(ctx.collector.discovery()).into_response()
}

/// `true` when an `AEP-Version` value names a major version we speak.
fn version_ok(v: &str) -> bool {
    // 0.x versions are each their own major (pre-1.0 semantics): compare major.minor.
    let mut parts = v.trim().split('.');
    let major_minor = (parts.next(), parts.next());
    AEP_VERSION.split_once('.').is_some_and(|(ma, mi)| major_minor == (Some(ma), Some(mi)))
}

async fn post_events(
    State(ctx): State<Ctx>,
    headers: HeaderMap,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let c = &ctx.collector;
    let who = match check_auth(c, bearer(&headers)) {
        Ok(p) => p,
        Err(r) => {
            c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "unauthorized")]);
            return r;
        }
    };
    if !who.emit {
        c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "unauthorized")]);
        return error(StatusCode::FORBIDDEN, "unauthorized", format!("{} may not emit events here", who.name));
    }
    let body = match body {
        Ok(b) => b,
        // AEP-0003 §3.2 rule 3: 413 for an oversize body, said in the error shape.
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "too_large")]);
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload-too-large",
                format!("the body exceeds {} bytes", c.cfg.max_body),
            );
        }
        Err(e) => return error(e.status(), "invalid-event", e.body_text()),
    };
    // AEP-0003 §3.2 rule 2: AEP-Version is required; unsupported -> 426 with our versions.
    let version = headers.get("aep-version").and_then(|v| v.to_str().ok());
    if !version.is_some_and(version_ok) {
        c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "version")]);
        let detail = match version {
            None => "the AEP-Version header is required".to_owned(),
            Some(v) => format!("AEP-Version {v} is not supported"),
        };
        return (StatusCode::UPGRADE_REQUIRED, axum::Json(json!({ "versions": [AEP_VERSION], "detail": detail })))
            .into_response();
    }
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    // (line index, parsed value, raw bytes) per event; the index names the failing line.
    let mut items: Vec<(usize, Parsed, &[u8])> = Vec::new();
    let batch = match essence.as_str() {
        // Repeated keys are refused at any depth (aep_schemas::json::from_slice_strict).
        "application/json" => match aep_schemas::json::from_slice_strict(&body) {
            Ok(v) => {
                items.push((0, Parsed::Value(v), &body[..]));
                false
            }
            Err(e) => return bad(c, format!("body is not JSON: {e}"), None),
        },
        "application/x-ndjson" | "application/jsonl" => {
            // Each line is read straight into an Event (no intermediate map). A body that is
            // UTF-8 throughout is checked once and parsed as text (no per-string UTF-8
            // check); any other goes byte-wise, failing as before.
            let parsed = match std::str::from_utf8(&body) {
                Ok(text) => ndjson(text.split('\n').map(|l| (l.as_bytes(), l)), |l| {
                    aep_schemas::event::event_from_str_strict(l).map(Parsed::Event)
                }),
                Err(_) => ndjson(body.split(|b| *b == b'\n').map(|l| (l, l)), |l| {
                    aep_schemas::event::event_from_slice_strict(l).map(Parsed::Event)
                }),
            };
            match parsed {
                Ok(parsed) => items = parsed,
                Err((i, e)) => return bad(c, format!("line {i} is not JSON: {e}"), Some(i)),
            }
            true
        }
        _ => {
            c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "content_type")]);
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported-media-type",
                format!("Content-Type {ct:?}: use application/json (one event) or application/x-ndjson (a batch)"),
            );
        }
    };
    // AEP-0003 §3.2 rule 3: validate the whole batch first; it is rejected whole, naming
    // the first failing line, and nothing of it is ingested.
    let mut received = super::Received::with_capacity(items.len(), body.len());
    for (i, v, raw) in items {
        let line = batch.then_some(i);
        let at = || if batch { format!("line {i}: ") } else { String::new() };
        // The value moves into the Event; the bytes it arrived as are kept for relaying.
        match received.push(v, raw) {
            Ok(ev) if ev.r#type.starts_with("control.") && !is_ack(&ev.r#type) => {
                // Commands never flow on HTTP emit (AEP-0004 §4.1: authenticated duplex only).
                return bad(
                    c,
                    format!("{}control commands flow only over the authenticated WebSocket binding (/socket)", at()),
                    line,
                );
            }
            Ok(_) => {}
            Err(viol) => return bad(c, format!("{}{}: {}", at(), viol.rule, viol.message), line),
        }
    }
    // A token limited to one tenant writes to its tenant's sessions only; the batch is
    // refused whole, like an invalid one (AEP-0004 §4.2 item 3).
    if who.tenant.is_some() {
        for (i, (ev, _, _)) in received.events.iter().enumerate() {
            if let Err(why) = c.may_emit(&who, ev) {
                c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "unauthorized")]);
                let detail = if batch { format!("line {i}: {why}") } else { why };
                return error(StatusCode::FORBIDDEN, "unauthorized", detail);
            }
        }
    }
    let n = received.len();
    if n > 0 && ctx.pipeline.submit_received("collector", received.events, received.buf).await.is_err() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "the bridge is shutting down");
    }
    (StatusCode::ACCEPTED, axum::Json(json!({ "accepted": n }))).into_response()
}

/// One parsed item per non-blank NDJSON line, with its index and bytes; the first
/// line that is not JSON stops it.
#[allow(clippy::type_complexity)] // (index, value, bytes) rows, as `post_events` keeps them
fn ndjson<'a, L, T>(
    lines: impl Iterator<Item = (&'a [u8], L)>,
    parse: impl Fn(L) -> serde_json::Result<T>,
) -> Result<Vec<(usize, T, &'a [u8])>, (usize, serde_json::Error)> {
    let mut items = Vec::new();
    for (i, (raw, line)) in lines.enumerate() {
        if raw.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match parse(line) {
            Ok(v) => items.push((i, v, raw)),
            Err(e) => return Err((i, e)),
        }
    }
    Ok(items)
}

fn is_ack(ty: &str) -> bool {
    matches!(ty, "control.accepted" | "control.rejected")
}

fn bad(c: &Collector, detail: String, line: Option<usize>) -> Response {
    c.metrics.rejected.inc(&[("receiver", "collector"), ("reason", "invalid_event")]);
    let mut body = json!({ "error": "invalid-event", "detail": detail });
    if let Some(l) = line {
        body["line"] = json!(l);
    }
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

/// The query of `GET /stream` (AEP-0003 §3.3).
#[derive(Debug, Default, Deserialize)]
pub struct StreamQuery {
    /// An attr-match filter, JSON.
    pub filter: Option<String>,
    /// The capture ceiling.
    pub capture: Option<String>,
    /// `all` or a JSON array of positions.
    pub from: Option<String>,
    /// `0` for the replay alone.
    pub live: Option<String>,
    /// The token, for EventSource clients that cannot set a header.
    pub access_token: Option<String>,
}

async fn stream(State(ctx): State<Ctx>, Query(q): Query<StreamQuery>, headers: HeaderMap) -> Response {
    // The token may ride the query for EventSource clients (AEP-0003 §8.1); never logged.
    let presented = bearer(&headers).or(q.access_token.as_deref());
    let who = match check_auth(&ctx.collector, presented) {
        Ok(p) => p,
        Err(r) => return r,
    };
    if !who.view {
        return error(StatusCode::FORBIDDEN, "unauthorized", format!("{} may not read the stream", who.name));
    }
    sse_stream(ctx.collector, q, who.tenant, &headers)
}

/// The SSE stream for a caller already authenticated by its binding: `GET /stream`, and the
/// web view's stream behind its session cookie. Replay, live delivery and resume
/// (`from`, else `Last-Event-ID`) as AEP-0003 §3.3 and §5 say.
pub fn sse_stream(c: Arc<Collector>, q: StreamQuery, scope: super::Scope, headers: &HeaderMap) -> Response {
    let filter = match q.filter.as_deref() {
        None | Some("") => Filter::all(),
        Some(f) => match serde_json::from_str::<Value>(f).map_err(|e| ("invalid-filter", e.to_string())).and_then(|v| {
            super::check_filter_size(&v).map_err(|e| ("limit-exceeded", e))?;
            Filter::parse(&v).map_err(|e| ("invalid-filter", e.to_string()))
        }) {
            Ok(f) => f,
            Err((code, e)) => return error(StatusCode::BAD_REQUEST, code, e),
        },
    };
    let ceiling = match q.capture.as_deref() {
        None | Some("") => None,
        Some(s) => match s.parse::<Capture>() {
            Ok(c) => Some(c),
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid-filter", e.to_string()),
        },
    };
    // `from` takes precedence over Last-Event-ID (AEP-0003 §3.3 rule 3).
    let from = match q.from.as_deref() {
        Some(f) => {
            let v = if f == "all" {
                Value::String("all".into())
            } else {
                match serde_json::from_str(f) {
                    Ok(v) => v,
                    Err(e) => {
                        return error(StatusCode::BAD_REQUEST, "invalid-filter", format!("`from` is not JSON: {e}"));
                    }
                }
            };
            match parse_from(&v, c.max_from()) {
                Ok(f) => Some(f),
                Err((code, d)) => return error(StatusCode::BAD_REQUEST, code, d),
            }
        }
        None => headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_sse_id)
            .map(|(s, p)| From::Positions(vec![(s, p)])),
    };
    let live = match q.live.as_deref() {
        None | Some("1" | "true") => true,
        Some("0" | "false") => false,
        Some(other) => {
            return error(StatusCode::BAD_REQUEST, "invalid-filter", format!("`live` must be 0 or 1, got {other:?}"));
        }
    };
    let heartbeat = Duration::from_secs(c.cfg.heartbeat_secs.max(1));
    let backlog = Backlog::new();
    if !live {
        // `live=0`: the replay alone, then the stream ends (AEP-0003 §5).
        let replay = c.replay(filter, scope, ceiling, from);
        return sse_response(SseState::new(c, replay, None, backlog, heartbeat));
    }
    let (tx, rx) = mpsc::channel(c.cfg.subscriber_queue.max(1));
    let (id, replay) = c.subscribe(Arc::from(""), filter, scope, ceiling, from, tx, backlog.clone());
    let live = Live { rx, _guard: Unsubscribe { c: c.clone(), id }, closing: c.closing.clone() };
    sse_response(SseState::new(c, replay, Some(live), backlog, heartbeat))
}

/// Most bytes one body chunk gathers from frames that are already waiting; an event whose
/// line is this long or longer goes out as its own shared line instead, never copied.
const SSE_CHUNK: usize = 64 * 1024;

/// The SSE keep-alive comment, sent after `heartbeat` without anything else.
const SSE_PING: &[u8] = b": ping\n\n";

/// One SSE response's source: the replay owed, then (live) the subscriber queue.
struct SseState {
    c: Arc<Collector>,
    replay: Option<Replay>,
    live: Option<Live>,
    backlog: Arc<Backlog>,
    heartbeat: Duration,
    /// Chunks ready to go out, in order.
    out: VecDeque<Bytes>,
}

/// A live subscription's side of an SSE response.
struct Live {
    rx: mpsc::Receiver<Delivery>,
    _guard: Unsubscribe,
    closing: CancellationToken,
}

impl SseState {
    fn new(c: Arc<Collector>, replay: Replay, live: Option<Live>, backlog: Arc<Backlog>, heartbeat: Duration) -> Self {
        Self { c, replay: Some(replay), live, backlog, heartbeat, out: VecDeque::new() }
    }

    /// Queues the next chunks; `false` when the stream is over.
    async fn fill(&mut self) -> bool {
        if let Some(r) = self.replay.as_mut() {
            let c = &self.c;
            match r.next(c) {
                Some(d) => {
                    frames(d, r.pending(), || r.next(c), &mut self.out);
                    return true;
                }
                None => self.replay = None,
            }
        }
        let Some(live) = self.live.as_mut() else { return false };
        let backlog = &self.backlog;
        let first = tokio::select! {
            d = live.rx.recv() => match d {
                Some(d) => d,
                // A subscriber cut for falling behind on notice+ events has its sender dropped:
                // what it queued was delivered, and the stream ends saying so (AEP-0003 §8.4).
                None => {
                    let bound = backlog.cut_by();
                    self.live = None;
                    self.out.extend(bound.map(|b| overflow(&self.c, b)));
                    return bound.is_some();
                }
            },
            _ = live.closing.cancelled() => return false,
            // The heartbeat follows `heartbeat` of silence (AEP-0003 §3.3).
            _ = tokio::time::sleep(self.heartbeat) => {
                self.out.push_back(Bytes::from_static(SSE_PING));
                return true;
            }
        };
        backlog.taken(&first);
        let rx = &mut live.rx;
        frames(first, rx.len(), || rx.try_recv().ok().inspect(|d| backlog.taken(d)), &mut self.out);
        true
    }
}

/// The comment that ends a stream cut for falling behind.
fn overflow(c: &Collector, bound: Bound) -> Bytes {
    let (limit, what) = match bound {
        Bound::Events => (c.cfg.subscriber_queue, "events"),
        Bound::Bytes => (c.cfg.subscriber_bytes, "bytes"),
    };
    Bytes::from(format!(
        ": overflow: this consumer fell behind on notice+ events (queue bound {limit} {what}); resume from the last id\n\n"
    ))
}

/// Queues `first` and whatever `more` yields at once as chunks of `out`: small frames are
/// gathered into one chunk up to [`SSE_CHUNK`] bytes (a lone one passed on as is, uncopied;
/// `queued`, how many wait, sizes the chunk), and a large event goes out as its shared line
/// between a short head and tail, so N consumers of it, stalled or not, hold no copy of it.
fn frames(first: Delivery, queued: usize, mut more: impl FnMut() -> Option<Delivery>, out: &mut VecDeque<Bytes>) {
    if let Some(pieces) = large(&first) {
        out.extend(pieces);
        return;
    }
    let first = sse_frame(first);
    let Some(mut d) = (first.len() < SSE_CHUNK).then(&mut more).flatten() else {
        out.push_back(first);
        return;
    };
    // Frames of one stream are alike in size: room for what waits, plus slack.
    let want = first.len().saturating_mul(queued.saturating_add(2)).saturating_add(first.len() / 2);
    let mut buf = BytesMut::with_capacity(want.min(SSE_CHUNK + first.len()));
    buf.extend_from_slice(&first);
    loop {
        if let Some(pieces) = large(&d) {
            out.push_back(buf.freeze());
            out.extend(pieces);
            return;
        }
        push_frame(&mut buf, &d);
        if buf.len() >= SSE_CHUNK {
            break;
        }
        match more() {
            Some(next) => d = next,
            None => break,
        }
    }
    out.push_back(buf.freeze());
}

/// Appends one delivery's frame, copying an event's shared frame without taking a handle.
fn push_frame(buf: &mut BytesMut, d: &Delivery) {
    match d {
        Delivery::Event { event, frame, .. } => buf.extend_from_slice(frame.get_or_init(|| encode_event(event))),
        Delivery::ReplayExhausted { session, earliest, .. } => {
            buf.extend_from_slice(marker(session, *earliest).as_bytes())
        }
    }
}

/// An event of [`SSE_CHUNK`] bytes or more as its frame's pieces: `data: `, the line itself
/// (shared), and the rest of the frame. `None` for anything else, and for a line with a line
/// break inside (never the case for a compact JSON line), which [`encode_event`] splits.
fn large(d: &Delivery) -> Option<[Bytes; 3]> {
    let Delivery::Event { event, .. } = d else { return None };
    let line = event.line.strip_suffix(b"\n").unwrap_or(&event.line);
    if line.len() < SSE_CHUNK || line.contains(&b'\n') || line.contains(&b'\r') {
        return None;
    }
    let mut tail = vec![b'\n'];
    encode_tail(event, &mut tail);
    Some([Bytes::from_static(b"data: "), event.line.slice(..line.len()), Bytes::from(tail)])
}

/// The `text/event-stream` response, written as raw frames (AEP-0003 §3.3): each event's
/// frame is encoded once and shared by every subscriber, frames already queued go out
/// together in one chunk, and a large event's line goes out as it is held. A subscriber cut
/// for overflow (AEP-0003 §8.4) has its sender dropped: the queue drains and the stream
/// then ends with an `: overflow` comment, so the consumer reconnects and resumes exactly.
fn sse_response(state: SseState) -> Response {
    let chunks = stream::unfold(state, |mut st| async move {
        loop {
            if let Some(b) = st.out.pop_front() {
                return Some((Ok::<_, Infallible>(b), st));
            }
            if !st.fill().await {
                return None;
            }
        }
    });
    ([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(chunks))
        .into_response()
}

struct Unsubscribe {
    c: Arc<Collector>,
    id: u64,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        self.c.unsubscribe(self.id);
    }
}

/// `true` for a value an SSE field can carry (no line breaks; `id:` also no NUL).
fn sse_safe(s: &str) -> bool {
    !s.contains(['\r', '\n', '\0'])
}

/// One delivery's SSE frame; an event's is encoded once and shared across subscribers.
fn sse_frame(d: Delivery) -> Bytes {
    match d {
        Delivery::Event { event, frame, .. } => frame.get_or_init(|| encode_event(&event)).clone(),
        Delivery::ReplayExhausted { session, earliest, .. } => Bytes::from(marker(&session, earliest)),
    }
}

/// AEP-0003 §3.3 rule 3: the comment `: replay-exhausted {session} {epoch}:{seq}`.
fn marker(session: &str, earliest: Position) -> String {
    let session = session.replace(['\r', '\n'], "\u{fffd}");
    format!(": replay-exhausted {session} {}:{}\n\n", earliest.epoch, earliest.seq)
}

/// `data: {line}`, `event: {type}`, `id: {session}:{epoch}:{seq}` and the blank line.
fn encode_event(s: &Stamped) -> Bytes {
    // AEP-0003 §3.3 rule 2: `event:` the type, `data:` the event on one line, `id:`
    // `{session}:{epoch}:{seq}` for session-scoped events only.
    let line = std::str::from_utf8(&s.line).unwrap_or("").trim_end_matches('\n').as_bytes();
    let mut b = Vec::with_capacity(line.len() + s.event.r#type.len() + 64);
    if !line.is_empty() {
        // A line break inside the data would start a new `data:` field (never the case for
        // a compact JSON line, kept for safety).
        b.extend_from_slice(b"data: ");
        let mut from = 0;
        for (i, c) in line.iter().enumerate() {
            if matches!(c, b'\r' | b'\n') {
                b.extend_from_slice(&line[from..=i]);
                b.extend_from_slice(b"data: ");
                from = i + 1;
            }
        }
        b.extend_from_slice(&line[from..]);
        b.push(b'\n');
    }
    encode_tail(s, &mut b);
    Bytes::from(b)
}

/// The fields after `data:` (`event:` and `id:`) and the blank line that ends the frame.
fn encode_tail(s: &Stamped, b: &mut Vec<u8>) {
    // A session an SSE field cannot carry gets no `id:` rather than a broken stream.
    let id = sse_id(&s.event).filter(|id| sse_safe(id));
    if sse_safe(&s.event.r#type) {
        b.extend_from_slice(b"event: ");
        b.extend_from_slice(s.event.r#type.as_bytes());
        b.push(b'\n');
    }
    if let Some(id) = id {
        b.extend_from_slice(b"id: ");
        b.extend_from_slice(id.as_bytes());
        b.push(b'\n');
    }
    b.push(b'\n');
}

async fn socket(
    State(ctx): State<Ctx>,
    Query(q): Query<StreamQuery>,
    headers: HeaderMap,
    ws: WebSocketUpgrade,
) -> Response {
    let presented = bearer(&headers).or(q.access_token.as_deref());
    let who = match check_auth(&ctx.collector, presented) {
        Ok(p) => p,
        Err(r) => return r,
    };
    // One message is one event or frame: bounded like one POST body (not tungstenite's
    // 64 MiB default, which an idle sender could hold per connection).
    let max = ctx.collector.cfg.max_body;
    ws.max_message_size(max).max_frame_size(max).on_upgrade(move |socket| super::ws::run_socket(socket, ctx, who))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamped(line: &str) -> Stamped {
        let v: Value = serde_json::from_str(line).unwrap();
        super::super::validate_received(v, line.as_bytes()).unwrap()
    }

    #[test]
    fn sse_frames_keep_the_wire_format() {
        let line = r#"{"aep":"0.1","id":"01J00000000000000000000000","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s:1","agent":"a","session":"s:1","seq":4,"epoch":2}"#;
        let ev = Arc::new(stamped(line));
        let frame = super::super::SharedFrame::default();
        let d = || Delivery::Event { sub: Arc::from(""), event: ev.clone(), frame: frame.clone() };
        let want = format!("data: {line}\nevent: run.started\nid: s:1:2:4\n\n");
        assert_eq!(sse_frame(d()), want.as_bytes());
        // Shared: the second delivery of the same event reuses the first one's bytes.
        assert_eq!(sse_frame(d()).as_ptr(), sse_frame(d()).as_ptr());
        let agent = stamped(
            r#"{"aep":"0.1","id":"01J00000000000000000000001","type":"agent.heartbeat","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a","agent":"a"}"#,
        );
        let f = encode_event(&agent);
        assert!(f.ends_with(b"\nevent: agent.heartbeat\n\n"), "no id for an agent-scoped event: {f:?}");
        let marker = Delivery::ReplayExhausted {
            sub: Arc::from(""),
            session: "a\nb".into(),
            earliest: Position { epoch: 1, seq: 9 },
        };
        assert_eq!(sse_frame(marker), ": replay-exhausted a\u{fffd}b 1:9\n\n".as_bytes());
    }

    #[tokio::test]
    async fn sse_frames_match_axums_own_encoding() {
        use axum::response::sse::{Event as SseEvent, Sse};
        let line = r#"{"aep":"0.1","id":"01J00000000000000000000000","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":3}"#;
        let ev = Arc::new(stamped(line));
        let axum_event = SseEvent::default().data(line).event("run.started").id("s:0:3");
        let comment = SseEvent::default().comment("replay-exhausted s 0:1");
        let events = stream::iter([axum_event, comment].map(Ok::<_, Infallible>));
        let body = axum::body::to_bytes(Sse::new(events).into_response().into_body(), usize::MAX).await.unwrap();
        let ours = Delivery::Event { sub: Arc::from(""), event: ev, frame: Default::default() };
        let marker = Delivery::ReplayExhausted {
            sub: Arc::from(""),
            session: "s".into(),
            earliest: Position { epoch: 0, seq: 1 },
        };
        assert_eq!(body, [sse_frame(ours), sse_frame(marker)].concat());
    }

    #[test]
    fn queued_frames_go_out_together() {
        let line = r#"{"aep":"0.1","id":"01J00000000000000000000000","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0}"#;
        let ev = Arc::new(stamped(line));
        let d = || Delivery::Event { sub: Arc::from(""), event: ev.clone(), frame: Default::default() };
        let one = sse_frame(d());
        let mut left = 2;
        let mut out = VecDeque::new();
        frames(
            d(),
            2,
            || {
                (left > 0).then(|| {
                    left -= 1;
                    d()
                })
            },
            &mut out,
        );
        assert_eq!(Vec::from(out), [[&one[..], &one[..], &one[..]].concat()]);
        let frame = super::super::SharedFrame::default();
        let shared = || Delivery::Event { sub: Arc::from(""), event: ev.clone(), frame: frame.clone() };
        let one = sse_frame(shared());
        let mut out = VecDeque::new();
        frames(shared(), 0, || None, &mut out);
        assert_eq!(out[0].as_ptr(), one.as_ptr(), "a lone frame goes out as is, uncopied");
    }

    /// A large event's frame is its held line between a head and a tail: the same bytes as
    /// the encoded frame, the line shared rather than copied; frames gathered before it go
    /// out first, and nothing after it joins the chunk.
    #[test]
    fn a_large_event_goes_out_as_its_shared_line() {
        let small = Arc::new(stamped(
            r#"{"aep":"0.1","id":"01J00000000000000000000000","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0}"#,
        ));
        let pad = "x".repeat(SSE_CHUNK);
        let big = Arc::new(stamped(&format!(
            r#"{{"aep":"0.1","id":"01J00000000000000000000001","type":"progress.status","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":1,"data":{{"phase":"{pad}"}}}}"#
        )));
        let d = |e: &Arc<Stamped>| Delivery::Event { sub: Arc::from(""), event: e.clone(), frame: Default::default() };
        let mut queued = vec![d(&small), d(&big)].into_iter();
        let mut out = VecDeque::new();
        frames(d(&small), 2, || queued.next(), &mut out);
        assert_eq!(out.len(), 4, "the small frames, then head, line, tail");
        assert_eq!(out[0], [sse_frame(d(&small)), sse_frame(d(&small))].concat());
        assert_eq!(out.iter().skip(1).flat_map(|b| b.to_vec()).collect::<Vec<u8>>(), encode_event(&big));
        assert_eq!(out[2].as_ptr(), big.line.as_ptr(), "the line as held, not a copy");
    }

    #[test]
    fn ndjson_text_and_bytes_agree() {
        let body = "{\"a\":1}\n  \n{\"b\":\"é\"}\r\n{oops\n";
        let text = ndjson(body.split('\n').map(|l| (l.as_bytes(), l)), serde_json::from_str::<Value>);
        let bytes = ndjson(body.as_bytes().split(|b| *b == b'\n').map(|l| (l, l)), serde_json::from_slice::<Value>);
        let (Err((i, a)), Err((j, b))) = (text, bytes) else { panic!("line 3 is not JSON") };
        assert_eq!((i, a.to_string()), (j, b.to_string()));
        assert_eq!(i, 3);
        let ok = "{\"a\":1}\n\n{\"b\":2}\n";
        let rows = ndjson(ok.split('\n').map(|l| (l.as_bytes(), l)), serde_json::from_str::<Value>).unwrap();
        assert_eq!(rows.iter().map(|r| (r.0, r.2)).collect::<Vec<_>>(), [(0, &b"{\"a\":1}"[..]), (2, b"{\"b\":2}")]);
    }

    #[test]
    fn version_gate() {
        assert!(version_ok("0.1"));
        assert!(version_ok("0.1.3"));
        assert!(!version_ok("0.2"));
        assert!(!version_ok("1.0"));
        assert!(!version_ok("junk"));
    }
}
