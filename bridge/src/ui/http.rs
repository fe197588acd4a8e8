//! The web view's routes: the embedded page, its login, its stream and its answers, each
//! response with a strict Content-Security-Policy.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::SENDER;
use super::config::UiConfig;
use super::history::{History, HistoryError, Query as HistoryQuery, Summary};
use super::sessions::Sessions;
use crate::collector::{self, Collector, StreamQuery};
use crate::pipeline::Pipeline;
use crate::time::now_ms;
use aep_receivers::access::Principal;

/// Largest body the view's endpoints take (a login, an answer with its form values).
pub const MAX_BODY: usize = 64 * 1024;

/// The cookie holding a session secret.
const COOKIE: &str = "aep_ui";

/// Longest text a history search takes, in characters.
const MAX_SEARCH: usize = 256;

/// The header carrying the page's nonce on a state-changing request.
const NONCE_HEADER: &str = "x-aep-nonce";

/// Nothing but this origin's own script, style and connections; no framing, no plugins,
/// no inline script (so an event field that got into markup would still not run).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX: &str = include_str!("assets/index.html");
const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// What the view's handlers share.
pub struct Ui {
    collector: Arc<Collector>,
    pipeline: Pipeline,
    sessions: Sessions,
    /// Host names accepted in `Host` besides IP addresses and `localhost`.
    hosts: Vec<String>,
    /// `aep://{host}/agent/aep-web`, the commands' `source`.
    source: String,
    /// `aep://{host}/`, the start of the `source` of every event this bridge stamps.
    stamps: String,
    /// This run's epoch (AEP-0001 §5.3): a request stamped in an earlier one is no longer
    /// held here (its hook was released when that run stopped).
    epoch: u64,
    /// Who answers with the bridge's token (`[ui] name`), recorded on every answer.
    answerer: Option<String>,
    /// The sessions of the last days from the JSONL logs, when they are written.
    history: Option<Arc<History>>,
    /// History reads at once (each bounded in bytes): the rest wait their turn.
    reads: tokio::sync::Semaphore,
    /// Wrong tokens at the login, per client and overall (growing waits, a quiet log).
    logins: aep_receivers::throttle::LoginThrottle,
}

impl Ui {
    /// The view over `collector` (its stream and command routing) and the `pipeline` its
    /// commands are recorded in, for the bridge run `epoch` on `host` (the name its events'
    /// sources carry). With a token in the collector's access list, every route but the
    /// page and the login wants a session, and a session sees what its token may;
    /// sessions are kept under `data_dir` when given. `logs` is the JSONL logs folder when
    /// the logs are written: the page's history reads it (an index is built at once, on a
    /// thread of its own, so the first page finds it ready).
    #[allow(clippy::too_many_arguments)] // the composition root's values, passed once
    pub fn new(
        collector: Arc<Collector>,
        pipeline: Pipeline,
        data_dir: Option<&std::path::Path>,
        host: &str,
        epoch: u64,
        cfg: &UiConfig,
        logs: Option<std::path::PathBuf>,
        allowed_hosts: &[String],
    ) -> Arc<Self> {
        let mut hosts: Vec<String> = allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect();
        if !host.is_empty() {
            hosts.push(host.to_ascii_lowercase());
        }
        Arc::new(Self {
            collector,
            pipeline,
            sessions: Sessions::new(data_dir.map(|d| d.join("ui-sessions.json")), now_ms()),
            hosts,
            source: format!("aep://{}/agent/{SENDER}", if host.is_empty() { "localhost" } else { host }),
            stamps: format!("aep://{host}/"),
            epoch,
            answerer: cfg.answerer().map(str::to_owned),
            history: logs.map(|l| {
                let h = Arc::new(History::new(l, cfg.history_days, cfg.history_sessions));
                let warm = h.clone();
                let _ = std::thread::Builder::new().name("ui-history".into()).spawn(move || warm.refresh());
                h
            }),
            reads: tokio::sync::Semaphore::new(2),
            logins: aep_receivers::throttle::LoginThrottle::default(),
        })
    }

