//! The view's history: the sessions of the last days, read back from the JSONL logs
//! (`{data}/logs/{agent}/{session}.jsonl`), so any tab, after any restart, pages back
//! through them by time, agent and text.
//!
//! Nothing holds the events: the index keeps one small [`Summary`] per session file (times,
//! counts, tokens, its open requests) and how far it has read the file, and catches up by
//! reading only what was appended since. It is bounded by age (`[ui] history_days`) and
//! count (`[ui] history_sessions`, the most recently written first). A text search is a
//! bounded scan of the candidates' files, newest first, that stops at a page of matches or
//! a byte budget and says where to go on. A last line without its newline is a line being
//! written: "not yet", never an error.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

/// Files read between two publications of the first index: the newest sessions are
/// queryable while older ones are still being read.
const PUBLISH_EVERY: usize = 200;

/// Bytes one text search reads before it returns what it found and where to go on.
pub const SEARCH_BUDGET: u64 = 64 * 1024 * 1024;

/// Bytes one page of a session's events holds at most (at least one event is returned).
pub const EVENTS_BUDGET: usize = 4 * 1024 * 1024;

/// Bytes read from disk at once.
const CHUNK: usize = 1024 * 1024;

/// Rotated files looked for behind a session's log (`.jsonl.1` ... oldest last).
const MAX_ROTATED: u32 = 32;

pub use aep_projections::summary::Summary;
use aep_projections::summary::severity_rank;

/// One indexed log file.
#[derive(Debug)]
struct Entry {
    /// Bytes of the current file folded in (through its last newline).
    read: u64,
    /// The file's modification time when last looked at.
    mtime: SystemTime,
    /// The summary; shared with queries in flight.
    summary: Arc<Summary>,
    /// Path relative to the logs folder (`agent/session.jsonl`): the query cursor's key.
    rel: String,
}

#[derive(Debug, Default)]
struct Index {
    files: HashMap<PathBuf, Entry>,
    /// When the last completed refresh started: it saw every write finished before then.
    refreshed: Option<Instant>,
}

/// What a query asks for; every part optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Query {
    /// Exactly this agent.
    pub agent: Option<String>,
    /// Session ids containing this.
    pub session: Option<String>,
    /// Sessions with an event whose type starts with this.
    #[serde(rename = "type")]
    pub ty: Option<String>,
    /// Sessions with an event at this severity or above.
    pub severity: Option<String>,
    /// Sessions active at or after this Unix ms.
    pub since: Option<u64>,
    /// Words in the session's id, agent, label or any of its events (case-insensitive).
    pub text: Option<String>,
    /// Continue after this cursor (a previous page's `next`).
    pub before: Option<String>,
    /// Most sessions returned (at most 1,000).
    pub limit: Option<usize>,
}

/// One page of sessions, newest activity first.
#[derive(Debug, Serialize)]
pub struct Page {
    /// The sessions.
    #[serde(serialize_with = "shared")]
    pub sessions: Vec<Arc<Summary>>,
    /// Where the next page starts, when there may be one.
    pub next: Option<String>,
    /// Sessions in the index.
    pub indexed: usize,
    /// Bytes of logs a text search read for this page.
    pub scanned: u64,
    /// The search stopped at its byte budget before filling the page: ask again from `next`.
    pub partial: bool,
    /// The first reading of the logs is still under way: this page holds the newest
    /// sessions read so far; ask again for the rest.
    pub indexing: bool,
}

/// Serializes summaries shared with the index as they are.
fn shared<S: serde::Serializer>(list: &[Arc<Summary>], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(|x| &**x))
}

/// One page of a session's events, newest first.
#[derive(Debug)]
pub struct EventsPage {
    /// The events as logged, newest first: each one complete JSON line.
    pub lines: Vec<Vec<u8>>,
    /// Where the next (older) page starts.
    pub next: Option<String>,
}

/// Why a session's events could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No log for that agent and session.
    #[error("no log for this agent and session")]
    NotFound,
    /// A cursor that is not one this endpoint gave.
    #[error("`before` is not a cursor this endpoint gave: {0}")]
    BadCursor(String),
    /// The log could not be read.
    #[error("the log could not be read: {0}")]
    Io(#[from] std::io::Error),
}

/// The sessions index over one logs folder.
#[derive(Debug)]
pub struct History {
    logs: PathBuf,
    days: u32,
    max: usize,
    index: Mutex<Index>,
    refreshing: Mutex<()>,
    /// The first full reading of the folder is done.
    complete: AtomicBool,
}

