//! Placement of the vendors' own spans (`/v1/traces`: Claude Code's beta `claude_code.*`
//! spans, Gemini CLI's `llm_call` / `tool_call`, Copilot's `invoke_agent` /
//! `execute_tool`) inside the session's trace before they are forwarded, so one trace shows
//! the hooks' spans and the vendor's together. Pure and clockless, like the [`SpanJoin`]
//! it reads: the caller gives every arrival time.
//!
//! A vendor span is placed only by what it certainly carries:
//! - its session: a `session.id` (span or resource), `gen_ai.conversation.id` or
//!   `conversation.id` naming exactly one session the span sink knows, or a span of the same
//!   vendor trace that named one. Its trace id becomes the session's trace id;
//! - a tool call id (`gen_ai.tool.call.id`, `tool_use_id`, `call_id`) the session's hooks
//!   reported: the outermost such span becomes a child of that `execute_tool` span (its
//!   vendor parent is kept as an `aep.link.kind = vendor_parent` link), and its vendor trace
//!   is known to belong to that call's run;
//! - a vendor root (no parent): the run's `invoke_agent` span when a tool call of the same
//!   vendor trace named the run, or a model request of it that a vendor record of the run
//!   named (`request_id`: a failed prompt's `llm_request` and its `api_error`), else the
//!   session root (the session is certain, the run is not: vendor span times are never
//!   used to guess it);
//! - any other span keeps its vendor parent.
//!
//! A placed model-call span that names its model but not its GenAI operation gets
//! `gen_ai.operation.name = chat` and its own token counts under the GenAI names. One that
//! names its model and carries no counts at all (Gemini CLI's `llm_call`) waits, within the
//! same grace, for the vendor's usage record of that call: the one record of its session
//! stamped while the span was open ([`SpanJoin::model_call_in`]) gives it
//! `gen_ai.usage.*`, OpenInference's `llm.token_count.*` and `aep.usage.join = time`; with
//! none or several there it goes out placed but without counts.
//!
//! Where the span a vendor span belongs under lies in another trace (`trace_per_run`), it is
//! linked to it (`aep.link.kind = aep_parent`) under the session root instead of parented
//! across traces. Each placed span says how (`aep.vendor.placement`: `tool`, `run`,
//! `session`, `vendor`). A span whose session is not known yet waits at most the grace
//! (bounded in spans), then goes out as the vendor sent it: unplaced, never guessed.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::span::Link;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};

use super::{CallUsage, SpanJoin};

/// Vendor trace ids remembered with their session (and run).
const MAX_TRACES: usize = 65_536;
/// The resource and scope a vendor span came with.
#[derive(Debug)]
struct Group {
    resource: Option<Resource>,
    resource_schema: String,
    scope: Option<InstrumentationScope>,
    scope_schema: String,
}

type Key = (String, String);

/// Places vendor spans in the session traces (see the module doc).
#[derive(Debug)]
pub struct VendorSpans {
    grace_nanos: u64,
    max_waiting: usize,
    max_waiting_bytes: usize,
    /// Spans waiting for their session: when they are due, their encoded size, the span.
    waiting: VecDeque<(u64, usize, Arc<Group>, Span)>,
    waiting_bytes: usize,
    /// Vendor trace id -> its session and, once a tool call named it, its run.
    traces: HashMap<Vec<u8>, (Key, Option<String>)>,
    traces_fifo: VecDeque<Vec<u8>>,
}

fn str_attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) if !s.is_empty() => Some(s.as_str()),
        _ => None,
    })
}

fn kv(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.to_owned())) }),
        ..Default::default()
    }
}

/// The session a span names (its own attributes first, then its resource's).
fn session_name<'a>(span: &'a Span, group: &'a Group) -> Option<&'a str> {
    const KEYS: [&str; 3] = ["session.id", "gen_ai.conversation.id", "conversation.id"];
    let res = group.resource.as_ref().map_or(&[][..], |r| r.attributes.as_slice());
    KEYS.iter().find_map(|k| str_attr(&span.attributes, k)).or_else(|| KEYS.iter().find_map(|k| str_attr(res, k)))
}

