//! `aep-bench kinds`: what one record of each kind in a mix costs the bridge, counted in
//! instructions, so a change of a few percent shows on a machine whose speed drifts more
//! than that from run to run.
//!
//! For one kind (`--kind`, the event name or body text [`Source::kinds`] gives it), the
//! records of that kind are sent through the daemon's own HTTP app (`Daemon::build`, the
//! composition root `serve` uses) without a socket: receiver (direct protobuf reader),
//! vendor profile, stamping, the embedded collector, the JSONL sink, the GenAI metrics
//! sink, as in `serve` with its default config. The request bodies are built before the
//! first one is sent (a ring of a few, sent in turn), and a warm-up fills every session's
//! replay buffer first, so the records counted are the steady state.
//!
//! With `--callgrind` each kind of each mix runs twice under `valgrind --tool=callgrind`,
//! with `--records` and with twice as many measured records; the difference of the two
//! instruction totals over the difference of records sent is the figure (start-up, the
//! warm-up and the bodies' construction cancel out). The whole mix, its kinds interleaved
//! as `bench otlp` sends them, is measured too, and broken into the bridge's stages
//! (receive, map, stamp and serialize, the sinks) by their inclusive costs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use aep_schemas::Capture;
use anyhow::Context as _;
use bytes::Bytes;
use clap::Args;
use prost::Message as _;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::mix::{Mix, Source};

