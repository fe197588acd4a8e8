//! The pipeline: stamps drafts from the bridge's own adapters, admits complete events
//! from external emitters, and fans every event out to the sinks through bounded queues.
//!
//! Drafts are stamped by the one [`Stamper`] (`id`, `(epoch, seq)` per `(agent, session)`,
//! `source`, `time`, causes: AEP-0001 §5.1, §7); complete events are never re-stamped
//! (AEP-0001 §4.2: a relay must not alter core attributes). Stamping and enqueueing happen
//! under one lock so every sink sees a session's events in `(epoch, seq)` order.
//!
//! Backpressure (AEP-0003 §8.4): when a sink queue is full, `debug`/`info` events are
//! dropped for that sink and counted; `notice`+ events wait up to `notice_wait` for room
//! and are only then dropped, counted and logged as an error: never silently.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use aep_adapters::EventDraft;
use aep_schemas::{Event, Severity};
use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::{Mutex, mpsc};

use crate::metrics::Metrics;
use crate::stamp::{CAUSE_MEMORY, Stamper};

/// `[pipeline]`: queues between the pipeline and its sinks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PipelineConfig {
    /// Capacity of each sink queue; also the most OTLP records mapped and not yet through
    /// the pipeline (past it an OTLP logs export is refused with a retry delay).
    pub queue_capacity: usize,
    /// How long a `notice`+ event may wait for room in a full queue before it is
    /// counted as dropped and logged (it is never dropped silently, AEP-0003 §8.4).
    pub notice_wait_ms: u64,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        Self { queue_capacity: 16_384, notice_wait_ms: 200 }
    }
}

