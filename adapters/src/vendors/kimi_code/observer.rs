//! The Kimi Code `kimi web` observer (the Kimi Code design record's "kimi web channel",
//! AEP-0002 Annex A.6, the pin's `ws_modes`), as the daemon's observer runtime drives it:
//! the kap-server's WebSocket event stream (`/api/v1/ws`), each envelope (`{type, seq,
//! session_id, timestamp, payload, epoch, volatile?}`) mapped by the mode policy
//! ([`super::web::map_ws`]) under the bridge's agent identity (default `kimi-code`).
//!
//! Auth: the server's bearer token (`token`, or `token_file` =
//! `<KIMI_CODE_HOME>/server.token`, read at every connect until it exists) rides the
//! upgrade as `Authorization: Bearer` and as the `kimi-code.bearer.<token>` subprotocol,
//! and every REST call as the header.
//!
//! Sessions: the kap-server streams per subscribed session only, so the observer reads the
//! server's session list (`GET /api/v1/sessions`) at connect and every `poll_ms`, and
//! subscribes what it has not; a subscribed connection also hears `event.session.created`
//! and subscribes the new session at once. The sessions of the first listing are observed
//! from the moment of attaching (their history is not re-emitted); a session first seen
//! later is subscribed from its start (cursor `seq` 0: the server replays its journal, at
//! most its 1000-event buffer), so nothing between its creation and the next poll is lost.
//!
//! Resume: after a connection ends the runtime reconnects (pinging every third of
//! `idle_timeout_ms`, silent for `idle_timeout_ms` counts as ended) and the observer
//! re-subscribes every session with its last `{seq, epoch}`: the server replays what
//! followed. Durable frames are numbered per session, so a replayed one (`seq` at or below
//! the session's last) is dropped; a new `epoch` restarts the numbering; the server's
//! `resync_required` (buffer overflow, a new journal) is logged with the size of the gap
//! and the cursor taken as is. Volatile frames (deltas, status pulses) carry no number of
//! their own and never emit. Memory is bounded: at most 4096 sessions' cursors and 4096
//! open tool calls and approvals, the least recent dropped.
//!
//! Shutdown: kimi web 0.28 closes its sockets only once its HTTP server has closed, which
//! waits for them, so a SIGTERM'd server would hang on this observer's stream; when the
//! session poll gets no answer at all the stream is dropped and reconnected (a resume loses
//! nothing).
//!
//! A frame over `max_frame_bytes` ends the connection (WebSocket framing cannot skip one in
//! place). A live one is then either volatile (never replayed: the resume goes on) or
//! durable, and comes back in the resume's replay; one arriving while a subscription's
//! replay is outstanding would come back forever, so those sessions are subscribed without
//! a cursor next time (live from then on, the gap logged).
//!
//! Primary mode (stream-only deployments): the vendor's turns are the runs; `tool.result`
//! names no tool, so the observer pairs it with the `tool.call.started` of its call id
//! (`tool.completed`, or `tool.failed` when `isError`, or `tool.denied` `by: "runtime"` when
//! the call's approval was rejected: Kimi 0.28 still starts the call and answers "was not
//! run because the user rejected the approval request"), an unpairable one degrades to
//! channel visibility; a subagent's frames (payload `agentId` other than `main`: its turns
//! are numbered on their own) ride channel visibility too, but for its asks (run-less).
//! Every ask is raised and tracked; its outcome carries the request's id as `subject`
//! (AEP-0002 §7.1): a decision becomes `attention.answered` (`via: "oob"`) then
//! `attention.resolved` (`answered`), a decision-less or `cancelled` resolution
//! `attention.resolved` (`dismissed`); an outcome of an ask this observer never raised
//! degrades to channel visibility. After each subscription's replay the session's asks are
//! reconciled with the server's pending lists. With `control = true` (the design record's
//! `AEP_KIMI_WEB_CONTROL`, primary only) an approval is answerable: its card carries the
//! kap-server's own decisions (`approved` / `rejected`) and `respond_via: ["control"]`, and
//! the runtime delivers a `control.attention.respond` over [`super::route::ROUTE`]; the
//! outcome is the server's own `event.approval.resolved` broadcast. Questions stay
//! read-only (the design record defers their actuation).

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::route::ROUTE;
use super::web::{PENDING_LISTS, PendingList, WsMode, map_ws};
use crate::common;
use crate::observer::{
    Answer, Auth, Ctx, Down, Gate, Get, Input, Level, LinkKind, Observer, ObserverSpec, Open, Raise, Secret, Settle,
    Step, Transport, ask_id, check_table, table,
};
use crate::{EventDraft, MapContext};

