//! Agent completeness: whether a stream tells each run's and each tool call's story to its
//! end. These are warnings, not spec violations: AEP never guarantees arrival (AEP-0002
//! §4.1's emitter-completeness note, §2 convention 5: zero terminals stays legal), so a
//! log may be valid and still miss an outcome. A bridge that drops a tool's failure or
//! closes a run twice is what these rules catch.
//!
//! The rules, per `(source, session)` (AEP-0001 §5.2), over distinct Events (an identical
//! redelivery of an `(source, id)` counts once, AEP-0001 §7.4):
//!
//! - [`RUN_OPEN_AT_END`]: a run that started has no terminal when its session ends. A run
//!   still open at the end of the log is fine (the log may have been read mid-run).
//! - [`RUN_TERMINAL_TWICE`]: a second terminal of the same run (also a violation of
//!   AEP-0002 §2 convention 5, which `validate` reports as such).
//! - [`TOOL_NO_OUTCOME`]: a `tool.requested` with no `tool.completed` / `tool.failed` /
//!   `tool.denied` after it by the end of the log.
//! - [`TOOL_OUTCOME_TWICE`]: a second outcome for the same request.
//! - [`TOOL_OUTCOME_FIRST`]: an outcome that precedes its request.
//! - [`TOOL_OUTCOME_ORPHAN`]: an outcome no request claims by the end of the log, in a
//!   session whose stream carries requests of that tool.
//! - [`RUN_TERMINAL_NO_START`]: a run terminal with no `run.started` of that run before it,
//!   in a session whose start is in the log.
//! - [`TOOL_AFTER_RUN_END`]: a tool event of a run after that run's terminal.
//!
//! An outcome belongs to a request by the call id (`data.tool.call_id`) when both carry
//! one, else by its `cause` naming the request (AEP-0002 §2 convention 1), else to the
//! oldest open request of the same tool name in the session. An outcome that no request
//! ever claims is a partial observation when the stream never shows a request of that tool
//! (some surfaces see only results): only a stream that does tell that tool's requests, and
//! misses this one, is flagged. Likewise a run terminal without its start is flagged only
//! when the log holds the session's `session.started` (a log read from the middle of a
//! session may begin after a run's start).
//!
//! The last three are what a bridge that writes abandoned hook calls late produces: a
//! request written after its outcome, or never; a `run.finished` whose `run.started` was
//! lost; a tool call written after the `run.finished` that followed it. AEP-0002 §2
//! convention 5 keeps events after a terminal legal (late completions), which is why these
//! are completeness warnings, not violations.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::event::Event;

/// A run started and its session ended before any terminal of it.
pub const RUN_OPEN_AT_END: &str = "run-open-at-session-end";
/// A run reached a second terminal.
pub const RUN_TERMINAL_TWICE: &str = "run-terminal-twice";
/// A tool request never got an outcome.
pub const TOOL_NO_OUTCOME: &str = "tool-no-outcome";
/// A tool request got a second outcome.
pub const TOOL_OUTCOME_TWICE: &str = "tool-outcome-twice";
/// A tool outcome arrived before its request.
pub const TOOL_OUTCOME_FIRST: &str = "tool-outcome-before-request";
/// A tool outcome that no request claims, in a stream that carries that tool's requests.
pub const TOOL_OUTCOME_ORPHAN: &str = "tool-outcome-without-request";
/// A run terminal with no start of that run before it.
pub const RUN_TERMINAL_NO_START: &str = "run-terminal-without-start";
/// A tool event of a run that had already ended.
pub const TOOL_AFTER_RUN_END: &str = "tool-event-after-run-end";

/// One completeness finding: a story the stream leaves unfinished or tells out of order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The rule, one of the constants of this module.
    pub rule: &'static str,
    /// What is incomplete, naming the run, call and the other Event's position.
    pub message: String,
    /// The position of the Event the warning is about (0-based), when known.
    pub index: Option<usize>,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "[{i}] {}: {}", self.rule, self.message),
            None => write!(f, "{}: {}", self.rule, self.message),
        }
    }
}

