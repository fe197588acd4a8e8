//! A team's hub: three edge bridges relay their agents' sessions to one `serve`, each with a
//! token of its own in the hub's access list. The real `aep-hook` shim holds a Claude Code
//! permission on an edge; a person at the hub answers it there, and only that edge's agent
//! gets the answer. Tenants never see or answer each other's sessions (AEP-0004 §4.2 item 3:
//! a policy refusal is `unauthorized`), and a hub restarted mid-session, with a permission
//! held on an edge meanwhile and the other edges' events in flight as it stops, answers it
//! after the restart and ends with every edge's session complete, in order and without a
//! repeat.

use aep_testkit as common;

use std::time::Duration;

use aep_bridge::config::Config;
use aep_receivers::access::{AccessEntry, Role};
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const OPERATOR: &str = "hub-operator-token-0123456789";
const EDGE_LOCAL: &str = "edge-local-token";
const ALICE: &str = "alice-team-a-token-0123456789";
const BOB: &str = "bob-team-b-token-0123456789";
const HOOKS: &str = include_str!("../../tests/data/claude-code-s01-hooks.jsonl");

fn edge_token(i: usize) -> String {
    format!("edge-{i}-relay-token-0123456789")
}

/// Edges 1 and 2 are team A's, edge 3 team B's.
fn tenant_of_edge(i: usize) -> &'static str {
    if i == 3 { "team-b" } else { "team-a" }
}

fn hub_config(dir: &std::path::Path, listen: Option<std::net::SocketAddr>) -> Config {
    let mut cfg = config(dir);
    if let Some(a) = listen {
        cfg.server.listen = a;
    }
    cfg.server.host = "hub".into();
    cfg.server.token = OPERATOR.into();
    let entry = |name: String, tenant: &str, token: String, roles: &[Role]| AccessEntry {
        name,
        tenant: tenant.into(),
        token,
        roles: roles.to_vec(),
    };
    cfg.access = (1..=3).map(|i| entry(format!("lap-{i}"), tenant_of_edge(i), edge_token(i), &[Role::Emit])).collect();
    cfg.access.push(entry("alice".into(), "team-a", ALICE.into(), &[Role::View, Role::Answer]));
    cfg.access.push(entry("bob".into(), "team-b", BOB.into(), &[Role::View, Role::Answer]));
    assert!(Config::check(&cfg).is_empty(), "{:?}", cfg.check());
    cfg
}

fn edge_config(dir: &std::path::Path, i: usize, hub: &str) -> Config {
    let mut cfg = config(dir);
    cfg.server.host = format!("lap-{i}");
    cfg.server.token = EDGE_LOCAL.into();
    cfg.relay.url = Some(hub.parse().unwrap());
    cfg.relay.token = edge_token(i);
    cfg.control.attention_timeout_secs = 60;
    cfg
}

/// Edge `i`'s session id.
fn session(i: usize) -> String {
    format!("0d6cf5b8-1c92-46ad-b85f-ff084303900{i}")
}

/// The recorded Claude Code session's hook payloads, as edge `i`'s session.
fn payloads(i: usize) -> Vec<Value> {
    HOOKS
        .lines()
        .map(|l| {
            let mut p = serde_json::from_str::<Value>(l).unwrap()["payload"].clone();
            p["session_id"] = json!(session(i));
            p
        })
        .collect()
}

fn permission(i: usize) -> Value {
    let mut p: Value =
        serde_json::from_str(include_str!("../../tests/data/claude-code-permission-request.json")).unwrap();
    p["session_id"] = json!(session(i));
    p
}

async fn hook(edge: &Running, p: &Value) {
    hook_at(&edge.url(), p).await;
}

