//! The control loop end to end: the real `aep-hook` shim holds a permission moment open,
//! a second AEP party answers over the collector's authenticated WebSocket, and the hook
//! reply, the ack, the cause chain and the JSONL log are checked.

use aep_testkit as common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

const TOKEN: &str = "s3cret-token";

type WsStream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

struct Phone {
    ws: WsStream,
}

impl Phone {
    async fn connect(http: std::net::SocketAddr, token: Option<&str>) -> Phone {
        let mut req = format!("ws://{http}/socket").into_client_request().unwrap();
        if let Some(t) = token {
            req.headers_mut().insert("authorization", format!("Bearer {t}").parse().unwrap());
        }
        let (mut ws, _) = tokio_tungstenite::connect_async(req).await.expect("connect /socket");
        let hello = json!({"type": "hello", "versions": ["0.1"], "role": "both", "identity": {"agent": "phone"}});
        ws.send(Message::text(hello.to_string())).await.unwrap();
        let mut p = Phone { ws };
        let h = p.next(|v| v["type"] == "hello").await;
        assert_eq!(h["versions"], json!(["0.1"]));
        p.ws.send(Message::text(
            json!({"type": "subscribe", "id": "all", "from": "all",
            "filter": {"type": ["attention.*", "control.*"]}})
            .to_string(),
        ))
        .await
        .unwrap();
        p.next(|v| v["type"] == "subscribed").await;
        p
    }

    async fn next(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        let fut = async {
            while let Some(Ok(m)) = self.ws.next().await {
                if let Message::Text(t) = m {
                    let v: Value = serde_json::from_str(&t).unwrap();
                    if std::env::var("DEBUG_FRAMES").is_ok() {
                        eprintln!("frame: {v}");
                    }
                    if pred(&v) {
                        return v;
                    }
                }
            }
            panic!("socket closed");
        };
        tokio::time::timeout(Duration::from_secs(20), fut).await.expect("timed out waiting for a frame")
    }

    async fn respond(&mut self, id: &str, req: &Value, answer: Value) {
        let cmd = json!({"aep": "0.1", "id": id, "type": "control.attention.respond", "subject": req["id"], "cause": req["id"],
            "time": "2026-11-30T00:00:00.000Z", "source": "aep://phone/agent/phone", "agent": "phone",
            "session": req["session"], "data": {"answer": answer.clone()}});
        // Free text is redacted-gated (AEP-0004 §5): a sender carrying it declares the level.
        let mut cmd = cmd;
        if answer.get("text").is_some() || answer.get("values").is_some() {
            cmd["capture"] = json!("redacted");
        }
        self.ws.send(Message::text(cmd.to_string())).await.unwrap();
    }
}

/// Runs the real shim in the background; returns its stdout when it exits.
fn spawn_shim(url: String, vendor: &'static str, payload: Value) -> tokio::task::JoinHandle<(i32, String)> {
    aep_testkit::spawn_shim(env!("CARGO_BIN_EXE_aep-hook").into(), vendor, url, TOKEN, payload)
}

fn cc_permission() -> Value {
    serde_json::from_str(include_str!("../../tests/data/claude-code-permission-request.json")).unwrap()
}

async fn bridge(timeout_secs: u64, token: bool) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.control.attention_timeout_secs = timeout_secs;
    if token {
        cfg.server.token = TOKEN.into();
    }
    (start(cfg).await, dir)
}

