//! The vendors' own telemetry joined onto the synthesized spans: token usage, cost and model
//! of a run's model calls on its `invoke_agent` span and one `chat {model}` span per call
//! under it, the vendor's own tool duration on its `execute_tool` span.
//!
//! The records lag: Claude Code exports on an interval, Gemini CLI and Qwen Code after
//! `SessionEnd`, Codex on its own batch schedule. So a finished run or tool span waits a
//! bounded grace ([`JoinConfig::grace_nanos`], on the sink's clock) for the records that
//! belong to it; a record arriving after its span left is not on the span (it stays in the
//! log export and the GenAI metrics). Every other span waits as long, so a session's spans
//! leave in the order they finished (a root never reaches a backend before its children).
//!
//! A record joins a span only where the join is certain, strongest first, and the span says
//! which (`aep.usage.join`):
//! - `run_id`: the record names its run (Claude Code's `prompt.id` is the hook channel's
//!   `prompt_id`, which is the AEP run);
//! - `time`: the record names none (Gemini CLI, Qwen Code, Codex) and its time falls inside
//!   exactly one known run of its session;
//! - `sole_run`: the session ended having had exactly one run, so every model call of the
//!   session is that run's (Codex `exec`, whose hook clock and OTLP clock may disagree).
//!
//! A tool span takes the vendor's `duration_ms` of the tool result carrying its call id
//! (Claude Code `tool_use_id`, Codex `call_id`) as `aep.vendor.tool_duration_ms`; the span's
//! own start and end stay the hook channel's.
//!
//! Run spans: `gen_ai.usage.input_tokens` / `output_tokens` summed, `gen_ai.request.model`
//! when no other channel named it, `aep.usage.models` (the models the calls named),
//! `aep.usage.model_calls`, `aep.cost.total` (USD, Claude Code's `cost_usd`), and
//! OpenInference's `llm.token_count.*`, `llm.model_name`, `llm.cost.total`.
//!
//! Model-call spans: each call a run took becomes a `chat {model}` span (kind CLIENT,
//! [`chat_span`]) right after its run, from the record's duration (or, for Codex, from the
//! `api_request` that opened it) to the record's time, so GenAI trace UIs that total usage
//! over model calls see the run's usage. Calls no run took leave with the session root, as
//! its children (`aep.usage.join = session`). A session whose agent sends its own model-call
//! spans ([`SpanJoin::vendor_model_calls`]: Claude Code's beta `llm_request`, Gemini CLI's
//! `llm_call`) gets none: its calls are in the trace already. The root names the model its
//! runs learned when nothing else named it.
//!
//! Pure and clockless: the caller gives every arrival time. Memory is bounded: at most
//! [`JoinConfig::max_held`] spans of at most [`JoinConfig::max_held_bytes`] in all wait (a
//! span's size is its names and attribute values, which at capture `full` carry tool
//! arguments and results), at most [`JoinConfig::max_records`] records and
//! [`JoinConfig::max_sessions`] sessions are remembered (the oldest session is forgotten first).

use std::collections::{HashMap, VecDeque};

use aep_adapters::otel::usage::number;
use aep_adapters::vendors::model_call;
use aep_schemas::event::Event;

use super::{LogSpans, ModelCall, Span, SpanContext, SpanRole, chat_span, parse_rfc3339_nanos, session_root_context};
use serde_json::{Map, Value};

/// Bounds of the join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinConfig {
    /// How long a finished span waits (a run or tool span for its vendor records); 0: not at all.
    pub grace_nanos: u64,
    /// Most spans waiting at once; beyond it the oldest leaves early with what it has.
    pub max_held: usize,
    /// Most bytes of spans waiting at once (as [`span_bytes`] counts them); beyond it the
    /// oldest leave early.
    pub max_held_bytes: usize,
    /// Most vendor records remembered (model calls and tool durations, all sessions).
    pub max_records: usize,
    /// Most sessions remembered.
    pub max_sessions: usize,
    /// How long a session's span index outlives its root, at least (vendor spans lag too).
    pub keep_nanos: u64,
    /// Runs root their own traces (the span sink's `trace_per_run`).
    pub trace_per_run: bool,
}

impl Default for JoinConfig {
    fn default() -> Self {
        Self {
            grace_nanos: 10_000_000_000,
            max_held: 10_000,
            max_held_bytes: 64 << 20,
            max_records: 65_536,
            max_sessions: 4096,
            keep_nanos: 60_000_000_000,
            trace_per_run: false,
        }
    }
}

/// How long after a vendor's model-call span ends its usage record may still be stamped.
pub const CALL_SLACK_NANOS: u64 = 250_000_000;

/// A vendor's report of one model call, as [`SpanJoin::model_call_in`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallUsage {
    /// The model the record names.
    pub model: Option<String>,
    /// Input tokens.
    pub input: Option<u64>,
    /// Output tokens.
    pub output: Option<u64>,
}

/// Distinct runs tracked per session (beyond it the session is not a sole-run session).
const MAX_RUNS: usize = 64;

/// One model call a vendor reported.
#[derive(Debug, Clone)]
struct Call {
    run: Option<String>,
    /// The record's time: when the call returned.
    time: u64,
    /// What the record says of the call (its `chat` span's content).
    call: ModelCall,
}

/// What one session's vendor records hold for its spans.
#[derive(Debug, Default)]
struct Ledger {
    calls: Vec<Call>,
    /// Vendor tool durations by call id.
    tool_ms: HashMap<String, f64>,
    /// Distinct runs seen, in order (up to [`MAX_RUNS`]).
    runs: Vec<String>,
    many_runs: bool,
    /// Run spans seen: `(run, start, end)`.
    ranges: Vec<(String, u64, u64)>,
    ended: bool,
    /// Forgotten at this sink time (set once the session's root has passed).
    expires: Option<u64>,
    order: u64,
    /// The session's root span, as the span sink exports it.
    root: Option<SpanContext>,
    /// Run spans by run id.
    run_ctx: HashMap<String, SpanContext>,
    /// Tool call spans by call id, with their run.
    tool_ctx: HashMap<String, (SpanContext, Option<String>)>,
    /// When the call a vendor's opening record announced began (Codex `api_request`), for
    /// the record that completes it.
    opened: Option<u64>,
    /// The session's agent sends its own model-call spans: no `chat` span is synthesized.
    vendor_calls: bool,
    /// The first model a run span of the session named, for the root.
    model: Option<String>,
    /// The run of each model request a vendor record named with its run (Claude Code's
    /// `api_request` / `api_error` `request_id` with its `prompt.id`), for the vendor spans
    /// that name the same request (`llm_request`'s `gen_ai.response.id`).
    requests: HashMap<String, String>,
}

