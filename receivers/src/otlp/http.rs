//! OTLP/HTTP: `POST /v1/logs`, `/v1/traces`, `/v1/metrics` with protobuf or JSON bodies
//! (OTLP specification, "OTLP/HTTP"). The response uses the request's content type.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bytes::Bytes;
use http_body_util::BodyExt;
use prost::Message;
use serde_json::json;

use super::body::{self, BodyPool};
use super::decode::{self, DecodeError, Encoding, Format};
use super::signal::{Export, Logs, Metrics, Traces, partial};
use super::status::{self, RpcStatus};
use super::{Accepted, Admitted, DEFAULT_MAX_REQUEST_BYTES, DecodeBudget, OtlpHandler, Refused};

/// OTLP/HTTP limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Largest body accepted on the wire (default 20 MiB, the collector's); larger is 413.
    pub max_request_bytes: usize,
    /// Largest body once decompressed (default 20 MiB); larger is 413. Decompression stops
    /// at this cap, so a compression bomb costs at most this much memory.
    pub max_decoded_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self { max_request_bytes: DEFAULT_MAX_REQUEST_BYTES, max_decoded_bytes: DEFAULT_MAX_REQUEST_BYTES }
    }
}

#[derive(Clone)]
struct AppState {
    handler: Arc<dyn OtlpHandler>,
    cfg: Arc<HttpConfig>,
    /// Body buffers reused from request to request.
    bodies: Arc<BodyPool>,
}

/// The OTLP/HTTP routes with the default limits (see [`router_with`]).
pub fn router(handler: Arc<dyn OtlpHandler>) -> Router {
    router_with(handler, HttpConfig::default())
}

/// The OTLP/HTTP routes: `POST /v1/logs`, `/v1/traces`, `/v1/metrics`. Mount it at the root
/// of the OTLP/HTTP listener (conventionally port 4318).
pub fn router_with(handler: Arc<dyn OtlpHandler>, cfg: HttpConfig) -> Router {
    let state = AppState { handler, cfg: Arc::new(cfg), bodies: Arc::default() };
    Router::new()
        .route(Logs::HTTP_PATH, post(export::<Logs>))
        .route(Traces::HTTP_PATH, post(export::<Traces>))
        .route(Metrics::HTTP_PATH, post(export::<Metrics>))
        // The limit is enforced in `read_body`, with an OTLP-shaped 413.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(state.clone(), count_refusals))
        .with_state(state)
}

/// Tells the handler of every request the receiver refused on its own (the 503s of a full
/// pipeline are the handler's answer, counted there; a 503 for want of decode budget is
/// `busy`).
async fn count_refusals(
    State(st): State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let resp = next.run(req).await;
    let reason = match resp.status() {
        StatusCode::UNAUTHORIZED => Some("unauthorized"),
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Some("content_type"),
        StatusCode::PAYLOAD_TOO_LARGE => Some("too_large"),
        StatusCode::BAD_REQUEST => Some("invalid"),
        _ => None,
    };
    if let Some(r) = reason {
        st.handler.refused(r);
    }
    resp
}

/// One OTLP/HTTP endpoint, the same for every signal: the token, the body read within the
/// limits and the decode budget, the handler's readiness, the decode, the handler's answer
/// in the request's format.
async fn export<E: Endpoint>(State(st): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    if let Some(r) = unauthorized(st.handler.as_ref(), &headers) {
        drain(body, st.cfg.max_request_bytes).await;
        return r;
    }
    let budget = st.handler.decode_budget().cloned();
    let (format, encoding, bytes, read) = match read_request(&st, &headers, body, budget.as_ref()).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    // Given back to the pool once the request is answered (reused if nothing holds it).
    let kept = bytes.clone();
    if let Err(r) = E::ready(st.handler.as_ref()) {
        return refused(format, r);
    }
    let wire = Wire { bytes, encoding, format, read, budget };
    let answer = match E::answer(&st, wire).await {
        Ok(answer) => answer,
        Err(e) => return decode_error(format, e),
    };
    st.bodies.put(kept);
    match answer {
        Ok(a) => success::<E>(format, a),
        Err(r) => refused(format, r),
    }
}

/// A body as read off the wire, with what its decode needs.
struct Wire {
    bytes: Bytes,
    encoding: Encoding,
    format: Format,
    /// Its share of the decode budget, taken when it was read.
    read: Option<Admitted>,
    budget: Option<DecodeBudget>,
}

