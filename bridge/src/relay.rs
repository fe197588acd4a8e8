//! The upstream relay binding: a WebSocket client per agent identity (AEP-0003 §3.5, §4).
//!
//! Each connection opens with `hello` (role `emitter`, the agent's identity, and the
//! command types this bridge honours in `control.accepts`); an outbox holds emissions
//! until the hello exchange completes and keeps an event until it was written to the
//! socket; each agent's link is kept up by the transport's reconnect supervisor (one
//! reconnect per ended session, exponential backoff and jitter, the outbox still filling
//! during the wait); ping/pong keeps liveness; shutdown drains the outbox and sends `closing`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_schemas::{AEP_VERSION, Event};
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::pipeline::Stamped;
use crate::transport::TlsConfig;
use crate::transport::config::{RelayUrl, off_if_empty};
use crate::transport::reconnect::{Ended, Link, Policy, Retry, supervise};
use crate::transport::ws::{self, WsError, WsOptions};

/// `[relay]`: the upstream AEP relay binding.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RelayConfig {
    /// Upstream relay base URL (`ws://` / `wss://` / `http(s)://`); `""` disables the binding.
    #[serde(deserialize_with = "off_if_empty")]
    pub url: Option<RelayUrl>,
    /// Bearer token for the relay; empty falls back to `server.token`.
    pub token: String,
    /// Whether `/healthz` reports `ok: false` while the relay is down.
    pub required: bool,
    /// `[relay.tls]`: extra CA bundle and client certificate for `wss://` / `https://`.
    pub tls: TlsConfig,
}

impl RelayConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[relay]`:
    /// the section judges its own values; `config` prefixes the keys and adds the checks
    /// across sections. `tls` is judged with the other outbound settings there, so
    /// `config validate` lists the problems in the order it always has.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.required && self.url.is_none() {
            out.push(("required".into(), "is true but relay.url is empty".into()));
        }
        out
    }
}

/// Liveness of every upstream relay connection, for `/healthz`.
#[derive(Debug, Default)]
pub struct RelayStatus {
    configured: AtomicBool,
    live: Mutex<HashMap<String, bool>>,
}

impl RelayStatus {
    /// `true` only when a relay is configured and every agent connection is live.
    pub fn all_live(&self) -> bool {
        self.configured.load(Ordering::Acquire)
            && self.live.lock().map(|m| !m.is_empty() && m.values().all(|v| *v)).unwrap_or(false)
    }

    fn set(&self, agent: &str, live: bool) {
        if let Ok(mut m) = self.live.lock() {
            m.insert(agent.to_owned(), live);
        }
    }
}

/// How to reach the relay.
#[derive(Clone)]
pub struct RelayOptions {
    /// The `/socket` URL (`ws://` or `wss://`).
    pub url: String,
    /// TLS client configuration for `wss://` (from [`crate::transport::tls::client_config`]);
    /// `None` = the Mozilla roots only.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Bearer token.
    pub token: Option<String>,
    /// Reconnect policy: the transport's one curve, run by its reconnect supervisor.
    pub backoff: Policy,
    /// Ping interval; the connection is considered dead after three missed pongs.
    pub ping_every: Duration,
    /// Outbox capacity per agent; beyond it debug/info events are dropped first.
    pub outbox: usize,
    /// Command types this bridge honours (`control.accepts` in hello) when no command
    /// channel is given; with one, each agent's own ([`crate::commands::Commands::accepts_for`]).
    pub accepts: Vec<String>,
    /// Where inbound commands go (the control loop's channel).
    pub commands: Option<crate::commands::Commands>,
}

impl RelayOptions {
    /// Options for a relay base URL (`http(s)://` is mapped to `ws(s)://`, `/socket` appended).
    pub fn new(base: &str, token: Option<String>) -> Self {
        Self {
            url: socket_url(base),
            tls: None,
            token,
            backoff: Policy::new(200, 30_000, 0.5),
            ping_every: Duration::from_secs(30),
            outbox: 65_536,
            accepts: Vec::new(),
            commands: None,
        }
    }
}

/// Maps a relay base URL to its `/socket` WebSocket URL.
pub fn socket_url(base: &str) -> String {
    let b = ws::ws_url(base);
    if b.ends_with("/socket") { b } else { format!("{b}/socket") }
}