    /// The session secret this request's cookie names, when it is live, and whom it
    /// belongs to (a session whose access entry was removed ends with it).
    fn session(&self, headers: &HeaderMap) -> Option<(String, Principal)> {
        let secret = cookie(headers)?;
        let who = self.sessions.who(&secret, now_ms())?;
        let access = self.collector.access();
        let who = match who.as_str() {
            // Kept from before access lists: the token's holder, or anonymous without one.
            "" if access.required() => Principal::operator(),
            "" => Principal::anonymous(),
            name => access.by_name(name)?,
        };
        Some((secret, who))
    }

    /// Whether the view asks for a login.
    fn token(&self) -> bool {
        self.collector.access().required()
    }

    /// `Host` is an IP address, `localhost` or a configured name (DNS-rebinding guard).
    fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else { return false };
        let name = match host.strip_prefix('[') {
            Some(v6) => return v6.split(']').next().is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok()),
            None => host.rsplit_once(':').map_or(host, |(n, _)| n).to_ascii_lowercase(),
        };
        name == "localhost" || name.parse::<std::net::Ipv4Addr>().is_ok() || self.hosts.contains(&name)
    }
}

/// The view's routes: `/` (the page), `/ui/app.js`, `/ui/app.css`, `/ui/session`,
/// `/ui/login`, `/ui/logout`, `/ui/stream` (SSE), `/ui/history`, `/ui/events` and
/// `/ui/answer`.
pub fn router(ui: Arc<Ui>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/ui/app.js", get(script))
        .route("/ui/app.css", get(style))
        // Browsers ask for it; there is none, said quietly with the view's headers.
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/ui/session", get(session))
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/stream", get(stream))
        .route("/ui/history", get(history))
        .route("/ui/events", get(events))
        .route("/ui/answer", post(answer))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(ui.clone(), guard))
        .with_state(ui)
}

fn error(status: StatusCode, code: &str, detail: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": code, "detail": detail.into() }))).into_response()
}

/// Refuses a foreign `Host`, then stamps the security headers on every response.
async fn guard(State(ui): State<Arc<Ui>>, req: Request, next: Next) -> Response {
    let mut res = if ui.host_ok(req.headers()) {
        next.run(req).await
    } else {
        error(StatusCode::MISDIRECTED_REQUEST, "host-not-allowed", "this Host is not one the view answers to")
    };
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}

/// The `aep_ui` cookie's value.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE)?.strip_prefix('=').map(str::to_owned))
}

fn set_cookie(secret: &str) -> HeaderValue {
    // HttpOnly: no script reads it; SameSite=Strict: no other site's page sends it.
    HeaderValue::from_str(&format!("{COOKIE}={secret}; HttpOnly; SameSite=Strict; Path=/; Max-Age=604800"))
        .unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// A state-changing request comes from this origin's own page: `Origin`, when sent, names
/// this host, and `Sec-Fetch-Site`, when sent, says `same-origin`; one of them must be sent.
fn same_origin(headers: &HeaderMap) -> bool {
    let get = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let Some(host) = get("host") else { return false };
    let origin = get("origin").map(|o| o == format!("http://{host}") || o == format!("https://{host}"));
    let site = get("sec-fetch-site").map(|s| s == "same-origin");
    match (origin, site) {
        (None, None) => false,
        (o, s) => o.unwrap_or(true) && s.unwrap_or(true),
    }
}

/// `GET /ui/session`: the page's nonce and what it may do, or 401 (the page shows the
/// login). Without a token the view is open: a session is started on first sight.
async fn session(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    let now = now_ms();
    let (secret, who, fresh) = match ui.session(&headers) {
        Some((s, who)) => (s, who, false),
        None if !ui.token() => match ui.sessions.create_for(now, "anonymous") {
            Ok(s) => (s, Principal::anonymous(), true),
            Err(e) => return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.to_string()),
        },
        None => return error(StatusCode::UNAUTHORIZED, "unauthorized", "log in with the bridge's token"),
    };
    let Some(nonce) = ui.sessions.nonce(&secret, now) else {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "the session ended");
    };
    let body = json!({
        "nonce": nonce,
        "token": ui.token(),
        // AEP-0004 §4.1: control flows only on authenticated bindings (a token is set), and
        // for a login whose token may answer.
        "control": ui.collector.control_enabled() && who.answer,
        // Whose sessions this page shows: one tenant's, or every one (`null`).
        "who": &*who.name,
        "tenant": who.tenant.as_deref(),
        // Which events this bridge stamped, and in which run: the page expires the requests
        // of an earlier run, whose held hooks were released when it stopped.
        "epoch": ui.epoch,
        "stamps": ui.stamps,
        // Who this page answers as, and whether it can page back through the logs.
        "name": ui.answerer,
        "sender": SENDER,
        "history": ui.history.is_some(),
    });
    let mut res = axum::Json(body).into_response();
    if fresh {
        res.headers_mut().insert(header::SET_COOKIE, set_cookie(&secret));
    }
    res
}

