#![doc = include_str!("README.md")]

use serde_json::{Value, json};

pub mod observer;
pub mod route;
pub mod spec;

use crate::common::{self, Builder, tool_key};
use crate::translate::{Options, content_text, debug, family_leaf, snake_acronyms};
use crate::{EventDraft, MapContext};

/// The envelope `agent` and the `x.openhands.*` token.
pub const VENDOR: &str = "openhands";

fn s<'a>(ev: &'a Value, k: &str) -> Option<&'a str> {
    ev.get(k).and_then(Value::as_str)
}

/// `SandboxCheckpointEvent` -> `sandbox.checkpoint`: snake case, a trailing `_event`
/// dropped, family/leaf split at the last underscore, `.event` on one-word names.
pub fn kind_type(kind: &str) -> String {
    let snake = snake_acronyms(kind);
    let base = snake.strip_suffix("_event").filter(|b| !b.is_empty()).unwrap_or(&snake);
    family_leaf(base)
}

/// The vendor id and naive server-local timestamp every mapped event carries at metadata
/// (the envelope time is the bridge's receive time: the vendor's carries no offset).
fn base<'a>(ty: impl Into<String>, ev: &Value, cx: &'a MapContext) -> Builder<'a> {
    Builder::new(ty, cx).meta_opt("vendor_ts", s(ev, "timestamp")).meta_opt("vendor_event_id", s(ev, "id"))
}

fn tool_of(ev: &Value) -> (&str, Option<&str>) {
    (s(ev, "tool_name").unwrap_or("unknown"), s(ev, "tool_call_id"))
}

/// Maps one transport-shaped event (`event_transport_dump`) to drafts without identity (the
/// socket scopes the conversation; [`Conversation`] stamps it). The run plane comes from
/// [`status_moments`], not from here.
pub fn map_event(ev: &Value, opts: Options, cx: &MapContext) -> Vec<EventDraft> {
    let Some(kind) = s(ev, "kind") else { return Vec::new() };
    let one = |d: EventDraft| vec![d];
    match kind {
        "ActionEvent" => {
            let (name, call) = tool_of(ev);
            let risk = s(ev, "security_risk").filter(|r| *r != "UNKNOWN");
            let mut d = base("tool.requested", ev, cx)
                .tool(name, call)
                .meta_opt("risk", risk)
                .content("args", ev.get("action"))
                .build();
            d.correlation_key = call.map(tool_key);
            d.step = s(ev, "llm_response_id").map(str::to_owned);
            one(d)
        }
        "ObservationEvent" => {
            let (name, call) = tool_of(ev);
            let obs = ev.get("observation").unwrap_or(&Value::Null);
            let text = obs.get("content").and_then(content_text);
            let mut d = if obs.get("is_error").and_then(Value::as_bool) == Some(true) {
                base("tool.failed", ev, cx).tool(name, call).error("tool_error", text.as_deref()).build()
            } else {
                // A command that ran and exited non-zero is still a completed call: the
                // server says `is_error: false` (the fixture's pin), and the exit code rides
                // beside it.
                let result = text.map(Value::String);
                base("tool.completed", ev, cx).tool(name, call).content("result", result.as_ref()).build()
            };
            // The terminal's exit code, a vendor field at metadata (AEP-0002 §5.4: payloads
            // are open, extensions default to metadata; the registry's `tool.completed` and
            // `tool.failed` name no exit code of their own).
            if let Some(code) = obs.get("exit_code").and_then(Value::as_i64) {
                d.data.insert("exit_code".into(), json!(code));
            }
            d.cause_key = call.map(tool_key);
            one(d)
        }
        "UserRejectObservation" => {
            let (name, call) = tool_of(ev);
            // A hook's rejection is a policy block; a user's is a human decision, not a
            // policy block, and `tool.denied.by` has no `user` value: vendor-scoped.
            let mut d = if s(ev, "rejection_source") == Some("hook") {
                base("tool.denied", ev, cx)
                    .tool(name, call)
                    .meta("by", "policy")
                    .text("reason", s(ev, "rejection_reason"))
                    .build()
            } else {
                debug(base(format!("x.{VENDOR}.{}", kind_type(kind)), ev, cx).tool(name, call).build())
            };
            d.cause_key = call.map(tool_key);
            one(d)
        }
        "AgentErrorEvent" => {
            let (name, call) = tool_of(ev);
            let mut d = base("tool.failed", ev, cx).tool(name, call).error("agent_error", s(ev, "error")).build();
            d.cause_key = call.map(tool_key);
            one(d)
        }
        "MessageEvent" => {
            let role = ev.pointer("/llm_message/role").and_then(Value::as_str);
            let skills = ev.get("activated_skills").and_then(Value::as_array).map(Vec::len).filter(|n| *n > 0);
            let text = ev.pointer("/llm_message/content").and_then(content_text);
            let mut d = debug(
                base(format!("x.{VENDOR}.message.event"), ev, cx)
                    .meta_opt("role", role)
                    .meta_opt("skills", skills)
                    .text("content", text.as_deref())
                    .build(),
            );
            d.step = s(ev, "llm_response_id").map(str::to_owned);
            one(d)
        }
        "Condensation" => {
            let n = ev.get("forgotten_event_ids").and_then(Value::as_array).map(Vec::len);
            one(base("session.compacted", ev, cx).meta_opt("forgotten", n).text("summary", s(ev, "summary")).build())
        }
        "ConversationStateUpdateEvent" => match s(ev, "key") {
            Some("full_state") => one(base("state.snapshot", ev, cx).build()),
            key => {
                let mut b = base("state.delta", ev, cx).meta_opt("key", key);
                if let Some(v) = ev.get("value").and_then(|v| common::gate_value(v, b.ceiling(), cx)) {
                    b.data_mut().insert("value".into(), v);
                }
                one(b.build())
            }
        },
        "ConversationErrorEvent" => {
            one(base("error.raised", ev, cx).meta_opt("code", s(ev, "code")).text("detail", s(ev, "detail")).build())
        }
        "StreamingDeltaEvent" if !opts.deltas => Vec::new(),
        // Raw token-id planes are not observability: nothing, even under the opt-in.
        "TokenEvent" => Vec::new(),
        other => one(debug(base(format!("x.{VENDOR}.{}", kind_type(other)), ev, cx).build())),
    }
}