/// A `tool.requested` seen in a session.
#[derive(Debug)]
struct Request {
    id: String,
    call_id: Option<String>,
    name: Option<String>,
    index: Option<usize>,
    /// The position of its first outcome, once one arrived.
    outcome: Option<Option<usize>>,
}

/// An outcome no request claimed (yet).
#[derive(Debug)]
struct Orphan {
    call_id: Option<String>,
    cause: Option<String>,
    name: Option<String>,
    index: Option<usize>,
    ty: String,
}

#[derive(Debug, Default)]
struct Session {
    /// Whether the log holds this session's `session.started`.
    started: bool,
    /// Started runs without a terminal, in start order, with the start's position.
    open_runs: Vec<(String, Option<usize>)>,
    /// The first terminal per run: its type and position.
    terminals: HashMap<String, (String, Option<usize>)>,
    requests: Vec<Request>,
    orphans: Vec<Orphan>,
    /// The tool names this session's stream carried a request of.
    requested_names: HashSet<String>,
}

/// The completeness rules over one stream. Feed Events in order with
/// [`push_at`](Self::push_at); [`finish`](Self::finish) reports what is still unfinished.
#[derive(Debug, Default)]
pub struct CompletenessChecker {
    seen: HashSet<(String, String)>,
    sessions: HashMap<(String, String), Session>,
}

fn tool_field<'a>(ev: &'a Event, key: &str) -> Option<&'a str> {
    ev.data.as_ref()?.get("tool")?.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn at(index: Option<usize>) -> String {
    index.map_or_else(|| "an earlier event".to_owned(), |i| format!("event {i}"))
}

