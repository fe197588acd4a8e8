//! Observers of agents' own servers (`[bridges.<name>]`) as pure, clockless state machines.
//!
//! An observer is a vendor's (or a protocol's) whole knowledge of a server it attaches to:
//! which links to open (an SSE stream, WebSocket event sockets), which REST pages to read
//! (a pending list, a session list, a history), how each frame maps to event drafts, which
//! of those are asks the bridge can answer over the server's reply route, and what a
//! restart resumes from. It does no I/O and reads no clock: the daemon's one generic
//! runtime (`aep-bridge`'s `bridges` module) connects, reconnects, reads, stores cursors and
//! publishes; it [`feed`](Observer::feed)s the observer each [`Input`] (a link up, a frame,
//! a link down, a page's answer, a tick) with a [`Ctx`] (the time, the capture posture, an
//! id minter and the state of the asks it raised), and executes the [`Step`]s the observer
//! pushes, in order. A `Get`'s answer is fed back before the steps after it, so an observer
//! reads like the sequential code it replaces.
//!
//! The registry (`observers::observers`) is derived from the vendor list (each vendor's
//! [`ServerSpec`](crate::spec::ServerSpec) names its observer) followed by the protocols'
//! observers (AG-UI): `[bridges.<name>] vendor = "<id>"` finds one by id, and the
//! deprecated `kind = "<name>"` by the names it was known by ([`ObserverSpec::kinds`]).

pub mod sse;

use std::collections::VecDeque;

use serde_json::{Map, Value};

use crate::{EventDraft, MapContext};

/// How the daemon reaches an observed server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// It connects: the links the observer opens under `url`, the REST pages it asks for.
    Client,
    /// It listens on `listen` and forwards every request to `url` byte for byte; each
    /// `text/event-stream` answer it forwards is one link the observer hears (never writes).
    TeeProxy,
}

/// When a section's `control = true` is honoured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Never: a read-only channel (`config validate` refuses the gate).
    Never,
    /// In `mode = "primary"` only (a companion's plugin or hooks own the asks).
    Primary,
    /// Always.
    Always,
}

/// Checks a vendor's table: `(key, problem)`, the key relative to the section.
pub type CheckFn = fn(&Map<String, Value>) -> Vec<(String, String)>;

/// One observer, as the registry lists it.
pub struct ObserverSpec {
    /// `[bridges.<name>] vendor = "<id>"`: the vendor's id (or the protocol's), the default
    /// agent identity of the events and the folder of its cursors.
    pub id: &'static str,
    /// The deprecated `kind` names of the same observer (still accepted, with a warning).
    pub kinds: &'static [&'static str],
    /// How the daemon reaches the server.
    pub transport: Transport,
    /// When the control gate is honoured.
    pub gate: Gate,
    /// Whether `mode` (`companion` / `primary`) applies.
    pub moded: bool,
    /// In companion mode, nothing is added for a session the vendor's hook channel (its
    /// plugin) delivers: the daemon tracks those sessions for [`Ctx::claimed`].
    pub hook_companion: bool,
    /// The `input` label of its events in the daemon's metrics.
    pub input: &'static str,
    /// The keys of the vendor's own table (beside the daemon's common keys).
    pub fields: &'static [&'static str],
    /// Checks the vendor's table (types and values): `(key, problem)`, the key relative to
    /// the section.
    pub check: CheckFn,
    /// Builds the observer of a checked section.
    pub build: fn(&Setup<'_>) -> Result<Box<dyn Observer>, String>,
}

impl std::fmt::Debug for ObserverSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObserverSpec").field("id", &self.id).finish_non_exhaustive()
    }
}

impl ObserverSpec {
    /// Whether a section whose gate is `control` in `primary` mode (or not) has answerable
    /// asks, given that an answer can reach the bridge.
    pub fn gated(&self, control: bool, primary: bool) -> bool {
        control
            && match self.gate {
                Gate::Never => false,
                Gate::Primary => primary,
                Gate::Always => true,
            }
    }
}

