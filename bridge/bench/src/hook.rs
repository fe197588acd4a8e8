//! `aep-bench hook`: the real `aep-hook` shim, spawned N times with a recorded
//! Claude Code `PreToolUse` payload against a bridge running as its own process (as it
//! does beside an agent; `--in-process` serves it inside the bench instead). Interleaved
//! with the same number of `/bin/true` spawns (the floor any command hook pays), of shim
//! spawns against a closed port (the shim's own start, read and exit, no exchange) and of
//! direct keep-alive POSTs (the bridge's own share), so the four series see the same noise
//! and their differences break the hook's time down by phase.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;

use super::{InProcess, bench_config, line, metric_sum, percentile, scrape, verdict};

/// Arguments of `aep-bench hook`.
#[derive(Debug, Clone, Args)]
pub struct HookArgs {
    /// Shim invocations measured.
    #[arg(long, default_value_t = 300)]
    pub n: usize,
    /// Unmeasured invocations first.
    #[arg(long, default_value_t = 10)]
    pub warmup: usize,
    /// The shim (default: `aep-hook` next to this executable).
    #[arg(long)]
    pub hook: Option<PathBuf>,
    /// The trivial process of the baseline.
    #[arg(long, default_value = "/bin/true")]
    pub trivial: PathBuf,
    /// Serve the bridge inside the bench process (it then shares the bench's CPU and runtime).
    #[arg(long)]
    pub in_process: bool,
}

/// A recorded Claude Code `PreToolUse` stdin payload (captures/claude-code/i01_interactive_permission).
const PRE_TOOL_USE: &str = r#"{
  "session_id": "0d6cf5b8-1c92-46ad-b85f-ff0843039b04",
  "transcript_path": "/home/dev/agents/work/cc/home/.claude/projects/-home-dev-agents-work-cc-project/0d6cf5b8-1c92-46ad-b85f-ff0843039b04.jsonl",
  "cwd": "/home/dev/agents/work/cc/project",
  "prompt_id": "22b2c132-70cc-4b31-88c6-aa3c172ccf2f",
  "permission_mode": "default",
  "effort": {
    "level": "high"
  },
  "hook_event_name": "PreToolUse",
  "tool_name": "Bash",
  "tool_input": {
    "command": "python3 -c 'print(6*7)'",
    "description": "Compute with python"
  },
  "tool_use_id": "toolu_b68488c0ed6047bba47e6cb4"
}
"#;

fn payload(i: usize) -> String {
    PRE_TOOL_USE.replace("toolu_b68488c0ed6047bba47e6cb4", &format!("toolu_bench{i:019}"))
}

/// Where the benched shims keep their cool-down state: a private directory of this run (a
/// shim that timed out must not leave the user's runtime directory a state file).
fn state_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        use std::os::unix::fs::DirBuilderExt as _;
        let d = std::env::temp_dir().join(format!("aep-bench-hook-state-{}", std::process::id()));
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&d);
        d
    })
    .clone()
}

/// Spawns `cmd`, writes `stdin`, reads stdout to the end, waits; returns the elapsed time.
pub(super) fn spawn_once(cmd: &Path, args: &[&str], url: &str, stdin: &[u8]) -> anyhow::Result<(Duration, Vec<u8>)> {
    let t = Instant::now();
    let mut child = Command::new(cmd)
        .args(args)
        .env("AEP_BRIDGE_URL", url)
        .env("AEP_HOOK_STATE_DIR", state_dir())
        .env_remove("AEP_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {}", cmd.display()))?;
    if let Some(mut i) = child.stdin.take() {
        // A trivial process never reads: a broken pipe is expected there.
        let _ = i.write_all(stdin);
    }
    let out = child.wait_with_output()?;
    Ok((t.elapsed(), out.stdout))
}

fn ms(sorted: &[f64], q: f64) -> String {
    format!("{:.3} ms", percentile(sorted, q))
}