/// Sessions whose cursor is kept (the least recently seen is dropped beyond).
const MAX_SESSIONS: usize = 4096;
/// Open tool calls remembered for the `tool.result` pairing (the oldest dropped beyond).
const MAX_CALLS: usize = 4096;
/// Sessions read from one listing (the newest; the kap-server takes at most 100).
const LIST_PAGE: usize = 100;
/// Session ids in one `subscribe` frame.
const SUBSCRIBE_BATCH: usize = 256;
/// The stream's link.
const LINK: &str = "ws";
/// The session list's tag; a pending list's are above it.
const LIST: u64 = 1;

/// Kimi Code's observer (`vendor = "kimi-code"`, formerly `kind = "kimi-ws"`).
pub static OBSERVER: ObserverSpec = ObserverSpec {
    id: super::VENDOR,
    kinds: &["kimi-ws"],
    transport: Transport::Client,
    gate: Gate::Primary,
    moded: true,
    hook_companion: false,
    input: "kimi-ws",
    fields: FIELDS,
    check,
    build: |s| {
        let cfg: Config = table(FIELDS, s.table).map_err(|e| format!("{e:?}"))?;
        Ok(Box::new(WebObserver::new(s.primary, s.gated, &cfg)))
    },
};

/// The keys of a `kimi web` section.
pub const FIELDS: &[&str] = &["token", "token_file", "poll_ms"];

/// `[bridges.<name>]`'s own keys for a `kimi web` server.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Config {
    /// The server's bearer token; `""` = read `token_file`.
    pub token: String,
    /// The file holding the bearer token (`<KIMI_CODE_HOME>/server.token`), read at every
    /// connect until it exists; `""` = none (a server run with `--dangerous-bypass-auth`).
    pub token_file: String,
    /// How often the session list is re-read for new sessions, milliseconds (default 2 s).
    pub poll_ms: Option<u64>,
}

/// The default session poll, milliseconds.
pub const POLL_MS: u64 = 2_000;

/// Checks a `kimi web` section's own keys.
pub fn check(t: &Map<String, Value>) -> Vec<(String, String)> {
    check_table(FIELDS, t, |c: &Config| match c.poll_ms {
        Some(p) if p < 100 => vec![("poll_ms".into(), "must be at least 100".into())],
        _ => Vec::new(),
    })
}

/// A map forgetting its oldest entries beyond [`MAX_CALLS`].
struct Recent<V> {
    map: HashMap<String, V>,
    order: VecDeque<String>,
}

impl<V> Default for Recent<V> {
    fn default() -> Self {
        Self { map: HashMap::new(), order: VecDeque::new() }
    }
}

impl<V> Recent<V> {
    fn insert(&mut self, key: String, value: V) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
        }
        while self.map.len() > MAX_CALLS {
            let Some(old) = self.order.pop_front() else { break };
            self.map.remove(&old);
        }
    }

    fn take(&mut self, key: &str) -> Option<V> {
        let v = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(v)
    }
}

/// A session's stream position: the last durable `seq` seen and its journal's `epoch`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cursor {
    seq: u64,
    epoch: Option<String>,
    tick: u64,
}

/// What the observer counted (logged when a connection ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    frames: u64,
    replayed: u64,
    volatile: u64,
    unparsable: u64,
    oversized: u64,
    /// Durable frames the server could not replay (its `resync_required`) or skipped.
    missed: u64,
}

