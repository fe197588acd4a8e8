//! The stateful span assembler: Events in, finished spans out.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use aep_schemas::event::Event;

use super::build;
use super::config::SpanConfig;
use super::ids::{SpanContext, run_context, run_trace_id, session_root_context, sibling_source, span_id};
use super::model::Span;
use super::state::{Call, CallKind, EarlyRoot, Rec, Run, RunState, Session, before, is_vendor_telemetry, push_capped};

type SessKey = (String, String);
/// An optional `(epoch, seq)` position.
type Position = Option<(u64, u64)>;
/// Foreign Events waiting for their session, each with its caller-clock arrival.
type Orphans = VecDeque<(Event, u64)>;

/// Which open span a global order number refers to.
#[derive(Debug, Clone)]
enum SpanRef {
    Root,
    Run(String),
    Call(u64),
}

/// The global book of open spans, oldest first, for the span cap.
#[derive(Debug, Default)]
struct Book {
    next: u64,
    open: BTreeMap<u64, (SessKey, SpanRef)>,
}

impl Book {
    fn register(&mut self, key: &SessKey, r: SpanRef) -> u64 {
        self.next += 1;
        self.open.insert(self.next, (key.clone(), r));
        self.next
    }
}

/// A closed session remembered so late Events continue its trace.
#[derive(Debug, Clone)]
struct Closed {
    generation: u64,
    ctx: SpanContext,
    /// The session had ended (`session.ended`), not been flushed for idleness or a cap.
    ended: bool,
}

/// Assembles OTLP spans from AEP Events (AEP-0005 §3.1, the deferred span-synthesis mode).
///
/// Pure and deterministic: no clock (time comes from Event `time` and from the `now`
/// given to [`SpanAssembler::flush_idle`]); trace and span ids derive from
/// `(source, session, run, call)`, so any arrival order of the same Events yields the same
/// spans.
#[derive(Debug)]
pub struct SpanAssembler {
    cfg: SpanConfig,
    sessions: HashMap<SessKey, Session>,
    by_name: HashMap<String, Vec<SessKey>>,
    session_order: BTreeMap<u64, SessKey>,
    book: Book,
    seen: HashSet<(String, String)>,
    seen_fifo: VecDeque<(String, String)>,
    closed: HashMap<SessKey, Closed>,
    closed_fifo: VecDeque<SessKey>,
    orphans: Orphans,
}

impl SpanAssembler {
    /// A new assembler.
    pub fn new(cfg: SpanConfig) -> Self {
        Self {
            cfg,
            sessions: HashMap::new(),
            by_name: HashMap::new(),
            session_order: BTreeMap::new(),
            book: Book::default(),
            seen: HashSet::new(),
            seen_fifo: VecDeque::new(),
            closed: HashMap::new(),
            closed_fifo: VecDeque::new(),
            orphans: VecDeque::new(),
        }
    }

    /// Number of sessions held open.
    pub fn open_sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Whether anything of session `(source, session)` is held: its spans are open, or
    /// foreign Events wait for it. A durable exporter reads a session's log again from
    /// where its session was last not held (the spans it holds live only here).
    pub fn holds(&self, source: &str, session: &str) -> bool {
        self.sessions.contains_key(&(source.to_owned(), session.to_owned()))
            || self.orphans.iter().any(|(o, _)| o.session.as_deref() == Some(session))
    }

    /// Number of spans held open (session roots included).
    pub fn open_spans(&self) -> usize {
        self.book.open.len()
    }

    /// Feeds one Event; returns the spans it finished. Agent-scoped Events (no session)
    /// open no span; a replayed `(source, id)` changes nothing (AEP-0001 §7 #4).
    ///
    /// The Event's own `time` stands for its arrival: the `now` later given to
    /// [`SpanAssembler::flush_idle`] is then on the Events' timeline. A live stream whose
    /// sessions' clocks disagree should use [`SpanAssembler::push_at`].
    pub fn push(&mut self, ev: &Event) -> Vec<Span> {
        let arrived = super::ids::parse_rfc3339_nanos(&ev.time).unwrap_or(0);
        self.push_at(ev, arrived)
    }

    /// Feeds one Event that arrived at `arrived_unix_nanos` on the caller's clock (the
    /// clock later given to [`SpanAssembler::flush_idle`]). Each session keeps its own
    /// clock: its newest Event time plus the caller time since that Event arrived, so a
    /// session whose vendor timestamps lag others (clock skew, late OTLP, a replay) is
    /// neither idle-flushed nor settled early by another session's timeline.
    pub fn push_at(&mut self, ev: &Event, arrived_unix_nanos: u64) -> Vec<Span> {
        let arrived = arrived_unix_nanos;
        let mut out = Vec::new();
        let Some(name) = ev.session.as_deref() else {
            return out; // AEP-0001 §5.2: agent-scoped Events belong to no session trace.
        };
        let dedupe = (ev.source.to_string(), ev.id.clone());
        if self.seen.contains(&dedupe) {
            return out;
        }
        self.remember(dedupe);
        let known = self.by_name.contains_key(name);
        if ev.seq.is_none() && !known {
            // AEP-0001 §5.2: a foreign-emitter Event (a router's attention.routed, a
            // control command) waits for the owner's session instead of opening its own.
            self.orphans.push_back((ev.clone(), arrived));
            while self.orphans.len() > self.cfg.max_orphans {
                if let Some((o, at)) = self.orphans.pop_front() {
                    self.place(&o, at, &mut out);
                }
            }
            return out;
        }
        self.place(ev, arrived, &mut out);
        if !known && !self.orphans.is_empty() {
            let (mine, rest): (Orphans, Orphans) =
                std::mem::take(&mut self.orphans).into_iter().partition(|(o, _)| o.session.as_deref() == Some(name));
            self.orphans = rest;
            for (o, at) in mine {
                self.place(&o, at, &mut out);
            }
        }
        out
    }

