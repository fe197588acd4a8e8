//! The per-session JSONL log: `{root}/logs/{agent}/{session}.jsonl` (AEP-0003 §3.1).
//!
//! The durable record: it runs on its own OS thread so a slow disk never stalls the async
//! runtime, writes each batch of lines for a file with one `write` call of whole lines
//! (a tailer never sees a torn event), keeps a bounded number of files open, rotates by
//! size, and fsyncs per policy and always at shutdown. Path components are sanitized:
//! session ids are untrusted input (AEP-0003 §9.6).

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use aep_schemas::Severity;

use crate::health::Health;
use crate::pipeline::{LineBatch, LogKey, Progress};

/// How often the JSONL sink fsyncs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum FsyncPolicy {
    /// After every batch of writes.
    Always,
    /// At most every `fsync_interval_ms` (default).
    #[default]
    Interval,
    /// Leave it to the OS (still fsynced at shutdown).
    Never,
}

/// `[jsonl]`: the per-session log.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JsonlConfig {
    /// Write the log (default true).
    pub enabled: bool,
    /// Fsync policy.
    pub fsync: FsyncPolicy,
    /// Interval for `fsync = "interval"`.
    pub fsync_interval_ms: u64,
    /// Most files kept open at once.
    pub max_open_files: usize,
    /// Rotate a session file when it grows past this many bytes (0 disables).
    pub rotate_bytes: u64,
    /// Rotated files kept per session.
    pub rotate_keep: u32,
}

impl Default for JsonlConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            fsync: FsyncPolicy::Interval,
            fsync_interval_ms: 1000,
            max_open_files: 64,
            rotate_bytes: 64 * 1024 * 1024,
            rotate_keep: 5,
        }
    }
}

