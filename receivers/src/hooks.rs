//! The hook receiver: one HTTP endpoint for every vendor, `POST /hooks/{vendor}[/{event}]`.
//!
//! The body is the vendor's native hook payload (JSON). The reply is whatever the vendor
//! expects on its hook channel, in its own shape; with nothing decided that is the
//! vendor's neutral reply. Errors are clear 4xx/5xx with a JSON `{"error": ...}` body;
//! the shim in front of the agent turns any of them into the neutral reply (fail-open).
//!
//! A call is handled to the end once sent, whether or not its caller still waits: a shim
//! that gave up (a hung bridge) has already answered its agent, and its call is still a
//! fact of the session, placed in the session's order ([`crate::hook_order`]) or dropped
//! and counted, never lost with its connection nor half-handled. A reply the bridge holds open for a human sends its
//! headers at once ([`HOLD_HEADER`]): the shim waits the hold budget only on a bridge that
//! said it holds, never on one that does not answer at all.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

use crate::hook_order::{Lanes, Timing};

/// The reply header of a held moment: how long (ms) the bridge may take to send the body.
pub const HOLD_HEADER: &str = "x-aep-hold";
/// The proof of [`HOLD_HEADER`] under the token ([`aep_schemas::digest::hold_proof_body`]),
/// so a listener that is not the bridge cannot make a shim wait.
pub const HOLD_PROOF_HEADER: &str = "x-aep-hold-proof";
/// The reply header (or, on a held reply, trailer) proving the body under the token.
pub const PROOF_HEADER: &str = "x-aep-proof";
/// The vendor path `aep-bridge doctor` posts to (`/hooks/aep-doctor`): once the caller's
/// credentials pass, the reply is [`HookHandler::about`], not a mapping. A refused probe is
/// not logged as a refused hook: doctor sends a wrong credential on purpose, to check that
/// the bridge refuses it, and must not leave warnings in the bridge's log on every run.
pub const DOCTOR_PROBE: &str = "aep-doctor";

/// The answer of a held moment, computed while the reply's headers are already out.
type Answer = Pin<Box<dyn Future<Output = Bytes> + Send>>;

/// What to send back to the agent.
pub struct HookReply {
    /// The body, byte-exact (empty for most vendors' neutral reply; empty until answered
    /// for a held reply, see [`HookReply::into_body`]).
    pub body: Bytes,
    hold: Option<(Duration, Answer)>,
}

impl std::fmt::Debug for HookReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookReply").field("body", &self.body).field("hold", &self.hold.as_ref().map(|h| h.0)).finish()
    }
}

impl HookReply {
    /// A reply with this body.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self { body: body.into(), hold: None }
    }

    /// A reply held open for up to `budget`: its headers go out at once with the budget
    /// ([`HOLD_HEADER`]), its body once `answer` resolves. Dropped unanswered when the
    /// caller goes away.
    pub fn held(budget: Duration, answer: impl Future<Output = Bytes> + Send + 'static) -> Self {
        Self { body: Bytes::new(), hold: Some((budget, Box::pin(answer))) }
    }

    /// The hold budget of a held reply.
    pub fn hold_budget(&self) -> Option<Duration> {
        self.hold.as_ref().map(|h| h.0)
    }

    /// The body, waiting for a held reply's answer.
    pub async fn into_body(self) -> Bytes {
        match self.hold {
            Some((_, answer)) => answer.await,
            None => self.body,
        }
    }
}

impl IntoResponse for HookReply {
    fn into_response(self) -> Response {
        let ct = if self.body.is_empty() { "text/plain; charset=utf-8" } else { "application/json" };
        ([(header::CONTENT_TYPE, ct)], self.body).into_response()
    }
}

/// Why a hook call was refused.
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    /// No adapter for this vendor.
    #[error("unknown vendor {0:?}: see `aep-bridge adapters` for the supported ones")]
    UnknownVendor(String),
    /// The body is not JSON.
    #[error("hook payload is not valid JSON: {0}")]
    BadJson(String),
    /// The adapter could not map the payload.
    #[error("{0}")]
    Unmappable(String),
    /// Missing or wrong bearer token.
    #[error("missing or invalid bearer token")]
    Unauthorized,
    /// The bridge cannot take events right now.
    #[error("the bridge is not accepting events: {0}")]
    Unavailable(String),
    /// A late call sent before one of its session that is already recorded: writing it now
    /// would put it after what followed it (AEP-0001 §7.2), so it is dropped.
    #[error("a later hook call of this session is already recorded; this late one is dropped to keep the order")]
    OutOfOrder,
}

impl HookError {
    /// A short reason label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            HookError::UnknownVendor(_) => "unknown_vendor",
            HookError::BadJson(_) => "bad_json",
            HookError::Unmappable(_) => "unmappable",
            HookError::Unauthorized => "unauthorized",
            HookError::Unavailable(_) => "unavailable",
            HookError::OutOfOrder => "out_of_order",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            HookError::UnknownVendor(_) => StatusCode::NOT_FOUND,
            HookError::BadJson(_) | HookError::Unmappable(_) => StatusCode::BAD_REQUEST,
            HookError::Unauthorized => StatusCode::UNAUTHORIZED,
            HookError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            HookError::OutOfOrder => StatusCode::CONFLICT,
        }
    }
}

