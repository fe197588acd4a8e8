//! `aep-bench pipeline`: drafts through a real [`Pipeline`] with the JSONL sink on.
//!
//! Order: idle RSS, a sustained phase at `--rate`, a max-rate phase of `--events`, peak
//! RSS, then the baselines (the same pipeline without sinks; a raw `write` of the very
//! lines the sink wrote). The producer paces itself on the sink queue's free capacity so
//! nothing is dropped: the figure is what the JSONL sink absorbs, not what it sheds.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aep_adapters::EventDraft;
use aep_schemas::Capture;
use anyhow::Context as _;
use clap::Args;
use serde_json::json;
use tokio::sync::mpsc;

use super::{cpu_seconds, line, mib, proc_status_bytes, rate, verdict};
use aep_bridge::config::JsonlConfig;
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::{LineBatch, Pipeline, PipelineBuilder, SinkTx};

/// Arguments of `aep-bench pipeline`.
#[derive(Debug, Clone, Args)]
pub struct PipelineArgs {
    /// Events pushed at the maximum rate.
    #[arg(long, default_value_t = 200_000)]
    pub events: u64,
    /// Rate of the sustained phase, events/s.
    #[arg(long, default_value_t = 10_000)]
    pub rate: u64,
    /// Length of the sustained phase, seconds (0 skips it).
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// Sessions the events are spread over.
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
    /// Drafts per submit call (a hook call maps to one to three).
    #[arg(long, default_value_t = 2)]
    pub batch: usize,
}

const AGENT: &str = "claude-code";

/// Draft `k`: even = `tool.requested`, odd = its `tool.completed` (linked by correlation key).
fn draft(k: u64, sessions: &[String]) -> EventDraft {
    let call = k / 2;
    let requested = k.is_multiple_of(2);
    let session = &sessions[(call % sessions.len() as u64) as usize];
    let mut d = EventDraft::new(if requested { "tool.requested" } else { "tool.completed" }, Capture::Metadata);
    d.session = Some(session.clone());
    d.run = Some(format!("run-{:04}", call / 16));
    d.subject = Some("Bash".into());
    let call_id = format!("toolu_{call:016x}");
    let key = format!("tool:{call_id}");
    d.data.insert("tool".into(), json!({ "name": "Bash", "call_id": call_id }));
    if requested {
        d.correlation_key = Some(key);
    } else {
        d.cause_key = Some(key);
        d.data.insert("status".into(), json!("success"));
        d.data.insert("duration_ms".into(), json!(40 + call % 100));
    }
    d
}

struct Rig {
    pipeline: Pipeline,
    probe: Option<mpsc::Sender<LineBatch>>,
    jsonl: Option<std::thread::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

fn rig(root: Option<&Path>) -> Rig {
    let metrics = Arc::new(Metrics::default());
    let mut b = PipelineBuilder::new(1, "bench-host", metrics.clone());
    let (mut probe, mut jsonl) = (None, None);
    if let Some(root) = root {
        let cap = aep_bridge::config::PipelineConfig::default().queue_capacity;
        let (tx, rx) = mpsc::channel(cap);
        jsonl = Some(aep_bridge::sinks::jsonl::spawn(
            rx,
            root.to_owned(),
            JsonlConfig::default(),
            metrics.clone(),
            None,
            None,
            None,
        ));
        probe = Some(tx.clone());
        b = b.sink(SinkTx::durable_lines("jsonl", tx));
    }
    Rig { pipeline: b.build(), probe, jsonl, metrics }
}

impl Rig {
    /// Submits drafts `from..from+n` in calls of `batch`, waiting for queue room first.
    async fn push(&self, from: u64, n: u64, batch: usize, sessions: &[String]) -> anyhow::Result<()> {
        let end = from + n;
        let mut k = from;
        while k < end {
            let m = (batch as u64).min(end - k);
            if let Some(p) = &self.probe {
                while (p.capacity() as u64) < m {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            let drafts = (k..k + m).map(|i| draft(i, sessions)).collect();
            self.pipeline.submit_drafts("hook", AGENT, drafts).await?;
            k += m;
        }
        Ok(())
    }

    fn written(&self) -> u64 {
        self.metrics.events_out.get(&[("sink", "jsonl")])
    }

    fn dropped(&self) -> u64 {
        ["debug", "info", "notice", "warning", "error", "critical"]
            .iter()
            .map(|s| self.metrics.dropped.get(&[("sink", "jsonl"), ("severity", s)]))
            .sum()
    }

    fn finish(mut self) {
        self.pipeline.close();
        drop(self.probe.take());
        drop(self.pipeline);
        if let Some(t) = self.jsonl.take() {
            let _ = t.join();
        }
    }
}

fn jsonl_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                jsonl_files(&p, out);
            } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.contains(".jsonl")) {
                out.push(p);
            }
        }
    }
}

