//! The upstream relay binding: a WebSocket client per agent identity (AEP-0003 §3.5, §4).
//!
//! Each connection opens with `hello` (role `emitter`, the agent's identity, and the
//! command types this bridge honours in `control.accepts`); an outbox holds emissions
//! until the hello exchange completes and keeps an event until it was written to the
//! socket; reconnects are armed once per attempt on whichever of error/close comes first,
//! with exponential backoff and jitter; ping/pong keeps liveness; shutdown sends `closing`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_schemas::{AEP_VERSION, Event};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::pipeline::Stamped;
use crate::transport::retry::{RetryConfig, random_unit};

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
    /// Reconnect backoff: the transport's one policy (its budget is unused: a relay is
    /// reconnected for as long as the bridge runs).
    pub backoff: RetryConfig,
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
            backoff: RetryConfig { initial_ms: 200, max_ms: 30_000, max_elapsed_ms: 0, multiplier: 2.0, jitter: 0.5 },
            ping_every: Duration::from_secs(30),
            outbox: 65_536,
            accepts: Vec::new(),
            commands: None,
        }
    }
}

/// Maps a relay base URL to its `/socket` WebSocket URL.
pub fn socket_url(base: &str) -> String {
    let b = base.trim_end_matches('/');
    let b = if let Some(r) = b.strip_prefix("http://") {
        format!("ws://{r}")
    } else if let Some(r) = b.strip_prefix("https://") {
        format!("wss://{r}")
    } else {
        b.to_owned()
    };
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

enum Outcome {
    /// Input closed and the outbox drained: stop.
    Done,
    /// Reconnect after a backoff.
    Retry,
}

async fn connection(
    agent: String,
    mut rx: mpsc::Receiver<Arc<Stamped>>,
    opts: RelayOptions,
    status: Arc<RelayStatus>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    let mut outbox: VecDeque<Arc<Stamped>> = VecDeque::new();
    let mut attempt = 0u32;
    let mut input_open = true;
    loop {
        let outcome =
            session(&agent, &mut rx, &mut input_open, &mut outbox, &opts, &status, &metrics, &shutdown, &mut attempt)
                .await;
        status.set(&agent, false);
        match outcome {
            Outcome::Done => return,
            Outcome::Retry => {
                if shutdown.is_cancelled() && !input_open {
                    if !outbox.is_empty() {
                        tracing::warn!(
                            agent,
                            pending = outbox.len(),
                            "Relay unreachable at shutdown; pending events stay in the JSONL log only."
                        );
                    }
                    return;
                }
                metrics.reconnects.inc(&[("agent", &agent)]);
                let delay = opts.backoff.backoff_jittered(attempt, random_unit());
                attempt = attempt.saturating_add(1);
                // Keep filling the outbox while we wait.
                let until = Instant::now() + delay;
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        ev = rx.recv(), if input_open => match ev {
                            Some(ev) => push(&mut outbox, ev, opts.outbox, &metrics),
                            None => input_open = false,
                        },
                        _ = shutdown.cancelled(), if input_open => {
                            // Give the drain a last chance below, but don't wait for long.
                            break;
                        }
                    }
                }
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

#[allow(clippy::too_many_arguments)]
async fn session(
    agent: &str,
    rx: &mut mpsc::Receiver<Arc<Stamped>>,
    input_open: &mut bool,
    outbox: &mut VecDeque<Arc<Stamped>>,
    opts: &RelayOptions,
    status: &RelayStatus,
    metrics: &Metrics,
    shutdown: &CancellationToken,
    attempt: &mut u32,
) -> Outcome {
    let Ok(mut req) = opts.url.as_str().into_client_request() else {
        tracing::error!(url = %opts.url, "Relay URL is not a valid WebSocket URL.");
        return Outcome::Done;
    };
    if let Some(t) = &opts.token
        && let Ok(v) = format!("Bearer {t}").parse()
    {
        req.headers_mut().insert("authorization", v);
    }
    let connector = opts.tls.clone().map(tokio_tungstenite::Connector::Rustls);
    let connect = tokio_tungstenite::connect_async_tls_with_config(req, None, false, connector);
    let ws = match timeout(Duration::from_secs(10), connect).await {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            // A refused certificate will not fix itself: say so where it is seen.
            match crate::transport::tls::certificate_error(&e) {
                Some(reason) => {
                    tracing::error!(agent, url = %opts.url, reason, "Relay TLS certificate refused (relay.tls.ca_file?).")
                }
                None => tracing::debug!(agent, error = %e, "Relay connect failed."),
            }
            return Outcome::Retry;
        }
        Err(_) => return Outcome::Retry,
    };
    let (mut sink, mut stream) = ws.split();
    // Each agent identity declares what it honours: a read-only bridge's none (AEP-0004 §4.2,
    // so the relay refuses its commands sender-side).
    let accepts = opts.commands.as_ref().map_or_else(|| opts.accepts.clone(), |c| c.accepts_for(agent));
    if sink.send(Message::text(hello(agent, &accepts).to_string())).await.is_err() {
        return Outcome::Retry;
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
            return Outcome::Retry;
        }
        _ => return Outcome::Retry,
    }
    status.set(agent, true);
    *attempt = 0;
    tracing::info!(agent, url = %opts.url, "Relay connected.");
    let mut ping = tokio::time::interval(opts.ping_every);
    ping.tick().await;
    let mut last_pong = Instant::now();
    loop {
        // Flush the outbox first: events leave in the order they were queued.
        while let Some(ev) = outbox.front() {
            let line = std::str::from_utf8(&ev.line).unwrap_or("").trim_end().to_owned();
            if sink.send(Message::text(line)).await.is_err() {
                return Outcome::Retry;
            }
            metrics.events_out.inc(&[("sink", "relay")]);
            outbox.pop_front();
        }
        if !*input_open {
            let _ = sink
                .send(Message::text(json!({"type": "closing", "reason": "shutdown", "delivered": []}).to_string()))
                .await;
            let _ = sink.close().await;
            return Outcome::Done;
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => push(outbox, ev, opts.outbox, metrics),
                None => *input_open = false,
            },
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(t))) => {
                    let Ok(v) = serde_json::from_str::<Value>(&t) else { continue };
                    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
                    if ty == "ping" {
                        let mut p = json!({"type": "pong"});
                        if let Some(t) = v.get("t") { p["t"] = t.clone(); }
                        if sink.send(Message::text(p.to_string())).await.is_err() { return Outcome::Retry; }
                    } else if ty == "pong" {
                        last_pong = Instant::now();
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
                        return Outcome::Retry;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return Outcome::Retry,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if last_pong.elapsed() > opts.ping_every * 3 {
                    tracing::warn!(agent, "Relay missed three pongs; reconnecting.");
                    return Outcome::Retry;
                }
                let t = crate::time::unix_ms(std::time::SystemTime::now());
                if sink.send(Message::text(json!({"type": "ping", "t": t}).to_string())).await.is_err() {
                    return Outcome::Retry;
                }
            }
            _ = shutdown.cancelled() => {
                // Drain what is already queued, then say closing.
                while let Ok(ev) = rx.try_recv() { push(outbox, ev, opts.outbox, metrics); }
                *input_open = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconnects_back_off_with_the_transport_policy() {
        let b = RelayOptions::new("ws://127.0.0.1:9", None).backoff;
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
}
