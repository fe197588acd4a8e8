//! The OpenHands agent-server observer (`kind = "openhands"`; design record
//! `bridge-openhands-design.md`, AEP-0002 Annex A.15): a late-joining consumer of the
//! server's own multi-observer event fan-out, never a tee.
//!
//! Discovery: `GET {url}/api/conversations/search` every `poll_ms` (paged, at most
//! [`MAX_CONVERSATIONS`] watched); each conversation gets its own socket,
//! `GET /sockets/events/{conversation_id}` upgraded to a WebSocket (`ws://` or `wss://` over
//! the transport's rustls configuration). The conversation is the AEP `session`
//! (`session.started`, `client.name = "openhands-agent-server"`, on its first event; the
//! server opens every socket with the conversation's state); every
//! transport-shaped event is mapped by the pure `aep_adapters::protocols::openhands`
//! (`Conversation`: the event table, runs synthesized from `execution_status`, the vendor-id
//! dedupe). `StreamingDeltaEvent` needs `deltas = true`; `TokenEvent` never maps.
//!
//! The never-send posture: with `api_key` set the socket's first message is the auth frame
//! `{"type": "auth", "session_api_key": ...}`, and that is the only frame this bridge ever
//! writes on it, gated or not (REST reads carry the key as `X-Session-API-Key`).
//!
//! Replay and resume: the socket asks no replay (`resend_mode` unset). The server subscribes
//! a socket before it replays, and its live fan-out overtakes its own replay (a tool's
//! outcome arrives ahead of the request that caused it), so the history is read over REST
//! instead: `GET /api/conversations/{id}/events/search`, paged, in the server's log order,
//! from the resume point on (`timestamp__gte`, inclusive; the first attach reads it all).
//! Live frames that arrive meanwhile are held and mapped after the history, in arrival
//! order; the overlap is absorbed by the vendor-id dedupe (4096 ids per conversation). The
//! resume point is the earliest vendor time of the last 32 persisted events delivered (live
//! delivery order is not strictly timestamp order). Every socket opens with the server's push
//! of the conversation's current `full_state`: mapped as `state.snapshot` but not as a status
//! transition, since the history carries the transitions in order.
//!
//! The durable cursor: after each batch the pipeline took, the conversation's resume point,
//! whether its session started, and its run synthesis
//! ([`Checkpoint`](aep_adapters::protocols::openhands::Checkpoint)) are written atomically
//! to `{data_dir}/state/openhands/{bridge}/{conversation}.json`. A restarted bridge (a new
//! epoch, AEP-0001 §7 rule 2) resumes after it: no second `session.started`, the run
//! counter and the open run go on, and nothing the cursor covers is mapped again, so no run
//! reaches a second terminal (AEP-0002 §2 convention 5). Written after the pipeline took
//! the events, a crash in between loses them (a legal gap) rather than doubling them. A
//! cursor goes when the server reports its conversation gone (see below), or, for one
//! deleted while no bridge watched it, once the server's whole listing lacks it and nothing
//! wrote it for `cursor_ttl_hours` (30 days; looked over at start, then hourly). A
//! finished conversation keeps its cursor: it may run again.
//!
//! The transport's reconnect supervisor backs reconnects off exponentially with 20 % jitter
//! (reset by a connection that delivered frames and stayed up; a wait also ends when
//! discovery finds the conversation deleted); a socket silent for `idle_timeout_ms` (the
//! server pings every 20 s) is taken for dead. A message over `max_frame_bytes` ends the
//! connection (WebSocket framing cannot skip one in place): it is counted and the socket
//! resumed; the history read after it skips an event over the bound by size. A history page
//! is read to a bound of its own (4 MiB, or one `max_frame_bytes` event and its page): a
//! page over it is asked again with half the `limit`, and an event over it alone is skipped
//! by size, so no page is ever retried as is.
//! The conversation is gone, and its watch ends, on close 4004, or when the server's whole
//! listing lacks it and `GET /api/conversations/{id}` answers 404 (the server leaves a
//! deleted conversation's open sockets open and silent); 4001 (the key was refused) is
//! retried with backoff and logged.
//!
//! The control gate (`control = true`, honoured only when an answer can reach the bridge:
//! a token or a relay). Off, a `waiting_for_confirmation` ask is read-only: no options, no
//! `respond_via` (the pinned fixture). On, it gains `approve` / `deny` options and
//! `respond_via: ["control"]` and is registered with the control loop as a reply route:
//! `control.attention.respond` becomes
//! `POST {url}/api/conversations/{id}/events/respond_to_confirmation` with `{"accept": true}`
//! or `{"accept": false, "reason": text | "User rejected the action."}`; the REST answer is
//! the ack (2xx `control.accepted`; another status `refused`; unreachable `busy`; no answer
//! within `reply_guard_ms` `accepted`: the write may still land). The outcome has one source,
//! the observed status flip out of `waiting_for_confirmation`: after a delivered answer it
//! is `attention.answered` + `attention.resolved`, both `cause` = the command (AEP-0004 §5);
//! a flip with no answer of ours in flight is the plain observed `attention.resolved`.
//! The design record's other four gated writes (`control.pause`, `control.resume`,
//! `x.openhands.control.send_input`, `x.openhands.control.interrupt`) are not built: this
//! bridge's command plane declares and routes `control.attention.respond` only.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::protocols::Options;
use aep_adapters::protocols::openhands::{Checkpoint, Conversation, auth_frame};
use aep_adapters::{EventDraft, MapContext};
use aep_schemas::{Capture, Event};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::{BridgeConfig, Deps};
use crate::attention::Pending;
use crate::control::{Applied, ReplyRoute, RouteVerdict};
use crate::pipeline::Stamped;
use crate::time::now_ms;
use crate::transport::reconnect::{Ended, Link, Policy, Retry, supervise};
use crate::transport::ws::{self, WsError, WsOptions};
use crate::transport::{Headers, HttpClient, HttpOptions};

