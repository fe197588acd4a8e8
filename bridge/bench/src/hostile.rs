//! `aep-bench hostile`: the agent's view of a bridge under hostile local load.
//! A child `aep-bridge serve` (default config, OTLP/gRPC on) is first measured quiet, then
//! under load: `--idle` connections to the main port and `--grpc-idle` to the gRPC port that
//! never send a byte (reopened whenever the bridge closes them), `--subscribers` SSE
//! subscribers and `--replay-readers` `from=all` replays that never read, `--flood`
//! concurrent senders of `--flood-mb` OTLP/HTTP exports (retried at once on 503), and
//! `--grpc-mux` concurrent `--grpc-mb` exports multiplexed on one gRPC connection (as an
//! OTel Collector exporter with several consumers sends). Through both phases the real
//! `aep-hook` shim delivers a recorded Claude Code `PostToolUse`; the report gives its
//! p50/p99 quiet and loaded (same run), the bridge's peak RSS against `--rss-bound-mb`, and
//! what the floods got.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
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
    /// Idle connections held open on the OTLP/gRPC port.
    #[arg(long, default_value_t = 1000)]
    pub grpc_idle: usize,
    /// Concurrent gRPC exports multiplexed on one connection, sent again as each completes.
    #[arg(long, default_value_t = 8)]
    pub grpc_mux: usize,
    /// Size of each multiplexed gRPC export, MB.
    #[arg(long, default_value_t = 4.0)]
    pub grpc_mb: f64,
    /// `GET /stream?from=all` replays that never read.
    #[arg(long, default_value_t = 20)]
    pub replay_readers: usize,
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

/// A Codex-shaped export of about `bytes` (records of 10 KB tool arguments), encoded.
fn flood_body(bytes: usize, sender: usize) -> Vec<u8> {
    flood_request(bytes, sender).encode_to_vec()
}

/// A Codex-shaped export of about `bytes` (records of 10 KB tool arguments).
fn flood_request(bytes: usize, sender: usize) -> ExportLogsServiceRequest {
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
    /// The first failure, so the figure says what failed.
    first_failure: std::sync::Mutex<Option<String>>,
}

impl Flood {
    fn fail(&self, why: impl FnOnce() -> String) {
        if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(why());
        }
    }

    fn first_failure(&self) -> String {
        let first = self.first_failure.lock().unwrap_or_else(|e| e.into_inner());
        first.as_deref().map(|w| format!(" (first: {w})")).unwrap_or_default()
    }
}

