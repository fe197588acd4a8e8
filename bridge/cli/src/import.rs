//! `aep-bridge import`: the agents' own history (Claude Code transcripts, Codex rollouts)
//! into AEP sessions, written where and how the live bridge writes them.
//!
//! The sources are the vendors whose adapter names a history ([`aep_adapters::HookAdapter::history`]):
//! its folder (one `--{flag} DIR` per vendor, read from the vendor list), which files are
//! sessions, and their mapping (`history`, `claude_code::transcript`, `codex::rollout`):
//! each transcript replays through the vendor's live hook mapping at the records' own
//! times, with deterministic event ids. This command finds the files, skips every session
//! the data directory already logs (live or imported: its log file exists), stamps the
//! rest through the bridge's own [`Pipeline`] into the JSONL sink (the same
//! `{data}/logs/{agent}/{session}.jsonl` layout, the same writer) and, with `[export]`
//! configured, through the same exporters, then validates what it wrote.
//!
//! The AEP session id is the vendor's own session id, as the live hooks name it, so an
//! imported session joins the vendor's own telemetry and never duplicates a live one. Its
//! epoch comes from the data directory's durable epoch memory (AEP-0001 §7 rule 2): a
//! bridge started later on the same directory, resuming that session, counts above it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aep_adapters::history::{Companion, HistorySpec, ImportedSession, LineIssue, SessionFile, Transcript};
use aep_bridge::config::Config;
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::{Pipeline, PipelineBuilder, SinkTx};
use clap::Args;
use tokio::sync::mpsc;

use crate::{EXIT_CONFIG, ServeArgs};

/// Arguments of `aep-bridge import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// The vendors' history folders (`--claude DIR`, `--codex DIR`, ...).
    #[command(flatten)]
    pub dirs: HistoryDirs,
    /// Only sessions active on or after this date (`YYYY-MM-DD`, UTC, or an RFC 3339 time).
    #[arg(long, value_name = "DATE", value_parser = parse_since)]
    pub since: Option<i128>,
    /// Data directory of the JSONL logs (default `AEP_BRIDGE_DATA_DIR`, else ~/.aep).
    #[arg(long, env = "AEP_BRIDGE_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<String>,
    /// Configuration file: `[capture]`, `[jsonl]`, `[export]` apply as for `serve`.
    #[arg(long, env = "AEP_BRIDGE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Map and count, write and send nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The vendors whose history is imported, in vendor-list order, with their history.
fn sources() -> Vec<(&'static str, &'static str, &'static HistorySpec)> {
    aep_adapters::vendors::SPECS
        .iter()
        .filter_map(|s| s.adapter?().history().map(|h| (s.id, s.display_name, h)))
        .collect()
}

