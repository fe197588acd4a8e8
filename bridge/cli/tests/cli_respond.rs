//! `aep-bridge respond` against a real bridge and a real WebSocket emitter that claims a
//! session, declares `control.accepts`, and answers routed commands (AEP-0004).

use aep_testkit as common;

use std::process::Command;
use std::time::Duration;

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};

const TOKEN: &str = "s3cret-token";

fn now() -> String {
    aep_bridge::time::rfc3339_ms(aep_bridge::time::now_ms())
}

fn event(ty: &str, session: &str, seq: u64, extra: Value) -> Value {
    let mut v = json!({
        "aep": "0.1", "id": ulid::Ulid::new().to_string(), "type": ty, "time": now(),
        "source": "aep://test-host/agent/test-agent", "agent": "test-agent",
        "session": session, "seq": seq,
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

/// The emitter: claims `session` with an attention.requested, then answers the
/// `answer_on`-th delivery of a command with accepted + answered + resolved and re-acks
/// later deliveries byte-identically. Says on `ready` once its request is in the collector.
/// Returns every command frame it received.
async fn emitter(
    base: String,
    session: String,
    req_id: String,
    answer_on: usize,
    ready: oneshot::Sender<()>,
) -> Vec<Value> {
    emitter_from(base, session, req_id, answer_on, ready, None).await
}

/// [`emitter`]; with `resumed = Some(seq)` it is the agent come back to a restarted bridge
/// with its request still open: it claims the session with another event from `seq` on and
/// raises nothing again (the request is in the first process's log only).
async fn emitter_from(
    base: String,
    session: String,
    req_id: String,
    answer_on: usize,
    ready: oneshot::Sender<()>,
    resumed: Option<u64>,
) -> Vec<Value> {
    let mut req = format!("{}/socket", base.replace("http://", "ws://")).into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("emitter connect");
    let hello = json!({"type": "hello", "versions": ["0.1"], "role": "emitter",
        "identity": {"agent": "test-agent", "instance": "test/1"},
        "capabilities": {"emits": ["attention", "control"], "control": {"accepts": ["control.attention.respond"], "ack_window_ms": 10000}}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let reply = ws.next().await.unwrap().unwrap();
    assert!(reply.to_text().unwrap().contains("\"hello\""), "{reply:?}");
    let mut seq = resumed.unwrap_or(1);
    let first = if resumed.is_some() {
        event("x.test-agent.session.resumed", &session, seq, json!({"severity": "debug", "data": {}}))
    } else {
        let mut request = event(
            "attention.requested",
            &session,
            seq,
            json!({"severity": "notice", "data": {"kind": "permission", "prompt": "Allow Bash?", "options": [{"id": "allow", "label": "1"}, {"id": "deny", "label": "2"}]}}),
        );
        request["id"] = json!(req_id);
        request
    };
    ws.send(Message::text(first.to_string())).await.unwrap();
    // The endpoint handles a connection's frames in order: the pong means the request
    // before it is in the collector (what `pending` reads).
    ws.send(Message::text(json!({"type": "ping", "t": "ready"}).to_string())).await.unwrap();
    let mut ready = Some(ready);
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] == "pong" {
            if let Some(r) = ready.take() {
                let _ = r.send(());
            }
            continue;
        }
        if v["type"] != "control.attention.respond" {
            continue;
        }
        got.push(v.clone());
        if got.len() < answer_on {
            continue;
        }
        let cmd_id = v["id"].as_str().unwrap().to_owned();
        seq += 1;
        let a = event("control.accepted", &session, seq, json!({"cause": cmd_id, "data": {}})).to_string();
        ws.send(Message::text(a.clone())).await.unwrap();
        seq += 1;
        let answered = event(
            "attention.answered",
            &session,
            seq,
            json!({"subject": req_id, "cause": cmd_id, "data": {"answer": v["data"]["answer"], "via": "control"}}),
        );
        ws.send(Message::text(answered.to_string())).await.unwrap();
        seq += 1;
        let resolved = event(
            "attention.resolved",
            &session,
            seq,
            json!({"subject": req_id, "cause": cmd_id, "data": {"resolution": "answered"}}),
        );
        ws.send(Message::text(resolved.to_string())).await.unwrap();
        // Linger for a late retransmission, then leave.
        let _ = tokio::time::timeout(Duration::from_millis(1500), async {
            while let Some(Ok(Message::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["type"] == "control.attention.respond" {
                    got.push(v);
                    // AEP-0004 §3: a redelivery gets the recorded ack, byte-identically.
                    let _ = ws.send(Message::text(a.clone())).await;
                }
            }
        })
        .await;
        break;
    }
    got
}

async fn cli(args: Vec<String>) -> (i32, String, String) {
    cli_in(args, None).await
}

/// [`cli`] with `AEP_BRIDGE_DATA_DIR` set as `serve` would read it.
async fn cli_in(args: Vec<String>, data_dir: Option<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
        cmd.args(&args).env_remove("AEP_URL").env_remove("AEP_TOKEN").env_remove("AEP_BRIDGE_DATA_DIR");
        if let Some(d) = data_dir {
            cmd.env("AEP_BRIDGE_DATA_DIR", d);
        }
        let out = cmd.output().expect("run aep-bridge");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

/// Waits for an emitter's or a target's word that what it sent is in the collector.
async fn ready(rx: oneshot::Receiver<()>) {
    let said = tokio::time::timeout(Duration::from_secs(20), rx).await;
    assert!(matches!(said, Ok(Ok(()))), "the peer never got its events into the collector");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respond_round_trip_looks_up_the_session_and_prints_ack_and_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    let b = start(cfg).await;
    let req_id = ulid::Ulid::new().to_string();
    let (tx, rx) = oneshot::channel();
    let em = tokio::spawn(emitter(b.url(), "sess-1".into(), req_id.clone(), 1, tx));
    ready(rx).await;
    let (code, out, err) =
        cli(s(&["respond", &req_id, "--option", "allow", "--url", &b.url(), "--token", TOKEN, "--timeout-ms", "8000"]))
            .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("control.accepted"), "{out}");
    assert!(out.contains("attention.answered"), "{out}");
    assert!(out.contains("attention.resolved"), "{out}");
    let cmds = em.await.unwrap();
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    let c = &cmds[0];
    assert_eq!(c["session"], "sess-1");
    assert_eq!(c["subject"], req_id.as_str());
    assert_eq!(c["cause"], req_id.as_str());
    assert_eq!(c["agent"], "aep-cli");
    assert_eq!(c["data"]["answer"]["option"], "allow");
    assert!(c.get("seq").is_none(), "commands are seq-less: {c}");
    b.shutdown().await;
}

/// After a restart the collector's replay holds nothing from before it, but an agent may
/// still wait on a request the first process logged (an observer re-opens it from its
/// cursor under the same id): `respond <id>` finds it in the session logs of the data
/// folder and needs no `--session`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respond_after_a_restart_finds_the_request_in_the_logs() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || {
        let mut c = config(dir.path());
        c.server.token = TOKEN.into();
        c
    };
    let b = start(cfg()).await;
    let req_id = ulid::Ulid::new().to_string();
    let (tx, rx) = oneshot::channel();
    let first = tokio::spawn(emitter(b.url(), "sess-r".into(), req_id.clone(), 1, tx));
    ready(rx).await;
    b.shutdown().await;
    assert!(first.await.unwrap().is_empty(), "nothing was answered before the restart");

    let b = start(cfg()).await;
    let (tx, rx) = oneshot::channel();
    let agent = tokio::spawn(emitter_from(b.url(), "sess-r".into(), req_id.clone(), 1, tx, Some(10)));
    ready(rx).await;
    let data = dir.path().to_str().unwrap();
    let (code, out, err) = cli_in(
        s(&["respond", &req_id, "--option", "allow", "--url", &b.url(), "--token", TOKEN, "--timeout-ms", "8000"]),
        Some(data.to_owned()),
    )
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("sess-r.jsonl"), "says where it found the request: {err}");
    assert!(out.contains("control.accepted") && out.contains("attention.resolved"), "{out}");
    let cmds = agent.await.unwrap();
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert_eq!((cmds[0]["session"].as_str(), cmds[0]["subject"].as_str()), (Some("sess-r"), Some(req_id.as_str())));
    // Once answered, its log says so: a second respond notes it is closed.
    logged(&b, &dir.path().join("logs/test-agent/sess-r.jsonl"), "attention.resolved").await;
    let (_, _, err) = cli(s(&[
        "respond",
        &req_id,
        "--option",
        "allow",
        "--url",
        &b.url(),
        "--token",
        TOKEN,
        "--data-dir",
        data,
        "--ack-window-ms",
        "500",
        "--timeout-ms",
        "500",
    ]))
    .await;
    assert!(err.contains("already closed"), "{err}");
    // Not in the buffer and not in the logs: still an error before anything is sent.
    let (code, _, err) =
        cli(s(&["respond", "nope", "--option", "a", "--url", &b.url(), "--token", TOKEN, "--data-dir", data])).await;
    assert_eq!(code, 1);
    assert!(err.contains("no attention.requested"), "{err}");
    b.shutdown().await;
}

/// Waits until the log at `path` holds an event of type `ty`, looking again each time the
/// JSONL sink finishes events.
async fn logged(b: &Running, path: &std::path::Path, ty: &str) {
    let mut done = b.bound.progress.get("jsonl").expect("the JSONL log is on").subscribe();
    let needle = format!("\"type\":\"{ty}\"");
    let wait = async {
        loop {
            done.borrow_and_update();
            if aep_testkit::log_lines(path).iter().any(|l| l.contains(&needle)) {
                return;
            }
            done.changed().await.expect("the bridge is running");
        }
    };
    tokio::time::timeout(Duration::from_secs(20), wait).await.expect("the event never reached the log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_retransmits_the_same_command_id_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    let b = start(cfg).await;
    let req_id = ulid::Ulid::new().to_string();
    // The emitter ignores the first delivery: only the retransmission gets an ack.
    let (tx, rx) = oneshot::channel();
    let em = tokio::spawn(emitter(b.url(), "sess-2".into(), req_id.clone(), 2, tx));
    ready(rx).await;
    let (code, out, err) = cli(s(&[
        "respond",
        &req_id,
        "--text",
        "yes please",
        "--session",
        "sess-2",
        "--url",
        &b.url(),
        "--token",
        TOKEN,
        "--ack-window-ms",
        "800",
        "--timeout-ms",
        "8000",
    ]))
    .await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    assert!(err.contains("retransmitting"), "{err}");
    let cmds = em.await.unwrap();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    assert_eq!(cmds[0], cmds[1], "a retry is byte-identical (same id)");
    assert_eq!(cmds[0]["data"]["answer"]["text"], "yes please");
    assert_eq!(cmds[0]["capture"], "redacted");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_unauthorized_and_no_route() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    let b = start(cfg).await;
    // No token at all: the binding itself refuses.
    let (code, out, _) =
        cli(s(&["respond", "r1", "--option", "allow", "--session", "nobody", "--url", &b.url()])).await;
    assert_eq!(code, 1);
    assert!(out.contains("unauthorized"), "{out}");
    // Authenticated, but no emitter claims the session: the relay refuses on its behalf.
    let (code, out, err) = cli(s(&[
        "respond",
        "r1",
        "--option",
        "allow",
        "--session",
        "nobody",
        "--url",
        &b.url(),
        "--token",
        TOKEN,
        "--ack-window-ms",
        "3000",
    ]))
    .await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("refused: no-route"), "{out}");
    // An unknown request id without --session is an error before anything is sent.
    let (code, _, err) = cli(s(&["respond", "nope", "--option", "a", "--url", &b.url(), "--token", TOKEN])).await;
    assert_eq!(code, 1);
    assert!(err.contains("no attention.requested"), "{err}");
    b.shutdown().await;

    // A watch-only bridge (no token configured): control is refused in-band, unauthorized.
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let (code, out, _) =
        cli(s(&["respond", "r1", "--option", "allow", "--session", "nobody", "--url", &b.url()])).await;
    assert_eq!(code, 1);
    assert!(out.contains("refused: unauthorized"), "{out}");
    b.shutdown().await;
}

/// A cancel target: claims `session` with a run.started (saying so on `ready` once the claim
/// is in place), then answers one control.cancel with accepted + run.cancelled, or with a
/// `refused` nack. Returns the commands it got and its still open socket.
async fn cancel_target(
    base: String,
    session: String,
    reject: bool,
    ready: oneshot::Sender<()>,
) -> (Vec<Value>, impl Sized) {
    let mut req = format!("{}/socket", base.replace("http://", "ws://")).into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("connect");
    let hello = json!({"type": "hello", "versions": ["0.1"], "role": "emitter",
        "identity": {"agent": "test-agent"}, "capabilities": {"control": {"accepts": ["control.cancel"]}}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    let _ = ws.next().await;
    let started = event("run.started", &session, 1, json!({"run": "r1", "data": {}}));
    ws.send(Message::text(started.to_string())).await.unwrap();
    // Frames are handled in order: the pong means the claim is in place.
    ws.send(Message::text(json!({"type": "ping", "t": "ready"}).to_string())).await.unwrap();
    let mut ready = Some(ready);
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Ok(Some(Ok(msg))) = tokio::time::timeout_at(deadline, ws.next()).await {
        let Message::Text(t) = msg else { continue };
        let v: Value = serde_json::from_str(&t).unwrap();
        if v["type"] == "pong" {
            if let Some(r) = ready.take() {
                let _ = r.send(());
            }
            continue;
        }
        if v["type"] != "control.cancel" {
            continue;
        }
        got.push(v.clone());
        let id = v["id"].as_str().unwrap().to_owned();
        if reject {
            let nack = event("control.rejected", &session, 2, json!({"cause": id, "data": {"reason": "refused"}}));
            ws.send(Message::text(nack.to_string())).await.unwrap();
        } else {
            let ack = event("control.accepted", &session, 2, json!({"cause": id, "data": {}}));
            ws.send(Message::text(ack.to_string())).await.unwrap();
            let done = event("run.cancelled", &session, 3, json!({"run": "r1", "cause": id, "data": {}}));
            ws.send(Message::text(done.to_string())).await.unwrap();
        }
        break;
    }
    // The socket stays open until the caller is done with the command's outcome.
    (got, ws)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_accepted_and_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    let b = start(cfg).await;
    for (session, reject, want) in [("c-ok", false, 0), ("c-no", true, 1)] {
        let (tx, rx) = oneshot::channel();
        let t = tokio::spawn(cancel_target(b.url(), session.into(), reject, tx));
        ready(rx).await;
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
            .args(["cancel", session, "r1", "--reason", "enough", "--url", &b.url(), "--token", TOKEN])
            .args(["--ack-window-ms", "3000", "--timeout-ms", "5000"])
            .env_remove("AEP_URL")
            .env_remove("AEP_TOKEN")
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(want), "{session}: {}", String::from_utf8_lossy(&out.stderr));
        let (cmds, _socket) = t.await.unwrap();
        assert_eq!(cmds.len(), 1);
        assert_eq!(cmds[0]["run"], "r1");
        assert_eq!(cmds[0]["data"]["scope"], "run");
        assert_eq!(cmds[0]["data"]["reason"], "enough");
        assert_eq!(cmds[0]["capture"], "redacted");
    }
    b.shutdown().await;
}

/// `pending` and `respond` as a team uses them at its hub: an edge bridge relays a Claude
/// Code session to a hub with an access list and holds its permission request (the agent's
/// hook call waiting); `pending` with alice's token (team A, view and answer) lists it, with
/// bob's (team B) it does not; bob's `respond` is refused as `unauthorized` (AEP-0004 §4.2)
/// and the agent still waits; alice's reaches the edge and the agent's hook call returns
/// allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pending_and_respond_at_a_hub_answer_an_edges_agent_for_its_tenant_only() {
    use aep_receivers::access::{AccessEntry, Role};
    const OPERATOR: &str = "hub-operator-token-0123456789";
    const ALICE: &str = "alice-team-a-token-0123456789";
    const BOB: &str = "bob-team-b-token-0123456789";
    const EDGE: &str = "edge-1-relay-token-0123456789";
    const LOCAL: &str = "edge-local-token";
    let hub_dir = tempfile::tempdir().unwrap();
    let mut cfg = config(hub_dir.path());
    cfg.server.host = "hub".into();
    cfg.server.token = OPERATOR.into();
    let entry = |name: &str, tenant: &str, token: &str, roles: &[Role]| AccessEntry {
        name: name.into(),
        tenant: tenant.into(),
        token: token.into(),
        roles: roles.to_vec(),
    };
    cfg.access = vec![
        entry("lap-1", "team-a", EDGE, &[Role::Emit]),
        entry("alice", "team-a", ALICE, &[Role::View, Role::Answer]),
        entry("bob", "team-b", BOB, &[Role::View, Role::Answer]),
    ];
    let hub = start(cfg).await;
    // Bob's own machine's data folder: empty (nothing of team A's there either).
    let bob_home = tempfile::tempdir().unwrap();
    let bob_dir = || bob_home.path().display().to_string();
    let edge_dir = tempfile::tempdir().unwrap();
    let mut cfg = config(edge_dir.path());
    cfg.server.host = "lap-1".into();
    cfg.server.token = LOCAL.into();
    cfg.relay.url = Some(hub.url().parse().unwrap());
    cfg.relay.token = EDGE.into();
    cfg.control.attention_timeout_secs = 60;
    let edge = start(cfg).await;

    let session = "5e55b0b0-1c92-46ad-b85f-ff0843039001";
    let auth = vec![("authorization".to_owned(), format!("Bearer {LOCAL}"))];
    let hooks = include_str!("../../tests/data/claude-code-s01-hooks.jsonl");
    for l in hooks.lines().take(4) {
        let mut p = serde_json::from_str::<Value>(l).unwrap()["payload"].clone();
        p["session_id"] = json!(session);
        let (status, body) = post(format!("{}/hooks/claude-code", edge.url()), p.to_string(), auth.clone()).await;
        assert_eq!(status, 200, "{body}");
    }
    let mut ask: Value =
        serde_json::from_str(include_str!("../../tests/data/claude-code-permission-request.json")).unwrap();
    ask["session_id"] = json!(session);
    // The agent's hook call, held at the edge until someone answers.
    let held = tokio::spawn(post(format!("{}/hooks/claude-code", edge.url()), ask.to_string(), auth));

    let pending = |token: &'static str| {
        let url = hub.url();
        async move { cli(s(&["pending", "--url", &url, "--token", token, "--json"])).await }
    };
    // The request reaches the hub over the relay; alice's `pending` lists it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let request = loop {
        let (code, out, err) = pending(ALICE).await;
        assert_eq!(code, 0, "{out}{err}");
        let open: Vec<Value> = out.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        if let Some(r) = open.iter().find(|r| r.to_string().contains(session)) {
            break r.clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "alice's pending never listed it: {out}");
        // The relay carries it within milliseconds; `pending` is a one-shot read.
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let id = ["request", "id"].iter().find_map(|k| request[*k].as_str()).expect("the request's id").to_owned();
    let (code, out, err) = pending(BOB).await;
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains(session) && !out.contains(&id), "bob sees no team A request: {out}");

    // Bob's replay does not hold the request, so his `respond` cannot even find it; told
    // the session, his command reaches the hub and is refused there.
    let bob_respond = |extra: &[&str]| {
        let mut args = s(&["respond", &id, "--option", "allow", "--url", &hub.url(), "--token", BOB]);
        args.extend(s(extra));
        cli(args)
    };
    let (code, out, err) = bob_respond(&["--data-dir", &bob_dir()]).await;
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("no attention.requested with id"), "{err}");
    let (code, out, err) = bob_respond(&["--session", session]).await;
    assert_ne!(code, 0, "bob may not answer: {out}");
    assert!(format!("{out}{err}").contains("unauthorized"), "{out}{err}");
    assert!(!held.is_finished(), "the agent still waits after bob's attempts");

    let (code, out, err) = cli(s(&["respond", &id, "--option", "allow", "--url", &hub.url(), "--token", ALICE])).await;
    assert_eq!(code, 0, "{out}{err}");
    let (status, body) = tokio::time::timeout(Duration::from_secs(30), held).await.expect("answered").unwrap();
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}), "{body}");
    let (_, out, _) = pending(ALICE).await;
    assert!(!out.contains(&id), "answered: no longer pending: {out}");
    edge.shutdown().await;
    hub.shutdown().await;
}
