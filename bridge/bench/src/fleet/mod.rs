//! `aep-bench fleet`: a team's bridges on one machine. N edge bridges (each a real
//! `aep-bridge serve` process with its own data dir and config) replay the recorded agent
//! sessions of `../shared/captures` at `--speed` times real speed into their hook and OTLP
//! ports; each exports (durably, `[export] durable`) over OTLP/gRPC with its tenant's
//! header to a gateway (rotel, or the project's OpenTelemetry Collector distribution with
//! `gateway-loadbalancing.yaml`) and relays to one hub (`aep-bridge serve`) with a token of
//! its own in the hub's access list (`[[access]]`, role `emit`, its tenant). Behind the
//! gateway the bench's own OTLP receiver counts what arrives by id, so "delivered" and
//! "duplicates" are exact against what the edges' logs hold.
//!
//! Every permission request of the recordings goes through the real `aep-hook` shim, is
//! held at its edge, and is answered at the hub over its `/socket`; the report gives the
//! time from the answer leaving the hub to the shim's reply. `--outage-secs` stops the
//! gateway mid-run and starts it again; `--restart-edge` restarts one edge on its data dir
//! during the outage. A baseline edge alone at the same speed, run first, gives each
//! per-edge figure its ratio.

mod answer;
mod replay;
mod sink;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Args, ValueEnum};

use self::replay::{Capture, Step};
use super::{line, metric_sum, mib, percentile, proc_status_bytes};

/// Arguments of `aep-bench fleet`.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// Edge bridges (each its own `aep-bridge serve` process).
    #[arg(long, default_value_t = 3)]
    pub bridges: usize,
    /// Replay speed: k times the recorded pace.
    #[arg(long, default_value_t = 10.0)]
    pub speed: f64,
    /// How long the edges keep starting recorded sessions (seconds of load).
    #[arg(long, default_value_t = 30.0)]
    pub duration_secs: f64,
    /// Stop the gateway this long in the middle of the load, then start it again (0: no outage).
    #[arg(long, default_value_t = 0.0)]
    pub outage_secs: f64,
    /// Restart one edge (SIGTERM, then `serve` again on its data dir) during the outage.
    #[arg(long)]
    pub restart_edge: bool,
    /// The gateway between the edges and the sink.
    #[arg(long, value_enum, default_value = "rotel")]
    pub gateway: Gateway,
    /// The recorded sessions (default `$AEP_CAPTURES`, else `../shared/captures`).
    #[arg(long)]
    pub captures: Option<PathBuf>,
    /// Load seconds of the baseline (one edge alone at the same speed, run first); 0: none.
    #[arg(long, default_value_t = 15.0)]
    pub baseline_secs: f64,
    /// Longest wait for the sink to hold everything after the load (seconds).
    #[arg(long, default_value_t = 300.0)]
    pub drain_secs: f64,
    /// rotel-agent: a path or `auto` (PATH, then the `rotel` Python package).
    #[arg(long, default_value = "auto")]
    pub rotel: String,
}

/// The gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Gateway {
    /// rotel-agent from PyPI (`pip install rotel==0.0.1a15`), its OTLP exporter to the sink.
    Rotel,
    /// The project's Collector distribution (`.ci/peers-go otelcol`) with
    /// `collector-config/gateway-loadbalancing.yaml`, its load-balancing exporter to the sink.
    Collector,
}

// ---------------------------------------------------------------- processes

/// A child process, killed and reaped when dropped.
struct Kid(Child);

impl Kid {
    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// SIGTERM, then waits up to `grace` for it to exit (killed after that).
    fn terminate(mut self, grace: Duration) {
        let _ = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `exe serve --config cfg`, stderr to `log`; returns it with its listening line
/// once it printed it (the ports it bound: `http=`, `otlp-http=`).
fn serve(exe: &Path, cfg: &Path, log: &Path) -> anyhow::Result<(Kid, String)> {
    let err = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let mut child = Command::new(exe)
        .arg("serve")
        .arg("--config")
        .arg(cfg)
        .env("AEP_BRIDGE_LOG", "warn")
        .env_remove("AEP_BRIDGE_CONFIG")
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("AEP_TOKEN")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_SERVICE_NAME")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err)
        .spawn()
        .with_context(|| format!("cannot run {} serve", exe.display()))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let kid = Kid(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new().name("fleet-stdout".into()).stack_size(64 << 10).spawn(move || {
        let mut lines = std::io::BufReader::new(stdout).lines();
        while let Some(Ok(l)) = lines.next() {
            if l.contains("aep-bridge listening") {
                let _ = tx.send(l);
            }
        }
    })?;
    let line = rx.recv_timeout(Duration::from_secs(60)).with_context(|| {
        format!(
            "{} serve did not start: {}",
            exe.display(),
            std::fs::read_to_string(log).unwrap_or_default().lines().last().unwrap_or("(nothing logged)")
        )
    })?;
    Ok((kid, line))
}

/// The `key=` field of a listening line (`http=127.0.0.1:PORT`).
fn field(line: &str, key: &str) -> Option<String> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key)).map(str::to_owned)
}

/// A free loopback port (bound, then released, so a restart binds it again).
fn port() -> anyhow::Result<u16> {
    Ok(super::free_port()?)
}

/// The gateway process and how to start it again on the same ports.
struct Gw {
    kind: Gateway,
    bin: PathBuf,
    grpc: u16,
    http: u16,
    dir: PathBuf,
    sink: std::net::SocketAddr,
    kid: Option<Kid>,
    /// Peak RSS of earlier processes (before a restart).
    past_hwm: u64,
}

