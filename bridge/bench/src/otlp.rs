//! `aep-bench otlp`: OTLP/HTTP protobuf log batches of a real record mix (`--mix`, see
//! [`super::mix`]) to a child `aep-bridge serve`, whose CPU time (`/proc/<pid>/stat` utime +
//! stime) gives records per CPU-second through decode, mapping, sequencing, the embedded
//! collector and JSONL. The same bodies go to rotel (`rotel-agent --exporter blackhole`:
//! decode only) as the baseline, round for round: each measured round sends the batches to
//! the bridge, then to rotel, so both see the same machine load, and the ratio is taken per
//! round (median and spread reported).
//!
//! `--against <aep-bridge>` puts another bridge binary in rotel's place (an A/B of two
//! builds under the same per-round interleaving, each settled before its CPU is read): on
//! a machine whose speed drifts by 20% from run to run, this is what separates a 5% change
//! from noise. The two positions are not quite symmetric (swapping them moved the ratio by
//! up to a tenth in the runs measured), so run both orders and read the two ratios together.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use prost::Message as _;

use super::mix::{Mix, Source};
use super::{cpu_split, line, metric_sum, rate, scrape, verdict, wait_until};

/// Arguments of `aep-bench otlp`.
#[derive(Debug, Clone, Args)]
pub struct OtlpArgs {
    /// The record mix: real Codex or Claude Code exports, VS Code-shaped records, or the
    /// synthetic `codex.tool_result` shape; several (comma-separated) run one after another.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "codex")]
    pub mix: Vec<Mix>,
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
    /// Another `aep-bridge` binary as the baseline instead of rotel (an A/B of two builds,
    /// interleaved round for round); overrides `--rotel`.
    #[arg(long)]
    pub against: Option<PathBuf>,
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

/// The request bodies a run sends: `count` batches from batch number `first` on.
struct Batches<'a> {
    src: &'a Source,
    first: usize,
    count: usize,
    records: usize,
    sessions: usize,
    now: u64,
}

/// Sends every batch to `{base}/v1/logs`; a 503/429 is retried after a short pause.
/// Returns (wall seconds, retries).
fn send_all(agent: &ureq::Agent, base: &str, w: &Batches<'_>) -> anyhow::Result<(f64, u64)> {
    let t = Instant::now();
    let mut retries = 0;
    for b in w.first..w.first + w.count {
        let body = w.src.request(b, w.records, w.sessions, w.now).encode_to_vec();
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

impl ChildGuard {
    /// The child's process id.
    pub(super) fn id(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `aep-bridge serve` (the binary beside this one) as a child; returns it with its HTTP address.
pub(super) fn start_bridge(data: &Path) -> anyhow::Result<(ChildGuard, String)> {
    start_bridge_exe(&super::sibling_binary("aep-bridge")?, data)
}

/// [`start_bridge`] with its OTLP/gRPC port on too; returns the gRPC address as well.
pub(super) fn start_bridge_with_grpc(data: &Path) -> anyhow::Result<(ChildGuard, String, std::net::SocketAddr)> {
    let (child, line) = spawn_bridge(&super::sibling_binary("aep-bridge")?, data, "127.0.0.1:0")?;
    let field = |key: &str| line.split_whitespace().find_map(|w| w.strip_prefix(key)).map(str::to_owned);
    let http = field("http=").context("no http= in the start-up line")?;
    let grpc = field("otlp-grpc=").context("no otlp-grpc= in the start-up line")?.parse()?;
    Ok((child, format!("http://{http}"), grpc))
}

/// Starts `exe serve` (an `aep-bridge` binary) as a child; returns it with its HTTP address.
fn start_bridge_exe(exe: &Path, data: &Path) -> anyhow::Result<(ChildGuard, String)> {
    let (child, line) = spawn_bridge(exe, data, "")?;
    let addr =
        line.split_whitespace().find_map(|w| w.strip_prefix("http=")).context("no http= in the start-up line")?;
    Ok((child, format!("http://{addr}")))
}

/// Starts `exe serve` with `grpc` as its OTLP/gRPC listener (`""`: off); returns it with
/// its start-up line.
fn spawn_bridge(exe: &Path, data: &Path, grpc: &str) -> anyhow::Result<(ChildGuard, String)> {
    let mut child = Command::new(exe)
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", grpc, "--otlp-http", ""])
        .arg("--data-dir")
        .arg(data)
        .env("AEP_BRIDGE_LOG", "warn")
        .env_remove("AEP_BRIDGE_CONFIG")
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("AEP_TOKEN")
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
            if l.contains("aep-bridge listening") {
                let _ = tx.send(l);
            }
        }
    });
    let line = rx.recv_timeout(Duration::from_secs(15)).context("the child bridge did not print its address")?;
    Ok((guard, line))
}

fn find_rotel(spec: &str) -> Option<PathBuf> {
    match spec {
        "off" | "" => None,
        "auto" => aep_testkit::rotel_agent(),
        p => Some(PathBuf::from(p)),
    }
}

/// Starts rotel with the blackhole exporter; returns it with its HTTP base URL.
fn start_rotel(bin: &Path, dir: &Path) -> anyhow::Result<(ChildGuard, String)> {
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
    let guard = ChildGuard(child);
    let up = wait_until(Duration::from_secs(15), || std::net::TcpStream::connect(("127.0.0.1", http)).is_ok());
    anyhow::ensure!(up, "rotel did not listen on 127.0.0.1:{http}");
    Ok((guard, format!("http://127.0.0.1:{http}")))
}

/// Counters of the bridge once it is quiet: the JSONL sink has everything the OTLP queue
/// admitted. (events in, events out to JSONL, dropped by JSONL, records without a session)
fn settled(agent: &ureq::Agent, url: &str) -> anyhow::Result<(u64, u64, u64, u64)> {
    let mut last = (u64::MAX, Instant::now());
    let mut out = (0, 0, 0, 0);
    wait_until(Duration::from_secs(120), || {
        let Ok(t) = scrape(agent, url) else { return false };
        let ins = metric_sum(&t, "aep_bridge_events_in_total", &["input=\"otlp\""]);
        let outs = metric_sum(&t, "aep_bridge_events_out_total", &["sink=\"jsonl\""]);
        let dropped = metric_sum(&t, "aep_bridge_events_dropped_total", &["sink=\"jsonl\""]);
        let sessionless =
            metric_sum(&t, "aep_bridge_requests_rejected_total", &["receiver=\"otlp\"", "reason=\"no_session\""]);
        out = (ins, outs, dropped, sessionless);
        if ins != last.0 {
            last = (ins, Instant::now());
        }
        outs + dropped >= ins && last.1.elapsed() > Duration::from_millis(300)
    });
    Ok(out)
}

/// Runs the bench: each mix in turn.
pub fn run(a: &OtlpArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.batches > 0 && a.records > 0, "--batches and --records must be at least 1");
    for (i, mix) in a.mix.iter().enumerate() {
        if i > 0 {
            println!();
        }
        run_mix(a, *mix)?;
    }
    Ok(())
}

