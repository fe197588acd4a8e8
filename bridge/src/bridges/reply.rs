//! The reply routes of observed servers: asks nothing holds open (an OpenCode-shaped bus
//! `permission.asked`, a kap-server approval), answered around the agent over the route the
//! vendor's spec describes (`aep_adapters::spec::ReplyRoute`: `POST {server}{path}` with the
//! option, and free text where the body takes it). This module is the I/O and the book; the
//! shapes are the vendor's folder's.
//!
//! Shared by the observers (`bridges::opencode`, `bridges::kimi_ws`) and the hook receiver
//! (the asks of a plugin's bus moment, the server address from its payload). The ack is the
//! REST answer (2xx `control.accepted`, unless the route's verdict in the body refuses;
//! another status `refused`; unreachable `busy`; no answer within the guard `accepted`: the
//! write may still land). The outcome has one source, the vendor's settling broadcast
//! ([`Replies::outcome`]): `attention.answered` (`via: "control"`, cause = the command) then
//! `attention.resolved` (cause = the answered event), after the ack; without a command,
//! `attention.resolved` alone. Free text rides only a route whose body takes it (Kilo Code's
//! `message`, Kimi's `feedback`); elsewhere it is refused `invalid`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::EventDraft;
use aep_adapters::spec::ReplyRoute as RouteSpec;
use aep_schemas::Event;
use serde_json::json;
use tokio::sync::watch;

use crate::attention::{AttentionBook, Pending};
use crate::control::{Applied, ControlLoop, ReplyRoute, RouteVerdict};
use crate::pipeline::Pipeline;
use crate::transport::HttpClient;
/// A path segment, percent-encoded outside the unreserved set (the pipeline's encoder).
pub(crate) use aep_schemas::ids::percent_encode as segment;

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
    /// The shape of the server's reply route (the vendor's spec).
    pub route: &'static RouteSpec,
    settling: Option<Settling>,
}

impl Ask {
    /// A new ask (nothing being delivered).
    pub fn new(
        vendor_id: String,
        session: String,
        pending: Pending,
        base: Option<String>,
        route: &'static RouteSpec,
    ) -> Self {
        Self { vendor_id, session, pending, base, route, settling: None }
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

/// The asks of one receiver, each answered over its own server's reply route.
pub struct Replies {
    asks: Mutex<Asks>,
    /// Command id -> its "ack published" signal, until the ack is out (or the command refused).
    acks: Mutex<HashMap<String, watch::Sender<bool>>>,
    rest: HttpClient,
    guard: Duration,
}

impl Replies {
    /// A book replying with `rest`; a reply still pending after `guard` is acked anyway.
    pub fn new(rest: HttpClient, guard: Duration) -> Arc<Self> {
        Arc::new(Self { asks: Mutex::default(), acks: Mutex::default(), rest, guard })
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
        // Marked settling before the write: the broadcast may overtake the REST answer.
        let (vendor_id, session, base, route, option) = {
            let Ok(mut asks) = self.asks.lock() else { return RouteVerdict::Rejected("busy", "state lock".into()) };
            let Some(vendor_id) = asks.by_event.get(&request.id).cloned() else {
                return invalid("the request was settled meanwhile");
            };
            let Some(ask) = asks.by_vendor.get_mut(&vendor_id) else {
                return invalid("the request was settled meanwhile");
            };
            let route = ask.route;
            let Some(option) = answer.option.clone() else {
                return invalid(&format!("answer with an option: {}", route.option_list()));
            };
            let Some(base) = ask.base.clone() else { return invalid("this request is observed only") };
            if answer.text.is_some() && !route.takes_text() {
                // The design record: nothing on OpenCode's reply route carries free text.
                return invalid(&format!(
                    "free text cannot be delivered on this reply route: answer {}",
                    route.option_list()
                ));
            }
            if ask.settling.is_some() {
                return invalid("another answer to this request is being delivered");
            }
            let (tx, acked) = watch::channel(false);
            if let Ok(mut a) = self.acks.lock() {
                a.insert(cmd.id.clone(), tx);
            }
            ask.settling = Some(Settling { command: cmd.id.clone(), applied: answer.clone(), acked });
            (vendor_id, ask.session.clone(), base, route, option)
        };
        let url = format!("{base}{}", route.path_for(&segment(&session), &segment(&vendor_id)));
        let body = route.body(&option, answer.text.as_deref());
        let verdict = match tokio::time::timeout(self.guard, self.rest.post_json(&url, &body)).await {
            Ok(Ok(r)) if (200..300).contains(&r.status) => match route.accepted(&r.body) {
                Ok(()) => RouteVerdict::Accepted,
                Err(why) => RouteVerdict::Rejected("refused", why),
            },
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
    /// server's reply `route` when the plugin names a loopback server (the route's bus
    /// moment says where); any other card claiming control is declared answered out of band
    /// (AEP-0008), since no answer sent here could reach the vendor.
    pub fn raise_plugin_asks(
        self: &Arc<Self>,
        route: &'static RouteSpec,
        vendor: &str,
        payload: &serde_json::Value,
        drafts: &mut [EventDraft],
        at: &PluginAsks<'_>,
    ) {
        let base = route.server_of(payload).and_then(loopback_base);
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
                    self.raise(Ask::new(vendor_id, session, p, Some(base.clone()), route), at.control, at.book);
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