impl Gw {
    fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("gateway.log"))?;
        let mut cmd = Command::new(&self.bin);
        match self.kind {
            Gateway::Rotel => {
                cmd.arg("start")
                    .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{}", self.grpc)])
                    .args(["--otlp-http-endpoint", &format!("127.0.0.1:{}", self.http)])
                    .args(["--exporter", "otlp"])
                    .args(["--otlp-exporter-endpoint", &format!("http://{}", self.sink)])
                    // A gateway that acknowledged a batch must not drop it: rotel keeps
                    // batches in memory and, by default, gives one up after 300 s of failed
                    // retries. On a machine far past its cores the sink answers late and
                    // rotel dropped 16% of what it had acknowledged (200 edges); retried for
                    // an hour it gave none up while running. (Its request timeout stays at
                    // 5 s: with 30 s an export in flight outlived rotel's own shutdown and
                    // the smoke test's spans were lost at the outage's stop.)
                    .args(["--otlp-exporter-retry-max-elapsed-time", "3600s"])
                    .arg("--pid-file")
                    .arg(self.dir.join("rotel.pid"));
            }
            Gateway::Collector => {
                let health = port()?;
                // The persistent queue in the gateway's own folder: it outlives the
                // gateway's stop (the outage), as a volume would.
                let queue = self.dir.join("queue");
                let overlay = format!(
                    "extensions:\n  health_check:\n    endpoint: 127.0.0.1:{health}\n  file_storage:\n    \
                     directory: {}\n    create_directory: true\nreceivers:\n  otlp:\n    protocols:\n      \
                     grpc:\n        endpoint: 127.0.0.1:{}\n      http:\n        endpoint: 127.0.0.1:{}\nexporters:\n  \
                     loadbalancing:\n    resolver:\n      static:\n        hostnames: [\"{sink}\"]\n  \
                     loadbalancing/metrics:\n    resolver:\n      static:\n        hostnames: [\"{sink}\"]\n\
                     service:\n  telemetry:\n    metrics:\n      level: none\n",
                    queue.display(),
                    self.grpc,
                    self.http,
                    sink = self.sink
                );
                let over = self.dir.join("overlay.yaml");
                std::fs::write(&over, overlay)?;
                cmd.arg("--config").arg(collector_yaml()?).arg("--config").arg(&over);
            }
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot run {}", self.bin.display()))?;
        let kid = Kid(child);
        let grpc = self.grpc;
        let up =
            super::wait_until(Duration::from_secs(60), || std::net::TcpStream::connect(("127.0.0.1", grpc)).is_ok());
        anyhow::ensure!(
            up,
            "the gateway did not listen on 127.0.0.1:{grpc} (see {})",
            self.dir.join("gateway.log").display()
        );
        self.kid = Some(kid);
        Ok(())
    }

    fn stop(&mut self) {
        if let Some(k) = self.kid.take() {
            self.past_hwm = self.past_hwm.max(proc_status_bytes(Some(k.pid()), "VmHWM").unwrap_or(0));
            // SIGTERM, a graceful stop: the Collector keeps what it acknowledged in its
            // persistent queue, rotel flushes its batches (a SIGKILL would lose rotel's, in
            // memory, which no edge can know about).
            k.terminate(Duration::from_secs(20));
        }
    }

    fn hwm(&self) -> u64 {
        self.past_hwm.max(self.kid.as_ref().and_then(|k| proc_status_bytes(Some(k.pid()), "VmHWM")).unwrap_or(0))
    }
}

/// `collector-config/gateway-loadbalancing.yaml` of this source tree.
fn collector_yaml() -> anyhow::Result<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../collector-config/gateway-loadbalancing.yaml");
    anyhow::ensure!(p.is_file(), "no {}", p.display());
    Ok(p)
}

// ---------------------------------------------------------------- edges and hub

/// The token edge `edge` relays to the hub with: its own, in the hub's access list
/// (`[[access]]`, role `emit`, its tenant), derived from the run's operator token so the
/// hub's config can list every edge before they exist.
fn edge_relay_token(hub_token: &str, edge: usize) -> String {
    format!("{hub_token}-edge-{edge:04}")
}

/// The hub's `[[access]]` list: one entry per edge (`edges` of them, the baseline included).
fn access_list(hub_token: &str, edges: usize) -> String {
    (0..edges)
        .map(|i| {
            let name = if i == edges - 1 { "edge-baseline".to_owned() } else { format!("edge-{i:03}") };
            format!(
                "\n[[access]]\nname = \"{name}\"\ntenant = \"{}\"\ntoken = \"{}\"\nroles = [\"emit\"]\n",
                tenant(i),
                edge_relay_token(hub_token, i)
            )
        })
        .collect()
}

/// The tenant of edge `i` (four teams).
fn tenant(i: usize) -> String {
    format!("team-{}", ["a", "b", "c", "d"][i % 4])
}

/// One edge bridge.
struct Edge {
    idx: usize,
    name: String,
    dir: PathBuf,
    config: PathBuf,
    /// The ports its first start bound (127.0.0.1:0), kept for its restarts.
    hook_url: std::sync::OnceLock<String>,
    otlp_url: std::sync::OnceLock<String>,
    kid: Mutex<Option<Kid>>,
    /// CPU seconds and peak RSS of this edge's earlier processes (before a restart).
    past_cpu: Mutex<f64>,
    past_hwm: AtomicU64,
}

/// The shared settings of every edge.
struct EdgeSetup<'a> {
    exe: &'a Path,
    hub_url: &'a str,
    hub_token: &'a str,
    gateway_grpc: u16,
}