/// The median of `v` with its smallest and largest value.
fn median_of(v: &[f64]) -> (f64, f64, f64) {
    median_spread(v.to_vec())
}

fn run_mix(a: &OtlpArgs, mix: Mix) -> anyhow::Result<()> {
    let src = Source::new(mix)?;
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
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let body_len = src.request(0, a.records, a.sessions, now).encode_to_vec().len();
    // Which build is measured, in full: the binary beside this one may be another build's.
    let measured = match &a.url {
        Some(u) => u.clone(),
        None => format!("{} serve", super::sibling_binary("aep-bridge")?.display()),
    };
    println!(
        "bench otlp --mix {}: batches={} records={} ({} KiB protobuf per request, {} template records) sessions={} rounds={} -> {measured} (pid {pid})",
        mix.as_str(),
        a.batches,
        a.records,
        body_len / 1024,
        src.len(),
        a.sessions,
        a.rounds.max(1),
    );
    // The real daemon at rest: every listener up, nothing received yet.
    let idle = super::proc_status_bytes(Some(pid), "VmRSS").unwrap_or(0);
    line(
        "serve idle RSS (VmRSS before load)",
        &super::mib(idle),
        &format!("budget < 20 MiB: {}", verdict(idle > 0 && idle < 20 << 20)),
    );
    let against = a.against.as_deref();
    let baseline = match against {
        Some(exe) => Some(start_bridge_exe(exe, &scratch.path().join("against"))?),
        None => find_rotel(&a.rotel).and_then(|bin| {
            start_rotel(&bin, scratch.path())
                .inspect_err(|e| line("baseline: rotel (decode only)", "failed", &format!("{e:#}")))
                .ok()
        }),
    };
    // Warm up: connections, allocator, profile detection, and the replay buffers filled to
    // their depth (from then on every event admitted evicts one: the steady state).
    let warm = warmup_batches(a);
    let batches = |first, count| Batches { src: &src, first, count, records: a.records, sessions: a.sessions, now };
    send_all(&agent, &url, &batches(0, warm))?;
    if let Some((_, base)) = &baseline {
        send_all(&agent, base, &batches(0, warm))?;
    }
    let (in0, out0, drop0, noses0) = settled(&agent, &url)?;
    let (mut cpus, mut rcpus, mut ratios, mut wall, mut rwall, mut retries) =
        (Vec::new(), Vec::new(), Vec::new(), 0.0, 0.0, 0);
    let (mut in1, mut out1, mut drop1, mut noses1) = (in0, out0, drop0, noses0);
    // CPU in the kernel over all measured rounds (the bridge's JSONL writes and fsyncs are
    // there; rotel's blackhole writes nothing).
    let (mut system, mut rsystem) = (0.0, 0.0);
    let n = (a.batches * a.records) as f64;
    for round in 0..a.rounds.max(1) {
        let w = batches(warm + round * a.batches, a.batches);
        let (u0, s0) = cpu_split(Some(pid)).context("cannot read the child's CPU time")?;
        let (t, r) = send_all(&agent, &url, &w)?;
        (in1, out1, drop1, noses1) = settled(&agent, &url)?;
        let (u1, s1) = cpu_split(Some(pid)).context("cannot read the child's CPU time")?;
        let cpu = (u1 - u0) + (s1 - s0);
        system += s1 - s0;
        cpus.push(cpu);
        (wall, retries) = (wall + t, retries + r);
        if let Some((child, base)) = &baseline {
            let rpid = child.id();
            let (ru0, rs0) = cpu_split(Some(rpid)).context("baseline cpu")?;
            rwall += send_all(&agent, base, &w)?.0;
            if against.is_some() {
                settled(&agent, base)?;
            } else {
                std::thread::sleep(Duration::from_millis(200));
            }
            let (ru1, rs1) = cpu_split(Some(rpid)).context("baseline cpu")?;
            let rcpu = (ru1 - ru0) + (rs1 - rs0);
            rsystem += rs1 - rs0;
            rcpus.push(rcpu);
            ratios.push(rcpu / cpu.max(1e-9));
        }
    }
    let rss = super::proc_status_bytes(Some(pid), "VmHWM").unwrap_or(0);
    drop(child);
    let rounds = cpus.len();
    let total: f64 = cpus.iter().sum();
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
        "bridge: CPU in the kernel",
        &format!("{:.0}%", 100.0 * system / total.max(1e-9)),
        &format!(
            "user {:.2} s, system {system:.2} s over {rounds} rounds (socket reads, JSONL writes and fsyncs){}",
            total - system,
            if rcpus.is_empty() {
                String::new()
            } else {
                let who = if against.is_some() { "baseline" } else { "rotel" };
                format!("; {who} {:.0}%", 100.0 * rsystem / rcpus.iter().sum::<f64>().max(1e-9))
            }
        ),
    );
    line(
        "bridge: events to JSONL",
        &format!("{}", out1 - out0),
        &format!(
            "pipeline admitted {}, sink dropped {}, records without a session {}",
            in1 - in0,
            drop1 - drop0,
            noses1 - noses0
        ),
    );
    anyhow::ensure!(in1 > in0, "the bridge mapped no record to an event (profile detection failed?)");
    match baseline {
        None if a.rotel == "off" => line("baseline: rotel (decode only)", "skipped", "--rotel off"),
        None => line(
            "baseline: rotel (decode only)",
            "skipped",
            "rotel-agent not found (pip install --pre rotel==0.0.1a15)",
        ),
        Some(_) => {
            // Another build is compared, not judged against the rotel target.
            let (name, ratio_label, target) = match against {
                Some(exe) => (format!("baseline: aep-bridge {}", exe.display()), "bridge / baseline bridge", None),
                None => (
                    "baseline: rotel blackhole (decode only)".to_owned(),
                    "bridge / rotel (same rounds)",
                    // The target: at least rotel's rate on every agent's mix, 1.2x on Codex's.
                    Some(if mix == Mix::Codex { 1.2 } else { 1.0 }),
                ),
            };
            let (rcpu, _, _) = median_of(&rcpus);
            if rcpu < 0.05 {
                line(&name, "too short", "under 0.05 CPU-s: raise --batches");
            } else {
                let (ratio, lo, hi) = median_of(&ratios);
                line(
                    &name,
                    &rate(n / rcpu, "rec/CPU-s"),
                    &format!("median {rcpu:.2} CPU-s, wall {:.0} rec/s", n * rounds as f64 / rwall),
                );
                let spread = format!("median of {rounds} per-round ratios; spread {lo:.2}x..{hi:.2}x");
                let verdict = match target {
                    Some(t) => format!("target >= {t:.1}x: {} ({spread})", verdict(ratio >= t)),
                    None => format!("{spread} (above 1: this build is cheaper)"),
                };
                line(ratio_label, &format!("{ratio:.2}x"), &verdict);
            }
        }
    }
    Ok(())
}