/// The model request a vendor span names (Claude Code's `llm_request`: `gen_ai.response.id`
/// and `request_id`, the API's request id its `api_request` / `api_error` records carry).
fn request_id(span: &Span) -> Option<&str> {
    ["gen_ai.response.id", "request_id"].iter().find_map(|k| str_attr(&span.attributes, k))
}

fn call_id(span: &Span) -> Option<&str> {
    ["gen_ai.tool.call.id", "tool_use_id", "call_id"].iter().find_map(|k| str_attr(&span.attributes, k))
}

impl VendorSpans {
    /// Spans whose session is unknown wait up to `grace_nanos`, at most `max_waiting` of them
    /// and `max_waiting_bytes` of their protobuf encoding (the oldest go out early).
    pub fn new(grace_nanos: u64, max_waiting: usize, max_waiting_bytes: usize) -> Self {
        Self {
            grace_nanos,
            max_waiting,
            max_waiting_bytes,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            traces: HashMap::new(),
            traces_fifo: VecDeque::new(),
        }
    }

    /// Encoded bytes of the spans waiting for their session.
    pub fn waiting_bytes(&self) -> usize {
        self.waiting_bytes
    }

    /// Spans waiting for their session.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    fn learn(&mut self, trace: &[u8], key: &Key, run: Option<&str>) {
        match self.traces.get_mut(trace) {
            Some((_, r)) => {
                if r.is_none() {
                    *r = run.map(str::to_owned);
                }
            }
            None => {
                self.traces.insert(trace.to_vec(), (key.clone(), run.map(str::to_owned)));
                self.traces_fifo.push_back(trace.to_vec());
                while self.traces_fifo.len() > MAX_TRACES {
                    if let Some(old) = self.traces_fifo.pop_front() {
                        self.traces.remove(&old);
                    }
                }
            }
        }
    }

    /// Takes one `/v1/traces` request; returns what is placed now (as resource groups).
    pub fn take(&mut self, req: ExportTraceServiceRequest, join: &mut SpanJoin, now: u64) -> Vec<ResourceSpans> {
        let mut spans: Vec<(Arc<Group>, Span)> = Vec::new();
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                let group = Arc::new(Group {
                    resource: rs.resource.clone(),
                    resource_schema: rs.schema_url.clone(),
                    scope: ss.scope,
                    scope_schema: ss.schema_url,
                });
                spans.extend(ss.spans.into_iter().map(|s| (group.clone(), s)));
            }
        }
        // Spans of this request carrying a call id: a child of one keeps its vendor parent.
        let with_call: HashSet<(Vec<u8>, String)> =
            spans.iter().filter_map(|(_, s)| Some((s.span_id.clone(), call_id(s)?.to_owned()))).collect();
        // Learn first, so a vendor root placed below sees the run a later span of the same
        // request names.
        for (g, s) in &spans {
            self.learn_from(s, g, join);
        }
        let mut out: Vec<(Arc<Group>, Span)> = Vec::new();
        // Without a grace nothing waits: a model call is placed with what is known now.
        let last = self.grace_nanos == 0;
        for (g, mut s) in spans {
            if self.place(&mut s, &g, join, &with_call, last) {
                out.push((g, s));
            } else {
                self.wait(now, g, s, join, &mut out);
            }
        }
        regroup(out)
    }

    /// Retries waiting spans; those past their grace (or all, with `all`) go out unplaced.
    pub fn tick(&mut self, join: &mut SpanJoin, now: u64, all: bool) -> Vec<ResourceSpans> {
        let mut out = Vec::new();
        let none = HashSet::new();
        for (due, bytes, g, mut s) in std::mem::take(&mut self.waiting) {
            self.learn_from(&s, &g, join);
            let last = all || due <= now;
            if self.place(&mut s, &g, join, &none, last) || last {
                self.waiting_bytes -= bytes;
                out.push((g, s));
            } else {
                self.waiting.push_back((due, bytes, g, s));
            }
        }
        regroup(out)
    }

    fn wait(&mut self, now: u64, g: Arc<Group>, s: Span, join: &SpanJoin, out: &mut Vec<(Arc<Group>, Span)>) {
        if self.grace_nanos == 0 {
            out.push((g, s));
            return;
        }
        let bytes = prost::Message::encoded_len(&s);
        self.waiting_bytes += bytes;
        self.waiting.push_back((now.saturating_add(self.grace_nanos), bytes, g, s));
        while self.waiting.len() > self.max_waiting.max(1)
            || (self.waiting_bytes > self.max_waiting_bytes && self.waiting.len() > 1)
        {
            if let Some((_, b, g, mut s)) = self.waiting.pop_front() {
                self.waiting_bytes -= b;
                // Out early: placed with what is known now, if its session is.
                self.place(&mut s, &g, join, &HashSet::new(), true);
                out.push((g, s));
            }
        }
    }

    /// Learns the session (and run) of the span's vendor trace; a model-call span tells the
    /// join the session's calls are in the trace already (no `chat` spans of its own).
    fn learn_from(&mut self, s: &Span, g: &Group, join: &mut SpanJoin) {
        let key = match session_name(s, g).and_then(|n| join.session_named(n)) {
            Some(k) => k.clone(),
            None => match self.traces.get(&s.trace_id) {
                Some((k, _)) => k.clone(),
                None => return,
            },
        };
        if is_model_call(s) {
            join.vendor_model_calls(&key);
        }
        let by_tool = call_id(s).and_then(|c| join.tool_of(&key, c)).and_then(|(_, r)| r.map(str::to_owned));
        // A model request a record of the run named (a failed prompt has no tool call).
        let run = by_tool.or_else(|| request_id(s).and_then(|id| join.run_of_request(&key, id)).map(str::to_owned));
        self.learn(&s.trace_id, &key, run.as_deref());
    }

    /// Moves the span into its session's trace; `false` (the span untouched) when its
    /// session is not known yet, or when it is a model call whose usage record has not
    /// arrived and this is not its `last` chance (then it waits like an unknown session's).
    fn place(
        &mut self,
        s: &mut Span,
        g: &Group,
        join: &SpanJoin,
        with_call: &HashSet<(Vec<u8>, String)>,
        last: bool,
    ) -> bool {
        let Some((key, run)) = self.traces.get(&s.trace_id).cloned() else { return false };
        // The session may have left the join's memory since the trace was learned.
        if session_name(s, g).is_some_and(|n| n != key.1) {
            return false;
        }
        let Some(root) = join.root_of(&key) else { return false };
        let usage = if awaits_usage(s) {
            let usage = join.model_call_in(&key, s.start_time_unix_nano, s.end_time_unix_nano);
            if usage.is_none() && !last {
                return false;
            }
            usage
        } else {
            None
        };
        let vendor_trace = s.trace_id.clone();
        let vendor_parent = s.parent_span_id.clone();
        let tool = call_id(s).and_then(|c| {
            let (ctx, _) = join.tool_of(&key, c)?;
            // The outermost span of the call: its vendor parent is not of the same call.
            (!with_call.contains(&(vendor_parent.clone(), c.to_owned()))).then_some(ctx)
        });
        let (parent, how) = match (tool, vendor_parent.is_empty()) {
            (Some(t), _) => (Some(t), "tool"),
            (None, true) => match run.as_deref().and_then(|r| join.run_of(&key, r)) {
                Some(r) => (Some(r), "run"),
                None => (Some(root), "session"),
            },
            (None, false) => (None, "vendor"),
        };
        s.trace_id = root.trace_id.to_vec();
        if let Some(p) = parent {
            if !vendor_parent.is_empty() {
                s.links.push(Link {
                    trace_id: root.trace_id.to_vec(),
                    span_id: vendor_parent.clone(),
                    attributes: vec![kv("aep.link.kind", "vendor_parent")],
                    ..Default::default()
                });
            }
            if p.trace_id == root.trace_id {
                s.parent_span_id = p.span_id.to_vec();
            } else {
                // Parenting across traces would lie: under the root, linked to it.
                s.parent_span_id = root.span_id.to_vec();
                s.links.push(Link {
                    trace_id: p.trace_id.to_vec(),
                    span_id: p.span_id.to_vec(),
                    attributes: vec![kv("aep.link.kind", "aep_parent")],
                    ..Default::default()
                });
            }
        }
        for l in &mut s.links {
            if l.trace_id == vendor_trace {
                l.trace_id = root.trace_id.to_vec();
            }
        }
        s.attributes.push(kv("aep.vendor.placement", how));
        s.attributes.push(kv("aep.session_id", &key.1));
        if let Some(u) = usage {
            put_call_usage(s, &u);
        }
        fill_genai(s);
        true
    }
}