/// What an observer is built from.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// The vendor's own keys of the section.
    pub table: &'a Map<String, Value>,
    /// `mode = "primary"` (the full mapping) rather than companion.
    pub primary: bool,
    /// The control gate is honoured: asks the route can answer are raised answerable.
    pub gated: bool,
    /// The section's `max_frame_bytes`: the largest message (or history entry) taken.
    pub max_frame: usize,
}

/// Parses a vendor's table: a key not in `fields` is named as unknown, a value of the wrong
/// type as the deserializer says; `Ok` only without either. The known keys are parsed
/// whatever the unknown ones, so [`check_table`] can report every problem at once.
pub fn table<C: serde::de::DeserializeOwned>(
    fields: &[&str],
    t: &Map<String, Value>,
) -> Result<C, Vec<(String, String)>> {
    let (known, unknown): (Map<String, Value>, Map<String, Value>) =
        t.clone().into_iter().partition(|(k, _)| fields.contains(&k.as_str()));
    let mut problems: Vec<(String, String)> = unknown
        .keys()
        .map(|k| {
            let own = if fields.is_empty() { "none".to_owned() } else { fields.join(", ") };
            (k.clone(), format!("is not a key of this vendor's bridge (its own keys: {own})"))
        })
        .collect();
    match serde_json::from_value::<C>(Value::Object(known)) {
        Ok(c) if problems.is_empty() => Ok(c),
        Ok(_) => Err(problems),
        Err(e) => {
            problems.push((String::new(), e.to_string()));
            Err(problems)
        }
    }
}

/// Checks a vendor's table: [`table`]'s problems, then `values`' on the known keys parsed.
pub fn check_table<C: serde::de::DeserializeOwned>(
    fields: &[&str],
    t: &Map<String, Value>,
    values: impl Fn(&C) -> Vec<(String, String)>,
) -> Vec<(String, String)> {
    let known: Map<String, Value> =
        t.iter().filter(|(k, _)| fields.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
    let mut problems = table::<C>(fields, t).err().unwrap_or_default();
    if let Ok(c) = serde_json::from_value::<C>(Value::Object(known)) {
        problems.extend(values(&c));
    }
    problems
}

/// A secret the requests and links carry (a token, a key), and the headers it rides on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Secret {
    /// The secret as configured; empty: read [`Secret::file`].
    pub value: String,
    /// A file holding it, read at every connect until it exists (`~/` is the home folder).
    pub file: Option<String>,
    /// `(header, prefix)`: the headers of every REST request, the secret after the prefix.
    pub rest: &'static [(&'static str, &'static str)],
    /// `(header, prefix)`: the headers of a link's connect.
    pub link: &'static [(&'static str, &'static str)],
}

/// The credentials of an observer's requests and links.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Auth {
    /// Headers every request and link carries (HTTP basic auth).
    pub headers: Vec<(String, String)>,
    /// A secret resolved at every connect.
    pub secret: Option<Secret>,
}

/// The stateful side of an observer: see the module doc.
pub trait Observer: Send {
    /// The credentials of its requests and links.
    fn auth(&self) -> Auth {
        Auth::default()
    }

    /// Takes one input; what to do next is pushed to `out`, in order.
    fn feed(&mut self, input: Input<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>);

    /// When the observer wants a [`Input::Tick`] next (Unix ms), if ever.
    fn wake(&self) -> Option<u64> {
        None
    }

    /// The cursor to store under `key` now ([`Step::Save`]), if any.
    fn cursor(&self, _key: &str, _asks: &dyn Asks) -> Option<Value> {
        None
    }

    /// The cause links kept for `link` (see [`Links`]), if the observer keeps any.
    fn links(&mut self, _link: &str) -> Option<&mut Links> {
        None
    }
}