/// Demultiplexes events by agent into one connection task per agent identity.
pub async fn run(
    mut rx: mpsc::Receiver<Arc<Stamped>>,
    opts: RelayOptions,
    status: Arc<RelayStatus>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    status.configured.store(true, Ordering::Release);
    let mut agents: HashMap<String, mpsc::Sender<Arc<Stamped>>> = HashMap::new();
    let mut tasks = Vec::new();
    while let Some(ev) = rx.recv().await {
        let agent = ev.event.agent.to_string();
        let tx = agents.entry(agent.clone()).or_insert_with(|| {
            let (tx, rx) = mpsc::channel(1024);
            status.set(&agent, false);
            tasks.push(tokio::spawn(connection(
                agent.clone(),
                rx,
                opts.clone(),
                status.clone(),
                metrics.clone(),
                shutdown.clone(),
            )));
            tx
        });
        if tx.send(ev).await.is_err() {
            metrics.dropped.inc(&[("sink", "relay"), ("severity", "any")]);
        }
    }
    drop(agents);
    for t in tasks {
        let _ = t.await;
    }
}

fn hello(agent: &str, accepts: &[String]) -> Value {
    json!({
        "type": "hello",
        "versions": [AEP_VERSION],
        "role": "emitter",
        "identity": { "agent": agent, "instance": format!("aep-bridge/{}", std::process::id()) },
        "capabilities": {
            "emits": ["session", "run", "step", "tool", "attention", "progress", "error", "delegation", "control", "x"],
            "capture": ["none", "metadata", "redacted", "full"],
            "control": { "accepts": accepts, "ack_window_ms": 10_000 },
        }
    })
}

/// One agent identity's link to the relay: its input, its outbox, and what a session needs.
struct AgentLink {
    agent: String,
    rx: mpsc::Receiver<Arc<Stamped>>,
    input_open: bool,
    outbox: VecDeque<Arc<Stamped>>,
    /// Written to the socket, not yet confirmed by the relay: sent again, first, after a
    /// reconnect (the relay drops the repeats it already took, AEP-0001 §5.3).
    unconfirmed: VecDeque<Arc<Stamped>>,
    /// Confirmation pings sent on this link so far (their `t` tells theirs apart).
    asked: u64,
    /// The last event sent of each session still open, most recent last: sent again on a
    /// new link so the relay knows this link claims them (AEP-0004 §4: a command goes to
    /// the session's claimant) even when nothing new happens in them, as with a
    /// permission held while the hub restarted. The relay drops them as repeats.
    open: HashMap<String, (u64, Arc<Stamped>)>,
    /// Events sent on any link, to order `open` by recency.
    sent: u64,
    opts: RelayOptions,
    status: Arc<RelayStatus>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    /// The current session's hello exchange completed.
    established: bool,
}

async fn connection(
    agent: String,
    rx: mpsc::Receiver<Arc<Stamped>>,
    opts: RelayOptions,
    status: Arc<RelayStatus>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let name = format!("relay {agent}");
    let policy = opts.backoff.clone();
    let mut link = AgentLink {
        agent,
        rx,
        input_open: true,
        outbox: VecDeque::new(),
        unconfirmed: VecDeque::new(),
        asked: 0,
        open: HashMap::new(),
        sent: 0,
        opts,
        status,
        metrics,
        shutdown,
        established: false,
    };
    // No stop token: the link drains through shutdown itself (its outbox, then `closing`).
    supervise(&name, &policy, None, &mut link).await;
}

impl Link for AgentLink {
    type Output = ();

    async fn session(&mut self) -> Ended<()> {
        self.established = false;
        let ended = self.connect_and_run().await;
        self.status.set(&self.agent, false);
        let Ended::Retry(retry) = ended else { return ended };
        if self.shutdown.is_cancelled() && !self.input_open {
            if !self.outbox.is_empty() || !self.unconfirmed.is_empty() {
                tracing::warn!(
                    agent = self.agent,
                    pending = self.outbox.len() + self.unconfirmed.len(),
                    "Relay unreachable at shutdown; pending events stay in the JSONL log only."
                );
            }
            return Ended::Stop(());
        }
        self.metrics.reconnects.inc(&[(crate::metrics::AGENT, &self.agent)]);
        Ended::Retry(retry.was_established(self.established))
    }