/// Conversations watched at most per server.
pub const MAX_CONVERSATIONS: usize = 256;
/// Ended conversations remembered so discovery does not re-attach them.
const GONE: usize = 4096;
/// How often the cursors of unlisted conversations are looked over for expiry.
const SWEEP_EVERY: Duration = Duration::from_secs(3600);
/// Pages of the conversation search read per poll (100 conversations a page).
const SEARCH_PAGES: usize = 10;
/// Vendor times remembered for the resume point.
const RECENT_TS: usize = 32;
/// Events a history page asks for (the server's most).
const HISTORY_PAGE: usize = 100;
/// Room for a page's own JSON around one event at `max_frame_bytes`.
const PAGE_SLACK: usize = 64 << 10;
/// The last bytes of an oversized page kept for its `next_page_id`.
const PAGE_TAIL: usize = 4 << 10;
/// Vendor ids a cursor keeps for the dedupe at its resume point.
const CURSOR_IDS: usize = 256;
/// Open units whose starting event ids a conversation remembers.
const LINKS: usize = 256;
/// The vendor's own default rejection reason (`ConfirmationResponseRequest.reason`).
const DEFAULT_REJECT: &str = "User rejected the action.";
/// `session.started.client.name`.
const CLIENT: &str = "openhands-agent-server";

/// Why the observer could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The section is incomplete (`config validate` reports it too).
    #[error("bridges.{0}: url is required")]
    Incomplete(String),
    /// The HTTP client could not be built.
    #[error("bridges.{0}: {1}")]
    Client(String, crate::transport::http::ClientError),
    /// The TLS options are unusable.
    #[error("bridges.{0}: tls.{1}")]
    Tls(String, crate::transport::tls::TlsError),
}

/// Starts the observer of `[bridges.<name>]`; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, StartError> {
    let shared = Arc::new(Shared::new(name, cfg, deps)?);
    Ok(tokio::spawn(discover(shared, shutdown)))
}

/// What every conversation's watch shares.
struct Shared {
    name: String,
    agent: String,
    /// `http(s)://host[:port][/prefix]`, no trailing `/`.
    base: String,
    /// The same as `ws(s)://`.
    ws_base: String,
    api_key: String,
    /// The configured extra headers (the socket's upgrade request; never the key).
    headers: Headers,
    tls: Option<Arc<rustls::ClientConfig>>,
    rest: HttpClient,
    deps: Deps,
    gated: bool,
    opts: Options,
    reconnect: Policy,
    timeout: Duration,
    idle: Option<Duration>,
    max_frame: usize,
    guard: Duration,
    poll: Duration,
    /// The bridge's state folder (`{data_dir}/state`): the conversations' cursors.
    state_dir: Option<PathBuf>,
    /// How long an unlisted conversation's untouched cursor is kept (`None`: forever).
    cursor_ttl: Option<Duration>,
}

impl Shared {
    fn new(name: &str, cfg: &BridgeConfig, deps: Deps) -> Result<Self, StartError> {
        let Some(url) = &cfg.url else { return Err(StartError::Incomplete(name.into())) };
        let opts = HttpOptions {
            timeout: Duration::from_millis(cfg.timeout_ms),
            headers: cfg.request_headers(),
            tls: cfg.tls.clone(),
        };
        let rest = HttpClient::new(&opts).map_err(|e| StartError::Client(name.into(), e))?;
        let base = url.as_str().trim_end_matches('/').to_owned();
        let ws_base = ws::ws_url(&base);
        let tls = ws::tls_for(&ws_base, &cfg.tls).map_err(|e| StartError::Tls(name.into(), e))?;
        let gated = cfg.answerable(deps.can_answer);
        let state_dir = deps.data_dir.as_ref().map(|d| d.join("state"));
        if cfg.control && !gated {
            tracing::warn!(
                bridge = name,
                "control = true is not honoured: it needs a token or a relay for answers to arrive."
            );
        }
        Ok(Self {
            name: name.to_owned(),
            agent: cfg.agent(),
            base,
            ws_base,
            api_key: cfg.api_key.clone(),
            headers: cfg.headers.clone(),
            tls,
            rest,
            deps,
            gated,
            opts: Options { deltas: cfg.deltas },
            reconnect: cfg.reconnect_policy(),
            timeout: Duration::from_millis(cfg.timeout_ms),
            idle: (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms)),
            max_frame: cfg.max_frame_bytes,
            guard: Duration::from_millis(cfg.reply_guard_ms),
            poll: Duration::from_millis(cfg.poll_ms().max(1)),
            state_dir,
            cursor_ttl: match cfg.cursor_ttl_hours() {
                0 => None,
                h => Some(Duration::from_secs(h.saturating_mul(3600))),
            },
        })
    }
}

/// How a conversation's watch ended.
enum End {
    /// The server no longer has the conversation (close 4004).
    Gone,
    /// The pipeline closed: the bridge is shutting down.
    Pipeline,
    /// Shutdown.
    Shutdown,
}

/// The discovery loop: polls the server's conversation list and watches each conversation.
async fn discover(sh: Arc<Shared>, shutdown: CancellationToken) {
    tracing::info!(bridge = %sh.name, url = %sh.base, agent = %sh.agent, control = sh.gated, "OpenHands bridge starting.");
    // Each watched conversation and the token that ends its watch when it is deleted.
    let mut live: HashMap<String, CancellationToken> = HashMap::new();
    let mut gone: (HashSet<String>, VecDeque<String>) = Default::default();
    let mut tasks: JoinSet<(String, End)> = JoinSet::new();
    let mut full_warned = false;
    let mut swept: Option<tokio::time::Instant> = None;
    loop {
        match search(&sh).await {
            Ok(listing) => {
                // Only a whole listing tells an unlisted conversation from one past its pages.
                if listing.complete {
                    if swept.is_none_or(|t| t.elapsed() >= SWEEP_EVERY) {
                        swept = Some(tokio::time::Instant::now());
                        sweep(&sh, listing.ids.iter().chain(live.keys()).cloned().collect()).await;
                    }
                    // The server keeps a deleted conversation's open sockets open and silent:
                    // its absence from the listing, confirmed by a 404, is the only sign.
                    let listed: HashSet<&String> = listing.ids.iter().collect();
                    for (id, deleted) in live.iter().filter(|(id, _)| !listed.contains(id)) {
                        if !deleted.is_cancelled() && conversation_deleted(&sh, id).await {
                            deleted.cancel();
                        }
                    }
                }
                for id in listing.ids {
                    if live.contains_key(&id) || gone.0.contains(&id) {
                        continue;
                    }
                    if live.len() >= MAX_CONVERSATIONS {
                        if !full_warned {
                            full_warned = true;
                            tracing::warn!(bridge = %sh.name, max = MAX_CONVERSATIONS, "Too many conversations: the rest are not watched.");
                        }
                        break;
                    }
                    let deleted = CancellationToken::new();
                    live.insert(id.clone(), deleted.clone());
                    tasks.spawn(watch(sh.clone(), id, shutdown.clone(), deleted));
                }
            }
            Err(e) => tracing::warn!(bridge = %sh.name, error = %e, "Conversation discovery failed; retrying."),
        }
        let sleep = tokio::time::sleep(sh.poll);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = &mut sleep => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    let Ok((id, end)) = done else { continue };
                    live.remove(&id);
                    match end {
                        End::Gone => {
                            gone.0.insert(id.clone());
                            gone.1.push_back(id);
                            if gone.1.len() > GONE && let Some(old) = gone.1.pop_front() {
                                gone.0.remove(&old);
                            }
                        }
                        End::Pipeline => {
                            tracing::info!(bridge = %sh.name, "The pipeline closed; the OpenHands bridge stops.");
                            return;
                        }
                        End::Shutdown => return,
                    }
                }
            }
        }
    }
}

