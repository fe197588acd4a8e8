//! The OpenHands agent-server observer (`vendor = "openhands"`; design record
//! `bridge-openhands-design.md`, AEP-0002 Annex A.15), as the daemon's observer runtime
//! drives it: a late-joining consumer of the server's own multi-observer event fan-out,
//! never a tee.
//!
//! Discovery: `GET {url}/api/conversations/search` every `poll_ms` (paged, at most
//! [`MAX_CONVERSATIONS`] watched); each conversation gets its own link, the socket
//! `/sockets/events/{conversation_id}`. The conversation is the AEP `session`
//! (`session.started`, `client.name = "openhands-agent-server"`, on its first event); every
//! transport-shaped event is mapped by [`Conversation`] (the event table, runs synthesized
//! from `execution_status`, the vendor-id dedupe). `StreamingDeltaEvent` needs
//! `deltas = true`; `TokenEvent` never maps.
//!
//! The never-send posture: with `api_key` set the socket's first message is the auth frame
//! (`{"type": "auth", "session_api_key": ...}`), and that is the only frame ever written on
//! it, gated or not (REST reads carry the key as `X-Session-API-Key`).
//!
//! Replay and resume: the socket asks no replay (`resend_mode` unset). The server subscribes
//! a socket before it replays, and its live fan-out overtakes its own replay (a tool's
//! outcome arrives ahead of the request that caused it), so the history is read over REST
//! instead: `GET /api/conversations/{id}/events/search`, paged, in the server's log order,
//! from the resume point on (`timestamp__gte`, inclusive; the first attach reads it all),
//! once the socket's first frame (the state push every socket opens with) is in. Live
//! frames that arrive meanwhile are held and mapped after the history, in arrival order;
//! the overlap is absorbed by the vendor-id dedupe (4096 ids per conversation). The resume
//! point is the earliest vendor time of the last 32 persisted events delivered (live
//! delivery order is not strictly timestamp order). The socket's state push is mapped as
//! `state.snapshot` but not as a status transition, since the history carries the
//! transitions in order.
//!
//! A history page is read to a bound of its own (4 MiB, or one `max_frame_bytes` event and
//! its page): a page over it is asked again with half the `limit`, and an event over it
//! alone is skipped by size (reading on at the page its answer's last bytes name), so no
//! page is ever retried as is; an event over `max_frame_bytes` in a whole page is skipped.
//!
//! The durable cursor: after each batch the pipeline took, the conversation's resume point,
//! whether its session started, its run synthesis ([`Checkpoint`]), the open units' cause
//! links and the pending confirmation are stored under the conversation's id. A restarted
//! bridge (a new epoch, AEP-0001 §7 rule 2) resumes after it: no second `session.started`,
//! the run counter and the open run go on, nothing the cursor covers is mapped again (so no
//! run reaches a second terminal, AEP-0002 §2 convention 5), and the pending confirmation
//! stays answerable. Stored after the pipeline took the events, a crash in between loses
//! them (a legal gap) rather than doubling them. A cursor goes when the server reports its
//! conversation gone (close 4004, or unlisted and `GET /api/conversations/{id}` answers
//! 404: the server leaves a deleted conversation's sockets open and silent), or, for one
//! deleted while no bridge watched it, once the server's whole listing lacks it and nothing
//! wrote it for `cursor_ttl_hours` (30 days; looked over at start, then hourly). A finished
//! conversation keeps its cursor: it may run again.
//!
//! The control gate (`control = true`, honoured only when an answer can reach the bridge).
//! Off, a `waiting_for_confirmation` ask is read-only: no options, no `respond_via` (the
//! pinned fixture). On, it gains `approve` / `deny` options and `respond_via: ["control"]`
//! and is raised answerable over [`super::route::ROUTE`] (`respond_to_confirmation`). The
//! outcome has one source, the observed status flip out of `waiting_for_confirmation`.
//! The design record's other four gated writes (`control.pause`, `control.resume`,
//! `x.openhands.control.send_input`, `x.openhands.control.interrupt`) are not built.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::{Checkpoint, Conversation, auth_frame};
use crate::EventDraft;
use crate::observer::{
    Answer, Auth, Ctx, Down, Gate, Get, Input, Level, LinkKind, Links, Observer, ObserverSpec, Open, Raise, Secret,
    Settle, Setup, Step, Transport, ask_id, check_table, table,
};
use crate::translate::Options;
use aep_schemas::Capture;

