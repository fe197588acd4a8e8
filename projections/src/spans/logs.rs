//! The synthesized span an Event's OTLP log record points at, so a backend can jump from a
//! log line to its trace (AEP-0005 §3.2: "Events land on existing traces").
//!
//! The ids are the [`super::SpanAssembler`]'s own derivations, computed from the Event
//! alone (no assembler state), so the logs sink needs no copy of the span sink's state:
//! - `tool.requested` / `tool.completed` / `tool.failed` / `tool.denied`: the tool call's
//!   span, keyed by `data.tool.call_id`, else by the `tool.requested` id (its own, or the
//!   terminal's `cause`);
//! - `attention.*` (and `control.attention.*`) of a request: the request's `attention {kind}`
//!   span, keyed by the request id (`attention.requested`'s id, the others' `subject`);
//! - any other Event of a run: the run's `invoke_agent` span;
//! - any other Event of a session: the session's root span, and so is an Event after its
//!   session's `session.ended` of a run the session had not opened before it: the
//!   assembler opens no span for that run there (a vendor record after the end annotates
//!   nothing; the spans another Event opens hang under the ended root), so the root, which was exported, is
//!   the one span it certainly belongs to.
//!
//! The trace is the session's (or, with `trace_per_run`, the run's), or the one a
//! `traceparent` on `session.started` / `run.started` joined, remembered per session
//! (bounded). Not covered, and left to the Event's own `traceparent`: Events without a
//! `seq` (foreign emitters address a session by name only) and agent-scoped Events.
//! Known approximations: a continuation generation (an Event after its session was closed)
//! points at the first generation's spans of the same trace, and Events logged before a
//! late `session.started` joined a foreign trace keep the derived trace.

use std::collections::{HashMap, HashSet, VecDeque};

use aep_schemas::event::Event;

use super::ids::{SpanContext, TraceId, parse_traceparent, span_id};
use super::ids::{run_context, session_root_context};

/// Sessions (and runs) whose joined trace is remembered.
const MAX_JOINED: usize = 65_536;

/// Sessions whose runs are remembered, and runs remembered per session (beyond it a run
/// is taken as opened).
const MAX_OPENED: usize = 65_536;
const MAX_RUNS: usize = 1024;

/// `(source, session)` or `(source, session, run)`.
type Key = (String, String, Option<String>);

/// The runs a session opened before its `session.ended`, and whether it ended.
#[derive(Debug, Clone, Default)]
struct Opened {
    runs: HashSet<String>,
    ended: bool,
}

/// Places Events on their synthesized spans (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct LogSpans {
    trace_per_run: bool,
    joined: HashMap<Key, TraceId>,
    order: VecDeque<Key>,
    opened: HashMap<(String, String), Opened>,
    opened_order: VecDeque<(String, String)>,
}

impl LogSpans {
    /// A new index; `trace_per_run` as the span sink's [`super::SpanConfig::trace_per_run`].
    pub fn new(trace_per_run: bool) -> Self {
        Self { trace_per_run, ..Self::default() }
    }

    fn remember(&mut self, key: Key, trace: TraceId) {
        if self.joined.insert(key.clone(), trace).is_none() {
            self.order.push_back(key);
            while self.order.len() > MAX_JOINED {
                if let Some(old) = self.order.pop_front() {
                    self.joined.remove(&old);
                }
            }
        }
    }

