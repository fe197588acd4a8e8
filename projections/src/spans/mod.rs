//! Synthesized OTLP spans from AEP Events: the span mode AEP-0005 §3.1 defers, built
//! additively beside the LogRecord export.
//!
//! A [`SpanAssembler`] is fed Events in any order and returns finished spans:
//! - a root `session {agent}` span per session keyed by `(source, session)` (AEP-0001
//!   §5.2), with `gen_ai.agent.name`, `gen_ai.conversation.id` and `session.id`, classed
//!   as the agent (OpenInference kind `AGENT`; runs are `AGENT` and tools `TOOL` too) but
//!   naming no GenAI operation: the runs are the `invoke_agent` operations;
//! - an `invoke_agent {agent}` child per run (GenAI agent-span conventions), status OK or
//!   ERROR, with the session's model;
//! - an `execute_tool {tool}` child per tool call, paired by `data.tool.call_id`, else by
//!   `cause`, else by `(epoch, seq)` order among same-named calls;
//! - an `attention {kind}` span per attention request, from `attention.requested` to
//!   `attention.resolved`/`attention.timeout` (AEP-0002 §7), with the human's wait time;
//! - an `invoke_agent {agent_type}` span per subagent delegation, linked to the child
//!   session's trace;
//! - a `chat {model}` span (kind CLIENT) per model call, given by the caller with the run
//!   it joined ([`chat_span`]): the vendors report their calls in records that lag the
//!   hooks, so which run a call belongs to is decided where they are joined, by the
//!   [`SpanJoin`] (finished spans wait a bounded grace for their vendor records: usage,
//!   cost and model on runs, the vendor's tool duration on tools; the vendors' record
//!   shapes are read through their profiles in `aep-adapters`).
//!
//! Other Events become span events on the innermost open span. Ids are SHA-256 derived,
//! so late and replayed Events land on the same spans; a `traceparent` on `session.started`
//! or `run.started` is honored (the span joins that trace). Spans left open at
//! `session.ended`, idle past [`SpanConfig::idle_timeout_nanos`], pushed out by a memory
//! cap, or open at [`SpanAssembler::flush_all`] are closed with `aep.incomplete=true`,
//! never dropped. A session may never end (AEP-0002 §4.1): with
//! [`SpanConfig::root_idle_nanos`] the root of a session idle between runs goes out then
//! (`aep.session.idle=true`), and what follows stays under it.
//!
//! Ordering (AEP-0001 §7): a terminal Event is held until every earlier `(epoch, seq)` of
//! the session was seen or the stream is [`SpanConfig::reorder_window_nanos`] past it, so
//! pairing and span-event placement do not depend on arrival order; gaps are legal, hence
//! the window. Foreign-emitter Events (no `seq`: routers, control commands) that arrive
//! before their session wait for it, bounded by [`SpanConfig::max_orphans`].
//!
//! Capture (AEP-0005 §3.3): at the default ceiling (`metadata`) only metadata-level members
//! reach attributes (ids, structural tokens, numbers, `gen_ai.*` usage). Raising
//! [`SpanConfig::max_capture`] lets a run's prompt and summary and a tool call's arguments
//! and result through as GenAI content attributes (and OpenInference `input.value` /
//! `output.value`; the root shows the session's first prompt and last answer), as far as
//! the Events carry them at that level (AEP-0003 §6.4, §9); other free text never reaches
//! a span.

mod assembler;
mod build;
mod config;
mod ids;
mod join;
mod logs;
mod model;
mod model_call;
mod state;
mod vendor;

pub use assembler::SpanAssembler;
pub use config::SpanConfig;
pub use ids::{
    SpanContext, SpanId, TraceId, parse_rfc3339_nanos, parse_traceparent, run_context, run_trace_id,
    session_root_context, session_trace_id, sibling_source, span_id,
};
pub use join::{CALL_SLACK_NANOS, CallUsage, JoinConfig, SpanJoin, span_bytes};
pub use logs::LogSpans;
pub use model::{SCOPE_NAME, Span, SpanEvent, SpanLink, SpanRole, StatusCode, attributes, traces_request};
pub use model_call::{ModelCall, chat_span};
pub use vendor::VendorSpans;

use aep_schemas::event::Event;

/// Assembles a whole Event list offline (`aep-bridge project otlp-spans`): every Event is
/// pushed, then everything still open is flushed as incomplete.
pub fn assemble(events: &[Event], cfg: SpanConfig) -> Vec<Span> {
    let mut asm = SpanAssembler::new(cfg);
    let mut out = Vec::new();
    for ev in events {
        out.extend(asm.push(ev));
    }
    out.extend(asm.flush_all());
    out
}