/// Arguments of `aep-bench kinds`.
#[derive(Debug, Clone, Args)]
pub struct KindsArgs {
    /// The record mixes whose kinds are measured (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "codex")]
    pub mix: Vec<Mix>,
    /// Send only the records of this kind through an in-process bridge and print what was
    /// sent (what `--callgrind` runs under valgrind); `*` sends the whole mix, its kinds
    /// interleaved as `bench otlp` sends them; needs exactly one `--mix`.
    #[arg(long)]
    pub kind: Option<String>,
    /// Measured records per kind (the figure is the difference between a run of this many
    /// and one of twice as many).
    #[arg(long, default_value_t = 1000)]
    pub records: usize,
    /// Log records per export request (as `aep-bench otlp --records`).
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Conversations the records are spread over (each one's replay buffer is filled by the
    /// warm-up).
    #[arg(long, default_value_t = 2)]
    pub sessions: usize,
    /// The capture ceiling (`[capture] max`): `none`, `metadata`, `redacted` or `full`.
    #[arg(long, default_value = "metadata")]
    pub capture: Capture,
    /// Run every kind under callgrind and print instructions per record.
    #[arg(long)]
    pub callgrind: bool,
    /// The valgrind binary.
    #[arg(long, default_value = "valgrind")]
    pub valgrind: PathBuf,
    /// Keep the callgrind output files in this directory (for `callgrind_annotate`).
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

/// Distinct request bodies a run sends in turn (built before the first is sent).
const RING: usize = 4;

/// A fixed clock for the bodies (Unix nanoseconds): runs compare instruction counts, and
/// the time's text has the same length on every run.
const NOW: u64 = 1_796_011_461_000_000_000;

/// What one in-process run printed: records sent, events the JSONL sink wrote.
const SENT: &str = "kinds: sent=";

/// Runs the bench.
pub fn run(a: &KindsArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.records > 0 && a.batch > 0 && a.sessions > 0,
        "--records, --batch and --sessions must be at least 1"
    );
    if let Some(kind) = &a.kind {
        let [mix] = a.mix[..] else { anyhow::bail!("--kind needs exactly one --mix") };
        return run_kind(a, mix, kind);
    }
    for (i, mix) in a.mix.iter().enumerate() {
        if i > 0 {
            println!();
        }
        table(a, *mix)?;
    }
    Ok(())
}

/// Protobuf bytes per record of `src`'s first request.
fn bytes_per_record(src: &Source, a: &KindsArgs) -> usize {
    src.request(0, a.batch, a.sessions, NOW).encode_to_vec().len() / a.batch
}

/// The table of one mix: each kind's share of the templates, its bytes per record and,
/// with `--callgrind`, its instructions per record.
fn table(a: &KindsArgs, mix: Mix) -> anyhow::Result<()> {
    let src = Source::new(mix)?;
    let kinds = src.kinds();
    println!(
        "bench kinds --mix {}: {} kinds in {} template records, {} records per request, {} sessions, capture {}",
        mix.as_str(),
        kinds.len(),
        src.len(),
        a.batch,
        a.sessions,
        a.capture.as_str(),
    );
    println!("  {:<40} {:>6} {:>10} {:>12}", "kind", "share", "bytes/rec", "Ir/rec");
    let scratch = super::Scratch::new("kinds")?;
    let dir = a.keep.clone().unwrap_or_else(|| scratch.path().to_owned());
    std::fs::create_dir_all(&dir)?;
    let (mut weighted, mut bytes) = (0.0, 0.0);
    for (kind, templates) in &kinds {
        let one = src.only(kind).context("a kind the mix listed")?;
        let size = bytes_per_record(&one, a);
        let share = *templates as f64 / src.len() as f64;
        bytes += share * size as f64;
        let ir = if a.callgrind {
            let (per, _) = instructions_per_record(a, mix, kind, &dir)?;
            weighted += share * per;
            format!("{per:.0}")
        } else {
            "-".into()
        };
        println!("  {:<40} {:>5.1}% {size:>10} {ir:>12}", shorten(kind), 100.0 * share);
    }
    let ir = if a.callgrind { format!("{weighted:.0}") } else { "(--callgrind)".into() };
    println!("  {:<40} {:>6} {:>10.0} {ir:>12}", "the mix (weighted by share)", "100%", bytes);
    // The kinds interleaved in each request, as `bench otlp` sends them (and agents do):
    // what a request of one kind cannot show, such as the receiver's guesses at the next
    // record's keys missing when the kinds alternate.
    let whole = if a.callgrind { Some(instructions_per_record(a, mix, WHOLE_MIX, &dir)?) } else { None };
    let ir = whole.map_or_else(|| "(--callgrind)".into(), |(per, _)| format!("{per:.0}"));
    println!(
        "  {:<40} {:>6} {:>10} {ir:>12}",
        "the mix as sent (kinds interleaved)",
        "100%",
        bytes_per_record(&src, a)
    );
    if let Some((_, records)) = whole {
        stages(a, mix, &dir, records)?;
    }
    Ok(())
}

/// A kind as printed (body texts may be long).
fn shorten(kind: &str) -> String {
    if kind.chars().count() <= 40 { kind.to_owned() } else { kind.chars().take(37).chain("...".chars()).collect() }
}

/// Instructions per record of `kind`: two runs under callgrind, `--records` and twice as
/// many measured records, differenced; and the records that the second run sent more.
fn instructions_per_record(a: &KindsArgs, mix: Mix, kind: &str, dir: &Path) -> anyhow::Result<(f64, u64)> {
    let slug = slug(kind);
    let mut runs = Vec::new();
    for n in [a.records, 2 * a.records] {
        let out = dir.join(format!("callgrind.{}.{slug}.{n}.out", mix.as_str()));
        let child = Command::new(&a.valgrind)
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", out.display()))
            .arg(std::env::current_exe()?)
            .args(["kinds", "--mix", mix.as_str(), "--kind", kind])
            .args(["--records", &n.to_string(), "--batch", &a.batch.to_string()])
            .args(["--sessions", &a.sessions.to_string(), "--capture", a.capture.as_str()])
            .output()
            .with_context(|| format!("cannot run {}", a.valgrind.display()))?;
        let stdout = String::from_utf8_lossy(&child.stdout);
        anyhow::ensure!(
            child.status.success(),
            "the run of {kind} under callgrind failed: {}{}",
            stdout,
            String::from_utf8_lossy(&child.stderr)
        );
        let sent = stdout
            .lines()
            .find_map(|l| l.strip_prefix(SENT)?.split_whitespace().next()?.parse::<u64>().ok())
            .context("the run printed no record count")?;
        runs.push((sent, callgrind_total(&out)?));
    }
    let [(n1, ir1), (n2, ir2)] = runs[..] else { unreachable!("two runs") };
    anyhow::ensure!(n2 > n1, "the longer run sent no more records");
    Ok(((ir2 as f64 - ir1 as f64) / (n2 - n1) as f64, n2 - n1))
}

/// The bridge's stages, each a function whose inclusive cost is the stage's: a label and
/// the function as `callgrind_annotate` names it, or several, the first in the profile
/// counting (the pipeline's submit is inlined into the OTLP chunk loop that calls it in
/// some builds).
const STAGES: [(&str, &[&str]); 8] = [
    ("receive: protobuf reader", &["aep_receivers::otlp::http::decode_log_records"]),
    (
        "map: vendor profiles",
        &["aep_bridge::otlp_in::BridgeOtlp::map_into", "aep_adapters::vendors::otel_route::ProfileOverrides::map_into"],
    ),
    ("  of which companion payloads", &["aep_adapters::otel::companion"]),
    (
        "stamp, serialize, fan out",
        &[
            "aep_bridge::pipeline::Pipeline::submit_mapped::{{closure}}",
            "aep_bridge::otlp_in::submit_in_chunks::{{closure}}",
        ],
    ),
    ("  of which serialize", &["aep_schemas::event::Event::write_json_with"]),
    ("  of which the embedded collector", &["<aep_bridge::collector::Collector as aep_bridge::pipeline::Tap>::admit"]),
    ("GenAI metrics (a tap)", &["<aep_bridge::genai::GenAiTap as aep_bridge::pipeline::Tap>::admit"]),
    ("JSONL writer (user space)", &["aep_bridge::sinks::jsonl::JsonlWriter::write_batch"]),
];

/// Prints each stage's instructions per record in the whole-mix runs (their callgrind
/// files, left by [`instructions_per_record`]): inclusive costs, differenced like the
/// totals, so they are as steady as the code is (a whole run's total also moves with how
/// the threads happened to batch their work).
fn stages(a: &KindsArgs, mix: Mix, dir: &Path, records: u64) -> anyhow::Result<()> {
    let mut costs = Vec::new();
    for n in [a.records, 2 * a.records] {
        let out = dir.join(format!("callgrind.{}.{}.{n}.out", mix.as_str(), slug(WHOLE_MIX)));
        // Run from `/`: under a directory that holds the sources (the repository, where the
        // bench is usually run) callgrind_annotate names their files relative to it and then
        // splits a function's cost over more entries, so its own entry reads only part of it.
        let annotated = Command::new("callgrind_annotate")
            .current_dir("/")
            .args(["--inclusive=yes", "--threshold=100"])
            .arg(&out)
            .output()
            .context("cannot run callgrind_annotate (it comes with valgrind)")?;
        let text = String::from_utf8_lossy(&annotated.stdout);
        costs.push(STAGES.map(|(_, fs)| fs.iter().find_map(|f| inclusive(&text, f))));
    }
    println!("  stages of the mix as sent, Ir per record (inclusive):");
    for (i, (label, fs)) in STAGES.iter().enumerate() {
        // A stage whose function is gone (renamed, inlined) says so instead of reading 0.
        let ir = match (costs[0][i], costs[1][i]) {
            (Some(a), Some(b)) => format!("{:.0}", (b as f64 - a as f64) / records as f64),
            _ => format!("(no {} in the profile)", fs.join(" or ")),
        };
        println!("    {label:<40} {ir:>19}");
    }
    Ok(())
}

/// The inclusive cost `callgrind_annotate` gives function `f` (its own entry, named with
/// its binary, not an inlined copy's); `None` when the profile has no such entry.
fn inclusive(annotated: &str, f: &str) -> Option<u64> {
    let own = format!(":{f} [");
    annotated
        .lines()
        .find(|l| l.contains(&own))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.replace(',', "").parse().ok())
}