/// Rewrites every line the sink wrote into one file, 4096 lines per `write`, timing only the
/// writes. Returns (lines, seconds).
fn raw_write_baseline(root: &Path, into: &Path) -> anyhow::Result<(u64, f64)> {
    let mut files = Vec::new();
    jsonl_files(&root.join("logs"), &mut files);
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(into)?;
    let (mut lines, mut secs) = (0u64, 0.0f64);
    for f in files {
        let data = std::fs::read(&f)?;
        let mut start = 0;
        let mut count = 0;
        for (i, b) in data.iter().enumerate() {
            if *b == b'\n' {
                count += 1;
                if count == 4096 {
                    let t = Instant::now();
                    out.write_all(&data[start..=i])?;
                    secs += t.elapsed().as_secs_f64();
                    lines += count;
                    start = i + 1;
                    count = 0;
                }
            }
        }
        if start < data.len() {
            let t = Instant::now();
            out.write_all(&data[start..])?;
            secs += t.elapsed().as_secs_f64();
            lines += count;
        }
    }
    Ok((lines, secs))
}

fn count_lines(root: &Path) -> u64 {
    let mut files = Vec::new();
    jsonl_files(&root.join("logs"), &mut files);
    files.iter().filter_map(|f| std::fs::read(f).ok()).map(|d| d.iter().filter(|b| **b == b'\n').count() as u64).sum()
}