/// Holds `n` connections to `addr` that never send a byte, reopening any the bridge closes,
/// until `stop`; `open` counts those open.
fn hold_idle(addr: SocketAddr, n: usize, stop: &Arc<AtomicBool>, open: &Arc<AtomicU64>) -> Vec<JoinHandle<()>> {
    let threads = 4;
    (0..threads)
        .map(|t| {
            let (stop, open) = (stop.clone(), open.clone());
            let share = n / threads + usize::from(t < n % threads);
            std::thread::spawn(move || {
                let mut conns: Vec<Option<TcpStream>> = (0..share).map(|_| None).collect();
                while !stop.load(Ordering::Relaxed) {
                    for c in conns.iter_mut() {
                        let closed = match c {
                            None => true,
                            Some(s) => {
                                let mut b = [0u8; 64];
                                match s.read(&mut b) {
                                    // A gRPC server's SETTINGS frame is not a close.
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
            })
        })
        .collect()
}

/// `mux` concurrent exports of `body` on one gRPC connection, each sent again as it
/// completes, until `stop`; counts what they got.
fn grpc_mux(grpc: SocketAddr, mux: usize, body: ExportLogsServiceRequest, stop: Arc<AtomicBool>, got: Arc<Flood>) {
    use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
    rt.block_on(async move {
        let channel = match tonic::transport::Channel::from_shared(format!("http://{grpc}")) {
            Ok(e) => e.timeout(Duration::from_secs(15)).connect_lazy(),
            Err(_) => return,
        };
        let calls = (0..mux).map(|_| {
            let (mut client, body, stop, got) =
                (LogsServiceClient::new(channel.clone()), body.clone(), stop.clone(), got.clone());
            async move {
                while !stop.load(Ordering::Relaxed) {
                    match client.export(body.clone()).await {
                        Ok(_) => {
                            got.taken.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(s) if s.code() == tonic::Code::Unavailable => {
                            got.refused.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(s) => got.fail(|| format!("{:?}: {}", s.code(), s.message())),
                    }
                }
            }
        });
        let running: Vec<_> = calls.map(tokio::spawn).collect();
        for r in running {
            let _ = r.await;
        }
    });
}

/// Runs the bench.
pub fn run(a: &HostileArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.n > 0, "--n must be at least 1");
    let hook = super::sibling_binary("aep-hook")?;
    let scratch = super::Scratch::new("hostile")?;
    let (bridge, url, grpc) = super::otlp::start_bridge_with_grpc(scratch.path())?;
    let pid = bridge.id();
    let addr: SocketAddr = url.trim_start_matches("http://").parse()?;
    shim_series(&hook, &url, 10)?; // warm-up
    let quiet = shim_series(&hook, &url, a.n)?;
    let rss_quiet = proc_status_bytes(Some(pid), "VmRSS").unwrap_or(0);

    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    // Idle connections: never send; reopened when the bridge closes one.
    let (idle_open, grpc_open) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    workers.extend(hold_idle(addr, a.idle, &stop, &idle_open));
    workers.extend(hold_idle(grpc, a.grpc_idle, &stop, &grpc_open));
    // Subscribers that never read.
    let mut subscribers = Vec::new();
    for _ in 0..a.subscribers {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = write!(s, "GET /stream HTTP/1.1\r\nhost: bench\r\naccept: text/event-stream\r\n\r\n");
            subscribers.push(s);
        }
    }
    // Replays that never read.
    for _ in 0..a.replay_readers {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = write!(s, "GET /stream?from=all HTTP/1.1\r\nhost: bench\r\naccept: text/event-stream\r\n\r\n");
            subscribers.push(s);
        }
    }
    // Exports multiplexed on one gRPC connection.
    let mux = Arc::new(Flood::default());
    if a.grpc_mux > 0 {
        let (stop, mux, body) = (stop.clone(), mux.clone(), flood_request((a.grpc_mb * 1e6) as usize, 999));
        let n = a.grpc_mux;
        workers.push(std::thread::spawn(move || grpc_mux(grpc, n, body, stop, mux)));
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
                    Ok(200) => {
                        flood.taken.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(503) => {
                        flood.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(status) => flood.fail(|| format!("HTTP {status}")),
                    Err(e) => flood.fail(|| e.to_string()),
                }
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
    let (idle_held, grpc_held) = (idle_open.load(Ordering::Relaxed), grpc_open.load(Ordering::Relaxed));
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
        "bench hostile: n={} idle={} grpc-idle={} subscribers={} replay-readers={} flood={}x{:.1} MB \
         grpc-mux={}x{:.1} MB; shim=aep-hook claude-code PostToolUse",
        a.n, a.idle, a.grpc_idle, a.subscribers, a.replay_readers, a.flood, a.flood_mb, a.grpc_mux, a.grpc_mb
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
    line(
        "load held",
        &format!("{idle_held} idle"),
        &format!(
            "{grpc_held} idle on gRPC, {} subscribers, {} replay readers, /healthz {health}",
            a.subscribers, a.replay_readers
        ),
    );
    line(
        "flood",
        &format!("{} taken", flood.taken.load(Ordering::Relaxed)),
        &format!(
            "{} refused (503), {} failed{}, over {load_secs:.1} s",
            flood.refused.load(Ordering::Relaxed),
            flood.failed.load(Ordering::Relaxed),
            flood.first_failure()
        ),
    );
    line(
        "grpc multiplexed",
        &format!("{} taken", mux.taken.load(Ordering::Relaxed)),
        &format!(
            "{} refused (UNAVAILABLE), {} failed{}, {} at once on one connection",
            mux.refused.load(Ordering::Relaxed),
            mux.failed.load(Ordering::Relaxed),
            mux.first_failure(),
            a.grpc_mux
        ),
    );
    line("bridge RSS", &mib(peak), &format!("peak (quiet {})", mib(rss_quiet)));
    line(&format!("budget RSS < {} MiB", a.rss_bound_mb), verdict(peak < a.rss_bound_mb * 1024 * 1024), "");
    line("budget shim p99 < 50 ms under load", verdict(percentile(&loaded, 99.0) < 50.0), "");
    Ok(())
}
