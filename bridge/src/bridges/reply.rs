//! The permission reply route of OpenCode-shaped servers (the OpenCode adapter design record's
//! "respond" section; the Kilo Code record's `>=7.4.6` bus surface): asks raised from a bus
//! `permission.asked` / `permission.updated` that nothing holds open, answered around the
//! agent over `POST {server}/session/{session}/permissions/{id}` `{"response": option}`.
//!
//! Shared by the SSE observer (`bridges::opencode`) and the hook receiver (the plugin's bus
//! moments, the server address from the plugin's `serverUrl`). The ack is the REST answer
//! (2xx `control.accepted`; another status `refused`; unreachable `busy`; no answer within the
//! guard `accepted`: the write may still land). The outcome has one source, the vendor's
//! `permission.replied` broadcast ([`Replies::outcome`]): `attention.answered` (`via:
//! "control"`, cause = the command) then `attention.resolved` (cause = the answered event),
//! after the ack; without a command, `attention.resolved` alone. Free text rides only a
//! route whose body takes a `message` (Kilo Code's); elsewhere it is refused `invalid`.
//!
//! The same book serves Kimi Code's kap-server ([`Dialect::Kimi`], the `kimi-ws` observer):
//! `POST {server}/api/v1/sessions/{session}/approvals/{id}` `{"decision": option}`, free text
//! as `feedback`, the ack read from the server's `{code, msg, data}` envelope.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::EventDraft;
use aep_schemas::Event;
use serde_json::json;
use tokio::sync::watch;

use crate::attention::{AttentionBook, Pending};
use crate::control::{Applied, ControlLoop, ReplyRoute, RouteVerdict};
use crate::pipeline::Pipeline;
/// A path segment, percent-encoded outside the unreserved set (the pipeline's encoder).
pub(crate) use crate::stamp::uri_segment as segment;
use crate::transport::HttpClient;

/// Asks tracked at most (an ask never settled is dropped oldest first beyond).
const MAX_ASKS: usize = 4096;

/// A raised ask.
pub struct Ask {
    /// The vendor's request id (`per_...`).
    pub vendor_id: String,
    /// Its session.
    pub session: String,
    /// The request as published.
    pub pending: Pending,
    /// The server's base URL, for the reply; `None`: observed only.
    pub base: Option<String>,
    /// Whether the server's reply body takes a `message`.
    pub message: bool,
    settling: Option<Settling>,
}

impl Ask {
    /// A new ask (nothing being delivered).
    pub fn new(vendor_id: String, session: String, pending: Pending, base: Option<String>, message: bool) -> Self {
        Self { vendor_id, session, pending, base, message, settling: None }
    }

    /// Whether an answer was delivered (or is being delivered) by a command.
    pub fn settling(&self) -> bool {
        self.settling.is_some()
    }
}

/// An answer being delivered: the command, its answer, and whether its ack is out.
struct Settling {
    command: String,
    applied: Applied,
    acked: watch::Receiver<bool>,
}

#[derive(Default)]
struct Asks {
    by_vendor: HashMap<String, Ask>,
    /// Request event id -> vendor id.
    by_event: HashMap<String, String>,
    order: VecDeque<String>,
}

/// The shape of a server's reply route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// OpenCode / Kilo Code: `POST {base}/session/{session}/permissions/{id}`
    /// `{"response": option}` (plus `message` where the route takes it); a 2xx is the ack.
    OpenCode,
    /// Kimi Code's kap-server (the design record's opt-in `control.attention.respond`):
    /// `POST {base}/api/v1/sessions/{session}/approvals/{id}` `{"decision": option}`, free
    /// text as `feedback`; the answer is a `{code, msg, data}` envelope whose code 0 is the ack.
    Kimi,
}

/// The asks of one receiver and their reply route.
pub struct Replies {
    dialect: Dialect,
    asks: Mutex<Asks>,
    /// Command id -> its "ack published" signal, until the ack is out (or the command refused).
    acks: Mutex<HashMap<String, watch::Sender<bool>>>,
    rest: HttpClient,
    guard: Duration,
}

/// The gated decoration of a permission card: the server's reply enum verbatim as options
/// and the control channel declared (AEP-0008 `respond_via`).
pub fn decorate(d: &mut EventDraft) {
    d.data.insert(
        "options".into(),
        json!([
            {"id": "once", "label": "Allow once"},
            {"id": "always", "label": "Always allow"},
            {"id": "reject", "label": "Reject"}
        ]),
    );
    d.data.insert("respond_via".into(), json!(["control"]));
}

