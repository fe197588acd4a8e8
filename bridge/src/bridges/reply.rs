//! The reply routes of observed servers: asks nothing holds open (a bus permission, a web
//! server's approval, a confirmation), answered around the agent over the route the
//! vendor's spec describes (`aep_adapters::spec::ReplyRoute`:
//! `POST {server}{path}` with the option, and free text where the body takes it). This
//! module is the I/O and the book; the shapes are the vendor's folder's.
//!
//! Shared by the observer runtime (the asks the observers raise) and the hook receiver (the
//! asks of a plugin's bus moment, the server address from its payload). The ack is the REST
//! answer (2xx `control.accepted`, unless the route's verdict in the body refuses; another
//! status `refused`; unreachable `busy`; no answer within the guard `accepted`: the write
//! may still land). The outcome has one source, the vendor's settling broadcast
//! ([`Replies::settle`]): `attention.answered` (`via: "control"`, cause = the command) then
//! `attention.resolved` (cause = the answered event, or the command where the route says
//! so), once the ack is out (AEP-0004 §1); without a command, the vendor's own decision
//! (`via: "oob"`) or `attention.resolved` alone. Free text rides only a route whose body
//! takes it (the route's `text_field`); elsewhere it is refused `invalid`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::EventDraft;
use aep_adapters::spec::{OutcomeCause, ReplyRoute as RouteSpec};
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

    /// The outcome of an ask the vendor settled as `resolution` ([`Self::settle`]).
    pub async fn outcome(
        &self,
        ask: Ask,
        resolution: &str,
        control: &ControlLoop,
        pipeline: &Pipeline,
    ) -> Vec<EventDraft> {
        let resolution = if resolution == "answered" { "answered" } else { "dismissed" };
        self.settle(ask, Some(resolution), None, control, pipeline).await
    }

    /// The outcome of a settled ask; the request stops being answerable. With a command's
    /// answer delivered (and `resolution` `answered`, or unknown): `attention.answered` +
    /// `attention.resolved`, once the command's ack is out (AEP-0004 §1; an ack that never
    /// came leaves `attention.resolved` alone). Else the vendor's own decision (`answered`,
    /// `via: "oob"`) + `attention.resolved`, or `attention.resolved` with `resolution`
    /// (`dismissed` when unknown).
    pub async fn settle(
        &self,
        mut ask: Ask,
        resolution: Option<&str>,
        answered: Option<EventDraft>,
        control: &ControlLoop,
        pipeline: &Pipeline,
    ) -> Vec<EventDraft> {
        control.forget(&ask.pending.id);
        let now = crate::time::now_ms();
        let by_answer = resolution.is_none_or(|r| r == "answered");
        let p = &ask.pending;
        let Some(s) = ask.settling.take().filter(|_| by_answer) else {
            let Some(mut a) = answered.filter(|_| resolution == Some("answered")) else {
                return vec![p.resolved(now, resolution.unwrap_or("dismissed"))];
            };
            // Decided around the bridge: about the request this bridge raised (AEP-0002 §7.1).
            let id = pipeline.mint_id();
            (a.id, a.subject, a.cause, a.cause_key) = (Some(id.clone()), Some(p.id.clone()), Some(p.id.clone()), None);
            a.run.clone_from(&p.run);
            let mut resolved = p.resolved(now, "answered");
            resolved.cause = Some(id);
            return vec![a, resolved];
        };
        let mut acked = s.acked;
        let waited = tokio::time::timeout(self.guard + Duration::from_secs(2), acked.wait_for(|a| *a)).await;
        if !matches!(waited, Ok(Ok(_))) {
            return vec![p.resolved(now, resolution.unwrap_or("answered"))];
        }
        let mut answered = control.answered(p, &s.applied, &s.command);
        answered.data.insert("via".into(), json!("control"));
        let mut resolved = p.resolved(now, "answered");
        resolved.cause = Some(match ask.route.outcome_cause {
            OutcomeCause::Answered => {
                let id = pipeline.mint_id();
                answered.id = Some(id.clone());
                id
            }
            OutcomeCause::Command => s.command,
        });
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
            let Some(option) = answer.option.clone().filter(|o| route.options.iter().any(|(id, _)| id == o)) else {
                return invalid(&format!("answer with an option: {}", route.option_list()));
            };
            let Some(base) = ask.base.clone() else { return invalid("this request is observed only") };
            if answer.text.is_some() && !route.takes_text() {
                // The design records: a body without a text field carries no free text.
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

/// What an observer asks of the book: whether it tracks an ask, and which.
impl aep_adapters::observer::Asks for Replies {
    fn knows(&self, vendor_id: &str) -> bool {
        self.asks.lock().is_ok_and(|a| a.by_vendor.contains_key(vendor_id))
    }

    fn open(&self, session: Option<&str>) -> Vec<(String, String)> {
        let Ok(a) = self.asks.lock() else { return Vec::new() };
        let of = |x: &&Ask| session.is_none_or(|s| x.session == s);
        a.by_vendor.values().filter(of).map(|x| (x.vendor_id.clone(), x.pending.kind.clone())).collect()
    }
}