/// A session's pending lists being read: the next list, the entries of those read so far.
struct Reconciling {
    session: String,
    next: usize,
    live: Vec<(&'static PendingList, Value)>,
}

/// The observer of one `kimi web` server.
pub struct WebObserver {
    mode: WsMode,
    gated: bool,
    auth: Auth,
    poll: u64,
    /// The stream is connected; the next session poll is due at `.1`.
    up: Option<u64>,
    cursors: HashMap<String, Cursor>,
    tick: u64,
    /// The sessions of the first listing (observed from the moment of attaching); `None`
    /// until a listing succeeded.
    initial: Option<HashSet<String>>,
    /// Sessions accepted on the current connection.
    subscribed: HashSet<String>,
    /// Sessions in a `subscribe` not yet acknowledged.
    offered: HashSet<String>,
    /// Open tool calls: `session \0 call` -> (tool name, run).
    calls: Recent<(String, Option<String>)>,
    /// Raised approvals: `session \0 approval` -> their tool call.
    approval_calls: Recent<String>,
    /// Calls whose approval was rejected (`session \0 call`): their error result is the denial.
    denied: Recent<()>,
    counts: Counts,
    next_id: u64,
    /// Sessions whose replay brought an oversized frame: subscribed without a cursor next.
    fresh_next: HashSet<String>,
    /// Pending-list reads in flight, by tag.
    reading: HashMap<u64, Reconciling>,
    next_tag: u64,
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

fn strings(v: Option<&Value>) -> impl Iterator<Item = &str> {
    v.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
}

impl WebObserver {
    /// The observer of a `kimi web` server.
    pub fn new(primary: bool, gated: bool, cfg: &Config) -> Self {
        let secret = Secret {
            value: cfg.token.trim().to_owned(),
            file: (!cfg.token_file.is_empty()).then(|| cfg.token_file.clone()),
            rest: &[("authorization", "Bearer ")],
            // Both forms the kap-server takes: the bearer header, and the browser's subprotocol.
            link: &[("authorization", "Bearer "), ("sec-websocket-protocol", "kimi-code.bearer.")],
        };
        Self {
            mode: if primary { WsMode::Primary } else { WsMode::Companion },
            gated,
            auth: Auth { headers: Vec::new(), secret: Some(secret) },
            poll: cfg.poll_ms.unwrap_or(POLL_MS).max(100),
            up: None,
            cursors: HashMap::new(),
            tick: 0,
            initial: None,
            subscribed: HashSet::new(),
            offered: HashSet::new(),
            calls: Recent::default(),
            approval_calls: Recent::default(),
            denied: Recent::default(),
            counts: Counts::default(),
            next_id: 0,
            fresh_next: HashSet::new(),
            reading: HashMap::new(),
            next_tag: LIST + 1,
        }
    }

    /// The `subscribe` frames for `want` (at most a batch each), each session with its
    /// resume cursor (none for one whose replay brought an oversized frame).
    fn subscribe(&mut self, mut want: Vec<String>, out: &mut Vec<Step>) {
        loop {
            let mut ids = Vec::new();
            let mut cursors = Map::new();
            while ids.len() < SUBSCRIBE_BATCH {
                let Some(sid) = want.pop() else { break };
                if self.subscribed.contains(&sid) || self.offered.contains(&sid) || ids.contains(&sid) {
                    continue;
                }
                if self.fresh_next.remove(&sid) {
                    out.push(Step::Log(
                        Level::Warn,
                        format!("An oversized frame came back in the replay of session {sid}: following it live from here (a gap)."),
                    ));
                } else if let Some(c) = self.cursor_of(&sid) {
                    cursors.insert(sid.clone(), c);
                }
                ids.push(sid);
            }
            if ids.is_empty() {
                return;
            }
            self.offered.extend(ids.iter().cloned());
            self.next_id += 1;
            let frame = json!({"type": "subscribe", "id": format!("aep-sub-{}", self.next_id),
                "payload": {"session_ids": ids, "cursors": cursors}});
            out.push(Step::Send(LINK.into(), frame.to_string()));
        }
    }