/// The gated decoration of a Kimi Code approval card: the kap-server's decision vocabulary
/// (`approved` / `rejected`) as options and the control channel declared.
pub fn decorate_kimi(d: &mut EventDraft) {
    d.data.insert(
        "options".into(),
        json!([{"id": "approved", "label": "Approve"}, {"id": "rejected", "label": "Reject"}]),
    );
    d.data.insert("respond_via".into(), json!(["control"]));
}

impl Replies {
    /// A book replying with `rest`; a reply still pending after `guard` is acked anyway.
    pub fn new(rest: HttpClient, guard: Duration) -> Arc<Self> {
        Self::with_dialect(rest, guard, Dialect::OpenCode)
    }

    /// A book replying over a route of `dialect`.
    pub fn with_dialect(rest: HttpClient, guard: Duration, dialect: Dialect) -> Arc<Self> {
        Arc::new(Self { dialect, asks: Mutex::default(), acks: Mutex::default(), rest, guard })
    }

    /// Whether vendor request `vendor_id` is tracked.
    pub fn knows(&self, vendor_id: &str) -> bool {
        self.asks.lock().is_ok_and(|a| a.by_vendor.contains_key(vendor_id))
    }

    /// Tracks `ask`, and when it has a server, registers it with `control` as answerable
    /// over this route. An ask pushed out by the bound is forgotten by `control` and `book`.
    pub fn raise(self: &Arc<Self>, ask: Ask, control: &ControlLoop, book: &AttentionBook) {
        if ask.base.is_some() {
            control.register_route(ask.pending.clone(), self.clone());
        }
        let Ok(mut a) = self.asks.lock() else { return };
        a.by_event.insert(ask.pending.id.clone(), ask.vendor_id.clone());
        a.order.push_back(ask.vendor_id.clone());
        a.by_vendor.insert(ask.vendor_id.clone(), ask);
        while a.by_vendor.len() > MAX_ASKS {
            let Some(old) = a.order.pop_front() else { break };
            if let Some(x) = a.by_vendor.remove(&old) {
                a.by_event.remove(&x.pending.id);
                control.forget(&x.pending.id);
                book.take(&x.pending.id);
            }
        }
    }

    /// Stops tracking vendor request `vendor_id`.
    pub fn take(&self, vendor_id: &str) -> Option<Ask> {
        let mut a = self.asks.lock().ok()?;
        let x = a.by_vendor.remove(vendor_id)?;
        a.by_event.remove(&x.pending.id);
        a.order.retain(|v| v != vendor_id);
        Some(x)
    }

    /// Stops tracking the request published as event `id`.
    pub fn take_request(&self, id: &str) -> Option<Ask> {
        let v = self.asks.lock().ok()?.by_event.get(id).cloned()?;
        self.take(&v)
    }

    /// The vendor ids of the asks tracked in `session`.
    pub fn asks_of(&self, session: &str) -> Vec<String> {
        self.asks.lock().map_or_else(
            |_| Vec::new(),
            |a| a.by_vendor.values().filter(|x| x.session == session).map(|x| x.vendor_id.clone()).collect(),
        )
    }

    /// The vendor ids of the tracked permission asks.
    pub fn permissions(&self) -> Vec<String> {
        self.asks.lock().map_or_else(
            |_| Vec::new(),
            |a| a.by_vendor.values().filter(|x| x.pending.kind == "permission").map(|x| x.vendor_id.clone()).collect(),
        )
    }

    /// The outcome of a settled ask: `attention.answered` + `attention.resolved` for a
    /// command's answer (once its ack is out, AEP-0004 §1), else `attention.resolved` with
    /// `resolution`. The request stops being answerable.
    pub async fn outcome(
        &self,
        mut ask: Ask,
        resolution: &str,
        control: &ControlLoop,
        pipeline: &Pipeline,
    ) -> Vec<EventDraft> {
        control.forget(&ask.pending.id);
        let now = crate::time::now_ms();
        let Some(s) = ask.settling.take() else {
            return vec![ask.pending.resolved(now, resolution)];
        };
        let mut acked = s.acked;
        let _ = tokio::time::timeout(self.guard + Duration::from_secs(2), acked.wait_for(|a| *a)).await;
        let mut answered = control.answered(&ask.pending, &s.applied, &s.command);
        answered.data.insert("via".into(), json!("control"));
        let answered_id = pipeline.mint_id();
        answered.id = Some(answered_id.clone());
        let mut resolved = ask.pending.resolved(now, "answered");
        resolved.cause = Some(answered_id);
        vec![answered, resolved]
    }

