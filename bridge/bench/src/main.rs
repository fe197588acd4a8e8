//! `aep-bench`: the load tools of aep-bridge, a binary of their own so the product binary
//! does not carry them. Each prints a small report: the figure, a baseline
//! measured in the same run, their ratio, and PASS/MISS against the budget (informational:
//! the exit code only reflects whether the bench itself ran).

mod collector;
mod decoders;
mod fleet;
mod hook;
mod hostile;
mod kinds;
mod mix;
mod otlp;
mod pipeline;
mod wrap;

// The same allocator as `aep-bridge` (the in-process benches measure the daemon's code).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use aep_bridge::config::Config;
use aep_bridge::server::ServeError;

/// aep-bench: load tools that report each figure beside a baseline measured in the same run.
#[derive(Debug, Clone, Parser)]
#[command(name = "aep-bench", version, about)]
struct BenchArgs {
    /// Which bench to run.
    #[command(subcommand)]
    pub which: BenchCmd,
}

/// The benches.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCmd {
    /// Drafts through a real pipeline into the JSONL sink: events/s, idle/peak/sustained RSS.
    Pipeline(pipeline::PipelineArgs),
    /// The `aep-hook` shim end to end against an in-process bridge: p50/p99 vs `/bin/true`.
    Hook(hook::HookArgs),
    /// NDJSON `POST /events` with SSE subscribers on `/stream`: ingest rate and delivery delay.
    Collector(collector::CollectorArgs),
    /// OTLP/HTTP protobuf logs into a child `aep-bridge serve`: records per CPU-second.
    Otlp(otlp::OtlpArgs),
    /// Each record kind of a mix through an in-process bridge without a socket: with
    /// `--callgrind`, instructions per record per kind.
    Kinds(kinds::KindsArgs),
    /// The shim's latency and the bridge's RSS under idle connections, stalled
    /// subscribers and an OTLP flood, against the same run's quiet figures.
    Hostile(hostile::HostileArgs),
    /// A recorded ACP stream through `aep-bridge wrap acp -- cat` beside plain `cat`: the
    /// per-line p99 the tee adds.
    Wrap(wrap::WrapArgs),
    /// The hand-written decoders against their references (the OTLP fast reader vs prost,
    /// the strict JSON parser vs serde_json) on generated and mutated inputs.
    Decoders(decoders::DecodersArgs),
    /// A team's fleet on this machine: N edge bridges replaying recorded sessions, a
    /// gateway (rotel or the Collector) in front of a counting sink, a hub answering every
    /// held permission: events in vs delivered per signal, per-edge RSS and CPU, the hub's
    /// ingest rate, the answer latency, against one edge alone.
    Fleet(fleet::FleetArgs),
}