/// A vendor span of a model call: it names the model asked for (Claude Code's
/// `claude_code.llm_request`, Gemini CLI's `llm_call`, the VS Code agent's `chat`).
fn is_model_call(s: &Span) -> bool {
    s.attributes.iter().any(|kv| kv.key == "gen_ai.request.model")
}

/// A vendor span that names a model but carries no token counts of its own (Gemini CLI's
/// `llm_call`): its counts are in the vendor's log record of the same call.
fn awaits_usage(s: &Span) -> bool {
    const COUNTS: [&str; 5] = [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "input_tokens",
        "output_tokens",
        "llm.token_count.total",
    ];
    is_model_call(s) && !s.attributes.iter().any(|kv| COUNTS.contains(&kv.key.as_str()))
}

/// The counts of the one usage record reported while the span was open (the join is by
/// time, and says so), under the GenAI names and OpenInference's, which trace UIs sum over
/// a trace's model calls.
fn put_call_usage(s: &mut Span, u: &CallUsage) {
    let int = |key: &str, n: u64| KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(any_value::Value::IntValue(i64::try_from(n).unwrap_or(i64::MAX))) }),
        ..Default::default()
    };
    if let Some(n) = u.input {
        s.attributes.push(int("gen_ai.usage.input_tokens", n));
        s.attributes.push(int("llm.token_count.prompt", n));
    }
    if let Some(n) = u.output {
        s.attributes.push(int("gen_ai.usage.output_tokens", n));
        s.attributes.push(int("llm.token_count.completion", n));
    }
    s.attributes.push(int("llm.token_count.total", u.input.unwrap_or(0).saturating_add(u.output.unwrap_or(0))));
    if let Some(m) = &u.model {
        s.attributes.push(kv("gen_ai.response.model", m));
    }
    s.attributes.push(kv("aep.usage.join", "time"));
}