/// `POST /ui/login` (`token=...`, form-encoded): the token, once, for a cookie session.
/// Wrong tokens make their client (and, past a larger allowance, everyone) wait before the
/// next attempt is looked at: 429 with `Retry-After`, the token not compared, right or
/// wrong (see [`crate::throttle`]).
async fn login(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    ext: axum::http::Extensions,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if !same_origin(&headers) {
        return error(StatusCode::FORBIDDEN, "forbidden", "a login comes from this page");
    }
    let body = match body {
        Ok(b) => b,
        Err(e) => return error(e.status(), "invalid", e.body_text()),
    };
    let client = ext.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let now = aep_receivers::throttle::mono_ms();
    if let aep_receivers::throttle::Verdict::Wait(ms) = ui.logins.admit(client, now) {
        log_refusals(&ui, now);
        let secs = ms.div_ceil(1000).max(1);
        let mut res = error(
            StatusCode::TOO_MANY_REQUESTS,
            "too-many-attempts",
            format!("wrong tokens were tried: wait {secs} s before the next attempt"),
        );
        res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        return res;
    }
    let presented = url::form_urlencoded::parse(&body).find(|(k, _)| k == "token").map(|(_, v)| v.into_owned());
    let who = match ui.collector.access().principal(presented.as_deref()) {
        Some(who) if ui.token() => who,
        _ => {
            ui.logins.failed(client, now);
            log_refusals(&ui, now);
            return error(StatusCode::FORBIDDEN, "forbidden", "the token is not valid");
        }
    };
    ui.logins.succeeded(client);
    if !who.view {
        return error(StatusCode::FORBIDDEN, "forbidden", format!("{} may not use the web view", who.name));
    }
    match ui.sessions.create_for(now_ms(), &who.name) {
        Ok(secret) => ([(header::SET_COOKIE, set_cookie(&secret))], StatusCode::NO_CONTENT).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.to_string()),
    }
}

/// One warning line for the refused logins since the last, at most every 10 s.
fn log_refusals(ui: &Ui, now: u64) {
    if let Some((wrong, waited)) = ui.logins.log_due(now) {
        tracing::warn!(
            wrong_tokens = wrong,
            made_to_wait = waited,
            "Web view login refused: {wrong} wrong token(s), {waited} attempt(s) made to wait (one line per 10 s at most)."
        );
    }
}