/// Whether a run is open in `status` (the server's `ConversationExecutionStatus`).
fn run_open(status: Option<&str>) -> bool {
    matches!(status, Some("running" | "paused" | "waiting_for_confirmation"))
}

/// The run and attention moments of one `execution_status` transition (the fixture's
/// `status_transitions`): `running` opens a run; `finished` / `error` / `stuck` close it;
/// `running -> idle` closes it honestly with `reason: idle`; `deleting` cancels it and ends
/// the session (`killed`, the closed enum's honest class); `paused` and
/// `waiting_for_confirmation` never close, and open a run when none is (the observer missed
/// its `running`). Entering `waiting_for_confirmation` asks a
/// read-only permission (no options, no respond path); leaving it resolves the ask
/// (`dismissed` when the exit is `paused` or `deleting`).
pub fn status_moments(prev: Option<&str>, next: &str, cx: &MapContext) -> Vec<EventDraft> {
    if prev == Some(next) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if prev == Some("waiting_for_confirmation") {
        let how = if matches!(next, "paused" | "deleting") { "dismissed" } else { "answered" };
        out.push(Builder::new("attention.resolved", cx).meta("resolution", how).build());
    }
    let open = run_open(prev);
    if run_open(Some(next)) && !open {
        // Entering a status inside a run opens one: `running`, and also a pause or an ask
        // whose `running` the observer missed (it attached after it; the server's replay
        // holds no state updates), so the ask is not left outside any run.
        out.push(Builder::new("run.started", cx).build());
    }
    match next {
        "finished" if open => out.push(Builder::new("run.finished", cx).build()),
        "error" | "stuck" if open => out.push(Builder::new("run.failed", cx).meta("reason", next).build()),
        "idle" if prev == Some("running") => out.push(Builder::new("run.finished", cx).meta("reason", "idle").build()),
        "waiting_for_confirmation" => out.push(
            Builder::new("attention.requested", cx)
                .meta("kind", "permission")
                .meta("prompt", "Awaiting confirmation for a pending action")
                .build(),
        ),
        "deleting" => {
            if open {
                let mut d = Builder::new("run.cancelled", cx).build();
                // The Annex A.15 pin carries `reason: deleting` at the metadata posture although
                // the registry grades `run.cancelled.reason` redacted (it is sized for free
                // text): the value here is the server's own status word, structure not content,
                // so it rides as pinned (a hop still down-levels by the registry).
                if d.capture >= aep_schemas::Capture::Metadata {
                    d.data.insert("reason".into(), json!("deleting"));
                }
                out.push(d);
            }
            out.push(Builder::new("session.ended", cx).meta("reason", "killed").build());
        }
        _ => {}
    }
    out
}

/// One conversation's socket: the session, the synthesized runs (`run:{conversation}:{n}`),
/// the attention pairing, and the vendor-id dedupe across replay and reconnect.
#[derive(Debug)]
pub struct Conversation {
    id: String,
    opts: Options,
    status: Option<String>,
    runs: u64,
    run: Option<String>,
    asks: u64,
    seen: std::collections::VecDeque<String>,
}

/// How many vendor event ids a conversation remembers for the replay dedupe.
const SEEN: usize = 4096;

/// What a [`Conversation`] needs to go on where an earlier process left it: the run
/// synthesis (status, run counter, the open run, the ask counter) and the newest vendor ids
/// mapped. A restarted observer resumes from it instead of mapping the history again, so a
/// run's terminal and the session's start are never emitted twice (AEP-0002 §2 convention 5).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Checkpoint {
    /// The last `execution_status` observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Runs synthesized so far (the next run is `run:{conversation}:{runs + 1}`).
    #[serde(default)]
    pub runs: u64,
    /// The open run, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// Confirmation asks raised so far.
    #[serde(default)]
    pub asks: u64,
    /// The newest vendor event ids mapped, oldest first.
    #[serde(default)]
    pub seen: Vec<String>,
}