/// Runs the bench.
pub fn run(a: &HookArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.n > 0, "--n must be at least 1");
    let hook = match &a.hook {
        Some(h) => h.clone(),
        None => super::sibling_binary("aep-hook")?,
    };
    anyhow::ensure!(hook.is_file(), "no shim at {}", hook.display());
    let scratch = super::Scratch::new("hook")?;
    let (result, text) = if a.in_process {
        let bridge = InProcess::start(bench_config(scratch.path()), 2)?;
        let url = bridge.url();
        let result = measure(a, &hook, &url);
        let agent = super::agent();
        let text = scrape(&agent, &url).unwrap_or_default();
        // Idle keep-alive connections would hold up the bridge's graceful shutdown.
        drop(agent);
        bridge.shutdown();
        (result, text)
    } else {
        let (child, url) = super::otlp::start_bridge(scratch.path())?;
        let result = measure(a, &hook, &url);
        let text = scrape(&super::agent(), &url).unwrap_or_default();
        drop(child);
        (result, text)
    };
    let Series { hooks, trivial, refused, direct, replies } = result?;
    let admitted = metric_sum(&text, "aep_bridge_events_in_total", &["input=\"hook\""]);
    let rejected = metric_sum(&text, "aep_bridge_requests_rejected_total", &["receiver=\"hooks\""]);

    println!(
        "bench hook: n={} (+{} warmup) shim={} payload=claude-code PreToolUse ({} bytes)",
        a.n,
        a.warmup,
        hook.display(),
        PRE_TOOL_USE.len()
    );
    let row = |label: &str, v: &[f64], note: &str| {
        line(label, &format!("p50 {}", ms(v, 50.0)), &format!("p99 {}  max {}  {note}", ms(v, 99.0), ms(v, 100.0)));
    };
    row("aep-hook end to end", &hooks, "");
    row(&format!("baseline: spawn {}", a.trivial.display()), &trivial, "");
    row("baseline: direct POST (keep-alive)", &direct, "no process");
    let (p50, p99) = (percentile(&hooks, 50.0), percentile(&hooks, 99.0));
    let (t50, t99) = (percentile(&trivial, 50.0), percentile(&trivial, 99.0));
    line("shim over trivial spawn", &format!("p50 +{:.3} ms", p50 - t50), &format!("p99 +{:.3} ms", p99 - t99));
    line(
        "ratio shim / trivial spawn",
        &format!("p50 {:.2}x", p50 / t50.max(1e-9)),
        &format!("p99 {:.2}x", p99 / t99.max(1e-9)),
    );
    // Where a hook's time goes, from the medians of the interleaved series.
    let r50 = percentile(&refused, 50.0);
    let d50 = percentile(&direct, 50.0);
    line("phase: process spawn", &format!("p50 {t50:.3} ms"), "the floor: /bin/true");
    line(
        "phase: shim start, stdin, exit",
        &format!("p50 +{:.3} ms", r50 - t50),
        "shim against a closed port, over the floor",
    );
    line(
        "phase: exchange with the bridge",
        &format!("p50 +{:.3} ms", p50 - r50),
        &format!("connect, request, logged, reply; the bridge's share alone (keep-alive POST) p50 {d50:.3} ms"),
    );
    line("budget p50 < 2 ms", verdict(p50 < 2.0), "end to end, spawn included");
    line("budget p99 < 5 ms", verdict(p99 < 5.0), "end to end, spawn included");
    line(
        "bridge admitted",
        &format!("{admitted} events"),
        &format!(
            "from {} shim calls + {} direct POSTs; {rejected} refused; {replies} non-empty replies",
            a.n + a.warmup,
            a.n
        ),
    );
    anyhow::ensure!(admitted > 0, "the shim never reached the bridge (it failed open every time)");
    Ok(())
}

/// The interleaved series, in milliseconds, sorted.
struct Series {
    /// The shim end to end against the bridge.
    hooks: Vec<f64>,
    /// The trivial process.
    trivial: Vec<f64>,
    /// The shim against a closed port (it answers neutrally at once).
    refused: Vec<f64>,
    /// Keep-alive POSTs of the same payload, no process.
    direct: Vec<f64>,
    /// Shim calls that printed a reply.
    replies: usize,
}

fn measure(a: &HookArgs, hook: &Path, url: &str) -> anyhow::Result<Series> {
    let agent = super::agent();
    let post = |body: &str| -> anyhow::Result<Duration> {
        let t = Instant::now();
        let mut resp = agent
            .post(&format!("{url}/hooks/claude-code"))
            .header("content-type", "application/json")
            .send(body.as_bytes())?;
        let _ = resp.body_mut().read_to_vec()?;
        anyhow::ensure!(resp.status().as_u16() == 200, "direct POST answered {}", resp.status());
        Ok(t.elapsed())
    };
    // A port nothing listens on: bound, then released.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}", l.local_addr()?)
    };
    for i in 0..a.warmup {
        spawn_once(hook, &["claude-code"], url, payload(i).as_bytes())?;
        spawn_once(&a.trivial, &[], url, b"")?;
        spawn_once(hook, &["claude-code"], &closed, payload(i).as_bytes())?;
    }
    let (mut hooks, mut trivial, mut refused, mut direct) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut replies = 0;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for i in 0..a.n {
        let body = payload(a.warmup + i);
        let (d, out) = spawn_once(hook, &["claude-code"], url, body.as_bytes())?;
        hooks.push(ms(d));
        replies += usize::from(!out.is_empty());
        trivial.push(ms(spawn_once(&a.trivial, &[], url, body.as_bytes())?.0));
        refused.push(ms(spawn_once(hook, &["claude-code"], &closed, body.as_bytes())?.0));
        direct.push(ms(post(&payload(a.warmup + a.n + i))?));
    }
    for v in [&mut hooks, &mut trivial, &mut refused, &mut direct] {
        v.sort_by(f64::total_cmp);
    }
    Ok(Series { hooks, trivial, refused, direct, replies })
}