/// What the runtime tells an observer.
#[derive(Debug)]
pub enum Input<'a> {
    /// The observer runs: once, first.
    Start,
    /// Link `.0` connected (its handshake answered).
    Up(&'a str),
    /// One message off link `.0`: an SSE frame's data, a WebSocket text message.
    Frame(&'a str, &'a str),
    /// Link `.0`'s connection ended; the runtime reconnects it after its backoff unless
    /// the observer closes it (or it ended on its [`Open::gone_on`] code).
    Down(&'a str, Down<'a>),
    /// The answer to the [`Get`] tagged `.0`.
    Answer(u64, Answer<'a>),
    /// The cursor stored under key `.0` ([`Step::Load`]), if one is.
    Loaded(&'a str, Option<Value>),
    /// The time [`Observer::wake`] asked for came.
    Tick,
}

/// Why a link's connection ended.
#[derive(Debug, Clone, Copy)]
pub enum Down<'a> {
    /// The server closed it (with a WebSocket close code, if it gave one) or the stream ended.
    Closed(Option<u16>),
    /// It failed (unreachable, refused, silent past the idle bound): why.
    Failed(&'a str),
    /// A message passed the section's `max_frame_bytes`: the connection is lost with it.
    Oversized(&'a str),
}

/// The answer to a [`Get`].
#[derive(Debug, Clone, Copy)]
pub enum Answer<'a> {
    /// The server answered: its status and body.
    Body(u16, &'a [u8]),
    /// The body passed the request's bound (its last bytes when [`Get::tail`] asked).
    Over(Option<&'a [u8]>),
    /// No answer: why.
    Failed(&'a str),
}

/// What the runtime lends an observer for one input.
pub struct Ctx<'a> {
    /// Now, Unix milliseconds.
    pub now: u64,
    /// The capture posture.
    pub map: &'a MapContext,
    /// Mints an event id (an ask's request, published with it).
    pub mint: &'a dyn Fn() -> String,
    /// The asks this observer raised that are still tracked.
    pub asks: &'a dyn Asks,
    /// Whether the vendor's hook channel delivered a moment of this session (companion).
    pub claimed: &'a dyn Fn(&str) -> bool,
}

/// The asks an observer raised that the runtime still tracks (it forgets one when it is
/// settled, when its session ends, or when the bound pushes it out).
pub trait Asks {
    /// Whether vendor request `vendor_id` is tracked.
    fn knows(&self, vendor_id: &str) -> bool;
    /// The tracked asks `(vendor id, kind)` of `session` (all of them for `None`).
    fn open(&self, session: Option<&str>) -> Vec<(String, String)>;
}

/// What an observer asks of the runtime, executed in order.
#[derive(Debug)]
pub enum Step {
    /// Opens a link (kept up until closed).
    Open(Open),
    /// Closes a link for good.
    Close(String),
    /// Drops a link's connection: it reconnects after its backoff.
    Reset(String),
    /// Writes a text message on a link (`(link, text)`).
    Send(String, String),
    /// Reads a REST page; its [`Input::Answer`] is fed before the next step.
    Get(Get),
    /// Publishes drafts, in order, as one batch (`.1`: the link whose [`Links`] apply).
    Publish(Vec<EventDraft>, Option<String>),
    /// Tracks an ask before its request is published (its draft carries its minted id).
    Raise(Raise),
    /// Settles a tracked ask: its outcome is published (its `otherwise` if it is not tracked).
    Settle(Settle),
    /// Forgets a tracked ask without an outcome (superseded, or its server is gone).
    Drop(String),
    /// Reads the cursor stored under a key: fed back as [`Input::Loaded`] at once.
    Load(String),
    /// Stores [`Observer::cursor`] of a key, atomically.
    Save(String),
    /// Removes the cursor of a key.
    Forget(String),
    /// Removes the cursors nothing wrote for `older_than_ms` whose key is not in `keep`.
    Expire {
        /// The keys whose cursors stay however old.
        keep: Vec<String>,
        /// How long a cursor must have gone unwritten, milliseconds.
        older_than_ms: u64,
    },
    /// A line for the daemon's log (the bridge's name is added).
    Log(Level, String),
}

/// The level of a [`Step::Log`] line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Counts and the unremarkable.
    Debug,
    /// A state change.
    Info,
    /// Something lost or refused.
    Warn,
}

/// A link to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Open {
    /// Its key (the observer's name for it; a cursor's key too).
    pub link: String,
    /// The path under the server's base URL (`ws(s)://` for a socket).
    pub path: String,
    /// An SSE stream or a WebSocket.
    pub kind: LinkKind,
    /// A text message written as soon as the socket is open, before anything is read.
    pub first: Option<String>,
    /// A close code that means the server has no such thing: the link is not reconnected.
    pub gone_on: Option<u16>,
}

/// What a link is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A `text/event-stream` GET, resumed with `Last-Event-ID` when the server numbers it.
    Sse,
    /// A WebSocket; `ping`: the runtime pings it every third of the idle bound.
    WebSocket {
        /// Keep-alive pings (otherwise a silent socket is only timed out).
        ping: bool,
    },
}

/// A REST GET.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get {
    /// The tag its answer carries.
    pub tag: u64,
    /// The path (and query) under the server's base URL.
    pub path: String,
    /// The most bytes the answer may hold (0: the runtime's usual 4 MiB); a larger one is
    /// [`Answer::Over`].
    pub bound: usize,
    /// Past the bound, read on to the end keeping only the last bytes.
    pub tail: bool,
}