impl PipelineConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[pipeline]`:
    /// the section judges its own values; `config` prefixes the keys and adds the checks
    /// across sections.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.queue_capacity == 0 {
            out.push(("queue_capacity".into(), "must be at least 1".into()));
        }
        out
    }
}

pub use aep_schemas::stamped::Stamped;

/// A first guess at the bytes of one line, to size a batch's line buffer (then the stamper
/// sizes it from the lines it last wrote).
const LINE_GUESS: usize = 512;

/// Whether any of `sinks` takes lines.
fn has_lines(sinks: &[SinkTx]) -> bool {
    sinks.iter().any(|s| matches!(s.tx, SinkQueue::Lines(_)))
}

/// The log file an event goes to: its agent and session. Shared by every line of a session
/// (the stamper keeps one per session), so handing a line to the log writer allocates nothing.
#[derive(Debug, PartialEq, Eq)]
pub struct LogKey {
    /// The agent.
    pub agent: String,
    /// The session; `None` for agent-scoped events.
    pub session: Option<String>,
}

impl LogKey {
    fn of(event: &Event) -> Arc<Self> {
        Arc::new(Self { agent: event.agent.to_string(), session: event.session.clone() })
    }
}

/// The lines of one submit as a line sink (the JSONL log) gets them: one buffer with the
/// lines back to back, and for each line its file and severity, without the events
/// themselves, which are freed on the thread that built them (a free from another thread
/// costs the allocator several times a local one). One queue item per submit, not per event.
#[derive(Debug, Clone, Default)]
pub struct LineBatch {
    /// A lone relayed event, whose line is its own (held as the event: no copy, nothing
    /// allocated for it).
    one: Option<(Arc<Stamped>, Arc<LogKey>)>,
    buf: Bytes,
    keys: Vec<Arc<LogKey>>,
    /// (index into `keys`, start in `buf`, length, severity).
    lines: Vec<(u32, u32, u32, Severity)>,
}

impl LineBatch {
    /// A batch over `buf` (lines are added with [`LineBatch::push_range`]).
    fn over(buf: Bytes, n: usize) -> Self {
        Self { one: None, buf, keys: Vec::new(), lines: Vec::with_capacity(n) }
    }

    /// A batch of copies of `lines`.
    pub fn copied<'a>(lines: impl IntoIterator<Item = (&'a Arc<LogKey>, &'a [u8], Severity)>) -> Self {
        let mut buf = Vec::new();
        let mut b = Self::default();
        for (key, line, sev) in lines {
            let start = buf.len();
            buf.extend_from_slice(line);
            b.push_range(key, start, line.len(), sev);
        }
        b.buf = Bytes::from(buf);
        b
    }

    /// Adds the line at `buf[start..start + len]` for `key`'s file.
    fn push_range(&mut self, key: &Arc<LogKey>, start: usize, len: usize, sev: Severity) {
        // Lines of one session come in runs: the last key is nearly always the one.
        let k = match self.keys.iter().rposition(|k| Arc::ptr_eq(k, key)) {
            Some(k) => k,
            None => {
                self.keys.push(Arc::clone(key));
                self.keys.len() - 1
            }
        };
        self.lines.push((k as u32, start as u32, len as u32, sev));
    }

    /// A batch of one event's own line.
    fn single(s: Arc<Stamped>, key: Arc<LogKey>) -> Self {
        Self { one: Some((s, key)), ..Default::default() }
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        usize::from(self.one.is_some()) + self.lines.len()
    }

    /// Whether there are no lines.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of the lines (a batch's buffer holds its lines and nothing else).
    fn bytes(&self) -> usize {
        self.one.as_ref().map_or(0, |(s, _)| s.line.len()) + self.buf.len()
    }

    /// The lines in order: file, line (ending in `\n`), severity.
    pub fn iter(&self) -> impl Iterator<Item = (&Arc<LogKey>, &[u8], Severity)> {
        let one = self.one.iter().map(|(s, k)| (k, &s.line[..], s.event.severity()));
        one.chain(self.lines.iter().map(|&(k, start, len, sev)| {
            (&self.keys[k as usize], &self.buf[start as usize..(start + len) as usize], sev)
        }))
    }

    /// The lines in order as runs: consecutive lines of one file that lie back to back in
    /// the batch's buffer (a session's events of one export nearly always do) as one slice,
    /// with the number of lines in it. A writer hands the kernel one buffer per run instead
    /// of one per line.
    pub fn runs(&self) -> impl Iterator<Item = (&Arc<LogKey>, &[u8], usize)> {
        let one = self.one.iter().map(|(s, k)| (k, &s.line[..], 1));
        let mut i = 0;
        let lines = std::iter::from_fn(move || {
            let &(k, start, len, _) = self.lines.get(i)?;
            let (mut end, mut n) = (start + len, 1);
            i += 1;
            while let Some(&(k2, s2, l2, _)) = self.lines.get(i)
                && k2 == k
                && s2 == end
            {
                end += l2;
                n += 1;
                i += 1;
            }
            Some((&self.keys[k as usize], &self.buf[start as usize..end as usize], n))
        });
        one.chain(lines)
    }

    /// The highest severity of the batch (`info` when empty).
    fn max_severity(&self) -> Severity {
        self.iter().map(|l| l.2).max().unwrap_or_default()
    }
}

/// A sink's queue: whole events, or lines with their file.
#[derive(Debug, Clone)]
pub enum SinkQueue {
    /// Whole events (exporters, the relay).
    Events(mpsc::Sender<Arc<Stamped>>),
    /// Lines (the JSONL log).
    Lines(mpsc::Sender<LineBatch>),
}

impl SinkQueue {
    /// Sends one event, waiting for room (a line sink gets its line and file).
    pub async fn send(&self, s: Arc<Stamped>) -> Result<(), mpsc::error::SendError<Arc<Stamped>>> {
        match self {
            SinkQueue::Events(tx) => tx.send(s).await,
            SinkQueue::Lines(tx) => {
                let l = LineBatch::copied([(&LogKey::of(&s.event), &s.line[..], s.event.severity())]);
                tx.send(l).await.map_err(|_| mpsc::error::SendError(s))
            }
        }
    }

    /// Whether the sink has stopped taking items.
    pub fn is_closed(&self) -> bool {
        match self {
            SinkQueue::Events(tx) => tx.is_closed(),
            SinkQueue::Lines(tx) => tx.is_closed(),
        }
    }
}

/// A synchronous consumer called inline for every event, in order (the embedded collector).
pub trait Tap: Send + Sync {
    /// Sees one event. Must not block. Returns how many deliveries of `ev` it dropped: the
    /// pipeline records them as `dropped{sink = Tap::sink()}` once its lock is released.
    fn admit(&self, ev: &Arc<Stamped>) -> u64;

    /// The `sink` label of this tap's drops.
    fn sink(&self) -> &'static str {
        "subscriber"
    }
}

/// A sink's queue as the pipeline sees it.
#[derive(Debug, Clone)]
pub struct SinkTx {
    /// Sink name for metrics and logs.
    pub name: &'static str,
    /// The bounded queue.
    pub tx: SinkQueue,
    /// A durable sink (the JSONL log) never sheds debug/info: a full queue makes the
    /// producer wait (backpressure reaches the receivers: OTLP answers 503), up to
    /// [`DURABLE_WAIT`], and only then is an event counted as dropped and logged.
    pub durable: bool,
    /// How far the sink has got, when it reports it ([`Pipeline::written`] waits on a
    /// durable sink's; a best-effort sink's is only there to be observed).
    pub progress: Option<Arc<Progress>>,
    /// Only the events this accepts are handed to the sink (`None`: every event).
    pub wants: Option<fn(&aep_schemas::Event) -> bool>,
}

/// How far a sink has got: events handed to its queue, and events it has finished
/// with (written, or failed and counted as dropped). A caller that must not acknowledge
/// before its events reached the writer waits for `done` to pass what was handed (a
/// hook is answered once its events are written to the log file, not yet fsynced).
#[derive(Debug)]
pub struct Progress {
    handed: std::sync::atomic::AtomicU64,
    done: tokio::sync::watch::Sender<u64>,
}

impl Default for Progress {
    fn default() -> Self {
        Self { handed: std::sync::atomic::AtomicU64::new(0), done: tokio::sync::watch::Sender::new(0) }
    }
}

impl Progress {
    /// The sink has finished with `n` more events, in queue order.
    pub fn finished(&self, n: u64) {
        self.done.send_modify(|d| *d += n);
    }

    /// Follows how many events the sink has finished with so far (written, or failed and
    /// counted as dropped): a caller that needs to know an event reached the sink waits on
    /// this instead of polling what the sink writes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.done.subscribe()
    }

    /// `(handed, finished)` so far: what a liveness watch compares between two looks (a
    /// sink with events waiting that finishes none for long is stuck).
    pub fn counts(&self) -> (u64, u64) {
        (self.handed.load(Ordering::Acquire), *self.done.borrow())
    }

    /// Counts `n` events handed, as the pipeline does (for the liveness watch's tests).
    #[cfg(test)]
    pub(crate) fn handed_for_test(&self, n: u64) {
        self.handed.fetch_add(n, Ordering::AcqRel);
    }

    /// Events handed and not yet finished.
    fn backlog(&self) -> u64 {
        self.handed.load(Ordering::Acquire).saturating_sub(*self.done.borrow())
    }

    /// Waits until at most `limit` events are handed and not finished.
    async fn below(&self, limit: u64) {
        let mut rx = self.done.subscribe();
        let handed = &self.handed;
        let _ = rx.wait_for(|d| handed.load(Ordering::Acquire).saturating_sub(*d) <= limit).await;
    }

    /// Waits until every event handed so far is finished; `false` after `timeout`.
    pub async fn caught_up(&self, timeout: Duration) -> bool {
        let target = self.handed.load(Ordering::Acquire);
        let mut rx = self.done.subscribe();
        if *rx.borrow() >= target {
            return true;
        }
        matches!(tokio::time::timeout(timeout, rx.wait_for(|d| *d >= target)).await, Ok(Ok(_)))
    }
}

/// How long a producer waits for room in a durable sink's queue.
pub const DURABLE_WAIT: Duration = Duration::from_secs(5);

impl SinkTx {
    /// A best-effort sink: debug/info are shed when its queue is full.
    pub fn new(name: &'static str, tx: mpsc::Sender<Arc<Stamped>>) -> Self {
        Self { name, tx: SinkQueue::Events(tx), durable: false, progress: None, wants: None }
    }

    /// A durable sink: nothing is shed while the producer can wait.
    pub fn durable(name: &'static str, tx: mpsc::Sender<Arc<Stamped>>) -> Self {
        Self { name, tx: SinkQueue::Events(tx), durable: true, progress: None, wants: None }
    }

    /// A durable line sink (the JSONL log): it gets each event's line and file only.
    pub fn durable_lines(name: &'static str, tx: mpsc::Sender<LineBatch>) -> Self {
        Self { name, tx: SinkQueue::Lines(tx), durable: true, progress: None, wants: None }
    }

    /// Reports the sink's progress through `p` (the sink calls [`Progress::finished`]).
    pub fn with_progress(mut self, p: Arc<Progress>) -> Self {
        self.progress = Some(p);
        self
    }

    /// Hands the sink only the events `wants` accepts (a cheap check on the event, run
    /// for every event under the pipeline's lock: no allocation, no metric).
    pub fn only(mut self, wants: fn(&aep_schemas::Event) -> bool) -> Self {
        self.wants = Some(wants);
        self
    }
}

/// Why an event was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum SubmitError {
    /// The pipeline is shutting down.
    #[error("the bridge is shutting down")]
    Closed,
}

/// Events a sink queue did not take, per `(sink, severity)`, counted while the stamper is
/// held and recorded after it is released.
#[derive(Default)]
struct Drops(Vec<((&'static str, Severity), u64)>);

impl Drops {
    fn note(&mut self, sink: &'static str, sev: Severity) {
        self.add(sink, sev, 1);
    }

    fn add(&mut self, sink: &'static str, sev: Severity, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == (sink, sev)) {
            Some((_, m)) => *m += n,
            None => self.0.push(((sink, sev), n)),
        }
    }

    fn record(&self, metrics: &Metrics) {
        for ((sink, sev), n) in &self.0 {
            metrics.dropped.add(&[("sink", sink), ("severity", sev.as_str())], *n);
        }
    }
}

/// What the pipeline keeps per session beside the stamper's position and `source`: its log
/// key and envelope members, each built once.
#[derive(Default)]
struct SessionLines {
    log: Option<Arc<LogKey>>,
    /// The session's `source`, `agent` and `session` members as every line writes them
    /// ([`Event::envelope_members`]).
    envelope: Option<Arc<[u8]>>,
}

/// What the pipeline's one lock guards: stamping and enqueueing happen under it, so every
/// sink sees a session's events in `(epoch, seq)` order.
struct Locked {
    stamper: Stamper<SessionLines>,
    /// Bytes per line of the last batch, to size the next one's buffer at once.
    line_guess: usize,
    /// Log keys of external emitters' sessions (agent -> session -> key), so a relayed event
    /// allocates none.
    external_keys: HashMap<String, HashMap<String, Arc<LogKey>>>,
    /// Lines of bulk submits not yet handed to the line sinks ([`Flush::WithNext`]), in
    /// stamping order; the next submit that flushes sends them ahead of its own.
    held: Vec<LineBatch>,
    /// Lines in `held`.
    held_lines: usize,
    /// Bytes of the lines in `held`.
    held_bytes: usize,
}

/// When a submit's lines go to the line sinks (the JSONL log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// With this submit, after any held ones.
    Now,
    /// With the next submit that flushes (up to [`MAX_HELD_LINES`] lines and
    /// [`MAX_HELD_BYTES`] bytes held): a bulk producer submitting one export in chunks hands
    /// the writer the whole export at once, one wake and one write per file instead of one
    /// per chunk. The producer must end with a flushing submit or [`Pipeline::flush_held`];
    /// any other submit flushes them too, ahead of its own lines, so the log keeps stamping
    /// order.
    WithNext,
}

/// Lines held for [`Flush::WithNext`] past which a submit flushes anyway (about one export:
/// a hook's answer, which waits for its lines to be written, waits behind at most these).
pub const MAX_HELD_LINES: usize = 1024;

/// Bytes of held lines past which a submit flushes anyway (large events fill it first).
pub const MAX_HELD_BYTES: usize = 8 * 1024 * 1024;

struct Inner {
    stamper: Mutex<Locked>,
    /// Ids minted ahead of publication (a sync lock: never held across an await).
    minter: std::sync::Mutex<ulid::Generator>,
    sinks: std::sync::RwLock<Arc<[SinkTx]>>,
    taps: Vec<Arc<dyn Tap>>,
    metrics: Arc<Metrics>,
    notice_wait: Duration,
    closed: AtomicBool,
}

/// Cheap to clone; every receiver holds one.
#[derive(Clone)]
pub struct Pipeline {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").finish_non_exhaustive()
    }
}

/// Builds a [`Pipeline`].
pub struct PipelineBuilder {
    epoch: u64,
    host: String,
    sinks: Vec<SinkTx>,
    taps: Vec<Arc<dyn Tap>>,
    metrics: Arc<Metrics>,
    notice_wait: Duration,
}

impl PipelineBuilder {
    /// A pipeline for this process lifetime's `epoch`, naming `host` in `source` URIs.
    pub fn new(epoch: u64, host: impl Into<String>, metrics: Arc<Metrics>) -> Self {
        Self {
            epoch,
            host: host.into(),
            sinks: Vec::new(),
            taps: Vec::new(),
            metrics,
            notice_wait: Duration::from_millis(200),
        }
    }

    /// Adds a sink queue.
    pub fn sink(mut self, s: SinkTx) -> Self {
        self.sinks.push(s);
        self
    }

    /// Adds an inline tap.
    pub fn tap(mut self, t: Arc<dyn Tap>) -> Self {
        self.taps.push(t);
        self
    }

    /// Sets how long a `notice`+ event waits for room in a full queue.
    pub fn notice_wait(mut self, d: Duration) -> Self {
        self.notice_wait = d;
        self
    }

    /// Finishes the pipeline.
    pub fn build(self) -> Pipeline {
        // Every sink's drop series exists from the start at 0, so a dashboard's rate() of
        // drops reads 0, not "no data", until something is dropped.
        let names = self.sinks.iter().map(|s| s.name).chain(self.taps.iter().map(|t| t.sink()));
        for name in names {
            self.metrics.dropped.add(&[("sink", name), ("severity", Severity::Info.as_str())], 0);
        }
        Pipeline {
            inner: Arc::new(Inner {
                stamper: Mutex::new(Locked {
                    stamper: crate::stamp::stamper(self.epoch, self.host),
                    line_guess: LINE_GUESS,
                    external_keys: HashMap::new(),
                    held: Vec::new(),
                    held_lines: 0,
                    held_bytes: 0,
                }),
                minter: std::sync::Mutex::new(ulid::Generator::new()),
                sinks: std::sync::RwLock::new(self.sinks.into()),
                taps: self.taps,
                metrics: self.metrics,
                notice_wait: self.notice_wait,
                closed: AtomicBool::new(false),
            }),
        }
    }
}

impl Pipeline {
    /// The shared metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// Mints an event id ahead of publication (for [`EventDraft::id`]).
    pub fn mint_id(&self) -> String {
        let mut ids = self.inner.minter.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        crate::stamp::mint(&mut ids, SystemTime::now())
    }

    /// Stamps drafts of `agent` and fans them out, in order. Returns the stamped events.
    /// A static name (a hook adapter's vendor) is borrowed by every event; an owned one is
    /// copied into each.
    pub async fn submit_drafts(
        &self,
        input: &'static str,
        agent: impl Into<Cow<'static, str>>,
        drafts: Vec<EventDraft>,
    ) -> Result<Vec<Arc<Stamped>>, SubmitError> {
        let mut out = Vec::with_capacity(drafts.len());
        let mut drops = Drops::default();
        let agent = agent.into();
        let mut st = self.inner.stamper.lock().await;
        let sinks = self.sinks();
        // As in `submit_mapped`: stamped and serialized into one buffer first, then fanned out.
        let n = drafts.len();
        let mut events = Vec::with_capacity(n);
        let mut buf = Vec::with_capacity(n * (st.line_guess + st.line_guess / 8));
        for d in drafts {
            let (ev, key, envelope, minted) = stamp(&mut st, agent.clone(), d, SystemTime::now());
            let start = buf.len();
            ev.write_json_with(&mut buf, envelope.as_deref());
            buf.push(b'\n');
            events.push((Stamped::unlined(ev, minted), key, start, buf.len() - start));
        }
        st.line_guess = buf.len().checked_div(n).unwrap_or(LINE_GUESS).clamp(64, 64 * 1024);
        let (result, lines) = self.fan_out_serialized(&sinks, events, buf, &mut drops, Some(&mut out)).await;
        self.send_lines(&mut st, &sinks, lines, Flush::Now, &mut drops).await;
        // Counted once per call, after the stamper is released (nothing is recorded under it).
        drop(st);
        drops.record(&self.inner.metrics);
        self.inner.metrics.events_in.add(&[("input", input), (crate::metrics::AGENT, &agent)], out.len() as u64);
        result.map(|()| out)
    }

    /// Stamps drafts mapped from OTLP records, each as its vendor's (agent identity), and fans
    /// them out in order, as [`Pipeline::submit_drafts`] run by run, but in one pass under the
    /// stamper and without collecting the stamped events (nothing waits on them): each event
    /// is freed here once the taps and sinks have it (a line sink keeps only its line), and
    /// the lines of the batch share one buffer. `flush` says when the lines go to the line
    /// sinks (see [`Flush`]).
    pub async fn submit_mapped(
        &self,
        input: &'static str,
        batch: Vec<aep_adapters::otel::MappedDraft>,
        flush: Flush,
    ) -> Result<(), SubmitError> {
        let mut drops = Drops::default();
        let mut counts: Vec<(&'static str, u64)> = Vec::new();
        let mut st = self.inner.stamper.lock().await;
        let sinks = self.sinks();
        // Stamped and serialized first, the lines back to back in one buffer (each event's
        // line a slice of it), then fanned out in order; the line sinks get the whole buffer.
        let n = batch.len();
        // One clock reading per batch (ids stay monotonic: the generator counts within a ms).
        let now = SystemTime::now();
        let mut events = Vec::with_capacity(n);
        let mut buf = Vec::with_capacity(n * (st.line_guess + st.line_guess / 8));
        for m in batch {
            let (ev, key, envelope, minted) = stamp(&mut st, Cow::Borrowed(m.vendor), m.draft, now);
            let start = buf.len();
            ev.write_json_with(&mut buf, envelope.as_deref());
            buf.push(b'\n');
            events.push((Stamped::unlined(ev, minted), key, start, buf.len() - start));
            match counts.last_mut() {
                Some((v, n)) if *v == m.vendor => *n += 1,
                _ => counts.push((m.vendor, 1)),
            }
        }
        st.line_guess = buf.len().checked_div(n).unwrap_or(LINE_GUESS).clamp(64, 64 * 1024);
        let (result, lines) = self.fan_out_serialized(&sinks, events, buf, &mut drops, None).await;
        self.send_lines(&mut st, &sinks, lines, flush, &mut drops).await;
        // Counted after the stamper is released (nothing is recorded under it).
        drop(st);
        drops.record(&self.inner.metrics);
        for (agent, n) in counts {
            self.inner.metrics.events_in.add(&[("input", input), (crate::metrics::AGENT, agent)], n);
        }
        result
    }

    /// The second half of a batch submit: `events`, serialized back to back in `buf` (each
    /// as `(event, file key, start, len)`), handed to the taps and event sinks in order;
    /// returns their lines over the whole buffer, for the line sinks ([`Pipeline::send_lines`]),
    /// when there are line sinks. The stamped events are kept in `keep` when the caller
    /// returns them; otherwise each is freed here once the sinks have it.
    async fn fan_out_serialized(
        &self,
        sinks: &[SinkTx],
        events: Vec<(Arc<Stamped>, Arc<LogKey>, usize, usize)>,
        buf: Vec<u8>,
        drops: &mut Drops,
        mut keep: Option<&mut Vec<Arc<Stamped>>>,
    ) -> (Result<(), SubmitError>, Option<LineBatch>) {
        let n = events.len();
        let whole = Bytes::from(buf);
        let lines_wanted = has_lines(sinks);
        let mut lines = LineBatch::over(if lines_wanted { whole.clone() } else { Bytes::new() }, n);
        let mut result = Ok(());
        for (mut s, key, start, len) in events {
            let sev = s.event.severity();
            // Not yet shared (made by `Stamped::unlined` for this call): the line goes in place.
            if let Some(unshared) = Arc::get_mut(&mut s) {
                unshared.line = whole.slice(start..start + len);
            }
            result = self.fan_out_to(sinks, &s, drops).await;
            if let Some(k) = keep.as_deref_mut() {
                k.push(s);
            }
            if result.is_err() {
                break;
            }
            if lines_wanted {
                lines.push_range(&key, start, len, sev);
            }
        }
        (result, lines_wanted.then_some(lines))
    }

    /// Hands `lines` to the line sinks as `flush` says: held (see [`Flush::WithNext`]), or
    /// sent after the lines held before them.
    async fn send_lines(
        &self,
        st: &mut Locked,
        sinks: &[SinkTx],
        lines: Option<LineBatch>,
        flush: Flush,
        drops: &mut Drops,
    ) {
        if let Some(lines) = lines.filter(|l| !l.is_empty()) {
            st.held_lines += lines.len();
            st.held_bytes += lines.bytes();
            st.held.push(lines);
        }
        if flush == Flush::WithNext && st.held_lines <= MAX_HELD_LINES && st.held_bytes <= MAX_HELD_BYTES {
            return;
        }
        st.held_lines = 0;
        st.held_bytes = 0;
        for lines in std::mem::take(&mut st.held) {
            self.fan_out_lines(sinks, lines, drops).await;
        }
    }

    /// Sends the lines held by [`Flush::WithNext`] submits to the line sinks (a bulk
    /// producer's end, when its last submit did not flush).
    pub async fn flush_held(&self) {
        let mut st = self.inner.stamper.lock().await;
        if st.held.is_empty() {
            return;
        }
        let mut drops = Drops::default();
        let sinks = self.sinks();
        self.send_lines(&mut st, &sinks, None, Flush::Now, &mut drops).await;
        drop(st);
        drops.record(&self.inner.metrics);
    }

    /// Admits a complete event from an external emitter (already validated): never re-stamped.
    pub async fn submit_event(&self, input: &'static str, ev: Event) -> Result<Arc<Stamped>, SubmitError> {
        self.submit_stamped(input, Arc::new(Stamped::new(ev))).await
    }

    /// Hands a redelivered external event (one the sinks already took, AEP-0001 §7 rule 4)
    /// to the taps alone: AEP-0003 §5's live fan-out forwards redelivery as received, while
    /// the log and the exporters, terminal consumers, take it once. In order with the other
    /// events (under the stamper), its drops recorded like theirs.
    pub async fn redeliver_live(&self, s: &Arc<Stamped>) {
        let mut drops = Drops::default();
        let st = self.inner.stamper.lock().await;
        self.to_taps(s, &mut drops);
        drop(st);
        drops.record(&self.inner.metrics);
    }

    /// Admits a complete external event carrying the line it arrived as, so every hop
    /// relays it byte-identically (AEP-0001 §4.2): never re-stamped, never re-serialized.
    pub async fn submit_stamped(&self, input: &'static str, s: Arc<Stamped>) -> Result<Arc<Stamped>, SubmitError> {
        let mut guard = self.inner.stamper.lock().await;
        let mut drops = Drops::default();
        let sinks = self.sinks();
        let admitted = self.fan_out_to(&sinks, &s, &mut drops).await;
        let lines = (admitted.is_ok() && has_lines(&sinks)).then(|| {
            let key = external_key(&mut guard, &s.event);
            LineBatch::single(Arc::clone(&s), key)
        });
        self.send_lines(&mut guard, &sinks, lines, Flush::Now, &mut drops).await;
        drop(guard);
        drops.record(&self.inner.metrics);
        self.inner.metrics.events_in.inc(&[("input", input), (crate::metrics::AGENT, &s.event.agent)]);
        admitted.map(|()| s)
    }

    /// Admits a batch of complete external events (already validated) whose lines, as they
    /// arrived, lie back to back in `buf` (each event `(event, start, len)`): never
    /// re-stamped or re-serialized (AEP-0001 §4.2), handed to the taps and event sinks in
    /// order, and to the line sinks as one batch (one submit per request, not per event).
    /// Returns how many were admitted.
    pub async fn submit_received(
        &self,
        input: &'static str,
        events: Vec<(Event, usize, usize)>,
        buf: Vec<u8>,
    ) -> Result<usize, SubmitError> {
        let n = events.len();
        let mut drops = Drops::default();
        let mut counts: Vec<(String, u64)> = Vec::new();
        let mut st = self.inner.stamper.lock().await;
        let sinks = self.sinks();
        let mut keyed = Vec::with_capacity(n);
        for (ev, start, len) in events {
            match counts.last_mut() {
                Some((a, k)) if *a == ev.agent => *k += 1,
                _ => counts.push((ev.agent.to_string(), 1)),
            }
            let key = external_key(&mut st, &ev);
            keyed.push((Stamped::unlined(ev, false), key, start, len));
        }
        let (result, lines) = self.fan_out_serialized(&sinks, keyed, buf, &mut drops, None).await;
        self.send_lines(&mut st, &sinks, lines, Flush::Now, &mut drops).await;
        // Counted after the stamper is released (nothing is recorded under it).
        drop(st);
        drops.record(&self.inner.metrics);
        for (agent, k) in counts {
            self.inner.metrics.events_in.add(&[("input", input), (crate::metrics::AGENT, &agent)], k);
        }
        result.map(|()| n)
    }

    /// The current sink queues (read once per batch by the batch submitters).
    fn sinks(&self) -> Arc<[SinkTx]> {
        self.inner.sinks.read().map(|v| v.clone()).unwrap_or_else(|_| Arc::from(Vec::new()))
    }

    /// Hands one event to the taps, noting what they shed in `drops`.
    fn to_taps(&self, s: &Arc<Stamped>, drops: &mut Drops) {
        for t in &self.inner.taps {
            let shed = t.admit(s);
            if shed > 0 {
                drops.add(t.sink(), s.event.severity(), shed);
            }
        }
    }

    /// Hands one event to the taps and the event sinks of `sinks` (the line sinks get the
    /// lines of the whole submit at its end, [`Pipeline::fan_out_lines`]); drops are noted in
    /// `drops` and recorded by the caller once the stamper is released (no metric under the
    /// lock). A close between two events of a batch is seen through the `closed` flag,
    /// checked for every event.
    async fn fan_out_to(&self, sinks: &[SinkTx], s: &Arc<Stamped>, drops: &mut Drops) -> Result<(), SubmitError> {
        self.to_taps(s, drops);
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(SubmitError::Closed);
        }
        let sev = s.event.severity();
        for sink in sinks.iter() {
            if sink.wants.is_some_and(|w| !w(&s.event)) {
                continue;
            }
            let SinkQueue::Events(tx) = &sink.tx else { continue };
            if !self.offer(sink, tx, s.clone(), sev, &s.event.id).await {
                drops.note(sink.name, sev);
            } else if let Some(p) = &sink.progress {
                p.handed.fetch_add(1, Ordering::AcqRel);
            }
        }
        Ok(())
    }

    /// Hands the lines of one submit to every line sink (still under the stamper, so each
    /// sink gets them in stamping order); a batch not taken counts each of its lines as dropped.
    async fn fan_out_lines(&self, sinks: &[SinkTx], lines: LineBatch, drops: &mut Drops) {
        if lines.is_empty() {
            return;
        }
        let (sev, n) = (lines.max_severity(), lines.len() as u64);
        let mut left = sinks.iter().filter(|s| matches!(s.tx, SinkQueue::Lines(_))).count();
        // Lines per severity, for counting a batch that was not taken.
        let mut per_severity: Vec<(Severity, u64)> = Vec::new();
        for (_, _, sev) in lines.iter() {
            match per_severity.iter_mut().find(|(s, _)| *s == sev) {
                Some((_, k)) => *k += 1,
                None => per_severity.push((sev, 1)),
            }
        }
        let mut lines = Some(lines);
        for sink in sinks.iter() {
            let SinkQueue::Lines(tx) = &sink.tx else { continue };
            left -= 1;
            // The last line sink takes the batch itself, the others a copy.
            let Some(batch) = (if left == 0 { lines.take() } else { lines.clone() }) else { break };
            if self.offer(sink, tx, batch, sev, "(a batch of lines)").await {
                if let Some(p) = &sink.progress {
                    p.handed.fetch_add(n, Ordering::AcqRel);
                }
            } else {
                for &(sev, k) in &per_severity {
                    drops.add(sink.name, sev, k);
                }
            }
        }
    }

    /// Offers one item to a sink's queue under its policy; `false` when it was not taken
    /// (the caller counts the drop).
    async fn offer<T>(&self, sink: &SinkTx, tx: &mpsc::Sender<T>, item: T, sev: Severity, id: &str) -> bool {
        match tx.try_send(item) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Closed(_)) => false,
            Err(mpsc::error::TrySendError::Full(item)) if sink.durable => {
                let ok = tx.send_timeout(item, DURABLE_WAIT).await.is_ok();
                if !ok {
                    tracing::error!(sink = sink.name, id, "Durable sink stalled: dropped an event.");
                }
                ok
            }
            Err(mpsc::error::TrySendError::Full(_)) if sev < Severity::Notice => false,
            Err(mpsc::error::TrySendError::Full(item)) => {
                // AEP-0003 §8.4: notice+ is never dropped silently; wait, then count and log.
                let ok = tx.send_timeout(item, self.inner.notice_wait).await.is_ok();
                if !ok {
                    tracing::error!(sink = sink.name, id, severity = %sev, "Sink queue full: dropped a notice-or-higher event.");
                }
                ok
            }
        }
    }

    /// Waits until every durable sink that reports progress has finished with everything
    /// handed to it so far (so with the events of a submit that returned); `false` when
    /// `timeout` passed first (the caller answers anyway: hooks fail open).
    pub async fn written(&self, timeout: Duration) -> bool {
        let mut ok = true;
        for p in self.sinks().iter().filter(|s| s.durable).filter_map(|s| s.progress.as_ref()) {
            ok &= p.caught_up(timeout).await;
        }
        ok
    }

    /// Waits (holding no lock) until no durable sink has more than `limit` events queued
    /// and unwritten. Bulk producers (OTLP) call it between batches, so a flood cannot
    /// queue so far ahead of the writer that a hook's answer, which waits for its events
    /// to be written, waits behind it.
    pub async fn room_for_bulk(&self, limit: u64) {
        for p in self.sinks().iter().filter(|s| s.durable).filter_map(|s| s.progress.as_ref()) {
            if p.backlog() > limit {
                p.below(limit).await;
            }
        }
    }

    /// Closes every sink queue: sinks drain what they hold, flush, and end.
    pub fn close(&self) {
        self.inner.closed.store(true, Ordering::Release);
        if let Ok(mut v) = self.inner.sinks.write() {
            *v = Arc::from(Vec::new());
        }
    }
}

/// The log key of an external event's session, kept per session (bounded).
fn external_key(st: &mut Locked, ev: &Event) -> Arc<LogKey> {
    let Some(session) = ev.session.as_deref() else { return LogKey::of(ev) };
    if let Some(k) = st.external_keys.get(&*ev.agent).and_then(|m| m.get(session)) {
        return Arc::clone(k);
    }
    let m = st.external_keys.entry(ev.agent.to_string()).or_default();
    if m.len() >= CAUSE_MEMORY {
        m.clear();
    }
    Arc::clone(m.entry(session.to_owned()).or_insert_with(|| LogKey::of(ev)))
}

/// An event as stamped: the event, its log key, its session's envelope members (for
/// [`Event::write_json_with`]), and whether its id was minted here ([`Stamped::minted`]).
type Stamping = (Event, Arc<LogKey>, Option<Arc<[u8]>>, bool);

/// Stamps `d` as `agent`'s ([`Stamper::stamp`]); returns the event with its log key and
/// envelope members, built once per session.
fn stamp(st: &mut Locked, agent: Cow<'static, str>, d: EventDraft, now: SystemTime) -> Stamping {
    // A draft without an id gets one from the stamper's generator, unique by construction.
    let minted = d.id.is_none();
    let (ev, lines) = st.stamper.stamp(agent, d, crate::time::unix_ms(now));
    match (lines, &ev.session) {
        (Some(lines), Some(s)) => {
            let log = lines
                .log
                .get_or_insert_with(|| Arc::new(LogKey { agent: ev.agent.to_string(), session: Some(s.clone()) }))
                .clone();
            let envelope =
                lines.envelope.get_or_insert_with(|| Event::envelope_members(&ev.source, &ev.agent, s).into()).clone();
            (ev, log, Some(envelope), minted)
        }
        _ => {
            let log = Arc::new(LogKey { agent: ev.agent.to_string(), session: None });
            (ev, log, None, minted)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::{AEP_VERSION, Capture};

    fn draft(ty: &str, session: &str) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some(session.into());
        d
    }

    /// A pipeline with one event sink (its receiver kept, so submits are not refused).
    fn one_sink() -> (Pipeline, mpsc::Receiver<Arc<Stamped>>) {
        let (tx, rx) = mpsc::channel(16);
        (PipelineBuilder::new(1, "h", Arc::new(Metrics::default())).sink(SinkTx::new("t", tx)).build(), rx)
    }

    /// Only ids the stamper mints are marked minted: a draft's own id (a history backfill's,
    /// stable across runs) and an external event's may repeat one already held.
    #[tokio::test]
    async fn only_ids_minted_by_the_stamper_are_marked_minted() {
        let (p, _rx) = one_sink();
        let mut own = draft("run.started", "s1");
        own.id = Some("01J0000000000000000000HIST".into());
        let out = p.submit_drafts("hook", "claude-code", vec![draft("run.started", "s1"), own]).await.unwrap();
        assert!(out[0].minted);
        assert!(!out[1].minted);
        assert_eq!(out[1].event.id, "01J0000000000000000000HIST");
        let external = p.submit_event("collector", out[0].event.clone()).await.unwrap();
        assert!(!external.minted);
    }

    #[tokio::test]
    async fn a_keyed_attention_lifecycle_event_names_the_request_event_as_subject() {
        // AEP-0002 §7.1 rule 1: OpenCode's pinned `permission.replied` mapping carries the
        // vendor's permission id as subject; the Event names the request Event instead.
        let (p, _rx) = one_sink();
        let mut req = draft("attention.requested", "s1");
        req.subject = Some("bash".into());
        req.correlation_key = Some("attention:per_1".into());
        let mut res = draft("attention.resolved", "s1");
        res.subject = Some("per_1".into());
        res.cause_key = Some("attention:per_1".into());
        let mut other = draft("attention.resolved", "s1");
        other.subject = Some("per_unknown".into());
        other.cause_key = Some("attention:per_unknown".into());
        let out = p.submit_drafts("hook", "opencode", vec![req, res, other]).await.unwrap();
        assert_eq!(out[0].event.subject.as_deref(), Some("bash"));
        assert_eq!(out[1].event.subject.as_deref(), Some(out[0].event.id.as_str()));
        assert_eq!(out[1].event.cause.as_deref(), Some(out[0].event.id.as_str()));
        // Nothing resolved: the mapping's own subject stays.
        assert_eq!(out[2].event.subject.as_deref(), Some("per_unknown"));
    }

    #[tokio::test]
    async fn stamps_in_order_and_links_causes() {
        let (tx, mut rx) = mpsc::channel(16);
        let p = PipelineBuilder::new(7, "h", Arc::new(Metrics::default())).sink(SinkTx::new("t", tx)).build();
        let mut req = draft("tool.requested", "s/1");
        req.correlation_key = Some("tool:c1".into());
        let mut done = draft("tool.completed", "s/1");
        done.cause_key = Some("tool:c1".into());
        let out = p.submit_drafts("hook", "codex", vec![draft("session.started", "s/1"), req, done]).await.unwrap();
        assert_eq!(out.iter().map(|s| s.event.seq).collect::<Vec<_>>(), [Some(0), Some(1), Some(2)]);
        assert_eq!(out[2].event.cause.as_deref(), Some(out[1].event.id.as_str()));
        assert_eq!(out[0].event.epoch, Some(7));
        assert_eq!(&*out[0].event.source, "aep://h/agent/codex/session/s%2F1");
        // A session's events share one `source` allocation, and the version marker is static.
        assert!(Arc::ptr_eq(&out[0].event.source, &out[2].event.source));
        assert!(matches!(out[0].event.aep, Cow::Borrowed(AEP_VERSION)));
        // A hook adapter's static vendor name is borrowed, an owned name (a bridge's) copied.
        assert!(matches!(out[0].event.agent, Cow::Borrowed("codex")));
        let owned = p.submit_drafts("hook", String::from("codex"), vec![draft("run.started", "s/1")]).await.unwrap();
        assert!(matches!(&owned[0].event.agent, Cow::Owned(a) if a == "codex"));
        assert!(Arc::ptr_eq(&owned[0].event.source, &out[0].event.source), "one source per session");
        for want in &out {
            let got = rx.recv().await.unwrap();
            assert_eq!(got.event.id, want.event.id);
            assert!(got.line.ends_with(b"\n"));
        }
        let agent = p.submit_drafts("hook", "codex", vec![draft("agent.heartbeat", "s/1")]).await.unwrap();
        assert_eq!((agent[0].event.session.as_deref(), agent[0].event.seq), (None, None));
    }

    #[tokio::test]
    async fn a_durable_sink_applies_backpressure_instead_of_shedding() {
        let (tx, mut rx) = mpsc::channel(1);
        let m = Arc::new(Metrics::default());
        let p = PipelineBuilder::new(0, "h", m.clone()).sink(SinkTx::durable("jsonl", tx)).build();
        let reader = tokio::spawn(async move {
            let mut n = 0;
            while let Some(_s) = rx.recv().await {
                n += 1;
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            n
        });
        let drafts: Vec<EventDraft> = (0..20).map(|_| draft("run.started", "s")).collect();
        p.submit_drafts("hook", "a", drafts).await.unwrap();
        // Close the queue so a shedding sink shows up as a short count, not a hang.
        p.close();
        drop(p);
        let got = tokio::time::timeout(Duration::from_secs(10), reader).await.expect("reader stuck").unwrap();
        assert_eq!(got, 20, "every info event reached the durable sink");
        assert_eq!(m.dropped.get(&[("sink", "jsonl"), ("severity", "info")]), 0);
    }

    #[tokio::test]
    async fn full_queue_drops_info_but_counts_it() {
        let (tx, _rx) = mpsc::channel(1);
        let m = Arc::new(Metrics::default());
        let p = PipelineBuilder::new(0, "h", m.clone())
            .sink(SinkTx::new("slow", tx))
            .notice_wait(Duration::from_millis(5))
            .build();
        let mut warn = draft("error.raised", "s");
        warn.severity = Some(Severity::Error);
        p.submit_drafts("hook", "a", vec![draft("run.started", "s"), draft("run.started", "s"), warn]).await.unwrap();
        assert_eq!(m.dropped.get(&[("sink", "slow"), ("severity", "info")]), 1);
        assert_eq!(m.dropped.get(&[("sink", "slow"), ("severity", "error")]), 1);
    }

    /// Consecutive lines of one file that are back to back in the buffer come out as one
    /// run; a change of file or a gap starts a new one, and every line is in exactly one.
    #[test]
    fn runs_merge_adjacent_lines_of_one_file() {
        let key = |s: &str| Arc::new(LogKey { agent: "a".into(), session: Some(s.into()) });
        let (a, b) = (key("a"), key("b"));
        let buf = Bytes::from((0..50u8).collect::<Vec<u8>>());
        let mut batch = LineBatch::over(buf.clone(), 5);
        for (k, start, len) in [(&a, 0, 10), (&a, 10, 10), (&b, 20, 5), (&a, 25, 5), (&a, 40, 5)] {
            batch.push_range(k, start, len, Severity::Info);
        }
        let runs: Vec<(String, &[u8], usize)> =
            batch.runs().map(|(k, r, n)| (k.session.clone().unwrap(), r, n)).collect();
        assert_eq!(
            runs,
            [
                ("a".to_owned(), &buf[0..20], 2),
                ("b".to_owned(), &buf[20..25], 1),
                ("a".to_owned(), &buf[25..30], 1),
                ("a".to_owned(), &buf[40..45], 1),
            ]
        );
        assert_eq!(runs.iter().map(|r| r.2).sum::<usize>(), batch.len());
        let one = LineBatch::copied([(&a, &b"x\n"[..], Severity::Info), (&a, &b"y\n"[..], Severity::Info)]);
        assert_eq!(one.runs().map(|(_, r, n)| (r.to_vec(), n)).collect::<Vec<_>>(), [(b"x\ny\n".to_vec(), 2)]);
    }

    /// A line sink gets the lines and files of a submit in one batch, not the events: the
    /// lines of one session share one key, the lines of a batch one buffer, and each line is
    /// its event's JSON.
    #[tokio::test]
    async fn a_line_sink_gets_one_batch_per_submit_with_shared_keys() {
        let (tx, mut rx) = mpsc::channel(16);
        let p =
            PipelineBuilder::new(3, "h", Arc::new(Metrics::default())).sink(SinkTx::durable_lines("jsonl", tx)).build();
        let mapped =
            |s: &str| aep_adapters::otel::MappedDraft { vendor: "codex", draft: draft("x.codex.otel.turn_ttft", s) };
        p.submit_mapped("otlp", vec![mapped("a"), mapped("b"), mapped("a")], Flush::Now).await.unwrap();
        let batch = rx.try_recv().unwrap();
        assert!(rx.try_recv().is_err(), "one queue item per submit");
        let got: Vec<_> = batch.iter().collect();
        assert_eq!(got.len(), 3);
        assert!(Arc::ptr_eq(got[0].0, got[2].0), "one key per session");
        assert_eq!(**got[1].0, LogKey { agent: "codex".into(), session: Some("b".into()) });
        for w in got.windows(2) {
            assert_eq!(w[0].1.as_ptr().wrapping_add(w[0].1.len()), w[1].1.as_ptr(), "one buffer per batch");
        }
        for ((_, line, _), (session, seq)) in got.iter().zip([("a", 0), ("b", 0), ("a", 1)]) {
            let ev: Event = serde_json::from_slice(line).unwrap();
            assert_eq!((ev.session.as_deref(), ev.seq, ev.epoch), (Some(session), Some(seq), Some(3)));
            let mut again = Vec::new();
            ev.write_json(&mut again);
            again.push(b'\n');
            assert_eq!(&line[..], &again[..]);
        }
        // Hook drafts reach the same sink with the session's key.
        let out = p.submit_drafts("hook", "codex", vec![draft("session.started", "a")]).await.unwrap();
        let hook = rx.try_recv().unwrap();
        assert!(Arc::ptr_eq(hook.iter().next().unwrap().0, got[0].0));
        // External events: their own line as is, one key per session too.
        let relayed: Vec<_> = relay_twice(&p, &mut rx, &out[0]).await;
        assert!(Arc::ptr_eq(&relayed[0].0, &relayed[1].0), "one key per external session");
        assert_eq!(relayed[0].1, out[0].line.to_vec());
    }

    /// Lines of `Flush::WithNext` submits wait for the next flushing submit, which sends
    /// them ahead of its own (so the log keeps stamping order: a hook's line after the held
    /// export's); `flush_held` sends them when no submit follows; past `MAX_HELD_LINES` a
    /// submit flushes anyway, and so past `MAX_HELD_BYTES`.
    #[tokio::test]
    async fn held_lines_go_with_the_next_flush_in_stamping_order() {
        let (tx, mut rx) = mpsc::channel(16);
        let p =
            PipelineBuilder::new(0, "h", Arc::new(Metrics::default())).sink(SinkTx::durable_lines("jsonl", tx)).build();
        let mapped = |s: &str| aep_adapters::otel::MappedDraft { vendor: "codex", draft: draft("x.codex.otel.a", s) };
        let seqs = |b: &LineBatch| -> Vec<u64> {
            b.iter().map(|(_, line, _)| serde_json::from_slice::<Event>(line).unwrap().seq.unwrap()).collect()
        };
        p.submit_mapped("otlp", vec![mapped("s"), mapped("s")], Flush::WithNext).await.unwrap();
        p.submit_mapped("otlp", vec![mapped("s")], Flush::WithNext).await.unwrap();
        assert!(rx.try_recv().is_err(), "held, not sent");
        // A hook's submit flushes: the held batches first, in order, then its own line.
        p.submit_drafts("hook", "codex", vec![draft("session.started", "s")]).await.unwrap();
        let got: Vec<Vec<u64>> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| seqs(&b)).collect();
        assert_eq!(got, [vec![0, 1], vec![2], vec![3]]);
        // Nothing held afterwards; an export that ends without a flushing submit is sent by
        // `flush_held`.
        p.flush_held().await;
        assert!(rx.try_recv().is_err());
        p.submit_mapped("otlp", vec![mapped("s")], Flush::WithNext).await.unwrap();
        p.flush_held().await;
        assert_eq!(seqs(&rx.try_recv().unwrap()), [4]);
        // Past the bound a holding submit sends everything held, itself included.
        let many = (0..MAX_HELD_LINES).map(|_| mapped("t")).collect();
        p.submit_mapped("otlp", many, Flush::WithNext).await.unwrap();
        assert!(rx.try_recv().is_err(), "exactly the bound is still held");
        p.submit_mapped("otlp", vec![mapped("t")], Flush::WithNext).await.unwrap();
        let sent: usize = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| b.len()).sum();
        assert_eq!(sent, MAX_HELD_LINES + 1);
        // Large lines reach the byte bound first: two of more than half of it are sent together.
        let big = || {
            let mut d = draft("x.codex.otel.a", "u");
            d.data.insert("text".into(), "x".repeat(MAX_HELD_BYTES / 2 + 1).into());
            aep_adapters::otel::MappedDraft { vendor: "codex", draft: d }
        };
        p.submit_mapped("otlp", vec![big()], Flush::WithNext).await.unwrap();
        assert!(rx.try_recv().is_err(), "one large line is held");
        p.submit_mapped("otlp", vec![big()], Flush::WithNext).await.unwrap();
        let sent: Vec<usize> = std::iter::from_fn(|| rx.try_recv().ok()).map(|b| b.bytes()).collect();
        assert_eq!(sent.len(), 2, "both sent once past the byte bound");
        assert!(sent.iter().sum::<usize>() > MAX_HELD_BYTES);
    }

    /// Relays `s` twice as an external event; returns what the line sink got each time.
    async fn relay_twice(
        p: &Pipeline,
        rx: &mut mpsc::Receiver<LineBatch>,
        s: &Arc<Stamped>,
    ) -> Vec<(Arc<LogKey>, Vec<u8>)> {
        let mut got = Vec::new();
        for _ in 0..2 {
            p.submit_stamped("collector", Arc::new(Stamped::with_line(s.event.clone(), s.line.clone()))).await.unwrap();
            let b = rx.try_recv().unwrap();
            let (k, line, _) = b.iter().next().unwrap();
            got.push((Arc::clone(k), line.to_vec()));
        }
        got
    }

    /// A line sink that has stopped: every line of a batch it did not take is counted as
    /// dropped, by its own severity.
    #[tokio::test]
    async fn a_line_batch_not_taken_counts_each_line() {
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let m = Arc::new(Metrics::default());
        let p = PipelineBuilder::new(0, "h", m.clone()).sink(SinkTx::durable_lines("jsonl", tx)).build();
        let mapped = |ty: &str| aep_adapters::otel::MappedDraft { vendor: "codex", draft: draft(ty, "s") };
        let mut warn = draft("x.codex.otel.b", "s");
        warn.severity = Some(Severity::Warning);
        let batch = vec![mapped("x.codex.otel.c"), aep_adapters::otel::MappedDraft { vendor: "codex", draft: warn }];
        p.submit_mapped("otlp", batch, Flush::Now).await.unwrap();
        assert_eq!(m.dropped.get(&[("sink", "jsonl"), ("severity", "info")]), 1);
        assert_eq!(m.dropped.get(&[("sink", "jsonl"), ("severity", "warning")]), 1);
    }
}