impl CompletenessChecker {
    /// A checker that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the Event at position `index` of the caller's stream; returns the warnings it
    /// causes at once (those only the end can tell come from [`finish`](Self::finish)).
    pub fn push_at(&mut self, index: Option<usize>, ev: &Event) -> Vec<Warning> {
        let mut out = Vec::new();
        if !self.seen.insert((ev.source.to_string(), ev.id.clone())) {
            return out;
        }
        let Some(session) = &ev.session else { return out };
        let st = self.sessions.entry((ev.source.to_string(), session.clone())).or_default();
        let mut warn = |rule, message| out.push(Warning { rule, message, index });
        if ev.r#type.starts_with("tool.")
            && let Some(run) = &ev.run
            && let Some((ended, pos)) = st.terminals.get(run)
        {
            warn(
                TOOL_AFTER_RUN_END,
                format!("{} of run {run:?} comes after the run ended with {ended} at {}", ev.r#type, at(*pos)),
            );
        }
        match ev.r#type.as_str() {
            "session.started" => st.started = true,
            "run.started" => {
                if let Some(run) = &ev.run
                    && !st.terminals.contains_key(run)
                    && !st.open_runs.iter().any(|(r, _)| r == run)
                {
                    st.open_runs.push((run.clone(), index));
                }
            }
            ty @ ("run.finished" | "run.failed" | "run.cancelled") => {
                if let Some(run) = &ev.run {
                    if let Some((first, pos)) = st.terminals.get(run) {
                        warn(
                            RUN_TERMINAL_TWICE,
                            format!(
                                "run {run:?} already ended with {first} at {}; {ty} is a second terminal",
                                at(*pos)
                            ),
                        );
                    } else {
                        let open = st.open_runs.iter().any(|(r, _)| r == run);
                        if !open && st.started {
                            warn(
                                RUN_TERMINAL_NO_START,
                                format!("{ty} of run {run:?} has no run.started before it in session {session:?}"),
                            );
                        }
                        st.terminals.insert(run.clone(), (ty.to_owned(), index));
                        st.open_runs.retain(|(r, _)| r != run);
                    }
                }
            }
            "session.ended" => {
                for (run, pos) in std::mem::take(&mut st.open_runs) {
                    warn(
                        RUN_OPEN_AT_END,
                        format!("session {session:?} ends while run {run:?} (started at {}) has no terminal", at(pos)),
                    );
                }
            }
            "tool.requested" => {
                let call_id = tool_field(ev, "call_id").map(str::to_owned);
                let claimed = st.orphans.iter().position(|o| match (&o.call_id, &call_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => o.cause.as_deref() == Some(ev.id.as_str()),
                });
                let mut outcome = None;
                if let Some(i) = claimed {
                    let o = st.orphans.remove(i);
                    warn(
                        TOOL_OUTCOME_FIRST,
                        format!(
                            "{} of call {} arrived at {}, before this request",
                            o.ty,
                            call_id.as_deref().unwrap_or(&ev.id),
                            at(o.index)
                        ),
                    );
                    outcome = Some(o.index);
                }
                let name = tool_field(ev, "name").map(str::to_owned);
                if let Some(n) = &name {
                    st.requested_names.insert(n.clone());
                }
                st.requests.push(Request { id: ev.id.clone(), call_id, name, index, outcome });
            }
            ty @ ("tool.completed" | "tool.failed" | "tool.denied") => {
                let call_id = tool_field(ev, "call_id");
                let name = tool_field(ev, "name");
                // By call id, else by cause; the name only pairs requests that have no call id.
                let by_key = st.requests.iter().rposition(|r| match (call_id, &r.call_id) {
                    (Some(a), Some(b)) => a == b,
                    _ => ev.cause.as_deref() == Some(r.id.as_str()),
                });
                let target = by_key.or_else(|| {
                    (call_id.is_none() && ev.cause.is_none())
                        .then(|| {
                            st.requests
                                .iter()
                                .position(|r| r.outcome.is_none() && r.call_id.is_none() && r.name.as_deref() == name)
                        })
                        .flatten()
                });
                match target.map(|i| &mut st.requests[i]) {
                    Some(r) => match r.outcome {
                        Some(first) => warn(
                            TOOL_OUTCOME_TWICE,
                            format!(
                                "call {} (requested at {}) already had its outcome at {}; {ty} is a second one",
                                r.call_id.as_deref().unwrap_or(&r.id),
                                at(r.index),
                                at(first)
                            ),
                        ),
                        None => r.outcome = Some(index),
                    },
                    None => st.orphans.push(Orphan {
                        call_id: call_id.map(str::to_owned),
                        cause: ev.cause.clone(),
                        name: name.map(str::to_owned),
                        index,
                        ty: ty.to_owned(),
                    }),
                }
            }
            _ => {}
        }
        out
    }