impl Edge {
    fn create(root: &Path, idx: usize, name: String, s: &EdgeSetup<'_>) -> anyhow::Result<Edge> {
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir)?;
        let team = tenant(idx);
        let cfg = format!(
            r#"[server]
listen = "127.0.0.1:0"
otlp_grpc = ""
otlp_http = "127.0.0.1:0"
data_dir = "{data}"
host = "{name}"
shutdown_grace_ms = 3000

[relay]
url = "{hub}"
token = "{token}"

[fleet]
team = "{team}"
user = "dev-{name}"

[export]
durable = true

[export.retry]
max_ms = 2000

[export.otlp]
endpoint = "http://127.0.0.1:{gw}"
protocol = "grpc"
logs = true
spans = true
metrics = true
metrics_interval_ms = 5000
compression = "gzip"
headers = {{ "x-scope-orgid" = "{team}" }}
batch_timeout_ms = 500
span_grace_ms = 1000
span_root_idle_secs = 5
span_idle_timeout_secs = 30
"#,
            data = dir.join("data").display(),
            hub = s.hub_url,
            token = edge_relay_token(s.hub_token, idx),
            gw = s.gateway_grpc,
        );
        let config = dir.join("aep-bridge.toml");
        std::fs::write(&config, cfg)?;
        Ok(Edge {
            idx,
            name,
            dir,
            config,
            hook_url: std::sync::OnceLock::new(),
            otlp_url: std::sync::OnceLock::new(),
            kid: Mutex::new(None),
            past_cpu: Mutex::new(0.0),
            past_hwm: AtomicU64::new(0),
        })
    }

    fn start(&self, exe: &Path) -> anyhow::Result<()> {
        let (kid, line) = serve(exe, &self.config, &self.dir.join("serve.log"))?;
        if self.hook_url.get().is_none() {
            // The first start picked its ports; its restarts bind the same (an agent's
            // settings name one port).
            let http = field(&line, "http=").context("no http= in the listening line")?;
            let otlp = field(&line, "otlp-http=").context("no otlp-http= in the listening line")?;
            let text = std::fs::read_to_string(&self.config)?
                .replacen("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""), 1)
                .replacen("otlp_http = \"127.0.0.1:0\"", &format!("otlp_http = \"{otlp}\""), 1);
            std::fs::write(&self.config, text)?;
            let _ = self.hook_url.set(format!("http://{http}"));
            let _ = self.otlp_url.set(format!("http://{otlp}"));
        }
        *self.kid.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(kid);
        Ok(())
    }

    fn hook_url(&self) -> &str {
        self.hook_url.get().map_or("", String::as_str)
    }

    fn otlp_url(&self) -> &str {
        self.otlp_url.get().map_or("", String::as_str)
    }

    fn pid(&self) -> Option<u32> {
        self.kid.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map(Kid::pid)
    }

    /// SIGTERM, wait for the exit, `serve` again on the same data dir and ports.
    fn restart(&self, exe: &Path) -> anyhow::Result<Duration> {
        let t = Instant::now();
        let old = self.kid.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(k) = old {
            *self.past_cpu.lock().unwrap_or_else(std::sync::PoisonError::into_inner) +=
                super::cpu_seconds(Some(k.pid())).unwrap_or(0.0);
            self.past_hwm.fetch_max(proc_status_bytes(Some(k.pid()), "VmHWM").unwrap_or(0), Ordering::Relaxed);
            k.terminate(Duration::from_secs(20));
        }
        self.start(exe)?;
        Ok(t.elapsed())
    }

    fn cpu(&self) -> f64 {
        *self.past_cpu.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
            + self.pid().and_then(|p| super::cpu_seconds(Some(p))).unwrap_or(0.0)
    }

    fn hwm(&self) -> u64 {
        self.past_hwm
            .load(Ordering::Relaxed)
            .max(self.pid().and_then(|p| proc_status_bytes(Some(p), "VmHWM")).unwrap_or(0))
    }

    /// Every event in this edge's session logs (rotated generations too).
    fn logged(&self) -> Vec<aep_schemas::Event> {
        self.logged_at().into_iter().map(|(ev, _)| ev).collect()
    }

    /// Every logged event with where its line ends: the log's path under `data/logs` and
    /// the byte offset past its newline (what an exporter's cursor reaches once its peer
    /// took the event).
    fn logged_at(&self) -> Vec<(aep_schemas::Event, (String, u64))> {
        let mut out = Vec::new();
        let logs = self.dir.join("data/logs");
        let Ok(agents) = std::fs::read_dir(&logs) else { return out };
        for a in agents.flatten() {
            let Ok(files) = std::fs::read_dir(a.path()) else { continue };
            for f in files.flatten() {
                let Ok(text) = std::fs::read_to_string(f.path()) else { continue };
                let Some(rel) = f.path().strip_prefix(&logs).ok().and_then(|r| r.to_str()).map(str::to_owned) else {
                    continue;
                };
                // Only complete lines: a last line without its newline is being written.
                let mut end = 0u64;
                for line in text.split_inclusive('\n').filter(|l| l.ends_with('\n')) {
                    end += line.len() as u64;
                    if let Ok(ev) = serde_json::from_str::<aep_schemas::Event>(line) {
                        out.push((ev, (rel.clone(), end)));
                    }
                }
            }
        }
        out
    }

    /// How far this edge's durable exporter `sink` has had its events taken, per log (the
    /// byte offset of its saved cursor; the generation is not checked: the bench never
    /// rotates).
    fn cursors(&self, sink: &str) -> HashMap<String, u64> {
        let path = self.dir.join("data/state/export").join(format!("{sink}.json"));
        let Ok(text) = std::fs::read_to_string(path) else { return HashMap::new() };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else { return HashMap::new() };
        v["logs"]
            .as_object()
            .map(|logs| logs.iter().filter_map(|(k, c)| Some((k.clone(), c.get(1)?.as_u64()?))).collect())
            .unwrap_or_default()
    }

    /// Bytes in this edge's session logs (to see when it is quiet).
    fn log_bytes(&self) -> u64 {
        let mut n = 0;
        let Ok(agents) = std::fs::read_dir(self.dir.join("data/logs")) else { return 0 };
        for a in agents.flatten() {
            let Ok(files) = std::fs::read_dir(a.path()) else { continue };
            n += files.flatten().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum::<u64>();
        }
        n
    }
}

