//! Span construction from the recorded Events: names, attributes, status, span events.
//!
//! Metadata-level facts become attributes (AEP-0005 §3.3): structural tokens, ids, counts
//! and `gen_ai.*` numbers. Prompts, answers, arguments and results only as far as the
//! capture ceiling let them into the records (`Rec::content`); other free text never.

use serde_json::{Map, Value};

use super::ids::{SpanContext, SpanId, span_id};
use super::ids::{run_context, session_root_context, sibling_source};
use super::model::{Span, SpanEvent, SpanLink, SpanRole, StatusCode};
use super::state::{Call, CallKind, Rec, RunState, Session, sort_recs};

const NANOS_PER_MS: u64 = 1_000_000;

/// `data` string members copied onto span events: metadata-level structural tokens only.
const EVENT_STRING_KEYS: [&str; 12] =
    ["status", "phase", "kind", "resolution", "via", "to", "trigger", "code", "agent_type", "role", "strategy", "key"];

/// `gen_ai.*` string members that are identifiers, not content.
const GEN_AI_STRING_KEYS: [&str; 4] =
    ["gen_ai.request.model", "gen_ai.response.model", "gen_ai.provider.name", "gen_ai.evaluation.name"];

/// One GenAI message as the conventions' `gen_ai.input.messages` / `gen_ai.output.messages`
/// JSON: a role and one text part.
fn messages(role: &str, text: &str, finish_reason: Option<&str>) -> String {
    let mut m = serde_json::json!({"role": role, "parts": [{"type": "text", "content": text}]});
    if let Some(f) = finish_reason {
        m["finish_reason"] = f.into();
    }
    Value::Array(vec![m]).to_string()
}

/// A span link with its `aep.link.kind`.
pub(crate) fn link(ctx: SpanContext, kind: &str) -> SpanLink {
    let mut attributes = Map::new();
    attributes.insert("aep.link.kind".into(), kind.into());
    SpanLink { context: ctx, attributes }
}

fn put(m: &mut Map<String, Value>, k: &str, v: impl Into<Value>) {
    m.insert(k.to_owned(), v.into());
}

fn put_opt(m: &mut Map<String, Value>, k: &str, v: Option<&str>) {
    if let Some(v) = v {
        m.insert(k.to_owned(), v.into());
    }
}

/// The OpenInference span kind attribute (what Arize Phoenix classifies spans by).
const OI_KIND: &str = "openinference.span.kind";

/// A captured prompt or answer (`dir` = `input` / `output`): the GenAI conventions'
/// `gen_ai.{dir}.messages` and OpenInference's plain-text `{dir}.value`, which GenAI trace
/// UIs show as the span's input and output columns.
fn content(m: &mut Map<String, Value>, dir: &str, messages: String, text: &str) {
    put(m, &format!("gen_ai.{dir}.messages"), messages);
    put(m, &format!("{dir}.value"), text);
    put(m, &format!("{dir}.mime_type"), "text/plain");
}

/// Attributes every span of the session carries.
fn base(sess: &Session) -> Map<String, Value> {
    let mut m = Map::new();
    put(&mut m, "gen_ai.agent.name", sess.agent.as_str());
    put(&mut m, "aep.agent_id", sess.agent.as_str()); // AEP-0005 §3.2: the names the LogRecord export uses
    // The session is the GenAI conversation (there is no session span in the GenAI
    // conventions) and the `session.id` of the general session conventions.
    put(&mut m, "gen_ai.conversation.id", sess.session.as_str());
    put(&mut m, "session.id", sess.session.as_str());
    put(&mut m, "aep.source", sess.source.as_str());
    put(&mut m, "aep.session_id", sess.session.as_str());
    if sess.generation > 0 {
        put(&mut m, "aep.continuation", sess.generation);
    }
    if sess.after_end {
        // Opened after the session ended (AEP-0002 §2 #5), under its ended root.
        put(&mut m, "aep.late", true);
    }
    m
}

