//! The collector's WebSocket binding (AEP-0003 §3.5, §4, §6.5): hello-first with version
//! selection, multiplexed subscriptions with in-band refusals from the closed code set,
//! `roster`, ping/pong, `closing`, events in both directions, and command routing.

use std::collections::HashMap;
use std::sync::Arc;

use aep_schemas::filter::Filter;
use aep_schemas::{AEP_VERSION, Capture};
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures_util::{Sink, SinkExt, Stream, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Backlog, Bound, Claim, Ctx, Delivery, Replay, parse_from};
use crate::pipeline::Stamped;
use aep_receivers::access::Principal;

/// Most concurrent subscriptions per connection (`limit-exceeded` beyond, AEP-0003 §6.5).
const MAX_SUBS: usize = 64;

fn text(v: &Value) -> Message {
    Message::Text(Utf8Bytes::from(v.to_string()))
}

struct Conn {
    id: u64,
    role: String,
    agent: Option<String>,
    instance: Option<String>,
    control: Option<Value>,
    emits: Option<Value>,
    /// Whom the connection's token names: what it may do, and which tenant it sees.
    who: Principal,
    subs: HashMap<String, u64>,
    /// Last delivered position per (sub, session), for the `closing` frame.
    delivered: HashMap<(Arc<str>, String), (u64, u64)>,
    /// What waits in this connection's queue, and whether it was cut (AEP-0003 §8.4).
    backlog: Arc<Backlog>,
}

/// What a handled frame sends back, in order.
enum Out {
    /// A connection-scoped frame.
    Frame(Value),
    /// A subscription's replay, written before any live delivery of it.
    Replay(Replay),
}

impl Conn {
    /// Renders a delivery as a text frame, recording the position for `closing`.
    fn render(&mut self, d: Delivery) -> Message {
        match d {
            Delivery::Event { sub, event, .. } => {
                if let (Some(s), Some(seq)) = (event.event.session.clone(), event.event.seq) {
                    self.delivered.insert((sub, s), (event.event.epoch(), seq));
                }
                // The event exactly as received (AEP-0001 §4.2), one per text frame, sharing
                // the line's bytes rather than copying them.
                let end = event.line.iter().rposition(|b| *b != b'\n').map_or(0, |i| i + 1);
                Message::Text(Utf8Bytes::try_from(event.line.slice(..end)).unwrap_or_default())
            }
            Delivery::ReplayExhausted { sub, session, earliest } => text(&json!({
                "type": "replay-exhausted", "sub": &*sub, "session": session,
                "earliest": { "epoch": earliest.epoch, "seq": earliest.seq }
            })),
        }
    }

    /// The `closing` frame: last delivered position per subscription (AEP-0003 §3.5 rule 4).
    fn closing(&self, reason: &str) -> Message {
        let delivered: Vec<Value> = self
            .delivered
            .iter()
            .map(|((sub, s), (e, q))| json!({"sub": &**sub, "session": s, "epoch": e, "seq": q}))
            .collect();
        text(&json!({"type": "closing", "reason": reason, "delivered": delivered}))
    }
}

/// Runs one upgraded connection until it closes (axum's socket, split).
pub(super) async fn run_socket(socket: WebSocket, ctx: Ctx, who: Principal) {
    let (sink, stream) = socket.split();
    run(sink, stream, ctx, who).await;
}