// ---------------------------------------------------------------- the load

/// What the replays did, over every edge.
#[derive(Default)]
struct Load {
    hooks: AtomicU64,
    otlp: AtomicU64,
    /// Sends retried (the edge restarting or pushing back with 503/429).
    retried: AtomicU64,
    /// Sends the edge refused (any other non-2xx status), with the last status seen.
    refused: AtomicU64,
    last_refusal: Mutex<String>,
    sessions: AtomicU64,
    /// Held hooks through the shim; those whose reply carried the hub's answer.
    held: AtomicU64,
    reached: AtomicU64,
    /// Answer at the hub -> the shim's reply at the edge, milliseconds.
    latencies: Mutex<Vec<f64>>,
}

struct Ctx {
    caps: Vec<Capture>,
    speed: f64,
    shim: PathBuf,
    state_dir: PathBuf,
    answers: Arc<answer::Answers>,
    load: Load,
}

/// POSTs `body` (JSON) to `url`; retries (bounded) while the edge is away or pushes back.
fn post(agent: &ureq::Agent, ctx: &Ctx, url: &str, body: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let r = agent.post(url).header("content-type", "application/json").send(body.as_bytes());
        let status = match r {
            Ok(mut resp) => {
                let _ = resp.body_mut().read_to_vec();
                resp.status().as_u16()
            }
            Err(_) => 0,
        };
        match status {
            200..=299 => return,
            0 | 429 | 503 if Instant::now() < deadline => {
                ctx.load.retried.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(100));
            }
            s => {
                ctx.load.refused.fetch_add(1, Ordering::Relaxed);
                *ctx.load.last_refusal.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    format!("{s} from {url}");
                return;
            }
        }
    }
}

/// A held hook through the real shim, as the agent runs it; waits for its reply (the
/// agent waits too) and times it against the hub's answer.
fn shim(ctx: &Ctx, edge: &Edge, vendor: &str, event: &str, body: &str, sessions: &[String]) {
    use std::io::Write as _;
    ctx.load.held.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let child = Command::new(&ctx.shim)
        .args([vendor, event])
        .env("AEP_BRIDGE_URL", edge.hook_url())
        .env("AEP_HOOK_STATE_DIR", &ctx.state_dir)
        .env("AEP_HOOK_HOLD_TIMEOUT_MS", "60000")
        .env_remove("AEP_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else { return };
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(body.as_bytes());
    }
    let Ok(out) = child.wait_with_output() else { return };
    let done = Instant::now();
    let reply = String::from_utf8_lossy(&out.stdout);
    let answered = {
        let sent = ctx.answers.sent.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.iter().filter_map(|s| sent.get(s)).copied().filter(|t| *t >= started).max()
    };
    // Claude Code's reply to an allowed permission says `allow`, to a filled form `accept`.
    if let Some(at) = answered
        && (reply.contains("allow") || reply.contains("accept"))
    {
        ctx.load.reached.fetch_add(1, Ordering::Relaxed);
        ctx.load
            .latencies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(done.duration_since(at).as_secs_f64() * 1000.0);
    }
}

/// One edge's agent: recorded sessions back to back until `until`, each renamed.
fn replay_edge(ctx: &Ctx, edge: &Edge, until: Instant) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .new_agent();
    let n = ctx.caps.len();
    let mut k = 0usize;
    while Instant::now() < until {
        let ci = (edge.idx + k) % n;
        let cap = &ctx.caps[ci];
        let salt = format!("{}/{k}", edge.name);
        let sessions = cap.sessions_as(&salt);
        let t0 = Instant::now();
        for e in &cap.entries {
            let due = t0 + Duration::from_secs_f64(e.at / ctx.speed);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let body = cap.render(e, &salt);
            match &e.step {
                Step::Hook { event, held: true } => {
                    ctx.load.hooks.fetch_add(1, Ordering::Relaxed);
                    shim(ctx, edge, cap.vendor, event, &body, &sessions);
                }
                Step::Hook { event, held: false } => {
                    ctx.load.hooks.fetch_add(1, Ordering::Relaxed);
                    post(&agent, ctx, &format!("{}/hooks/{}/{event}", edge.hook_url(), cap.vendor), &body);
                }
                Step::Otlp { path } => {
                    ctx.load.otlp.fetch_add(1, Ordering::Relaxed);
                    post(&agent, ctx, &format!("{}{path}", edge.otlp_url()), &body);
                }
            }
        }
        ctx.load.sessions.fetch_add(1, Ordering::Relaxed);
        k += 1;
        // The developer's pause before the next session.
        std::thread::sleep(Duration::from_secs_f64(1.0 / ctx.speed));
    }
}