impl JsonlConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[jsonl]`:
    /// the section judges its own values; `config` prefixes the keys and adds the checks
    /// across sections.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.max_open_files == 0 {
            out.push(("max_open_files".into(), "must be at least 1".into()));
        }
        out
    }
}

/// Maps an untrusted id to one safe path component: `[A-Za-z0-9._-]` kept, every other
/// byte percent-encoded, a leading `.` encoded (no `..`, no hidden files), empty -> `_`,
/// and over-long names shortened with a digest suffix so distinct ids stay distinct.
pub fn sanitize_component(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for (i, b) in id.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        return "_".into();
    }
    if out.len() > 150 {
        let digest = aep_schemas::digest::digest(&serde_json::Value::String(id.to_owned()));
        out.truncate(100);
        out.push('~');
        out.push_str(&digest);
    }
    out
}

/// The log file of an event: `{root}/logs/{agent}/{session}.jsonl`; agent-scoped events
/// go to `{root}/logs/{agent}/@agent.jsonl`, a name no session id can produce (`@` is encoded).
pub fn log_path(root: &Path, agent: &str, session: Option<&str>) -> PathBuf {
    let dir = root.join("logs").join(sanitize_component(agent));
    match session {
        Some(s) => dir.join(format!("{}.jsonl", sanitize_component(s))),
        None => dir.join("@agent.jsonl"),
    }
}

/// The lines of one batch bound for one `(agent, session)` log: runs of whole lines
/// ([`LineBatch::runs`]) and how many lines they hold.
type Group<'a> = (&'a Arc<LogKey>, Vec<&'a [u8]>, u64);

struct OpenFile {
    file: File,
    size: u64,
    last_used: u64,
    dirty: bool,
}

/// The JSONL writer state (owned by the sink thread; usable directly in tests and benches).
pub struct JsonlWriter {
    root: PathBuf,
    cfg: JsonlConfig,
    open: HashMap<PathBuf, OpenFile>,
    paths: HashMap<String, HashMap<String, PathBuf>>,
    tick: u64,
    last_sync: Instant,
    metrics: Arc<Metrics>,
    health: Option<Arc<Health>>,
    /// The durable exporters reading these logs back: told which logs grew, and before a
    /// rotation deletes a generation.
    wal: Option<Arc<crate::export::wal::Wal>>,
    /// The logs written by the current batch (for `wal`).
    grew: Vec<PathBuf>,
}

impl JsonlWriter {
    /// A writer below `root`.
    pub fn new(root: PathBuf, cfg: JsonlConfig, metrics: Arc<Metrics>) -> Self {
        Self {
            root,
            cfg,
            open: HashMap::new(),
            paths: HashMap::new(),
            tick: 0,
            last_sync: Instant::now(),
            metrics,
            health: None,
            wal: None,
            grew: Vec::new(),
        }
    }

    /// Tells `wal` which logs each batch appended to (the durable exporters read them back).
    pub fn with_wal(mut self, wal: Option<Arc<crate::export::wal::Wal>>) -> Self {
        self.wal = wal;
        self
    }

    /// Reports write failures (and recovery) as the `jsonl` part of `/healthz`.
    pub fn with_health(mut self, health: Arc<Health>) -> Self {
        self.health = Some(health);
        self
    }

    /// The log path of `(agent, session)`, built once per session.
    fn path_of(&mut self, agent: &str, session: Option<&str>) -> PathBuf {
        let key = session.unwrap_or("");
        if let Some(p) = self.paths.get(agent).and_then(|m| m.get(key)) {
            return p.clone();
        }
        let p = log_path(&self.root, agent, session);
        let m = self.paths.entry(agent.to_owned()).or_default();
        if m.len() >= 16_384 {
            m.clear();
        }
        m.insert(key.to_owned(), p.clone());
        p
    }

    /// Writes queued line batches: lines are grouped per file and each group goes out with
    /// vectored writes of whole lines straight from the batches' buffers (no copy).
    pub fn write_batch(&mut self, batch: &[LineBatch]) {
        // Group by file, keeping each group's lines in order; resolve each group's path once.
        // The lines of a session share one key, so a pointer comparison nearly always decides.
        let mut groups: Vec<Group<'_>> = Vec::new();
        for (key, run, n) in batch.iter().flat_map(LineBatch::runs) {
            match groups.iter_mut().rev().find(|(k, _, _)| Arc::ptr_eq(k, key) || **k == *key) {
                Some((_, runs, lines)) => {
                    runs.push(run);
                    *lines += n as u64;
                }
                None => groups.push((key, vec![run], n as u64)),
            }
        }
        let (mut written, mut failed) = (0u64, 0u64);
        let mut last_error = None;
        for (key, runs, lines) in groups {
            let (agent, session) = (key.agent.as_str(), key.session.as_deref());
            let path = self.path_of(agent, session);
            if let Err(e) = self.write_file(&path, &runs) {
                failed += 1;
                tracing::error!(path = %path.display(), error = %e, "JSONL write failed.");
                // Every event of the group is lost: counted exactly, by severity.
                let mut lost: Vec<(Severity, u64)> = Vec::new();
                for (_, _, sev) in batch.iter().flat_map(LineBatch::iter).filter(|(k, _, _)| **k == *key) {
                    match lost.iter_mut().find(|(k, _)| *k == sev) {
                        Some((_, n)) => *n += 1,
                        None => lost.push((sev, 1)),
                    }
                }
                for (sev, n) in lost {
                    self.metrics.dropped.add(&[("sink", "jsonl"), ("severity", sev.as_str())], n);
                }
                last_error = Some(format!("{}: {e}", path.display()));
            } else {
                written += lines;
                if self.wal.is_some() {
                    self.grew.push(path);
                }
            }
        }
        if let Some(wal) = &self.wal {
            wal.written(&self.grew);
            self.grew.clear();
        }
        if let Some(h) = &self.health {
            match &last_error {
                Some(e) => h.failing("jsonl", e),
                None if failed == 0 => h.recovered("jsonl"),
                None => {}
            }
        }
        // Recorded once per batch, not per file: a metric update costs more than a write's bookkeeping.
        if written > 0 {
            self.metrics.events_out.add(&[("sink", "jsonl")], written);
        }
        if failed > 0 {
            self.metrics.sink_errors.add(&[("sink", "jsonl")], failed);
        }
        if self.cfg.fsync == FsyncPolicy::Always
            || (self.cfg.fsync == FsyncPolicy::Interval
                && self.last_sync.elapsed() >= Duration::from_millis(self.cfg.fsync_interval_ms))
        {
            self.sync_all();
        }
    }

    fn write_file(&mut self, path: &Path, lines: &[&[u8]]) -> std::io::Result<()> {
        self.tick += 1;
        if !self.open.contains_key(path) {
            if self.open.len() >= self.cfg.max_open_files {
                self.evict_one();
            }
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            let file = OpenOptions::new().create(true).append(true).open(path)?;
            let size = file.metadata().map(|m| m.len()).unwrap_or(0);
            self.open.insert(path.to_owned(), OpenFile { file, size, last_used: 0, dirty: false });
        }
        let total: u64 = lines.iter().map(|l| l.len() as u64).sum();
        if self.cfg.rotate_bytes > 0
            && self.open.get(path).is_some_and(|f| f.size > 0 && f.size + total > self.cfg.rotate_bytes)
        {
            self.rotate(path)?;
        }
        let tick = self.tick;
        let of = self.open.get_mut(path).ok_or_else(|| std::io::Error::other("file vanished"))?;
        // Whole lines only, appended with O_APPEND so concurrent appenders never interleave
        // inside a line.
        if let Err(e) = write_all_lines(&mut of.file, lines) {
            // A short write (disk full) must not leave a torn line behind: cut the file back
            // to the last whole line we wrote.
            let _ = of.file.set_len(of.size);
            return Err(e);
        }
        of.size += total;
        of.last_used = tick;
        of.dirty = true;
        Ok(())
    }

    fn rotate(&mut self, path: &Path) -> std::io::Result<()> {
        if let Some(mut of) = self.open.remove(path) {
            let _ = of.file.flush();
            let _ = of.file.sync_all();
        }
        let name = |n: u32| PathBuf::from(format!("{}.{n}", path.display()));
        let keep = self.cfg.rotate_keep.max(1);
        if let Some(wal) = &self.wal
            && name(keep).exists()
        {
            wal.rotating(path, &name(keep));
        }
        let _ = fs::remove_file(name(keep));
        for n in (1..keep).rev() {
            let _ = fs::rename(name(n), name(n + 1));
        }
        fs::rename(path, name(1))?;
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        self.open.insert(path.to_owned(), OpenFile { file, size: 0, last_used: self.tick, dirty: false });
        Ok(())
    }

    fn evict_one(&mut self) {
        if let Some(p) = self.open.iter().min_by_key(|(_, f)| f.last_used).map(|(p, _)| p.clone())
            && let Some(of) = self.open.remove(&p)
            && of.dirty
        {
            let _ = of.file.sync_data();
        }
    }

    /// Fsyncs every file written since the last sync.
    pub fn sync_all(&mut self) {
        for of in self.open.values_mut().filter(|f| f.dirty) {
            if of.file.sync_data().is_err() {
                self.metrics.sink_errors.inc(&[("sink", "jsonl")]);
            }
            of.dirty = false;
        }
        self.last_sync = Instant::now();
    }

    /// Number of files currently open.
    pub fn open_files(&self) -> usize {
        self.open.len()
    }
}

/// Most buffers handed to one `writev` (Linux's `IOV_MAX` is 1024).
const MAX_IOVECS: usize = 1024;

/// Writes every line with vectored writes, resuming after a partial write (the
/// `write_all_vectored` loop, which std has not stabilized).
fn write_all_lines(file: &mut File, lines: &[&[u8]]) -> std::io::Result<()> {
    for chunk in lines.chunks(MAX_IOVECS) {
        let mut slices: Vec<std::io::IoSlice<'_>> = chunk.iter().map(|l| std::io::IoSlice::new(l)).collect();
        let mut bufs = &mut slices[..];
        while !bufs.is_empty() {
            match file.write_vectored(bufs) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => std::io::IoSlice::advance_slices(&mut bufs, n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// A batch smaller than this waits [`LINGER`] once for more lines, while lines arrive
/// together.
const LINGER_BELOW: usize = 64;
/// How long a small batch lingers.
const LINGER: Duration = Duration::from_micros(300);

/// Takes what is queued into `batch` (up to about 4096 lines); returns the lines it holds.
fn drain(rx: &mut mpsc::Receiver<LineBatch>, batch: &mut Vec<LineBatch>, mut lines: usize) -> usize {
    while lines < 4096 {
        match rx.try_recv() {
            Ok(b) => {
                lines += b.len();
                batch.push(b);
            }
            Err(_) => break,
        }
    }
    lines
}

/// Runs the sink on a dedicated thread until the queue closes, then fsyncs everything.
/// `progress` learns of every batch once it is written (or failed and counted); `health`
/// of write failures; `wal` (the durable exporters) of the logs each batch grew, and that
/// the sink stopped.
pub fn spawn(
    mut rx: mpsc::Receiver<LineBatch>,
    root: PathBuf,
    cfg: JsonlConfig,
    metrics: Arc<Metrics>,
    progress: Option<Arc<Progress>>,
    health: Option<Arc<Health>>,
    wal: Option<Arc<crate::export::wal::Wal>>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("aep-jsonl".into())
        .spawn(move || {
            let mut w = JsonlWriter::new(root, cfg, metrics.clone()).with_wal(wal.clone());
            if let Some(h) = health {
                w = w.with_health(h);
            }
            let mut batch = Vec::with_capacity(1024);
            // Whether the last linger found more lines: while it does, lines are arriving
            // together and lingering saves writes; once it finds none, a lone line (a hook,
            // whose answer waits for this write) is written at once.
            let mut gathering = false;
            while let Some(first) = rx.blocking_recv() {
                let mut lines = first.len();
                batch.push(first);
                lines = drain(&mut rx, &mut batch, lines);
                if lines < LINGER_BELOW && (batch.len() > 1 || gathering) {
                    // Under load events arrive a few at a time: linger briefly so one write
                    // carries many lines (fewer syscalls).
                    let before = batch.len();
                    std::thread::sleep(LINGER);
                    lines = drain(&mut rx, &mut batch, lines);
                    gathering = batch.len() > before;
                }
                w.write_batch(&batch);
                if let Some(p) = &progress {
                    p.finished(lines as u64);
                }
                batch.clear();
                metrics.queue_depth.set("jsonl", rx.len() as i64);
            }
            w.sync_all();
            if let Some(wal) = wal {
                wal.close();
            }
        })
        .unwrap_or_else(|e| panic!("cannot start the JSONL thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_ids_stay_inside_the_root() {
        let root = Path::new("/data");
        for id in ["../../etc/x", "..", ".", "", "a/b", "a\\b", "\0", ".hidden"] {
            let p = log_path(root, "claude-code", Some(id));
            assert_eq!(p.parent(), Some(Path::new("/data/logs/claude-code")), "{id:?} -> {}", p.display());
            let name = p.file_name().unwrap().to_str().unwrap();
            assert!(!name.starts_with('.') && !name.contains('/'), "{id:?} -> {name}");
        }
        assert_eq!(sanitize_component("s_8f2c-1.2"), "s_8f2c-1.2");
        assert_ne!(sanitize_component(&"x".repeat(300)), sanitize_component(&format!("{}y", "x".repeat(299))));
        assert!(sanitize_component(&"x".repeat(300)).len() < 200);
    }
}