impl Ledger {
    fn records(&self) -> usize {
        self.calls.len() + self.tool_ms.len() + self.tool_ctx.len() + self.requests.len()
    }
}

type Key = (String, String);

/// Holds finished run and tool spans for their vendor records (see the module doc).
#[derive(Debug)]
pub struct SpanJoin {
    cfg: JoinConfig,
    ledgers: HashMap<Key, Ledger>,
    fifo: VecDeque<(Key, u64)>,
    next: u64,
    records: usize,
    /// Waiting spans: when they are due, their size, the span.
    held: VecDeque<(u64, usize, Span)>,
    held_bytes: usize,
    /// The span every Event lands on (the ids the span sink derives).
    contexts: LogSpans,
    /// Sessions by bare name (vendor spans name their session, not its source).
    by_name: HashMap<String, Vec<Key>>,
}

fn attr<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    span.attributes.get(key).and_then(Value::as_str)
}

/// How a record was joined, weakest last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum How {
    RunId,
    Time,
    SoleRun,
    /// No run: the session root's, when it left.
    Session,
}

impl How {
    fn as_str(self) -> &'static str {
        match self {
            How::RunId => "run_id",
            How::Time => "time",
            How::SoleRun => "sole_run",
            How::Session => "session",
        }
    }
}

impl SpanJoin {
    /// A join with these bounds.
    pub fn new(cfg: JoinConfig) -> Self {
        Self {
            contexts: LogSpans::new(cfg.trace_per_run),
            cfg,
            ledgers: HashMap::new(),
            fifo: VecDeque::new(),
            next: 0,
            records: 0,
            held: VecDeque::new(),
            held_bytes: 0,
            by_name: HashMap::new(),
        }
    }

    /// The one session remembered under a bare session name (`None` when none or several).
    pub fn session_named(&self, name: &str) -> Option<&Key> {
        match self.by_name.get(name).map(Vec::as_slice) {
            Some([one]) => Some(one),
            _ => None,
        }
    }

    /// The root span of a remembered session.
    pub fn root_of(&self, key: &Key) -> Option<SpanContext> {
        self.ledgers.get(key)?.root
    }

    /// The run span of a remembered session's run.
    pub fn run_of(&self, key: &Key, run: &str) -> Option<SpanContext> {
        self.ledgers.get(key)?.run_ctx.get(run).copied()
    }

    /// The one model call of a remembered session reported while a vendor's own model-call
    /// span was open: its record time between `start` and `end` (plus [`CALL_SLACK_NANOS`],
    /// for a record written as the call returned). `None` when none or several lie there (a
    /// join only where it is certain). Nothing is consumed: the run span still sums the call.
    pub fn model_call_in(&self, key: &Key, start: u64, end: u64) -> Option<CallUsage> {
        let ledger = self.ledgers.get(key)?;
        let until = end.saturating_add(CALL_SLACK_NANOS);
        let mut inside = ledger.calls.iter().filter(|c| start <= c.time && c.time <= until);
        let one = inside.next()?;
        if inside.next().is_some() {
            return None;
        }
        let c = &one.call;
        Some(CallUsage { model: c.model.clone(), input: c.input_tokens, output: c.output_tokens })
    }

    /// The run a vendor record of a remembered session tied to model request `id` (its
    /// `request_id` and its run), if one did.
    pub fn run_of_request(&self, key: &Key, id: &str) -> Option<&str> {
        self.ledgers.get(key)?.requests.get(id).map(String::as_str)
    }

    /// The tool call span of a remembered session's call id, with its run.
    pub fn tool_of(&self, key: &Key, call_id: &str) -> Option<(SpanContext, Option<&str>)> {
        self.ledgers.get(key)?.tool_ctx.get(call_id).map(|(c, r)| (*c, r.as_deref()))
    }

    fn forget(&mut self, key: &Key) {
        if let Some(l) = self.ledgers.remove(key) {
            self.records -= l.records();
        }
        if let Some(v) = self.by_name.get_mut(&key.1) {
            v.retain(|k| k != key);
            if v.is_empty() {
                self.by_name.remove(&key.1);
            }
        }
    }

    /// Whether a span of session `session` (by its `aep.session_id`) is waiting.
    pub fn holds(&self, session: &str) -> bool {
        self.held.iter().any(|(_, _, s)| attr(s, "aep.session_id") == Some(session))
    }

    /// Spans waiting.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Bytes of the spans waiting (as [`span_bytes`] counts them).
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Vendor records remembered.
    pub fn records(&self) -> usize {
        self.records
    }

    fn ledger(&mut self, key: &Key) -> &mut Ledger {
        if !self.ledgers.contains_key(key) {
            self.next += 1;
            self.fifo.push_back((key.clone(), self.next));
            self.ledgers.insert(key.clone(), Ledger { order: self.next, ..Ledger::default() });
            self.by_name.entry(key.1.clone()).or_default().push(key.clone());
        }
        self.ledgers.get_mut(key).expect("inserted above")
    }

    /// Forgets the oldest sessions while over a bound.
    fn evict(&mut self) {
        while self.records > self.cfg.max_records || self.ledgers.len() > self.cfg.max_sessions.max(1) {
            let Some((key, order)) = self.fifo.pop_front() else { break };
            if self.ledgers.get(&key).is_some_and(|l| l.order == order) {
                self.forget(&key);
            }
        }
    }