/// The rotated siblings of a log (`x.jsonl.1`, `.2`, ...), oldest first.
fn rotated(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for n in 1..=MAX_ROTATED {
        let p = PathBuf::from(format!("{}.{n}", path.display()));
        if !p.is_file() {
            break;
        }
        out.push(p);
    }
    out.reverse();
    out
}

/// Reads `path` in chunks of whole lines (about [`CHUNK`] bytes each, a longer line whole)
/// while `chunk` returns `true`.
fn scan_chunks(path: &Path, mut chunk: impl FnMut(&[u8]) -> bool) -> std::io::Result<()> {
    let mut f = File::open(path)?;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut read = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut read)?;
        if n == 0 {
            if !buf.is_empty() {
                chunk(&buf);
            }
            return Ok(());
        }
        buf.extend_from_slice(&read[..n]);
        if let Some(i) = memchr::memrchr(b'\n', &buf) {
            if !chunk(&buf[..=i]) {
                return Ok(());
            }
            buf.drain(..=i);
        }
    }
}

/// Reads `path` from `from`, calling `line` for every complete line; returns the offset just
/// past the last newline (a torn last line is left for the next read).
fn fold_lines(path: &Path, from: u64, mut line: impl FnMut(&[u8])) -> std::io::Result<u64> {
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(from))?;
    let mut done = from;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK);
    let mut chunk = vec![0u8; CHUNK];
    loop {
        let n = f.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(i) = memchr::memchr(b'\n', &buf[start..]) {
            let l = &buf[start..start + i];
            if !l.is_empty() {
                line(l);
            }
            start += i + 1;
        }
        done += start as u64;
        buf.drain(..start);
    }
    Ok(done)
}

