//! The observers' recordings replayed through the pure observers (no daemon, no socket): each
//! scenario feeds an observer what its server's stand-in in `bridge/tests/observer_replay.rs`
//! sends (the links up, the REST answers, the frames in order), runs the steps it returns
//! the way the daemon's runtime does (asks tracked and settled, drafts stamped with their
//! causes linked by key), and compares the logs with the golden files the observers wrote
//! when they were still daemon code (`golden/observers/<scenario>.json`, the same files the
//! daemon's replay compares with).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

use aep_adapters::observer::{Answer, Asks, Ctx, Input, Observer, Setup, Step};
use aep_adapters::{EventDraft, MapContext};
use serde_json::{Map, Value, json};

const CAPTURE: &str = "../bridge/tests/data";

fn recording(name: &str) -> String {
    std::fs::read_to_string(Path::new(CAPTURE).join(name)).unwrap()
}

/// A tracked ask: its request's id, session and run.
struct Ask {
    id: String,
    session: String,
    run: Option<String>,
}

#[derive(Default)]
struct Book(HashMap<String, Ask>);

impl Asks for Book {
    fn knows(&self, vendor_id: &str) -> bool {
        self.0.contains_key(vendor_id)
    }
    fn open(&self, session: Option<&str>) -> Vec<(String, String)> {
        let of = |a: &&Ask| session.is_none_or(|s| a.session == s);
        self.0.iter().filter(|(_, a)| of(a)).map(|(v, _)| (v.clone(), "permission".into())).collect()
    }
}

/// What the stand-in server answers and pushes.
trait Server {
    /// The answer to `GET path`.
    fn get(&mut self, path: &str) -> (u16, Vec<u8>);
    /// What the server sends on `link` when the observer writes `text` on it.
    fn sent(&mut self, _link: &str, _text: &str) -> Vec<String> {
        Vec::new()
    }
}

/// The daemon's runtime, reduced to what a replay needs.
struct Run {
    obs: Box<dyn Observer>,
    agent: String,
    book: Book,
    ids: u64,
    /// Correlation key -> id, per session (the stamper's).
    keys: HashMap<String, HashMap<String, String>>,
    logs: BTreeMap<String, Vec<Value>>,
    /// Messages the server sent that the observer has not read yet.
    inbox: VecDeque<(String, String)>,
    links: Vec<String>,
}

impl Run {
    fn new(id: &str, table: Value, primary: bool, gated: bool) -> Self {
        let spec = aep_adapters::observers::observer(id).unwrap();
        let table = table.as_object().cloned().unwrap_or_default();
        let setup = Setup { table: &table, primary, gated, max_frame: 4 << 20 };
        let obs = (spec.build)(&setup).unwrap();
        Self {
            obs,
            agent: id.into(),
            book: Book::default(),
            ids: 0,
            keys: HashMap::new(),
            logs: BTreeMap::new(),
            inbox: VecDeque::new(),
            links: Vec::new(),
        }
    }

    fn mint(ids: &std::cell::Cell<u64>) -> String {
        ids.set(ids.get() + 1);
        format!("ev-{}", ids.get())
    }