impl Get {
    /// A GET of `path` tagged `tag`, within the usual bound.
    pub fn new(tag: u64, path: impl Into<String>) -> Self {
        Self { tag, path: path.into(), bound: 0, tail: false }
    }
}

/// An ask to track before its request is published.
#[derive(Debug, Clone, PartialEq)]
pub struct Raise {
    /// The vendor's request id (what settles it).
    pub vendor_id: String,
    /// The `attention.requested` draft as it is (or was) published, its id minted.
    pub draft: EventDraft,
    /// Answerable over the server's reply route (gated, a kind the route answers).
    pub answerable: bool,
}

/// A tracked ask settled.
#[derive(Debug, Clone, PartialEq)]
pub struct Settle {
    /// Its vendor request id.
    pub vendor_id: String,
    /// How the server settled it, if it said (`answered`, `dismissed`); `None`: it is gone
    /// unseen, `answered` if a command's answer was being delivered, else `dismissed`.
    pub resolution: Option<&'static str>,
    /// The vendor's own decision (`attention.answered`, answered around the bridge), when
    /// no command's answer was being delivered: published before the resolution.
    pub answered: Option<EventDraft>,
    /// What is published instead when the ask is not tracked (any more): the event as the
    /// observer would map it without the ask. (Whether an ask is tracked is the runtime's
    /// to say when the step runs: one raised earlier in the same input is.)
    pub otherwise: Vec<EventDraft>,
}

impl Settle {
    /// Settles `vendor_id` as `resolution` (see [`Settle::resolution`]).
    pub fn new(vendor_id: impl Into<String>, resolution: Option<&'static str>) -> Self {
        Self { vendor_id: vendor_id.into(), resolution, answered: None, otherwise: Vec::new() }
    }
}

/// The open units' correlation keys and the ids of their starting events (a run, a tool
/// call, an ask), oldest first: kept in a cursor, so an outcome mapped after a restart still
/// names its cause (AEP-0002 §2 convention 1) although the stamper's memory of the key was
/// lost with the process.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Links(pub VecDeque<(String, String)>);

/// Units whose starting ids a [`Links`] remembers at most.
pub const LINKS: usize = 256;