/// Conversations watched at most per server.
pub const MAX_CONVERSATIONS: usize = 256;
/// Ended conversations remembered so discovery does not re-attach them.
const GONE: usize = 4096;
/// How often the cursors of unlisted conversations are looked over for expiry, ms.
const SWEEP_EVERY_MS: u64 = 3_600_000;
/// Pages of the conversation search read per poll (100 conversations a page).
const SEARCH_PAGES: usize = 10;
/// Vendor times remembered for the resume point.
const RECENT_TS: usize = 32;
/// Events a history page asks for (the server's most).
const HISTORY_PAGE: usize = 100;
/// Room for a page's own JSON around one event at `max_frame_bytes`.
const PAGE_SLACK: usize = 64 << 10;
/// Vendor ids a cursor keeps for the dedupe at its resume point.
const CURSOR_IDS: usize = 256;
/// `session.started.client.name`.
const CLIENT: &str = "openhands-agent-server";
/// The default conversation poll, milliseconds (the design record's `AEP_OPENHANDS_POLL`).
pub const POLL_MS: u64 = 15_000;
/// The default cursor expiry, hours (30 days).
pub const CURSOR_TTL_HOURS: u64 = 30 * 24;

/// OpenHands' observer (`vendor = "openhands"`, formerly `kind = "openhands"`).
pub static OBSERVER: ObserverSpec = ObserverSpec {
    id: super::VENDOR,
    kinds: &["openhands"],
    transport: Transport::Client,
    gate: Gate::Always,
    moded: false,
    hook_companion: false,
    input: "openhands",
    fields: FIELDS,
    check,
    build: |s| {
        let cfg: Config = table(FIELDS, s.table).map_err(|e| format!("{e:?}"))?;
        Ok(Box::new(ServerObserver::new(s, &cfg)))
    },
};

/// The keys of an OpenHands section.
pub const FIELDS: &[&str] = &["api_key", "poll_ms", "deltas", "cursor_ttl_hours"];

/// `[bridges.<name>]`'s own keys for an OpenHands agent server.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Config {
    /// The session API key (`X-Session-API-Key` on REST, the socket's first-message auth
    /// frame); `""` = an unsecured server.
    pub api_key: String,
    /// How often the conversation list is polled, milliseconds (default 15 s).
    pub poll_ms: Option<u64>,
    /// The token and argument delta plane (`AEP_OPENHANDS_DELTAS`), off by default.
    pub deltas: bool,
    /// How long an unlisted conversation's untouched cursor is kept, hours (0 = forever;
    /// default 30 days). The cursor of a conversation the server reports gone goes at once.
    pub cursor_ttl_hours: Option<u64>,
}

/// Checks an OpenHands section's own keys.
pub fn check(t: &Map<String, Value>) -> Vec<(String, String)> {
    check_table(FIELDS, t, |c: &Config| match c.poll_ms {
        Some(0) => vec![("poll_ms".into(), "must be at least 1".into())],
        _ => Vec::new(),
    })
}

/// A conversation id usable as a path segment: the server's ids are UUIDs.
pub fn conversation_id_ok(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The most a history page's answer may hold: enough for one event at `max_frame` and the
/// page around it, and never below the bridge's usual 4 MiB reply bound.
pub fn page_bytes(max_frame: usize) -> usize {
    (4 << 20).max(max_frame.saturating_add(PAGE_SLACK))
}

/// The `next_page_id` a page's JSON ends with (`"next_page_id": "..."}` or `null`): the
/// server's `EventPage` serializes it after `items`, so it is in the answer's last bytes.
pub fn next_page_in_tail(tail: &[u8]) -> Option<Option<String>> {
    const FIELD: &str = "\"next_page_id\"";
    let text = String::from_utf8_lossy(tail);
    let rest = &text[text.rfind(FIELD)? + FIELD.len()..];
    let value = rest.trim_start().strip_prefix(':')?.trim().strip_suffix('}')?;
    match serde_json::from_str(value).ok()? {
        Value::Null => Some(None),
        Value::String(s) => Some(Some(s)),
        _ => None,
    }
}

/// A conversation's durable cursor: whether its session started, the vendor time the
/// history replay resumes from, the mapping state, the cause links and the pending ask.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Cursor {
    started: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    conversation: Checkpoint,
    /// The open units' correlation keys and the ids of their starting events.
    #[serde(default, skip_serializing_if = "Links::is_empty")]
    links: Links,
    /// The confirmation still pending: a restart re-opens it, so the status flip that
    /// settles it resolves that request (and under the gate it stays answerable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ask: Option<SavedAsk>,
}