/// One `--{flag} DIR` per vendor with a history, taken from the vendor list (clap's
/// derive cannot declare flags it learns at run time, so these two traits are by hand).
#[derive(Debug, Clone, Default)]
pub struct HistoryDirs(BTreeMap<&'static str, PathBuf>);

impl HistoryDirs {
    /// The folder given for `vendor`, if any.
    fn get(&self, vendor: &str) -> Option<&PathBuf> {
        self.0.get(vendor)
    }
}

impl clap::FromArgMatches for HistoryDirs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let mut dirs = BTreeMap::new();
        for (vendor, _, h) in sources() {
            if let Some(d) = m.get_one::<PathBuf>(h.flag) {
                dirs.insert(vendor, d.clone());
            }
        }
        Ok(Self(dirs))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for HistoryDirs {
    fn augment_args(mut cmd: clap::Command) -> clap::Command {
        for (_, name, h) in sources() {
            cmd = cmd.arg(
                clap::Arg::new(h.flag)
                    .long(h.flag)
                    .value_name("DIR")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help(format!("{name}'s history folder (default `~/{}`)", h.home_dir)),
            );
        }
        cmd
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// `--since`: a date (midnight UTC) or an RFC 3339 time, as Unix nanoseconds.
fn parse_since(s: &str) -> Result<i128, String> {
    let t = if s.len() == 10 { format!("{s}T00:00:00Z") } else { s.to_owned() };
    aep_schemas::time::parse_rfc3339(&t).ok_or_else(|| format!("`{s}` is neither YYYY-MM-DD nor an RFC 3339 time"))
}

/// Every file under `dir` (recursively) whose name `keep` accepts, sorted.
fn files_under(dir: &Path, keep: &dyn Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && keep(&p) => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn name_of(p: &Path) -> &str {
    p.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// Reads a file as a transcript; an unreadable one is a warning. The agent may still be
/// appending to it: a last line still being written is not yet a record
/// ([`aep_schemas::jsonl`]), left out with a note, never a skipped-line warning.
fn read(p: &Path, issues: &mut Vec<LineIssue>) -> Option<Transcript> {
    match std::fs::read(p) {
        Ok(bytes) => {
            let whole = aep_schemas::jsonl::complete_len(&bytes);
            if whole < bytes.len() {
                println!("note: {}: its last line is still being written; read up to the line before", p.display());
            }
            let text = String::from_utf8_lossy(&bytes[..whole]).into_owned();
            Some(Transcript { label: p.display().to_string(), text })
        }
        Err(e) => {
            issues.push(LineIssue { label: p.display().to_string(), line: 0, message: format!("unreadable: {e}") });
            None
        }
    }
}

/// The session files of a history folder, each with its companions, read in path order
/// (an unreadable file is a warning).
fn session_files(dir: &Path, h: &HistorySpec, issues: &mut Vec<LineIssue>) -> Vec<SessionFile> {
    let wanted = |p: &Path| h.files.matches(name_of(p), p.parent().map(name_of));
    let mut out = Vec::new();
    for main in files_under(dir, &wanted) {
        let Some(transcript) = read(&main, issues) else { continue };
        let mut companions = Vec::new();
        if let Some(c) = &h.companions {
            let folder = main.with_extension("").join(c.dir);
            for p in files_under(&folder, &|p| c.files.matches(name_of(p), p.parent().map(name_of))) {
                let Some(transcript) = read(&p, issues) else { continue };
                let meta = c
                    .meta_ext
                    .and_then(|ext| std::fs::read_to_string(p.with_extension(ext)).ok())
                    .and_then(|t| serde_json::from_str(&t).ok());
                companions.push(Companion { transcript, meta });
            }
        }
        out.push(SessionFile { transcript, companions });
    }
    out
}

/// Whether the data directory already logs `session` (its log file, or a rotated one).
fn already_logged(data_dir: &Path, vendor: &str, session: &str) -> bool {
    let p = aep_bridge::sinks::jsonl::log_path(data_dir, vendor, Some(session));
    p.exists() || PathBuf::from(format!("{}.1", p.display())).exists()
}

/// One source's tally for the summary line.
#[derive(Debug, Default)]
struct Tally {
    files_warned: usize,
    imported: usize,
    skipped: usize,
    filtered: usize,
    events: usize,
}

/// Prints one warning line per file with skipped lines.
fn warn_issues(issues: &[LineIssue]) -> usize {
    let mut by_file: BTreeMap<&str, Vec<&LineIssue>> = BTreeMap::new();
    for i in issues {
        by_file.entry(i.label.as_str()).or_default().push(i);
    }
    for (label, list) in &by_file {
        let first = list[0];
        let at = if first.line == 0 { String::new() } else { format!(" (line {}: {})", first.line, first.message) };
        let what = if first.line == 0 { first.message.clone() } else { format!("{} line(s) skipped{at}", list.len()) };
        eprintln!("aep-bridge import: warning: {label}: {what}");
    }
    by_file.len()
}

/// Runs `aep-bridge import`; returns the exit code.
pub fn run(args: ImportArgs) -> i32 {
    let serve = ServeArgs { config: args.config.clone(), data_dir: args.data_dir.clone(), ..ServeArgs::default() };
    let cfg = match serve.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aep-bridge import: {e}");
            return EXIT_CONFIG;
        }
    };
    let home = cfg.env.home();
    let default_dir = |rel: &str| home.as_ref().map(|h| h.join(rel));
    let cx = aep_bridge::server::map_context(&cfg);
    let data_dir = cfg.data_dir();
    let mut todo: Vec<ImportedSession> = Vec::new();
    let mut tallies = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (vendor, _, history) in sources() {
        let mut tally = Tally::default();
        let dir = args.dirs.get(vendor).cloned().or_else(|| default_dir(history.home_dir));
        let Some(dir) = dir.filter(|d| d.is_dir()) else {
            tallies.push((vendor, None, tally));
            continue;
        };
        let mut issues = Vec::new();
        let files = session_files(&dir, history, &mut issues);
        let mut got = (history.map)(&files, &cx);
        issues.append(&mut got.issues);
        got.issues = issues;
        tally.files_warned = warn_issues(&got.issues);
        for s in got.sessions {
            let last = s.last_time.as_deref().and_then(aep_schemas::time::parse_rfc3339);
            if let (Some(since), Some(last)) = (args.since, last)
                && last < since
            {
                tally.filtered += 1;
                continue;
            }
            if already_logged(&data_dir, s.vendor, &s.session) {
                tally.skipped += 1;
                continue;
            }
            // Two files naming one vendor session (a copied or resumed transcript): the first
            // is imported, a second `session.ended` would break the log (AEP-0002 §2 #5).
            if !seen.insert((s.vendor, s.session.clone())) {
                eprintln!(
                    "aep-bridge import: warning: {vendor} session {} is in more than one file; the first is imported",
                    s.session
                );
                tally.skipped += 1;
                continue;
            }
            tally.imported += 1;
            tally.events += s.drafts.len();
            todo.push(s);
        }
        tallies.push((vendor, Some(dir), tally));
    }
    let mut code = 0;
    if !args.dry_run && !todo.is_empty() {
        match write(&cfg, &data_dir, todo) {
            Ok(bad) => code = i32::from(bad > 0),
            Err(e) => {
                eprintln!("aep-bridge import: {e}");
                return 1;
            }
        }
    }
    let verb = if args.dry_run { "would import" } else { "imported" };
    for (vendor, dir, t) in tallies {
        let Some(dir) = dir else {
            println!("{vendor}: no history folder, nothing imported");
            continue;
        };
        let mut line = format!(
            "{vendor} ({}): {verb} {} session(s), {} event(s); skipped {} already logged",
            dir.display(),
            t.imported,
            t.events,
            t.skipped
        );
        if t.filtered > 0 {
            line.push_str(&format!(", {} before --since", t.filtered));
        }
        if t.files_warned > 0 {
            line.push_str(&format!("; {} file(s) with skipped lines", t.files_warned));
        }
        println!("{line}");
    }
    code
}

/// Error of the writing half.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    /// The data directory or its epoch state.
    #[error("data directory: {0}")]
    State(#[from] aep_bridge::state::StateError),
    /// The runtime.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

/// Stamps and writes the sessions through the bridge's pipeline (JSONL sink, exporters),
/// then validates each log written; returns how many logs failed validation.
fn write(cfg: &Config, data_dir: &Path, sessions: Vec<ImportedSession>) -> Result<usize, WriteError> {
    let now = aep_bridge::time::now_ms() / 1000;
    std::fs::create_dir_all(data_dir)?;
    let epoch = aep_bridge::state::bump_epoch(data_dir, now)?.value;
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let events: usize = sessions.iter().map(|s| s.drafts.len()).sum();
    let paths: Vec<PathBuf> =
        sessions.iter().map(|s| aep_bridge::sinks::jsonl::log_path(data_dir, s.vendor, Some(&s.session))).collect();
    rt.block_on(async {
        let metrics = Arc::new(Metrics::default());
        let health = Arc::new(aep_bridge::health::Health::default());
        let shutdown = tokio_util::sync::CancellationToken::new();
        let (tx, rx) = mpsc::channel(cfg.pipeline.queue_capacity);
        let jsonl = aep_bridge::sinks::jsonl::spawn(
            rx,
            data_dir.to_owned(),
            cfg.jsonl.clone(),
            metrics.clone(),
            None,
            Some(health.clone()),
            None,
        );
        let mut builder = PipelineBuilder::new(epoch, aep_bridge::server::host_name(cfg), metrics.clone())
            .sink(SinkTx::durable_lines("jsonl", tx));
        // The exporters' queues hold the whole import: they shed when full, and history has
        // no producer to slow down.
        let ex = aep_bridge::export::start(
            &cfg.export,
            cfg.pipeline.queue_capacity.max(events + 1),
            metrics.clone(),
            health,
            shutdown.clone(),
        );
        for s in ex.sinks {
            builder = builder.sink(s);
        }
        let pipeline: Pipeline = builder.build();
        for s in sessions {
            if let Err(e) = pipeline.submit_drafts("import", s.vendor, s.drafts).await {
                eprintln!("aep-bridge import: {}: {e}", s.session);
            }
        }
        pipeline.close();
        drop(pipeline);
        for t in ex.tasks {
            if tokio::time::timeout(Duration::from_secs(30), t).await.is_err() {
                eprintln!("aep-bridge import: warning: an exporter did not finish within 30 s");
            }
        }
        for (name, stats) in &ex.stats {
            let (delivered, failed, rejected, _) = stats.snapshot();
            println!("export {name}: {delivered} delivered, {failed} failed, {rejected} rejected");
        }
        let _ = tokio::task::spawn_blocking(move || jsonl.join()).await;
    });
    let mut bad = 0;
    for p in paths {
        let Ok(f) = std::fs::File::open(&p) else { continue };
        match aep_schemas::report::validate_report(std::io::BufReader::new(f)) {
            Ok(r) if r.failures.is_empty() => {
                for w in r.warnings {
                    eprintln!("aep-bridge import: warning[completeness]: {}: {w}", p.display());
                }
            }
            Ok(r) => {
                bad += 1;
                for f in r.failures {
                    eprintln!("aep-bridge import: invalid: {}: {f}", p.display());
                }
            }
            Err(e) => eprintln!("aep-bridge import: {}: {e}", p.display()),
        }
    }
    Ok(bad)
}
