//! `aep-bench hostile`: the agent's view of a bridge under hostile local load (issue 15).
//! A child `aep-bridge serve` (default config) is first measured quiet, then under load:
//! `--idle` connections that never send a byte (reopened whenever the bridge closes them),
//! `--subscribers` SSE subscribers that never read, and `--flood` concurrent senders of
//! `--flood-mb` OTLP/HTTP exports, retried at once on 503. Through both phases the real
//! `aep-hook` shim delivers a recorded Claude Code `PostToolUse`; the report gives its
//! p50/p99 quiet and loaded (same run), the bridge's peak RSS against `--rss-bound-mb`, and
//! what the flood got (taken, refused with 503, failed).

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use super::{line, mib, percentile, proc_status_bytes, verdict};

/// Arguments of `aep-bench hostile`.
#[derive(Debug, Clone, Args)]
pub struct HostileArgs {
    /// Shim calls measured in each phase.
    #[arg(long, default_value_t = 200)]
    pub n: usize,
    /// Idle connections held open during the load phase.
    #[arg(long, default_value_t = 1000)]
    pub idle: usize,
    /// SSE subscribers that never read.
    #[arg(long, default_value_t = 200)]
    pub subscribers: usize,
    /// Concurrent OTLP flood senders.
    #[arg(long, default_value_t = 8)]
    pub flood: usize,
    /// Size of each flood export, MB (just under the 20 MiB body limit by default).
    #[arg(long, default_value_t = 20.0)]
    pub flood_mb: f64,
    /// The RSS bound the bridge must stay under, MiB.
    #[arg(long, default_value_t = 768)]
    pub rss_bound_mb: u64,
}

/// A recorded Claude Code `PostToolUse` (captures/claude-code/s01_tools_bypass_json).
const POST_TOOL_USE: &str = r#"{"session_id":"45a2eddb-be16-44a0-9158-5f92e545154f","transcript_path":"/home/dev/agents/work/cc/home/.claude/projects/-home-dev-agents-work-cc-project/45a2eddb-be16-44a0-9158-5f92e545154f.jsonl","cwd":"/home/dev/agents/work/cc/project","prompt_id":"a2b1d621-0fb2-478b-861d-296eb69f52f0","permission_mode":"bypassPermissions","effort":{"level":"high"},"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"echo hi","description":"Print hi"},"tool_response":{"stdout":"hi","stderr":"","interrupted":false,"isImage":false,"noOutputExpected":false},"tool_use_id":"toolu_67d9d1a6f9a842d3bfba0042","duration_ms":68}"#;

fn kv(k: &str, v: String) -> KeyValue {
    KeyValue {
        key: k.into(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v)) }),
        ..Default::default()
    }
}

/// A Codex-shaped export of about `bytes` (records of 10 KB tool arguments).
fn flood_body(bytes: usize, sender: usize) -> Vec<u8> {
    let per = 10_000;
    let records = (bytes / (per + 120)).max(1);
    let log_records = (0..records)
        .map(|i| LogRecord {
            observed_time_unix_nano: 1_796_000_000_000_000_000 + i as u64,
            attributes: vec![
                kv("event.name", "codex.tool_result".into()),
                kv("conversation.id", format!("flood-{sender}")),
                kv("call_id", format!("c{i}")),
                kv("arguments", "x".repeat(per)),
            ],
            ..Default::default()
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource {
                attributes: vec![kv("service.name", "codex_exec".into())],
                ..Default::default()
            }),
            scope_logs: vec![ScopeLogs { log_records, ..Default::default() }],
            ..Default::default()
        }],
    }
    .encode_to_vec()
}

/// The shim `n` times; ascending latencies in ms.
fn shim_series(hook: &Path, url: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let payload = POST_TOOL_USE.replace("toolu_67d9d1a6f9a842d3bfba0042", &format!("toolu_hostile{i:012}"));
        let (d, _) = super::hook::spawn_once(hook, &["claude-code"], url, payload.as_bytes())?;
        out.push(d.as_secs_f64() * 1e3);
    }
    out.sort_by(f64::total_cmp);
    Ok(out)
}