    /// Whether `run` has a span of the session: it was opened before the session ended
    /// (remembered, bounded); records `ev`'s run and the session's end.
    fn run_opened(&mut self, source: &str, session: &str, ev: &Event) -> bool {
        let key = (source.to_owned(), session.to_owned());
        if !self.opened.contains_key(&key) {
            self.opened_order.push_back(key.clone());
            while self.opened_order.len() > MAX_OPENED {
                if let Some(old) = self.opened_order.pop_front() {
                    self.opened.remove(&old);
                }
            }
        }
        let st = self.opened.entry(key).or_default();
        let open = match ev.run.as_deref() {
            Some(run) if st.runs.contains(run) => true,
            Some(_) if st.ended => st.runs.len() >= MAX_RUNS,
            Some(run) => {
                if st.runs.len() < MAX_RUNS {
                    st.runs.insert(run.to_owned());
                }
                true
            }
            None => false,
        };
        if ev.r#type == "session.ended" {
            st.ended = true;
        }
        open
    }

    /// The span `ev` lands on, or `None` when it is not placed (see the module doc).
    pub fn context(&mut self, ev: &Event) -> Option<SpanContext> {
        let session = ev.session.as_deref()?;
        ev.seq?;
        let source: &str = &ev.source;
        let tp = ev.traceparent.as_deref().and_then(parse_traceparent);
        let skey: Key = (source.to_owned(), session.to_owned(), None);
        if ev.r#type == "session.started"
            && let Some(tp) = tp
        {
            self.remember(skey.clone(), tp.trace_id);
        }
        let root = session_root_context(source, session);
        let session_trace = self.joined.get(&skey).copied().unwrap_or(root.trace_id);
        let session_ctx = SpanContext { trace_id: session_trace, span_id: root.span_id };
        if !self.run_opened(source, session, ev) && ev.run.is_some() {
            return Some(session_ctx);
        }
        let run_ctx = ev.run.as_deref().map(|run| {
            let rkey: Key = (source.to_owned(), session.to_owned(), Some(run.to_owned()));
            if ev.r#type == "run.started"
                && let Some(tp) = tp
            {
                self.remember(rkey.clone(), tp.trace_id);
            }
            let mut c = run_context(source, session, run, self.trace_per_run);
            c.trace_id = match self.joined.get(&rkey) {
                Some(t) => *t,
                None if self.trace_per_run => c.trace_id,
                None => session_trace,
            };
            c
        });
        let trace_id = run_ctx.map_or(session_trace, |c| c.trace_id);
        if let Some(sid) = tool_span(ev, source, session).or_else(|| attention_span(ev, source, session)) {
            return Some(SpanContext { trace_id, span_id: sid });
        }
        Some(run_ctx.unwrap_or(session_ctx))
    }
}

/// The attention span of an attention lifecycle Event (AEP-0002 §7), as the assembler
/// derives it for the session's first generation: keyed by the request's id, which is
/// `attention.requested`'s own id and every later Event's `subject`.
fn attention_span(ev: &Event, source: &str, session: &str) -> Option<[u8; 8]> {
    let ty = ev.r#type.as_str();
    let key = match ty {
        "attention.requested" => ev.id.as_str(),
        _ if ty.starts_with("attention.") || ty.starts_with("control.attention.") => ev.subject.as_deref()?,
        _ => return None,
    };
    Some(span_id("attention", &[source, session, "0", "key", key]))
}