    fn feed(&mut self, input: Input<'_>, server: &mut dyn Server) {
        let map = MapContext::default();
        let map = MapContext { attention_capture: aep_schemas::Capture::Metadata, ..map };
        let ids = std::cell::Cell::new(self.ids);
        let mut out = Vec::new();
        {
            let mint = || Self::mint(&ids);
            let cx = Ctx { now: 0, map: &map, mint: &mint, asks: &self.book, claimed: &|_| false };
            self.obs.feed(input, &cx, &mut out);
        }
        self.ids = ids.get();
        for step in out {
            match step {
                Step::Open(o) => {
                    self.links.push(o.link.clone());
                }
                Step::Get(g) => {
                    let (status, body) = server.get(&g.path);
                    self.feed(Input::Answer(g.tag, Answer::Body(status, &body)), server);
                }
                Step::Load(key) => self.feed(Input::Loaded(&key, None), server),
                Step::Send(link, text) => {
                    for m in server.sent(&link, &text) {
                        self.inbox.push_back((link.clone(), m));
                    }
                }
                Step::Publish(drafts, _) => self.publish(drafts),
                Step::Raise(r) => {
                    let (Some(id), Some(session)) = (r.draft.id.clone(), r.draft.session.clone()) else { continue };
                    self.book.0.insert(r.vendor_id, Ask { id, session, run: r.draft.run.clone() });
                }
                Step::Settle(s) => {
                    let Some(ask) = self.book.0.remove(&s.vendor_id) else {
                        self.publish(s.otherwise);
                        continue;
                    };
                    let resolved = |resolution: &str, cause: &str| {
                        let mut d = EventDraft::new("attention.resolved", aep_schemas::Capture::Metadata);
                        (d.session, d.run) = (Some(ask.session.clone()), ask.run.clone());
                        (d.subject, d.cause) = (Some(ask.id.clone()), Some(cause.to_owned()));
                        d.data.insert("resolution".into(), json!(resolution));
                        d.data.insert("latency_ms".into(), json!(0));
                        d
                    };
                    let drafts = match s.answered.filter(|_| s.resolution == Some("answered")) {
                        Some(mut a) => {
                            self.ids += 1;
                            let id = format!("ev-{}", self.ids);
                            (a.id, a.subject, a.cause, a.cause_key) =
                                (Some(id.clone()), Some(ask.id.clone()), Some(ask.id.clone()), None);
                            a.run.clone_from(&ask.run);
                            vec![a, resolved("answered", &id)]
                        }
                        None => vec![resolved(s.resolution.unwrap_or("dismissed"), &ask.id)],
                    };
                    self.publish(drafts);
                }
                _ => {}
            }
        }
    }