/// A pending confirmation, as a cursor keeps it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct SavedAsk {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    data: Map<String, Value>,
}

impl SavedAsk {
    /// What a cursor keeps of a raised request: its id, run, subject and the fields the
    /// attention book reads (kind, prompt, options).
    fn of(d: &EventDraft) -> Self {
        let mut data = Map::new();
        for k in ["kind", "prompt", "options"] {
            if let Some(v) = d.data.get(k) {
                data.insert(k.into(), v.clone());
            }
        }
        Self { id: d.id.clone().unwrap_or_default(), run: d.run.clone(), subject: d.subject.clone(), data }
    }

    fn draft(&self, session: &str) -> EventDraft {
        let mut d = EventDraft::new("attention.requested", Capture::Metadata);
        d.id = Some(self.id.clone());
        d.session = Some(session.to_owned());
        d.run.clone_from(&self.run);
        d.subject.clone_from(&self.subject);
        d.data = self.data.clone();
        d
    }
}

/// What one conversation's watch counted (logged when a connection ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    frames: u64,
    fresh: u64,
    replayed: u64,
    /// Live frames held while the history was read.
    held: u64,
    unparsable: u64,
    oversized: u64,
}

/// Where a conversation's connection is.
enum Phase {
    /// Not connected.
    Down,
    /// Connected, the state push (the socket's first frame) not yet in.
    First,
    /// The history being read, live frames held.
    History(History),
    /// Live.
    Live,
}

/// A history read in progress.
struct History {
    held: Vec<String>,
    items: Vec<Value>,
    oversized: u64,
    page: Option<String>,
    after: Option<String>,
    limit: usize,
    shrunk: bool,
}

/// One conversation's watch: its mapping state and its confirmation.
struct Watch {
    conv: Conversation,
    /// The vendor times of the last events delivered: the resume point is the earliest.
    recent_ts: VecDeque<String>,
    started: bool,
    /// The connection's state push is still to come.
    opening: bool,
    links: Links,
    counts: Counts,
    /// The pending confirmation raised (at most one per conversation), by vendor id.
    ask: Option<(String, SavedAsk)>,
    phase: Phase,
    /// The connection's number (a page answer of an earlier connection is dropped).
    generation: u64,
}

/// What a request's answer is for.
enum Req {
    /// A page of the conversation search: the ids listed so far, pages read.
    Search(Vec<String>, usize),
    /// `GET /api/conversations/{id}` of an unlisted watched conversation.
    Lookup(String),
    /// A history page of a conversation's connection.
    History(String, u64),
}

/// The observer of one OpenHands agent server.
pub struct ServerObserver {
    key: String,
    gated: bool,
    opts: Options,
    poll: u64,
    cursor_ttl_ms: Option<u64>,
    max_frame: usize,
    watches: HashMap<String, Watch>,
    gone: (HashSet<String>, VecDeque<String>),
    next_poll: Option<u64>,
    swept: Option<u64>,
    full_warned: bool,
    reqs: HashMap<u64, Req>,
    next_tag: u64,
}

fn log(out: &mut Vec<Step>, level: Level, msg: String) {
    out.push(Step::Log(level, msg));
}

impl ServerObserver {
    /// The observer of a section.
    fn new(s: &Setup<'_>, cfg: &Config) -> Self {
        Self {
            key: cfg.api_key.clone(),
            gated: s.gated,
            opts: Options { deltas: cfg.deltas },
            poll: cfg.poll_ms.unwrap_or(POLL_MS).max(1),
            cursor_ttl_ms: match cfg.cursor_ttl_hours.unwrap_or(CURSOR_TTL_HOURS) {
                0 => None,
                h => Some(h.saturating_mul(3_600_000)),
            },
            max_frame: s.max_frame,
            watches: HashMap::new(),
            gone: Default::default(),
            next_poll: None,
            swept: None,
            full_warned: false,
            reqs: HashMap::new(),
            next_tag: 1,
        }
    }