impl IntoResponse for HookError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.to_string() });
        (self.status(), axum::Json(body)).into_response()
    }
}

/// The bridge side of the hook receiver.
pub trait HookHandler: Send + Sync + 'static {
    /// `true` when `token` (the bearer credential, if any) may emit.
    fn authorized(&self, token: Option<&str>) -> bool;

    /// Maps and admits one hook call and decides the reply (it may hold the reply open
    /// for a permission moment).
    fn handle(
        &self,
        vendor: String,
        event: Option<String>,
        payload: Value,
    ) -> impl Future<Output = Result<HookReply, HookError>> + Send;

    /// Counts a refused call.
    fn rejected(&self, vendor: &str, err: &HookError);

    /// `true` when `mac` proves the caller holds the token for this `nonce` and `body`
    /// (see [`aep_schemas::digest::request_mac`]); a nonce may be used once. Refused by default.
    fn authorized_mac(&self, nonce: &str, mac: &str, body: &[u8]) -> bool {
        let _ = (nonce, mac, body);
        false
    }

    /// The `x-aep-proof` of a reply `body` for a caller that sent `nonce` (`x-aep-nonce`):
    /// lets a shim holding the token tell this bridge from any other listener on the port.
    /// `None` (the default) sends no proof.
    fn reply_proof(&self, nonce: &str, body: &[u8]) -> Option<String> {
        let _ = (nonce, body);
        None
    }

    /// The key of the session a call belongs to, for keeping its calls in order
    /// ([`crate::hook_order`]); `None` (the default) orders nothing.
    fn order_key(&self, vendor: &str, event: Option<&str>, payload: &Value) -> Option<String> {
        let _ = (vendor, event, payload);
        None
    }

    /// A late call that could not be placed in its session's order was dropped (it is
    /// refused with [`HookError::OutOfOrder`] and counted by [`Self::rejected`] too): lets
    /// the handler forget what depends on it. Nothing by default.
    fn dropped_late(&self, vendor: &str, event: Option<&str>, payload: &Value) {
        let _ = (vendor, event, payload);
    }

    /// What a [`DOCTOR_PROBE`] call that passed the credential check learns of this bridge
    /// (where it writes, its version), so `doctor` checks the running bridge's data dir
    /// rather than its own default. `null` by default.
    fn about(&self) -> Value {
        Value::Null
    }

    /// The time (Unix ms) a call's deadline is compared with.
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The router's state: the handler and its sessions' order.
struct Hooks<H> {
    handler: Arc<H>,
    lanes: Arc<Lanes>,
}

