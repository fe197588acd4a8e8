//! The JSONL logs as the exporters' write-ahead log.
//!
//! Every event the bridge acknowledges to an agent is first a line in its session's log
//! (`{data}/logs/{agent}/{session}.jsonl`, [`crate::sinks::jsonl`]): a hook is answered once
//! its line is written. A durable exporter reads those lines back instead of taking events
//! from a queue in memory, and keeps, per log, how far its peer has taken them in
//! `{data}/state/export/{sink}.json` (replaced atomically, at most once a second and at
//! shutdown). So a peer that is away for hours, or a bridge restart, costs no event: the
//! exporter stops reading while its peer is away and resumes from its cursors.
//!
//! A cursor names a *generation* of a log, not a path: the hash of its first line (which a
//! rotation's rename to `{session}.jsonl.1` keeps) and the bytes taken of it. Rotation
//! (`[jsonl] rotate_bytes`, `rotate_keep`) is the disk budget: an exporter can fall
//! behind by up to `rotate_keep` whole generations of one session; when the rotation
//! deletes a generation an exporter had not read to its end, the lines it had not read are
//! counted in `aep_bridge_export_lost_total{sink, reason="rotated"}` and the exporter goes
//! on with the oldest generation left. The logs are written whether or not anything is
//! exported: the exporters' own state is only their cursors.
//!
//! A last line without its newline is a line being written: "not yet", never an error. A
//! complete line that is not an event (a line torn by a crash, then appended to) is
//! skipped and counted in `aep_bridge_export_unreadable_total{sink}`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fs::{self, File};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::Metrics;
use crate::pipeline::Stamped;

/// Where an exporter is in one session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cursor {
    /// The generation: a hash of its first line (never 0); 0 before anything was read,
    /// which starts at the oldest generation kept.
    pub head: u64,
    /// Bytes of that generation taken (always the end of a line).
    pub off: u64,
}

/// FNV-1a, 64 bits: a generation's name from its first line (0 is kept for "none").
fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// The generation name of an open log: the hash of its first complete line, 0 when it
/// has none yet.
fn head_of(f: &mut File) -> std::io::Result<u64> {
    f.seek(SeekFrom::Start(0))?;
    let mut h = FNV_OFFSET;
    let mut buf = [0u8; 8192];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(0);
        }
        if let Some(nl) = buf[..n].iter().position(|b| *b == b'\n') {
            let h = fnv(&buf[..=nl], h);
            return Ok(if h == 0 { 1 } else { h });
        }
        h = fnv(&buf[..n], h);
    }
}

