//! Per-session assembly state: the open spans and the Events recorded on them.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};

use aep_schemas::Capture;
use aep_schemas::event::Event;
use serde_json::Value;

use super::ids::{SpanContext, SpanId, parse_rfc3339_nanos, parse_traceparent};
use super::model::SpanLink;

/// What the assembler keeps of one Event.
#[derive(Debug, Clone)]
pub(crate) struct Rec {
    pub id: String,
    pub ty: String,
    /// The emitter when it is not the session's owner (a router, a control client).
    pub foreign_source: Option<String>,
    /// The emitting agent when it differs from the session's.
    pub foreign_agent: Option<String>,
    pub time: u64,
    pub pos: Option<(u64, u64)>,
    pub subject: Option<String>,
    pub run: Option<String>,
    pub step: Option<String>,
    pub cause: Option<String>,
    pub traceparent: Option<SpanContext>,
    pub severity: &'static str,
    pub data: Value,
    /// Content the capture ceiling lets through (see [`captured`]): a run's prompt or
    /// summary, a tool call's arguments or result, as text.
    pub content: Option<String>,
}

impl Rec {
    /// `fallback_time` stands in for an unparseable `time` (the session's last known time);
    /// `owner` is the session's `(source, agent)`; `ceiling` is the exporter's capture
    /// ceiling for content attributes.
    pub fn new(ev: &Event, fallback_time: u64, owner: (&str, &str), ceiling: Capture) -> Rec {
        Rec {
            id: ev.id.clone(),
            ty: ev.r#type.clone(),
            foreign_source: (*ev.source != *owner.0).then(|| ev.source.to_string()),
            foreign_agent: (ev.agent != owner.1).then(|| ev.agent.to_string()),
            time: parse_rfc3339_nanos(&ev.time).unwrap_or(fallback_time),
            pos: ev.position(),
            subject: ev.subject.clone(),
            run: ev.run.clone(),
            step: ev.step.clone(),
            cause: ev.cause.clone(),
            traceparent: ev.traceparent.as_deref().and_then(parse_traceparent),
            severity: ev.severity().as_str(),
            data: ev.data.as_ref().map_or(Value::Null, slim),
            content: captured(ev, ceiling),
        }
    }

    /// A member of `data` by a `/`-separated path of object keys (no escapes; unlike
    /// `Value::pointer` it allocates nothing).
    pub fn at(&self, path: &str) -> Option<&Value> {
        path.split('/').filter(|t| !t.is_empty()).try_fold(&self.data, |v, key| v.get(key))
    }

    /// A non-empty string member of `data` by path.
    pub fn str_at(&self, path: &str) -> Option<&str> {
        self.at(path).and_then(Value::as_str).filter(|s| !s.is_empty())
    }

    /// An unsigned integer member of `data` by path.
    pub fn u64_at(&self, path: &str) -> Option<u64> {
        self.at(path).and_then(Value::as_u64)
    }
}

/// The content member a span shows for an Event type, most detailed first: what a run was
/// asked (`run.started.prompt`, redacted) and answered (`run.finished.summary`, redacted),
/// a tool call's arguments (`args` full, `args_redacted` redacted) and result (AEP-0002
/// §5.3).
fn content_members(ty: &str) -> &'static [&'static str] {
    match ty {
        "run.started" => &["prompt"],
        "run.finished" => &["summary"],
        "tool.requested" => &["args", "args_redacted"],
        "tool.completed" => &["result", "result_redacted"],
        _ => &[],
    }
}

/// The Event's content that survives the capture ceiling, as text (objects as JSON), or
/// `None`. The Event is first down-leveled to the ceiling mechanically (AEP-0003 §6.4,
/// AEP-0005 §3.3: never up-leveled; a `full` Event under a `redacted` ceiling drops to
/// `metadata`), so only members the schema annotations allow at that level remain.
fn captured(ev: &Event, ceiling: Capture) -> Option<String> {
    let members = content_members(&ev.r#type);
    if members.is_empty() || ceiling < Capture::Redacted || ev.capture() < Capture::Redacted {
        return None;
    }
    let kept = aep_schemas::downlevel::downlevel(ev, ceiling);
    let data = kept.data.as_ref()?;
    members.iter().find_map(|m| match data.get(*m)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Null | Value::String(_) => None,
        v => Some(v.to_string()),
    })
}