    /// Where `sid`'s stream resumes: its cursor; none for a session of the first listing
    /// (observed from now); its start for a session first seen later.
    fn cursor_of(&self, sid: &str) -> Option<Value> {
        if let Some(c) = self.cursors.get(sid) {
            let mut v = json!({"seq": c.seq});
            if let Some(e) = &c.epoch {
                v["epoch"] = json!(e);
            }
            return Some(v);
        }
        if self.initial.as_ref().is_some_and(|i| i.contains(sid)) { None } else { Some(json!({"seq": 0})) }
    }

    /// The session list's answer: the sessions not subscribed are. No answer at all means
    /// the server is shutting down: the stream is let go.
    fn listed(&mut self, answer: Answer<'_>, out: &mut Vec<Step>) {
        let items = match answer {
            Answer::Body(200, body) => match serde_json::from_slice::<Value>(body) {
                Ok(v) if v.get("code").and_then(Value::as_i64) == Some(0) => {
                    v.pointer("/data/items").and_then(Value::as_array).cloned().unwrap_or_default()
                }
                _ => return out.push(Step::Log(Level::Debug, "The session list is not a kap-server envelope.".into())),
            },
            Answer::Body(status, _) => {
                return out.push(Step::Log(Level::Debug, format!("The session list was refused (HTTP {status}).")));
            }
            Answer::Over(_) => return out.push(Step::Log(Level::Debug, "The session list is too large.".into())),
            Answer::Failed(e) => {
                // kimi web 0.28 closes its sockets only once its HTTP server has closed, which
                // waits for them: a SIGTERM'd server would hang on this connection. Its REST
                // side gone, the stream is let go (the resume loses nothing).
                out.push(Step::Log(
                    Level::Warn,
                    format!("The server's REST side is gone ({e}); letting the stream go."),
                ));
                return out.push(Step::Reset(LINK.into()));
            }
        };
        let ids: Vec<String> = items.iter().filter_map(|i| s(i, "id")).map(str::to_owned).collect();
        if self.initial.is_none() {
            self.initial = Some(ids.iter().take(MAX_SESSIONS).cloned().collect());
        }
        let want = ids.into_iter().filter(|id| !self.subscribed.contains(id) && !self.offered.contains(id)).collect();
        self.subscribe(want, out);
    }

    /// Handles one frame off the socket.
    fn frame(&mut self, text: &str, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        self.counts.frames += 1;
        let v: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.counts.unparsable += 1;
                return;
            }
        };
        let Some(ty) = s(&v, "type").map(str::to_owned) else {
            self.counts.unparsable += 1;
            return;
        };
        match ty.as_str() {
            "server_hello" => return,
            "ack" => return self.ack(&v, out),
            "resync_required" => {
                let p = v.get("payload").unwrap_or(&Value::Null);
                if let Some(sid) = s(p, "session_id") {
                    let seq = p.get("current_seq").and_then(Value::as_u64).unwrap_or(0);
                    self.resynced(sid, seq, s(p, "epoch"), s(p, "reason").unwrap_or("unknown"), out);
                }
                return;
            }
            _ => {}
        }
        // Volatile frames never emit (the vendor's do-not-persist marker) and carry no
        // number of their own (`seq` is the last durable one's).
        if v.get("volatile").and_then(Value::as_bool) == Some(true) {
            self.counts.volatile += 1;
            return;
        }
        let Some(session) = s(&v, "session_id").filter(|x| !x.is_empty()).map(str::to_owned) else {
            self.counts.unparsable += 1;
            return;
        };
        if let Some(seq) = v.get("seq").and_then(Value::as_u64)
            && !self.fresh(&session, seq, s(&v, "epoch"))
        {
            self.counts.replayed += 1;
            return;
        }
        // A session this connection hears of but does not follow (the server fans
        // `event.session.*` out to every subscriber): follow it from here.
        if !self.subscribed.contains(&session) && !self.offered.contains(&session) {
            self.subscribe(vec![session.clone()], out);
        }
        self.map(&ty, &v, &session, cx, out);
    }