/// `{base}.{n}`: the `n`th rotated generation of a log (the JSONL sink's naming).
fn rotated(base: &Path, n: u32) -> PathBuf {
    let mut s = base.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// The generations of a log, oldest first: `{base}.N` ... `{base}.1`, `{base}`.
fn generations(base: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for n in 1..=100_000 {
        let p = rotated(base, n);
        if !p.exists() {
            break;
        }
        v.push(p);
    }
    v.reverse();
    if base.exists() {
        v.push(base.to_owned());
    }
    v
}

/// One reader of the log: a durable exporter.
#[derive(Debug)]
pub struct Subscriber {
    name: &'static str,
    /// Logs written since the reader last looked (base paths).
    dirty: Mutex<HashSet<PathBuf>>,
    wake: Notify,
    /// How far the reader has read each log: what a rotation would lose is counted from it.
    read: Mutex<HashMap<PathBuf, Cursor>>,
    /// How far its peer has taken each log: what is written to its state file.
    acked: Mutex<HashMap<PathBuf, Cursor>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The log as the JSONL sink writes it and the durable exporters read it: which logs have
/// new lines (the sink says after each batch), whether the sink has stopped, and each
/// exporter's position (see the module doc).
#[derive(Debug)]
pub struct Wal {
    logs: PathBuf,
    state: PathBuf,
    subs: RwLock<Vec<Arc<Subscriber>>>,
    closed: AtomicBool,
    metrics: Arc<Metrics>,
}

impl Wal {
    /// The log below `data_dir` (`logs/`, the JSONL sink's root), the exporters' cursors in
    /// `state/export/`.
    pub fn new(data_dir: &Path, metrics: Arc<Metrics>) -> Arc<Self> {
        Arc::new(Self {
            logs: data_dir.join("logs"),
            state: data_dir.join("state").join("export"),
            subs: RwLock::new(Vec::new()),
            closed: AtomicBool::new(false),
            metrics,
        })
    }

    fn subs(&self) -> Vec<Arc<Subscriber>> {
        self.subs.read().map(|v| v.clone()).unwrap_or_default()
    }

    /// The JSONL sink appended whole lines to these logs (called once per written batch,
    /// from its thread).
    pub fn written(&self, logs: &[PathBuf]) {
        if logs.is_empty() {
            return;
        }
        for s in self.subs() {
            lock(&s.dirty).extend(logs.iter().cloned());
            s.wake.notify_one();
        }
    }

    /// The JSONL sink is about to delete `doomed`, the oldest generation of `base` (a
    /// rotation): every reader that had not read it to its end loses the rest, counted.
    pub fn rotating(&self, base: &Path, doomed: &Path) {
        let subs = self.subs();
        if subs.is_empty() {
            return;
        }
        let Ok(mut f) = File::open(doomed) else { return };
        let Ok(head) = head_of(&mut f) else { return };
        // The other generations kept: a reader in one of them has read past `doomed`.
        let kept: HashSet<u64> = generations(base)
            .iter()
            .filter(|p| p.as_path() != doomed)
            .filter_map(|p| File::open(p).ok().and_then(|mut g| head_of(&mut g).ok()))
            .collect();
        for s in subs {
            let at = lock(&s.read).get(base).copied().unwrap_or_default();
            let from = if at.head == head {
                at.off
            } else if at.head != 0 && kept.contains(&at.head) {
                continue;
            } else {
                // Not started, or its generation was deleted before: all of `doomed` is unread.
                0
            };
            let lost = count_lines(&mut f, from);
            if lost > 0 {
                self.metrics.export_lost.add(&[("sink", s.name), ("reason", "rotated")], lost);
                tracing::warn!(sink = s.name, log = %base.display(), lost,
                    "A log generation was rotated away before this exporter read it: its unread events are lost.");
            }
        }
    }

    /// The JSONL sink has written its last line: the readers finish.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for s in self.subs() {
            s.wake.notify_one();
        }
    }

    fn subscribe(&self, name: &'static str) -> Arc<Subscriber> {
        let s = Arc::new(Subscriber {
            name,
            dirty: Mutex::default(),
            wake: Notify::new(),
            read: Mutex::default(),
            acked: Mutex::default(),
        });
        if let Ok(mut v) = self.subs.write() {
            v.push(s.clone());
        }
        s
    }
}