/// What an OTLP/HTTP endpoint adds to its signal's [`Export`]: by default the body is
/// decoded into the request message and handed to [`Export::take`].
trait Endpoint: Export {
    /// Whether the handler takes a request now, asked before the body is decoded.
    fn ready(handler: &dyn OtlpHandler) -> Result<(), Refused> {
        let _ = handler;
        Ok(())
    }

    /// Decodes the body and hands it to the handler: the handler's answer, or why the body
    /// did not decode.
    fn answer(
        st: &AppState,
        wire: Wire,
    ) -> impl Future<Output = Result<Result<Accepted, Refused>, DecodeError>> + Send {
        decoded::<Self>(st, wire)
    }
}

/// [`Endpoint::answer`] by default: the request message decoded (its budget share held
/// until the handler has taken it), then [`Export::take`].
async fn decoded<E: Export>(st: &AppState, wire: Wire) -> Result<Result<Accepted, Refused>, DecodeError> {
    let (req, _admitted) = decode_body(wire, st.cfg.max_decoded_bytes, |b: Bytes, f| E::decode(&b, f)).await?;
    Ok(E::take(st.handler.as_ref(), req))
}

impl Endpoint for Traces {}

impl Endpoint for Metrics {}

/// Logs are refused before they are decoded when the pipeline is full (a full pipeline
/// costs a refused export its read and nothing more), and go to a handler that takes
/// neutral records on the thread that read them: they are built, mapped and dropped there,
/// never handed across. A large body is decoded and handed over on the blocking pool; any
/// other on this task, which awaits the handler.
impl Endpoint for Logs {
    fn ready(handler: &dyn OtlpHandler) -> Result<(), Refused> {
        handler.ready_for_logs()
    }

    async fn answer(st: &AppState, wire: Wire) -> Result<Result<Accepted, Refused>, DecodeError> {
        if !st.handler.wants_log_records() {
            return decoded::<Self>(st, wire).await;
        }
        let max = st.cfg.max_decoded_bytes;
        if on_blocking_pool(wire.bytes.len(), wire.encoding) {
            let handler = Arc::clone(&st.handler);
            let take = move |b: Bytes, f| decode_log_records(b, f).map(|records| handler.log_records_blocking(records));
            decode_body(wire, max, take).await.map(|(answer, _admitted)| answer)
        } else {
            let (records, _admitted) = decode_body(wire, max, decode_log_records).await?;
            Ok(st.handler.log_records_async(records).await)
        }
    }
}

/// The bearer token check, before the body is read: `Some` 401 with an OTLP `Status` body (in the
/// request's format when it names one) and `WWW-Authenticate` (RFC 6750 §3).
fn unauthorized(handler: &dyn OtlpHandler, headers: &HeaderMap) -> Option<Response> {
    if handler.authorized(crate::hooks::bearer(headers)) {
        return None;
    }
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let format = Format::from_content_type(ct).unwrap_or(Format::Json);
    let mut resp = error_response(
        format,
        StatusCode::UNAUTHORIZED,
        status::CODE_UNAUTHENTICATED,
        "missing or invalid bearer token: set `authorization=Bearer <token>` in the exporter's headers \
         (OTEL_EXPORTER_OTLP_HEADERS)"
            .into(),
    );
    resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"aep-bridge\""));
    Some(resp)
}

/// Bodies at least this large are decompressed and decoded on the blocking pool, so a 20 MiB
/// JSON export does not stall the async workers. Smaller ones, which include an SDK's whole
/// default batch (512 records: 250-300 KiB of real Codex or Claude Code records), are decoded
/// on the receiving task, as tonic decodes every gRPC message: a hop to the blocking pool and
/// back costs two thread wake-ups per export, about a tenth of the CPU an export of real
/// records takes (`aep-bench otlp`).
pub const BLOCKING_DECODE_BYTES: usize = 1024 * 1024;

/// A logs body as neutral records: a protobuf body read directly when it has the common
/// shape, else decoded (prost or OTLP/JSON, whose decision and error message are
/// authoritative; a JSON body leaves the direct reader at its first byte).
fn decode_log_records(body: Bytes, format: Format) -> Result<Vec<aep_adapters::otel::OtelRecord>, DecodeError> {
    match super::fast::log_records(body.clone()) {
        Some(records) => Ok(records),
        None => decode::logs(&body, format).map(super::into_otel_records),
    }
}