/// The hook routes, with a body limit of `max_body` bytes (413 beyond).
pub fn router<H: HookHandler>(handler: Arc<H>, max_body: usize) -> Router {
    let state = Arc::new(Hooks { handler, lanes: Arc::default() });
    Router::new()
        .route("/hooks/{vendor}", post(hook_no_event::<H>))
        .route("/hooks/{vendor}/{event}", post(hook_with_event::<H>))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// The paths of the hook routes: the listener ([`crate::listener::serve`]) runs each request
/// under it in a task of its own from the moment its head is read, so a call is handled to
/// its end whatever its connection does (the one place that does it: a second spawn in the
/// routes would only cost the hook path a task).
pub const PATH_PREFIX: &str = "/hooks/";

/// The bearer token of a request, if any.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_value(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The token of an `authorization` value `Bearer <token>` (an HTTP header or gRPC metadata).
/// The scheme is matched without regard to case (RFC 9110 §11.1: `bearer`, `BEARER`).
pub fn bearer_value(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

async fn hook_no_event<H: HookHandler>(
    State(h): State<Arc<Hooks<H>>>,
    Path(vendor): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run(h, vendor, None, headers, body).await
}

async fn hook_with_event<H: HookHandler>(
    State(h): State<Arc<Hooks<H>>>,
    Path((vendor, event)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run(h, vendor, Some(event), headers, body).await
}

async fn run<H: HookHandler>(
    h: Arc<Hooks<H>>,
    vendor: String,
    event: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let nonce = headers.get("x-aep-nonce").and_then(|v| v.to_str().ok()).filter(|n| n.len() <= 128).map(str::to_owned);
    let handler = h.handler.clone();
    let label = vendor.clone();
    // Served by `listener::serve`, this runs in a task of its own: a caller that hung up
    // does not cancel it.
    match accept(h, vendor, event, headers, body).await {
        Ok(reply) => respond(&handler, nonce.as_deref(), reply),
        Err(e) if label == DOCTOR_PROBE => {
            tracing::debug!(reason = e.reason(), "Doctor probe refused.");
            e.into_response()
        }
        Err(e) => {
            handler.rejected(&label, &e);
            e.into_response()
        }
    }
}

/// Authenticates, parses, orders and handles one call.
async fn accept<H: HookHandler>(
    h: Arc<Hooks<H>>,
    vendor: String,
    event: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<HookReply, HookError> {
    let handler = &h.handler;
    // A shim holding the token proves it without sending it (`AEP-HMAC <mac>` over the
    // `x-aep-nonce` and the body), so a listener that is not the bridge never learns it;
    // other clients send it as a bearer token.
    let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    let ok = match auth.strip_prefix("AEP-HMAC ") {
        Some(mac) => headers
            .get("x-aep-nonce")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|nonce| handler.authorized_mac(nonce, mac.trim(), &body)),
        None => handler.authorized(bearer(&headers)),
    };
    if !ok {
        return Err(HookError::Unauthorized);
    }
    if vendor == DOCTOR_PROBE {
        let about = serde_json::to_vec(&handler.about()).unwrap_or_default();
        return Ok(HookReply::new(about));
    }
    // Repeated keys are refused at any depth (RFC 8259 §4 leaves them undefined).
    let payload: Value = aep_schemas::json::from_slice_strict(&body).map_err(|e| HookError::BadJson(e.to_string()))?;
    let timing = Timing::from_headers(&headers, handler.now_ms());
    let key = timing.and_then(|_| handler.order_key(&vendor, event.as_deref(), &payload));
    let _turn = match (key, timing) {
        (Some(key), Some(timing)) => match h.lanes.enter(key, timing).await {
            Ok(turn) => Some(turn),
            Err(_) => {
                handler.dropped_late(&vendor, event.as_deref(), &payload);
                return Err(HookError::OutOfOrder);
            }
        },
        _ => None,
    };
    handler.handle(vendor, event, payload).await
}

/// The response of a handled call, with the proof of its body for a caller that sent a
/// nonce. A held reply sends its headers now, with the hold budget and that budget's proof;
/// its body follows when answered, proven in a trailer ([`PROOF_HEADER`]).
fn respond<H: HookHandler>(h: &Arc<H>, nonce: Option<&str>, reply: HookReply) -> Response {
    let Some((budget, answer)) = reply.hold else {
        let proof = nonce.and_then(|n| h.reply_proof(n, &reply.body));
        let mut resp = HookReply::new(reply.body).into_response();
        if let Some(p) = proof.and_then(|p| HeaderValue::from_str(&p).ok()) {
            resp.headers_mut().insert(PROOF_HEADER, p);
        }
        return resp;
    };
    let ms = u64::try_from(budget.as_millis()).unwrap_or(u64::MAX);
    let prove: Option<Prove> = nonce.map(|n| {
        let (h, n) = (h.clone(), n.to_owned());
        Box::new(move |body: &[u8]| {
            let p = HeaderValue::from_str(&h.reply_proof(&n, body)?).ok()?;
            Some(HeaderMap::from_iter([(header::HeaderName::from_static(PROOF_HEADER), p)]))
        }) as Prove
    });
    let hold_proof = nonce.and_then(|n| h.reply_proof(n, aep_schemas::digest::hold_proof_body(ms).as_bytes()));
    let mut resp = Response::new(Body::new(HeldBody { answer: Some(answer), prove, trailers: None }));
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(HOLD_HEADER, HeaderValue::from(ms));
    if let Some(p) = hold_proof.and_then(|p| HeaderValue::from_str(&p).ok()) {
        headers.insert(HOLD_PROOF_HEADER, p);
        headers.insert(header::TRAILER, HeaderValue::from_static(PROOF_HEADER));
    }
    resp
}

/// Makes the trailers of a held reply's body.
type Prove = Box<dyn FnOnce(&[u8]) -> Option<HeaderMap> + Send>;

/// The body of a held reply: the answer once it is known, then its proof as a trailer
/// (sent by HTTP/1.1 to a caller that asked with `TE: trailers`).
struct HeldBody {
    answer: Option<Answer>,
    prove: Option<Prove>,
    trailers: Option<HeaderMap>,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        if let Some(answer) = self.answer.as_mut() {
            let Poll::Ready(body) = answer.as_mut().poll(cx) else { return Poll::Pending };
            self.answer = None;
            self.trailers = self.prove.take().and_then(|p| p(&body));
            if !body.is_empty() {
                return Poll::Ready(Some(Ok(http_body::Frame::data(body))));
            }
        }
        Poll::Ready(self.trailers.take().map(|t| Ok(http_body::Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.answer.is_none() && self.trailers.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_value;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER  t0k ", " Bearer t0k"] {
            assert_eq!(bearer_value(v), Some("t0k"), "{v:?}");
        }
        for v in ["Basic dTpw", "Bearer", "Bearer ", "Bearert0k", ""] {
            assert_eq!(bearer_value(v), None, "{v:?}");
        }
    }
}