/// Checks a state-changing request: a live session (401), from this origin (403), with a
/// nonce minted for that session (403). Returns the session secret and whose it is.
#[allow(clippy::result_large_err)] // the error is the response itself, built once per refusal
fn checked(ui: &Ui, headers: &HeaderMap) -> Result<(String, Principal), Response> {
    let Some((secret, who)) = ui.session(headers) else {
        return Err(error(StatusCode::UNAUTHORIZED, "unauthorized", "log in first"));
    };
    if !same_origin(headers) {
        return Err(error(StatusCode::FORBIDDEN, "forbidden", "the request does not come from this page"));
    }
    let nonce = headers.get(NONCE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ui.sessions.nonce_ok(&secret, nonce, now_ms()) {
        return Err(error(StatusCode::FORBIDDEN, "forbidden", "the page's nonce is missing or stale; reload"));
    }
    Ok((secret, who))
}

/// `POST /ui/logout`: ends the session.
async fn logout(State(ui): State<Arc<Ui>>, headers: HeaderMap) -> Response {
    match checked(&ui, &headers) {
        Ok((secret, _)) => {
            ui.sessions.remove(&secret);
            let clear = HeaderValue::from_static("aep_ui=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
            ([(header::SET_COOKIE, clear)], StatusCode::NO_CONTENT).into_response()
        }
        Err(r) => r,
    }
}

/// `GET /ui/stream`: the collector's SSE stream (replay, live, resume) behind the session
/// cookie. AEP-0003 §8.1 lets a browser's stream carry `?access_token=`; the view never
/// does (a URL ends up in history, logs and referrers), and ignores one given here.
async fn stream(State(ui): State<Arc<Ui>>, Query(mut q): Query<StreamQuery>, headers: HeaderMap) -> Response {
    let Some((_, who)) = ui.session(&headers) else {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "log in first");
    };
    q.access_token = None;
    collector::sse_stream(ui.collector.clone(), q, who.tenant, &headers)
}

/// `POST /ui/answer` `{request, session, answer: {option | text | values}}`: sends
/// `control.attention.respond` from [`SENDER`] through the collector's command routing,
/// the path a `/socket` sender's command takes. 202 with the command id once routed; the
/// ack and the outcome arrive on the stream (AEP-0004 §3, §7).
async fn answer(State(ui): State<Arc<Ui>>, headers: HeaderMap, body: Result<Bytes, BytesRejection>) -> Response {
    let who = match checked(&ui, &headers) {
        Ok((_, who)) => who,
        Err(r) => return r,
    };
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", format!("at most {MAX_BODY} bytes"));
        }
        Err(e) => return error(e.status(), "invalid", e.body_text()),
    };
    // AEP-0004 §4.1: control flows only on authenticated bindings, and this one is
    // authenticated by the token only when one is set.
    if !ui.collector.control_enabled() {
        return error(
            StatusCode::FORBIDDEN,
            "unauthorized",
            "answering needs an authenticated binding: start the bridge with a token",
        );
    }
    let v: Value = match aep_schemas::json::from_slice_strict(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid", format!("body is not JSON: {e}")),
    };
    let (Some(request), Some(session)) =
        (v.get("request").and_then(Value::as_str), v.get("session").and_then(Value::as_str))
    else {
        return error(StatusCode::BAD_REQUEST, "invalid", "`request` and `session` are required");
    };
    let (answer, capture) = match aep_schemas::command::answer(v.get("answer")) {
        Ok(a) => a,
        Err(why) => return error(StatusCode::BAD_REQUEST, "invalid", why),
    };
    let mut data = json!({ "answer": answer });
    // The person behind the page (AEP-0002 §5.3 `attention.answered` `by`, mirrored on the
    // command so the target can record it).
    if let Some(name) = &ui.answerer {
        data["by"] = json!(name);
    }
    // AEP-0004 §2: seq-less, a fresh id, `agent` the sender; subject and cause the request (§6).
    let id = ulid::Ulid::new().to_string();
    let cmd = aep_schemas::command::Command {
        r#type: "control.attention.respond",
        session,
        run: None,
        answers: Some(request),
        capture,
        data: data.clone(),
    }
    .event(
        aep_schemas::command::Sender { agent: SENDER, source: &ui.source },
        &id,
        &crate::time::rfc3339_ms(crate::time::now_ms()),
    );
    let raw = cmd.to_string();
    let stamped = match collector::validate_received(cmd, raw.as_bytes()) {
        Ok(s) => Arc::new(s),
        Err(v) => return error(StatusCode::BAD_REQUEST, "invalid", format!("{}: {}", v.rule, v.message)),
    };
    match collector::submit_command(&ui.collector, &ui.pipeline, stamped, &who).await {
        Ok(()) => {
            tracing::info!(sender = SENDER, "Answer sent from the web view.");
            // What was sent, exactly: the page shows it on the card.
            (StatusCode::ACCEPTED, axum::Json(json!({ "command": id, "sent": data }))).into_response()
        }
        Err(r) => {
            let status = if r.code == "unavailable" { StatusCode::SERVICE_UNAVAILABLE } else { StatusCode::CONFLICT };
            error(status, r.code, r.detail)
        }
    }
}