    /// Routes one session-scoped Event into its session and emits what it finished.
    fn place(&mut self, ev: &Event, arrived: u64, out: &mut Vec<Span>) {
        let Some(name) = ev.session.as_deref() else { return };
        // A vendor's own telemetry record (`x.<vendor>.otel.*`) lags its session: Claude Code
        // exports on an interval, Gemini CLI and Qwen Code after SessionEnd. Once the session
        // ended it annotates nothing (the trace is complete; the record stays in the log
        // export) instead of opening one `(late)` continuation span per record.
        if !self.closed.is_empty() && is_vendor_telemetry(&ev.r#type) {
            let own = (ev.source.to_string(), name.to_owned());
            if !self.sessions.contains_key(&own) && self.closed.get(&own).is_some_and(|c| c.ended) {
                return;
            }
        }
        let key = self.resolve_session(ev, name, out);
        let Some(sess) = self.sessions.get_mut(&key) else { return };
        let rec = Rec::new(ev, sess.last, (&sess.source, &sess.agent), self.cfg.max_capture);
        if rec.time >= sess.last {
            // The session's clock is anchored at its newest Event (see `Session::clock`).
            sess.arrived = sess.arrived.max(arrived);
        }
        self.apply(&key, rec);
        self.settle(&key, 0, out);
        // AEP-0002 §2 #5: Events after `session.ended` stay legal (late completions, e.g.
        // Codex `notify` on exit). One that opens no span of its own is on no span (its log
        // record names the ended root) and holds nothing open until idle.
        if self.sessions.get(&key).is_some_and(Session::late_and_done) {
            self.close_session(&key, out);
        }
        self.enforce_span_cap(out);
    }

    /// Places foreign Events whose session never showed up: oldest first, those that
    /// arrived up to `until` (caller clock), each then opening a session of its own.
    fn place_orphans(&mut self, until: u64, out: &mut Vec<Span>) {
        let (old, keep): (Orphans, Orphans) =
            std::mem::take(&mut self.orphans).into_iter().partition(|(_, at)| *at <= until);
        self.orphans = keep;
        for (o, at) in old {
            self.place(&o, at, out);
        }
    }

    /// Closes, as incomplete, every span with no Event for the configured idle time before
    /// `now_unix_nanos` (the caller clock of [`SpanAssembler::push_at`]); a session idle
    /// that long is closed whole. Idle and reorder windows run on each session's own clock.
    pub fn flush_idle(&mut self, now_unix_nanos: u64) -> Vec<Span> {
        let mut out = Vec::new();
        let idle = self.cfg.idle_timeout_nanos;
        // Terminals older than the reorder window are settled by the session's clock, too.
        let keys: Vec<SessKey> = self.session_order.values().cloned().collect();
        for key in &keys {
            let Some(now) = self.sessions.get(key).map(|s| s.clock(now_unix_nanos)) else { continue };
            self.settle(key, now, &mut out);
            if self.sessions.get(key).is_some_and(Session::late_and_done) {
                self.close_session(key, &mut out);
            }
        }
        self.place_orphans(now_unix_nanos.saturating_sub(idle), &mut out);
        let idle_sessions: Vec<SessKey> = self
            .session_order
            .values()
            .filter(|k| self.sessions.get(*k).is_some_and(|s| s.last <= s.clock(now_unix_nanos).saturating_sub(idle)))
            .cloned()
            .collect();
        for key in idle_sessions {
            self.close_session(&key, &mut out);
        }
        let mut stale: Vec<(u64, SessKey, SpanRef)> = Vec::new();
        for (order, (key, r)) in &self.book.open {
            let Some(sess) = self.sessions.get(key) else { continue };
            let limit = sess.clock(now_unix_nanos).saturating_sub(idle);
            let last = match r {
                SpanRef::Root => continue,
                SpanRef::Run(run) => sess.runs.get(run).and_then(|r| r.open.as_ref()).map(|s| s.last),
                SpanRef::Call(o) => sess.calls.get(o).map(|c| c.last),
            };
            if last.is_some_and(|l| l <= limit) {
                stale.push((*order, key.clone(), r.clone()));
            }
        }
        for (_, key, r) in stale {
            self.close_one(&key, &r, &mut out);
        }
        self.export_idle_roots(now_unix_nanos, &mut out);
        out
    }

    /// Exports the root of every session quiet for `root_idle_nanos` with nothing open and
    /// at least one run done, or with activity but no run at all (a session known only from
    /// the agent's own telemetry has no runs to wait for: its log records point at the
    /// root); see [`SpanConfig::root_idle_nanos`]. The session stays open.
    fn export_idle_roots(&mut self, now: u64, out: &mut Vec<Span>) {
        let quiet = self.cfg.root_idle_nanos;
        if quiet == 0 {
            return;
        }
        for key in self.session_order.values() {
            let Some(sess) = self.sessions.get_mut(key) else { continue };
            let idle = sess.early_root.is_none()
                && sess.ended.is_none()
                && !sess.after_end
                && (!sess.closed_runs.is_empty() || (sess.active && sess.runs.is_empty()))
                && sess.calls.is_empty()
                && sess.runs.values().all(|r| r.open.is_none())
                && sess.last <= sess.clock(now).saturating_sub(quiet);
            if idle {
                sess.frozen = true;
                out.push(build::early_root_span(sess));
                sess.early_root = Some(EarlyRoot { since: u64::MAX });
            }
        }
    }

    /// Closes everything (shutdown): unfinished spans are marked `aep.incomplete=true`.
    pub fn flush_all(&mut self) -> Vec<Span> {
        let mut out = Vec::new();
        self.place_orphans(u64::MAX, &mut out);
        let keys: Vec<SessKey> = self.session_order.values().cloned().collect();
        for key in keys {
            self.close_session(&key, &mut out);
        }
        out
    }

    fn remember(&mut self, dedupe: (String, String)) {
        if self.cfg.max_seen_ids == 0 {
            return;
        }
        while self.seen_fifo.len() >= self.cfg.max_seen_ids {
            if let Some(old) = self.seen_fifo.pop_front() {
                self.seen.remove(&old);
            }
        }
        self.seen.insert(dedupe.clone());
        self.seen_fifo.push_back(dedupe);
    }