/// `gen_ai.*` numbers (usage) and identifier strings from `data`, verbatim (AEP-0005 §3.2).
fn gen_ai_attrs(m: &mut Map<String, Value>, rec: &Rec) {
    let Some(data) = rec.data.as_object() else { return };
    for (k, v) in data {
        if !k.starts_with("gen_ai.") {
            continue;
        }
        let keep = v.is_number() || (v.is_string() && GEN_AI_STRING_KEYS.contains(&k.as_str()));
        if keep {
            m.insert(k.clone(), v.clone());
        }
    }
    if let Some(cost) = rec.data.get("cost").and_then(Value::as_object) {
        for (k, v) in cost {
            if v.is_number() || (k == "currency" && v.is_string()) {
                m.insert(format!("aep.cost.{k}"), v.clone());
            }
        }
    }
}

fn link_traceparents(links: &mut Vec<SpanLink>, own: SpanContext, recs: &[&Rec]) {
    for r in recs {
        if let Some(tp) = r.traceparent
            && tp != own
            && !links.iter().any(|l| l.context == tp)
        {
            links.push(link(tp, "traceparent"));
        }
    }
}

/// One recorded Event as a span event.
fn span_event(rec: &Rec) -> SpanEvent {
    let mut a = Map::new();
    put(&mut a, "aep.event_id", rec.id.as_str());
    if let Some((epoch, seq)) = rec.pos {
        put(&mut a, "aep.sequence", seq);
        if epoch > 0 {
            put(&mut a, "aep.epoch", epoch);
        }
    }
    put(&mut a, "aep.severity", rec.severity);
    put_opt(&mut a, "aep.subject", rec.subject.as_deref());
    put_opt(&mut a, "aep.run_id", rec.run.as_deref());
    put_opt(&mut a, "aep.step", rec.step.as_deref());
    put_opt(&mut a, "aep.causation_id", rec.cause.as_deref());
    put_opt(&mut a, "aep.source", rec.foreign_source.as_deref());
    put_opt(&mut a, "aep.agent_id", rec.foreign_agent.as_deref());
    if let Some(data) = rec.data.as_object() {
        for (k, v) in data {
            let keep = match v {
                Value::Number(_) | Value::Bool(_) => true,
                Value::String(_) => EVENT_STRING_KEYS.contains(&k.as_str()) || GEN_AI_STRING_KEYS.contains(&k.as_str()),
                _ => false,
            };
            if keep {
                let name = if k.starts_with("gen_ai.") { k.clone() } else { format!("aep.data.{k}") };
                a.insert(name, v.clone());
            }
        }
        if let Some(t) = rec.str_at("/error/type") {
            put(&mut a, "exception.type", t);
        }
    }
    let name = rec.ty.strip_suffix(" (late)").unwrap_or(&rec.ty);
    if name.len() != rec.ty.len() {
        put(&mut a, "aep.late", true);
    }
    SpanEvent { time_unix_nanos: rec.time, name: name.to_owned(), attributes: a }
}

/// The span events in session order, at most `cap` (the rest counted in `dropped`).
fn span_events(mut recs: Vec<Rec>, cap: usize, dropped: &mut u32) -> Vec<SpanEvent> {
    sort_recs(&mut recs);
    if recs.len() > cap {
        *dropped = dropped.saturating_add(u32::try_from(recs.len() - cap).unwrap_or(u32::MAX));
        recs.truncate(cap);
    }
    recs.iter().map(span_event).collect()
}

/// The start a lone terminal implies: its time minus its `duration_ms`.
fn inferred_start(rec: &Rec) -> u64 {
    rec.time.saturating_sub(rec.u64_at("/duration_ms").unwrap_or(0).saturating_mul(NANOS_PER_MS))
}

/// An end for a span closed without its terminal: the forced time, else its last Event.
fn forced(forced_end: Option<u64>, last: u64, start: u64) -> u64 {
    match forced_end {
        Some(t) if t > 0 => t.max(start),
        _ => last.max(start),
    }
}