/// A vendor model-call span that names its model but not its operation (Claude Code's
/// `claude_code.llm_request`: `gen_ai.request.model`, its counts as `input_tokens` /
/// `output_tokens`) gets `gen_ai.operation.name = chat` and its own counts under the GenAI
/// names, so GenAI trace UIs read the call's tokens; nothing it does not say is added. A
/// span naming a model is classed an LLM call, one naming a tool a tool call, for UIs that
/// read OpenInference's span kind (Gemini CLI's `llm_call` / `tool_call` name their GenAI
/// operation in their own words), unless it says its kind itself.
fn fill_genai(s: &mut Span) {
    let has = |s: &Span, k: &str| s.attributes.iter().any(|kv| kv.key == k);
    if !has(s, "openinference.span.kind") {
        if has(s, "gen_ai.request.model") {
            s.attributes.push(kv("openinference.span.kind", "LLM"));
        } else if has(s, "gen_ai.tool.name") {
            s.attributes.push(kv("openinference.span.kind", "TOOL"));
        }
    }
    if !has(s, "gen_ai.request.model") || has(s, "gen_ai.operation.name") {
        return;
    }
    s.attributes.push(kv("gen_ai.operation.name", "chat"));
    for (from, to) in [("input_tokens", "gen_ai.usage.input_tokens"), ("output_tokens", "gen_ai.usage.output_tokens")] {
        let n =
            s.attributes.iter().find(|kv| kv.key == from).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::IntValue(n) if *n >= 0 => Some(*n),
                any_value::Value::StringValue(x) => x.trim().parse::<i64>().ok().filter(|n| *n >= 0),
                _ => None,
            });
        if let Some(n) = n
            && !has(s, to)
        {
            s.attributes.push(KeyValue {
                key: to.to_owned(),
                value: Some(AnyValue { value: Some(any_value::Value::IntValue(n)) }),
                ..Default::default()
            });
        }
    }
}