/// Complete lines of `f` from byte `from` on.
fn count_lines(f: &mut File, from: u64) -> u64 {
    if f.seek(SeekFrom::Start(from)).is_err() {
        return 0;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    while let Ok(k) = f.read(&mut buf) {
        if k == 0 {
            break;
        }
        n += buf[..k].iter().filter(|b| **b == b'\n').count() as u64;
    }
    n
}

/// Bytes read from a log at once (a longer line is read whole all the same).
const READ_CHUNK: usize = 1 << 20;

/// The blocking half of a [`Tail`]: reads and parses lines (on the blocking pool).
#[derive(Debug)]
struct Reader {
    /// Read positions, by log.
    pos: HashMap<PathBuf, Cursor>,
    /// Lines that were not events.
    unreadable: u64,
    /// Times a cursor's generation was gone (deleted outside the bridge): logged.
    gaps: u64,
}

/// How a generation was found.
enum Found {
    /// Open at this generation and offset.
    At(File, Cursor),
    /// The log has no line yet.
    Empty,
}

impl Reader {
    /// Opens the generation `cur` names (the oldest when it names none, or when it is gone).
    fn open_at(&mut self, base: &Path, cur: Cursor) -> Found {
        // Newest first: a reader that keeps up finds its generation at once.
        let mut oldest: Option<(File, u64)> = None;
        for p in generations(base).iter().rev() {
            let Ok(mut f) = File::open(p) else { continue };
            let head = head_of(&mut f).unwrap_or(0);
            if head == 0 {
                continue;
            }
            if cur.head != 0 && head == cur.head {
                return Found::At(f, cur);
            }
            oldest = Some((f, head));
        }
        if cur.head != 0 {
            self.gaps += 1;
            tracing::warn!(log = %base.display(), "The generation an exporter was reading is gone; going on with the oldest kept.");
        }
        match oldest {
            Some((f, head)) => Found::At(f, Cursor { head, off: 0 }),
            None => Found::Empty,
        }
    }

    /// The generation after `head` of `base`, if one with a first line exists.
    fn newer_than(base: &Path, head: u64) -> Option<u64> {
        let mut seen = false;
        for p in generations(base) {
            let Ok(mut f) = File::open(&p) else { continue };
            let h = head_of(&mut f).unwrap_or(0);
            if seen {
                return (h != 0).then_some(h);
            }
            seen = h == head;
        }
        None
    }

    /// Reads lines of `base` after `cur`, parsed, into `out`: up to `max` events, and up to
    /// `stop` when given (warm-up). Returns the position after the last line taken and
    /// whether the log was read to its current end.
    fn read_log(
        &mut self,
        base: &Path,
        mut cur: Cursor,
        max: usize,
        stop: Option<Cursor>,
        out: &mut Vec<Arc<Stamped>>,
    ) -> (Cursor, bool) {
        let limit = out.len().saturating_add(max.max(1));
        for _ in 0..64 {
            let (mut f, at) = match self.open_at(base, cur) {
                Found::At(f, at) => (f, at),
                Found::Empty => return (cur, true),
            };
            cur = at;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let mut end = len;
            if let Some(s) = stop.filter(|s| s.head == cur.head) {
                end = end.min(s.off);
            }
            if end <= cur.off {
                // Read to the end of this generation: on to a newer one, if any.
                if stop.is_some_and(|s| s.head == cur.head) {
                    return (cur, true);
                }
                match Self::newer_than(base, cur.head) {
                    Some(next) => {
                        cur = Cursor { head: next, off: 0 };
                        continue;
                    }
                    None => return (cur, true),
                }
            }
            let want = usize::try_from(end - cur.off).unwrap_or(usize::MAX);
            let data = match read_lines_from(&mut f, cur.off, want.min(READ_CHUNK), want) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(log = %base.display(), error = %e, "Cannot read a log; trying again later.");
                    return (cur, true);
                }
            };
            // Read to the generation's (current) end, or a chunk of it.
            let read_all = data.len() == want;
            let mut data = data;
            if read_all {
                // The rule of every reader of a live log (`aep_schemas::jsonl`): a last line
                // without its newline is "not yet", unless it is a finished JSON value
                // anyway (then taken as if its newline were there; a newline written after
                // it reads as a blank line).
                let nl = data.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
                if nl < data.len() && aep_schemas::jsonl::complete_len(&data[nl..]) == data.len() - nl {
                    data.push(b'\n');
                }
            }
            let took = data.len().min(want);
            let data = Bytes::from(data);
            let mut pos = 0usize;
            while let Some(nl) = data[pos..].iter().position(|b| *b == b'\n') {
                let line = data.slice(pos..pos + nl + 1);
                pos += nl + 1;
                match aep_schemas::event::event_from_slice_strict(&line[..line.len() - 1]) {
                    Ok(Ok(ev)) => out.push(Arc::new(Stamped::with_line(ev, line))),
                    _ if line.iter().all(u8::is_ascii_whitespace) => {}
                    _ => self.unreadable += 1,
                }
                if out.len() >= limit {
                    cur.off += pos.min(took) as u64;
                    return (cur, false);
                }
            }
            cur.off += pos.min(took) as u64;
            if cur.off < end {
                // More bytes than one chunk: the caller comes back.
                if !read_all {
                    return (cur, false);
                }
                // A last line being written (not yet), unless a newer generation exists:
                // a rotated file is final, its torn tail skipped and counted.
                match Self::newer_than(base, cur.head) {
                    Some(next) if stop.is_none_or(|s| s.head != cur.head) => {
                        self.unreadable += 1;
                        cur = Cursor { head: next, off: 0 };
                        continue;
                    }
                    _ => return (cur, true),
                }
            }
        }
        (cur, false)
    }
}