/// Runs the replays of `edges` for `secs`, in threads; `during` runs on this thread
/// meanwhile (the outage), given the load's start.
fn run_load(ctx: &Arc<Ctx>, edges: &[Arc<Edge>], secs: f64, during: impl FnOnce(Instant)) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let until = t0 + Duration::from_secs_f64(secs);
    let mut threads = Vec::new();
    for e in edges {
        let (ctx, e) = (Arc::clone(ctx), Arc::clone(e));
        threads.push(
            std::thread::Builder::new()
                .name(format!("replay-{}", e.idx))
                .stack_size(256 << 10)
                .spawn(move || replay_edge(&ctx, &e, until))?,
        );
    }
    during(t0);
    for t in threads {
        let _ = t.join();
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Waits until every edge's logs stop growing for 2 s (bounded).
fn quiet(edges: &[Arc<Edge>]) {
    let mut last = (u64::MAX, Instant::now());
    super::wait_until_every(Duration::from_secs(120), Duration::from_millis(500), || {
        let n: u64 = edges.iter().map(|e| e.log_bytes()).sum();
        if n != last.0 {
            last = (n, Instant::now());
        }
        last.1.elapsed() >= Duration::from_secs(2)
    });
}

// ---------------------------------------------------------------- expected vs delivered

/// What the sink must hold: every logged event as a log record, every span the span
/// assembler makes of them.
#[derive(Default)]
struct Expected {
    logs: HashSet<(String, String)>,
    spans: HashSet<Vec<u8>>,
    /// The edge (its index in the list given) and the line's end in its log, of each log record.
    log_at: HashMap<(String, String), (usize, String, u64)>,
    /// The edge (its name) each span came from.
    span_edge: HashMap<Vec<u8>, String>,
}

fn expected(edges: &[Arc<Edge>]) -> Expected {
    let mut out = Expected::default();
    for (i, e) in edges.iter().enumerate() {
        let events = e.logged_at();
        let mut by_session: BTreeMap<(String, String), Vec<aep_schemas::Event>> = BTreeMap::new();
        for (ev, (log, end)) in events {
            let key = (ev.source.to_string(), ev.id.clone());
            out.log_at.insert(key.clone(), (i, log, end));
            out.logs.insert(key);
            by_session.entry((ev.source.to_string(), ev.session.clone().unwrap_or_default())).or_default().push(ev);
        }
        for evs in by_session.values() {
            let cfg = aep_projections::spans::SpanConfig::default();
            for sp in aep_projections::spans::assemble(evs, cfg) {
                out.span_edge.insert(sp.span_id.to_vec(), e.name.clone());
                out.spans.insert(sp.span_id.to_vec());
            }
        }
    }
    out
}

/// Per signal: (expected, delivered of them, lost, duplicate arrivals, arrivals not expected).
fn tally<K: std::hash::Hash + Eq>(want: &HashSet<K>, got: &HashMap<K, u32>) -> (usize, usize, usize, u64, usize) {
    let delivered = want.iter().filter(|k| got.contains_key(*k)).count();
    let dups = got.iter().filter(|(k, _)| want.contains(*k)).map(|(_, n)| u64::from(n.saturating_sub(1))).sum();
    let other = got.keys().filter(|k| !want.contains(*k)).count();
    (want.len(), delivered, want.len() - delivered, dups, other)
}

/// The log records the sink never got, split by where they are: still at their edge (its
/// exporter's cursor short of the line: not yet taken by the gateway, sent when it is), or
/// past its cursor (the gateway acknowledged them and they never reached the sink: lost
/// beyond the edges).
fn missing_logs(edges: &[Arc<Edge>], want: &Expected, got: &HashMap<(String, String), u32>) -> (usize, usize) {
    let mut cursors: HashMap<usize, HashMap<String, u64>> = HashMap::new();
    let (mut at_edge, mut past) = (0, 0);
    for k in want.logs.iter().filter(|k| !got.contains_key(*k)) {
        let Some((i, log, end)) = want.log_at.get(k) else { continue };
        let c = cursors.entry(*i).or_insert_with(|| edges[*i].cursors("otlp_logs"));
        if c.get(log).is_some_and(|off| off >= end) {
            past += 1;
        } else {
            at_edge += 1;
        }
    }
    (at_edge, past)
}

fn delivered_all(sink: &sink::Sink, want: &Expected) -> bool {
    let t = sink.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    want.logs.iter().all(|k| t.logs.contains_key(k)) && want.spans.iter().all(|k| t.spans.contains_key(k))
}

/// Min, median and max.
fn spread(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (percentile(&v, 0.0), percentile(&v, 50.0), percentile(&v, 100.0))
}

fn scrape_sum(agent: &ureq::Agent, url: &str, name: &str) -> u64 {
    super::scrape(agent, url).map(|t| metric_sum(&t, name, &[])).unwrap_or(0)
}

/// The hub's `aep_bridge_events_in_total` once it stops growing (2 s unchanged, bounded).
fn hub_settled(agent: &ureq::Agent, url: &str) -> (u64, Instant) {
    let mut last = (u64::MAX, Instant::now());
    super::wait_until_every(Duration::from_secs(120), Duration::from_millis(250), || {
        let n = scrape_sum(agent, url, "aep_bridge_events_in_total");
        if n != last.0 {
            last = (n, Instant::now());
        }
        last.1.elapsed() >= Duration::from_secs(2)
    });
    last
}

// ---------------------------------------------------------------- the run

/// Runs the bench.
pub fn run(a: &FleetArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.bridges >= 1, "--bridges must be at least 1");
    anyhow::ensure!(a.speed > 0.0, "--speed must be above 0");
    let root = replay::captures_dir(a.captures.as_deref())?;
    let caps = replay::load(&root)?;
    let bridge = super::sibling_binary("aep-bridge")?;
    let shim_bin = super::sibling_binary("aep-hook")?;
    let gw_bin = match a.gateway {
        Gateway::Rotel => match a.rotel.as_str() {
            "auto" => aep_testkit::rotel_agent()
                .context("rotel-agent not found (pip install -r bridge/tests/requirements-otel.txt)")?,
            p => PathBuf::from(p),
        },
        Gateway::Collector => aep_testkit::peers::OTELCOL
            .path()
            .context("the Collector distribution is not built (.ci/peers-go otelcol)")?,
    };
    let scratch = super::Scratch::new("fleet")?;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let sink = sink::Sink::default();
    let sink_addr = sink.start(&rt)?;

    let played: f64 = caps.iter().map(Capture::span).sum::<f64>() / a.speed;
    let held: usize =
        caps.iter().flat_map(|c| &c.entries).filter(|e| matches!(e.step, Step::Hook { held: true, .. })).count();
    println!(
        "bench fleet: bridges={} speed={}x duration={}s outage={}s restart-edge={} gateway={:?} ({})",
        a.bridges,
        a.speed,
        a.duration_secs,
        a.outage_secs,
        a.restart_edge,
        a.gateway,
        gw_bin.display()
    );
    println!(
        "  replaying {} recorded sessions from {} ({:.1} s per pass at {}x, {held} held hooks per pass), each edge from its own offset: {}",
        caps.len(),
        root.display(),
        played,
        a.speed,
        caps.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" ")
    );

    // The gateway, then the hub.
    let gw_dir = scratch.path().join("gateway");
    std::fs::create_dir_all(&gw_dir)?;
    let mut gw = Gw {
        kind: a.gateway,
        bin: gw_bin,
        grpc: port()?,
        http: port()?,
        dir: gw_dir,
        sink: sink_addr,
        kid: None,
        past_hwm: 0,
    };
    gw.start()?;
    let hub_token = format!("{:016x}{:016x}", rand_u64(), rand_u64());
    let hub_dir = scratch.path().join("hub");
    std::fs::create_dir_all(&hub_dir)?;
    let hub_cfg = hub_dir.join("aep-bridge.toml");
    std::fs::write(
        &hub_cfg,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\notlp_grpc = \"\"\notlp_http = \"\"\ndata_dir = \"{}\"\nhost = \"hub\"\ntoken = \"{hub_token}\"\n{}",
            hub_dir.join("data").display(),
            // The baseline edge is number `bridges`, the last entry.
            access_list(&hub_token, a.bridges + 1)
        ),
    )?;
    let (hub, hub_line) = serve(&bridge, &hub_cfg, &hub_dir.join("serve.log"))?;
    let hub_addr = field(&hub_line, "http=").context("no http= in the hub's listening line")?;
    let hub_url = format!("http://{hub_addr}");
    let answers = Arc::new(answer::Answers::default());
    let stop = Arc::new(AtomicBool::new(false));
    let answerer = answer::spawn(&hub_url, &hub_token, Arc::clone(&answers), Arc::clone(&stop))?;
    let state_dir = scratch.path().join("shim-state");
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new().mode(0o700).create(&state_dir)?;
    }
    let setup = EdgeSetup { exe: &bridge, hub_url: &hub_url, hub_token: &hub_token, gateway_grpc: gw.grpc };
    let ctx = Arc::new(Ctx {
        caps,
        speed: a.speed,
        shim: shim_bin,
        state_dir,
        answers: Arc::clone(&answers),
        load: Load::default(),
    });
    let agent = super::agent();

    // The baseline: one edge alone at the same speed.
    let mut base_fig = None;
    let mut all_edges: Vec<Arc<Edge>> = Vec::new();
    if a.baseline_secs > 0.0 {
        let e = Arc::new(Edge::create(scratch.path(), a.bridges, "edge-baseline".into(), &setup)?);
        e.start(setup.exe)?;
        let ctx1 = Arc::new(Ctx {
            caps: ctx.caps.clone(),
            speed: a.speed,
            shim: ctx.shim.clone(),
            state_dir: ctx.state_dir.clone(),
            answers: Arc::clone(&answers),
            load: Load::default(),
        });
        let one = [Arc::clone(&e)];
        let secs = run_load(&ctx1, &one, a.baseline_secs, |_| {})?;
        quiet(&one);
        let want = expected(&one);
        super::wait_until_every(Duration::from_secs_f64(a.drain_secs), Duration::from_millis(500), || {
            delivered_all(&sink, &want)
        });
        let events = want.logs.len();
        base_fig =
            Some((e.hwm(), e.cpu(), events, secs, ctx1.load.latencies.lock().map(|v| v.clone()).unwrap_or_default()));
        all_edges.push(e);
    }

    // The fleet.
    let t_start = Instant::now();
    let mut edges: Vec<Arc<Edge>> = Vec::new();
    for i in 0..a.bridges {
        edges.push(Arc::new(Edge::create(scratch.path(), i, format!("edge-{i:03}"), &setup)?));
    }
    // Start them a few at a time (each start is a process, a config read, its listeners).
    for chunk in edges.chunks(8) {
        std::thread::scope(|s| {
            let hs: Vec<_> = chunk.iter().map(|e| s.spawn(|| e.start(setup.exe))).collect();
            hs.into_iter().try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("start panicked"))?)
        })?;
    }
    let started = t_start.elapsed().as_secs_f64();
    let hub_in0 = scrape_sum(&agent, &hub_url, "aep_bridge_events_in_total");
    // The baseline's requests were answered already: count the fleet's.
    let (asked0, answered0) = (answers.requests.load(Ordering::Relaxed), answers.answered.load(Ordering::Relaxed));
    let mut events_log: Vec<String> = Vec::new();
    let outage = a.outage_secs;
    let restart_target = Arc::clone(&edges[a.bridges / 2]);
    let load_secs = run_load(&ctx, &edges, a.duration_secs, |t0| {
        if outage <= 0.0 {
            return;
        }
        let begin = ((a.duration_secs - outage) / 2.0).max(1.0);
        sleep_until(t0 + Duration::from_secs_f64(begin));
        gw.stop();
        events_log.push(format!("gateway stopped at {:.1} s", t0.elapsed().as_secs_f64()));
        if a.restart_edge {
            sleep_until(t0 + Duration::from_secs_f64(begin + outage / 3.0));
            match restart_target.restart(setup.exe) {
                Ok(took) => events_log.push(format!(
                    "{} restarted at {:.1} s (SIGTERM to listening again: {:.2} s)",
                    restart_target.name,
                    t0.elapsed().as_secs_f64(),
                    took.as_secs_f64()
                )),
                Err(e) => events_log.push(format!("{} did not restart: {e:#}", restart_target.name)),
            }
        }
        sleep_until(t0 + Duration::from_secs_f64(begin + outage));
        match gw.start() {
            Ok(()) => events_log.push(format!("gateway started again at {:.1} s", t0.elapsed().as_secs_f64())),
            Err(e) => events_log.push(format!("gateway did not start again: {e:#}")),
        }
    })?;
    quiet(&edges);
    let (hub_in1, hub_quiet) = hub_settled(&agent, &hub_url);
    let hub_secs = hub_quiet.duration_since(t_start).as_secs_f64() - started - 2.0;
    all_edges.extend(edges.iter().cloned());
    let want = expected(&all_edges);
    let t_drain = Instant::now();
    let drained = super::wait_until_every(Duration::from_secs_f64(a.drain_secs), Duration::from_millis(500), || {
        delivered_all(&sink, &want)
    });
    let drain_secs = t_drain.elapsed().as_secs_f64();
    // Anything logged since (late hooks) joins the expectation.
    let want = expected(&all_edges);
    // The edges' own account of their exporters (the restarted edge's since its restart).
    let mut own = [0u64; 4];
    let mut scraped = 0;
    for e in &edges {
        let Ok(text) = super::scrape(&agent, e.hook_url()) else { continue };
        scraped += 1;
        own[0] += super::metric_sum(&text, "aep_bridge_dropped_total", &["sink=\"otlp_logs\""]);
        own[1] += super::metric_sum(&text, "aep_bridge_dropped_total", &["sink=\"otlp_spans\""]);
        own[2] += super::metric_sum(&text, "aep_bridge_export_lost_total", &[]);
        own[3] += super::metric_sum(&text, "aep_bridge_export_stalled_total", &[]);
    }
    let hub_hwm = proc_status_bytes(Some(hub.pid()), "VmHWM").unwrap_or(0);
    let gw_hwm = gw.hwm();
    let figs: Vec<(u64, f64, usize)> = edges.iter().map(|e| (e.hwm(), e.cpu(), e.logged().len())).collect();
    stop.store(true, Ordering::Relaxed);
    let _ = answerer.join();

    // ---------------------------------------------------------------- the report
    let t = sink.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let (li, ld, ll, lu, lo) = tally(&want.logs, &t.logs);
    let (si, sd, sl, su, so) = tally(&want.spans, &t.spans);
    println!(
        "  load: {:.1} s; {} sessions, {} hooks and {} OTLP exports sent; {} sends retried (edge away or 503), {} refused{}",
        load_secs,
        ctx.load.sessions.load(Ordering::Relaxed),
        ctx.load.hooks.load(Ordering::Relaxed),
        ctx.load.otlp.load(Ordering::Relaxed),
        ctx.load.retried.load(Ordering::Relaxed),
        ctx.load.refused.load(Ordering::Relaxed),
        match ctx.load.refused.load(Ordering::Relaxed) {
            0 => String::new(),
            _ => format!(" (last: {})", ctx.load.last_refusal.lock().map(|s| s.clone()).unwrap_or_default()),
        }
    );
    for l in &events_log {
        println!("  {l}");
    }
    println!(
        "  drain: {} after {:.1} s ({} requests at the sink, {} without the tenant header)",
        if drained { "the sink held everything" } else { "gave up" },
        drain_secs,
        t.requests,
        t.untenanted
    );
    println!(
        "  edges' own counters ({scraped} of {} edges scraped): dropped otlp_logs {}, otlp_spans {}; export lost {}; \
         exporter stalls (peer away past the retry budget, held and retried) {}",
        edges.len(),
        own[0],
        own[1],
        own[2],
        own[3]
    );
    let row = |label: &str, (i, d, l, u, o): (usize, usize, usize, u64, usize), note: &str| {
        line(label, &format!("{d}/{i}"), &format!("lost {l}, duplicates {u}, not expected {o}{note}"));
    };
    let (at_edge, past_edge) = missing_logs(&all_edges, &want, &t.logs);
    row(
        "logs: delivered/in (by aep.event_id)",
        (li, ld, ll, lu, lo),
        &if ll > 0 {
            format!(
                " ({at_edge} still at their edge, not yet taken by the gateway; {past_edge} taken by the gateway \
                 and never delivered)"
            )
        } else {
            String::new()
        },
    );
    row(
        "spans: delivered/in (by span id)",
        (si, sd, sl, su, so),
        " (not expected: the agents' own spans passed through)",
    );
    line(
        "metrics: points delivered",
        &format!("{}", t.metric_points),
        &format!(
            "from {} of {} edges (periodic state, resent as a whole each interval: not counted as lost)",
            t.metric_hosts.iter().filter(|h| h.starts_with("edge-")).count(),
            all_edges.len()
        ),
    );
    if lu + su > 0 {
        // Where the resends came from: the restarted edge, or the others (the outage).
        let restarted = if a.restart_edge { Some(format!("aep://{}/", restart_target.name)) } else { None };
        let on_restarted_logs: u64 = t
            .logs
            .iter()
            .filter(|((src, _), n)| **n > 1 && restarted.as_deref().is_some_and(|r| src.starts_with(r)))
            .map(|(_, n)| u64::from(n - 1))
            .sum();
        let on_restarted_spans: u64 = t
            .spans
            .iter()
            .filter(|(id, n)| {
                **n > 1 && a.restart_edge && want.span_edge.get(*id).is_some_and(|e| *e == restart_target.name)
            })
            .map(|(_, n)| u64::from(n - 1))
            .sum();
        println!(
            "  duplicates: the same (source, event id) or span id again, so a backend keeps one: {on_restarted_logs} log \
             records and {on_restarted_spans} spans from the restarted edge (its export cursors are saved at most once a \
             second: what it sent after the last save goes again), {} log records and {} spans from the others (a \
             batch in flight when the gateway stopped is sent again)",
            lu - on_restarted_logs,
            su - on_restarted_spans
        );
    }
    println!(
        "  fleet result: logs_lost={ll} (at edges {at_edge}, past them {past_edge}) spans_lost={sl} held={} \
         answered_at_hub={} reached_shim={}",
        ctx.load.held.load(Ordering::Relaxed),
        answers.answered.load(Ordering::Relaxed) - answered0,
        ctx.load.reached.load(Ordering::Relaxed)
    );
    drop(t);

    let (rmin, rmed, rmax) = spread(figs.iter().map(|f| f.0 as f64).collect());
    let (cmin, cmed, cmax) = spread(figs.iter().map(|f| f.1).collect());
    let per_event: Vec<f64> = figs.iter().map(|f| f.1 * 1000.0 / (f.2.max(1) as f64)).collect();
    let (_, pmed, _) = spread(per_event);
    line(
        "edge peak RSS (VmHWM) min/median/max",
        &mib(rmed as u64),
        &format!("{} .. {}", mib(rmin as u64), mib(rmax as u64)),
    );
    line(
        "edge CPU seconds min/median/max",
        &format!("{cmed:.2} s"),
        &format!("{cmin:.2} .. {cmax:.2} s; median {pmed:.3} CPU-ms per logged event"),
    );
    if let Some((bhwm, bcpu, bevents, bsecs, _)) = &base_fig {
        let bper = bcpu * 1000.0 / (*bevents).max(1) as f64;
        line(
            "baseline: one edge alone, same speed",
            &mib(*bhwm),
            &format!("{bcpu:.2} CPU-s for {bevents} events in {bsecs:.0} s: {bper:.3} CPU-ms per event"),
        );
        line(
            "fleet edge / baseline",
            &format!("{:.2}x RSS", rmed / (*bhwm).max(1) as f64),
            &format!("{:.2}x CPU per event (median edge)", pmed / bper.max(1e-9)),
        );
    }
    let hub_events = hub_in1.saturating_sub(hub_in0);
    line(
        "hub ingest (relayed events)",
        &format!("{:.0} ev/s", hub_events as f64 / hub_secs.max(1e-3)),
        &format!("{hub_events} events over {hub_secs:.1} s (load start to the hub quiet); peak RSS {}", mib(hub_hwm)),
    );
    let mut lat = ctx.load.latencies.lock().map(|v| v.clone()).unwrap_or_default();
    lat.sort_by(f64::total_cmp);
    line(
        "answer at hub -> shim reply",
        &format!("p50 {:.1} ms", percentile(&lat, 50.0)),
        &format!(
            "p99 {:.1} ms, max {:.1} ms; {} held hooks, {} requests seen at the hub, {} answered ({} without options or fields), {} replies carried the answer",
            percentile(&lat, 99.0),
            percentile(&lat, 100.0),
            ctx.load.held.load(Ordering::Relaxed),
            answers.requests.load(Ordering::Relaxed) - asked0,
            answers.answered.load(Ordering::Relaxed) - answered0,
            answers.unanswerable.load(Ordering::Relaxed),
            ctx.load.reached.load(Ordering::Relaxed)
        ),
    );
    if let Some((_, _, _, _, blat)) = &base_fig {
        let mut b = blat.clone();
        b.sort_by(f64::total_cmp);
        if !b.is_empty() {
            line(
                "baseline: answer -> reply, one edge",
                &format!("p50 {:.1} ms", percentile(&b, 50.0)),
                &format!("ratio fleet/baseline p50 {:.2}x", percentile(&lat, 50.0) / percentile(&b, 50.0).max(1e-9)),
            );
        }
    }
    line("gateway peak RSS", &mib(gw_hwm), &format!("{:?}", a.gateway));
    line("edges started", &format!("{:.1} s", started), &format!("{} processes", a.bridges));
    // Stop everything (SIGTERM: the edges save their cursors).
    drop(hub);
    gw.stop();
    rt.shutdown_timeout(Duration::from_secs(2));
    Ok(())
}

fn sleep_until(t: Instant) {
    if let Some(d) = t.checked_duration_since(Instant::now()) {
        std::thread::sleep(d);
    }
}

/// 64 random bits from the kernel (a token for this run's hub).
fn rand_u64() -> u64 {
    let mut b = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read as _;
        let _ = f.read_exact(&mut b);
    }
    u64::from_le_bytes(b) ^ u64::from(std::process::id()) ^ aep_bridge::time::now_nanos()
}