/// Whether the server answers 404 for the conversation (`GET /api/conversations/{id}`):
/// deleted. Anything else (an answer, an error) is not taken for a deletion.
async fn conversation_deleted(sh: &Shared, id: &str) -> bool {
    let url = format!("{}/api/conversations/{id}", sh.base);
    match sh.rest.get(&url).await {
        Ok(r) => r.status == 404,
        Err(e) => {
            tracing::debug!(bridge = %sh.name, conversation = id, error = %e, "An unlisted conversation could not be looked up.");
            false
        }
    }
}

/// A conversation id usable as a path segment: the server's ids are UUIDs.
fn conversation_id_ok(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// The conversations the server lists.
struct Listing {
    ids: Vec<String>,
    /// Every page was read (none left past [`SEARCH_PAGES`]).
    complete: bool,
}

/// The conversation ids the server lists (`GET /api/conversations/search`, paged).
async fn search(sh: &Shared) -> Result<Listing, String> {
    let mut ids = Vec::new();
    let mut page: Option<String> = None;
    for _ in 0..SEARCH_PAGES {
        let mut url = format!("{}/api/conversations/search?limit=100", sh.base);
        if let Some(p) = &page {
            url.push_str("&page_id=");
            url.extend(url::form_urlencoded::byte_serialize(p.as_bytes()));
        }
        let r = sh.rest.get(&url).await.map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("GET {url}: HTTP {}", r.status));
        }
        let v: Value = serde_json::from_slice(&r.body).map_err(|e| format!("GET {url}: {e}"))?;
        for item in v.get("items").and_then(Value::as_array).into_iter().flatten() {
            match item.get("id").and_then(Value::as_str) {
                Some(id) if conversation_id_ok(id) => ids.push(id.to_owned()),
                _ => tracing::debug!(bridge = %sh.name, "A listed conversation without a usable id."),
            }
        }
        page = v.get("next_page_id").and_then(Value::as_str).map(str::to_owned);
        if page.is_none() {
            break;
        }
    }
    Ok(Listing { ids, complete: page.is_none() })
}

/// Removes the expired cursors of the conversations not in `listed` ([`sweep_cursors`]).
async fn sweep(sh: &Shared, listed: HashSet<String>) {
    let (Some(state), Some(ttl)) = (&sh.state_dir, sh.cursor_ttl) else { return };
    let dir = Cursor::dir(state, &sh.name);
    let now = std::time::SystemTime::now();
    let Ok(removed) = tokio::task::spawn_blocking(move || sweep_cursors(&dir, &listed, ttl, now)).await else { return };
    for (id, r) in removed {
        match r {
            Ok(()) => tracing::info!(bridge = %sh.name, conversation = %id,
                "The cursor of a conversation the server no longer lists expired; removed."),
            Err(e) => tracing::warn!(bridge = %sh.name, conversation = %id, error = %e,
                "An expired cursor could not be removed."),
        }
    }
}

/// Removes the cursors in `dir` that nothing wrote for `ttl` before `now` and whose
/// conversation is not in `listed`: deleted while no bridge watched it, so no socket ever
/// reported it gone. A listed conversation's cursor stays however old: without it the
/// conversation's history would be mapped again. Returns each conversation whose cursor
/// was found expired, with the removal's outcome.
fn sweep_cursors(
    dir: &Path,
    listed: &HashSet<String>,
    ttl: Duration,
    now: std::time::SystemTime,
) -> Vec<(String, std::io::Result<()>)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // `{id}.json` and a `{id}.json.tmp` a crash left
        let Some((id, _)) = name.split_once(".json") else { continue };
        if !conversation_id_ok(id) || listed.contains(id) {
            continue;
        }
        let age = entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| now.duration_since(t).ok());
        if age.is_some_and(|a| a >= ttl) {
            out.push((id.to_owned(), std::fs::remove_file(entry.path())));
        }
    }
    out
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

/// Why a connection ended.
enum Stop {
    /// Reconnect after a wait.
    Retry(String),
    /// A message passed `max_frame_bytes`.
    Oversized(String),
    /// The server has no such conversation (close 4004).
    Gone,
    /// The pipeline is closed.
    Pipeline,
}

/// One conversation's watch: its socket, its mapping state, its confirmation route.
struct Watch {
    sh: Arc<Shared>,
    conv: Conversation,
    route: Arc<Route>,
    cx: MapContext,
    /// The vendor times of the last events delivered: the resume point is the earliest
    /// (delivery order is not quite timestamp order).
    recent_ts: VecDeque<String>,
    started: bool,
    /// Where the conversation's cursor is kept (none without a data folder).
    cursor: Option<PathBuf>,
    /// The connection's state push is still to come.
    opening: bool,
    /// The open units' correlation keys -> the ids of their starting events (a run, a tool
    /// call, an ask), oldest first: kept in the cursor, so an outcome mapped after a restart
    /// still names its cause (AEP-0002 §2 convention 1).
    links: VecDeque<(String, String)>,
    counts: Counts,
    /// Cancelled by discovery when the server no longer has the conversation.
    deleted: CancellationToken,
}