/// Runs the bench.
pub fn run(a: &PipelineArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.sessions > 0 && a.batch > 0, "--sessions and --batch must be at least 1");
    let scratch = super::Scratch::new("pipeline")?;
    let root = scratch.path().join("data");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let sessions: Vec<String> = (0..a.sessions).map(|i| format!("5e55{i:04x}-1c92-46ad-b85f-ff0843039b04")).collect();
    println!(
        "bench pipeline: events={} sessions={} batch={} sustained={} ev/s for {} s (JSONL sink, fsync=interval, {})",
        a.events,
        a.sessions,
        a.batch,
        a.rate,
        a.secs,
        scratch.path().display()
    );

    // Idle: the runtime, a pipeline and its JSONL thread, before any load.
    let r = rig(Some(&root));
    let idle = proc_status_bytes(None, "VmRSS").unwrap_or(0);
    line("idle RSS (VmRSS)", &mib(idle), &format!("budget < 20 MiB: {}", verdict(idle < 20 << 20)));

    // Sustained phase.
    let mut expected = 0u64;
    if a.secs > 0.0 && a.rate > 0 {
        let total = (a.rate as f64 * a.secs) as u64;
        let (achieved, max_rss, end_rss) = rt.block_on(async {
            let start = Instant::now();
            let (mut sent, mut max_rss) = (0u64, 0u64);
            let mut next_sample = start;
            while sent < total {
                let due = ((start.elapsed().as_secs_f64() * a.rate as f64) as u64).min(total);
                if due > sent {
                    r.push(sent, due - sent, a.batch, &sessions).await?;
                    sent = due;
                }
                if Instant::now() >= next_sample {
                    max_rss = max_rss.max(proc_status_bytes(None, "VmRSS").unwrap_or(0));
                    next_sample += Duration::from_millis(100);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let achieved = total as f64 / start.elapsed().as_secs_f64();
            Ok::<_, anyhow::Error>((achieved, max_rss, proc_status_bytes(None, "VmRSS").unwrap_or(0)))
        })?;
        expected += total;
        line("sustained rate achieved", &rate(achieved, "ev/s"), &format!("target {} ev/s", a.rate));
        line(
            "RSS while sustaining (max sampled)",
            &mib(max_rss),
            &format!("budget < 100 MiB: {} (at end {})", verdict(max_rss < 100 << 20), mib(end_rss)),
        );
    }
    let ok = super::wait_until(Duration::from_secs(60), || r.written() + r.dropped() >= expected);
    anyhow::ensure!(ok, "the JSONL sink did not catch up with the sustained phase");

    // Max-rate phase.
    let cpu0 = cpu_seconds(None).unwrap_or(0.0);
    let t0 = Instant::now();
    let from = expected;
    rt.block_on(r.push(from, a.events, a.batch, &sessions))?;
    let submitted = t0.elapsed().as_secs_f64();
    expected += a.events;
    let ok = super::wait_until_every(Duration::from_secs(120), Duration::from_millis(1), || {
        r.written() + r.dropped() >= expected
    });
    anyhow::ensure!(ok, "the JSONL sink did not catch up with the max-rate phase");
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_seconds(None).unwrap_or(0.0) - cpu0;
    let max_rate = a.events as f64 / secs;
    let dropped = r.dropped();
    line(
        "max rate: drafts -> pipeline -> JSONL",
        &rate(max_rate, "ev/s"),
        &format!(
            "budget >= 100k ev/s: {} (submit done at {:.0}% of the time)",
            verdict(max_rate >= 100_000.0),
            100.0 * submitted / secs
        ),
    );
    if cpu > 0.0 {
        let per_cpu = a.events as f64 / cpu;
        line(
            "  per CPU-second (producer + sink)",
            &rate(per_cpu, "ev/CPU-s"),
            &format!("budget >= 100k on one core: {} ({cpu:.2} CPU-s)", verdict(per_cpu >= 100_000.0)),
        );
    }
    let hwm = proc_status_bytes(None, "VmHWM").unwrap_or(0);
    line("peak RSS (VmHWM)", &mib(hwm), "");
    r.finish();
    let on_disk = count_lines(&root);
    line("JSONL lines on disk", &on_disk.to_string(), &format!("expected {expected}, dropped {dropped}"));
    anyhow::ensure!(on_disk + dropped == expected, "lines on disk {on_disk} + dropped {dropped} != {expected}");

    // Baseline 1: the same pipeline without sinks (stamping + serialization only).
    let bare = rig(None);
    let t = Instant::now();
    rt.block_on(bare.push(0, a.events, a.batch, &sessions))?;
    let bare_rate = a.events as f64 / t.elapsed().as_secs_f64();
    bare.finish();
    line(
        "baseline: pipeline without sinks",
        &rate(bare_rate, "ev/s"),
        &format!("JSONL run at {:.2}x of it", max_rate / bare_rate),
    );

    // Baseline 2: raw writes of the same bytes.
    let (lines, wsecs) = raw_write_baseline(&root, &scratch.path().join("raw.jsonl")).context("raw write baseline")?;
    let raw_rate = lines as f64 / wsecs.max(1e-9);
    line(
        "baseline: raw write() of same lines",
        &rate(raw_rate, "ev/s"),
        &format!("4096 lines/write, no fsync; JSONL run at {:.3}x of it", max_rate / raw_rate),
    );
    Ok(())
}
