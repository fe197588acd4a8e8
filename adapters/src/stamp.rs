//! The one stamper: makes a mapped draft a complete Event. The daemon's pipeline stamps
//! with it (under its lock, for every adapter and observer it runs) and so does the CLI's
//! stdio tee (which stamps in its own process and posts complete events).
//!
//! A draft gets its `id` (from the caller's [`MintIds`] unless the mapping minted one
//! ahead), `(epoch,
//! seq)` per `(agent, session)` (AEP-0001 §7), its session's `source` URI (built once and
//! shared by the session's events), `time` (now, unless the vendor gave one), a `cause`
//! from the correlation key of an earlier event of its session, and for the attention
//! lifecycle the request Event as `subject` (AEP-0002 §7.1). Agent-scoped types (`agent.*`)
//! take no session, position, run or step (AEP-0001 §5.2).
//!
//! Where the callers differ, the difference is a parameter: the daemon numbers a session
//! from 0 and the tee from 1 ([`Stamper::first_seq`]; the tee's numbering is what its
//! end-to-end checks pin), and the pipeline keeps data of its own per session beside the
//! position (its log key and serialized envelope members: the `M` of [`Stamper::stamp`]).
//!
//! Pure: the time comes in as an argument (Unix ms) and the ids from the caller's
//! [`MintIds`] (the daemon's is a ULID generator, random and monotonic; a test's counts).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use aep_schemas::ids::percent_encode;
use aep_schemas::sequence::Sequencer;
use aep_schemas::{AEP_VERSION, Event};

use crate::EventDraft;

/// Correlation keys remembered per session (then forgotten wholesale), and log keys of
/// external emitters' sessions per agent.
pub const CAUSE_MEMORY: usize = 4096;

/// Where a stamper's event ids come from: unique within the stamper's epoch, and in order
/// of `now_ms` (the replay buffer relies on a minted id never repeating).
pub trait MintIds {
    /// A fresh id for an event stamped at `now_ms` (Unix ms).
    fn mint(&mut self, now_ms: u64) -> String;
}

/// What the stamper keeps per session beside its position.
#[derive(Default)]
struct Slot<M> {
    /// Shared by every event of the session (an `Arc`, not a copy per event).
    source: Arc<str>,
    /// The caller's own per-session data.
    extra: M,
}

/// Stamps drafts for one process lifetime (one epoch), its ids from `I`.
pub struct Stamper<I, M = ()> {
    /// Positions per `(agent, session)`, each session with its `source` URI (built once).
    seq: Sequencer<Slot<M>>,
    /// The `seq` of a session's first event.
    first_seq: u64,
    ids: I,
    host: String,
    /// The last formatted timestamp: many events share a millisecond.
    last_time: (u64, String),
    /// Correlation key -> minted id, per agent and session, for `cause_key` lookups.
    causes: HashMap<String, HashMap<String, HashMap<String, String>>>,
}

impl<I: MintIds, M: Default> Stamper<I, M> {
    /// A stamper for this process lifetime's `epoch`, naming `host` in `source` URIs, its
    /// ids from `ids`; a session's first event gets `seq` 0.
    pub fn new(epoch: u64, host: impl Into<String>, ids: I) -> Self {
        Self {
            seq: Sequencer::new(epoch),
            first_seq: 0,
            ids,
            host: host.into(),
            last_time: (u64::MAX, String::new()),
            causes: HashMap::new(),
        }
    }

    /// Numbers each session from `first` instead of 0.
    pub fn first_seq(mut self, first: u64) -> Self {
        self.first_seq = first;
        self
    }