/// Watches one conversation until the server reports it gone (close 4004, or `deleted`
/// cancelled by discovery), the pipeline closes, or `shutdown`.
async fn watch(sh: Arc<Shared>, id: String, shutdown: CancellationToken, deleted: CancellationToken) -> (String, End) {
    let route = Arc::new(Route {
        rest: sh.rest.clone(),
        url: format!("{}/api/conversations/{id}/events/respond_to_confirmation", sh.base),
        guard: sh.guard,
        ask: Mutex::new(None),
        acks: Mutex::new(HashMap::new()),
    });
    let cursor = sh.state_dir.as_ref().map(|d| Cursor::path(d, &sh.name, &id));
    let saved = cursor.as_deref().and_then(|p| Cursor::load(p, &sh.name, &id));
    let (conv, started, recent_ts, ask, links) = match saved {
        Some(c) => {
            tracing::info!(bridge = %sh.name, conversation = %id, after = ?c.after, runs = c.conversation.runs,
                "Resuming the conversation after its cursor.");
            let conv = Conversation::resume(id.clone(), sh.opts, c.conversation);
            (conv, c.started, c.after.into_iter().collect(), c.ask, c.links)
        }
        None => (Conversation::new(id.clone(), sh.opts), false, VecDeque::new(), None, VecDeque::new()),
    };
    if let Some(a) = ask {
        // The confirmation an earlier process raised, still pending when it stopped.
        let p = Pending::from_request(a.id, &sh.agent, id.clone(), a.run, a.subject, &a.data, now_ms());
        sh.deps.book.open(p.clone());
        route.replace(p.clone());
        if sh.gated {
            sh.deps.control.register_route(p, route.clone());
        }
    }
    let mut w = Watch {
        cx: sh.deps.cx.clone(),
        conv,
        sh,
        route,
        recent_ts,
        started,
        cursor,
        opening: false,
        links,
        counts: Counts::default(),
        deleted,
    };
    let name = format!("bridges.{} conversation {id}", w.sh.name);
    let policy = w.sh.reconnect.clone();
    let end = supervise(&name, &policy, Some(&shutdown), &mut w).await.unwrap_or(End::Shutdown);
    (id, end)
}

impl Link for Watch {
    type Output = End;

    async fn session(&mut self) -> Ended<End> {
        let frames = self.counts.frames;
        let deleted = self.deleted.clone();
        let ended = tokio::select! {
            _ = deleted.cancelled() => Err(Stop::Gone),
            r = self.connection() => r,
        };
        let (name, id) = (self.sh.name.clone(), self.conv.id().to_owned());
        let retry = match ended {
            Ok(()) => Retry::closed(),
            Err(Stop::Gone) => return Ended::Stop(self.gone()),
            Err(Stop::Pipeline) => return Ended::Stop(End::Pipeline),
            Err(Stop::Oversized(e)) => {
                self.counts.oversized += 1;
                tracing::warn!(bridge = %name, conversation = %id, error = %e, max_frame_bytes = self.sh.max_frame,
                    "An oversized event was dropped; resuming (the history replay skips it by size).");
                Retry::failed(format!("an oversized event: {e}"))
            }
            Err(Stop::Retry(e)) => Retry::failed(e),
        };
        let c = self.counts;
        tracing::debug!(bridge = %name, conversation = %id, frames = c.frames, fresh = c.fresh, replayed = c.replayed,
            held = c.held, unparsable = c.unparsable, oversized = c.oversized, "OpenHands bridge counts.");
        // A connection that delivered frames was up (a refused key, close 4001, delivers none).
        Ended::Retry(retry.was_established(self.counts.frames > frames))
    }

    /// Discovery may find the conversation deleted while the watch waits to reconnect.
    async fn pause(&mut self, until: tokio::time::Instant) -> Option<End> {
        let deleted = self.deleted.clone();
        tokio::select! {
            _ = deleted.cancelled() => Some(self.gone()),
            _ = tokio::time::sleep_until(until) => None,
        }
    }
}

/// What one read off the socket gave.
enum Read {
    /// A text frame.
    Text(String),
    /// A ping, pong or binary frame: nothing to map.
    Skip,
    /// The socket ended without a close code.
    Closed,
}

/// Reads the socket's next message (`idle`: how long it may stay silent).
async fn read<S>(stream: &mut S, idle: Option<Duration>, url: &str) -> Result<Read, Stop>
where
    S: futures_util::Stream<Item = Result<Message, tungstenite::Error>> + Unpin,
{
    let next = stream.next();
    let got = match idle {
        Some(idle) => match tokio::time::timeout(idle, next).await {
            Ok(r) => r,
            Err(_) => return Err(Stop::Retry(format!("{url}: silent for {idle:?}"))),
        },
        None => next.await,
    };
    match got {
        None => Ok(Read::Closed),
        Some(Err(tungstenite::Error::Capacity(e))) => Err(Stop::Oversized(e.to_string())),
        Some(Err(e)) => Err(Stop::Retry(e.to_string())),
        Some(Ok(Message::Text(t))) => Ok(Read::Text(t.as_str().to_owned())),
        Some(Ok(Message::Close(f))) => match f.as_ref().map(|f| u16::from(f.code)) {
            Some(4004) => Err(Stop::Gone),
            Some(4001) => Err(Stop::Retry("the server refused the session API key (close 4001)".into())),
            Some(code) => Err(Stop::Retry(format!("closed by the server ({code})"))),
            None => Ok(Read::Closed),
        },
        // Pings are answered by the WebSocket layer; binary frames are not the protocol.
        Some(Ok(_)) => Ok(Read::Skip),
    }
}

/// A conversation's persisted history, in the server's log order.
struct History {
    items: Vec<Value>,
    /// Events skipped for passing `max_frame_bytes` (or, alone on a page, the page bound).
    oversized: u64,
}

/// One history page's answer, read to at most the page bound.
enum Page {
    /// The whole page.
    Whole(Value),
    /// The answer passed the bound; with a tail read, the page after it as the answer's
    /// last bytes name it (`Some(None)`: the history ends there; `None`: not known).
    Over(Option<Option<String>>),
}

