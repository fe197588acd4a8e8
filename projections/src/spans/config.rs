//! Assembler settings: idle timeout, capture ceiling and memory caps.

use aep_schemas::Capture;

/// Settings of a [`super::SpanAssembler`]. Every cap flushes the oldest state first, closed
/// and marked `aep.incomplete=true`; nothing is dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanConfig {
    /// A span (or a whole session) with no Event for this long, measured on its session's
    /// own clock (its newest Event time plus the caller time since that Event arrived, see
    /// [`super::SpanAssembler::push_at`]) at the `now` given to
    /// [`super::SpanAssembler::flush_idle`], is closed as incomplete.
    pub idle_timeout_nanos: u64,
    /// A session with no run or call open and no Event for this long, on its own clock, has
    /// its root span exported at [`super::SpanAssembler::flush_idle`] without waiting for
    /// `session.ended` (AEP-0002 §4.1: a session may never end; Qwen Code's headless `-p`
    /// sends no SessionEnd). It is marked `aep.session.idle = true`; the session stays open,
    /// and later Events keep its trace and root: new runs are children of the exported
    /// root, and what the root itself would have shown (`session.ended`, later failures) goes
    /// out at the real close on one `session {agent}` child marked `aep.root.extension`.
    /// 0: the root waits for the end (or `idle_timeout_nanos`).
    pub root_idle_nanos: u64,
    /// How late an Event may arrive and still land inside a finished pair: a terminal is
    /// held until every earlier `(epoch, seq)` was seen or the session's newest Event
    /// (or the session's own clock) is this far past it (AEP-0001 §7 #2: gaps are legal, so contiguity alone
    /// cannot be waited on).
    pub reorder_window_nanos: u64,
    /// Give every run its own trace (a root `invoke_agent` span linked to the session span)
    /// instead of nesting runs under one session trace: backends then show a run as soon
    /// as it ends, not when an hours-long session does.
    pub trace_per_run: bool,
    /// Capture ceiling of span content (AEP-0005 §3.3, default `metadata`: none). At
    /// `redacted` or `full`, what the Events carry at that level (after mechanical
    /// down-leveling, AEP-0003 §6.4) becomes GenAI content attributes: a run's prompt and
    /// summary (`gen_ai.input.messages`, `gen_ai.output.messages`), a tool call's arguments
    /// and result (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`).
    pub max_capture: Capture,
    /// Most sessions held open at once.
    pub max_open_sessions: usize,
    /// Most open spans (session roots, runs, tools, attention requests, delegations).
    pub max_open_spans: usize,
    /// Per session, how many exported span ids and closed runs are remembered so late
    /// Events neither export a span twice nor lose their parent run.
    pub max_session_history: usize,
    /// Most span events kept per span (the OTel SDK default is 128); further ones are
    /// counted in `droppedEventsCount`.
    pub max_events_per_span: usize,
    /// Most foreign-emitter Events (no `seq`) held while their session has not appeared;
    /// beyond it the oldest opens a session of its own.
    pub max_orphans: usize,
    /// How many `(source, id)` pairs are remembered to drop replayed duplicates (AEP-0001 §7 #4).
    pub max_seen_ids: usize,
    /// How many closed sessions are remembered so late Events continue their trace.
    pub max_closed_sessions: usize,
}

impl Default for SpanConfig {
    fn default() -> Self {
        Self {
            idle_timeout_nanos: 30 * 60 * 1_000_000_000,
            root_idle_nanos: 0,
            reorder_window_nanos: 10 * 1_000_000_000,
            trace_per_run: false,
            max_capture: Capture::Metadata,
            max_open_sessions: 10_000,
            max_open_spans: 100_000,
            max_session_history: 65_536,
            max_events_per_span: 128,
            max_orphans: 4096,
            max_seen_ids: 1 << 18,
            max_closed_sessions: 10_000,
        }
    }
}