    /// `false` when frame `seq` of `session` was seen already (a replay).
    fn fresh(&mut self, session: &str, seq: u64, epoch: Option<&str>) -> bool {
        self.tick += 1;
        let tick = self.tick;
        if let Some(c) = self.cursors.get_mut(session) {
            c.tick = tick;
            if let (Some(known), Some(e)) = (&c.epoch, epoch)
                && known != e
            {
                // A new journal: its numbering restarted.
                c.epoch = Some(e.to_owned());
                c.seq = seq;
                return true;
            }
            if seq <= c.seq {
                return false;
            }
            c.seq = seq;
            if c.epoch.is_none() {
                c.epoch = epoch.map(str::to_owned);
            }
            return true;
        }
        self.insert_cursor(session, Cursor { seq, epoch: epoch.map(str::to_owned), tick });
        true
    }

    fn insert_cursor(&mut self, session: &str, c: Cursor) {
        if !self.cursors.contains_key(session)
            && self.cursors.len() >= MAX_SESSIONS
            && let Some(old) = self.cursors.iter().min_by_key(|(_, c)| c.tick).map(|(k, _)| k.clone())
        {
            self.cursors.remove(&old);
        }
        self.cursors.insert(session.to_owned(), c);
    }

    /// A `subscribe` acknowledgement: sessions accepted, cursors taken where this observer
    /// has none (or the server could not replay); in primary mode each accepted session's
    /// asks are reconciled with the server's pending lists.
    fn ack(&mut self, v: &Value, out: &mut Vec<Step>) {
        let p = v.get("payload").unwrap_or(&Value::Null);
        let accepted: Vec<String> =
            strings(p.get("accepted").or_else(|| p.get("accepted_subscriptions"))).map(str::to_owned).collect();
        for sid in strings(p.get("not_found")) {
            self.offered.remove(sid);
        }
        let resync: HashSet<&str> = strings(p.get("resync_required")).collect();
        for sid in &accepted {
            self.offered.remove(sid);
            if self.subscribed.len() < MAX_SESSIONS {
                self.subscribed.insert(sid.clone());
            }
        }
        if let Some(cursors) = p.get("cursors").and_then(Value::as_object) {
            for (sid, c) in cursors {
                let seq = c.get("seq").and_then(Value::as_u64).unwrap_or(0);
                let epoch = s(c, "epoch").filter(|e| !e.is_empty());
                if resync.contains(sid.as_str()) {
                    self.resynced(sid, seq, epoch, "resync_required", out);
                    continue;
                }
                self.tick += 1;
                let tick = self.tick;
                match self.cursors.get_mut(sid) {
                    // The replay came before this ack: the cursor is where it ended.
                    Some(known) if known.epoch.is_none() || known.epoch.as_deref() == epoch => {
                        known.seq = known.seq.max(seq);
                        known.epoch = epoch.map(str::to_owned);
                    }
                    _ => self.insert_cursor(sid, Cursor { seq, epoch: epoch.map(str::to_owned), tick }),
                }
            }
        }
        if self.mode == WsMode::Primary {
            // The last accepted first, as the observer always took them.
            for sid in accepted.into_iter().rev() {
                self.read_pending(Reconciling { session: sid, next: 0, live: Vec::new() }, out);
            }
        }
    }

    /// The server could not replay `sid` from its cursor: the gap is logged, its cursor taken.
    fn resynced(&mut self, sid: &str, seq: u64, epoch: Option<&str>, reason: &str, out: &mut Vec<Step>) {
        if self.cursors.get(sid).is_some_and(|c| c.seq == seq && c.epoch.as_deref() == epoch) {
            // Told already (the `resync_required` frame precedes its ack).
            return;
        }
        let had = self.cursors.get(sid).map(|c| c.seq);
        if let Some(h) = had {
            self.counts.missed += seq.saturating_sub(h);
        }
        out.push(Step::Log(
            Level::Warn,
            format!(
                "The Kimi web server could not replay session {sid} ({reason}, from {had:?} to {seq}); frames in between are missed."
            ),
        ));
        self.tick += 1;
        let tick = self.tick;
        self.insert_cursor(sid, Cursor { seq, epoch: epoch.map(str::to_owned), tick });
    }