    /// Ends the stream: every tool request still without an outcome, and every outcome
    /// still without a request in a stream that carries that tool's requests. Runs still
    /// open are not reported (the log may end mid-run).
    pub fn finish(self) -> Vec<Warning> {
        let mut sessions: Vec<_> = self.sessions.into_iter().collect();
        sessions.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out = Vec::new();
        for ((_, session), st) in sessions {
            for r in st.requests.iter().filter(|r| r.outcome.is_none()) {
                out.push(Warning {
                    rule: TOOL_NO_OUTCOME,
                    message: format!(
                        "call {} ({}) in session {session:?} has no tool.completed/failed/denied by the end of the log",
                        r.call_id.as_deref().unwrap_or(&r.id),
                        r.name.as_deref().unwrap_or("unnamed tool")
                    ),
                    index: r.index,
                });
            }
            for o in &st.orphans {
                let Some(name) = o.name.as_deref().filter(|n| st.requested_names.contains(*n)) else { continue };
                out.push(Warning {
                    rule: TOOL_OUTCOME_ORPHAN,
                    message: format!(
                        "{} of call {} ({name}) in session {session:?} has no tool.requested, though the stream carries {name}'s requests",
                        o.ty,
                        o.call_id.as_deref().unwrap_or("without a call id"),
                    ),
                    index: o.index,
                });
            }
        }
        out.sort_by_key(|w| w.index);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One session-scoped Event; `tool` is `(name, call_id)`.
    fn ev(id: &str, ty: &str, run: Option<&str>, tool: Option<(&str, Option<&str>)>, cause: Option<&str>) -> Event {
        let mut v = json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-01-01T00:00:00Z",
                           "source": "aep://test", "agent": "test", "session": "s1"});
        if let Some(r) = run {
            v["run"] = json!(r);
        }
        if let Some(c) = cause {
            v["cause"] = json!(c);
        }
        if let Some((name, call)) = tool {
            v["data"] = json!({"tool": {"name": name}});
            if let Some(c) = call {
                v["data"]["tool"]["call_id"] = json!(c);
            }
        }
        Event::from_value(v).unwrap()
    }

    fn rules(events: &[Event]) -> Vec<(&'static str, Option<usize>)> {
        let mut c = CompletenessChecker::new();
        let mut out: Vec<_> = events.iter().enumerate().flat_map(|(i, e)| c.push_at(Some(i), e)).collect();
        out.extend(c.finish());
        out.into_iter().map(|w| (w.rule, w.index)).collect()
    }

    #[test]
    fn a_complete_story_has_no_warning() {
        let events = [
            ev("e0", "session.started", None, None, None),
            ev("e1", "run.started", Some("r1"), None, None),
            ev("e2", "tool.requested", Some("r1"), Some(("Bash", Some("c1"))), None),
            ev("e3", "tool.failed", Some("r1"), Some(("Bash", Some("c1"))), Some("e2")),
            ev("e4", "tool.requested", Some("r1"), Some(("read", None)), None),
            ev("e5", "tool.completed", Some("r1"), Some(("read", None)), Some("e4")),
            ev("e6", "run.finished", Some("r1"), None, Some("e1")),
            ev("e7", "session.ended", None, None, None),
        ];
        assert_eq!(rules(&events), vec![]);
    }

    #[test]
    fn a_run_still_open_at_the_end_of_the_log_is_fine_one_open_at_session_end_is_not() {
        let open = [ev("e0", "run.started", Some("r1"), None, None)];
        assert_eq!(rules(&open), vec![]);
        let ended = [ev("e0", "run.started", Some("r1"), None, None), ev("e1", "session.ended", None, None, None)];
        assert_eq!(rules(&ended), vec![(RUN_OPEN_AT_END, Some(1))]);
    }

    #[test]
    fn a_second_run_terminal_is_reported() {
        let events = [
            ev("e0", "run.started", Some("r1"), None, None),
            ev("e1", "run.cancelled", Some("r1"), None, None),
            ev("e2", "run.finished", Some("r1"), None, None),
        ];
        assert_eq!(rules(&events), vec![(RUN_TERMINAL_TWICE, Some(2))]);
    }

    #[test]
    fn a_request_without_outcome_is_reported_at_the_end() {
        let events = [
            ev("e0", "tool.requested", Some("r1"), Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.requested", Some("r1"), Some(("Bash", Some("c2"))), None),
            ev("e2", "tool.completed", Some("r1"), Some(("Bash", Some("c2"))), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_NO_OUTCOME, Some(0))]);
    }

    #[test]
    fn a_second_outcome_is_reported() {
        let events = [
            ev("e0", "tool.requested", None, Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.completed", None, Some(("Bash", Some("c1"))), None),
            ev("e2", "tool.failed", None, Some(("Bash", Some("c1"))), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_OUTCOME_TWICE, Some(2))]);
        // paired by cause when there is no call id
        let by_cause = [
            ev("e0", "tool.requested", None, Some(("read", None)), None),
            ev("e1", "tool.completed", None, Some(("read", None)), Some("e0")),
            ev("e2", "tool.completed", None, Some(("read", None)), Some("e0")),
        ];
        assert_eq!(rules(&by_cause), vec![(TOOL_OUTCOME_TWICE, Some(2))]);
    }

    #[test]
    fn an_outcome_before_its_request_is_reported() {
        let events = [
            ev("e0", "tool.completed", None, Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.requested", None, Some(("Bash", Some("c1"))), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_OUTCOME_FIRST, Some(1))]);
        // an outcome no request ever claims is a partial observation
        assert_eq!(rules(&events[..1]), vec![]);
    }

    #[test]
    fn name_pairing_and_redelivery() {
        // no call id, no cause: the oldest open request of that name
        let events = [
            ev("e0", "tool.requested", None, Some(("read", None)), None),
            ev("e1", "tool.requested", None, Some(("read", None)), None),
            ev("e2", "tool.completed", None, Some(("read", None)), None),
            ev("e2", "tool.completed", None, Some(("read", None)), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_NO_OUTCOME, Some(1))]);
    }

    #[test]
    fn an_outcome_without_a_request_is_reported_where_the_stream_tells_that_tools_requests() {
        // A request lost (written late, or never) in a stream that tells Bash requests.
        let events = [
            ev("e0", "tool.requested", Some("r1"), Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.completed", Some("r1"), Some(("Bash", Some("c1"))), Some("e0")),
            ev("e2", "tool.completed", Some("r1"), Some(("Bash", Some("c2"))), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_OUTCOME_ORPHAN, Some(2))]);
        // A surface that sees only results of a tool (no request of it anywhere) is not flagged.
        let results_only = [
            ev("e0", "tool.requested", None, Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.completed", None, Some(("Bash", Some("c1"))), None),
            ev("e2", "tool.completed", None, Some(("apply_patch", Some("c2"))), None),
        ];
        assert_eq!(rules(&results_only), vec![]);
        // An orphan claimed later is the out-of-order rule's, not this one's.
        let late = [
            ev("e0", "tool.completed", None, Some(("Bash", Some("c1"))), None),
            ev("e1", "tool.requested", None, Some(("Bash", Some("c1"))), None),
        ];
        assert_eq!(rules(&late), vec![(TOOL_OUTCOME_FIRST, Some(1))]);
    }

    #[test]
    fn a_run_terminal_without_its_start_is_reported_when_the_session_start_is_in_the_log() {
        let events = [
            ev("e0", "session.started", None, None, None),
            ev("e1", "run.started", Some("r1"), None, None),
            ev("e2", "run.finished", Some("r1"), None, None),
            ev("e3", "run.finished", Some("r2"), None, None),
        ];
        assert_eq!(rules(&events), vec![(RUN_TERMINAL_NO_START, Some(3))]);
        // A start written after its terminal: the terminal had no start before it.
        let reversed = [
            ev("e0", "session.started", None, None, None),
            ev("e1", "run.failed", Some("r1"), None, None),
            ev("e2", "run.started", Some("r1"), None, None),
        ];
        assert_eq!(rules(&reversed), vec![(RUN_TERMINAL_NO_START, Some(1))]);
        // A log that begins mid-session may begin after a run's start.
        assert_eq!(rules(&events[2..]), vec![]);
    }

    #[test]
    fn a_tool_event_after_its_run_ended_is_reported() {
        let events = [
            ev("e0", "run.started", Some("r1"), None, None),
            ev("e1", "tool.requested", Some("r1"), Some(("Bash", Some("c1"))), None),
            ev("e2", "run.finished", Some("r1"), None, None),
            ev("e3", "tool.completed", Some("r1"), Some(("Bash", Some("c1"))), None),
            ev("e4", "run.started", Some("r2"), None, None),
            ev("e5", "tool.requested", Some("r2"), Some(("Bash", Some("c2"))), None),
            ev("e6", "tool.completed", Some("r2"), Some(("Bash", Some("c2"))), None),
        ];
        assert_eq!(rules(&events), vec![(TOOL_AFTER_RUN_END, Some(3))]);
    }
}