/// Reads from `off` at least `min` bytes (whole lines: more until a newline, if the first
/// `min` end inside a line), at most `max`; stops at a partial last line.
fn read_lines_from(f: &mut File, off: u64, min: usize, max: usize) -> std::io::Result<Vec<u8>> {
    f.seek(SeekFrom::Start(off))?;
    let mut buf = Vec::with_capacity(min.min(READ_CHUNK));
    let mut chunk = min.max(1);
    loop {
        let before = buf.len();
        let take = chunk.min(max - before);
        (&mut *f).take(take as u64).read_to_end(&mut buf)?;
        let got = buf.len() - before;
        if got == 0 || buf.len() >= max || buf[before..].contains(&b'\n') {
            return Ok(buf);
        }
        // One line longer than a chunk: read on until its newline.
        chunk = chunk.saturating_mul(2);
    }
}

/// The lines one [`Tail::next`] took.
#[derive(Debug, Default)]
pub struct Batch {
    /// The events, in log order per log.
    pub events: Vec<Arc<Stamped>>,
    /// For each event, the index of its log in `logs`.
    pub from: Vec<u32>,
    /// The logs read, each with the position after its last line in this batch.
    pub logs: Vec<(PathBuf, Cursor)>,
    /// Events before a log's cursor, read again on this run's first look at it, for an
    /// exporter whose output depends on the session so far (the logs sink's placement of
    /// records on spans): seen, not sent.
    pub warm: Vec<Arc<Stamped>>,
}

/// Most events read for warm-up at once.
const WARM_MAX: usize = 1 << 20;

/// How often the cursors are written while they move.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// A durable exporter's reader of the log (see the module doc).
#[derive(Debug)]
pub struct Tail {
    wal: Arc<Wal>,
    sub: Arc<Subscriber>,
    reader: Option<Reader>,
    pending: VecDeque<PathBuf>,
    queued: HashSet<PathBuf>,
    state_file: PathBuf,
    last_save: Instant,
    unsaved: bool,
    complete_before_ms: u64,
    warm: bool,
    warmed: HashSet<PathBuf>,
    metrics: Arc<Metrics>,
    reported: u64,
}

/// The state file: cursors by log path relative to `logs/`.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    version: u32,
    /// Logs last written before this (Unix ms) and missing from `logs` were read to their
    /// end (entries of logs idle for a day are pruned).
    complete_before_ms: u64,
    /// `path -> [generation (hex), offset]`.
    logs: std::collections::BTreeMap<String, (String, u64)>,
}

/// A day: how long an idle, fully read log keeps its entry.
const PRUNE_AFTER_MS: u64 = 24 * 3600 * 1000;

fn mtime_ms(p: &Path) -> u64 {
    fs::metadata(p)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Every log below `logs/` (base paths: rotated generations name their base).
fn all_logs(logs: &Path) -> Vec<PathBuf> {
    let mut out = HashSet::new();
    let Ok(agents) = fs::read_dir(logs) else { return Vec::new() };
    for a in agents.flatten() {
        let Ok(files) = fs::read_dir(a.path()) else { continue };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let base = match name.rfind(".jsonl") {
                Some(i) if name.len() == i + 6 => name.clone(),
                Some(i) if name[i + 6..].strip_prefix('.').is_some_and(|n| n.parse::<u32>().is_ok()) => {
                    name[..i + 6].to_owned()
                }
                _ => continue,
            };
            out.insert(a.path().join(base));
        }
    }
    let mut v: Vec<PathBuf> = out.into_iter().collect();
    v.sort();
    v
}

/// The end of a log's newest generation with a line (where a first run starts).
fn end_of(base: &Path) -> Cursor {
    for p in generations(base).iter().rev() {
        let Ok(mut f) = File::open(p) else { continue };
        let head = head_of(&mut f).unwrap_or(0);
        if head != 0 {
            return Cursor { head, off: f.metadata().map(|m| m.len()).unwrap_or(0) };
        }
    }
    Cursor::default()
}

