//! What stalled consumers cost the embedded collector: the daemon runs in a process of its
//! own (this test binary again, running the ignored `daemon` test), 20 replay readers and
//! 2 live subscribers connect and never read, ~300 MB of large events go in, and the
//! daemon's peak RSS (`VmHWM`) must stay within what the README promises: the shared
//! replay buffer plus, per stalled consumer, its byte bound, one body and one chunk.
//! Linux only: the peak is read from `/proc/<pid>/status`.
#![cfg(target_os = "linux")]

use aep_testkit as common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use aep_bridge::config::Config;
use common::{config, start};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Set in the child process: the daemon's data directory.
const DAEMON_DIR: &str = "AEP_TEST_MEMORY_DAEMON_DIR";

/// How long a test waits for something that should arrive.
const WAIT: Duration = Duration::from_secs(30);

/// Replay readers (`/stream?from=all`) that never read.
const REPLAY_READERS: usize = 20;
/// Live subscribers (`/stream`) that never read.
const LIVE_READERS: usize = 2;
/// Bytes of payload per event: large, under the default 4 MiB body limit.
const PAYLOAD: usize = 3_900_000;
/// Events sent before the readers connect (the replay buffer is full by then).
const BEFORE: u64 = 20;
/// Events in all: about 300 MB.
const EVENTS: u64 = 78;

/// The daemon half of `stalled_consumers_cost_bounded_memory`, which runs it in a process
/// of its own so that process's peak RSS is the daemon's alone. Serves until stdin closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started by stalled_consumers_cost_bounded_memory in a process of its own"]
async fn daemon() {
    let Some(dir) = std::env::var_os(DAEMON_DIR) else { return };
    let b = start(config(Path::new(&dir))).await;
    println!("listening {}", b.bound.http);
    let _ = tokio::task::spawn_blocking(|| std::io::stdin().read_to_end(&mut Vec::new())).await;
    b.shutdown().await;
}

/// The child daemon, stopped (stdin closed, then killed) when the test ends.
struct Daemon {
    child: Child,
    addr: String,
}

impl Daemon {
    fn spawn(dir: &Path) -> Daemon {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["daemon", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env(DAEMON_DIR, dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the daemon exited before listening");
            // libtest may have written `test daemon ... ` on the same line.
            if let Some((_, a)) = line.trim().split_once("listening ") {
                break a.to_owned();
            }
        };
        // Keep draining its stdout so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Daemon { child, addr }
    }

    /// A line of `/proc/<pid>/status`, in KiB.
    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("no {field}"));
        line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `GET {path}` on a socket with a small receive buffer and reads the response head
/// (the endpoint subscribes before it answers); then the socket is never read again.
async fn stalled(addr: &str, path: &str) -> TcpStream {
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(addr.parse().unwrap()).await.unwrap();
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut b = [0u8; 1];
        match tokio::time::timeout(WAIT, s.read(&mut b)).await {
            Ok(Ok(1)) => head.push(b[0]),
            _ => panic!("no response head: {}", String::from_utf8_lossy(&head)),
        }
    }
    let head = String::from_utf8_lossy(&head);
    assert_eq!(head.split_whitespace().nth(1), Some("200"), "{head}");
    s
}

/// One large event: info, with every fifth notice (which cuts a stalled consumer rather
/// than being dropped for it).
fn event(seq: u64, pad: &str) -> Vec<u8> {
    let severity = if seq % 5 == 4 { "notice" } else { "info" };
    let e = json!({
        "aep": "0.1", "id": format!("mem-{seq}"), "type": "progress.status",
        "time": "2026-11-30T06:00:00.000Z", "source": "aep://test/agent/t/session/mem",
        "agent": "t", "session": "mem", "seq": seq, "epoch": 0, "severity": severity,
        "data": { "phase": pad },
    });
    serde_json::to_vec(&e).unwrap()
}

/// POSTs events `range` one at a time, each answered before the next.
async fn ingest(addr: &str, range: std::ops::Range<u64>) {
    let url = format!("http://{addr}/events");
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let pad = "x".repeat(PAYLOAD);
        for seq in range {
            let resp = agent
                .post(&url)
                .header("content-type", "application/json")
                .header("aep-version", "0.1")
                .send(&event(seq, &pad)[..])
                .expect("request failed");
            assert_eq!(resp.status().as_u16(), 202, "event {seq}");
        }
    })
    .await
    .unwrap();
}

/// Reads a stalled stream to its end (or `WAIT`); what came after the response head.
async fn read_to_end(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return got,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the stream did not end; it sent {} bytes", got.len()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_consumers_cost_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::spawn(dir.path());
    let start_kib = d.status_kib("VmRSS:");

    ingest(&d.addr, 0..BEFORE).await;
    let mut live = Vec::new();
    for _ in 0..LIVE_READERS {
        live.push(stalled(&d.addr, "/stream").await);
    }
    let mut replay = Vec::new();
    for _ in 0..REPLAY_READERS {
        replay.push(stalled(&d.addr, "/stream?from=all").await);
    }
    ingest(&d.addr, BEFORE..EVENTS).await;

    let peak_mib = (d.status_kib("VmHWM:") - start_kib) / 1024;
    // The README's bound: the replay buffer, and per stalled consumer its queued bytes, one
    // body in flight and one 64 KiB chunk.
    let c = Config::default().collector;
    let consumers = (REPLAY_READERS + LIVE_READERS) as u64;
    let bound_mib =
        (c.replay_bytes as u64 + consumers * (c.subscriber_bytes as u64 + c.max_body as u64 + 64 * 1024)) >> 20;
    eprintln!(
        "{} MB in, {consumers} stalled consumers: peak RSS +{peak_mib} MiB (bound {bound_mib} MiB)",
        EVENTS as usize * PAYLOAD / 1_000_000
    );
    assert!(peak_mib <= bound_mib, "peak RSS grew {peak_mib} MiB, over the {bound_mib} MiB bound");

    // The stalled live subscribers were cut at a notice event past their byte bound: read
    // now, each ends with the overflow comment after whole frames, and the stream closes.
    for s in &mut live {
        let got = read_to_end(s).await;
        let text = String::from_utf8_lossy(&got);
        let tail = String::from_utf8_lossy(&got[got.len().saturating_sub(300)..]);
        let bound = format!("(queue bound {} bytes)", c.subscriber_bytes);
        assert!(text.contains("\n\n: overflow") && text.contains(&bound), "{tail}");
        assert!(text.ends_with("resume from the last id\n\n"), "{tail}");
    }
    drop(replay);
}