/// The conversation's persisted events from vendor time `after` on (all of them without
/// one): `GET /api/conversations/{id}/events/search`, paged, in the server's log order (its
/// default `TIMESTAMP` order walks the append-only log). An event over `max_frame_bytes` is
/// skipped and counted, as the socket would drop it.
///
/// A page is read to at most [`page_bytes`]: a page over it is asked again with half the
/// `limit` (the server takes 1..=100), and an event that passes it alone is skipped by
/// size, reading on at the page its answer names last. When that answer cannot name it,
/// the history ends there (a gap, logged): a page over the bound never becomes a retry.
async fn history(sh: &Shared, id: &str, after: Option<String>) -> Result<History, String> {
    let mut out = History { items: Vec::new(), oversized: 0 };
    let mut page: Option<String> = None;
    let mut limit = HISTORY_PAGE;
    let mut shrunk = false;
    let cap = page_bytes(sh.max_frame);
    loop {
        let mut url = format!("{}/api/conversations/{id}/events/search?limit={limit}", sh.base);
        if let Some(ts) = &after {
            url.push_str("&timestamp__gte=");
            url.extend(url::form_urlencoded::byte_serialize(ts.as_bytes()));
        }
        if let Some(p) = &page {
            url.push_str("&page_id=");
            url.extend(url::form_urlencoded::byte_serialize(p.as_bytes()));
        }
        let next = match read_page(sh, &url, cap, limit == 1).await? {
            Page::Over(_) if limit > 1 => {
                if !shrunk {
                    shrunk = true;
                    tracing::info!(bridge = %sh.name, conversation = %id, page_bytes = cap,
                        "A history page passed its bound; reading smaller pages.");
                }
                limit = (limit / 2).max(1);
                continue;
            }
            Page::Over(next) => {
                out.oversized += 1;
                tracing::warn!(bridge = %sh.name, conversation = %id, page_bytes = cap,
                    "An event in the history passed the page bound alone and was skipped.");
                match next {
                    Some(next) => next,
                    None => {
                        tracing::warn!(bridge = %sh.name, conversation = %id,
                            "The oversized page did not name the next one; the history read stops there (a gap).");
                        return Ok(out);
                    }
                }
            }
            Page::Whole(v) => {
                let Some(items) = v.get("items").and_then(Value::as_array) else {
                    return Err(format!("GET {url}: no items"));
                };
                for item in items {
                    if item.to_string().len() > sh.max_frame {
                        out.oversized += 1;
                        tracing::warn!(bridge = %sh.name, conversation = %id, max_frame_bytes = sh.max_frame,
                            "An oversized event in the history was skipped.");
                    } else {
                        out.items.push(item.clone());
                    }
                }
                limit = (limit * 2).min(HISTORY_PAGE);
                v.get("next_page_id").and_then(Value::as_str).map(str::to_owned)
            }
        };
        // A page that does not move on would loop forever: the history ends there.
        if next.is_none() || next == page {
            return Ok(out);
        }
        page = next;
    }
}

/// The most a history page's answer may hold: enough for one event at `max_frame_bytes`
/// and the page around it, and never below the bridge's usual 4 MiB reply bound.
fn page_bytes(max_frame: usize) -> usize {
    (4 << 20).max(max_frame.saturating_add(PAGE_SLACK))
}

/// Reads one history page to at most `cap` bytes. Past the bound the answer is dropped,
/// unless `tail`: then it is read to its end keeping only its last bytes, where the server
/// puts `next_page_id` (the request's timeout still bounds it).
async fn read_page(sh: &Shared, url: &str, cap: usize, tail: bool) -> Result<Page, String> {
    let mut s = sh.rest.get_stream(url).await.map_err(|e| e.to_string())?;
    if s.status != 200 {
        return Err(format!("GET {url}: HTTP {}", s.status));
    }
    let mut body = Vec::new();
    let mut over = false;
    loop {
        let chunk = match s.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            // The tail is lost with the connection: the next page is not known.
            Err(_) if over => return Ok(Page::Over(None)),
            Err(e) => return Err(e.to_string()),
        };
        if !over && body.len() + chunk.len() <= cap {
            body.extend_from_slice(&chunk);
            continue;
        }
        if !tail {
            return Ok(Page::Over(None));
        }
        over = true;
        body.extend_from_slice(&chunk);
        if body.len() > PAGE_TAIL {
            body.drain(..body.len() - PAGE_TAIL);
        }
    }
    if over {
        return Ok(Page::Over(next_page_in_tail(&body)));
    }
    serde_json::from_slice(&body).map(Page::Whole).map_err(|e| format!("GET {url}: {e}"))
}

/// The `next_page_id` a page's JSON ends with (`"next_page_id": "..."}` or `null`): the
/// server's `EventPage` serializes it after `items`, so it is in the answer's last bytes.
fn next_page_in_tail(tail: &[u8]) -> Option<Option<String>> {
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

/// A conversation's durable cursor, `{data_dir}/state/openhands/{bridge}/{conversation}.json`:
/// whether its session started, the vendor time the history replay resumes from, and the
/// mapping state. A restarted bridge resumes after it: nothing it covers is mapped again.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Cursor {
    started: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    conversation: Checkpoint,
    /// The open units' correlation keys and the ids of their starting events.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    links: VecDeque<(String, String)>,
    /// The confirmation still pending: a restart re-opens it, so the status flip that
    /// settles it resolves that request (and under the gate it stays answerable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ask: Option<SavedAsk>,
}

/// A pending confirmation, as a cursor keeps it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct SavedAsk {
    id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subject: Option<String>,
    data: serde_json::Map<String, Value>,
}

impl SavedAsk {
    fn of(p: &Pending) -> Self {
        let mut data = serde_json::Map::new();
        data.insert("kind".into(), json!(p.kind));
        if let Some(prompt) = &p.prompt {
            data.insert("prompt".into(), json!(prompt));
        }
        if !p.options.is_null() {
            data.insert("options".into(), p.options.clone());
        }
        Self { id: p.id.clone(), run: p.run.clone(), subject: p.tool.clone(), data }
    }
}

impl Cursor {
    /// The folder of one bridge's cursors.
    fn dir(state_dir: &Path, bridge: &str) -> PathBuf {
        let bridge: String =
            bridge.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect();
        state_dir.join("openhands").join(bridge)
    }

    fn path(state_dir: &Path, bridge: &str, id: &str) -> PathBuf {
        Self::dir(state_dir, bridge).join(format!("{id}.json"))
    }

