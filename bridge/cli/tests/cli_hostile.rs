//! A hostile local client against the real `aep-bridge serve` binary, run the way a user's
//! shell would leave it: 1,024 open files (`ulimit -n`). Idle connections on one port must
//! not take the descriptors the others need.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Kills the bridge when the test ends, however it ends.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The value of the start-up line's `key=` field.
fn field(line: &str, key: &str) -> SocketAddr {
    let v = line.split_whitespace().find_map(|w| w.strip_prefix(key)).unwrap_or_else(|| panic!("{key} in {line}"));
    v.parse().unwrap_or_else(|e| panic!("{key}{v}: {e}"))
}

/// One blocking HTTP/1.1 exchange; returns the status line and the body.
fn http(addr: SocketAddr, method: &str, path: &str, body: &str) -> (String, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("an answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
}

/// 3,000 idle connections on the OTLP/gRPC port of a bridge limited to 1,024 open files:
/// the gRPC port takes its share and refuses the rest, and a hook on the main port is still
/// answered and logged, `/healthz` still answers.
#[test]
fn idle_grpc_connections_leave_room_for_hooks_and_health() {
    // The client side needs its 3,000 sockets.
    rlimit::increase_nofile_limit(8192).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The header timeout outlasts the test, so no idle connection is closed (and its slot
    // reused) while the 3,000 are opened, however slowly a loaded machine opens them.
    let cfg = dir.path().join("aep-bridge.toml");
    std::fs::write(&cfg, "[server]\nheader_timeout_ms = 600000\n").unwrap();
    let script = format!(
        "ulimit -n 1024 && exec '{}' serve --config '{}' --listen 127.0.0.1:0 --otlp-grpc 127.0.0.1:0 \
         --otlp-http 127.0.0.1:0 --data-dir '{}'",
        env!("CARGO_BIN_EXE_aep-bridge"),
        cfg.display(),
        dir.path().display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("AEP_TOKEN")
        .env_remove("AEP_BRIDGE_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let bridge = Serve(child);
    let mut line = String::new();
    while out.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("aep-bridge listening") {
        line.clear();
    }
    assert!(line.contains("aep-bridge listening"), "the bridge did not start: {line}");
    let (http_addr, grpc) = (field(&line, "http="), field(&line, "otlp-grpc="));

    // Idle and preface-only: what a stuck or hostile client leaves behind.
    let mut idle = Vec::new();
    for i in 0..3000 {
        if let Ok(mut s) = TcpStream::connect_timeout(&grpc, Duration::from_secs(5)) {
            if i % 2 == 0 {
                let _ = s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            }
            idle.push(s);
        }
    }
    let opened = idle.len();
    // Connections the kernel completes before the bridge refuses them still count as opened;
    // a flood that never got through would prove nothing.
    assert!(opened >= 2900, "only {opened} of 3,000 connections opened");

    let hook = r#"{"session_id":"fd-room","hook_event_name":"SessionStart","source":"startup","cwd":"/tmp"}"#;
    let (status, body) = http(http_addr, "POST", "/hooks/claude-code", hook);
    assert!(status.contains(" 200 "), "{status} {body}");
    let (status, body) = http(http_addr, "GET", "/healthz", "");
    assert!(status.contains(" 200 "), "{status} {body}");
    let log = dir.path().join("logs/claude-code/fd-room.jsonl");
    let logged = aep_testkit::log_lines(&log).join("\n");
    assert!(logged.contains("session.started"), "the hook was answered after it was written: {logged:?}");
    // The gRPC port took at most its share of (1,024 - 256) / 3 and refused the rest.
    let (_, metrics) = http(http_addr, "GET", "/metrics", "");
    let refused = aep_testkit::metric_sum(
        &metrics,
        "aep_bridge_requests_rejected_total",
        &["receiver=\"grpc\"", "reason=\"connections\""],
    );
    eprintln!("opened {opened}, refused {refused}");
    assert!(refused as usize >= opened.saturating_sub(256), "opened {opened}, refused {refused}:\n{metrics}");
    drop(idle);
    drop(bridge);
}