    async fn deliver_now(&self, request: &Pending, answer: &Applied, cmd: &Event) -> RouteVerdict {
        let invalid = |why: &str| RouteVerdict::Rejected("invalid", why.to_owned());
        if answer.values.is_some() {
            return invalid("a permission is answered with an option, not values");
        }
        let Some(option) = answer.option.clone() else {
            return invalid(match self.dialect {
                Dialect::OpenCode => "answer with an option: once, always or reject",
                Dialect::Kimi => "answer with an option: approved or rejected",
            });
        };
        // Marked settling before the write: the broadcast may overtake the REST answer.
        let (vendor_id, session, base, message) = {
            let Ok(mut asks) = self.asks.lock() else { return RouteVerdict::Rejected("busy", "state lock".into()) };
            let Some(vendor_id) = asks.by_event.get(&request.id).cloned() else {
                return invalid("the request was settled meanwhile");
            };
            let Some(ask) = asks.by_vendor.get_mut(&vendor_id) else {
                return invalid("the request was settled meanwhile");
            };
            let Some(base) = ask.base.clone() else { return invalid("this request is observed only") };
            if answer.text.is_some() && !ask.message {
                // The design record: nothing on OpenCode's reply route carries free text.
                return invalid("free text cannot be delivered on this reply route: answer once, always or reject");
            }
            if ask.settling.is_some() {
                return invalid("another answer to this request is being delivered");
            }
            let (tx, acked) = watch::channel(false);
            if let Ok(mut a) = self.acks.lock() {
                a.insert(cmd.id.clone(), tx);
            }
            ask.settling = Some(Settling { command: cmd.id.clone(), applied: answer.clone(), acked });
            (vendor_id, ask.session.clone(), base, ask.message)
        };
        let (url, mut body) = match self.dialect {
            Dialect::OpenCode => (
                format!("{base}/session/{}/permissions/{}", segment(&session), segment(&vendor_id)),
                json!({"response": option}),
            ),
            Dialect::Kimi => (
                format!("{base}/api/v1/sessions/{}/approvals/{}", segment(&session), segment(&vendor_id)),
                json!({"decision": option}),
            ),
        };
        if let (true, Some(t)) = (message, &answer.text) {
            body[if self.dialect == Dialect::Kimi { "feedback" } else { "message" }] = json!(t);
        }
        let verdict = match tokio::time::timeout(self.guard, self.rest.post_json(&url, &body)).await {
            Ok(Ok(r)) if (200..300).contains(&r.status) && self.dialect == Dialect::Kimi => kimi_verdict(&r.body),
            Ok(Ok(r)) if (200..300).contains(&r.status) => RouteVerdict::Accepted,
            Ok(Ok(r)) => {
                let snippet = String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned();
                RouteVerdict::Rejected("refused", format!("the server answered HTTP {}: {snippet}", r.status))
            }
            Ok(Err(e)) => RouteVerdict::Rejected("busy", format!("the server is unreachable: {e}")),
            // Will-try: the write may still land; the settling mark stays for its broadcast.
            Err(_) => RouteVerdict::Accepted,
        };
        if verdict != RouteVerdict::Accepted {
            if let Ok(mut a) = self.acks.lock() {
                a.remove(&cmd.id);
            }
            if let Ok(mut asks) = self.asks.lock()
                && let Some(ask) = asks.by_vendor.get_mut(&vendor_id)
                && ask.settling.as_ref().is_some_and(|s| s.command == cmd.id)
            {
                ask.settling = None;
            }
        }
        verdict
    }
}

impl ReplyRoute for Replies {
    fn deliver<'a>(
        &'a self,
        request: &'a Pending,
        answer: &'a Applied,
        cmd: &'a Event,
    ) -> futures_util::future::BoxFuture<'a, RouteVerdict> {
        Box::pin(self.deliver_now(request, answer, cmd))
    }

    fn acked(&self, _request: &str, cmd: &str) {
        if let Some(tx) = self.acks.lock().ok().and_then(|mut a| a.remove(cmd)) {
            let _ = tx.send(true);
        }
    }
}

/// The ack of a kap-server answer: its envelope's `code` 0 (the server answers HTTP 200 with
/// the error in the envelope, e.g. 40404 not found, 40902 already resolved).
fn kimi_verdict(body: &[u8]) -> RouteVerdict {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap_or(serde_json::Value::Null);
    match v.get("code").and_then(serde_json::Value::as_i64) {
        Some(0) => RouteVerdict::Accepted,
        code => {
            let msg = v.get("msg").and_then(serde_json::Value::as_str).unwrap_or("no envelope");
            RouteVerdict::Rejected("refused", format!("the server answered code {}: {msg}", code.unwrap_or(-1)))
        }
    }
}