    fn get(&mut self, req: Req, path: String, bound: usize, tail: bool, out: &mut Vec<Step>) {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.reqs.insert(tag, req);
        out.push(Step::Get(Get { tag, path, bound, tail }));
    }

    fn search(&mut self, ids: Vec<String>, pages: usize, page: Option<&str>, out: &mut Vec<Step>) {
        let mut path = "/api/conversations/search?limit=100".to_owned();
        if let Some(p) = page {
            path.push_str("&page_id=");
            path.push_str(&aep_schemas::ids::percent_encode(p));
        }
        self.get(Req::Search(ids, pages + 1), path, 0, false, out);
    }

    /// A page of the conversation search: the next page, or the listing acted on.
    fn listed(&mut self, mut ids: Vec<String>, pages: usize, answer: Answer<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        self.next_poll = Some(cx.now + self.poll);
        let v: Value = match answer {
            Answer::Body(200, body) => match serde_json::from_slice(body) {
                Ok(v) => v,
                Err(e) => return log(out, Level::Warn, format!("Conversation discovery failed ({e}); retrying.")),
            },
            other => return log(out, Level::Warn, format!("Conversation discovery failed ({other:?}); retrying.")),
        };
        for item in v.get("items").and_then(Value::as_array).into_iter().flatten() {
            match item.get("id").and_then(Value::as_str) {
                Some(id) if conversation_id_ok(id) => ids.push(id.to_owned()),
                _ => log(out, Level::Debug, "A listed conversation without a usable id.".into()),
            }
        }
        let page = v.get("next_page_id").and_then(Value::as_str);
        if let Some(p) = page
            && pages < SEARCH_PAGES
        {
            return self.search(ids, pages, Some(p), out);
        }
        // Only a whole listing tells an unlisted conversation from one past its pages.
        if page.is_none() {
            if let Some(ttl) = self.cursor_ttl_ms
                && self.swept.is_none_or(|t| cx.now.saturating_sub(t) >= SWEEP_EVERY_MS)
            {
                self.swept = Some(cx.now);
                let keep = ids.iter().chain(self.watches.keys()).cloned().collect();
                out.push(Step::Expire { keep, older_than_ms: ttl });
            }
            // The server keeps a deleted conversation's open sockets open and silent: its
            // absence from the listing, confirmed by a 404, is the only sign.
            let listed: HashSet<&String> = ids.iter().collect();
            let mut unlisted: Vec<String> = self.watches.keys().filter(|id| !listed.contains(id)).cloned().collect();
            unlisted.sort();
            for id in unlisted {
                self.get(Req::Lookup(id.clone()), format!("/api/conversations/{id}"), 0, false, out);
            }
        }
        let mut watching = self.watches.len();
        for id in ids {
            if self.watches.contains_key(&id) || self.gone.0.contains(&id) {
                continue;
            }
            if watching >= MAX_CONVERSATIONS {
                if !self.full_warned {
                    self.full_warned = true;
                    log(
                        out,
                        Level::Warn,
                        format!("Too many conversations (at most {MAX_CONVERSATIONS}): the rest are not watched."),
                    );
                }
                break;
            }
            watching += 1;
            out.push(Step::Load(id));
        }
    }