/// Undoes the content coding (capped) and decodes the message.
/// The decoded message comes back with its share of the decode budget, held until the
/// handler has taken it.
async fn decode_body<T: Send + 'static>(
    wire: Wire,
    max_decoded: usize,
    decode: impl FnOnce(Bytes, Format) -> Result<T, DecodeError> + Send + 'static,
) -> Result<(T, Option<Admitted>), DecodeError> {
    let Wire { bytes: wire, encoding, format, read, budget } = wire;
    let len = wire.len();
    let work = move || {
        let (body, admitted) = match encoding {
            // Already admitted by its size when it was read.
            Encoding::Identity => (wire, read),
            _ => {
                let body = Bytes::from(decode::decompress(&wire, encoding, max_decoded)?);
                // The compressed bytes are done with: their share goes back, and the
                // decompressed body is admitted before the decode multiplies it.
                drop(wire);
                drop(read);
                let admitted = match &budget {
                    Some(b) => Some(b.try_admit(body.len()).ok_or(DecodeError::Busy)?),
                    None => None,
                };
                (body, admitted)
            }
        };
        decode(body, format).map(|t| (t, admitted))
    };
    if !on_blocking_pool(len, encoding) {
        return work();
    }
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(DecodeError::Invalid(format!("decoder task failed: {e}"))))
}

/// Whether a body of `len` wire bytes is decoded on the blocking pool ([`BLOCKING_DECODE_BYTES`]).
fn on_blocking_pool(len: usize, encoding: Encoding) -> bool {
    // A compressed body may expand a thousandfold (deflate's limit): past 1 KiB on the wire
    // it could pass the threshold once decompressed, so it goes to the pool.
    let threshold = if encoding == Encoding::Identity { BLOCKING_DECODE_BYTES } else { 1024 };
    len >= threshold
}

/// Media type, content coding and wire size limit: the raw body or the error response.
async fn read_request(
    st: &AppState,
    headers: &HeaderMap,
    body: Body,
    budget: Option<&DecodeBudget>,
) -> Result<(Format, Encoding, Bytes, Option<Admitted>), Response> {
    let cfg = &st.cfg;
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let Some(format) = Format::from_content_type(ct) else {
        return Err(error_response(
            Format::Json,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            status::CODE_INVALID_ARGUMENT,
            format!("unsupported Content-Type `{ct}`: use application/x-protobuf or application/json"),
        ));
    };
    let ce = headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let Some(encoding) = Encoding::from_header(ce) else {
        return Err(error_response(
            format,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            status::CODE_INVALID_ARGUMENT,
            format!("unsupported Content-Encoding `{}`: use gzip, zstd, deflate or none", ce.unwrap_or("")),
        ));
    };
    let too_large = |limit: usize| {
        error_response(
            format,
            StatusCode::PAYLOAD_TOO_LARGE,
            status::CODE_RESOURCE_EXHAUSTED,
            format!("request body exceeds the {limit}-byte limit"),
        )
    };
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cfg.max_request_bytes as u64) {
        return Err(too_large(cfg.max_request_bytes));
    }
    // The body is held in memory while it is read: admitted by its declared size (or the
    // limit, when undeclared) before a byte of it is read, so many concurrent senders
    // cannot each park a large body here.
    let admitted = match budget {
        Some(b) => {
            let want = declared.map_or(cfg.max_request_bytes, |n| usize::try_from(n).unwrap_or(usize::MAX));
            match b.try_admit(want) {
                Some(a) => Some(a),
                None => {
                    refuse_pace(body, declared).await;
                    return Err(refused(format, Refused::Full { retry_after: std::time::Duration::from_secs(1) }));
                }
            }
        }
        None => None,
    };
    let declared_len = declared.and_then(|n| usize::try_from(n).ok());
    let wire = match body::read(body, cfg.max_request_bytes, declared_len, &st.bodies).await {
        Ok(b) => b,
        Err(body::ReadError::TooLarge) => return Err(too_large(cfg.max_request_bytes)),
        Err(body::ReadError::Body(e)) => {
            return Err(error_response(
                format,
                StatusCode::BAD_REQUEST,
                status::CODE_INVALID_ARGUMENT,
                format!("cannot read the request body: {e}"),
            ));
        }
    };
    if encoding == Encoding::Identity && wire.len() > cfg.max_decoded_bytes {
        return Err(too_large(cfg.max_decoded_bytes));
    }
    let mut admitted = admitted;
    if let Some(a) = &mut admitted {
        a.shrink_to(wire.len());
    }
    Ok((format, encoding, wire, admitted))
}