    /// Reads the next of a session's pending lists.
    fn read_pending(&mut self, r: Reconciling, out: &mut Vec<Step>) {
        let Some(list) = PENDING_LISTS.get(r.next) else { return };
        let path = list.path(&aep_schemas::ids::percent_encode(&r.session));
        let tag = self.next_tag;
        self.next_tag += 1;
        self.reading.insert(tag, r);
        out.push(Step::Get(Get::new(tag, path)));
    }

    /// A pending list's answer: the next list read, or the session's asks reconciled with
    /// the lists: one pending but never seen (raised before the bridge attached, or lost in
    /// a gap) is raised; one tracked but no longer pending (settled unseen, or lost with a
    /// server restart) is closed (`dismissed`, or `answered` when this bridge delivered the
    /// answer). A list that cannot be read leaves the asks as they are: nothing is closed
    /// on a guess.
    fn pending(&mut self, tag: u64, answer: Answer<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let Some(mut r) = self.reading.remove(&tag) else { return };
        let list = &PENDING_LISTS[r.next];
        let Some(items) = (match answer {
            Answer::Body(200, body) => PendingList::items(body),
            _ => None,
        }) else {
            let sid = &r.session;
            return out
                .push(Step::Log(Level::Debug, format!("No pending list to reconcile session {sid}'s asks with.")));
        };
        r.live.extend(items.into_iter().map(|i| (list, i)));
        r.next += 1;
        if r.next < PENDING_LISTS.len() {
            return self.read_pending(r, out);
        }
        let sid = r.session;
        let ids: HashSet<String> = r.live.iter().filter_map(|(l, i)| l.id_of(i)).map(str::to_owned).collect();
        for (vendor_id, _) in cx.asks.open(Some(&sid)) {
            if !ids.contains(&vendor_id) {
                out.push(Step::Settle(Settle::new(vendor_id, None)));
            }
        }
        for (list, item) in r.live {
            if list.id_of(&item).is_none_or(|id| cx.asks.knows(id)) {
                continue;
            }
            let frame = list.frame_of(&sid, item);
            self.map(list.frame, &frame, &sid, cx, out);
        }
    }

    /// Maps one durable envelope in the configured mode and publishes it.
    fn map(&mut self, ty: &str, v: &Value, session: &str, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let drafts = self.mapped(ty, v, session, cx, out);
        if !drafts.is_empty() {
            out.push(Step::Publish(drafts, None));
        }
    }

    fn mapped(&mut self, ty: &str, v: &Value, session: &str, cx: &Ctx<'_>, out: &mut Vec<Step>) -> Vec<EventDraft> {
        let map = cx.map;
        if self.mode == WsMode::Companion {
            return map_ws(WsMode::Companion, v, map);
        }
        let p = v.get("payload").unwrap_or(&Value::Null);
        let interaction = ty.starts_with("event.approval.") || ty.starts_with("event.question.");
        if !interaction && s(p, "agentId").is_some_and(|a| a != "main") {
            // A subagent's turns are numbered on their own: they are not the session's runs.
            return map_ws(WsMode::Companion, v, map);
        }
        match ty {
            "tool.call.started" => {
                let drafts = map_ws(WsMode::Primary, v, map);
                if let (Some(call), Some(d)) = (s(p, "toolCallId"), drafts.first()) {
                    let name = s(p, "name").unwrap_or("unknown").to_owned();
                    self.calls.insert(format!("{session}\u{0}{call}"), (name, d.run.clone()));
                }
                drafts
            }
            "tool.result" => self.tool_result(v, p, session, map),
            "event.approval.requested" | "event.question.requested" => {
                if let (Some(id), Some(call)) = (s(p, "approval_id"), s(p, "tool_call_id")) {
                    self.approval_calls.insert(format!("{session}\u{0}{id}"), call.to_owned());
                }
                let mut drafts = map_ws(WsMode::Primary, v, map);
                if s(p, "agentId").is_some_and(|a| a != "main") {
                    // A subagent's ask: its turn is not one of the session's runs.
                    for d in &mut drafts {
                        d.run = None;
                    }
                }
                self.raise(&mut drafts, cx, out);
                drafts
            }
            "event.approval.resolved" | "event.question.answered" | "event.question.dismissed" => {
                self.settled(ty, v, p, session, cx, out)
            }
            _ => map_ws(WsMode::Primary, v, map),
        }
    }