    /// Starts watching conversation `id`, after its stored cursor if it has one.
    fn watch(&mut self, id: &str, saved: Option<Value>, out: &mut Vec<Step>) {
        if self.watches.contains_key(id) || self.gone.0.contains(id) {
            return;
        }
        let saved = saved.and_then(|v| match serde_json::from_value::<Cursor>(v) {
            Ok(c) => Some(c),
            Err(e) => {
                log(
                    out,
                    Level::Warn,
                    format!(
                        "The cursor of conversation {id} is not valid ({e}); its history is mapped from the start."
                    ),
                );
                None
            }
        });
        let mut w = Watch {
            conv: Conversation::new(id, self.opts),
            recent_ts: VecDeque::new(),
            started: false,
            opening: false,
            links: Links::default(),
            counts: Counts::default(),
            ask: None,
            phase: Phase::Down,
            generation: 0,
        };
        if let Some(c) = saved {
            log(
                out,
                Level::Info,
                format!(
                    "Resuming conversation {id} after its cursor (after {:?}, {} runs).",
                    c.after, c.conversation.runs
                ),
            );
            w.conv = Conversation::resume(id, self.opts, c.conversation);
            (w.started, w.recent_ts, w.links) = (c.started, c.after.into_iter().collect(), c.links);
            if let Some(a) = c.ask {
                // The confirmation an earlier process raised, still pending when it stopped.
                let vendor_id = w.conv.ask_id();
                out.push(Step::Raise(Raise {
                    vendor_id: vendor_id.clone(),
                    draft: a.draft(id),
                    answerable: self.gated,
                }));
                w.ask = Some((vendor_id, a));
            }
        }
        self.watches.insert(id.to_owned(), w);
        out.push(Step::Open(Open {
            link: id.to_owned(),
            path: format!("/sockets/events/{id}"),
            kind: LinkKind::WebSocket { ping: false },
            // The only frame ever written on the socket (the never-send posture).
            first: (!self.key.is_empty()).then(|| auth_frame(&self.key).to_string()),
            gone_on: Some(4004),
        }));
    }

    /// The conversation is gone (close 4004, or deleted): its watch ends with its cursor and ask.
    fn gone(&mut self, id: &str, out: &mut Vec<Step>) {
        let Some(w) = self.watches.remove(id) else { return };
        log(out, Level::Info, format!("Conversation {id} is gone; no longer watched, its cursor removed."));
        if let Some((vendor_id, _)) = w.ask {
            out.push(Step::Drop(vendor_id));
        }
        out.push(Step::Forget(id.to_owned()));
        self.gone.0.insert(id.to_owned());
        self.gone.1.push_back(id.to_owned());
        if self.gone.1.len() > GONE
            && let Some(old) = self.gone.1.pop_front()
        {
            self.gone.0.remove(&old);
        }
    }

    /// Asks for the next history page of conversation `id`.
    fn history_page(&mut self, id: &str, out: &mut Vec<Step>) {
        let Some(w) = self.watches.get(id) else { return };
        let Phase::History(h) = &w.phase else { return };
        let mut path = format!("/api/conversations/{id}/events/search?limit={}", h.limit);
        if let Some(ts) = &h.after {
            path.push_str("&timestamp__gte=");
            path.push_str(&aep_schemas::ids::percent_encode(ts));
        }
        if let Some(p) = &h.page {
            path.push_str("&page_id=");
            path.push_str(&aep_schemas::ids::percent_encode(p));
        }
        let (generation, tail) = (w.generation, h.limit == 1);
        self.get(Req::History(id.to_owned(), generation), path, page_bytes(self.max_frame), tail, out);
    }