/// Runs one connection until it closes: frames in from `stream`, frames out to `sink`.
/// Generic over the two halves, so a test hands it a channel pair instead of a socket.
pub(super) async fn run<Tx, Rx, E>(mut sink: Tx, mut stream: Rx, ctx: Ctx, who: Principal)
where
    Tx: Sink<Message> + Unpin,
    Rx: Stream<Item = Result<Message, E>> + Unpin,
{
    let c = ctx.collector.clone();

    // AEP-0003 §3.5 rule 1: the first frame in each direction is `hello`.
    let hello = loop {
        match stream.next().await {
            Some(Ok(Message::Text(t))) => break serde_json::from_str::<Value>(&t).ok(),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Binary(_))) => {
                let _ = sink.send(text(&json!({"type": "error", "code": "binary-unsupported", "detail": "binary frames are reserved in AEP 0.1"}))).await;
                let _ = sink
                    .send(Message::Close(Some(CloseFrame { code: 1003, reason: "binary frames are reserved".into() })))
                    .await;
                return;
            }
            _ => return,
        }
    };
    let Some(hello) = hello.filter(|h| h.get("type").and_then(Value::as_str) == Some("hello")) else {
        let _ = sink
            .send(text(&json!({"type": "error", "code": "hello-required", "detail": "the first frame must be hello"})))
            .await;
        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1008, reason: "hello-required".into() }))).await;
        return;
    };
    let offered: Vec<&str> = hello
        .get("versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !offered.contains(&AEP_VERSION) {
        let _ = sink
            .send(text(&json!({"type": "error", "code": "version-unsupported", "versions": [AEP_VERSION],
                "detail": format!("offered {offered:?}; this endpoint speaks {AEP_VERSION}")})))
            .await;
        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1002, reason: "version-unsupported".into() }))).await;
        return;
    }
    let ident = hello.get("identity");
    let caps = hello.get("capabilities");
    let mut conn = Conn {
        id: c.next_id(),
        role: hello.get("role").and_then(Value::as_str).unwrap_or("consumer").to_owned(),
        agent: ident.and_then(|i| i.get("agent")).and_then(Value::as_str).map(str::to_owned),
        instance: ident.and_then(|i| i.get("instance")).and_then(Value::as_str).map(str::to_owned),
        control: caps.and_then(|c| c.get("control")).cloned(),
        emits: caps.and_then(|c| c.get("emits")).cloned(),
        who,
        subs: HashMap::new(),
        delivered: HashMap::new(),
        backlog: Backlog::new(),
    };
    let accepts = if conn.who.answer { c.local_accepts() } else { Vec::new() };
    let reply = json!({
        "type": "hello",
        "versions": [AEP_VERSION],
        "role": "both",
        "identity": { "agent": "aep-bridge", "instance": super::Collector::instance() },
        "capabilities": c.capabilities(accepts),
    });
    if sink.send(text(&reply)).await.is_err() {
        return;
    }

    let (dtx, mut drx) = mpsc::channel::<Delivery>(c.cfg.subscriber_queue.max(1));
    let (cmd_tx, mut cmd_rx) = mpsc::channel::<Arc<Stamped>>(256);
    let closing = c.closing.clone();
    let backlog = conn.backlog.clone();
    'conn: loop {
        tokio::select! {
            // Queued live deliveries go out before a cut is acted on (deliver, then disconnect).
            biased;
            msg = stream.next() => {
                let Some(Ok(msg)) = msg else { break };
                match msg {
                    Message::Text(t) => {
                        for o in handle_frame(&t, &mut conn, &ctx, &dtx, &cmd_tx).await {
                            match o {
                                Out::Frame(f) => if sink.send(text(&f)).await.is_err() { break 'conn; },
                                // Paged: one delivery at a time, read as it is sent. Whole even
                                // if the connection is cut meanwhile: what is queued live follows it.
                                Out::Replay(mut r) => while let Some(d) = r.next(&c) {
                                    let m = conn.render(d);
                                    if sink.send(m).await.is_err() { break 'conn; }
                                },
                            }
                        }
                    }
                    Message::Binary(_) => {
                        // AEP-0003 §3.5 rule 2: binary frames are reserved in 0.1 and rejected.
                        let _ = sink.send(text(&json!({"type": "error", "code": "binary-unsupported", "detail": "binary frames are reserved in AEP 0.1"}))).await;
                        let _ = sink.send(Message::Close(Some(CloseFrame { code: 1003, reason: "binary frames are reserved".into() }))).await;
                        break;
                    }
                    Message::Close(_) => break,
                    Message::Ping(_) | Message::Pong(_) => {}
                }
            }
            d = drx.recv() => {
                let Some(d) = d else { break };
                backlog.taken(&d);
                let m = conn.render(d);
                if sink.send(m).await.is_err() { break; }
            }
            cmd = cmd_rx.recv() => {
                // A command routed to this connection as the session's claimant: byte-identical (AEP-0004 §4.4).
                let Some(cmd) = cmd else { break };
                let line = std::str::from_utf8(&cmd.line).unwrap_or("").trim_end_matches('\n').to_owned();
                if sink.send(Message::Text(Utf8Bytes::from(line))).await.is_err() { break; }
            }
            () = backlog.was_cut() => {
                // AEP-0003 §8.4: a subscription fell behind on notice+ events; rather than drop
                // them silently, deliver what is queued, say where each subscription stands,
                // and disconnect.
                while let Ok(d) = drx.try_recv() {
                    backlog.taken(&d);
                    let m = conn.render(d);
                    if sink.send(m).await.is_err() { break 'conn; }
                }
                let reason = match backlog.cut_by() {
                    Some(Bound::Events) => format!("slow consumer: queue bound {} events", c.cfg.subscriber_queue),
                    _ => format!("slow consumer: queue bound {} bytes", c.cfg.subscriber_bytes),
                };
                let _ = sink.send(conn.closing("overflow: the consumer fell behind")).await;
                let _ = sink.send(Message::Close(Some(CloseFrame { code: 1013, reason: reason.into() }))).await;
                break;
            }
            () = closing.cancelled() => {
                let _ = sink.send(conn.closing("shutdown")).await;
                let _ = sink.send(Message::Close(Some(CloseFrame { code: 1001, reason: "going away".into() }))).await;
                break;
            }
        }
    }
    for id in conn.subs.values() {
        c.unsubscribe(*id);
    }
    c.drop_claims(conn.id);
}

fn err_frame(id: Option<&Value>, code: &str, detail: impl Into<String>) -> Value {
    let mut f = json!({"type": "error", "code": code, "detail": detail.into()});
    if let Some(id) = id {
        f["id"] = id.clone();
    }
    f
}

async fn handle_frame(
    t: &str,
    conn: &mut Conn,
    ctx: &Ctx,
    dtx: &mpsc::Sender<Delivery>,
    cmd_tx: &mpsc::Sender<Arc<Stamped>>,
) -> Vec<Out> {
    let c = &ctx.collector;
    // Repeated keys are refused at any depth: a first-wins reader downstream must not see
    // another type than the one validated here.
    let v = match aep_schemas::json::from_str_strict(t) {
        Ok(v) => v,
        Err(e) => return vec![Out::Frame(err_frame(None, "invalid-frame", format!("frame is not JSON: {e}")))],
    };
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    // AEP-0003 §2: an Event's type contains a dot; a frame's never does.
    if ty.contains('.') {
        return handle_event(v, t, conn, ctx, cmd_tx).await.into_iter().map(Out::Frame).collect();
    }
    let id = v.get("id");
    // Watch-class requests are honoured on consumer/both connections only (AEP-0003 §4.1
    // rule 2), and for a token that may read.
    let watch_ok = conn.role != "emitter";
    let may_view = conn.who.view;
    let refuse = |code: &str, detail: String| vec![Out::Frame(err_frame(id, code, detail))];
    match ty {
        "subscribe" => {
            // AEP-0003 §6.5: every refusal is in-band, from the closed code set, and leaves
            // the connection and its other subscriptions alone.
            if !watch_ok {
                return refuse("unauthorized", "emitter connections cannot subscribe".into());
            }
            if !may_view {
                return refuse("unauthorized", format!("{} may not subscribe", conn.who.name));
            }
            let Some(sid) = id.and_then(Value::as_str) else {
                return refuse("invalid-filter", "subscribe needs a string id".into());
            };
            if conn.subs.len() >= MAX_SUBS && !conn.subs.contains_key(sid) {
                return refuse("limit-exceeded", format!("at most {MAX_SUBS} subscriptions per connection"));
            }
            let filter = match v.get("filter") {
                None => Filter::all(),
                Some(f) => match super::check_filter_size(f) {
                    Err(e) => return refuse("limit-exceeded", e),
                    Ok(()) => match Filter::parse(f) {
                        Ok(f) => f,
                        Err(e) => return refuse("invalid-filter", e.to_string()),
                    },
                },
            };
            let ceiling = match v.get("capture") {
                None => None,
                Some(Value::String(s)) => match s.parse::<Capture>() {
                    Ok(c) => Some(c),
                    Err(e) => return refuse("invalid-filter", e.to_string()),
                },
                Some(other) => return refuse("invalid-filter", format!("capture must be a level, got {other}")),
            };
            let from = match v.get("from") {
                None => None,
                Some(f) => match parse_from(f, c.max_from()) {
                    Ok(f) => Some(f),
                    Err((code, d)) => return refuse(code, d),
                },
            };
            if let Some(old) = conn.subs.remove(sid) {
                c.unsubscribe(old);
                conn.delivered.retain(|(sub, _), _| &**sub != sid);
            }
            let sub: Arc<str> = Arc::from(sid);
            let scope = conn.who.tenant.clone();
            let (subid, replay) = c.subscribe(sub, filter, scope, ceiling, from, dtx.clone(), conn.backlog.clone());
            conn.subs.insert(sid.to_owned(), subid);
            // `subscribed`, then the replay, then live delivery: the replay is written before
            // the connection loop reads the live queue again (AEP-0003 §5, §6.5).
            vec![Out::Frame(json!({"type": "subscribed", "id": sid})), Out::Replay(replay)]
        }
        "unsubscribe" => {
            let sid = id.and_then(Value::as_str).unwrap_or("");
            if let Some(s) = conn.subs.remove(sid) {
                c.unsubscribe(s);
            }
            conn.delivered.retain(|(sub, _), _| &**sub != sid);
            vec![Out::Frame(json!({"type": "unsubscribed", "id": id.cloned().unwrap_or(Value::Null)}))]
        }
        "roster" => {
            // AEP-0003 §4.1 rule 2: an emitter-role request is refused in-band, same id.
            if !watch_ok {
                return refuse("unauthorized", "emitter connections cannot request the roster".into());
            }
            if !may_view {
                return refuse("unauthorized", format!("{} may not read the roster", conn.who.name));
            }
            if id.is_none() {
                return refuse("invalid-frame", "roster needs an id".into());
            }
            vec![Out::Frame(
                json!({"type": "roster", "id": id.cloned().unwrap_or(Value::Null), "entries": c.roster(&conn.who.tenant)}),
            )]
        }
        "ping" => {
            // AEP-0003 §3.5 rule 5: echoed as pong.
            let mut p = json!({"type": "pong"});
            if let Some(t) = v.get("t") {
                p["t"] = t.clone();
            }
            vec![Out::Frame(p)]
        }
        // Unknown frame types (and pong, hello repeats, closing) are ignored (AEP-0003 §2).
        _ => Vec::new(),
    }
}

async fn handle_event(
    v: Value,
    raw: &str,
    conn: &mut Conn,
    ctx: &Ctx,
    cmd_tx: &mpsc::Sender<Arc<Stamped>>,
) -> Vec<Value> {
    let c = &ctx.collector;
    // The value moves into the Event; only its `id` is kept, to name a refused event.
    let id = v.get("id").cloned();
    let stamped = match super::validate_received(v, raw.as_bytes()) {
        Ok(s) => Arc::new(s),
        Err(viol) => {
            let mut f = err_frame(None, "invalid-event", format!("{}: {}", viol.rule, viol.message));
            if let Some(id) = id {
                f["cause"] = id;
            }
            return vec![f];
        }
    };
    let ev = &stamped.event;
    let is_command =
        ev.r#type.starts_with("control.") && !matches!(ev.r#type.as_str(), "control.accepted" | "control.rejected");
    if is_command {
        let refused =
            |code: &str, detail: String| vec![json!({"type": "error", "cause": ev.id, "code": code, "detail": detail})];
        // AEP-0004 §4.1: control flows only on authenticated bindings, unconditionally.
        if !c.access().required() {
            return refused(
                "unauthorized",
                "control requires an authenticated binding (start the bridge with a token)".into(),
            );
        }
        return match super::submit_command(c, &ctx.pipeline, stamped, &conn.who).await {
            Ok(()) => Vec::new(),
            Err(r) => vec![r.frame()],
        };
    }
    if let Err(why) = c.may_emit(&conn.who, ev) {
        return vec![json!({"type": "error", "cause": ev.id, "code": "unauthorized", "detail": why})];
    }
    if let (Some(session), true) = (ev.session.clone(), ev.seq.is_some()) {
        c.claim(Claim {
            conn: conn.id,
            session,
            agent: conn.agent.clone().or_else(|| Some(ev.agent.to_string())),
            instance: conn.instance.clone(),
            control: conn.control.clone(),
            emits: conn.emits.clone(),
            tx: cmd_tx.clone(),
        });
    }
    // AEP-0001 §7: a repeat of an event already taken from this source is an edge's resend
    // after a reconnect: the log and the exporters (terminal consumers) take it once, but
    // AEP-0003 §5's live fan-out forwards redelivery as received, so it still reaches the
    // live subscribers (the replay buffer's admission dedupes it). The connection still
    // claims its session above, so commands reach the edge that resent.
    if !c.fresh(ev) {
        ctx.pipeline.redeliver_live(&stamped).await;
        return Vec::new();
    }
    match ctx.pipeline.submit_stamped("collector", stamped).await {
        Ok(_) => Vec::new(),
        Err(_) => vec![err_frame(None, "unavailable", "shutting down")],
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use aep_adapters::EventDraft;
    use futures_util::stream;
    use tokio_util::sync::PollSender;

    use super::*;
    use crate::collector::{Collector, CollectorConfig};
    use crate::metrics::Metrics;
    use crate::pipeline::PipelineBuilder;

    /// The test's end of a connection: frames to the handler, frames from it.
    struct Peer {
        to: mpsc::Sender<Message>,
        from: mpsc::Receiver<Message>,
    }

    impl Peer {
        async fn send(&self, v: Value) {
            self.to.send(text(&v)).await.expect("the handler is reading");
        }

        /// The next frame the handler sent, as JSON (a close frame as `{"close": code}`).
        async fn recv(&mut self) -> Value {
            match self.from.recv().await.expect("the handler sent a frame") {
                Message::Text(t) => serde_json::from_str(&t).expect("text frames are JSON"),
                Message::Close(c) => json!({ "close": c.map(|c| c.code) }),
                other => panic!("unexpected frame {other:?}"),
            }
        }
    }

    /// A collector (tapped by a pipeline, as the daemon wires it) and one connection to it
    /// over a pair of channels: no socket, no listener. The handler's task ends with it.
    fn connect(authenticated: bool) -> (Ctx, Peer, tokio::task::JoinHandle<()>) {
        let who = if authenticated { Principal::operator() } else { Principal::anonymous() };
        let metrics = Arc::new(Metrics::new());
        let collector =
            Collector::new(CollectorConfig::default(), crate::collector::Gate::token(None), metrics.clone(), None);
        let pipeline = PipelineBuilder::new(1, "h", metrics).tap(collector.clone()).build();
        let ctx = Ctx { collector, pipeline };
        let (to, mut inbound) = mpsc::channel::<Message>(16);
        let (outbound, from) = mpsc::channel::<Message>(16);
        let rx = stream::poll_fn(move |cx| inbound.poll_recv(cx).map(|m| m.map(Ok::<_, Infallible>)));
        let task = tokio::spawn(run(PollSender::new(outbound), rx, ctx.clone(), who));
        (ctx, Peer { to, from }, task)
    }

    fn hello() -> Value {
        json!({"type": "hello", "versions": [AEP_VERSION], "role": "consumer"})
    }

    /// Hello first, a subscription, a live event, ping/pong, and `closing` on shutdown: the
    /// whole conversation through the generic handler with channels for the socket.
    #[tokio::test]
    async fn a_connection_over_channels_subscribes_and_receives() {
        let (ctx, mut peer, task) = connect(false);
        peer.send(hello()).await;
        let h = peer.recv().await;
        assert_eq!((h["type"].as_str(), h["versions"][0].as_str()), (Some("hello"), Some(AEP_VERSION)));

        peer.send(json!({"type": "subscribe", "id": "all"})).await;
        assert_eq!(peer.recv().await, json!({"type": "subscribed", "id": "all"}));

        let mut d = EventDraft::new("run.started", Capture::Metadata);
        d.session = Some("s1".into());
        let out = ctx.pipeline.submit_drafts("hook", "a", vec![d]).await.unwrap();
        let ev = peer.recv().await;
        assert_eq!(ev["id"].as_str(), Some(out[0].event.id.as_str()));
        assert_eq!((ev["type"].as_str(), ev["session"].as_str()), (Some("run.started"), Some("s1")));

        peer.send(json!({"type": "ping", "t": 7})).await;
        assert_eq!(peer.recv().await, json!({"type": "pong", "t": 7}));

        ctx.collector.close();
        let closing = peer.recv().await;
        assert_eq!(closing["type"], "closing");
        assert_eq!(closing["reason"], "shutdown");
        assert_eq!(closing["delivered"], json!([{"sub": "all", "session": "s1", "epoch": 1, "seq": 0}]));
        assert_eq!(peer.recv().await, json!({"close": 1001}));
        task.await.unwrap();
    }

    /// AEP-0003 §3.5 rule 1: a first frame other than `hello` is refused and the connection
    /// closed (1008); an unsupported version likewise (1002).
    #[tokio::test]
    async fn the_first_frame_must_be_a_hello_with_our_version() {
        let (_ctx, mut peer, task) = connect(false);
        peer.send(json!({"type": "subscribe", "id": "x"})).await;
        assert_eq!(peer.recv().await["code"], "hello-required");
        assert_eq!(peer.recv().await, json!({"close": 1008}));
        task.await.unwrap();

        let (_ctx, mut peer, task) = connect(false);
        peer.send(json!({"type": "hello", "versions": ["9.9"]})).await;
        let e = peer.recv().await;
        assert_eq!((e["code"].as_str(), e["versions"][0].as_str()), (Some("version-unsupported"), Some(AEP_VERSION)));
        assert_eq!(peer.recv().await, json!({"close": 1002}));
        task.await.unwrap();
    }

    /// AEP-0004 §4.1: a command on an unauthenticated binding is refused in-band, and the
    /// connection stays open for what follows.
    #[tokio::test]
    async fn a_command_on_an_unauthenticated_connection_is_refused_in_band() {
        let (_ctx, mut peer, task) = connect(false);
        peer.send(hello()).await;
        peer.recv().await;
        let cmd = json!({"aep": AEP_VERSION, "id": "01J00000000000000000000CMD", "type": "control.attention.respond",
            "time": "2026-01-02T03:04:05Z", "source": "aep://h/agent/a/session/s1", "agent": "a", "session": "s1",
            "capture": "metadata", "subject": "01JAAAAAAAAAAAAAAAAAAAAAAA", "data": {"answer": {"option": "yes"}}});
        peer.send(cmd).await;
        let refused = peer.recv().await;
        assert_eq!(
            (refused["code"].as_str(), refused["cause"].as_str()),
            (Some("unauthorized"), Some("01J00000000000000000000CMD"))
        );
        peer.send(json!({"type": "ping"})).await;
        assert_eq!(peer.recv().await, json!({"type": "pong"}));
        drop(peer);
        task.await.unwrap();
    }
}
