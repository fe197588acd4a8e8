//! The real `aep-hook` binary against a running bridge: every captured payload of the four
//! recorded CLIs replays without error, replies are byte-exact, and a dead bridge fails open.

use aep_testkit as common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

/// The shim as a test runs it: its cool-down state in a test directory, never the user's.
fn hook() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-hook"));
    cmd.env("AEP_HOOK_STATE_DIR", shim_state_dir());
    cmd
}

fn shim(url: &str, vendor: &str, event: Option<&str>, payload: &[u8]) -> (i32, Vec<u8>) {
    shim_env(url, vendor, event, payload, &[])
}

/// The shim with `env` set and the agents' own hook variables cleared (a test run from inside
/// an agent's session inherits them).
fn shim_env(url: &str, vendor: &str, event: Option<&str>, payload: &[u8], env: &[(&str, &str)]) -> (i32, Vec<u8>) {
    let mut cmd = hook();
    cmd.arg(vendor);
    if let Some(e) = event {
        cmd.arg(e);
    }
    for var in ["COPILOT_CLI", "CLAUDECODE", "CLAUDE_CODE_SESSION_ID"] {
        cmd.env_remove(var);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd
        .env("AEP_BRIDGE_URL", url)
        .env_remove("AEP_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn aep-hook");
    child.stdin.take().unwrap().write_all(payload).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code().unwrap_or(-1), out.stdout)
}

