//! `aep-bridge wrap`: the real binary between a driving client (this test, playing the
//! editor) and a real child process (stub agents in `bridge/tests/data/wrap/`), against a real
//! bridge on 127.0.0.1:0. Asserts byte-transparency (the client sees exactly what the agent
//! wrote, stderr and exit code included, compared with the same agent run directly on the
//! same input), the session log, and fail-open when the bridge is down.

use aep_testkit as common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{Value, json};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/data/wrap").join(name)
}

/// What the client saw: stdout bytes, stderr bytes, exit code.
type Seen = (Vec<u8>, Vec<u8>, i32);

/// Plays the editor of an ACP session: writes the handshake and a prompt, answers the
/// agent's permission request once it arrives, waits for the prompt's answer, closes stdin.
fn drive_acp(mut cmd: Command) -> Seen {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut err = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut v = Vec::new();
        err.read_to_end(&mut v).unwrap();
        v
    });
    let send = |stdin: &mut std::process::ChildStdin, v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut seen = Vec::new();
    let mut read_until = |needle: &str, seen: &mut Vec<u8>| loop {
        let mut line = Vec::new();
        let n = out.read_until(b'\n', &mut line).unwrap();
        assert!(n > 0, "agent output ended before {needle:?}: {}", String::from_utf8_lossy(seen));
        seen.extend_from_slice(&line);
        if String::from_utf8_lossy(&line).contains(needle) {
            return;
        }
    };
    // An editor's order: each request after the answer it depends on.
    send(&mut stdin, json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}}));
    read_until("protocolVersion", &mut seen);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}),
    );
    read_until("sess-wrap-1", &mut seen);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"sessionId": "sess-wrap-1", "prompt": [{"type": "text", "text": "fix it"}]}}),
    );
    read_until("session/request_permission", &mut seen);
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 100, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}}),
    );
    read_until("stopReason", &mut seen);
    drop(stdin);
    out.read_to_end(&mut seen).unwrap();
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (seen, err_reader.join().unwrap(), code)
}

fn wrap_cmd(protocol: &str, url: &str, token: Option<&str>, agent: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    c.args(["wrap", protocol, "--url", url, "--"]).args(agent).env_remove("AEP_WRAP_STATS").env_remove("AEP_URL");
    match token {
        Some(t) => c.env("AEP_TOKEN", t),
        None => c.env_remove("AEP_TOKEN"),
    };
    c
}

fn direct(agent: &[&str]) -> Command {
    let mut c = Command::new(agent[0]);
    c.args(&agent[1..]);
    c
}