/// A kind as a file name part.
fn slug(kind: &str) -> String {
    kind.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect()
}

/// The instruction total of a callgrind output file (its `totals:` or `summary:` line).
fn callgrind_total(path: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .with_context(|| format!("no totals in {}", path.display()))
}

/// The `--kind` that names every kind of the mix, interleaved as `bench otlp` sends them.
const WHOLE_MIX: &str = "*";

/// Sends the records of `kind` through an in-process bridge: the warm-up, then `--records`
/// (rounded up to whole requests), and waits until the JSONL sink wrote them.
fn run_kind(a: &KindsArgs, mix: Mix, kind: &str) -> anyhow::Result<()> {
    let src = Source::new(mix)?;
    let src = if kind == WHOLE_MIX {
        src
    } else {
        src.only(kind).with_context(|| format!("the {} mix has no kind {kind:?}", mix.as_str()))?
    };
    let scratch = super::Scratch::new("kind")?;
    let mut cfg = super::bench_config(&scratch.path().join("data"));
    cfg.capture.max = a.capture;
    let warm = a.sessions * cfg.collector.replay_buffer;
    let requests = (warm + a.records).div_ceil(a.batch);
    let ring: Vec<Bytes> = (0..RING.min(requests))
        .map(|b| Bytes::from(src.request(b, a.batch, a.sessions, NOW).encode_to_vec()))
        .collect();
    // The runtime `serve` runs on.
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let stop = CancellationToken::new();
    let written = rt.block_on(async {
        let daemon = aep_bridge::server::Daemon::build(cfg, stop.clone())?;
        let app = daemon.app();
        for b in 0..requests {
            post(&app, ring[b % ring.len()].clone()).await?;
        }
        anyhow::ensure!(daemon.pipeline().written(Duration::from_secs(600)).await, "the JSONL sink did not catch up");
        let m = daemon.pipeline().metrics();
        let written = m.events_out.get(&[("sink", "jsonl")]);
        daemon.pipeline().close();
        anyhow::Ok(written)
    })?;
    stop.cancel();
    println!("{SENT}{} written={written} requests={requests} kind={kind}", requests * a.batch);
    Ok(())
}