impl History {
    /// The index over `logs` (`{data}/logs`), keeping sessions written in the last `days`
    /// days, at most `max` of them.
    pub fn new(logs: PathBuf, days: u32, max: usize) -> Self {
        Self {
            logs,
            days,
            max,
            index: Mutex::new(Index::default()),
            refreshing: Mutex::new(()),
            complete: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The session log files written within the window, newest first, at most `max`.
    fn candidates(&self, now: SystemTime) -> Vec<(PathBuf, SystemTime, u64, String)> {
        let horizon =
            now.checked_sub(Duration::from_secs(u64::from(self.days) * 86_400)).unwrap_or(SystemTime::UNIX_EPOCH);
        let mut out = Vec::new();
        let Ok(agents) = std::fs::read_dir(&self.logs) else { return out };
        for a in agents.flatten() {
            let Ok(files) = std::fs::read_dir(a.path()) else { continue };
            let agent_dir = a.file_name().to_string_lossy().into_owned();
            for f in files.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if !name.ends_with(".jsonl") || name.starts_with('@') {
                    continue;
                }
                let Ok(meta) = f.metadata() else { continue };
                let Ok(mtime) = meta.modified() else { continue };
                if !meta.is_file() || mtime < horizon {
                    continue;
                }
                out.push((f.path(), mtime, meta.len(), format!("{agent_dir}/{name}")));
            }
        }
        out.sort_by_key(|f| std::cmp::Reverse(f.1));
        out.truncate(self.max);
        out
    }

    /// Catches the index up with the folder: new files are read whole (rotated parts
    /// first), grown ones from where they were left, shrunk (rotated) ones again, and files
    /// past the window are forgotten. Queries meanwhile see the previous index; one refresh
    /// runs at a time.
    pub fn refresh(&self) {
        self.refresh_as_of(Instant::now());
    }

    /// [`Self::refresh`] unless one that started at or after `asked` is done: a query then
    /// sees every write finished before it was asked (the page opens its live stream first,
    /// then asks the history, so nothing falls between), and queries arriving together share
    /// one refresh.
    fn refresh_as_of(&self, asked: Instant) {
        let _one = self.refreshing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.refresh_locked(asked);
    }

    /// [`Self::refresh_as_of`], unless the first reading is under way elsewhere: then the
    /// index as read so far (the newest sessions first) answers at once. Returns whether that
    /// first reading is still under way.
    fn catch_up(&self, asked: Instant) -> bool {
        if self.complete.load(Ordering::Acquire) {
            self.refresh_as_of(asked);
            return false;
        }
        match self.refreshing.try_lock() {
            Ok(_one) => {
                self.refresh_locked(asked);
                false
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                drop(p);
                self.refresh_as_of(asked);
                false
            }
            Err(std::sync::TryLockError::WouldBlock) => !self.complete.load(Ordering::Acquire),
        }
    }

    fn refresh_locked(&self, asked: Instant) {
        if self.lock().refreshed.is_some_and(|t| t >= asked) {
            return;
        }
        let started = Instant::now();
        let first = !self.complete.load(Ordering::Acquire);
        let found = self.candidates(SystemTime::now());
        let known: HashMap<PathBuf, (u64, SystemTime, Arc<Summary>)> =
            self.lock().files.iter().map(|(p, e)| (p.clone(), (e.read, e.mtime, e.summary.clone()))).collect();
        let mut keep = HashMap::with_capacity(found.len());
        for (path, mtime, len, rel) in found {
            let entry = match known.get(&path) {
                Some((read, m, summary)) if *read == len && *m == mtime => {
                    Entry { read: *read, mtime, summary: summary.clone(), rel }
                }
                Some((read, _, summary)) if len > *read => {
                    let mut s = (**summary).clone();
                    match fold_lines(&path, *read, |l| {
                        s.add(l);
                    }) {
                        Ok(read) => Entry { read, mtime, summary: Arc::new(s), rel },
                        Err(_) => Entry { read: *read, mtime, summary: summary.clone(), rel },
                    }
                }
                _ => {
                    let mut s = Summary::default();
                    for r in rotated(&path) {
                        let _ = fold_lines(&r, 0, |l| {
                            s.add(l);
                        });
                    }
                    let Ok(read) = fold_lines(&path, 0, |l| {
                        s.add(l);
                    }) else {
                        continue;
                    };
                    Entry { read, mtime, summary: Arc::new(s), rel }
                }
            };
            keep.insert(path, entry);
            if first && keep.len() % PUBLISH_EVERY == 0 {
                let partial: HashMap<PathBuf, Entry> = keep
                    .iter()
                    .map(|(p, e)| {
                        (
                            p.clone(),
                            Entry { read: e.read, mtime: e.mtime, summary: e.summary.clone(), rel: e.rel.clone() },
                        )
                    })
                    .collect();
                self.lock().files = partial;
            }
        }
        let mut idx = self.lock();
        idx.files = keep;
        idx.refreshed = Some(started);
        self.complete.store(true, Ordering::Release);
    }

    /// One page of sessions matching `q` among those `visible` (a login's tenant), newest
    /// activity first (refreshing first).
    pub fn query(&self, q: &Query, visible: &dyn Fn(&Summary) -> bool) -> Page {
        let indexing = self.catch_up(Instant::now());
        let limit = q.limit.unwrap_or(200).clamp(1, 1000);
        let sev = q.severity.as_deref().filter(|s| !s.is_empty()).map(severity_rank);
        let (cursor_ms, cursor_rel) = match q.before.as_deref().and_then(|c| c.split_once('|')) {
            Some((ms, rel)) => (ms.parse::<u64>().ok(), rel.to_owned()),
            None => (None, String::new()),
        };
        let text = q.text.as_deref().map(str::trim).filter(|t| !t.is_empty()).map(str::to_lowercase);
        let (mut list, indexed) = {
            let idx = self.lock();
            let list: Vec<(Arc<Summary>, PathBuf, String)> = idx
                .files
                .iter()
                .filter(|(_, e)| e.summary.is_session())
                .map(|(p, e)| (e.summary.clone(), p.clone(), e.rel.clone()))
                .collect();
            (list, idx.files.len())
        };
        list.sort_by(|a, b| b.0.last.cmp(&a.0.last).then_with(|| a.2.cmp(&b.2)));
        let filtered = list.into_iter().filter(|(s, _, rel)| {
            if let Some(ms) = cursor_ms
                && (s.last > ms || (s.last == ms && *rel <= cursor_rel))
            {
                return false;
            }
            visible(s)
                && q.agent.as_deref().is_none_or(|a| a.is_empty() || s.agent == a)
                && q.session.as_deref().is_none_or(|x| s.session.contains(x))
                && q.ty.as_deref().is_none_or(|t| s.types.iter().any(|x| x.starts_with(t)))
                && sev.is_none_or(|v| severity_rank(s.severity) >= v)
                && q.since.is_none_or(|since| s.last >= since)
        });
        let matcher = text
            .as_deref()
            .map(|t| regex::bytes::RegexBuilder::new(&regex::escape(t)).case_insensitive(true).unicode(true).build());
        let mut page = Page { sessions: Vec::new(), next: None, indexed, scanned: 0, partial: false, indexing };
        let mut last_key = None;
        for (s, path, rel) in filtered {
            if page.sessions.len() >= limit {
                page.next = last_key;
                return page;
            }
            if page.scanned >= SEARCH_BUDGET {
                page.partial = true;
                page.next = last_key;
                return page;
            }
            last_key = Some(format!("{}|{rel}", s.last));
            let hit = match (&text, &matcher) {
                (Some(t), Some(Ok(re))) => s.names(t) || self.grep(&path, re, &mut page.scanned),
                _ => true,
            };
            if hit {
                page.sessions.push(s);
            }
        }
        page
    }

    /// Whether any line of the session's log (rotated parts included) matches `re`, read in
    /// chunks of whole lines.
    fn grep(&self, path: &Path, re: &regex::bytes::Regex, scanned: &mut u64) -> bool {
        let mut parts = rotated(path);
        parts.push(path.to_owned());
        parts.iter().rev().any(|p| {
            let mut hit = false;
            let _ = scan_chunks(p, |chunk| {
                *scanned += chunk.len() as u64;
                hit = re.is_match(chunk);
                !hit
            });
            hit
        })
    }

    /// A page of one session's events, newest first, from the end of its log (or from
    /// `before`, a previous page's `next`), at most `limit` events and about
    /// [`EVENTS_BUDGET`] bytes; rotated parts follow the current file.
    pub fn events(
        &self,
        agent: &str,
        session: &str,
        before: Option<&str>,
        limit: usize,
    ) -> Result<EventsPage, HistoryError> {
        let root = self.logs.parent().unwrap_or(&self.logs);
        let main = crate::sinks::jsonl::log_path(root, agent, Some(session));
        if !main.is_file() {
            return Err(HistoryError::NotFound);
        }
        let mut parts = vec![main.clone()];
        parts.extend(rotated(&main).into_iter().rev());
        let (mut part, mut end) = match before {
            None => (0usize, None),
            Some(c) => {
                let bad = || HistoryError::BadCursor(c.to_owned());
                let (p, o) = c.split_once(':').ok_or_else(bad)?;
                (p.parse().map_err(|_| bad())?, Some(o.parse::<u64>().map_err(|_| bad())?))
            }
        };
        let limit = limit.clamp(1, 1000);
        let mut lines = Vec::new();
        let mut bytes = 0usize;
        while part < parts.len() {
            let mut f = File::open(&parts[part])?;
            let len = f.metadata()?.len();
            let mut stop = end.unwrap_or(len).min(len);
            if end.is_none() {
                // The current file may end in a line being written: not yet.
                stop = last_newline(&mut f, stop)?;
            }
            // Read backwards in chunks, splitting complete lines.
            let mut tail: Vec<u8> = Vec::new();
            let mut pos = stop;
            loop {
                if lines.len() >= limit || (bytes >= EVENTS_BUDGET && !lines.is_empty()) {
                    let next = pos + tail.len() as u64;
                    return Ok(EventsPage { lines, next: Some(format!("{part}:{next}")) });
                }
                if let Some(i) = memchr::memrchr(b'\n', &tail[..tail.len().saturating_sub(1)]) {
                    let line = tail.split_off(i + 1);
                    push_line(&mut lines, &mut bytes, line);
                    continue;
                }
                if pos == 0 {
                    if !tail.is_empty() {
                        push_line(&mut lines, &mut bytes, std::mem::take(&mut tail));
                    }
                    break;
                }
                let n = (CHUNK as u64).min(pos);
                pos -= n;
                let mut chunk = vec![0u8; n as usize];
                f.seek(SeekFrom::Start(pos))?;
                f.read_exact(&mut chunk)?;
                chunk.extend_from_slice(&tail);
                tail = chunk;
            }
            part += 1;
            end = None;
            if part < parts.len() {
                // Older parts were complete when rotated.
                end = Some(u64::MAX);
            }
        }
        Ok(EventsPage { lines, next: None })
    }
}

/// Keeps a complete, parseable event line (trailing newline dropped).
fn push_line(lines: &mut Vec<Vec<u8>>, bytes: &mut usize, mut line: Vec<u8>) {
    while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        line.pop();
    }
    if line.is_empty() || serde_json::from_slice::<serde::de::IgnoredAny>(&line).is_err() {
        return;
    }
    *bytes += line.len();
    lines.push(line);
}