fn log_types(lines: &[String]) -> Vec<String> {
    lines.iter().map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_session_passes_through_untouched_and_lands_in_the_session_log() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.server.token = "tok-wrap".into();
    let b = start(cfg).await;
    let url = b.url();
    let script = data("acp_agent.py");
    let agent = ["python3".to_owned(), script.display().to_string()];
    let agent: Vec<&str> = agent.iter().map(String::as_str).collect();

    let (plain, wrapped) = {
        let (a, u) = (agent.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(), url.clone());
        tokio::task::spawn_blocking(move || {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            (drive_acp(direct(&a)), drive_acp(wrap_cmd("acp", &u, Some("tok-wrap"), &a)))
        })
        .await
        .unwrap()
    };
    assert_eq!(plain.2, 3, "the stub exits 3");
    assert_eq!(String::from_utf8_lossy(&wrapped.0), String::from_utf8_lossy(&plain.0));
    assert_eq!(wrapped.0, plain.0, "stdout byte for byte");
    assert_eq!(wrapped.1, plain.1, "stderr byte for byte");
    assert_eq!(wrapped.2, plain.2, "exit code");
    assert!(plain.0.ends_with(b"bye") && plain.0.windows(2).any(|w| w == b"\r\n"));

    // The agent named itself `stub-acp` in its `initialize` answer: that is its AEP agent.
    let log = b.data.join("logs/stub-acp/sess-wrap-1.jsonl");
    let lines = b.wait_lines(&log, 10).await;
    assert_eq!(
        log_types(&lines),
        [
            "session.started",
            "run.started",
            "tool.requested",
            "tool.completed",
            "x.acp.plan.updated",
            "tool.requested",
            "attention.requested",
            "attention.answered",
            "attention.resolved",
            "run.finished"
        ]
        .map(str::to_owned)
    );
    let evs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(evs.iter().all(|e| e["agent"] == "stub-acp" && e["session"] == "sess-wrap-1"));
    assert!(evs.iter().all(|e| e["source"].as_str().unwrap().contains("/agent/stub-acp/session/sess-wrap-1")));
    let run = evs[1]["run"].as_str().unwrap().to_owned();
    assert!(run.ends_with(".2"), "the run is the prompt's rpc id, epoch-qualified: {run}");
    assert_eq!(evs[9]["run"], json!(run));
    assert_eq!(evs[9]["cause"], evs[1]["id"], "run.finished points at run.started");
    assert_eq!(evs[3]["cause"], evs[2]["id"], "the tool pair");
    // The permission request is the first the wire says of call-2: it requests the call.
    // Tools are named by their ACP kind; the titles (`run tests`, the command) are content.
    assert_eq!(evs[2]["data"]["tool"], json!({"name": "execute", "call_id": "call-1"}));
    assert_eq!(evs[5]["data"]["tool"], json!({"name": "execute", "call_id": "call-2"}));
    // The tool events carry no title at the default `metadata` ceiling. (The permission ask's
    // prompt quotes it: `attention.*` defaults to `redacted`, as `mappings/acp.json` pins.)
    let tools: Vec<&String> = lines.iter().filter(|l| l.contains("\"type\":\"tool.")).collect();
    assert_eq!(tools.len(), 3);
    assert!(!tools.iter().any(|l| l.contains("sudo make install") || l.contains("run tests")), "titles at metadata");
    assert!(!lines.iter().any(|l| l.contains("run tests")));
    assert_eq!(evs[6]["cause"], evs[5]["id"], "the ask points at the call it gates");
    assert_eq!(evs[6]["data"]["options_count"], json!(2));
    assert!(evs[6]["data"].get("options").is_none() && evs[6]["data"].get("respond_via").is_none(), "read-only");
    assert_eq!(evs[7]["data"]["answer"], json!({"option": "allow"}));
    assert_eq!(evs[7]["subject"], evs[6]["id"], "the answer names the request event");
    let seqs: Vec<u64> = evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>());

    // The whole log is valid AEP.
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge")).args(["validate"]).arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_is_down_changes_nothing_for_the_client() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let script = data("acp_agent.py").display().to_string();
    let (plain, wrapped) = tokio::task::spawn_blocking(move || {
        let a = ["python3", script.as_str()];
        (drive_acp(direct(&a)), drive_acp(wrap_cmd("acp", &url, None, &a)))
    })
    .await
    .unwrap();
    assert_eq!(wrapped, plain);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_stream_json_run_is_a_session_a_run_and_a_tool_pair() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let url = b.url();
    let recorded = data("claude_stream.jsonl");
    let replay = data("replay.py").display().to_string();
    let rec = recorded.display().to_string();
    let out = tokio::task::spawn_blocking(move || {
        wrap_cmd("claude-stream-json", &url, None, &["python3", &replay, &rec, "0"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, std::fs::read(&recorded).unwrap(), "stdout is the recorded stream, byte for byte");
    let lines = b.wait_lines(&b.data.join("logs/claude-code/0b5e-csj-1.jsonl"), 5).await;
    assert_eq!(
        log_types(&lines),
        ["session.started", "run.started", "tool.requested", "tool.completed", "run.finished"].map(str::to_owned)
    );
    let evs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(evs[0]["data"]["gen_ai.request.model"], json!("claude-sonnet-4-5"));
    assert_eq!(evs[3]["data"]["tool"], json!({"name": "Bash", "call_id": "toolu_1"}));
    assert_eq!(evs[4]["cause"], evs[1]["id"]);
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_exit_code_and_a_missing_agent_are_reported_like_a_shell() {
    let (code, nf) = tokio::task::spawn_blocking(|| {
        let status = wrap_cmd("acp", "http://127.0.0.1:9", None, &["sh", "-c", "exit 42"])
            .stdin(Stdio::null())
            .status()
            .unwrap();
        let nf = wrap_cmd("acp", "http://127.0.0.1:9", None, &["/nonexistent/agent-xyz"]).output().unwrap();
        (status.code(), nf)
    })
    .await
    .unwrap();
    assert_eq!(code, Some(42));
    assert_eq!(nf.status.code(), Some(127));
    assert!(String::from_utf8_lossy(&nf.stderr).contains("cannot start"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_codex_app_server_turn_is_a_session_a_run_and_a_tool_pair() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let url = b.url();
    let recorded = data("codex_app_server.jsonl");
    let (replay, rec) = (data("replay.py").display().to_string(), recorded.display().to_string());
    let out = tokio::task::spawn_blocking(move || {
        wrap_cmd("codex-app-server", &url, None, &["python3", &replay, &rec, "0"])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, std::fs::read(&recorded).unwrap(), "byte for byte");
    let lines = b.wait_lines(&b.data.join("logs/codex/019a-cas-thread.jsonl"), 5).await;
    assert_eq!(
        log_types(&lines),
        ["session.started", "run.started", "tool.requested", "tool.completed", "run.finished"].map(str::to_owned)
    );
    let evs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(evs[1..].iter().all(|e| e["run"] == "019a-turn-1"), "the real turn id is the run");
    assert_eq!(evs[3]["cause"], evs[2]["id"]);
    assert_eq!(evs[3]["data"]["exit_code"], json!(0));
    b.shutdown().await;
}

/// SIGINT, SIGTERM and SIGHUP sent to the tee reach the agent (a real bash child), once
/// each, and the agent's own exit code (or `128 + signal`) stays the tee's.
#[cfg(unix)]
#[test]
fn signals_are_forwarded_to_the_agent_once_and_its_exit_code_kept() {
    use std::os::unix::process::CommandExt as _;

    use rustix::process::{Pid, Signal, kill_process, kill_process_group};

    /// Starts the tee in its own process group (so signalling that group cannot reach this
    /// test), waits for the agent's "ready", collects its stderr.
    fn start(script: &str) -> (std::process::Child, Pid, common::Output) {
        let mut c = wrap_cmd("acp", "http://127.0.0.1:9", None, &["bash", "-c", script]);
        c.process_group(0).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        let err = common::Output::read(vec![Box::new(child.stderr.take().unwrap())]);
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        (child, pid, err)
    }
    fn until(err: &common::Output, needle: &str) {
        let said = err.wait_blocking(std::time::Duration::from_secs(10), |t| t.contains(needle));
        assert!(said, "the agent never said {needle:?}: {}", err.text());
    }

    // A terminal's Ctrl-C goes to the foreground group (here: the tee's): the agent, in its
    // own group, gets it once, through the tee. Then SIGTERM: the agent's trap exits 7.
    // The agent waits with `sleep & wait`, not a foreground `sleep`: bash drops a trapped
    // SIGINT now and then while it waits on a foreground child (2 of 300 sent straight to
    // bash, no tee involved), whereas the `wait` builtin returns to run the trap (0 of 300).
    let script = r#"n=0; trap 'n=$((n+1)); echo "int $n" >&2' INT; trap 'echo "term after $n" >&2; exit 7' TERM
        echo ready; for i in $(seq 1 1500); do sleep 0.02 & wait $!; done"#;
    let (mut child, pid, err) = start(script);
    kill_process_group(pid, Signal::INT).unwrap();
    until(&err, "int 1");
    kill_process(pid, Signal::TERM).unwrap();
    let status = child.wait().unwrap();
    until(&err, "term after 1");
    assert_eq!(status.code(), Some(7), "{}", err.text());
    assert!(!err.text().contains("int 2"), "delivered twice: {}", err.text());

    // An agent that does not handle SIGHUP dies of it: the tee exits 128 + 1.
    let (mut child, pid, _) = start("echo ready; exec sleep 30");
    kill_process(pid, Signal::HUP).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(129));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_rpc_session_is_named_by_get_state_and_maps_through_the_pi_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let url = b.url();
    // A real `pi --mode rpc` session (pi 0.80.6, offline): get_state, two prompts.
    let recorded = data("pi_rpc.jsonl");
    let (replay, rec) = (data("replay.py").display().to_string(), recorded.display().to_string());
    let out = tokio::task::spawn_blocking(move || {
        wrap_cmd("pi-rpc", &url, None, &["python3", &replay, &rec, "7"]).stdin(Stdio::null()).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(7), "pi's exit code");
    assert_eq!(out.stdout, std::fs::read(&recorded).unwrap(), "byte for byte");
    let log = b.data.join("logs/pi/01a237c2-e6e7-714e-8bfa-92c9cc80500e.jsonl");
    // 25 mapped, less the two agent-scoped `x.pi.agent.settled` (no session: `wrap` delivers
    // session events only, and skips them without leaving a gap in the session's seq).
    let lines = b.wait_lines(&log, 23).await;
    let evs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let core: Vec<&Value> = evs.iter().filter(|e| !e["type"].as_str().unwrap().starts_with("x.")).collect();
    let types: Vec<&str> = core.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"session.started"));
    assert_eq!(types.iter().filter(|t| **t == "run.started").count(), 2);
    let (started, finished): (Vec<&&Value>, Vec<&&Value>) = (
        core.iter().filter(|e| e["type"] == "run.started").collect(),
        core.iter().filter(|e| e["type"] == "run.finished").collect(),
    );
    assert_eq!(finished.len(), 2);
    for (s, f) in started.iter().zip(&finished) {
        assert_eq!((&f["cause"], &f["run"]), (&s["id"], &s["run"]), "each run closes what it opened");
    }
    let req: Vec<&&Value> = core.iter().filter(|e| e["type"] == "tool.requested").collect();
    let end: Vec<&&Value> =
        core.iter().filter(|e| e["type"] == "tool.completed" || e["type"] == "tool.failed").collect();
    assert_eq!(req.len(), 2);
    assert_eq!(end.iter().map(|e| e["type"].as_str().unwrap()).collect::<Vec<_>>(), ["tool.completed", "tool.failed"]);
    for (r, e) in req.iter().zip(&end) {
        assert_eq!(e["cause"], r["id"]);
        assert_eq!(e["data"]["tool"], r["data"]["tool"]);
    }
    assert!(evs.iter().all(|e| e["agent"] == "pi"));
    let seqs: Vec<u64> = evs.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=23).collect::<Vec<u64>>(), "no gap");
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge")).args(["validate"]).arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pi_rpc_client_that_never_asks_get_state_still_gets_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(config(dir.path())).await;
    let url = b.url();
    // The same real session without the client's `get_state` (and so without its answer, the
    // only line that names the session).
    let full = std::fs::read_to_string(data("pi_rpc.jsonl")).unwrap();
    let stream: String =
        full.lines().filter(|l| !l.contains("\"command\":\"get_state\"")).map(|l| format!("{l}\n")).collect();
    assert_eq!(stream.lines().count() + 1, full.lines().count());
    let recorded = dir.path().join("pi_rpc_no_get_state.jsonl");
    std::fs::write(&recorded, &stream).unwrap();
    let (replay, rec) = (data("replay.py").display().to_string(), recorded.display().to_string());
    let out = tokio::task::spawn_blocking(move || {
        wrap_cmd("pi-rpc", &url, None, &["python3", &replay, &rec, "0"]).stdin(Stdio::null()).output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, stream.as_bytes(), "byte for byte");
    assert!(out.stderr.is_empty(), "nothing of ours on the agent's stderr: {}", String::from_utf8_lossy(&out.stderr));
    // The events waited for a name; at the end they go out under the tee's own session name.
    let logs = b.data.join("logs/pi");
    let has_session_log = || {
        std::fs::read_dir(&logs).is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("rpc-")))
    };
    b.until_logged(has_session_log, || "no pi log at all".into()).await;
    // Session logs only (`@agent.jsonl` holds the agent-scoped `x.pi.agent.settled`).
    let names: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('@'))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("rpc-") && names[0].ends_with(".jsonl"), "{names:?}");
    let log = logs.join(&names[0]);
    let lines = b.wait_lines(&log, 23).await;
    let types = log_types(&lines);
    assert_eq!(types.first().map(String::as_str), Some("session.started"));
    assert_eq!(types.iter().filter(|t| *t == "run.finished").count(), 2);
    assert_eq!(types.iter().filter(|t| *t == "tool.requested").count(), 2);
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge")).args(["validate"]).arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    b.shutdown().await;
}