/// Most of a refused body read and discarded so its sender sees the answer; past it the
/// connection is closed instead (a flood of large refused exports must not cost a copy of
/// every byte: a sender that writes first sees a broken pipe and retries).
const DRAIN_MAX: usize = 64 * 1024;

/// How long a refusal of a body too large to drain waits before it is sent: a sender
/// retrying at once is slowed to a few attempts a second, at no cost to the bridge.
const REFUSE_PACE: std::time::Duration = std::time::Duration::from_millis(100);

/// Before a 503 for want of budget: a small body is drained (its sender reads the answer),
/// a large one waits [`REFUSE_PACE`] unread and its connection is closed after the answer.
async fn refuse_pace(body: Body, declared: Option<u64>) {
    if declared.is_some_and(|n| n <= DRAIN_MAX as u64) {
        drain(body, DRAIN_MAX).await;
    } else {
        tokio::time::sleep(REFUSE_PACE).await;
    }
}

/// Reads and discards up to `limit` bytes of `body` (no memory held).
async fn drain(mut body: Body, limit: usize) {
    let limit = limit.min(DRAIN_MAX);
    let mut seen = 0usize;
    while seen < limit {
        match body.frame().await {
            Some(Ok(f)) => seen += f.data_ref().map_or(0, |d| d.len()),
            _ => break,
        }
    }
}

fn decode_error(format: Format, e: DecodeError) -> Response {
    let code = match e {
        DecodeError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        DecodeError::Decompress { .. } | DecodeError::Invalid(_) => StatusCode::BAD_REQUEST,
        DecodeError::Busy => return refused(format, Refused::Full { retry_after: std::time::Duration::from_secs(1) }),
    };
    let grpc = if code == StatusCode::PAYLOAD_TOO_LARGE {
        status::CODE_RESOURCE_EXHAUSTED
    } else {
        status::CODE_INVALID_ARGUMENT
    };
    error_response(format, code, grpc, e.to_string())
}

fn refused(format: Format, r: Refused) -> Response {
    match r {
        Refused::Full { retry_after } => {
            let secs = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
            let st = status::with_retry(status::CODE_UNAVAILABLE, "pipeline full, retry later".into(), retry_after);
            let mut resp = status_body(format, StatusCode::SERVICE_UNAVAILABLE, &st);
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
            resp
        }
        Refused::Invalid(msg) => error_response(format, StatusCode::BAD_REQUEST, status::CODE_INVALID_ARGUMENT, msg),
    }
}

fn error_response(format: Format, code: StatusCode, grpc_code: i32, message: String) -> Response {
    status_body(format, code, &RpcStatus { code: grpc_code, message, details: Vec::new() })
}

/// An OTLP/HTTP error: a `google.rpc.Status` in the request's format.
fn status_body(format: Format, code: StatusCode, st: &RpcStatus) -> Response {
    let body = match format {
        Format::Protobuf => st.encode_to_vec(),
        Format::Json => {
            let mut v = json!({ "code": st.code, "message": st.message });
            if !st.details.is_empty() {
                // RetryInfo in proto3 JSON form (`Any` with `@type`; Duration as "1.5s").
                let details: Vec<_> = st
                    .details
                    .iter()
                    .filter_map(|d| {
                        let info = status::RetryInfo::decode(d.value.as_slice()).ok()?;
                        let delay = info.retry_delay?;
                        let nanos = if delay.nanos > 0 { format!(".{:09}", delay.nanos) } else { String::new() };
                        Some(json!({ "@type": d.type_url, "retryDelay": format!("{}{}s", delay.seconds, nanos) }))
                    })
                    .collect();
                v["details"] = details.into();
            }
            v.to_string().into_bytes()
        }
    };
    (code, [(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// A 200 response carrying the export response message in the request's format.
fn success<E: Export>(format: Format, a: Accepted) -> Response {
    let body = match format {
        Format::Json => json_response(E::REJECTED_KEY, &a).into_bytes(),
        Format::Protobuf => E::response(a).encode_to_vec(),
    };
    (StatusCode::OK, [(header::CONTENT_TYPE, format.content_type())], body).into_response()
}

/// The export response in OTLP/JSON: `{}` on full success, else `partialSuccess` with the
/// int64 count as a string (proto3 JSON), as the collector writes it.
fn json_response(key: &str, a: &Accepted) -> String {
    if !partial(a) {
        return "{}".into();
    }
    json!({ "partialSuccess": { key: a.rejected.to_string(), "errorMessage": a.message } }).to_string()
}