/// `data` members the span builder reads; content-bearing members (arguments, results,
/// prompts, free text) are never kept, which bounds memory and keeps them out of spans.
const KEPT_STRINGS: [&str; 19] = [
    "kind",
    "status",
    "phase",
    "resolution",
    "via",
    "to",
    "trigger",
    "code",
    "agent_type",
    "role",
    "strategy",
    "key",
    "by",
    "rule",
    "reason",
    "args_digest",
    "result_digest",
    "query_digest",
    "corpus",
];

/// Objects kept, with the members kept of each.
const KEPT_OBJECTS: [(&str, &[&str]); 7] = [
    ("tool", &["name", "call_id"]),
    ("child", &["session", "run", "agent"]),
    ("parent", &["session", "run", "agent"]),
    ("client", &["name", "version"]),
    ("error", &["type"]),
    ("answer", &["option"]),
    ("cost", &["currency", "total", "prompt", "completion", "cache", "reasoning"]),
];

/// The part of `data` worth keeping: scalars that are numbers or booleans, structural
/// string tokens, `gen_ai.*` members, and the identity members of the common objects.
fn slim(data: &Value) -> Value {
    let Some(map) = data.as_object() else { return Value::Null };
    let mut out = serde_json::Map::new();
    for (k, v) in map {
        let keep = match v {
            Value::Number(_) | Value::Bool(_) => true,
            Value::String(_) => KEPT_STRINGS.contains(&k.as_str()) || k.starts_with("gen_ai."),
            Value::Object(inner) => {
                if let Some((_, members)) = KEPT_OBJECTS.iter().find(|(name, _)| name == k) {
                    let kept: serde_json::Map<String, Value> = inner
                        .iter()
                        .filter(|(ik, iv)| members.contains(&ik.as_str()) && (iv.is_string() || iv.is_number()))
                        .map(|(ik, iv)| (ik.clone(), iv.clone()))
                        .collect();
                    out.insert(k.clone(), Value::Object(kept));
                }
                false
            }
            _ => false,
        };
        if keep {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// Appends a span event unless the span holds `cap` already; then only counts it.
pub(crate) fn push_capped(list: &mut Vec<Rec>, dropped: &mut u32, rec: Rec, cap: usize) {
    if list.len() < cap {
        list.push(rec);
    } else {
        *dropped = dropped.saturating_add(1);
    }
}

/// Orders Events the AEP way: sequenced Events by `(epoch, seq)` (AEP-0001 §7 #3), with
/// unsequenced (foreign-emitter) Events merged in by `time` (AEP-0001 §5.2).
pub(crate) fn sort_recs(recs: &mut Vec<Rec>) {
    let (mut seqd, mut unseq): (Vec<Rec>, Vec<Rec>) = recs.drain(..).partition(|r| r.pos.is_some());
    seqd.sort_by(|a, b| (a.pos, a.time, &a.id).cmp(&(b.pos, b.time, &b.id)));
    unseq.sort_by(|a, b| (a.time, &a.id).cmp(&(b.time, &b.id)));
    let mut unseq = unseq.into_iter().peekable();
    for r in seqd {
        while let Some(u) = unseq.next_if(|u| u.time < r.time) {
            recs.push(u);
        }
        recs.push(r);
    }
    recs.extend(unseq);
}

/// `a` comes before `b` in session order: by position when both are sequenced, else by time.
pub(crate) fn before(a: &Rec, b: &Rec) -> bool {
    match (a.pos, b.pos) {
        (Some(x), Some(y)) => x < y,
        _ => (a.time, &a.id) < (b.time, &b.id),
    }
}

/// Which kind of paired span a call is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Tool,
    Attention,
    Delegation,
}

impl CallKind {
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Tool => "tool",
            CallKind::Attention => "attention",
            CallKind::Delegation => "delegation",
        }
    }
}

/// A paired span in flight: a tool call, an attention request, a subagent delegation.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub kind: CallKind,
    /// The explicit pairing key: `data.tool.call_id`, the request id, the child session.
    pub key: Option<String>,
    pub name: String,
    pub run: Option<String>,
    pub opener: Option<Rec>,
    pub terminal: Option<Rec>,
    /// Intermediate lifecycle Events (`attention.answered`, `attention.routed`...).
    pub middle: Vec<Rec>,
    /// Other Events recorded as span events.
    pub events: Vec<Rec>,
    /// Span events beyond the per-span cap, counted not kept (OTLP `droppedEventsCount`).
    pub dropped_events: u32,
    pub last: u64,
    pub order: u64,
}