/// The session root span (`session {agent}`): the agent's whole invocation, of which each
/// run is one turn. It carries `openinference.span.kind = AGENT`, so GenAI trace UIs class
/// it as the agent it is rather than as an unknown span, but no `gen_ai.operation.name`:
/// each run is the `invoke_agent` operation, and a root counted as one too would count
/// every session twice in per-operation views and metrics. It has the
/// session's model when `session.started` names it (also kept as `aep.session.model`). Its
/// input and output are the session's first prompt and last answer, only as far as the
/// capture ceiling let them into the records (AEP-0005 §3.3, AEP-0003 §6.4 / §9).
pub(crate) fn root_span(sess: &mut Session) -> Span {
    let mut dropped = sess.dropped_events;
    let events = span_events(std::mem::take(&mut sess.events), sess.events_cap, &mut dropped);
    let mut a = base(sess);
    let (first, last) = sess.bounds();
    let start = sess.started.as_ref().map_or(first, |r| r.time);
    put(&mut a, OI_KIND, "AGENT");
    if let Some((_, prompt)) = &sess.first_input {
        content(&mut a, "input", messages("user", prompt, None), prompt);
    }
    if let Some((_, answer)) = &sess.last_output {
        content(&mut a, "output", messages("assistant", answer, Some("stop")), answer);
    }
    if let Some(s) = &sess.started {
        put(&mut a, "aep.event_id", s.id.as_str());
        for k in ["gen_ai.request.model", "gen_ai.provider.name"] {
            put_opt(&mut a, k, s.str_at(k));
        }
        put_opt(&mut a, "aep.session.model", s.str_at("/gen_ai.request.model"));
        put_opt(&mut a, "aep.session.provider", s.str_at("/gen_ai.provider.name"));
        put_opt(&mut a, "aep.client.name", s.str_at("/client/name"));
        put_opt(&mut a, "aep.client.version", s.str_at("/client/version"));
        put_opt(&mut a, "aep.parent.session", s.str_at("/parent/session"));
        put_opt(&mut a, "aep.parent.run", s.str_at("/parent/run"));
    }
    // Status: ERROR when a run of the session failed, OK when it ended, else unset.
    let (mut status, mut message) = (StatusCode::Unset, String::new());
    if sess.ended.is_some() {
        status = StatusCode::Ok;
    }
    if sess.failed_runs > 0 {
        status = StatusCode::Error;
        message = format!("{} run(s) failed", sess.failed_runs);
    }
    let end = match &sess.ended {
        Some(e) => {
            put(&mut a, "aep.end_event_id", e.id.as_str());
            put_opt(&mut a, "aep.session.end_reason", e.str_at("/reason"));
            if let Some(runs) = e.u64_at("/runs") {
                put(&mut a, "aep.session.runs", runs);
            }
            e.time.max(start)
        }
        None => {
            put(&mut a, "aep.incomplete", true);
            last.max(start)
        }
    };
    // Late Events after the end make no root of their own (see the assembler).
    let name = format!("session {}", sess.agent);
    Span {
        service_name: sess.agent.clone(),
        trace_id: sess.ctx.trace_id,
        span_id: sess.ctx.span_id,
        parent_span_id: sess.parent,
        name,
        role: SpanRole::Session,
        start_unix_nanos: start,
        end_unix_nanos: end,
        attributes: a,
        events,
        dropped_events_count: dropped,
        links: sess.links.clone(),
        status,
        status_message: message,
    }
}

/// The root of a session that idles with no run open, exported before the session closes
/// (see `SpanConfig::root_idle_nanos`): complete as far as it goes, not cut off, so
/// `aep.session.idle = true` instead of `aep.incomplete`. What it showed (span events, the
/// failed-run count, content) is taken, so an extension at the close shows only what came after.
pub(crate) fn early_root_span(sess: &mut Session) -> Span {
    let mut span = root_span(sess);
    span.attributes.remove("aep.incomplete");
    put(&mut span.attributes, "aep.session.idle", true);
    sess.failed_runs = 0;
    sess.first_input = None;
    sess.last_output = None;
    span
}

/// What a session whose root went out early showed after it (later Events, its
/// `session.ended`): a `session {agent}` child of the exported root, from the first later
/// Event to the close, marked `aep.root.extension = true`. The root is never sent twice.
pub(crate) fn root_extension(sess: &mut Session, since: u64) -> Span {
    let root = sess.ctx;
    let mut span = root_span(sess);
    span.span_id = span_id("session", &[&sess.source, &sess.session, &sess.generation.to_string(), "extension"]);
    span.parent_span_id = Some(root.span_id);
    span.start_unix_nanos = since.min(span.end_unix_nanos);
    // The root carries the session's start and its links.
    span.links.clear();
    span.attributes.remove("aep.event_id");
    put(&mut span.attributes, "aep.root.extension", true);
    span
}

