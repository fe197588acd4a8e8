//! The hook receiver: one HTTP endpoint for every vendor, `POST /hooks/{vendor}[/{event}]`.
//!
//! The body is the vendor's native hook payload (JSON). The reply is whatever the vendor
//! expects on its hook channel, in its own shape; with nothing decided that is the
//! vendor's neutral reply. Errors are clear 4xx/5xx with a JSON `{"error": ...}` body;
//! the shim in front of the agent turns any of them into the neutral reply (fail-open).

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::Value;

/// What to send back to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookReply {
    /// The body, byte-exact (empty for most vendors' neutral reply).
    pub body: Bytes,
}

impl HookReply {
    /// A reply with this body.
    pub fn new(body: impl Into<Bytes>) -> Self {
        Self { body: body.into() }
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
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            HookError::UnknownVendor(_) => StatusCode::NOT_FOUND,
            HookError::BadJson(_) | HookError::Unmappable(_) => StatusCode::BAD_REQUEST,
            HookError::Unauthorized => StatusCode::UNAUTHORIZED,
            HookError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
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
}

/// The hook routes, with a body limit of `max_body` bytes (413 beyond).
pub fn router<H: HookHandler>(handler: Arc<H>, max_body: usize) -> Router {
    Router::new()
        .route("/hooks/{vendor}", post(hook_no_event::<H>))
        .route("/hooks/{vendor}/{event}", post(hook_with_event::<H>))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(handler)
}

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
    State(h): State<Arc<H>>,
    Path(vendor): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run(h, vendor, None, headers, body).await
}

async fn hook_with_event<H: HookHandler>(
    State(h): State<Arc<H>>,
    Path((vendor, event)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run(h, vendor, Some(event), headers, body).await
}

async fn run<H: HookHandler>(
    h: Arc<H>,
    vendor: String,
    event: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = async {
        // A shim holding the token proves it without sending it (`AEP-HMAC <mac>` over the
        // `x-aep-nonce` and the body), so a listener that is not the bridge never learns it;
        // other clients send it as a bearer token.
        let auth = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
        let ok = match auth.strip_prefix("AEP-HMAC ") {
            Some(mac) => headers
                .get("x-aep-nonce")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|nonce| h.authorized_mac(nonce, mac.trim(), &body)),
            None => h.authorized(bearer(&headers)),
        };
        if !ok {
            return Err(HookError::Unauthorized);
        }
        // Repeated keys are refused at any depth (RFC 8259 §4 leaves them undefined).
        let payload: Value =
            aep_schemas::json::from_slice_strict(&body).map_err(|e| HookError::BadJson(e.to_string()))?;
        h.handle(vendor.clone(), event, payload).await
    }
    .await;
    match result {
        Ok(reply) => {
            let nonce = headers.get("x-aep-nonce").and_then(|v| v.to_str().ok()).filter(|n| n.len() <= 128);
            let proof = nonce.and_then(|n| h.reply_proof(n, &reply.body));
            let mut resp = reply.into_response();
            if let Some(p) = proof.and_then(|p| axum::http::HeaderValue::from_str(&p).ok()) {
                resp.headers_mut().insert("x-aep-proof", p);
            }
            resp
        }
        Err(e) => {
            h.rejected(&vendor, &e);
            e.into_response()
        }
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