/// The tool call span of a `tool.*` lifecycle Event, as the assembler derives it for the
/// session's first generation (`call_span_id`).
fn tool_span(ev: &Event, source: &str, session: &str) -> Option<[u8; 8]> {
    let opener = match ev.r#type.as_str() {
        "tool.requested" => true,
        "tool.completed" | "tool.failed" | "tool.denied" => false,
        _ => return None,
    };
    let call_id = ev.data.as_ref().and_then(|d| d.pointer("/tool/call_id")).and_then(|v| v.as_str());
    let (how, id) = match (call_id, opener, ev.cause.as_deref()) {
        (Some(k), _, _) => ("key", k),
        (None, true, _) => ("ev", ev.id.as_str()),
        (None, false, Some(cause)) => ("ev", cause),
        (None, false, None) => return None,
    };
    Some(span_id("tool", &[source, session, "0", how, id]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{SpanAssembler, SpanConfig};
    use serde_json::json;

    fn ev(id: &str, ty: &str, seq: u64, extra: serde_json::Value) -> Event {
        let mut v = json!({
            "aep": "0.1", "id": id, "type": ty, "time": format!("2026-07-03T10:15:{:02}.000Z", seq),
            "source": "aep://h/agent/a/session/s1", "agent": "a", "session": "s1", "seq": seq, "epoch": 1
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        Event::from_value(v).unwrap()
    }

    /// Every Event's log context is a span the assembler really exported for it.
    #[test]
    fn contexts_match_the_assembled_spans() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let events = vec![
            ev("e0", "session.started", 0, json!({"traceparent": tp, "data": {"client": {"name": "a"}}})),
            ev("e1", "run.started", 1, json!({"run": "r1"})),
            ev("e2", "tool.requested", 2, json!({"run": "r1", "data": {"tool": {"name": "Bash", "call_id": "c1"}}})),
            ev("e3", "tool.completed", 3, json!({"run": "r1", "data": {"tool": {"name": "Bash", "call_id": "c1"}}})),
            ev("e4", "tool.requested", 4, json!({"run": "r1", "data": {"tool": {"name": "read"}}})),
            ev("e5", "tool.failed", 5, json!({"run": "r1", "cause": "e4", "data": {"tool": {"name": "read"}}})),
            ev("e6", "x.a.otel.api_request", 6, json!({"run": "r1"})),
            ev("e7", "run.finished", 7, json!({"run": "r1"})),
            ev("e8", "progress.status", 8, json!({})),
            ev("e9", "session.ended", 9, json!({})),
            // A vendor record after the end: of a run the session had, and of one it never opened.
            ev("e10", "x.a.otel.api_request", 10, json!({"run": "r1"})),
            ev("e11", "x.a.otel.api_request", 11, json!({"run": "r9"})),
        ];
        for trace_per_run in [false, true] {
            let spans = crate::spans::assemble(&events, SpanConfig { trace_per_run, ..SpanConfig::default() });
            let mut index = LogSpans::new(trace_per_run);
            let name_of = |c: SpanContext| {
                spans
                    .iter()
                    .find(|s| s.trace_id == c.trace_id && s.span_id == c.span_id)
                    .map(|s| s.name.clone())
                    .unwrap_or_else(|| panic!("no exported span {c:?} ({trace_per_run})"))
            };
            let got: Vec<String> = events.iter().map(|e| name_of(index.context(e).unwrap())).collect();
            assert_eq!(
                got,
                [
                    "session a",
                    "invoke_agent a",
                    "execute_tool Bash",
                    "execute_tool Bash",
                    "execute_tool read",
                    "execute_tool read",
                    "invoke_agent a",
                    "invoke_agent a",
                    "session a",
                    "session a",
                    "invoke_agent a",
                    "session a"
                ],
                "trace_per_run {trace_per_run}"
            );
            // The session joined the incoming trace; so did its runs unless they root their own.
            let root = index.context(&events[0]).unwrap();
            assert_eq!(hex::encode(root.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
            assert_eq!(index.context(&events[2]).unwrap().trace_id == root.trace_id, !trace_per_run);
        }
        let mut asm = SpanAssembler::new(SpanConfig::default());
        assert!(asm.push(&events[0]).is_empty(), "the test's assembler is the real one");
    }

    /// An attention request's records name its `attention {kind}` span, not the run's.
    #[test]
    fn attention_records_name_their_attention_span() {
        let events = vec![
            ev("e0", "session.started", 0, json!({})),
            ev("e1", "run.started", 1, json!({"run": "r1"})),
            ev("q1", "attention.requested", 2, json!({"run": "r1", "data": {"kind": "permission", "prompt": "p"}})),
            ev("e3", "attention.answered", 3, json!({"run": "r1", "subject": "q1", "data": {"by": "user"}})),
            ev(
                "e4",
                "attention.resolved",
                4,
                json!({"run": "r1", "subject": "q1", "data": {"resolution": "answered"}}),
            ),
            ev("q2", "attention.requested", 5, json!({"data": {"kind": "input", "prompt": "p"}})),
            ev("e6", "attention.timeout", 6, json!({"subject": "q2"})),
            ev("e7", "run.finished", 7, json!({"run": "r1"})),
            ev("e8", "session.ended", 8, json!({})),
        ];
        for trace_per_run in [false, true] {
            let spans = crate::spans::assemble(&events, SpanConfig { trace_per_run, ..SpanConfig::default() });
            let mut index = LogSpans::new(trace_per_run);
            let got: Vec<&str> = events
                .iter()
                .map(|e| {
                    let c = index.context(e).unwrap();
                    let s = spans.iter().find(|s| s.trace_id == c.trace_id && s.span_id == c.span_id);
                    s.map(|s| s.name.as_str()).unwrap_or_else(|| panic!("{}: no exported span", e.id))
                })
                .collect();
            assert_eq!(
                got,
                [
                    "session a",
                    "invoke_agent a",
                    "attention permission",
                    "attention permission",
                    "attention permission",
                    "attention input",
                    "attention input",
                    "invoke_agent a",
                    "session a"
                ],
                "trace_per_run {trace_per_run}"
            );
        }
    }

    #[test]
    fn foreign_and_agent_scoped_events_are_not_placed() {
        let mut index = LogSpans::new(false);
        let mut foreign = ev("f1", "attention.routed", 0, json!({}));
        foreign.seq = None;
        assert_eq!(index.context(&foreign), None);
        let mut agent = ev("g1", "agent.heartbeat", 0, json!({}));
        agent.session = None;
        assert_eq!(index.context(&agent), None);
        let orphan_end = ev("h1", "tool.completed", 0, json!({"data": {"tool": {"name": "x"}}}));
        let c = index.context(&orphan_end).unwrap();
        assert_eq!(c, session_root_context("aep://h/agent/a/session/s1", "s1"), "no call id, no cause: the session");
    }
}
