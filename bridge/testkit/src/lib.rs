//! What the bridge's integration tests (in every crate under `bridge/`) and the load tools
//! share: a real `serve` on 127.0.0.1:0, small HTTP helpers, the lookup of the real OTLP
//! collector they compare with, and recorded agent sessions. A crate, not a `#[path]`
//! include, so each test crate and `aep-bench` link one copy with one dependency list.

use std::path::{Path, PathBuf};
use std::time::Duration;

use aep_bridge::config::Config;
use aep_bridge::server::{Bound, serve};
use tokio_util::sync::CancellationToken;

mod files;
mod jsonl;
mod output;
pub mod peers;
mod rotel;
pub use files::{metric_sum, read_jsonc, tree};
pub use jsonl::{log_events, log_lines, parse_lines, tree_lines};
pub use output::Output;
pub use rotel::{ROTEL_STARTED, rotel_agent};

/// How long a wait on the bridge lasts before a test gives up.
const WAIT: Duration = Duration::from_secs(15);

/// A running bridge.
pub struct Running {
    /// The addresses it bound.
    pub bound: Bound,
    /// Its epoch (AEP-0001 §5.3), as `serve` reported it.
    pub epoch: u64,
    /// Cancels it.
    pub stop: CancellationToken,
    /// The `serve` task.
    pub task: tokio::task::JoinHandle<()>,
    /// Its data directory.
    pub data: PathBuf,
}

impl Running {
    /// The main port's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.bound.http)
    }

    /// Waits until the JSONL log has finished with at least `n` events since the start
    /// (written, or failed and counted); returns how many it has. Panics after 15 s.
    pub async fn logged(&self, n: u64) -> u64 {
        let mut rx = self.bound.progress.get("jsonl").expect("the JSONL log is off").subscribe();
        let reached = tokio::time::timeout(WAIT, rx.wait_for(|d| *d >= n)).await.map(|r| r.map(|d| *d));
        match reached {
            Ok(Ok(d)) => d,
            _ => panic!("the log finished with {} events, wanted {n}", *rx.borrow()),
        }
    }

    /// Reads the complete lines of a JSONL file once it has at least `n` ([`log_lines`]: a
    /// line still being written is not yet one), looking again each time the log reports
    /// progress; panics after 15 s.
    pub async fn wait_lines(&self, path: &Path, n: usize) -> Vec<String> {
        self.until_logged(
            || log_lines(path).len() >= n,
            || format!("{} has {} lines, wanted {n}", path.display(), log_lines(path).len()),
        )
        .await;
        log_lines(path)
    }

    /// Waits until `done` holds, asking again each time the log reports progress; panics
    /// with `what` after 15 s.
    pub async fn until_logged(&self, mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
        let mut rx = self.bound.progress.get("jsonl").expect("the JSONL log is off").subscribe();
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            // Marked seen before looking: progress made while looking wakes the wait below.
            rx.borrow_and_update();
            if done() {
                return;
            }
            let progressed = tokio::time::timeout_at(deadline, rx.changed()).await;
            assert!(matches!(progressed, Ok(Ok(()))), "{}", what());
        }
    }

    /// Stops it and waits (at most 10 s) for `serve` to return.
    pub async fn shutdown(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

/// A config on loopback with ephemeral ports and the given data dir.
pub fn config(data: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.server.listen = "127.0.0.1:0".parse().unwrap();
    cfg.server.otlp_grpc = None;
    cfg.server.otlp_http = None;
    cfg.server.data_dir = data.display().to_string();
    cfg.server.host = "test-host".into();
    cfg.server.shutdown_grace_ms = 3000;
    cfg
}

/// Starts `serve` with `cfg` and waits until it is bound.
pub async fn start(cfg: Config) -> Running {
    let data = cfg.data_dir();
    let stop = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let s = stop.clone();
    let task = tokio::spawn(async move {
        let mut tx = Some(tx);
        serve(cfg, s, move |b, e| {
            if let Some(tx) = tx.take() {
                let _ = tx.send((b.clone(), e));
            }
        })
        .await
        .expect("serve failed");
    });
    let (bound, epoch) =
        tokio::time::timeout(Duration::from_secs(10), rx).await.expect("bridge did not start").unwrap();
    Running { bound, epoch, stop, task, data }
}

/// POSTs JSON (blocking client on a worker thread); returns status and body.
pub async fn post(url: String, body: String, headers: Vec<(String, String)>) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.post(&url).header("content-type", "application/json");
        for (k, v) in &headers {
            req = req.header(k, v);
        }
        let mut resp = req.send(body.as_bytes()).expect("request failed");
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        (status, text)
    })
    .await
    .unwrap()
}

/// GETs `url` (blocking client on a worker thread); returns status and body.
pub async fn get(url: String) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut resp = agent.get(&url).call().expect("request failed");
        (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default())
    })
    .await
    .unwrap()
}

