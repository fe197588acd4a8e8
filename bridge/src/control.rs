//! The control loop (AEP-0004, AEP-0006, AEP-0008): held permission and question moments
//! answered over `control.attention.respond` from the embedded collector's WebSocket or
//! the upstream relay, with one ack decision per deduplicated command.
//!
//! A hook whose mapping emitted an `attention.requested` declaring `respond_via: ["control"]`
//! on a moment the vendor lets us answer is held open. The request's id is minted and its
//! waiter registered before the request is published ([`ControlLoop::register`]), so a
//! command sent the instant the request is seen finds it. The loop owns the receiving end
//! of the command channel ([`crate::commands`]); it resolves a held moment on the first of
//! - a `control.attention.respond` command: `control.accepted`, `attention.answered`,
//!   `attention.resolved` (cause-linked to the command), then the vendor's own reply;
//! - the timeout: `attention.timeout`, then the neutral reply (fail-open: the vendor's
//!   own dialog takes over);
//! - a parallel-surface settlement (a tool outcome for the same tool while pending, see
//!   [`crate::attention`]): `attention.resolved` dismissed, then the neutral reply.
//!
//! A request nothing holds open but a server lets us answer around the agent (an
//! observer's ask on its server's reply route) is registered with a [`ReplyRoute`] instead
//! ([`ControlLoop::register_route`]): a command's answer is handed to the route, the ack is
//! the route's verdict, and the outcome events are the route owner's, from the vendor's own
//! settle broadcast (never the loop's: the write's 200 is the ack's evidence, not the outcome).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::{EventDraft, MapContext};
use aep_schemas::{Capture, Event};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::attention::{AttentionBook, Pending};
use crate::commands::{Inbox, Owned, ReadOnly};
use crate::pipeline::{Pipeline, Stamped};
use crate::time::now_ms;

/// `[control]`: the human-approval loop.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// How long a held permission moment waits for an answer, seconds.
    pub attention_timeout_secs: u64,
    /// Opt-in gates for vendors whose permission moment is not held by default:
    /// vendor -> tool names (empty list = every tool).
    pub gates: BTreeMap<String, Vec<String>>,
}

impl Default for ControlConfig {
    fn default() -> Self {
        Self { attention_timeout_secs: 55, gates: BTreeMap::new() }
    }
}