    /// Finds the session an Event belongs to, creating it when new.
    fn resolve_session(&mut self, ev: &Event, name: &str, out: &mut Vec<Span>) -> SessKey {
        let own = (ev.source.to_string(), name.to_owned());
        if self.sessions.contains_key(&own) {
            return own;
        }
        // AEP-0001 §5.2: a foreign-emitter Event (no seq) addresses the session by bare name.
        if ev.seq.is_none()
            && let Some(k) = self.by_name.get(name).and_then(|v| v.first())
        {
            return k.clone();
        }
        while self.sessions.len() >= self.cfg.max_open_sessions.max(1) {
            let Some((_, oldest)) = self.session_order.iter().next().map(|(o, k)| (*o, k.clone())) else { break };
            self.close_session(&oldest, out);
        }
        let (generation, ctx, parent, after_end) = match self.closed.get(&own) {
            // AEP-0002 §2 #5: an Event after `session.ended` is a late completion of the ended
            // session, not a new start: what it opens hangs under the ended root itself, and
            // no root of its own (a `session {agent} (late)` beside the real one) is made.
            Some(c) if c.ended => (c.generation + 1, c.ctx, None, true),
            // A session closed without its end (idle, a cap) continues its trace under the old root.
            Some(c) => {
                let generation = c.generation + 1;
                let sid = span_id("session", &[&own.0, &own.1, &generation.to_string()]);
                (generation, SpanContext { trace_id: c.ctx.trace_id, span_id: sid }, Some(c.ctx.span_id), false)
            }
            None => (0, session_root_context(&own.0, &own.1), None, false),
        };
        let order = self.book.register(&own, SpanRef::Root);
        let sess = Session {
            source: own.0.clone(),
            session: own.1.clone(),
            agent: ev.agent.to_string(),
            trace_per_run: self.cfg.trace_per_run,
            generation,
            after_end,
            ctx,
            parent,
            links: Vec::new(),
            frozen: false,
            started: None,
            ended: None,
            events: Vec::new(),
            dropped_events: 0,
            failed_runs: 0,
            events_cap: self.cfg.max_events_per_span,
            first: u64::MAX,
            last: 0,
            order,
            arrived: 0,
            runs: HashMap::new(),
            calls: BTreeMap::new(),
            emitted: HashSet::new(),
            emitted_fifo: VecDeque::new(),
            closed_runs: VecDeque::new(),
            history_cap: self.cfg.max_session_history,
            tracks: HashMap::new(),
            first_input: None,
            last_output: None,
            early_root: None,
            active: false,
            own: None,
        };
        self.sessions.insert(own.clone(), sess);
        self.session_order.insert(order, own.clone());
        self.by_name.entry(own.1.clone()).or_default().push(own.clone());
        own
    }

    /// Records one Event on the span it opens, closes or annotates.
    fn apply(&mut self, key: &SessKey, rec: Rec) {
        let Some(sess) = self.sessions.get_mut(key) else { return };
        let book = &mut self.book;
        if let Some(early) = sess.early_root.as_mut()
            && !is_vendor_telemetry(&rec.ty)
        {
            early.since = early.since.min(rec.time);
        }
        sess.active |= rec.ty != "session.started";
        sess.see_content(&rec);
        if rec.foreign_source.is_none() {
            sess.see(&rec);
        } else {
            sess.first = sess.first.min(rec.time);
            sess.last = sess.last.max(rec.time);
            let (lo, hi) = sess.own.get_or_insert((rec.time, rec.time));
            (*lo, *hi) = ((*lo).min(rec.time), (*hi).max(rec.time));
        }
        if let Some(run) = rec.run.as_deref() {
            // Every Event of a run keeps the run alive (idle flush) and inside its bounds.
            ensure_run(sess, book, key, run);
            if let Some(st) = sess.runs.get_mut(run).and_then(|r| r.open.as_mut()) {
                st.first = st.first.min(rec.time);
                st.last = st.last.max(rec.time);
            }
        }
        match rec.ty.as_str() {
            "session.started" if sess.started.is_none() => {
                if let (Some((epoch, seq)), true) = (rec.pos, rec.foreign_source.is_none()) {
                    sess.tracks.entry(epoch).or_default().anchor(seq);
                    sess.tracks.entry(epoch).or_default().see(seq);
                }
                if let Some(tp) = rec.traceparent {
                    adopt_session_traceparent(sess, tp);
                }
                if let Some(parent_session) = rec.str_at("/parent/session") {
                    let agent = rec.str_at("/parent/agent").unwrap_or(&sess.agent).to_owned();
                    let psource = sibling_source(&sess.source, &agent, parent_session);
                    let target = match rec.str_at("/parent/run") {
                        Some(run) => run_context(&psource, parent_session, run, sess.trace_per_run),
                        None => session_root_context(&psource, parent_session),
                    };
                    sess.links.push(build::link(target, "parent"));
                }
                sess.started = Some(rec);
            }
            "session.ended" if sess.ended.is_none() => sess.ended = Some(rec),
            "run.started" | "run.finished" | "run.failed" | "run.cancelled" if rec.run.is_some() => {
                let run_name = rec.run.clone().unwrap_or_default();
                ensure_run(sess, book, key, &run_name);
                let started = rec.ty == "run.started";
                let Some(run) = sess.runs.get_mut(&run_name) else { return };
                let free = match &run.open {
                    Some(st) => {
                        if started {
                            st.started.is_none()
                        } else {
                            st.terminal.is_none()
                        }
                    }
                    None => false,
                };
                if !free {
                    add_event(sess, book, key, rec, true);
                    return;
                }
                if started
                    && let Some(tp) = rec.traceparent
                    && !run.frozen
                {
                    run.ctx.trace_id = tp.trace_id;
                    run.parent = Some(tp.span_id);
                    run.foreign_trace = true;
                }
                if let Some(st) = run.open.as_mut() {
                    st.first = st.first.min(rec.time);
                    st.last = st.last.max(rec.time);
                    if started {
                        st.started = Some(rec);
                    } else {
                        st.terminal = Some(rec);
                    }
                }
            }
            "tool.requested" => {
                let name = tool_name(&rec);
                let k = rec.str_at("/tool/call_id").map(str::to_owned);
                opener(sess, book, key, CallKind::Tool, k, name, rec);
            }
            "tool.completed" | "tool.failed" | "tool.denied" => {
                let name = tool_name(&rec);
                let k = rec.str_at("/tool/call_id").map(str::to_owned);
                terminal(sess, book, key, CallKind::Tool, k, name, rec);
            }
            "attention.requested" => {
                let name = rec.str_at("/kind").unwrap_or("other").to_owned();
                let k = Some(rec.id.clone());
                opener(sess, book, key, CallKind::Attention, k, name, rec);
            }
            "attention.resolved" | "attention.timeout" => {
                // AEP-0002 §7 #1: the lifecycle correlates on `subject` = the request id.
                let k = rec.subject.clone();
                terminal(sess, book, key, CallKind::Attention, k, String::new(), rec);
            }
            "delegation.subagent.started" => {
                let name = delegation_name(&rec);
                let k = rec.str_at("/child/session").map(str::to_owned);
                opener(sess, book, key, CallKind::Delegation, k, name, rec);
            }
            "delegation.subagent.stopped" => {
                let name = delegation_name(&rec);
                let k = rec.str_at("/child/session").map(str::to_owned);
                terminal(sess, book, key, CallKind::Delegation, k, name, rec);
            }
            ty if ty.starts_with("attention.") || ty.starts_with("control.") => {
                // attention.answered / attention.routed / control.* about a request (AEP-0002 §7).
                let target = rec.subject.as_deref().and_then(|s| {
                    sess.calls
                        .iter()
                        .find(|(_, c)| c.kind == CallKind::Attention && c.key.as_deref() == Some(s))
                        .map(|(o, _)| *o)
                });
                match target {
                    Some(o) => {
                        let cap = sess.events_cap;
                        if let Some(c) = sess.calls.get_mut(&o) {
                            c.last = c.last.max(rec.time);
                            push_capped(&mut c.middle, &mut c.dropped_events, rec, cap);
                        }
                    }
                    None if (ty.starts_with("attention.") || ty.starts_with("control.attention."))
                        && rec.subject.is_some() =>
                    {
                        let subject = rec.subject.clone().unwrap_or_default();
                        let sid = call_span_id(sess, CallKind::Attention, "key", &subject);
                        if sess.emitted.contains(&sid) {
                            add_event(sess, book, key, rec, true);
                        } else {
                            let o = new_call(sess, book, key, CallKind::Attention, Some(subject), String::new(), &rec);
                            if let Some(c) = sess.calls.get_mut(&o) {
                                c.middle.push(rec);
                            }
                        }
                    }
                    None => add_event(sess, book, key, rec, false),
                }
            }
            _ => add_event(sess, book, key, rec, false),
        }
    }