    /// `tool.result` paired with its call's `tool.call.started` (the design record: the
    /// receiver re-attaches the name); unpairable, it degrades to channel visibility.
    fn tool_result(&mut self, v: &Value, p: &Value, session: &str, cx: &MapContext) -> Vec<EventDraft> {
        let Some(call) = s(p, "toolCallId") else { return map_ws(WsMode::Companion, v, cx) };
        let key = format!("{session}\u{0}{call}");
        let Some((name, run)) = self.calls.take(&key) else { return map_ws(WsMode::Companion, v, cx) };
        let failed = p.get("isError").and_then(Value::as_bool) == Some(true);
        let mut d = if failed && self.denied.take(&key).is_some() {
            // The approval was rejected: the call was not run (the runtime enforces the
            // human's answer, as the hook mapping's PermissionResult "rejected" says).
            let mut d = common::Builder::new("tool.denied", cx).tool(&name, Some(call)).meta("by", "runtime").build();
            d.cause_key = Some(common::tool_key(call));
            d
        } else if failed {
            common::tool_failed(&name, Some(call), "tool_error", s(p, "output"), None, cx)
        } else {
            common::tool_completed(&name, Some(call), p.get("output"), None, cx)
        };
        d.session = Some(session.to_owned());
        d.run = run;
        vec![d]
    }

    /// Raises the asks among `drafts` before they are published: ids minted, and (gated,
    /// approvals) the reply route's vocabulary offered. An ask already raised (a replay past
    /// the dedupe, e.g. after a new epoch) is not raised twice.
    fn raise(&self, drafts: &mut Vec<EventDraft>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        drafts.retain(|d| d.r#type != "attention.requested" || !ask_id(d).is_some_and(|id| cx.asks.knows(id)));
        for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
            let Some(vendor_id) = ask_id(d).map(str::to_owned) else { continue };
            if d.session.is_none() {
                continue;
            }
            let answerable = self.gated && d.data.get("kind").and_then(Value::as_str) == Some("permission");
            if answerable {
                ROUTE.decorate(d);
            }
            d.id = Some((cx.mint)());
            out.push(Step::Raise(Raise { vendor_id, draft: d.clone(), answerable }));
        }
    }

    /// An ask's outcome, about the request this observer raised (AEP-0002 §7.1: `subject` =
    /// the request's id): a command's answer (`via: "control"`), else the vendor's decision
    /// (`via: "oob"`) then `attention.resolved`; decision-less or `cancelled`: dismissed.
    fn settled(
        &mut self,
        ty: &str,
        v: &Value,
        p: &Value,
        session: &str,
        cx: &Ctx<'_>,
        out: &mut Vec<Step>,
    ) -> Vec<EventDraft> {
        let key = if ty == "event.approval.resolved" { "approval_id" } else { "question_id" };
        if ty == "event.approval.resolved"
            && let Some(call) = s(p, key).and_then(|id| self.approval_calls.take(&format!("{session}\u{0}{id}")))
            && s(p, "decision") == Some("rejected")
        {
            self.denied.insert(format!("{session}\u{0}{call}"), ());
        }
        let Some(vendor_id) = (ROUTE.settled)(v) else { return map_ws(WsMode::Companion, v, cx.map) };
        let cancelled = s(p, "decision") == Some("cancelled");
        let answered = map_ws(WsMode::Primary, v, cx.map)
            .into_iter()
            .find(|d| d.r#type == "attention.answered")
            .filter(|_| !cancelled);
        // A decision settles it answered (the vendor's own, unless a command's answer was
        // being delivered); none, or a cancel, leaves it dismissed unless one was.
        let resolution = answered.is_some().then_some("answered");
        // Not an ask this observer raised: channel visibility only.
        let otherwise = map_ws(WsMode::Companion, v, cx.map);
        out.push(Step::Settle(Settle { vendor_id: vendor_id.to_owned(), resolution, answered, otherwise }));
        Vec::new()
    }
}

impl Observer for WebObserver {
    fn auth(&self) -> Auth {
        self.auth.clone()
    }