    /// The saved cursor, if any; an unreadable one is reported and not trusted.
    fn load(path: &Path, bridge: &str, id: &str) -> Option<Self> {
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
            Err(e) => {
                tracing::warn!(bridge, conversation = id, path = %path.display(), error = %e,
                    "The conversation's cursor is unreadable; its history is mapped from the start.");
                return None;
            }
        };
        match serde_json::from_slice(&text) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(bridge, conversation = id, path = %path.display(), error = %e,
                    "The conversation's cursor is not valid; its history is mapped from the start.");
                None
            }
        }
    }

    /// Writes the cursor atomically: a temporary file, fsynced, renamed over the old one.
    fn store(&self, path: &Path) -> std::io::Result<()> {
        let dir = path.parent().ok_or_else(|| std::io::Error::other("no folder"))?;
        std::fs::create_dir_all(dir)?;
        let tmp = path.with_extension("json.tmp");
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            serde_json::to_writer(&mut f, self)?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, path)
    }
}

impl Watch {
    /// The socket URL: live frames only; the history comes over REST ([`history`]).
    fn socket_url(&self) -> String {
        format!("{}/sockets/events/{}", self.sh.ws_base, self.conv.id())
    }

    /// Where the history replay starts: the earliest vendor time among the last events
    /// delivered (the search is inclusive; the overlap is absorbed by the vendor-id dedupe).
    fn resume_ts(&self) -> Option<String> {
        self.recent_ts.iter().min().cloned()
    }

    /// One connection: open the live socket, replay the history in the server's order while
    /// the live frames wait, map the held frames, then read live until the socket ends.
    ///
    /// The server subscribes a socket before it replays anything, and its live fan-out
    /// overtakes its own `resend_mode` replay (a tool's outcome arrives ahead of the request
    /// that caused it). So the socket asks no replay: the history is read over REST in the
    /// server's log order ([`history`]), every live frame that arrives meanwhile is held, and
    /// the held frames are mapped after the history, in arrival order, deduped by vendor id.
    async fn connection(&mut self) -> Result<(), Stop> {
        let url = self.socket_url();
        let opts = WsOptions {
            headers: self.sh.headers.clone(),
            bearer: None,
            tls: self.sh.tls.clone(),
            max_message: Some(self.sh.max_frame),
            timeout: self.sh.timeout,
        };
        let ws = match ws::connect(&url, &opts).await {
            Ok(ws) => ws,
            Err(WsError::Status { status: 404, .. }) => {
                return Err(Stop::Retry(format!("{url}: HTTP 404 (is this an OpenHands agent server?)")));
            }
            Err(e) => return Err(Stop::Retry(e.to_string())),
        };
        let (mut sink, mut stream) = ws.split();
        if !self.sh.api_key.is_empty() {
            // The only frame this bridge ever writes on the socket (the design record's
            // never-send posture, gated or not).
            sink.send(Message::text(auth_frame(&self.sh.api_key).to_string()))
                .await
                .map_err(|e| Stop::Retry(format!("{url}: auth frame: {e}")))?;
        }
        tracing::info!(bridge = %self.sh.name, conversation = %self.conv.id(), "Event socket connected.");
        // The server subscribes the socket before it pushes the state every socket opens
        // with: once that first frame is in, whatever the server persists next reaches the
        // socket, so the history read from here on misses nothing.
        let mut held: Vec<String> = Vec::new();
        loop {
            match read(&mut stream, self.sh.idle, &url).await? {
                Read::Text(t) => {
                    held.push(t);
                    break;
                }
                Read::Skip => {}
                Read::Closed => return Ok(()),
            }
        }
        let history = {
            let fetch = history(&self.sh, self.conv.id(), self.resume_ts());
            tokio::pin!(fetch);
            loop {
                tokio::select! {
                    h = &mut fetch => break h,
                    r = read(&mut stream, self.sh.idle, &url) => match r? {
                        Read::Text(t) => held.push(t),
                        Read::Skip => {}
                        Read::Closed => return Ok(()),
                    },
                }
            }
        };
        let history = history.map_err(Stop::Retry)?;
        self.counts.held += held.len() as u64;
        self.counts.oversized += history.oversized;
        for ev in history.items {
            self.counts.frames += 1;
            self.event(ev, false).await?;
        }
        self.opening = true;
        for t in &held {
            self.frame(t).await?;
        }
        self.save();
        loop {
            match read(&mut stream, self.sh.idle, &url).await? {
                Read::Text(t) => {
                    self.frame(&t).await?;
                    self.save();
                }
                Read::Skip => {}
                Read::Closed => return Ok(()),
            }
        }
    }

    /// One text frame off the socket.
    async fn frame(&mut self, text: &str) -> Result<(), Stop> {
        self.counts.frames += 1;
        match serde_json::from_str(text) {
            Ok(v @ Value::Object(_)) => self.event(v, true).await,
            _ => {
                self.counts.unparsable += 1;
                Ok(())
            }
        }
    }

    /// One transport event, off the socket (`live`) or out of the history.
    async fn event(&mut self, ev: Value, live: bool) -> Result<(), Stop> {
        let full_state = ev.get("key").and_then(Value::as_str) == Some("full_state");
        if let Some(ts) = ev.get("timestamp").and_then(Value::as_str)
            && !full_state
        {
            // The state push is stamped "now" and never persisted: not a resume point.
            self.recent_ts.push_back(ts.to_owned());
            if self.recent_ts.len() > RECENT_TS {
                self.recent_ts.pop_front();
            }
        }
        if ev.get("id").and_then(Value::as_str).is_some_and(|id| self.conv.seen(id)) {
            self.counts.replayed += 1;
            return Ok(());
        }
        self.counts.fresh += 1;
        // The state every socket opens with: the server takes it after it subscribed the
        // socket, so live frames published meanwhile may come first. The connection's first
        // `full_state` is that push: the present, visibility, not a transition (the
        // history carries the transitions in order).
        let opening = live
            && self.opening
            && full_state
            && ev.get("kind").and_then(Value::as_str) == Some("ConversationStateUpdateEvent");
        let drafts = if opening {
            self.opening = false;
            self.conv.map_opening_state(&ev, &self.cx)
        } else {
            self.conv.map(&ev, &self.cx)
        };
        self.publish(drafts).await
    }

    /// Writes the conversation's cursor after the pipeline took what it covers (a crash in
    /// between loses those events, a legal gap, AEP-0001 §7 rule 2; none is mapped twice).
    fn save(&self) {
        let Some(path) = &self.cursor else { return };
        let ask = self.route.ask.lock().ok().and_then(|a| a.as_ref().map(|a| SavedAsk::of(&a.pending)));
        let c = Cursor {
            started: self.started,
            after: self.resume_ts(),
            conversation: self.conv.checkpoint(CURSOR_IDS),
            links: self.links.clone(),
            ask,
        };
        if let Err(e) = c.store(path) {
            tracing::warn!(bridge = %self.sh.name, conversation = %self.conv.id(), path = %path.display(), error = %e,
                "The conversation's cursor could not be written; a restart would map its history again.");
        }
    }

