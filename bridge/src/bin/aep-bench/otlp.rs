//! `aep-bench otlp`: OTLP/HTTP protobuf log batches of Codex-shaped records
//! (`codex.tool_result`, resource `service.name` `codex_exec`, as in the captures) to a
//! child `aep-bridge serve`, whose CPU time (`/proc/<pid>/stat` utime + stime) gives
//! records per CPU-second through decode, mapping, sequencing and JSONL. The same bodies
//! then go to rotel (`rotel-agent --exporter blackhole`: decode only) as the baseline.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

use super::{cpu_seconds, line, metric_sum, rate, scrape, verdict, wait_until};

/// Arguments of `aep-bench otlp`.
#[derive(Debug, Clone, Args)]
pub struct OtlpArgs {
    /// Export requests sent.
    #[arg(long, default_value_t = 200)]
    pub batches: usize,
    /// Log records per request.
    #[arg(long, default_value_t = 500)]
    pub records: usize,
    /// Conversations the records are spread over.
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
    /// The rotel-agent binary for the baseline: a path, `auto` (PATH, then the `rotel`
    /// Python package), or `off`.
    #[arg(long, default_value = "auto")]
    pub rotel: String,
    /// Drive an already running bridge at this base URL instead of a child (for profiling,
    /// e.g. under `valgrind --tool=callgrind`); its CPU is read from `--pid`.
    #[arg(long, requires = "pid")]
    pub url: Option<String>,
    /// The process id of the bridge given with `--url`.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Export requests sent before measuring [default: enough to fill every session's
    /// replay buffer at its default depth, so the figure is the steady state and not the
    /// first touch of that memory]
    #[arg(long)]
    pub warmup: Option<usize>,
    /// Measured rounds of `--batches` requests each; the figure reported is the median
    /// round (the spread is printed beside it), so one noisy round does not decide it
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// The median of per-round CPU seconds and the fastest and slowest round.
fn median_spread(mut cpu: Vec<f64>) -> (f64, f64, f64) {
    cpu.sort_by(f64::total_cmp);
    let mid = cpu.get(cpu.len() / 2).copied().unwrap_or(0.0);
    (mid, cpu.first().copied().unwrap_or(0.0), cpu.last().copied().unwrap_or(0.0))
}

/// Warm-up requests: `--warmup`, or enough to fill every session's replay buffer (both
/// receivers get the same warm-up).
fn warmup_batches(a: &OtlpArgs) -> usize {
    a.warmup
        .unwrap_or_else(|| {
            (a.sessions.max(1) * aep_bridge::config::CollectorConfig::default().replay_buffer)
                .div_ceil(a.records.max(1))
                + 1
        })
        .max(1)
}

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}

fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

/// Export request `b`: `records` Codex `codex.tool_result` log records.
fn request(b: usize, records: usize, sessions: usize) -> ExportLogsServiceRequest {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let resource = Resource {
        attributes: vec![
            s("host.name", "vm"),
            s("service.name", "codex_exec"),
            s("telemetry.sdk.language", "rust"),
            s("telemetry.sdk.version", "0.31.0"),
            s("env", "bench"),
            s("telemetry.sdk.name", "opentelemetry"),
            s("service.version", "0.171.0"),
        ],
        ..Default::default()
    };
    let log_records = (0..records)
        .map(|i| {
            let k = b * records + i;
            let conv = format!("01a22aa0-0c16-7b32-bb14-{:012x}", k % sessions.max(1));
            LogRecord {
                observed_time_unix_nano: now + i as u64,
                severity_number: 9,
                severity_text: "INFO".into(),
                flags: 1,
                trace_id: (k as u128).to_be_bytes().to_vec(),
                span_id: (k as u64 + 1).to_be_bytes().to_vec(),
                event_name: "event otel/src/tool_result.rs:54".into(),
                attributes: vec![
                    s("event.name", "codex.tool_result"),
                    s("tool_name", "exec_command"),
                    s("tool_namespace", "functions"),
                    s("call_id", format!("call_{k:020x}")),
                    s("duration_ms", format!("{}", 40 + k % 100)),
                    s("success", "true"),
                    kv("output_truncated", any_value::Value::BoolValue(false)),
                    s("agent_name", "/root"),
                    s("arguments", "{\"cmd\": \"echo hi\", \"workdir\": \"/home/dev/agents/work/codex/project\"}"),
                    s(
                        "output",
                        "Chunk ID: 62bb11\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nhi\n",
                    ),
                    s("mcp_server", ""),
                    s("mcp_server_origin", ""),
                    s("event.timestamp", aep_bridge::time::rfc3339_ms(now / 1_000_000)),
                    s("conversation.id", conv),
                    s("app.version", "0.171.0"),
                    s("originator", "codex_exec"),
                    s("terminal.type", "xterm"),
                    s("model", "gpt-5-codex-mock"),
                    s("slug", "gpt-5-codex-mock"),
                ],
                ..Default::default()
            }
        })
        .collect();
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(resource),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope { name: "codex_otel.log_only".into(), ..Default::default() }),
                log_records,
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}