    /// Reads what an Event tells the join: a model call, a vendor tool duration, a run of
    /// its session, the session's end.
    pub fn observe(&mut self, ev: &Event) {
        let Some(session) = ev.session.as_deref() else { return };
        let key = (ev.source.to_string(), session.to_owned());
        let data = ev.data.as_ref().and_then(Value::as_object);
        let time = parse_rfc3339_nanos(&ev.time).unwrap_or(0);
        let reported = data.and_then(|d| model_call(&ev.r#type, d));
        // A vendor record naming both its run and a model request (a failed call too): the
        // request's spans belong to that run.
        let request =
            ev.run.as_ref().filter(|_| ev.r#type.starts_with("x.") && ev.r#type.contains(".otel.")).and_then(|run| {
                let id = reported.as_ref().and_then(|c| c.response_id).or_else(|| {
                    data.and_then(|d| d.get("request_id")).and_then(Value::as_str).filter(|s| !s.is_empty())
                })?;
                Some((id.to_owned(), run.clone()))
            });
        // A record that opens a call (no counts of its own) dates the one that completes it.
        let opened = reported
            .as_ref()
            .filter(|c| c.opens)
            .map(|c| time.saturating_sub(nanos_of_ms(c.duration_ms.unwrap_or(0.0))));
        // A call with counts, or one that failed (no counts, an error type).
        let call = reported
            .filter(|c| c.input_tokens.is_some() || c.output_tokens.is_some() || c.error_type.is_some())
            .map(|c| Call {
                run: ev.run.clone(),
                time,
                call: ModelCall {
                    event_id: ev.id.clone(),
                    start_unix_nanos: c.duration_ms.map_or(time, |ms| time.saturating_sub(nanos_of_ms(ms))),
                    end_unix_nanos: time,
                    model: c.model.map(str::to_owned),
                    provider: c.provider.map(str::to_owned),
                    input_tokens: c.input_tokens,
                    output_tokens: c.output_tokens,
                    cache_read_tokens: c.cache_read_tokens,
                    cache_creation_tokens: c.cache_creation_tokens,
                    reasoning_tokens: c.reasoning_tokens,
                    response_id: c.response_id.map(str::to_owned),
                    finish_reasons: c.finish_reasons.iter().map(|s| (*s).to_owned()).collect(),
                    status_code: c.status_code,
                    cost_usd: data.and_then(|d| d.get("cost_usd")).and_then(number).filter(|c| *c >= 0.0),
                    join: None,
                    error_type: c.error_type.map(|t| t.into_owned()),
                },
            });
        let timed = call.as_ref().is_some_and(|c| c.call.start_unix_nanos < c.time);
        let tool = data.and_then(|d| vendor_tool_duration(&ev.r#type, d));
        // The spans vendor spans may be placed under: the root, runs, tool calls.
        let call_id =
            ev.r#type.starts_with("tool.").then(|| ev.data.as_ref()?.pointer("/tool/call_id")?.as_str()).flatten();
        let placing = ev.seq.is_some()
            && (ev.r#type.starts_with("session.") || ev.r#type.starts_with("run.") || call_id.is_some());
        let ctx = if placing { self.contexts.context(ev) } else { None };
        let known = self.ledgers.contains_key(&key);
        if !known
            && call.is_none()
            && tool.is_none()
            && ev.run.is_none()
            && ctx.is_none()
            && opened.is_none()
            && request.is_none()
        {
            return;
        }
        let trace_per_run = self.cfg.trace_per_run;
        let ledger = self.ledger(&key);
        let mut added = 0;
        if let Some(ctx) = ctx {
            match (call_id, ev.run.as_deref()) {
                (Some(id), run) => {
                    if ledger.tool_ctx.insert(id.to_owned(), (ctx, run.map(str::to_owned))).is_none() {
                        added += 1;
                    }
                }
                (None, Some(run)) if ledger.run_ctx.len() < MAX_RUNS * 4 || ledger.run_ctx.contains_key(run) => {
                    ledger.run_ctx.insert(run.to_owned(), ctx);
                }
                (None, Some(_)) => {}
                (None, None) => ledger.root = Some(ctx),
            }
            if ledger.root.is_none() {
                // Derived as the assembler derives it; in the run's trace unless runs root their own.
                let mut root = session_root_context(&key.0, &key.1);
                if !trace_per_run {
                    root.trace_id = ctx.trace_id;
                }
                ledger.root = Some(root);
            }
        }
        if let Some(run) = &ev.run
            && !ledger.runs.iter().any(|r| r == run)
        {
            if ledger.runs.len() < MAX_RUNS {
                ledger.runs.push(run.clone());
            } else {
                ledger.many_runs = true;
            }
        }
        if ev.r#type == "session.ended" {
            ledger.ended = true;
        }
        if opened.is_some() {
            ledger.opened = opened;
        }
        if let Some(mut c) = call {
            // No duration of its own: the call began when its opening record says (Codex).
            if let Some(start) = ledger.opened.take().filter(|s| !timed && *s <= c.time) {
                c.call.start_unix_nanos = start;
            }
            ledger.calls.push(c);
            added += 1;
        }
        if let Some((id, ms)) = tool
            && ledger.tool_ms.insert(id, ms).is_none()
        {
            added += 1;
        }
        if let Some((id, run)) = request
            && ledger.requests.insert(id, run).is_none()
        {
            added += 1;
        }
        self.records += added;
        self.evict();
    }

    /// Takes a finished span; it waits (returned later by [`SpanJoin::release`], a run or
    /// tool span with what joined it) unless the grace is 0 or too many already wait.
    pub fn hold(&mut self, span: Span, now: u64) -> Vec<Span> {
        let mut out = Vec::new();
        // A root sent while its session idles (`aep.session.idle`) does not end the session:
        // its index stays for the runs that may follow (bounded by `max_sessions`).
        if span.role == SpanRole::Session
            && !span.attributes.contains_key("aep.session.idle")
            && let (Some(src), Some(sess)) = (attr(&span, "aep.source"), attr(&span, "aep.session_id"))
        {
            let expires = now.saturating_add(self.cfg.grace_nanos.saturating_mul(2).max(self.cfg.keep_nanos));
            if let Some(l) = self.ledgers.get_mut(&(src.to_owned(), sess.to_owned())) {
                l.expires = Some(expires);
            }
        }
        if self.cfg.grace_nanos == 0 {
            self.enrich(span, &mut out);
            return out;
        }
        let bytes = span_bytes(&span);
        self.held_bytes += bytes;
        self.held.push_back((now.saturating_add(self.cfg.grace_nanos), bytes, span));
        while self.held.len() > self.cfg.max_held.max(1)
            || (self.held_bytes > self.cfg.max_held_bytes && self.held.len() > 1)
        {
            if let Some((_, b, s)) = self.held.pop_front() {
                self.held_bytes -= b;
                self.enrich(s, &mut out);
            }
        }
        out
    }

    /// The spans whose grace is over at `now`, with what joined them; forgets sessions
    /// whose root left long enough ago.
    pub fn release(&mut self, now: u64) -> Vec<Span> {
        let mut out = Vec::new();
        while self.held.front().is_some_and(|(due, _, _)| *due <= now) {
            if let Some((_, b, s)) = self.held.pop_front() {
                self.held_bytes -= b;
                self.enrich(s, &mut out);
            }
        }
        while let Some((key, order)) = self.fifo.front() {
            let Some(l) = self.ledgers.get(key) else {
                self.fifo.pop_front();
                continue;
            };
            if l.order != *order {
                self.fifo.pop_front();
                continue;
            }
            if l.expires.is_none_or(|e| e > now) {
                break;
            }
            let key = key.clone();
            self.fifo.pop_front();
            self.forget(&key);
        }
        out
    }

    /// Every waiting span (shutdown).
    pub fn release_all(&mut self) -> Vec<Span> {
        self.held_bytes = 0;
        let held: Vec<Span> = self.held.drain(..).map(|(_, _, s)| s).collect();
        let mut out = Vec::with_capacity(held.len());
        for s in held {
            self.enrich(s, &mut out);
        }
        out
    }

    /// Records that the session's agent sends its own model-call spans (placed by
    /// `VendorSpans`): its calls then get no synthesized `chat` span (the vendor's are the
    /// calls in the trace; two of each would double every token total). Runs released
    /// before the first such span arrived keep theirs.
    pub fn vendor_model_calls(&mut self, key: &Key) {
        if let Some(l) = self.ledgers.get_mut(key) {
            l.vendor_calls = true;
        }
    }

    /// Puts `span` on `out` with what joined it; a run span is followed by a `chat` span
    /// per model call it took (unless the agent sends its own).
    fn enrich(&mut self, mut span: Span, out: &mut Vec<Span>) {
        let (Some(src), Some(sess)) = (attr(&span, "aep.source"), attr(&span, "aep.session_id")) else {
            out.push(span);
            return;
        };
        let key = (src.to_owned(), sess.to_owned());
        let Some(ledger) = self.ledgers.get_mut(&key) else {
            out.push(span);
            return;
        };
        match span.role {
            SpanRole::Tool => {
                if let Some(ms) = attr(&span, "gen_ai.tool.call.id").and_then(|id| ledger.tool_ms.remove(id)) {
                    self.records -= 1;
                    span.attributes.insert("aep.vendor.tool_duration_ms".into(), json_number(ms));
                }
            }
            SpanRole::Run => {
                let Some(run) = attr(&span, "aep.run_id").map(str::to_owned) else {
                    out.push(span);
                    return;
                };
                let (start, end) = (span.start_unix_nanos, span.end_unix_nanos);
                if ledger.ranges.len() < MAX_RUNS * 4 {
                    ledger.ranges.push((run.clone(), start, end));
                }
                let sole = ledger.ended && !ledger.many_runs && ledger.runs.len() == 1 && ledger.runs[0] == run;
                let other_run_holds = |t: u64, ranges: &[(String, u64, u64)]| {
                    ranges.iter().any(|(r, s, e)| *r != run && *s <= t && t <= *e)
                };
                let mut taken: Vec<(How, Call)> = Vec::new();
                let mut keep = Vec::with_capacity(ledger.calls.len());
                for c in std::mem::take(&mut ledger.calls) {
                    let how = match &c.run {
                        Some(r) if *r == run => Some(How::RunId),
                        Some(_) => None,
                        None if start <= c.time && c.time <= end && !other_run_holds(c.time, &ledger.ranges) => {
                            Some(How::Time)
                        }
                        None if sole => Some(How::SoleRun),
                        None => None,
                    };
                    match how {
                        Some(h) => taken.push((h, c)),
                        None => keep.push(c),
                    }
                }
                ledger.calls = keep;
                self.records -= taken.len();
                put_usage(&mut span.attributes, &taken);
                if ledger.model.is_none() {
                    ledger.model = attr(&span, "gen_ai.request.model").map(str::to_owned);
                }
                let calls = if ledger.vendor_calls { Vec::new() } else { chat_spans(&span, taken) };
                out.push(span);
                out.extend(calls);
                return;
            }
            SpanRole::Session => {
                // The model a run learned (from its calls) names the session's too; the
                // root's operation stays the agent's invocation.
                if !span.attributes.contains_key("gen_ai.request.model")
                    && let Some(m) = &ledger.model
                {
                    span.attributes.insert("gen_ai.request.model".into(), m.as_str().into());
                }
                // Calls no run took (between runs, or reported after their run left) are
                // the session's for certain, the run's not: under the root.
                let calls = if ledger.vendor_calls || ledger.calls.is_empty() {
                    Vec::new()
                } else {
                    let left: Vec<(How, Call)> =
                        std::mem::take(&mut ledger.calls).into_iter().map(|c| (How::Session, c)).collect();
                    self.records -= left.len();
                    chat_spans(&span, left)
                };
                out.push(span);
                out.extend(calls);
                return;
            }
            _ => {}
        }
        out.push(span);
    }
}

/// About the bytes a span holds: its names, attribute keys and values, span events and
/// links (the fixed-size fields are not counted). Bounds the spans waiting out the grace.
pub fn span_bytes(span: &Span) -> usize {
    fn value(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(value).sum::<usize>() + 8,
            Value::Object(m) => attrs(m),
            _ => 8,
        }
    }
    fn attrs(m: &Map<String, Value>) -> usize {
        m.iter().map(|(k, v)| k.len() + value(v) + 16).sum()
    }
    span.name.len()
        + span.service_name.len()
        + span.status_message.len()
        + attrs(&span.attributes)
        + span.events.iter().map(|e| e.name.len() + attrs(&e.attributes) + 16).sum::<usize>()
        + span.links.iter().map(|l| attrs(&l.attributes) + 32).sum::<usize>()
}

/// `(call id, duration ms)` of a vendor's tool result record (`x.<vendor>.otel.tool_result`).
fn vendor_tool_duration(ty: &str, data: &Map<String, Value>) -> Option<(String, f64)> {
    if !(ty.starts_with("x.") && ty.ends_with(".otel.tool_result")) {
        return None;
    }
    let id = ["tool_use_id", "call_id"].iter().find_map(|k| data.get(*k)?.as_str().filter(|s| !s.is_empty()))?;
    let ms = data.get("duration_ms").and_then(number).filter(|d| *d >= 0.0)?;
    Some((id.to_owned(), ms))
}

/// Milliseconds (a vendor's `duration_ms`) as nanoseconds.
fn nanos_of_ms(ms: f64) -> u64 {
    if ms.is_finite() && ms > 0.0 { (ms * 1_000_000.0).min(u64::MAX as f64) as u64 } else { 0 }
}

/// One `chat` span per joined call, under `parent` (a run span, or the root), in record order,
/// placed inside it ([`fit_inside`]).
fn chat_spans(parent: &Span, calls: Vec<(How, Call)>) -> Vec<Span> {
    let mut spans: Vec<Span> = calls
        .into_iter()
        .map(|(how, c)| chat_span(parent, &ModelCall { join: Some(how.as_str()), ..c.call }))
        .collect();
    fit_inside(parent, &mut spans);
    spans
}

/// Keeps a parent's model-call spans inside it. Their times are the agent's clock (its
/// records), the parent's are the hooks'; where the two disagree (a VM, a container, a
/// laptop whose clock drifted), calls joined for certain by run id or as the session's sole
/// run would sit outside their run, and trace UIs would stretch the trace by the skew
/// (days, seen in Phoenix). The calls are moved together by the one shift that brings their
/// window inside the parent, so their order, gaps and durations stay the agent's; a window
/// longer than the parent starts at the parent's start and each call is cut at its end.
/// Each moved span says by how much (`aep.clock.shift_ns`, signed).
fn fit_inside(parent: &Span, spans: &mut [Span]) {
    let (Some(lo), Some(hi)) =
        (spans.iter().map(|s| s.start_unix_nanos).min(), spans.iter().map(|s| s.end_unix_nanos).max())
    else {
        return;
    };
    let (p_lo, p_hi) = (parent.start_unix_nanos, parent.end_unix_nanos.max(parent.start_unix_nanos));
    if p_lo <= lo && hi <= p_hi {
        return;
    }
    // The signed shift moving the window's start to `to`.
    let target = if hi - lo > p_hi - p_lo || lo < p_lo { p_lo } else { p_hi - (hi - lo) };
    let shift = i128::from(target) - i128::from(lo);
    let moved = |t: u64| u64::try_from(i128::from(t) + shift).unwrap_or(0).clamp(p_lo, p_hi);
    for s in spans {
        s.start_unix_nanos = moved(s.start_unix_nanos);
        s.end_unix_nanos = moved(s.end_unix_nanos);
        let shift = i64::try_from(shift).unwrap_or(if shift < 0 { i64::MIN } else { i64::MAX });
        s.attributes.insert("aep.clock.shift_ns".into(), Value::from(shift));
    }
}

fn json_number(x: f64) -> Value {
    if x.fract() == 0.0 && (0.0..9.0e15).contains(&x) { Value::from(x as u64) } else { Value::from(x) }
}

/// Sums the joined model calls onto a run span's attributes.
fn put_usage(a: &mut Map<String, Value>, calls: &[(How, Call)]) {
    if calls.is_empty() {
        return;
    }
    let sum = |f: fn(&Call) -> Option<u64>| -> Option<u64> {
        calls.iter().filter_map(|(_, c)| f(c)).fold(None, |acc, x| Some(acc.unwrap_or(0) + x))
    };
    let input = sum(|c| c.call.input_tokens);
    let output = sum(|c| c.call.output_tokens);
    if let Some(n) = input {
        a.insert("gen_ai.usage.input_tokens".into(), n.into());
        a.insert("llm.token_count.prompt".into(), n.into());
    }
    if let Some(n) = output {
        a.insert("gen_ai.usage.output_tokens".into(), n.into());
        a.insert("llm.token_count.completion".into(), n.into());
    }
    if input.is_some() || output.is_some() {
        a.insert("llm.token_count.total".into(), (input.unwrap_or(0) + output.unwrap_or(0)).into());
    }
    a.insert("aep.usage.model_calls".into(), calls.len().into());
    let weakest = calls.iter().map(|(h, _)| *h).max().unwrap_or(How::RunId);
    a.insert("aep.usage.join".into(), weakest.as_str().into());
    let mut models: Vec<&str> = Vec::new();
    for m in calls.iter().filter_map(|(_, c)| c.call.model.as_deref()) {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    // The vendors name the model they asked for; none reports a separate response model,
    // so no `gen_ai.response.*` is claimed (a GenAI UI would also show it as the output).
    if let Some(last) = models.last() {
        a.insert("llm.model_name".into(), (*last).into());
        a.entry("gen_ai.request.model").or_insert_with(|| models[0].into());
        a.insert("aep.usage.models".into(), models.iter().map(|m| Value::from(*m)).collect::<Vec<_>>().into());
    }
    let costs: Vec<f64> = calls.iter().filter_map(|(_, c)| c.call.cost_usd).collect();
    if !costs.is_empty() {
        let total: f64 = costs.iter().sum();
        // A run Event's own `data.cost` wins (AEP-0002 §5.3); the vendor's figure fills in.
        if !a.contains_key("aep.cost.total") {
            a.insert("aep.cost.total".into(), total.into());
            a.insert("aep.cost.currency".into(), "USD".into());
        }
        a.insert("llm.cost.total".into(), total.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{SpanConfig, assemble};
    use serde_json::json;

    const SRC: &str = "aep://h/agent/claude-code/session/s1";

    fn ev(id: &str, ty: &str, seq: u64, t: &str, run: Option<&str>, data: Value) -> Event {
        let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":t,"source":SRC,"agent":"claude-code",
            "session":"s1","seq":seq,"data":data});
        if let Some(r) = run {
            v["run"] = r.into();
        }
        Event::from_value(v).unwrap()
    }

    fn session() -> Vec<Event> {
        vec![
            ev("e0", "session.started", 0, "2026-07-03T10:00:00Z", None, json!({})),
            ev("e1", "run.started", 1, "2026-07-03T10:00:01Z", Some("p1"), json!({})),
            ev(
                "e2",
                "tool.requested",
                2,
                "2026-07-03T10:00:02Z",
                Some("p1"),
                json!({"tool":{"name":"Bash","call_id":"t1"}}),
            ),
            ev(
                "e3",
                "tool.completed",
                3,
                "2026-07-03T10:00:03Z",
                Some("p1"),
                json!({"tool":{"name":"Bash","call_id":"t1"}}),
            ),
            ev("e4", "run.finished", 4, "2026-07-03T10:00:04Z", Some("p1"), json!({})),
            ev("e5", "run.started", 5, "2026-07-03T10:00:05Z", Some("p2"), json!({})),
            ev("e6", "run.finished", 6, "2026-07-03T10:00:08Z", Some("p2"), json!({})),
            ev("e7", "session.ended", 7, "2026-07-03T10:00:09Z", None, json!({})),
        ]
    }

    fn api_request(id: &str, t: &str, run: Option<&str>, input: &str) -> Event {
        let mut e = ev(
            id,
            "x.claude-code.otel.api_request",
            0,
            t,
            run,
            json!({"model":"claude-opus-4-8","input_tokens":input,"output_tokens":"25","cost_usd":0.5,"duration_ms":"90"}),
        );
        e.seq = None;
        e
    }

    fn run_of<'a>(spans: &'a [Span], run: &str) -> &'a Span {
        spans.iter().find(|s| s.role == SpanRole::Run && attr(s, "aep.run_id") == Some(run)).unwrap()
    }

    /// Spans through the join with the records arriving after the session (as they do).
    fn joined(cfg: JoinConfig, late: &[Event]) -> Vec<Span> {
        let mut join = SpanJoin::new(cfg);
        let events = session();
        for e in &events {
            join.observe(e);
        }
        let mut out = Vec::new();
        for s in assemble(&events, SpanConfig::default()) {
            out.extend(join.hold(s, 100));
        }
        for e in late {
            join.observe(e);
        }
        out.extend(join.release(100 + 5));
        out.extend(join.release_all());
        out
    }

    #[test]
    fn records_naming_their_run_sum_onto_it_after_the_span_finished() {
        let late = [
            api_request("a1", "2026-07-03T10:00:02Z", Some("p1"), "1200"),
            api_request("a2", "2026-07-03T10:00:04Z", Some("p1"), "300"),
            api_request("a3", "2026-07-03T10:00:06Z", Some("p2"), "7"),
        ];
        let spans = joined(JoinConfig { grace_nanos: 10, ..JoinConfig::default() }, &late);
        let p1 = run_of(&spans, "p1");
        assert_eq!(p1.attributes["gen_ai.usage.input_tokens"], 1500);
        assert_eq!(p1.attributes["gen_ai.usage.output_tokens"], 50);
        assert_eq!(p1.attributes["llm.token_count.total"], 1550);
        assert_eq!(p1.attributes["aep.usage.model_calls"], 2);
        assert_eq!(p1.attributes["aep.usage.join"], "run_id");
        assert_eq!(p1.attributes["aep.usage.models"], json!(["claude-opus-4-8"]));
        assert_eq!(p1.attributes["gen_ai.request.model"], "claude-opus-4-8", "no other channel named it");
        assert_eq!(p1.attributes["aep.cost.total"], 1.0);
        assert_eq!(run_of(&spans, "p2").attributes["gen_ai.usage.input_tokens"], 7);
        // One `chat` span per call, under the run that took it, its counts the run's.
        let chats: Vec<&Span> = spans.iter().filter(|s| s.role == SpanRole::ModelCall).collect();
        assert_eq!(spans.len(), 4 + chats.len(), "root, two runs, one tool, and the calls: nothing lost");
        for (run, n, input) in [("p1", 2, 1500), ("p2", 1, 7)] {
            let r = run_of(&spans, run);
            let mine: Vec<&&Span> = chats.iter().filter(|c| c.parent_span_id == Some(r.span_id)).collect();
            assert_eq!(mine.len(), n, "{run}");
            assert!(mine.iter().all(|c| c.trace_id == r.trace_id && c.name == "chat claude-opus-4-8"));
            let sum: u64 = mine.iter().map(|c| c.attributes["gen_ai.usage.input_tokens"].as_u64().unwrap()).sum();
            assert_eq!(sum, input, "{run}");
            assert!(mine.iter().all(|c| c.attributes["aep.usage.join"] == "run_id"));
        }
        // Started `duration_ms` before its record: a1 was stamped 10:00:02 after 90 ms.
        let a1 = chats.iter().find(|c| c.attributes["aep.event_id"] == "a1").unwrap();
        assert_eq!(a1.end_unix_nanos - a1.start_unix_nanos, 90_000_000);
        assert_eq!(a1.attributes["aep.cost.total"], 0.5);
        // The session's root names the model its runs learned from their calls.
        let root = spans.iter().find(|s| s.role == SpanRole::Session).unwrap();
        assert_eq!(root.attributes["gen_ai.request.model"], "claude-opus-4-8");
        assert!(root.attributes.get("gen_ai.operation.name").is_none(), "its runs are the operations");
    }

    /// A failed attempt (`api_error`, as Claude Code's real `s06_api_error_400` sends it) is a
    /// `chat` span too, ERROR with its `error.type`, no counts; the run's sums are the
    /// answered calls'.
    #[test]
    fn a_failed_call_is_an_error_chat_span_without_counts() {
        let mut failed = ev(
            "f1",
            "x.claude-code.otel.api_error",
            0,
            "2026-07-03T10:00:02Z",
            Some("p1"),
            json!({"model":"claude-opus-4-8","status_code":400,"duration_ms":30,"request_id":"req_1","attempt":1}),
        );
        failed.seq = None;
        let late = [failed, api_request("a1", "2026-07-03T10:00:03Z", Some("p1"), "1200")];
        let spans = joined(JoinConfig { grace_nanos: 10, ..JoinConfig::default() }, &late);
        let chats: Vec<&Span> = spans.iter().filter(|s| s.role == SpanRole::ModelCall).collect();
        assert_eq!(chats.len(), 2, "the failed attempt and the answered call");
        let f = chats.iter().find(|c| c.attributes["aep.event_id"] == "f1").unwrap();
        assert_eq!(f.status, crate::spans::StatusCode::Error);
        assert_eq!((f.attributes["error.type"].as_str(), f.status_message.as_str()), (Some("400"), "HTTP 400"));
        assert_eq!(f.attributes["http.response.status_code"], 400);
        assert!(f.attributes.get("gen_ai.usage.input_tokens").is_none(), "no counts: {:?}", f.attributes);
        assert_eq!(f.end_unix_nanos - f.start_unix_nanos, 30_000_000);
        assert_eq!(f.parent_span_id, Some(run_of(&spans, "p1").span_id));
        assert_eq!(run_of(&spans, "p1").attributes["gen_ai.usage.input_tokens"], 1200);
    }

    /// A session whose agent sends its own model-call spans gets no synthesized ones: the
    /// runs still sum the usage, the trace holds each call once.
    #[test]
    fn no_chat_spans_where_the_agent_sends_its_own() {
        let mut join = SpanJoin::new(JoinConfig { grace_nanos: 10, ..JoinConfig::default() });
        let events = session();
        events.iter().for_each(|e| join.observe(e));
        let mut out = Vec::new();
        for s in assemble(&events, SpanConfig::default()) {
            out.extend(join.hold(s, 0));
        }
        join.observe(&api_request("a1", "2026-07-03T10:00:02Z", Some("p1"), "1200"));
        join.vendor_model_calls(&(SRC.to_owned(), "s1".to_owned()));
        out.extend(join.release(10));
        assert!(
            out.iter().all(|s| s.role != SpanRole::ModelCall),
            "{:?}",
            out.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        assert_eq!(run_of(&out, "p1").attributes["gen_ai.usage.input_tokens"], 1200);
    }

    /// Codex reports a call in two records: `api_request` as the response starts (with the
    /// time it took to get there), `sse_event` `response.completed` with the counts. The
    /// call's span runs from the request to the completion; a call no run took goes under
    /// the session root when it leaves.
    #[test]
    fn a_call_opened_by_an_earlier_record_starts_there_and_runless_calls_go_under_the_root() {
        let src = "aep://h/agent/codex/session/c1";
        let codex = |id: &str, ty: &str, t: &str, data: Value| {
            Event::from_value(json!({"aep":"0.1","id":id,"type":ty,"time":t,"source":src,"agent":"codex",
                "session":"c1","data":data}))
            .unwrap()
        };
        let hooks: Vec<Event> = [
            ("h0", "session.started", "2026-07-03T10:00:00Z", None),
            ("h1", "run.started", "2026-07-03T10:00:01Z", Some("t1")),
            ("h2", "run.finished", "2026-07-03T10:00:05Z", Some("t1")),
            ("h3", "run.started", "2026-07-03T10:00:06Z", Some("t2")),
            ("h4", "run.finished", "2026-07-03T10:00:08Z", Some("t2")),
        ]
        .iter()
        .enumerate()
        .map(|(i, (id, ty, t, run))| {
            let mut e = codex(id, ty, t, json!({}));
            e.seq = Some(i as u64);
            e.run = run.map(str::to_owned);
            e
        })
        .collect();
        let mut join = SpanJoin::new(JoinConfig { grace_nanos: 10, ..JoinConfig::default() });
        hooks.iter().for_each(|e| join.observe(e));
        for (id, ty, t, data) in [
            (
                "r1",
                "x.codex.otel.api_request",
                "2026-07-03T10:00:02.015Z",
                json!({"duration_ms": "15", "model": "gpt-5"}),
            ),
            // Codex logs the completion twice; the first record carries no counts.
            (
                "r2",
                "x.codex.otel.sse_event",
                "2026-07-03T10:00:02.020Z",
                json!({"event.kind": "response.completed", "duration_ms": "0"}),
            ),
            (
                "r3",
                "x.codex.otel.sse_event",
                "2026-07-03T10:00:02.020Z",
                json!({"event.kind": "response.completed", "input_token_count": "1200", "output_token_count": "25",
                       "cached_token_count": "200", "model": "gpt-5"}),
            ),
            // Between the two runs: the session's, not a run's.
            (
                "r4",
                "x.codex.otel.sse_event",
                "2026-07-03T10:00:05.500Z",
                json!({"event.kind": "response.completed", "input_token_count": "7", "model": "gpt-5"}),
            ),
        ] {
            join.observe(&codex(id, ty, t, data));
        }
        let mut out = Vec::new();
        for s in assemble(&hooks, SpanConfig::default()) {
            out.extend(join.hold(s, 0));
        }
        out.extend(join.release(10));
        let chats: Vec<&Span> = out.iter().filter(|s| s.role == SpanRole::ModelCall).collect();
        assert_eq!(chats.len(), 2, "{:?}", out.iter().map(|s| &s.name).collect::<Vec<_>>());
        let t1 = out.iter().find(|s| s.role == SpanRole::Run && attr(s, "aep.run_id") == Some("t1")).unwrap();
        let first = chats.iter().find(|c| c.attributes["aep.event_id"] == "r3").unwrap();
        assert_eq!(first.parent_span_id, Some(t1.span_id));
        let t = |s: &str| parse_rfc3339_nanos(s).unwrap();
        assert_eq!(
            (first.start_unix_nanos, first.end_unix_nanos),
            (t("2026-07-03T10:00:02Z"), t("2026-07-03T10:00:02.020Z"))
        );
        assert_eq!(first.attributes["gen_ai.usage.cache_read.input_tokens"], 200);
        let root = out.iter().find(|s| s.role == SpanRole::Session).unwrap();
        let left = chats.iter().find(|c| c.attributes["aep.event_id"] == "r4").unwrap();
        assert_eq!((left.parent_span_id, &left.attributes["aep.usage.join"]), (Some(root.span_id), &json!("session")));
        assert_eq!(left.start_unix_nanos, left.end_unix_nanos, "no opening record, no duration: a point in time");
        assert_eq!(join.records(), 0, "every call was placed once");
    }

    #[test]
    fn a_sessions_spans_leave_together_in_the_order_they_finished() {
        let mut join = SpanJoin::new(JoinConfig { grace_nanos: 10, ..JoinConfig::default() });
        let spans = assemble(&session(), SpanConfig::default());
        let order: Vec<String> = spans.iter().map(|s| s.name.clone()).collect();
        for s in spans {
            assert!(join.hold(s, 0).is_empty(), "every span waits, the root too");
        }
        assert!(join.release(9).is_empty());
        let out: Vec<String> = join.release(10).into_iter().map(|s| s.name).collect();
        assert_eq!(out, order);
        assert_eq!(out.last().map(String::as_str), Some("session claude-code"), "the root last");
    }

    #[test]
    fn without_a_grace_late_records_miss_the_span() {
        let late = [api_request("a1", "2026-07-03T10:00:02Z", Some("p1"), "1200")];
        let spans = joined(JoinConfig { grace_nanos: 0, ..JoinConfig::default() }, &late);
        assert!(run_of(&spans, "p1").attributes.get("gen_ai.usage.input_tokens").is_none());
    }

    #[test]
    fn runless_records_join_by_time_only_when_one_run_holds_them() {
        let late = [
            api_request("a1", "2026-07-03T10:00:02Z", None, "10"),
            api_request("a2", "2026-07-03T10:00:06Z", None, "20"),
            // Between the runs: no run holds it, and the session had two runs.
            api_request("a3", "2026-07-03T10:00:04.500Z", None, "40"),
        ];
        let spans = joined(JoinConfig { grace_nanos: 10, ..JoinConfig::default() }, &late);
        assert_eq!(run_of(&spans, "p1").attributes["gen_ai.usage.input_tokens"], 10);
        assert_eq!(run_of(&spans, "p1").attributes["aep.usage.join"], "time");
        assert_eq!(run_of(&spans, "p2").attributes["gen_ai.usage.input_tokens"], 20);
    }

    #[test]
    fn the_sole_run_of_an_ended_session_takes_its_runless_records() {
        let events: Vec<Event> = session().into_iter().filter(|e| e.run.as_deref() != Some("p2")).collect();
        let mut join = SpanJoin::new(JoinConfig { grace_nanos: 10, ..JoinConfig::default() });
        events.iter().for_each(|e| join.observe(e));
        let mut out = Vec::new();
        for s in assemble(&events, SpanConfig::default()) {
            out.extend(join.hold(s, 0));
        }
        // Another clock: far outside the run, yet the session had only this run.
        join.observe(&api_request("a1", "2030-01-01T00:00:00Z", None, "5"));
        out.extend(join.release(10));
        let p1 = run_of(&out, "p1");
        assert_eq!(
            (&p1.attributes["gen_ai.usage.input_tokens"], &p1.attributes["aep.usage.join"]),
            (&json!(5), &json!("sole_run"))
        );
        // Its chat span sits inside the run, moved off the agent's clock, and says by how much.
        let chat: Vec<&Span> =
            out.iter().filter(|s| s.role == SpanRole::ModelCall && s.parent_span_id == Some(p1.span_id)).collect();
        assert_eq!(chat.len(), 1, "{out:?}");
        assert!(p1.start_unix_nanos <= chat[0].start_unix_nanos && chat[0].end_unix_nanos <= p1.end_unix_nanos);
        let shift = chat[0].attributes["aep.clock.shift_ns"].as_i64().unwrap();
        assert!(shift < -86_400 * 1_000_000_000, "{shift}");
    }

    /// Calls moved into their parent keep their order, gaps and durations; a window longer
    /// than the parent starts at its start and is cut at its end; calls inside stay as sent.
    #[test]
    fn model_calls_are_moved_inside_their_parent_together() {
        let span = |start: u64, end: u64| Span {
            service_name: "codex".into(),
            trace_id: Default::default(),
            span_id: Default::default(),
            parent_span_id: None,
            name: "chat".into(),
            role: SpanRole::ModelCall,
            start_unix_nanos: start,
            end_unix_nanos: end,
            attributes: Map::new(),
            events: Vec::new(),
            dropped_events_count: 0,
            links: Vec::new(),
            status: crate::spans::StatusCode::Ok,
            status_message: String::new(),
        };
        let times = |v: &[Span]| v.iter().map(|s| (s.start_unix_nanos, s.end_unix_nanos)).collect::<Vec<_>>();
        let parent = span(1_000, 2_000);
        let mut late = vec![span(10_000, 10_100), span(10_300, 10_400)];
        fit_inside(&parent, &mut late);
        assert_eq!(times(&late), [(1_600, 1_700), (1_900, 2_000)]);
        assert_eq!(late[0].attributes["aep.clock.shift_ns"], json!(-8_400));
        let mut early = vec![span(100, 200), span(150, 400)];
        fit_inside(&parent, &mut early);
        assert_eq!(times(&early), [(1_000, 1_100), (1_050, 1_300)]);
        let mut long = vec![span(0, 600), span(700, 5_000)];
        fit_inside(&parent, &mut long);
        assert_eq!(times(&long), [(1_000, 1_600), (1_700, 2_000)]);
        let mut inside = vec![span(1_100, 1_200)];
        fit_inside(&parent, &mut inside);
        assert_eq!(times(&inside), [(1_100, 1_200)]);
        assert!(inside[0].attributes.is_empty());
    }

    #[test]
    fn tool_spans_take_the_vendor_duration_by_call_id() {
        let mut tr = ev(
            "r1",
            "x.claude-code.otel.tool_result",
            0,
            "2026-07-03T10:00:03Z",
            Some("p1"),
            json!({"tool_use_id":"t1","duration_ms":"68","tool_name":"Bash"}),
        );
        tr.seq = None;
        let spans = joined(JoinConfig { grace_nanos: 10, ..JoinConfig::default() }, &[tr]);
        let tool = spans.iter().find(|s| s.role == SpanRole::Tool).unwrap();
        assert_eq!(tool.attributes["aep.vendor.tool_duration_ms"], 68);
        assert_eq!(tool.end_unix_nanos - tool.start_unix_nanos, 1_000_000_000, "the span keeps the hook timing");
    }

    #[test]
    fn memory_stays_bounded() {
        let cfg =
            JoinConfig { grace_nanos: 1_000, max_held: 3, max_records: 50, max_sessions: 4, ..JoinConfig::default() };
        let mut join = SpanJoin::new(cfg);
        for i in 0..1000 {
            let mut e = api_request(&format!("a{i}"), "2026-07-03T10:00:02Z", Some("p1"), "1");
            e.session = Some(format!("s{}", i % 10));
            join.observe(&e);
            assert!(join.records() <= 50 && join.ledgers.len() <= 4);
        }
        let mut out = Vec::new();
        for s in assemble(&session(), SpanConfig::default()) {
            out.extend(join.hold(s, 0));
            assert!(join.held() <= 3);
        }
        out.extend(join.release(1_000));
        assert_eq!(out.len(), 4, "every span comes out");
        assert_eq!(join.held(), 0);
    }

    /// Waiting spans are bounded in bytes too: large spans (tool results at capture `full`)
    /// leave early, oldest first, and the count goes back to 0 when all have left.
    #[test]
    fn waiting_spans_are_bounded_in_bytes() {
        let spans = assemble(&session(), SpanConfig::default());
        let big = |mut s: Span| {
            s.attributes.insert("gen_ai.tool.call.result".into(), json!("x".repeat(10_000)));
            s
        };
        let one = span_bytes(&big(spans[0].clone()));
        assert!(one > 10_000, "the attribute value is counted: {one}");
        let mut join =
            SpanJoin::new(JoinConfig { grace_nanos: 1_000, max_held_bytes: 3 * one, ..JoinConfig::default() });
        let mut out = Vec::new();
        for _ in 0..10 {
            for s in &spans {
                out.extend(join.hold(big(s.clone()), 0));
                assert!(join.held_bytes() <= 3 * one + one, "{}", join.held_bytes());
            }
        }
        assert!(join.held() <= 4 && !out.is_empty(), "the oldest left early");
        out.extend(join.release(1_000));
        assert_eq!((out.len(), join.held(), join.held_bytes()), (10 * spans.len(), 0, 0));
    }

    /// The join's cost beside the assembler's, on the same stream (run with --ignored,
    /// preferably --release): sessions of two runs, a tool and two model-call records each.
    #[test]
    #[ignore = "measurement"]
    fn join_cost_beside_the_assembler() {
        use crate::spans::SpanAssembler;
        let mut events = Vec::new();
        for i in 0..2000 {
            for mut e in session().into_iter().chain([
                api_request("a1", "2026-07-03T10:00:02Z", Some("p1"), "10"),
                api_request("a2", "2026-07-03T10:00:06Z", None, "20"),
            ]) {
                e.session = Some(format!("s{i}"));
                e.id = format!("{}-{i}", e.id);
                events.push(e);
            }
        }
        let t = std::time::Instant::now();
        let mut asm = SpanAssembler::new(SpanConfig::default());
        let n: usize = events.iter().map(|e| asm.push(e).len()).sum();
        let alone = t.elapsed();
        let t = std::time::Instant::now();
        let mut asm = SpanAssembler::new(SpanConfig::default());
        let mut join = SpanJoin::new(JoinConfig::default());
        let mut out = 0;
        for e in &events {
            join.observe(e);
            for s in asm.push(e) {
                out += join.hold(s, 0).len();
            }
        }
        out += join.release_all().len();
        let joined = t.elapsed();
        assert_eq!(n, out);
        eprintln!(
            "{} events: assembler {:?} ({:.0} ev/s), with the join {:?} ({:.0} ev/s)",
            events.len(),
            alone,
            events.len() as f64 / alone.as_secs_f64(),
            joined,
            events.len() as f64 / joined.as_secs_f64()
        );
    }
}