    /// Stamps drafts as the daemon's stamper does (ids, causes by key, the lifecycle's
    /// subject) into their session's log.
    fn publish(&mut self, mut drafts: Vec<EventDraft>) {
        aep_adapters::observer::scoped(&mut drafts);
        for d in drafts {
            let Some(session) = d.session.clone() else { continue };
            let id = d.id.clone().unwrap_or_else(|| {
                self.ids += 1;
                format!("ev-{}", self.ids)
            });
            let keys = self.keys.entry(session.clone()).or_default();
            let mut cause = d.cause.clone();
            let mut keyed = false;
            if let (None, Some(k)) = (&cause, &d.cause_key) {
                cause = keys.get(k).cloned();
                keyed = cause.is_some() && k.starts_with("attention:");
            }
            if let Some(k) = &d.correlation_key {
                keys.insert(k.clone(), id.clone());
            }
            if d.r#type == "session.ended" {
                self.keys.remove(&session);
            }
            let lifecycle = matches!(d.r#type.as_str(), "attention.answered" | "attention.resolved");
            let subject = match &d.subject {
                _ if lifecycle && keyed => cause.clone(),
                None if lifecycle => cause.clone(),
                s => s.clone(),
            };
            let mut e = Map::new();
            e.insert("id".into(), json!(id));
            e.insert("agent".into(), json!(self.agent));
            e.insert("type".into(), json!(d.r#type));
            e.insert("session".into(), json!(session));
            for (k, v) in [("run", &d.run), ("step", &d.step), ("subject", &subject), ("cause", &cause)] {
                if let Some(v) = v {
                    e.insert(k.into(), json!(v));
                }
            }
            if let Some(s) = d.severity {
                e.insert("severity".into(), serde_json::to_value(s).unwrap());
            }
            e.insert("capture".into(), serde_json::to_value(d.capture).unwrap());
            e.insert("data".into(), Value::Object(d.data));
            self.logs.entry(format!("{}/{session}.jsonl", self.agent)).or_default().push(Value::Object(e));
        }
    }

    /// Feeds the server's pending messages, in order.
    fn drain(&mut self, server: &mut dyn Server) {
        while let Some((link, text)) = self.inbox.pop_front() {
            self.feed(Input::Frame(&link, &text), server);
        }
    }

    /// The logs normalized as the daemon's replay does it.
    fn normalized(&self) -> BTreeMap<String, Vec<Value>> {
        let order = ["agent", "type", "session", "run", "step", "subject", "cause", "severity", "capture", "data"];
        self.logs
            .iter()
            .map(|(file, events)| {
                let index: HashMap<&str, usize> =
                    events.iter().enumerate().filter_map(|(i, e)| Some((e["id"].as_str()?, i))).collect();
                let out = events
                    .iter()
                    .map(|e| {
                        let mut n = Map::new();
                        for k in order {
                            let Some(v) = e.get(k) else { continue };
                            let v = match v.as_str().and_then(|s| index.get(s)) {
                                Some(i) if matches!(k, "cause" | "subject") => json!(format!("#{i}")),
                                _ => v.clone(),
                            };
                            n.insert(k.into(), v);
                        }
                        Value::Object(n)
                    })
                    .collect();
                (file.clone(), out)
            })
            .collect()
    }
}

fn golden(scenario: &str) -> BTreeMap<String, Vec<Value>> {
    let text = std::fs::read_to_string(format!("tests/golden/observers/{scenario}.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// An OpenCode-shaped server: nothing pending.
struct Opencode;

impl Server for Opencode {
    fn get(&mut self, _path: &str) -> (u16, Vec<u8>) {
        (200, b"[]".to_vec())
    }
}

fn opencode(scenario: &str, id: &str, primary: bool) {
    let mut run = Run::new(id, Value::Null, primary, false);
    let mut server = Opencode;
    run.feed(Input::Start, &mut server);
    let link = run.links[0].clone();
    run.feed(Input::Up(&link), &mut server);
    for data in recording("opencode-1.18.33-permission.sse").lines().filter_map(|l| l.strip_prefix("data: ")) {
        run.feed(Input::Frame(&link, data), &mut server);
    }
    assert_eq!(run.normalized(), golden(scenario), "{scenario}");
}

#[test]
fn opencode_primary() {
    opencode("opencode-primary", "opencode", true);
}

#[test]
fn opencode_companion() {
    let mut run = Run::new("opencode", Value::Null, false, false);
    let mut server = Opencode;
    run.feed(Input::Start, &mut server);
    let link = run.links[0].clone();
    run.feed(Input::Up(&link), &mut server);
    for data in recording("opencode-1.18.33-permission.sse").lines().filter_map(|l| l.strip_prefix("data: ")) {
        run.feed(Input::Frame(&link, data), &mut server);
    }
    assert!(run.logs.is_empty(), "a companion holds what names a session");
    assert_eq!(run.obs.wake(), Some(aep_adapters::vendors::opencode::observer::COMPANION_GRACE_MS));
    later(&mut run);
    assert_eq!(run.normalized(), golden("opencode-companion"));
}

/// Ticks once the clock passed every held event's grace (no plugin named their session).
fn later(run: &mut Run) {
    let map = MapContext::default();
    let mut out = Vec::new();
    let cx = Ctx { now: u64::MAX / 2, map: &map, mint: &|| "x".into(), asks: &run.book, claimed: &|_| false };
    run.obs.feed(Input::Tick, &cx, &mut out);
    for step in out {
        if let Step::Publish(drafts, _) = step {
            run.publish(drafts);
        }
    }
}

#[test]
fn kilocode_primary() {
    opencode("kilocode-primary", "kilocode", true);
}

/// A kap-server with one session, nothing pending; a subscription is acknowledged from the
/// recording's epoch at seq 0 and then hears the recording.
struct Kimi {
    frames: Vec<Value>,
}

impl Server for Kimi {
    fn get(&mut self, path: &str) -> (u16, Vec<u8>) {
        let data = if path.starts_with("/api/v1/sessions?") {
            json!({"items": [{"id": self.frames[0]["session_id"], "title": ""}], "has_more": false})
        } else {
            json!({"items": []})
        };
        (200, json!({"code": 0, "msg": "success", "data": data}).to_string().into_bytes())
    }

    fn sent(&mut self, _link: &str, text: &str) -> Vec<String> {
        let sub: Value = serde_json::from_str(text).unwrap();
        let ids = sub["payload"]["session_ids"].clone();
        let cursors: Map<String, Value> = ids
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s.as_str()?.to_owned(), json!({"seq": 0, "epoch": self.frames[0]["epoch"]}))))
            .collect();
        let ack = json!({"type": "ack", "id": sub["id"], "code": 0, "msg": "success",
            "payload": {"accepted": ids, "not_found": [], "resync_required": [], "cursors": cursors}});
        std::iter::once(ack.to_string()).chain(self.frames.iter().map(Value::to_string)).collect()
    }
}

fn kimi(scenario: &str, file: &str, primary: bool) {
    let frames = recording(file).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let mut server = Kimi { frames };
    let mut run = Run::new("kimi-code", json!({"token": "t", "poll_ms": 100}), primary, false);
    run.feed(Input::Start, &mut server);
    let link = run.links[0].clone();
    run.feed(Input::Up(&link), &mut server);
    run.drain(&mut server);
    assert_eq!(run.normalized(), golden(scenario), "{scenario}");
}

#[test]
fn kimi_primary_approval() {
    kimi("kimi-primary-approval", "kimi-code-0.28.0-web-approval.jsonl", true);
}

#[test]
fn kimi_primary_rejected() {
    kimi("kimi-primary-rejected", "kimi-code-0.28.0-web-rejected.jsonl", true);
}

#[test]
fn kimi_companion_approval() {
    kimi("kimi-companion-approval", "kimi-code-0.28.0-web-approval.jsonl", false);
}

/// An OpenHands agent server with one conversation whose history is the recording.
struct Openhands {
    conv: String,
    history: Vec<Value>,
}

impl Server for Openhands {
    fn get(&mut self, path: &str) -> (u16, Vec<u8>) {
        let body = if path.starts_with("/api/conversations/search") {
            json!({"items": [{"id": self.conv}], "next_page_id": null})
        } else {
            json!({"items": self.history, "next_page_id": null})
        };
        (200, body.to_string().into_bytes())
    }
}

fn openhands(scenario: &str, history: Vec<Value>, gated: bool) {
    let conv = "4c1f2a9e-7d3b-4e21-9a6f-0b8e5d2c7a10".to_owned();
    let status =
        history.iter().rev().find(|e| e["key"] == "execution_status").map_or(json!("idle"), |e| e["value"].clone());
    let now = history.last().and_then(|e| e["timestamp"].as_str()).unwrap_or_default().to_owned();
    let push = json!({"kind": "ConversationStateUpdateEvent", "id": "state-push-0", "timestamp": now,
        "source": "environment", "key": "full_state", "value": {"id": conv, "execution_status": status}});
    let mut server = Openhands { conv: conv.clone(), history };
    let mut run = Run::new("openhands", Value::Null, false, gated);
    run.feed(Input::Start, &mut server);
    assert_eq!(run.links, std::slice::from_ref(&conv));
    run.feed(Input::Up(&conv), &mut server);
    run.feed(Input::Frame(&conv, &push.to_string()), &mut server);
    assert_eq!(run.normalized(), golden(scenario), "{scenario}");
}

fn confirmation() -> Vec<Value> {
    recording("openhands-1.35.0-confirmation.jsonl").lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn openhands_confirmation_read_only() {
    openhands("openhands-confirmation", confirmation(), false);
}

#[test]
fn openhands_confirmation_gated() {
    openhands("openhands-confirmation-gated", confirmation(), true);
}

#[test]
fn openhands_exit_2() {
    let history = recording("openhands-1.58.2-exit2.jsonl")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["via"] == "history")
        .map(|v| v["frame"].clone())
        .collect();
    openhands("openhands-exit2", history, false);
}

#[test]
fn every_observer_is_found_by_its_id_and_its_kinds() {
    use aep_adapters::observers::{observer, observer_by_kind, observers};
    let ids: Vec<&str> = observers().map(|o| o.id).collect();
    assert_eq!(ids, ["kilocode", "kimi-code", "opencode", "openhands", "agui"]);
    for o in observers() {
        assert!(std::ptr::eq(observer(o.id).unwrap(), o));
        for k in o.kinds {
            assert!(std::ptr::eq(observer_by_kind(k).unwrap(), o), "{k}");
        }
    }
    assert!(observer_by_kind("cursor-sse").is_none() && observer("claude-code").is_none());
}
