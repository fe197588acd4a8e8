//! The `serve` event stream observer of OpenCode and Kilo Code (one state machine, each on
//! its [`Profile`] and reply route; the design record's "SSE bridge", AEP-0002 Annex
//! A.7/A.8 SSE channel), as the daemon's observer runtime drives it.
//!
//! One link, `GET {url}/event`; each bus event (`{id, type, properties}`) is mapped by the
//! mode policy ([`super::sse::map_sse`]) in the configured mode. Sessionless machinery
//! (`server.connected`, `plugin.added`, ...) is not a valid session-scoped event and is
//! skipped. Runs are synthesized per session in primary mode; companion owns none. Primary
//! also drives the todo snapshot diff (the policy leaves it to the receiver). A companion
//! adds nothing for a session the plugin delivers: each bus event naming a session is held
//! a short grace and published only when no plugin call named that session by then.
//!
//! Resume: every bus event carries its own `id`; the last 4096 are remembered and a replayed
//! one is dropped (the runtime sends `Last-Event-ID` when the server numbers its frames;
//! OpenCode 1.18.33 does not). In primary mode the server's own pending list
//! (`GET {url}/permission`) is read at every connect: an ask raised while disconnected is
//! raised here, one settled meanwhile is closed (`attention.resolved`, `dismissed`: how it
//! was settled was not seen).
//!
//! The permission reply route (the design record's gate, primary mode only): the ask's
//! `attention.requested` carries the server's reply enum as options and `respond_via:
//! ["control"]`, and is raised answerable; the runtime delivers a `control.attention.respond`
//! over the route (`POST {url}/session/{session}/permissions/{id}`). The outcome has one
//! source, the vendor's `permission.replied` broadcast.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::sse::{self as bus, SseMode, map_sse};
use super::{OPENCODE, Profile, bus_session};
use crate::observer::{
    Auth, Ctx, Down, Gate, Get, Input, Level, LinkKind, Observer, ObserverSpec, Open, Raise, Recent, Settle, Setup,
    Step, Transport, ask_id, base64, scoped, table,
};
use crate::spec::ReplyRoute;
use crate::{EventDraft, MapContext, SessionState};

/// Bus event ids remembered for dedupe.
const SEEN: usize = 4096;
/// Sessions whose run state is kept (the least recently seen is dropped beyond).
const MAX_SESSIONS: usize = 4096;
/// How long a companion holds a bus event of a session no plugin call has named yet: the
/// plugin posts the same event within its own hook timeout (1.5 s by default).
pub const COMPANION_GRACE_MS: u64 = 3_000;
/// Bus events a companion holds at most (the oldest is decided early beyond).
const MAX_HELD: usize = 4096;
/// The stream's link.
const LINK: &str = "event";
/// The tag of the pending-list read.
const RESYNC: u64 = 1;

/// OpenCode's observer (`vendor = "opencode"`, formerly `kind = "opencode-sse"`).
pub static OBSERVER: ObserverSpec = BASE;

/// The OpenCode-shaped observer, as OpenCode's; Kilo Code's is it on its own profile.
pub const BASE: ObserverSpec = ObserverSpec {
    id: "opencode",
    kinds: &["opencode-sse"],
    transport: Transport::Client,
    gate: Gate::Primary,
    moded: true,
    hook_companion: true,
    input: "sse",
    fields: FIELDS,
    check,
    build: |s| SseObserver::build(OPENCODE, &super::route::ROUTE, s),
};

/// The keys of an OpenCode-shaped section: the server's basic auth.
pub const FIELDS: &[&str] = &["username", "password"];

/// `[bridges.<name>]`'s own keys for an OpenCode-shaped server.
#[derive(Debug, serde::Deserialize)]
#[serde(default)]
pub struct Config {
    /// HTTP basic auth user (`OPENCODE_SERVER_USERNAME`); used when `password` is set.
    pub username: String,
    /// HTTP basic auth password (`OPENCODE_SERVER_PASSWORD`); `""` = an open server.
    pub password: String,
}

impl Default for Config {
    fn default() -> Self {
        Self { username: "opencode".into(), password: String::new() }
    }
}

/// Checks an OpenCode-shaped section's own keys.
pub fn check(t: &serde_json::Map<String, Value>) -> Vec<(String, String)> {
    table::<Config>(FIELDS, t).err().unwrap_or_default()
}

/// What the observer counted (logged when a connection ends).
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    frames: u64,
    replayed: u64,
    unparsable: u64,
    sessionless: u64,
    /// Companion events dropped because the plugin delivered their session.
    plugin: u64,
}

/// The observer of one OpenCode-shaped server.
pub struct SseObserver {
    profile: Profile,
    route: &'static ReplyRoute,
    mode: SseMode,
    gated: bool,
    auth: Auth,
    states: HashMap<String, (u64, SessionState)>,
    tick: u64,
    seen: Recent,
    /// Companion mode: bus events held until their grace ends, with their session.
    held: VecDeque<(u64, String, Value)>,
    counts: Counts,
}