    /// A history page's answer: the next page, or the history and the held frames mapped.
    fn history(&mut self, id: &str, generation: u64, answer: Answer<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let max_frame = self.max_frame;
        let Some(w) = self.watches.get_mut(id).filter(|w| w.generation == generation) else { return };
        let Phase::History(h) = &mut w.phase else { return };
        let failed = |w: &mut Watch, out: &mut Vec<Step>, why: String| {
            w.phase = Phase::Down;
            log(out, Level::Warn, format!("Conversation {id}: the history could not be read ({why}); reconnecting."));
            out.push(Step::Reset(id.to_owned()));
        };
        let next = match answer {
            Answer::Failed(e) => return failed(w, out, e.to_owned()),
            Answer::Body(200, body) => {
                let v: Value = match serde_json::from_slice(body) {
                    Ok(v) => v,
                    Err(e) => return failed(w, out, e.to_string()),
                };
                let Some(items) = v.get("items").and_then(Value::as_array) else {
                    return failed(w, out, "no items".into());
                };
                for item in items {
                    if item.to_string().len() > max_frame {
                        h.oversized += 1;
                        log(
                            out,
                            Level::Warn,
                            format!("Conversation {id}: an oversized event in the history was skipped."),
                        );
                    } else {
                        h.items.push(item.clone());
                    }
                }
                h.limit = (h.limit * 2).min(HISTORY_PAGE);
                v.get("next_page_id").and_then(Value::as_str).map(str::to_owned)
            }
            Answer::Body(status, _) => return failed(w, out, format!("HTTP {status}")),
            Answer::Over(_) if h.limit > 1 => {
                if !h.shrunk {
                    h.shrunk = true;
                    log(
                        out,
                        Level::Info,
                        format!("Conversation {id}: a history page passed its bound; reading smaller pages."),
                    );
                }
                h.limit = (h.limit / 2).max(1);
                return self.history_page(id, out);
            }
            Answer::Over(tail) => {
                h.oversized += 1;
                log(
                    out,
                    Level::Warn,
                    format!("Conversation {id}: an event in the history passed the page bound alone and was skipped."),
                );
                match tail.and_then(next_page_in_tail) {
                    Some(next) => next,
                    None => {
                        log(
                            out,
                            Level::Warn,
                            format!(
                                "Conversation {id}: the oversized page did not name the next one; the history read stops there (a gap)."
                            ),
                        );
                        None
                    }
                }
            }
        };
        // A page that does not move on would loop forever: the history ends there.
        if next.is_some() && next != h.page {
            h.page = next;
            return self.history_page(id, out);
        }
        let Phase::History(h) = std::mem::replace(&mut w.phase, Phase::Live) else { return };
        w.counts.held += h.held.len() as u64;
        w.counts.oversized += h.oversized;
        w.counts.frames += h.items.len() as u64;
        for ev in h.items {
            self.event(id, ev, false, cx, out);
        }
        let Some(w) = self.watches.get_mut(id) else { return };
        w.opening = true;
        for t in &h.held {
            self.frame(id, t, cx, out);
        }
        out.push(Step::Save(id.to_owned()));
    }

    /// One text frame off a conversation's socket.
    fn frame(&mut self, id: &str, text: &str, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let Some(w) = self.watches.get_mut(id) else { return };
        w.counts.frames += 1;
        match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => self.event(id, v, true, cx, out),
            _ => w.counts.unparsable += 1,
        }
    }

    /// One transport event, off the socket (`live`) or out of the history.
    fn event(&mut self, id: &str, ev: Value, live: bool, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let Some(w) = self.watches.get_mut(id) else { return };
        let full_state = ev.get("key").and_then(Value::as_str) == Some("full_state");
        if let Some(ts) = ev.get("timestamp").and_then(Value::as_str)
            && !full_state
        {
            // The state push is stamped "now" and never persisted: not a resume point.
            w.recent_ts.push_back(ts.to_owned());
            if w.recent_ts.len() > RECENT_TS {
                w.recent_ts.pop_front();
            }
        }
        if ev.get("id").and_then(Value::as_str).is_some_and(|v| w.conv.seen(v)) {
            w.counts.replayed += 1;
            return;
        }
        w.counts.fresh += 1;
        // The state every socket opens with: the server takes it after it subscribed the
        // socket, so live frames published meanwhile may come first. The connection's first
        // `full_state` is that push: the present, visibility, not a transition (the
        // history carries the transitions in order).
        let opening = live
            && w.opening
            && full_state
            && ev.get("kind").and_then(Value::as_str) == Some("ConversationStateUpdateEvent");
        let drafts = if opening {
            w.opening = false;
            w.conv.map_opening_state(&ev, cx.map)
        } else {
            w.conv.map(&ev, cx.map)
        };
        self.publish(id, drafts, cx, out);
    }

    /// Publishes one event's drafts, with the confirmation ask raised or settled.
    fn publish(&mut self, id: &str, drafts: Vec<EventDraft>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let gated = self.gated;
        let Some(w) = self.watches.get_mut(id) else { return };
        let mut batch = Vec::with_capacity(drafts.len() + 1);
        if !w.started {
            // On first sight: the server's first frame on a socket is the conversation's
            // state, so a conversation closed with 4004 never starts a session.
            w.started = true;
            let mut d = EventDraft::new("session.started", Capture::Metadata);
            d.session = Some(id.to_owned());
            d.data.insert("client".into(), json!({"name": CLIENT}));
            batch.push(d);
        }
        for mut d in drafts {
            match d.r#type.as_str() {
                "attention.requested" => {
                    if gated {
                        // The design record's gated-on decoration; the pinned payload is the
                        // gated-off one.
                        super::route::ROUTE.decorate(&mut d);
                    }
                    d.id = Some((cx.mint)());
                    let vendor_id = ask_id(&d).unwrap_or_default().to_owned();
                    out.push(Step::Raise(Raise { vendor_id: vendor_id.clone(), draft: d.clone(), answerable: gated }));
                    if let Some((old, _)) = w.ask.replace((vendor_id.clone(), SavedAsk::of(&d)))
                        && old != vendor_id
                    {
                        // One confirmation plane per conversation: the older ask is superseded.
                        out.push(Step::Drop(old));
                    }
                    batch.push(d);
                }
                "attention.resolved" if w.ask.is_some() => {
                    // The status left `waiting_for_confirmation`: the ask's outcome, from this
                    // flip only (after a delivered answer, `answered` + `resolved`).
                    let resolution = match d.data.get("resolution").and_then(Value::as_str) {
                        Some("dismissed") => "dismissed",
                        _ => "answered",
                    };
                    if !batch.is_empty() {
                        out.push(Step::Publish(std::mem::take(&mut batch), Some(id.to_owned())));
                    }
                    let Some((vendor_id, _)) = w.ask.take() else { continue };
                    // Unless the ask was settled meanwhile (its session's end did): as is.
                    let otherwise = vec![d];
                    out.push(Step::Settle(Settle { otherwise, ..Settle::new(vendor_id, Some(resolution)) }));
                }
                _ => batch.push(d),
            }
        }
        if !batch.is_empty() {
            out.push(Step::Publish(batch, Some(id.to_owned())));
        }
    }
}