/// Sends every batch to `{base}/v1/logs`; a 503/429 is retried after a short pause.
/// Returns (wall seconds, retries).
fn send_all(agent: &ureq::Agent, base: &str, a: &OtlpArgs) -> anyhow::Result<(f64, u64)> {
    let t = Instant::now();
    let mut retries = 0;
    for b in 0..a.batches {
        let body = request(b, a.records, a.sessions).encode_to_vec();
        loop {
            let mut resp = agent
                .post(&format!("{base}/v1/logs"))
                .header("content-type", "application/x-protobuf")
                .send(&body[..])?;
            let _ = resp.body_mut().read_to_vec();
            match resp.status().as_u16() {
                200 => break,
                429 | 503 => {
                    retries += 1;
                    anyhow::ensure!(retries < 100_000, "the receiver keeps refusing");
                    std::thread::sleep(Duration::from_millis(2));
                }
                s => anyhow::bail!("POST /v1/logs answered {s}"),
            }
        }
    }
    Ok((t.elapsed().as_secs_f64(), retries))
}

/// Kills and reaps the child bridge when dropped.
pub(super) struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `aep-bridge serve` (the binary beside this one) as a child; returns it with its HTTP address.
pub(super) fn start_bridge(data: &Path) -> anyhow::Result<(ChildGuard, String)> {
    let exe = super::sibling_binary("aep-bridge")?;
    let mut child = Command::new(&exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", "", "--otlp-http", ""])
        .arg("--data-dir")
        .arg(data)
        .env("AEP_BRIDGE_LOG", "warn")
        .env_remove("AEP_BRIDGE_CONFIG")
        .env_remove("AEP_BRIDGE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {} serve", exe.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let guard = ChildGuard(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        while let Some(Ok(l)) = lines.next() {
            if let Some(addr) = l.split_whitespace().find_map(|w| w.strip_prefix("http=")) {
                let _ = tx.send(addr.to_owned());
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(15)).context("the child bridge did not print its address")?;
    Ok((guard, format!("http://{addr}")))
}

fn find_rotel(spec: &str) -> Option<PathBuf> {
    match spec {
        "off" | "" => None,
        "auto" => crate::rotel::rotel_agent(),
        p => Some(PathBuf::from(p)),
    }
}

/// Runs rotel with the blackhole exporter on the same bodies and rounds; returns (records per
/// CPU-second of the median round, its CPU seconds, wall seconds per round).
fn rotel_baseline(bin: &Path, dir: &Path, a: &OtlpArgs) -> anyhow::Result<(f64, f64, f64)> {
    let (http, grpc) = (super::free_port()?, super::free_port()?);
    let child = Command::new(bin)
        .arg("start")
        .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http}")])
        .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{grpc}")])
        .args(["--exporter", "blackhole"])
        .arg("--pid-file")
        .arg(dir.join("rotel.pid"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    let pid = child.id();
    let _guard = ChildGuard(child);
    let up = wait_until(Duration::from_secs(15), || std::net::TcpStream::connect(("127.0.0.1", http)).is_ok());
    anyhow::ensure!(up, "rotel did not listen on 127.0.0.1:{http}");
    let agent = super::agent();
    let base = format!("http://127.0.0.1:{http}");
    send_all(&agent, &base, &OtlpArgs { batches: warmup_batches(a), ..a.clone() })?;
    let (mut cpus, mut wall) = (Vec::new(), 0.0);
    for _ in 0..a.rounds.max(1) {
        let cpu0 = cpu_seconds(Some(pid)).context("rotel cpu")?;
        wall += send_all(&agent, &base, a)?.0;
        std::thread::sleep(Duration::from_millis(200));
        cpus.push(cpu_seconds(Some(pid)).context("rotel cpu")? - cpu0);
    }
    let rounds = cpus.len() as f64;
    let n = (a.batches * a.records) as f64;
    let (cpu, _, _) = median_spread(cpus);
    Ok((n / cpu.max(1e-9), cpu, wall / rounds))
}

/// Runs the bench.
pub fn run(a: &OtlpArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.batches > 0 && a.records > 0, "--batches and --records must be at least 1");
    let scratch = super::Scratch::new("otlp")?;
    let (child, url, pid) = match (&a.url, a.pid) {
        (Some(u), Some(pid)) => (None, u.trim_end_matches('/').to_owned(), pid),
        _ => {
            let (c, u) = start_bridge(&scratch.path().join("data"))?;
            let pid = c.0.id();
            (Some(c), u, pid)
        }
    };
    let agent = super::agent();
    let body_len = request(0, a.records, a.sessions).encode_to_vec().len();
    println!(
        "bench otlp: batches={} records={} ({} KiB protobuf per request) sessions={} -> aep-bridge serve (pid {pid})",
        a.batches,
        a.records,
        body_len / 1024,
        a.sessions
    );
    // The real daemon at rest: every listener up, nothing received yet.
    let idle = super::proc_status_bytes(Some(pid), "VmRSS").unwrap_or(0);
    line(
        "serve idle RSS (VmRSS before load)",
        &super::mib(idle),
        &format!("budget < 20 MiB: {}", verdict(idle > 0 && idle < 20 << 20)),
    );
    // Warm up: connections, allocator, profile detection, and the replay buffers filled to
    // their depth (from then on every event admitted evicts one: the steady state).
    send_all(&agent, &url, &OtlpArgs { batches: warmup_batches(a), ..a.clone() })?;
    let settled = |agent: &ureq::Agent| -> anyhow::Result<(u64, u64, u64)> {
        // Quiet: the JSONL sink has everything the OTLP queue admitted.
        let mut last = (u64::MAX, Instant::now());
        let mut out = (0, 0, 0);
        wait_until(Duration::from_secs(120), || {
            let Ok(t) = scrape(agent, &url) else { return false };
            let ins = metric_sum(&t, "aep_bridge_events_in_total", &["input=\"otlp\""]);
            let outs = metric_sum(&t, "aep_bridge_events_out_total", &["sink=\"jsonl\""]);
            let dropped = metric_sum(&t, "aep_bridge_events_dropped_total", &["sink=\"jsonl\""]);
            out = (ins, outs, dropped);
            if ins != last.0 {
                last = (ins, Instant::now());
            }
            outs + dropped >= ins && last.1.elapsed() > Duration::from_millis(300)
        });
        Ok(out)
    };
    let (in0, out0, drop0) = settled(&agent)?;
    let (mut cpus, mut wall, mut retries) = (Vec::new(), 0.0, 0);
    let (mut in1, mut out1, mut drop1) = (in0, out0, drop0);
    for _ in 0..a.rounds.max(1) {
        let cpu0 = cpu_seconds(Some(pid)).context("cannot read the child's CPU time")?;
        let (w, r) = send_all(&agent, &url, a)?;
        (in1, out1, drop1) = settled(&agent)?;
        cpus.push(cpu_seconds(Some(pid)).context("cannot read the child's CPU time")? - cpu0);
        (wall, retries) = (wall + w, retries + r);
    }
    let rss = super::proc_status_bytes(Some(pid), "VmHWM").unwrap_or(0);
    drop(child);
    let rounds = cpus.len();
    let n = (a.batches * a.records) as f64;
    let (cpu, fastest, slowest) = median_spread(cpus);
    let per_cpu = n / cpu.max(1e-9);
    if cpu < 0.05 {
        line("bridge: records per CPU-second", "too short", "under 0.05 CPU-s: raise --batches");
    } else {
        line(
            "bridge: records per CPU-second",
            &rate(per_cpu, "rec/CPU-s"),
            &format!(
                "target >= 250k: {} (median of {rounds} rounds: {cpu:.2} CPU-s for {n:.0} records; rounds {:.0}k..{:.0}k)",
                verdict(per_cpu >= 250_000.0),
                n / slowest.max(1e-9) / 1e3,
                n / fastest.max(1e-9) / 1e3,
            ),
        );
    }
    line(
        "bridge: wall rate (sequential client)",
        &rate(n * rounds as f64 / wall, "rec/s"),
        &format!("{retries} retried 503s; peak RSS {}", super::mib(rss)),
    );
    line(
        "bridge: events to JSONL",
        &format!("{}", out1 - out0),
        &format!("pipeline admitted {}, sink dropped {}", in1 - in0, drop1 - drop0),
    );
    anyhow::ensure!(in1 > in0, "the bridge mapped no record to an event (profile detection failed?)");
    match find_rotel(&a.rotel) {
        None if a.rotel == "off" => line("baseline: rotel (decode only)", "skipped", "--rotel off"),
        None => line(
            "baseline: rotel (decode only)",
            "skipped",
            "rotel-agent not found (pip install --pre rotel==0.0.1a15)",
        ),
        Some(bin) => match rotel_baseline(&bin, scratch.path(), a) {
            Ok((_, rcpu, _)) if rcpu < 0.05 => {
                line("baseline: rotel blackhole (decode only)", "too short", "under 0.05 CPU-s: raise --batches")
            }
            Ok((r, rcpu, rwall)) => {
                line(
                    "baseline: rotel blackhole (decode only)",
                    &rate(r, "rec/CPU-s"),
                    &format!("{rcpu:.2} CPU-s, wall {:.0} rec/s; bridge at {:.2}x of it", n / rwall, per_cpu / r),
                );
            }
            Err(e) => line("baseline: rotel (decode only)", "failed", &format!("{e:#}")),
        },
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_through_the_receiver_conversion() {
        let req = request(3, 5, 2);
        let bytes = req.encode_to_vec();
        let back = ExportLogsServiceRequest::decode(&bytes[..]).unwrap();
        let recs = aep_receivers::otlp::to_otel_records(&back);
        assert_eq!(recs.len(), 5);
        assert_eq!(recs[0].service_name(), Some("codex_exec"));
    }
}