impl Links {
    /// Sets the `cause` of each draft whose `cause_key` names a remembered unit.
    pub fn fill(&self, drafts: &mut [EventDraft]) {
        for d in drafts {
            if d.cause.is_none()
                && let Some(k) = &d.cause_key
                && let Some((_, id)) = self.0.iter().find(|(key, _)| key == k)
            {
                d.cause = Some(id.clone());
            }
        }
    }

    /// Records what a published batch opened and closed: `keys` are its drafts'
    /// `(correlation_key, cause_key)`, `ids` the ids they were stamped with.
    pub fn record(&mut self, keys: &[(Option<String>, Option<String>)], ids: &[String]) {
        for ((opens, closes), id) in keys.iter().zip(ids) {
            if let Some(k) = closes {
                self.0.retain(|(key, _)| key != k);
            }
            if let Some(k) = opens {
                self.0.retain(|(key, _)| key != k);
                if self.0.len() >= LINKS {
                    self.0.pop_front();
                }
                self.0.push_back((k.clone(), id.clone()));
            }
        }
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Drops the drafts that name no session but are session-scoped (AEP-0001 §5.2: not an
/// event); returns how many.
pub fn scoped(drafts: &mut Vec<EventDraft>) -> usize {
    let before = drafts.len();
    drafts.retain(|d| d.session.is_some() || aep_schemas::event::is_agent_scoped(&d.r#type));
    before - drafts.len()
}

/// The vendor request id of an ask's draft (`correlation_key` `attention:<id>`).
pub fn ask_id(d: &EventDraft) -> Option<&str> {
    d.correlation_key.as_deref()?.strip_prefix("attention:")
}

/// Standard base64 with padding (RFC 4648 §4), for HTTP basic auth.
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A set remembering its last `cap` members, oldest forgotten first.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    set: std::collections::HashSet<String>,
    order: VecDeque<String>,
    cap: usize,
}

impl Recent {
    /// An empty set keeping at most `cap` members.
    pub fn new(cap: usize) -> Self {
        Self { cap, ..Self::default() }
    }

    /// Adds `id`; `false` when it was a member already.
    pub fn first(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        self.set.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        if self.order.len() > self.cap
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
        true
    }

    /// Whether `id` is a member.
    pub fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, coded) in cases {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
    }

    #[test]
    fn a_vendor_table_names_its_unknown_keys_and_bad_values() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct C {
            #[serde(default)]
            poll_ms: Option<u64>,
        }
        let t = |v: Value| v.as_object().unwrap().clone();
        assert!(table::<C>(&["poll_ms"], &t(serde_json::json!({"poll_ms": 5}))).is_ok());
        let e = table::<C>(&["poll_ms"], &t(serde_json::json!({"token": "x"}))).unwrap_err();
        assert_eq!(e[0].0, "token");
        assert!(e[0].1.contains("poll_ms"), "{e:?}");
        let e = table::<C>(&["poll_ms"], &t(serde_json::json!({"poll_ms": "soon"}))).unwrap_err();
        assert_eq!(e[0].0, "");
    }

    #[test]
    fn links_fill_causes_and_follow_what_batches_open_and_close() {
        let mut links = Links::default();
        let keys = [(Some("tool:1".to_owned()), None), (Some("run:a".to_owned()), None)];
        links.record(&keys, &["e1".into(), "e2".into()]);
        let mut d = EventDraft { cause_key: Some("tool:1".into()), ..EventDraft::default() };
        links.fill(std::slice::from_mut(&mut d));
        assert_eq!(d.cause.as_deref(), Some("e1"));
        links.record(&[(None, Some("tool:1".to_owned()))], &["e3".into()]);
        assert_eq!(links.0, [("run:a".to_owned(), "e2".to_owned())]);
        let mut recent = Recent::new(2);
        assert!(recent.first("a") && recent.first("b") && !recent.first("a") && recent.first("c"));
        assert!(!recent.contains("a") && recent.contains("c"));
    }
}
