#![doc = include_str!("README.md")]

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Value, json};

use super::{Direction, LineMapper, Options};
use crate::common::run_key;
use crate::vendors::pi::{PiAdapter, VENDOR};
use crate::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// The `wrap` protocol name.
pub const PROTOCOL: &str = "pi-rpc";

/// The envelope `agent`: the agent behind the stream is pi itself (AEP-0002 A.12).
pub const AGENT: &str = VENDOR;

/// Events held while the session is not known yet, at most this many...
const MAX_WAITING: usize = 1024;
/// ...and at most this many bytes of them (the lines as read).
const MAX_WAITING_BYTES: usize = 16 << 20;
/// Sessions whose run state the tee keeps (then forgotten wholesale).
const MAX_SESSIONS: usize = 256;
/// The longest session id taken from a response (pi's are UUIDs).
const MAX_SESSION_ID: usize = 256;

/// Stream members that are not moments: `entry_appended` is stream-union-only and the
/// design record claims nothing from it (the delta plane, `message_update`, is gated by the
/// shared mapping itself).
const NOT_MOMENTS: &[&str] = &["entry_appended"];

/// The `pi --mode rpc` tee: the agent's stdout carries the `AgentSessionEvent` union, the
/// shared extension-bus mapping ([`PiAdapter`]) maps it verbatim; typed `response` lines
/// only teach the tee the session id; the client's commands map to nothing.
#[derive(Debug)]
pub struct Tee {
    epoch: u64,
    adapter: PiAdapter,
    /// The session the stream is in, once a response named it.
    session: Option<String>,
    /// Run state per session (the shared mapping synthesizes `r1`, `r2`, ... per session).
    states: HashMap<String, SessionState>,
    /// Sessions whose `session.started` the tee emitted.
    announced: HashSet<String>,
    /// Event lines read before any response named the session, as read (so what waits is
    /// bounded in bytes, not in parsed values).
    waiting: VecDeque<Vec<u8>>,
    waiting_bytes: usize,
}

impl Tee {
    /// A tee for restart generation `epoch` (it qualifies the synthesized run ids).
    pub fn new(epoch: u64, opts: Options) -> Self {
        Self {
            epoch,
            adapter: PiAdapter { deltas: opts.deltas },
            session: None,
            states: HashMap::new(),
            announced: HashSet::new(),
            waiting: VecDeque::new(),
            waiting_bytes: 0,
        }
    }

    /// A typed `response`: a successful one whose `data.sessionId` is a string (`get_state`,
    /// `get_session_stats`) names the session; one that replaces the session (`new_session`,
    /// `switch_session`, `fork`, `clone`, not cancelled) makes it unknown until the next.
    fn on_response(&mut self, m: &Value, cx: &MapContext) -> Vec<EventDraft> {
        if m.get("success").and_then(Value::as_bool) != Some(true) {
            return Vec::new();
        }
        let data = m.get("data").unwrap_or(&Value::Null);
        let sid = data.get("sessionId").and_then(Value::as_str);
        if let Some(sid) =
            sid.filter(|s| !s.is_empty() && s.len() <= MAX_SESSION_ID && !s.chars().any(char::is_control))
        {
            return self.learn(sid, cx);
        }
        let replaces = matches!(
            m.get("command").and_then(Value::as_str),
            Some("new_session" | "switch_session" | "fork" | "clone")
        );
        if replaces && data.get("cancelled").and_then(Value::as_bool) != Some(true) {
            self.session = None;
        }
        Vec::new()
    }

    /// The session is `sid` from here on: first sight announces it, then the events that
    /// waited for it map in the order they were read.
    fn learn(&mut self, sid: &str, cx: &MapContext) -> Vec<EventDraft> {
        let mut out = Vec::new();
        self.session = Some(sid.to_owned());
        if self.announced.len() >= MAX_SESSIONS {
            self.announced.clear();
        }
        if self.announced.insert(sid.to_owned()) {
            // No session boundary rides this stream: `session.started` is synthesized on
            // first sight (the A.11 rule), with no arrival reason claimed.
            out.extend(self.map_event(sid, &json!({"type": "session_start"}), cx));
        }
        self.waiting_bytes = 0;
        for line in std::mem::take(&mut self.waiting) {
            if let Ok(ev) = serde_json::from_slice::<Value>(&line) {
                out.extend(self.map_event(sid, &ev, cx));
            }
        }
        out
    }