impl Tail {
    /// The reader of exporter `name`: its cursors from its state file. On its first run
    /// (no state file) it starts at the end of every log (the history is not exported);
    /// afterwards a log it has no cursor for is read from its start, unless it was last
    /// written before the state's `complete_before_ms`. `warm`: hand back what lies before
    /// each cursor on the first look at a log ([`Batch::warm`]).
    pub fn open(wal: Arc<Wal>, name: &'static str, warm: bool) -> Tail {
        // Subscribed first: a line written while the state loads is seen as new.
        let sub = wal.subscribe(name);
        let state_file = wal.state.join(format!("{name}.json"));
        let (cursors, pending, complete_before_ms, fresh) = load(&wal.logs, &state_file);
        lock(&sub.acked).extend(cursors.iter().map(|(k, v)| (k.clone(), *v)));
        lock(&sub.read).extend(cursors.iter().map(|(k, v)| (k.clone(), *v)));
        let metrics = wal.metrics.clone();
        let mut t = Tail {
            wal,
            sub,
            reader: Some(Reader { pos: cursors, unreadable: 0, gaps: 0 }),
            pending: VecDeque::new(),
            queued: HashSet::new(),
            state_file,
            last_save: Instant::now(),
            unsaved: fresh,
            complete_before_ms,
            warm,
            warmed: HashSet::new(),
            metrics,
            reported: 0,
        };
        for p in pending {
            t.enqueue(p);
        }
        if fresh {
            // The first run's starting points, written at once: a crash before the first
            // save does not make the next start take the history for new.
            match write_state(&t.state_file, &t.state()) {
                Ok(()) => t.unsaved = false,
                Err(e) => tracing::error!(sink = name, error = %e, "Cannot write the exporter's cursors."),
            }
        }
        t
    }

    fn enqueue(&mut self, base: PathBuf) {
        if self.queued.insert(base.clone()) {
            self.pending.push_back(base);
        }
    }

    fn take_dirty(&mut self) {
        let dirty = std::mem::take(&mut *lock(&self.sub.dirty));
        for p in dirty {
            self.enqueue(p);
        }
    }