/// A run span (`invoke_agent {agent}`).
pub(crate) fn run_span(
    sess: &Session,
    name: &str,
    st: RunState,
    ctx: SpanContext,
    parent: Option<SpanId>,
    forced_end: Option<u64>,
) -> Span {
    let mut a = base(sess);
    put(&mut a, "gen_ai.operation.name", "invoke_agent");
    put(&mut a, OI_KIND, "AGENT");
    put(&mut a, "aep.run_id", name);
    // The session's model and provider hold for its runs unless a run Event says otherwise.
    for k in ["gen_ai.request.model", "gen_ai.provider.name"] {
        if let Some(v) = sess.started.as_ref().and_then(|s| s.data.get(k)).and_then(|v| v.as_str()) {
            put(&mut a, k, v);
        }
    }
    let mut links = Vec::new();
    if parent != Some(sess.ctx.span_id) {
        links.push(link(sess.ctx, "session"));
    }
    let first = if st.first == u64::MAX { st.last } else { st.first };
    let start = match (&st.started, &st.terminal) {
        (Some(s), _) => s.time,
        (None, Some(t)) => inferred_start(t).min(first),
        (None, None) => first,
    };
    if let Some(s) = &st.started {
        put(&mut a, "aep.event_id", s.id.as_str());
        put_opt(&mut a, "aep.run.trigger", s.str_at("/trigger"));
        gen_ai_attrs(&mut a, s);
        if let Some(prompt) = &s.content {
            content(&mut a, "input", messages("user", prompt, None), prompt);
        }
    }
    let (mut status, mut message) = (StatusCode::Unset, String::new());
    let end = match &st.terminal {
        Some(t) => {
            put(&mut a, "aep.end_event_id", t.id.as_str());
            if st.started.is_none() {
                put(&mut a, "aep.event_id", t.id.as_str());
            }
            let outcome = t.ty.strip_prefix("run.").unwrap_or(&t.ty);
            put(&mut a, "aep.run.outcome", outcome);
            gen_ai_attrs(&mut a, t);
            if t.ty == "run.finished" {
                status = StatusCode::Ok;
                if let Some(answer) = &t.content {
                    content(&mut a, "output", messages("assistant", answer, Some("stop")), answer);
                }
            }
            if t.ty == "run.failed" {
                // AEP-0002 §5.3 run.failed: `reason` is a machine token, `error.type` low-cardinality.
                let et = t.str_at("/error/type").or(t.str_at("/reason")).unwrap_or("_OTHER");
                put(&mut a, "error.type", et);
                put_opt(&mut a, "aep.run.failure_reason", t.str_at("/reason"));
                status = StatusCode::Error;
                message = t.str_at("/reason").unwrap_or("run failed").to_owned();
            }
            if t.ty == "run.cancelled" {
                put_opt(&mut a, "aep.run.cancelled_by", t.str_at("/by"));
            }
            t.time.max(start)
        }
        None => {
            put(&mut a, "aep.incomplete", true);
            forced(forced_end, st.last, start)
        }
    };
    let recs: Vec<&Rec> = st.started.iter().chain(st.terminal.iter()).collect();
    link_traceparents(&mut links, ctx, &recs);
    if let Some(p) = parent {
        links.retain(|l| l.context.span_id != p);
    }
    let mut dropped = st.dropped_events;
    Span {
        service_name: sess.agent.clone(),
        trace_id: ctx.trace_id,
        span_id: ctx.span_id,
        parent_span_id: parent,
        name: format!("invoke_agent {}", sess.agent),
        role: SpanRole::Run,
        start_unix_nanos: start,
        end_unix_nanos: end,
        attributes: a,
        events: span_events(st.events, sess.events_cap, &mut dropped),
        dropped_events_count: dropped,
        links,
        status,
        status_message: message,
    }
}