    fn feed(&mut self, input: Input<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        match input {
            Input::Start => out.push(Step::Open(Open {
                link: LINK.into(),
                path: "/api/v1/ws".into(),
                kind: LinkKind::WebSocket { ping: true },
                first: None,
                gone_on: None,
            })),
            Input::Up(_) => {
                self.subscribed.clear();
                self.offered.clear();
                self.reading.clear();
                // Resume every session this observer follows from its cursor, then list.
                let want = self.cursors.keys().cloned().collect();
                self.subscribe(want, out);
                self.up = Some(cx.now + self.poll);
                out.push(Step::Get(Get::new(LIST, format!("/api/v1/sessions?page_size={LIST_PAGE}"))));
            }
            Input::Tick => {
                if self.up.is_some() {
                    self.up = Some(cx.now + self.poll);
                    out.push(Step::Get(Get::new(LIST, format!("/api/v1/sessions?page_size={LIST_PAGE}"))));
                }
            }
            Input::Answer(LIST, answer) => self.listed(answer, out),
            Input::Answer(tag, answer) => self.pending(tag, answer, cx, out),
            Input::Frame(_, text) => self.frame(text, cx, out),
            Input::Down(_, why) => {
                self.up = None;
                if let Down::Oversized(e) = why {
                    self.counts.oversized += 1;
                    // Within a replay (its ack outstanding) the frame would come back on every
                    // resume: those sessions skip ahead next time.
                    self.fresh_next.extend(self.offered.iter().cloned());
                    out.push(Step::Log(
                        Level::Warn,
                        format!(
                            "An oversized Kimi web frame ended the connection ({e}); replaying: {:?}.",
                            self.offered
                        ),
                    ));
                }
                let c = self.counts;
                out.push(Step::Log(
                    Level::Debug,
                    format!(
                        "Kimi web bridge counts: frames {}, replayed {}, volatile {}, unparsable {}, oversized {}, missed {}.",
                        c.frames, c.replayed, c.volatile, c.unparsable, c.oversized, c.missed
                    ),
                ));
            }
            Input::Loaded(..) => {}
        }
    }

    fn wake(&self) -> Option<u64> {
        self.up
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_rides_rest_and_the_socket_and_the_poll_is_bounded() {
        let t = |v: Value| v.as_object().cloned().unwrap();
        assert!(check(&t(json!({"token_file": "/h/server.token", "poll_ms": 500}))).is_empty());
        assert_eq!(check(&t(json!({"poll_ms": 10})))[0].0, "poll_ms");
        let keys = |v: Value| check(&t(v)).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        // Every problem at once: a foreign key does not hide a bad value.
        assert_eq!(keys(json!({"password": "pw", "poll_ms": 10})), ["password", "poll_ms"]);
        let o = WebObserver::new(true, false, &Config { token: " t0k ".into(), ..Config::default() });
        let secret = o.auth().secret.unwrap();
        assert_eq!((secret.value.as_str(), secret.file), ("t0k", None));
        assert_eq!(secret.link, [("authorization", "Bearer "), ("sec-websocket-protocol", "kimi-code.bearer.")]);
        assert_eq!(o.poll, POLL_MS);
    }
}