/// `POST /v1/logs` of one protobuf body to the app; a 503/429 is retried after a pause.
async fn post(app: &axum::Router, body: Bytes) -> anyhow::Result<()> {
    for _ in 0..100_000 {
        let req = axum::http::Request::post("/v1/logs")
            .header("content-type", "application/x-protobuf")
            // As every exporter sends it (the receiver sizes its buffer by it, and keeps a
            // body that arrives whole in one frame without a copy).
            .header("content-length", body.len())
            .body(axum::body::Body::from(body.clone()))?;
        let resp = app.clone().oneshot(req).await?;
        match resp.status().as_u16() {
            200 => return Ok(()),
            429 | 503 => tokio::time::sleep(Duration::from_millis(2)).await,
            s => anyhow::bail!("POST /v1/logs answered {s}"),
        }
    }
    anyhow::bail!("the bridge keeps refusing")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_cost_is_its_own_entry_and_a_missing_one_says_so() {
        let annotated = "\
 9,999 ( 9.00%)  /rustc/x/library/core/src/ops/function.rs:aep_schemas::event::Event::write_json_with
 1,234,567 ( 1.00%)  /work/schemas/src/event/mod.rs:aep_schemas::event::Event::write_json_with [/bin/aep-bench]
";
        assert_eq!(inclusive(annotated, "aep_schemas::event::Event::write_json_with"), Some(1_234_567));
        assert_eq!(inclusive(annotated, "<aep_bridge::genai::GenAiTap as aep_bridge::pipeline::Tap>::admit"), None);
    }
}