fn log(dir: &std::path::Path, agent: &str, session: &str) -> Vec<Value> {
    aep_testkit::log_events(&dir.join("logs").join(agent).join(format!("{session}.jsonl")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_from_the_phone_releases_the_held_hook() {
    let (b, dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    let shim = spawn_shim(b.url(), "claude-code", cc_permission());
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    assert_eq!(req["data"]["kind"], "permission");
    assert_eq!(req["data"]["respond_via"], json!(["control"]));
    phone.respond("cmd-allow", &req, json!({"option": "allow"})).await;
    let ack = phone.next(|v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-allow");
    let answered = phone.next(|v| v["type"] == "attention.answered").await;
    assert_eq!((answered["subject"].clone(), answered["cause"].clone()), (req["id"].clone(), json!("cmd-allow")));
    assert_eq!(answered["data"]["answer"], json!({"option": "allow"}));
    let resolved = phone.next(|v| v["type"] == "attention.resolved").await;
    assert_eq!(resolved["data"]["resolution"], "answered");
    let (code, out) = shim.await.unwrap();
    assert_eq!(code, 0);
    let reply: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        reply,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}})
    );

    // A retransmitted command is re-acked byte-identically and applied once.
    phone.respond("cmd-allow", &req, json!({"option": "allow"})).await;
    let again = phone.next(|v| v["type"] == "control.accepted").await;
    assert_eq!(again, ack, "the recorded ack, not a new decision");
    b.shutdown().await;
    let events = log(dir.path(), "claude-code", req["session"].as_str().unwrap());
    let acks: Vec<&Value> = events.iter().filter(|e| e["type"] == "control.accepted").collect();
    assert!(acks.iter().all(|a| a["id"] == ack["id"]), "one ack decision in the log");
    assert_eq!(events.iter().filter(|e| e["type"] == "attention.answered").count(), 1);
    // The command is logged under its sender's identity (agent `phone`), same session name.
    let cmds = log(dir.path(), "phone", req["session"].as_str().unwrap());
    assert!(cmds.iter().any(|e| e["type"] == "control.attention.respond" && e["id"] == "cmd-allow"), "{cmds:?}");
    let text: String = events.iter().map(|e| e.to_string() + "\n").collect();
    let (_, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
    assert!(failures.is_empty(), "{failures:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn free_text_denies_with_the_text_as_the_reason_and_option_words_count() {
    let (b, _dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    // Free text on a permission request: the refusing option, with the text as guidance.
    let shim = spawn_shim(b.url(), "claude-code", cc_permission());
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    phone.respond("cmd-text", &req, json!({"text": "use the test runner instead"})).await;
    let answered = phone.next(|v| v["type"] == "attention.answered").await;
    assert_eq!(answered["data"]["answer"]["option"], "deny");
    assert_eq!(
        answered["data"]["answer"]["text"], "use the test runner instead",
        "text survives at the redacted attention ceiling"
    );
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(
        reply["hookSpecificOutput"]["decision"],
        json!({"behavior": "deny", "message": "use the test runner instead"})
    );

    // An option word sent as text is that option.
    let shim = spawn_shim(b.url(), "claude-code", cc_permission());
    let req2 = phone.next(|v| v["type"] == "attention.requested" && v["id"] != req["id"]).await;
    phone.respond("cmd-word", &req2, json!({"text": "  ALLOW "})).await;
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}));

    // Plain deny option: the canned message.
    let shim = spawn_shim(b.url(), "claude-code", cc_permission());
    let req3 =
        phone.next(|v| v["type"] == "attention.requested" && v["id"] != req["id"] && v["id"] != req2["id"]).await;
    phone.respond("cmd-deny", &req3, json!({"option": "deny"})).await;
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "deny");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_and_qwen_permission_loops() {
    let (b, _dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    for (n, vendor) in ["codex", "qwen-code"].into_iter().enumerate() {
        let payload = json!({"hook_event_name": "PermissionRequest", "session_id": format!("s-{vendor}"), "turn_id": "t1",
            "tool_name": "Bash", "tool_input": {"command": "rm -rf build", "description": "clean"}});
        let shim = spawn_shim(b.url(), vendor, payload);
        let req = phone.next(|v| v["type"] == "attention.requested" && v["agent"] == vendor).await;
        phone.respond(&format!("cmd-{n}"), &req, json!({"option": "allow"})).await;
        let ack = phone.next(|v| v["type"] == "control.accepted" && v["agent"] == vendor).await;
        assert_eq!(ack["cause"], format!("cmd-{n}"));
        let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
        assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow", "{vendor}");
    }
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_answers_so_the_hook_fails_open_with_attention_timeout() {
    let (b, dir) = bridge(1, true).await;
    let (code, out) = spawn_shim(b.url(), "claude-code", cc_permission()).await.unwrap();
    assert_eq!((code, out.as_str()), (0, ""), "neutral reply: Claude Code shows its own dialog");
    b.shutdown().await;
    let events = log(dir.path(), "claude-code", cc_permission()["session_id"].as_str().unwrap());
    let req = events.iter().find(|e| e["type"] == "attention.requested").unwrap();
    let timeout = events.iter().find(|e| e["type"] == "attention.timeout").expect("attention.timeout emitted");
    assert_eq!((timeout["subject"].clone(), timeout["cause"].clone()), (req["id"].clone(), req["id"].clone()));
    assert_eq!(timeout["data"]["after_ms"], 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unauthenticated_binding_cannot_deliver_a_command() {
    // No token configured: the collector is watch-only.
    let (b, dir) = bridge(2, false).await;
    let mut phone = Phone::connect(b.bound.http, None).await;
    let shim = spawn_shim(b.url(), "claude-code", cc_permission());
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    // Nothing can deliver an answer here, so the request says it is answered in the agent's UI.
    assert_eq!(req["data"]["respond_via"], json!(["oob"]));
    phone.respond("cmd-anon", &req, json!({"option": "allow"})).await;
    let err = phone.next(|v| v["type"] == "error").await;
    assert_eq!((err["code"].as_str(), err["cause"].as_str()), (Some("unauthorized"), Some("cmd-anon")));
    let (_, out) = shim.await.unwrap();
    assert_eq!(out, "", "the hook was not answered by the refused command");
    b.shutdown().await;
    let events = log(dir.path(), "claude-code", req["session"].as_str().unwrap());
    assert!(!events.iter().any(|e| e["type"] == "control.attention.respond" || e["type"] == "control.accepted"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_question_form_nacks_invalid_values_then_applies_labels() {
    let (b, _dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    let payload = json!({"hook_event_name": "PermissionRequest", "session_id": "s-form", "tool_name": "AskUserQuestion",
        "tool_input": {"questions": [
            {"question": "Which database?", "header": "DB", "multiSelect": false,
             "options": [{"label": "Postgres", "description": "server"}, {"label": "SQLite", "description": "file"}]},
            {"question": "Which features?", "header": "Features", "multiSelect": true,
             "options": [{"label": "Auth"}, {"label": "Search"}, {"label": "Billing"}]}]}});
    let shim = spawn_shim(b.url(), "claude-code", payload);
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    assert_eq!(req["data"]["kind"], "form");
    assert_eq!(req["data"]["fields"].as_array().unwrap().len(), 2);
    // Missing the required second field: nacked invalid, the request stays pending.
    phone.respond("cmd-f1", &req, json!({"values": {"1": "2"}})).await;
    let nack = phone.next(|v| v["type"] == "control.rejected").await;
    assert_eq!((nack["cause"].as_str(), nack["data"]["reason"].as_str()), (Some("cmd-f1"), Some("invalid")));
    phone.respond("cmd-f2", &req, json!({"values": {"1": "2", "2": ["1", "3"]}})).await;
    let ack = phone.next(|v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-f2");
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    let d = &reply["hookSpecificOutput"]["decision"];
    assert_eq!(d["behavior"], "allow");
    assert_eq!(d["updatedInput"]["answers"], json!({"Which database?": "SQLite", "Which features?": "Auth, Billing"}));
    assert_eq!(d["updatedInput"]["questions"][0]["question"], "Which database?");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_is_answered_with_accept_and_content() {
    let (b, _dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    let payload = json!({"hook_event_name": "Elicitation", "session_id": "s-elicit", "mcp_server_name": "mockmcp",
        "message": "favourite colour?", "mode": "form",
        "requested_schema": {"type": "object", "properties": {"colour": {"type": "string", "description": "Your colour"}}, "required": ["colour"]}});
    let shim = spawn_shim(b.url(), "claude-code", payload);
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    let field = req["data"]["fields"][0]["id"].as_str().unwrap().to_owned();
    phone.respond("cmd-e1", &req, json!({"values": {field.clone(): "teal"}})).await;
    phone.next(|v| v["type"] == "control.accepted").await;
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(
        reply["hookSpecificOutput"],
        json!({"hookEventName": "Elicitation", "action": "accept", "content": {field: "teal"}})
    );
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_own_dialog_settles_a_pending_request() {
    let (b, dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    let perm = cc_permission();
    let shim = spawn_shim(b.url(), "claude-code", perm.clone());
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    // The person answered in Claude Code's own dialog: the tool ran and PostToolUse arrives.
    let post = json!({"hook_event_name": "PostToolUse", "session_id": perm["session_id"], "prompt_id": perm["prompt_id"],
        "tool_name": "Bash", "tool_input": perm["tool_input"], "tool_response": {"stdout": "42"}, "tool_use_id": "toolu_x"});
    let (code, out) = spawn_shim(b.url(), "claude-code", post).await.unwrap();
    assert_eq!((code, out.as_str()), (0, ""));
    // It ran, so it was allowed there: answered out of band, not dismissed.
    let answered = phone.next(|v| v["type"] == "attention.answered").await;
    assert_eq!(answered["subject"], req["id"]);
    assert_eq!(
        (answered["data"]["answer"].clone(), answered["data"]["via"].clone()),
        (json!({"option": "allow"}), json!("oob"))
    );
    let resolved = phone.next(|v| v["type"] == "attention.resolved").await;
    assert_eq!(
        (resolved["subject"].clone(), resolved["data"]["resolution"].clone()),
        (req["id"].clone(), json!("answered"))
    );
    let (code, out) = shim.await.unwrap();
    assert_eq!((code, out.as_str()), (0, ""), "the held hook is freed with the neutral reply");
    // A late answer for the settled request is refused, never applied.
    phone.respond("cmd-late", &req, json!({"option": "allow"})).await;
    let nack = phone.next(|v| v["type"] == "control.rejected").await;
    assert_eq!(nack["cause"], "cmd-late");
    b.shutdown().await;
    let events = log(dir.path(), "claude-code", req["session"].as_str().unwrap());
    assert_eq!(events.iter().filter(|e| e["type"] == "attention.resolved").count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opt_in_gates_hold_only_the_configured_tools() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = TOKEN.into();
    cfg.control.gates.insert("vscode".into(), vec!["runInTerminal".into()]);
    cfg.control.gates.insert("hermes".into(), vec![]);
    let b = start(cfg).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    // An ungated tool is not held.
    let free = json!({"hook_event_name": "PreToolUse", "session_id": "vs-1", "tool_name": "readFile", "tool_input": {"path": "a"}});
    assert_eq!(spawn_shim(b.url(), "vscode", free).await.unwrap(), (0, String::new()));
    // The gated one is, with VS Code's own third decision `ask`.
    let gated = json!({"hook_event_name": "PreToolUse", "session_id": "vs-1", "tool_name": "runInTerminal", "tool_input": {"command": "make"}});
    let shim = spawn_shim(b.url(), "vscode", gated);
    let req = phone.next(|v| v["type"] == "attention.requested" && v["agent"] == "vscode").await;
    assert_eq!(req["subject"], "runInTerminal");
    assert!(req["data"]["options"].as_array().unwrap().iter().any(|o| o["id"] == "ask"));
    phone.respond("cmd-vs", &req, json!({"option": "ask"})).await;
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(reply, json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "ask"}}));
    // Hermes (every tool gated): a deny is the vendor's block contract.
    let pre = json!({"hook_event_name": "pre_tool_call", "session_id": "h-1", "tool_name": "terminal", "args": {"command": "rm -rf /"}});
    let shim = spawn_shim(b.url(), "hermes", pre);
    let req = phone.next(|v| v["type"] == "attention.requested" && v["agent"] == "hermes").await;
    phone.respond("cmd-h", &req, json!({"option": "deny"})).await;
    let reply: Value = serde_json::from_str(&shim.await.unwrap().1).unwrap();
    assert_eq!(reply["action"], "block");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_through_an_upstream_relay_reaches_the_held_hook() {
    // Relay: a second bridge's collector, authenticated. The bridge under test connects
    // to it as the emitter of its hook sessions and takes commands over that binding.
    let relay_dir = tempfile::tempdir().unwrap();
    let mut rcfg = config(relay_dir.path());
    rcfg.server.token = TOKEN.into();
    let relay = start(rcfg).await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.relay.url = Some(relay.url().parse().unwrap());
    cfg.relay.token = TOKEN.into();
    cfg.control.attention_timeout_secs = 30;
    let b = start(cfg).await;
    let mut phone = Phone::connect(relay.bound.http, Some(TOKEN)).await;
    let shim = tokio::task::spawn_blocking({
        let url = b.url();
        move || {
            let mut child = Command::new(env!("CARGO_BIN_EXE_aep-hook"))
                .arg("claude-code")
                .env("AEP_BRIDGE_URL", url)
                .env_remove("AEP_TOKEN")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(cc_permission().to_string().as_bytes()).unwrap();
            String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
        }
    });
    let req = phone.next(|v| v["type"] == "attention.requested").await;
    // The relay knows the claim and its declared control.accepts.
    phone.ws.send(Message::text(json!({"type": "roster", "id": "r1"}).to_string())).await.unwrap();
    let roster = phone.next(|v| v["type"] == "roster").await;
    let entry =
        roster["entries"].as_array().unwrap().iter().find(|e| e["session"] == req["session"]).expect("claim listed");
    assert_eq!(entry["control"]["accepts"], json!(["control.attention.respond"]));
    phone.respond("cmd-relay", &req, json!({"option": "allow"})).await;
    let ack = phone.next(|v| v["type"] == "control.accepted").await;
    assert_eq!(ack["cause"], "cmd-relay");
    let reply: Value = serde_json::from_str(&shim.await.unwrap()).unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow");
    b.shutdown().await;
    relay.shutdown().await;
}

/// The request id is minted and its waiter registered before the request is published, and
/// the session is claimed before its first event is seen: a command sent the moment the
/// request frame arrives is applied, every time. Each round opens a new session whose
/// first event is the permission request (the tightest race: nothing was known of the
/// session before the frame the phone answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_sent_the_instant_the_request_appears_is_applied_100_times() {
    let (b, _dir) = bridge(30, true).await;
    let mut phone = Phone::connect(b.bound.http, Some(TOKEN)).await;
    for round in 0..100 {
        let session = format!("instant-{round}");
        let mut payload = cc_permission();
        payload["session_id"] = json!(session);
        let shim = spawn_shim(b.url(), "claude-code", payload);
        let req = phone.next(|v| v["type"] == "attention.requested" && v["session"] == session.as_str()).await;
        let cmd = format!("cmd-instant-{round}");
        phone.respond(&cmd, &req, json!({"option": "allow"})).await;
        let ack = phone
            .next(|v| {
                (v["type"] == "control.accepted" || v["type"] == "control.rejected" || v["type"] == "error")
                    && (v["cause"] == cmd.as_str())
            })
            .await;
        assert_eq!(ack["type"], "control.accepted", "round {round}: {ack}");
        let (code, out) = shim.await.unwrap();
        assert_eq!(code, 0);
        let reply: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
        assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow", "round {round}: {out}");
    }
}