    /// Stamps `d` as `agent`'s at `ms` (Unix ms). Returns the Event and, for a session's
    /// event, the caller's data kept for that session (`M::default()` the first time).
    pub fn stamp(&mut self, agent_name: Cow<'static, str>, d: EventDraft, ms: u64) -> (Event, Option<&mut M>) {
        let agent: &str = &agent_name;
        let id = match d.id {
            Some(id) => id,
            None => self.ids.mint(ms),
        };
        let agent_scoped = aep_schemas::event::is_agent_scoped(&d.r#type);
        let session = if agent_scoped { None } else { d.session };
        // One lookup gives the position and the session's `source` (built the first time).
        let (seq, epoch, source, extra) = match &session {
            Some(s) => {
                let (epoch, seq, slot) = self.seq.next_with(agent, s);
                if slot.source.is_empty() {
                    slot.source = source_uri(&self.host, agent, Some(s)).into();
                }
                (Some(seq + self.first_seq), Some(epoch), slot.source.clone(), Some(&mut slot.extra))
            }
            None => (None, None, source_uri(&self.host, agent, None).into(), None),
        };
        let mut cause = d.cause;
        // A lifecycle event linked to its request by the request's correlation key.
        let mut keyed_request = false;
        if let Some(s) = &session
            && (d.cause_key.is_some() || d.correlation_key.is_some())
        {
            let sessions = match self.causes.get_mut(agent) {
                Some(m) => m,
                None => self.causes.entry(agent.to_owned()).or_default(),
            };
            let map = match sessions.get_mut(s.as_str()) {
                Some(m) => m,
                None => sessions.entry(s.clone()).or_default(),
            };
            if let (None, Some(k)) = (&cause, &d.cause_key) {
                cause = map.get(k).cloned();
                keyed_request = cause.is_some() && k.starts_with("attention:");
            }
            if let Some(k) = d.correlation_key {
                if map.len() >= CAUSE_MEMORY {
                    map.clear();
                }
                map.insert(k, id.clone());
            }
        }
        if d.r#type == "session.ended"
            && let (Some(s), Some(sessions)) = (&session, self.causes.get_mut(agent))
        {
            // Nothing links to an ended session's events any more: free its correlation memory.
            sessions.remove(s.as_str());
        }
        // AEP-0002 §7.1: the lifecycle events after a request name it as their subject; a
        // mapping that linked them by the request's correlation key gets the subject from the
        // resolved cause, over a vendor id it may have set (the vendor's request id is not the
        // Event's; a pinned mapping of a bus `permission.replied` carries it).
        let lifecycle = matches!(d.r#type.as_str(), "attention.answered" | "attention.resolved" | "attention.timeout");
        let subject = match d.subject {
            _ if lifecycle && keyed_request => cause.clone(),
            None if lifecycle => cause.clone(),
            s => s,
        };
        let time = match d.time {
            Some(t) => t,
            None => {
                if self.last_time.0 != ms {
                    self.last_time = (ms, aep_schemas::time::format_rfc3339_ms(ms));
                }
                self.last_time.1.clone()
            }
        };
        let ev = Event {
            aep: Cow::Borrowed(AEP_VERSION),
            id,
            r#type: d.r#type,
            subject,
            time,
            source,
            agent: agent_name,
            run: if agent_scoped { None } else { d.run },
            step: if agent_scoped { None } else { d.step },
            session,
            seq,
            epoch,
            cause,
            traceparent: d.traceparent,
            severity: d.severity,
            capture: Some(d.capture),
            extensions: Default::default(),
            data: Some(serde_json::Value::Object(d.data)),
        };
        (ev, extra)
    }
}

/// `aep://{host}/agent/{agent}/session/{session}` (AEP-0001 §5.1 #6), or `.../agent/{agent}` for agent-scoped events.
pub fn source_uri(host: &str, agent: &str, session: Option<&str>) -> String {
    match session {
        Some(s) => format!("aep://{host}/agent/{}/session/{}", percent_encode(agent), percent_encode(s)),
        None => format!("aep://{host}/agent/{}", percent_encode(agent)),
    }
}

#[cfg(test)]
mod tests {
    use aep_schemas::Capture;

    use super::*;

    /// Ids in order: a counter, so a test's ids are known.
    #[derive(Default)]
    struct Count(u64);

    impl MintIds for Count {
        fn mint(&mut self, _now_ms: u64) -> String {
            self.0 += 1;
            format!("01J{:023}", self.0)
        }
    }

    fn draft(ty: &str, session: &str) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some(session.into());
        d
    }

    #[test]
    fn positions_per_session_from_the_first_seq_and_per_session_data() {
        let now = 1_783_073_704_221;
        let mut st: Stamper<Count, u32> = Stamper::new(5, "h", Count::default()).first_seq(1);
        let (a, extra) = st.stamp(Cow::Borrowed("x"), draft("run.started", "s"), now);
        *extra.unwrap() += 1;
        let (b, extra) = st.stamp(Cow::Borrowed("x"), draft("run.ended", "s"), now);
        assert_eq!(extra.copied(), Some(1), "the session's data is kept");
        assert_eq!((a.seq, b.seq, b.epoch), (Some(1), Some(2), Some(5)));
        assert!(a.id < b.id, "ids are monotonic");
        assert_eq!(a.time, b.time);
        // Another agent's session of the same id is numbered on its own.
        let (c, extra) = st.stamp(Cow::Borrowed("y"), draft("run.started", "s"), now);
        assert_eq!((c.seq, extra.copied()), (Some(1), Some(0)));
        assert_eq!(&*c.source, "aep://h/agent/y/session/s");
        let (agent, extra) = st.stamp(Cow::Borrowed("x"), draft("agent.heartbeat", "s"), now);
        assert!(extra.is_none() && agent.seq.is_none() && agent.session.is_none());
        assert_eq!(&*agent.source, "aep://h/agent/x");
    }

    #[test]
    fn an_ended_session_forgets_its_correlation_keys() {
        let now = 1_783_073_704_221;
        let mut st: Stamper<Count> = Stamper::new(1, "h", Count::default());
        let mut req = draft("tool.requested", "s");
        req.correlation_key = Some("tool:1".into());
        st.stamp(Cow::Borrowed("x"), req, now);
        st.stamp(Cow::Borrowed("x"), draft("session.ended", "s"), now);
        let mut late = draft("tool.completed", "s");
        late.cause_key = Some("tool:1".into());
        assert_eq!(st.stamp(Cow::Borrowed("x"), late, now).0.cause, None);
    }
}