    /// Keeps an event line until the session is known; the oldest go first when full.
    fn hold(&mut self, line: &[u8]) {
        if line.len() > MAX_WAITING_BYTES {
            return;
        }
        while self.waiting.len() >= MAX_WAITING || self.waiting_bytes + line.len() > MAX_WAITING_BYTES {
            let Some(old) = self.waiting.pop_front() else { break };
            self.waiting_bytes -= old.len();
        }
        self.waiting_bytes += line.len();
        self.waiting.push_back(line.to_vec());
    }

    /// One stream event through the shared mapping, as the extension shim would post it.
    fn map_event(&mut self, sid: &str, ev: &Value, cx: &MapContext) -> Vec<EventDraft> {
        let ev = match ev.get("type").and_then(Value::as_str) {
            // The stream's post-compaction moment is the bus's `session_compact` (same
            // typed reason and willRetry); an aborted or failed compaction compacted nothing.
            Some("compaction_end") => {
                if ev.get("aborted").and_then(Value::as_bool) == Some(true)
                    || ev.get("result").is_none_or(Value::is_null)
                {
                    return Vec::new();
                }
                let mut e = json!({"type": "session_compact"});
                for k in ["reason", "willRetry"] {
                    if let Some(v) = ev.get(k) {
                        e[k] = v.clone();
                    }
                }
                e
            }
            _ => ev.clone(),
        };
        if self.states.len() >= MAX_SESSIONS && !self.states.contains_key(sid) {
            self.states.clear();
        }
        let state = self.states.entry(sid.to_owned()).or_default();
        let payload = json!({"session": {"id": sid}, "event": ev});
        let mut out = self.adapter.map(&HookCall { event: None, payload: &payload }, state, cx).unwrap_or_default();
        // Run ids are the mapping's per-session `r{n}`, qualified by the tee's restart
        // generation: a resumed session in a new pi process must never re-mint a run id.
        for d in &mut out {
            if aep_schemas::event::is_agent_scoped(&d.r#type) {
                // `x.pi.agent.settled` is agent-scoped: no session, run or step (AEP-0001 §5.2),
                // as the bridge's own stamper leaves it on the extension-bus path.
                (d.session, d.run, d.step) = (None, None, None);
                continue;
            }
            let Some(run) = d.run.take() else { continue };
            let qualified = format!("{}.{run}", self.epoch);
            let (old, new) = (run_key(d.session.as_deref(), &run), run_key(d.session.as_deref(), &qualified));
            for k in [&mut d.correlation_key, &mut d.cause_key] {
                if k.as_deref() == Some(old.as_str()) {
                    *k = Some(new.clone());
                }
            }
            d.run = Some(qualified);
        }
        out
    }
}

impl Tee {
    /// The session of a stream no response named: `rpc-{epoch}`, the tee's own name (pi
    /// states its id only when asked; the tee never asks, it writes nothing on the wire).
    pub fn synthesized_session(&self) -> String {
        format!("rpc-{}", self.epoch)
    }
}

impl LineMapper for Tee {
    fn agent(&self) -> &'static str {
        AGENT
    }

    /// A client that never asked `get_state` (or `get_session_stats`) never let pi name its
    /// session: what waited for it is delivered at the end, under the tee's own session name
    /// ([`Tee::synthesized_session`]), rather than lost.
    fn finish(&mut self, cx: &MapContext) -> Vec<EventDraft> {
        if self.session.is_some() || self.waiting.is_empty() {
            return Vec::new();
        }
        let sid = self.synthesized_session();
        self.learn(&sid, cx)
    }

    fn map_line(&mut self, dir: Direction, line: &[u8], cx: &MapContext) -> Vec<EventDraft> {
        // Commands (`prompt`, `steer`, `abort`, ...) map to nothing: the stream's own
        // message and agent events carry what they caused.
        if dir == Direction::ToAgent {
            return Vec::new();
        }
        let Ok(m) = serde_json::from_slice::<Value>(line) else { return Vec::new() };
        let Some(ty) = m.get("type").and_then(Value::as_str) else { return Vec::new() };
        if ty == "response" {
            return self.on_response(&m, cx);
        }
        if NOT_MOMENTS.contains(&ty) {
            return Vec::new();
        }
        match self.session.clone() {
            Some(sid) => self.map_event(&sid, &m, cx),
            None => {
                self.hold(line);
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests;