/// The offset just past the last newline at or before `len`.
fn last_newline(f: &mut File, len: u64) -> std::io::Result<u64> {
    let mut pos = len;
    let mut buf = vec![0u8; 64 * 1024];
    while pos > 0 {
        let n = (buf.len() as u64).min(pos);
        pos -= n;
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut buf[..n as usize])?;
        if let Some(i) = memchr::memrchr(b'\n', &buf[..n as usize]) {
            return Ok(pos + i as u64 + 1);
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::io::Write as _;

    fn line(ty: &str, seq: u64, t: &str, data: Value) -> String {
        let mut e = json!({"aep": "0.1", "id": format!("E{seq}"), "type": ty, "time": t,
            "source": "aep://h/agent/a/session/s1", "agent": "a", "session": "s1", "seq": seq, "data": data});
        if ty.starts_with("run.") {
            e["run"] = json!("r1");
        }
        format!("{e}\n")
    }

    fn write(dir: &Path, agent: &str, session: &str, body: &str) -> PathBuf {
        let p = dir.join("logs").join(agent).join(format!("{session}.jsonl"));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::OpenOptions::new().create(true).append(true).open(&p).unwrap().write_all(body.as_bytes()).unwrap();
        p
    }

    fn fresh(h: &History) {
        h.lock().refreshed = None;
    }

    #[test]
    fn a_summary_counts_runs_tools_tokens_and_open_requests() {
        let dir = tempfile::tempdir().unwrap();
        let mut body = line("session.started", 1, "2026-07-03T10:00:00Z", json!({"label": "fix the build"}));
        body += &line("run.started", 2, "2026-07-03T10:00:01Z", json!({}));
        body += &line("tool.requested", 3, "2026-07-03T10:00:02Z", json!({"tool": {"name": "Bash"}}));
        body += &line("tool.failed", 4, "2026-07-03T10:00:03Z", json!({"tool": {"name": "Bash"}}));
        body += &line("attention.requested", 5, "2026-07-03T10:00:04Z", json!({"kind": "permission"}));
        body += &line("attention.requested", 6, "2026-07-03T10:00:05Z", json!({"kind": "permission"}));
        let mut resolved: Value =
            serde_json::from_str(&line("attention.resolved", 7, "2026-07-03T10:00:06Z", json!({}))).unwrap();
        resolved["subject"] = json!("E5");
        body += &format!("{resolved}\n");
        body += &line(
            "run.finished",
            8,
            "2026-07-03T10:00:09Z",
            json!({"duration_ms": 8000, "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 45,
                "cost": {"currency": "USD", "total": 0.5}}),
        );
        write(dir.path(), "a", "s1", &body);
        let h = History::new(dir.path().join("logs"), 36500, 100);
        let page = h.query(&Query::default(), &|_| true);
        assert_eq!(page.sessions.len(), 1);
        let s = &page.sessions[0];
        assert_eq!((s.agent.as_str(), s.session.as_str(), s.label.as_str()), ("a", "s1", "fix the build"));
        assert_eq!((s.events, s.runs, s.tools, s.failed, s.pos), (8, 1, 1, 1, Some((0, 8))));
        assert_eq!((s.tokens.run_in, s.tokens.run_out, s.tokens.run_cost["USD"]), (120, 45, 0.5));
        let run = s.run.as_ref().unwrap();
        assert_eq!((run.status.as_str(), run.end.unwrap() - run.start), ("finished", 8000));
        assert_eq!(s.open.len(), 1, "the resolved request is no longer open");
        assert!(s.open[0].get().contains("\"E6\""));
        assert_eq!(s.severity, "warning");
    }

    #[test]
    fn a_query_sees_every_session_written_before_it_was_asked() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a", "s1", &line("session.started", 1, "2026-07-03T10:00:00Z", json!({})));
        let h = History::new(dir.path().join("logs"), 36500, 100);
        assert_eq!(h.query(&Query::default(), &|_| true).sessions.len(), 1);
        // Written right after that answer (the page opened its live stream in between), then
        // asked for: in the next answer, not left for a later refresh.
        write(dir.path(), "a", "s2", &line("session.started", 1, "2026-07-03T10:00:01Z", json!({})));
        assert_eq!(h.query(&Query::default(), &|_| true).sessions.len(), 2, "the new session is in the next answer");
    }

    #[test]
    fn a_torn_last_line_is_not_yet_and_growth_is_read_incrementally() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "a", "s1", &line("session.started", 1, "2026-07-03T10:00:00Z", json!({})));
        let second = line("run.started", 2, "2026-07-03T10:00:01Z", json!({}));
        let (head, rest) = second.split_at(30);
        write(dir.path(), "a", "s1", head);
        let h = History::new(dir.path().join("logs"), 36500, 100);
        assert_eq!(h.query(&Query::default(), &|_| true).sessions[0].events, 1, "the torn line is not counted");
        let page = h.events("a", "s1", None, 10).unwrap();
        assert_eq!(page.lines.len(), 1, "nor served");
        write(dir.path(), "a", "s1", rest);
        fresh(&h);
        let s = h.query(&Query::default(), &|_| true).sessions[0].clone();
        assert_eq!((s.events, s.runs), (2, 1));
        assert_eq!(h.lock().files[&p].read, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn pages_go_back_by_time_and_filter_by_agent_and_text() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..30u64 {
            let agent = if i % 3 == 0 { "b" } else { "a" };
            let t = format!("2026-07-03T10:{i:02}:00Z");
            let mut body = line("session.started", 1, &t, json!({}));
            let word = if i == 7 { "needle-in-a-haystack" } else { "hay" };
            body += &line("progress.status", 2, &t, json!({"message": word}));
            let body = body
                .replace("\"s1\"", &format!("\"s{i:02}\""))
                .replace("\"agent\":\"a\"", &format!("\"agent\":\"{agent}\""));
            write(dir.path(), agent, &format!("s{i:02}"), &body);
        }
        let h = History::new(dir.path().join("logs"), 36500, 1000);
        let q = Query { limit: Some(10), ..Default::default() };
        let p1 = h.query(&q, &|_| true);
        assert_eq!(p1.sessions.iter().map(|s| s.session.as_str()).collect::<Vec<_>>()[..3], ["s29", "s28", "s27"]);
        let p2 = h.query(&Query { before: p1.next.clone(), ..q.clone() }, &|_| true);
        assert_eq!(p2.sessions[0].session, "s19");
        let p3 = h.query(&Query { before: p2.next.clone(), ..q.clone() }, &|_| true);
        assert_eq!((p3.sessions.len(), p3.sessions[9].session.as_str(), p3.next.as_deref()), (10, "s00", None));
        let b = h.query(&Query { agent: Some("b".into()), ..Default::default() }, &|_| true);
        assert_eq!(b.sessions.len(), 10);
        let found = h.query(&Query { text: Some("NEEDLE-in".into()), ..Default::default() }, &|_| true);
        assert_eq!(found.sessions.iter().map(|s| s.session.as_str()).collect::<Vec<_>>(), ["s07"]);
        assert!(found.scanned > 0);
        let by_type = h.query(&Query { ty: Some("progress.".into()), since: Some(0), ..Default::default() }, &|_| true);
        assert_eq!(by_type.sessions.len(), 30);
    }

    #[test]
    fn a_sessions_events_page_back_through_rotated_parts() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = String::new();
        for i in 1..=5 {
            old += &line("progress.status", i, "2026-07-03T10:00:00Z", json!({"message": i}));
        }
        let p = write(dir.path(), "a", "s1", &old);
        std::fs::rename(&p, format!("{}.1", p.display())).unwrap();
        let mut new = String::new();
        for i in 6..=8 {
            new += &line("progress.status", i, "2026-07-03T10:00:00Z", json!({"message": i}));
        }
        write(dir.path(), "a", "s1", &new);
        let h = History::new(dir.path().join("logs"), 36500, 100);
        let seqs = |page: &EventsPage| -> Vec<u64> {
            page.lines.iter().map(|l| serde_json::from_slice::<Value>(l).unwrap()["seq"].as_u64().unwrap()).collect()
        };
        let a = h.events("a", "s1", None, 4).unwrap();
        assert_eq!(seqs(&a), [8, 7, 6, 5]);
        let b = h.events("a", "s1", a.next.as_deref(), 10).unwrap();
        assert_eq!((seqs(&b), b.next), (vec![4, 3, 2, 1], None));
        assert_eq!(
            h.query(&Query::default(), &|_| true).sessions[0].events,
            8,
            "the summary reads the rotated part too"
        );
        assert!(matches!(h.events("a", "nope", None, 4), Err(HistoryError::NotFound)));
        assert!(matches!(h.events("a", "s1", Some("x"), 4), Err(HistoryError::BadCursor(_))));
    }
}