    /// Reads pending logs into `batch` until it holds `max` events or nothing is left;
    /// returns whether any position moved.
    async fn read_into(&mut self, batch: &mut Batch, max: usize) -> bool {
        let Some(mut reader) = self.reader.take() else { return false };
        let todo: Vec<PathBuf> = self.pending.iter().cloned().collect();
        let warm: Vec<bool> = todo.iter().map(|p| self.warm && !self.warmed.contains(p)).collect();
        let room = max.saturating_sub(batch.events.len());
        let job = tokio::task::spawn_blocking(move || {
            let mut got = Batch::default();
            let mut done = Vec::new();
            for (base, warm) in todo.into_iter().zip(warm) {
                if got.events.len() >= room {
                    break;
                }
                let cur = reader.pos.get(&base).copied().unwrap_or_default();
                if warm && cur != Cursor::default() {
                    let mut at = Cursor::default();
                    loop {
                        let (next, all) = reader.read_log(&base, at, WARM_MAX, Some(cur), &mut got.warm);
                        if all || next == at {
                            break;
                        }
                        at = next;
                    }
                }
                let before = got.events.len();
                let (next, all) = reader.read_log(&base, cur, room - before, None, &mut got.events);
                if got.events.len() > before || next != cur {
                    reader.pos.insert(base.clone(), next);
                    let i = got.logs.len() as u32;
                    got.from.extend(std::iter::repeat_n(i, got.events.len() - before));
                    got.logs.push((base.clone(), next));
                }
                done.push((base, all));
            }
            (reader, got, done)
        });
        let (reader, got, done) = match job.await {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(error = %e, "The log reader failed.");
                return false;
            }
        };
        self.reader = Some(reader);
        self.report_counts();
        for (base, all) in done {
            if self.warm {
                self.warmed.insert(base.clone());
            }
            if all {
                self.queued.remove(&base);
                self.pending.retain(|p| *p != base);
            } else if let Some(i) = self.pending.iter().position(|p| *p == base) {
                // Round robin: a long log does not hold up the others.
                let p = self.pending.remove(i).unwrap_or(base);
                self.pending.push_back(p);
            }
        }
        {
            let mut read = lock(&self.sub.read);
            for (base, c) in &got.logs {
                read.insert(base.clone(), *c);
            }
        }
        let moved = !got.logs.is_empty();
        let offset = batch.logs.len() as u32;
        batch.from.extend(got.from.into_iter().map(|i| i + offset));
        batch.events.extend(got.events);
        batch.logs.extend(got.logs);
        batch.warm.extend(got.warm);
        moved
    }

    fn report_counts(&mut self) {
        let Some(r) = &self.reader else { return };
        if r.unreadable > self.reported {
            self.metrics.export_unreadable.add(&[("sink", self.sub.name)], r.unreadable - self.reported);
            self.reported = r.unreadable;
        }
    }

    /// The next batch: waits up to `idle` for a first line (an empty batch on timeout),
    /// then up to `linger` for the batch to reach `max`. The flag is true once the JSONL
    /// sink has stopped and every line it wrote was read.
    pub async fn next(&mut self, max: usize, linger: Duration, idle: Duration) -> (Batch, bool) {
        let max = max.max(1);
        let mut batch = Batch::default();
        let idle_until = Instant::now() + idle;
        let mut linger_until: Option<Instant> = None;
        loop {
            let closed = self.wal.closed.load(Ordering::Acquire);
            self.take_dirty();
            if !self.pending.is_empty() {
                let moved = self.read_into(&mut batch, max).await;
                if batch.events.len() >= max {
                    return (batch, false);
                }
                if moved && !self.pending.is_empty() {
                    continue;
                }
            }
            if closed && self.pending.is_empty() && lock(&self.sub.dirty).is_empty() {
                return (batch, true);
            }
            let until = if batch.events.is_empty() {
                idle_until
            } else {
                *linger_until.get_or_insert_with(|| Instant::now() + linger)
            };
            let now = Instant::now();
            if now >= until {
                return (batch, false);
            }
            // Cursors moved and the log is quiet: write them down now.
            if self.unsaved && self.last_save.elapsed() >= SAVE_EVERY {
                self.save().await;
            }
            let nap = (until - now).min(SAVE_EVERY);
            let _ = tokio::time::timeout(nap, self.sub.wake.notified()).await;
        }
    }

    /// The peer took everything of these logs up to these positions.
    pub async fn ack(&mut self, logs: &[(PathBuf, Cursor)]) {
        if logs.is_empty() {
            return;
        }
        {
            let mut acked = lock(&self.sub.acked);
            for (base, c) in logs {
                acked.insert(base.clone(), *c);
            }
        }
        self.unsaved = true;
        if self.last_save.elapsed() >= SAVE_EVERY {
            self.save().await;
        }
    }

    fn state(&self) -> State {
        State {
            version: 1,
            complete_before_ms: self.complete_before_ms,
            logs: lock(&self.sub.acked)
                .iter()
                .filter_map(|(p, c)| {
                    let rel = p.strip_prefix(&self.wal.logs).ok()?.to_str()?.to_owned();
                    Some((rel, (format!("{:016x}", c.head), c.off)))
                })
                .collect(),
        }
    }

    /// Writes the cursors to the state file (a temporary file, fsynced, renamed over it).
    pub async fn save(&mut self) {
        let state = self.state();
        let path = self.state_file.clone();
        let written = tokio::task::spawn_blocking(move || write_state(&path, &state)).await;
        match written {
            Ok(Ok(())) => {
                self.unsaved = false;
            }
            Ok(Err(e)) => {
                tracing::error!(sink = self.sub.name, path = %self.state_file.display(), error = %e,
                    "Cannot write the exporter's cursors; events may be sent again after a restart.");
            }
            Err(_) => {}
        }
        self.last_save = Instant::now();
    }

    /// Whether the cursors moved since they were last written.
    pub fn unsaved(&self) -> bool {
        self.unsaved
    }
}

fn write_state(path: &Path, state: &State) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(state).map_err(std::io::Error::other)?;
    let written = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, path)?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// What [`Tail::open`] starts from: the cursors, the logs with something to read, the
/// state's `complete_before_ms`, and whether this is the exporter's first run.
type Loaded = (HashMap<PathBuf, Cursor>, Vec<PathBuf>, u64, bool);