impl Observer for ServerObserver {
    fn auth(&self) -> Auth {
        let secret = (!self.key.is_empty()).then(|| Secret {
            value: self.key.clone(),
            file: None,
            rest: &[("x-session-api-key", "")],
            link: &[],
        });
        Auth { headers: Vec::new(), secret }
    }

    fn feed(&mut self, input: Input<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        match input {
            Input::Start => self.search(Vec::new(), 0, None, out),
            Input::Tick => {
                self.next_poll = None;
                self.search(Vec::new(), 0, None, out);
            }
            Input::Loaded(id, saved) => self.watch(id, saved, out),
            Input::Up(id) => {
                if let Some(w) = self.watches.get_mut(id) {
                    w.phase = Phase::First;
                    w.generation += 1;
                }
            }
            Input::Frame(id, text) => {
                let Some(w) = self.watches.get_mut(id) else { return };
                match &mut w.phase {
                    // The server subscribes the socket before it pushes the state every socket
                    // opens with: once that first frame is in, whatever it persists next reaches
                    // the socket, so the history read from here on misses nothing.
                    Phase::First => {
                        let after = w.recent_ts.iter().min().cloned();
                        w.phase = Phase::History(History {
                            held: vec![text.to_owned()],
                            items: Vec::new(),
                            oversized: 0,
                            page: None,
                            after,
                            limit: HISTORY_PAGE,
                            shrunk: false,
                        });
                        self.history_page(id, out);
                    }
                    Phase::History(h) => h.held.push(text.to_owned()),
                    Phase::Live => {
                        self.frame(id, text, cx, out);
                        out.push(Step::Save(id.to_owned()));
                    }
                    Phase::Down => {}
                }
            }
            Input::Down(id, why) => {
                let Some(w) = self.watches.get_mut(id) else { return };
                w.phase = Phase::Down;
                match why {
                    Down::Closed(Some(4004)) => return self.gone(id, out),
                    Down::Oversized(e) => {
                        w.counts.oversized += 1;
                        log(
                            out,
                            Level::Warn,
                            format!(
                                "Conversation {id}: an oversized event was dropped ({e}); resuming (the history replay skips it by size)."
                            ),
                        );
                    }
                    Down::Closed(Some(4001)) => {
                        log(
                            out,
                            Level::Warn,
                            format!("Conversation {id}: the server refused the session API key (close 4001)."),
                        );
                    }
                    _ => {}
                }
                let c = w.counts;
                log(
                    out,
                    Level::Debug,
                    format!(
                        "OpenHands bridge counts of {id}: frames {}, fresh {}, replayed {}, held {}, unparsable {}, oversized {}.",
                        c.frames, c.fresh, c.replayed, c.held, c.unparsable, c.oversized
                    ),
                );
            }
            Input::Answer(tag, answer) => match self.reqs.remove(&tag) {
                Some(Req::Search(ids, pages)) => self.listed(ids, pages, answer, cx, out),
                // Deleted: anything else (an answer, an error) is not taken for a deletion.
                Some(Req::Lookup(id)) if matches!(answer, Answer::Body(404, _)) && self.watches.contains_key(&id) => {
                    out.push(Step::Close(id.clone()));
                    self.gone(&id, out);
                }
                Some(Req::Lookup(_)) => {}
                Some(Req::History(id, generation)) => self.history(&id, generation, answer, cx, out),
                None => {}
            },
        }
    }