impl Call {
    /// `rec` lies between this call's opener and its terminal (or after an open opener):
    /// by `(epoch, seq)` when both are sequenced, else by time.
    pub fn contains(&self, rec: &Rec) -> bool {
        let Some(o) = &self.opener else { return false };
        before(o, rec) && self.terminal.as_ref().is_none_or(|t| before(rec, t))
    }

    /// The identity the span id is derived from, stable across arrival orders.
    pub fn identity(&self) -> (&'static str, String) {
        match (&self.key, &self.opener, &self.terminal) {
            (Some(k), _, _) => ("key", k.clone()),
            (None, Some(o), _) => ("ev", o.id.clone()),
            (None, None, Some(t)) => ("end", t.id.clone()),
            (None, None, None) => ("none", String::new()),
        }
    }
}

/// A run in flight.
#[derive(Debug, Clone)]
pub(crate) struct RunState {
    pub started: Option<Rec>,
    pub terminal: Option<Rec>,
    pub events: Vec<Rec>,
    pub dropped_events: u32,
    pub first: u64,
    pub last: u64,
    pub order: u64,
}

/// A run's identity, kept for the session's life so late children find their parent.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub ctx: SpanContext,
    pub parent: Option<SpanId>,
    /// The run joined a foreign trace through its first Event's `traceparent`.
    pub foreign_trace: bool,
    /// A child span was already emitted under this context; it can no longer change.
    pub frozen: bool,
    pub open: Option<RunState>,
}

/// Contiguity of one epoch's `seq` values, to know when nothing earlier can still arrive.
#[derive(Debug, Clone, Default)]
pub(crate) struct Track {
    pub next: u64,
    pub ahead: BTreeSet<u64>,
}

impl Track {
    /// The stream starts at `seq` (the session's `session.started`): nothing lies below it.
    pub fn anchor(&mut self, seq: u64) {
        if seq > self.next {
            self.next = seq;
            self.ahead = self.ahead.split_off(&seq);
            while self.ahead.remove(&self.next) {
                self.next += 1;
            }
        }
    }

    pub fn see(&mut self, seq: u64) {
        if seq == self.next {
            self.next += 1;
            while self.ahead.remove(&self.next) {
                self.next += 1;
            }
        } else if seq > self.next {
            self.ahead.insert(seq);
        }
    }
}

/// One session being assembled, keyed by `(source, session)` (AEP-0001 §5.2).
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub source: String,
    pub session: String,
    pub agent: String,
    /// Runs root their own traces (see `SpanConfig::trace_per_run`).
    pub trace_per_run: bool,
    /// 0, or the count of earlier closures of this session (late Events after a flush).
    pub generation: u64,
    /// A continuation of a session that had ended: late Events only (AEP-0002 §2 #5).
    pub after_end: bool,
    pub ctx: SpanContext,
    pub parent: Option<SpanId>,
    pub links: Vec<SpanLink>,
    pub frozen: bool,
    pub started: Option<Rec>,
    pub ended: Option<Rec>,
    pub events: Vec<Rec>,
    pub dropped_events: u32,
    /// Runs of this session exported with status ERROR (the root's status).
    pub failed_runs: u64,
    /// Cap on span events per span (see `SpanConfig::max_events_per_span`).
    pub events_cap: usize,
    pub first: u64,
    pub last: u64,
    /// The first and last time of the session's Events other than the agent's own telemetry
    /// records: the root's bounds when there are such Events. The records carry the agent's
    /// clock, which may disagree with the hooks' by days; a session known only from them
    /// has its bounds from them (`first` / `last`).
    pub own: Option<(u64, u64)>,
    pub order: u64,
    /// The caller-clock arrival of the session's newest Event (see [`Session::clock`]).
    pub arrived: u64,
    pub runs: HashMap<String, Run>,
    pub calls: BTreeMap<u64, Call>,
    /// Spans already exported (late Events must not export them twice), oldest first.
    pub emitted: HashSet<SpanId>,
    pub emitted_fifo: VecDeque<SpanId>,
    /// Closed runs, oldest first; their identities are kept for late children.
    pub closed_runs: VecDeque<String>,
    /// Cap on `emitted` and `closed_runs` (memory bound of a long session).
    pub history_cap: usize,
    pub tracks: HashMap<u64, Track>,
    /// The earliest run prompt and the latest run answer the capture ceiling let through
    /// (the root's input and output), each with its Event time.
    pub first_input: Option<(u64, String)>,
    pub last_output: Option<(u64, String)>,
    /// The root went out while the session idled (see `SpanConfig::root_idle_nanos`).
    pub early_root: Option<EarlyRoot>,
    /// Something beyond its `session.started` happened: a run, a tool, the agent's own
    /// telemetry. A session with only its start is waiting for a first prompt; one with
    /// activity but no run is told by a channel that has no runs (OTLP only).
    pub active: bool,
}