impl Conversation {
    /// The conversation `id` (the WebSocket path / discovery id).
    pub fn new(id: impl Into<String>, opts: Options) -> Self {
        Self { id: id.into(), opts, status: None, runs: 0, run: None, asks: 0, seen: Default::default() }
    }

    /// Resumes conversation `id` from `cp` (what [`Conversation::checkpoint`] wrote).
    pub fn resume(id: impl Into<String>, opts: Options, cp: Checkpoint) -> Self {
        let mut seen: std::collections::VecDeque<String> = cp.seen.into();
        while seen.len() > SEEN {
            seen.pop_front();
        }
        Self { id: id.into(), opts, status: cp.status, runs: cp.runs, run: cp.run, asks: cp.asks, seen }
    }

    /// The state to resume from, with the newest `keep` vendor ids.
    pub fn checkpoint(&self, keep: usize) -> Checkpoint {
        Checkpoint {
            status: self.status.clone(),
            runs: self.runs,
            run: self.run.clone(),
            asks: self.asks,
            seen: self.seen.iter().skip(self.seen.len().saturating_sub(keep)).cloned().collect(),
        }
    }

    /// Whether vendor event `id` was mapped already (a replay after reconnect).
    pub fn seen(&self, id: &str) -> bool {
        self.seen.iter().any(|x| x == id)
    }

    /// The last `execution_status` observed (the state the run synthesis is in).
    pub fn status(&self) -> Option<&str> {
        self.status.as_deref()
    }

    /// The conversation id (the envelope `session`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The vendor id of the conversation's latest confirmation ask: what its
    /// `attention.requested` correlates as (`attention:<id>`) and its reply route settles.
    pub fn ask_id(&self) -> String {
        format!("openhands:{}:{}", self.id, self.asks)
    }

    /// Maps the state a socket opens with (the server pushes the conversation's current
    /// `full_state` to every new subscriber, ahead of the replay): a `state.snapshot` like any
    /// other, but no transition. It is the present, and the history replayed after it holds
    /// the transitions in their order; read as one, it would raise or close runs and asks
    /// out of order.
    pub fn map_opening_state(&mut self, ev: &Value, cx: &MapContext) -> Vec<EventDraft> {
        self.map_inner(ev, cx, false)
    }

    /// Maps one event off the socket; a vendor id seen before (a replay) maps to nothing.
    pub fn map(&mut self, ev: &Value, cx: &MapContext) -> Vec<EventDraft> {
        self.map_inner(ev, cx, true)
    }

    fn map_inner(&mut self, ev: &Value, cx: &MapContext, transitions: bool) -> Vec<EventDraft> {
        if let Some(id) = s(ev, "id") {
            if self.seen.iter().any(|x| x == id) {
                return Vec::new();
            }
            if self.seen.len() >= SEEN {
                self.seen.pop_front();
            }
            self.seen.push_back(id.to_owned());
        }
        let session = self.id.clone();
        let mut out = Vec::new();
        if transitions && s(ev, "kind") == Some("ConversationStateUpdateEvent") {
            let next = match s(ev, "key") {
                Some("execution_status") => s(ev, "value"),
                Some("full_state") => ev.pointer("/value/execution_status").and_then(Value::as_str),
                _ => None,
            };
            if let Some(next) = next {
                out.extend(self.transition(next, cx));
            }
        }
        out.extend(map_event(ev, self.opts, cx));
        common::stamp_identity(&mut out, Some(&session), self.run.as_deref());
        out
    }

    fn transition(&mut self, next: &str, cx: &MapContext) -> Vec<EventDraft> {
        let prev = self.status.replace(next.to_owned());
        let mut out = status_moments(prev.as_deref(), next, cx);
        let session = self.id.clone();
        for d in &mut out {
            match d.r#type.as_str() {
                "run.started" => {
                    self.runs += 1;
                    let run = format!("run:{session}:{}", self.runs);
                    d.correlation_key = Some(common::run_key(Some(&session), &run));
                    d.run = Some(run.clone());
                    self.run = Some(run);
                }
                "run.finished" | "run.failed" | "run.cancelled" => {
                    if let Some(run) = self.run.take() {
                        d.cause_key = Some(common::run_key(Some(&session), &run));
                        d.run = Some(run);
                    }
                }
                "attention.requested" => {
                    self.asks += 1;
                    d.correlation_key = Some(common::attention_key(&format!("openhands:{session}:{}", self.asks)));
                }
                "attention.resolved" => {
                    d.cause_key = Some(common::attention_key(&format!("openhands:{session}:{}", self.asks)));
                }
                _ => {}
            }
        }
        out
    }
}

/// The one frame the observer ever writes (the never-send posture): the first-message auth,
/// `{"type": "auth", "session_api_key": ...}` (the server's `sockets.py` refuses any other
/// first frame with close code 4001 when keys are configured, and ignores it when none are).
pub fn auth_frame(api_key: &str) -> Value {
    json!({"type": "auth", "session_api_key": api_key})
}

#[cfg(test)]
mod tests;