    /// Publishes one event's drafts, with the confirmation ask raised or settled.
    async fn publish(&mut self, drafts: Vec<EventDraft>) -> Result<(), Stop> {
        let now = now_ms();
        let mut out = Vec::with_capacity(drafts.len() + 1);
        if !self.started {
            // On first sight: the server's first frame on a socket is the conversation's
            // state, so a conversation closed with 4004 never starts a session.
            self.started = true;
            let mut d = EventDraft::new("session.started", Capture::Metadata);
            d.session = Some(self.conv.id().to_owned());
            d.data.insert("client".into(), json!({"name": CLIENT}));
            out.push(d);
        }
        for d in drafts {
            match d.r#type.as_str() {
                "attention.requested" => out.push(self.raise(d, now)),
                "attention.resolved" => out.extend(self.settle(d, now).await),
                _ => out.push(d),
            }
        }
        self.submit(out, now).await
    }

    /// Opens the ask of a `waiting_for_confirmation` flip: id minted, the book opened, and
    /// under the gate the approve/deny decoration and the reply route.
    fn raise(&mut self, mut d: EventDraft, now: u64) -> EventDraft {
        if self.sh.gated {
            // The design record's gated-on decoration; the pinned payload is the gated-off one.
            d.data.insert(
                "options".into(),
                json!([{"id": "approve", "label": "Approve"}, {"id": "deny", "label": "Deny"}]),
            );
            d.data.insert("respond_via".into(), json!(["control"]));
        }
        let id = self.sh.deps.pipeline.mint_id();
        d.id = Some(id.clone());
        let session = self.conv.id().to_owned();
        let p = Pending::from_request(id, &self.sh.agent, session, d.run.clone(), d.subject.clone(), &d.data, now);
        self.sh.deps.book.open(p.clone());
        if let Some(old) = self.route.replace(p.clone()) {
            self.sh.deps.control.forget(&old.pending.id);
            self.sh.deps.book.take(&old.pending.id);
        }
        if self.sh.gated {
            self.sh.deps.control.register_route(p, self.route.clone());
        }
        d
    }

    /// The status left `waiting_for_confirmation`: the ask's outcome, from this flip only.
    async fn settle(&mut self, d: EventDraft, now: u64) -> Vec<EventDraft> {
        let resolution = d.data.get("resolution").and_then(Value::as_str).unwrap_or("answered").to_owned();
        let Some(ask) = self.route.take() else { return vec![d] };
        self.sh.deps.control.forget(&ask.pending.id);
        self.sh.deps.book.take(&ask.pending.id);
        let Some(s) = ask.settling else { return vec![ask.pending.resolved(now, &resolution)] };
        // Outcomes follow the ack (AEP-0004 §1); a refused delivery drops its signal.
        let mut acked = s.acked;
        let waited = tokio::time::timeout(self.sh.guard + Duration::from_secs(2), acked.wait_for(|a| *a)).await;
        if resolution != "answered" || !matches!(waited, Ok(Ok(_))) {
            return vec![ask.pending.resolved(now, &resolution)];
        }
        let mut answered = self.sh.deps.control.answered(&ask.pending, &s.applied, &s.command);
        answered.data.insert("via".into(), json!("control"));
        let mut resolved = ask.pending.resolved(now, "answered");
        resolved.cause = Some(s.command);
        vec![answered, resolved]
    }

    /// Publishes drafts (claiming their session under the gate) and lets the book and the
    /// control loop see what was stamped.
    async fn submit(&mut self, mut drafts: Vec<EventDraft>, now: u64) -> Result<(), Stop> {
        if drafts.is_empty() {
            return Ok(());
        }
        let deps = &self.sh.deps;
        for id in deps.book.settle(&self.sh.agent, &mut drafts, now) {
            deps.control.forget(&id);
            self.route.take_if(&id);
        }
        if self.sh.gated {
            deps.control.claim(&self.sh.agent, &drafts);
        }
        // The pipeline links a cause within its own lifetime; a unit opened before a
        // restart is linked from the cursor's memory.
        for d in &mut drafts {
            if d.cause.is_none()
                && let Some(k) = &d.cause_key
                && let Some((_, id)) = self.links.iter().find(|(key, _)| key == k)
            {
                d.cause = Some(id.clone());
            }
        }
        let keys: Vec<(Option<String>, Option<String>)> =
            drafts.iter().map(|d| (d.correlation_key.clone(), d.cause_key.clone())).collect();
        let stamped: Vec<Arc<Stamped>> = deps
            .pipeline
            .submit_drafts("openhands", self.sh.agent.clone(), drafts)
            .await
            .map_err(|_| Stop::Pipeline)?;
        for ((opens, closes), st) in keys.into_iter().zip(&stamped) {
            if let Some(k) = closes {
                self.links.retain(|(key, _)| *key != k);
            }
            if let Some(k) = opens {
                self.links.retain(|(key, _)| *key != k);
                if self.links.len() >= LINKS {
                    self.links.pop_front();
                }
                self.links.push_back((k, st.event.id.clone()));
            }
        }
        deps.book.observe(&stamped, now);
        deps.control.observe(&stamped);
        Ok(())
    }

    /// The conversation is gone (close 4004, or deleted): its watch ends with its cursor and ask.
    fn gone(&mut self) -> End {
        tracing::info!(bridge = %self.sh.name, conversation = %self.conv.id(), "The conversation is gone; no longer watched.");
        self.release();
        self.forget_cursor();
        End::Gone
    }

    /// The conversation is gone from the server: nothing will resume after its cursor.
    fn forget_cursor(&self) {
        let Some(path) = &self.cursor else { return };
        match std::fs::remove_file(path) {
            Ok(()) => {
                tracing::info!(bridge = %self.sh.name, conversation = %self.conv.id(), "The gone conversation's cursor was removed.")
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(bridge = %self.sh.name, conversation = %self.conv.id(), path = %path.display(), error = %e,
                "The gone conversation's cursor could not be removed.")
            }
        }
    }

    /// The conversation is gone: its ask takes no command any more.
    fn release(&mut self) {
        if let Some(ask) = self.route.take() {
            self.sh.deps.control.forget(&ask.pending.id);
        }
    }
}