/// Runs the command; returns the exit code.
fn run(args: BenchArgs) -> i32 {
    let result = match args.which {
        BenchCmd::Pipeline(a) => pipeline::run(&a),
        BenchCmd::Hook(a) => hook::run(&a),
        BenchCmd::Collector(a) => collector::run(&a),
        BenchCmd::Otlp(a) => otlp::run(&a),
        BenchCmd::Kinds(a) => kinds::run(&a),
        BenchCmd::Hostile(a) => hostile::run(&a),
        BenchCmd::Wrap(a) => wrap::run(&a),
        BenchCmd::Decoders(a) => decoders::run(&a),
        BenchCmd::Fleet(a) => fleet::run(&a),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("aep-bench: {e:#}");
            1
        }
    }
}

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`) in bytes; `None` = this process.
pub(crate) fn proc_status_bytes(pid: Option<u32>, key: &str) -> Option<u64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/status"),
        None => "/proc/self/status".into(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k * 1024)
    })
}

fn clk_tck() -> f64 {
    static TCK: OnceLock<f64> = OnceLock::new();
    *TCK.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// User + system CPU seconds of a process (`/proc/<pid>/stat` utime + stime); `None` = this process.
pub(crate) fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    cpu_split(pid).map(|(user, system)| user + system)
}

/// User and system CPU seconds of a process so far (`/proc/<pid>/stat` utime and stime),
/// this process's for `None`.
pub(crate) fn cpu_split(pid: Option<u32>) -> Option<(f64, f64)> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".into(),
    };
    let text = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesized command name start at field 3 (state); utime is 14, stime 15.
    let after = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let (user, system) = (f.get(11)?.parse::<u64>().ok()?, f.get(12)?.parse::<u64>().ok()?);
    Some((user as f64 / clk_tck(), system as f64 / clk_tck()))
}

/// CPU seconds of this process's threads whose name (`comm`) satisfies `pick`
/// (`/proc/self/task/*/stat`): splits the bridge's own threads from the bench clients.
pub(crate) fn threads_cpu(pick: impl Fn(&str) -> bool) -> f64 {
    let Ok(rd) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    let mut ticks = 0u64;
    for e in rd.flatten() {
        let Ok(text) = std::fs::read_to_string(e.path().join("stat")) else { continue };
        let (Some(open), Some(close)) = (text.find('('), text.rfind(')')) else { continue };
        if !pick(&text[open + 1..close]) {
            continue;
        }
        let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
        ticks += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    ticks as f64 / clk_tck()
}

/// `true` for the threads of an in-process bridge (tokio workers and blocking pool, the JSONL sink).
pub(crate) fn is_bridge_thread(comm: &str) -> bool {
    comm.starts_with("tokio-") || comm.starts_with("aep-jsonl")
}

/// A scratch directory removed on drop.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(tag: &str) -> std::io::Result<Self> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let p = std::env::temp_dir().join(format!("aep-bench-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p)?;
        Ok(Scratch(p))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Nearest-rank percentile of an ascending slice (0 when empty).
pub(crate) fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub(crate) fn rate(n: f64, unit: &str) -> String {
    if n >= 10_000.0 { format!("{:.0}k {unit}", n / 1000.0) } else { format!("{n:.0} {unit}") }
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// One report line: label, value, note.
pub(crate) fn line(label: &str, value: &str, note: &str) {
    println!("  {label:<36} {value:>16}  {note}");
}

/// A bridge config on loopback (ephemeral port, no extra listeners) over `data`.
pub(crate) fn bench_config(data: &Path) -> Config {
    let mut cfg = Config::default();
    cfg.server.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    cfg.server.otlp_grpc = None;
    cfg.server.otlp_http = None;
    cfg.server.data_dir = data.display().to_string();
    cfg.server.host = "bench-host".into();
    // Figures are taken before shutdown; a short grace keeps a bench run short.
    cfg.server.shutdown_grace_ms = 1000;
    cfg
}

/// A bridge served in this process on its own runtime.
pub(crate) struct InProcess {
    rt: tokio::runtime::Runtime,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), ServeError>>,
    /// The main HTTP listener.
    pub(crate) http: SocketAddr,
}

impl InProcess {
    /// Starts `serve` with `cfg` on a runtime of `workers` threads.
    pub(crate) fn start(cfg: Config, workers: usize) -> anyhow::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(workers.max(1)).enable_all().build()?;
        let stop = CancellationToken::new();
        let (tx, rx) = std::sync::mpsc::channel();
        let s = stop.clone();
        let task = rt.spawn(async move {
            aep_bridge::server::serve(cfg, s, move |b, _| {
                let _ = tx.send(b.http);
            })
            .await
        });
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(http) => Ok(InProcess { rt, stop, task, http }),
            Err(_) => {
                let r = rt.block_on(async { tokio::time::timeout(Duration::from_secs(2), task).await });
                match r {
                    Ok(Ok(Err(e))) => Err(anyhow::anyhow!("the bridge did not start: {e}")),
                    _ => Err(anyhow::anyhow!("the bridge did not start within 10 s")),
                }
            }
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Stops the bridge and waits for its shutdown (bounded).
    pub(crate) fn shutdown(self) {
        self.stop.cancel();
        let task = self.task;
        let _ = self.rt.block_on(async { tokio::time::timeout(Duration::from_secs(10), task).await });
    }
}

/// A blocking HTTP client that returns non-2xx statuses as responses.
pub(crate) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().new_agent()
}

/// `GET {url}/metrics`.
pub(crate) fn scrape(agent: &ureq::Agent, url: &str) -> anyhow::Result<String> {
    let mut resp = agent.get(&format!("{url}/metrics")).call()?;
    Ok(resp.body_mut().read_to_string()?)
}

pub(crate) use aep_testkit::metric_sum;

/// Polls `check` every 20 ms until it returns true or `limit` passes; returns whether it did.
pub(crate) fn wait_until(limit: Duration, check: impl FnMut() -> bool) -> bool {
    wait_until_every(limit, Duration::from_millis(20), check)
}

/// Polls `check` every `every` until it returns true or `limit` passes; returns whether it did.
pub(crate) fn wait_until_every(limit: Duration, every: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(every);
    }
}

/// A binary installed beside this one (`aep-bridge`, `aep-hook`): cargo builds them into
/// one directory, and so does `cargo install`.
pub(crate) fn sibling_binary(name: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::current_exe()?.with_file_name(name);
    anyhow::ensure!(
        path.is_file(),
        "no {name} at {} (build it: cargo build -p aep-bridge-cli -p aep-hook)",
        path.display()
    );
    Ok(path)
}

/// A free loopback port (bound then released).
pub(crate) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn main() {
    std::process::exit(run(BenchArgs::parse()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_metric_sums() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
        let text = "# HELP x\nx_total{sink=\"jsonl\"} 5\nx_total{sink=\"relay\"} 7\nx_total_other 9\n";
        assert_eq!(metric_sum(text, "x_total", &["sink=\"jsonl\""]), 5);
        assert_eq!(metric_sum(text, "x_total", &[]), 12);
    }

    #[test]
    fn reads_own_rss_and_cpu() {
        assert!(proc_status_bytes(None, "VmRSS").is_some_and(|b| b > 0));
        assert!(proc_status_bytes(None, "VmHWM").is_some());
        assert!(cpu_seconds(None).is_some());
    }
}