impl SseObserver {
    /// The observer of a server on `profile` answering over `route`.
    pub fn new(profile: Profile, route: &'static ReplyRoute, primary: bool, gated: bool, cfg: &Config) -> Self {
        let mut auth = Auth::default();
        if !cfg.password.is_empty() {
            let creds = format!("{}:{}", cfg.username, cfg.password);
            auth.headers.push(("authorization".into(), format!("Basic {}", base64(creds.as_bytes()))));
        }
        Self {
            profile,
            route,
            mode: if primary { SseMode::Primary } else { SseMode::Companion },
            gated,
            auth,
            states: HashMap::new(),
            tick: 0,
            seen: Recent::new(SEEN),
            held: VecDeque::new(),
            counts: Counts::default(),
        }
    }

    /// Builds the observer of a section ([`ObserverSpec::build`]).
    pub fn build(profile: Profile, route: &'static ReplyRoute, s: &Setup<'_>) -> Result<Box<dyn Observer>, String> {
        let cfg: Config = table(FIELDS, s.table).map_err(|e| format!("{e:?}"))?;
        Ok(Box::new(Self::new(profile, route, s.primary, s.gated, &cfg)))
    }

    fn frame(&mut self, text: &str, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        self.counts.frames += 1;
        let ev: Value = match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                self.counts.unparsable += 1;
                return;
            }
        };
        if let Some(id) = ev.get("id").and_then(Value::as_str)
            && !self.seen.first(id)
        {
            self.counts.replayed += 1;
            return;
        }
        if self.mode == SseMode::Companion {
            return self.companion(Some(ev), cx, out);
        }
        self.event(&ev, cx, out);
    }

    /// Companion mode: the plugin (when one runs in this server) forwards every bus event that
    /// names a session, so such an event is held for [`COMPANION_GRACE_MS`] and published only
    /// when no plugin call delivered its session by then; sessionless machinery maps to no
    /// event either way. `None` only decides the held events whose grace ended.
    fn companion(&mut self, ev: Option<Value>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        if let Some(ev) = ev {
            match bus_session(&ev).map(str::to_owned) {
                Some(session) if (cx.claimed)(&session) => self.counts.plugin += 1,
                Some(session) => self.held.push_back((cx.now + COMPANION_GRACE_MS, session, ev)),
                None => self.event(&ev, cx, out),
            }
        }
        while let Some((due, session, _)) = self.held.front() {
            if *due > cx.now && self.held.len() <= MAX_HELD {
                break;
            }
            let claimed = (cx.claimed)(session);
            let Some((_, _, ev)) = self.held.pop_front() else { break };
            if claimed {
                self.counts.plugin += 1;
            } else {
                self.event(&ev, cx, out);
            }
        }
    }

    /// The run state of `session` (bounded: the least recently used is dropped).
    fn state(&mut self, session: &str) -> &mut SessionState {
        self.tick += 1;
        if !self.states.contains_key(session)
            && self.states.len() >= MAX_SESSIONS
            && let Some(old) = self.states.iter().min_by_key(|(_, (t, _))| *t).map(|(k, _)| k.clone())
        {
            self.states.remove(&old);
        }
        let slot = self.states.entry(session.to_owned()).or_default();
        slot.0 = self.tick;
        &mut slot.1
    }

    /// Maps and publishes one bus event.
    fn event(&mut self, ev: &Value, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let Some(ty) = ev.get("type").and_then(Value::as_str) else {
            self.counts.unparsable += 1;
            return;
        };
        let session = bus_session(ev).map(str::to_owned);
        let primary = self.mode == SseMode::Primary;
        if primary && let Some(id) = (self.route.settled)(ev) {
            // The outcome, from this broadcast only; an ask this stream never raised is not
            // ours to close.
            return out.push(Step::Settle(Settle::new(id, Some("answered"))));
        }
        let (profile, mode) = (self.profile, self.mode);
        let state = self.state(session.as_deref().unwrap_or(""));
        let mapped = if primary && ty == bus::TODO_SNAPSHOT {
            // The policy leaves the snapshot diff to the receiver (the pin's `todo_updated: null`).
            Ok(todos(ev, session.as_deref(), state, cx.map))
        } else {
            map_sse(profile, mode, ev, state, cx.map)
        };
        let mut drafts = match mapped {
            Ok(d) => d,
            Err(e) => {
                out.push(Step::Log(Level::Debug, format!("Unmappable bus event: {e}")));
                self.counts.unparsable += 1;
                return;
            }
        };
        self.counts.sessionless += scoped(&mut drafts) as u64;
        if ty == bus::SESSION_GONE
            && let Some(s) = &session
        {
            self.states.remove(s);
        }
        if drafts.is_empty() {
            return;
        }
        if primary {
            self.raise(&mut drafts, cx, out);
        }
        out.push(Step::Publish(drafts, None));
    }

    /// Raises the asks among `drafts` before they are published: their ids minted and
    /// (gated, permission kind) the reply route's vocabulary offered.
    fn raise(&self, drafts: &mut [EventDraft], cx: &Ctx<'_>, out: &mut Vec<Step>) {
        for d in drafts.iter_mut().filter(|d| d.r#type == "attention.requested") {
            let Some(vendor_id) = ask_id(d).map(str::to_owned) else { continue };
            if d.session.is_none() || cx.asks.knows(&vendor_id) {
                continue;
            }
            let answerable = self.gated && d.data.get("kind").and_then(Value::as_str) == Some("permission");
            if answerable {
                // The design record's gated-on decoration: the vendor's own reply vocabulary.
                self.route.decorate(d);
            }
            d.id = Some((cx.mint)());
            out.push(Step::Raise(Raise { vendor_id, draft: d.clone(), answerable }));
        }
    }

    /// The server's pending permissions (read at connect): asks raised while away are
    /// raised, asks gone meanwhile are closed.
    fn resync(&mut self, list: Vec<Value>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        let live: Vec<&str> = list.iter().filter_map(bus::pending_id).collect();
        for (vendor_id, kind) in cx.asks.open(None) {
            if kind == "permission" && !live.contains(&vendor_id.as_str()) {
                // Settled while away: how was not seen, unless this bridge delivered the answer.
                out.push(Step::Settle(Settle::new(vendor_id, None)));
            }
        }
        for ask in list.into_iter().filter_map(bus::pending_ask) {
            self.event(&ask, cx, out);
        }
    }
}