/// `GET /ui/history?agent=&session=&type=&severity=&since=&text=&before=&limit=`: a page of
/// sessions from the JSONL logs, newest activity first (see [`History::query`]).
async fn history(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    q: Result<Query<HistoryQuery>, QueryRejection>,
) -> Response {
    let Some((_, who)) = ui.session(&headers) else {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "log in first");
    };
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid", e.body_text()),
    };
    if q.text.as_deref().is_some_and(|t| t.chars().count() > MAX_SEARCH) {
        return error(StatusCode::BAD_REQUEST, "invalid", format!("`text` is at most {MAX_SEARCH} characters"));
    }
    let Some(h) = ui.history.clone() else {
        return error(StatusCode::NOT_FOUND, "no-history", "the JSONL logs are off ([jsonl] enabled = false)");
    };
    let Ok(_turn) = ui.reads.acquire().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "shutting down");
    };
    // A login limited to one tenant pages through that tenant's sessions alone.
    let c = ui.collector.clone();
    let visible = move |s: &Summary| c.sees_session(&who.tenant, &s.session);
    match tokio::task::spawn_blocking(move || h.query(&q, &visible)).await {
        Ok(page) => axum::Json(page).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// The query of `GET /ui/events`.
#[derive(Debug, serde::Deserialize)]
struct EventsQuery {
    agent: String,
    session: String,
    before: Option<String>,
    limit: Option<usize>,
}

/// `GET /ui/events?agent=&session=&before=&limit=`: a page of one session's events from
/// its log, newest first, as logged: `{"events": [...], "next": cursor|null}`.
async fn events(
    State(ui): State<Arc<Ui>>,
    headers: HeaderMap,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> Response {
    let Some((_, who)) = ui.session(&headers) else {
        return error(StatusCode::UNAUTHORIZED, "unauthorized", "log in first");
    };
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid", e.body_text()),
    };
    // Another tenant's session is not found, the same answer as one that does not exist.
    if !ui.collector.sees_session(&who.tenant, &q.session) {
        return error(StatusCode::NOT_FOUND, "not-found", HistoryError::NotFound.to_string());
    }
    let Some(h) = ui.history.clone() else {
        return error(StatusCode::NOT_FOUND, "no-history", "the JSONL logs are off ([jsonl] enabled = false)");
    };
    let Ok(_turn) = ui.reads.acquire().await else {
        return error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", "shutting down");
    };
    let read = tokio::task::spawn_blocking(move || {
        h.events(&q.agent, &q.session, q.before.as_deref(), q.limit.unwrap_or(200))
    })
    .await;
    let page = match read {
        Ok(Ok(p)) => p,
        Ok(Err(e @ HistoryError::NotFound)) => return error(StatusCode::NOT_FOUND, "not-found", e.to_string()),
        Ok(Err(e @ HistoryError::BadCursor(_))) => return error(StatusCode::BAD_REQUEST, "invalid", e.to_string()),
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, "unavailable", e.to_string()),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    };
    // Each line was checked to be one complete JSON value: they are joined as they are.
    let mut body = Vec::with_capacity(page.lines.iter().map(|l| l.len() + 1).sum::<usize>() + 64);
    body.extend_from_slice(b"{\"events\":[");
    for (i, l) in page.lines.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(l);
    }
    body.extend_from_slice(b"],\"next\":");
    body.extend_from_slice(serde_json::to_string(&page.next).unwrap_or_else(|_| "null".into()).as_bytes());
    body.push(b'}');
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn same_origin_needs_a_matching_origin_or_fetch_site() {
        let host = ("host", "127.0.0.1:8787");
        assert!(same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8787")])));
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "same-origin")])));
        assert!(!same_origin(&headers(&[host])), "neither header: refused");
        assert!(!same_origin(&headers(&[host, ("origin", "http://evil.example")])));
        assert!(!same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8787"), ("sec-fetch-site", "cross-site")])));
        assert!(!same_origin(&headers(&[host, ("origin", "null")])));
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let h = headers(&[("cookie", "a=1; aep_ui=abc; b=2")]);
        assert_eq!(cookie(&h).as_deref(), Some("abc"));
        assert_eq!(cookie(&headers(&[("cookie", "aep_uix=1")])), None);
    }
}