/// The base URL of a plugin's `serverUrl` when it is a loopback `http(s)` server: the hook
/// receiver writes only there (a hook payload must not point the bridge's writes elsewhere).
pub fn loopback_base(server_url: &str) -> Option<String> {
    let u = url::Url::parse(server_url).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    let loopback = match u.host()? {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    if !loopback || !u.username().is_empty() || u.password().is_some() {
        return None;
    }
    Some(server_url.trim_end_matches('/').to_owned())
}

/// The vendor request id a plugin bus moment settles (`permission.replied` /
/// `question.replied`), if it is one.
pub fn settled_id(payload: &serde_json::Value) -> Option<&str> {
    let ev = payload.get("event")?;
    let ty = ev.get("type")?.as_str()?;
    if !matches!(ty, "permission.replied" | "question.replied") {
        return None;
    }
    ev.pointer("/properties/permissionID").or_else(|| ev.pointer("/properties/requestID"))?.as_str()
}

/// The vendors whose plugins ask on the bus (their reply route's body takes a `message` for Kilo Code).
fn route_vendor(vendor: &str) -> Option<bool> {
    match vendor {
        "opencode" => Some(false),
        "kilocode" => Some(true),
        _ => None,
    }
}

/// What [`Replies::raise_plugin_asks`] needs from the hook receiver.
pub struct PluginAsks<'a> {
    /// The control loop the routes register with.
    pub control: &'a ControlLoop,
    /// The attention book (requests opened before publication).
    pub book: &'a AttentionBook,
    /// Mints the request ids.
    pub pipeline: &'a Pipeline,
    /// The hook's clock, Unix ms.
    pub now: u64,
}

impl Replies {
    /// The answerable permission cards among a plugin bus moment's drafts (the bus asks of
    /// OpenCode 1.18.33 / Kilo Code >= 7.4.6, which nothing holds open): raised on the
    /// server's reply route when the plugin names a loopback server (`serverUrl`); any other
    /// card claiming control is declared answered out of band (AEP-0008), since no answer
    /// sent here could reach the vendor.
    pub fn raise_plugin_asks(
        self: &Arc<Self>,
        vendor: &str,
        payload: &serde_json::Value,
        drafts: &mut [EventDraft],
        at: &PluginAsks<'_>,
    ) {
        let Some(message) = route_vendor(vendor) else { return };
        let base = payload.get("serverUrl").and_then(serde_json::Value::as_str).and_then(loopback_base);
        for d in drafts.iter_mut().filter(|d| {
            d.r#type == "attention.requested"
                && d.data
                    .get("respond_via")
                    .and_then(serde_json::Value::as_array)
                    .is_some_and(|v| v.iter().any(|x| x == "control"))
        }) {
            let vendor_id = d.correlation_key.as_deref().and_then(|k| k.strip_prefix("attention:")).map(str::to_owned);
            let permission = d.data.get("kind").and_then(serde_json::Value::as_str) == Some("permission");
            match (&base, d.session.clone(), vendor_id) {
                (Some(base), Some(session), Some(vendor_id)) if permission => {
                    let id = at.pipeline.mint_id();
                    d.id = Some(id.clone());
                    let p = Pending::from_request(
                        id,
                        vendor,
                        session.clone(),
                        d.run.clone(),
                        d.subject.clone(),
                        &d.data,
                        at.now,
                    );
                    at.book.open(p.clone());
                    self.raise(Ask::new(vendor_id, session, p, Some(base.clone()), message), at.control, at.book);
                }
                _ => {
                    d.data.insert("respond_via".into(), json!(["oob"]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_servers_are_written_to_and_ids_are_path_safe() {
        assert_eq!(loopback_base("http://127.0.0.1:4096/").as_deref(), Some("http://127.0.0.1:4096"));
        assert_eq!(loopback_base("http://localhost:4096").as_deref(), Some("http://localhost:4096"));
        assert_eq!(loopback_base("http://[::1]:4096/").as_deref(), Some("http://[::1]:4096"));
        for bad in ["http://10.0.0.1:4096", "https://example.com", "file:///etc/passwd", "http://u:p@127.0.0.1:1", "x"]
        {
            assert_eq!(loopback_base(bad), None, "{bad}");
        }
        assert_eq!(segment("per_1/../x y"), "per_1%2F..%2Fx%20y");
    }
}