    /// Keeps filling the outbox while waiting; a shutdown cuts the wait short for a last
    /// delivery attempt.
    async fn pause(&mut self, until: Instant) -> Option<()> {
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return None,
                ev = self.rx.recv(), if self.input_open => match ev {
                    Some(ev) => push(&mut self.outbox, ev, self.opts.outbox, &self.metrics),
                    None => self.input_open = false,
                },
                _ = self.shutdown.cancelled(), if self.input_open => return None,
            }
        }
    }
}

/// Open sessions remembered per agent link, at most (the least recently active forgotten).
const MAX_OPEN: usize = 1024;

/// Notes `ev` (the `tick`-th sent) as its session's last event sent; a session that ended
/// is forgotten, and past [`MAX_OPEN`] the least recently active.
fn remember_open(open: &mut HashMap<String, (u64, Arc<Stamped>)>, tick: u64, ev: &Arc<Stamped>) {
    let (Some(session), Some(_)) = (ev.event.session.as_deref(), ev.event.seq) else { return };
    if ev.event.r#type == "session.ended" {
        open.remove(session);
        return;
    }
    match open.get_mut(session) {
        Some(slot) => *slot = (tick, ev.clone()),
        None => {
            open.insert(session.to_owned(), (tick, ev.clone()));
            if open.len() > MAX_OPEN
                && let Some(oldest) = open.iter().min_by_key(|(_, (t, _))| *t).map(|(s, _)| s.clone())
            {
                open.remove(&oldest);
            }
        }
    }
}

fn push(outbox: &mut VecDeque<Arc<Stamped>>, ev: Arc<Stamped>, cap: usize, metrics: &Metrics) {
    if outbox.len() >= cap {
        // AEP-0003 §8.4: drop debug/info first, and count it.
        if let Some(i) = outbox.iter().position(|e| e.event.severity() < aep_schemas::Severity::Notice) {
            let dropped = outbox.remove(i);
            if let Some(d) = dropped {
                metrics.dropped.inc(&[("sink", "relay"), ("severity", d.event.severity().as_str())]);
            }
        } else {
            metrics.dropped.inc(&[("sink", "relay"), ("severity", ev.event.severity().as_str())]);
            tracing::error!(id = %ev.event.id, "Relay outbox full of notice+ events: dropped one.");
            return;
        }
    }
    outbox.push_back(ev);
}