fn captures(vendor_dir: &str) -> Vec<(String, Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapters/tests/data").join(vendor_dir);
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap().lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            out.push((f.file_name().unwrap().to_string_lossy().into_owned(), v["payload"].clone()));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_captured_payload_replays_through_the_shim() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = bridge.url();
    let mut sent = 0;
    for (vendor, data_dir) in
        [("claude-code", "claude-code"), ("codex", "codex"), ("gemini-cli", "gemini-cli"), ("qwen-code", "qwen-code")]
    {
        let cases = captures(data_dir);
        assert!(!cases.is_empty(), "no captures for {vendor}");
        let url = url.clone();
        let results = tokio::task::spawn_blocking(move || {
            cases
                .iter()
                .map(|(file, p)| (file.clone(), shim(&url, vendor, None, p.to_string().as_bytes())))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for (file, (code, out)) in results {
            assert_eq!(code, 0, "{vendor} {file}");
            assert!(out.is_empty(), "{vendor} {file}: neutral reply expected, got {}", String::from_utf8_lossy(&out));
            sent += 1;
        }
    }
    let (_, metrics) = get(format!("{url}/metrics")).await;
    assert!(!metrics.contains("aep_bridge_requests_rejected_total{"), "a captured payload was refused:\n{metrics}");
    bridge.shutdown().await;
    // Everything the bridge wrote is a valid AEP stream, session by session.
    let mut events = 0;
    for vendor in ["claude-code", "codex", "gemini-cli", "qwen-code"] {
        let vdir = dir.path().join("logs").join(vendor);
        for f in std::fs::read_dir(&vdir).unwrap_or_else(|e| panic!("{}: {e}", vdir.display())).flatten() {
            let text = std::fs::read_to_string(f.path()).unwrap();
            events += text.lines().count();
            let (_, failures) = aep_schemas::report::validate_stream(text.as_bytes()).unwrap();
            assert!(
                failures.is_empty(),
                "{}: {:?}",
                f.path().display(),
                failures.iter().map(ToString::to_string).collect::<Vec<_>>()
            );
        }
    }
    assert!(events >= sent / 2, "{events} events from {sent} payloads");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_byte_exact_and_a_dead_bridge_fails_open() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = bridge.url();
    let ag = serde_json::json!({"conversationId": "c1", "workspacePaths": ["/w"], "toolCall": {"name": "run_command", "args": {"CommandLine": "ls"}}, "stepIdx": 1});
    let body = ag.to_string();
    let live = {
        let (url, body) = (url.clone(), body.clone());
        tokio::task::spawn_blocking(move || shim(&url, "antigravity", Some("PreToolUse"), body.as_bytes()))
            .await
            .unwrap()
    };
    assert_eq!(live, (0, br#"{"decision": ""}"#.to_vec()));
    bridge.shutdown().await;

    // Nothing listens any more: same neutral reply, exit 0, quickly (connect refused).
    let (url2, body2) = (url.clone(), body.clone());
    let dead = tokio::task::spawn_blocking(move || shim(&url2, "antigravity", Some("PreToolUse"), body2.as_bytes()))
        .await
        .unwrap();
    assert_eq!(dead, (0, br#"{"decision": ""}"#.to_vec()));
    let dead_cc =
        tokio::task::spawn_blocking(move || shim(&url, "claude-code", None, b"{\"hook_event_name\":\"Stop\"}"))
            .await
            .unwrap();
    assert_eq!(dead_cc, (0, Vec::new()));
    // Garbage input and an unknown vendor also exit 0 with nothing on stdout.
    let garbage = tokio::task::spawn_blocking(|| shim("http://127.0.0.1:1", "nope", None, b"\xff\xfe")).await.unwrap();
    assert_eq!(garbage, (0, Vec::new()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_never_answers_is_bounded_by_the_timeout() {
    // A listener that accepts and never replies: the shim must give up and fail open.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = hook();
        let mut child = cmd
            .arg("codex")
            .env("AEP_BRIDGE_URL", &url)
            .env("AEP_HOOK_TIMEOUT_MS", "300")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(br#"{"hook_event_name":"Stop","session_id":"s"}"#).unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    drop(l);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
}

/// A 6 MB payload to a listener that never reads: the shim's one budget covers the whole
/// exchange, however many partial writes it takes (each write used to get the full budget
/// again). Checked against a hang limit under two budgets (a write that times out takes a
/// whole budget, so the old shim needed at least two), not timed.
#[test]
fn a_large_payload_to_a_mute_listener_fails_open_within_one_budget() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let payload =
        format!(r#"{{"hook_event_name":"Stop","session_id":"s","last_assistant_message":"{}"}}"#, "x".repeat(6 << 20));
    let mut child = hook()
        .arg("codex")
        .env("AEP_BRIDGE_URL", &url)
        .env_remove("AEP_TOKEN")
        .env("AEP_HOOK_TIMEOUT_MS", "1500")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = Output::read(vec![Box::new(child.stdout.take().unwrap())]);
    child.stdin.take().unwrap().write_all(payload.as_bytes()).unwrap();
    let finished = stdout.wait_closed(std::time::Duration::from_millis(2800));
    if !finished {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    drop(l);
    assert!(finished, "the shim took more than its one budget on a payload the listener never read");
    assert_eq!(status.code(), Some(0));
    assert_eq!(stdout.text(), "", "the neutral reply to Stop");
}

/// A fake listener: accepts one connection, reads the request, then sends `reply` (or
/// nothing, holding the connection open until the client goes away).
fn fake_bridge(reply: Option<Vec<u8>>) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    fake_bridge_with(move |_| reply)
}

/// A fake listener whose reply is made from the request it read.
fn fake_bridge_with(
    reply: impl FnOnce(&[u8]) -> Option<Vec<u8>> + Send + 'static,
) -> (String, std::thread::JoinHandle<Vec<u8>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        use std::io::Read;
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
        let mut req = vec![0u8; 64 * 1024];
        let n = c.read(&mut req).unwrap_or(0);
        match reply(&req[..n]) {
            Some(r) => {
                let _ = c.write_all(&r);
            }
            None => {
                // A bridge that never answers: the connection ends when the client gives up.
                let _ = c.set_read_timeout(None);
                let _ = c.read_to_end(&mut Vec::new());
            }
        }
        req.truncate(n);
        req
    });
    (url, t)
}

/// Runs the shim on a Claude Code PermissionRequest (a held moment) with `env`; returns
/// its exit code and stdout, or `None` if it did not finish within `limit` (a hang).
fn held_shim(url: &str, env: &[(&str, &str)], limit: std::time::Duration) -> Option<(i32, Vec<u8>)> {
    let mut cmd = hook();
    cmd.arg("claude-code").env("AEP_BRIDGE_URL", url).env_remove("AEP_TOKEN").env_remove("AEP_HOOK_HOLD_TIMEOUT_MS");
    cmd.env("AEP_HOOK_STATE_DIR", tempfile::tempdir().unwrap().keep());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let payload =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/claude-code-permission-request.json"));
    child.stdin.take().unwrap().write_all(&payload.unwrap()).unwrap();
    // Its stdout closes when it exits.
    let stdout = Output::read(vec![Box::new(child.stdout.take().unwrap())]);
    if stdout.wait_closed(limit) {
        let status = child.wait().unwrap();
        return Some((status.code().unwrap_or(-1), stdout.text().into_bytes()));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// A permission moment is held only when the bridge says so in its headers: a bridge that
/// never replies costs the short bound, token and hold budget or not (here 200 ms and 1 ms,
/// checked against a 20 s hang limit, not timed; the hold budget is 60 s).
#[test]
fn a_bridge_that_never_replies_does_not_hold_a_permission_moment() {
    let (url, _t) = fake_bridge(None);
    let out = held_shim(&url, &[("AEP_HOOK_TIMEOUT_MS", "200")], std::time::Duration::from_secs(20));
    assert_eq!(out.map(|o| o.0), Some(0), "the shim waited the hold budget without a token");
    let (url, _t) = fake_bridge(None);
    let env = [("AEP_TOKEN", "t"), ("AEP_HOOK_TIMEOUT_MS", "1"), ("AEP_HOOK_HOLD_TIMEOUT_MS", "60000")];
    assert_eq!(held_shim(&url, &env, std::time::Duration::from_secs(20)).map(|o| o.0), Some(0));
}

/// A reply larger than any vendor decision is not relayed (nor buffered whole): neutral.
#[test]
fn an_oversized_reply_is_refused_and_answered_neutrally() {
    let body = format!(
        "{{\"hookSpecificOutput\":{{\"decision\":{{\"behavior\":\"allow\"}}}},\"pad\":\"{}\"}}",
        "x".repeat(2 << 20)
    );
    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes();
    let (url, t) = fake_bridge(Some(reply));
    let (code, out) = held_shim(&url, &[("AEP_TOKEN", "t")], std::time::Duration::from_secs(20)).expect("hung");
    assert_eq!(code, 0);
    assert!(!String::from_utf8_lossy(&out).contains("allow"), "the oversized allow was relayed");
    assert!(String::from_utf8_lossy(&t.join().unwrap()).contains("PermissionRequest"), "the request went out");
    // The same decision at a normal size is relayed (from a listener that can prove it).
    let (url, _t) = fake_bridge_with(|req| Some(proven_allow("t", req)));
    let (_, out) = held_shim(&url, &[("AEP_TOKEN", "t")], std::time::Duration::from_secs(20)).expect("hung");
    assert_eq!(String::from_utf8_lossy(&out), ALLOW);
}

const ALLOW: &str = r#"{"hookSpecificOutput":{"decision":{"behavior":"allow"}}}"#;

/// An allow reply with the proof over the request's nonce under `token`.
fn proven_allow(token: &str, req: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(req);
    let nonce = text
        .lines()
        .find_map(|l| l.strip_prefix("X-AEP-Nonce: ").or_else(|| l.strip_prefix("x-aep-nonce: ")))
        .unwrap_or("")
        .trim()
        .to_owned();
    let proof = aep_schemas::digest::reply_proof(token, &nonce, ALLOW.as_bytes());
    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nx-aep-proof: {proof}\r\n\r\n{ALLOW}", ALLOW.len()).into_bytes()
}

/// Whatever listens on the port is not trusted with a decision. With a token
/// the shim relays only a reply proven under it: a fake's bare "allow", or one proven
/// under another token, gets the neutral reply.
#[test]
fn a_listener_that_cannot_prove_its_reply_is_not_relayed() {
    let bare = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{ALLOW}", ALLOW.len()).into_bytes();
    let (url, _t) = fake_bridge(Some(bare));
    let (code, out) = held_shim(&url, &[("AEP_TOKEN", "t")], std::time::Duration::from_secs(20)).expect("hung");
    assert_eq!(code, 0);
    assert!(!String::from_utf8_lossy(&out).contains("allow"), "a fake's allow was relayed");
    let (url, _t) = fake_bridge_with(|req| Some(proven_allow("other-token", req)));
    let (_, out) = held_shim(&url, &[("AEP_TOKEN", "t")], std::time::Duration::from_secs(20)).expect("hung");
    assert!(!String::from_utf8_lossy(&out).contains("allow"), "a reply proven under another token was relayed");
    let (url, t) = fake_bridge_with(|req| Some(proven_allow("t-secret-token", req)));
    let (_, out) =
        held_shim(&url, &[("AEP_TOKEN", "t-secret-token")], std::time::Duration::from_secs(20)).expect("hung");
    assert_eq!(String::from_utf8_lossy(&out), ALLOW, "a proven reply is relayed");
    // And the listener never saw the token: only a MAC under it.
    let req = String::from_utf8_lossy(&t.join().unwrap()).into_owned();
    assert!(!req.contains("t-secret-token"), "the token went out: {req}");
    assert!(req.contains("Authorization: AEP-HMAC "), "{req}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_vendor_goes_through_the_shim_into_its_own_log() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = bridge.url();
    // One representative moment per built-in vendor: (vendor, event in the URL, payload, session).
    let cases: Vec<(&str, Option<&str>, Value, &str)> = vec![
        (
            "claude-code",
            None,
            json!({"hook_event_name": "SessionStart", "session_id": "cc-1", "source": "startup"}),
            "cc-1",
        ),
        ("codex", None, json!({"hook_event_name": "SessionStart", "session_id": "cx-1", "source": "startup"}), "cx-1"),
        (
            "gemini-cli",
            None,
            json!({"hook_event_name": "SessionStart", "session_id": "gm-1", "source": "startup"}),
            "gm-1",
        ),
        (
            "qwen-code",
            None,
            json!({"hook_event_name": "SessionStart", "session_id": "qw-1", "source": "startup"}),
            "qw-1",
        ),
        ("vscode", None, json!({"hook_event_name": "SessionStart", "session_id": "vs-1", "source": "new"}), "vs-1"),
        (
            "copilot-cli",
            None,
            json!({"hook_event_name": "SessionStart", "session_id": "cp-1", "timestamp": "2026-12-07T14:24:49.172Z", "source": "new"}),
            "cp-1",
        ),
        ("droid", None, json!({"hook_event_name": "SessionStart", "session_id": "dr-1", "source": "startup"}), "dr-1"),
        (
            "kimi-code",
            None,
            json!({"hook_event_name": "SessionStart", "session_id": "km-1", "source": "startup"}),
            "km-1",
        ),
        (
            "hermes",
            None,
            json!({"hook_event_name": "on_session_start", "session_id": "hm-1", "platform": "cli"}),
            "hm-1",
        ),
        ("pi", Some("session_start"), json!({"event": {"type": "session_start"}, "session": {"id": "pi-1"}}), "pi-1"),
        ("cline", Some("agent_start"), json!({"hookName": "agent_start", "taskId": "cl-1"}), "cl-1"),
        (
            "opencode",
            Some("bus"),
            json!({"kind": "bus", "event": {"type": "session.created", "properties": {"info": {"id": "oc-1", "version": "1.0.0"}}}}),
            "oc-1",
        ),
        (
            "kilocode",
            Some("bus"),
            json!({"kind": "bus", "event": {"type": "session.created", "properties": {"info": {"id": "kc-1", "version": "7.4.6"}}}}),
            "kc-1",
        ),
        (
            "antigravity",
            Some("PreToolUse"),
            json!({"conversationId": "ag-1", "workspacePaths": ["/w"], "toolCall": {"name": "view_file", "args": {}}, "stepIdx": 1}),
            "ag-1",
        ),
    ];
    assert_eq!(cases.len(), aep_adapters::vendors::all().len(), "every built-in vendor is covered");
    for (vendor, event, payload, session) in cases {
        let adapter = aep_adapters::vendors::by_vendor(vendor).unwrap();
        let hook = adapter.hook_name(&aep_adapters::HookCall { event, payload: &payload }).unwrap();
        let neutral = adapter.neutral_reply(&hook).as_bytes().to_vec();
        let (u, body, ev) = (url.clone(), payload.to_string(), event.map(str::to_owned));
        let (code, out) =
            tokio::task::spawn_blocking(move || shim(&u, vendor, ev.as_deref(), body.as_bytes())).await.unwrap();
        assert_eq!((code, out), (0, neutral), "{vendor}");
        let lines = bridge.wait_lines(&dir.path().join("logs").join(vendor).join(format!("{session}.jsonl")), 1).await;
        let first: Value = serde_json::from_str(&lines[0]).unwrap();
        assert_eq!((first["agent"].as_str(), first["session"].as_str()), (Some(vendor), Some(session)), "{vendor}");
    }
    bridge.shutdown().await;
}

/// GitHub Copilot CLI also runs a project's `.claude/settings.json` hooks (with `COPILOT_CLI=1`
/// in their environment): `aep-hook claude-code` answers those neutrally and forwards nothing,
/// so a Copilot session is never logged as Claude Code's; Claude Code's own calls, also when
/// started from inside a Copilot session, still are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copilot_running_claude_codes_hooks_is_not_logged_as_claude_code() {
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let bridge = start(config(dir.path())).await;
    let url = bridge.url();
    // Copilot CLI 1.0.102's SessionStart in Claude Code's shape, as recorded.
    let copilot = captures("copilot-cli").into_iter().map(|(_, p)| p).find(|p| p["hook_event_name"] == "SessionStart");
    let copilot = copilot.expect("a recorded Copilot SessionStart").to_string();
    let nested = json!({"hook_event_name": "SessionStart", "session_id": "cc-nested", "source": "startup"}).to_string();
    let own = json!({"hook_event_name": "SessionStart", "session_id": "cc-own", "source": "startup"}).to_string();
    let u = url.clone();
    let runs = tokio::task::spawn_blocking(move || {
        [
            shim_env(&u, "claude-code", None, copilot.as_bytes(), &[("COPILOT_CLI", "1")]),
            // Claude Code started from a Copilot session: its own session id in its variable.
            shim_env(
                &u,
                "claude-code",
                None,
                nested.as_bytes(),
                &[("COPILOT_CLI", "1"), ("CLAUDECODE", "1"), ("CLAUDE_CODE_SESSION_ID", "cc-nested")],
            ),
            shim_env(&u, "claude-code", None, own.as_bytes(), &[("CLAUDECODE", "1")]),
        ]
    })
    .await
    .unwrap();
    for (code, out) in &runs {
        assert_eq!((*code, out.as_slice()), (0, &b""[..]), "the neutral reply, exit 0");
    }
    let logs = dir.path().join("logs").join("claude-code");
    bridge.wait_lines(&logs.join("cc-nested.jsonl"), 1).await;
    bridge.wait_lines(&logs.join("cc-own.jsonl"), 1).await;
    bridge.shutdown().await;
    let mut names: Vec<String> =
        std::fs::read_dir(&logs).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["cc-nested.jsonl", "cc-own.jsonl"], "the Copilot session reached no claude-code log");
}

/// Answers a proven held reply as the bridge does: headers at once with the hold budget and
/// its proof under `token` (or another), then the body, its proof a trailer.
fn held_reply(token: &str, req: &[u8], hold_ms: u64, proven: bool) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(req);
    let nonce = text.lines().find_map(|l| l.strip_prefix("X-AEP-Nonce: ")).unwrap_or("").trim().to_owned();
    let hold_proof = aep_schemas::digest::reply_proof(
        if proven { token } else { "another token" },
        &nonce,
        aep_schemas::digest::hold_proof_body(hold_ms).as_bytes(),
    );
    let proof = aep_schemas::digest::reply_proof(token, &nonce, ALLOW.as_bytes());
    let head = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntrailer: x-aep-proof\r\nx-aep-hold: {hold_ms}\r\nx-aep-hold-proof: {hold_proof}\r\n\r\n"
    );
    let body = format!("{:x}\r\n{ALLOW}\r\n0\r\nx-aep-proof: {proof}\r\n\r\n", ALLOW.len());
    vec![head.into_bytes(), body.into_bytes()]
}

/// A fake listener that sends `parts` of a reply, `gap` apart (a bridge holding a moment
/// while a human decides), after reading the request.
fn fake_holding_bridge(
    parts: impl FnOnce(&[u8]) -> Vec<Vec<u8>> + Send + 'static,
    gap: std::time::Duration,
) -> (String, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let t = std::thread::spawn(move || {
        use std::io::Read;
        let (mut c, _) = l.accept().unwrap();
        c.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
        let mut req = vec![0u8; 64 * 1024];
        let n = c.read(&mut req).unwrap_or(0);
        for (i, p) in parts(&req[..n]).into_iter().enumerate() {
            if i > 0 {
                // The human's decision comes after the shim's deadline for the headers.
                std::thread::sleep(gap);
            }
            let _ = c.write_all(&p);
        }
        let _ = c.shutdown(std::net::Shutdown::Write);
        let _ = c.read_to_end(&mut Vec::new());
    });
    (url, t)
}

/// The bridge holds the moment: its headers arrive at once with the budget, proven under
/// the token, so the shim waits for the answer past its deadline for the headers (100 ms
/// here; the answer comes 600 ms later) and relays it. A hold the shim cannot verify is
/// not waited for: the neutral reply at the headers' deadline.
#[test]
fn a_proven_hold_is_waited_for_past_the_header_deadline_an_unproven_one_is_not() {
    let gap = std::time::Duration::from_millis(600);
    let env = [("AEP_TOKEN", "t-hold"), ("AEP_HOOK_TIMEOUT_MS", "100")];
    let (url, t) = fake_holding_bridge(|req| held_reply("t-hold", req, 5_000, true), gap);
    let (code, out) = held_shim(&url, &env, std::time::Duration::from_secs(20)).expect("hung");
    t.join().unwrap();
    assert_eq!((code, String::from_utf8_lossy(&out).into_owned()), (0, ALLOW.to_owned()), "the held answer");
    let (url, t) = fake_holding_bridge(|req| held_reply("t-hold", req, 5_000, false), gap);
    let (code, out) = held_shim(&url, &env, std::time::Duration::from_secs(20)).expect("hung");
    t.join().unwrap();
    assert_eq!(code, 0);
    assert!(!String::from_utf8_lossy(&out).contains("allow"), "an unproven hold was waited for and relayed");
    // Without a token a hold is taken only with an explicit hold budget (relay set-ups).
    let bare = |_: &[u8]| {
        let body = format!("{:x}\r\n{ALLOW}\r\n0\r\n\r\n", ALLOW.len());
        vec![b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx-aep-hold: 5000\r\n\r\n".to_vec(), body.into_bytes()]
    };
    let (url, t) = fake_holding_bridge(bare, gap);
    let (_, out) =
        held_shim(&url, &[("AEP_HOOK_TIMEOUT_MS", "100")], std::time::Duration::from_secs(20)).expect("hung");
    t.join().unwrap();
    assert!(out.is_empty(), "a hold was taken without a token or a hold budget");
    let (url, t) = fake_holding_bridge(bare, gap);
    let env = [("AEP_HOOK_TIMEOUT_MS", "100"), ("AEP_HOOK_HOLD_TIMEOUT_MS", "5000")];
    let (_, out) = held_shim(&url, &env, std::time::Duration::from_secs(20)).expect("hung");
    t.join().unwrap();
    assert_eq!(String::from_utf8_lossy(&out), ALLOW);
}

/// One exchange with a fake bridge that answers (200, empty) or never does; returns the
/// budget the shim gave itself for the reply's headers, read off its request
/// (`x-aep-deadline` minus `x-aep-sent`), so the cool-down is checked without a clock.
fn budget_of_one_call(l: &std::net::TcpListener, state: &std::path::Path, answer: bool) -> u64 {
    // The state is per bridge URL: every call of a test goes to its one listener.
    let url = format!("http://{}", l.local_addr().unwrap());
    let l = l.try_clone().unwrap();
    let t = std::thread::spawn(move || {
        use std::io::Read;
        let (mut c, _) = l.accept().unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = c.read(&mut buf).unwrap_or(0);
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
        }
        if answer {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
        } else {
            let _ = c.read_to_end(&mut Vec::new());
        }
        String::from_utf8_lossy(&req).into_owned()
    });
    let mut child = hook()
        .arg("codex")
        .env("AEP_BRIDGE_URL", &url)
        .env("AEP_HOOK_STATE_DIR", state)
        .env("AEP_HOOK_TIMEOUT_MS", "700")
        .env("AEP_HOOK_FAST_TIMEOUT_MS", "50")
        .env_remove("AEP_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(br#"{"hook_event_name":"Stop","session_id":"s"}"#).unwrap();
    assert_eq!(child.wait_with_output().unwrap().status.code(), Some(0));
    let req = t.join().unwrap();
    let header = |name: &str| -> u64 {
        req.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap_or_else(|| panic!("no {name} in {req}"))
            .trim()
            .parse()
            .unwrap()
    };
    header("X-AEP-Deadline: ") - header("X-AEP-Sent: ") / 1000
}

/// A bridge that lets the deadline pass (its socket accepts, nothing answers) is remembered:
/// the next hooks give it the short deadline only, until one is answered; then the full one
/// again. The memory is a private file of the state directory.
#[test]
fn a_hung_bridge_is_remembered_until_it_answers() {
    let state = tempfile::tempdir().unwrap();
    let files = || std::fs::read_dir(state.path()).unwrap().flatten().map(|e| e.path()).collect::<Vec<_>>();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let call = |answer| budget_of_one_call(&l, state.path(), answer);
    assert_eq!(call(false), 700, "the first call waits the full deadline");
    let f = files();
    assert_eq!(f.len(), 1, "{f:?}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&f[0]).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(call(false), 50, "during the cool-down: the short deadline");
    assert_eq!(call(true), 50, "still short, and this one is answered");
    assert!(files().is_empty(), "the answer ended the cool-down: {:?}", files());
    assert_eq!(call(false), 700, "the full deadline again");
}