    fn wake(&self) -> Option<u64> {
        self.next_poll
    }

    fn cursor(&self, key: &str, asks: &dyn crate::observer::Asks) -> Option<Value> {
        let w = self.watches.get(key)?;
        let c = Cursor {
            started: w.started,
            after: w.recent_ts.iter().min().cloned(),
            conversation: w.conv.checkpoint(CURSOR_IDS),
            links: w.links.clone(),
            ask: w.ask.as_ref().filter(|(v, _)| asks.knows(v)).map(|(_, a)| a.clone()),
        };
        serde_json::to_value(c).ok()
    }

    fn links(&mut self, link: &str) -> Option<&mut Links> {
        self.watches.get_mut(link).map(|w| &mut w.links)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_oversized_page_names_its_next_page_in_its_last_bytes() {
        let tail = |s: &str| next_page_in_tail(s.as_bytes());
        assert_eq!(tail(r#"xx"}}],"next_page_id":"e-7"}"#), Some(Some("e-7".into())));
        assert_eq!(tail("x\"}}], \"next_page_id\": null }"), Some(None));
        // The field's name inside an event's text is not the field.
        assert_eq!(tail(r#"{"items":[{"text":"next_page_id"}],"next_page_id":"e-8"}"#), Some(Some("e-8".into())));
        for cut in [r#"..."next_page_id":"e-"#, r#"..."text":"a"}]}"#, r#""next_page_id":7}"#] {
            assert_eq!(tail(cut), None, "{cut}");
        }
        assert_eq!(page_bytes(64 << 10), 4 << 20);
        assert_eq!(page_bytes(16 << 20), (16 << 20) + PAGE_SLACK);
    }

    #[test]
    fn only_uuid_shaped_ids_become_socket_paths() {
        assert!(conversation_id_ok("6f1c2a3b-0000-4000-8000-1234567890ab"));
        assert!(conversation_id_ok("6f1c2a3b00004000800012345678900b"));
        for bad in ["", "../x", "a/b", "id?x=1", &"a".repeat(65)] {
            assert!(!conversation_id_ok(bad), "{bad}");
        }
    }

    #[test]
    fn a_section_takes_its_key_poll_deltas_and_cursor_expiry() {
        let t = |v: Value| v.as_object().cloned().unwrap();
        assert!(check(&t(json!({"api_key": "k", "poll_ms": 50, "deltas": true, "cursor_ttl_hours": 0}))).is_empty());
        assert_eq!(check(&t(json!({"poll_ms": 0})))[0].0, "poll_ms");
        assert_eq!(check(&t(json!({"token": "x"})))[0].0, "token");
        let o = ServerObserver::new(
            &Setup { table: &Map::new(), primary: false, gated: false, max_frame: 1 << 20 },
            &Config { api_key: "k".into(), ..Config::default() },
        );
        assert_eq!((o.poll, o.cursor_ttl_ms), (POLL_MS, Some(CURSOR_TTL_HOURS * 3_600_000)));
        let secret = o.auth().secret.unwrap();
        assert_eq!((secret.value.as_str(), secret.rest), ("k", &[("x-session-api-key", "")][..]));
        assert!(secret.link.is_empty(), "the key rides the socket as its first frame, not a header");
    }
}