/// A hook call to the edge at `url`, answered at once (nothing held).
async fn hook_at(url: &str, p: &Value) {
    let (status, body) = post(
        format!("{url}/hooks/claude-code"),
        p.to_string(),
        vec![("authorization".into(), format!("Bearer {EDGE_LOCAL}"))],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

type WsStream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A person (or a tool) at the hub on its `/socket`, with a token of the access list.
struct Person {
    ws: WsStream,
    /// Every event frame received, for what must never have come.
    seen: Vec<Value>,
}

impl Person {
    async fn connect(hub: std::net::SocketAddr, token: &str, name: &str) -> Person {
        let mut req = format!("ws://{hub}/socket").into_client_request().unwrap();
        req.headers_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("connect /socket");
        let hello = json!({"type": "hello", "versions": ["0.1"], "role": "both", "identity": {"agent": name}});
        ws.send(Message::text(hello.to_string())).await.unwrap();
        let mut p = Person { ws, seen: Vec::new() };
        p.next(|v| v["type"] == "hello").await;
        p
    }

    async fn subscribe(&mut self) {
        let sub = json!({"type": "subscribe", "id": "all", "from": "all"});
        self.ws.send(Message::text(sub.to_string())).await.unwrap();
        self.next(|v| v["type"] == "subscribed" || v["type"] == "error").await;
    }

    async fn send(&mut self, v: Value) {
        self.ws.send(Message::text(v.to_string())).await.unwrap();
    }

    async fn next(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let seen = &mut self.seen;
        let ws = &mut self.ws;
        let fut = async {
            while let Some(Ok(m)) = ws.next().await {
                if let Message::Text(t) = m {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if v.get("aep").is_some() {
                        seen.push(v.clone());
                    }
                    if pred(&v) {
                        return v;
                    }
                }
            }
            panic!("socket closed");
        };
        tokio::time::timeout(Duration::from_secs(30), fut).await.expect("timed out waiting for a frame")
    }

    fn respond(&self, id: &str, req: &Value, option: &str) -> Value {
        json!({"aep": "0.1", "id": id, "type": "control.attention.respond", "subject": req["id"], "cause": req["id"],
            "time": "2026-12-07T00:00:00.000Z", "source": "aep://hub/agent/person", "agent": "person",
            "session": req["session"], "data": {"answer": {"option": option}}})
    }
}

/// The sessions a token's `GET /stream?from=all&live=0` replays.
async fn replayed_sessions(hub: std::net::SocketAddr, token: &str) -> (u16, std::collections::BTreeSet<String>) {
    let url = format!("http://{hub}/stream?from=all&live=0");
    let auth = format!("Bearer {token}");
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut res = agent.get(&url).header("authorization", &auth).call().unwrap();
        let status = res.status().as_u16();
        let body = res.body_mut().read_to_string().unwrap_or_default();
        let sessions = body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .filter_map(|v| v["session"].as_str().map(str::to_owned))
            .collect();
        (status, sessions)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_permission_held_on_edge_2_is_answered_at_the_hub_and_reaches_only_edge_2() {
    let hub_dir = tempfile::tempdir().unwrap();
    let hub = start(hub_config(hub_dir.path(), None)).await;
    let (mut edges, mut dirs) = (Vec::new(), Vec::new());
    for i in 1..=3 {
        let d = tempfile::tempdir().unwrap();
        edges.push(start(edge_config(d.path(), i, &hub.url())).await);
        dirs.push(d);
    }
    let mut alice = Person::connect(hub.bound.http, ALICE, "alice").await;
    alice.subscribe().await;
    let mut bob = Person::connect(hub.bound.http, BOB, "bob").await;
    bob.subscribe().await;

    // Each edge's agent starts its session, then asks for a permission through the real shim.
    let shim_bin: std::path::PathBuf = env!("CARGO_BIN_EXE_aep-hook").into();
    let mut shims = Vec::new();
    for (k, edge) in edges.iter().enumerate() {
        for p in &payloads(k + 1)[..4] {
            hook(edge, p).await;
        }
        shims.push(spawn_shim(shim_bin.clone(), "claude-code", edge.url(), EDGE_LOCAL, permission(k + 1)));
    }
    // Edges 1 and 2 relay independently: their requests reach alice in either order.
    let mut asked_alice = std::collections::BTreeMap::new();
    while asked_alice.len() < 2 {
        let v = alice.next(|v| v["type"] == "attention.requested").await;
        asked_alice.insert(v["session"].as_str().unwrap().to_owned(), v);
    }
    let (req1, req2) = (asked_alice[&session(1)].clone(), asked_alice[&session(2)].clone());
    let req3 = bob.next(|v| v["type"] == "attention.requested" && v["session"] == json!(session(3))).await;

    // Bob (team B) cannot answer team A's request: refused as `unauthorized`, cause-linked,
    // and nothing reaches edge 2 (AEP-0004 §4.2).
    bob.send(bob.respond("bob-tries-2", &req2, "allow")).await;
    let refused = bob.next(|v| v["type"] == "error" && v["cause"] == "bob-tries-2").await;
    assert_eq!(refused["code"], "unauthorized", "{refused}");
    // Neither can an edge's own token read the hub.
    let mut edge_reader = Person::connect(hub.bound.http, &edge_token(1), "lap-1").await;
    edge_reader.send(json!({"type": "subscribe", "id": "x", "from": "all"})).await;
    let no = edge_reader.next(|v| v["type"] == "error" || v["type"] == "subscribed").await;
    assert_eq!((no["type"].as_str(), no["code"].as_str()), (Some("error"), Some("unauthorized")), "{no}");

    // Alice answers edge 2: its shim replies allow; edges 1 and 3 are still waiting.
    alice.send(alice.respond("alice-allows-2", &req2, "allow")).await;
    let (code, out) = shims.remove(1).await.unwrap();
    assert_eq!(code, 0);
    let reply: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}), "{out}");
    alice.next(|v| v["type"] == "attention.resolved" && v["session"] == json!(session(2))).await;
    assert!(shims.iter().all(|s| !s.is_finished()), "edges 1 and 3 still hold their permissions");

    // Each of the others gets its own answer, never edge 2's.
    alice.send(alice.respond("alice-denies-1", &req1, "deny")).await;
    bob.send(bob.respond("bob-denies-3", &req3, "deny")).await;
    for s in shims {
        let (code, out) = s.await.unwrap();
        assert_eq!(code, 0);
        let reply: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "deny", "{out}");
    }
    bob.next(|v| v["type"] == "attention.resolved" && v["session"] == json!(session(3))).await;
    alice.next(|v| v["type"] == "attention.resolved" && v["session"] == json!(session(1))).await;

    // Each saw its own tenant's sessions only, live and in replay; the operator sees all.
    let sessions = |p: &Person| {
        p.seen
            .iter()
            .filter_map(|v| v["session"].as_str().map(str::to_owned))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(sessions(&alice), [session(1), session(2)].into_iter().collect());
    assert_eq!(sessions(&bob), [session(3)].into_iter().collect());
    assert_eq!(replayed_sessions(hub.bound.http, ALICE).await, (200, [session(1), session(2)].into_iter().collect()));
    assert_eq!(replayed_sessions(hub.bound.http, BOB).await, (200, [session(3)].into_iter().collect()));
    assert_eq!(replayed_sessions(hub.bound.http, OPERATOR).await.1.len(), 3);
    assert_eq!(replayed_sessions(hub.bound.http, &edge_token(2)).await.0, 403, "an edge's token may not read");
    // The roster lists a tenant's own claims only.
    bob.send(json!({"type": "roster", "id": "r"})).await;
    let roster = bob.next(|v| v["type"] == "roster").await;
    let listed: Vec<&str> =
        roster["entries"].as_array().unwrap().iter().filter_map(|e| e["session"].as_str()).collect();
    assert_eq!(listed, [session(3).as_str()], "{roster}");

    // An edge cannot write into another tenant's session (its events are refused).
    let mut lap3 = Person::connect(hub.bound.http, &edge_token(3), "lap-3").await;
    let intruder = json!({"aep": "0.1", "id": "01JINTRUDER0000000000000000", "type": "progress.status", "time": "2026-12-07T00:00:00.000Z",
        "source": "aep://lap-3/agent/claude-code", "agent": "claude-code", "session": session(1), "seq": 999, "epoch": 1,
        "data": {"phase": "injected"}});
    lap3.send(intruder).await;
    let no = lap3.next(|v| v["type"] == "error").await;
    assert_eq!(
        (no["code"].as_str(), no["cause"].as_str()),
        (Some("unauthorized"), Some("01JINTRUDER0000000000000000"))
    );

    for e in edges {
        e.shutdown().await;
    }
    hub.shutdown().await;
    let hub_log = log_events(&hub_dir.path().join("logs/claude-code").join(format!("{}.jsonl", session(1))));
    assert!(hub_log.iter().all(|e| e["id"] != "01JINTRUDER0000000000000000"), "nothing injected reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hub_restarted_mid_session_ends_with_every_edge_session_complete() {
    let hub_dir = tempfile::tempdir().unwrap();
    // The hub comes back on the same address, as a restarted service does.
    let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let hub = start(hub_config(hub_dir.path(), Some(addr))).await;
    let hub_url = format!("http://{addr}");
    let (mut edges, mut dirs) = (Vec::new(), Vec::new());
    for i in 1..=3 {
        let d = tempfile::tempdir().unwrap();
        edges.push(start(edge_config(d.path(), i, &hub_url)).await);
        dirs.push(d);
    }
    let all: Vec<Vec<Value>> = (1..=3).map(payloads).collect();
    let n = all[0].len();
    let hub_log = |i: usize| hub_dir.path().join("logs/claude-code").join(format!("{}.jsonl", session(i)));
    let edge_log = |k: usize| dirs[k].path().join("logs/claude-code").join(format!("{}.jsonl", session(k + 1)));

    // The first third reaches the hub.
    for (k, edge) in edges.iter().enumerate() {
        for p in &all[k][..n / 3] {
            hook(edge, p).await;
        }
    }
    for (k, edge) in edges.iter().enumerate() {
        let want = edge.wait_lines(&edge_log(k), 1).await.len();
        hub.wait_lines(&hub_log(k + 1), want).await;
    }
    // Edge 1's agent asks for a permission; alice sees it at the hub, which then stops
    // before anyone answers.
    let mut alice = Person::connect(addr, ALICE, "alice").await;
    alice.subscribe().await;
    let shim_bin: std::path::PathBuf = env!("CARGO_BIN_EXE_aep-hook").into();
    let shim = spawn_shim(shim_bin, "claude-code", edges[0].url(), EDGE_LOCAL, permission(1));
    let req = alice.next(|v| v["type"] == "attention.requested" && v["session"] == json!(session(1))).await;
    drop(alice);
    // The other agents go on, never held up (hooks fail open), while the hub stops: their
    // events are on the links, some in flight at the moment it stops (sent, not yet
    // confirmed), and the edges queue the rest; edge 1's agent waits for its answer.
    let going_on: Vec<_> = (1..3)
        .map(|k| {
            let (url, payloads) = (edges[k].url(), all[k][n / 3..2 * n / 3].to_vec());
            tokio::spawn(async move {
                for p in payloads {
                    hook_at(&url, &p).await;
                }
            })
        })
        .collect();
    hub.shutdown().await;
    for t in going_on {
        t.await.unwrap();
    }
    // The hub is back. Nothing new happened in edge 1's session, yet its link claims it
    // again (a repeat of its last event, dropped as such), so an answer at the restarted
    // hub reaches edge 1's waiting agent (AEP-0004 §4).
    let hub = start(hub_config(hub_dir.path(), Some(addr))).await;
    let mut alice = Person::connect(addr, ALICE, "alice").await;
    // Bounded: the edge reconnects with its backoff (from 200 ms) after the hub went away.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        alice.send(json!({"type": "roster", "id": "r"})).await;
        let roster = alice.next(|v| v["type"] == "roster").await;
        if roster["entries"].as_array().unwrap().iter().any(|e| e["session"] == json!(session(1))) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "edge 1's session was never claimed again: {roster}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    alice.send(alice.respond("alice-after-restart", &req, "allow")).await;
    let (code, out) = shim.await.unwrap();
    assert_eq!(code, 0);
    let reply: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}), "{out}");
    for p in &all[0][n / 3..2 * n / 3] {
        hook(&edges[0], p).await;
    }
    // The sessions run to their end.
    for (k, edge) in edges.iter().enumerate() {
        for p in &all[k][2 * n / 3..] {
            hook(edge, p).await;
        }
    }
    // The edges stop cleanly: their logs are complete, their relays drained and confirmed.
    for e in edges {
        e.shutdown().await;
    }
    for k in 0..3 {
        let mine = log_lines(&edge_log(k));
        let got = hub.wait_lines(&hub_log(k + 1), mine.len()).await;
        let ids = |lines: &[String]| {
            lines.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone()).collect::<Vec<_>>()
        };
        assert_eq!(ids(&got), ids(&mine), "edge {}: every event once, in order", k + 1);
        // Valid, and complete: runs closed, every tool request answered by an outcome.
        let mut check = aep_schemas::completeness::CompletenessChecker::new();
        let mut warnings = Vec::new();
        for l in &got {
            let v: Value = serde_json::from_str(l).unwrap();
            let ev = aep_schemas::validate::validate_value(&v).unwrap_or_else(|e| panic!("{e:?}: {l}"));
            warnings.extend(check.push_at(None, &ev));
        }
        warnings.extend(check.finish());
        assert!(warnings.is_empty(), "edge {}: {warnings:?}", k + 1);
        assert!(got.iter().any(|l| l.contains("\"session.ended\"")), "edge {}: the session ended", k + 1);
    }
    hub.shutdown().await;
}