/// A tool, attention or delegation span.
pub(crate) fn call_span(sess: &Session, call: Call, ctx: SpanContext, parent: SpanId, forced_end: Option<u64>) -> Span {
    let mut a = base(sess);
    let mut links = Vec::new();
    let (mut status, mut message) = (StatusCode::Unset, String::new());
    let first_rec = call.opener.as_ref().or(call.terminal.as_ref());
    put_opt(&mut a, "aep.run_id", call.run.as_deref());
    put_opt(&mut a, "aep.step", first_rec.and_then(|r| r.step.as_deref()));
    if let Some(o) = &call.opener {
        put(&mut a, "aep.event_id", o.id.as_str());
        gen_ai_attrs(&mut a, o);
    }
    if let Some(t) = &call.terminal {
        put(&mut a, "aep.end_event_id", t.id.as_str());
        if call.opener.is_none() {
            put(&mut a, "aep.event_id", t.id.as_str());
        }
        gen_ai_attrs(&mut a, t);
    }
    let name = match call.kind {
        CallKind::Tool => {
            put(&mut a, "gen_ai.operation.name", "execute_tool");
            put(&mut a, OI_KIND, "TOOL");
            put(&mut a, "gen_ai.tool.name", call.name.as_str());
            put(&mut a, "tool.name", call.name.as_str()); // OpenInference's name for it
            put_opt(&mut a, "gen_ai.tool.call.id", call.key.as_deref());
            put_opt(&mut a, "aep.tool.args_digest", call.opener.as_ref().and_then(|o| o.str_at("/args_digest")));
            // Content only as far as the capture ceiling let it into the record.
            let args = call.opener.as_ref().and_then(|o| o.content.as_deref());
            let result = call.terminal.as_ref().and_then(|t| t.content.as_deref());
            put_opt(&mut a, "gen_ai.tool.call.arguments", args);
            put_opt(&mut a, "gen_ai.tool.call.result", result);
            put_opt(&mut a, "input.value", args);
            put_opt(&mut a, "output.value", result);
            if let Some(t) = &call.terminal {
                put_opt(&mut a, "aep.tool.result_digest", t.str_at("/result_digest"));
                match t.ty.as_str() {
                    "tool.completed" => {
                        // AEP-0002 §5.3 tool.completed: `status` defaults to `success`.
                        let outcome = t.str_at("/status").unwrap_or("success");
                        put(&mut a, "aep.tool.outcome", outcome);
                        if outcome == "success" {
                            status = StatusCode::Ok;
                        }
                    }
                    "tool.failed" => {
                        put(&mut a, "aep.tool.outcome", "failed");
                        put(&mut a, "error.type", t.str_at("/error/type").unwrap_or("_OTHER"));
                        status = StatusCode::Error;
                        message = "tool failed".into();
                    }
                    _ => {
                        // AEP-0002 §5.3 tool.denied: blocked pre-execution by policy or runtime.
                        put(&mut a, "aep.tool.outcome", "denied");
                        put(&mut a, "aep.tool.denied", true);
                        put_opt(&mut a, "aep.tool.denied.by", t.str_at("/by"));
                        put_opt(&mut a, "aep.tool.denied.rule", t.str_at("/rule"));
                        put(&mut a, "error.type", "tool_denied");
                        status = StatusCode::Error;
                        message = format!("denied by {}", t.str_at("/by").unwrap_or("policy"));
                    }
                }
            }
            format!("execute_tool {}", call.name)
        }
        CallKind::Attention => {
            // AEP-0002 §7: requested -> [routed]* -> answered -> resolved | timeout.
            let kind = if call.name.is_empty() { "other" } else { call.name.as_str() };
            put(&mut a, "aep.attention.kind", kind);
            put_opt(&mut a, "aep.attention.id", call.key.as_deref());
            let answered = call.middle.iter().filter(|r| r.ty == "attention.answered").min_by_key(|r| (r.pos, r.time));
            if let Some(ans) = answered {
                put_opt(&mut a, "aep.attention.answer.option", ans.str_at("/answer/option"));
                put_opt(&mut a, "aep.attention.answered_by", ans.str_at("/by"));
                put_opt(&mut a, "aep.attention.via", ans.str_at("/via"));
                if let Some(o) = &call.opener {
                    put(&mut a, "aep.attention.wait_ms", ans.time.saturating_sub(o.time) / NANOS_PER_MS);
                }
            }
            let routed: Vec<Value> = call
                .middle
                .iter()
                .filter(|r| r.ty == "attention.routed")
                .filter_map(|r| r.str_at("/to").map(|s| Value::from(s.to_owned())))
                .collect();
            if !routed.is_empty() {
                put(&mut a, "aep.attention.routed_to", Value::Array(routed));
            }
            if let Some(t) = &call.terminal {
                let outcome =
                    if t.ty == "attention.timeout" { "timeout" } else { t.str_at("/resolution").unwrap_or("answered") };
                put(&mut a, "aep.attention.outcome", outcome);
                if let Some(ms) = t.u64_at("/latency_ms").or(t.u64_at("/after_ms")) {
                    put(&mut a, "aep.attention.latency_ms", ms);
                }
            } else {
                put(&mut a, "aep.attention.outcome", if answered.is_some() { "answered" } else { "pending" });
            }
            format!("attention {kind}")
        }
        CallKind::Delegation => {
            put(&mut a, "gen_ai.operation.name", "invoke_agent");
            put(&mut a, OI_KIND, "AGENT");
            let recs: Vec<&Rec> = call.opener.iter().chain(call.terminal.iter()).collect();
            let pick = |p: &str| recs.iter().find_map(|r| r.str_at(p));
            let child_agent = pick("/child/agent");
            put(&mut a, "gen_ai.agent.name", child_agent.unwrap_or(call.name.as_str()));
            put_opt(&mut a, "aep.delegation.agent_type", pick("/agent_type"));
            put_opt(&mut a, "aep.delegation.role", pick("/role"));
            put_opt(&mut a, "aep.delegation.child.session", pick("/child/session"));
            put_opt(&mut a, "aep.delegation.child.run", pick("/child/run"));
            put_opt(&mut a, "aep.delegation.child.agent", child_agent);
            put_opt(&mut a, "aep.delegation.status", call.terminal.as_ref().and_then(|t| t.str_at("/status")));
            if let Some(child) = pick("/child/session") {
                // The child session's own trace, derived as the child's assembler derives it.
                let agent = child_agent.unwrap_or(sess.agent.as_str());
                let csource = sibling_source(&sess.source, agent, child);
                let target = match pick("/child/run") {
                    Some(run) => run_context(&csource, child, run, sess.trace_per_run),
                    None => session_root_context(&csource, child),
                };
                links.push(link(target, "subagent"));
            }
            format!("invoke_agent {}", call.name)
        }
    };
    let start = match (&call.opener, &call.terminal) {
        (Some(o), _) => o.time,
        (None, Some(t)) => {
            put(&mut a, "aep.start_inferred", true);
            inferred_start(t)
        }
        (None, None) => {
            put(&mut a, "aep.start_inferred", true);
            call.middle.iter().chain(call.events.iter()).map(|r| r.time).min().unwrap_or(call.last)
        }
    };
    let end = match &call.terminal {
        Some(t) => t.time.max(start),
        None => {
            put(&mut a, "aep.incomplete", true);
            forced(forced_end, call.last, start)
        }
    };
    let recs: Vec<&Rec> = call.opener.iter().chain(call.terminal.iter()).chain(call.middle.iter()).collect();
    link_traceparents(&mut links, ctx, &recs);
    let mut dropped = call.dropped_events;
    let mut events = call.middle;
    events.extend(call.events);
    Span {
        service_name: sess.agent.clone(),
        trace_id: ctx.trace_id,
        span_id: ctx.span_id,
        parent_span_id: Some(parent),
        name,
        role: match call.kind {
            CallKind::Tool => SpanRole::Tool,
            CallKind::Attention => SpanRole::Attention,
            CallKind::Delegation => SpanRole::Delegation,
        },
        start_unix_nanos: start,
        end_unix_nanos: end,
        attributes: a,
        events: span_events(events, sess.events_cap, &mut dropped),
        dropped_events_count: dropped,
        links,
        status,
        status_message: message,
    }
}