/// A root exported while its session idled, before the session closed.
#[derive(Debug, Clone)]
pub(crate) struct EarlyRoot {
    /// The earliest Event since, other than the vendors' own telemetry records (which lag
    /// and annotate nothing); `u64::MAX` while none came.
    pub since: u64,
}

impl EarlyRoot {
    /// Whether anything the root would show came after it left.
    pub fn continued(&self) -> bool {
        self.since != u64::MAX
    }
}

impl Session {
    /// Nothing at or before `pos` can still arrive (all earlier positions were seen).
    pub fn settled(&self, pos: Option<(u64, u64)>) -> bool {
        match pos {
            None => false,
            Some((epoch, seq)) => self.tracks.get(&epoch).is_some_and(|t| t.next > seq),
        }
    }

    /// Records an exported span id, forgetting the oldest beyond the history cap.
    pub fn mark_emitted(&mut self, id: SpanId) {
        if self.emitted.insert(id) {
            self.emitted_fifo.push_back(id);
            while self.emitted_fifo.len() > self.history_cap.max(1) {
                if let Some(old) = self.emitted_fifo.pop_front() {
                    self.emitted.remove(&old);
                }
            }
        }
    }

    /// Records a closed run, forgetting the oldest closed run beyond the history cap.
    pub fn mark_run_closed(&mut self, run: &str) {
        self.closed_runs.push_back(run.to_owned());
        while self.closed_runs.len() > self.history_cap.max(1) {
            if let Some(old) = self.closed_runs.pop_front()
                && self.runs.get(&old).is_some_and(|r| r.open.is_none())
            {
                self.runs.remove(&old);
            }
        }
    }

    /// Nothing before `rec` can still arrive: every earlier position of the owner's stream
    /// was seen, or the stream (or `now`) is already `window` past it.
    pub fn settled_rec(&self, rec: &Rec, window: u64, now: u64) -> bool {
        (rec.foreign_source.is_none() && self.settled(rec.pos)) || self.last.max(now) >= rec.time.saturating_add(window)
    }

    /// The session's own clock at caller time `now`: its newest Event time plus the time
    /// since that Event arrived. Sessions whose vendor clocks disagree keep their own
    /// timelines; for a stream fed by [`super::SpanAssembler::push`] it is `now` itself.
    pub fn clock(&self, now: u64) -> u64 {
        self.last.saturating_add(now.saturating_sub(self.arrived))
    }

    /// Keeps the session's first prompt and last answer (at most one string each).
    pub fn see_content(&mut self, rec: &Rec) {
        let Some(text) = &rec.content else { return };
        match rec.ty.as_str() {
            "run.started" if self.first_input.as_ref().is_none_or(|(t, _)| rec.time < *t) => {
                self.first_input = Some((rec.time, text.clone()));
            }
            "run.finished" if self.last_output.as_ref().is_none_or(|(t, _)| rec.time >= *t) => {
                self.last_output = Some((rec.time, text.clone()));
            }
            _ => {}
        }
    }

    pub fn see(&mut self, rec: &Rec) {
        if let Some((epoch, seq)) = rec.pos {
            self.tracks.entry(epoch).or_default().see(seq);
        }
        if rec.time > 0 {
            self.first = self.first.min(rec.time); // an unparseable first `time` does not date the session 1970
            if !is_vendor_telemetry(&rec.ty) {
                let (lo, hi) = self.own.get_or_insert((rec.time, rec.time));
                (*lo, *hi) = ((*lo).min(rec.time), (*hi).max(rec.time));
            }
        }
        self.last = self.last.max(rec.time);
    }

    /// The root's bounds before its start and end Events: the session's own Events' (see
    /// [`Session::own`]), else all of them.
    pub fn bounds(&self) -> (u64, u64) {
        self.own.unwrap_or((if self.first == u64::MAX { self.last } else { self.first }, self.last))
    }
}

/// A vendor's own telemetry record (`x.<vendor>.otel.*`), which lags its session.
pub(crate) fn is_vendor_telemetry(ty: &str) -> bool {
    ty.starts_with("x.") && ty.contains(".otel.")
}