impl Observer for SseObserver {
    fn auth(&self) -> Auth {
        self.auth.clone()
    }

    fn feed(&mut self, input: Input<'_>, cx: &Ctx<'_>, out: &mut Vec<Step>) {
        match input {
            Input::Start => out.push(Step::Open(Open {
                link: LINK.into(),
                path: bus::STREAM_PATH.into(),
                kind: LinkKind::Sse,
                first: None,
                gone_on: None,
            })),
            // Asks raised or settled while away (read-only ones need their terminal too).
            Input::Up(_) if self.mode == SseMode::Primary => out.push(Step::Get(Get::new(RESYNC, bus::PENDING_PATH))),
            Input::Answer(RESYNC, answer) => match answer {
                crate::observer::Answer::Body(200, body) => {
                    if let Ok(Value::Array(list)) = serde_json::from_slice::<Value>(body) {
                        self.resync(list, cx, out);
                    }
                }
                crate::observer::Answer::Body(status, _) => out.push(Step::Log(
                    Level::Debug,
                    format!("No pending-permission list to resync from (HTTP {status})."),
                )),
                other => out.push(Step::Log(Level::Debug, format!("Pending-permission resync failed: {other:?}"))),
            },
            Input::Frame(_, text) => self.frame(text, cx, out),
            // A companion's held events are decided when their grace ends, frames or not.
            Input::Tick => self.companion(None, cx, out),
            Input::Down(_, why) => {
                let c = self.counts;
                let how = match why {
                    Down::Closed(_) => "closed".to_owned(),
                    Down::Failed(e) | Down::Oversized(e) => e.to_owned(),
                };
                out.push(Step::Log(
                    Level::Debug,
                    format!(
                        "SSE bridge counts ({how}): frames {}, replayed {}, unparsable {}, sessionless {}, plugin {}.",
                        c.frames, c.replayed, c.unparsable, c.sessionless, c.plugin
                    ),
                ));
            }
            _ => {}
        }
    }

    fn wake(&self) -> Option<u64> {
        self.held.front().map(|(due, _, _)| *due)
    }
}

/// `progress.task.*` transitions of a `todo.updated` snapshot against the session's last one.
fn todos(ev: &Value, session: Option<&str>, state: &mut SessionState, cx: &MapContext) -> Vec<EventDraft> {
    let next = ev.pointer("/properties/todos").cloned().unwrap_or_else(|| json!([]));
    let prev = state.extra.insert("sse_todos".into(), next.clone()).unwrap_or_else(|| json!([]));
    let mut drafts = super::diff_todos(&prev, &next, cx);
    for d in &mut drafts {
        d.session = session.map(str::to_owned);
        d.run.clone_from(&state.current_run);
    }
    drafts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_rides_every_request_when_a_password_is_set() {
        let t = |v: Value| v.as_object().cloned().unwrap();
        let with = SseObserver::new(
            OPENCODE,
            &super::super::route::ROUTE,
            true,
            false,
            &Config { password: "pw".into(), ..Config::default() },
        );
        assert_eq!(with.auth().headers, [("authorization".to_owned(), "Basic b3BlbmNvZGU6cHc=".to_owned())]);
        assert!(
            SseObserver::new(OPENCODE, &super::super::route::ROUTE, true, false, &Config::default())
                .auth()
                .headers
                .is_empty()
        );
        assert!(check(&t(json!({"username": "u", "password": "p"}))).is_empty());
        assert_eq!(check(&t(json!({"token": "t"})))[0].0, "token");
        assert_eq!(check(&t(json!({"password": 7})))[0].0, "");
    }
}