/// The hook payloads of a short Codex session: start, prompt, one Bash call, stop.
pub fn codex_session(session: &str) -> Vec<serde_json::Value> {
    use serde_json::json;
    vec![
        json!({"hook_event_name": "SessionStart", "session_id": session, "source": "startup", "model": "gpt-5"}),
        json!({"hook_event_name": "UserPromptSubmit", "session_id": session, "turn_id": "t1", "prompt": "fix it"}),
        json!({"hook_event_name": "PreToolUse", "session_id": session, "turn_id": "t1", "tool_name": "Bash", "tool_use_id": "c1", "tool_input": {"command": "ls"}}),
        json!({"hook_event_name": "PostToolUse", "session_id": session, "turn_id": "t1", "tool_name": "Bash", "tool_use_id": "c1", "tool_response": "ok"}),
        json!({"hook_event_name": "Stop", "session_id": session, "turn_id": "t1"}),
    ]
}

/// The log records of an OTLP/JSON logs export, in order.
pub fn otlp_json_records(body: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(body).expect("OTLP/JSON");
    let resources = v["resourceLogs"].as_array().cloned().unwrap_or_default();
    resources
        .iter()
        .flat_map(|r| r["scopeLogs"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["logRecords"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// A record's attribute as text: a string, or an int64 written as a string or (as Claude
/// Code does) a number.
pub fn otlp_json_attr(record: &serde_json::Value, key: &str) -> Option<String> {
    let v = &record["attributes"].as_array()?.iter().find(|a| a["key"] == key)?["value"];
    let int = &v["intValue"];
    v["stringValue"].as_str().or(int.as_str()).map(str::to_owned).or_else(|| int.as_u64().map(|n| n.to_string()))
}

/// The real Claude Code `s01` session's own OTLP log exports (tools, two of them failing),
/// as it recorded them (`data/otlp-mix/claude-code`).
pub const CLAUDE_S01_LOGS: &[&str] = &[
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0001_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0003_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0006_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0008_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0010_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0012_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0015_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0017_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0020_logs.json"),
    include_str!("../../tests/data/otlp-mix/claude-code/s01_0021_logs.json"),
];

/// The spans of an OTLP/JSON traces body, as recorded.
pub fn otlp_json_spans(body: &str) -> Vec<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    let spans = |ss: &serde_json::Value| ss["spans"].as_array().cloned().unwrap_or_default();
    v["resourceSpans"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|rs| rs["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|ss| spans(&ss))
        .collect()
}

/// Waits until `pred` holds, asking again each time `seen` is woken (a peer in a test
/// notifies it per request or frame it keeps); `false` after `timeout`. The wake-up is
/// registered before each look, so a change made while looking still wakes it.
pub async fn until_notified(seen: &tokio::sync::Notify, timeout: Duration, mut pred: impl FnMut() -> bool) -> bool {
    let wait = async {
        loop {
            let next = seen.notified();
            tokio::pin!(next);
            next.as_mut().enable();
            if pred() {
                return;
            }
            next.await;
        }
    };
    tokio::time::timeout(timeout, wait).await.is_ok()
}

/// A test's WebSocket client connection (the collector's `/socket`, an observed agent
/// server's socket).
pub type WsStream = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The next text frame of `ws` that parses as JSON and satisfies `pred` (others are skipped);
/// panics when the socket closes first or after 30 s.
pub async fn ws_next(ws: &mut WsStream, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    use futures_util::StreamExt as _;
    let fut = async {
        while let Some(Ok(m)) = ws.next().await {
            if let tokio_tungstenite::tungstenite::Message::Text(t) = m {
                let v: serde_json::Value = serde_json::from_str(&t).expect("a JSON frame");
                if pred(&v) {
                    return v;
                }
            }
        }
        panic!("the socket closed before the frame came");
    };
    tokio::time::timeout(Duration::from_secs(30), fut).await.expect("no such frame within 30 s")
}

/// Where the shims a test runs keep their cool-down state (`AEP_HOOK_STATE_DIR`): a private
/// directory of this test process, never the user's runtime directory.
pub fn shim_state_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::DirBuilderExt as _;
        let d = std::env::temp_dir().join(format!("aep-hook-state-{}", std::process::id()));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&d);
        d
    })
    .clone()
}

/// Runs the real `aep-hook` shim at `shim` as an agent does, in the background: `vendor` as
/// its argument, the bridge at `url` with `token`, `payload` on stdin. Yields its exit code
/// (`-1` when killed by a signal) and stdout once it exits.
pub fn spawn_shim(
    shim: std::path::PathBuf,
    vendor: &'static str,
    url: String,
    token: &'static str,
    payload: serde_json::Value,
) -> tokio::task::JoinHandle<(i32, String)> {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(shim)
            .arg(vendor)
            .env("AEP_HOOK_STATE_DIR", shim_state_dir())
            .env("AEP_BRIDGE_URL", url)
            .env("AEP_TOKEN", token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the shim starts");
        child.stdin.take().expect("piped").write_all(payload.to_string().as_bytes()).expect("the shim reads stdin");
        let out = child.wait_with_output().expect("the shim exits");
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned())
    })
}