    /// Emits every span of the session whose Events are all in, and the session itself once
    /// `session.ended` is in and nothing earlier can still arrive.
    fn settle(&mut self, key: &SessKey, now: u64, out: &mut Vec<Span>) {
        let window = self.cfg.reorder_window_nanos;
        let Some(sess) = self.sessions.get_mut(key) else { return };
        pair_in_order(sess, &mut self.book, window, now);
        let ready: Vec<u64> = sess
            .calls
            .iter()
            .filter(|(_, c)| {
                c.terminal
                    .as_ref()
                    .is_some_and(|t| sess.settled_rec(t, window, now) || (t.pos.is_none() && c.opener.is_some()))
            })
            .map(|(o, _)| *o)
            .collect();
        for o in ready {
            if let Some(call) = sess.calls.remove(&o) {
                self.book.open.remove(&call.order);
                out.push(emit_call(sess, call, None));
            }
        }
        let runs: Vec<String> = sess
            .runs
            .iter()
            .filter(|(_, r)| {
                r.open.as_ref().is_some_and(|st| {
                    st.terminal
                        .as_ref()
                        .is_some_and(|t| sess.settled_rec(t, window, now) || (t.pos.is_none() && st.started.is_some()))
                })
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in runs {
            if let Some(span) = emit_run(sess, &mut self.book, &name, None) {
                out.push(span);
            }
        }
        let end = match &sess.ended {
            // Gaps are legal (AEP-0001 §7 #2): past the reorder window the end stands.
            Some(e) => e.pos.is_none() || sess.settled_rec(e, window, now),
            None => false,
        };
        if end {
            self.close_session(key, out);
        }
    }

    /// Closes one open span (idle or capped), as incomplete when its terminal is missing.
    fn close_one(&mut self, key: &SessKey, r: &SpanRef, out: &mut Vec<Span>) {
        match r {
            SpanRef::Root => self.close_session(key, out),
            SpanRef::Run(name) => {
                if let Some(sess) = self.sessions.get_mut(key)
                    && let Some(span) = emit_run(sess, &mut self.book, name, Some(0))
                {
                    out.push(span);
                }
            }
            SpanRef::Call(o) => {
                if let Some(sess) = self.sessions.get_mut(key)
                    && let Some(call) = sess.calls.remove(o)
                {
                    self.book.open.remove(&call.order);
                    out.push(emit_call(sess, call, Some(0)));
                }
            }
        }
    }

    /// Closes a whole session: children first, the root last; remembers it for late Events.
    fn close_session(&mut self, key: &SessKey, out: &mut Vec<Span>) {
        let Some(mut sess) = self.sessions.remove(key) else { return };
        self.session_order.remove(&sess.order);
        self.book.open.remove(&sess.order);
        if let Some(list) = self.by_name.get_mut(&sess.session) {
            list.retain(|k| k != key);
            if list.is_empty() {
                self.by_name.remove(&sess.session);
            }
        }
        // A session whose `session.ended` is in closes at it, however the close was triggered.
        let end_at = sess.ended.as_ref().map_or(0, |e| e.time);
        let calls: Vec<Call> = std::mem::take(&mut sess.calls).into_values().collect();
        for call in calls {
            self.book.open.remove(&call.order);
            out.push(emit_call(&mut sess, call, Some(end_at)));
        }
        let mut runs: Vec<(u64, String)> =
            sess.runs.iter().filter_map(|(n, r)| r.open.as_ref().map(|st| (st.order, n.clone()))).collect();
        runs.sort();
        for (_, name) in runs {
            if let Some(span) = emit_run(&mut sess, &mut self.book, &name, Some(end_at)) {
                out.push(span);
            }
        }
        match sess.early_root.take() {
            // Late Events of an ended session: their spans hang under the ended root.
            _ if sess.after_end => {}
            // The root left while the session idled: only what came after goes out.
            Some(early) if early.continued() => out.push(build::root_extension(&mut sess, early.since)),
            Some(_) => {}
            None => out.push(build::root_span(&mut sess)),
        }
        if self.cfg.max_closed_sessions > 0 {
            while self.closed_fifo.len() >= self.cfg.max_closed_sessions {
                if let Some(old) = self.closed_fifo.pop_front() {
                    self.closed.remove(&old);
                }
            }
            let root = SpanContext { trace_id: sess.ctx.trace_id, span_id: sess.parent_root() };
            let ended = sess.ended.is_some() || sess.after_end;
            let closed = Closed { generation: sess.generation, ctx: root, ended };
            if self.closed.insert(key.clone(), closed).is_none() {
                self.closed_fifo.push_back(key.clone());
            }
        }
    }

    fn enforce_span_cap(&mut self, out: &mut Vec<Span>) {
        let cap = self.cfg.max_open_spans.max(1);
        while self.book.open.len() > cap {
            // Children before roots: the oldest non-root span, else the oldest session.
            let victim = self
                .book
                .open
                .iter()
                .find(|(_, (_, r))| !matches!(r, SpanRef::Root))
                .or_else(|| self.book.open.iter().next())
                .map(|(o, (k, r))| (*o, k.clone(), r.clone()));
            let Some((order, key, r)) = victim else { break };
            let before_len = self.book.open.len();
            self.close_one(&key, &r, out);
            if self.book.open.len() == before_len {
                self.book.open.remove(&order); // stale entry: never loop forever
            }
        }
    }
}

impl Session {
    /// Late Events of an ended session whose spans all went out: nothing to wait for.
    fn late_and_done(&self) -> bool {
        self.after_end
            && self.started.is_none()
            && self.calls.is_empty()
            && self.runs.values().all(|r| r.open.is_none())
    }

    /// The first generation's root span id (what a continuation's parent is).
    fn parent_root(&self) -> [u8; 8] {
        if self.generation > 0 { self.parent.unwrap_or(self.ctx.span_id) } else { self.ctx.span_id }
    }
}

fn adopt_session_traceparent(sess: &mut Session, tp: SpanContext) {
    if sess.generation > 0 || sess.frozen {
        sess.links.push(build::link(tp, "traceparent"));
        return;
    }
    // AEP-0005 §3.2: Events land on existing traces; the session joins the incoming trace.
    let old = sess.ctx.trace_id;
    sess.ctx.trace_id = tp.trace_id;
    sess.parent = Some(tp.span_id);
    for run in sess.runs.values_mut() {
        if !run.foreign_trace && run.ctx.trace_id == old {
            run.ctx.trace_id = tp.trace_id;
        }
    }
}

fn tool_name(rec: &Rec) -> String {
    rec.str_at("/tool/name").or(rec.subject.as_deref()).unwrap_or("unknown").to_owned()
}

fn delegation_name(rec: &Rec) -> String {
    rec.str_at("/agent_type").or(rec.str_at("/child/agent")).unwrap_or("subagent").to_owned()
}

fn ensure_run(sess: &mut Session, book: &mut Book, key: &SessKey, run: &str) {
    if sess.runs.contains_key(run) {
        return;
    }
    let gen_s = sess.generation.to_string();
    let sid = span_id("run", &[&sess.source, &sess.session, &gen_s, run]);
    let order = book.register(key, SpanRef::Run(run.to_owned()));
    // With `trace_per_run` each run roots its own trace, linked to the session span.
    let trace_id = if sess.trace_per_run { run_trace_id(&sess.source, &sess.session, run) } else { sess.ctx.trace_id };
    sess.runs.insert(
        run.to_owned(),
        Run {
            ctx: SpanContext { trace_id, span_id: sid },
            parent: None,
            foreign_trace: sess.trace_per_run,
            frozen: false,
            open: Some(RunState {
                started: None,
                terminal: None,
                events: Vec::new(),
                dropped_events: 0,
                first: u64::MAX,
                last: 0,
                order,
            }),
        },
    );
}

fn call_span_id(sess: &Session, kind: CallKind, how: &str, id: &str) -> [u8; 8] {
    span_id(kind.as_str(), &[&sess.source, &sess.session, &sess.generation.to_string(), how, id])
}

fn new_call(
    sess: &mut Session,
    book: &mut Book,
    key: &SessKey,
    kind: CallKind,
    k: Option<String>,
    name: String,
    rec: &Rec,
) -> u64 {
    if let Some(run) = &rec.run {
        ensure_run(sess, book, key, run);
    }
    book.next += 1;
    let order = book.next;
    book.open.insert(order, (key.clone(), SpanRef::Call(order)));
    sess.calls.insert(
        order,
        Call {
            kind,
            key: k,
            name,
            run: rec.run.clone(),
            opener: None,
            terminal: None,
            middle: Vec::new(),
            events: Vec::new(),
            dropped_events: 0,
            last: rec.time,
            order,
        },
    );
    order
}

fn keys_compatible(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

/// An opening Event (`tool.requested`, `attention.requested`, `delegation.subagent.started`):
/// paired with an already-arrived terminal by explicit key, then `cause`, then name order.
fn opener(
    sess: &mut Session,
    book: &mut Book,
    key: &SessKey,
    kind: CallKind,
    k: Option<String>,
    name: String,
    rec: Rec,
) {
    let by_key = k
        .as_ref()
        .and_then(|k| sess.calls.iter().find(|(_, c)| c.kind == kind && c.key.as_ref() == Some(k)).map(|(o, _)| *o));
    let by_cause = || {
        sess.calls
            .iter()
            .find(|(_, c)| {
                c.kind == kind
                    && c.opener.is_none()
                    && keys_compatible(&c.key, &k)
                    && c.terminal.as_ref().and_then(|t| t.cause.as_deref()) == Some(rec.id.as_str())
            })
            .map(|(o, _)| *o)
    };
    let found = by_key.or_else(by_cause);
    if let Some(o) = found {
        if let Some(c) = sess.calls.get_mut(&o)
            && c.opener.is_none()
        {
            c.last = c.last.max(rec.time);
            if c.key.is_none() {
                c.key = k;
            }
            if c.run.is_none() {
                c.run = rec.run.clone();
            }
            if c.name.is_empty() {
                c.name = name;
            }
            c.opener = Some(rec);
            return;
        }
        add_event(sess, book, key, rec, true);
        return;
    }
    let sid = match &k {
        Some(k) => call_span_id(sess, kind, "key", k),
        None => call_span_id(sess, kind, "ev", &rec.id),
    };
    if sess.emitted.contains(&sid) {
        add_event(sess, book, key, rec, true);
        return;
    }
    let o = new_call(sess, book, key, kind, k, name, &rec);
    if let Some(c) = sess.calls.get_mut(&o) {
        c.opener = Some(rec);
    }
}

/// A terminal Event: paired with its opener by explicit key, then `cause`, then the oldest
/// open call of the same name in the same run (AEP-0001 §7 #3 order).
fn terminal(
    sess: &mut Session,
    book: &mut Book,
    key: &SessKey,
    kind: CallKind,
    k: Option<String>,
    name: String,
    rec: Rec,
) {
    let by_key = k
        .as_ref()
        .and_then(|k| sess.calls.iter().find(|(_, c)| c.kind == kind && c.key.as_ref() == Some(k)).map(|(o, _)| *o));
    let by_cause = || {
        let cause = rec.cause.as_deref()?;
        sess.calls
            .iter()
            .find(|(_, c)| {
                c.kind == kind
                    && c.terminal.is_none()
                    && keys_compatible(&c.key, &k)
                    && c.opener.as_ref().is_some_and(|o| o.id == cause)
            })
            .map(|(o, _)| *o)
    };
    let cap = sess.events_cap;
    let found = by_key.or_else(by_cause);
    if let Some(o) = found
        && let Some(c) = sess.calls.get_mut(&o)
    {
        c.last = c.last.max(rec.time);
        if c.terminal.is_none() {
            if c.run.is_none() {
                c.run = rec.run.clone();
            }
            c.terminal = Some(rec);
        } else {
            // A second terminal (e.g. resolved after timeout) annotates.
            push_capped(&mut c.middle, &mut c.dropped_events, rec, cap);
        }
        return;
    }
    let late = match (&k, &rec.cause) {
        (Some(k), _) => sess.emitted.contains(&call_span_id(sess, kind, "key", k)),
        (None, Some(c)) => sess.emitted.contains(&call_span_id(sess, kind, "ev", c)),
        (None, None) => false,
    };
    if late {
        add_event(sess, book, key, rec, true);
        return;
    }
    let o = new_call(sess, book, key, kind, k, name, &rec);
    if let Some(c) = sess.calls.get_mut(&o) {
        c.terminal = Some(rec);
    }
}

/// Pairs calls that carry neither a call id nor a `cause` link: once a terminal is settled
/// (nothing earlier can still arrive), it closes the oldest open same-named call of its run
/// that opened before it (AEP-0001 §7 #3 order). Waiting for settlement makes the pairing
/// independent of arrival order.
fn pair_in_order(sess: &mut Session, book: &mut Book, window: u64, now: u64) {
    let mut lone: Vec<(Position, u64, u64)> = sess
        .calls
        .iter()
        .filter(|(_, c)| c.kind != CallKind::Attention && c.opener.is_none() && c.key.is_none())
        .filter_map(|(o, c)| {
            c.terminal.as_ref().filter(|t| sess.settled_rec(t, window, now)).map(|t| (t.pos, t.time, *o))
        })
        .collect();
    lone.sort();
    for (_, _, lone_order) in lone {
        let Some(t) = sess.calls.get(&lone_order).and_then(|c| c.terminal.as_ref()) else { continue };
        let (kind, name, run) = match sess.calls.get(&lone_order) {
            Some(c) => (c.kind, c.name.clone(), c.run.clone()),
            None => continue,
        };
        let target = sess
            .calls
            .iter()
            .filter(|(_, c)| {
                c.kind == kind
                    && c.terminal.is_none()
                    && c.key.is_none()
                    && (c.run == run || c.run.is_none() || run.is_none())
                    && c.name == name
                    && c.opener
                        .as_ref()
                        .is_some_and(|o| before(o, t) && t.cause.as_deref().is_none_or(|cause| cause == o.id))
            })
            .min_by(|a, b| {
                let (oa, ob) = (a.1.opener.as_ref(), b.1.opener.as_ref());
                oa.map(|o| (o.pos, o.time)).cmp(&ob.map(|o| (o.pos, o.time)))
            })
            .map(|(o, _)| *o);
        let Some(target) = target else { continue };
        let Some(lone) = sess.calls.remove(&lone_order) else { continue };
        book.open.remove(&lone.order);
        if let Some(c) = sess.calls.get_mut(&target) {
            c.last = c.last.max(lone.last);
            if c.run.is_none() {
                c.run = lone.run;
            }
            c.terminal = lone.terminal;
            c.middle.extend(lone.middle);
            c.events.extend(lone.events);
        }
    }
}

/// Records an Event as a span event on the innermost open span of its run (else the
/// session). `late` marks an Event whose own span was already exported.
fn add_event(sess: &mut Session, book: &mut Book, key: &SessKey, mut rec: Rec, late: bool) {
    if late {
        rec.ty = format!("{} (late)", rec.ty);
    }
    if let Some(run) = rec.run.clone() {
        ensure_run(sess, book, key, &run);
    }
    place_rec(sess, rec);
}

/// Puts a recorded Event on the innermost open span that holds it.
fn place_rec(sess: &mut Session, rec: Rec) {
    // Innermost by session order: the latest-opened call whose open..close range holds it.
    let inner = sess
        .calls
        .values_mut()
        .filter(|c| c.run == rec.run && c.contains(&rec))
        .max_by(|a, b| a.opener.as_ref().map(|o| (o.pos, o.time)).cmp(&b.opener.as_ref().map(|o| (o.pos, o.time))));
    let cap = sess.events_cap;
    if let Some(c) = inner {
        c.last = c.last.max(rec.time);
        push_capped(&mut c.events, &mut c.dropped_events, rec, cap);
        return;
    }
    if let Some(st) = rec.run.as_ref().and_then(|r| sess.runs.get_mut(r)).and_then(|r| r.open.as_mut()) {
        st.first = st.first.min(rec.time);
        st.last = st.last.max(rec.time);
        push_capped(&mut st.events, &mut st.dropped_events, rec, cap);
        return;
    }
    push_capped(&mut sess.events, &mut sess.dropped_events, rec, cap);
}

fn emit_call(sess: &mut Session, mut call: Call, forced_end: Option<u64>) -> Span {
    // Events that arrived before the call's opener but lie inside it move onto it.
    let pool = match call.run.as_ref().and_then(|r| sess.runs.get_mut(r)).and_then(|r| r.open.as_mut()) {
        Some(st) => Some(&mut st.events),
        None if call.run.is_none() => Some(&mut sess.events),
        None => None,
    };
    if let Some(pool) = pool {
        let (inside, rest): (Vec<Rec>, Vec<Rec>) = pool.drain(..).partition(|r| r.run == call.run && call.contains(r));
        *pool = rest;
        call.events.extend(inside);
    }
    // Events placed while the terminal was still missing may lie after it: move them out.
    if call.opener.is_some() {
        let (inside, outside): (Vec<Rec>, Vec<Rec>) =
            std::mem::take(&mut call.events).into_iter().partition(|r| call.contains(r));
        call.events = inside;
        for r in outside {
            place_rec(sess, r);
        }
    }
    let (how, id) = call.identity();
    let sid = call_span_id(sess, call.kind, how, &id);
    let parent = match call.run.as_ref().and_then(|r| sess.runs.get_mut(r)) {
        Some(run) => {
            run.frozen = true;
            run.ctx
        }
        None => sess.ctx,
    };
    sess.frozen = true;
    sess.mark_emitted(sid);
    build::call_span(sess, call, SpanContext { trace_id: parent.trace_id, span_id: sid }, parent.span_id, forced_end)
}

fn emit_run(sess: &mut Session, book: &mut Book, name: &str, forced_end: Option<u64>) -> Option<Span> {
    let run = sess.runs.get_mut(name)?;
    let st = run.open.take()?;
    run.frozen = true;
    book.open.remove(&st.order);
    let (ctx, parent) = (run.ctx, run.parent);
    let foreign = run.foreign_trace;
    sess.frozen = true;
    sess.mark_emitted(ctx.span_id);
    sess.mark_run_closed(name);
    let parent = if foreign { parent } else { Some(sess.ctx.span_id) };
    let span = build::run_span(sess, name, st, ctx, parent, forced_end);
    if span.status == super::model::StatusCode::Error {
        sess.failed_runs += 1;
    }
    Some(span)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(v: serde_json::Value) -> Event {
        Event::from_value(v).unwrap()
    }

    #[test]
    fn agent_scoped_events_open_nothing() {
        let mut asm = SpanAssembler::new(SpanConfig::default());
        let hb = ev(
            json!({"aep":"0.1","id":"h","type":"agent.heartbeat","time":"2026-07-03T10:00:00Z","source":"s","agent":"a"}),
        );
        assert!(asm.push(&hb).is_empty());
        assert_eq!(asm.open_sessions(), 0);
        assert!(asm.flush_all().is_empty());
    }

    #[test]
    fn lone_completed_settles_with_inferred_start() {
        let mut asm = SpanAssembler::new(SpanConfig::default());
        let base = json!({"aep":"0.1","source":"s","agent":"a","session":"x"});
        let mut a = base.clone();
        a.as_object_mut().unwrap().extend(
            json!({"id":"1","type":"session.started","time":"2026-07-03T10:00:00Z","seq":0})
                .as_object()
                .unwrap()
                .clone(),
        );
        let mut b = base;
        b.as_object_mut().unwrap().extend(
            json!({"id":"2","type":"tool.completed","time":"2026-07-03T10:00:05Z","seq":1,
                "data":{"tool":{"name":"Bash"},"duration_ms":1500}})
            .as_object()
            .unwrap()
            .clone(),
        );
        assert!(asm.push(&ev(a)).is_empty());
        let spans = asm.push(&ev(b));
        assert_eq!(spans.len(), 1, "contiguous: no tool.requested can still arrive");
        let s = &spans[0];
        assert_eq!(s.end_unix_nanos - s.start_unix_nanos, 1_500_000_000);
        assert_eq!(s.attributes.get("aep.start_inferred"), Some(&json!(true)));
        assert!(!s.is_incomplete());
    }

    #[test]
    fn gap_holds_a_lone_terminal_until_the_window_passes() {
        let cfg = SpanConfig { reorder_window_nanos: 2_000_000_000, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let mk = |id: &str, ty: &str, t: &str, seq: u64| {
            ev(json!({"aep":"0.1","id":id,"type":ty,"time":t,"source":"s","agent":"a","session":"x","seq":seq,
                "data":{"tool":{"name":"Bash"}}}))
        };
        asm.push(&mk("1", "session.started", "2026-07-03T10:00:00Z", 0));
        // seq 1 is missing (a legal gap): the lone terminal waits.
        assert!(asm.push(&mk("3", "tool.completed", "2026-07-03T10:00:01Z", 2)).is_empty());
        assert!(asm.flush_idle(parse("2026-07-03T10:00:02Z")).is_empty());
        let spans = asm.flush_idle(parse("2026-07-03T10:00:03Z"));
        assert_eq!(spans.len(), 1, "the window passed");
    }

    #[test]
    fn session_end_after_a_gap_stands_once_the_window_passes() {
        let cfg = SpanConfig { reorder_window_nanos: 2_000_000_000, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let mk = |id: &str, ty: &str, t: &str, seq: u64| {
            ev(json!({"aep":"0.1","id":id,"type":ty,"time":t,"source":"s","agent":"a","session":"x","seq":seq}))
        };
        asm.push(&mk("1", "session.started", "2026-07-03T10:00:00Z", 0));
        assert!(asm.push(&mk("3", "session.ended", "2026-07-03T10:00:05Z", 2)).is_empty(), "seq 1 may still come");
        assert!(asm.flush_idle(parse("2026-07-03T10:00:06Z")).is_empty());
        let spans = asm.flush_idle(parse("2026-07-03T10:00:07Z"));
        assert_eq!(spans.len(), 1);
        assert!(!spans[0].is_incomplete(), "the session did end");
    }

    #[test]
    fn span_events_are_capped_and_counted() {
        let cfg = SpanConfig { max_events_per_span: 3, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let mk = |id: String, ty: &str, seq: u64| {
            ev(json!({"aep":"0.1","id":id,"type":ty,"time":"2026-07-03T10:00:00Z","source":"s","agent":"a",
                "session":"x","run":"r","seq":seq,"data":{"percent":seq}}))
        };
        asm.push(&mk("s".into(), "run.started", 0));
        for i in 1..=10 {
            asm.push(&mk(format!("p{i}"), "progress.status", i));
        }
        let spans = asm.push(&mk("f".into(), "run.finished", 11));
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].events.len(), 3);
        assert_eq!(spans[0].dropped_events_count, 7);
        assert_eq!(spans[0].to_otlp_json()["droppedEventsCount"], 7);
    }

    #[test]
    fn foreign_event_before_the_owner_waits_for_it() {
        let mut asm = SpanAssembler::new(SpanConfig::default());
        let owner = |id: &str, ty: &str, seq: u64, extra: serde_json::Value| {
            let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":"2026-07-03T10:00:01Z","source":"aep://h/agent/a/session/x",
                "agent":"a","session":"x","seq":seq});
            v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            ev(v)
        };
        let routed =
            ev(json!({"aep":"0.1","id":"r","type":"attention.routed","subject":"q","time":"2026-07-03T10:00:02Z",
            "source":"aep://router","agent":"router","session":"x","data":{"to":"slack"}}));
        assert!(asm.push(&routed).is_empty());
        assert_eq!(asm.open_sessions(), 0, "held, not a session of its own");
        asm.push(&owner("s", "session.started", 0, json!({})));
        asm.push(&owner("q", "attention.requested", 1, json!({"data":{"kind":"input","prompt":"p"}})));
        let spans = asm.push(&owner("t", "attention.resolved", 2, json!({"subject":"q","data":{"resolution":"auto"}})));
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].attributes.get("aep.attention.routed_to"), Some(&json!(["slack"])));
        let rest = asm.flush_all();
        assert_eq!(rest.len(), 1, "one session only");
        // Unclaimed foreign Events are never dropped: flush_all gives them a session.
        let mut asm = SpanAssembler::new(SpanConfig::default());
        asm.push(&routed);
        let spans = asm.flush_all();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["attention other", "session router"]);
        assert!(spans.iter().all(Span::is_incomplete));
    }

    fn parse(t: &str) -> u64 {
        crate::spans::parse_rfc3339_nanos(t).unwrap()
    }

    const SEC: u64 = 1_000_000_000;

    /// A Qwen Code session in headless mode (no SessionEnd), second `s` of the day.
    fn headless(id: &str, ty: &str, s: u64, seq: u64, run: Option<&str>) -> Event {
        let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":format!("2026-07-03T10:{:02}:{:02}Z", s / 60, s % 60),
            "source":"aep://h/agent/qwen-code/session/q","agent":"qwen-code","session":"q","seq":seq});
        if let Some(r) = run {
            v["run"] = r.into();
        }
        ev(v)
    }

    /// AEP-0002 §4.1: a session may never end. One whose last run ended and that idles for
    /// `root_idle_nanos` has its root exported then, once, not after `idle_timeout_nanos`
    /// (30 min) or at shutdown as incomplete; a later run is a child of that same root in
    /// the same trace, and what came after the root goes out at the close on one extension.
    #[test]
    fn an_idle_session_exports_its_root_and_a_later_run_stays_under_it() {
        let cfg = SpanConfig { root_idle_nanos: 60 * SEC, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let t0 = parse("2026-07-03T10:00:00Z");
        asm.push(&headless("a", "session.started", 0, 0, None));
        asm.push(&headless("b", "run.started", 1, 1, Some("r1")));
        let run1 = asm.push(&headless("c", "run.finished", 5, 2, Some("r1")));
        assert_eq!(run1.len(), 1);
        assert!(asm.flush_idle(t0 + 5 * SEC + 59 * SEC).is_empty(), "not idle long enough");
        let early = asm.flush_idle(t0 + 65 * SEC);
        assert_eq!(early.len(), 1, "{early:?}");
        let root = &early[0];
        assert_eq!((root.name.as_str(), root.parent_span_id), ("session qwen-code", None));
        assert_eq!((root.start_unix_nanos, root.end_unix_nanos), (t0, t0 + 5 * SEC));
        assert_eq!(root.attributes.get("aep.session.idle"), Some(&json!(true)));
        assert!(!root.is_incomplete());
        assert_eq!(run1[0].parent_span_id, Some(root.span_id));
        assert!(asm.flush_idle(t0 + 600 * SEC).is_empty(), "the root goes out once");
        assert_eq!(asm.open_sessions(), 1, "the session is still open");
        // The session goes on: the new run is in the same trace, under the same root.
        asm.push(&headless("d", "run.started", 700, 3, Some("r2")));
        let run2 = asm.push(&headless("e", "run.finished", 710, 4, Some("r2")));
        assert_eq!(run2.len(), 1);
        assert_eq!((run2[0].trace_id, run2[0].parent_span_id), (root.trace_id, Some(root.span_id)));
        // Its end: one extension of the root, never the root again.
        let end = asm.push(&headless("f", "session.ended", 720, 5, None));
        assert_eq!(end.len(), 1, "{end:?}");
        let ext = &end[0];
        assert_ne!(ext.span_id, root.span_id);
        assert_eq!((ext.trace_id, ext.parent_span_id), (root.trace_id, Some(root.span_id)));
        assert_eq!((ext.start_unix_nanos, ext.end_unix_nanos), (t0 + 700 * SEC, t0 + 720 * SEC));
        assert_eq!(ext.attributes.get("aep.root.extension"), Some(&json!(true)));
        assert_eq!(ext.status, crate::spans::StatusCode::Ok, "the session did end");
        assert_eq!(ext.attributes.get("aep.end_event_id"), Some(&json!("f")));
        assert!(asm.flush_all().is_empty());
    }

    #[test]
    fn an_idle_root_with_nothing_after_it_is_not_sent_again() {
        let cfg = SpanConfig { root_idle_nanos: 60 * SEC, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let t0 = parse("2026-07-03T10:00:00Z");
        asm.push(&headless("a", "session.started", 0, 0, None));
        // No run done yet: a session waiting for its first prompt keeps its root.
        assert!(asm.flush_idle(t0 + 300 * SEC).is_empty());
        asm.push(&headless("b", "run.started", 400, 1, Some("r1")));
        // A run open: no early root however long it takes.
        assert!(asm.flush_idle(t0 + 1000 * SEC).is_empty());
        assert_eq!(asm.push(&headless("c", "run.finished", 1010, 2, Some("r1"))).len(), 1);
        assert_eq!(asm.flush_idle(t0 + 1070 * SEC).len(), 1);
        // Late vendor telemetry annotates nothing, and the close (shutdown) sends nothing.
        asm.push(&headless("d", "x.qwen-code.otel.api_response", 1075, 3, None));
        assert!(asm.flush_all().is_empty());
    }

    /// A session known only from the agent's own telemetry (no hooks: Codex pointed at the
    /// bridge's OTLP port alone) has no runs to wait for; its log records point at its root,
    /// so the root goes out once the session idles `root_idle_nanos`, not after the 30 min
    /// `idle_timeout_nanos`. Later records annotate nothing and send nothing more.
    #[test]
    fn a_telemetry_only_session_exports_its_root_after_the_root_delay() {
        let cfg = SpanConfig { root_idle_nanos: 60 * SEC, ..SpanConfig::default() };
        let mut asm = SpanAssembler::new(cfg);
        let t0 = parse("2026-07-03T10:00:00Z");
        asm.push(&headless("a", "x.codex.otel.conversation_starts", 0, 0, None));
        asm.push(&headless("b", "x.codex.otel.api_request", 2, 1, None));
        asm.push(&headless("c", "x.codex.otel.tool_result", 4, 2, None));
        assert!(asm.flush_idle(t0 + 63 * SEC).is_empty(), "not idle long enough");
        let early = asm.flush_idle(t0 + 64 * SEC);
        assert_eq!(early.len(), 1, "{early:?}");
        assert_eq!((early[0].parent_span_id, early[0].start_unix_nanos), (None, t0));
        assert_eq!(early[0].attributes.get("aep.session.idle"), Some(&json!(true)));
        asm.push(&headless("d", "x.codex.otel.api_request", 100, 3, None));
        assert!(asm.flush_idle(t0 + 1000 * SEC).is_empty());
        assert!(asm.flush_all().is_empty());
        // Primary mode's start alone is still a session waiting for its first prompt.
        let mut asm = SpanAssembler::new(SpanConfig { root_idle_nanos: 60 * SEC, ..SpanConfig::default() });
        asm.push(&headless("a", "session.started", 0, 0, None));
        assert!(asm.flush_idle(t0 + 300 * SEC).is_empty());
    }
}