/// Reads the state file and compares it with the logs on disk (see [`Tail::open`]).
fn load(logs: &Path, state_file: &Path) -> Loaded {
    let state: Option<State> = match fs::read(state_file) {
        Ok(b) => match serde_json::from_slice(&b) {
            Ok(s) => Some(s),
            Err(e) => {
                // Unreadable cursors: every log is read from its start (sent again, never lost).
                tracing::error!(path = %state_file.display(), error = %e, "Exporter cursors unreadable; reading every log from its start.");
                Some(State::default())
            }
        },
        Err(_) => None,
    };
    let fresh = state.is_none();
    let state = state.unwrap_or_default();
    let mut cursors = HashMap::new();
    for (rel, (head, off)) in &state.logs {
        let Ok(head) = u64::from_str_radix(head, 16) else { continue };
        cursors.insert(logs.join(rel), Cursor { head, off: *off });
    }
    let now = crate::time::now_ms();
    let mut complete_before_ms = state.complete_before_ms;
    let mut pending = Vec::new();
    for base in all_logs(logs) {
        let end = end_of(&base);
        match cursors.get(&base).copied() {
            Some(c) if c == end => {
                // Read to its end and idle for a day: the entry goes, the watermark covers it.
                if mtime_ms(&base) + PRUNE_AFTER_MS < now {
                    cursors.remove(&base);
                    complete_before_ms = complete_before_ms.max(now - PRUNE_AFTER_MS);
                }
            }
            Some(_) => pending.push(base),
            None if fresh || mtime_ms(&base) < complete_before_ms => {
                cursors.insert(base, end);
            }
            None => {
                cursors.insert(base.clone(), Cursor::default());
                pending.push(base);
            }
        }
    }
    // Logs gone from the disk keep no entry.
    cursors.retain(|p, _| p.exists() || rotated(p, 1).exists());
    (cursors, pending, complete_before_ms, fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: &str) -> String {
        format!(
            r#"{{"aep":"0.1","id":"{id}","type":"run.started","time":"2026-01-02T03:04:05Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","seq":0}}"#
        ) + "\n"
    }

    fn append(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut f = fs::OpenOptions::new().create(true).append(true).open(p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn ids(v: &[Arc<Stamped>]) -> Vec<String> {
        v.iter().map(|s| s.event.id.clone()).collect()
    }

    /// A partial last line is not yet; after its newline it is read; a complete line that is
    /// no event is skipped and counted; rotated generations are read oldest first, and a
    /// cursor follows its generation through the rename.
    #[test]
    fn reads_whole_lines_across_generations() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("logs/a/s.jsonl");
        append(&base, &line("e1"));
        let torn = line("e2");
        append(&base, &torn[..20]);
        let mut r = Reader { pos: HashMap::new(), unreadable: 0, gaps: 0 };
        let mut out = Vec::new();
        let (c, all) = r.read_log(&base, Cursor::default(), 100, None, &mut out);
        assert_eq!((ids(&out), all), (vec!["e1".to_owned()], true));
        assert_eq!(c.off, line("e1").len() as u64);
        append(&base, &torn[20..]);
        append(&base, "not json\n");
        out.clear();
        let (c, _) = r.read_log(&base, c, 100, None, &mut out);
        assert_eq!(ids(&out), ["e2"]);
        assert_eq!(r.unreadable, 1);
        // Rotation: the file becomes `.1` and a new one starts; the cursor names `.1`.
        fs::rename(&base, rotated(&base, 1)).unwrap();
        append(&base, &line("e3"));
        out.clear();
        let (c, all) = r.read_log(&base, c, 100, None, &mut out);
        assert_eq!((ids(&out), all), (vec!["e3".to_owned()], true));
        // From nothing, every generation in order; with a stop, up to it.
        out.clear();
        r.read_log(&base, Cursor::default(), 100, None, &mut out);
        assert_eq!(ids(&out), ["e1", "e2", "e3"]);
        out.clear();
        r.read_log(&base, Cursor::default(), 100, Some(c), &mut out);
        assert_eq!(ids(&out), ["e1", "e2", "e3"]);
        let mid = Cursor { head: c.head, off: 0 };
        out.clear();
        r.read_log(&base, Cursor::default(), 100, Some(mid), &mut out);
        assert_eq!(ids(&out), ["e1", "e2"]);
        // A gone generation: the oldest kept is read from its start.
        fs::remove_file(rotated(&base, 1)).unwrap();
        out.clear();
        let (c, _) = r.read_log(&base, Cursor { head: 42, off: 7 }, 100, None, &mut out);
        assert_eq!((ids(&out), r.gaps), (vec!["e3".to_owned()], 1));
        // A whole event whose newline is not written yet is taken (`aep_schemas::jsonl`);
        // the newline then reads as nothing.
        append(&base, line("e4").trim_end());
        out.clear();
        let (c, _) = r.read_log(&base, c, 100, None, &mut out);
        assert_eq!(ids(&out), ["e4"]);
        append(&base, &("\n".to_owned() + &line("e5")));
        out.clear();
        let bad = r.unreadable;
        r.read_log(&base, c, 100, None, &mut out);
        assert_eq!((ids(&out), r.unreadable), (vec!["e5".to_owned()], bad));
    }

    /// A line longer than a read chunk is read whole.
    #[test]
    fn a_long_line_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("logs/a/s.jsonl");
        let long = line("e1")
            .replace("\"seq\":0", &format!("\"seq\":0,\"data\":{{\"x\":\"{}\"}}", "y".repeat(READ_CHUNK + 10)));
        append(&base, &long);
        append(&base, &line("e2"));
        let mut r = Reader { pos: HashMap::new(), unreadable: 0, gaps: 0 };
        let mut out = Vec::new();
        let mut c = Cursor::default();
        for _ in 0..4 {
            c = r.read_log(&base, c, 100, None, &mut out).0;
        }
        assert_eq!(ids(&out), ["e1", "e2"]);
        assert_eq!(out[0].line.len(), long.len());
    }

    /// The first run starts at the end; a later run reads a log it has no cursor for from its
    /// start, and the saved cursors bring it back where it was.
    #[tokio::test]
    async fn cursors_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("logs/a/old.jsonl");
        append(&old, &line("h1"));
        let wal = Wal::new(dir.path(), Arc::new(Metrics::default()));
        let mut t = Tail::open(wal.clone(), "t", false);
        let (b, _) = t.next(10, Duration::ZERO, Duration::from_millis(1)).await;
        assert!(b.events.is_empty(), "history is not exported on a first run");
        append(&old, &line("n1"));
        let new = dir.path().join("logs/a/new.jsonl");
        append(&new, &line("n2"));
        wal.written(&[old.clone(), new.clone()]);
        let (b, _) = t.next(10, Duration::ZERO, Duration::from_secs(5)).await;
        let mut got = ids(&b.events);
        got.sort();
        assert_eq!(got, ["n1", "n2"]);
        // Only `old` is acknowledged: after a restart `new` is read again.
        let old_at = b.logs.iter().find(|(p, _)| *p == old).unwrap().clone();
        t.ack(&[old_at]).await;
        t.save().await;
        drop(t);
        let wal = Wal::new(dir.path(), Arc::new(Metrics::default()));
        let mut t = Tail::open(wal.clone(), "t", true);
        let (b, _) = t.next(10, Duration::ZERO, Duration::from_secs(5)).await;
        assert_eq!(ids(&b.events), ["n2"]);
        assert!(b.warm.is_empty(), "nothing before a cursor at the start");
        // A log that appears while the bridge is down is read from its start.
        drop(t);
        let third = dir.path().join("logs/a/third.jsonl");
        append(&third, &line("n3"));
        append(&old, &line("n4"));
        let wal = Wal::new(dir.path(), Arc::new(Metrics::default()));
        let mut t = Tail::open(wal.clone(), "t", true);
        let (b, _) = t.next(10, Duration::ZERO, Duration::from_secs(5)).await;
        let mut got = ids(&b.events);
        got.sort();
        assert_eq!(got, ["n2", "n3", "n4"]);
        // Warm-up: what `old` held before its cursor, seen once.
        assert_eq!(ids(&b.warm), ["h1", "n1"]);
        wal.close();
        let (b, closed) = t.next(10, Duration::ZERO, Duration::from_secs(5)).await;
        assert!(b.events.is_empty() && closed);
    }

    /// A rotation that deletes a generation a reader had not read counts its unread lines.
    #[tokio::test]
    async fn a_rotation_past_a_reader_counts_what_it_loses() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Arc::new(Metrics::default());
        let wal = Wal::new(dir.path(), metrics.clone());
        let mut t = Tail::open(wal.clone(), "t", false);
        let base = dir.path().join("logs/a/s.jsonl");
        append(&base, &(line("e1") + &line("e2") + &line("e3")));
        wal.written(std::slice::from_ref(&base));
        let (b, _) = t.next(1, Duration::ZERO, Duration::from_secs(5)).await;
        assert_eq!(ids(&b.events), ["e1"]);
        fs::rename(&base, rotated(&base, 1)).unwrap();
        wal.rotating(&base, &rotated(&base, 1));
        assert_eq!(metrics.export_lost.get(&[("sink", "t"), ("reason", "rotated")]), 2);
    }
}