/// The conversation's pending confirmation.
struct Ask {
    pending: Pending,
    settling: Option<Settling>,
}

/// An answer being delivered: the command, its answer, and whether its ack is out.
struct Settling {
    command: String,
    applied: Applied,
    acked: watch::Receiver<bool>,
}

/// One conversation's confirmation route (`respond_to_confirmation`). The server has one
/// confirmation plane per conversation: at most one ask is pending.
struct Route {
    rest: HttpClient,
    url: String,
    guard: Duration,
    ask: Mutex<Option<Ask>>,
    /// Command id -> its "ack published" signal, until the ack is out (or it was refused).
    acks: Mutex<HashMap<String, watch::Sender<bool>>>,
}

impl Route {
    fn replace(&self, pending: Pending) -> Option<Ask> {
        self.ask.lock().ok()?.replace(Ask { pending, settling: None })
    }

    fn take(&self) -> Option<Ask> {
        self.ask.lock().ok()?.take()
    }

    fn take_if(&self, id: &str) -> Option<Ask> {
        let mut a = self.ask.lock().ok()?;
        if a.as_ref().is_some_and(|x| x.pending.id == id) { a.take() } else { None }
    }

    async fn deliver_now(&self, request: &Pending, answer: &Applied, cmd: &Event) -> RouteVerdict {
        let invalid = |why: &str| RouteVerdict::Rejected("invalid", why.to_owned());
        if answer.values.is_some() {
            return invalid("a confirmation is answered with an option: approve or deny");
        }
        let body = match answer.option.as_deref() {
            Some("approve") => json!({"accept": true}),
            Some("deny") => json!({"accept": false, "reason": answer.text.as_deref().unwrap_or(DEFAULT_REJECT)}),
            _ => return invalid("answer with an option: approve or deny"),
        };
        {
            let Ok(mut ask) = self.ask.lock() else { return RouteVerdict::Rejected("busy", "state lock".into()) };
            match ask.as_mut() {
                Some(a) if a.pending.id == request.id => {
                    if a.settling.is_some() {
                        return invalid("another answer to this confirmation is being delivered");
                    }
                    let (tx, acked) = watch::channel(false);
                    if let Ok(mut acks) = self.acks.lock() {
                        acks.insert(cmd.id.clone(), tx);
                    }
                    // Marked before the write: the status flip may overtake the REST answer.
                    a.settling = Some(Settling { command: cmd.id.clone(), applied: answer.clone(), acked });
                }
                // The design record: a respond whose subject is not the live request is refused.
                _ => {
                    return RouteVerdict::Rejected(
                        "refused",
                        "not the conversation's live pending confirmation".into(),
                    );
                }
            }
        }
        let verdict = match tokio::time::timeout(self.guard, self.rest.post_json(&self.url, &body)).await {
            Ok(Ok(r)) if (200..300).contains(&r.status) => RouteVerdict::Accepted,
            Ok(Ok(r)) => {
                let snippet = String::from_utf8_lossy(&r.body[..r.body.len().min(200)]).into_owned();
                RouteVerdict::Rejected("refused", format!("the server answered HTTP {}: {snippet}", r.status))
            }
            Ok(Err(e)) => RouteVerdict::Rejected("busy", format!("the server is unreachable: {e}")),
            // Will-try: the write may still land; the outcome is the status flip.
            Err(_) => RouteVerdict::Accepted,
        };
        if verdict != RouteVerdict::Accepted {
            if let Ok(mut acks) = self.acks.lock() {
                acks.remove(&cmd.id);
            }
            if let Ok(mut ask) = self.ask.lock()
                && let Some(a) = ask.as_mut()
                && a.settling.as_ref().is_some_and(|s| s.command == cmd.id)
            {
                a.settling = None;
            }
        }
        verdict
    }
}

impl ReplyRoute for Route {
    fn deliver<'a>(
        &'a self,
        request: &'a Pending,
        answer: &'a Applied,
        cmd: &'a Event,
    ) -> futures_util::future::BoxFuture<'a, RouteVerdict> {
        Box::pin(self.deliver_now(request, answer, cmd))
    }

    fn acked(&self, _request: &str, cmd: &str) {
        if let Some(tx) = self.acks.lock().ok().and_then(|mut a| a.remove(cmd)) {
            let _ = tx.send(true);
        }
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
    fn only_the_untouched_cursors_of_unlisted_conversations_expire() {
        let dir = tempfile::tempdir().unwrap();
        let (old, listed, fresh, crashed) = (
            "00000000-0000-4000-8000-00000000000a",
            "00000000-0000-4000-8000-00000000000b",
            "00000000-0000-4000-8000-00000000000c",
            "00000000-0000-4000-8000-00000000000d",
        );
        let now = std::time::SystemTime::now();
        let day = Duration::from_secs(86_400);
        for (name, age) in [
            (format!("{old}.json"), 40),
            (format!("{listed}.json"), 40),
            (format!("{fresh}.json"), 1),
            (format!("{crashed}.json.tmp"), 40),
            ("notes.txt".to_owned(), 40),
        ] {
            let f = std::fs::File::create(dir.path().join(&name)).unwrap();
            f.set_modified(now - day * age).unwrap();
        }
        let keep: HashSet<String> = [listed.to_owned()].into();
        let mut gone: Vec<String> =
            sweep_cursors(dir.path(), &keep, day * 30, now).into_iter().map(|(id, r)| r.map(|_| id).unwrap()).collect();
        gone.sort();
        assert_eq!(gone, [old, crashed]);
        let mut left: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, [format!("{listed}.json"), format!("{fresh}.json"), "notes.txt".to_owned()]);
        assert!(sweep_cursors(&dir.path().join("missing"), &keep, day, now).is_empty());
    }

    #[test]
    fn only_uuid_shaped_ids_become_socket_paths() {
        assert!(conversation_id_ok("6f1c2a3b-0000-4000-8000-1234567890ab"));
        assert!(conversation_id_ok("6f1c2a3b00004000800012345678900b"));
        for bad in ["", "../x", "a/b", "id?x=1", &"a".repeat(65)] {
            assert!(!conversation_id_ok(bad), "{bad}");
        }
    }
}