/// Spans back into resource groups, in order of first appearance.
fn regroup(spans: Vec<(Arc<Group>, Span)>) -> Vec<ResourceSpans> {
    let mut out: Vec<(Arc<Group>, Vec<Span>)> = Vec::new();
    for (g, s) in spans {
        match out.iter_mut().find(|(x, _)| Arc::ptr_eq(x, &g)) {
            Some((_, v)) => v.push(s),
            None => out.push((g, vec![s])),
        }
    }
    out.into_iter()
        .map(|(g, spans)| ResourceSpans {
            resource: g.resource.clone(),
            schema_url: g.resource_schema.clone(),
            scope_spans: vec![ScopeSpans { scope: g.scope.clone(), spans, schema_url: g.scope_schema.clone() }],
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spans::{JoinConfig, SpanConfig, assemble, traces_request};
    use aep_schemas::event::Event;
    use serde_json::json;

    const SRC: &str = "aep://h/agent/claude-code/session/s1";

    fn ev(id: &str, ty: &str, seq: u64, run: Option<&str>, data: serde_json::Value) -> Event {
        let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":format!("2026-07-03T10:00:0{seq}Z"),"source":SRC,
            "agent":"claude-code","session":"s1","seq":seq,"data":data});
        if let Some(r) = run {
            v["run"] = r.into();
        }
        Event::from_value(v).unwrap()
    }

    fn events() -> Vec<Event> {
        vec![
            ev("e0", "session.started", 0, None, json!({})),
            ev("e1", "run.started", 1, Some("p1"), json!({})),
            ev("e2", "tool.requested", 2, Some("p1"), json!({"tool":{"name":"Bash","call_id":"toolu_1"}})),
            ev("e3", "tool.completed", 3, Some("p1"), json!({"tool":{"name":"Bash","call_id":"toolu_1"}})),
            ev("e4", "run.finished", 4, Some("p1"), json!({})),
            ev("e5", "session.ended", 5, None, json!({})),
        ]
    }

    fn vspan(name: &str, id: u8, parent: Option<u8>, attrs: &[(&str, &str)]) -> Span {
        Span {
            trace_id: vec![0xab; 16],
            span_id: vec![id; 8],
            parent_span_id: parent.map(|p| vec![p; 8]).unwrap_or_default(),
            name: name.into(),
            attributes: attrs.iter().map(|(k, v)| kv(k, v)).collect(),
            ..Default::default()
        }
    }

    /// Claude Code's beta spans of one interaction, in its export order (children first).
    fn vendor_request(session: &str) -> ExportTraceServiceRequest {
        let sid = ("session.id", session);
        let spans = vec![
            vspan(
                "claude_code.llm_request",
                2,
                Some(1),
                &[sid, ("gen_ai.request.model", "m"), ("input_tokens", "1200")],
            ),
            vspan("claude_code.tool.execution", 4, Some(3), &[sid, ("tool_use_id", "toolu_1")]),
            vspan("claude_code.tool", 3, Some(1), &[sid, ("tool_use_id", "toolu_1")]),
            vspan("claude_code.interaction", 1, None, &[sid]),
        ];
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource { attributes: vec![kv("service.name", "claude-code")], ..Default::default() }),
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        }
    }

    fn joined() -> SpanJoin {
        let mut join = SpanJoin::new(JoinConfig::default());
        events().iter().for_each(|e| join.observe(e));
        join
    }

    fn by_name<'a>(rs: &'a [ResourceSpans], name: &str) -> &'a Span {
        rs.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).find(|s| s.name == name).unwrap()
    }

    #[test]
    fn vendor_spans_land_under_the_tool_and_run_spans_of_the_session() {
        let mut join = joined();
        let ours = traces_request(&assemble(&events(), SpanConfig::default()));
        let ours: Vec<&Span> = ours.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
        let named = |n: &str| *ours.iter().find(|s| s.name == n).unwrap();
        let mut vs = VendorSpans::new(1_000, 100, 1 << 20);
        let out = vs.take(vendor_request("s1"), &mut join, 0);
        assert_eq!(vs.waiting(), 0);
        let trace = named("session claude-code").trace_id.clone();
        assert!(out.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).all(|s| s.trace_id == trace));
        assert_eq!(out[0].resource.as_ref().unwrap().attributes[0].key, "service.name", "the vendor's resource");
        let tool = by_name(&out, "claude_code.tool");
        assert_eq!(tool.parent_span_id, named("execute_tool Bash").span_id);
        assert_eq!(tool.links[0].span_id, vec![1; 8], "the vendor parent, linked");
        assert_eq!(
            by_name(&out, "claude_code.tool.execution").parent_span_id,
            vec![3; 8],
            "kept under the vendor tool"
        );
        let llm = by_name(&out, "claude_code.llm_request");
        assert_eq!(llm.parent_span_id, vec![1; 8]);
        assert_eq!(str_attr(&llm.attributes, "gen_ai.operation.name"), Some("chat"));
        assert_eq!(str_attr(&llm.attributes, "openinference.span.kind"), Some("LLM"));
        let tokens = llm.attributes.iter().find(|kv| kv.key == "gen_ai.usage.input_tokens").unwrap();
        assert_eq!(tokens.value.as_ref().unwrap().value, Some(any_value::Value::IntValue(1200)));
        assert!(!llm.attributes.iter().any(|kv| kv.key == "gen_ai.usage.output_tokens"), "not sent, not added");
        let root = by_name(&out, "claude_code.interaction");
        assert_eq!(root.parent_span_id, named("invoke_agent claude-code").span_id, "the run its tool call names");
        assert_eq!(str_attr(&root.attributes, "aep.vendor.placement"), Some("run"));
    }

    /// Claude Code's own `llm_request` spans are its calls in the trace: once one is placed,
    /// the session's `api_request` records sum onto the run and add no `chat` span.
    #[test]
    fn a_placed_model_call_span_stops_synthesized_ones_for_its_session() {
        for vendor_sends in [false, true] {
            let mut join = SpanJoin::new(JoinConfig { grace_nanos: 10, ..JoinConfig::default() });
            events().iter().for_each(|e| join.observe(e));
            if vendor_sends {
                VendorSpans::new(1_000, 100, 1 << 20).take(vendor_request("s1"), &mut join, 0);
            }
            let mut rec =
                ev("a1", "x.claude-code.otel.api_request", 0, Some("p1"), json!({"model":"m","input_tokens":"7"}));
            rec.seq = None;
            join.observe(&rec);
            let mut out = Vec::new();
            for s in assemble(&events(), SpanConfig::default()) {
                out.extend(join.hold(s, 0));
            }
            out.extend(join.release(10));
            let chats = out.iter().filter(|s| s.role == crate::spans::SpanRole::ModelCall).count();
            assert_eq!(chats, usize::from(!vendor_sends), "vendor spans sent: {vendor_sends}");
        }
    }

    #[test]
    fn a_vendor_root_with_no_known_run_goes_under_the_session_root() {
        let mut join = joined();
        let mut req = vendor_request("s1");
        req.resource_spans[0].scope_spans[0].spans.retain(|s| s.name == "claude_code.interaction");
        let mut vs = VendorSpans::new(1_000, 100, 1 << 20);
        let out = vs.take(req, &mut join, 0);
        let root = by_name(&out, "claude_code.interaction");
        assert_eq!(root.parent_span_id, join.root_of(&(SRC.into(), "s1".into())).unwrap().span_id.to_vec());
        assert_eq!(str_attr(&root.attributes, "aep.vendor.placement"), Some("session"));
    }

    /// A failed prompt (Claude Code's real `s06_api_error_400`): no tool call, one
    /// `llm_request` that failed with the API's `request_id`, which the `api_error` record of
    /// the prompt (its run) names too. The interaction goes under that run, not beside it.
    #[test]
    fn a_failed_prompts_interaction_goes_under_its_run() {
        let events = vec![
            ev("e0", "session.started", 0, None, json!({})),
            ev("e1", "run.started", 1, Some("p1"), json!({})),
            ev("e2", "run.failed", 2, Some("p1"), json!({"error": {"type": "unknown"}})),
            ev("e3", "session.ended", 3, None, json!({})),
        ];
        let mut join = SpanJoin::new(JoinConfig::default());
        events.iter().for_each(|e| join.observe(e));
        let mut err = ev(
            "a1",
            "x.claude-code.otel.api_error",
            0,
            Some("p1"),
            json!({"status_code": 400, "request_id": "req_mock_563e47b5f77a"}),
        );
        err.seq = None;
        join.observe(&err);
        let sid = ("session.id", "s1");
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        vspan(
                            "claude_code.llm_request",
                            2,
                            Some(1),
                            &[sid, ("gen_ai.request.model", "m"), ("gen_ai.response.id", "req_mock_563e47b5f77a")],
                        ),
                        vspan("claude_code.interaction", 1, None, &[sid]),
                    ],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let ours = traces_request(&assemble(&events, SpanConfig::default()));
        let run = ours
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .flat_map(|s| &s.spans)
            .find(|s| s.name == "invoke_agent claude-code")
            .unwrap();
        let out = VendorSpans::new(1_000, 100, 1 << 20).take(req, &mut join, 0);
        let root = by_name(&out, "claude_code.interaction");
        assert_eq!(root.parent_span_id, run.span_id, "under the failed run");
        assert_eq!(str_attr(&root.attributes, "aep.vendor.placement"), Some("run"));
    }

    #[test]
    fn waiting_vendor_spans_are_bounded_in_bytes() {
        let mut join = joined();
        let mut req = vendor_request("other");
        for s in &mut req.resource_spans[0].scope_spans[0].spans {
            s.attributes.push(kv("payload", &"x".repeat(5_000)));
        }
        let each = prost::Message::encoded_len(&req.resource_spans[0].scope_spans[0].spans[0]);
        let mut vs = VendorSpans::new(1_000, 100, 2 * each);
        let mut sent = 0;
        for _ in 0..5 {
            sent += req.resource_spans[0].scope_spans[0].spans.len();
            let out = vs.take(req.clone(), &mut join, 0);
            let early: usize = out.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            sent -= early;
            assert!(vs.waiting_bytes() <= 3 * each, "{} > {}", vs.waiting_bytes(), 3 * each);
            assert_eq!(vs.waiting(), sent, "every span either waits or went out");
        }
        let late = vs.tick(&mut join, 1_000, false);
        let n: usize = late.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
        assert_eq!((n, vs.waiting(), vs.waiting_bytes()), (sent, 0, 0));
    }

    /// A vendor model-call span with no counts of its own (Gemini CLI's `llm_call`) waits for
    /// its call's usage record and takes the counts of the one record stamped while it was
    /// open; with none, or two, in its window it goes out at its grace placed, without counts.
    #[test]
    fn a_model_call_span_takes_the_counts_of_the_one_record_stamped_while_it_was_open() {
        let mut join = joined();
        let t = |s: &str| crate::spans::parse_rfc3339_nanos(s).unwrap();
        let llm = |id: u8, from: &str, to: &str| Span {
            start_time_unix_nano: t(from),
            end_time_unix_nano: t(to),
            ..vspan("llm_call", id, None, &[("session.id", "s1"), ("gen_ai.request.model", "gemini-2.5-pro")])
        };
        let req = |spans: Vec<Span>| ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans { spans, ..Default::default() }],
                ..Default::default()
            }],
        };
        let call = |id: &str, time: &str, input: &str| {
            let mut e = ev(
                id,
                "x.claude-code.otel.api_request",
                0,
                None,
                json!({"model": "gemini-2.5-pro", "input_tokens": input, "output_tokens": "25"}),
            );
            (e.time, e.seq) = (time.to_owned(), None);
            e
        };
        let int = |s: &Span, k: &str| {
            s.attributes.iter().find(|kv| kv.key == k).and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                any_value::Value::IntValue(n) => Some(*n),
                _ => None,
            })
        };
        let mut vs = VendorSpans::new(1_000, 100, 1 << 20);
        let first = llm(7, "2026-07-03T10:00:03.000Z", "2026-07-03T10:00:03.600Z");
        assert!(vs.take(req(vec![first]), &mut join, 0).is_empty());
        assert_eq!(vs.waiting(), 1, "its session is known, its record is not yet");
        // The record, stamped as the call returned (inside the slack after the span's end).
        join.observe(&call("c1", "2026-07-03T10:00:03.650Z", "1200"));
        let out = vs.tick(&mut join, 10, false);
        let s = by_name(&out, "llm_call");
        assert_eq!(str_attr(&s.attributes, "aep.vendor.placement"), Some("session"));
        assert_eq!(
            [
                int(s, "gen_ai.usage.input_tokens"),
                int(s, "gen_ai.usage.output_tokens"),
                int(s, "llm.token_count.prompt"),
                int(s, "llm.token_count.total")
            ],
            [Some(1200), Some(25), Some(1200), Some(1225)]
        );
        assert_eq!(str_attr(&s.attributes, "aep.usage.join"), Some("time"));
        assert_eq!(str_attr(&s.attributes, "openinference.span.kind"), Some("LLM"));
        // No record in its window: it waits out its grace, then goes out placed, no counts.
        assert!(
            vs.take(req(vec![llm(8, "2026-07-03T10:00:04.000Z", "2026-07-03T10:00:04.100Z")]), &mut join, 20)
                .is_empty()
        );
        assert!(vs.tick(&mut join, 1_019, false).is_empty());
        let out = vs.tick(&mut join, 1_020, false);
        let s = by_name(&out, "llm_call");
        assert_eq!(str_attr(&s.attributes, "aep.vendor.placement"), Some("session"));
        assert_eq!((int(s, "gen_ai.usage.input_tokens"), str_attr(&s.attributes, "aep.usage.join")), (None, None));
        // Two records in its window: no certain join, no counts.
        join.observe(&call("c2", "2026-07-03T10:00:03.100Z", "900"));
        assert!(
            vs.take(req(vec![llm(9, "2026-07-03T10:00:03.000Z", "2026-07-03T10:00:03.600Z")]), &mut join, 2_000)
                .is_empty()
        );
        let out = vs.tick(&mut join, 3_000, false);
        assert_eq!(int(by_name(&out, "llm_call"), "gen_ai.usage.input_tokens"), None);
        assert_eq!(vs.waiting(), 0);
    }

    #[test]
    fn spans_of_an_unknown_session_wait_then_go_out_unchanged() {
        let mut join = joined();
        let mut vs = VendorSpans::new(1_000, 2, 1 << 20);
        let req = vendor_request("other");
        let out = vs.take(req.clone(), &mut join, 0);
        let early: Vec<&Span> = out.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
        assert_eq!((early.len(), vs.waiting()), (2, 2), "bounded: the oldest leave early");
        assert!(vs.tick(&mut join, 999, false).is_empty());
        let late = vs.tick(&mut join, 1_000, false);
        let mut all: Vec<&Span> = early;
        all.extend(late.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans));
        assert_eq!(all.len(), 4);
        let sent: Vec<&Span> = req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
        for s in all {
            assert!(sent.contains(&s), "unplaced spans are forwarded as sent: {}", s.name);
        }
    }
}