impl AgentLink {
    /// One connection: connect, hello, then deliver and listen until it ends.
    async fn connect_and_run(&mut self) -> Ended<()> {
        let agent = self.agent.as_str();
        let opts = &self.opts;
        let ws_opts =
            WsOptions { bearer: opts.token.clone(), tls: opts.tls.clone(), ..WsOptions::new(Duration::from_secs(10)) };
        let ws = match ws::connect(&opts.url, &ws_opts).await {
            Ok(ws) => ws,
            Err(e) if e.is_permanent() => {
                tracing::error!(agent, error = %e, "The relay URL or token cannot make a WebSocket request.");
                return Ended::Stop(());
            }
            Err(e) => {
                // A refused certificate will not fix itself: say so where it is seen.
                if let WsError::Certificate { reason, .. } = &e {
                    tracing::error!(agent, url = %opts.url, reason, "Relay TLS certificate refused (relay.tls.ca_file?).");
                }
                return Ended::Retry(Retry::failed(e.to_string()));
            }
        };
        let (mut sink, mut stream) = ws.split();
        // Each agent identity declares what it honours: a read-only bridge's none (AEP-0004 §4.2,
        // so the relay refuses its commands sender-side).
        let accepts = opts.commands.as_ref().map_or_else(|| opts.accepts.clone(), |c| c.accepts_for(agent));
        if sink.send(Message::text(hello(agent, &accepts).to_string())).await.is_err() {
            return Ended::Retry(Retry::failed("the connection closed before hello"));
        }
        // Wait for the relay's hello before sending anything else (AEP-0003 §3.5 rule 1).
        let reply = timeout(Duration::from_secs(10), async {
            while let Some(Ok(m)) = stream.next().await {
                if let Message::Text(t) = m {
                    return serde_json::from_str::<Value>(&t).ok();
                }
            }
            None
        })
        .await;
        match reply {
            Ok(Some(v)) if v.get("type").and_then(Value::as_str) == Some("hello") => {}
            Ok(Some(v)) => {
                tracing::error!(agent, frame = %v, "Relay refused hello.");
                return Ended::Retry(Retry::failed("the relay refused hello"));
            }
            _ => return Ended::Retry(Retry::failed("no hello from the relay")),
        }
        self.status.set(agent, true);
        self.established = true;
        tracing::info!(agent, url = %opts.url, "Relay connected.");
        // What the last link wrote but the relay never confirmed goes first, in order: it
        // may not have been read before that link dropped (a relay restarting, a cut).
        let mut again = std::mem::take(&mut self.unconfirmed);
        // Each open session whose events are not about to go anyway is claimed again by its
        // last event (a repeat the relay drops, after it notes the claim).
        let going: std::collections::HashSet<&str> =
            again.iter().chain(self.outbox.iter()).filter_map(|e| e.event.session.as_deref()).collect();
        let mut claims: Vec<(u64, Arc<Stamped>)> =
            self.open.iter().filter(|(s, _)| !going.contains(s.as_str())).map(|(_, (t, e))| (*t, e.clone())).collect();
        claims.sort_by_key(|(t, _)| *t);
        let claims: Vec<Arc<Stamped>> = claims.into_iter().map(|(_, e)| e).collect();
        if !again.is_empty() || !claims.is_empty() {
            tracing::info!(
                agent,
                resent = again.len(),
                claimed = claims.len(),
                "Relay: sending again what was not confirmed, and claiming the open sessions."
            );
            let mut front: VecDeque<Arc<Stamped>> = claims.into();
            front.append(&mut again);
            front.append(&mut self.outbox);
            self.outbox = front;
        }
        // The confirmation ping in flight: its `t`, and how many unconfirmed events it
        // covers (the relay handles a connection's frames in order, so its pong says every
        // event before the ping was taken).
        let mut confirming: Option<(String, usize)> = None;
        let mut drain_until: Option<Instant> = None;
        let lost = |what: &str| Ended::Retry(Retry::failed(format!("{what} failed")));
        let mut ping = tokio::time::interval(opts.ping_every);
        ping.tick().await;
        let mut last_pong = Instant::now();
        loop {
            // Flush the outbox first: events leave in the order they were queued.
            while let Some(ev) = self.outbox.front() {
                let line = std::str::from_utf8(&ev.line).unwrap_or("").trim_end().to_owned();
                if sink.send(Message::text(line)).await.is_err() {
                    return lost("sending an event");
                }
                self.metrics.events_out.inc(&[("sink", "relay")]);
                if let Some(ev) = self.outbox.pop_front() {
                    self.sent += 1;
                    remember_open(&mut self.open, self.sent, &ev);
                    self.unconfirmed.push_back(ev);
                }
            }
            if confirming.is_none() && !self.unconfirmed.is_empty() {
                self.asked += 1;
                let t = format!("confirm-{}", self.asked);
                if sink.send(Message::text(json!({"type": "ping", "t": t}).to_string())).await.is_err() {
                    return lost("a confirmation ping");
                }
                confirming = Some((t, self.unconfirmed.len()));
            }
            // At shutdown, wait a little for the last confirmation, so a clean stop leaves
            // nothing for a next start to resend.
            let drained = !self.input_open && {
                let until = *drain_until.get_or_insert_with(|| Instant::now() + Duration::from_secs(2));
                self.unconfirmed.is_empty() || Instant::now() >= until
            };
            if drained {
                let _ = sink
                    .send(Message::text(json!({"type": "closing", "reason": "shutdown", "delivered": []}).to_string()))
                    .await;
                let _ = sink.close().await;
                return Ended::Stop(());
            }
            tokio::select! {
                ev = self.rx.recv(), if self.input_open => match ev {
                    Some(ev) => push(&mut self.outbox, ev, opts.outbox, &self.metrics),
                    None => self.input_open = false,
                },
                _ = tokio::time::sleep_until(drain_until.unwrap_or_else(Instant::now)), if !self.input_open => {}
                msg = stream.next() => match msg {
                    Some(Ok(Message::Text(t))) => {
                        let Ok(v) = serde_json::from_str::<Value>(&t) else { continue };
                        let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
                        if ty == "ping" {
                            let mut p = json!({"type": "pong"});
                            if let Some(t) = v.get("t") { p["t"] = t.clone(); }
                            if sink.send(Message::text(p.to_string())).await.is_err() { return lost("a pong"); }
                        } else if ty == "pong" {
                            last_pong = Instant::now();
                            if let Some((t, n)) = &confirming
                                && v.get("t").and_then(Value::as_str) == Some(t.as_str())
                            {
                                let n = (*n).min(self.unconfirmed.len());
                                self.unconfirmed.drain(..n);
                                confirming = None;
                            }
                        } else if ty.starts_with("control.") {
                            match Event::from_value(v) {
                                Ok(cmd) => match opts.commands.as_ref().map(|c| c.send(cmd)) {
                                    Some(Ok(())) => {}
                                    Some(Err(e)) => tracing::warn!(agent, error = %e, "Command from relay not queued."),
                                    None => tracing::warn!(agent, "Command received but no control loop is attached."),
                                },
                                Err(e) => tracing::warn!(agent, error = %e, "Malformed command from relay."),
                            }
                        } else if ty == "error" {
                            tracing::warn!(agent, frame = %v, "Relay sent an error frame.");
                        } else if ty == "closing" {
                            return Ended::Retry(Retry::closed());
                        }
                    }
                    Some(Ok(Message::Close(_))) | None => return Ended::Retry(Retry::closed()),
                    Some(Err(e)) => return Ended::Retry(Retry::failed(e.to_string())),
                    Some(Ok(_)) => {}
                },
                _ = ping.tick() => {
                    if last_pong.elapsed() > opts.ping_every * 3 {
                        return Ended::Retry(Retry::failed("the relay missed three pongs"));
                    }
                    let t = crate::time::now_ms();
                    if sink.send(Message::text(json!({"type": "ping", "t": t}).to_string())).await.is_err() {
                        return lost("a ping");
                    }
                }
                _ = self.shutdown.cancelled(), if self.input_open => {
                    // Drain what is already queued, then say closing.
                    while let Ok(ev) = self.rx.try_recv() { push(&mut self.outbox, ev, opts.outbox, &self.metrics); }
                    self.input_open = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_back_off_with_the_transport_policy() {
        let b = RelayOptions::new("ws://127.0.0.1:9", None).backoff.backoff;
        assert_eq!(b.backoff(0), Duration::from_millis(200));
        assert_eq!(b.backoff(3), Duration::from_millis(1600));
        assert_eq!(b.backoff(10), Duration::from_secs(30));
        let spread = (0..8).map(|i| b.backoff_jittered(2, f64::from(i) / 8.0)).collect::<Vec<_>>();
        assert!(
            spread.iter().all(|d| *d >= Duration::from_millis(400) && *d <= Duration::from_millis(1200)),
            "{spread:?}"
        );
        assert_eq!(socket_url("http://127.0.0.1:9/"), "ws://127.0.0.1:9/socket");
        assert_eq!(socket_url("wss://r.example/socket"), "wss://r.example/socket");
    }

    type Peer = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

    fn event(session: &str, seq: u64, ty: &str) -> Arc<Stamped> {
        Arc::new(Stamped::new(Event {
            aep: "0.1".into(),
            id: format!("{session}{seq}"),
            r#type: ty.into(),
            time: "2026-12-07T00:00:00Z".into(),
            source: "aep://lap/agent/a".into(),
            agent: "a".into(),
            session: Some(session.into()),
            seq: Some(seq),
            data: Some(json!({})),
            ..Default::default()
        }))
    }

    /// Reads frames until `n` events and `pings` confirmation pings came, answering the
    /// pings when `confirm`; the events' ids.
    async fn take(ws: &mut Peer, n: usize, pings: usize, confirm: bool) -> Vec<String> {
        use tokio_tungstenite::tungstenite::Message as M;
        let (mut ids, mut seen) = (Vec::new(), 0);
        while ids.len() < n || seen < pings {
            let next = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("a frame within 20 s");
            let Some(Ok(M::Text(t))) = next else { panic!("the link ended") };
            let v: Value = serde_json::from_str(&t).unwrap();
            match v["type"].as_str() {
                Some("ping") if v["t"].as_str().is_some_and(|t| t.starts_with("confirm-")) => {
                    seen += 1;
                    if confirm {
                        ws.send(M::text(json!({"type": "pong", "t": v["t"]}).to_string())).await.unwrap();
                    }
                }
                Some("hello") => {
                    ws.send(M::text(json!({"type": "hello", "versions": ["0.1"]}).to_string())).await.unwrap()
                }
                _ if v.get("aep").is_some() => ids.push(v["id"].as_str().unwrap().to_owned()),
                _ => {}
            }
        }
        ids
    }

    /// A relay link to a listener of the test's, with a quick reconnect.
    fn link(
        listener: &tokio::net::TcpListener,
    ) -> (mpsc::Sender<Arc<Stamped>>, CancellationToken, tokio::task::JoinHandle<()>) {
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let (tx, rx) = mpsc::channel(16);
        let mut opts = RelayOptions::new(&url, None);
        opts.backoff = Policy::new(10, 50, 0.0);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(run(rx, opts, Arc::default(), Arc::new(Metrics::new()), shutdown.clone()));
        (tx, shutdown, task)
    }

    async fn accept(listener: &tokio::net::TcpListener) -> Peer {
        let conn = tokio::time::timeout(Duration::from_secs(20), listener.accept()).await.expect("a connection");
        tokio_tungstenite::accept_async(conn.unwrap().0).await.unwrap()
    }

    /// A relay that takes events but goes away before confirming them (a hub restarting)
    /// gets them again, first and in order, from the next link; what it confirmed is never
    /// sent again.
    #[tokio::test]
    async fn what_the_relay_never_confirmed_is_sent_again_after_a_reconnect() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (tx, shutdown, task) = link(&listener);
        let event = |seq: u64| event("e", seq, "progress.status");
        // The first link: each event is followed by a ping covering it (the one before was
        // answered by then): e0 and e1 are confirmed, e2's ping is left unanswered, and e3
        // waits behind it.
        // (The link opens with an agent's first event.)
        tx.send(event(0)).await.unwrap();
        let mut first = accept(&listener).await;
        assert_eq!(take(&mut first, 1, 1, true).await, ["e0"]);
        tx.send(event(1)).await.unwrap();
        assert_eq!(take(&mut first, 1, 1, true).await, ["e1"]);
        tx.send(event(2)).await.unwrap();
        assert_eq!(take(&mut first, 1, 1, false).await, ["e2"]);
        tx.send(event(3)).await.unwrap();
        assert_eq!(take(&mut first, 1, 0, false).await, ["e3"]);
        // The relay goes away cleanly (its pongs before the close are read first); one that
        // crashes may leave a pong unread, and then more is resent (the hub drops repeats).
        first.close(None).await.unwrap();
        while let Some(Ok(_)) = first.next().await {}
        // The next link gets what was not confirmed first, then what is new.
        tx.send(event(4)).await.unwrap();
        let mut second = accept(&listener).await;
        assert_eq!(take(&mut second, 3, 0, true).await, ["e2", "e3", "e4"], "e0 and e1 were confirmed, e2 and e3 not");
        drop(tx);
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }

    /// On a new link, each session still open is claimed again by a repeat of its last
    /// event, though nothing new happened in it (a permission held while the hub
    /// restarted); a session that ended is not.
    #[tokio::test]
    async fn an_open_session_is_claimed_again_on_a_new_link() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (tx, shutdown, task) = link(&listener);
        tx.send(event("held", 0, "attention.requested")).await.unwrap();
        let mut first = accept(&listener).await;
        assert_eq!(take(&mut first, 1, 1, true).await, ["held0"]);
        tx.send(event("done", 0, "session.ended")).await.unwrap();
        assert_eq!(take(&mut first, 1, 1, true).await, ["done0"]);
        first.close(None).await.unwrap();
        while let Some(Ok(_)) = first.next().await {}
        let mut second = accept(&listener).await;
        tx.send(event("new", 0, "session.started")).await.unwrap();
        assert_eq!(
            take(&mut second, 2, 0, true).await,
            ["held0", "new0"],
            "the open session claimed, the ended one not"
        );
        drop(tx);
        shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
}