impl ControlConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[control]`:
    /// the section judges its own values; `config` prefixes the keys and adds the checks
    /// across sections.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for vendor in self.gates.keys() {
            if aep_adapters::vendors::spec(vendor).and_then(|s| s.control.gate).is_none() {
                out.push((
                    format!("gates.{vendor}"),
                    format!(
                        "no opt-in gate for this vendor (vendors with one: {})",
                        aep_adapters::vendors::SPECS
                            .iter()
                            .filter(|s| s.control.gate.is_some())
                            .map(|s| s.id)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        if self.attention_timeout_secs == 0 || self.attention_timeout_secs > 3600 {
            out.push(("attention_timeout_secs".into(), "must be between 1 and 3600".into()));
        }
        out
    }
}

/// Commands remembered for dedupe and byte-identical re-acks (AEP-0004 §2.3, §3).
const DEDUPE_MEMORY: usize = 4096;

/// What was decided for a held moment.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// An answer was applied.
    Answer(Applied),
    /// Settled elsewhere (the vendor's own surface): reply neutrally.
    Dismissed,
}

pub use aep_adapters::spec::Decision as Applied;

/// A held hook waiting for its outcome, or a routed request.
struct Waiter {
    to: Deliver,
    pending: Pending,
}

/// Where an applied answer goes.
enum Deliver {
    /// The held hook's reply.
    Held(oneshot::Sender<Outcome>),
    /// A server's reply route.
    Route(Arc<dyn ReplyRoute>),
}

/// What a [`ReplyRoute`] made of an answer: the ack decision (AEP-0004 §3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteVerdict {
    /// The write landed (or may still land): `control.accepted`.
    Accepted,
    /// `control.rejected` with this reason (`refused`, `busy`, `invalid`) and detail.
    Rejected(&'static str, String),
}

/// A reply route: delivers an answer to a request the agent does not hold open, around it
/// (a REST write beside an observed stream). The outcome is the owner's to emit when the
/// vendor broadcasts its settle.
pub trait ReplyRoute: Send + Sync {
    /// Delivers `answer` to `request` for command `cmd`; the verdict is the ack.
    fn deliver<'a>(
        &'a self,
        request: &'a Pending,
        answer: &'a Applied,
        cmd: &'a Event,
    ) -> futures_util::future::BoxFuture<'a, RouteVerdict>;
    /// The `control.accepted` for `cmd` is published: outcomes may follow it now.
    fn acked(&self, request: &str, cmd: &str);
}

enum DedupeEntry {
    /// Decided: the recorded ack, re-sent byte-identically on redelivery.
    Acked(Arc<Stamped>),
    /// A decision is being made; a duplicate needs no extra ack.
    InFlight,
}

#[derive(Default)]
struct Dedupe {
    map: HashMap<(String, String), DedupeEntry>,
    order: VecDeque<(String, String)>,
}

/// The control loop: the hook handler holds moments on it; commands reach it only through
/// its [`Inbox`].
pub struct ControlLoop {
    pipeline: Pipeline,
    book: Arc<AttentionBook>,
    cx: MapContext,
    waiters: Mutex<HashMap<String, Waiter>>,
    dedupe: Mutex<Dedupe>,
    /// Sessions this process owns (maps hooks for), shared with the command senders.
    owned: Arc<Owned>,
    /// The agents that take no command.
    read_only: ReadOnly,
    timeout: Duration,
}

/// A moment registered before its request is published; [`Held::wait`] for its outcome.
/// Dropping it unregisters the waiter (the request was never published, or the hook gave up).
pub struct Held {
    control: Arc<ControlLoop>,
    id: String,
    rx: Option<oneshot::Receiver<Outcome>>,
}

impl ControlLoop {
    /// A loop over `pipeline` whose held moments wait at most `timeout`, and the task that
    /// takes commands from `inbox` (it ends when every sender is gone).
    pub fn start(
        pipeline: Pipeline,
        book: Arc<AttentionBook>,
        cx: MapContext,
        timeout: Duration,
        inbox: Inbox,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        let Inbox { mut rx, owned, read_only } = inbox;
        let this = Arc::new(Self {
            pipeline,
            book,
            cx,
            waiters: Mutex::new(HashMap::new()),
            dedupe: Mutex::new(Dedupe::default()),
            owned,
            read_only,
            timeout,
        });
        let control = this.clone();
        let task = tokio::spawn(async move {
            while let Some(cmd) = rx.recv().await {
                // Each decision awaits the pipeline; one slow decision must not delay the next.
                tokio::spawn(control.clone().command(cmd));
            }
        });
        (this, task)
    }

    /// Claims the sessions of drafts about to be published, so a command routed the
    /// instant one of them is seen finds its owner.
    pub fn claim(&self, agent: &str, drafts: &[EventDraft]) {
        for d in drafts {
            if let Some(session) = &d.session
                && d.r#type != "session.ended"
                && !aep_schemas::event::is_agent_scoped(&d.r#type)
            {
                self.owned.claim(session, agent);
            }
        }
    }

    /// Releases the sessions that ended, from events this process stamped.
    pub fn observe(&self, stamped: &[Arc<Stamped>]) {
        for s in stamped {
            if let Some(session) = &s.event.session
                && s.event.r#type == "session.ended"
            {
                self.owned.release(session);
            }
        }
    }

    /// Registers a waiter for `pending`, whose request is about to be published with id
    /// `pending.id` (minted by the caller): an answer can arrive from then on.
    pub fn register(self: &Arc<Self>, pending: Pending) -> Held {
        let (tx, rx) = oneshot::channel();
        let id = pending.id.clone();
        if let Ok(mut w) = self.waiters.lock() {
            w.insert(id.clone(), Waiter { to: Deliver::Held(tx), pending });
        }
        Held { control: self.clone(), id, rx: Some(rx) }
    }

    /// Registers `pending`, about to be published, as answerable over `route`. It stays
    /// answerable until a command is accepted for it or [`Self::forget`] (the vendor settled
    /// it, or its session ended): no timeout, the vendor's own prompt runs meanwhile.
    pub fn register_route(&self, pending: Pending, route: Arc<dyn ReplyRoute>) {
        if let Ok(mut w) = self.waiters.lock() {
            w.insert(pending.id.clone(), Waiter { to: Deliver::Route(route), pending });
        }
    }

    /// Drops request `id`: a later command for it is refused as unknown or settled.
    pub fn forget(&self, id: &str) {
        self.unregister(id);
    }

    /// Wakes the waiters of requests the attention book settled elsewhere.
    pub fn dismissed(&self, ids: &[String]) {
        let Ok(mut w) = self.waiters.lock() else { return };
        for id in ids {
            if let Some(Waiter { to: Deliver::Held(tx), .. }) = w.remove(id) {
                let _ = tx.send(Outcome::Dismissed);
            }
        }
    }

    /// Whether a held moment waits for an answer to request `id`.
    pub fn is_waiting(&self, id: &str) -> bool {
        self.waiters.lock().is_ok_and(|w| w.contains_key(id))
    }

    fn unregister(&self, id: &str) -> Option<Waiter> {
        self.waiters.lock().ok().and_then(|mut w| w.remove(id))
    }

    /// Handles one command (from the collector or the relay); acks go out as events.
    pub async fn command(self: Arc<Self>, cmd: Event) {
        let key = (cmd.source.to_string(), cmd.id.clone());
        // AEP-0004 §2.3 / §3: dedupe on (source, id); a decided command is re-acked byte-identically.
        let recorded: Option<Option<Arc<Stamped>>> = {
            let Ok(mut d) = self.dedupe.lock() else { return };
            match d.map.get(&key) {
                Some(DedupeEntry::Acked(ack)) => Some(Some(ack.clone())),
                Some(DedupeEntry::InFlight) => Some(None),
                None => {
                    d.map.insert(key.clone(), DedupeEntry::InFlight);
                    d.order.push_back(key.clone());
                    while d.order.len() > DEDUPE_MEMORY {
                        if let Some(old) = d.order.pop_front() {
                            d.map.remove(&old);
                        }
                    }
                    None
                }
            }
        };
        match recorded {
            Some(Some(ack)) => {
                let _ = self.pipeline.submit_event("control", ack.event.clone()).await;
                return;
            }
            Some(None) => return,
            None => {}
        }
        let ack = self.decide(&cmd).await;
        if let Ok(mut d) = self.dedupe.lock() {
            match ack {
                Some(a) => {
                    d.map.insert(key, DedupeEntry::Acked(a));
                }
                None => {
                    d.map.remove(&key);
                }
            }
        }
    }

    async fn decide(&self, cmd: &Event) -> Option<Arc<Stamped>> {
        let session = cmd.session.clone().unwrap_or_default();
        let agent = self.owned.agent_of(&session)?;
        if !self.read_only.accepts(&agent).contains(&cmd.r#type.as_str()) {
            return self
                .reject(&agent, &session, cmd, "unsupported", format!("{} is not accepted here", cmd.r#type))
                .await;
        }
        let request = cmd.subject.clone().or_else(|| cmd.cause.clone()).unwrap_or_default();
        // The waiter was registered before the request was published: absent means unknown
        // or already settled, never "not yet".
        let found = self.waiters.lock().ok().and_then(|w| {
            w.get(&request).map(|w| {
                let route = match &w.to {
                    Deliver::Route(r) => Some(r.clone()),
                    Deliver::Held(_) => None,
                };
                (w.pending.clone(), route)
            })
        });
        let Some((pending, route)) = found else {
            return self
                .reject(
                    &agent,
                    &session,
                    cmd,
                    "invalid",
                    format!("no pending attention request {request:?} in this session"),
                )
                .await;
        };
        let answer = cmd.data.as_ref().and_then(|d| d.get("answer")).cloned().unwrap_or(Value::Null);
        let applied = match pending.apply(&answer) {
            Ok(a) => a,
            // AEP-0006: an invalid answer is nacked and the request stays pending.
            Err(why) => return self.reject(&pending.agent, &session, cmd, "invalid", why).await,
        };
        if let Some(route) = route {
            return self.routed(&*route, &pending, &applied, cmd, &session).await;
        }
        let Some(Waiter { to: Deliver::Held(tx), .. }) = self.unregister(&request) else {
            return self
                .reject(&pending.agent, &session, cmd, "invalid", "the request was settled meanwhile".into())
                .await;
        };
        let mut accepted = EventDraft::new("control.accepted", Capture::Metadata);
        accepted.session = Some(session.clone());
        accepted.run = pending.run.clone();
        accepted.cause = Some(cmd.id.clone());
        let mut answered = self.answered(&pending, &applied, &cmd.id);
        answered.data.insert("by".into(), json!(aep_adapters::attention::responder(cmd)));
        let mut resolved = pending.resolved(now_ms(), "answered");
        resolved.cause = Some(cmd.id.clone());
        let stamped = self
            .pipeline
            .submit_drafts("control", pending.agent.clone(), vec![accepted, answered, resolved])
            .await
            .ok()?;
        self.book.observe(&stamped, now_ms());
        let _ = tx.send(Outcome::Answer(applied));
        stamped.into_iter().next()
    }

    /// A command for a routed request: the route's verdict is the ack; once accepted the
    /// request takes no further command (a later one is refused as settled).
    async fn routed(
        &self,
        route: &dyn ReplyRoute,
        pending: &Pending,
        applied: &Applied,
        cmd: &Event,
        session: &str,
    ) -> Option<Arc<Stamped>> {
        match route.deliver(pending, applied, cmd).await {
            RouteVerdict::Rejected(reason, detail) => self.reject(&pending.agent, session, cmd, reason, detail).await,
            RouteVerdict::Accepted => {
                self.unregister(&pending.id);
                let mut accepted = EventDraft::new("control.accepted", Capture::Metadata);
                accepted.session = Some(session.to_owned());
                accepted.run = pending.run.clone();
                accepted.cause = Some(cmd.id.clone());
                let stamped = self.pipeline.submit_drafts("control", pending.agent.clone(), vec![accepted]).await.ok();
                route.acked(&pending.id, &cmd.id);
                stamped?.into_iter().next()
            }
        }
    }

    /// `attention.answered` with the applied answer, gated at the attention ceiling
    /// ([`Pending::answered`] at this loop's capture posture).
    pub fn answered(&self, p: &Pending, a: &Applied, cmd: &str) -> EventDraft {
        p.answered(a, cmd, &self.cx)
    }

    async fn reject(
        &self,
        agent: &str,
        session: &str,
        cmd: &Event,
        reason: &str,
        detail: String,
    ) -> Option<Arc<Stamped>> {
        let mut d = EventDraft::new("control.rejected", Capture::Metadata);
        d.session = Some(session.to_owned());
        d.cause = Some(cmd.id.clone());
        d.data.insert("reason".into(), json!(reason));
        // `detail` is redacted-gated (AEP-0004 §3).
        if self.cx.capture >= Capture::Redacted || self.cx.attention_capture >= Capture::Redacted {
            d.data.insert("detail".into(), json!(aep_schemas::redact::redact_text(&detail, &self.cx.redact)));
            d.capture = Capture::Redacted;
        }
        tracing::info!(reason, "Command rejected.");
        let s = self.pipeline.submit_drafts("control", agent.to_owned(), vec![d]).await.ok()?;
        s.into_iter().next()
    }
}

impl Held {
    /// Waits until the request is answered, settled elsewhere, or times out. `None` means
    /// the neutral reply (timeout or dismissal: the agent's own dialog takes over).
    pub async fn wait(mut self) -> Option<Applied> {
        let rx = self.rx.take()?;
        match tokio::time::timeout(self.control.timeout, rx).await {
            Ok(Ok(Outcome::Answer(a))) => Some(a),
            Ok(Ok(Outcome::Dismissed)) | Ok(Err(_)) => None,
            Err(_) => {
                let c = &self.control;
                if let Some(Waiter { pending, .. }) = c.unregister(&self.id) {
                    // Fail-open: the agent's own dialog takes over.
                    let mut d = pending.lifecycle("attention.timeout", Capture::Metadata);
                    d.data.insert("after_ms".into(), json!(c.timeout.as_millis() as u64));
                    if let Ok(s) = c.pipeline.submit_drafts("control", pending.agent.clone(), vec![d]).await {
                        c.book.observe(&s, now_ms());
                    }
                }
                None
            }
        }
    }
}

impl Held {
    /// The request id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// How long [`Held::wait`] waits at most.
    pub fn budget(&self) -> Duration {
        self.control.timeout
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // Still registered means nobody waited for it (publication failed) or the hook's
        // caller went away: nothing can deliver this answer any more.
        self.control.unregister(&self.id);
    }
}