/// Counts of what the flood got.
#[derive(Default)]
struct Flood {
    taken: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// Runs the bench.
pub fn run(a: &HostileArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.n > 0, "--n must be at least 1");
    let hook = super::sibling_binary("aep-hook")?;
    let scratch = super::Scratch::new("hostile")?;
    let (bridge, url) = super::otlp::start_bridge(scratch.path())?;
    let pid = bridge.id();
    let addr: SocketAddr = url.trim_start_matches("http://").parse()?;
    shim_series(&hook, &url, 10)?; // warm-up
    let quiet = shim_series(&hook, &url, a.n)?;
    let rss_quiet = proc_status_bytes(Some(pid), "VmRSS").unwrap_or(0);

    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    // Idle connections: never send; reopened when the bridge closes one.
    let idle_open = Arc::new(AtomicU64::new(0));
    let idle_threads = 8;
    for t in 0..idle_threads {
        let (stop, open) = (stop.clone(), idle_open.clone());
        let share = a.idle / idle_threads + usize::from(t < a.idle % idle_threads);
        workers.push(std::thread::spawn(move || {
            let mut conns: Vec<Option<TcpStream>> = (0..share).map(|_| None).collect();
            while !stop.load(Ordering::Relaxed) {
                for c in conns.iter_mut() {
                    let closed = match c {
                        None => true,
                        Some(s) => {
                            let mut b = [0u8; 64];
                            match s.read(&mut b) {
                                Ok(n) => n == 0,
                                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                            }
                        }
                    };
                    if closed {
                        if c.is_some() {
                            open.fetch_sub(1, Ordering::Relaxed);
                        }
                        *c = TcpStream::connect(addr).ok().filter(|s| s.set_nonblocking(true).is_ok());
                        if c.is_some() {
                            open.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }));
    }
    // Subscribers that never read.
    let mut subscribers = Vec::new();
    for _ in 0..a.subscribers {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = write!(s, "GET /stream HTTP/1.1\r\nhost: bench\r\naccept: text/event-stream\r\n\r\n");
            subscribers.push(s);
        }
    }
    // The flood.
    let flood = Arc::new(Flood::default());
    let bytes = (a.flood_mb * 1e6) as usize;
    for t in 0..a.flood {
        let (stop, flood, url) = (stop.clone(), flood.clone(), url.clone());
        let body = flood_body(bytes, t);
        workers.push(std::thread::spawn(move || {
            let agent = super::agent();
            while !stop.load(Ordering::Relaxed) {
                let r = agent
                    .post(&format!("{url}/v1/logs"))
                    .header("content-type", "application/x-protobuf")
                    .send(&body[..]);
                match r.map(|r| r.status().as_u16()) {
                    Ok(200) => flood.taken.fetch_add(1, Ordering::Relaxed),
                    Ok(503) => flood.refused.fetch_add(1, Ordering::Relaxed),
                    _ => flood.failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    // Peak RSS, sampled.
    let peak = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(r) = proc_status_bytes(Some(pid), "VmRSS") {
                    peak.fetch_max(r, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    // Let the load build up, then measure the agent's view under it.
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    let loaded = shim_series(&hook, &url, a.n);
    let load_secs = t0.elapsed().as_secs_f64();
    let idle_held = idle_open.load(Ordering::Relaxed);
    let health = super::agent().get(&format!("{url}/healthz")).call().map(|r| r.status().as_u16()).unwrap_or(0);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        let _ = w.join();
    }
    let _ = sampler.join();
    drop(subscribers);
    let loaded = loaded?;
    let hwm = proc_status_bytes(Some(pid), "VmHWM").unwrap_or(0);
    let peak = peak.load(Ordering::Relaxed).max(hwm);

    println!(
        "bench hostile: n={} idle={} subscribers={} flood={}x{:.1} MB; shim=aep-hook claude-code PostToolUse",
        a.n, a.idle, a.subscribers, a.flood, a.flood_mb
    );
    let row = |label: &str, v: &[f64]| {
        line(
            label,
            &format!("p50 {:.2} ms", percentile(v, 50.0)),
            &format!("p99 {:.2} ms  max {:.2} ms", percentile(v, 99.0), percentile(v, 100.0)),
        );
    };
    row("shim quiet (same run)", &quiet);
    row("shim under load", &loaded);
    line(
        "ratio loaded / quiet",
        &format!("p50 {:.2}x", percentile(&loaded, 50.0) / percentile(&quiet, 50.0).max(1e-9)),
        &format!("p99 {:.2}x", percentile(&loaded, 99.0) / percentile(&quiet, 99.0).max(1e-9)),
    );
    line("load held", &format!("{idle_held} idle"), &format!("{} subscribers, /healthz {health}", a.subscribers));
    line(
        "flood",
        &format!("{} taken", flood.taken.load(Ordering::Relaxed)),
        &format!(
            "{} refused (503), {} failed, over {load_secs:.1} s",
            flood.refused.load(Ordering::Relaxed),
            flood.failed.load(Ordering::Relaxed)
        ),
    );
    line("bridge RSS", &mib(peak), &format!("peak (quiet {})", mib(rss_quiet)));
    line(&format!("budget RSS < {} MiB", a.rss_bound_mb), verdict(peak < a.rss_bound_mb * 1024 * 1024), "");
    line("budget shim p99 < 50 ms under load", verdict(percentile(&loaded, 99.0) < 50.0), "");
    Ok(())
}
